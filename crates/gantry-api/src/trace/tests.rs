//! The trace's reader and writer: round trips, damage found where it is, records read
//! ahead in order.

use serde_json::json;

use super::*;

fn header() -> TraceHeader {
    TraceHeader {
        gantry_trace: FORMAT_VERSION,
        server: "https://k:6443".into(),
        server_version: Some("v1.35.4".into()),
        started: "2026-12-04T05:00:00Z".into(),
    }
}

fn node(name: &str) -> Value {
    json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": name}})
}

fn written(records: &[TraceRecord], gzip: bool) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let sink: Box<dyn Write> = if gzip {
            Box::new(flate2::write::GzEncoder::new(
                &mut out,
                flate2::Compression::fast(),
            ))
        } else {
            Box::new(&mut out)
        };
        let mut writer = TraceWriter::new(sink, &header()).unwrap();
        for record in records {
            writer.write(record.clone()).unwrap();
        }
        writer.finish(5000).unwrap();
    }
    out
}

fn read_all(bytes: Vec<u8>) -> Result<(TraceHeader, Vec<TraceRecord>), TraceError> {
    let (header, mut reader) = TraceReader::open(std::io::Cursor::new(bytes))?;
    let mut records = Vec::new();
    while let Some(record) = reader.next_record()? {
        records.push(record);
    }
    Ok((header, records))
}

fn sample() -> Vec<TraceRecord> {
    vec![
        TraceRecord::change(0, Op::List, node("a")),
        TraceRecord::change(10, Op::Added, node("b")),
        TraceRecord::change(20, Op::Deleted, node("a")),
    ]
}

#[test]
fn a_trace_reads_back_as_written_compressed_or_not() {
    for gzip in [false, true] {
        let bytes = written(&sample(), gzip);
        assert_eq!(bytes.starts_with(&[0x1f, 0x8b]), gzip);
        let (header_read, records) = read_all(bytes).unwrap();
        assert_eq!(header_read, header());
        assert_eq!(records, sample());
    }
}

