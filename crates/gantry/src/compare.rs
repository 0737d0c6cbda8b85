//! `gantry simulate ... --compare B.yaml`: the same inputs (a trace, a dump, a scenario,
//! a live cluster) run twice from the same seed, under `--config` (A) and under B, and
//! the two outcomes side by side: where each pod went in each, the pods placed
//! differently, pending counts, preemptions, and the wait from creation to binding.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_api::{Release, Sym};
use gantry_framework::config::SchedulerConfig;
use gantry_scheduler::OtherNode;
use gantry_sim::replay::{Divergence, RecordedBinding};
use gantry_sim::{Placement, PodHistory, Sample, SimEvent, SimOptions, Simulation, Summary};
use serde::Serialize;
use serde_json::json;

/// Pods named in the text output (`--json` has them all).
const MAX_NAMED: usize = 10;
/// Pods placed on other nodes whose decisions are explained: each run judges the node
/// the other chose (as many as the comparison page lists).
pub const MAX_EXPLAINED: usize = 1000;

/// One configuration to run.
pub struct Arm {
    /// The file, or "kube-scheduler's defaults".
    pub label: String,
    pub config: SchedulerConfig,
    pub options: SimOptions,
    /// Where to write this arm's own report (`--report DIR` gives `DIR/a` and `DIR/b`),
    /// and what the run was given.
    pub report: Option<(PathBuf, crate::report::RunInfo)>,
}

/// One configuration's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub config: String,
    /// The release it decided as.
    pub kubernetes_release: String,
    pub summary: Summary,
    /// Seconds from creation to binding, of the pods bound: p50, p90, p99, max.
    pub wait_s: [f64; 4],
    /// PodGroups, and of those the ones a pod-group cycle scheduled.
    pub pod_groups: usize,
    pub pod_groups_scheduled: usize,
    #[serde(skip)]
    placements: Vec<Placement>,
    /// When each of `placements` was bound.
    #[serde(skip)]
    bound_at: Vec<Option<Duration>>,
    /// The run over cluster time, for the report's plots.
    #[serde(skip)]
    pub samples: Vec<Sample>,
    /// Creation to binding of every pod bound, shortest first.
    #[serde(skip)]
    pub waits: Vec<Duration>,
    /// Over a trace, how each pod placed elsewhere than recorded judged its recorded node.
    #[serde(skip)]
    judged: HashMap<String, OtherNode>,
    /// For the first pods placed on other nodes ([`MAX_EXPLAINED`]), how this run's cycle
    /// judged the other run's node.
    #[serde(skip)]
    judged_other: HashMap<String, OtherNode>,
}

impl Outcome {
    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }
}

/// Where the two differ, pod by pod.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Differences {
    /// Pods bound in both.
    pub bound_in_both: usize,
    /// Of those, on another node: `(pod, A's node, B's node)`.
    pub other_node: Vec<(String, String, String)>,
    /// Bound under A only: `(pod, A's node, B's reason)`.
    pub only_a: Vec<(String, String, String)>,
    /// Bound under B only: `(pod, A's reason, B's node)`.
    pub only_b: Vec<(String, String, String)>,
    /// Why, for the first of `other_node` ([`MAX_EXPLAINED`]): how A's cycle judged B's
    /// node, and how B's judged A's.
    pub why_other_node: Vec<WhyOtherNode>,
}

/// How each run's cycle judged the node the other run chose for a pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhyOtherNode {
    pub pod: String,
    /// A's cycle, of B's node: `tied: 3 nodes scored 187, the highest`, `scored lower: 150
    /// against 187`, `refused by NodeResourcesFit: Insufficient cpu`, ...
    pub a: String,
    pub b: String,
}

