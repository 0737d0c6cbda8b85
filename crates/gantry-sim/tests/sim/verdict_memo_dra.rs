//! The verdict memo answers for DynamicResources' Filter too (its verdict reads the node,
//! the pod's claims and the devices taken) and changes no decision: random scenarios of
//! GPU node groups and workloads claiming devices, with pods deleted (their claims' devices
//! given back) and nodes added and drained, run with it and without, and every pod's node
//! and message is the same; and the two ways the devices taken change without the pods on
//! a node changing (a claim allocated from outside, on a node's own pool or on a pool
//! every node reaches) reach the verdicts they move.

use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile;
use gantry_sim::{SimEvent, SimOptions, Simulation};
use proptest::prelude::*;

use super::verdict_memo::run;

/// One node group: count, devices a node (0: none), whether they are A100s (else H100s).
type Group = (u32, u32, bool);

/// One workload: pods, arrival rate per second, devices a pod claims (0: none), whether
/// the claim asks for an A100.
type Workload = (u32, u32, u32, bool);

fn scenario(groups: &[Group], workloads: &[Workload], churn: bool) -> String {
    let mut text =
        String::from("deviceClasses:\n- {name: gpu, driver: gpu.example.com}\nnodeGroups:\n");
    for (i, &(count, devices, a100)) in groups.iter().enumerate() {
        let _ = writeln!(
            text,
            "- name: g{i}\n  count: {count}\n  allocatable: {{cpu: \"16\", memory: 64Gi, pods: \"20\"}}"
        );
        if devices > 0 {
            let model = if a100 { "a100" } else { "h100" };
            let _ = writeln!(
                text,
                "  devices:\n  - {{driver: gpu.example.com, count: {devices}, attributes: {{model: {model}}}}}"
            );
        }
    }
    text.push_str("workloads:\n");
    for (i, &(count, rate, devices, a100)) in workloads.iter().enumerate() {
        let _ = writeln!(
            text,
            "- name: w{i}\n  count: {count}\n  arrival: {{start: {i}s, rate: {rate}/s}}"
        );
        if devices > 0 {
            let _ = writeln!(
                text,
                "  claims:\n  - {{name: gpu, deviceClass: gpu, count: {devices}{}}}",
                if a100 {
                    ", selectors: ['device.attributes[\"gpu.example.com\"].model == \"a100\"']"
                } else {
                    ""
                }
            );
        }
        text.push_str(
            "  template:\n    spec: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}\n",
        );
    }
    if churn {
        // w0 starts at 0 s: at least `rate × t` of its pods have arrived by t seconds
        // (the deletions come before the drain, which may evict some).
        let (count, rate) = (workloads[0].0, workloads[0].1);
        let first = 3.min(count).min(2 * rate);
        let second = 2.min(count.min(2 * rate) - first);
        let _ = writeln!(
            text,
            "events:\n\
             - {{at: 2s, deletePods: {{workload: w0, count: {first}}}}}\n\
             - {{at: 3s, addNodes: {{group: g0, count: 2}}}}\n\
             - {{at: 4s, drainNodes: {{group: g0, count: 1}}}}"
        );
        if second > 0 {
            let _ = writeln!(
                text,
                "- {{at: 2500ms, deletePods: {{workload: w0, count: {second}}}}}"
            );
        }
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn remembering_device_verdicts_changes_no_placement(
        groups in prop::collection::vec((1u32..150, 0u32..5, any::<bool>()), 1..4),
        workloads in prop::collection::vec((1u32..80, 1u32..200, 0u32..3, any::<bool>()), 1..4),
        churn in any::<bool>(),
    ) {
        let text = scenario(&groups, &workloads, churn);
        let without = run(&text, false);
        prop_assert_eq!(run(&text, true), without, "{}", text);
    }
}

/// 300 nodes of 2 GPUs (a cycle looks at a share of them, from a rotating start) and 700
/// pods claiming one each, 100 pods too many, pods deleted and nodes drained meanwhile:
/// the memo answers most verdicts, and every placement and message is the same.
#[test]
fn a_cluster_of_gpus_filled_up_places_every_pod_as_without_the_memo() {
    let text = scenario(
        &[(200, 2, true), (100, 2, false)],
        &[(400, 400, 1, false), (300, 300, 1, true)],
        true,
    );
    let with = run(&text, true);
    assert!(with.1.contains("unschedulable") && !with.1.contains("unschedulable 0"));
    assert_eq!(with, run(&text, false));
}

/// Three nodes of one GPU each, their own (`local`) or one pool of three every node
/// reaches; p-a and p-a2 take a GPU each, then a claim made outside takes the last one
/// (on the node no pod took, or in the pool every node reaches). p-b, like p-a, must find
/// no GPU; a verdict remembered from p-a2's cycle would place it.
fn an_outside_claim_leaves_no_gpu(local: bool) -> Vec<(Option<String>, Option<String>)> {
    let node = |name: &str| {
        let mut text = format!(
            "- {{apiVersion: v1, kind: Node, metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}},
    status: {{allocatable: {{cpu: '8', memory: 32Gi, pods: '110'}}}}}}\n"
        );
        if local {
            let _ = writeln!(
                text,
                "- {{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: {name}-gpus}},
    spec: {{driver: gpu.example.com, nodeName: {name}, pool: {{name: {name}, generation: 1, resourceSliceCount: 1}},
      devices: [{{name: gpu-0}}]}}}}"
            );
        }
        text
    };
    let shared = "- {apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {name: shared-gpus},
    spec: {driver: gpu.example.com, allNodes: true, pool: {name: shared, generation: 1, resourceSliceCount: 1},
      devices: [{name: gpu-0}, {name: gpu-1}, {name: gpu-2}]}}\n";
    let cluster = format!(
        "apiVersion: v1
kind: List
items:
- {{apiVersion: resource.k8s.io/v1, kind: DeviceClass, metadata: {{name: gpu}},
    spec: {{selectors: [{{cel: {{expression: device.driver == \"gpu.example.com\"}}}}]}}}}
- {{apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate, metadata: {{name: gpu, namespace: default}},
    spec: {{spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu}}}}]}}}}}}}}
{}{}{}{}",
        node("n1"),
        node("n2"),
        node("n3"),
        if local { "" } else { shared }
    );
    let decode = |text: &str| ClusterObjects::decode(text, "objects.yaml").unwrap();
    let pod = |name: &str| {
        let text = format!(
            "{{apiVersion: v1, kind: Pod, metadata: {{name: {name}, namespace: default}},
  spec: {{resourceClaims: [{{name: gpu, resourceClaimTemplateName: gpu}}],
    containers: [{{name: c, image: i, resources: {{requests: {{cpu: '1'}}, claims: [{{name: gpu}}]}}}}]}}}}"
        );
        Arc::new(decode(&text).pods.remove(0))
    };
    // The last GPU, allocated to a claim no pod of this run uses.
    let outside = |pool: &str, device: &str| {
        let selector = if local {
            format!(
                ", nodeSelector: {{nodeSelectorTerms: [{{matchFields: [{{key: metadata.name, operator: In, values: [{pool}]}}]}}]}}"
            )
        } else {
            String::new()
        };
        let text = format!(
            "{{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {{name: outside, namespace: default}},
  spec: {{devices: {{requests: [{{name: r, exactly: {{deviceClassName: gpu}}}}]}}}},
  status: {{allocation: {{devices: {{results: [{{request: r, driver: gpu.example.com, pool: {pool}, device: {device}}}]}}{selector}}}}}}}"
        );
        Arc::new(decode(&text).dra.claims.remove(0))
    };
    let run = |remember_verdicts: bool| {
        let options = SimOptions {
            remember_verdicts,
            ..SimOptions::default()
        };
        let profiles = vec![default_profile("default-scheduler")];
        let mut sim = Simulation::new(decode(&cluster), profiles, options).unwrap();
        for (at, name) in [(0, "p-a"), (100, "p-a2")] {
            sim.schedule(Duration::from_millis(at), SimEvent::CreatePod(pod(name)));
        }
        sim.run().unwrap();
        let claim = if local {
            let taken: Vec<String> = (sim.placements().iter())
                .map(|p| p.node.unwrap().to_string())
                .collect();
            let free = ["n1", "n2", "n3"]
                .into_iter()
                .find(|n| !taken.iter().any(|t| t == n));
            outside(free.unwrap(), "gpu-0")
        } else {
            let taken = sim.cache().dra().allocation_counts();
            let free = ["gpu-0", "gpu-1", "gpu-2"]
                .into_iter()
                .find(|d| !taken.iter().any(|(id, _)| id.device.as_str() == *d));
            outside("shared", free.unwrap())
        };
        sim.schedule(Duration::from_secs(1), SimEvent::CreateClaim(claim));
        sim.schedule(Duration::from_secs(2), SimEvent::CreatePod(pod("p-b")));
        // Attempts too: a stale verdict would send p-b to a node whose Reserve then
        // fails, and its next attempt would end as it should.
        let attempts = sim.run().unwrap().attempts;
        sim.check_invariants().unwrap();
        let placed = (sim.placements().iter())
            .map(|p| (p.node.map(|n| n.to_string()), p.reason.clone()))
            .collect::<Vec<_>>();
        (placed, attempts)
    };
    let without = run(false);
    let placed = &without.0;
    assert!(
        placed[..2].iter().all(|(node, _)| node.is_some()),
        "{without:?}"
    );
    assert_eq!(placed[2].0, None, "{without:?}");
    assert_eq!(run(true), without);
    without.0
}

