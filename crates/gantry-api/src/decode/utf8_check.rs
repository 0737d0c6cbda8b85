//! UTF-8 checked as the bytes stream in, so that a file with a stray Latin-1 byte is
//! refused with the byte's offset rather than as the parser's bare `IO error`.

/// Where the check stands between reads: the start of a character the last read cut.
#[derive(Debug, Default)]
pub(super) struct Utf8Check {
    pending: [u8; 4],
    pending_len: usize,
    /// The offset of `pending[0]` in the source.
    pending_at: u64,
}

/// The bytes a character takes, from its first byte (one that may start a longer one).
fn width(first: u8) -> usize {
    match first {
        0xF0.. => 4,
        0xE0.. => 3,
        _ => 2,
    }
}

impl Utf8Check {
    /// Checks the next `chunk`, which starts at `offset` in the source; the offset of the
    /// first byte that is not UTF-8, if any.
    pub fn check(&mut self, chunk: &[u8], offset: u64) -> Result<(), u64> {
        let mut rest = chunk;
        let mut at = offset;
        if self.pending_len > 0 {
            let width = width(self.pending[0]);
            let take = (width - self.pending_len).min(rest.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&rest[..take]);
            self.pending_len += take;
            rest = &rest[take..];
            at += take as u64;
            match std::str::from_utf8(&self.pending[..self.pending_len]) {
                Ok(_) => self.pending_len = 0,
                Err(e) if e.error_len().is_some() => return Err(self.pending_at),
                Err(_) => return Ok(()), // still cut: `rest` is empty
            }
        }
        match std::str::from_utf8(rest) {
            Ok(_) => Ok(()),
            Err(e) => {
                let valid = e.valid_up_to();
                if e.error_len().is_some() {
                    return Err(at + valid as u64);
                }
                let tail = &rest[valid..];
                self.pending[..tail.len()].copy_from_slice(tail);
                self.pending_len = tail.len();
                self.pending_at = at + valid as u64;
                Ok(())
            }
        }
    }

    /// At the end of the source: a character cut by the end is not UTF-8 either.
    pub fn finish(&self) -> Result<(), u64> {
        match self.pending_len {
            0 => Ok(()),
            _ => Err(self.pending_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict on `text` read in pieces of `size` bytes.
    fn verdict(text: &[u8], size: usize) -> Result<(), u64> {
        let mut check = Utf8Check::default();
        for (i, chunk) in text.chunks(size).enumerate() {
            check.check(chunk, (i * size) as u64)?;
        }
        check.finish()
    }

    #[test]
    fn agrees_with_std_whatever_the_cuts() {
        let cases: [&[u8]; 7] = [
            "aé€😀b".as_bytes(),
            b"ab\xffcd",
            b"a\xe2\x82",
            b"a\xe2\x82z",
            b"\xf0\x9f\x98\x80\xf0\x9f",
            b"x\xc0\xafy",
            b"\xed\xa0\x80",
        ];
        for text in cases {
            let want = std::str::from_utf8(text)
                .map(|_| ())
                .map_err(|e| e.valid_up_to() as u64);
            for size in 1..=text.len() {
                assert_eq!(verdict(text, size), want, "{text:?} in pieces of {size}");
            }
        }
    }
}
