//! VolumeBinding's storage capacity check and its volume phases against real kube-scheduler
//! v1.36.3 (`testdata/storage-1.36`, see its README): claims provisioned only where a
//! CSIStorageCapacity of their class reaches the node and allows their size (when their
//! CSI driver opts in), and local volumes matched only in phase Available. Every pod must
//! land where upstream put it, or wait with upstream's message word for word.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile_for;
use gantry_sim::{SimEvent, SimOptions, Simulation};
use serde_json::Value;

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/storage-1.36/capacity")
}

fn read(file: &str) -> String {
    let path = scenario().join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

type Outcome = (String, Option<String>, Option<String>);

/// Each pod's node or message, as Gantry decides the scenario: the pods created 2 s apart,
/// as they were recorded.
fn decide() -> Vec<Outcome> {
    let release = Release::parse(Some("1.36"), None).unwrap();
    let decode = |file: &str| {
        let mut objects = ClusterObjects::for_release(release);
        objects.decode_more(&read(file), file).unwrap();
        objects.resolve_priorities().unwrap();
        objects
    };
    let cluster = decode("cluster.yaml");
    let steps = decode("steps.yaml");
    let profiles = vec![default_profile_for("default-scheduler", release)];
    let mut sim = Simulation::new(cluster, profiles, SimOptions::default()).unwrap();
    for (i, pod) in steps.pods.into_iter().enumerate() {
        let at = Duration::from_secs(2 * i as u64);
        sim.schedule(at, SimEvent::CreatePod(Arc::new(pod)));
    }
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    (sim.placements().iter())
        .map(|p| {
            let node = p.node.as_deref().map(str::to_string);
            (p.pod.to_string(), node, p.reason.clone())
        })
        .collect()
}

fn recorded() -> Vec<Outcome> {
    read("expected.jsonl")
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let text = |key: &str| v[key].as_str().map(str::to_string);
            (text("pod").unwrap(), text("node"), text("reason"))
        })
        .collect()
}

#[test]
fn storage_capacity_and_volume_phases_decide_as_v1_36_does() {
    let want = recorded();
    assert_eq!(want.len(), 5);
    assert_eq!(decide(), want);
}
