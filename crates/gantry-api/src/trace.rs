//! The trace `gantry record` writes and `gantry simulate --trace` replays: a cluster's
//! state when recording started, then every change to what the scheduler reads, each
//! with its time. JSON Lines (gzip-compressed when the recorder's file name ends in
//! `.gz`; either is read, gzip known by its magic bytes):
//!
//! ```text
//! {"gantryTrace":1,"server":"https://10.0.0.1:6443","serverVersion":"v1.35.4","started":"2026-12-04T05:00:00Z"}
//! {"at":0,"op":"list","object":{"kind":"Node","apiVersion":"v1",...}}      the state at the start
//! {"at":1234,"op":"added","object":{"kind":"Pod",...}}                    then changes, `at` in ms
//! {"at":1240,"op":"modified","object":{"kind":"Pod",...}}                 (a binding sets spec.nodeName)
//! {"at":9000,"op":"deleted","object":{"kind":"Pod",...}}
//! {"at":600000,"op":"end","records":4}                                    how many records came before
//! ```
//!
//! A trace without its `end` record was cut short and is refused, as is any record out
//! of order, each error naming the byte offset (in the decompressed text) and the record.
//! Objects keep only what scheduling reads: [`redact`] drops environment values,
//! commands, probes, managed fields and `last-applied-configuration` before a record is
//! written, and Secrets and ConfigMaps are never read.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

mod head;

/// The format's version, in the header's `gantryTrace`.
pub const FORMAT_VERSION: u32 = 1;

/// The longest line read: one object (a node with thousands of images is under 1 MiB).
pub const MAX_LINE_BYTES: u64 = 64 << 20;

/// The first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceHeader {
    pub gantry_trace: u32,
    /// The API server recorded.
    pub server: String,
    /// Its `/version` (`v1.35.4`), when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// When recording started (RFC 3339, UTC).
    pub started: String,
}

/// What a record says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// The object was there when recording started.
    List,
    Added,
    Modified,
    Deleted,
    /// The last record.
    End,
}

/// One line after the header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceRecord {
    /// Milliseconds since recording started.
    pub at: u64,
    pub op: Op,
    /// The object (with `kind` and `apiVersion`); absent on `end`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// On `end`: how many records came before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<u64>,
}

impl TraceRecord {
    pub fn change(at: u64, op: Op, object: Value) -> TraceRecord {
        TraceRecord {
            at,
            op,
            object: Some(object),
            records: None,
        }
    }

    /// The object's `kind`.
    pub fn kind(&self) -> &str {
        (self.object.as_ref())
            .and_then(|o| o.get("kind"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// Why a trace cannot be read: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// Bytes of (decompressed) text before the line at fault.
    pub offset: u64,
    /// Its number: 0 is the header.
    pub record: u64,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.record == 0 {
            "the header".to_string()
        } else {
            format!("record {}", self.record)
        };
        write!(f, "byte {} ({what}): {}", self.offset, self.message)
    }
}

impl std::error::Error for TraceError {}

/// Lines read ahead and sent together: a batch that [`TraceReader::next_batch`] parses
/// and maps in parallel.
const BATCH_LINES: usize = 512;

/// Batches read ahead and not yet taken: with the batch being taken, what is held.
const BATCHES_AHEAD: usize = 2;

/// A line read ahead, without its end.
struct Line {
    /// Bytes of text before it.
    offset: u64,
    /// Its number: 0 is the header.
    number: u64,
    text: Vec<u8>,
}

/// What the reading thread sends: lines, in order, then why it stopped: the end of the
/// text (with its offset), or an error.
enum LinesMessage {
    Lines(Vec<Line>),
    Stopped(Result<u64, TraceError>),
}

/// The decompressed text, line by line.
struct Lines {
    input: BufReader<Box<dyn Read + Send>>,
    line: Vec<u8>,
    offset: u64,
    /// The number of the next line to read (0 is the header).
    next_line: u64,
}

impl Lines {
    /// The next line without its end, or `None` at the end of the text.
    fn read_line(&mut self) -> Result<Option<&[u8]>, TraceError> {
        self.line.clear();
        let read = (&mut self.input)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut self.line)
            .map_err(|e| error(self.offset, self.next_line, format!("cannot read: {e}")))?;
        if read == 0 {
            return Ok(None);
        }
        if read as u64 > MAX_LINE_BYTES {
            return Err(error(
                self.offset,
                self.next_line,
                format!("a line longer than {MAX_LINE_BYTES} bytes"),
            ));
        }
        self.offset += read as u64;
        self.next_line += 1;
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
        }
        Ok(Some(&self.line))
    }

