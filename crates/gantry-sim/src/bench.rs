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
    fn sizes(self, nodes: Option<usize>) -> (usize, usize, usize) {
        if let (Workload::Scale, Some(nodes)) = (self, nodes) {
            return (nodes, scale_resident_pods(nodes), SCALE_MEASURED_PODS);
        }
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
            Workload::Scale => (20_000, 1_000_000, SCALE_MEASURED_PODS),
        }
    }
}

/// `scale`'s measured pods, whatever the cluster's size.
const SCALE_MEASURED_PODS: usize = 50_000;

/// `scale --nodes N`'s resident pods: 50 a node (the default 20,000 nodes' million), at most
/// 2,000,000 in all (100,000 nodes hold 20 each, as the largest managed clusters are sized).
pub fn scale_resident_pods(nodes: usize) -> usize {
    (nodes * 50).min(2_000_000)
}

#[derive(Debug, Clone, Default)]
pub struct BenchOptions {
    /// percentageOfNodesToScore; `None` = upstream's adaptive default.
    pub percentage_of_nodes_to_score: Option<u32>,
    pub no_assume: bool,
    /// Ask every Filter and Score plugin on every node, as upstream does (see
    /// `SimOptions::remember_verdicts`).
    pub no_verdict_memo: bool,
    /// Shrinks every count by this factor (for quick runs and tests); 1 = as upstream.
    pub scale_down: usize,
    /// `scale` only: the cluster's nodes (resident pods follow [`scale_resident_pods`]);
    /// `None`: 20,000.
    pub nodes: Option<usize>,
    /// Reads the process's allocation counter, when the binary installs one.
    pub allocations: Option<fn() -> u64>,
    /// Reads the process's count of bytes allocated, when the binary installs one.
    pub bytes_allocated: Option<fn() -> u64>,
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
    /// Bytes those allocations asked for, per measured pod (`null` likewise).
    pub bytes_allocated_per_pod: Option<f64>,
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
    let (nodes, init_pods, measured_pods) = workload.sizes(options.nodes);
    let (nodes, init_pods, measured_pods) =
        (nodes / scale, init_pods / scale, measured_pods / scale);
    let (init_template, measured_template, zones) = templates(workload);
    let zone_of = |i: usize| (!zones.is_empty()).then(|| zones[i % zones.len()]);

