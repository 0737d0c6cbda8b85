//! Devices are never given twice: random ResourceSlices (node-local and shared; the
//! nodes' GPUs whole, partitioned into the whole and two halves that consume one counter
//! set, or shared by capacity with a claim taking half of one by default),
//! claim templates (counts and `All`), claims shared by name, extended resources the class
//! serves (every third node's device plugin serves one too), and pods that arrive, bind, fail
//! to bind, are deleted and are preempted, scheduled by 1 to 3 instances with 0 to 20 ms
//! of event latency. At the end:
//! - no device is allocated to two claims, no pool's counter is consumed beyond what it
//!   holds, no shared device's capacity beyond what it has, and every bound pod's claims
//!   are allocated and reserved for it (the
//!   simulated API's claims, checked by the simulation);
//! - every instance's device index equals a recount from its claims and in-flight
//!   allocations (`Simulation::check_invariants`);
//! - with one instance, no pod going away and no failed bind, the API never refuses a
//!   claim write (the next cycle already saw the devices Reserve took);
//! - this file's own count: a pod bound on a node holds no more devices there than the
//!   node's slices (and the shared ones it reaches) publish.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile;
use gantry_sim::{BindLatency, SimEvent, SimOptions, Simulation};
use proptest::prelude::*;

const DRIVER: &str = "gpu.example.com";

#[derive(Debug, Clone)]
struct PodSpec {
    /// 0: a one-device template, 1: a two-device template, 2: an `All` template,
    /// 3: the shared claim, 4: no claim, 5: `example.com/gpu: 1`, which the class serves
    /// (DRAExtendedResource) where a node's device plugin does not.
    claim: u8,
    milli_cpu: i64,
    priority: i32,
    /// Deleted this many milliseconds after arriving, if set.
    deleted_after_ms: Option<u64>,
}

/// How the nodes' GPUs are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gpus {
    Whole,
    /// The whole GPU and two halves, consuming one counter set.
    Partitioned,
    /// One device with `allowMultipleAllocations` and 40Gi, of which a claim that names
    /// no amount takes 20Gi (its request policy's default).
    Shared,
}