    /// Reads the rest and sends it in batches of [`BATCH_LINES`] lines; stops at the end
    /// of the text, at a line that cannot be read, or when nobody takes them any more.
    fn send(mut self, to: SyncSender<LinesMessage>) {
        loop {
            let mut lines = Vec::with_capacity(BATCH_LINES);
            let mut stopped = None;
            while lines.len() < BATCH_LINES && stopped.is_none() {
                let (offset, number) = (self.offset, self.next_line);
                match self.read_line() {
                    Ok(Some(text)) => lines.push(Line {
                        offset,
                        number,
                        text: text.to_vec(),
                    }),
                    Ok(None) => stopped = Some(Ok(self.offset)),
                    Err(error) => stopped = Some(Err(error)),
                }
            }
            if to.send(LinesMessage::Lines(lines)).is_err() {
                return;
            }
            if let Some(stopped) = stopped {
                let _ = to.send(LinesMessage::Stopped(stopped));
                return;
            }
        }
    }
}

/// A line of the trace as read: its object is still JSON text.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordLine<'a> {
    at: u64,
    op: Op,
    #[serde(default, borrow)]
    object: Option<&'a RawValue>,
    #[serde(default)]
    records: Option<u64>,
}

/// A record as read, its object still JSON text: the caller parses it into what it
/// keeps (a [`TraceRecord`] with [`RawRecord::to_record`], or its own types).
pub struct RawRecord<'a> {
    /// Bytes of text before it.
    pub offset: u64,
    /// Its number: the first after the header is 1.
    pub number: u64,
    pub at: u64,
    pub op: Op,
    /// The object's `kind`.
    pub kind: &'a str,
    pub object: &'a RawValue,
}

impl RawRecord<'_> {
    /// The record, its object parsed.
    pub fn to_record(&self) -> Result<TraceRecord, TraceError> {
        let object = serde_json::from_str(self.object.get())
            .map_err(|e| error(self.offset, self.number, format!("not a trace record: {e}")))?;
        Ok(TraceRecord::change(self.at, self.op, object))
    }
}

/// What the order checks read of a record, taken before the record is mapped.
struct Checked {
    at: u64,
    op: Op,
    /// On `end`: how many records it says came before it.
    records: Option<u64>,
    /// The object's kind, when it has a kind and a metadata.name (both strings).
    kind: Option<String>,
}

impl Checked {
    fn of(line: &RecordLine) -> Checked {
        let kind = (line.object).and_then(|o| head::named_kind(o.get()));
        Checked {
            at: line.at,
            op: line.op,
            records: line.records,
            kind,
        }
    }

    /// Whether the caller is given it: a change or a record of the state at the start,
    /// with an object to give.
    fn is_given(&self) -> bool {
        self.op != Op::End && self.kind.is_some()
    }
}

/// A line parsed, and what the caller's map made of its record.
struct ParsedLine<T> {
    offset: u64,
    number: u64,
    parsed: Result<(Checked, Option<T>), String>,
}

