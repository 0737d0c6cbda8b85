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

/// `simulate --trace TRACE --json`: the summary, and what it said on stderr.
fn replayed_json(trace: &std::path::Path) -> (Value, String) {
    let out = gantry(&["simulate", "--trace", trace.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    (serde_json::from_slice(&out.stdout).unwrap(), stderr(&out))
}

/// Writes a trace of `records` (recorded from a v1.35.4 server) ending at `end_ms`, as
/// `name` in `dir`.
fn write_trace(
    dir: &tempfile::TempDir,
    name: &str,
    records: &[Value],
    end_ms: u64,
) -> std::path::PathBuf {
    write_trace_from(dir, name, records, end_ms, "v1.35.4")
}

/// [`write_trace`] from a server of `version`.
fn write_trace_from(
    dir: &tempfile::TempDir,
    name: &str,
    records: &[Value],
    end_ms: u64,
    version: &str,
) -> std::path::PathBuf {
    let mut text = json!({"gantryTrace": 1, "server": "https://cluster.example:6443",
        "serverVersion": version, "started": "2026-12-04T05:00:00Z"})
    .to_string();
    for record in records {
        text.push('\n');
        text.push_str(&record.to_string());
    }
    text.push_str(&format!(
        "\n{{\"at\":{end_ms},\"op\":\"end\",\"records\":{}}}\n",
        records.len()
    ));
    let trace = dir.path().join(name);
    std::fs::write(&trace, text).unwrap();
    trace
}

/// By hand, with the default profile (LeastAllocated and BalancedAllocation; a request
/// of cpu only scores memory at kube-scheduler's 200Mi default):
/// - a (1 cpu) at 1 s: n1 would be 3/4 full, n2 1/2: n2, as recorded;
/// - b (1 cpu) at 2 s: n1 3/4, n2 2/2: n1, as recorded;
/// - c (3 cpu) at 3 s fits nowhere (1 cpu free on each); `other`, another scheduler's,
///   is bound to n2 at 4.1 s where it was; `running` leaves n1 at 5 s, and c is retried
///   onto n1, as recorded at 5.1 s;
/// - n3 (8 cpu) and n4 (16) arrive at 5.5 s; n2 is cordoned at 5.6 s (full already);
/// - d (1 cpu) at 6 s: n1 and n2 are full, n4 is emptier than n3: n4, where the
///   cluster chose n3. The totals: TaintToleration 100 × 3 on both (no taints), the
///   other plugins but the two below 0 or skipped; NodeResourcesFit (LeastAllocated, cpu
///   and memory at the 200Mi default) (87 + 97) / 2 = 92 on n3, (93 + 97) / 2 = 95 on
///   n4; BalancedAllocation (requests as made: memory 0) 100 × (1 − (1/8)/2) = 93 on
///   n3, 100 × (1 − (1/16)/2) = 96 on n4: n3 485, n4 491;
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
            "other_node": [["default/d", "n3", "n4", "scored lower: 485 against 491"]],
            "other_node_by_cause": {"score": 1},
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

/// A trace of 150 identical nodes (4 cpu each; `full`, bound at the start, takes all of
/// node-001) and three pods of 1 cpu the recorded cluster placed where the simulation
/// does not, written out here.
fn judged_trace() -> String {
    let node = |name: String| {
        json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}, "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    };
    let pod = |name: &str, cpu: &str, node: Option<&str>| {
        let mut pod = json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}]}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        pod
    };
    let mut records = vec![
        json!({"gantryTrace": 1, "server": "https://cluster.example:6443", "serverVersion": "v1.35.4", "started": "2026-12-04T05:00:00Z"}),
    ];
    for i in 0..150 {
        records.push(json!({"at": 0, "op": "list", "object": node(format!("node-{i:03}"))}));
    }
    records.push(json!({"at": 0, "op": "list", "object": pod("full", "4", Some("node-001"))}));
    for (i, (name, recorded)) in [
        ("far", "node-149"),
        ("tie", "node-102"),
        ("refused", "node-001"),
    ]
    .into_iter()
    .enumerate()
    {
        let at = 1000 * (i as u64 + 1);
        records.push(json!({"at": at, "op": "added", "object": pod(name, "1", None)}));
        records.push(
            json!({"at": at + 10, "op": "modified", "object": pod(name, "1", Some(recorded))}),
        );
    }
    let changes = records.len() - 1;
    records.push(json!({"at": 9000, "op": "end", "records": changes}));
    records.iter().map(|r| format!("{r}\n")).collect()
}

