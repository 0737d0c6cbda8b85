//! DynamicResources on the what-if snapshot: claims from templates, allocation on the
//! chosen node, shared claims, allocations gone on revert, upstream's messages, and
//! refusals of what the allocator does not support. Through both stores.

use std::sync::Arc;

use gantry_api::decode::ClusterObjects;
use gantry_api::dra::ClaimKey;
use gantry_api::{Pod, Sym};
use gantry_framework::plugins::default_profile;
use gantry_whatif::estimator::{NodeTemplate, equivalence_groups, estimate};
use gantry_whatif::{ClusterSnapshot, SchedulingError, StoreKind, with_dynamic_resources};

fn testdata(file: &str) -> String {
    let path = format!(
        "{}/../../testdata/whatif/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn cluster() -> ClusterObjects {
    ClusterObjects::decode(&testdata("dra-cluster.yaml"), "dra-cluster.yaml").unwrap()
}

fn snapshot(kind: StoreKind, cluster: &ClusterObjects) -> ClusterSnapshot {
    ClusterSnapshot::from_objects(
        kind,
        with_dynamic_resources(default_profile("default-scheduler")),
        cluster,
    )
    .unwrap()
}

fn pods(yaml: &str) -> Vec<Arc<Pod>> {
    ClusterObjects::decode(yaml, "pods")
        .unwrap()
        .pods
        .into_iter()
        .map(Arc::new)
        .collect()
}

fn training_pods() -> Vec<Arc<Pod>> {
    pods(&testdata("gpu-pods.yaml"))
}

fn anywhere(s: &mut ClusterSnapshot, pod: &Arc<Pod>) -> Result<Sym, SchedulingError> {
    s.schedule_anywhere(pod, None, &gantry_whatif::Destinations::ANY)
}

fn claim_key(name: &str) -> ClaimKey {
    ClaimKey {
        namespace: Sym::new("default"),
        name: Sym::new(name),
    }
}

const KINDS: [StoreKind; 2] = [StoreKind::Basic, StoreKind::Delta];

#[test]
fn template_claims_are_made_allocated_and_gone_on_revert() {
    for kind in KINDS {
        let cluster = cluster();
        let mut s = snapshot(kind, &cluster);
        let pods = training_pods();
        s.fork();
        assert_eq!(anywhere(&mut s, &pods[0]).unwrap(), Sym::new("gpu-1"));
        assert_eq!(anywhere(&mut s, &pods[1]).unwrap(), Sym::new("gpu-1"));
        let claim = s
            .store()
            .claim(claim_key("train-0-gpu"))
            .expect("made from the template");
        let allocation = claim.allocation.as_ref().expect("allocated at PreBind");
        assert_eq!(allocation.devices.len(), 1);
        assert_eq!(claim.reserved_for.len(), 1);
        assert_eq!(&*claim.reserved_for[0].name, "train-0");
        assert_eq!(claim.owner_pod.as_deref(), Some(&*pods[0].uid));
        assert_eq!(s.store().allocated_devices().len(), 2, "{kind:?}");

        // Both GPUs are taken: the third pod fits nowhere, with upstream's reason.
        let error = anywhere(&mut s, &pods[2]).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("cannot allocate all claims"), "{message}");
        assert!(message.starts_with("0/2 nodes are available:"), "{message}");

        s.revert().unwrap();
        assert!(
            s.store().claim(claim_key("train-0-gpu")).is_none(),
            "the claim went with the fork"
        );
        assert!(s.store().allocated_devices().is_empty());
        assert!(
            anywhere(&mut s, &pods[2]).is_ok(),
            "the GPUs are free again"
        );
    }
}

#[test]
fn removing_a_pod_frees_its_devices() {
    for kind in KINDS {
        let cluster = cluster();
        let mut s = snapshot(kind, &cluster);
        let pods = training_pods();
        anywhere(&mut s, &pods[0]).unwrap();
        anywhere(&mut s, &pods[1]).unwrap();
        s.remove_pod(Sym::new("gpu-1"), &pods[0]).unwrap();
        assert!(
            s.store().claim(claim_key("train-0-gpu")).is_none(),
            "the pod's own claim is deleted"
        );
        assert_eq!(s.store().allocated_devices().len(), 1);
        assert_eq!(anywhere(&mut s, &pods[2]).unwrap(), Sym::new("gpu-1"));
    }
}