#[test]
fn a_claim_allocated_on_a_nodes_own_pool_moves_that_nodes_verdict() {
    let placed = an_outside_claim_leaves_no_gpu(true);
    assert!(
        (placed[2].1.as_deref()).is_some_and(|r| r.contains("cannot allocate all claims")),
        "{placed:?}"
    );
}

#[test]
fn a_claim_allocated_on_a_pool_every_node_reaches_moves_every_verdict() {
    let placed = an_outside_claim_leaves_no_gpu(false);
    assert!(
        (placed[2].1.as_deref()).is_some_and(|r| r.contains("cannot allocate all claims")),
        "{placed:?}"
    );
}

/// A selector that fails on every device (an attribute no device has) is an error, which
/// names the pod's own claim: like pods each get theirs, never one remembered from the
/// pod before.
#[test]
fn an_error_is_not_remembered_for_the_next_like_pod() {
    let text = r#"deviceClasses:
- {name: gpu, driver: gpu.example.com}
nodeGroups:
- name: g
  count: 3
  allocatable: {cpu: "8", memory: 32Gi, pods: "20"}
  devices:
  - {driver: gpu.example.com, count: 2, attributes: {model: a100}}
workloads:
- name: w
  count: 3
  arrival: {start: 0s, rate: 10/s}
  claims:
  - {name: gpu, deviceClass: gpu, selectors: ['device.attributes["gpu.example.com"].missing == "x"']}
  template:
    spec: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}
"#;
    let (with, _) = run(text, true);
    let reasons: Vec<String> = (with.iter())
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .map(|p| p["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(reasons.len(), 3, "{with:?}");
    for (i, reason) in reasons.iter().enumerate() {
        assert!(reason.contains("CEL runtime error"), "{reason}");
        let others = (0..3).filter(|&j| j != i).map(|j| format!("w-{j}-gpu"));
        assert!(
            others.clone().all(|o| !reason.contains(&o)),
            "{i}: {reason}"
        );
    }
    assert_eq!(run(text, false).0, with);
}
