//! Reading the bytes of one source: a size limit and a refusal of binary data (so that
//! `--cluster /dev/zero` fails at once), JSON values or YAML documents one after the
//! other, each parsed as it streams in.
//!
//! YAML documents are split at their `---` and `...` marker lines, which the YAML spec
//! forbids inside any document's content, so each document gets its own parser and its
//! own budget: a stream may hold any number of documents, while the parser's limits on
//! aliases and anchors still stop an alias bomb within its document.

use std::io::{self, BufRead, BufReader, Read};

use serde::de::DeserializeSeed;

use super::batch::{self, BATCH, BatchError, Item};
use super::document::{Checkpoint, DocumentSeed};
use super::json_values::{self, Malformed};
use super::strict_value::StrictValue;
use super::utf8_check::Utf8Check;
use super::{ClusterObjects, DecodeError, ObjectError};

/// The default limit on one source: larger than any real `kubectl get -A -o yaml` dump
/// (100,000 pods print as about 1 GiB), small enough to stop an endless stream.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 16 << 30;

/// Limits on one source.
#[derive(Debug, Clone)]
pub struct InputLimits {
    pub max_bytes: u64,
}

impl Default for InputLimits {
    fn default() -> InputLimits {
        InputLimits {
            max_bytes: DEFAULT_MAX_INPUT_BYTES,
        }
    }
}

/// Why the byte stream itself was refused.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    TooLarge,
    /// A NUL byte at this offset: no YAML or JSON text holds one.
    Binary(u64),
    /// A byte at this offset that is not part of a UTF-8 character.
    NotUtf8(u64),
}

/// The source's bytes, counted and checked as they are read.
struct Checked<R> {
    inner: R,
    read: u64,
    limit: u64,
    utf8: Utf8Check,
    refusal: Option<Refusal>,
}

impl<R> Checked<R> {
    fn new(inner: R, limit: u64) -> Checked<R> {
        Checked {
            inner,
            read: 0,
            limit,
            utf8: Utf8Check::default(),
            refusal: None,
        }
    }
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(refusal) = self.refusal {
            return Err(io::Error::other(format!("{refusal:?}")));
        }
        let n = self.inner.read(buf)?;
        let utf8 = match n {
            0 => self.utf8.finish(),
            _ => self.utf8.check(&buf[..n], self.read),
        };
        if let Some(at) = buf[..n].iter().position(|&b| b == 0) {
            self.refusal = Some(Refusal::Binary(self.read + at as u64));
        } else if self.read + n as u64 > self.limit {
            self.refusal = Some(Refusal::TooLarge);
        } else if let Err(at) = utf8 {
            self.refusal = Some(Refusal::NotUtf8(at));
        }
        self.read += n as u64;
        match self.refusal {
            Some(refusal) => Err(io::Error::other(format!("{refusal:?}"))),
            None => Ok(n),
        }
    }
}

/// The parser's limits for real dumps: no cap on the size of a document (the byte limit
/// bounds it), tight caps on aliases and the events they replay (an alias bomb's lever;
/// `kubectl` never prints an alias, hand-written manifests use a few).
pub(super) fn parser_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_reader_input_bytes = None;
    budget.max_events = usize::MAX;
    budget.max_nodes = usize::MAX;
    budget.max_total_scalar_bytes = usize::MAX;
    budget.max_documents = usize::MAX;
    budget.max_aliases = 1_000;
    budget.max_recorded_anchor_bytes = 64 << 10;
    budget.max_recorded_anchor_events = 100_000;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.with_snippet = false;
    options
}

pub(super) fn read_documents(
    objects: &mut ClusterObjects,
    reader: impl Read,
    source_name: &str,
    limits: &InputLimits,
) -> Result<(), DecodeError> {
    let mut input = BufReader::with_capacity(1 << 16, Checked::new(reader, limits.max_bytes));
    let mut source = Source {
        name: source_name,
        limits,
        failure: None,
    };
    let result = match looks_like_json(&mut input) {
        Ok(true) => read_json(objects, &mut input, &mut source),
        Ok(false) => {
            let mut lines = YamlLines {
                input: &mut input,
                pending: None,
                at_line_start: true,
            };
            read_yaml(objects, &mut lines, &mut source)
        }
        Err(e) => Err(Failure::Read(e)),
    };
    result.map_err(|failure| source.error(failure, input.get_ref().refusal))
}

