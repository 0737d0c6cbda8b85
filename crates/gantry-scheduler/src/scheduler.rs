//! The scheduling cycle (one pod at a time, against the snapshot) and the binding cycle.

use std::sync::Arc;

use gantry_api::dra::{ClaimKey, ResourceClaim};
use gantry_api::{Gate, Pod, Sym};
use gantry_cache::{Cache, ClusterState, NodeInfo, Snapshot};
use gantry_framework::{
    ApiObjects, Cluster, Code, CycleState, NodeInfos, Profile, Signature, Status,
};

use std::time::Instant;

pub use crate::attempt::Attempt;
use crate::batch::Batch;
use crate::binding::{BindingCycle, conclude, run_pre_bind, unreserve};
use crate::fit_error::FitError;
use crate::framework_runner::*;
use crate::host::{ScoreHeap, select_host};
use crate::last_cycle::LastCycle;
use crate::metrics::{AttemptResult, Metrics, PLUGIN_SAMPLE_EVERY};
pub(crate) use crate::nominations::Nominations;
use crate::own_nodes::{self, OwnNodes};
use crate::placement_check::{self, check_placement};
use crate::preemption::{self, Preemption};
use crate::rng::Rng;
use crate::shard::Shard;
use crate::verdict_memo::VerdictMemo;
use crate::waiting::PermitWait;

mod feasible;
use gantry_framework::QueueSort;
use gantry_framework::config::Point;
use gantry_framework::handle::Request;
use gantry_framework::plugins::dynamic_resources;
use std::time::Duration;

/// Where binds go: the simulated API, or the Kubernetes API.
pub trait Binder {
    /// Writes the status of the pod's claims as DynamicResources' PreBind set it
    /// (allocation, and the pod in `reservedFor`), before the bind, as upstream writes
    /// them; an error fails the binding cycle.
    /// `allocated_now` names the claims this pod allocated (the others it only reserves).
    fn write_claims(
        &mut self,
        pod: &Arc<Pod>,
        claims: &[Arc<ResourceClaim>],
        allocated_now: &[ClaimKey],
    ) -> Result<(), String>;

    /// Binds the pod to the node; an error leaves the pod unbound (it is retried).
    fn bind(&mut self, pod: &Arc<Pod>, node: Sym) -> Result<(), String>;
}

/// A binding cycle that failed: the pod stays unbound and is retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindFailure {
    pub message: String,
    /// The assumed pod was forgotten, so what it held is free again: the caller tells the
    /// queue (`SchedulingQueue::assumed_pod_forgotten`), as upstream does.
    pub forgotten: bool,
}

impl std::fmt::Display for BindFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Buffers a scheduling cycle fills, kept between cycles so that a cycle allocates little.
#[derive(Default)]
struct CycleBuffers {
    feasible: Vec<usize>,
    /// The feasible nodes' NodeInfos; empty between cycles (see `recycle`).
    nodes: Vec<&'static NodeInfo>,
    /// The indices a plugin's `choose` keeps.
    kept: Vec<usize>,
    scores: ScoreBuffers,
    /// The score heap's entries, for OpportunisticBatching's rankings (v1.35 on).
    heap: Vec<(i64, usize)>,
    timer: PluginTimer,
}

/// An empty vector with `v`'s allocation, for references of another lifetime: the
/// in-place collect of an empty iterator keeps the buffer (elements of one size and
/// alignment), so a buffer of borrowed NodeInfos outlives the borrow without `unsafe`.
fn recycle<'b>(mut v: Vec<&NodeInfo>) -> Vec<&'b NodeInfo> {
    v.clear();
    v.into_iter().map(|_| unreachable!("cleared")).collect()
}

/// The nodes a cycle filters: all of them, or those PreFilter narrowed to.
enum Candidates {
    All(usize),
    /// Sorted positions, and the PreFilter plugins that narrowed the nodes to them.
    Narrowed(Vec<usize>, Vec<&'static str>),
}

impl Candidates {
    fn len(&self) -> usize {
        match self {
            Candidates::All(n) => *n,
            Candidates::Narrowed(positions, _) => positions.len(),
        }
    }