/// Each pod placed elsewhere than recorded says how its cycle judged the recorded node.
/// With 150 nodes a cycle looks for 100 feasible ones (kube-scheduler's floor; the
/// adaptive share is 49%), from where the last one stopped:
/// - `far` first, from node-000: node-001 refused, 100 feasible found by node-100, so
///   node-149 was never looked at (101 of 150); equal scores, the first, node-000, wins;
/// - `tie` from node-101: the 99 empty nodes of the 100 feasible (node-000 holds `far`)
///   score alike and the first, node-101, wins over the recorded node-102;
/// - `refused` from node-052 round to node-002: node-001 is full.
#[test]
fn the_replay_says_how_it_judged_each_recorded_node_it_did_not_choose() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("judged.jsonl");
    std::fs::write(&trace, judged_trace()).unwrap();
    let (summary, placements) = replayed(trace.to_str().unwrap(), &[]);
    let replay = &summary["replay"];
    assert_eq!(replay["same_node"], 0, "{replay}");
    let why: Vec<(&str, &str, &str)> = replay["other_node"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d[0].as_str().unwrap(),
                d[2].as_str().unwrap(),
                d[3].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        why[0],
        (
            "default/far",
            "node-000",
            "not searched: the cycle looked at 101 of 150 nodes"
        ),
        "{placements}"
    );
    assert_eq!(why[1].0, "default/tie");
    assert_eq!(why[1].1, "node-101");
    assert!(why[1].2.starts_with("tied: 99 nodes scored "), "{why:?}");
    assert_eq!(why[2].0, "default/refused");
    assert!(
        why[2]
            .2
            .starts_with("refused by NodeResourcesFit: Insufficient cpu"),
        "{why:?}"
    );
    assert_eq!(
        replay["other_node_by_cause"],
        json!({"NodeResourcesFit": 1, "not searched": 1, "tie": 1})
    );
}

/// Two nodes alike (4 cpu); the cluster put `a` (2 cpu) on n2, where the simulation's
/// tie goes to n1, then `b` (2 cpu) on the emptier n1. Replayed freely, the simulation's
/// `a` on n1 sends `b` to n2: neither binding is reproduced. Following the recording,
/// `a` is bound to n2 after the simulation decided it, and `b` is decided on the state
/// the cluster had: n1, as recorded.
fn tie_trace() -> String {
    let node = |name: &str| {
        json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    };
    let pod = |name: &str, node: Option<&str>| {
        let mut pod = json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "2"}}}]}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        pod
    };
    let records = [
        json!({"gantryTrace": 1, "server": "https://cluster.example:6443", "serverVersion": "v1.36.2", "started": "2026-12-04T05:00:00Z"}),
        json!({"at": 0, "op": "list", "object": node("n1")}),
        json!({"at": 0, "op": "list", "object": node("n2")}),
        json!({"at": 1000, "op": "added", "object": pod("a", None)}),
        json!({"at": 1010, "op": "modified", "object": pod("a", Some("n2"))}),
        json!({"at": 2000, "op": "added", "object": pod("b", None)}),
        json!({"at": 2010, "op": "modified", "object": pod("b", Some("n1"))}),
        json!({"at": 3000, "op": "end", "records": 6}),
    ];
    records.iter().map(|r| format!("{r}\n")).collect()
}

