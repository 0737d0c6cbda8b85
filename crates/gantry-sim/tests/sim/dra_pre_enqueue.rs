//! DynamicResources' PreEnqueue (v1.36.3 `dynamicresources.go`): a pod whose claim is not
//! there yet is held back, never tried, until the claim is made; a pod whose template is
//! missing waits for a claim the controller cannot make. Upstream writes no
//! `FailedScheduling` for either while it waits (seen on a real v1.36.2 control plane,
//! `testdata/dra-1.36/README.md`).

use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile;
use gantry_sim::{PodStatus, SimEvent, SimOptions, Simulation};

const CLUSTER: &str = "apiVersion: v1
kind: List
items:
- {apiVersion: resource.k8s.io/v1, kind: DeviceClass, metadata: {name: gpu},
    spec: {selectors: [{cel: {expression: device.driver == \"gpu.example.com\"}}]}}
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}},
    status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110'}}}
- {apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {name: n1-gpus},
    spec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1},
      devices: [{name: gpu-0}, {name: gpu-1}]}}
";

fn decode(text: &str) -> ClusterObjects {
    ClusterObjects::decode(text, "objects.yaml").unwrap()
}

/// A pod naming the claim `claim`, or made from the template `template` (never created).
fn pod(name: &str, source: &str) -> Arc<gantry_api::Pod> {
    let text = format!(
        "{{apiVersion: v1, kind: Pod, metadata: {{name: {name}, namespace: default}},
  spec: {{resourceClaims: [{{name: gpu, {source}}}],
    containers: [{{name: c, image: i, resources: {{requests: {{cpu: '1'}}, claims: [{{name: gpu}}]}}}}]}}}}"
    );
    Arc::new(decode(&text).pods.remove(0))
}

fn claim(name: &str) -> Arc<gantry_api::dra::ResourceClaim> {
    let text = format!(
        "{{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {{name: {name}, namespace: default}},
  spec: {{devices: {{requests: [{{name: r, exactly: {{deviceClassName: gpu}}}}]}}}}}}"
    );
    Arc::new(decode(&text).dra.claims.remove(0))
}

#[test]
fn a_pod_whose_claim_is_not_there_yet_is_tried_only_once_it_is() {
    let profiles = vec![default_profile("default-scheduler")];
    let mut sim = Simulation::new(decode(CLUSTER), profiles, SimOptions::default()).unwrap();
    sim.schedule(
        Duration::ZERO,
        SimEvent::CreatePod(pod("early", "resourceClaimName: made-later")),
    );
    sim.schedule(
        Duration::ZERO,
        SimEvent::CreatePod(pod("orphan", "resourceClaimTemplateName: missing")),
    );
    sim.schedule(
        Duration::from_secs(3),
        SimEvent::CreateClaim(claim("made-later")),
    );
    sim.run().unwrap();
    let outcome: Vec<_> = (sim.placements().iter().zip(sim.histories()))
        .map(|(p, h)| {
            (
                p.pod.to_string(),
                p.node.map(|n| n.to_string()),
                p.reason.clone(),
                h.status,
                h.attempts,
                h.bound.map(|at| at >= Duration::from_secs(3)),
            )
        })
        .collect();
    assert_eq!(
        outcome,
        [
            (
                "default/early".into(),
                Some("n1".into()),
                None,
                PodStatus::Bound,
                1,
                Some(true),
            ),
            (
                "default/orphan".into(),
                None,
                Some(r#"pod "default/orphan": ResourceClaim not created yet"#.into()),
                PodStatus::Gated,
                0,
                None,
            ),
        ]
    );
}