    #[inline]
    fn at(&self, i: usize) -> usize {
        match self {
            Candidates::All(_) => i,
            Candidates::Narrowed(positions, _) => positions[i],
        }
    }
}

pub struct Scheduler {
    pub(crate) cache: Arc<Cache>,
    pub(crate) snapshot: Snapshot,
    profiles: Vec<Profile>,
    pub(crate) objects: ApiObjects,
    next_start: usize,
    rng: Rng,
    /// Pods nominated to a node by preemption, which later pods must leave room for.
    nominated: Nominations,
    /// Assume decided pods in the cache before binding (the default). Off, the next cycle
    /// does not see pods decided but not yet bound.
    pub assume: bool,
    pub metrics: Metrics,
    /// Nodes run through Filter, over all attempts.
    pub nodes_evaluated: u64,
    /// The clock, in seconds, for the times plugins write on pods (HAMi's bind time); the
    /// simulation keeps it at its virtual time.
    pub now: i64,
    cycles: u64,
    buffers: CycleBuffers,
    /// With shards dividing the nodes: this shard's nodes, the only candidates.
    own_nodes: Option<OwnNodes>,
    /// Whether PostFilter may preempt. A shard that hands a pod on to the next (shards
    /// dividing the nodes) does not preempt for it: another shard's nodes may fit it as
    /// they are.
    pub may_preempt: bool,
    /// In a pod-group cycle: Permit may ask a pod to wait (for its gang), and the message
    /// of the last pod's wait is kept here (see `pod_group_cycle`).
    pub(crate) group_cycle: Option<GroupCycleState>,
    /// The placement a pod-group cycle is tried on (TopologyAwareWorkloadScheduling): the
    /// only nodes a cycle filters, and all its failure message counts, as upstream's
    /// `AssumePlacement` makes them.
    pub(crate) placement: Option<Arc<[usize]>>,
    /// The time of the cycle, for what is remembered for a while (Coscheduling's failures
    /// and backoffs, OpportunisticBatching's rankings); the simulation keeps it at its
    /// virtual time, `gantry run` at the time since it started.
    pub clock: Duration,
    /// What plugins asked of the waiting pods and the queue (see [`Self::take_requests`]).
    pub(crate) requests: Vec<Request>,
    /// Each profile's OpportunisticBatching state, by profile index.
    batches: Vec<Batch>,
    /// Each profile's verdicts of the last pod's template (see `verdict_memo`).
    memos: Vec<VerdictMemo>,
    /// Use them (the default; off, every verdict is asked for, as upstream asks: for
    /// differential tests and benchmarks).
    pub remember_verdicts: bool,
    /// Break ties between equal top scores at random even where the release takes them in
    /// its score heap's order: several instances sharing a cluster would otherwise all pick
    /// the same nodes (a single kube-scheduler has no such rival).
    pub random_ties: bool,
    /// What the last cycle saw of the nodes, when asked to keep it (see
    /// [`Self::keep_last_cycle`]).
    pub(crate) last_cycle: Option<LastCycle>,
    /// In a trial of workload-aware preemption (`group_preemption`): cycles run no
    /// PostFilter, as upstream's `runWithoutPostFilters`, and count in no metric.
    pub(crate) trial: bool,
}

/// Why Permit did not let a pod through: a plugin rejected it (a fit error over its node,
/// as upstream reports it) or failed.
enum PermitRefusal {
    Rejected(Status),
    Error(String),
}

/// What the pod-group cycle learns from each member's Permit.
#[derive(Default)]
pub(crate) struct GroupCycleState {
    /// The last member's Permit status: waiting (with its message), or allowed.
    pub last_wait: Option<String>,
    /// The last member, if it was assumed on the node its preemption nominated.
    pub preempting: Option<Preempting>,
}

/// A pod-group member that fits nowhere but where its preemption makes room: upstream
/// assumes it on that node for the rest of the group cycle, so that the members after it
/// see it there. Why it did not fit, and the node and victims preemption chose.
pub(crate) struct Preempting {
    pub fit_error: FitError,
    pub node: Sym,
    pub victims: Vec<Arc<Pod>>,
}

impl Scheduler {
    pub fn new(
        cache: Arc<Cache>,
        profiles: Vec<Profile>,
        mut objects: ApiObjects,
        seed: u64,
    ) -> Scheduler {
        objects.share_pod_groups(cache.pod_groups().clone());
        let batches = profiles.iter().map(|_| Batch::default()).collect();
        let memos = profiles.iter().map(|_| VerdictMemo::default()).collect();
        Scheduler {
            cache,
            snapshot: Snapshot::new(),
            profiles,
            objects,
            next_start: 0,
            rng: Rng::new(seed),
            nominated: Nominations::default(),
            assume: true,
            metrics: Metrics::default(),
            nodes_evaluated: 0,
            now: 0,
            cycles: 0,
            buffers: CycleBuffers::default(),
            own_nodes: None,
            may_preempt: true,
            group_cycle: None,
            placement: None,
            clock: Duration::ZERO,
            requests: Vec::new(),
            batches,
            memos,
            remember_verdicts: true,
            random_ties: false,
            last_cycle: None,
            trial: false,
        }
    }

