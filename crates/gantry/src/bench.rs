//! `gantry bench`: built-in workloads, measured the same way every time.

use clap::Args;
use clap::builder::RangedU64ValueParser;
use gantry_cache::synthetic::measure_snapshot;
use gantry_sim::bench::{BenchOptions, Workload, run as run_workload, run_gpu_share};
use gantry_sim::dra_bench::run_dra;
use gantry_sim::gang_bench::{release as gang_release, run_gang};
use gantry_sim::replay_bench::TraceShape;
use gantry_whatif::StoreKind;
use gantry_whatif::bench as whatif_bench;
use serde::Serialize;
use serde_json::json;

use gantry_sim::alloc_counter;

use crate::output;

/// `bench snapshot` holds at most this many pods (nodes × pods per node): the `scale`
/// workload's million resident pods, twice over.
const MAX_SNAPSHOT_PODS: usize = 2_000_000;

/// `bench dra --nodes`'s largest cluster: 10,000 nodes of 8 devices and 40,000 pods with
/// their claims.
const MAX_DRA_NODES: usize = 10_000;

/// `bench multi`'s instances × nodes: every instance caches every node (about 1.5 KB
/// each), so 20 × 50,000 peaks near 2 GB.
const MAX_MULTI_NODE_COPIES: usize = 1_000_000;

#[derive(Args)]
pub struct BenchArgs {
    /// basic, basic-50k, node-affinity, pod-affinity, pod-anti-affinity,
    /// preferred-pod-affinity, topology-spread, preemption, unschedulable, mixed-churn,
    /// scale, gpu-share, dra (scheduler_perf's claim-template workload), gang (gangs of 8
    /// and 64 among single pods, v1.36 with GangScheduling), snapshot, multi
    /// (several instances on threads), clustersnapshot (the
    /// what-if stores), estimate (the autoscaler's binpacking benchmark), replay (a
    /// recorded trace of 5,000 nodes and 100,000 changes, as `simulate --trace` replays
    /// it), replay-affinity (the same with pods of 100 deployments, each with a preferred
    /// pod anti-affinity, arriving in bursts), or all (every workload but scale,
    /// gpu-share, gang, snapshot, multi, clustersnapshot, estimate and the replays).
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
    /// Ask every Filter and Score plugin on every node again for each pod, as
    /// kube-scheduler does, rather than remember what node-local plugins said of a like
    /// pod on a node that did not change (the placements are the same).
    #[arg(long)]
    no_verdict_memo: bool,
    /// Divide every count by this (quick runs; 1 to 1000) [default: 1].
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1000))]
    scale_down: Option<usize>,
    /// snapshot: nodes in the cache (1 to 100000, default 5000); scale: nodes in the cluster
    /// (1 to 100000, default 20000; 50 resident pods a node, at most 2000000); dra: DRA at
    /// scale, nodes of 8 devices with 2 init and 2 measured pods each, CEL selectors and a
    /// shared claim (1 to 10000; without it, scheduler_perf's 500 nodes); multi: nodes
    /// in the cluster (1 to 100000, default 5000; --schedulers × --nodes at most 1000000);
    /// gpu-share: GPU nodes (1 to 20000, default 128).
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    nodes: Option<usize>,
    /// multi: scheduler instances, each on its own thread with its own cache (1 to 64)
    /// [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    schedulers: Option<u32>,
    /// snapshot, clustersnapshot: bound pods per node (0 to 1000; at most 2000000 pods in
    /// all) [default: 30].
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(0..=1000))]
    pods_per_node: Option<usize>,
    /// snapshot: nodes changed between two snapshots, 2 unless given; clustersnapshot:
    /// nodes changed in a fork before it is reverted or committed, 100 unless given (at most
    /// --nodes).
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(0..=100_000))]
    changed: Option<usize>,
    /// snapshot, clustersnapshot: repetitions, the medians are reported (1 to 1000)
    /// [default: 31]; estimate: runs (at most 7).
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1000))]
    repetitions: Option<usize>,
    /// replay, replay-affinity: also write the trace it replays (gzip) to this file, for
    /// `simulate --trace` (and `--compare`) to replay the same.
    #[arg(long)]
    write_trace: Option<std::path::PathBuf>,
}

/// The workloads that are not scheduling runs of `gantry_sim::bench` (nor `all`).
const OWN_SHAPE_WORKLOADS: [&str; 9] = [
    "gpu-share",
    "dra",
    "gang",
    "snapshot",
    "multi",
    "clustersnapshot",
    "estimate",
    "replay",
    "replay-affinity",
];

