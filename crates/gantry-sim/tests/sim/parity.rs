//! The parity scenarios: placements kube-scheduler made, which Gantry must reproduce when
//! it decides as the same release: the same node for every pod, the same message, word
//! for word, for every pod left pending, the same victims for every preemptor.
//! `testdata/parity` holds real kube-scheduler v1.28.0 recordings, `testdata/parity-1.35`
//! real v1.35.4 ones and `testdata/parity-1.36` real v1.36.3 ones (see their READMEs). A
//! scenario that holds only `expected.jsonl` re-decides the inputs of the scenario of the same
//! name in `testdata/parity-1.35`.

use std::collections::BTreeSet;
use std::path::Path;

use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile_for;
use std::time::Duration;

use gantry_sim::{SimEvent, SimOptions, Simulation};
use serde_json::Value;

fn check_scenario(dir: &Path, release: Release) -> Vec<String> {
    let inputs = if dir.join("cluster.yaml").exists() {
        dir.to_path_buf()
    } else {
        dir.join("../../parity-1.35").join(dir.file_name().unwrap())
    };
    let read = |f: &str| {
        let dir = if f == "expected.jsonl" { dir } else { &inputs };
        std::fs::read_to_string(dir.join(f))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(f).display()))
    };
    let decode = |f: &str| {
        let mut objects = ClusterObjects::for_release(release);
        objects.decode_more(&read(f), f).unwrap();
        objects
    };
    let mut cluster = decode("cluster.yaml");
    let mut pods = decode("pods.yaml");
    cluster.dra.extend(std::mem::take(&mut pods.dra));
    cluster.resolve_priorities().unwrap();
    pods.priority_classes = cluster.priority_classes.clone();
    pods.resolve_priorities().unwrap();
    let options = SimOptions {
        seed: 42,
        sequential: true,
        ..SimOptions::default()
    };
    let mut sim = Simulation::new(
        cluster,
        vec![default_profile_for("default-scheduler", release)],
        options,
    )
    .unwrap();
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
        assert_eq!(got.pod, name);
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
            if want_reason != got_reason {
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

/// Every scenario under `testdata/<corpus>` decided as `release`; at least `minimum`.
fn check_corpus(corpus: &str, release: Release, minimum: usize) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(corpus);
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
        for problem in check_scenario(&dir, release) {
            failures.push(format!(
                "{}: {problem}",
                dir.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    assert!(
        scenarios >= minimum,
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

#[test]
fn the_v1_28_recordings_match_when_deciding_as_v1_28() {
    check_corpus("parity", Release::at(28), 13);
}

#[test]
fn the_v1_35_recordings_match_when_deciding_as_v1_35() {
    check_corpus("parity-1.35", Release::at(35), 36);
}

#[test]
fn the_v1_36_recordings_match_when_deciding_as_v1_36() {
    check_corpus("parity-1.36", Release::at(36), 39);
}

/// v1.37, the default, is derived (`testdata/parity-1.37/README.md`): of what v1.37
/// changes, nothing reaches these scenarios (no claims, no CSI drivers, no gangs), so it
/// must decide them as v1.36.3 did.
#[test]
fn v1_37_by_default_decides_the_v1_36_recordings_as_recorded() {
    assert_eq!(Release::default(), Release::at(37));
    check_corpus("parity-1.36", Release::default(), 39);
}