    /// From now on, places pods on `shard`'s own nodes only (shards dividing the nodes);
    /// every node still counts for the pods' constraints.
    pub fn divide_nodes(&mut self, shard: Shard) {
        self.own_nodes = shard.is_shared().then(|| OwnNodes::new(shard));
    }

    /// The profile that schedules this pod, if any.
    pub fn profile_for(&self, pod: &Pod) -> Option<&Profile> {
        self.profiles
            .iter()
            .find(|p| p.scheduler_name == pod.scheduler_name)
    }

    /// Forgets a nomination (the pod was deleted or bound).
    pub fn clear_nomination(&mut self, pod: &Pod) {
        self.forget_nomination(&pod.uid);
    }

    /// Forgets the nomination of the pod with this UID.
    pub fn forget_nomination(&mut self, uid: &str) {
        self.nominated.forget(uid);
    }

    /// Honours the nomination on a pending pod another instance schedules, as its watch
    /// shows it (`status.nominatedNodeName`; none forgets it). Upstream's nominator holds
    /// the nomination of every pod of its profiles; instances sharing a cluster split
    /// those pods, not the room preemption freed for them, so every instance leaves it to
    /// the preemptor.
    pub fn note_nomination(&mut self, pod: Arc<Pod>) {
        match pod.nominated_node_name {
            Some(node) => self.nominated.nominate(pod, node),
            None => self.nominated.forget(&pod.uid),
        }
    }

    /// One scheduling cycle for `pod`, recorded in the metrics.
    pub fn schedule_one(&mut self, pod: &Arc<Pod>) -> Attempt {
        let start = Instant::now();
        let mut timer = std::mem::take(&mut self.buffers.timer);
        timer.enabled = self.cycles.is_multiple_of(PLUGIN_SAMPLE_EVERY);
        self.cycles += 1;
        let attempt = self.run_cycle(pod, &mut timer);
        if self.trial {
            timer.records.clear();
            self.buffers.timer = timer;
            return attempt;
        }
        let result = match &attempt {
            Attempt::Scheduled { .. } => AttemptResult::Scheduled,
            Attempt::Unschedulable { .. } => AttemptResult::Unschedulable,
            Attempt::Error(_) => AttemptResult::Error,
            Attempt::GroupRejected { .. } => AttemptResult::Unschedulable,
        };
        self.metrics
            .observe_attempt(pod.scheduler_name, result, start.elapsed());
        for (plugin, point, duration) in timer.records.drain(..) {
            self.metrics.observe_plugin(plugin, point, duration);
        }
        self.buffers.timer = timer;
        attempt
    }

