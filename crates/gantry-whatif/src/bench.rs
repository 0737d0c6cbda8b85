//! Measurements behind `gantry bench clustersnapshot` and `gantry bench estimate`.
//!
//! The snapshot benchmark holds a synthetic cluster (scheduler_perf's default node and
//! pod templates) and times fork, revert and commit and a search over all nodes, and counts
//! allocations when reading one NodeInfo or listing all of them (from a fork, so reads go
//! through the layers). The estimate benchmark is the Cluster Autoscaler's own
//! (`BenchmarkBinpackingEstimate`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry_api::dra::DraObjects;
use gantry_api::{Labels, Node, Pod, ResourceName, Resources, Sym};
use gantry_cache::synthetic::{default_node, default_pod};
use gantry_framework::ApiObjects;
use gantry_framework::plugins::default_profile;

use crate::estimator::{EquivalenceGroup, NodeTemplate, estimate};
use crate::snapshot::{ClusterSnapshot, SchedulingError, with_dynamic_resources};
use crate::store::StoreKind;

/// Counts allocations made so far by the process (the binary's counting allocator).
pub type AllocationCounter = fn() -> u64;

#[derive(Debug, Clone)]
pub struct SnapshotFigures {
    pub store: &'static str,
    pub nodes: usize,
    pub pods_per_node: usize,
    pub changed: usize,
    /// `None` without an allocation counter.
    pub allocs_per_get: Option<f64>,
    pub allocs_per_list: Option<f64>,
    pub fork_ns: u128,
    pub revert_ns: u128,
    pub commit_ns: u128,
    pub schedule_anywhere_ns: u128,
    /// Whether the searches found a node with room (with many pods per node, or few
    /// nodes, none may have any: the figure is then the time to try them all).
    pub schedule_anywhere_found: bool,
}

fn median(mut samples: Vec<Duration>) -> u128 {
    samples.sort();
    samples[samples.len() / 2].as_nanos()
}

/// A snapshot of `nodes` and the `pods` bound to them, scheduled by the default profile
/// with DynamicResources.
fn loaded(kind: StoreKind, nodes: &[Node], pods: &[Arc<Pod>]) -> ClusterSnapshot {
    let dra = DraObjects::default();
    let mut snapshot = ClusterSnapshot::new(
        kind,
        with_dynamic_resources(default_profile("default-scheduler")),
        ApiObjects::default(),
        &dra,
    );
    snapshot
        .load(nodes, pods, &dra)
        .expect("benchmark nodes have unique names");
    snapshot
}

fn synthetic(kind: StoreKind, nodes: usize, pods_per_node: usize) -> ClusterSnapshot {
    let node_list: Vec<Node> = (0..nodes)
        .map(|n| default_node(&format!("node-{n}"), n))
        .collect();
    let mut pods = Vec::with_capacity(nodes * pods_per_node);
    for n in 0..nodes {
        for p in 0..pods_per_node {
            pods.push(Arc::new(default_pod(
                &format!("pod-{n}-{p}"),
                &format!("node-{n}"),
            )));
        }
    }
    loaded(kind, &node_list, &pods)
}

/// Adds one pod to each of `count` nodes spread over the cluster.
fn change_nodes(snapshot: &mut ClusterSnapshot, nodes: usize, count: usize, round: usize) {
    let stride = (nodes / count.max(1)).max(1);
    for i in 0..count.min(nodes) {
        let node = format!("node-{}", (i * stride) % nodes);
        let pod = Arc::new(default_pod(&format!("change-{round}-{i}"), &node));
        snapshot
            .add_pod(pod, Sym::new(&node))
            .expect("the node exists");
    }
}

