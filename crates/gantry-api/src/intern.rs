//! Process-wide string interning.
//!
//! Label keys and values, namespaces, node names and resource names repeat across
//! thousands of objects; interning turns them into 4-byte symbols that compare and hash
//! as integers on the scheduling hot path.

use std::fmt;
use std::sync::{LazyLock, OnceLock};

use foldhash::fast::RandomState;
use lasso::{Key, Spur, ThreadedRodeo};

/// Hashed with foldhash (seeded per process), not SipHash: `as_str` looks the symbol up in
/// the interner's map, and SipHash made that lookup the costliest part of sorting a node's
/// ResourceSlices by driver and pool (a fifth of `bench dra --nodes`' instructions).
static INTERNER: LazyLock<ThreadedRodeo<Spur, RandomState>> =
    LazyLock::new(|| ThreadedRodeo::with_hasher(RandomState::default()));

/// An interned string. Equality and hashing are integer operations; ordering is by
/// intern order (stable within a process, not alphabetical: sort by `as_str` for output).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(Spur);

impl Sym {
    /// Interns `s`, returning the existing symbol if it was seen before.
    pub fn new(s: &str) -> Sym {
        Sym(INTERNER.get_or_intern(s))
    }

    /// Looks `s` up without interning it: `None` means no object ever used this string.
    pub fn get(s: &str) -> Option<Sym> {
        INTERNER.get(s).map(Sym)
    }

    pub fn as_str(self) -> &'static str {
        let index = self.0.into_usize();
        if let Some(known) = RESOLVED.get(index) {
            return known;
        }
        // The interner lives in a static, so its strings live for the whole process.
        let string: &'static str = INTERNER.resolve(&self.0);
        RESOLVED.set(index, string);
        string
    }
}

/// Symbols' strings by index, read without a lock. lasso's `resolve` is a lookup in a
/// sharded map (a hash and a shard's read lock); sorting a node's ResourceSlices by
/// driver and pool for every node a pod is tried on made it a twentieth of `bench dra
/// --nodes`' instructions. Symbols are numbered in order from 0, so a symbol's slot is
/// found by arithmetic; a slot left empty (its symbol not yet asked for here) falls back
/// on the interner.
static RESOLVED: ResolvedStrings = ResolvedStrings::new();

/// Slots in the first chunk; each further chunk is twice the size of the one before.
const FIRST_CHUNK: usize = 1024;

/// Chunks enough for every index a 32-bit key can have.
const CHUNKS: usize = 23;

struct ResolvedStrings {
    chunks: [OnceLock<Box<[OnceLock<&'static str>]>>; CHUNKS],
}

impl ResolvedStrings {
    const fn new() -> ResolvedStrings {
        ResolvedStrings {
            chunks: [const { OnceLock::new() }; CHUNKS],
        }
    }

    /// The chunk holding `index`, and the index's place in it: chunk `k` holds indexes
    /// `FIRST_CHUNK * (2^k - 1)` up to, not including, `FIRST_CHUNK * (2^(k+1) - 1)`.
    fn place(index: usize) -> (usize, usize) {
        let chunk = (index / FIRST_CHUNK + 1).ilog2() as usize;
        (chunk, index - FIRST_CHUNK * ((1 << chunk) - 1))
    }

    fn get(&self, index: usize) -> Option<&'static str> {
        let (chunk, offset) = Self::place(index);
        self.chunks.get(chunk)?.get()?[offset].get().copied()
    }

    fn set(&self, index: usize, string: &'static str) {
        let (chunk, offset) = Self::place(index);
        let Some(chunk_slot) = self.chunks.get(chunk) else {
            return;
        };
        let slots =
            chunk_slot.get_or_init(|| (0..FIRST_CHUNK << chunk).map(|_| OnceLock::new()).collect());
        // Another thread may have set the same string first; either way the slot holds it.
        let _ = slots[offset].set(string);
    }
}

impl From<&str> for Sym {
    fn from(s: &str) -> Sym {
        Sym::new(s)
    }
}

impl fmt::Debug for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Sym {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_string_same_symbol() {
        let a = Sym::new("topology.kubernetes.io/zone");
        let b = Sym::new("topology.kubernetes.io/zone");
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "topology.kubernetes.io/zone");
        assert_ne!(a, Sym::new("kubernetes.io/hostname"));
        assert!(Sym::get("never-interned-string-7f3a").is_none());
    }

    #[test]
    fn chunks_hold_every_index_once() {
        assert_eq!(ResolvedStrings::place(0), (0, 0));
        assert_eq!(
            ResolvedStrings::place(FIRST_CHUNK - 1),
            (0, FIRST_CHUNK - 1)
        );
        assert_eq!(ResolvedStrings::place(FIRST_CHUNK), (1, 0));
        assert_eq!(
            ResolvedStrings::place(3 * FIRST_CHUNK - 1),
            (1, 2 * FIRST_CHUNK - 1)
        );
        assert_eq!(ResolvedStrings::place(3 * FIRST_CHUNK), (2, 0));
        // The largest index a 32-bit key can have still has a chunk.
        let (chunk, offset) = ResolvedStrings::place(u32::MAX as usize - 1);
        assert!(chunk < CHUNKS);
        assert!(offset < FIRST_CHUNK << chunk);
    }

    #[test]
    fn strings_resolve_the_same_twice_across_chunks() {
        // Enough symbols to reach the second chunk, each read twice: once through the
        // interner, once from its slot.
        let symbols: Vec<(Sym, String)> = (0..2 * FIRST_CHUNK)
            .map(|i| {
                let s = format!("resolve-test-{i}");
                (Sym::new(&s), s)
            })
            .collect();
        for _ in 0..2 {
            for (sym, s) in &symbols {
                assert_eq!(sym.as_str(), s);
            }
        }
    }
}
