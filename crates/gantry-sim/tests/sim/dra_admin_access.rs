//! DRAAdminAccess end to end: one node with one GPU; a pod whose claim asks for admin
//! access is placed on the GPU another pod's claim holds, and a pod with a plain claim
//! still finds it held; the claims' invariants (no device held twice) hold throughout,
//! since a device given for admin access is not held.

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
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpus}
spec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu-admin, namespace: default}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, adminAccess: true}}]}}}
";

/// Each pod's node (or `None`), the pods created one a second in this order, each with
/// one claim from the named template.
fn placements(release: Release, templates: &[&str]) -> Vec<Option<String>> {
    let mut cluster = ClusterObjects::for_release(release);
    cluster.decode_more(CLUSTER, "cluster").unwrap();
    let options = SimOptions {
        sequential: true,
        ..SimOptions::default()
    };
    let profiles = vec![default_profile_for("default-scheduler", release)];
    let mut sim = Simulation::new(cluster, profiles, options).unwrap();
    for (i, template) in templates.iter().enumerate() {
        let mut pods = ClusterObjects::for_release(release);
        let pod = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: default}}\n\
             spec: {{containers: [{{name: c}}], resourceClaims: [{{name: gpu, resourceClaimTemplateName: {template}}}]}}"
        );
        pods.decode_more(&pod, "pods").unwrap();
        let at = Duration::from_secs(i as u64);
        sim.schedule(at, SimEvent::CreatePod(Arc::new(pods.pods.remove(0))));
    }
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    (sim.placements().iter())
        .map(|p| p.node.as_deref().map(str::to_string))
        .collect()
}

#[test]
fn an_admin_claim_shares_a_held_device_and_holds_nothing() {
    let n1 = Some("n1".to_string());
    let got = placements(Release::default(), &["one-gpu", "gpu-admin", "one-gpu"]);
    assert_eq!(got, [n1.clone(), n1.clone(), None]);
    // The admin claim first: the plain claim still gets the device it does not hold.
    let got = placements(Release::default(), &["gpu-admin", "one-gpu"]);
    assert_eq!(got, [n1.clone(), n1]);
    // v1.33 has DRAAdminAccess off: the API server drops the field, and the second
    // claim is a plain one that finds the device held.
    let v133 = Release::parse(Some("1.33"), Some("DynamicResourceAllocation=true")).unwrap();
    let got = placements(v133, &["one-gpu", "gpu-admin"]);
    assert_eq!(got, [Some("n1".to_string()), None]);
}