/// Every way a trace can be damaged is refused, naming the byte and the record.
#[test]
fn a_damaged_trace_names_the_byte_and_the_record() {
    let text = String::from_utf8(written(&sample(), false)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let header_len = lines[0].len() as u64 + 1;
    let cut = text.len() - lines[4].len() - 1;
    let cases: Vec<(String, String)> = vec![
        (String::new(), "byte 0 (the header): empty".into()),
        (
            "{\"kind\":\"List\"}\n".into(),
            "byte 0 (the header): not a Gantry trace header".into(),
        ),
        (
            text.replace("\"gantryTrace\":1", "\"gantryTrace\":2"),
            "gantryTrace 2 is not supported".into(),
        ),
        // Cut before the end record: it was cut short.
        (
            text[..cut].to_string(),
            format!("byte {cut} (record 4): the trace ends without its end record after 3 records"),
        ),
        // Cut inside a line.
        (
            text[..header_len as usize + 10].to_string(),
            format!("byte {header_len} (record 1): not a trace record"),
        ),
        (
            text.replace("\"at\":20", "\"at\":5"),
            "(record 3): at 5 comes before the previous record's 10".into(),
        ),
        (
            text.replace("\"records\":3", "\"records\":2"),
            "(record 4): the end record counts Some(2) records, but 3 came before it".into(),
        ),
        (
            format!("{text}{}\n", lines[1]),
            "(record 5): text after the end record".into(),
        ),
        (
            text.replace("\"op\":\"added\"", "\"op\":\"list\""),
            "(record 2): a record of the state at the start must be at 0".into(),
        ),
        (
            text.replace(
                "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"b\"}}",
                "{}",
            ),
            "(record 2): a change carries one object with its kind and metadata.name".into(),
        ),
        (
            text.replace("\"op\":\"deleted\"", "\"op\":\"renamed\""),
            "(record 3): not a trace record: unknown variant `renamed`".into(),
        ),
    ];
    for (input, expected) in cases {
        let error = read_all(input.into_bytes()).unwrap_err().to_string();
        assert!(error.contains(&expected), "{error}\nexpected: {expected}");
    }
    // A truncated gzip stream: the decoder's error, or the missing end record.
    let whole = written(&sample(), true);
    for cut in [whole.len() - 4, whole.len() - 12, whole.len() / 2] {
        let error = read_all(whole[..cut].to_vec()).unwrap_err().to_string();
        assert!(
            error.contains("cannot read") || error.contains("cut short"),
            "{cut}: {error}"
        );
    }
}

/// Lines are read ahead in batches: a long trace reads back whole, and of two damaged
/// records, in one batch or in two, the first is named whatever the batches were.
#[test]
fn reading_ahead_keeps_records_and_errors_in_order() {
    let long: Vec<TraceRecord> = (0..BATCH_LINES as u64 * 2 + 7)
        .map(|i| TraceRecord::change(i, Op::Added, node(&format!("n{i}"))))
        .collect();
    let text = String::from_utf8(written(&long, false)).unwrap();
    let (_, records) = read_all(text.clone().into_bytes()).unwrap();
    assert_eq!(records, long);
    let damage = |text: &str, number: usize| {
        let name = format!("\"name\":\"n{}\"", number - 1);
        text.replace(&name, "\"name\":5")
    };
    for (first, second) in [
        (3, 9),
        (BATCH_LINES - 1, BATCH_LINES + 2),
        (BATCH_LINES + 1, 2 * BATCH_LINES + 3),
    ] {
        let damaged = damage(&damage(&text, second), first);
        let error = read_all(damaged.into_bytes()).unwrap_err();
        assert_eq!(error.record, first as u64, "{error}");
        assert!(error.message.contains("carries one object"), "{error}");
        let line_start: usize = text.lines().take(first).map(|l| l.len() + 1).sum();
        assert_eq!(error.offset, line_start as u64);
    }
    // The line after the end record is named, read ahead with it or read after it
    // (the end record last of its batch).
    for count in [BATCH_LINES - 1, long.len()] {
        let text = String::from_utf8(written(&long[..count], false)).unwrap();
        let lines = text.lines().count() as u64;
        let extra = format!("{text}{}\n", text.lines().nth(1).unwrap());
        let error = read_all(extra.into_bytes()).unwrap_err();
        assert_eq!((error.record, error.offset), (lines, text.len() as u64));
        assert!(
            error.message.contains("text after the end record"),
            "{error}"
        );
        assert!(read_all(text.into_bytes()).is_ok());
    }
}

/// An input that fails in a way no error says (a panic on the reading thread) is an
/// error, not a wait for ever.
#[test]
fn a_reading_thread_that_dies_is_an_error() {
    struct PanicsAfterHeader(std::io::Cursor<Vec<u8>>);
    impl Read for PanicsAfterHeader {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.position() > 0 {
                panic!("the input broke");
            }
            let header_line = self.0.get_ref().iter().position(|&b| b == b'\n').unwrap();
            let n = buf.len().min(header_line + 1);
            self.0.read(&mut buf[..n])
        }
    }
    let input = PanicsAfterHeader(std::io::Cursor::new(written(&sample(), false)));
    let (_, mut reader) = TraceReader::open(input).unwrap();
    let error = reader.next_record().unwrap_err();
    assert!(
        error.message.contains("stopped without saying why"),
        "{error}"
    );
}

#[test]
fn redaction_keeps_what_scheduling_reads_and_nothing_secret() {
    let mut pod = json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"},
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"env\":\"secret\"}",
                            "hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,1000,0:;"}},
        "spec": {"containers": [{"name": "c", "image": "img",
            "env": [{"name": "TOKEN", "value": "secret"}], "envFrom": [{"secretRef": {"name": "s"}}],
            "command": ["sh", "-c", "echo secret"], "args": ["--password=secret"],
            "livenessProbe": {"httpGet": {"httpHeaders": [{"name": "Authorization", "value": "secret"}]}},
            "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80, "hostPort": 80}]}],
            "initContainers": [{"name": "i", "image": "img", "env": [{"name": "K", "value": "secret"}]}],
            "nodeSelector": {"zone": "a"}},
        "status": {"phase": "Running", "containerStatuses": [{"name": "c",
            "state": {"terminated": {"message": "secret in a log"}}, "resources": {"requests": {"cpu": "1"}}}]}
    });
    redact(&mut pod);
    let text = pod.to_string();
    assert!(!text.contains("secret"), "{text}");
    assert!(!text.contains("managedFields"), "{text}");
    for kept in [
        "\"app\":\"web\"",
        "hami.io/vgpu-devices-allocated",
        "\"cpu\":\"1\"",
        "hostPort",
        "nodeSelector",
        "\"image\":\"img\"",
        "\"phase\":\"Running\"",
    ] {
        assert!(text.contains(kept), "{kept} lost: {text}");
    }
}
