//! Semantic versions in device selectors, as Kubernetes' CEL semver library
//! (`k8s.io/apiserver/pkg/cel/library/semverlib.go`, over `blang/semver/v4`) provides
//! them: `semver("1.2.3")`, `semver("v1.2", true)` (normalised), `isSemver(...)`,
//! `.major()`, `.minor()`, `.patch()`, `.compareTo(...)`, `.isGreaterThan(...)`,
//! `.isLessThan(...)`, and `==`. Version attributes of devices are such values.

use std::cmp::Ordering;

use cel::objects::Opaque;

/// A version: build metadata is dropped (blang's comparison and equality ignore it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<PreRelease>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PreRelease {
    Numeric(u64),
    Alphanumeric(String),
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

impl Semver {
    pub fn major(&self) -> u64 {
        self.major
    }

    pub fn minor(&self) -> u64 {
        self.minor
    }

    pub fn patch(&self) -> u64 {
        self.patch
    }

    /// blang's `Parse`: `MAJOR.MINOR.PATCH[-PRE][+BUILD]`, no leading zeros in numbers.
    pub fn parse(text: &str) -> Result<Semver, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("Version string empty".into());
        }
        let (core, build) = match text.split_once('+') {
            Some((core, build)) => (core, Some(build)),
            None => (text, None),
        };
        if let Some(build) = build
            && (build.is_empty() || build.split('.').any(|id| !is_identifier(id)))
        {
            return Err(format!("Invalid build metadata in {text:?}"));
        }
        let (numbers, pre) = match core.split_once('-') {
            Some((numbers, pre)) => (numbers, Some(pre)),
            None => (core, None),
        };
        let parts: Vec<&str> = numbers.split('.').collect();
        if parts.len() != 3 {
            return Err("No Major.Minor.Patch elements found".into());
        }
        let number = |part: &str, what: &str| -> Result<u64, String> {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "Invalid character(s) found in {what} number {part:?}"
                ));
            }
            if part.len() > 1 && part.starts_with('0') {
                return Err(format!(
                    "{what} number must not contain leading zeroes {part:?}"
                ));
            }
            part.parse::<u64>().map_err(|e| e.to_string())
        };
        let mut pre_ids = Vec::new();
        if let Some(pre) = pre {
            for id in pre.split('.') {
                if !is_identifier(id) {
                    return Err(format!("Invalid character(s) found in prerelease {id:?}"));
                }
                if id.bytes().all(|b| b.is_ascii_digit()) {
                    if id.len() > 1 && id.starts_with('0') {
                        return Err(format!(
                            "Version prerelease must not contain leading zeroes {id:?}"
                        ));
                    }
                    pre_ids.push(PreRelease::Numeric(id.parse().map_err(|_| {
                        format!("Invalid character(s) found in prerelease {id:?}")
                    })?));
                } else {
                    pre_ids.push(PreRelease::Alphanumeric(id.to_string()));
                }
            }
        }
        Ok(Semver {
            major: number(parts[0], "Major")?,
            minor: number(parts[1], "Minor")?,
            patch: number(parts[2], "Patch")?,
            pre: pre_ids,
        })
    }

    /// The library's `semver(s, true)`: a leading `v` dropped, missing minor and patch
    /// added as 0, leading zeros of the three numbers removed, then parsed.
    pub fn parse_normalized(text: &str) -> Result<Semver, String> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let split_at = text.find(['-', '+']).unwrap_or(text.len());
        let (numbers, rest) = text.split_at(split_at);
        let mut parts: Vec<String> = numbers
            .split('.')
            .map(|p| {
                let trimmed = p.trim_start_matches('0');
                if trimmed.is_empty() && !p.is_empty() {
                    "0".to_string()
                } else {
                    trimmed.to_string()
                }
            })
            .collect();
        while parts.len() < 3 {
            parts.push("0".to_string());
        }
        Semver::parse(&format!("{}{rest}", parts.join(".")))
    }
}

fn is_identifier(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Semver) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Semver {
    /// blang's `Compare`: the numbers, then a version without pre-release above one
    /// with; pre-release identifiers pairwise (numbers below words, numbers by value,
    /// words by bytes), the shorter list below when one is a prefix of the other.
    fn cmp(&self, other: &Semver) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let order = match (a, b) {
                            (PreRelease::Numeric(a), PreRelease::Numeric(b)) => a.cmp(b),
                            (PreRelease::Numeric(_), PreRelease::Alphanumeric(_)) => Ordering::Less,
                            (PreRelease::Alphanumeric(_), PreRelease::Numeric(_)) => {
                                Ordering::Greater
                            }
                            (PreRelease::Alphanumeric(a), PreRelease::Alphanumeric(b)) => a.cmp(b),
                        };
                        if order != Ordering::Equal {
                            return order;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Semver {
        Semver::parse(s).unwrap()
    }

    /// The precedence example of semver.org §11, which blang's tests carry.
    #[test]
    fn precedence_follows_the_specification() {
        let ordered = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.1",
            "1.1.0",
            "2.0.0",
        ];
        for pair in ordered.windows(2) {
            assert_eq!(v(pair[0]).cmp(&v(pair[1])), Ordering::Less, "{pair:?}");
        }
        assert_eq!(v("1.0.0+build.1"), v("1.0.0"), "build metadata is ignored");
    }

    /// Rows from semverlib's tests (`library/semver_test.go`).
    #[test]
    fn parsing_is_strict_unless_normalised() {
        for bad in [
            "1.0",
            "v1.0.0",
            "01.0.0",
            "1.0.0-01",
            "1.0.0+",
            "",
            "1.0.0-a..b",
            "a.b.c",
        ] {
            assert!(Semver::parse(bad).is_err(), "{bad:?} parsed");
        }
        assert_eq!(Semver::parse_normalized("v1.0").unwrap(), v("1.0.0"));
        assert_eq!(Semver::parse_normalized("01.02.03").unwrap(), v("1.2.3"));
        assert_eq!(Semver::parse_normalized("1").unwrap(), v("1.0.0"));
        let x = v("1.2.3-rc.1+b");
        assert_eq!((x.major(), x.minor(), x.patch()), (1, 2, 3));
    }
}
