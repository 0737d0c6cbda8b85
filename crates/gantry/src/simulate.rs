//! `gantry simulate`: the real scheduler over a cluster from manifests or a scenario.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use gantry_sim::scenario::Scenario;
use gantry_sim::{Placement, SimEvent, SimOptions, Simulation, Summary};

use crate::{load, report};

/// The scenario `gantry simulate` runs when given no cluster.
const DEFAULT_SCENARIO: &str = include_str!("../scenarios/default.yaml");

#[derive(Args)]
pub struct SimulateArgs {
    /// Kubernetes YAML/JSON (as `kubectl get nodes,pods -A -o yaml` prints it): nodes, the
    /// pods bound to them, and pending pods to schedule.
    #[arg(long, num_args = 1..)]
    cluster: Vec<PathBuf>,
    /// More pods to schedule, in file order.
    #[arg(long, num_args = 1..)]
    pods: Vec<PathBuf>,
    /// A scenario file: node groups, workloads arriving over time, timed events.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seed for tie-breaking: the same input and seed give the same placements.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Submit the pods one at a time; withdraw a pod found unschedulable (the procedure
    /// the parity scenarios were recorded with).
    #[arg(long)]
    sequential: bool,
    /// Turn the assume step off: later cycles do not see pods decided but not yet bound.
    #[arg(long)]
    no_assume: bool,
    /// Virtual time a bind takes, in milliseconds.
    #[arg(long, default_value_t = 0)]
    bind_latency_ms: u64,
    /// Share of binds the simulated API refuses at random (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    bind_failure_rate: f64,
    /// Let the simulated API refuse binds that would over-commit a node.
    #[arg(long)]
    capacity_check: bool,
    /// Write one JSON line per pod: where it went, or why it did not fit.
    #[arg(long)]
    placements: Option<PathBuf>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Write summary.json, placements.jsonl, plots and index.html into this directory.
    #[arg(long)]
    report: Option<PathBuf>,
}

pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.bind_failure_rate),
        "--bind-failure-rate must be between 0 and 1, not {}",
        args.bind_failure_rate
    );
    let config = load::config(args.config.as_deref())?;
    let Scenario {
        name,
        mut cluster,
        mut events,
    } = inputs(&args)?;
    load::warn_ignored(&cluster);
    let mut pending = load::manifests(&args.pods)?;
    load::warn_ignored(&pending);
    pending
        .priority_classes
        .extend(cluster.priority_classes.iter().cloned());
    cluster.resolve_priorities()?;
    pending.resolve_priorities()?;
    for pod in pending.pods {
        anyhow::ensure!(
            pod.node_name.is_none(),
            "{}: pod {} is already bound (spec.nodeName); put bound pods in --cluster",
            "--pods",
            pod.key()
        );
        events.push((Duration::ZERO, SimEvent::CreatePod(Arc::new(pod))));
    }
    let options = SimOptions {
        seed: args.seed,
        assume: !args.no_assume,
        sequential: args.sequential,
        bind_latency: Duration::from_millis(args.bind_latency_ms),
        bind_failure_rate: args.bind_failure_rate,
        capacity_check: args.capacity_check,
        initial_backoff: Duration::from_secs(config.pod_initial_backoff_seconds),
        max_backoff: Duration::from_secs(config.pod_max_backoff_seconds),
    };
    let nodes_at_start = cluster.nodes.len();
    let pods_total = events
        .iter()
        .filter(|(_, e)| matches!(e, SimEvent::CreatePod(_)))
        .count()
        + cluster
            .pods
            .iter()
            .filter(|p| p.node_name.is_none())
            .count();
    let mut sim = Simulation::new(cluster, config.profiles, options).map_err(anyhow::Error::msg)?;
    for (at, event) in events {
        sim.schedule(at, event);
    }
    let progress = (std::io::stdout().is_terminal() && !args.json).then(|| {
        let bar = indicatif::ProgressBar::new(pods_total as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {bar:40} {pos}/{len} pods bound {per_sec} {elapsed}",
            )
            .expect("the template is valid"),
        );
        bar
    });
    let summary = sim.run_with_progress(|bound| {
        if let Some(bar) = &progress {
            bar.set_position(bound as u64);
        }
    });
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    if cfg!(debug_assertions)
        && let Err(violation) = sim.check_invariants()
    {
        anyhow::ensure!(args.no_assume, "invariant violated: {violation}");
        eprintln!("note: without assume, as expected: {violation}");
    }
    if let Some(path) = &args.placements {
        write_placements(path, sim.placements())?;
    }
    if let Some(dir) = &args.report {
        report::write(dir, &name, &summary, &sim)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_summary(&name, nodes_at_start, &summary, sim.placements());
    }
    Ok(())
}

/// The cluster and timed events to simulate: from a scenario (plus any manifests), from
/// manifests alone, or the built-in default scenario.
fn inputs(args: &SimulateArgs) -> anyhow::Result<Scenario> {
    let manifests = load::manifests(&args.cluster)?;
    let scenario = match &args.scenario {
        Some(path) => Scenario::parse(&load::read(path)?, &path.display().to_string())?,
        None if args.cluster.is_empty() => {
            Scenario::parse(DEFAULT_SCENARIO, "built-in default scenario")?
        }
        None => {
            let name = args
                .cluster
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            return Ok(Scenario {
                name,
                cluster: manifests,
                events: Vec::new(),
            });
        }
    };
    let mut cluster = scenario.cluster;
    cluster.merge(manifests);
    Ok(Scenario {
        cluster,
        ..scenario
    })
}

fn write_placements(path: &std::path::Path, placements: &[Placement]) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for placement in placements {
        serde_json::to_writer(&mut out, placement)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

fn print_summary(name: &str, nodes: usize, s: &Summary, placements: &[Placement]) {
    println!("gantry simulate: {name}");
    println!(
        "  {} nodes at the start, {} pods submitted: {} scheduled, {} pending, {} evicted by preemption",
        nodes, s.pods_total, s.scheduled, s.unschedulable, s.preempted
    );
    println!(
        "  {:.0} pods/s ({:.2} s wall, {:.1} s of cluster time), {} attempts, {} retries",
        s.pods_per_sec, s.wall_s, s.virtual_s, s.attempts, s.retries
    );
    println!(
        "  scheduling attempt latency: p50 {} µs, p90 {} µs, p99 {} µs",
        s.p50_us, s.p90_us, s.p99_us
    );
    println!(
        "  bind failures {}, over-committed nodes {}",
        s.bind_failures, s.overcommitted_nodes
    );
    let mut reasons: HashMap<&str, usize> = HashMap::new();
    for p in placements.iter().filter(|p| p.node.is_none()) {
        *reasons
            .entry(p.reason.as_deref().unwrap_or("no reason recorded"))
            .or_default() += 1;
    }
    if !reasons.is_empty() {
        let mut reasons: Vec<(&str, usize)> = reasons.into_iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        println!("  why pods are pending:");
        for (reason, count) in reasons.iter().take(5) {
            println!("    {count:>6}  {reason}");
        }
        if reasons.len() > 5 {
            println!(
                "    ({} other reasons; see --placements)",
                reasons.len() - 5
            );
        }
    }
}