/// Runs both arms over their inputs (the same, but as each release reads them); over a
/// trace, each compares its decisions with the bindings it recorded, and with `true`
/// binds each pod as recorded. Where they placed pods on other nodes, each is run again
/// from the same seed up to the last of the first [`MAX_EXPLAINED`] such pods, keeping
/// how its cycle judged the node the other chose.
pub fn run(
    inputs: [(ClusterObjects, Vec<(Duration, SimEvent)>); 2],
    arms: [Arm; 2],
    recorded: Option<(&[RecordedBinding], bool)>,
) -> anyhow::Result<[Outcome; 2]> {
    let again = inputs.clone();
    let [a, b] = inputs;
    let [arm_a, arm_b] = arms;
    let arm_run = |inputs, arm: &Arm, others| ArmRun {
        inputs,
        label: arm.label.clone(),
        release: arm.config.release,
        profiles: arm.config.profiles.clone(),
        options: arm.options.clone(),
        recorded,
        others,
    };
    let (run_a, run_b) = (arm_run(a, &arm_a, None), arm_run(b, &arm_b, None));
    // A's error is reported first, as it would be one after the other.
    let [first, second] = in_parallel(
        || run_arm(run_a, arm_a.report.as_ref()),
        || run_arm(run_b, arm_b.report.as_ref()),
    );
    let mut outcomes = [first?, second?];
    let d = differences(&outcomes[0], &outcomes[1]);
    let explained = &d.other_node[..d.other_node.len().min(MAX_EXPLAINED)];
    if explained.is_empty() {
        return Ok(outcomes);
    }
    // Each run again, judging the other's nodes, up to the last of these pods' binds.
    let names: HashSet<&str> = explained.iter().map(|(pod, ..)| pod.as_str()).collect();
    let others = |side: usize| -> (HashMap<String, Sym>, Duration) {
        let nodes = explained.iter().map(|(pod, na, nb)| {
            let other = if side == 0 { nb } else { na };
            (pod.clone(), Sym::new(other))
        });
        let outcome = &outcomes[side];
        let last_bind = (outcome.placements.iter().zip(&outcome.bound_at))
            .filter(|(p, _)| names.contains(p.pod.to_string().as_str()))
            .filter_map(|(_, bound)| *bound)
            .max()
            .unwrap_or_default();
        (nodes.collect(), last_bind)
    };
    let [again_a, again_b] = again;
    let run_a = arm_run(again_a, &arm_a, Some(others(0)));
    let run_b = arm_run(again_b, &arm_b, Some(others(1)));
    let [first, second] = in_parallel(|| judge_others(run_a), || judge_others(run_b));
    outcomes[0].judged_other = first?;
    outcomes[1].judged_other = second?;
    Ok(outcomes)
}

/// Runs `a` here and `b` on a thread of its own: the arms share nothing, so a comparison
/// takes about as long as one run on two cores. Each arm decides alone, from its own seed,
/// so the outcome is the same as one after the other.
fn in_parallel<T: Send>(a: impl FnOnce() -> T, b: impl FnOnce() -> T + Send) -> [T; 2] {
    std::thread::scope(|scope| {
        let second = scope.spawn(b);
        let first = a();
        let second = second
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        [first, second]
    })
}

/// One arm's run: its inputs, configuration and what it compares its decisions with.
struct ArmRun<'a> {
    inputs: (ClusterObjects, Vec<(Duration, SimEvent)>),
    label: String,
    release: Release,
    profiles: Vec<gantry_framework::Profile>,
    options: SimOptions,
    recorded: Option<(&'a [RecordedBinding], bool)>,
    /// The other arm's nodes to judge, and the time to run to.
    others: Option<(HashMap<String, Sym>, Duration)>,
}

impl ArmRun<'_> {
    /// The simulation, its events scheduled, and how far to run it (`None`: to the end).
    fn simulation(self) -> anyhow::Result<(Simulation, Option<Duration>)> {
        let (cluster, events) = self.inputs;
        let mut sim = Simulation::new(cluster, self.profiles, self.options)
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.label))?;
        if let Some((recorded, follow)) = self.recorded {
            sim.expect_bindings(recorded);
            if follow {
                sim.follow_recorded();
            }
        }
        let until = self.others.map(|(others, until)| {
            sim.judge_other_nodes(others);
            until
        });
        for (at, event) in events {
            sim.schedule(at, event);
        }
        Ok((sim, until))
    }
}

