//! SchedulerPopFromBackoffQ against real kube-scheduler v1.36.3 (`testdata/backoff-1.36`,
//! see its README): a pod that fits nowhere, then, 500 ms later, a node where it fits. The
//! node's event moves the pod to backoff (its 1 s backoff has not ended); an idle v1.36
//! scheduler pops it at once and binds it 503 to 508 ms after it was created (5 runs). With
//! the gate off it waits its backoff out.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile_for;
use gantry_sim::{SimEvent, SimOptions, Simulation};
use serde_json::Value;

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/backoff-1.36/idle-pop")
}

fn read(file: &str) -> String {
    let path = scenario().join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// When and where Gantry binds the pod, deciding as v1.36 with `gates`.
fn bind(gates: Option<&str>) -> (Duration, Option<String>) {
    let release = Release::parse(Some("1.36"), gates).unwrap();
    let decode = |file: &str| {
        let mut objects = ClusterObjects::for_release(release);
        objects.decode_more(&read(file), file).unwrap();
        objects.resolve_priorities().unwrap();
        objects
    };
    let cluster = decode("cluster.yaml");
    let mut steps = decode("steps.yaml");
    let profiles = vec![default_profile_for("default-scheduler", release)];
    let mut sim = Simulation::new(cluster, profiles, SimOptions::default()).unwrap();
    let pod = steps.pods.remove(0);
    sim.schedule(Duration::ZERO, SimEvent::CreatePod(Arc::new(pod)));
    let node = steps.nodes.remove(0);
    sim.schedule(
        Duration::from_millis(500),
        SimEvent::AddNode(Arc::new(node)),
    );
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    let bound = sim.histories()[0].bound.expect("the pod is bound");
    let node = sim.placements()[0].node.as_deref().map(str::to_string);
    (bound, node)
}

#[test]
fn an_idle_scheduler_pops_a_backing_off_pod_as_v1_36_does() {
    let recorded: Vec<u64> = read("binds.jsonl")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["ms"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(recorded.len(), 5);
    let (low, high) = (
        recorded.iter().min().unwrap(),
        recorded.iter().max().unwrap(),
    );
    assert!(
        (500..=510).contains(low) && (500..=510).contains(high),
        "{recorded:?}"
    );

    let (bound, node) = bind(None);
    assert_eq!(node.as_deref(), Some("node-b"));
    // Popped when the node arrives; bound after one simulated API round trip (a few ms,
    // where upstream's took 3 to 8 against its fake API server).
    assert!(
        (Duration::from_millis(500)..Duration::from_millis(550)).contains(&bound),
        "{bound:?}"
    );
    // With the gate off the pod waits out its backoff (from 0 s, 1 s); upstream, whose
    // backoff flush ticks once a second, bound it at 2,001 ms in 3 runs of 3.
    let (bound, _) = bind(Some("SchedulerPopFromBackoffQ=false"));
    assert!(bound >= Duration::from_secs(1), "{bound:?}");
}