/// The autoscaler's `RemoveNodeInfo`: the claims the node's pods own go with the node.
#[test]
fn removing_a_node_deletes_the_claims_its_pods_own() {
    for kind in KINDS {
        let cluster = cluster();
        let mut s = snapshot(kind, &cluster);
        let pods = training_pods();
        let node = anywhere(&mut s, &pods[0]).unwrap();
        assert!(s.store().claim(claim_key("train-0-gpu")).is_some());
        s.remove_node(node).unwrap();
        assert!(
            s.store().claim(claim_key("train-0-gpu")).is_none(),
            "{kind:?}: the pod's own claim went with its node"
        );
        assert!(s.store().allocated_devices().is_empty(), "{kind:?}");
    }
}

#[test]
fn a_shared_claim_is_allocated_once_and_pins_its_users_to_the_node() {
    let users = pods(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: default}
spec:
  containers: [{name: c}]
  resourceClaims: [{name: gpu, resourceClaimName: shared-gpu}]
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: default}
spec:
  containers: [{name: c}]
  resourceClaims: [{name: gpu, resourceClaimName: shared-gpu}]
"#,
    );
    for kind in KINDS {
        let cluster = cluster();
        let mut s = snapshot(kind, &cluster);
        assert_eq!(anywhere(&mut s, &users[0]).unwrap(), Sym::new("gpu-1"));
        let claim = s.store().claim(claim_key("shared-gpu")).unwrap();
        let allocation = claim.allocation.clone().unwrap();
        assert_eq!(
            allocation.devices[0].device.device,
            Sym::new("gpu-1"),
            "only gpu-1 has 80Gi"
        );
        // The second user may only go where the allocation is.
        let error = s
            .schedule_on_node(&users[1], Sym::new("cpu-1"))
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("resourceclaim not available on the node"),
            "{error}"
        );
        s.schedule_on_node(&users[1], Sym::new("gpu-1")).unwrap();
        let claim = s.store().claim(claim_key("shared-gpu")).unwrap();
        assert_eq!(claim.reserved_for.len(), 2);
        assert_eq!(claim.allocation, Some(allocation), "allocated once");
        assert_eq!(s.store().allocated_devices().len(), 1);
    }
}

#[test]
fn missing_claims_and_classes_are_reported_as_upstream() {
    let lost = pods(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: lost, namespace: default}
spec:
  containers: [{name: c}]
  resourceClaims: [{name: gpu, resourceClaimName: nowhere}]
"#,
    );
    let cluster = cluster();
    let mut s = snapshot(StoreKind::Delta, &cluster);
    let message = anywhere(&mut s, &lost[0]).unwrap_err().to_string();
    assert!(
        message.contains(r#"could not find ResourceClaim "default/nowhere""#),
        "{message}"
    );

    let mut no_class = cluster.clone();
    no_class.dra.device_classes.clear();
    let mut s = snapshot(StoreKind::Delta, &no_class);
    let message = anywhere(&mut s, &training_pods()[0])
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("request gpu: device class gpu.example.com does not exist"),
        "{message}"
    );
}

#[test]
fn without_dynamic_resources_in_the_profile_claims_would_be_ignored_so_it_is_added() {
    let profile = with_dynamic_resources(default_profile("default-scheduler"));
    assert!(
        profile
            .filter
            .iter()
            .any(|p| p.name() == "DynamicResources")
    );
    let again = with_dynamic_resources(profile);
    assert_eq!(
        again
            .filter
            .iter()
            .filter(|p| p.name() == "DynamicResources")
            .count(),
        1
    );
}

/// Estimates ten GPU pods of one Job against the node template in `template_file`: how
/// many new nodes, after checking every pod got one and the estimate left nothing behind.
fn nodes_for_ten_gpu_pods(template_file: &str) -> usize {
    let cluster = cluster();
    let mut s = snapshot(StoreKind::Delta, &cluster);
    let template_objects = ClusterObjects::decode(&testdata(template_file), template_file).unwrap();
    let template = NodeTemplate {
        node: template_objects.nodes[0].clone(),
        slices: template_objects
            .dra
            .slices
            .iter()
            .map(|s| (**s).clone())
            .collect(),
    };
    // Ten GPU pods with a controller, so they form one group.
    let mut many = Vec::new();
    for i in 0..10 {
        let mut pod = Pod::clone(&training_pods()[0]);
        pod.name = Arc::from(format!("job-{i}"));
        pod.uid = Arc::from(format!("default/job-{i}"));
        pod.controller = Some(Arc::new(gantry_api::OwnerRef {
            api_version: Sym::new("batch/v1"),
            kind: Sym::new("Job"),
            name: Arc::from("job"),
            uid: Arc::from("job-uid"),
        }));
        many.push(Arc::new(pod));
    }
    let groups = equivalence_groups(&many);
    assert_eq!(groups.len(), 1);
    let result = estimate(&mut s, &groups, &template, None).unwrap();
    assert_eq!(result.scheduled.len(), 10);
    assert!(
        s.store().allocated_devices().is_empty(),
        "the estimate's allocations are reverted"
    );
    result.nodes_needed
}