fn run_arm(
    run: ArmRun,
    report: Option<&(PathBuf, crate::report::RunInfo)>,
) -> anyhow::Result<Outcome> {
    let release = run.release.to_string();
    let label = run.label.clone();
    let (mut sim, _) = run.simulation()?;
    let summary = sim.run()?;
    if let Some((dir, info)) = report {
        crate::report::write(dir, info, &summary, &sim)?;
    }
    let waits = waits(sim.histories());
    let groups = sim.pod_groups();
    Ok(Outcome {
        kubernetes_release: release,
        config: label,
        summary,
        wait_s: quantiles(&waits),
        pod_groups: groups.len(),
        pod_groups_scheduled: groups.iter().filter(|g| g.scheduled_at.is_some()).count(),
        placements: sim.placements().to_vec(),
        bound_at: sim.histories().iter().map(|h| h.bound).collect(),
        samples: std::mem::take(&mut sim.samples),
        waits,
        judged: sim.recorded_nodes_judged().clone(),
        judged_other: HashMap::new(),
    })
}

/// The arm run again up to the last bind to explain, judging the other arm's nodes.
fn judge_others(run: ArmRun) -> anyhow::Result<HashMap<String, OtherNode>> {
    let (mut sim, until) = run.simulation()?;
    sim.run_until(until.unwrap_or_default())?;
    Ok(sim.other_nodes_judged().clone())
}

/// Creation to binding of every pod bound, shortest first.
fn waits(histories: &[PodHistory]) -> Vec<Duration> {
    let mut waits: Vec<Duration> = histories
        .iter()
        .filter_map(|h| h.bound.map(|bound| bound.saturating_sub(h.arrived)))
        .collect();
    waits.sort_unstable();
    waits
}

/// p50, p90, p99 and the longest of `waits` (sorted), in seconds.
fn quantiles(waits: &[Duration]) -> [f64; 4] {
    let at = |q: f64| {
        if waits.is_empty() {
            return 0.0;
        }
        let d = waits[((waits.len() - 1) as f64 * q).round() as usize];
        (d.as_secs_f64() * 1e3).round() / 1e3
    };
    [at(0.5), at(0.9), at(0.99), at(1.0)]
}

/// The pods placed differently. Both runs saw the same pods; a pod bound elsewhere (a
/// replayed trace's other scheduler) is not the simulation's and is left out.
pub fn differences(a: &Outcome, b: &Outcome) -> Differences {
    let ours = |p: &&Placement| p.reason.as_deref() != Some("bound by another scheduler");
    let b_by_pod: HashMap<String, &Placement> = b
        .placements
        .iter()
        .filter(ours)
        .map(|p| (p.pod.to_string(), p))
        .collect();
    let mut differences = Differences::default();
    for pa in a.placements.iter().filter(ours) {
        let pod = pa.pod.to_string();
        let Some(pb) = b_by_pod.get(&pod) else {
            continue;
        };
        let reason = |p: &Placement| p.reason.clone().unwrap_or_default();
        match (&pa.node, &pb.node) {
            (Some(na), Some(nb)) => {
                differences.bound_in_both += 1;
                if na != nb {
                    (differences.other_node).push((pod, na.to_string(), nb.to_string()));
                }
            }
            (Some(na), None) => differences.only_a.push((pod, na.to_string(), reason(pb))),
            (None, Some(nb)) => differences.only_b.push((pod, reason(pa), nb.to_string())),
            (None, None) => {}
        }
    }
    if !(a.judged_other.is_empty() && b.judged_other.is_empty()) {
        let why = |o: &Outcome, pod: &str| {
            (o.judged_other.get(pod)).map_or(OtherNode::Unknown.to_string(), |w| w.to_string())
        };
        differences.why_other_node = (differences.other_node.iter().take(MAX_EXPLAINED))
            .map(|(pod, ..)| WhyOtherNode {
                pod: pod.clone(),
                a: why(a, pod),
                b: why(b, pod),
            })
            .collect();
    }
    differences
}

