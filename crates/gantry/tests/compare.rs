//! `gantry simulate --compare`: the same inputs under two configurations, side by side,
//! checked against outcomes worked out by hand (testdata/compare).

mod common;

use common::{gantry, stderr};
use serde_json::{Value, json};

const CLUSTER: &str = "testdata/compare/cluster.yaml";
const PODS: &str = "testdata/compare/pods.yaml";
const MOST: &str = "testdata/compare/most-allocated.yaml";

/// n1 has 4 cpu, n2 8 (16Gi each); p1 asks 1 cpu, p2 6, p3 4, no memory (NodeResourcesFit
/// scores it at the 200Mi default).
/// A, the defaults (v1.37): p1 on n2, 463 to n1's 454: TaintToleration 100 × 3 on both,
/// LeastAllocated 92 ((87 + 98) / 2: 7,000 of 8,000 millicpu and 16Gi − 200Mi of 16Gi
/// free, in whole percents) to n1's 86 ((75 + 98) / 2), BalancedAllocation 71 to 68 (as
/// `gantry explain` gives them); p2 on n2 (only n2 has 6 left), p3 on n1 (only n1 has 4).
/// B, MostAllocated: p1 on n1, 381 to 377: MostAllocated 13 ((25 + 1) / 2) to 6
/// ((12 + 1) / 2), Balanced 68 to 71; p2 on n2, and p3 fits nowhere (3 and 1 cpu left).
#[test]
fn two_configurations_side_by_side_as_worked_out_by_hand() {
    let out = gantry(&[
        "simulate",
        "--cluster",
        CLUSTER,
        "--pods",
        PODS,
        "--compare",
        MOST,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pending = "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.";
    assert_eq!(
        v["differences"],
        json!({
            "bound_in_both": 2,
            "other_node": [["default/p1", "n2", "n1"]],
            "only_a": [["default/p3", "n1", pending]],
            "only_b": [],
            // Each run's cycle for p1, of the node the other chose.
            "why_other_node": [{
                "pod": "default/p1",
                "a": "scored lower: 454 against 463",
                "b": "scored lower: 377 against 381",
            }],
        })
    );
    assert_eq!(v["a"]["config"], "kube-scheduler's defaults");
    assert_eq!(v["b"]["config"], MOST);
    assert_eq!(v["a"]["summary"]["scheduled"], 3);
    assert_eq!(v["b"]["summary"]["scheduled"], 2);
    assert_eq!(v["kubernetes_release"], "v1.37");
    // The same inputs and seed give the same comparison, byte for byte but for timings.
    let again = gantry(&[
        "simulate",
        "--cluster",
        CLUSTER,
        "--pods",
        PODS,
        "--compare",
        MOST,
        "--json",
    ]);
    let w: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(w["differences"], v["differences"]);
    assert_eq!(w["a"]["wait_s"], v["a"]["wait_s"]);

    let text = gantry(&[
        "simulate",
        "--cluster",
        CLUSTER,
        "--pods",
        PODS,
        "--compare",
        MOST,
    ]);
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(
        text.contains("  placed differently: 1 of the 2 pods bound in both; bound only under A: 1, only under B: 0\n    default/p1: A on n2, B on n1\n      A's cycle, of n1: scored lower: 454 against 463\n      B's cycle, of n2: scored lower: 377 against 381\n"),
        "{text}"
    );
}

/// Over a trace, each configuration's share of the recorded bindings reproduced.
#[test]
fn over_a_trace_each_side_says_how_much_it_reproduced() {
    let out = gantry(&[
        "simulate",
        "--trace",
        "testdata/traces/small.jsonl",
        "--compare",
        MOST,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("  replay: of the 4 bindings recorded, A reproduced 75.0%, B 25.0%"),
        "{text}"
    );
    // The page gives the same shares: A's worked out by hand in tests/trace.rs, B's as the
    // text above prints it (B packs: a and d onto n1, c onto n3; only b as recorded).
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let out = gantry(&[
        "simulate",
        "--trace",
        "testdata/traces/small.jsonl",
        "--compare",
        MOST,
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(
        html.contains(
            "<th>recorded bindings reproduced</th><td>75.0%</td><td>25.0%</td><td>−50 pp</td>"
        ),
        "{html}"
    );
    for own in [
        "a/index.html",
        "b/index.html",
        "a/placements.jsonl",
        "compare.json",
    ] {
        assert!(report.join(own).is_file(), "{own} is written");
    }
}

const RELEASES_CLUSTER: &str = "testdata/compare/releases-cluster.yaml";
const RELEASES_POD: &str = "testdata/compare/releases-pod.yaml";
const BALANCED_X3: &str = "testdata/compare/balanced-weight-3.yaml";

/// Two releases in one run: v1.36's BalancedAllocation scores the change in balance
/// (#135573), v1.35's the balance with the pod. `busy` (10 cpu, 10Gi) holds 8Gi of
/// memory, `empty` is alike and empty; p asks 4 cpu. With BalancedAllocation weighing 3:
/// - NodeResourcesFit (LeastAllocated; p's memory and q's cpu at the 100m/200Mi
///   defaults): busy (59 + 18) / 2 = 38, empty (60 + 98) / 2 = 79;
/// - BalancedAllocation, v1.35: 100 × (1 − |0.4 − 0.8| / 2) = 80 on busy and
///   100 × (1 − 0.4 / 2) = 80 on empty: empty by the fit, 619 to 578;
/// - v1.36: busy's balance goes from 60 to 80, 50 + (50 + 80 − 60) / 2 = 85; empty's
///   from 100 to 80, 50 + (50 + 80 − 100) / 2 = 65: busy, 593 to 574
///   (TaintToleration's 300 on both).
#[test]
fn two_releases_side_by_side_as_worked_out_by_hand() {
    let out = gantry(&[
        "simulate",
        "--cluster",
        RELEASES_CLUSTER,
        "--pods",
        RELEASES_POD,
        "--config",
        BALANCED_X3,
        "--emulated-version",
        "1.36",
        "--compare-emulated-version",
        "1.35",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["differences"]["other_node"],
        json!([["default/p", "busy", "empty"]])
    );
    assert_eq!(v["a"]["kubernetes_release"], "v1.36");
    assert_eq!(v["b"]["kubernetes_release"], "v1.35");
    assert_eq!(
        v["a"]["config"],
        format!("{BALANCED_X3}, as Kubernetes v1.36")
    );
    // Gates alone make a comparison too: the same release, the same placements.
    let out = gantry(&[
        "simulate",
        "--cluster",
        RELEASES_CLUSTER,
        "--pods",
        RELEASES_POD,
        "--compare-feature-gates",
        "OpportunisticBatching=false",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["differences"]["bound_in_both"], 1);
    assert_eq!(v["differences"]["other_node"], json!([]));
    // B's flags are named in their errors; A's gates taken for B's release, as such.
    for (args, error) in [
        (
            &["--compare-emulated-version", "1.99"][..],
            "error: --compare-emulated-version: Gantry decides as Kubernetes 1.28 to 1.37, not 1.99",
        ),
        (
            &["--compare-feature-gates", "Foo=true"],
            "error: --compare-feature-gates: unrecognized feature gate: Foo",
        ),
        (
            &[
                "--feature-gates",
                "OpportunisticBatching=false",
                "--compare-emulated-version",
                "1.34",
            ],
            "error: --feature-gates (for B's release): feature gate OpportunisticBatching does not exist in Kubernetes 1.34",
        ),
    ] {
        let mut all = vec![
            "simulate",
            "--cluster",
            RELEASES_CLUSTER,
            "--pods",
            RELEASES_POD,
        ];
        all.extend_from_slice(args);
        let out = gantry(&all);
        assert!(!out.status.success());
        assert!(stderr(&out).starts_with(error), "{}", stderr(&out));
    }
}

/// Another node group in one run: B without pool `old` (a and b, 4 cpu each; q's 2 cpu
/// on a) and with the new pool's c (8 cpu). Under A, p (1 cpu) goes to the emptier b;
/// under B, q waits again and both go to c, the only node.
#[test]
fn another_node_group_side_by_side() {
    let args = [
        "simulate",
        "--cluster",
        "testdata/compare/pool-cluster.yaml",
        "--compare-without-nodes",
        "pool=old",
        "--compare-nodes",
        "testdata/compare/new-pool.yaml",
    ];
    let mut json = args.to_vec();
    json.push("--json");
    let out = gantry(&json);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["differences"]["other_node"],
        json!([["default/p", "b", "c"]])
    );
    assert_eq!(v["a"]["summary"]["scheduled"], 1);
    assert_eq!(v["b"]["summary"]["scheduled"], 2, "q placed again, on c");
    let text = gantry(&args);
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(
        text.starts_with("gantry simulate: testdata/compare/pool-cluster.yaml, decided as Kubernetes v1.37; B's nodes: 2 removed (1 pods on them to place again), 1 added\n"),
        "{text}"
    );
    let mut bad = args.to_vec();
    bad[4] = "pool";
    let out = gantry(&bad);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        "error: --compare-without-nodes: \"pool\" is not key=value"
    );
}
