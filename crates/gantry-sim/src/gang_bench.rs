//! `gantry bench gang`: gangs among single pods on 5,000 nodes, as kube-scheduler v1.36
//! schedules them with GenericWorkload and GangScheduling on. Nodes of 32 cpu; a repeating
//! mix of a gang of 64 pods (4 cpu each), two gangs of 8 (2 cpu each) and 16 single pods
//! (1 cpu each), filling about half the cluster; one gang of 8 in ten asks for 48 cpu a
//! pod, which fits no node: such a gang is tried, reverted and retried, and must hold
//! nothing. Every PodGroup exists before its members arrive, and all pods arrive at once.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_api::{Node, Pod, PodGroup, Release, Resources, Sym};
use gantry_framework::plugins::default_profile_for;
use serde::Serialize;

use crate::bench::{BenchOptions, peak_rss_mib, run_measured};
use crate::records::GroupCondition;
use crate::{BindLatency, SimError, SimEvent, SimOptions, Simulation};

const NODES: usize = 5_000;
const NODE_MILLI_CPU: i64 = 32_000;
const GIB: i64 = 1 << 30;
/// Rounds of the repeating mix; each round is 64 + 2 × 8 gang members and 16 singles.
const ROUNDS: usize = 250;
const BIG_GANG: usize = 64;
const SMALL_GANG: usize = 8;
const SINGLES_PER_ROUND: usize = 16;
/// One small gang in this many cannot fit anywhere.
const UNFIT_EVERY: usize = 10;

#[derive(Debug, Clone, Serialize)]
pub struct GangBenchResult {
    pub workload: &'static str,
    pub nodes: usize,
    pub pods: usize,
    pub gangs: usize,
    /// Gangs whose members were all bound.
    pub gangs_scheduled: usize,
    /// Gangs left `PodGroupScheduled=False` (those that fit nowhere).
    pub gangs_unschedulable: usize,
    pub pods_scheduled: usize,
    pub pods_per_sec: f64,
    /// Simulated seconds from the arrival to the last gang's full placement.
    pub last_gang_scheduled_s: f64,
    /// Pod-group cycles run, and member attempts in them that were assumed and then
    /// reverted because the gang missed its quorum.
    pub group_cycles: u64,
    /// Scheduling attempts of single pods and members, and those beyond a pod's first.
    pub attempts: u64,
    pub retries: u64,
    /// Pods still assumed or bound for a gang that is not scheduled, at the end: the
    /// capacity incomplete gangs hold. The v1.36 pod-group cycle reverts a failed gang
    /// within the cycle, so anything but 0 is a bug.
    pub pods_held_by_incomplete_gangs: usize,
    pub p50_us: u64,
    pub p99_us: u64,
    pub allocs_per_pod: Option<f64>,
    pub bytes_allocated_per_pod: Option<f64>,
    pub peak_rss_mib: Option<f64>,
}

/// The release the benchmark decides as: v1.36 with the workload gates on.
pub fn release() -> Release {
    Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true"),
    )
    .expect("v1.36 models the workload gates")
}

