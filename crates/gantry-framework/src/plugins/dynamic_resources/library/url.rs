//! URLs (library.URLs over Go's net/url).

use super::*;

/// A URL as Go's `url.ParseRequestURI` accepts it (an absolute URI or an absolute path),
/// with the parts `url.Parse` gives the accessors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub(super) scheme: String,
    /// `host[:port]`, as written (IPv6 literals in brackets).
    pub(super) authority_host: String,
    /// The path, still escaped.
    pub(super) path: String,
    /// What follows `?`, without it.
    pub(super) query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

impl Url {
    /// Go's `url.ParseRequestURI` (the checks that matter), then `url.Parse`'s split of
    /// the fragment; errors read as Go's.
    pub fn parse(raw: &str) -> Result<Url, String> {
        let quoted = format!("parse {raw:?}");
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err(format!(
                "{quoted}: net/url: invalid control character in URL"
            ));
        }
        if raw.is_empty() {
            return Err(format!("{quoted}: empty url"));
        }
        if raw == "*" {
            return Ok(Url {
                scheme: String::new(),
                authority_host: String::new(),
                path: "*".into(),
                query: String::new(),
            });
        }
        // The scheme: a letter, then letters, digits, '+', '-', '.', up to ':'.
        let (scheme, rest) =
            match raw.find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c))) {
                Some(i) if raw.as_bytes()[i] == b':' => {
                    if i == 0 {
                        return Err(format!("{quoted}: missing protocol scheme"));
                    }
                    if !raw.as_bytes()[0].is_ascii_alphabetic() {
                        // Not a scheme: the whole is a path (and must start with '/').
                        ("", raw)
                    } else {
                        (&raw[..i], &raw[i + 1..])
                    }
                }
                _ => ("", raw),
            };
        let scheme = scheme.to_ascii_lowercase();
        // ParseRequestURI keeps a '#' in the path; Parse (whose parts the accessors
        // read) cuts the fragment first.
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, query.to_string()),
            None => (rest, String::new()),
        };
        if !rest.starts_with('/') {
            if !scheme.is_empty() {
                // An opaque URI ("mailto:x"): accepted as it is.
                return Ok(Url {
                    scheme,
                    authority_host: String::new(),
                    path: String::new(),
                    query,
                });
            }
            return Err(format!("{quoted}: invalid URI for request"));
        }
        let (authority, path) = if !scheme.is_empty() && rest.starts_with("//") {
            let after = &rest[2..];
            match after.find('/') {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, ""),
            }
        } else {
            ("", rest)
        };
        let host = match authority.rfind('@') {
            Some(i) => &authority[i + 1..],
            None => authority,
        };
        check_host(host).map_err(|e| format!("{quoted}: {e}"))?;
        check_escapes(path).map_err(|e| format!("{quoted}: {e}"))?;
        let path = path.split('#').next().unwrap_or_default().to_string();
        let query = query.split('#').next().unwrap_or_default().to_string();
        Ok(Url {
            scheme,
            authority_host: host.to_string(),
            path,
            query,
        })
    }

    pub(super) fn scheme(&self) -> String {
        self.scheme.clone()
    }

    pub(super) fn host(&self) -> String {
        self.authority_host.clone()
    }

    /// Go's `Hostname`: the host without the port, an IPv6 literal without brackets.
    pub(super) fn hostname(&self) -> String {
        let host = &self.authority_host;
        if let Some(rest) = host.strip_prefix('[') {
            return rest.split(']').next().unwrap_or_default().to_string();
        }
        host.split(':').next().unwrap_or_default().to_string()
    }

    /// Go's `Port`: the digits after the host's last ':', if any.
    pub(super) fn port(&self) -> String {
        let host = &self.authority_host;
        let after = match host.rfind(']') {
            Some(i) => &host[i + 1..],
            None => host.as_str(),
        };
        match after.rfind(':') {
            Some(i) => after[i + 1..].to_string(),
            None => String::new(),
        }
    }

    /// Go's `EscapedPath`: the path as written when it is validly escaped, else the
    /// unescaped path escaped again.
    pub(super) fn escaped_path(&self) -> String {
        let keep = |c: u8| c.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&c);
        let valid = self
            .path
            .bytes()
            .all(|c| keep(c) || b"!'()*[]%".contains(&c));
        if valid {
            return self.path.clone();
        }
        let mut out = String::with_capacity(self.path.len());
        for b in unescape(&self.path, false).bytes() {
            if keep(b) {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    /// Go's `Query`: the query's `key=value` pairs, unescaped, values listed by key.
    pub(super) fn query(&self) -> Value {
        let mut map: std::collections::HashMap<Key, Vec<Value>> = Default::default();
        for pair in self.query.split(['&']) {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(k), Ok(v)) = (unescape_query(k), unescape_query(v)) else {
                continue;
            };
            map.entry(Key::String(Arc::new(k)))
                .or_default()
                .push(Value::from(v));
        }
        Value::Map(Map::from(
            map.into_iter()
                .map(|(k, v)| (k, Value::List(Arc::new(v))))
                .collect::<std::collections::HashMap<Key, Value>>(),
        ))
    }
}

/// Go's host checks: a bracketed IPv6 literal, a port of digits, no characters a host
/// may not hold.
pub(super) fn check_host(host: &str) -> Result<(), String> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err("missing ']' in host".into());
        };
        (&rest[..end], &rest[end + 1..])
    } else {
        match host.rfind(':') {
            Some(i) => (&host[..i], &host[i..]),
            None => (host, ""),
        }
    };
    let valid_port =
        port.is_empty() || port.starts_with(':') && port[1..].bytes().all(|b| b.is_ascii_digit());
    if !valid_port {
        return Err(format!("invalid port {port:?} after host"));
    }
    check_escapes(name)?;
    if let Some(c) = name.chars().find(|&c| {
        !(c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"%".contains(c) || !c.is_ascii())
    }) {
        return Err(format!(
            "invalid character {:?} in host name",
            c.to_string()
        ));
    }
    Ok(())
}

/// Every '%' starts a two-digit hexadecimal escape.
pub(super) fn check_escapes(s: &str) -> Result<(), String> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let escape = bytes.get(i + 1..i + 3);
            if !escape.is_some_and(|e| e.iter().all(u8::is_ascii_hexdigit)) {
                let end = (i + 3).min(bytes.len());
                return Err(format!(
                    "invalid URL escape {:?}",
                    String::from_utf8_lossy(&bytes[i..end])
                ));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

pub(super) fn unescape_query(s: &str) -> Result<String, String> {
    check_escapes(s)?;
    Ok(unescape(s, true))
}

/// `s` with its (valid) `%XX` escapes decoded, and `+` as a space in a query.
pub(super) fn unescape(s: &str, query: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len()
                && bytes[i + 1..i + 3].iter().all(u8::is_ascii_hexdigit) =>
            {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                i += 3;
            }
            b'+' if query => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn url_of<'a>(function: &str, value: &'a Value) -> Result<&'a Url, ExecutionError> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<Url>().ok_or_else(|| no_overload(function)),
        _ => Err(no_overload(function)),
    }
}
