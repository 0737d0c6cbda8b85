//! The queue through a whole simulation: a bind that fails forgets its pod, and the pods
//! that pod kept out are retried at once, as upstream moves them on `AssignedPodDelete`.

use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile;
use gantry_sim::{BindLatency, SimOptions, Simulation};

const CLUSTER: &str = r#"
kind: List
items:
- kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "1", memory: 4Gi, pods: "110"}}
- kind: Pod
  metadata: {name: a, namespace: default}
  spec: {containers: [{name: c, resources: {requests: {cpu: 600m}}}]}
- kind: Pod
  metadata: {name: b, namespace: default}
  spec: {containers: [{name: c, resources: {requests: {cpu: 600m}}}]}
"#;

#[test]
fn a_failed_bind_wakes_the_pods_its_pod_kept_out() {
    let cluster = ClusterObjects::decode(CLUSTER, "cluster.yaml").unwrap();
    let options = SimOptions {
        bind_latency: BindLatency::Fixed(Duration::from_secs(1)),
        ..SimOptions::default()
    };
    let mut sim =
        Simulation::new(cluster, vec![default_profile("default-scheduler")], options).unwrap();
    // a is assumed on n1 at 0 s and b finds no room; a's bind fails at 1 s.
    sim.api.failure_rate = 1.0;
    sim.run_until(Duration::from_secs(1)).unwrap();
    sim.api.failure_rate = 0.0;
    sim.run().unwrap();
    let placed: Vec<(String, Option<&str>)> = sim
        .placements()
        .iter()
        .map(|p| (p.pod.to_string(), p.node.as_deref()))
        .collect();
    // b was retried as soon as a was forgotten and took the room, while a backed off.
    assert_eq!(
        placed,
        [("default/a".into(), None), ("default/b".into(), Some("n1"))]
    );
    assert_eq!(sim.api.bind_failures, 1);
}
