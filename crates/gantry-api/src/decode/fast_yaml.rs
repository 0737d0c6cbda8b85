//! A fast reader for the YAML `kubectl get -o yaml` prints, and nothing more: block
//! mappings and sequences (go-yaml's style, a sequence at its key's indentation), one-line
//! plain and quoted scalars, `|` and `|-` literals, `{}` and `[]`. Anything else (anchors,
//! tags, comments, flow collections with content, multi-line flow scalars, a plain scalar
//! another YAML schema could read as a number or a boolean) returns `None`, and the caller
//! hands the text to the general parser: this reader may decline, never differ. The
//! general parser reads about 8 MB/s, too slow for a dump of 100,000 pods; this one reads
//! such dumps many times faster.

use serde_json::{Map, Number, Value};

/// One line: its indentation, and the rest (the whole line, for literal blocks).
struct Line<'a> {
    indent: usize,
    /// After the indentation, trailing blanks and `\r` removed.
    text: &'a str,
    /// After the indentation, as written (a literal block keeps trailing blanks).
    raw: &'a str,
}

struct Reader<'a> {
    lines: Vec<Line<'a>>,
    at: usize,
}

/// Reads a block mapping (one object of a list, its `- ` removed and its lines
/// dedented), or declines.
pub(super) fn parse(text: &str) -> Option<Value> {
    let mut lines = Vec::new();
    for raw in text.split('\n') {
        let content = raw.trim_start_matches(' ');
        let indent = raw.len() - content.len();
        if content.starts_with('\t') {
            return None;
        }
        lines.push(Line {
            indent,
            text: content.trim_end_matches([' ', '\r']),
            raw: content.strip_suffix('\r').unwrap_or(content),
        });
    }
    let mut reader = Reader { lines, at: 0 };
    reader.skip_blank();
    let first = reader.lines.get(reader.at)?;
    if first.indent != 0 {
        return None;
    }
    let value = reader.node(0)?;
    reader.skip_blank();
    (reader.at == reader.lines.len()).then_some(value)
}

impl<'a> Reader<'a> {
    fn skip_blank(&mut self) {
        while self.lines.get(self.at).is_some_and(|l| l.text.is_empty()) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<&Line<'a>> {
        self.skip_blank();
        self.lines.get(self.at)
    }

    /// The node whose first line is the current one, at indentation `indent`.
    fn node(&mut self, indent: usize) -> Option<Value> {
        let line = self.peek()?;
        if line.indent != indent || line.text.starts_with('#') {
            return None;
        }
        if is_sequence_entry(line.text) {
            self.sequence(indent)
        } else {
            self.mapping(indent)
        }
    }

    fn mapping(&mut self, indent: usize) -> Option<Value> {
        let mut map = Map::new();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent || is_sequence_entry(line.text) {
                return None;
            }
            let (key, rest) = split_entry(line.text)?;
            self.at += 1;
            let value = self.entry_value(rest, indent)?;
            if map.insert(key.to_string(), value).is_some() {
                // A duplicate key: the general parser says what it thinks of it.
                return None;
            }
        }
        Some(Value::Object(map))
    }

    fn sequence(&mut self, indent: usize) -> Option<Value> {
        let mut items = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent < indent || (line.indent == indent && !is_sequence_entry(line.text)) {
                break;
            }
            if line.indent > indent {
                return None;
            }
            let rest = line.text[1..].trim_start_matches(' ');
            let item_indent = indent + (line.text.len() - rest.len());
            if rest.is_empty() {
                self.at += 1;
                items.push(self.nested(indent)?.unwrap_or(Value::Null));
            } else if is_sequence_entry(rest) || split_entry(rest).is_some() {
                // `- key: value`: a node that starts on this line, further in.
                let line = &mut self.lines[self.at];
                line.indent = item_indent;
                line.text = rest;
                line.raw = rest;
                items.push(self.node(item_indent)?);
            } else {
                self.at += 1;
                items.push(self.inline(rest, indent)?);
            }
        }
        Some(Value::Array(items))
    }

    /// A mapping entry's value: on its line (`rest`), or on the lines below.
    fn entry_value(&mut self, rest: &'a str, indent: usize) -> Option<Value> {
        if !rest.is_empty() {
            return self.inline(rest, indent);
        }
        match self.peek() {
            // go-yaml puts a mapping's sequence at the key's own indentation.
            Some(line) if line.indent == indent && is_sequence_entry(line.text) => {
                self.sequence(indent)
            }
            _ => Some(self.nested(indent)?.unwrap_or(Value::Null)),
        }
    }

    /// The node on the lines below, further in than `indent`, if there is one.
    fn nested(&mut self, indent: usize) -> Option<Option<Value>> {
        match self.peek() {
            Some(line) if line.indent > indent => {
                let inner = line.indent;
                self.node(inner).map(Some)
            }
            _ => Some(None),
        }
    }

    /// A value written on its key's (or dash's) line.
    fn inline(&mut self, text: &'a str, indent: usize) -> Option<Value> {
        let value = match text {
            "{}" => Value::Object(Map::new()),
            "[]" => Value::Array(Vec::new()),
            "|" | "|-" => return self.literal(indent, text == "|"),
            _ if text.starts_with('"') => Value::String(double_quoted(text)?),
            _ if text.starts_with('\'') => Value::String(single_quoted(text)?),
            _ => plain(text)?,
        };
        // A value that goes on below its line is a multi-line scalar: decline.
        if self.peek().is_some_and(|l| l.indent > indent) {
            return None;
        }
        Some(value)
    }

    /// A `|` (keep one final newline) or `|-` (none) literal block below `indent`.
    fn literal(&mut self, indent: usize, clip: bool) -> Option<Value> {
        let mut block_indent = None;
        let mut text = String::new();
        let mut end = self.at;
        for (i, line) in self.lines.iter().enumerate().skip(self.at) {
            if line.text.is_empty() {
                // Blank lines inside (or after) the block: newlines, whatever their blanks.
                text.push('\n');
                continue;
            }
            let block = *block_indent.get_or_insert(line.indent);
            if line.indent <= indent || line.indent < block {
                break;
            }
            if block <= indent {
                return None;
            }
            // Lines of the block keep what lies past the block's indentation.
            text.push_str(&" ".repeat(line.indent - block));
            text.push_str(line.raw);
            text.push('\n');
            end = i + 1;
        }
        // Blank lines after the block's last line belong to what follows.
        self.at = end;
        let kept = text.trim_end_matches('\n').len();
        text.truncate(kept);
        if clip && kept > 0 {
            text.push('\n');
        }
        Some(Value::String(text))
    }
}

