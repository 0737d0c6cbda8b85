//! The API server's validation rules and messages: apimachinery's `util/validation`
//! (DNS names, label keys and values, ports) and `field.Error`'s wording (`Invalid value:
//! "x": ...`, `Required value`, `Unsupported value`), so that a rejected manifest reads as
//! `kubectl apply` would print it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::{ObjectError, field_error};

/// `field.Invalid` with a string value.
pub(crate) fn invalid(value: &str, detail: &str) -> String {
    format!("Invalid value: {value:?}: {detail}")
}

/// `field.Invalid` with a number.
pub(super) fn invalid_number(value: impl std::fmt::Display, detail: &str) -> String {
    format!("Invalid value: {value}: {detail}")
}

/// `field.Required`.
pub(crate) fn required(detail: &str) -> String {
    if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    }
}

/// `field.NotSupported`: the value and the sorted list of what is.
pub(crate) fn not_supported(value: &str, supported: &[&str]) -> String {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    format!(
        "Unsupported value: {value:?}: supported values: {}",
        list.join(", ")
    )
}

/// `field.Forbidden`.
pub(crate) fn forbidden(detail: &str) -> String {
    format!("Forbidden: {detail}")
}

/// `field.Duplicate`.
pub(crate) fn duplicate(value: &str) -> String {
    format!("Duplicate value: {value:?}")
}

fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{message} (e.g. {}regex used for validation is '{format}')",
        examples.join(" or ")
    )
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

/// Labels of `[a-z0-9]([-a-z0-9]*[a-z0-9])?` joined by dots.
fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// apimachinery's `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push(max_len_error(253));
    }
    if !matches_dns1123_subdomain(value) {
        errors.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errors
}

/// apimachinery's `IsDNS1123Label`.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errors.push("must not contain dots".to_string());
        } else {
            errors.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errors
}

/// apimachinery's `IsDNS1035Label` (service names).
pub(super) fn dns1035_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len_error(63));
    }
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-');
    if !ok {
        errors.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errors
}

/// apimachinery's `IsQualifiedName` (label keys, resource names): an optional DNS
/// subdomain prefix and `/`, then a name of at most 63 characters.
pub(crate) fn qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errors.push(format!("name part {}", max_len_error(63)));
    }
    if !matches_label_name(name) {
        errors.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_MSG,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errors
}

/// apimachinery's `IsValidLabelValue`.
pub(crate) fn label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !value.is_empty() && !matches_label_name(value) {
        errors.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({LABEL_KEY_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// apimachinery's `IsValidPortName`.
pub(super) fn port_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 15 {
        errors.push(max_len_error(15));
    }
    if value.is_empty()
        || !value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errors.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !value.bytes().any(|b| b.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)".to_string());
    }
    if value.contains("--") {
        errors.push("must not contain consecutive hyphens".to_string());
    }
    if value.starts_with('-') || value.ends_with('-') {
        errors.push("must not begin or end with a hyphen".to_string());
    }
    errors
}

/// apimachinery's `IsValidPortNum`: the message when `port` is outside 1-65535.
pub(super) fn port_number(port: i32) -> Option<String> {
    (!(1..=65535).contains(&port)).then(|| "must be between 1 and 65535, inclusive".to_string())
}

/// The first message of a check as an error at `field`, with `value` as the bad value.
pub(crate) fn check(
    messages: Vec<String>,
    object: &str,
    field: &(impl std::fmt::Display + ?Sized),
    value: &str,
) -> Result<(), ObjectError> {
    match messages.into_iter().next() {
        None => Ok(()),
        Some(message) => Err(field_error(
            object,
            field.to_string(),
            invalid(value, &message),
        )),
    }
}

/// How an object's name must look, by kind (upstream's `ValidateNameFunc`s).
#[derive(Debug, Clone, Copy)]
pub(super) enum NameRule {
    /// Most kinds: pods, nodes, volumes, classes.
    Dns1123Subdomain,
    /// Namespaces.
    Dns1123Label,
    /// Services.
    Dns1035Label,
}

impl NameRule {
    fn messages(self, name: &str) -> Vec<String> {
        match self {
            NameRule::Dns1123Subdomain => dns1123_subdomain(name),
            NameRule::Dns1123Label => dns1123_label(name),
            NameRule::Dns1035Label => dns1035_label(name),
        }
    }
}

/// Upstream's `ValidateObjectMeta` for what Gantry reads: the name (required, by the
/// kind's rule), the namespace (an RFC 1123 label) and the labels.
pub(super) fn object_meta(
    meta: &meta::ObjectMeta,
    object: &str,
    rule: NameRule,
) -> Result<(), ObjectError> {
    let name = meta.name.as_deref().unwrap_or("");
    if name.is_empty() {
        return Err(field_error(
            object,
            "metadata.name",
            required("name or generateName is required"),
        ));
    }
    check(rule.messages(name), object, "metadata.name", name)?;
    if let Some(namespace) = meta.namespace.as_deref().filter(|n| !n.is_empty()) {
        check(
            dns1123_label(namespace),
            object,
            "metadata.namespace",
            namespace,
        )?;
    }
    labels(meta.labels.iter().flatten(), object, "metadata.labels")?;
    // `ValidateOwnerReferences`: one controller at most.
    let controllers: Vec<String> = meta
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.controller == Some(true))
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect();
    if let [first, second, ..] = controllers.as_slice() {
        return Err(field_error(
            object,
            "metadata.ownerReferences",
            format!(
                "Invalid value: Only one reference can have Controller set to true. Found \"true\" in references for {first} and {second}"
            ),
        ));
    }
    Ok(())
}

