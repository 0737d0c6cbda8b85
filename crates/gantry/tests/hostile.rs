//! What used to hang or panic: every run ends, every error is one line, a closed or full
//! stdout is handled as Unix tools do, and numeric flags have limits.

mod common;

use std::fs::File;
use std::process::Stdio;
use std::time::Duration;

use common::{command, gantry_within, stderr, stdout, wait_within, write};

/// Long enough for a debug build on a busy machine; the loops this catches never end.
const LIMIT: Duration = Duration::from_secs(120);

const CLUSTER: &str = "testdata/parity/mixed-reasons/cluster.yaml";

fn one_node_and(pods: &str) -> String {
    format!(
        "kind: Node\nmetadata: {{name: n1}}\nstatus: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '10'}}}}\n{pods}"
    )
}

fn pod(name: &str, spec: &str) -> String {
    format!(
        "---\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec: {{{spec}containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]}}\n"
    )
}

/// The error is one line on stderr, not a panic.
fn assert_one_line_error(out: &std::process::Output, wants: &[&str]) {
    let err = stderr(out);
    assert!(!out.status.success(), "succeeded: {}", stdout(out));
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for want in wants {
        assert!(err.contains(want), "{want:?} missing: {err}");
    }
}

#[test]
fn gated_and_other_schedulers_pods_are_written_and_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(
        dir.path(),
        "cluster.yaml",
        &one_node_and(&format!(
            "{}{}{}",
            pod("gated", "schedulingGates: [{name: example.com/later}], "),
            pod("theirs", "schedulerName: x, "),
            pod("ours", "")
        )),
    );
    let placements = dir.path().join("p.jsonl");
    let out = gantry_within(
        &[
            "simulate",
            "--cluster",
            &cluster,
            "--json",
            "--placements",
            placements.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(placements).unwrap(),
        concat!(
            r#"{"pod":"default/gated","node":null,"reason":"gated"}"#,
            "\n",
            r#"{"pod":"default/theirs","node":null,"reason":"schedulerName \"x\" matches no profile"}"#,
            "\n",
            r#"{"pod":"default/ours","node":"n1"}"#,
            "\n"
        )
    );
    let summary: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(
        (
            &summary["gated"],
            &summary["other_scheduler"],
            &summary["attempts"]
        ),
        (&1.into(), &1.into(), &1.into())
    );
}

#[test]
fn binds_that_always_fail_end_the_run_counted() {
    let scenario = common::repo_root().join("crates/gantry/tests/small-scenario.yaml");
    let out = gantry_within(
        &[
            "simulate",
            "--scenario",
            scenario.to_str().unwrap(),
            "--bind-failure-rate",
            "1",
            "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(summary["gave_up"], 60, "{summary}");
    assert_eq!(summary["scheduled"], 0, "{summary}");
}

#[test]
fn scenarios_that_overflow_or_repeat_a_name_are_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let workload = |name: &str, arrival: &str| {
        format!(
            "- {{name: {name}, count: 2, arrival: {arrival}, template: {{spec: {{containers: [{{name: c}}]}}}}}}\n"
        )
    };
    let cases = [
        (
            format!(
                "workloads:\n{}",
                workload("w", "{start: 99999999999999999999h}")
            ),
            vec!["workloads[0].arrival.start", "99999999999999999999h"],
        ),
        (
            format!(
                "workloads:\n{}",
                workload("w", "{rate: 0.0000000000000000001/h}")
            ),
            vec!["workloads[0].arrival.rate", "too slow"],
        ),
        (
            format!(
                "workloads:\n{}{}",
                workload("web", "{start: 0s}"),
                workload("web", "{start: 1s}")
            ),
            vec!["workloads[1].name", "workloads[0]", "\"web\""],
        ),
        (
            "nodeGroups:\n- {name: pool, count: 1, allocatable: {cpu: '1'}}\n- {name: pool, count: 2, allocatable: {cpu: '1'}}\n".to_string(),
            vec!["nodeGroups[1].name", "nodeGroups[0]", "\"pool\""],
        ),
    ];
    for (text, wants) in cases {
        let scenario = write(dir.path(), "s.yaml", &text);
        let out = gantry_within(&["simulate", "--scenario", &scenario], LIMIT);
        assert_one_line_error(&out, &wants);
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_program_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let pod_file = write(dir.path(), "pod.yaml", &pod("p", ""));
    let runs: [&[&str]; 3] = [
        &["explain", "--cluster", CLUSTER, "--pod", &pod_file],
        &[
            "explain",
            "--cluster",
            CLUSTER,
            "--pod",
            &pod_file,
            "--json",
        ],
        &[
            "simulate",
            "--cluster",
            CLUSTER,
            "--pods",
            "testdata/parity/mixed-reasons/pods.yaml",
            "--placements",
            "/dev/stdout",
        ],
    ];
    for args in runs {
        let mut child = command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader closes its end before the first line, as `| head -0` would.
        drop(child.stdout.take());
        let out = wait_within(child, LIMIT, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}

#[test]
fn a_full_stdout_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let pod_file = write(dir.path(), "pod.yaml", &pod("p", ""));
    let runs: [&[&str]; 3] = [
        &["explain", "--cluster", CLUSTER, "--pod", &pod_file],
        &["simulate", "--cluster", CLUSTER, "--json"],
        &["bench", "snapshot", "--nodes", "10", "--repetitions", "1"],
    ];
    for args in runs {
        let full = File::options().write(true).open("/dev/full").unwrap();
        let child = command(args)
            .stdout(full)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_within(child, LIMIT, args);
        assert_one_line_error(&out, &["cannot write to stdout", "No space left on device"]);
    }
}

#[test]
fn numeric_flags_have_limits() {
    let cases: [(&[&str], &str); 13] = [
        (
            &["bench", "snapshot", "--pods-per-node", "100000000"],
            "--pods-per-node",
        ),
        (&["bench", "snapshot", "--nodes", "0"], "--nodes"),
        (&["bench", "snapshot", "--nodes", "1000000000"], "--nodes"),
        (
            &["bench", "snapshot", "--repetitions", "0"],
            "--repetitions",
        ),
        (&["bench", "snapshot", "--changed", "99999999"], "--changed"),
        (&["bench", "basic", "--scale-down", "0"], "--scale-down"),
        (
            &["bench", "basic", "--percentage-of-nodes-to-score", "101"],
            "--percentage-of-nodes-to-score",
        ),
        (
            &["simulate", "--bind-latency-ms", "99999999999"],
            "--bind-latency-ms",
        ),
        (
            &["simulate", "--bind-failure-rate", "1.5"],
            "--bind-failure-rate",
        ),
        (
            &["simulate", "--bind-failure-rate", "NaN"],
            "--bind-failure-rate",
        ),
        (&["simulate", "--schedulers", "0"], "--schedulers"),
        (&["simulate", "--schedulers", "65"], "--schedulers"),
        (
            &["simulate", "--event-latency-ms", "99999999999"],
            "--event-latency-ms",
        ),
    ];
    for (args, flag) in cases {
        let out = gantry_within(args, LIMIT);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // Within their own ranges, the flags may still ask for too much together.
    let out = gantry_within(
        &[
            "bench",
            "snapshot",
            "--nodes",
            "100000",
            "--pods-per-node",
            "1000",
        ],
        LIMIT,
    );
    assert_one_line_error(&out, &["100000000 pods", "2000000"]);
}
