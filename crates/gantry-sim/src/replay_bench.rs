//! `gantry bench replay` and `replay-affinity`: a recorded trace of a 5,000-node cluster
//! with 100,000 changes, replayed as `gantry simulate --trace` replays it. The trace is
//! generated (gzip, as `gantry record -o x.gz` writes it): 5,000 nodes of 32 cpu in three
//! zones with 25,000 pods bound at the start; then over an hour 40,000 pods arrive, each
//! bound by the recorded scheduler 20 ms later (round-robin over the nodes: not the
//! default profile's choice), and 20,000 of them are deleted. [`TraceShape`] says which
//! pods. The figures: the trace's size, the time to read and decode it, the time to
//! replay it, and the peak RSS.

use std::io::Write;
use std::time::Instant;

use gantry_api::Release;
use gantry_framework::plugins::default_profile_for;
use serde::Serialize;
use serde_json::{Value, json};

use crate::bench::peak_rss_mib;
use crate::replay::{Divergence, read};
use crate::{SimOptions, Simulation};

const NODES: usize = 5_000;
const PODS_AT_START: usize = 25_000;
const ARRIVALS: usize = 40_000;
const DELETIONS: usize = 20_000;
/// One arrival every this many milliseconds: 40,000 in an hour.
const ARRIVAL_EVERY_MS: u64 = 90;
const BIND_AFTER_MS: u64 = 20;

/// Which pods a generated trace holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceShape {
    /// Pods of a dozen deployments without affinity, arriving one every 90 ms.
    Plain,
    /// Pods of 100 deployments, each preferring not to share a node with its deployment's
    /// other pods (the preferred pod anti-affinity many charts set by default), arriving
    /// as deployments scale up: 100 pods of one deployment a millisecond apart, every
    /// 9 s. More selections than the snapshot once counted, and pods still binding while
    /// the next are scheduled.
    Affinity,
}

impl TraceShape {
    pub fn workload(self) -> &'static str {
        match self {
            TraceShape::Plain => "replay",
            TraceShape::Affinity => "replay-affinity",
        }
    }

    fn deployments(self) -> usize {
        match self {
            TraceShape::Plain => 12,
            TraceShape::Affinity => 100,
        }
    }

    /// The deployment of the `index`th pod arriving.
    fn deployment_of_arrival(self, index: usize) -> usize {
        match self {
            TraceShape::Plain => index % self.deployments(),
            TraceShape::Affinity => index / BURST % self.deployments(),
        }
    }

    /// When the `index`th pod arrives, in milliseconds from the start.
    fn arrival_ms(self, index: usize) -> u64 {
        match self {
            TraceShape::Plain => index as u64 * ARRIVAL_EVERY_MS,
            TraceShape::Affinity => {
                (index / BURST) as u64 * ARRIVAL_EVERY_MS * BURST as u64 + (index % BURST) as u64
            }
        }
    }
}

/// Pods of one deployment arriving together in [`TraceShape::Affinity`].
const BURST: usize = 100;

#[derive(Debug, Clone, Serialize)]
pub struct ReplayBenchResult {
    /// `replay` or `replay-affinity`.
    pub workload: &'static str,
    pub nodes: usize,
    /// Records after the state at the start.
    pub changes: usize,
    pub trace_bytes: usize,
    pub read_s: f64,
    pub replay_s: f64,
    pub total_s: f64,
    pub pods_scheduled: usize,
    /// The share of the recorded (round-robin) bindings the default profile reproduced.
    pub reproduced: f64,
    pub peak_rss_mib: Option<f64>,
}

fn node(index: usize) -> Value {
    let name = format!("node-{index:05}");
    json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "topology.kubernetes.io/zone": format!("zone-{}", index % 3),
            "node.kubernetes.io/instance-type": "m7i.8xlarge"}},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                   "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// The pod `index` of deployment `deployment`, bound to `node` if given.
fn pod(shape: TraceShape, index: usize, deployment: usize, node: Option<usize>) -> Value {
    let app = format!("app-{deployment}");
    let mut pod = json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": format!("{app}-{index:06}"), "namespace": "shop",
            "uid": format!("uid-{index:06}"), "labels": {"app": app},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": format!("{app}-5d8f9"), "uid": format!("rs-{app}"), "controller": true}]},
        "spec": {"schedulerName": "default-scheduler", "priority": 0,
            "containers": [{"name": "main", "image": format!("registry.example/{app}:1.4"),
                "resources": {"requests": {"cpu": format!("{}m", 250 + 50 * (index % 8)),
                                           "memory": format!("{}Mi", 256 + 64 * (index % 6))}}}],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Pending"}});
    if shape == TraceShape::Affinity {
        pod["spec"]["affinity"] = json!({"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100,
                "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}},
                                    "topologyKey": "kubernetes.io/hostname"}}]}});
    }
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(format!("node-{node:05}"));
        pod["status"]["phase"] = json!("Running");
    }
    pod
}

