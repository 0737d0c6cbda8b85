//! The benchmark workloads of upstream's scheduler_perf (`BENCHMARKS.md`), with the same
//! node and pod templates and counts, run through the real scheduling and binding cycles
//! with the simulated API: nodes, then init pods, then the measured pods whose throughput
//! is the figure.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::{ClusterObjects, Service};
use gantry_api::labels::{NodeSelectorOp, NodeSelectorRequirement};
use gantry_api::{
    Container, LabelSelector, Node, NodeSelector, NodeSelectorTerm, Pod, PodAffinityTerm,
    Resources, Sym, TopologySpreadConstraint, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use gantry_framework::plugins::default_profile;
use serde::Serialize;

use crate::{BindLatency, SimError, SimEvent, SimOptions, Simulation};

/// The workloads `gantry bench` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Basic,
    Basic50k,
    NodeAffinity,
    PodAffinity,
    PodAntiAffinity,
    PreferredPodAffinity,
    TopologySpread,
    Preemption,
    Unschedulable,
    MixedChurn,
    Scale,
}

impl Workload {
    pub const ALL: [Workload; 11] = [
        Workload::Basic,
        Workload::Basic50k,
        Workload::NodeAffinity,
        Workload::PodAffinity,
        Workload::PodAntiAffinity,
        Workload::PreferredPodAffinity,
        Workload::TopologySpread,
        Workload::Preemption,
        Workload::Unschedulable,
        Workload::MixedChurn,
        Workload::Scale,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Basic => "basic",
            Workload::Basic50k => "basic-50k",
            Workload::NodeAffinity => "node-affinity",
            Workload::PodAffinity => "pod-affinity",
            Workload::PodAntiAffinity => "pod-anti-affinity",
            Workload::PreferredPodAffinity => "preferred-pod-affinity",
            Workload::TopologySpread => "topology-spread",
            Workload::Preemption => "preemption",
            Workload::Unschedulable => "unschedulable",
            Workload::MixedChurn => "mixed-churn",
            Workload::Scale => "scale",
        }
    }

    pub fn parse(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// Nodes, init pods (bound through the scheduler, or directly for `scale`), measured pods.
    fn sizes(self) -> (usize, usize, usize) {
        match self {
            Workload::Basic => (5_000, 1_000, 10_000),
            Workload::Basic50k => (5_000, 5_000, 50_000),
            Workload::NodeAffinity => (5_000, 5_000, 1_000),
            Workload::PodAffinity => (5_000, 5_000, 1_000),
            Workload::PodAntiAffinity => (5_000, 1_000, 1_000),
            Workload::PreferredPodAffinity => (5_000, 5_000, 1_000),
            Workload::TopologySpread => (5_000, 5_000, 2_000),
            Workload::Preemption => (500, 2_000, 500),
            Workload::Unschedulable => (5_000, 200, 5_000),
            Workload::MixedChurn => (5_000, 0, 2_000),
            Workload::Scale => (20_000, 1_000_000, 50_000),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct BenchOptions {
    /// percentageOfNodesToScore; `None` = upstream's adaptive default.
    pub percentage_of_nodes_to_score: Option<u32>,
    pub no_assume: bool,
    /// Shrinks every count by this factor (for quick runs and tests); 1 = as upstream.
    pub scale_down: usize,
    /// Reads the process's allocation counter, when the binary installs one.
    pub allocations: Option<fn() -> u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    pub workload: &'static str,
    pub nodes: usize,
    pub init_pods: usize,
    pub measured_pods: usize,
    /// Measured pods bound at the end.
    pub scheduled: usize,
    pub pods_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub nodes_evaluated_per_pod: f64,
    pub preempted: usize,
    pub overcommitted_nodes: usize,
    /// Heap allocations per measured pod (`null` without a counting allocator).
    pub allocs_per_pod: Option<f64>,
    /// Peak resident memory of the process (`null` where /proc is not available).
    pub peak_rss_mib: Option<f64>,
    pub percentage_of_nodes_to_score: Option<u32>,
}

const INIT_NAMESPACE: &str = "sched-0";
const MEASURED_NAMESPACE: &str = "sched-1";
const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";
const MIB: i64 = 1024 * 1024;

/// scheduler_perf's node-default, with the zone the workload asks for.
fn node(index: usize, zone: Option<&str>) -> Node {
    let name = format!("node-{index}");
    let mut allocatable = Resources::new(4000, 32 * 1024 * MIB);
    allocatable.pods = 110;
    let node = Node::new(&name, allocatable).with_labels([(HOSTNAME, name.as_str())]);
    match zone {
        Some(zone) => node.with_labels([(ZONE, zone)]),
        None => node,
    }
}

/// The pod templates of `BENCHMARKS.md`.
#[derive(Debug, Clone, Copy)]
enum Template {
    Default,
    AntiAffinity,
    Affinity,
    PreferredAffinity,
    NodeAffinity,
    Spreading,
    LowPriority,
    HighPriority,
    LargeCpu,
    /// `scale`'s resident pods: 50 per node must fit node-default, so 50m and 100Mi (the
    /// cluster autoscaler benchmark's small pod).
    Resident,
}

fn selector(key: &str, value: &str) -> LabelSelector {
    LabelSelector::from_pairs([(Sym::new(key), Sym::new(value))])
}

fn affinity_term(color: &str, topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(selector("color", color)),
        namespaces: vec![Sym::new(INIT_NAMESPACE), Sym::new(MEASURED_NAMESPACE)],
        namespace_selector: None,
        topology_key: Sym::new(topology_key),
    }
}

fn pod(template: Template, namespace: &str, name: &str) -> Pod {
    let (milli_cpu, priority) = match template {
        Template::LowPriority => (900, 0),
        Template::HighPriority => (3000, 10),
        Template::LargeCpu => (9000, 0),
        Template::Resident => (50, 0),
        _ => (100, 0),
    };
    let memory = if matches!(template, Template::Resident) {
        100 * MIB
    } else {
        500 * MIB
    };
    let mut pod = Pod::new(namespace, name)
        .with_container(Container::new("c", Some(milli_cpu), Some(memory)))
        .with_priority(priority);
    match template {
        Template::AntiAffinity => {
            pod = pod.with_labels([("color", "green")]);
            pod.affinity
                .pod_anti_affinity
                .required
                .push(affinity_term("green", HOSTNAME));
        }
        Template::Affinity => {
            pod = pod.with_labels([("color", "blue")]);
            pod.affinity
                .pod_affinity
                .required
                .push(affinity_term("blue", ZONE));
        }
        Template::PreferredAffinity => {
            pod = pod.with_labels([("color", "red")]);
            pod.affinity
                .pod_affinity
                .preferred
                .push(WeightedPodAffinityTerm {
                    weight: 1,
                    term: affinity_term("red", ZONE),
                });
        }
        Template::NodeAffinity => {
            pod.affinity.node_affinity.required = Some(NodeSelector {
                terms: vec![NodeSelectorTerm {
                    match_expressions: vec![NodeSelectorRequirement {
                        key: Sym::new(ZONE),
                        op: NodeSelectorOp::In,
                        values: ["zone1", "zone2"].iter().map(|v| Sym::new(v)).collect(),
                    }],
                    match_fields: vec![],
                }],
            });
        }
        Template::Spreading => {
            pod = pod.with_labels([("color", "blue")]);
            pod.topology_spread_constraints
                .push(TopologySpreadConstraint {
                    max_skew: 5,
                    topology_key: Sym::new(ZONE),
                    when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                    label_selector: Some(selector("color", "blue")),
                    min_domains: None,
                    node_affinity_policy: gantry_api::InclusionPolicy::Honor,
                    node_taints_policy: gantry_api::InclusionPolicy::Ignore,
                });
        }
        _ => {}
    }
    pod
}

/// (init template, measured template, zone labels of the nodes)
fn templates(workload: Workload) -> (Template, Template, &'static [&'static str]) {
    match workload {
        Workload::Basic | Workload::Basic50k | Workload::MixedChurn => {
            (Template::Default, Template::Default, &[])
        }
        Workload::Scale => (Template::Resident, Template::Default, &[]),
        Workload::NodeAffinity => (Template::NodeAffinity, Template::NodeAffinity, &["zone1"]),
        Workload::PodAffinity => (Template::Affinity, Template::Affinity, &["zone1"]),
        Workload::PodAntiAffinity => (Template::AntiAffinity, Template::AntiAffinity, &[]),
        Workload::PreferredPodAffinity => (
            Template::PreferredAffinity,
            Template::PreferredAffinity,
            &["zone1"],
        ),
        Workload::TopologySpread => (
            Template::Default,
            Template::Spreading,
            &["moon-1", "moon-2", "moon-3"],
        ),
        Workload::Preemption => (Template::LowPriority, Template::HighPriority, &[]),
        Workload::Unschedulable => (Template::LargeCpu, Template::Default, &[]),
    }
}

/// Runs one workload and measures the measured phase.
pub fn run(workload: Workload, options: &BenchOptions) -> Result<BenchResult, SimError> {
    let scale = options.scale_down.max(1);
    let (nodes, init_pods, measured_pods) = workload.sizes();
    let (nodes, init_pods, measured_pods) =
        (nodes / scale, init_pods / scale, measured_pods / scale);
    let (init_template, measured_template, zones) = templates(workload);
    let zone_of = |i: usize| (!zones.is_empty()).then(|| zones[i % zones.len()]);

    let mut cluster = ClusterObjects::default();
    cluster.nodes = (0..nodes).map(|i| node(i, zone_of(i))).collect();
    let direct_init = workload == Workload::Scale;
    if direct_init {
        // A million resident pods are loaded as already bound, as a cluster dump would be.
        let per_node = init_pods / nodes.max(1);
        for n in 0..nodes {
            for p in 0..per_node {
                let pod = pod(init_template, INIT_NAMESPACE, &format!("init-{n}-{p}"))
                    .on_node(&format!("node-{n}"));
                cluster.pods.push(pod);
            }
        }
    }
    if workload == Workload::MixedChurn {
        cluster.services.push(Service {
            namespace: Sym::new(MEASURED_NAMESPACE),
            name: Arc::from("churn"),
            selector: selector("app", "churn"),
        });
    }
    let mut profile = default_profile("default-scheduler");
    profile.percentage_of_nodes_to_score = options.percentage_of_nodes_to_score;
    // Binds take no virtual time: the benchmarks measure the scheduler alone.
    let sim_options = SimOptions {
        assume: !options.no_assume,
        bind_latency: BindLatency::Fixed(Duration::ZERO),
        ..SimOptions::default()
    };
    let mut sim =
        Simulation::new(cluster, vec![profile], sim_options).expect("a synthetic cluster loads");
    if !direct_init {
        for i in 0..init_pods {
            let p = pod(init_template, INIT_NAMESPACE, &format!("init-{i}"));
            sim.schedule(Duration::ZERO, SimEvent::CreatePod(Arc::new(p)));
        }
    }
    sim.run_until(Duration::ZERO)?;
    sim.clear_latencies();
    let evaluated_before = sim.scheduler.nodes_evaluated;
    let bound_before = sim.api.binds;
    let preempted_before = sim.preempted();
    let attempts_before = sim.attempts();

    let start = Duration::from_secs(1);
    // Churn: measured pods arrive over virtual time while, every second, a node, a
    // large high-priority pod and a service are deleted and re-created.
    let interval = if workload == Workload::MixedChurn {
        Duration::from_millis(10)
    } else {
        Duration::ZERO
    };
    for i in 0..measured_pods {
        let p = pod(
            measured_template,
            MEASURED_NAMESPACE,
            &format!("measured-{i}"),
        );
        sim.schedule(
            start + interval * i as u32,
            SimEvent::CreatePod(Arc::new(p)),
        );
    }
    if workload == Workload::MixedChurn {
        let seconds = (interval * measured_pods as u32).as_secs() + 1;
        for s in 0..seconds {
            let at = start + Duration::from_secs(s);
            let churn_node = node(nodes + s as usize, None);
            sim.schedule(at, SimEvent::AddNode(Arc::new(churn_node)));
            sim.schedule(
                at + Duration::from_millis(500),
                SimEvent::DeleteNode(Sym::new(&format!("node-{}", nodes + s as usize))),
            );
            let big = pod(
                Template::LargeCpu,
                MEASURED_NAMESPACE,
                &format!("churn-{s}"),
            )
            .with_priority(10);
            sim.schedule(at, SimEvent::CreatePod(Arc::new(big)));
            sim.schedule(
                at + Duration::from_millis(500),
                SimEvent::DeletePod(format!("{MEASURED_NAMESPACE}/churn-{s}")),
            );
        }
    }
    let allocations_before = options.allocations.map(|f| f());
    let summary = sim.run()?;
    let allocations = options
        .allocations
        .zip(allocations_before)
        .map(|(f, before)| f() - before);
    let measured_attempts = (summary.attempts - attempts_before).max(1);
    Ok(BenchResult {
        workload: workload.name(),
        nodes,
        init_pods,
        measured_pods,
        scheduled: (sim.api.binds - bound_before) as usize,
        pods_per_sec: measured_pods as f64 / summary.wall_s.max(1e-9),
        p50_us: summary.p50_us,
        p99_us: summary.p99_us,
        nodes_evaluated_per_pod: (sim.scheduler.nodes_evaluated - evaluated_before) as f64
            / measured_attempts as f64,
        preempted: summary.preempted - preempted_before,
        overcommitted_nodes: summary.overcommitted_nodes,
        allocs_per_pod: allocations.map(|a| a as f64 / measured_pods.max(1) as f64),
        peak_rss_mib: peak_rss_mib(),
        percentage_of_nodes_to_score: options.percentage_of_nodes_to_score,
    })
}

/// VmHWM from /proc/self/status, in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_runs_scaled_down_and_schedules_what_fits() {
        for workload in Workload::ALL {
            let scale_down = if workload == Workload::Scale {
                1000
            } else {
                50
            };
            let result = run(
                workload,
                &BenchOptions {
                    scale_down,
                    ..BenchOptions::default()
                },
            )
            .unwrap();
            assert_eq!(Workload::parse(result.workload), Some(workload));
            assert_eq!(result.overcommitted_nodes, 0, "{result:?}");
            match workload {
                // Init pods never fit; measured ones all do.
                Workload::Unschedulable => {
                    assert_eq!(result.scheduled, result.measured_pods, "{result:?}")
                }
                // High-priority pods preempt low-priority ones to fit.
                Workload::Preemption => {
                    assert!(result.preempted > 0 && result.scheduled > 0, "{result:?}")
                }
                // The churn's large pods never fit; the measured ones do.
                Workload::MixedChurn => {
                    assert_eq!(result.scheduled, result.measured_pods, "{result:?}")
                }
                _ => assert_eq!(result.scheduled, result.measured_pods, "{result:?}"),
            }
        }
    }
}