    let mut cluster = ClusterObjects::default();
    cluster.nodes = (0..nodes).map(|i| node(i, zone_of(i))).collect();
    let direct_init = workload == Workload::Scale;
    // Each phase's pods are replicas of one template, as a controller's pods are.
    let init_pod = pod(init_template, INIT_NAMESPACE, "init");
    if direct_init {
        // A million resident pods are loaded as already bound, as a cluster dump would be.
        let per_node = init_pods / nodes.max(1);
        for n in 0..nodes {
            let node = format!("node-{n}");
            for p in 0..per_node {
                let pod = init_pod.replica(&format!("init-{n}-{p}")).on_node(&node);
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
        remember_verdicts: !options.no_verdict_memo,
        bind_latency: BindLatency::Fixed(Duration::ZERO),
        ..SimOptions::default()
    };
    let mut sim =
        Simulation::new(cluster, vec![profile], sim_options).expect("a synthetic cluster loads");
    if !direct_init {
        for i in 0..init_pods {
            let p = init_pod.replica(&format!("init-{i}"));
            sim.schedule(Duration::ZERO, SimEvent::CreatePod(Arc::new(p)));
        }
    }
    sim.run_until(Duration::ZERO)?;
    sim.clear_latencies();
    let evaluated_before = sim.nodes_evaluated();
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
    let measured_pod = pod(measured_template, MEASURED_NAMESPACE, "measured");
    for i in 0..measured_pods {
        let p = measured_pod.replica(&format!("measured-{i}"));
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
    let bytes_before = options.bytes_allocated.map(|f| f());
    let summary = run_measured(&mut sim)?;
    let allocations = options
        .allocations
        .zip(allocations_before)
        .map(|(f, before)| f() - before);
    let bytes = options
        .bytes_allocated
        .zip(bytes_before)
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
        nodes_evaluated_per_pod: (sim.nodes_evaluated() - evaluated_before) as f64
            / measured_attempts as f64,
        preempted: summary.preempted - preempted_before,
        overcommitted_nodes: summary.overcommitted_nodes,
        allocs_per_pod: allocations.map(|a| a as f64 / measured_pods.max(1) as f64),
        bytes_allocated_per_pod: bytes.map(|b| b as f64 / measured_pods.max(1) as f64),
        peak_rss_mib: peak_rss_mib(),
        percentage_of_nodes_to_score: options.percentage_of_nodes_to_score,
    })
}

/// The measured part of a workload (this module's, `dra_bench`'s, `gang_bench`'s), in a
/// function of its own so that an instruction count can be limited to it (`valgrind
/// --tool=callgrind --toggle-collect='*bench::run_measured*'`, as `tests/budgets.rs`
/// does). The `black_box` keeps it a frame of its own: compiled as a bare jump to
/// `Simulation::run`, callgrind's toggle may miss it.
#[inline(never)]
pub(crate) fn run_measured(sim: &mut Simulation) -> Result<crate::Summary, SimError> {
    let summary = sim.run();
    std::hint::black_box(&summary);
    summary
}

/// `gantry bench gpu-share`: HAMi's shape (the seed's benchmark of its scheduler).
#[derive(Debug, Clone, Serialize)]
pub struct GpuShareResult {
    pub workload: &'static str,
    pub nodes: usize,
    /// The percentageOfNodesToScore used; `null`: upstream's adaptive default.
    pub percentage_of_nodes_to_score: Option<u32>,
    pub resident_pods: usize,
    /// Measured pods per round.
    pub measured_pods: usize,
    pub rounds: usize,
    /// Measured pods bound at the end (the fewest of any round).
    pub scheduled: usize,
    /// The median round's.
    pub pods_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// Bytes allocated per measured pod (`null` without a counting allocator).
    pub bytes_allocated_per_pod: Option<f64>,
    pub allocs_per_pod: Option<f64>,
    pub peak_rss_mib: Option<f64>,
}

/// Cards per node, shares per card, MiB per card, and what every pod asks of one card.
const GPU_CARDS: usize = 8;
const GPU_SPLIT: i64 = 10;
const GPU_MEMORY_MIB: i64 = 81920;
const GPU_POD_MEMORY_MIB: i64 = 1024;
const GPU_POD_CORES: i64 = 10;
/// Resident pods per card, and measured pods.
const GPU_RESIDENTS_PER_CARD: usize = 4;
const GPU_MEASURED_PODS: usize = 500;

/// A node with `GPU_CARDS` HAMi-registered cards.
fn gpu_node(index: usize) -> Node {
    use gantry_api::gpu;
    let name = format!("node-{index}");
    let register: Vec<serde_json::Value> = (0..GPU_CARDS)
        .map(|c| {
            serde_json::json!({"id": format!("GPU-{name}-{c}"), "index": c, "count": GPU_SPLIT,
                "devmem": GPU_MEMORY_MIB, "devcore": 100, "type": "NVIDIA-H100", "numa": c / 4,
                "mode": "hami-core", "health": true})
        })
        .collect();
    let mut allocatable = Resources::new(128_000, 1024 * 1024 * MIB);
    allocatable.pods = 110;
    allocatable.set_scalar(Sym::new(gpu::GPU_COUNT), GPU_CARDS as i64 * GPU_SPLIT);
    let mut node = Node::new(&name, allocatable).with_labels([(HOSTNAME, name.as_str())]);
    node.annotations = Arc::from([(
        Arc::from(gpu::REGISTER_ANNOTATION),
        Arc::from(serde_json::Value::Array(register).to_string()),
    )]);
    node.gpus = gpu::parse_node_devices(&node.annotations)
        .expect("the generated inventory reads")
        .map(Arc::new);
    node
}

/// A pod asking for one card: 1,024 MiB and 10% of its compute.
fn gpu_pod(namespace: &str, name: &str) -> Pod {
    use gantry_api::gpu;
    let mut c = Container::new("c", Some(100), Some(500 * MIB));
    for (resource, amount) in [
        (gpu::GPU_COUNT, 1),
        (gpu::GPU_MEMORY, GPU_POD_MEMORY_MIB),
        (gpu::GPU_CORES, GPU_POD_CORES),
    ] {
        c.requests.set_scalar(Sym::new(resource), amount);
    }
    Pod::new(namespace, name).with_container(c)
}

/// HAMi's benchmark (the seed): `nodes` nodes of 8 cards × 10 shares, 4 resident pods per
/// card placed by HAMi before (their annotations say which card), then 500 new pods each
/// asking for one card, 1,024 MiB and 10% of compute; spread within nodes (HAMi's
/// default). Nodes are searched as kube-scheduler searches them before HAMi's extender
/// sees any (`percentageOfNodesToScore`, upstream's adaptive default unless the options
/// give one: HAMi scores the feasible nodes kube-scheduler found). `rounds` rounds, each
/// on a fresh cluster: throughput is their median (the seed reports medians of rounds),
/// latencies pool every round's attempts, allocations are averaged.
pub fn run_gpu_share(
    nodes: usize,
    rounds: usize,
    options: &BenchOptions,
) -> Result<GpuShareResult, SimError> {
    let rounds: Vec<GpuShareRound> = (0..rounds.max(1))
        .map(|_| gpu_share_round(nodes, options))
        .collect::<Result<_, _>>()?;
    let mut throughput: Vec<f64> = rounds.iter().map(|r| r.pods_per_sec).collect();
    throughput.sort_by(f64::total_cmp);
    let mut latencies: Vec<u64> = rounds.iter().flat_map(|r| r.latencies_us.clone()).collect();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    let average = |counter: fn(&GpuShareRound) -> Option<u64>| {
        let total: Option<u64> = rounds.iter().map(counter).sum();
        total.map(|t| t as f64 / (rounds.len() * GPU_MEASURED_PODS) as f64)
    };
    Ok(GpuShareResult {
        workload: "gpu-share",
        percentage_of_nodes_to_score: options.percentage_of_nodes_to_score,
        nodes,
        resident_pods: rounds[0].resident_pods,
        measured_pods: GPU_MEASURED_PODS,
        rounds: rounds.len(),
        scheduled: rounds.iter().map(|r| r.scheduled).min().unwrap_or(0),
        pods_per_sec: throughput[throughput.len() / 2],
        p50_us: at(0.5),
        p99_us: at(0.99),
        bytes_allocated_per_pod: average(|r| r.bytes),
        allocs_per_pod: average(|r| r.allocations),
        peak_rss_mib: peak_rss_mib(),
    })
}

/// One round of `run_gpu_share`.
struct GpuShareRound {
    resident_pods: usize,
    scheduled: usize,
    pods_per_sec: f64,
    latencies_us: Vec<u64>,
    allocations: Option<u64>,
    bytes: Option<u64>,
}

fn gpu_share_round(nodes: usize, options: &BenchOptions) -> Result<GpuShareRound, SimError> {
    use gantry_api::gpu;
    let mut cluster = ClusterObjects::default();
    cluster.nodes = (0..nodes).map(gpu_node).collect();
    for n in 0..nodes {
        for card in 0..GPU_CARDS {
            for r in 0..GPU_RESIDENTS_PER_CARD {
                let mut p = gpu_pod(INIT_NAMESPACE, &format!("resident-{n}-{card}-{r}"))
                    .on_node(&format!("node-{n}"));
                let assignment =
                    format!("GPU-node-{n}-{card},NVIDIA,{GPU_POD_MEMORY_MIB},{GPU_POD_CORES}:;");
                p.annotations = Arc::from([
                    (
                        Arc::from(gpu::ASSIGNED_NODE),
                        Arc::from(format!("node-{n}")),
                    ),
                    (Arc::from(gpu::DEVICES_ALLOCATED), Arc::from(assignment)),
                ]);
                cluster.pods.push(p);
            }
        }
    }
    let resident_pods = cluster.pods.len();
    let mut profile = default_profile("default-scheduler");
    profile.percentage_of_nodes_to_score = options.percentage_of_nodes_to_score;
    let mut sim = Simulation::new(cluster, vec![profile], SimOptions::default())
        .expect("a synthetic cluster loads");
    sim.run_until(Duration::ZERO)?;
    sim.clear_latencies();
    let bound_before = sim.api.binds;
    for i in 0..GPU_MEASURED_PODS {
        let p = gpu_pod(MEASURED_NAMESPACE, &format!("measured-{i}"));
        sim.schedule(Duration::from_secs(1), SimEvent::CreatePod(Arc::new(p)));
    }
    let read = |counter: Option<fn() -> u64>| counter.map(|f| f());
    let (allocations_before, bytes_before) =
        (read(options.allocations), read(options.bytes_allocated));
    let summary = sim.run()?;
    let since = |counter: Option<fn() -> u64>, before: Option<u64>| {
        counter.zip(before).map(|(f, b)| f() - b)
    };
    Ok(GpuShareRound {
        resident_pods,
        scheduled: (sim.api.binds - bound_before) as usize,
        pods_per_sec: GPU_MEASURED_PODS as f64 / summary.wall_s.max(1e-9),
        latencies_us: sim.latencies_us().to_vec(),
        allocations: since(options.allocations, allocations_before),
        bytes: since(options.bytes_allocated, bytes_before),
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
    fn the_gpu_share_shape_schedules_every_pod_onto_hamis_cards() {
        let r = run_gpu_share(16, 2, &BenchOptions::default()).unwrap();
        assert_eq!(
            (r.resident_pods, r.scheduled, r.rounds),
            (512, 500, 2),
            "{r:?}"
        );
        // 4 nodes × 8 cards × 10 shares = 320, 128 of them resident: 192 pods fit, no
        // card takes an 11th.
        let r = run_gpu_share(4, 1, &BenchOptions::default()).unwrap();
        assert_eq!((r.resident_pods, r.scheduled), (128, 192), "{r:?}");
    }

    /// The benchmarks' workloads place as many pods, preempt as many and look at as many
    /// nodes with the verdict memo as without it (the simulation tests compare every
    /// placement on random scenarios).
    #[test]
    fn the_verdict_memo_changes_no_workload_s_outcome() {
        for workload in Workload::ALL.into_iter().filter(|&w| w != Workload::Scale) {
            let outcome = |no_verdict_memo| {
                let options = BenchOptions {
                    scale_down: 50,
                    no_verdict_memo,
                    ..BenchOptions::default()
                };
                let r = run(workload, &options).unwrap();
                (r.scheduled, r.preempted, r.nodes_evaluated_per_pod)
            };
            assert_eq!(outcome(false), outcome(true), "{workload:?}");
        }
    }

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

    /// `scale --nodes N` holds 50 pods a node up to two million in all, and measures
    /// 50,000 pods, whatever the size (scaled down here as on the command line).
    #[test]
    fn scale_follows_the_node_count() {
        assert_eq!(scale_resident_pods(20_000), 1_000_000);
        assert_eq!(scale_resident_pods(100_000), 2_000_000);
        assert_eq!(scale_resident_pods(3), 150);
        let result = run(
            Workload::Scale,
            &BenchOptions {
                nodes: Some(100_000),
                scale_down: 1000,
                ..BenchOptions::default()
            },
        )
        .unwrap();
        assert_eq!(
            (result.nodes, result.init_pods, result.measured_pods),
            (100, 2_000, 50),
            "{result:?}"
        );
        assert_eq!(result.scheduled, 50, "{result:?}");
        // The adaptive rule at 100 nodes looks at all of them.
        assert_eq!(result.nodes_evaluated_per_pod, 100.0, "{result:?}");
    }
}
