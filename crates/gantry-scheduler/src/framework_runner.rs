//! Runs a profile's plugins at each extension point, as upstream's `frameworkImpl`.

use std::sync::Arc;

use gantry_api::{Pod, Sym};
use gantry_cache::{ClusterState, NodeInfo, Snapshot};
use std::time::{Duration, Instant};

use gantry_framework::{
    Cluster, Code, CycleState, FilterPlugin, Profile, Status, WeightedScorePlugin,
};

use crate::metrics::ExtensionPoint;

/// Per-plugin timings, taken only in sampled cycles (upstream samples 10%).
#[derive(Default)]
pub struct PluginTimer {
    pub enabled: bool,
    pub records: Vec<(&'static str, ExtensionPoint, Duration)>,
}

impl PluginTimer {
    fn time<T>(&mut self, plugin: &'static str, point: ExtensionPoint, f: impl FnOnce() -> T) -> T {
        if !self.enabled {
            return f();
        }
        let start = Instant::now();
        let out = f();
        self.records.push((plugin, point, start.elapsed()));
        out
    }
}

/// PreFilter: `Ok(None)` for all nodes, `Ok(Some(names))` to narrow them, `Err` when a
/// plugin rejected the pod for every node. The node sets plugins narrow to are
/// intersected, as upstream's `RunPreFilterPlugins` merges `PreFilterResult`s; when
/// nothing is left, the pod is rejected with upstream's message naming those plugins.
pub fn run_pre_filter(
    profile: &Profile,
    state: &mut CycleState,
    pod: &Pod,
    cluster: Cluster<'_>,
    timer: &mut PluginTimer,
) -> Result<Option<Vec<Sym>>, Status> {
    let mut narrowed: Option<Vec<Sym>> = None;
    let mut narrowing: Vec<&'static str> = Vec::new();
    for plugin in &profile.pre_filter {
        let (result, status) = timer.time(plugin.name(), ExtensionPoint::PreFilter, || {
            plugin.pre_filter(state, pod, cluster)
        });
        match status.code() {
            Code::Success => {}
            Code::Skip => {
                state.skip_filter(plugin.name());
                continue;
            }
            _ => return Err(status.with_plugin(plugin.name())),
        }
        let Some(names) = result else {
            continue;
        };
        narrowing.push(plugin.name());
        let merged = match narrowed {
            None => names,
            Some(previous) => previous.into_iter().filter(|n| names.contains(n)).collect(),
        };
        if merged.is_empty() {
            return Err(no_node_satisfies(&narrowing));
        }
        narrowed = Some(merged);
    }
    Ok(narrowed)
}

/// Upstream's rejection when the plugins' node sets have no node in common. v1.28.0 made
/// it Unschedulable, which sent preemption into plugins whose PreFilter never ran
/// (kubernetes#119770); it is UnschedulableAndUnresolvable since, as here.
fn no_node_satisfies(plugins: &[&str]) -> Status {
    let message = match plugins {
        [one] => format!("node(s) didn't satisfy plugin {one}"),
        several => format!(
            "node(s) didn't satisfy plugin(s) [{}] simultaneously",
            several.join(" ")
        ),
    };
    Status::unresolvable(message)
}

/// The snapshot positions of the nodes a PreFilter narrowed to, in the snapshot's order
/// (upstream walks a set; a fixed order keeps runs reproducible). Names of nodes the
/// snapshot lacks are left out.
pub fn narrowed_positions(snapshot: &Snapshot, names: &[Sym]) -> Vec<usize> {
    let mut positions: Vec<usize> = names.iter().filter_map(|n| snapshot.position(*n)).collect();
    positions.sort_unstable();
    positions
}

/// The Filter plugins that run for one pod: the profile's, less those whose PreFilter
/// said Skip. Built once per cycle, so the per-node loop does no lookups.
pub struct PodFilters<'a> {
    profile: &'a Profile,
    active: Vec<&'a Arc<dyn FilterPlugin>>,
}