#[test]
fn following_the_recording_keeps_one_tie_from_changing_every_later_decision() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tie.jsonl");
    std::fs::write(&trace, tie_trace()).unwrap();
    let (free, _) = replayed(trace.to_str().unwrap(), &[]);
    assert_eq!(free["replay"]["same_node"], 0, "{}", free["replay"]);
    assert_eq!(
        free["replay"]["other_node_by_cause"],
        json!({"score": 1, "tie": 1})
    );
    let (followed, placements) = replayed(trace.to_str().unwrap(), &["--follow-recorded"]);
    let replay = &followed["replay"];
    assert_eq!(replay["same_node"], 1, "{replay}");
    assert_eq!(replay["other_node_by_cause"], json!({"tie": 1}));
    assert_eq!(replay["other_node"][0][0], "default/a");
    // The placements are the simulation's decisions.
    assert!(
        placements.contains(r#"{"pod":"default/a","node":"n1"}"#),
        "{placements}"
    );
    assert!(
        placements.contains(r#"{"pod":"default/b","node":"n1"}"#),
        "{placements}"
    );
    let out = gantry(&["simulate", "--follow-recorded"]);
    assert!(!out.status.success(), "--follow-recorded needs --trace");
}

/// Pods marked for deletion keep their room but leave PodTopologySpread's counts: `a1` and
/// `a2` on n1 are marked at 1 s, so when `b` (at most one more matching pod on a node than
/// on another) arrives at 2 s, n1 holds 0 counted pods and n2 1: n1, as recorded. Counted,
/// they would make n1 2 against 1, and only n2 would do.
#[test]
fn a_pod_marked_for_deletion_is_not_counted_by_topology_spread() {
    let node = |name: &str| {
        json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}})
    };
    let pod = |name: &str, node: Option<&str>, terminating: bool| {
        let mut pod = json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1"}}}]}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        if terminating {
            pod["metadata"]["deletionTimestamp"] = json!("2026-12-04T05:00:01Z");
        }
        pod
    };
    let mut spread = pod("b", None, false);
    spread["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "x"}}}]);
    let mut bound = spread.clone();
    bound["spec"]["nodeName"] = json!("n1");
    let records = [
        json!({"at": 0, "op": "list", "object": node("n1")}),
        json!({"at": 0, "op": "list", "object": node("n2")}),
        json!({"at": 0, "op": "list", "object": pod("a1", Some("n1"), false)}),
        json!({"at": 0, "op": "list", "object": pod("a2", Some("n1"), false)}),
        json!({"at": 0, "op": "list", "object": pod("c", Some("n2"), false)}),
        json!({"at": 1000, "op": "modified", "object": pod("a1", Some("n1"), true)}),
        json!({"at": 1000, "op": "modified", "object": pod("a2", Some("n1"), true)}),
        json!({"at": 2000, "op": "added", "object": spread}),
        json!({"at": 2010, "op": "modified", "object": bound}),
    ];
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(&dir, "terminating.jsonl", &records, 3000);
    let (summary, stderr) = replayed_json(&trace);
    let replay = &summary["replay"];
    assert_eq!(replay["same_node"], 1, "{replay}");
    assert!(!stderr.contains("not replayed"), "{stderr}");
}

/// Traces `gantry record` took of a real kube-apiserver and kube-scheduler v1.36.2 placing
/// 1,200 pods over 10 minutes (`testdata/traces/churn_realapi.py`, seed 1; docs/record.md).
/// With the scheduler's `parallelism: 1` its ties follow the nodes' order, as Gantry's do:
/// the free replay reproduces every binding. With its default 16 Filter workers, following
/// the recording, every decision that differs is a tie.
#[test]
fn a_real_kube_scheduler_history_is_reproduced_but_for_ties() {
    let release = ["--emulated-version", "1.36"];
    let (one, _) = replayed(
        "testdata/traces/churn-1.36-parallelism-1.jsonl.gz",
        &release,
    );
    let replay = &one["replay"];
    let causes = &replay["other_node_by_cause"];
    assert_eq!(replay["recorded"], 1200);
    assert_eq!(replay["same_node"], 1200, "the others: {causes}");
    let followed = ["--follow-recorded", "--emulated-version", "1.36"];
    let (sixteen, _) = replayed(
        "testdata/traces/churn-1.36-parallelism-16.jsonl.gz",
        &followed,
    );
    let replay = &sixteen["replay"];
    assert_eq!(replay["recorded"], 1200);
    assert_eq!(replay["same_node"], 1184);
    assert_eq!(replay["other_node_by_cause"], json!({"tie": 16}));
}