    fn run_cycle(&mut self, pod: &Arc<Pod>, timer: &mut PluginTimer) -> Attempt {
        let Some(profile_index) = self
            .profiles
            .iter()
            .position(|p| p.scheduler_name == pod.scheduler_name)
        else {
            return Attempt::Error(format!(
                "profile not found for scheduler name {:?}",
                pod.scheduler_name.as_str()
            ));
        };
        if let Some(last) = self.last_cycle.as_mut() {
            last.reset();
        }
        if let Err(inconsistent) = self.cache.update_snapshot(&mut self.snapshot) {
            return Attempt::Error(inconsistent.to_string());
        }
        self.objects.ensure_namespace(pod.namespace);
        let profile = &self.profiles[profile_index];
        if profile.queue_sort == QueueSort::Coscheduling {
            self.cache
                .pod_groups()
                .lock()
                .expire_coscheduling_memory(self.clock);
        }
        let cluster = Cluster {
            nodes: &self.snapshot,
            objects: &self.objects,
        };
        let mut state = CycleState::at(self.now);
        let num_nodes = self.snapshot.num_nodes();
        let placement = self.placement.clone();
        let mut fit_error = FitError {
            num_all_nodes: placement.as_ref().map_or(num_nodes, |p| p.len()),
            release: profile.release,
            ..FitError::default()
        };

        let phase = Instant::now();
        let pre_filtered = run_pre_filter(profile, &mut state, pod, cluster, timer);
        self.metrics
            .observe_extension_point(Point::PreFilter, phase.elapsed());
        self.absorb_requests(&mut state);
        let candidates = match pre_filtered {
            Ok(None) => Candidates::All(num_nodes),
            Ok(Some(narrowed)) => Candidates::Narrowed(
                narrowed_positions(&self.snapshot, &narrowed.nodes),
                narrowed.plugins,
            ),
            Err(status) if status.is_rejected() => {
                fit_error.pre_filter_message = Some(status.message());
                let name = |i: usize| (self.snapshot.node_at(i).name(), status.clone());
                fit_error.node_statuses = match &placement {
                    Some(positions) => positions.iter().map(|&i| name(i)).collect(),
                    None => (0..num_nodes).map(name).collect(),
                };
                return self.fail(profile_index, &mut state, pod, fit_error);
            }
            Err(status) => return Attempt::Error(status.message()),
        };
        // The nodes this cycle may use: its placement's, or this shard's.
        let own = match &placement {
            Some(positions) => Some(positions.clone()),
            None => self
                .own_nodes
                .as_mut()
                .map(|own| own.positions(&self.snapshot)),
        };
        let candidates = match (candidates, &own) {
            (candidates, None) => candidates,
            (Candidates::All(_), Some(own)) => Candidates::Narrowed(own.to_vec(), Vec::new()),
            (Candidates::Narrowed(positions, plugins), Some(own)) => {
                Candidates::Narrowed(own_nodes::intersect(&positions, own), plugins)
            }
        };

        let batching = self.profiles[profile_index]
            .release
            .enabled(Gate::OpportunisticBatching);
        // `None` too when the gate is off.
        let signature = self.profiles[profile_index].sign(pod, &state);
        let hint = self.batch_hint(profile_index, signature.as_ref(), &state, pod);

        let phase = Instant::now();
        let mut feasible = std::mem::take(&mut self.buffers.feasible);
        self.find_feasible(
            profile_index,
            &state,
            pod,
            hint,
            &candidates,
            &mut fit_error,
            &mut feasible,
        );
        self.metrics
            .observe_extension_point(Point::Filter, phase.elapsed());
        if feasible.is_empty() {
            self.buffers.feasible = feasible;
            if let Some(own) = own.as_ref().filter(|_| placement.is_none()) {
                own_nodes::add_other_shards_nodes(&mut fit_error, &self.snapshot, own);
            }
            if let Candidates::Narrowed(positions, plugins) = &candidates
                && !plugins.is_empty()
            {
                let scope = own.as_deref();
                fit_error.add_nodes_left_out(&self.snapshot, scope, positions, plugins);
            }
            return self.fail(profile_index, &mut state, pod, fit_error);
        }
        let profile = &self.profiles[profile_index];
        let kept = &mut self.buffers.kept;
        run_choose(profile, &state, pod, &self.snapshot, &mut feasible, kept);
        let buffer = recycle(std::mem::take(&mut self.buffers.nodes));
        let nodes = NodeInfos::at_positions(&self.snapshot, &feasible, buffer);
        let mut ranking = Vec::new();
        let chosen = if feasible.len() == 1 {
            feasible[0]
        } else {
            let cluster = Cluster {
                nodes: &self.snapshot,
                objects: &self.objects,
            };
            let before_scoring = state.mark();
            let phase = Instant::now();
            let pre_scored = run_pre_score(profile, &mut state, pod, &nodes, cluster, timer);
            self.metrics
                .observe_extension_point(Point::PreScore, phase.elapsed());
            let phase = Instant::now();
            let scored = gantry_framework::FeasibleNodes {
                infos: &nodes,
                columns: self.snapshot.columns().map(|c| (c, feasible.as_slice())),
            };
            let buffers = &mut self.buffers.scores;
            let memo = (self.memos.get_mut(profile_index))
                .filter(|memo| self.remember_verdicts && memo.in_use());
            let totals = pre_scored
                .and_then(|()| run_score(profile, &state, pod, scored, timer, buffers, memo));
            self.metrics
                .observe_extension_point(Point::Score, phase.elapsed());
            // Only Score reads PreScore's data, which may share the snapshot's domain
            // counts: kept through the pod's binding cycle, it would make the next
            // cycles' snapshot updates copy those counts (docs/performance.md).
            state.drop_written_since(before_scoring);
            match totals {
                Ok(()) => {
                    let totals = &self.buffers.scores.totals;
                    let by_heap = profile.release.ties_by_score_heap();
                    let best = if by_heap && !self.random_ties {
                        ScoreHeap::top(totals).expect("nodes were scored")
                    } else {
                        select_host(totals, &mut self.rng)
                    };
                    if by_heap && signature.is_some() {
                        let buffer = std::mem::take(&mut self.buffers.heap);
                        let mut heap = ScoreHeap::new(totals, buffer);
                        let snapshot = &self.snapshot;
                        let name = |i: usize| snapshot.node_at(feasible[i]).name();
                        let rest = std::iter::from_fn(|| heap.pop()).filter(|&i| i != best);
                        ranking = rest.map(name).collect();
                        self.buffers.heap = heap.into_buffer();
                    }
                    feasible[best]
                }
                Err(status) => return Attempt::Error(status.message()),
            }
        };
        if let Some(last) = self.last_cycle.as_mut() {
            let totals = &self.buffers.scores.totals;
            let refused = std::mem::take(&mut fit_error.node_statuses);
            last.record(&self.snapshot, &feasible, totals, refused, chosen);
        }
        self.buffers.nodes = recycle(nodes.into_buffer());
        self.buffers.feasible = feasible;
        let info = self.snapshot.node_at(chosen);
        let node = info.name();
        if batching {
            let (cycle, now) = (self.cycles, self.clock);
            self.batches[profile_index].store(signature, hint, node, ranking, cycle, now);
        }
        let written = match run_annotations(profile, &state, pod, info, self.now) {
            Ok(written) => written,
            Err(status) => return Attempt::Error(status.message()),
        };
        self.clear_nomination(pod);
        // The pod as bound to the node: its identity copied, its template shared; the
        // annotations written on bind are its own.
        let mut assumed = pod.bound_to(node);
        if !written.is_empty() {
            assumed.bind_annotations = Some(written.into());
        }
        let assumed = Arc::new(assumed);
        if self.assume
            && let Err(e) = self.cache.assume_pod(assumed.clone())
        {
            return Attempt::Error(e.to_string());
        }
        let permitted = self.reserve_and_permit(profile_index, &mut state, &assumed, chosen);
        self.absorb_requests(&mut state);
        let wait = match permitted {
            Ok(wait) => wait,
            Err(refusal) => return self.refused(profile_index, &assumed, node, refusal),
        };
        if self.assume {
            // Upstream's in-flight allocations: the next cycle sees the devices taken
            // (the pod's claims', and the claim made for its extended resources).
            let allocated = dynamic_resources::reserved_allocations(&state);
            if !allocated.is_empty() {
                self.cache.assume_allocations(&assumed, &allocated);
            }
        }
        Attempt::Scheduled {
            pod: assumed,
            node,
            state: Box::new(state),
            wait,
        }
    }