/// The source being read, and the conversion error that stopped its parser.
struct Source<'a> {
    name: &'a str,
    limits: &'a InputLimits,
    failure: Option<ObjectError>,
}

/// Why reading stopped, before it is told apart from a refused byte stream.
enum Failure {
    Read(io::Error),
    Syntax(String),
}

impl Source<'_> {
    /// The parser's error: the conversion error it carries, the byte stream's refusal
    /// (which the parser sees as a read error), or its own message.
    fn error(&mut self, failure: Failure, refusal: Option<Refusal>) -> DecodeError {
        let source_name = self.name.to_string();
        if let Some(error) = self.failure.take() {
            return DecodeError::Object { source_name, error };
        }
        match refusal {
            Some(Refusal::TooLarge) => DecodeError::TooLarge {
                source_name,
                limit: self.limits.max_bytes,
            },
            Some(Refusal::Binary(offset)) => DecodeError::Syntax {
                source_name,
                message: format!(
                    "a NUL byte at offset {offset}: this is binary data, not YAML or JSON text"
                ),
            },
            Some(Refusal::NotUtf8(offset)) => DecodeError::Syntax {
                source_name,
                message: format!(
                    "the byte at offset {offset} is not UTF-8 text (YAML and JSON are UTF-8; \
                     was the file saved as Latin-1?)"
                ),
            },
            None => match failure {
                Failure::Read(e) => DecodeError::Read {
                    source_name,
                    message: e.to_string(),
                },
                Failure::Syntax(message) => DecodeError::Syntax {
                    source_name,
                    message,
                },
            },
        }
    }
}

/// JSON documents one after the other (`kubectl get -o json` prints one object), each
/// cut into its top-level members: a list's `items` are converted in parallel batches,
/// the other members parsed together.
fn read_json(
    objects: &mut ClusterObjects,
    input: &mut impl BufRead,
    source: &mut Source,
) -> Result<(), Failure> {
    let malformed = |position: &str, m: Malformed| Failure::Syntax(format!("{position}: {}", m.0));
    for index in 1.. {
        let position = format!("document {index}");
        let not_a_marker = json_values::skip_document_marker(input).map_err(Failure::Read)?;
        if not_a_marker.is_some() {
            return Err(Failure::Syntax(format!(
                "trailing characters after document {}: '-' where another JSON object would begin",
                index - 1
            )));
        }
        match json_values::peek(input).map_err(Failure::Read)? {
            None => break,
            Some(b'{') => input.consume(1),
            // After a document, anything but another object or list is left over text.
            Some(other) if index > 1 && other != b'[' => {
                return Err(Failure::Syntax(format!(
                    "trailing characters after document {}: {:?} where another JSON object would begin",
                    index - 1,
                    char::from(other)
                )));
            }
            Some(_) => {
                let mut value = Vec::new();
                json_values::read_value(input, &mut value).map_err(Failure::Read)?;
                parse_json_rest(objects, &value, &position, source, None)?;
                continue;
            }
        }
        let mut rest = b"{".to_vec();
        let mut items_taken = None;
        let mut first = true;
        loop {
            if json_values::peek(input).map_err(Failure::Read)? == Some(b'}') {
                input.consume(1);
                break;
            }
            if !first {
                json_values::expect(input, b',')
                    .map_err(Failure::Read)?
                    .map_err(|m| malformed(&position, m))?;
            }
            first = false;
            let mut key = Vec::new();
            json_values::read_value(input, &mut key).map_err(Failure::Read)?;
            json_values::expect(input, b':')
                .map_err(Failure::Read)?
                .map_err(|m| malformed(&position, m))?;
            let is_list = json_values::peek(input).map_err(Failure::Read)? == Some(b'[');
            if key == b"\"items\"" && items_taken.is_some() {
                return Err(Failure::Syntax(format!(
                    "{position}: duplicate field \"items\""
                )));
            }
            if key == b"\"items\"" && is_list && items_taken.is_none() {
                items_taken = Some(Checkpoint::of(objects));
                read_json_items(objects, input, &position, source)?;
                continue;
            }
            if rest.len() > 1 {
                rest.push(b',');
            }
            rest.extend_from_slice(&key);
            rest.push(b':');
            json_values::read_value(input, &mut rest).map_err(Failure::Read)?;
        }
        rest.push(b'}');
        parse_json_rest(objects, &rest, &position, source, items_taken)?;
    }
    Ok(())
}

