//! The parity scenarios: placements real kube-scheduler v1.28.0 made, which Gantry must
//! reproduce: the same node for every pod, the same reasons for every pod left pending,
//! the same victims for every preemptor.

use std::collections::BTreeSet;
use std::path::Path;

use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile;
use std::time::Duration;

use gantry_sim::{SimEvent, SimOptions, Simulation};
use serde_json::Value;

/// The `<count> <reason>` items of a message before ` preemption:`, as a set.
fn reason_items(message: &str) -> BTreeSet<String> {
    let before = message.split(" preemption:").next().unwrap_or("");
    let items = before
        .split_once(": ")
        .map_or("", |(_, rest)| rest)
        .trim_end_matches('.');
    items.split(", ").map(str::to_string).collect()
}

fn check_scenario(dir: &Path) -> Vec<String> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let mut cluster = ClusterObjects::decode(&read("cluster.yaml"), "cluster.yaml").unwrap();
    let mut pods = ClusterObjects::decode(&read("pods.yaml"), "pods.yaml").unwrap();
    cluster.resolve_priorities().unwrap();
    pods.priority_classes = cluster.priority_classes.clone();
    pods.resolve_priorities().unwrap();
    let options = SimOptions {
        seed: 42,
        sequential: true,
        ..SimOptions::default()
    };
    let mut sim =
        Simulation::new(cluster, vec![default_profile("default-scheduler")], options).unwrap();
    for pod in &pods.pods {
        sim.schedule(
            Duration::ZERO,
            SimEvent::CreatePod(std::sync::Arc::new(pod.clone())),
        );
    }
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    let mut problems = Vec::new();
    let expected: Vec<Value> = read("expected.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(expected.len(), sim.placements().len());
    for (want, got) in expected.iter().zip(sim.placements()) {
        let name = want["pod"].as_str().unwrap();
        assert_eq!(name, got.pod);
        let want_node = want["node"].as_str();
        if want_node != got.node.as_deref() {
            problems.push(format!(
                "{name}: expected node {want_node:?}, got {:?} ({:?})",
                got.node, got.reason
            ));
            continue;
        }
        if want_node.is_none() {
            let want_reason = want["reason"].as_str().unwrap();
            let got_reason = got.reason.clone().unwrap_or_default();
            if reason_items(want_reason) != reason_items(&got_reason) {
                problems.push(format!(
                    "{name}: expected reason\n  {want_reason}\ngot\n  {got_reason}"
                ));
            }
        }
        let want_evicted: BTreeSet<String> = want["evicted"]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        let got_evicted: BTreeSet<String> = got.evicted.iter().cloned().collect();
        if want_evicted != got_evicted {
            problems.push(format!(
                "{name}: expected evictions {want_evicted:?}, got {got_evicted:?}"
            ));
        }
    }
    problems
}

#[test]
fn every_parity_scenario_matches_kube_scheduler() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/parity");
    let mut failures = Vec::new();
    let mut scenarios = 0;
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        scenarios += 1;
        for problem in check_scenario(&dir) {
            failures.push(format!(
                "{}: {problem}",
                dir.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    assert!(
        scenarios >= 13,
        "parity scenarios missing from {}",
        root.display()
    );
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