impl<'a> PodFilters<'a> {
    pub fn new(profile: &'a Profile, state: &CycleState) -> PodFilters<'a> {
        PodFilters {
            profile,
            active: profile
                .filter
                .iter()
                .filter(|p| !state.is_filter_skipped(p.name()))
                .collect(),
        }
    }

    /// Filter plugins in order; the first that rejects the node decides.
    pub fn run(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        for plugin in &self.active {
            let status = filter_one(plugin, state, pod, node);
            if !status.is_success() {
                return status;
            }
        }
        Status::success()
    }

    /// Every Filter plugin of the profile, in order, without stopping at a rejection (so
    /// an explanation can show every reason); `Skip` for those whose PreFilter said Skip.
    pub fn run_all(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Vec<Status> {
        self.profile
            .filter
            .iter()
            .map(|plugin| {
                if state.is_filter_skipped(plugin.name()) {
                    Status::skip().with_plugin(plugin.name())
                } else {
                    filter_one(plugin, state, pod, node)
                }
            })
            .collect()
    }

    /// Filters with the pods nominated to this node (of at least the pod's priority)
    /// counted as if they were there, then without them: the node must fit either way.
    pub fn run_with_nominated(
        &self,
        state: &CycleState,
        pod: &Pod,
        node: &NodeInfo,
        nominated: &[Arc<Pod>],
    ) -> Status {
        let relevant = |p: &&Arc<Pod>| p.priority >= pod.priority && p.uid != pod.uid;
        if !nominated.iter().any(|p| relevant(&p)) {
            return self.run(state, pod, node);
        }
        let mut node_with = node.clone();
        let mut state_with = state.clone();
        for p in nominated.iter().filter(relevant) {
            node_with.add_pod(Arc::clone(p));
            for plugin in &self.profile.pre_filter {
                plugin.add_pod(&mut state_with, pod, p, &node_with);
            }
        }
        let status = self.run(&state_with, pod, &node_with);
        if !status.is_success() {
            return status;
        }
        self.run(state, pod, node)
    }
}

/// One Filter plugin's verdict, naming the plugin; anything but success or a rejection
/// is an error.
fn filter_one(
    plugin: &Arc<dyn FilterPlugin>,
    state: &CycleState,
    pod: &Pod,
    node: &NodeInfo,
) -> Status {
    let status = plugin.filter(state, pod, node);
    if status.is_success() || status.is_rejected() {
        return status.with_plugin(plugin.name());
    }
    Status::error(format!(
        "running {:?} filter plugin: {}",
        plugin.name(),
        status.message()
    ))
    .with_plugin(plugin.name())
}

/// Reserve, in order; on a refusal every Reserve plugin is told to unreserve and the
/// error names the plugin.
pub fn run_reserve(
    profile: &Profile,
    state: &mut CycleState,
    pod: &Pod,
    node: &NodeInfo,
) -> Result<(), String> {
    for plugin in &profile.reserve {
        let status = plugin.reserve(state, pod, node);
        if !status.is_success() {
            crate::binding::unreserve(profile, state, pod, node.name());
            return Err(format!(
                "running Reserve plugin {:?}: {}",
                plugin.name(),
                status.message()
            ));
        }
    }
    Ok(())
}

/// After Filter, the plugins that choose among the feasible nodes themselves (as
/// scheduler extenders do) narrow `positions` and the matching `nodes`, in profile
/// order. Returns the last plugin that narrowed them; an empty choice is ignored.
pub fn run_choose(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    positions: &mut Vec<usize>,
    nodes: &mut Vec<&NodeInfo>,
) -> Option<&'static str> {
    let mut chooser = None;
    for plugin in &profile.filter {
        if state.is_filter_skipped(plugin.name()) {
            continue;
        }
        let Some(kept) = plugin.choose(state, pod, nodes) else {
            continue;
        };
        let kept: Vec<usize> = kept.into_iter().filter(|&i| i < nodes.len()).collect();
        if kept.is_empty() {
            continue;
        }
        *positions = kept.iter().map(|&i| positions[i]).collect();
        *nodes = kept.iter().map(|&i| nodes[i]).collect();
        chooser = Some(plugin.name());
    }
    chooser
}

/// The annotations the Filter plugins write on the pod assumed on `node`.
pub fn run_annotations(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    node: &NodeInfo,
    now: i64,
) -> Result<Vec<gantry_api::Annotation>, Status> {
    let mut out = Vec::new();
    for plugin in &profile.filter {
        if !state.is_filter_skipped(plugin.name()) {
            out.extend(
                plugin
                    .annotations(state, pod, node, now)
                    .map_err(|s| s.with_plugin(plugin.name()))?,
            );
        }
    }
    Ok(out)
}

/// PreScore for every plugin; a plugin that says Skip is not asked to Score.
pub fn run_pre_score(
    profile: &Profile,
    state: &mut CycleState,
    pod: &Pod,
    nodes: &[&NodeInfo],
    cluster: Cluster<'_>,
    timer: &mut PluginTimer,
) -> Result<(), Status> {
    for plugin in &profile.pre_score {
        let status = timer.time(plugin.name(), ExtensionPoint::PreScore, || {
            plugin.pre_score(state, pod, nodes, cluster)
        });
        match status.code() {
            Code::Success => {}
            Code::Skip => state.skip_score(plugin.name()),
            _ => return Err(status.with_plugin(plugin.name())),
        }
    }
    Ok(())
}

/// Scores the nodes: every plugin's scores normalised, weighted and summed per node.
pub fn run_score(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    nodes: &[&NodeInfo],
    timer: &mut PluginTimer,
) -> Result<Vec<i64>, Status> {
    let mut totals = vec![0i64; nodes.len()];
    score_each_plugin(
        profile,
        state,
        pod,
        nodes,
        timer,
        |weighted, _raw, normalized| {
            for (total, score) in totals.iter_mut().zip(normalized) {
                *total += score * weighted.weight;
            }
        },
    )?;
    Ok(totals)
}

/// One Score plugin's scores of the nodes, in the order given; empty when its PreScore
/// said Skip.
#[derive(Debug, Clone)]
pub struct PluginScores {
    pub plugin: &'static str,
    pub weight: i64,
    pub skipped: bool,
    pub raw: Vec<i64>,
    pub normalized: Vec<i64>,
}

/// As [`run_score`], keeping every plugin's raw and normalised scores (for explanations).
pub fn run_score_per_plugin(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    nodes: &[&NodeInfo],
) -> Result<Vec<PluginScores>, Status> {
    let mut per_plugin: Vec<PluginScores> = profile
        .score
        .iter()
        .map(|weighted| PluginScores {
            plugin: weighted.plugin.name(),
            weight: weighted.weight,
            skipped: state.is_score_skipped(weighted.plugin.name()),
            raw: Vec::new(),
            normalized: Vec::new(),
        })
        .collect();
    let mut timer = PluginTimer::default();
    score_each_plugin(
        profile,
        state,
        pod,
        nodes,
        &mut timer,
        |weighted, raw, normalized| {
            if let Some(entry) = per_plugin
                .iter_mut()
                .find(|p| p.plugin == weighted.plugin.name())
            {
                entry.raw = raw.to_vec();
                entry.normalized = normalized.to_vec();
            }
        },
    )?;
    Ok(per_plugin)
}

/// Runs Score and NormalizeScore of every plugin not skipped, checks the normalised
/// range, and hands each plugin's raw and normalised scores to `visit`.
fn score_each_plugin(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    nodes: &[&NodeInfo],
    timer: &mut PluginTimer,
    mut visit: impl FnMut(&WeightedScorePlugin, &[i64], &[i64]),
) -> Result<(), Status> {
    use rayon::prelude::*;
    let mut scores = vec![0i64; nodes.len()];
    for weighted in &profile.score {
        let plugin = &weighted.plugin;
        if state.is_score_skipped(plugin.name()) {
            continue;
        }
        let score_one = |node: &&NodeInfo| plugin.score(state, pod, node);
        let results: Result<Vec<i64>, Status> =
            timer.time(plugin.name(), ExtensionPoint::Score, || {
                if nodes.len() >= PARALLEL_THRESHOLD {
                    nodes.par_iter().map(score_one).collect()
                } else {
                    nodes.iter().map(score_one).collect()
                }
            });
        let results = results.map_err(|s| s.with_plugin(plugin.name()))?;
        scores.copy_from_slice(&results);
        let status = plugin.normalize(state, pod, &mut scores);
        if !status.is_success() {
            return Err(status.with_plugin(plugin.name()));
        }
        let out_of_range = |s: &&i64| !(0..=gantry_framework::MAX_NODE_SCORE).contains(*s);
        if let Some(score) = scores.iter().find(out_of_range) {
            return Err(Status::error(format!(
                "plugin {:?} returns an invalid score {score}, it should be in the range of [0, 100] after normalizing",
                plugin.name()
            )));
        }
        visit(weighted, &results, &scores);
    }
    Ok(())
}

/// Below this many nodes, fanning out over threads costs more than it saves (measured
/// with `gantry bench basic` on 2 cores: at 500 nodes per pod, sequential is twice as
/// fast; at 5,000, parallel is about 15% faster).
pub const PARALLEL_THRESHOLD: usize = 2048;