/// A list's `items` array, one value at a time, converted in batches.
fn read_json_items(
    objects: &mut ClusterObjects,
    input: &mut impl BufRead,
    position: &str,
    source: &mut Source,
) -> Result<(), Failure> {
    input.consume(1); // `[`
    let mut batch = Vec::with_capacity(BATCH);
    for index in 0.. {
        match json_values::peek(input).map_err(Failure::Read)? {
            Some(b']') => {
                input.consume(1);
                break;
            }
            Some(b',') if index > 0 => input.consume(1),
            _ if index > 0 => {
                return Err(Failure::Syntax(format!(
                    "{position} items[{index}]: expected ',' or ']'"
                )));
            }
            _ => {}
        }
        let mut text = Vec::new();
        if !json_values::read_value(input, &mut text).map_err(Failure::Read)? {
            return Err(Failure::Syntax(format!(
                "{position}: items: unterminated list"
            )));
        }
        batch.push(Item {
            source: batch::Source::Json(text),
            position: format!("{position} items[{index}]"),
        });
        if batch.len() == BATCH {
            add_batch(objects, std::mem::take(&mut batch), source)?;
        }
    }
    add_batch(objects, batch, source)
}

/// A batch's error, as the reader reports it.
fn add_batch(
    objects: &mut ClusterObjects,
    batch: Vec<Item>,
    source: &mut Source,
) -> Result<(), Failure> {
    objects.add_batch(batch).map_err(|e| match e {
        BatchError::Object(error) => {
            source.failure = Some(error);
            Failure::Syntax(String::new())
        }
        BatchError::Syntax(message) => Failure::Syntax(message),
    })
}

