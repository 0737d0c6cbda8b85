//! `gantry simulate --trace`: a hand-written trace (testdata/traces/small.jsonl) replayed
//! and compared with the bindings it records, worked out by hand; damaged traces refused
//! in one line naming the byte and the record; `gantry record`'s flags.

mod common;

use std::io::Write;

use common::{gantry, stderr};
use serde_json::{Value, json};

const TRACE: &str = "testdata/traces/small.jsonl";

fn replayed(trace: &str, extra: &[&str]) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let placements = dir.path().join("placements.jsonl");
    let mut args = vec![
        "simulate",
        "--trace",
        trace,
        "--json",
        "--placements",
        placements.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = gantry(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    (summary, std::fs::read_to_string(placements).unwrap())
}

/// By hand, with the default profile (LeastAllocated and BalancedAllocation; a request
/// of cpu only scores memory at kube-scheduler's 200Mi default):
/// - a (1 cpu) at 1 s: n1 would be 3/4 full, n2 1/2: n2, as recorded;
/// - b (1 cpu) at 2 s: n1 3/4, n2 2/2: n1, as recorded;
/// - c (3 cpu) at 3 s fits nowhere (1 cpu free on each); `other`, another scheduler's,
///   is bound to n2 at 4.1 s where it was; `running` leaves n1 at 5 s, and c is retried
///   onto n1, as recorded at 5.1 s;
/// - n3 (8 cpu) and n4 (16) arrive at 5.5 s; n2's cordon is not replayed;
/// - d (1 cpu) at 6 s: n1 and n2 are full, n4 is emptier than n3: n4, where the
///   cluster chose n3;
/// - g (2 cpu) at 8 s, never bound in the cluster: n4 (3/16 after) over n3 (2/8).
#[test]
fn a_small_trace_replays_as_worked_out_by_hand() {
    let (summary, placements) = replayed(TRACE, &[]);
    assert_eq!(summary["kubernetes_release"], "v1.35");
    assert_eq!(
        summary["replay"],
        json!({
            "recorded": 4,
            "same_node": 3,
            "other_node": [["default/d", "n3", "n4"]],
            "pending": [],
            "bound_only_in_simulation": [["default/g", "n4"]],
            "reproduced": 0.75,
            "trace_ms": 9000,
        })
    );
    assert!(
        placements.contains(
            r#"{"pod":"default/other","node":"n2","reason":"bound by another scheduler"}"#
        ),
        "{placements}"
    );
    // The same input, the same placements; compressed, the same trace.
    let (_, again) = replayed(TRACE, &[]);
    assert_eq!(placements, again);
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("small.jsonl.gz");
    let mut encoder = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::default(),
    );
    encoder
        .write_all(&std::fs::read(common::repo_root().join(TRACE)).unwrap())
        .unwrap();
    encoder.finish().unwrap();
    let (compressed, from_gz) = replayed(gz.to_str().unwrap(), &[]);
    assert_eq!(compressed["replay"], summary["replay"]);
    assert_eq!(from_gz, placements);
    // A named release wins over the recorded server's.
    let (older, _) = replayed(TRACE, &["--emulated-version", "1.33"]);
    assert_eq!(older["kubernetes_release"], "v1.33");
}

#[test]
fn the_text_output_leads_with_the_share_reproduced() {
    let out = gantry(&["simulate", "--trace", TRACE]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("  replay: 75.0% of the 4 bindings recorded reproduced (3 on the same node, 1 on another, 0 left pending); 1 pods bound only in the simulation\n    default/d: recorded on n3, simulated on n4\n"),
        "{text}"
    );
    let notes = stderr(&out);
    assert!(
        notes.contains("changes not replayed: 1 Node modified"),
        "{notes}"
    );
    assert!(notes.contains("deciding as v1.35"), "{notes}");
}

#[test]
fn a_damaged_trace_is_one_line_naming_the_byte_and_the_record() {
    let text = std::fs::read_to_string(common::repo_root().join(TRACE)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let without_end = lines[..lines.len() - 1].join("\n") + "\n";
    let cut_at = without_end.len();
    let garbled = text.replacen("\"op\":\"added\"", "\"op\":\"addded\"", 1);
    let first_added = text.find("\"op\":\"added\"").unwrap();
    let garbled_at = text[..first_added].rfind('\n').unwrap() + 1;
    let dir = tempfile::tempdir().unwrap();
    for (content, expected) in [
        (
            without_end,
            format!(
                "byte {cut_at} (record 19): the trace ends without its end record after 18 records: it was cut short"
            ),
        ),
        (
            garbled,
            format!("byte {garbled_at} (record 4): not a trace record: unknown variant `addded`"),
        ),
        (
            "\u{0}\u{0}\u{0}".to_string(),
            "byte 0 (the header): not a Gantry trace header".to_string(),
        ),
    ] {
        let path = dir.path().join("damaged.jsonl");
        std::fs::write(&path, content).unwrap();
        let out = gantry(&["simulate", "--trace", path.to_str().unwrap()]);
        assert!(!out.status.success());
        let err = stderr(&out);
        let want = format!("error: {}: {expected}", path.display());
        let last = err.trim_end().lines().last().unwrap_or_default();
        assert!(last.starts_with(&want), "{err}\nwanted: {want}");
        assert_eq!(err.matches("error:").count(), 1, "{err}");
    }
    let out = gantry(&["simulate", "--trace", TRACE, "--cluster", TRACE]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn record_says_in_one_line_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: c, context: {cluster: k, user: u}}]\n",
    )
    .unwrap();
    let out = gantry(&[
        "record",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--output",
        "/nonexistent/dir/t.jsonl",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.starts_with("error: cannot create /nonexistent/dir/t.jsonl"),
        "{err}"
    );
    let out = gantry(&["record", "--output", "t.jsonl", "--duration", "10x"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("give a number with s, m, h or d"),
        "{}",
        stderr(&out)
    );
}
