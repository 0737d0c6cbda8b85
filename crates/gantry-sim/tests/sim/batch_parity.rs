//! OpportunisticBatching against real kube-scheduler v1.36.3 (`testdata/batch-1.36`, see
//! its README): 200 nodes, so that a cycle searches 100 of them, and ten pods created at
//! once under a profile whose PodTopologySpread has no default constraints. Pods that fit
//! one to a node take the best nodes of the first pod's search, one after another; pods of
//! two shapes, pods that fit twice on a node, and the gate turned off each search the next
//! hundred nodes in turn. Every pod must land where upstream put it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use gantry_framework::config::SchedulerConfig;
use gantry_sim::{SimEvent, SimOptions, Simulation};
use serde_json::Value;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/batch-1.36")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The node of each pod, in the order of `steps.yaml`, as Gantry decides scenario `name`
/// with `gates` over v1.36's defaults.
fn decide(name: &str, steps: &str, gates: Option<&str>) -> Vec<(String, Option<String>)> {
    let release = Release::parse(Some("1.36"), gates).unwrap();
    let inputs = corpus().join("one-pod-per-node");
    let decode = |path: &Path| {
        let mut objects = ClusterObjects::for_release(release);
        objects.decode_more(&read(path), name).unwrap();
        objects
    };
    let mut cluster = decode(&inputs.join("cluster.yaml"));
    cluster.resolve_priorities().unwrap();
    let mut pods = decode(&corpus().join(steps).join("steps.yaml"));
    pods.resolve_priorities().unwrap();
    let config_path = inputs.join("config.yaml");
    let config = SchedulerConfig::parse_for(&read(&config_path), "config.yaml", release).unwrap();
    let options = SimOptions {
        seed: 7,
        ..SimOptions::default()
    };
    let mut sim = Simulation::new(cluster, config.profiles, options).unwrap();
    for pod in pods.pods {
        sim.schedule(Duration::ZERO, SimEvent::CreatePod(Arc::new(pod)));
    }
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    (sim.placements().iter())
        .map(|p| (p.pod.to_string(), p.node.as_deref().map(str::to_string)))
        .collect()
}

fn recorded(name: &str) -> Vec<(String, Option<String>)> {
    read(&corpus().join(name).join("expected.jsonl"))
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let node = v["node"].as_str().map(str::to_string);
            (v["pod"].as_str().unwrap().to_string(), node)
        })
        .collect()
}

#[test]
fn like_pods_take_the_first_searchs_best_nodes_as_v1_36_does() {
    for (name, steps, gates) in [
        ("one-pod-per-node", "one-pod-per-node", None),
        ("two-shapes", "two-shapes", None),
        ("fits-twice", "fits-twice", None),
        (
            "gate-off",
            "one-pod-per-node",
            Some("OpportunisticBatching=false"),
        ),
    ] {
        let want = recorded(name);
        assert_eq!(want.len(), 10, "{name}");
        assert_eq!(decide(name, steps, gates), want, "{name}");
    }
}

/// The corpus tells batching apart: with the gate off, the pods of `one-pod-per-node`
/// land elsewhere than upstream put them with it on.
#[test]
fn the_gate_changes_where_the_pods_go() {
    let off = decide(
        "one-pod-per-node",
        "one-pod-per-node",
        Some("OpportunisticBatching=false"),
    );
    let on = recorded("one-pod-per-node");
    let moved = off.iter().zip(&on).filter(|(a, b)| a != b).count();
    assert_eq!(moved, 9, "{off:?}");
}
