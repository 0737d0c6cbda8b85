//! `gantry simulate`: the real scheduler over a cluster from manifests or a scenario.

mod compare_arms;
mod node_change;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use gantry_api::Release;
use gantry_framework::config::SchedulerConfig;
use gantry_sim::driver_binding::DriverBinding;
use gantry_sim::replay::{Divergence, RecordedBinding};
use gantry_sim::scenario::Scenario;
use gantry_sim::{
    BindLatency, MAX_SCHEDULERS, Placement, SimEvent, SimOptions, Simulation, Summary,
};

use crate::output::Say;
use crate::report::{self, RunInfo};
use crate::{load, output};

/// The scenario `gantry simulate` runs when given no cluster.
const DEFAULT_SCENARIO: &str = include_str!("../scenarios/default.yaml");

/// The longest latency `--bind-latency-ms` and `--event-latency-ms` may ask for: an hour.
const MAX_LATENCY_MS: u64 = 3_600_000;

#[derive(Args)]
pub struct SimulateArgs {
    /// Kubernetes YAML/JSON (as `kubectl get nodes,pods -A -o yaml` prints it): nodes, the
    /// pods bound to them, and pending pods to schedule.
    #[arg(long, num_args = 1..)]
    cluster: Vec<PathBuf>,
    #[command(flatten)]
    live: crate::live::LiveArgs,
    /// A trace `gantry record` wrote: the cluster when recording started, then every
    /// change, replayed on the virtual clock; the simulation's placements are compared
    /// with the bindings the cluster made. Without --emulated-version, decides as the
    /// recorded server's release.
    #[arg(long, conflicts_with_all = ["cluster", "scenario", "kubeconfig"])]
    trace: Option<PathBuf>,
    /// With --trace: bind each pod where the recorded cluster bound it, after deciding it,
    /// so that the state follows the recording and the comparison counts decisions (as
    /// `gantry run --shadow` does); without it, a decision taken otherwise changes the
    /// state every later decision sees.
    #[arg(long, requires = "trace")]
    follow_recorded: bool,
    /// More pods to schedule, in file order.
    #[arg(long, num_args = 1..)]
    pods: Vec<PathBuf>,
    /// A scenario file: node groups, workloads arriving over time, timed events.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Another KubeSchedulerConfiguration: the same inputs run again under it from the
    /// same seed, and the two outcomes printed side by side (--config's is A); with
    /// --report, a page comparing them, and each run's own report in `a/` and `b/`.
    #[arg(long, conflicts_with = "placements")]
    compare: Option<PathBuf>,
    /// Run the inputs again deciding as this release (MAJOR.MINOR), and compare: B's
    /// release (default A's). B's configuration is --compare's, else --config's.
    #[arg(long, value_name = "MAJOR.MINOR", conflicts_with = "placements")]
    compare_emulated_version: Option<String>,
    /// B's feature gates (default --feature-gates), as --feature-gates takes them.
    #[arg(long, value_name = "NAME=BOOL,...", conflicts_with = "placements")]
    compare_feature_gates: Option<String>,
    /// Nodes B's cluster has besides A's (replacing nodes of the same name): another node
    /// group to compare.
    #[arg(long, num_args = 1.., conflicts_with = "placements")]
    compare_nodes: Vec<PathBuf>,
    /// Nodes B's cluster does not have: those with every label given (`key=value,...`);
    /// their pods wait to be scheduled again.
    #[arg(long, value_name = "KEY=VALUE,...", conflicts_with = "placements")]
    compare_without_nodes: Option<String>,
    /// Seed for bind latencies and, deciding as Kubernetes 1.28 to 1.34, tie-breaking (from
    /// 1.35 equal scores go by the score heap's order, as upstream): the same input and
    /// seed give the same placements.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Submit the pods one at a time; withdraw a pod found unschedulable (the procedure
    /// the parity scenarios were recorded with).
    #[arg(long)]
    sequential: bool,
    /// Turn the assume step off: later cycles do not see pods decided but not yet bound.
    #[arg(long)]
    no_assume: bool,
    /// Virtual time every bind takes, in milliseconds (0 to 3600000). Without it, binds
    /// take a few milliseconds with a tail (log-normal: median 5 ms, p99 25 ms).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=MAX_LATENCY_MS))]
    bind_latency_ms: Option<u64>,
    /// Share of binds the simulated API refuses at random (0 to 1).
    #[arg(long, default_value_t = 0.0, value_parser = share, allow_negative_numbers = true)]
    bind_failure_rate: f64,
    /// Let the simulated API refuse binds that would over-commit a node.
    #[arg(long)]
    capacity_check: bool,
    /// Scheduler instances sharing the cluster (1 to 64), each with its own cache and
    /// queue, owning the pods whose UID hashes to it. With more than one, binders re-check
    /// placements and the API admits a bind only if the pod passes every Filter plugin of
    /// its profile against the bound state.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_SCHEDULERS)))]
    schedulers: u32,
    /// Virtual time from a change at the API to its watch event reaching the instances, in
    /// milliseconds (0 to 3600000): how stale an instance's view may be.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=MAX_LATENCY_MS))]
    event_latency_ms: u64,
    /// How the simulated DRA drivers answer devices' binding conditions
    /// (DRADeviceBindingConditions): `ready[:SECONDS]` sets them all True that long after
    /// the allocation (default `ready:0`), `fail[:SECONDS]` sets a failure condition,
    /// `never` lets every binding time out. PreBind looks every five seconds.
    #[arg(long, default_value = "ready:0", value_parser = DriverBinding::parse)]
    binding_conditions: DriverBinding,
    /// Write one JSON line per pod: where it went, or why it did not.
    #[arg(long)]
    placements: Option<PathBuf>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Write index.html (a page to read), summary.json, placements.jsonl and the plots
    /// into this directory (with --compare: the comparison, and each run's in a/ and b/).
    #[arg(long)]
    report: Option<PathBuf>,
    #[command(flatten)]
    release: crate::release_args::ReleaseArgs,
}