/// `-` alone or `- ...`: a block sequence entry.
fn is_sequence_entry(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// `key: rest` or `key:`: a plain key, and what follows it (empty when nothing does).
fn split_entry(text: &str) -> Option<(&str, &str)> {
    let (key, rest) = match text.find(": ") {
        Some(i) => (&text[..i], text[i + 2..].trim_start_matches(' ')),
        None => (text.strip_suffix(':')?, ""),
    };
    let first = key.chars().next()?;
    let plain_key = !"-?:,[]{}#&*!|>'\"%@`".contains(first)
        && !key.contains(" #")
        && !key.contains(": ")
        && key != "<<"
        && !key.ends_with(' ');
    (plain_key && !rest.starts_with('#')).then_some((key, rest))
}

/// A one-line plain scalar: null, a boolean, a decimal integer or a string, as every
/// YAML schema reads it; anything one schema could read otherwise declines.
fn plain(text: &str) -> Option<Value> {
    let first = text.chars().next()?;
    if "-?:,[]{}#&*!|>'\"%@`".contains(first)
        && !(first == '-' && text.len() > 1 && !text.starts_with("- "))
    {
        return None;
    }
    if text.contains(": ") || text.contains(" #") || text.ends_with(':') {
        return None;
    }
    match text {
        "null" | "Null" | "NULL" | "~" => return Some(Value::Null),
        "true" | "True" | "TRUE" => return Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Value::Bool(false)),
        _ => {}
    }
    let lower = text.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "yes"
            | "no"
            | "y"
            | "n"
            | "on"
            | "off"
            | ".inf"
            | "-.inf"
            | "+.inf"
            | ".nan"
            | "inf"
            | "-inf"
            | "+inf"
            | "nan"
            | "infinity"
            | "-infinity"
            | "+infinity"
    ) {
        return None;
    }
    if let Some(n) = decimal_integer(text) {
        return Some(Value::Number(Number::from(n)));
    }
    if looks_numeric(text) {
        return None;
    }
    Some(Value::String(text.to_string()))
}

/// `0`, or `-?[1-9][0-9]*` within an i64.
fn decimal_integer(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let canonical = digits == "0" || (!digits.starts_with('0') && !digits.is_empty());
    (canonical && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// Could some YAML schema read this as a number (float, octal, hex, binary, sexagesimal,
/// with `_` separators)? Only digits, `.`, `_`, `:` and an exponent can make one, after a
/// `0x`/`0o`/`0b` prefix any hex digit; two dots or more (versions, addresses) cannot.
fn looks_numeric(text: &str) -> bool {
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    if ["0x", "0X", "0o", "0O", "0b", "0B"]
        .iter()
        .any(|p| body.starts_with(p))
    {
        return true;
    }
    if !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') || body.matches('.').count() > 1
    {
        return false;
    }
    let mut previous = ' ';
    for c in body.chars() {
        let allowed = c.is_ascii_digit()
            || matches!(c, '.' | '_' | ':' | 'e' | 'E')
            || (matches!(c, '+' | '-') && matches!(previous, 'e' | 'E'));
        if !allowed {
            return false;
        }
        previous = c;
    }
    true
}

/// `"..."` on one line, with JSON-like escapes; anything after the closing quote, or an
/// escape other than the common ones, declines.
fn double_quoted(text: &str) -> Option<String> {
    let body = text.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return None,
            '\\' => match chars.next()? {
                '"' => out.push('"'),
                '\\' => out.push('\\'),
                '/' => out.push('/'),
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                _ => return None,
            },
            _ => out.push(c),
        }
    }
    Some(out)
}