#[test]
fn the_text_output_leads_with_the_share_reproduced() {
    let out = gantry(&["simulate", "--trace", TRACE]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("  replay: 75.0% of the 4 bindings recorded reproduced (3 on the same node, 1 on another, 0 left pending); 1 pods bound only in the simulation\n    on another node, by how the simulation judged the recorded node: score 1\n    default/d: recorded on n3, simulated on n4; n3 scored lower: 485 against 491\n"),
        "{text}"
    );
    let notes = stderr(&out);
    assert!(!notes.contains("changes not replayed"), "{notes}");
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

/// Nodes changed during the trace: a status heartbeat (nothing scheduling reads) is
/// skipped; a cordon and an uncordon are replayed. n1 has 4 cpu, n2 8: `p` (1 cpu) at
/// 3 s goes to n1 because n2 was cordoned at 2 s (without the cordon, the emptier n2);
/// `q` at 5 s goes to n2, uncordoned at 4 s. Both as recorded.
#[test]
fn node_changes_scheduling_reads_are_replayed() {
    let node = |name: &str, cpu: &str, unschedulable: bool, heartbeat: &str| {
        json!({"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}]}})
    };
    let pod = |name: &str, node: Option<&str>| {
        let mut pod = json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1"}}}]}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        pod
    };
    let t0 = "2026-12-04T05:00:00Z";
    let records = [
        json!({"at": 0, "op": "list", "object": node("n1", "4", false, t0)}),
        json!({"at": 0, "op": "list", "object": node("n2", "8", false, t0)}),
        json!({"at": 1000, "op": "modified", "object": node("n2", "8", false, "2026-12-04T05:00:01Z")}),
        json!({"at": 2000, "op": "modified", "object": node("n2", "8", true, t0)}),
        json!({"at": 3000, "op": "added", "object": pod("p", None)}),
        json!({"at": 3010, "op": "modified", "object": pod("p", Some("n1"))}),
        json!({"at": 4000, "op": "modified", "object": node("n2", "8", false, t0)}),
        json!({"at": 5000, "op": "added", "object": pod("q", None)}),
        json!({"at": 5010, "op": "modified", "object": pod("q", Some("n2"))}),
    ];
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(&dir, "nodes.jsonl", &records, 6000);
    let (summary, notes) = replayed_json(&trace);
    assert!(!notes.contains("changes not replayed"), "{notes}");
    assert_eq!(summary["replay"]["same_node"], 2, "{summary}");
    assert_eq!(summary["replay"]["reproduced"], 1.0, "{summary}");
}

/// A ready node of 8 cpu for the DRA traces.
fn dra_node(name: &str) -> Value {
    json!({"kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"},
            "capacity": {"cpu": "8", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// The device class `gpu` of the driver gpu.example.com.
fn gpu_class() -> Value {
    json!({"kind": "DeviceClass", "apiVersion": "resource.k8s.io/v1",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}})
}

/// A pod of 1 cpu using the claim `claim` (as its entry `gpu`), bound to `node` if given.
fn claiming_pod(name: &str, claim: &str, node: Option<&str>) -> Value {
    let mut pod = json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}});
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// DRA objects changed while recording are replayed: a claim a user created (the pod
/// naming it would wait for it otherwise), a slice a driver published for another node
/// (the second pod fits only there) and one it withdrew; a claim's status written by the
/// cluster's scheduler is the simulation's own work, counted as not replayed.
#[test]
fn dra_objects_changed_while_recording_are_replayed() {
    let node = dra_node;
    let slice = |node: &str| {
        json!({"kind": "ResourceSlice", "apiVersion": "resource.k8s.io/v1",
            "metadata": {"name": format!("{node}-gpus")},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}]}})
    };
    let claim = |name: &str, allocated_on: Option<&str>| {
        let mut claim = json!({"kind": "ResourceClaim", "apiVersion": "resource.k8s.io/v1",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}});
        if let Some(node) = allocated_on {
            claim["status"] = json!({"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": "gpu-0"}]}}});
        }
        claim
    };
    let pod = claiming_pod;
    let class = gpu_class();
    let records = [
        json!({"at": 0, "op": "list", "object": node("n1")}),
        json!({"at": 0, "op": "list", "object": node("n2")}),
        json!({"at": 0, "op": "list", "object": class}),
        json!({"at": 0, "op": "list", "object": slice("n1")}),
        json!({"at": 1000, "op": "added", "object": claim("first", None)}),
        json!({"at": 2000, "op": "added", "object": pod("p", "first", None)}),
        json!({"at": 2010, "op": "modified", "object": claim("first", Some("n1"))}),
        json!({"at": 2020, "op": "modified", "object": pod("p", "first", Some("n1"))}),
        json!({"at": 4000, "op": "added", "object": slice("n2")}),
        json!({"at": 5000, "op": "added", "object": claim("second", None)}),
        json!({"at": 5100, "op": "added", "object": pod("q", "second", None)}),
        json!({"at": 5110, "op": "modified", "object": claim("second", Some("n2"))}),
        json!({"at": 5120, "op": "modified", "object": pod("q", "second", Some("n2"))}),
        json!({"at": 6000, "op": "deleted", "object": slice("n1")}),
    ];
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(&dir, "dra.jsonl", &records, 7000);
    let (summary, notes) = replayed_json(&trace);
    assert!(
        notes.contains("changes not replayed: 2 ResourceClaim modified"),
        "{notes}"
    );
    assert_eq!(summary["replay"]["same_node"], 2, "{summary}");
    assert_eq!(summary["replay"]["reproduced"], 1.0, "{summary}");
}

