//! The verdict memo (`gantry-scheduler`'s `verdict_memo.rs`) changes no decision: random
//! scenarios (node groups with labels and taints, workloads with tolerations, node
//! affinity, host ports and priorities, node and pod churn, clusters large enough that a
//! cycle looks at a share of the nodes) run with it and without, and every pod's node,
//! message and evictions, and the summary's counts, are the same.

use std::fmt::Write;

use gantry_framework::plugins::default_profile;
use gantry_sim::scenario::Scenario;
use gantry_sim::{SimOptions, Simulation};
use proptest::prelude::*;

/// One node group: count, cpu, whether it carries the `pool: special` label, and its
/// taint (0 none, 1 PreferNoSchedule, 2 NoSchedule).
type Group = (u32, u32, bool, u8);

/// One workload: pods, arrival rate per second, milli-cpu, priority (0 low, 1 high),
/// node affinity (0 none, 1 required `pool: special`, 2 preferred), tolerates the taints,
/// a host port.
type Workload = (u32, u32, u32, u8, u8, bool, bool);

fn scenario(groups: &[Group], workloads: &[Workload], churn: bool) -> String {
    let mut text = String::from("priorityClasses: [{name: high, value: 1000}]\nnodeGroups:\n");
    for (i, &(count, cpu, special, taint)) in groups.iter().enumerate() {
        let _ = writeln!(
            text,
            "- name: g{i}\n  count: {count}\n  zones: [a, b, c]\n  allocatable: {{cpu: \"{cpu}\", memory: 16Gi, pods: \"20\"}}"
        );
        if special {
            text.push_str("  labels: {pool: special}\n");
        }
        match taint {
            1 => text.push_str("  taints: [{key: soft, value: x, effect: PreferNoSchedule}]\n"),
            2 => text.push_str("  taints: [{key: hard, value: x, effect: NoSchedule}]\n"),
            _ => {}
        }
    }
    text.push_str("workloads:\n");
    for (i, &(count, rate, milli_cpu, priority, affinity, tolerates, port)) in
        workloads.iter().enumerate()
    {
        let _ = write!(
            text,
            "- name: w{i}\n  count: {count}\n  arrival: {{start: {i}s, rate: {rate}/s}}\n  template:\n    metadata: {{labels: {{app: w{i}}}}}\n    spec:\n"
        );
        if priority == 1 {
            text.push_str("      priorityClassName: high\n");
        }
        if tolerates {
            text.push_str("      tolerations: [{operator: Exists}]\n");
        }
        match affinity {
            1 => text.push_str(
                "      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [special]}]}]}}}\n",
            ),
            2 => text.push_str(
                "      affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 10, preference: {matchExpressions: [{key: pool, operator: In, values: [special]}]}}]}}\n",
            ),
            _ => {}
        }
        let _ = writeln!(
            text,
            "      containers: [{{name: c, resources: {{requests: {{cpu: {milli_cpu}m, memory: 256Mi}}}}{}}}]",
            if port {
                ", ports: [{containerPort: 80, hostPort: 8080}]"
            } else {
                ""
            }
        );
    }
    if churn {
        // w0's first pod arrives at 0 s, every pod by 120 s.
        let late = workloads[0].0.min(5);
        let _ = write!(
            text,
            "events:\n\
             - {{at: 2s, deletePods: {{workload: w0, count: 1}}}}\n\
             - {{at: 3s, addNodes: {{group: g0, count: 3}}}}\n\
             - {{at: 4s, drainNodes: {{group: g0, count: 1}}}}\n\
             - {{at: 5s, scale: {{workload: w0, count: 10}}}}\n\
             - {{at: 6s, deleteNodes: {{group: g0, count: 2}}}}\n\
             - {{at: 200s, deletePods: {{workload: w0, count: {late}}}}}\n\
             - {{at: 201s, scale: {{workload: w0, count: 20}}}}\n"
        );
    }
    text
}