/// Upstream's `ValidateLabels`: every key a qualified name, every value a label value.
pub(super) fn labels<'a>(
    pairs: impl IntoIterator<Item = (&'a String, &'a String)>,
    object: &str,
    field: &str,
) -> Result<(), ObjectError> {
    for (key, value) in pairs {
        check(qualified_name(key), object, field, key)?;
        check(label_value(value), object, field, value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        // Cases from apimachinery's validation_test.go (TestIsDNS1123Label/Subdomain).
        for good in [
            "a",
            "ab",
            "abc",
            "a1",
            "a-1",
            "a--1--2--b",
            "0",
            "01",
            "a.b.c",
            "1.2.3",
        ] {
            assert!(dns1123_subdomain(good).is_empty(), "{good}");
        }
        for bad in [
            "", "A", "ABC", "aBc", "A1", "a@b", "a,b", "a_b", "-", "a-", "-a", "a.", ".a", "a..b",
            "_a",
        ] {
            assert!(!dns1123_subdomain(bad).is_empty(), "{bad}");
        }
        assert_eq!(
            dns1123_label("a.b"),
            vec!["must not contain dots".to_string()]
        );
        assert!(!dns1123_subdomain(&"a".repeat(254)).is_empty());
        assert!(dns1035_label("1abc").len() == 1 && dns1035_label("abc-1").is_empty());
    }

    #[test]
    fn label_keys_and_values() {
        // From TestIsQualifiedName and TestIsValidLabelValue.
        for good in [
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "1234",
            "simple/simple",
            "now-with-dashes/simple",
            "1.2.3.4/3-4",
            "example.com/Uppercase_And.dots",
        ] {
            assert!(qualified_name(good).is_empty(), "{good}");
        }
        for bad in [
            "nospecialchars%^=@",
            "cantendwithadash-",
            "-cantstartwithadash-",
            "only/one/slash",
            "Example.com/abc",
            "example_com/abc",
            "example.com/",
            "/simple",
            &"a".repeat(64),
        ] {
            assert!(!qualified_name(bad).is_empty(), "{bad}");
        }
        for good in [
            "",
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "end-with-num-1",
            "1234",
            &"a".repeat(63),
        ] {
            assert!(label_value(good).is_empty(), "{good}");
        }
        for bad in [
            "nospecialchars%^=@",
            "Tama-nui-te-rā.is_it_used?",
            "-leading-dash",
            "trailing-dash-",
            &"a".repeat(64),
        ] {
            assert!(!label_value(bad).is_empty(), "{bad}");
        }
        // Upstream's RegexError puts two spaces before each "or".
        assert_eq!(
            label_value("-x")[0],
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
    }

    #[test]
    fn port_names_and_numbers() {
        for good in [
            "telnet",
            "re-mail-ck",
            "pop3",
            "a",
            "a-1",
            "1-a",
            "a-1-b-2-c-3",
        ] {
            assert!(port_name(good).is_empty(), "{good}");
        }
        for bad in [
            "longerthan15characters",
            "",
            "12345",
            "1-2",
            "a--b",
            "-a",
            "a-",
            "a_b",
            "A",
        ] {
            assert!(!port_name(bad).is_empty(), "{bad}");
        }
        assert_eq!(
            port_number(0).as_deref(),
            Some("must be between 1 and 65535, inclusive")
        );
        assert_eq!(port_number(65535), None);
        assert!(port_number(65536).is_some());
    }
}
