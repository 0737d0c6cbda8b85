//! JSON documents cut into values without parsing them: a list's `items` become one
//! piece of text each, parsed and converted in parallel batches, and the rest of the
//! document (`kind`, `metadata`) is parsed on its own. Only strings, escapes and nesting
//! are followed, so the cut costs a scan of the bytes.

use std::io::{self, BufRead};

/// Why the text is not JSON, at which byte of the source.
pub(super) struct Malformed(pub String);

/// Skips whitespace (and a UTF-8 byte order mark); the next byte, not consumed.
pub(super) fn peek(input: &mut impl BufRead) -> io::Result<Option<u8>> {
    loop {
        let buffer = input.fill_buf()?;
        if buffer.starts_with(b"\xef\xbb\xbf") {
            input.consume(3);
            continue;
        }
        match buffer.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => {
                let byte = buffer[i];
                input.consume(i);
                return Ok(Some(byte));
            }
            None if buffer.is_empty() => return Ok(None),
            None => {
                let n = buffer.len();
                input.consume(n);
            }
        }
    }
}

/// Skips a YAML document marker line (`---`) between JSON documents: `kubectl` reads a
/// stream of JSON objects separated as YAML documents are, so Gantry does too.
///
/// The marker is taken byte by byte, as it may straddle the reader's buffer (a 100 MB
/// stream has one in every few thousand documents that does). Dashes that turn out not to
/// be a marker are consumed and returned, for the caller to report.
pub(super) fn skip_document_marker(input: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    while peek(input)? == Some(b'-') {
        let mut dashes = Vec::new();
        while dashes.len() < 3 && input.fill_buf()?.first() == Some(&b'-') {
            dashes.push(b'-');
            input.consume(1);
        }
        let next = input.fill_buf()?.first().copied();
        if dashes.len() < 3 || next.is_some_and(|b| !b.is_ascii_whitespace()) {
            return Ok(Some(dashes));
        }
        let mut line = Vec::new();
        input.read_until(b'\n', &mut line)?;
    }
    Ok(None)
}

/// Consumes `expected` (after whitespace), or says what came instead.
pub(super) fn expect(input: &mut impl BufRead, expected: u8) -> io::Result<Result<(), Malformed>> {
    match peek(input)? {
        Some(b) if b == expected => {
            input.consume(1);
            Ok(Ok(()))
        }
        other => Ok(Err(Malformed(format!(
            "expected {:?}, found {}",
            expected as char,
            other.map_or("the end".to_string(), |b| format!("{:?}", b as char))
        )))),
    }
}

/// Appends the next JSON value's text (after whitespace) to `out`: an object or array
/// through its closing bracket, a string through its closing quote, anything else up to
/// the next delimiter. Says whether there was one.
pub(super) fn read_value(input: &mut impl BufRead, out: &mut Vec<u8>) -> io::Result<bool> {
    let Some(first) = peek(input)? else {
        return Ok(false);
    };
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let scalar = !matches!(first, b'{' | b'[' | b'"');
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            return Ok(true);
        }
        let mut end = None;
        for (i, &b) in buffer.iter().enumerate() {
            if in_string {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                    if depth == 0 {
                        end = Some(i + 1);
                        break;
                    }
                }
                continue;
            }
            match b {
                b'"' if !scalar => in_string = true,
                b'{' | b'[' if !scalar => depth += 1,
                b'}' | b']' if !scalar => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = Some(i + 1);
                        break;
                    }
                }
                b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n' if scalar => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let n = end.unwrap_or(buffer.len());
        out.extend_from_slice(&buffer[..n]);
        input.consume(n);
        if end.is_some() {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<String> {
        let mut input = text.as_bytes();
        let mut out = Vec::new();
        loop {
            let mut value = Vec::new();
            if !read_value(&mut input, &mut value).unwrap() {
                return out;
            }
            out.push(String::from_utf8(value).unwrap());
            let _ = expect(&mut input, b',').unwrap();
        }
    }

    #[test]
    fn skips_document_markers_only() {
        let mut input: &[u8] = b"\n--- \n---\n{}";
        assert_eq!(skip_document_marker(&mut input).unwrap(), None);
        assert_eq!(input, b"{}");
        let mut input: &[u8] = b"-1";
        assert_eq!(
            skip_document_marker(&mut input).unwrap(),
            Some(b"-".to_vec())
        );
        let mut input: &[u8] = b"----\n{}";
        assert_eq!(
            skip_document_marker(&mut input).unwrap(),
            Some(b"---".to_vec())
        );
    }

    /// A marker cut by the reader's buffer (here one byte long) is still a marker: a
    /// 100 MB stream of JSON documents was refused at its 16,961st.
    #[test]
    fn a_marker_across_the_buffer_is_skipped() {
        let text: &[u8] = b"\n---\n{}";
        let mut input = std::io::BufReader::with_capacity(1, text);
        assert_eq!(skip_document_marker(&mut input).unwrap(), None);
        assert_eq!(input.fill_buf().unwrap(), b"{");
    }

    #[test]
    fn cuts_values_following_strings_and_nesting() {
        assert_eq!(
            values(r#" {"a": "}{\"", "b": [1, {"c": "]"}]} , [1,[2]], "x\\", 12.5e3 , true"#),
            [
                r#"{"a": "}{\"", "b": [1, {"c": "]"}]}"#,
                "[1,[2]]",
                r#""x\\""#,
                "12.5e3",
                "true"
            ]
        );
    }
}