impl<T> ParsedLine<T> {
    fn of(line: Line, map: &impl Fn(RawRecord) -> T) -> ParsedLine<T> {
        let parsed = serde_json::from_slice::<RecordLine>(&line.text)
            .map(|record| {
                let checked = Checked::of(&record);
                let mapped = match (&checked.kind, record.object) {
                    (Some(kind), Some(object)) if checked.is_given() => Some(map(RawRecord {
                        offset: line.offset,
                        number: line.number,
                        at: record.at,
                        op: record.op,
                        kind,
                        object,
                    })),
                    _ => None,
                };
                (checked, mapped)
            })
            .map_err(|e| e.to_string());
        ParsedLine {
            offset: line.offset,
            number: line.number,
            parsed,
        }
    }
}

/// Records read together, in order, each mapped; an error in the trace ends the batch,
/// after the records before it.
pub struct Batch<T> {
    pub records: Vec<T>,
    pub error: Option<TraceError>,
}

/// Reads a trace as it streams in, checking its order. A thread of its own decompresses
/// the text and splits its lines ahead; [`TraceReader::next_batch`] parses and maps a
/// batch of records in parallel, each on one thread from text to what the caller keeps.
pub struct TraceReader {
    batches: Receiver<LinesMessage>,
    /// Why reading stopped after the lines taken (the end of the text, at its offset, or
    /// an error); unset while more may come.
    stopped: Option<Result<u64, TraceError>>,
    /// The first error found: every later read returns it.
    failed: Option<TraceError>,
    /// Records mapped to themselves and not yet returned by [`TraceReader::next_record`].
    unreturned: VecDeque<TraceRecord>,
    /// Records read after the header.
    records: u64,
    last_at: u64,
    /// Whether a change was read (the state at the start comes first).
    changes_began: bool,
    /// The end record's time, once read.
    ended: Option<u64>,
}

impl TraceReader {
    /// Opens a trace (gzip-compressed or not) and reads its header.
    pub fn open(
        input: impl Read + Send + 'static,
    ) -> Result<(TraceHeader, TraceReader), TraceError> {
        let mut buffered = BufReader::new(input);
        let compressed = buffered
            .fill_buf()
            .map_err(|e| error(0, 0, format!("cannot read: {e}")))?
            .starts_with(&[0x1f, 0x8b]);
        let input: Box<dyn Read + Send> = if compressed {
            Box::new(flate2::bufread::MultiGzDecoder::new(buffered))
        } else {
            Box::new(buffered)
        };
        let mut lines = Lines {
            input: BufReader::with_capacity(1 << 16, input),
            line: Vec::new(),
            offset: 0,
            next_line: 0,
        };
        let Some(line) = lines.read_line()? else {
            return Err(error(0, 0, "empty: not a Gantry trace".into()));
        };
        let header: TraceHeader = serde_json::from_slice(line).map_err(|e| {
            error(
                0,
                0,
                format!("not a Gantry trace header (`{{\"gantryTrace\":1,...}}`): {e}"),
            )
        })?;
        if header.gantry_trace != FORMAT_VERSION {
            return Err(error(
                0,
                0,
                format!(
                    "gantryTrace {} is not supported: this Gantry reads version {FORMAT_VERSION}",
                    header.gantry_trace
                ),
            ));
        }
        let (to, batches) = sync_channel(BATCHES_AHEAD);
        std::thread::Builder::new()
            .name("trace-reader".into())
            .spawn(move || lines.send(to))
            .map_err(|e| error(0, 1, format!("cannot start the reading thread: {e}")))?;
        let reader = TraceReader {
            batches,
            stopped: None,
            failed: None,
            unreturned: VecDeque::new(),
            records: 0,
            last_at: 0,
            changes_began: false,
            ended: None,
        };
        Ok((header, reader))
    }