pub fn measure_snapshot(
    kind: StoreKind,
    nodes: usize,
    pods_per_node: usize,
    changed: usize,
    repetitions: usize,
    allocations: Option<AllocationCounter>,
) -> Result<SnapshotFigures, SchedulingError> {
    let repetitions = repetitions.max(1);
    let mut snapshot = synthetic(kind, nodes, pods_per_node);
    let names: Vec<Sym> = (0..nodes).map(|n| Sym::new(&format!("node-{n}"))).collect();

    // Reads from inside a fork with changes, so that the delta store looks through a layer.
    snapshot.fork();
    change_nodes(&mut snapshot, nodes, changed, 0);
    let gets = 10_000;
    let count = |f: &mut dyn FnMut()| {
        allocations.map(|counter| {
            let before = counter();
            f();
            counter() - before
        })
    };
    let mut touched = 0usize;
    let get_allocs = count(&mut || {
        for i in 0..gets {
            let info = snapshot.cluster().node(names[i % nodes]).expect("exists");
            touched += info.pods().len();
        }
    });
    let lists = 10;
    let list_allocs = count(&mut || {
        for _ in 0..lists {
            let cluster = snapshot.cluster();
            for p in 0..cluster.num_nodes() {
                touched += cluster.node_at(p).pods().len();
            }
        }
    });
    std::hint::black_box(touched);
    snapshot.revert().expect("forked above");

    let mut fork = Vec::new();
    let mut revert = Vec::new();
    let mut commit = Vec::new();
    for round in 0..repetitions {
        let start = Instant::now();
        snapshot.fork();
        fork.push(start.elapsed());
        change_nodes(&mut snapshot, nodes, changed, round + 1);
        let start = Instant::now();
        snapshot.revert().expect("forked above");
        revert.push(start.elapsed());

        snapshot.fork();
        change_nodes(&mut snapshot, nodes, changed, round + 1);
        let start = Instant::now();
        snapshot.commit().expect("forked above");
        commit.push(start.elapsed());
    }

    // The first feasible node from a rotating start, as the estimator searches; each
    // search in a fork of its own, so that the pods placed do not fill the cluster. A
    // cluster with no room (pods beyond what the nodes hold) is searched through.
    let mut schedule = Vec::new();
    let mut found = true;
    for i in 0..repetitions.max(101) {
        let pod =
            Arc::new(Pod::new("default", &format!("anywhere-{i}")).with_requests(100, 500 << 20));
        snapshot.fork();
        let start = Instant::now();
        let placed = snapshot.schedule_anywhere(&pod, None, &crate::Destinations::ANY);
        schedule.push(start.elapsed());
        snapshot.revert().expect("forked above");
        match placed {
            Ok(_) => {}
            Err(SchedulingError::Unschedulable(_)) => found = false,
            Err(internal) => return Err(internal),
        }
    }

    Ok(SnapshotFigures {
        store: kind.name(),
        nodes,
        pods_per_node,
        changed,
        allocs_per_get: get_allocs.map(|a| a as f64 / gets as f64),
        allocs_per_list: list_allocs.map(|a| a as f64 / lists as f64),
        fork_ns: median(fork),
        revert_ns: median(revert),
        commit_ns: median(commit),
        schedule_anywhere_ns: median(schedule),
        schedule_anywhere_found: found,
    })
}

/// The Cluster Autoscaler's BenchmarkBinpackingEstimate: one old node of 100m/100Mi/10
/// pods in zone-jupiter; 50,000 pods requesting 50m and 100 bytes and 1,000 pods
/// requesting 95m and 190 bytes (upstream's `BuildTestPod` takes memory in bytes); a
/// template of 1000m/5000Mi/100 pods in zone-mars; at most 3,000 new nodes. Upstream's
/// answer: 2,595 nodes.
pub struct AutoscalerBenchmark {
    pub snapshot: ClusterSnapshot,
    pub groups: Vec<EquivalenceGroup>,
    pub template: NodeTemplate,
    pub max_nodes: usize,
}

impl AutoscalerBenchmark {
    pub const EXPECTED_NODES: usize = 2595;