/// Every pod's placement line and the summary's counts, with the memo or without (the
/// simulation's invariants checked at the end).
pub(super) fn run(text: &str, remember_verdicts: bool) -> (Vec<String>, String) {
    let scenario = Scenario::parse(text, "memo.yaml").unwrap();
    let options = SimOptions {
        remember_verdicts,
        seed: 7,
        ..SimOptions::default()
    };
    let profile = default_profile("default-scheduler");
    let mut sim = Simulation::new(scenario.cluster.clone(), vec![profile], options).unwrap();
    scenario.schedule_into(&mut sim);
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    let placements = sim
        .placements()
        .iter()
        .map(|p| serde_json::to_string(p).unwrap())
        .collect();
    let counts = format!(
        "scheduled {} unschedulable {} preempted {} attempts {}",
        summary.scheduled, summary.unschedulable, summary.preempted, summary.attempts
    );
    (placements, counts)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn remembering_verdicts_changes_no_placement(
        groups in prop::collection::vec((1u32..80, 1u32..9, any::<bool>(), 0u8..3), 1..4),
        workloads in prop::collection::vec(
            (1u32..120, 1u32..200, 100u32..3000, 0u8..2, 0u8..3, any::<bool>(), any::<bool>()),
            1..5,
        ),
        churn in any::<bool>(),
    ) {
        let text = scenario(&groups, &workloads, churn);
        let without = run(&text, false);
        prop_assert_eq!(run(&text, true), without, "{}", text);
    }
}

/// A cluster of 400 nodes (a cycle looks at 242 of them, from a rotating start) filled to
/// the brim by three workloads, the last of high priority so that it preempts, with nodes
/// drained and deleted meanwhile: the memo answers most verdicts, and every placement is
/// the same as without it.
#[test]
fn a_full_cluster_with_preemption_and_churn_places_every_pod_as_without_the_memo() {
    let groups = [(200, 4, false, 0), (150, 8, true, 1), (50, 2, false, 2)];
    let workloads = [
        (1500, 500, 700, 0, 0, false, false),
        (600, 300, 1500, 0, 2, true, false),
        (300, 100, 2500, 1, 1, true, true),
    ];
    let text = scenario(&groups, &workloads, true);
    let with = run(&text, true);
    assert!(
        with.1.contains("preempted") && !with.1.contains("preempted 0"),
        "{}",
        with.1
    );
    assert_eq!(with, run(&text, false));
}

/// Extended resources a device class serves (DRAExtendedResource) are scored from the
/// node's devices, which a claim allocated elsewhere takes without changing the node: such
/// scores are never remembered. Here p-a and p-a2 take a GPU on two of three nodes, then a
/// claim made outside takes three of the third node's four; LeastAllocated (GPUs weighing
/// 3) must send p-b to one of the first two, where a score of the third remembered from
/// p-a2's cycle would send it there.
#[test]
fn scores_of_device_backed_extended_resources_are_not_remembered() {
    use std::sync::Arc;
    use std::time::Duration;

    use gantry_api::decode::ClusterObjects;
    use gantry_sim::SimEvent;

    let node = |name: &str| {
        format!(
            "- {{apiVersion: v1, kind: Node, metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}},
    status: {{allocatable: {{cpu: '8', memory: 32Gi, pods: '110'}}}}}}
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata: {{name: {name}-gpus}}
  spec:
    driver: gpu.example.com
    nodeName: {name}
    pool: {{name: {name}, generation: 1, resourceSliceCount: 1}}
    devices: [{{name: gpu-0}}, {{name: gpu-1}}, {{name: gpu-2}}, {{name: gpu-3}}]
"
        )
    };
    let cluster = format!(
        "apiVersion: v1
kind: List
items:
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {{name: gpu.example.com}}
  spec:
    extendedResourceName: example.com/gpu
    selectors: [{{cel: {{expression: device.driver == \"gpu.example.com\"}}}}]
{}{}{}",
        node("n1"),
        node("n2"),
        node("n3")
    );
    let config = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: LeastAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}, {name: example.com/gpu, weight: 3}]
";
    let pod = |name: &str| {
        format!(
            "{{apiVersion: v1, kind: Pod, metadata: {{name: {name}, namespace: default}},
  spec: {{containers: [{{name: c, image: i, resources: {{requests: {{cpu: '1', memory: 1Gi, example.com/gpu: '1'}}, limits: {{example.com/gpu: '1'}}}}}}]}}}}"
        )
    };
    // Three of `node`'s GPUs, allocated to a claim no pod of this run uses.
    let claim = |node: &str| {
        format!(
            "{{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {{name: outside, namespace: default}},
  spec: {{devices: {{requests: [{{name: r, exactly: {{deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 3}}}}]}}}},
  status: {{allocation: {{devices: {{results: [
    {{request: r, driver: gpu.example.com, pool: {node}, device: gpu-0}},
    {{request: r, driver: gpu.example.com, pool: {node}, device: gpu-1}},
    {{request: r, driver: gpu.example.com, pool: {node}, device: gpu-2}}]}},
    nodeSelector: {{nodeSelectorTerms: [{{matchFields: [{{key: metadata.name, operator: In, values: [{node}]}}]}}]}}}}}}}}"
        )
    };
    let run = |remember_verdicts: bool| {
        let mut sim = configured(&cluster, config, remember_verdicts);
        let decode = |text: &str| ClusterObjects::decode(text, "more.yaml").unwrap();
        for (at, name) in [(0, "p-a"), (100, "p-a2")] {
            let pod = decode(&pod(name)).pods.remove(0);
            sim.schedule(
                Duration::from_millis(at),
                SimEvent::CreatePod(Arc::new(pod)),
            );
        }
        sim.run().unwrap();
        let taken: Vec<String> = (sim.placements().iter())
            .map(|p| p.node.unwrap().to_string())
            .collect();
        let other = ["n1", "n2", "n3"]
            .into_iter()
            .find(|n| !taken.iter().any(|t| t == n))
            .unwrap();
        let outside = decode(&claim(other)).dra.claims.remove(0);
        sim.schedule(
            Duration::from_secs(1),
            SimEvent::CreateClaim(Arc::new(outside)),
        );
        sim.schedule(
            Duration::from_secs(2),
            SimEvent::CreatePod(Arc::new(decode(&pod("p-b")).pods.remove(0))),
        );
        sim.run().unwrap();
        let last = sim.placements()[2].node.unwrap().to_string();
        (taken, last)
    };
    let (taken, last) = run(false);
    assert!(
        taken.contains(&last),
        "the outside claim leaves the third node one GPU in four: {taken:?} {last}"
    );
    assert_eq!(run(true), (taken, last));
}