/// A number from 0 to 1.
fn share(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if !(0.0..=1.0).contains(&value) {
        return Err(format!("{text} is not between 0 and 1"));
    }
    Ok(value.abs()) // `-0` is 0, not a rate printed as -0%
}

pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let (release, live) = match &args.trace {
        Some(path) => {
            let (release, why) = crate::replay::release(&args.release, path)?;
            output::say(Say::Note, &format!("deciding as {release} ({why})"));
            (release, None)
        }
        None => args.live.read(&args.release)?,
    };
    let live_server = live.as_ref().map(|l| l.server.clone());
    let config = load::config(args.config.as_deref(), release)?;
    let (scenario, recorded) = read_inputs(&args, release, &config, live)?;
    if args.compares() {
        let inputs = describe_inputs(&args, live_server.as_deref());
        return compare_arms::run(&args, (release, config), scenario, recorded, inputs);
    }
    let Scenario {
        name,
        cluster,
        events,
        timeline,
    } = scenario;
    let options = sim_options(&args, &config);
    let inputs = describe_inputs(&args, live_server.as_deref());
    let info = RunInfo {
        name,
        inputs,
        settings: describe_settings(&options, &config),
        release,
        timeline,
        nodes_at_start: cluster.nodes.len(),
    };
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
    if let Some((recorded, _)) = &recorded {
        sim.expect_bindings(recorded);
        if args.follow_recorded {
            sim.follow_recorded();
        }
    }
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
    let summary = summary?;
    // Following a recording, the cluster's bindings stand whatever the decisions were.
    if cfg!(debug_assertions)
        && !args.follow_recorded
        && let Err(violation) = sim.check_invariants()
    {
        anyhow::ensure!(args.no_assume, "invariant violated: {violation}");
        crate::output::say(
            crate::output::Say::Note,
            &format!("without assume, as expected: {violation}"),
        );
    }
    if let Some(path) = &args.placements {
        write_placements(path, sim.placements())?;
    }
    if let Some(dir) = &args.report {
        report::write(dir, &info, &summary, &sim)?;
    }
    let groups = sim.pod_groups();
    let divergence = recorded.as_ref().map(|(recorded, end)| {
        let judged = sim.recorded_nodes_judged();
        (
            Divergence::of(recorded, sim.placements(), judged),
            end.as_millis(),
        )
    });
    if args.json {
        let mut value = serde_json::to_value(&summary)?;
        if !groups.is_empty() {
            value["pod_groups"] = serde_json::to_value(&groups)?;
        }
        if let Some((divergence, end)) = &divergence {
            value["replay"] = crate::replay::to_json(divergence, *end);
        }
        let line = output::with_release(value, release).to_string();
        output::to_stdout(|out| writeln!(out, "{line}"))
    } else {
        output::to_stdout(|out| {
            print_summary(
                out,
                &format!("{}, decided as Kubernetes {release}", info.name),
                info.nodes_at_start,
                &summary,
                sim.placements(),
            )?;
            if let Some((divergence, _)) = &divergence {
                crate::replay::print(out, divergence)?;
            }
            print_pod_groups(out, &groups)
        })
    }
}

