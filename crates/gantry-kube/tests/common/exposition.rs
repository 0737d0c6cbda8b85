//! A strict reader of the Prometheus text exposition format 0.0.4, as the format's
//! description (prometheus.io, "Exposition formats") and client_golang's expfmt parser
//! define it, for checking `/metrics` whole: every line parses; `# HELP` and `# TYPE`
//! come at most once per family and before its samples; a family's lines are one group;
//! every sample belongs to a family a `# TYPE` line declared (ours declare all: a sample
//! named apart from its `# TYPE` line, as OpenMetrics names counters, has none); no
//! series twice; counters are not negative; a histogram's buckets carry `le`, grow with
//! it, end with `+Inf`, and `+Inf` equals `_count`.

use std::collections::{BTreeMap, HashMap, HashSet};

const TYPES: [&str; 5] = ["counter", "gauge", "histogram", "summary", "untyped"];

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(name: &str) -> bool {
    valid_name(name) && !name.contains(':')
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// `name{a="x",b="y"} value [timestamp]`.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or("a sample needs a value after its name")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err(format!("invalid metric name {name:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        let end = loop {
            // A label name, `=`, a quoted value, then `,` or `}`.
            while chars.peek().is_some_and(|(_, c)| *c == ' ') {
                chars.next();
            }
            if let Some(&(i, '}')) = chars.peek() {
                break i;
            }
            let start = chars.peek().map(|(i, _)| *i).ok_or("unterminated labels")?;
            let mut eq = None;
            for (i, c) in chars.by_ref() {
                if c == '=' {
                    eq = Some(i);
                    break;
                }
            }
            let eq = eq.ok_or("a label needs `=`")?;
            let label = inner[start..eq].trim();
            if !valid_label_name(label) {
                return Err(format!("invalid label name {label:?}"));
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err(format!("label {label}'s value is not quoted"));
            }
            let mut value = String::new();
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                match c {
                    '\\' => match chars.next().map(|(_, c)| c) {
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('n') => value.push('\n'),
                        other => {
                            return Err(format!("invalid escape \\{other:?} in label {label}"));
                        }
                    },
                    '"' => {
                        closed = true;
                        break;
                    }
                    '\n' => return Err("a newline inside a label value".into()),
                    c => value.push(c),
                }
            }
            if !closed {
                return Err(format!("label {label}'s value is not closed"));
            }
            if labels.iter().any(|(l, _)| l == label) {
                return Err(format!("label {label} twice"));
            }
            labels.push((label.to_string(), value));
            match chars.next() {
                Some((_, ',')) => continue,
                Some((i, '}')) => break i,
                other => return Err(format!("expected `,` or `}}` after a label, got {other:?}")),
            }
        };
        rest = &inner[end + 1..];
    }
    let mut fields = rest.split(' ').filter(|f| !f.is_empty());
    let value = fields.next().ok_or("a sample needs a value")?;
    let value = parse_value(value).ok_or_else(|| format!("invalid value {value:?}"))?;
    if let Some(timestamp) = fields.next() {
        timestamp
            .parse::<i64>()
            .map_err(|_| format!("invalid timestamp {timestamp:?}"))?;
    }
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected {extra:?} after the value"));
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// The family a sample belongs to, given the declared types.
fn family_of<'a>(name: &'a str, types: &HashMap<String, String>) -> &'a str {
    for (suffix, kinds) in [
        ("_bucket", &["histogram"][..]),
        ("_sum", &["histogram", "summary"][..]),
        ("_count", &["histogram", "summary"][..]),
    ] {
        if let Some(base) = name.strip_suffix(suffix)
            && types.get(base).is_some_and(|t| kinds.contains(&t.as_str()))
        {
            return base;
        }
    }
    name
}