/// `'...'` on one line, `''` for a quote.
fn single_quoted(text: &str) -> Option<String> {
    let body = text.strip_prefix('\'')?.strip_suffix('\'')?;
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' && chars.next() != Some('\'') {
            return None;
        }
        out.push(c);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general parser's reading, for comparison.
    fn general(text: &str) -> Option<Value> {
        serde_saphyr::from_str(text).ok()
    }

    fn agrees(text: &str) {
        match parse(text) {
            Some(fast) => assert_eq!(Some(fast), general(text), "{text}"),
            None => panic!("declined:\n{text}"),
        }
    }

    #[test]
    fn reads_what_kubectl_prints_as_the_general_parser_does() {
        agrees(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n    a: \"1\"\n  labels: {}\n  name: web-1\nspec:\n  containers:\n  - image: nginx:1.25\n    name: web\n    ports:\n    - containerPort: 80\n      protocol: TCP\n    resources: {}\n  tolerations:\n  - effect: NoExecute\n    key: node.kubernetes.io/not-ready\n    tolerationSeconds: 300\nstatus:\n  phase: Running\n  podIP: 10.244.0.117\n  started: true\n  lastState: {}\n  x: null\n  list: []\n  q: 'it''s'\n  d: \"a\\\"b\\\\c\\u00e9\"\n  qty: 15890m\n  mem: 62919308Ki\n  neg: -5\n  tag: v1.28.5\n  uid: 6e3a8f2c-0000-4000-8000-000000000000\n  hash: 5f7d9c6f0\n  date: 2024-05-03\n",
        );
        agrees("a:\n  k:{\"name\":\"web\"}:\n    .: {}\n    f:image: {}\n");
        agrees("a:\n- - 1\n  - 2\n- b: c\n  d: e\n-\n  f: g\n");
        agrees("last: |\n  {\"apiVersion\":\"v1\"}\nnext: x\n");
        agrees("keep: |\n  line one\n    indented\n\n  after blank\nstrip: |-\n  text\n\nend: 1\n");
        agrees("m:\n  n:\n    o: p\n  q: r\ns: t\n");
    }

    #[test]
    fn declines_what_it_does_not_fully_understand() {
        for text in [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "# comment\na: 1\n",
            "a: 1 # comment\n",
            "a: yes\n",
            "a: 1.5\n",
            "a: 0777\n",
            "a: 0x1F\n",
            "a: 1_000\n",
            "a: 12:30\n",
            "a: .inf\n",
            "a: {b: c}\n",
            "a: [1, 2]\n",
            "a: long\n  continued\n",
            "a: 'long\n  continued'\n",
            "a: >\n  folded\n",
            "a: |+\n  kept\n",
            "a: 1\na: 2\n",
            "? complex\n: key\n",
            "a:\tb\n",
            "\ta: 1\n",
            "a: 99999999999999999999\n",
            "a: 1e-5\n",
            "a: 0b101\n",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    /// Every item of the real `kubectl get -o yaml` dumps in testdata.
    #[test]
    fn agrees_on_real_dumps() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let mut files = vec![
            format!("{root}/testdata/cilium-hostport/init.yaml"),
            format!("{root}/testdata/cilium-hostport/state2.yaml"),
            format!("{root}/crates/gantry-api/tests/fixtures/kubectl-get-nodes-pods.yaml"),
        ];
        for dir in std::fs::read_dir(format!("{root}/testdata/parity")).unwrap() {
            files.push(
                dir.unwrap()
                    .path()
                    .join("cluster.yaml")
                    .display()
                    .to_string(),
            );
        }
        let mut read = 0;
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let mut items: Vec<String> = Vec::new();
            for line in text.lines().skip_while(|l| *l != "items:").skip(1) {
                if let Some(first) = line.strip_prefix("- ") {
                    items.push(format!("{first}\n"));
                } else if let (Some(more), Some(item)) = (line.strip_prefix("  "), items.last_mut())
                {
                    item.push_str(more);
                    item.push('\n');
                } else {
                    break;
                }
            }
            for item in items {
                agrees(&item);
                read += 1;
            }
        }
        assert!(read >= 5, "{read}");
    }

    proptest::proptest! {
        /// Whatever it accepts, it reads as the general parser does.
        #[test]
        fn never_differs_from_the_general_parser(
            keys in proptest::collection::vec("[a-z][a-zA-Z0-9./:_-]{0,8}", 1..5),
            values in proptest::collection::vec("[ -~]{0,12}", 1..5),
            nest in 0usize..3,
        ) {
            let mut text = String::new();
            for (i, key) in keys.iter().enumerate() {
                let value = &values[i % values.len()];
                let pad = "  ".repeat(i % (nest + 1));
                if i > 0 && i % (nest + 1) != 0 {
                    continue;
                }
                text.push_str(&format!("{pad}{key}: {value}\n"));
            }
            if let Some(fast) = parse(&text) {
                proptest::prop_assert_eq!(Some(fast), general(&text), "{}", text);
            }
        }
    }
}