/// DeviceTaintRules changed while recording are replayed (v1.37: DRADeviceTaintRules on):
/// the start state's rule keeps the first pod's claim off gpu-0; once it is deleted the
/// second pod gets gpu-0, as the cluster gave it; a rule added before n2's slice is
/// published taints that slice, so the third pod waits, as it did in the cluster.
#[test]
fn device_taint_rules_changed_while_recording_are_replayed() {
    let node = dra_node;
    let slice = |node: &str, devices: &[&str]| {
        let devices: Vec<Value> = devices.iter().map(|d| json!({"name": d})).collect();
        json!({"kind": "ResourceSlice", "apiVersion": "resource.k8s.io/v1",
            "metadata": {"name": format!("{node}-gpus")},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices}})
    };
    let rule = |name: &str, pool: &str, device: Option<&str>| {
        let mut selector = json!({"driver": "gpu.example.com", "pool": pool});
        if let Some(device) = device {
            selector["device"] = json!(device);
        }
        json!({"kind": "DeviceTaintRule", "apiVersion": "resource.k8s.io/v1beta2",
            "metadata": {"name": name},
            "spec": {"deviceSelector": selector,
                "taint": {"key": "example.com/broken", "effect": "NoSchedule"}}})
    };
    let claim = |name: &str, device: Option<&str>| {
        let mut claim = json!({"kind": "ResourceClaim", "apiVersion": "resource.k8s.io/v1",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}});
        if let Some(device) = device {
            claim["status"] = json!({"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": device}]}}});
        }
        claim
    };
    let pod = |name: &str, node: Option<&str>| claiming_pod(name, &format!("{name}-gpu"), node);
    let class = gpu_class();
    let records = [
        json!({"at": 0, "op": "list", "object": node("n1")}),
        json!({"at": 0, "op": "list", "object": node("n2")}),
        json!({"at": 0, "op": "list", "object": class}),
        json!({"at": 0, "op": "list", "object": rule("gpu-0-broken", "n1", Some("gpu-0"))}),
        json!({"at": 0, "op": "list", "object": slice("n1", &["gpu-0", "gpu-1"])}),
        json!({"at": 1000, "op": "added", "object": claim("a-gpu", None)}),
        json!({"at": 1100, "op": "added", "object": pod("a", None)}),
        json!({"at": 1110, "op": "modified", "object": claim("a-gpu", Some("gpu-1"))}),
        json!({"at": 1120, "op": "modified", "object": pod("a", Some("n1"))}),
        json!({"at": 2000, "op": "deleted", "object": rule("gpu-0-broken", "n1", Some("gpu-0"))}),
        json!({"at": 3000, "op": "added", "object": claim("b-gpu", None)}),
        json!({"at": 3100, "op": "added", "object": pod("b", None)}),
        json!({"at": 3110, "op": "modified", "object": claim("b-gpu", Some("gpu-0"))}),
        json!({"at": 3120, "op": "modified", "object": pod("b", Some("n1"))}),
        json!({"at": 4000, "op": "added", "object": rule("n2-maintenance", "n2", None)}),
        json!({"at": 4500, "op": "added", "object": slice("n2", &["gpu-0"])}),
        json!({"at": 5000, "op": "added", "object": claim("c-gpu", None)}),
        json!({"at": 5100, "op": "added", "object": pod("c", None)}),
    ];
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace_from(&dir, "rules.jsonl", &records, 7000, "v1.37.1");
    let (summary, notes) = replayed_json(&trace);
    assert!(!notes.contains("DeviceTaintRule"), "{notes}");
    assert_eq!(summary["replay"]["same_node"], 2, "{summary}");
    assert_eq!(summary["replay"]["reproduced"], 1.0, "{summary}");
    assert_eq!(
        summary["replay"]["bound_only_in_simulation"],
        json!([]),
        "{summary}"
    );
}