    /// Reserve or Permit refused the pod assumed on its node: it is forgotten, and
    /// upstream makes a Permit rejection a fit error over the one node.
    fn refused(
        &mut self,
        profile_index: usize,
        assumed: &Arc<Pod>,
        node: Sym,
        refusal: PermitRefusal,
    ) -> Attempt {
        if self.assume
            && let Err(e) = self.cache.forget_pod(assumed)
        {
            tracing::error!(pod = %assumed.key(), error = %e, "could not forget assumed pod");
        }
        match refusal {
            PermitRefusal::Error(message) => Attempt::Error(message),
            PermitRefusal::Rejected(status) => Attempt::Unschedulable {
                fit_error: FitError {
                    num_all_nodes: 1,
                    node_statuses: vec![(node, status)],
                    release: self.profiles[profile_index].release,
                    ..FitError::default()
                },
                nominated: None,
            },
        }
    }

    /// Reserve, then Permit, on the node at `position`: `Ok(Some(wait))` when a Permit
    /// plugin asks the pod to wait. On a refusal every Reserve plugin is told to
    /// unreserve.
    fn reserve_and_permit(
        &mut self,
        profile_index: usize,
        state: &mut CycleState,
        pod: &Pod,
        position: usize,
    ) -> Result<Option<PermitWait>, PermitRefusal> {
        let profile = &self.profiles[profile_index];
        let info = self.snapshot.node_at(position);
        let node = info.name();
        let phase = Instant::now();
        run_reserve(profile, state, pod, info).map_err(PermitRefusal::Error)?;
        self.metrics
            .observe_extension_point(Point::Reserve, phase.elapsed());
        let phase = Instant::now();
        let groups = self.cache.pod_groups().lock();
        let mut waiting = None;
        let mut wait = None;
        for plugin in &profile.permit {
            let (status, timeout) = plugin.permit(state, pod, node, &groups);
            let refusal = match status.code() {
                Code::Success => continue,
                // A gang in its pod-group cycle is let through at once when its last
                // member is allowed: it does not wait out a timeout.
                Code::Wait if self.group_cycle.is_some() => {
                    waiting = Some(status.message());
                    continue;
                }
                Code::Wait => {
                    wait = Some(PermitWait::shorter(wait, plugin.name(), timeout));
                    continue;
                }
                Code::Unschedulable | Code::UnschedulableAndUnresolvable => {
                    PermitRefusal::Rejected(status.with_plugin(plugin.name()))
                }
                _ => PermitRefusal::Error(format!(
                    "pod {} rejected by Permit plugin {:?}: {}",
                    pod.key(),
                    plugin.name(),
                    status.message()
                )),
            };
            drop(groups);
            unreserve(profile, state, pod, node);
            return Err(refusal);
        }
        drop(groups);
        if let Some(cycle) = &mut self.group_cycle {
            // Upstream's RunPermitPlugins appends this to a waiting plugin's status.
            cycle.last_wait = waiting.map(|message| {
                format!("{message}, one or more plugins asked to wait and no plugin rejected pod")
            });
        }
        self.metrics
            .observe_extension_point(Point::Permit, phase.elapsed());
        Ok(wait)
    }