/// Writes both outcomes and their differences to stdout, as one JSON object or in
/// words; with the bindings a replayed trace recorded, how much of them each reproduced;
/// with `report`, the comparison page into that directory.
pub fn write(
    outcomes: &[Outcome; 2],
    recorded: Option<&[RecordedBinding]>,
    json: bool,
    title: &str,
    releases: [Release; 2],
    report: Option<(&Path, [crate::report::compare_page::Configuration; 2])>,
) -> anyhow::Result<()> {
    let differences = differences(&outcomes[0], &outcomes[1]);
    let divergences = recorded.map(|recorded| {
        outcomes
            .each_ref()
            .map(|o| Divergence::of(recorded, o.placements(), &o.judged))
    });
    let mut value = json!({"a": outcomes[0], "b": outcomes[1], "differences": differences});
    if let Some([a, b]) = &divergences {
        value["a"]["replay"] = serde_json::to_value(a)?;
        value["b"]["replay"] = serde_json::to_value(b)?;
    }
    let line = crate::output::with_release(value, releases[0]).to_string();
    if let Some((dir, configurations)) = report {
        let runs = crate::report::compare_page::ComparedRuns {
            title,
            releases,
            outcomes,
            differences: &differences,
            divergences: divergences.as_ref(),
            configurations,
            json: format!("{line}\n"),
        };
        crate::report::compare_page::write(dir, &runs)?;
    }
    if json {
        return crate::output::to_stdout(|out| writeln!(out, "{line}"));
    }
    crate::output::to_stdout(|out| {
        print(out, title, outcomes, &differences)?;
        if let Some([a, b]) = &divergences {
            writeln!(
                out,
                "  replay: of the {} bindings recorded, A reproduced {:.1}%, B {:.1}%",
                a.recorded,
                a.reproduced() * 100.0,
                b.reproduced() * 100.0
            )?;
        }
        Ok(())
    })
}

/// Side by side in words.
fn print(
    out: &mut dyn Write,
    title: &str,
    [a, b]: &[Outcome; 2],
    d: &Differences,
) -> std::io::Result<()> {
    writeln!(out, "gantry simulate: {title}")?;
    writeln!(out, "  A: {}", a.config)?;
    writeln!(out, "  B: {}", b.config)?;
    writeln!(out, "  {:<30} {:>16} {:>16}", "", "A", "B")?;
    let rows: [(&str, String, String); 6] = [
        (
            "pods",
            a.summary.pods_total.to_string(),
            b.summary.pods_total.to_string(),
        ),
        (
            "scheduled",
            a.summary.scheduled.to_string(),
            b.summary.scheduled.to_string(),
        ),
        (
            "pending",
            (a.summary.pods_total - a.summary.scheduled).to_string(),
            (b.summary.pods_total - b.summary.scheduled).to_string(),
        ),
        (
            "evicted by preemption",
            a.summary.preempted.to_string(),
            b.summary.preempted.to_string(),
        ),
        (
            "attempts",
            a.summary.attempts.to_string(),
            b.summary.attempts.to_string(),
        ),
        (
            "wait to bind p50 / p99 (s)",
            format!("{:.3} / {:.3}", a.wait_s[0], a.wait_s[2]),
            format!("{:.3} / {:.3}", b.wait_s[0], b.wait_s[2]),
        ),
    ];
    for (what, va, vb) in rows {
        writeln!(out, "  {what:<30} {va:>16} {vb:>16}")?;
    }
    writeln!(
        out,
        "  placed differently: {} of the {} pods bound in both; bound only under A: {}, only under B: {}",
        d.other_node.len(),
        d.bound_in_both,
        d.only_a.len(),
        d.only_b.len()
    )?;
    for (i, (pod, na, nb)) in d.other_node.iter().take(MAX_NAMED).enumerate() {
        writeln!(out, "    {pod}: A on {na}, B on {nb}")?;
        if let Some(why) = d.why_other_node.get(i) {
            writeln!(out, "      A's cycle, of {nb}: {}", why.a)?;
            writeln!(out, "      B's cycle, of {na}: {}", why.b)?;
        }
    }
    for (pod, na, reason) in d.only_a.iter().take(MAX_NAMED) {
        writeln!(out, "    {pod}: A on {na}, B pending: {reason}")?;
    }
    for (pod, reason, nb) in d.only_b.iter().take(MAX_NAMED) {
        writeln!(out, "    {pod}: A pending: {reason}, B on {nb}")?;
    }
    let more = [d.other_node.len(), d.only_a.len(), d.only_b.len()]
        .iter()
        .map(|n| n.saturating_sub(MAX_NAMED))
        .sum::<usize>();
    if more > 0 {
        writeln!(out, "    ({more} more; see --json)")?;
    }
    Ok(())
}