impl BenchArgs {
    fn scale_down(&self) -> usize {
        self.scale_down.unwrap_or(1)
    }
    fn pods_per_node(&self) -> usize {
        self.pods_per_node.unwrap_or(30)
    }
    fn repetitions(&self) -> usize {
        self.repetitions.unwrap_or(31)
    }

    /// Refuses a flag given to a workload that does not read it: `bench basic --nodes 5`
    /// measuring 5,000 nodes without a word would be a silently wrong figure.
    fn check_flags_apply(&self) -> anyhow::Result<()> {
        const SCHEDULING: &str = "the scheduling workloads";
        let flags: [(&str, bool, &[&str]); 10] = [
            (
                "--nodes",
                self.nodes.is_some(),
                &[
                    "snapshot",
                    "scale",
                    "dra",
                    "multi",
                    "gpu-share",
                    "clustersnapshot",
                ],
            ),
            ("--schedulers", self.schedulers.is_some(), &["multi"]),
            (
                "--pods-per-node",
                self.pods_per_node.is_some(),
                &["snapshot", "clustersnapshot"],
            ),
            (
                "--changed",
                self.changed.is_some(),
                &["snapshot", "clustersnapshot"],
            ),
            (
                "--repetitions",
                self.repetitions.is_some(),
                &["snapshot", "clustersnapshot", "estimate"],
            ),
            (
                "--scale-down",
                self.scale_down.is_some(),
                &[SCHEDULING, "dra", "gang"],
            ),
            (
                "--percentage-of-nodes-to-score",
                self.percentage_of_nodes_to_score.is_some(),
                &[SCHEDULING, "gpu-share"],
            ),
            ("--no-assume", self.no_assume, &[SCHEDULING]),
            ("--no-verdict-memo", self.no_verdict_memo, &[SCHEDULING]),
            (
                "--write-trace",
                self.write_trace.is_some(),
                &["replay", "replay-affinity"],
            ),
        ];
        let workload = self.workload.as_str();
        let scheduling = !OWN_SHAPE_WORKLOADS.contains(&workload);
        if scheduling && workload != "all" && Workload::parse(workload).is_none() {
            return Ok(()); // `run` names the workloads there are
        }
        for (flag, given, readers) in flags {
            let read = readers.contains(&workload) || (scheduling && readers.contains(&SCHEDULING));
            anyhow::ensure!(
                !given || read,
                "{flag} does not apply to bench {workload}: only {} read it",
                readers.join(", ")
            );
        }
        Ok(())
    }
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    args.check_flags_apply()?;
    if args.workload == "snapshot" {
        return snapshot(&args);
    }
    match args.workload.as_str() {
        "multi" => return multi(&args),
        "clustersnapshot" => return cluster_snapshot(&args),
        "estimate" => return estimate(&args),
        "replay" => return replay(&args, TraceShape::Plain),
        "replay-affinity" => return replay(&args, TraceShape::Affinity),
        _ => {}
    }
    if args.workload == "gpu-share" {
        return gpu_share(&args);
    }
    if args.workload == "dra" {
        return dra(&args);
    }
    if args.workload == "gang" {
        return gang(&args);
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
                "unknown workload {:?}: use one of {}, gpu-share, dra, snapshot, multi, clustersnapshot, estimate, replay, replay-affinity or all",
                args.workload,
                names.join(", ")
            )
        })?]
    };
    let options = BenchOptions {
        percentage_of_nodes_to_score: args.percentage_of_nodes_to_score,
        no_assume: args.no_assume,
        no_verdict_memo: args.no_verdict_memo,
        scale_down: args.scale_down(),
        nodes: args.nodes,
        allocations: Some(alloc_counter::allocations),
        bytes_allocated: Some(alloc_counter::bytes_allocated),
    };
    for workload in workloads {
        let r = run_workload(workload, &options)?;
        print(&args, &r, || {
            format!(
                "{:<23} {:>6} nodes {:>6} measured pods: {:>8.0} pods/s, p50 {} µs, p99 {} µs, {:.1} allocations and {:.0} bytes/pod, peak RSS {:.0} MiB",
                r.workload,
                r.nodes,
                r.measured_pods,
                r.pods_per_sec,
                r.p50_us,
                r.p99_us,
                r.allocs_per_pod.unwrap_or(f64::NAN),
                r.bytes_allocated_per_pod.unwrap_or(f64::NAN),
                r.peak_rss_mib.unwrap_or(f64::NAN),
            )
        })?;
    }
    Ok(())
}

