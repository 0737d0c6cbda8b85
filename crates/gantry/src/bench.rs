//! `gantry bench`: built-in workloads, measured the same way every time.

use clap::{Args, Subcommand};
use gantry_cache::synthetic::measure_snapshot;
use serde_json::json;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    workload: Workload,
}

#[derive(Subcommand)]
enum Workload {
    /// scheduler_perf's SchedulingBasic: node-default nodes, pod-default pods.
    Basic {
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        #[arg(long, default_value_t = 1000)]
        init_pods: usize,
        #[arg(long, default_value_t = 10000)]
        measured_pods: usize,
        /// percentageOfNodesToScore; unset means upstream's adaptive default.
        #[arg(long)]
        percentage_of_nodes_to_score: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// Incremental snapshot update against a full rebuild (medians over repetitions).
    Snapshot {
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        #[arg(long, default_value_t = 30)]
        pods_per_node: usize,
        /// Nodes changed between two snapshots.
        #[arg(long, default_value_t = 2)]
        changed: usize,
        #[arg(long, default_value_t = 31)]
        repetitions: usize,
        /// Print one JSON object instead of a sentence.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.workload {
        Workload::Basic {
            nodes,
            init_pods,
            measured_pods,
            percentage_of_nodes_to_score,
            json,
        } => {
            anyhow::ensure!(nodes > 0, "--nodes must be at least 1");
            let m = gantry_sim::bench::measure_basic(
                nodes,
                init_pods,
                measured_pods,
                percentage_of_nodes_to_score,
            );
            if json {
                let out = json!({
                    "workload": "basic",
                    "nodes": m.nodes,
                    "measured_pods": m.measured_pods,
                    "scheduled": m.scheduled,
                    "pods_per_sec": m.pods_per_sec.round(),
                    "p50_us": m.p50_us,
                    "p99_us": m.p99_us,
                    "nodes_evaluated_per_pod": m.nodes_evaluated_per_pod,
                    "percentage_of_nodes_to_score": percentage_of_nodes_to_score,
                });
                println!("{out}");
            } else {
                println!(
                    "basic: {} nodes, {} measured pods ({} scheduled): {:.0} pods/s, p50 {} us, p99 {} us",
                    m.nodes, m.measured_pods, m.scheduled, m.pods_per_sec, m.p50_us, m.p99_us
                );
            }
            Ok(())
        }
        Workload::Snapshot {
            nodes,
            pods_per_node,
            changed,
            repetitions,
            json,
        } => {
            anyhow::ensure!(nodes > 0, "--nodes must be at least 1");
            anyhow::ensure!(
                changed <= nodes,
                "--changed ({changed}) exceeds --nodes ({nodes})"
            );
            let m = measure_snapshot(nodes, pods_per_node, changed, repetitions);
            let speedup = m.full_rebuild_ns as f64 / m.incremental_ns.max(1) as f64;
            if json {
                let out = json!({
                    "workload": "snapshot",
                    "nodes": m.nodes,
                    "pods_per_node": m.pods_per_node,
                    "changed": m.changed,
                    "cloned": m.cloned,
                    "incremental_ns": m.incremental_ns,
                    "full_rebuild_ns": m.full_rebuild_ns,
                    "speedup": (speedup * 10.0).round() / 10.0,
                    "repetitions": repetitions,
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
    }
}