    /// The next record before `end`; `None` once `end` was read (and checked).
    pub fn next_record(&mut self) -> Result<Option<TraceRecord>, TraceError> {
        loop {
            if let Some(record) = self.unreturned.pop_front() {
                return Ok(Some(record));
            }
            if let Some(error) = &self.failed {
                return Err(error.clone());
            }
            if self.ended.is_some() {
                return Ok(None);
            }
            let batch = self.next_batch(|record| record.to_record());
            for record in batch.records {
                match record {
                    Ok(record) => self.unreturned.push_back(record),
                    Err(error) => {
                        self.failed.get_or_insert(error);
                        break;
                    }
                }
            }
        }
    }

    /// The next records before `end` (none once `end` was read), each given to `map`;
    /// records are parsed and mapped in parallel, so that a record's text and what `map`
    /// makes of it are handled on one thread.
    pub fn next_batch<T: Send>(&mut self, map: impl Fn(RawRecord) -> T + Sync) -> Batch<T> {
        let mut batch = Batch {
            records: Vec::new(),
            error: self.failed.clone(),
        };
        if batch.error.is_some() || self.ended.is_some() {
            return batch;
        }
        let lines = loop {
            match &self.stopped {
                Some(Err(error)) => return self.fail(batch, error.clone()),
                Some(Ok(end)) => {
                    let cut = error(
                        *end,
                        self.records + 1,
                        format!(
                            "the trace ends without its end record after {} records: it was cut short",
                            self.records
                        ),
                    );
                    return self.fail(batch, cut);
                }
                None => {}
            }
            if let Some(lines) = self.take_lines() {
                break lines;
            }
        };
        let parsed: Vec<ParsedLine<T>> = (lines.into_par_iter())
            .map(|line| ParsedLine::of(line, &map))
            .collect();
        for ParsedLine {
            offset,
            number,
            parsed,
        } in parsed
        {
            if self.ended.is_some() {
                let after = error(offset, number, "text after the end record".into());
                return self.fail(batch, after);
            }
            let checked = match parsed {
                Ok((checked, mapped)) => {
                    batch.records.extend(mapped);
                    checked
                }
                Err(e) => {
                    let unparsed = error(offset, number, format!("not a trace record: {e}"));
                    return self.fail(batch, unparsed);
                }
            };
            if let Err(message) = self.check(&checked, number) {
                // The record at fault was mapped with the others: it is not returned.
                if checked.is_given() {
                    batch.records.pop();
                }
                return self.fail(batch, error(offset, number, message));
            }
        }
        if self.ended.is_some()
            && let Err(after) = self.check_nothing_follows()
        {
            return self.fail(batch, after);
        }
        batch
    }

    /// When recording ended (milliseconds since it started), once the end record was read.
    pub fn end_at(&self) -> Option<u64> {
        self.ended
    }

    /// Whether the end record was read, or the trace failed: nothing more to read.
    pub fn is_done(&self) -> bool {
        self.ended.is_some() || self.failed.is_some()
    }

    fn fail<T>(&mut self, mut batch: Batch<T>, error: TraceError) -> Batch<T> {
        self.failed = Some(error.clone());
        batch.error = Some(error);
        batch
    }

    /// Checks record `number` against those before it, and counts it.
    fn check(&mut self, record: &Checked, number: u64) -> Result<(), String> {
        if record.at < self.last_at {
            return Err(format!(
                "at {} comes before the previous record's {}",
                record.at, self.last_at
            ));
        }
        match record.op {
            Op::End => {
                if record.records != Some(self.records) {
                    return Err(format!(
                        "the end record counts {:?} records, but {} came before it",
                        record.records, self.records
                    ));
                }
                self.ended = Some(record.at);
                return Ok(());
            }
            Op::List if self.changes_began => {
                return Err("a record of the state at the start comes after a change".into());
            }
            Op::List if record.at != 0 => {
                return Err("a record of the state at the start must be at 0".into());
            }
            Op::List => {}
            Op::Added | Op::Modified | Op::Deleted => self.changes_began = true,
        }
        if record.kind.is_none() || record.records.is_some() {
            return Err("a change carries one object with its kind and metadata.name".into());
        }
        self.last_at = record.at;
        self.records = number;
        Ok(())
    }