/// NodeResourcesFit leaves an extended resource a device class serves to the devices, so
/// its verdict reads the classes as well as the node, and is not remembered: once the
/// class is deleted, p-b's `example.com/gpu` is the nodes' own (they have none), where a
/// verdict remembered from p-a2's cycle would let it onto the node still free. (DynamicResources is off in
/// this profile, so that NodeResourcesFit alone judges the resource.)
#[test]
fn verdicts_that_read_device_classes_are_not_remembered() {
    use std::sync::Arc;
    use std::time::Duration;

    use gantry_api::Sym;
    use gantry_api::decode::ClusterObjects;
    use gantry_sim::SimEvent;

    let cluster = "apiVersion: v1
kind: List
items:
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {name: gpu.example.com}
  spec: {extendedResourceName: example.com/gpu}
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n3}, status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110'}}}
";
    let config = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins: {multiPoint: {disabled: [{name: DynamicResources}]}}
";
    let pod = |name: &str| {
        let text = format!(
            "{{apiVersion: v1, kind: Pod, metadata: {{name: {name}, namespace: default}},
  spec: {{containers: [{{name: c, image: i, resources: {{requests: {{cpu: '1', example.com/gpu: '1'}}, limits: {{example.com/gpu: '1'}}}}}}]}}}}"
        );
        Arc::new(
            ClusterObjects::decode(&text, "pod.yaml")
                .unwrap()
                .pods
                .remove(0),
        )
    };
    let run = |remember_verdicts: bool| {
        let mut sim = configured(cluster, config, remember_verdicts);
        sim.schedule(Duration::ZERO, SimEvent::CreatePod(pod("p-a")));
        sim.schedule(Duration::from_millis(100), SimEvent::CreatePod(pod("p-a2")));
        let class = Sym::new("gpu.example.com");
        sim.schedule(Duration::from_secs(1), SimEvent::DeleteDeviceClass(class));
        sim.schedule(Duration::from_secs(2), SimEvent::CreatePod(pod("p-b")));
        sim.run().unwrap();
        (sim.placements().iter())
            .map(|p| (p.node.as_ref().map(|n| n.to_string()), p.reason.clone()))
            .collect::<Vec<_>>()
    };
    let without = run(false);
    assert!(
        without[0].0.is_some() && without[1].0.is_some(),
        "{without:?}"
    );
    assert_eq!(without[2].0, None, "{without:?}");
    assert!(
        (without[2].1.as_deref()).is_some_and(|r| r.contains("Insufficient example.com/gpu")),
        "{without:?}"
    );
    assert_eq!(run(true), without);
}

/// A simulation of `cluster` with the profiles of the KubeSchedulerConfiguration `config`.
fn configured(cluster: &str, config: &str, remember_verdicts: bool) -> Simulation {
    use gantry_api::decode::ClusterObjects;
    use gantry_framework::config::SchedulerConfig;

    let cluster = ClusterObjects::decode(cluster, "cluster.yaml").unwrap();
    let profiles = SchedulerConfig::parse_for(config, "config.yaml", cluster.release)
        .unwrap()
        .profiles;
    let options = SimOptions {
        remember_verdicts,
        ..SimOptions::default()
    };
    Simulation::new(cluster, profiles, options).unwrap()
}