#[test]
fn scale_up_copies_the_templates_devices() {
    assert_eq!(
        nodes_for_ten_gpu_pods("gpu-template.yaml"),
        3,
        "4 + 4 + 2 GPUs"
    );
}

/// A template whose GPU is three partitions sharing its 40Gi: the counters take two
/// 20Gi claims a node, not three, so ten pods need five nodes (four without counters).
#[test]
fn scale_up_counts_the_templates_partitions_by_their_counters() {
    assert_eq!(nodes_for_ten_gpu_pods("partitioned-gpu-template.yaml"), 5);
}

/// A template whose GPU claims share by capacity (DRAConsumableCapacity): each claim takes
/// the policy's 10Gi of 40Gi, so ten pods need three nodes; every share is counted across
/// the estimate's pods (without the shares' tally, one node would take all ten).
#[test]
fn scale_up_counts_the_shares_of_a_shared_gpu() {
    assert_eq!(nodes_for_ten_gpu_pods("shared-gpu-template.yaml"), 3);
}

#[test]
fn unsupported_features_are_refused_naming_the_field() {
    let cases = [(
        r#"{apiVersion: resource.k8s.io/v1beta1, kind: DeviceClass, metadata: {name: x}}"#,
        "DeviceClass x: apiVersion:",
    )];
    for (yaml, expected) in cases {
        let error = ClusterObjects::decode(yaml, "input")
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{error}\n  expected: {expected}");
    }
}

/// Upstream's PreFilter refusals: a claim being deleted, a claim whose 256 consumer slots
/// are taken, and a claim a template should have made for the pod but that another owns.
#[test]
fn unusable_claims_are_refused_with_upstreams_reasons() {
    let user = |claim: &str| {
        pods(&format!(
            "{{apiVersion: v1, kind: Pod, metadata: {{name: u, namespace: default}},
               spec: {{containers: [{{name: c}}], resourceClaims: [{{name: gpu, resourceClaimName: {claim}}}]}}}}"
        ))
        .remove(0)
    };
    let mut deleting = cluster();
    deleting.dra.claims[0].deleting = true;
    let mut s = snapshot(StoreKind::Delta, &deleting);
    let message = anywhere(&mut s, &user("shared-gpu"))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(r#"resourceclaim "shared-gpu" is being deleted"#),
        "{message}"
    );

    let mut full = cluster();
    let claim = &mut full.dra.claims[0];
    claim.allocation = Some(Arc::new(gantry_api::dra::Allocation {
        devices: Vec::new(),
        node_selector: None,
    }));
    claim.reserved_for = (0..gantry_api::dra::RESERVED_FOR_MAX_SIZE)
        .map(|i| gantry_api::dra::ClaimConsumer {
            name: Arc::from(format!("other-{i}")),
            uid: Arc::from(format!("other-{i}")),
        })
        .collect();
    let mut s = snapshot(StoreKind::Delta, &full);
    let message = anywhere(&mut s, &user("shared-gpu"))
        .unwrap_err()
        .to_string();
    assert!(message.contains("resourceclaim in use"), "{message}");

    // train-0's template claim exists already, but belongs to someone else.
    let mut stolen = cluster();
    let mut foreign = stolen.dra.claims[0].clone();
    foreign.name = Arc::from("train-0-gpu");
    foreign.owner_pod = Some(Arc::from("someone-else"));
    stolen.dra.claims.push(foreign);
    let mut s = snapshot(StoreKind::Delta, &stolen);
    let message = anywhere(&mut s, &training_pods()[0])
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("ResourceClaim default/train-0-gpu was not created for pod default/train-0 (pod is not owner)"),
        "{message}"
    );
}