fn cluster_yaml(devices_per_node: &[u8], shared_devices: u8, gpus: Gpus) -> String {
    let mut docs = vec![format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: gpu}}\n\
         spec: {{extendedResourceName: example.com/gpu, selectors: [{{cel: {{expression: 'device.driver == \"{DRIVER}\"'}}}}]}}"
    )];
    for (template, count) in [
        ("one", "count: 1"),
        ("two", "count: 2"),
        ("all", "allocationMode: All"),
    ] {
        docs.push(format!(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n\
             metadata: {{name: {template}, namespace: default}}\n\
             spec: {{spec: {{devices: {{requests: [{{name: r, exactly: {{deviceClassName: gpu, {count}}}}}]}}}}}}"
        ));
    }
    docs.push(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n\
         metadata: {name: shared, namespace: default}\n\
         spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}"
            .to_string(),
    );
    for (i, &devices) in devices_per_node.iter().enumerate() {
        // Every third node's device plugin serves one `example.com/gpu`.
        let plugin_gpu = if has_plugin_gpu(i) {
            ", example.com/gpu: '1'"
        } else {
            ""
        };
        docs.push(format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}, labels: {{kubernetes.io/hostname: n{i}, rack: r{}}}}}\n\
             status: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '110'{plugin_gpu}}}}}",
            i % 2
        ));
        if devices > 0 && gpus == Gpus::Partitioned {
            // Each GPU as the whole and two halves, which consume its counter set's 40Gi.
            let sets: Vec<String> = (0..devices)
                .map(|d| format!("{{name: gpu-{d}, counters: {{memory: {{value: 40Gi}}}}}}"))
                .collect();
            docs.push(format!(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: n{i}-counters}}\n\
                 spec: {{driver: {DRIVER}, nodeName: n{i}, pool: {{name: n{i}, generation: 1, resourceSliceCount: 2}}, sharedCounters: [{}]}}",
                sets.join(", ")
            ));
            let partition = |d: u8, name: &str, memory: &str| {
                format!(
                    "{{name: {name}, consumesCounters: [{{counterSet: gpu-{d}, counters: {{memory: {{value: {memory}}}}}}}]}}"
                )
            };
            let list: Vec<String> = (0..devices)
                .flat_map(|d| {
                    [
                        partition(d, &format!("gpu-{d}"), "40Gi"),
                        partition(d, &format!("gpu-{d}-a"), "20Gi"),
                        partition(d, &format!("gpu-{d}-b"), "20Gi"),
                    ]
                })
                .collect();
            docs.push(format!(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: n{i}-gpus}}\n\
                 spec: {{driver: {DRIVER}, nodeName: n{i}, pool: {{name: n{i}, generation: 1, resourceSliceCount: 2}}, devices: [{}]}}",
                list.join(", ")
            ));
        } else if devices > 0 {
            let shared = if gpus == Gpus::Shared {
                ", allowMultipleAllocations: true, capacity: {memory: {value: 40Gi, requestPolicy: {default: 20Gi, validRange: {min: 10Gi, step: 10Gi}}}}"
            } else {
                ""
            };
            let list: Vec<String> = (0..devices)
                .map(|d| format!("{{name: gpu-{d}{shared}}}"))
                .collect();
            docs.push(format!(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: n{i}-gpus}}\n\
                 spec: {{driver: {DRIVER}, nodeName: n{i}, pool: {{name: n{i}, generation: 1, resourceSliceCount: 1}}, devices: [{}]}}",
                list.join(", ")
            ));
        }
    }
    if shared_devices > 0 {
        let list: Vec<String> = (0..shared_devices)
            .map(|d| format!("{{name: rack-gpu-{d}}}"))
            .collect();
        docs.push(format!(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: rack0}}\n\
             spec: {{driver: {DRIVER}, nodeSelector: {{nodeSelectorTerms: [{{matchExpressions: [{{key: rack, operator: In, values: [r0]}}]}}]}}, \
             pool: {{name: rack0, generation: 1, resourceSliceCount: 1}}, devices: [{}]}}",
            list.join(", ")
        ));
    }
    docs.join("\n---\n")
}

fn has_plugin_gpu(node: usize) -> bool {
    node % 3 == 2
}