/// Every problem found, one line each (empty: the text is valid).
pub fn check(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if !text.is_empty() && !text.ends_with('\n') {
        problems.push("the last line does not end with a newline".into());
    }
    let mut types: HashMap<String, String> = HashMap::new();
    let mut helps: HashSet<String> = HashSet::new();
    let mut with_samples: HashSet<String> = HashSet::new();
    let mut finished: HashSet<String> = HashSet::new();
    let mut current: Option<String> = None;
    let mut series: HashSet<String> = HashSet::new();
    // histogram series (name without le) -> [(le, count)], and its _count.
    let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut counts: HashMap<String, f64> = HashMap::new();
    let mut enter = |family: &str, problems: &mut Vec<String>, n: usize| {
        if current.as_deref() != Some(family) {
            if let Some(previous) = current.take() {
                finished.insert(previous);
            }
            if finished.contains(family) {
                problems.push(format!(
                    "line {n}: family {family} continues after other families (its lines must be one group)"
                ));
            }
            current = Some(family.to_string());
        }
    };
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.trim_start().splitn(3, ' ');
            let keyword = words.next().unwrap_or("");
            if keyword != "HELP" && keyword != "TYPE" {
                continue;
            }
            let Some(name) = words.next().filter(|n| valid_name(n)) else {
                problems.push(format!("line {n}: # {keyword} without a valid metric name"));
                continue;
            };
            enter(name, &mut problems, n);
            if keyword == "HELP" {
                if !helps.insert(name.to_string()) {
                    problems.push(format!("line {n}: a second # HELP for {name}"));
                }
                continue;
            }
            let kind = words.next().unwrap_or("").trim();
            if !TYPES.contains(&kind) {
                problems.push(format!("line {n}: unknown type {kind:?} for {name}"));
            }
            if types.insert(name.to_string(), kind.to_string()).is_some() {
                problems.push(format!("line {n}: a second # TYPE for {name}"));
            }
            if with_samples.contains(name) {
                problems.push(format!("line {n}: # TYPE for {name} after its samples"));
            }
            continue;
        }
        let sample = match parse_sample(line) {
            Ok(sample) => sample,
            Err(problem) => {
                problems.push(format!("line {n}: {problem}: {line:?}"));
                continue;
            }
        };
        let family = family_of(&sample.name, &types).to_string();
        enter(&family, &mut problems, n);
        with_samples.insert(family.clone());
        let Some(kind) = types.get(&family) else {
            let declared: Vec<&String> = types
                .keys()
                .filter(|t| sample.name.starts_with(t.as_str()))
                .collect();
            problems.push(format!(
                "line {n}: sample {} has no # TYPE line (declared nearby: {declared:?})",
                sample.name
            ));
            continue;
        };
        let mut key_labels = sample.labels.clone();
        key_labels.sort();
        let key = format!("{}{key_labels:?}", sample.name);
        if !series.insert(key) {
            problems.push(format!(
                "line {n}: series {} {key_labels:?} twice",
                sample.name
            ));
        }
        // NaN included: a counter is a number, never below zero.
        if kind == "counter" && (sample.value.is_nan() || sample.value < 0.0) {
            problems.push(format!(
                "line {n}: counter {} is {}",
                sample.name, sample.value
            ));
        }
        if kind == "histogram" {
            let others: Vec<_> = key_labels
                .iter()
                .filter(|(l, _)| l != "le")
                .cloned()
                .collect();
            let series_key = format!("{family}{others:?}");
            if sample.name.ends_with("_bucket") {
                match sample
                    .labels
                    .iter()
                    .find(|(l, _)| l == "le")
                    .map(|(_, v)| parse_value(v))
                {
                    Some(Some(le)) => buckets
                        .entry(series_key)
                        .or_default()
                        .push((le, sample.value)),
                    _ => problems.push(format!("line {n}: bucket without a valid le label")),
                }
            } else if sample.name.ends_with("_count") {
                counts.insert(series_key, sample.value);
            }
        }
    }
    for (series, list) in &buckets {
        if list.windows(2).any(|w| {
            w[0].0.partial_cmp(&w[1].0) != Some(std::cmp::Ordering::Less) || w[0].1 > w[1].1
        }) {
            problems.push(format!("{series}: buckets not increasing in le and count"));
        }
        match list.last() {
            Some((le, count)) if le.is_infinite() => {
                if counts.get(series) != Some(count) {
                    problems.push(format!("{series}: the +Inf bucket differs from _count"));
                }
            }
            _ => problems.push(format!("{series}: no +Inf bucket")),
        }
    }
    problems
}