pub fn run_gang(options: &BenchOptions) -> Result<GangBenchResult, SimError> {
    let scale = options.scale_down.max(1);
    let (nodes, rounds) = ((NODES / scale).max(1), (ROUNDS / scale).max(1));
    let release = release();
    let mut cluster = ClusterObjects::for_release(release);
    cluster.nodes = (0..nodes).map(node).collect();
    let sim_options = SimOptions {
        bind_latency: BindLatency::Fixed(Duration::ZERO),
        ..SimOptions::default()
    };
    let mut sim = Simulation::new(
        cluster,
        vec![default_profile_for("default-scheduler", release)],
        sim_options,
    )
    .expect("a synthetic cluster loads");

    let mut gangs = Vec::new();
    let mut pods = 0;
    let mut create_gang = |sim: &mut Simulation, name: String, size: usize, milli_cpu: i64| {
        let group = PodGroup::gang("default", &name, size as u32);
        sim.schedule(Duration::ZERO, SimEvent::CreatePodGroup(Arc::new(group)));
        let template = member(&name, milli_cpu);
        for i in 0..size {
            let pod = template.replica(&format!("{name}-{i}"));
            sim.schedule(Duration::from_secs(1), SimEvent::CreatePod(Arc::new(pod)));
        }
        pods += size;
        gangs.push((format!("default/{name}"), size));
    };
    let mut small = 0;
    for round in 0..rounds {
        create_gang(&mut sim, format!("big-{round}"), BIG_GANG, 4_000);
        for _ in 0..2 {
            let unfit = small % UNFIT_EVERY == UNFIT_EVERY - 1;
            let milli_cpu = if unfit { 48_000 } else { 2_000 };
            create_gang(&mut sim, format!("small-{small}"), SMALL_GANG, milli_cpu);
            small += 1;
        }
        let single = Pod::new("default", "single").with_requests(1_000, GIB);
        for i in 0..SINGLES_PER_ROUND {
            let pod = single.replica(&format!("single-{round}-{i}"));
            sim.schedule(Duration::from_secs(1), SimEvent::CreatePod(Arc::new(pod)));
        }
    }
    let pods = pods + rounds * SINGLES_PER_ROUND;
    sim.run_until(Duration::ZERO)?;
    let read = |counter: Option<fn() -> u64>| counter.map(|f| f());
    let (allocations_before, bytes_before) =
        (read(options.allocations), read(options.bytes_allocated));
    let summary = run_measured(&mut sim)?;
    let since = |counter: Option<fn() -> u64>, before: Option<u64>| {
        counter.zip(before).map(|(f, b)| f() - b)
    };
    let (allocations, bytes) = (
        since(options.allocations, allocations_before),
        since(options.bytes_allocated, bytes_before),
    );

    let records = sim.pod_groups();
    let scheduled = |r: &&crate::records::GroupRecord| {
        matches!(&r.condition, Some(GroupCondition { status: "True", .. }))
    };
    // Members are named `<group>-<i>`.
    let incomplete_members: HashSet<String> = gangs
        .iter()
        .filter(|(group, _)| !records.iter().any(|r| &r.group == group && scheduled(&r)))
        .flat_map(|(group, size)| (0..*size).map(move |i| format!("{group}-{i}")))
        .collect();
    let held = sim
        .placements()
        .iter()
        .filter(|p| p.node.is_some() && incomplete_members.contains(&p.pod.to_string()))
        .count();
    let per_pod = |count: Option<u64>| count.map(|c| c as f64 / pods as f64);
    Ok(GangBenchResult {
        workload: "gang",
        nodes,
        pods,
        gangs: gangs.len(),
        gangs_scheduled: records.iter().filter(scheduled).count(),
        gangs_unschedulable: records
            .iter()
            .filter(|r| {
                matches!(
                    &r.condition,
                    Some(GroupCondition {
                        status: "False",
                        ..
                    })
                )
            })
            .count(),
        pods_scheduled: summary.scheduled,
        pods_per_sec: pods as f64 / summary.wall_s.max(1e-9),
        last_gang_scheduled_s: records
            .iter()
            .filter_map(|r| r.scheduled_at)
            .max()
            .map_or(0.0, |t| {
                t.saturating_sub(Duration::from_secs(1)).as_secs_f64()
            }),
        group_cycles: records.iter().map(|r| u64::from(r.cycles)).sum(),
        attempts: summary.attempts,
        retries: summary.retries,
        pods_held_by_incomplete_gangs: held,
        p50_us: summary.p50_us,
        p99_us: summary.p99_us,
        allocs_per_pod: per_pod(allocations),
        bytes_allocated_per_pod: per_pod(bytes),
        peak_rss_mib: peak_rss_mib(),
    })
}

fn node(index: usize) -> Node {
    let name = format!("node-{index}");
    let mut allocatable = Resources::new(NODE_MILLI_CPU, 128 * GIB);
    allocatable.pods = 110;
    Node::new(&name, allocatable).with_labels([("kubernetes.io/hostname", name.as_str())])
}

fn member(group: &str, milli_cpu: i64) -> Pod {
    let mut pod = Pod::new("default", group).with_requests(milli_cpu, GIB);
    pod.scheduling_group = Some(Sym::new(group));
    pod
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small run: every fitting gang is placed whole, the unfit ones hold nothing.
    #[test]
    fn gangs_that_fit_are_placed_whole_and_the_others_hold_nothing() {
        let options = BenchOptions {
            scale_down: 50,
            ..BenchOptions::default()
        };
        let r = run_gang(&options).unwrap();
        assert_eq!((r.nodes, r.gangs, r.pods), (100, 15, 5 * (64 + 16 + 16)));
        assert_eq!(r.gangs_unschedulable, 1, "{r:?}");
        assert_eq!(r.gangs_scheduled, 14, "{r:?}");
        assert_eq!(r.pods_scheduled, r.pods - SMALL_GANG, "{r:?}");
        assert_eq!(
            (r.group_cycles, r.attempts, r.retries),
            (15, 480, 0),
            "{r:?}"
        );
        assert_eq!(r.pods_held_by_incomplete_gangs, 0);
    }
}