    /// The node OpportunisticBatching offers the pod (upstream's `GetNodeHint`), if any:
    /// Filter runs on the node the last pod took, which must now reject this one.
    fn batch_hint(
        &mut self,
        profile_index: usize,
        signature: Option<&Signature>,
        state: &CycleState,
        pod: &Pod,
    ) -> Option<Sym> {
        signature?;
        let snapshot = &self.snapshot;
        let filters = PodFilters::new(&self.profiles[profile_index], state);
        let rejects_on = |node: Sym| {
            let position = snapshot.position(node)?;
            Some(
                filters
                    .run(state, pod, snapshot.node_at(position))
                    .is_rejected(),
            )
        };
        self.batches[profile_index].hint(signature, self.cycles, self.clock, rejects_on)
    }

    /// The pod fits nowhere: run PostFilter (DynamicResources, preemption, then the
    /// others), then report.
    fn fail(
        &mut self,
        profile_index: usize,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        fit_error: FitError,
    ) -> Attempt {
        let attempt = self.post_filter(profile_index, state, pod, fit_error);
        self.absorb_requests(state);
        match attempt {
            Attempt::Unschedulable {
                fit_error,
                nominated: Some((node, victims)),
            } if self.group_cycle.is_some() => {
                let preempting = Preempting {
                    fit_error,
                    node,
                    victims,
                };
                self.assume_preemptor(profile_index, state, pod, preempting)
            }
            attempt => attempt,
        }
    }

    /// In a pod-group cycle, a member whose preemption nominated a node is assumed there,
    /// reserved and asked Permit, as upstream's `podGroupPodSchedulingAlgorithm` does, so
    /// that the members after it see it; the group cycle decides what becomes of it.
    fn assume_preemptor(
        &mut self,
        profile_index: usize,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        preempting: Preempting,
    ) -> Attempt {
        let node = preempting.node;
        let Some(position) = self.snapshot.position(node) else {
            return Attempt::Unschedulable {
                fit_error: preempting.fit_error,
                nominated: Some((node, preempting.victims)),
            };
        };
        // Assumed, it is no longer nominated (upstream's `assume`).
        self.clear_nomination(pod);
        let assumed = Arc::new(pod.bound_to(node));
        if self.assume
            && let Err(e) = self.cache.assume_pod(assumed.clone())
        {
            return Attempt::Error(e.to_string());
        }
        let permitted = self.reserve_and_permit(profile_index, state, &assumed, position);
        self.absorb_requests(state);
        match permitted {
            Ok(wait) => {
                if let Some(cycle) = &mut self.group_cycle {
                    cycle.preempting = Some(preempting);
                }
                Attempt::Scheduled {
                    pod: assumed,
                    node,
                    state: Box::new(state.clone()),
                    wait,
                }
            }
            Err(refusal) => self.refused(profile_index, &assumed, node, refusal),
        }
    }