/// The recorded bindings of a replayed trace, and when it ends.
type Recorded = Option<(Vec<RecordedBinding>, Duration)>;

/// The cluster and timed events to simulate, as `release` reads them: a trace (with the
/// bindings it recorded), or the inputs (scenario, files, live cluster), with `--pods`.
fn read_inputs(
    args: &SimulateArgs,
    release: Release,
    config: &SchedulerConfig,
    live: Option<crate::live::LiveCluster>,
) -> anyhow::Result<(Scenario, Recorded)> {
    let mut recorded = None;
    let Scenario {
        name,
        mut cluster,
        mut events,
        timeline,
    } = match &args.trace {
        Some(path) => {
            let replay = crate::replay::read(path, release, config)?;
            if !replay.not_replayed.is_empty() {
                let counts: Vec<String> = (replay.not_replayed.iter())
                    .map(|(what, n)| format!("{n} {what}"))
                    .collect();
                let note = format!("changes not replayed: {}", counts.join(", "));
                output::say(Say::Note, &note);
            }
            recorded = Some((replay.recorded, replay.end));
            Scenario {
                name: path.display().to_string(),
                cluster: replay.cluster,
                events: replay.events,
                timeline: Vec::new(),
            }
        }
        None => inputs(args, release, live)?,
    };
    load::print_notes(&cluster);
    let mut pending = load::manifests(&args.pods, release)?;
    load::print_notes(&pending);
    load::note_unread(
        &pending,
        "--pods",
        &[
            "Pod",
            "PodGroup",
            "PriorityClass",
            "DeviceClass",
            "ResourceSlice",
            "ResourceClaim",
            "ResourceClaimTemplate",
        ],
        "put the cluster's other objects in --cluster",
    );
    // Claims, templates, classes and slices may come with the pods as well.
    cluster.dra.extend(std::mem::take(&mut pending.dra));
    cluster.admit_with(&mut pending)?;
    // PodGroups first: at one time, events happen in the order they were given.
    for group in std::mem::take(&mut pending.pod_groups) {
        events.push((Duration::ZERO, SimEvent::CreatePodGroup(Arc::new(group))));
    }
    for group in std::mem::take(&mut pending.coscheduling_groups) {
        let group = Arc::new(group);
        events.push((Duration::ZERO, SimEvent::CreateCoschedulingGroup(group)));
    }
    for pod in pending.pods {
        anyhow::ensure!(
            pod.node_name.is_none(),
            "{}: pod {} is already bound (spec.nodeName); put bound pods in --cluster",
            "--pods",
            pod.key()
        );
        events.push((Duration::ZERO, SimEvent::CreatePod(Arc::new(pod))));
    }
    let scenario = Scenario {
        name,
        cluster,
        events,
        timeline,
    };
    Ok((scenario, recorded))
}