/// A document's members other than the `items` already read.
fn parse_json_rest(
    objects: &mut ClusterObjects,
    text: &[u8],
    position: &str,
    source: &mut Source,
    items_taken: Option<Checkpoint>,
) -> Result<(), Failure> {
    let seed = DocumentSeed {
        objects,
        position,
        failure: &mut source.failure,
        items_taken,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    seed.deserialize(&mut deserializer)
        .and_then(|()| deserializer.end())
        .map_err(|e| Failure::Syntax(format!("{position}: {e}")))
}

/// YAML documents, each with its own parser; a list laid out as `kubectl` prints it has
/// its items cut from the text and read in parallel batches.
fn read_yaml(
    objects: &mut ClusterObjects,
    lines: &mut YamlLines<impl BufRead>,
    source: &mut Source,
) -> Result<(), Failure> {
    for index in 1.. {
        if lines.at_end().map_err(Failure::Read)? {
            break;
        }
        let position = format!("document {index}");
        let mut document = YamlDocument::new(lines);
        let items_taken = match document.read_head().map_err(Failure::Read)? {
            Head::KubectlList(head) => {
                let checkpoint = Checkpoint::of(objects);
                let rest = read_kubectl_items(objects, &mut document, &position, source)?;
                Some((checkpoint, [head, rest].concat()))
            }
            Head::General => None,
        };
        let seed_for = |objects, failure, items_taken| DocumentSeed {
            objects,
            position: &position,
            failure,
            items_taken,
        };
        let result = match items_taken {
            Some((checkpoint, rest)) => {
                let text = String::from_utf8(rest)
                    .map_err(|_| Failure::Syntax(format!("{position}: not UTF-8 text")))?;
                let seed = seed_for(&mut *objects, &mut source.failure, Some(checkpoint));
                serde_saphyr::with_deserializer_from_str_with_options(
                    &text,
                    parser_options(),
                    |de| seed.deserialize(de),
                )
            }
            None => {
                let seed = seed_for(&mut *objects, &mut source.failure, None);
                serde_saphyr::with_deserializer_from_reader_with_options(
                    &mut document,
                    parser_options(),
                    |de| seed.deserialize(de),
                )
            }
        };
        result.map_err(|e| Failure::Syntax(plain_parser_error(&e.to_string())))?;
    }
    Ok(())
}

/// The parser's error in words: a budget breach (`budget breached: Variant { .. } at
/// line L, column C`) says which limit, not the parser's internals.
pub(super) fn plain_parser_error(message: &str) -> String {
    if let Some(duplicate) = message.strip_prefix("duplicate mapping key: ") {
        let (key, position) = duplicate
            .split_once(", set DuplicateKeyPolicy in Options if acceptable")
            .unwrap_or((duplicate, ""));
        return format!("duplicate field {key:?}{position}");
    }
    if let Some(rest) = message.strip_prefix("multiple YAML documents detected; ") {
        let position = rest.find(" at line ").map_or("", |at| &rest[at..]);
        return format!("a second YAML document{position}: this file holds one");
    }
    let Some(breach) = message.strip_prefix("budget breached: ") else {
        return message.to_string();
    };
    let position = breach
        .rfind(" at line ")
        .map_or(String::new(), |at| breach[at..].to_string());
    let limit = match breach.split([' ', '{']).next().unwrap_or_default() {
        "Aliases" | "AliasAnchorRatio" | "RecordedAnchorBytes" | "RecordedAnchorEvents" => {
            "anchors and aliases past Gantry's limits (at most 1,000 aliases, and 64 KiB of \
             content per anchor): expanding them would take far more memory than the file \
             holds; write the values out"
        }
        "Depth" => "nested more than 64 levels deep",
        _ => "beyond the parser's limits for one file",
    };
    format!("{limit}{position}")
}

/// A small YAML or JSON file (a configuration, a scenario) as one value, read with the
/// same limits and plain messages as a cluster's objects.
pub fn parse_yaml_value(text: &str) -> Result<serde_json::Value, String> {
    serde_saphyr::from_str_with_options::<StrictValue>(text, parser_options())
        .map(|StrictValue(value)| value)
        .map_err(|e| plain_parser_error(&e.to_string()))
}

/// The items of a list in `kubectl`'s layout (`items:` then `- ` lines at the left
/// margin), converted in batches; returns the rest of the document (`kind`, `metadata`).
fn read_kubectl_items(
    objects: &mut ClusterObjects,
    document: &mut YamlDocument<impl BufRead>,
    position: &str,
    source: &mut Source,
) -> Result<Vec<u8>, Failure> {
    let mut batch = Vec::with_capacity(BATCH);
    let mut item: Option<Vec<u8>> = None;
    let mut index = 0usize;
    let mut finish = |item: Option<Vec<u8>>, batch: &mut Vec<Item>| -> Result<(), Failure> {
        if let Some(text) = item {
            let position = format!("{position} items[{index}]");
            let text = String::from_utf8(text)
                .map_err(|_| Failure::Syntax(format!("{position}: not UTF-8 text")))?;
            batch.push(Item {
                source: batch::Source::Yaml(text),
                position,
            });
            index += 1;
        }
        Ok(())
    };
    let mut rest = Vec::new();
    // The current piece is the first item's first line.
    loop {
        let line = &document.line;
        if !document.line_start {
            if let Some(text) = item.as_mut() {
                text.extend_from_slice(line);
            }
        } else if line.starts_with(b"- ") || line.trim_ascii_end() == b"-" {
            finish(item.take(), &mut batch)?;
            item = Some(line.get(2..).unwrap_or_default().to_vec());
        } else if let Some(more) = line.strip_prefix(b"  ") {
            item.get_or_insert_with(Vec::new).extend_from_slice(more);
        } else if line.trim_ascii().is_empty() {
            item.get_or_insert_with(Vec::new).push(b'\n');
        } else {
            rest.extend_from_slice(line);
            break;
        }
        if batch.len() >= BATCH {
            add_batch(objects, std::mem::take(&mut batch), source)?;
        }
        if !document.next_line().map_err(Failure::Read)? {
            break;
        }
    }
    finish(item.take(), &mut batch)?;
    add_batch(objects, batch, source)?;
    while document.next_line().map_err(Failure::Read)? {
        rest.extend_from_slice(&document.line);
    }
    Ok(rest)
}

/// JSON when the text opens an object whose first key is quoted (`{"`), or an empty one;
/// everything else, YAML flow style included, goes to the YAML parser.
fn looks_like_json(input: &mut impl BufRead) -> io::Result<bool> {
    if json_values::peek(input)? != Some(b'{') {
        return Ok(false);
    }
    let buffer = input.fill_buf()?;
    let after = buffer[1..].iter().find(|b| !b.is_ascii_whitespace());
    Ok(matches!(after, Some(b'"') | Some(b'}')))
}

/// A YAML stream's lines, with the line that opened the next document when the previous
/// one stopped there.
struct YamlLines<R> {
    input: R,
    pending: Option<Vec<u8>>,
    /// The next byte starts a line.
    at_line_start: bool,
}

/// The most of one line held at a time.
const MAX_PIECE: usize = 1 << 16;

impl<R: BufRead> YamlLines<R> {
    /// Whether the stream has nothing left.
    fn at_end(&mut self) -> io::Result<bool> {
        Ok(self.pending.is_none() && self.input.fill_buf()?.is_empty())
    }
}

/// Whether `line` is the marker (`---` or `...`) alone or followed by a blank.
fn is_marker(line: &[u8], marker: &[u8; 3]) -> bool {
    line.starts_with(marker)
        && line
            .get(3)
            .is_none_or(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// One YAML document of a stream: the lines up to the next document's start (`---`), or
/// through an end marker (`...`).
struct YamlDocument<'a, R> {
    lines: &'a mut YamlLines<R>,
    line: Vec<u8>,
    /// Bytes of `line` already handed to the parser.
    sent: usize,
    /// Content (not only comments, blank lines and directives) has been seen.
    has_content: bool,
    /// A `---` marker has been seen: the next one starts another document.
    has_start: bool,
    /// `line` starts a line (it is not the continuation of a long one).
    line_start: bool,
    done: bool,
}

/// What a document's first lines say about it.
enum Head {
    /// A list in `kubectl`'s layout: the lines before `items:`; the current piece is the
    /// first item's first line.
    KubectlList(Vec<u8>),
    /// Anything else: the lines read so far are the current piece, for the parser.
    General,
}

/// How much of a document is read ahead looking for `items:`.
const MAX_HEAD: usize = 1 << 20;

impl<'a, R: BufRead> YamlDocument<'a, R> {
    fn new(lines: &'a mut YamlLines<R>) -> Self {
        YamlDocument {
            lines,
            line: Vec::new(),
            sent: 0,
            has_content: false,
            has_start: false,
            line_start: true,
            done: false,
        }
    }

    /// Reads the lines before a left-margin `items:` whose first item starts with `- `.
    fn read_head(&mut self) -> io::Result<Head> {
        let mut head = Vec::new();
        while head.len() < MAX_HEAD && self.next_line()? {
            if self.line_start && self.line.trim_ascii_end() == b"items:" {
                let items = std::mem::take(&mut self.line);
                if self.next_line()? {
                    if self.line_start
                        && (self.line.starts_with(b"- ") || self.line.trim_ascii_end() == b"-")
                    {
                        return Ok(Head::KubectlList(head));
                    }
                    head.extend_from_slice(&items);
                    head.extend_from_slice(&self.line);
                } else {
                    head.extend_from_slice(&items);
                }
                break;
            }
            head.extend_from_slice(&self.line);
        }
        // The parser reads what was read ahead first, then the rest of the stream.
        self.line = head;
        self.sent = 0;
        Ok(Head::General)
    }

    /// Reads the next piece of the stream into `line`: a whole line, or the next
    /// [`MAX_PIECE`] bytes of a longer one (only a line's start can be a marker, so a
    /// very long line passes through without being held whole). False at the end of
    /// this document.
    fn next_line(&mut self) -> io::Result<bool> {
        self.line.clear();
        self.sent = 0;
        if self.done {
            return Ok(false);
        }
        let line_start = match self.lines.pending.take() {
            Some(line) => {
                self.line = line;
                true
            }
            None => {
                let line_start = self.lines.at_line_start;
                while !self.line.ends_with(b"\n") && self.line.len() < MAX_PIECE {
                    let buffer = self.lines.input.fill_buf()?;
                    if buffer.is_empty() {
                        break;
                    }
                    let end = buffer
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(buffer.len(), |i| i + 1)
                        .min(MAX_PIECE - self.line.len());
                    self.line.extend_from_slice(&buffer[..end]);
                    self.lines.input.consume(end);
                }
                if self.line.is_empty() {
                    self.done = true;
                    return Ok(false);
                }
                self.lines.at_line_start = self.line.ends_with(b"\n");
                line_start
            }
        };
        self.line_start = line_start;
        if !line_start {
            return Ok(true);
        }
        let starts_document = is_marker(&self.line, b"---");
        if starts_document && (self.has_content || self.has_start) {
            self.lines.pending = Some(std::mem::take(&mut self.line));
            self.lines.at_line_start = true;
            self.done = true;
            return Ok(false);
        }
        self.has_start |= starts_document;
        if is_marker(&self.line, b"...") {
            self.done = true;
        } else if !self.has_content {
            let rest = if starts_document {
                &self.line[3..]
            } else {
                &self.line[..]
            };
            let text = rest.trim_ascii();
            self.has_content = !text.is_empty() && text[0] != b'#' && rest[0] != b'%';
        }
        Ok(true)
    }
}

impl<R: BufRead> Read for YamlDocument<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.sent == self.line.len() {
            if !self.next_line()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.line.len() - self.sent);
        out[..n].copy_from_slice(&self.line[self.sent..self.sent + n]);
        self.sent += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn documents(text: &str) -> Vec<String> {
        let mut lines = YamlLines {
            input: BufReader::new(text.as_bytes()),
            pending: None,
            at_line_start: true,
        };
        let mut out = Vec::new();
        loop {
            if lines.at_end().unwrap() {
                return out;
            }
            let mut document = YamlDocument::new(&mut lines);
            let mut s = String::new();
            document.read_to_string(&mut s).unwrap();
            out.push(s);
        }
    }

    #[test]
    fn splits_at_document_markers() {
        assert_eq!(documents("a: 1\n---\nb: 2\n"), ["a: 1\n", "---\nb: 2\n"]);
        assert_eq!(
            documents("a: 1\n---\n---\nb: 2"),
            ["a: 1\n", "---\n", "---\nb: 2"]
        );
        // A leading marker, comments and directives belong to the document they open.
        assert_eq!(
            documents("# c\n---\na: 1\n# d\n--- # x\nb: 2"),
            ["# c\n---\na: 1\n# d\n", "--- # x\nb: 2"]
        );
        assert_eq!(
            documents("a: 1\n...\n%YAML 1.2\n---\nb: 2"),
            ["a: 1\n...\n", "%YAML 1.2\n---\nb: 2"]
        );
        // An end marker closes its document; content on a marker line is content.
        assert_eq!(
            documents("a: 1\n...\n--- {b: 2}\n--- c\n"),
            ["a: 1\n...\n", "--- {b: 2}\n", "--- c\n"]
        );
        // Not markers: indented, or followed by more than a blank.
        assert_eq!(
            documents("a: |\n  ---\n  x\nb: ---x\n----\n"),
            ["a: |\n  ---\n  x\nb: ---x\n----\n"]
        );
        // A line longer than a piece passes through; what follows its end is a line start.
        let long = format!("a: {}\n---\nb: 1\n", "x".repeat(3 * MAX_PIECE));
        let split = documents(&long);
        assert_eq!(split.len(), 2);
        assert_eq!(split[1], "---\nb: 1\n");
    }

    /// Text after a JSON document that does not start another is named as that, not
    /// parsed as a second document whose errors count lines and columns from its start.
    #[test]
    fn trailing_characters_after_json_are_named() {
        let error = |text: &str| {
            let mut objects = crate::decode::ClusterObjects::default();
            objects.decode_more(text, "f.json").unwrap_err().to_string()
        };
        let list = r#"{"apiVersion":"v1","kind":"List","items":[]}"#;
        assert_eq!(
            error(&format!("{list} xyz")),
            "f.json: not valid YAML or JSON: trailing characters after document 1: 'x' where another JSON object would begin"
        );
        assert!(error(&format!("{list}\n}}")).contains("after document 1: '}'"));
        // Documents one after the other are still read.
        let mut objects = crate::decode::ClusterObjects::default();
        objects
            .decode_more(&format!("{list}\n{list}"), "f.json")
            .unwrap();
    }

    #[test]
    fn binary_input_and_size_are_refused() {
        let mut checked = Checked::new(&b"ab\0c"[..], 100);
        assert!(checked.read(&mut [0; 16]).is_err());
        assert!(matches!(checked.refusal, Some(Refusal::Binary(2))));
        let mut checked = Checked::new(&b"abcdef"[..], 4);
        assert!(checked.read(&mut [0; 16]).is_err());
        assert!(matches!(checked.refusal, Some(Refusal::TooLarge)));
        let mut checked = Checked::new(&b"ab\xe9c"[..], 100);
        assert!(checked.read(&mut [0; 16]).is_err());
        assert!(matches!(checked.refusal, Some(Refusal::NotUtf8(2))));
        let mut checked = Checked::new(&b"ab\xc3"[..], 100);
        assert_eq!(checked.read(&mut [0; 16]).unwrap(), 3);
        assert!(checked.read(&mut [0; 16]).is_err(), "cut by the end");
        assert!(matches!(checked.refusal, Some(Refusal::NotUtf8(2))));
    }
}