/// Prints one measurement: as JSON under `--json`, otherwise as the sentence; either
/// says the release the benchmarks decide as (the default one: they take no
/// `--emulated-version`).
fn print(
    args: &BenchArgs,
    figures: &impl Serialize,
    sentence: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let release = gantry_api::Release::default();
    let line = if args.json {
        serde_json::to_string(&output::with_release(
            serde_json::to_value(figures)?,
            release,
        ))?
    } else {
        format!("{}, as Kubernetes {release}", sentence())
    };
    output::to_stdout(|out| writeln!(out, "{line}"))
}

/// Rounds of the GPU-sharing benchmark; 500 pods take milliseconds, so one round is at the
/// mercy of whatever else the machine runs.
const GPU_SHARE_ROUNDS: usize = 5;

/// HAMi's GPU-sharing benchmark (the seed's shape).
fn gpu_share(args: &BenchArgs) -> anyhow::Result<()> {
    let nodes = args.nodes.unwrap_or(128);
    anyhow::ensure!(
        (1..=20_000).contains(&nodes),
        "--nodes must be 1 to 20000 for gpu-share, not {nodes}"
    );
    let options = BenchOptions {
        allocations: Some(alloc_counter::allocations),
        bytes_allocated: Some(alloc_counter::bytes_allocated),
        percentage_of_nodes_to_score: args.percentage_of_nodes_to_score,
        ..BenchOptions::default()
    };
    let r = run_gpu_share(nodes, GPU_SHARE_ROUNDS, &options)?;
    print(args, &r, || {
        format!(
            "gpu-share {} nodes, {} resident pods, {} measured pods × {} rounds: {:.0} pods/s (median), p50 {} µs, p99 {} µs, {:.0} bytes and {:.0} allocations/pod, peak RSS {:.0} MiB",
            r.nodes,
            r.resident_pods,
            r.measured_pods,
            r.rounds,
            r.pods_per_sec,
            r.p50_us,
            r.p99_us,
            r.bytes_allocated_per_pod.unwrap_or(f64::NAN),
            r.allocs_per_pod.unwrap_or(f64::NAN),
            r.peak_rss_mib.unwrap_or(f64::NAN),
        )
    })
}

/// scheduler_perf's `SchedulingWithResourceClaimTemplate/5000pods_500nodes`.
fn dra(args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(nodes) = args.nodes {
        anyhow::ensure!(
            nodes <= MAX_DRA_NODES,
            "--nodes: bench dra takes 1 to {MAX_DRA_NODES} nodes, not {nodes}"
        );
        anyhow::ensure!(
            args.scale_down.is_none(),
            "--scale-down does not apply to bench dra --nodes: give fewer nodes"
        );
    }
    let options = BenchOptions {
        scale_down: args.scale_down(),
        nodes: args.nodes,
        allocations: Some(alloc_counter::allocations),
        bytes_allocated: Some(alloc_counter::bytes_allocated),
        ..BenchOptions::default()
    };
    let r = run_dra(&options)?;
    print(args, &r, || {
        format!(
            "dra {} nodes × {} devices, {} init and {} measured pods with a claim template{}: {:.0} pods/s, p50 {} µs, p99 {} µs, {:.0} bytes and {:.0} allocations/pod{}, peak RSS {:.0} MiB",
            r.nodes,
            r.devices_per_node,
            r.init_pods,
            r.measured_pods,
            if r.selectors_and_shared_claim {
                " (CEL selectors; every 100th pod shares a claim)"
            } else {
                ""
            },
            r.pods_per_sec,
            r.p50_us,
            r.p99_us,
            r.bytes_allocated_per_pod.unwrap_or(f64::NAN),
            r.allocs_per_pod.unwrap_or(f64::NAN),
            // Measured only at scheduler_perf's size (not with --nodes).
            r.allocs_per_pod_10x_nodes
                .map(|a| format!(" ({a:.0} on 10× the nodes)"))
                .unwrap_or_default(),
            r.peak_rss_mib.unwrap_or(f64::NAN),
        )
    })
}