    fn post_filter(
        &mut self,
        profile_index: usize,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        mut fit_error: FitError,
    ) -> Attempt {
        let profile = &self.profiles[profile_index];
        let has_error = fit_error
            .node_statuses
            .iter()
            .any(|(_, s)| s.code() == Code::Error);
        if has_error {
            let message = fit_error
                .node_statuses
                .iter()
                .find(|(_, s)| s.code() == Code::Error)
                .map(|(_, s)| s.message())
                .unwrap_or_default();
            return Attempt::Error(message);
        }
        if self.trial {
            return Attempt::Unschedulable {
                fit_error,
                nominated: None,
            };
        }
        if !fit_error.run_claims_post_filter(profile, pod, state) {
            return Attempt::Unschedulable {
                fit_error,
                nominated: None,
            };
        }
        let preempts = profile.preemption && self.may_preempt;
        let refused = (preempts
            .then(|| preemption::refused_for_group(profile, pod, self.cache.pod_groups())))
        .flatten();
        if let Some(message) = refused {
            fit_error.add_post_filter_reason(&format!("preemption: {message}"));
        }
        if !preempts || refused.is_some() {
            self.run_other_post_filters(profile_index, state, pod, &mut fit_error);
            return Attempt::Unschedulable {
                fit_error,
                nominated: None,
            };
        }
        let preemption = Preemption {
            profile,
            snapshot: &self.snapshot,
            nominated: &self.nominated,
            budgets: self.objects.disruption_budgets(),
        };
        let phase = Instant::now();
        let outcome = preemption.run(state, pod, &fit_error, &mut self.rng);
        self.metrics
            .observe_extension_point(Point::PostFilter, phase.elapsed());
        match outcome {
            preemption::Outcome::Nominated { node, victims } => {
                // Upstream's RunPostFilterPlugins returns the first successful plugin's
                // status and drops the reasons gathered before it (DynamicResources' `no
                // new claims to deallocate`): the message ends at the Filter reasons.
                fit_error.post_filter_message = None;
                let mut nominated_pod = Pod::clone(pod);
                nominated_pod.nominated_node_name = Some(node);
                self.nominated.nominate(Arc::new(nominated_pod), node);
                Attempt::Unschedulable {
                    fit_error,
                    nominated: Some((node, victims)),
                }
            }
            preemption::Outcome::Failed(message) => {
                fit_error.add_post_filter_reason(&format!("preemption: {message}"));
                self.run_other_post_filters(profile_index, state, pod, &mut fit_error);
                Attempt::Unschedulable {
                    fit_error,
                    nominated: None,
                }
            }
        }
    }

    /// The PostFilter plugins after DefaultPreemption (Coscheduling): their reasons join
    /// the message; none nominates a node.
    fn run_other_post_filters(
        &mut self,
        profile_index: usize,
        state: &mut CycleState,
        pod: &Pod,
        fit_error: &mut FitError,
    ) {
        let profile = &self.profiles[profile_index];
        if profile.post_filter.is_empty() {
            return;
        }
        let groups = self.cache.pod_groups().lock();
        for plugin in &profile.post_filter {
            let status = plugin.post_filter(state, pod, &groups);
            for reason in status.reasons() {
                fit_error.add_post_filter_reason(reason);
            }
        }
    }

    /// The binding cycle's first half: PreBind, and the claims it set written through
    /// `binder` (held in the cache from then on). With [`Scheduler::complete_bind`]: on
    /// success the assumed pod is bound and PostBind runs; on a failure Unreserve runs,
    /// the assumed pod is forgotten and the error returned (the caller requeues the pod,
    /// and wakes the pods it kept out). `Ok(Some(timeout))`: the claims wait
    /// for binding conditions (DRADeviceBindingConditions), at most `timeout` seconds;
    /// the caller finds out how the wait ends, then calls [`Scheduler::complete_bind`]
    /// with it. `Err`: PreBind failed, which `complete_bind` concludes.
    pub fn pre_bind(
        &mut self,
        pod: &Arc<Pod>,
        state: &mut CycleState,
        binder: &mut dyn Binder,
    ) -> Result<Option<i64>, String> {
        let node = pod
            .node_name
            .ok_or_else(|| format!("pod {} has no node to bind to", pod.key()))?;
        run_pre_bind(self.profile_for(pod), state, pod, node)?;
        let claims = dynamic_resources::bound_claims(state);
        if claims.is_empty() {
            return Ok(None);
        }
        let allocated_now = dynamic_resources::allocated_now(state);
        binder.write_claims(pod, claims, &allocated_now)?;
        // Upstream's `AssumeClaimAfterAPICall`: the cache holds the written claims now,
        // not when their watch events arrive.
        self.cache.assume_written_claims(claims);
        Ok(dynamic_resources::binding_wait(state))
    }