/// `firstAvailable` end to end: with one GPU left, a claim asking first for two and then
/// for one gets one, under `<request>/<subrequest>`; a subrequest naming a missing class
/// is refused in PreFilter with its full name, as upstream's PreFilter words it.
#[test]
fn first_available_falls_back_to_the_next_subrequest() {
    let extra = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-or-one, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - {name: two, deviceClassName: gpu.example.com, count: 2}
        - {name: one, deviceClassName: gpu.example.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: missing-class, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - {name: big, deviceClassName: no-such-class}
        - {name: one, deviceClassName: gpu.example.com}
"#;
    let pod = |name: &str, template: &str| {
        pods(&format!(
            "{{apiVersion: v1, kind: Pod, metadata: {{name: {name}, namespace: default}},
               spec: {{containers: [{{name: c}}], resourceClaims: [{{name: gpu, resourceClaimTemplateName: {template}}}]}}}}"
        ))
        .remove(0)
    };
    for kind in KINDS {
        let mut cluster = cluster();
        cluster.decode_more(extra, "extra").unwrap();
        let mut s = snapshot(kind, &cluster);
        assert_eq!(
            anywhere(&mut s, &training_pods()[0]).unwrap(),
            Sym::new("gpu-1")
        );
        assert_eq!(
            anywhere(&mut s, &pod("fallback", "two-or-one")).unwrap(),
            Sym::new("gpu-1")
        );
        let claim = s.store().claim(claim_key("fallback-gpu")).unwrap();
        let devices = &claim.allocation.as_ref().unwrap().devices;
        assert_eq!(devices.len(), 1, "{kind:?}");
        assert_eq!(&*devices[0].request, "gpu/one");

        let message = anywhere(&mut s, &pod("lost", "missing-class"))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("request gpu/big: device class no-such-class does not exist"),
            "{message}"
        );
    }
}

/// Extended resources backed by devices (DRAExtendedResource): pods asking for
/// `example.com/gpu: 1`, which the class serves, each get a claim of their own on a
/// node template with four GPUs in a ResourceSlice and no `example.com/gpu` in its
/// allocatable: ten need three nodes. A pod placed and removed again takes its claim
/// with it.
#[test]
fn scale_up_gives_extended_resources_devices() {
    let class =
        "{apiVersion: resource.k8s.io/v1, kind: DeviceClass, metadata: {name: gpu.example.com},
        spec: {extendedResourceName: example.com/gpu,
               selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}}";
    let template = "{apiVersion: v1, kind: Node, metadata: {name: gpu-node, labels: {kubernetes.io/hostname: gpu-node}},
        status: {allocatable: {cpu: '16', memory: 64Gi, pods: '110'}}}
---
{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {name: gpu-node-gpus},
 spec: {driver: gpu.example.com, nodeName: gpu-node, pool: {name: gpu-node, generation: 1, resourceSliceCount: 1},
        devices: [{name: gpu-0}, {name: gpu-1}, {name: gpu-2}, {name: gpu-3}]}}";
    let cluster = ClusterObjects::decode(class, "class.yaml").unwrap();
    let template = ClusterObjects::decode(template, "template.yaml").unwrap();
    let template = NodeTemplate {
        node: template.nodes[0].clone(),
        slices: template.dra.slices.iter().map(|s| (**s).clone()).collect(),
    };
    let many: Vec<Arc<Pod>> = pods(
        &(0..10)
            .map(|i| {
                format!(
                    "{{apiVersion: v1, kind: Pod, metadata: {{name: job-{i}, namespace: default,
                       ownerReferences: [{{apiVersion: batch/v1, kind: Job, name: job, uid: job-uid, controller: true}}]}},
                      spec: {{containers: [{{name: c, image: i, resources: {{limits: {{example.com/gpu: 1}}}}}}]}}}}"
                )
            })
            .collect::<Vec<_>>()
            .join("\n---\n"),
    );
    for kind in KINDS {
        let mut s = snapshot(kind, &cluster);
        let groups = equivalence_groups(&many);
        let result = estimate(&mut s, &groups, &template, None).unwrap();
        assert_eq!(
            (result.scheduled.len(), result.nodes_needed),
            (10, 3),
            "{kind:?}"
        );
        assert!(s.store().allocated_devices().is_empty(), "reverted");
    }
    let mut with_node = cluster;
    with_node.nodes.push(template.node.clone());
    with_node.dra.slices = template.slices.iter().cloned().map(Arc::new).collect();
    for kind in KINDS {
        let mut s = snapshot(kind, &with_node);
        let node = anywhere(&mut s, &many[0]).unwrap();
        let key = gantry_api::dra_extended::extended_claim_key(&many[0]);
        let claim = s.store().claim(key).expect("the pod's claim");
        assert!(claim.extended_resource && claim.is_reserved_for(&many[0].uid));
        assert_eq!(s.store().allocated_devices().len(), 1, "{kind:?}");
        s.remove_pod(node, &many[0]).unwrap();
        assert!(s.store().claim(key).is_none(), "{kind:?}");
        assert!(s.store().allocated_devices().is_empty(), "{kind:?}");
    }
}