/// Gangs among single pods (`gantry_sim::gang_bench`). It decides as v1.36 with the
/// workload gates on, whatever the default release.
fn gang(args: &BenchArgs) -> anyhow::Result<()> {
    let options = BenchOptions {
        scale_down: args.scale_down(),
        allocations: Some(alloc_counter::allocations),
        bytes_allocated: Some(alloc_counter::bytes_allocated),
        ..BenchOptions::default()
    };
    let r = run_gang(&options)?;
    let release = gang_release();
    let line = if args.json {
        serde_json::to_string(&output::with_release(serde_json::to_value(&r)?, release))?
    } else {
        format!(
            "gang {} nodes, {} pods in {} gangs and singles: {:.0} pods/s, p50 {} µs, p99 {} µs, {:.1} allocations and {:.0} bytes/pod; {} gangs scheduled (the last at {:.1} s), {} unschedulable after {} group cycles in all ({} attempts, {} retries), {} pods held by incomplete gangs; peak RSS {:.0} MiB, as Kubernetes {release}",
            r.nodes,
            r.pods,
            r.gangs,
            r.pods_per_sec,
            r.p50_us,
            r.p99_us,
            r.allocs_per_pod.unwrap_or(f64::NAN),
            r.bytes_allocated_per_pod.unwrap_or(f64::NAN),
            r.gangs_scheduled,
            r.last_gang_scheduled_s,
            r.gangs_unschedulable,
            r.group_cycles,
            r.attempts,
            r.retries,
            r.pods_held_by_incomplete_gangs,
            r.peak_rss_mib.unwrap_or(f64::NAN),
        )
    };
    output::to_stdout(|out| writeln!(out, "{line}"))
}

fn replay(args: &BenchArgs, shape: TraceShape) -> anyhow::Result<()> {
    if let Some(path) = &args.write_trace {
        std::fs::write(path, gantry_sim::replay_bench::trace(shape))
            .map_err(|e| anyhow::anyhow!("--write-trace {}: {e}", path.display()))?;
    }
    let r = gantry_sim::replay_bench::run_replay(shape).map_err(anyhow::Error::msg)?;
    let release = gantry_api::Release::at(35);
    let line = if args.json {
        serde_json::to_string(&output::with_release(serde_json::to_value(&r)?, release))?
    } else {
        format!(
            "{} {} nodes, {} changes ({:.1} MB gzip): read in {:.2} s, replayed in {:.2} s, {:.2} s in all; {} pods scheduled, {:.1}% of the recorded bindings reproduced; peak RSS {:.0} MiB, as Kubernetes {release}",
            r.workload,
            r.nodes,
            r.changes,
            r.trace_bytes as f64 / 1e6,
            r.read_s,
            r.replay_s,
            r.total_s,
            r.pods_scheduled,
            r.reproduced * 100.0,
            r.peak_rss_mib.unwrap_or(f64::NAN),
        )
    };
    output::to_stdout(|out| writeln!(out, "{line}"))
}

/// The nodes and changed nodes of a snapshot benchmark (5,000 nodes unless given), within
/// the pods a snapshot benchmark may hold.
fn snapshot_shape(args: &BenchArgs, default_changed: usize) -> anyhow::Result<(usize, usize)> {
    let nodes = args.nodes.unwrap_or(5000);
    anyhow::ensure!(
        nodes * args.pods_per_node() <= MAX_SNAPSHOT_PODS,
        "--nodes {nodes} × --pods-per-node {} is {} pods, over the {MAX_SNAPSHOT_PODS} a snapshot benchmark may hold",
        args.pods_per_node(),
        nodes * args.pods_per_node()
    );
    let changed = args.changed.unwrap_or(default_changed);
    anyhow::ensure!(
        changed <= nodes,
        "--changed ({changed}) exceeds --nodes ({nodes})"
    );
    Ok((nodes, changed))
}

fn snapshot(args: &BenchArgs) -> anyhow::Result<()> {
    let (nodes, changed) = snapshot_shape(args, 2)?;
    let m = measure_snapshot(nodes, args.pods_per_node(), changed, args.repetitions());
    let speedup = m.full_rebuild_ns as f64 / m.incremental_ns.max(1) as f64;
    print(
        args,
        &json!({
            "workload": "snapshot",
            "nodes": m.nodes,
            "pods_per_node": m.pods_per_node,
            "changed": m.changed,
            "cloned": m.cloned,
            "changes_ns": m.changes_ns,
            "incremental_ns": m.incremental_ns,
            "full_rebuild_ns": m.full_rebuild_ns,
            "speedup": (speedup * 10.0).round() / 10.0,
            "repetitions": args.repetitions(),
        }),
        || {
            format!(
                "{} nodes x {} pods, {} changed in {} ns (each changed node copied once): incremental update {} ns (took {}), full rebuild {} ns: {:.1}x cheaper",
                m.nodes,
                m.pods_per_node,
                m.changed,
                m.changes_ns,
                m.incremental_ns,
                m.cloned,
                m.full_rebuild_ns,
                speedup
            )
        },
    )
}