    /// The next lines the reading thread sent (`None`: it stopped, and `stopped` says
    /// why).
    fn take_lines(&mut self) -> Option<Vec<Line>> {
        match self.batches.recv() {
            Ok(LinesMessage::Lines(lines)) => return Some(lines),
            Ok(LinesMessage::Stopped(stopped)) => self.stopped = Some(stopped),
            Err(_) => {
                let message = "the reading thread stopped without saying why".to_string();
                self.stopped = Some(Err(error(0, self.records + 1, message)));
            }
        }
        None
    }

    /// After the end record: no line, and no error reading further.
    fn check_nothing_follows(&mut self) -> Result<(), TraceError> {
        loop {
            match &self.stopped {
                Some(Ok(_)) => return Ok(()),
                Some(Err(error)) => return Err(error.clone()),
                None => {}
            }
            if let Some(next) = self.take_lines().and_then(|lines| lines.into_iter().next()) {
                let after = "text after the end record".to_string();
                return Err(error(next.offset, next.number, after));
            }
        }
    }
}

fn error(offset: u64, record: u64, message: String) -> TraceError {
    TraceError {
        offset,
        record,
        message,
    }
}

/// Writes a trace: the header, records in order, then `end`.
pub struct TraceWriter<W: Write> {
    output: W,
    records: u64,
    last_at: u64,
    /// One line, written whole: a compressing writer pays for every write it is given.
    line: Vec<u8>,
}

impl<W: Write> TraceWriter<W> {
    pub fn new(mut output: W, header: &TraceHeader) -> io::Result<TraceWriter<W>> {
        serde_json::to_writer(&mut output, header)?;
        output.write_all(b"\n")?;
        Ok(TraceWriter {
            output,
            records: 0,
            last_at: 0,
            line: Vec::new(),
        })
    }

    /// Writes one record; a time before the previous record's is written as that time
    /// (clocks are read by several tasks).
    pub fn write(&mut self, mut record: TraceRecord) -> io::Result<()> {
        record.at = record.at.max(self.last_at);
        self.last_at = record.at;
        self.line.clear();
        serde_json::to_writer(&mut self.line, &record)?;
        self.line.push(b'\n');
        self.output.write_all(&self.line)?;
        self.records += 1;
        Ok(())
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.output.flush()
    }

    /// Writes `end` at `at` and hands the output back.
    pub fn finish(mut self, at: u64) -> io::Result<W> {
        let end = TraceRecord {
            at: at.max(self.last_at),
            op: Op::End,
            object: None,
            records: Some(self.records),
        };
        serde_json::to_writer(&mut self.output, &end)?;
        self.output.write_all(b"\n")?;
        self.output.flush()?;
        Ok(self.output)
    }
}

/// Fields of containers that scheduling never reads and that may hold secrets.
const CONTAINER_FIELDS_DROPPED: [&str; 9] = [
    "env",
    "envFrom",
    "command",
    "args",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "workingDir",
];

/// Keeps only what scheduling reads of `object` (its kind in `kind`): no managed fields,
/// no `kubectl.kubernetes.io/last-applied-configuration` (a copy of the whole manifest,
/// environment included), and of a pod's containers no environment, command, arguments,
/// probes or hooks, and no container state (whose messages may quote logs).
pub fn redact(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
        metadata.remove("selfLink");
        if let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    if object.get("kind").and_then(Value::as_str) != Some("Pod") {
        return;
    }
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            for container in spec
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut)
            {
                for field in CONTAINER_FIELDS_DROPPED {
                    container.remove(field);
                }
            }
        }
    }
    if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
        for list in [
            "containerStatuses",
            "initContainerStatuses",
            "ephemeralContainerStatuses",
        ] {
            for container in status
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut)
            {
                container.remove("state");
                container.remove("lastState");
            }
        }
    }
}

#[cfg(test)]
mod tests;
