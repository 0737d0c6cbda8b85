//! Runs a profile's plugins at each extension point, as upstream's `frameworkImpl`.

use std::sync::{Arc, OnceLock};

use gantry_api::{Pod, Sym};
use gantry_cache::{ClusterState, NodeColumns, NodeInfo, Snapshot};
use smallvec::SmallVec;
use std::time::{Duration, Instant};

use gantry_framework::{
    Cluster, Code, CycleState, FeasibleNodes, FilterPlugin, NodeInfos, Profile, ScorePlugin,
    Status, VerdictKey,
};

use crate::verdict_memo::VerdictMemo;

use gantry_framework::config::Point;

/// Per-plugin timings, taken only in sampled cycles (upstream samples 10%).
#[derive(Default)]
pub struct PluginTimer {
    pub enabled: bool,
    pub records: Vec<(&'static str, Point, Duration)>,
}

impl PluginTimer {
    fn time<T>(&mut self, plugin: &'static str, point: Point, f: impl FnOnce() -> T) -> T {
        if !self.enabled {
            return f();
        }
        let start = Instant::now();
        let out = f();
        self.records.push((plugin, point, start.elapsed()));
        out
    }
}

/// The nodes PreFilter plugins narrowed the search to, and the plugins that did.
#[derive(Debug, Clone)]
pub struct Narrowed {
    pub nodes: Vec<Sym>,
    pub plugins: Vec<&'static str>,
}

/// PreFilter: `Ok(None)` for all nodes, `Ok(Some(narrowed))` to narrow them, `Err` when a
/// plugin rejected the pod for every node. The node sets plugins narrow to are
/// intersected, as upstream's `RunPreFilterPlugins` merges `PreFilterResult`s; when
/// nothing is left, the pod is rejected with upstream's message naming those plugins.
/// From v1.29 an Unschedulable status (which preemption may resolve) lets the other
/// plugins run, so that their state is there for preemption, and is returned at the end
/// unless a later plugin rejects the pod for good (kubernetes#119770).
pub fn run_pre_filter(
    profile: &Profile,
    state: &mut CycleState,
    pod: &Pod,
    cluster: Cluster<'_>,
    timer: &mut PluginTimer,
) -> Result<Option<Narrowed>, Status> {
    let mut narrowed: Option<Vec<Sym>> = None;
    let mut narrowing: Vec<&'static str> = Vec::new();
    let mut unschedulable: Option<Status> = None;
    let runs_past_unschedulable = profile.release.pre_filter_runs_past_unschedulable();
    for plugin in &profile.pre_filter {
        let (result, status) = timer.time(plugin.name(), Point::PreFilter, || {
            plugin.pre_filter(state, pod, cluster)
        });
        match status.code() {
            Code::Success => {}
            Code::Skip => {
                state.skip_filter(plugin.name());
                continue;
            }
            Code::Unschedulable if runs_past_unschedulable => {
                unschedulable = Some(status.with_plugin(plugin.name()));
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
    if let Some(status) = unschedulable {
        return Err(status);
    }
    Ok(narrowed.map(|nodes| Narrowed {
        nodes,
        plugins: narrowing,
    }))
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

/// Nodes whose column shortcuts are taken together (see [`PodFilters::prove`]).
pub const COLUMN_CHUNK: usize = 64;

/// Which of a pod's Filter plugins proved a node from the columns: bit `j` for the
/// `j`-th plugin that runs (the first 64 of them; the others always run).
pub type Proofs = u64;

/// The Filter plugins that run for one pod: the profile's, less those whose PreFilter
/// said Skip. Built once per cycle, so the per-node loop does no lookups.
pub struct PodFilters<'a> {
    profile: &'a Profile,
    /// Indices in the profile's Filter plugins (indices, not references: a buffer of
    /// references would hold the profile borrowed until it is dropped).
    active: SmallVec<[u32; 16]>,
    /// The plugins with a column shortcut for this pod (none without columns).
    by_columns: Proofs,
    /// Indices in the profile's PreFilter plugins of those told about pods added and
    /// removed in what-ifs: all but those whose Filter is skipped. Worked out when first
    /// asked for: most cycles never are.
    extended: OnceLock<SmallVec<[u32; 16]>>,
}

impl<'a> PodFilters<'a> {
    pub fn new(profile: &'a Profile, state: &CycleState) -> PodFilters<'a> {
        PodFilters {
            profile,
            active: (0..profile.filter.len() as u32)
                .filter(|&i| !state.is_filter_skipped(profile.filter[i as usize].name()))
                .collect(),
            by_columns: 0,
            extended: OnceLock::new(),
        }
    }

    /// As `new`, asking each plugin whether it has a column shortcut for this pod.
    pub fn with_columns(
        profile: &'a Profile,
        state: &CycleState,
        pod: &Pod,
        columns: &NodeColumns,
    ) -> PodFilters<'a> {
        let mut filters = PodFilters::new(profile, state);
        filters.by_columns = filters
            .plugins()
            .take(Proofs::BITS as usize)
            .enumerate()
            .filter(|(_, plugin)| plugin.filter_columns(state, pod, columns, &[], &mut []))
            .fold(0, |bits, (j, _)| bits | 1 << j);
        filters
    }

    /// The plugins that run, in order.
    fn plugins(&self) -> impl Iterator<Item = &'a Arc<dyn FilterPlugin>> + '_ {
        let profile = self.profile;
        self.active
            .iter()
            .map(move |&i| &profile.filter[i as usize])
    }

    /// The Filter plugins that run (indices in the profile's list), in order.
    pub fn active(&self) -> &[u32] {
        &self.active
    }

    /// What this cycle's Filter verdicts depend on besides the pod and the node (the
    /// plugins' keys, in order), or `None` when some plugin that runs reads more.
    pub fn verdict_key(&self, state: &CycleState, pod: &Pod) -> Option<VerdictKey> {
        let mut key = VerdictKey::new();
        self.plugins()
            .all(|plugin| plugin.filter_verdict_key(state, pod, &mut key))
            .then_some(key)
    }

    /// The proofs of a node every plugin vouched for from the columns.
    pub fn all_proven(&self) -> Proofs {
        match self.active.len() {
            n if n >= Proofs::BITS as usize => Proofs::MAX,
            n => (1 << n) - 1,
        }
    }

    /// Whether some plugin has no column shortcut for this pod (and so runs on every node).
    pub fn runs_per_node(&self) -> bool {
        self.active.len() > Proofs::BITS as usize || self.by_columns != self.all_proven()
    }

    /// The column shortcuts over the nodes at `positions` (at most `COLUMN_CHUNK`):
    /// `proofs[i]` gets the bits of the plugins that proved `positions[i]`.
    pub fn prove(
        &self,
        state: &CycleState,
        pod: &Pod,
        columns: &NodeColumns,
        positions: &[usize],
        proofs: &mut [Proofs],
    ) {
        let n = positions.len();
        let mut proven = [false; COLUMN_CHUNK];
        proofs[..n].fill(0);
        for (j, plugin) in self.plugins().enumerate().take(Proofs::BITS as usize) {
            if self.by_columns & (1 << j) == 0 {
                continue;
            }
            if plugin.filter_columns(state, pod, columns, positions, &mut proven[..n]) {
                for (proof, &yes) in proofs[..n].iter_mut().zip(&proven[..n]) {
                    *proof |= Proofs::from(yes) << j;
                }
            }
        }
    }

    /// Filter plugins in order; the first that rejects the node decides.
    pub fn run(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        self.run_unproven(state, pod, node, 0)
    }

    /// As `run`, skipping the plugins whose bit is set in `proofs` (they proved from the
    /// columns that they pass): the verdict is the same.
    pub fn run_unproven(
        &self,
        state: &CycleState,
        pod: &Pod,
        node: &NodeInfo,
        proofs: Proofs,
    ) -> Status {
        for (j, plugin) in self.plugins().enumerate() {
            if j < Proofs::BITS as usize && proofs & (1 << j) != 0 {
                continue;
            }
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
    /// When some are nominated, the node and state are copied into `scratch`, whose
    /// buffers are reused from node to node.
    pub fn run_with_nominated(
        &self,
        state: &CycleState,
        pod: &Pod,
        node: &NodeInfo,
        nominated: &[Arc<Pod>],
        scratch: &mut NominatedScratch,
    ) -> Status {
        if !nominated.iter().any(|p| counts_as_nominated(p, pod)) {
            return self.run(state, pod, node);
        }
        scratch.node.clone_from(node);
        scratch.state.clone_from(state);
        self.add_nominated(&mut scratch.state, pod, &mut scratch.node, nominated);
        let with_nominated = self.run(&scratch.state, pod, &scratch.node);
        if !with_nominated.is_success() {
            return with_nominated;
        }
        self.run(state, pod, node)
    }

    /// As `run_with_nominated`, on a node and state the caller owns: the nominated pods
    /// are added for the first run and taken out again for the second, so both come back
    /// as they were (the pods' order on the node aside, which no Filter reads).
    pub fn run_with_nominated_in_place(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        node: &mut NodeInfo,
        nominated: &[Arc<Pod>],
    ) -> Status {
        if !self.add_nominated(state, pod, node, nominated) {
            return self.run(state, pod, node);
        }
        let with_nominated = self.run(state, pod, node);
        for p in nominated.iter().filter(|p| counts_as_nominated(p, pod)) {
            node.remove_pod(&p.uid);
            self.pre_filter_update_for_pod(state, pod, p, node, -1);
        }
        if !with_nominated.is_success() {
            return with_nominated;
        }
        self.run(state, pod, node)
    }

    /// Adds the nominated pods that count for `pod` to the node and the state; false if
    /// none does.
    fn add_nominated(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        node: &mut NodeInfo,
        nominated: &[Arc<Pod>],
    ) -> bool {
        let mut any = false;
        for p in nominated.iter().filter(|p| counts_as_nominated(p, pod)) {
            node.add_pod(Arc::clone(p));
            self.pre_filter_update_for_pod(state, pod, p, node, 1);
            any = true;
        }
        any
    }

    /// Upstream's `RunPreFilterExtensionAddPod` (`delta` 1: a nominated pod, a victim
    /// given back, now counts on `node`) and `RunPreFilterExtensionRemovePod` (`delta` -1:
    /// a victim, a nominated pod taken out again). Plugins whose Filter is skipped for this
    /// pod are not asked: nothing reads what they would update.
    pub fn pre_filter_update_for_pod(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        other: &Arc<Pod>,
        node: &NodeInfo,
        delta: i64,
    ) {
        let plugins = &self.profile.pre_filter;
        let extended = self.extended.get_or_init(|| {
            (0..plugins.len() as u32)
                .filter(|&i| !state.is_filter_skipped(plugins[i as usize].name()))
                .collect()
        });
        for &i in extended {
            plugins[i as usize].update_for_pod(state, pod, other, node, delta);
        }
    }
}

/// Whether a pod nominated to a node counts there for `pod`: upstream's
/// `addNominatedPods` adds those of at least its priority, other than itself.
fn counts_as_nominated(nominated: &Pod, pod: &Pod) -> bool {
    nominated.priority >= pod.priority && nominated.uid != pod.uid
}

/// Where [`PodFilters::run_with_nominated`] copies a node and the cycle state to add the
/// pods nominated to it: kept across nodes so that the copies reuse their buffers.
#[derive(Default)]
pub struct NominatedScratch {
    node: NodeInfo,
    state: CycleState,
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
/// scheduler extenders do) narrow `positions` (of nodes in `cluster`), in profile order.
/// Returns the last plugin that narrowed them; an empty choice is ignored.
pub fn run_choose(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    cluster: &dyn ClusterState,
    positions: &mut Vec<usize>,
    kept: &mut Vec<usize>,
) -> Option<&'static str> {
    let mut chooser = None;
    for plugin in &profile.filter {
        if state.is_filter_skipped(plugin.name()) {
            continue;
        }
        let chose = {
            let infos = NodeInfos::at_positions(cluster, positions, Vec::new());
            let feasible = FeasibleNodes {
                infos: &infos,
                columns: cluster.columns().map(|c| (c, positions.as_slice())),
            };
            plugin.choose(state, pod, feasible, kept)
        };
        if !chose {
            continue;
        }
        kept.retain(|&i| i < positions.len());
        kept.sort_unstable();
        kept.dedup();
        if kept.is_empty() {
            continue;
        }
        // Ascending: each kept node moves down to its place.
        for (to, &from) in kept.iter().enumerate() {
            positions[to] = positions[from];
        }
        positions.truncate(kept.len());
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
    nodes: &NodeInfos<'_>,
    cluster: Cluster<'_>,
    timer: &mut PluginTimer,
) -> Result<(), Status> {
    for plugin in &profile.pre_score {
        let status = timer.time(plugin.name(), Point::PreScore, || {
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

/// Buffers for scoring, kept between cycles so that scoring allocates nothing.
#[derive(Default)]
pub struct ScoreBuffers {
    /// Each node's weighted sum, after `run_score`.
    pub totals: Vec<i64>,
    scores: Vec<i64>,
}

/// Scores the nodes: every plugin's scores normalised, weighted and summed per node, into
/// `buffers.totals`; the raw scores worth remembering from `memo` where it has them.
pub fn run_score(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    nodes: FeasibleNodes<'_, '_>,
    timer: &mut PluginTimer,
    buffers: &mut ScoreBuffers,
    memo: Option<&mut VerdictMemo>,
) -> Result<(), Status> {
    let ScoreBuffers { totals, scores } = buffers;
    totals.clear();
    totals.resize(nodes.infos.len(), 0);
    let mut memo = memo;
    let memo_in_use = memo.is_some();
    let summed = Ruled::Summed {
        totals,
        memo: memo.as_deref_mut(),
        sums_remembered: true,
    };
    let scored = score_each_plugin(profile, state, pod, nodes, timer, scores, summed);
    if scored.is_ok() || !memo_in_use {
        return scored;
    }
    // Something failed while sums were remembered: score again plugin by plugin, so that
    // the error is the one of the first plugin (in the profile's order) that has one.
    totals.fill(0);
    let summed = Ruled::Summed {
        totals,
        memo,
        sums_remembered: false,
    };
    score_each_plugin(profile, state, pod, nodes, timer, scores, summed)
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
    let nodes = FeasibleNodes {
        infos: &NodeInfos::given(nodes),
        columns: None,
    };
    let kept = Ruled::Kept {
        per_plugin: &mut per_plugin,
    };
    score_each_plugin(
        profile,
        state,
        pod,
        nodes,
        &mut timer,
        &mut Vec::new(),
        kept,
    )?;
    Ok(per_plugin)
}

/// What [`score_each_plugin`] makes of the scores. `Summed`: each node's weighted total in
/// `totals` (as long as the nodes, zeroed), with the scores worth remembering served by
/// `memo` (if `sums_remembered`, the weighted sums of those NormalizeScore leaves alone,
/// in one pass), and a plugin that scores every node alike adding one figure to all.
/// `Kept`: every plugin's raw and normalised scores, node by node, into its entry of
/// `per_plugin`.
enum Ruled<'a> {
    Summed {
        totals: &'a mut Vec<i64>,
        memo: Option<&'a mut VerdictMemo>,
        sums_remembered: bool,
    },
    Kept {
        per_plugin: &'a mut Vec<PluginScores>,
    },
}

/// Runs Score (through the plugin's column loop when the nodes come with columns, and
/// through the memo when the plugin's scores are worth remembering) and NormalizeScore of
/// every plugin not skipped, checks the normalised range, and sums or keeps the scores as
/// `ruled` says.
fn score_each_plugin(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    nodes: FeasibleNodes<'_, '_>,
    timer: &mut PluginTimer,
    scores: &mut Vec<i64>,
    mut ruled: Ruled<'_>,
) -> Result<(), Status> {
    use rayon::prelude::*;
    let infos = nodes.infos;
    // Every plugin writes every node's score: the buffer needs its length, not zeros.
    scores.resize(infos.len(), 0);
    // What the plugins that score every node alike add to each total.
    let mut uniform = 0;
    let mut remembered = SmallVec::<[(usize, i64); 4]>::new();
    for (index, weighted) in profile.score.iter().enumerate() {
        let plugin = &weighted.plugin;
        if state.is_score_skipped(plugin.name()) {
            continue;
        }
        if let Ruled::Summed { .. } = ruled
            && let Some((columns, _)) = nodes.columns
        {
            let alike = timer.time(plugin.name(), Point::Score, || {
                plugin.uniform_score(state, pod, columns)
            });
            if let Some(raw) = alike.map_err(|s| s.with_plugin(plugin.name()))? {
                let mut one = [raw];
                normalize(plugin, state, pod, &mut one)?;
                check_range(plugin, &one)?;
                uniform += one[0] * weighted.weight;
                continue;
            }
        }
        // Raw scores the memo serves and normalising leaves alone are summed below, all
        // such plugins at once (the per-plugin timings want them one by one).
        if let Ruled::Summed {
            memo: Some(_),
            sums_remembered: true,
            ..
        } = ruled
            && nodes.columns.is_some()
            && !timer.enabled
            && !plugin.normalizes()
            && plugin.worth_remembering(state, pod)
        {
            remembered.push((index, weighted.weight));
            continue;
        }
        let memo = match &mut ruled {
            Ruled::Summed { memo, .. } => memo.as_deref_mut(),
            Ruled::Kept { .. } => None,
        };
        let scored: Result<(), Status> = timer.time(plugin.name(), Point::Score, || {
            if let Some((columns, positions)) = nodes.columns
                && let Some(memo) = memo
                && plugin.worth_remembering(state, pod)
            {
                let generations = columns.generations();
                return memo.scores(index, generations, positions, scores, |misses, found| {
                    score_misses(plugin, state, pod, nodes, misses, found)
                });
            }
            if let Some((columns, positions)) = nodes.columns
                && plugin.score_columns(state, pod, infos, columns, positions, scores)?
            {
                return Ok(());
            }
            let score_one = |(score, node): (&mut i64, &&NodeInfo)| -> Result<(), Status> {
                *score = plugin.score(state, pod, node)?;
                Ok(())
            };
            // Every node's NodeInfo: the list is gathered (see `NodeInfos`).
            let infos: &[&NodeInfo] = infos;
            if infos.len() >= PARALLEL_THRESHOLD {
                scores.par_iter_mut().zip(infos).try_for_each(score_one)
            } else {
                scores.iter_mut().zip(infos).try_for_each(score_one)
            }
        });
        scored.map_err(|s| s.with_plugin(plugin.name()))?;
        match &mut ruled {
            Ruled::Summed { totals, .. } => {
                normalize(plugin, state, pod, scores)?;
                add_in_range(plugin, totals, scores, weighted.weight)?;
            }
            Ruled::Kept { per_plugin } => {
                let raw = scores.clone();
                normalize(plugin, state, pod, scores)?;
                check_range(plugin, scores)?;
                if let Some(entry) = per_plugin.iter_mut().find(|p| p.plugin == plugin.name()) {
                    entry.raw = raw;
                    entry.normalized.clone_from(scores);
                }
            }
        }
    }
    if let Ruled::Summed {
        totals,
        memo: Some(memo),
        ..
    } = &mut ruled
        && let Some((columns, positions)) = nodes.columns
        && !remembered.is_empty()
    {
        let in_range = memo.add_sums(
            &remembered,
            columns.generations(),
            positions,
            totals,
            |index, misses, found| {
                let plugin = &profile.score[index].plugin;
                let scored = score_misses(plugin, state, pod, nodes, misses, found);
                scored.map_err(|s| s.with_plugin(plugin.name()))
            },
        )?;
        if !in_range {
            return Err(Status::error("a remembered score is out of range"));
        }
    }
    if let Ruled::Summed { totals, .. } = ruled
        && uniform != 0
    {
        totals.iter_mut().for_each(|total| *total += uniform);
    }
    Ok(())
}

/// `plugin`'s NormalizeScore of `scores`.
fn normalize(
    plugin: &Arc<dyn ScorePlugin>,
    state: &CycleState,
    pod: &Pod,
    scores: &mut [i64],
) -> Result<(), Status> {
    let status = plugin.normalize(state, pod, scores);
    if status.is_success() {
        Ok(())
    } else {
        Err(status.with_plugin(plugin.name()))
    }
}

pub(crate) fn out_of_range(score: i64) -> bool {
    !(0..=gantry_framework::MAX_NODE_SCORE).contains(&score)
}

/// Upstream's check that every normalised score is within 0..=MAX_NODE_SCORE: the error
/// names the plugin and the first score outside.
fn check_range(plugin: &Arc<dyn ScorePlugin>, scores: &[i64]) -> Result<(), Status> {
    match scores.iter().find(|&&s| out_of_range(s)) {
        None => Ok(()),
        Some(score) => Err(Status::error(format!(
            "plugin {:?} returns an invalid score {score}, it should be in the range of [0, 100] after normalizing",
            plugin.name()
        ))),
    }
}

/// Adds the weighted `scores` (normalised) to `totals`, checking their range in the same
/// pass (one pass without early exit vectorises; the culprit is looked for only then).
fn add_in_range(
    plugin: &Arc<dyn ScorePlugin>,
    totals: &mut [i64],
    scores: &[i64],
    weight: i64,
) -> Result<(), Status> {
    let pairs = totals.iter_mut().zip(scores);
    // Most weights are 1: plain additions vectorise, 64-bit products do not.
    let any_out_of_range = match weight {
        1 => pairs.fold(false, |bad, (total, &score)| {
            *total += score;
            bad | out_of_range(score)
        }),
        weight => pairs.fold(false, |bad, (total, &score)| {
            *total += score * weight;
            bad | out_of_range(score)
        }),
    };
    if any_out_of_range {
        check_range(plugin, scores)?;
    }
    Ok(())
}

/// `plugin`'s scores of the feasible nodes at indices `misses` (at most
/// [`COLUMN_CHUNK`]) into `found`: through its column loop if it has one, else node by node.
fn score_misses(
    plugin: &Arc<dyn ScorePlugin>,
    state: &CycleState,
    pod: &Pod,
    nodes: FeasibleNodes<'_, '_>,
    misses: &[usize],
    found: &mut [i64],
) -> Result<(), Status> {
    let infos: SmallVec<[&NodeInfo; COLUMN_CHUNK]> =
        misses.iter().map(|&i| nodes.infos.at(i)).collect();
    if let Some((columns, positions)) = nodes.columns {
        let positions: SmallVec<[usize; COLUMN_CHUNK]> =
            misses.iter().map(|&i| positions[i]).collect();
        if plugin.score_columns(state, pod, &infos, columns, &positions, found)? {
            return Ok(());
        }
    }
    for (score, node) in found.iter_mut().zip(&infos) {
        *score = plugin.score(state, pod, node)?;
    }
    Ok(())
}

/// Below this many nodes, fanning out over threads costs more than it saves (measured
/// with `gantry bench basic` on 2 cores: at 500 nodes per pod, sequential is twice as
/// fast; at 5,000, parallel is about 15% faster).
pub const PARALLEL_THRESHOLD: usize = 2048;

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::{Node, Resources};
    use gantry_framework::ScorePlugin;

    /// Scores every node the same.
    struct Constant(i64);

    impl gantry_framework::Plugin for Constant {
        fn name(&self) -> &'static str {
            "Constant"
        }
    }

    impl ScorePlugin for Constant {
        fn score(&self, _: &CycleState, _: &Pod, _: &NodeInfo) -> Result<i64, Status> {
            Ok(self.0)
        }
    }

    #[test]
    fn a_score_outside_0_to_100_is_an_error() {
        let nodes: Vec<NodeInfo> = ["a", "b"]
            .iter()
            .map(|name| NodeInfo::new(Arc::new(Node::new(name, Resources::new(1, 1)))))
            .collect();
        let infos: Vec<&NodeInfo> = nodes.iter().collect();
        let pod = Pod::new("ns", "p");
        for (score, valid) in [(0, true), (100, true), (101, false), (-1, false)] {
            let mut profile = Profile::empty("default-scheduler");
            profile.score.push(gantry_framework::WeightedScorePlugin {
                plugin: Arc::new(Constant(score)),
                weight: 1,
            });
            let result = run_score_per_plugin(&profile, &CycleState::new(), &pod, &infos);
            assert_eq!(result.is_ok(), valid, "score {score}");
        }
    }

    /// Keeps nodes 3 and 1 (said twice, out of order, with an index past the end).
    struct Picky;

    impl gantry_framework::Plugin for Picky {
        fn name(&self) -> &'static str {
            "Picky"
        }
    }

    impl FilterPlugin for Picky {
        fn filter(&self, _: &CycleState, _: &Pod, _: &NodeInfo) -> Status {
            Status::success()
        }

        fn choose(
            &self,
            _: &CycleState,
            _: &Pod,
            _: FeasibleNodes<'_, '_>,
            kept: &mut Vec<usize>,
        ) -> bool {
            kept.clear();
            kept.extend([3, 1, 3, 9]);
            true
        }
    }

    #[test]
    fn a_choice_keeps_the_chosen_nodes_in_order() {
        let cache = gantry_cache::Cache::new();
        for name in ["a", "b", "c", "d", "e"] {
            cache.add_node(Arc::new(Node::new(name, Resources::new(1, 1))));
        }
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        let mut positions = vec![4, 3, 2, 1, 0];
        let mut profile = Profile::empty("default-scheduler");
        profile.filter.push(Arc::new(Picky));
        let pod = Pod::new("ns", "p");
        let (state, mut kept) = (CycleState::new(), Vec::new());
        let chooser = run_choose(&profile, &state, &pod, &snapshot, &mut positions, &mut kept);
        assert_eq!(chooser, Some("Picky"));
        assert_eq!(positions, [3, 1]);
    }
}
