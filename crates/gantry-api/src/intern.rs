//! Process-wide string interning.
//!
//! Label keys and values, namespaces, node names and resource names repeat across
//! thousands of objects; interning turns them into 4-byte symbols that compare and hash
//! as integers on the scheduling hot path.

use std::fmt;
use std::sync::LazyLock;

use foldhash::fast::RandomState;
use lasso::{Spur, ThreadedRodeo};

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
        // The interner lives in a static, so its strings live for the whole process.
        INTERNER.resolve(&self.0)
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
}