/// Storage objects changed while recording are replayed as recorded: a volume and its
/// claim made mid-recording (a StatefulSet's), bound already, pin the pod that uses them
/// to the volume's node; without them it would wait for its claim, and without the
/// volume's node affinity it would go to the emptier n1.
#[test]
fn storage_objects_changed_while_recording_are_replayed() {
    let node = |name: &str, cpu: &str| {
        json!({"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    let class = json!({"kind": "StorageClass", "apiVersion": "storage.k8s.io/v1",
        "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"});
    let volume = json!({"kind": "PersistentVolume", "apiVersion": "v1",
        "metadata": {"name": "pv-n2"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local",
            "claimRef": {"namespace": "default", "name": "data-p"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}]}}},
        "status": {"phase": "Bound"}});
    let claim = json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1",
        "metadata": {"name": "data-p", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
            "volumeName": "pv-n2", "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"}});
    let pod = |node: Option<&str>| {
        let mut pod = json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1"}}}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-p"}}]}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        pod
    };
    let records = [
        json!({"at": 0, "op": "list", "object": node("n1", "16")}),
        json!({"at": 0, "op": "list", "object": node("n2", "4")}),
        json!({"at": 0, "op": "list", "object": class}),
        json!({"at": 500, "op": "added", "object": volume}),
        json!({"at": 1000, "op": "added", "object": claim}),
        json!({"at": 2000, "op": "added", "object": pod(None)}),
        json!({"at": 2010, "op": "modified", "object": pod(Some("n2"))}),
    ];
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(&dir, "storage.jsonl", &records, 3000);
    let (summary, notes) = replayed_json(&trace);
    assert!(!notes.contains("changes not replayed"), "{notes}");
    assert_eq!(summary["replay"]["same_node"], 1, "{summary}");
    assert_eq!(summary["replay"]["reproduced"], 1.0, "{summary}");
}