/// The trace, gzip-compressed.
pub fn trace(shape: TraceShape) -> Vec<u8> {
    let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut records = 0usize;
    // A line at a time: the encoder compresses each write it is given.
    let line = |out: &mut flate2::write::GzEncoder<Vec<u8>>, value: Value| {
        let mut text = serde_json::to_vec(&value).expect("plain data");
        text.push(b'\n');
        out.write_all(&text).expect("writes to memory");
    };
    line(
        &mut out,
        json!({"gantryTrace": 1, "server": "https://bench:6443",
        "serverVersion": "v1.35.4", "started": "2026-12-04T00:00:00Z"}),
    );
    let mut record =
        |out: &mut flate2::write::GzEncoder<Vec<u8>>, at: u64, op: &str, object: Value| {
            records += 1;
            line(out, json!({"at": at, "op": op, "object": object}));
        };
    for index in 0..NODES {
        record(&mut out, 0, "list", node(index));
    }
    for index in 0..PODS_AT_START {
        let deployment = index % shape.deployments();
        let bound = pod(shape, 1_000_000 + index, deployment, Some(index % NODES));
        record(&mut out, 0, "list", bound);
    }
    // Arrivals and their bindings interleave in time; deletions follow the pods they
    // delete by half an hour.
    let mut changes: Vec<(u64, u8, usize)> = Vec::with_capacity(ARRIVALS * 2 + DELETIONS);
    for index in 0..ARRIVALS {
        let at = shape.arrival_ms(index);
        changes.push((at, 0, index));
        changes.push((at + BIND_AFTER_MS, 1, index));
        if index < DELETIONS {
            changes.push((at + 1_800_000, 2, index));
        }
    }
    changes.sort_unstable();
    let end = changes.last().map_or(0, |c| c.0) + 1;
    for (at, what, index) in changes {
        let deployment = shape.deployment_of_arrival(index);
        let node = Some(index * 7 % NODES);
        match what {
            0 => record(&mut out, at, "added", pod(shape, index, deployment, None)),
            1 => record(
                &mut out,
                at,
                "modified",
                pod(shape, index, deployment, node),
            ),
            _ => record(&mut out, at, "deleted", pod(shape, index, deployment, node)),
        }
    }
    line(
        &mut out,
        json!({"at": end, "op": "end", "records": records}),
    );
    out.finish().expect("writes to memory")
}

pub fn run_replay(shape: TraceShape) -> Result<ReplayBenchResult, String> {
    let trace = trace(shape);
    let trace_bytes = trace.len();
    let release = Release::at(35);
    let start = Instant::now();
    let replay = read(
        std::io::Cursor::new(trace),
        "bench trace",
        release,
        &|name| name == "default-scheduler",
    )?;
    let mut cluster = replay.cluster;
    cluster.admit().map_err(|e| e.to_string())?;
    let read_s = start.elapsed().as_secs_f64();
    let changes = replay.events.len() + replay.recorded.len();
    let profile = default_profile_for("default-scheduler", release);
    let mut sim = Simulation::new(cluster, vec![profile], SimOptions::default())?;
    sim.expect_bindings(&replay.recorded);
    for (at, event) in replay.events {
        sim.schedule(at, event);
    }
    let summary = sim.run().map_err(|e| e.to_string())?;
    let total_s = start.elapsed().as_secs_f64();
    let divergence = Divergence::of(
        &replay.recorded,
        sim.placements(),
        sim.recorded_nodes_judged(),
    );
    Ok(ReplayBenchResult {
        workload: shape.workload(),
        nodes: NODES,
        changes,
        trace_bytes,
        read_s,
        replay_s: total_s - read_s,
        total_s,
        pods_scheduled: summary.scheduled,
        reproduced: divergence.reproduced(),
        peak_rss_mib: peak_rss_mib(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_pods_arrive_a_deployment_at_a_time_with_their_term() {
        let shape = TraceShape::Affinity;
        assert_eq!(
            [0, 99, 100, 199].map(|i| shape.arrival_ms(i)),
            [0, 99, 9_000, 9_099]
        );
        assert_eq!(
            [0, 99, 100, 100 * 100].map(|i| shape.deployment_of_arrival(i)),
            [0, 0, 1, 0]
        );
        let term = &pod(shape, 5, 3, None)["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            [0];
        assert_eq!(
            term["podAffinityTerm"]["labelSelector"]["matchLabels"]["app"],
            "app-3"
        );
        assert_eq!(term["weight"], 100);
        assert!(pod(TraceShape::Plain, 5, 3, None)["spec"]["affinity"].is_null());
        assert_eq!(TraceShape::Plain.arrival_ms(2), 180);
    }
}
