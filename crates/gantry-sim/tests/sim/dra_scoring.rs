//! DynamicResources' Score as v1.35.4 has it (`computeScore` pairs *all* the pod's claims
//! with the allocations of the claims still to allocate, by position): a pod with a claim
//! allocated already and one to allocate fails at Score when two nodes are feasible,
//! while a pod whose claims are all to allocate scores every node 0 and is placed; and as
//! v1.36.3 has it, which places both.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile_for;
use gantry_sim::{SimEvent, SimOptions, Simulation};

const CLUSTER: &str = "
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nic}
spec: {selectors: [{cel: {expression: 'device.driver == \"nic.example.com\"'}}]}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpus}
spec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n2-gpus}
spec: {driver: gpu.example.com, nodeName: n2, pool: {name: n2, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: fabric}
spec: {driver: nic.example.com, allNodes: true, pool: {name: fabric, generation: 1, resourceSliceCount: 1}, devices: [{name: nic-0}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: fabric-nic, namespace: default}
spec: {devices: {requests: [{name: nic, exactly: {deviceClassName: nic}}]}}
status:
  allocation:
    devices: {results: [{request: nic, driver: nic.example.com, pool: fabric, device: nic-0}]}
";

fn run(claims: &str) -> gantry_sim::Placement {
    run_as(claims, Release::default())
}

fn run_as(claims: &str, release: Release) -> gantry_sim::Placement {
    let mut cluster = ClusterObjects::for_release(release);
    cluster.decode_more(CLUSTER, "cluster").unwrap();
    let options = SimOptions {
        sequential: true,
        ..SimOptions::default()
    };
    let mut sim = Simulation::new(
        cluster,
        vec![default_profile_for("default-scheduler", release)],
        options,
    )
    .unwrap();
    let mut pods = ClusterObjects::for_release(release);
    pods.decode_more(
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: default}}\n\
             spec: {{containers: [{{name: c}}], resourceClaims: {claims}}}"
        ),
        "pods",
    )
    .unwrap();
    sim.schedule(
        Duration::ZERO,
        SimEvent::CreatePod(Arc::new(pods.pods.remove(0))),
    );
    sim.run().unwrap();
    sim.placements()[0].clone()
}

#[test]
fn claims_all_to_allocate_score_zero_and_the_pod_is_placed() {
    let placed = run("[{name: gpu, resourceClaimTemplateName: one-gpu}]");
    assert!(placed.node.is_some(), "{placed:?}");
}

/// v1.35.4's `computeScore` pairs the pod's claims with Filter's allocations by position
/// and fails the cycle; v1.36.3 reads the allocated claim's own allocation and places it.
#[test]
fn an_allocated_claim_beside_one_to_allocate_fails_at_score_in_v1_35_only() {
    let claims = "[{name: nic, resourceClaimName: fabric-nic}, {name: gpu, resourceClaimTemplateName: one-gpu}]";
    let placed = run(claims);
    assert!(placed.node.is_some(), "{placed:?}");
    let failed = run_as(claims, Release::at(35));
    assert_eq!(failed.node, None);
    let reason = failed.reason.unwrap_or_default();
    assert!(
        reason.contains("number of allocations 1 is smaller than number of claims"),
        "{reason}"
    );
}