/// The cluster and timed events to simulate: from a scenario (plus any manifests and the
/// cluster read live), from manifests or the live cluster alone, or the built-in default
/// scenario.
fn inputs(
    args: &SimulateArgs,
    release: Release,
    live: Option<crate::live::LiveCluster>,
) -> anyhow::Result<Scenario> {
    let mut names: Vec<String> = live.iter().map(|l| l.server.clone()).collect();
    names.extend(args.cluster.iter().map(|p| p.display().to_string()));
    let manifests = crate::live::with_files(live, load::manifests(&args.cluster, release)?);
    let scenario = match &args.scenario {
        Some(path) => {
            let text = load::read_text(path, load::MAX_SCENARIO_BYTES, "scenario")?;
            Scenario::parse_for(&text, &path.display().to_string(), release)?
        }
        None if names.is_empty() => {
            Scenario::parse_for(DEFAULT_SCENARIO, "built-in default scenario", release)?
        }
        None => {
            return Ok(Scenario {
                name: names.join(", "),
                cluster: manifests,
                events: Vec::new(),
                timeline: Vec::new(),
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

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The files (and the server) the run read, for the report.
fn describe_inputs(args: &SimulateArgs, live_server: Option<&str>) -> Vec<(String, String)> {
    let mut inputs = Vec::new();
    if args.scenario.is_none()
        && args.cluster.is_empty()
        && live_server.is_none()
        && args.trace.is_none()
    {
        inputs.push(("scenario".into(), "built-in demo".into()));
    }
    if let Some(path) = &args.trace {
        inputs.push(("--trace".into(), path.display().to_string()));
    }
    if let Some(path) = &args.scenario {
        inputs.push(("--scenario".into(), path.display().to_string()));
    }
    if let Some(server) = live_server {
        inputs.push(("--kubeconfig".into(), server.to_string()));
    }
    if !args.cluster.is_empty() {
        inputs.push(("--cluster".into(), join_paths(&args.cluster)));
    }
    if !args.pods.is_empty() {
        inputs.push(("--pods".into(), join_paths(&args.pods)));
    }
    let config = args.config.as_ref().map_or_else(
        || "kube-scheduler's defaults".to_string(),
        |p| p.display().to_string(),
    );
    inputs.push(("--config".into(), config));
    inputs
}

/// How the run was configured, for the report.
fn describe_settings(options: &SimOptions, config: &SchedulerConfig) -> Vec<(String, String)> {
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    let mut settings = vec![
        (
            "Kubernetes release".into(),
            format!("decided as {}", config.release),
        ),
        ("seed".into(), options.seed.to_string()),
        ("assume".into(), yes_no(options.assume)),
        ("sequential".into(), yes_no(options.sequential)),
        ("bind latency".into(), options.bind_latency.to_string()),
        ("API client".into(), config.client_rate.to_string()),
        (
            "binding conditions".into(),
            options.driver_binding.to_string(),
        ),
        (
            "bind failure rate".into(),
            format!("{}%", options.bind_failure_rate * 100.0),
        ),
        (
            "API refuses over-commits".into(),
            yes_no(options.capacity_check || options.schedulers > 1),
        ),
        (
            "API admits binds by every Filter plugin".into(),
            yes_no(options.schedulers > 1),
        ),
        ("scheduler instances".into(), options.schedulers.to_string()),
        (
            "event latency".into(),
            format!("{} ms", options.event_latency.as_millis()),
        ),
        (
            "backoff".into(),
            format!(
                "{} s doubling to {} s",
                config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds
            ),
        ),
    ];
    settings.extend(report::describe_profiles(&config.profiles));
    settings
}

/// JSON Lines, one per pod; a failed write names the file (a closed pipe ends quietly).
fn write_placements(path: &Path, placements: &[Placement]) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let mut line = Vec::new();
    for placement in placements {
        line.clear();
        serde_json::to_writer(&mut line, placement)?;
        line.push(b'\n');
        out.write_all(&line)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The simulation's options from the flags, with `config`'s backoff.
fn sim_options(args: &SimulateArgs, config: &SchedulerConfig) -> SimOptions {
    SimOptions {
        seed: args.seed,
        assume: !args.no_assume,
        remember_verdicts: true,
        sequential: args.sequential,
        bind_latency: args.bind_latency_ms.map_or(BindLatency::REALISTIC, |ms| {
            BindLatency::Fixed(Duration::from_millis(ms))
        }),
        // kube-scheduler's client: its binds wait for its rate limit's tokens.
        client_rate: Some(config.client_rate),
        bind_failure_rate: args.bind_failure_rate,
        capacity_check: args.capacity_check,
        initial_backoff: Duration::from_secs(config.pod_initial_backoff_seconds),
        max_backoff: Duration::from_secs(config.pod_max_backoff_seconds),
        step_limit: None,
        schedulers: args.schedulers,
        event_latency: Duration::from_millis(args.event_latency_ms),
        sample_gpus: args.report.is_some(),
        driver_binding: args.binding_conditions,
    }
}

fn print_summary(
    out: &mut dyn Write,
    name: &str,
    nodes: usize,
    s: &Summary,
    placements: &[Placement],
) -> std::io::Result<()> {
    writeln!(out, "gantry simulate: {name}")?;
    if s.schedulers > 1 || s.event_latency_ms > 0.0 {
        writeln!(
            out,
            "  {} scheduler instances, watch events {} ms late",
            s.schedulers, s.event_latency_ms
        )?;
    }
    writeln!(
        out,
        "  {} nodes at the start, {} pods submitted: {} scheduled, {} pending, {} evicted by preemption",
        nodes,
        s.pods_total,
        s.scheduled,
        s.pods_total - s.scheduled,
        s.preempted
    )?;
    let not_tried = [
        (s.gated, "gated"),
        (s.other_scheduler, "for another scheduler"),
        (s.gave_up, "given up after repeated failures"),
    ];
    if not_tried.iter().any(|(n, _)| *n > 0) {
        let parts: Vec<String> = not_tried
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        writeln!(out, "  of the pending pods: {}", parts.join(", "))?;
    }
    writeln!(
        out,
        "  {:.0} pods/s ({:.2} s wall, {:.1} s of cluster time), {} attempts, {} retries",
        s.pods_per_sec, s.wall_s, s.virtual_s, s.attempts, s.retries
    )?;
    writeln!(
        out,
        "  scheduling attempt latency: p50 {} µs, p90 {} µs, p99 {} µs",
        s.p50_us, s.p90_us, s.p99_us
    )?;
    writeln!(
        out,
        "  bind failures {}, conflicts {} ({} refused by the binders' re-check), over-commits prevented {}, over-committed nodes {}",
        s.bind_failures,
        s.conflicts,
        s.binder_conflicts,
        s.overcommits_prevented,
        s.overcommitted_nodes
    )?;
    if !s.conflicts_by_plugin.is_empty() {
        let parts: Vec<String> = s
            .conflicts_by_plugin
            .iter()
            .map(|(plugin, n)| format!("{plugin} {n}"))
            .collect();
        writeln!(out, "  conflicts by plugin: {}", parts.join(", "))?;
    }
    if s.gpu_pods > 0 {
        writeln!(
            out,
            "  GPU sharing (HAMi): {} pods hold cards, {} cards are shared",
            s.gpu_pods, s.shared_cards
        )?;
    }
    let reasons = report::pending_reasons(placements);
    if !reasons.is_empty() {
        writeln!(out, "  why pods are pending:")?;
        for (reason, count) in reasons.iter().take(5) {
            writeln!(out, "    {count:>6}  {reason}")?;
        }
        if reasons.len() > 5 {
            writeln!(
                out,
                "    ({} other reasons; see --placements)",
                reasons.len() - 5
            )?;
        }
    }
    Ok(())
}

/// Each PodGroup's PodGroupScheduled condition at the end, as the scheduler wrote it.
fn print_pod_groups(
    out: &mut dyn Write,
    groups: &[gantry_sim::GroupRecord],
) -> std::io::Result<()> {
    for group in groups {
        match &group.condition {
            None => writeln!(
                out,
                "pod group {}: no condition (its members were never tried together)",
                group.group
            )?,
            Some(c) => {
                write!(
                    out,
                    "pod group {}: PodGroupScheduled={} ({})",
                    group.group, c.status, c.reason
                )?;
                if !c.message.is_empty() {
                    write!(out, ": {}", c.message)?;
                }
                match group.scheduled_at {
                    Some(at) => writeln!(
                        out,
                        ", scheduled at {:.1} s after {} cycle(s)",
                        at.as_secs_f64(),
                        group.cycles
                    )?,
                    None => writeln!(out, ", after {} cycle(s)", group.cycles)?,
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_demo_passes_the_api_servers_checks() {
        Scenario::parse(DEFAULT_SCENARIO, "built-in default scenario").unwrap();
    }
}