    /// The binding cycle's second half, after [`Scheduler::pre_bind`] (`pre_bound`: how
    /// it, and any wait for binding conditions, ended): the bind, then PostBind, or
    /// Unreserve and the assumed pod forgotten.
    pub fn complete_bind(
        &mut self,
        pod: &Arc<Pod>,
        state: &mut CycleState,
        binder: &mut dyn Binder,
        pre_bound: Result<(), String>,
    ) -> Result<(), BindFailure> {
        let Some(node) = pod.node_name else {
            return Err(BindFailure {
                message: format!("pod {} has no node to bind to", pod.key()),
                forgotten: false,
            });
        };
        let mut bound = pre_bound;
        if bound.is_ok() {
            let phase = Instant::now();
            bound = binder.bind(pod, node);
            self.metrics
                .observe_extension_point(Point::Bind, phase.elapsed());
        }
        let profile = self.profile_for(pod);
        let concluded = conclude(profile, &self.cache, self.assume, state, pod, node, bound);
        self.absorb_requests(state);
        concluded
    }

    /// The binding cycle of a scheduled pod, to run apart from the scheduler (a binder
    /// that writes to a real API server, concurrently with the next scheduling cycle).
    pub fn binding_cycle(&self, pod: Arc<Pod>, state: Box<CycleState>) -> Option<BindingCycle> {
        Some(BindingCycle {
            node: pod.node_name?,
            profile: self.profile_for(&pod).cloned(),
            pod,
            state,
            cache: self.cache.clone(),
            assume: self.assume,
        })
    }

    /// Whether the pod (naming its node, assumed there or not) may still be bound there by
    /// the latest cache: every Filter plugin of its profile ([`check_placement`]), the
    /// binder's re-check when several instances share a cluster. An assumed pod is taken
    /// out of the cache for the check and put back after: the check asks whether the pod
    /// may be added, and a pod cannot be taken out of every plugin's counts exactly
    /// (VolumeRestrictions counts ReadWriteOncePod claims in use, not their users).
    /// Refreshes this scheduler's snapshot; `Err` carries the rejecting plugin's status.
    pub fn check_placement(&mut self, pod: &Arc<Pod>) -> Result<(), Status> {
        let Some(profile_index) = self
            .profiles
            .iter()
            .position(|p| p.scheduler_name == pod.scheduler_name)
        else {
            return Err(Status::error(format!(
                "profile not found for scheduler name {:?}",
                pod.scheduler_name.as_str()
            )));
        };
        // Devices: the allocations Reserve decided must still be the pod's alone (a
        // fresh allocation on the node could pick other devices, but the binder writes
        // these). Forgetting the pod for the check drops them; they are put back after.
        let in_flight = self.cache.dra().in_flight_of(&pod.uid);
        placement_check::devices_still_free(self.cache.dra(), &in_flight)?;
        let assumed = self.cache.is_assumed(&pod.uid);
        if assumed {
            self.cache
                .forget_pod(pod)
                .map_err(|e| Status::error(e.to_string()))?;
        }
        let verdict = match self.cache.update_snapshot(&mut self.snapshot) {
            Ok(_) => {
                self.objects.ensure_namespace(pod.namespace);
                let cluster = Cluster {
                    nodes: &self.snapshot,
                    objects: &self.objects,
                };
                let profile = &self.profiles[profile_index];
                check_placement(profile, cluster, pod).and_then(|()| {
                    let release = profile.release;
                    placement_check::counters_still_cover(&self.snapshot, release, pod, &in_flight)
                })
            }
            Err(inconsistent) => Err(Status::error(inconsistent.to_string())),
        };
        if assumed {
            if let Err(e) = self.cache.assume_pod(pod.clone()) {
                tracing::error!(pod = %pod.key(), error = %e, "could not assume the pod again after its check");
                return Err(Status::error(e.to_string()));
            }
            self.cache.assume_allocations(pod, &in_flight);
        }
        verdict
    }

    /// The API objects plugins read, for an event source that changes some of them (a
    /// replayed trace's storage objects).
    pub fn objects_mut(&mut self) -> &mut ApiObjects {
        &mut self.objects
    }

    /// Replaces the API objects plugins read (namespaces, services, storage), for an
    /// event source that keeps them current; they read the cache's PodGroups still.
    pub fn set_objects(&mut self, mut objects: ApiObjects) {
        objects.share_pod_groups(self.cache.pod_groups().clone());
        self.objects = objects;
    }
}
