//! `gantry bench`: built-in workloads, measured the same way every time.

use clap::Args;
use clap::builder::RangedU64ValueParser;
use gantry_cache::synthetic::measure_snapshot;
use gantry_sim::bench::{BenchOptions, Workload, run as run_workload};
use serde_json::json;

use crate::{alloc_counter, output};

/// `bench snapshot` holds at most this many pods (nodes × pods per node): the `scale`
/// workload's million resident pods, twice over.
const MAX_SNAPSHOT_PODS: usize = 2_000_000;

#[derive(Args)]
pub struct BenchArgs {
    /// basic, basic-50k, node-affinity, pod-affinity, pod-anti-affinity,
    /// preferred-pod-affinity, topology-spread, preemption, unschedulable, mixed-churn,
    /// scale, snapshot, multi (several instances on threads), or all (every workload but
    /// scale, snapshot and multi).
    workload: String,
    /// Print one JSON object (per workload) instead of a sentence.
    #[arg(long)]
    json: bool,
    /// percentageOfNodesToScore (0 to 100); unset means upstream's adaptive default.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100))]
    percentage_of_nodes_to_score: Option<u32>,
    /// Turn the assume step off.
    #[arg(long)]
    no_assume: bool,
    /// Divide every count by this (quick runs; 1 to 1000).
    #[arg(long, default_value_t = 1, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1000))]
    scale_down: usize,
    /// snapshot: nodes in the cache; multi: nodes in the cluster (1 to 100000).
    #[arg(long, default_value_t = 5000, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    nodes: usize,
    /// multi: scheduler instances, each on its own thread with its own cache (1 to 64).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    schedulers: u32,
    /// snapshot: bound pods per node (0 to 1000; at most 2000000 pods in all).
    #[arg(long, default_value_t = 30, value_parser = RangedU64ValueParser::<usize>::new().range(0..=1000))]
    pods_per_node: usize,
    /// snapshot: nodes changed between two snapshots (at most --nodes).
    #[arg(long, default_value_t = 2, value_parser = RangedU64ValueParser::<usize>::new().range(0..=100_000))]
    changed: usize,
    /// snapshot: repetitions, the medians are reported (1 to 1000).
    #[arg(long, default_value_t = 31, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1000))]
    repetitions: usize,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.workload == "snapshot" {
        return snapshot(&args);
    }
    if args.workload == "multi" {
        return multi(&args);
    }
    let workloads: Vec<Workload> = if args.workload == "all" {
        Workload::ALL
            .into_iter()
            .filter(|w| *w != Workload::Scale)
            .collect()
    } else {
        let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
        vec![Workload::parse(&args.workload).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown workload {:?}: use one of {}, snapshot or all",
                args.workload,
                names.join(", ")
            )
        })?]
    };
    let options = BenchOptions {
        percentage_of_nodes_to_score: args.percentage_of_nodes_to_score,
        no_assume: args.no_assume,
        scale_down: args.scale_down,
        allocations: Some(alloc_counter::allocations),
    };
    for workload in workloads {
        let r = run_workload(workload, &options)?;
        let line = if args.json {
            serde_json::to_string(&r)?
        } else {
            format!(
                "{:<23} {:>6} nodes {:>6} measured pods: {:>8.0} pods/s, p50 {} µs, p99 {} µs, {:.0} allocations/pod, peak RSS {:.0} MiB",
                r.workload,
                r.nodes,
                r.measured_pods,
                r.pods_per_sec,
                r.p50_us,
                r.p99_us,
                r.allocs_per_pod.unwrap_or(f64::NAN),
                r.peak_rss_mib.unwrap_or(f64::NAN),
            )
        };
        output::to_stdout(|out| writeln!(out, "{line}"))?;
    }
    Ok(())
}

fn snapshot(args: &BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.nodes * args.pods_per_node <= MAX_SNAPSHOT_PODS,
        "--nodes {} × --pods-per-node {} is {} pods, over the {MAX_SNAPSHOT_PODS} a snapshot benchmark may hold",
        args.nodes,
        args.pods_per_node,
        args.nodes * args.pods_per_node
    );
    anyhow::ensure!(
        args.changed <= args.nodes,
        "--changed ({}) exceeds --nodes ({})",
        args.changed,
        args.nodes
    );
    let m = measure_snapshot(
        args.nodes,
        args.pods_per_node,
        args.changed,
        args.repetitions,
    );
    let speedup = m.full_rebuild_ns as f64 / m.incremental_ns.max(1) as f64;
    let line = if args.json {
        json!({
            "workload": "snapshot",
            "nodes": m.nodes,
            "pods_per_node": m.pods_per_node,
            "changed": m.changed,
            "cloned": m.cloned,
            "incremental_ns": m.incremental_ns,
            "full_rebuild_ns": m.full_rebuild_ns,
            "speedup": (speedup * 10.0).round() / 10.0,
            "repetitions": args.repetitions,
        })
        .to_string()
    } else {
        format!(
            "{} nodes x {} pods, {} changed: incremental update {} ns (cloned {}), full rebuild {} ns: {:.1}x cheaper",
            m.nodes,
            m.pods_per_node,
            m.changed,
            m.incremental_ns,
            m.cloned,
            m.full_rebuild_ns,
            speedup
        )
    };
    output::to_stdout(|out| writeln!(out, "{line}"))
}

/// Several instances sharing one in-process API (`gantry_sim::multi_bench`).
fn multi(args: &BenchArgs) -> anyhow::Result<()> {
    let r = gantry_sim::multi_bench::run(args.schedulers, args.nodes, 100);
    let line = if args.json {
        serde_json::to_string(&r)?
    } else {
        format!(
            "multi: {} schedulers, {} nodes, {} of {} pods bound: {:.0} pods/s, {} conflicts ({:.2}% of binds), {} over-committed nodes",
            r.schedulers,
            r.nodes,
            r.scheduled,
            r.pods,
            r.pods_per_sec,
            r.conflicts,
            100.0 * r.conflict_rate,
            r.overcommitted_nodes
        )
    };
    output::to_stdout(|out| writeln!(out, "{line}"))
}
