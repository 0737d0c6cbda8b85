//! `gantry bench`: built-in workloads, measured the same way every time.

use clap::Args;
use gantry_cache::synthetic::measure_snapshot;
use gantry_sim::bench::{BenchOptions, Workload, run as run_workload};
use serde_json::json;

use crate::alloc_counter;

#[derive(Args)]
pub struct BenchArgs {
    /// basic, basic-50k, node-affinity, pod-affinity, pod-anti-affinity,
    /// preferred-pod-affinity, topology-spread, preemption, unschedulable, mixed-churn,
    /// scale, snapshot, or all (every workload but scale and snapshot).
    workload: String,
    /// Print one JSON object (per workload) instead of a sentence.
    #[arg(long)]
    json: bool,
    /// percentageOfNodesToScore; unset means upstream's adaptive default.
    #[arg(long)]
    percentage_of_nodes_to_score: Option<u32>,
    /// Turn the assume step off.
    #[arg(long)]
    no_assume: bool,
    /// Divide every count by this (quick runs).
    #[arg(long, default_value_t = 1)]
    scale_down: usize,
    /// snapshot: nodes in the cache.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// snapshot: bound pods per node.
    #[arg(long, default_value_t = 30)]
    pods_per_node: usize,
    /// snapshot: nodes changed between two snapshots.
    #[arg(long, default_value_t = 2)]
    changed: usize,
    /// snapshot: repetitions (the medians are reported).
    #[arg(long, default_value_t = 31)]
    repetitions: usize,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.workload == "snapshot" {
        return snapshot(&args);
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
    anyhow::ensure!(args.scale_down >= 1, "--scale-down must be at least 1");
    if let Some(p) = args.percentage_of_nodes_to_score {
        anyhow::ensure!(
            p <= 100,
            "--percentage-of-nodes-to-score must be 0 to 100, not {p}"
        );
    }
    let options = BenchOptions {
        percentage_of_nodes_to_score: args.percentage_of_nodes_to_score,
        no_assume: args.no_assume,
        scale_down: args.scale_down,
        allocations: Some(alloc_counter::allocations),
    };
    for workload in workloads {
        let r = run_workload(workload, &options);
        if args.json {
            println!("{}", serde_json::to_string(&r)?);
        } else {
            println!(
                "{:<23} {:>6} nodes {:>6} measured pods: {:>8.0} pods/s, p50 {} µs, p99 {} µs, {:.0} allocations/pod, peak RSS {:.0} MiB",
                r.workload,
                r.nodes,
                r.measured_pods,
                r.pods_per_sec,
                r.p50_us,
                r.p99_us,
                r.allocs_per_pod.unwrap_or(f64::NAN),
                r.peak_rss_mib.unwrap_or(f64::NAN),
            );
        }
    }
    Ok(())
}

fn snapshot(args: &BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.nodes > 0, "--nodes must be at least 1");
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
    if args.json {
        let out = json!({
            "workload": "snapshot",
            "nodes": m.nodes,
            "pods_per_node": m.pods_per_node,
            "changed": m.changed,
            "cloned": m.cloned,
            "incremental_ns": m.incremental_ns,
            "full_rebuild_ns": m.full_rebuild_ns,
            "speedup": (speedup * 10.0).round() / 10.0,
            "repetitions": args.repetitions,
        });
        println!("{out}");
    } else {
        println!(
            "{} nodes x {} pods, {} changed: incremental update {} ns (cloned {}), full rebuild {} ns: {:.1}x cheaper",
            m.nodes,
            m.pods_per_node,
            m.changed,
            m.incremental_ns,
            m.cloned,
            m.full_rebuild_ns,
            speedup
        );
    }
    Ok(())
}