    pub fn new(kind: StoreKind) -> AutoscalerBenchmark {
        let node = |milli_cpu: i64, memory_mib: i64, pods: i64, name: &str, zone: &str| {
            let mut allocatable = Resources::new(milli_cpu, memory_mib << 20);
            allocatable.set(ResourceName::Pods, pods);
            Node::new(name, allocatable).with_labels([
                ("kubernetes.io/hostname", name),
                ("topology.kubernetes.io/zone", zone),
            ])
        };
        // Upstream repeats one pod object; here the pods of a group are distinct pods that
        // share one template (as a controller's pods do), so only names and uids differ.
        let group = |prefix: &str, milli_cpu: i64, memory: i64, count: usize| {
            let mut exemplar = Pod::new("universe", prefix).with_requests(milli_cpu, memory);
            exemplar.labels = Labels::from_strs([("app", "estimatee")]);
            EquivalenceGroup {
                pods: (0..count)
                    .map(|i| {
                        let mut pod = exemplar.clone();
                        pod.name = Arc::from(format!("{prefix}-{i}"));
                        pod.uid = Arc::from(format!("universe/{prefix}-{i}"));
                        Arc::new(pod)
                    })
                    .collect(),
            }
        };
        let snapshot = loaded(kind, &[node(100, 100, 10, "oldnode", "zone-jupiter")], &[]);
        AutoscalerBenchmark {
            snapshot,
            groups: vec![
                group("estimatee-small", 50, 100, 50_000),
                group("estimatee-large", 95, 190, 1_000),
            ],
            template: NodeTemplate {
                node: node(1000, 5000, 100, "template", "zone-mars"),
                slices: Vec::new(),
            },
            max_nodes: 3000,
        }
    }

    pub fn pods(&self) -> usize {
        self.groups.iter().map(|g| g.pods.len()).sum()
    }
}

#[derive(Debug, Clone)]
pub struct EstimateFigures {
    pub pods: usize,
    pub nodes_needed: usize,
    /// Median wall time of one estimate (ordering, fork, binpacking, revert).
    pub estimate_ms: f64,
    /// Median time on a CPU of one estimate, where the system tells it.
    pub estimate_cpu_ms: Option<f64>,
    pub runs: usize,
}

pub fn measure_estimate(kind: StoreKind, runs: usize) -> EstimateFigures {
    let mut bench = AutoscalerBenchmark::new(kind);
    let mut times = Vec::new();
    let mut cpu_times = Vec::new();
    let mut nodes_needed = 0;
    for _ in 0..runs.max(1) {
        let cpu_start = thread_cpu_time();
        let start = Instant::now();
        let result = estimate(
            &mut bench.snapshot,
            &bench.groups,
            &bench.template,
            Some(bench.max_nodes),
        )
        .expect("the benchmark's pods are well-formed");
        times.push(start.elapsed());
        if let (Some(before), Some(after)) = (cpu_start, thread_cpu_time()) {
            cpu_times.push(after.saturating_sub(before));
        }
        nodes_needed = result.nodes_needed;
    }
    let runs = times.len();
    EstimateFigures {
        pods: bench.pods(),
        nodes_needed,
        estimate_ms: median(times) as f64 / 1e6,
        estimate_cpu_ms: (cpu_times.len() == runs).then(|| median(cpu_times) as f64 / 1e6),
        runs,
    }
}

/// Time this thread has spent on a CPU (Linux's `/proc/thread-self/schedstat`); `None`
/// where it cannot be read. Unlike wall time, it leaves out time spent waiting for a core,
/// which on a machine shared with other work can be most of it.
fn thread_cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flag combinations within `gantry bench clustersnapshot`'s ranges that once panicked
    /// ("the synthetic cluster has room"): a cluster too small or too full for the searches.
    #[test]
    fn small_and_full_clusters_are_measured() {
        for (nodes, pods_per_node, changed, found) in [
            (1, 1, 1, true),
            (1, 0, 0, true),
            (2, 30, 0, true),
            (1, 1000, 1, false),
        ] {
            for kind in [StoreKind::Basic, StoreKind::Delta] {
                let m = measure_snapshot(kind, nodes, pods_per_node, changed, 3, None)
                    .expect("no plugin fails");
                assert_eq!(
                    m.schedule_anywhere_found, found,
                    "{nodes} x {pods_per_node}"
                );
            }
        }
    }
}