fn pod_yaml(i: usize, spec: &PodSpec) -> String {
    let claims = match spec.claim {
        0 => "resourceClaims: [{name: gpu, resourceClaimTemplateName: one}]",
        1 => "resourceClaims: [{name: gpu, resourceClaimTemplateName: two}]",
        2 => "resourceClaims: [{name: gpu, resourceClaimTemplateName: all}]",
        3 => "resourceClaims: [{name: gpu, resourceClaimName: shared}]",
        _ => "resourceClaims: []",
    };
    let gpu = match spec.claim {
        5 => ", example.com/gpu: 1}, limits: {example.com/gpu: 1",
        _ => "",
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: default}}\n\
         spec: {{priority: {}, {claims}, containers: [{{name: c, resources: {{requests: {{cpu: {}m{gpu}}}}}}}]}}",
        spec.priority, spec.milli_cpu
    )
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        0u8..6,
        prop_oneof![Just(100i64), Just(1500), Just(3000)],
        prop_oneof![Just(0i32), Just(1000)],
        prop::option::weighted(0.2, 1u64..50),
    )
        .prop_map(|(claim, milli_cpu, priority, deleted_after_ms)| PodSpec {
            claim,
            milli_cpu,
            priority,
            deleted_after_ms,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_device_is_given_twice(
        devices_per_node in prop::collection::vec(0u8..4, 1..5),
        shared_devices in 0u8..3,
        pods in prop::collection::vec(pod_spec(), 1..24),
        schedulers in 1u16..4,
        event_latency_ms in prop_oneof![Just(0u64), 1u64..20],
        bind_failure_rate in prop_oneof![Just(0.0f64), Just(0.2)],
        seed in 0u64..1000,
        calm in any::<bool>(),
        gpus in prop_oneof![Just(Gpus::Whole), Just(Gpus::Partitioned), Just(Gpus::Shared)],
    ) {
        // Half the cases keep every pod (none deleted or preempted) and every bind, where
        // one instance must never see a claim write refused.
        let bind_failure_rate = if calm { 0.0 } else { bind_failure_rate };
        let pods: Vec<PodSpec> = if calm {
            pods.into_iter()
                .map(|p| PodSpec { priority: 0, deleted_after_ms: None, ..p })
                .collect()
        } else {
            pods
        };
        let mut cluster = ClusterObjects::default();
        cluster.decode_more(&cluster_yaml(&devices_per_node, shared_devices, gpus), "cluster").unwrap();
        let options = SimOptions {
            seed,
            schedulers: u32::from(schedulers),
            event_latency: Duration::from_millis(event_latency_ms),
            bind_failure_rate,
            bind_latency: BindLatency::Fixed(Duration::from_millis(3)),
            ..SimOptions::default()
        };
        let mut sim = Simulation::new(cluster, vec![default_profile("default-scheduler")], options).unwrap();
        for (i, spec) in pods.iter().enumerate() {
            let mut objects = ClusterObjects::default();
            objects.decode_more(&pod_yaml(i, spec), "pods").unwrap();
            let pod = Arc::new(objects.pods.remove(0));
            let at = Duration::from_millis(i as u64);
            sim.schedule(at, SimEvent::CreatePod(pod));
            if let Some(after) = spec.deleted_after_ms {
                sim.schedule(at + Duration::from_millis(after), SimEvent::DeletePod(format!("default/p{i}")));
            }
        }
        let summary = sim.run().unwrap();
        // One instance sees its own decisions at once (in-flight allocations are taken
        // from Reserve on): the API never has to refuse one of its claim writes, unless a
        // claim another pod was about to reserve was deallocated meanwhile: by the claim
        // controller when a pod went (deleted or preempted), or by PostFilter after a
        // failed bind left it unreserved.
        let claims_can_go = bind_failure_rate > 0.0
            || pods.iter().any(|p| p.deleted_after_ms.is_some() || p.priority > 0);
        if schedulers == 1 && !claims_can_go {
            prop_assert_eq!(summary.conflicts_by_plugin.get("DynamicResources"), None);
        }
        if let Err(broken) = sim.check_invariants() {
            prop_assert!(false, "{}", broken);
        }
        // Independently: no node holds more one- and two-device pods than it has devices
        // for (the shared claim's one device and `All` claims aside, which may reach the
        // rack's slice or take a variable number).
        let mut used: BTreeMap<String, u32> = BTreeMap::new();
        for (placement, history) in sim.placements().iter().zip(sim.histories()) {
            let (Some(node), Some(i)) = (&placement.node, placement.pod.name.strip_prefix('p')) else {
                continue;
            };
            let spec = &pods[i.parse::<usize>().unwrap()];
            let i: usize = node.trim_start_matches('n').parse().unwrap();
            let devices = match spec.claim {
                0 | 1 => u32::from(spec.claim) + 1,
                5 if !has_plugin_gpu(i) => 1,
                _ => 0,
            };
            if spec.deleted_after_ms.is_none() && !history.preempted {
                *used.entry(node.to_string()).or_default() += devices;
            }
        }
        for (node, count) in used {
            let i: usize = node.trim_start_matches('n').parse().unwrap();
            // A partitioned or shared GPU serves two halves at most.
            let per_gpu = if gpus == Gpus::Whole { 1 } else { 2 };
            let reachable = per_gpu * u32::from(devices_per_node[i]) + if i.is_multiple_of(2) { u32::from(shared_devices) } else { 0 };
            prop_assert!(count <= reachable, "{node}: {count} devices used, {reachable} reachable");
        }
    }
}
