//! Synthetic clusters for benchmarks: scheduler_perf's node and pod templates, spread
//! over three zones, and a measurement of incremental snapshot updates against full
//! rebuilds that `gantry bench snapshot` and the criterion benchmark share.

use std::sync::Arc;
use std::time::Instant;

use gantry_api::{Node, Pod, Resources};

use crate::{Cache, Snapshot};

/// scheduler_perf's node-default: 4 cpu, 32Gi, 110 pods.
pub fn default_node(name: &str, zone: usize) -> Node {
    let mut allocatable = Resources::new(4000, 32 << 30);
    allocatable.pods = 110;
    Node::new(name, allocatable).with_labels([
        ("kubernetes.io/hostname", name),
        (
            "topology.kubernetes.io/zone",
            ["zone-a", "zone-b", "zone-c"][zone % 3],
        ),
    ])
}

/// scheduler_perf's pod-default: 100m cpu, 500Mi, bound to `node`.
pub fn default_pod(name: &str, node: &str) -> Pod {
    Pod::new("default", name)
        .with_requests(100, 500 << 20)
        .on_node(node)
}

/// A cache holding `nodes` nodes with `pods_per_node` bound pods each.
pub fn cluster(nodes: usize, pods_per_node: usize) -> Cache {
    let cache = Cache::new();
    for n in 0..nodes {
        let name = format!("node-{n}");
        cache.add_node(Arc::new(default_node(&name, n)));
        for p in 0..pods_per_node {
            let pod = default_pod(&format!("pod-{n}-{p}"), &name);
            cache
                .add_pod(Arc::new(pod))
                .expect("fresh pod names are unique");
        }
    }
    cache
}

/// Changes `count` nodes (spread over the cluster) by adding a pod to each, as a cycle's
/// worth of binds would. `round` keeps pod names unique across calls.
pub fn touch_nodes(cache: &Cache, nodes: usize, count: usize, round: usize) {
    let stride = (nodes / count.max(1)).max(1);
    for i in 0..count.min(nodes) {
        let node = format!("node-{}", (i * stride) % nodes);
        let pod = default_pod(&format!("touch-{round}-{i}"), &node);
        cache
            .add_pod(Arc::new(pod))
            .expect("fresh pod names are unique");
    }
}

/// Medians of incremental snapshot updates against full rebuilds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotMeasurement {
    pub nodes: usize,
    pub pods_per_node: usize,
    pub changed: usize,
    /// Changed NodeInfos the incremental update took (equals `changed`).
    pub cloned: usize,
    /// The cache's changes before each update (a pod added to each changed node): where a
    /// changed NodeInfo is copied, once, since snapshots share the cache's NodeInfos.
    pub changes_ns: u64,
    pub incremental_ns: u64,
    pub full_rebuild_ns: u64,
}

pub fn measure_snapshot(
    nodes: usize,
    pods_per_node: usize,
    changed: usize,
    repetitions: usize,
) -> SnapshotMeasurement {
    let cache = cluster(nodes, pods_per_node);
    let mut snapshot = Snapshot::new();
    let consistent = "a synthetic cluster's snapshot is consistent";
    cache.update_snapshot(&mut snapshot).expect(consistent);
    let mut incremental = Vec::with_capacity(repetitions);
    let mut full = Vec::with_capacity(repetitions);
    let mut changes = Vec::with_capacity(repetitions);
    let mut cloned = 0;
    for round in 0..repetitions.max(1) {
        let start = Instant::now();
        touch_nodes(&cache, nodes, changed, round);
        changes.push(start.elapsed().as_nanos() as u64);
        let start = Instant::now();
        cloned = cache
            .update_snapshot(&mut snapshot)
            .expect(consistent)
            .cloned;
        incremental.push(start.elapsed().as_nanos() as u64);
        let start = Instant::now();
        let rebuilt = cache.full_snapshot();
        full.push(start.elapsed().as_nanos() as u64);
        drop(rebuilt);
    }
    SnapshotMeasurement {
        nodes,
        pods_per_node,
        changed,
        cloned,
        changes_ns: median(&mut changes),
        incremental_ns: median(&mut incremental),
        full_rebuild_ns: median(&mut full),
    }
}

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}