/// Several instances sharing one in-process API (`gantry_sim::multi_bench`).
fn multi(args: &BenchArgs) -> anyhow::Result<()> {
    let (schedulers, nodes) = (args.schedulers.unwrap_or(1), args.nodes.unwrap_or(5000));
    let copies = schedulers as usize * nodes;
    anyhow::ensure!(
        copies <= MAX_MULTI_NODE_COPIES,
        "--schedulers {schedulers} × --nodes {nodes} is {copies} cached nodes, over the \
         {MAX_MULTI_NODE_COPIES} bench multi may hold (each instance caches every node)"
    );
    let r = gantry_sim::multi_bench::run(schedulers, nodes, 100);
    print(args, &r, || {
        let cores = match (r.cpu_s, r.run_queue_wait_s) {
            (Some(cpu), Some(wait)) => {
                format!("; the instances ran {cpu:.2} s on a core and waited {wait:.2} s for one")
            }
            _ => String::new(),
        };
        format!(
            "multi: {} schedulers, {} nodes, {} of {} pods bound: {:.0} pods/s, {} conflicts ({:.2}% of binds), {} over-committed nodes{cores}",
            r.schedulers,
            r.nodes,
            r.scheduled,
            r.pods,
            r.pods_per_sec,
            r.conflicts,
            100.0 * r.conflict_rate,
            r.overcommitted_nodes
        )
    })
}

/// The what-if snapshot's stores side by side: allocations per read, fork, revert and
/// commit times, and a search over all nodes.
fn cluster_snapshot(args: &BenchArgs) -> anyhow::Result<()> {
    let (nodes, changed) = snapshot_shape(args, 100)?;
    for kind in [StoreKind::Basic, StoreKind::Delta] {
        let m = whatif_bench::measure_snapshot(
            kind,
            nodes,
            args.pods_per_node(),
            changed,
            args.repetitions(),
            Some(alloc_counter::allocations),
        )?;
        print(
            args,
            &json!({
                "workload": "clustersnapshot",
                "store": m.store,
                "nodes": m.nodes,
                "pods_per_node": m.pods_per_node,
                "changed": m.changed,
                "allocs_per_get": m.allocs_per_get,
                "allocs_per_list": m.allocs_per_list,
                "fork_ns": m.fork_ns,
                "revert_ns": m.revert_ns,
                "commit_ns": m.commit_ns,
                "schedule_anywhere_ns": m.schedule_anywhere_ns,
                "schedule_anywhere_found": m.schedule_anywhere_found,
            }),
            || {
                format!(
                    "{:<5} store, {} nodes x {} pods: fork {} ns, revert {} ns, commit {} ns ({} changed nodes), schedule anywhere {} ns{}, {:.2} allocations per get, {:.2} per list",
                    m.store,
                    m.nodes,
                    m.pods_per_node,
                    m.fork_ns,
                    m.revert_ns,
                    m.commit_ns,
                    m.changed,
                    m.schedule_anywhere_ns,
                    if m.schedule_anywhere_found {
                        ""
                    } else {
                        " (no node had room)"
                    },
                    m.allocs_per_get.unwrap_or(f64::NAN),
                    m.allocs_per_list.unwrap_or(f64::NAN),
                )
            },
        )?;
    }
    Ok(())
}

/// The Cluster Autoscaler's binpacking benchmark (51,000 pods, 2,595 nodes).
fn estimate(args: &BenchArgs) -> anyhow::Result<()> {
    let runs = args.repetitions().clamp(1, 7);
    let m = whatif_bench::measure_estimate(StoreKind::Delta, runs);
    anyhow::ensure!(
        m.nodes_needed == whatif_bench::AutoscalerBenchmark::EXPECTED_NODES,
        "estimate gave {} nodes, upstream's answer is {}",
        m.nodes_needed,
        whatif_bench::AutoscalerBenchmark::EXPECTED_NODES
    );
    print(
        args,
        &json!({
            "workload": "estimate",
            "pods": m.pods,
            "nodes_needed": m.nodes_needed,
            "estimate_ms": (m.estimate_ms * 1000.0).round() / 1000.0,
            "estimate_cpu_ms": m.estimate_cpu_ms.map(|ms| (ms * 1000.0).round() / 1000.0),
            "runs": m.runs,
        }),
        || {
            format!(
                "autoscaler binpacking benchmark: {} pods need {} nodes, estimated in {:.1} ms ({:.1} ms on a CPU; median of {})",
                m.pods,
                m.nodes_needed,
                m.estimate_ms,
                m.estimate_cpu_ms.unwrap_or(f64::NAN),
                m.runs
            )
        },
    )
}
