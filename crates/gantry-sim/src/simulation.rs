//! The simulation: the real cache, queue, scheduler and binding cycle, driven by a
//! discrete-event clock. Pods arrive and cluster events happen at virtual times; a bind
//! completes a bind latency after its pod was assumed, while later pods are scheduled in
//! the meantime, so what assume is worth shows up in the numbers.
//!
//! Several scheduler instances can share the cluster (`SimOptions::schedulers`, Gödel's
//! shared state): each has its own cache and queue, fed by the API's watch stream an
//! event latency after each change, and owns the pods its shard gives it. Each assumes its
//! own decisions; before a bind the binder re-checks the placement against its instance's
//! latest cache, and the API, the serialisation point, admits a bind only if the pod passes
//! every Filter plugin of its profile against the authoritative bound state
//! (docs/shared-state.md). Refusals are conflicts, counted by the plugin that refused: the
//! pod is forgotten and retried after backoff. One instance with no event latency is the
//! classic single scheduler: the same code, the same placements.
//!
//! Every run ends. A pod is never queued when no profile schedules it (another
//! scheduler's pod) or while scheduling gates hold it; a pod whose attempts keep erroring
//! or whose binds keep failing is given up after `MAX_FAILED_ATTEMPTS`; and a hard guard
//! stops a run that takes more steps than its input can explain (`SimError::StepLimit`).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry_api::decode::ClusterObjects;
use gantry_api::dra::{ClaimKey, ResourceClaim};
use gantry_api::{Node, Pod, Sym};
use gantry_cache::Cache;
use gantry_framework::{ApiObjects, CycleState, Profile};
use gantry_scheduler::queue::QueuedPod;
use gantry_scheduler::shard::Shard;
use gantry_scheduler::{Attempt, Binder, Rng};
use serde::Serialize;

use crate::SimulatedApi;
use crate::api::BindRefusal;
use crate::claims::ClaimChange;
use crate::instance::{Instance, InstanceConfig, WatchEvent};
use crate::latency::BindLatency;
use crate::records::{DuplicatePod, Placement, PodHistory, PodRecords, PodStatus};

/// Failed attempts (an error in the scheduling cycle, or a bind the API refused) after
/// which the simulation gives a pod up. Upstream retries such a pod forever with backoff;
/// a simulation must end, and ten failures in a row are far beyond chance at any
/// realistic failure rate (at 50% it happens to one pod in a thousand).
pub const MAX_FAILED_ATTEMPTS: u32 = 10;

/// The hard guard: a run may take at most this many steps (scheduling attempts and moves
/// of the clock) per event it was given (each pod's creation is one), plus
/// `GUARD_BASE_STEPS`. Real runs take a few steps per event; only a bug that keeps the
/// simulation busy without end comes near.
pub const GUARD_STEPS_PER_EVENT: u64 = 1000;
pub const GUARD_BASE_STEPS: u64 = 10_000;

/// The reason written for a gated pod.
pub const GATED: &str = "gated";

#[derive(Debug, Clone)]
pub struct SimOptions {
    pub seed: u64,
    /// Assume decided pods before binding (kube-scheduler's behaviour).
    pub assume: bool,
    /// Submit pods one at a time, each after the previous was bound or found
    /// unschedulable; an unschedulable pod is withdrawn (the parity procedure).
    pub sequential: bool,
    /// Virtual time from a scheduling decision to the bind's completion.
    pub bind_latency: BindLatency,
    /// Share of binds the API refuses at random.
    pub bind_failure_rate: f64,
    /// The API refuses binds that would over-commit a node.
    pub capacity_check: bool,
    /// The queue's backoff after a failed attempt: initial, doubling up to the maximum.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// The hard guard's limit on steps; `None` derives it from the input.
    pub step_limit: Option<u64>,
    /// Scheduler instances sharing the cluster (at least 1). With more than one, binders
    /// re-check placements, and the API admits a bind only if the pod passes every Filter
    /// plugin of its profile against the bound state (and refuses over-commits).
    pub schedulers: u32,
    /// Virtual time from a change at the API to its watch event reaching the instances.
    pub event_latency: Duration,
}

/// The most scheduler instances a simulation runs.
pub const MAX_SCHEDULERS: u32 = 64;

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            seed: 0,
            assume: true,
            sequential: false,
            bind_latency: BindLatency::REALISTIC,
            bind_failure_rate: 0.0,
            capacity_check: false,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            step_limit: None,
            schedulers: 1,
            event_latency: Duration::ZERO,
        }
    }
}

/// A run that cannot go on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    DuplicatePod(#[from] DuplicatePod),
    #[error("node {0} is added twice: two nodes with one name")]
    DuplicateNode(String),
    #[error(
        "the simulation stopped at {virtual_s:.1} s of cluster time: {steps} steps (scheduling attempts and clock moves) reached the guard's limit of {limit} for {events} events; this is a bug in Gantry, please report it"
    )]
    StepLimit {
        steps: u64,
        limit: u64,
        events: u64,
        virtual_s: f64,
    },
    #[error("schedulers: {0} instances asked for; a simulation runs 1 to {MAX_SCHEDULERS}")]
    Schedulers(u32),
    #[error("sequential: pods are submitted one at a time to one scheduler instance, not {0}")]
    SequentialWithInstances(u32),
}

/// Things that happen to the cluster at a virtual time.
#[derive(Debug, Clone)]
pub enum SimEvent {
    /// A pending pod is created.
    CreatePod(Arc<Pod>),
    /// A pod (pending or bound) is deleted, by `namespace/name`.
    DeletePod(String),
    AddNode(Arc<Node>),
    /// The node and the pods bound to it are deleted.
    DeleteNode(Sym),
    /// The node is cordoned and its pods are evicted (and re-created as pending pods when
    /// `recreate` says so, as their controllers would).
    DrainNode {
        node: Sym,
        recreate: bool,
    },
}

/// Scheduling attempts between two samples of progress.
const SAMPLE_EVERY: u64 = 100;
/// When the clock moves, a sample is taken once it has moved by this share of the time
/// so far (or by `MIN_SAMPLE_INTERVAL`) since the last one: a day-long run keeps a few
/// thousand samples, a seconds-long one its detail.
const SAMPLE_SHARE: f64 = 1.0 / 500.0;
const MIN_SAMPLE_INTERVAL: f64 = 0.01;

enum Event {
    External(SimEvent),
    /// The binding cycle of a pod `instance` decided a bind latency earlier, after
    /// `attempts` scheduling attempts.
    BindDue {
        instance: usize,
        pod: Arc<Pod>,
        state: Box<CycleState>,
        attempts: u32,
    },
    /// A change at the API reaching the instances' watches.
    Watch(WatchEvent),
}

/// The outcome of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub pods_total: usize,
    pub scheduled: usize,
    /// Pods tried and never bound (they fit nowhere, or were deleted first).
    pub unschedulable: usize,
    /// Pods held back by scheduling gates, never tried.
    pub gated: usize,
    /// Pods whose `schedulerName` matches no profile, left to another scheduler.
    pub other_scheduler: usize,
    /// Pods given up after `MAX_FAILED_ATTEMPTS` errors or failed binds.
    pub gave_up: usize,
    /// Pods evicted by preemption.
    pub preempted: usize,
    pub attempts: u64,
    pub bind_failures: u64,
    /// Attempts beyond each pod's first.
    pub retries: u64,
    /// Nodes whose bound pods' requests exceeded allocatable at some moment.
    pub overcommitted_nodes: usize,
    /// Scheduler instances sharing the cluster.
    pub schedulers: u32,
    pub event_latency_ms: f64,
    /// Binds refused because the decision was outdated: by the binder's re-check against
    /// its instance's latest cache, or by the API because the node had no room left.
    pub conflicts: u64,
    /// Of the conflicts, those the binder's re-check caught (the rest the API refused).
    pub binder_conflicts: u64,
    /// The conflicts by the Filter plugin that refused the bind (the binder's re-check or
    /// the API's admission), in name order; `capacity` for the API's capacity check alone
    /// (a profile without NodeResourcesFit), `other` where no plugin spoke (the node gone).
    pub conflicts_by_plugin: BTreeMap<String, u64>,
    /// Refused binds that would have over-committed their node at that moment.
    pub overcommits_prevented: u64,
    pub wall_s: f64,
    pub pods_per_sec: f64,
    /// Wall-clock duration of the scheduling cycles, per attempt.
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub virtual_s: f64,
    /// Pods holding HAMi-registered GPU cards at the end.
    pub gpu_pods: usize,
    /// HAMi-registered cards shared by more than one container at the end.
    pub shared_cards: usize,
}

/// Over time: for plots of throughput, pending pods and utilisation. A sample holds
/// until the next one.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    pub virtual_s: f64,
    pub wall_s: f64,
    /// Binds so far.
    pub scheduled: usize,
    /// Pods in the scheduling queue.
    pub pending: usize,
    /// Requested over allocatable, over all nodes (0 to 1, above 1 when over-committed).
    pub cpu_utilisation: f64,
    pub memory_utilisation: f64,
}

pub struct Simulation {
    options: SimOptions,
    clock: Duration,
    seq: u64,
    events: BinaryHeap<Reverse<(Duration, u64)>>,
    payloads: HashMap<u64, Event>,
    /// External events scheduled, the hard guard's measure of the input.
    external_events: u64,
    steps: u64,
    instances: Vec<Instance>,
    /// The instance that pops the next pod: instances take turns, one pod each.
    next_instance: usize,
    pub api: SimulatedApi,
    latency_rng: Rng,
    /// Sequential mode: pods waiting to be submitted.
    backlog: VecDeque<Arc<Pod>>,
    /// Sequential mode: the pod being worked on.
    current: Option<Arc<str>>,
    records: PodRecords,
    preempted: usize,
    attempts: u64,
    conflicts: Conflicts,
    latencies_us: Vec<u64>,
    pub samples: Vec<Sample>,
}

/// Binds refused because their decisions were outdated.
#[derive(Default)]
struct Conflicts {
    binder: u64,
    api: u64,
    overcommits_prevented: u64,
    by_plugin: BTreeMap<String, u64>,
}

impl Simulation {
    /// A simulation of `cluster`'s nodes and bound pods; its pending pods arrive at time 0.
    /// The objects move into the simulation (a million pods are not copied).
    pub fn new(
        cluster: ClusterObjects,
        profiles: Vec<Profile>,
        options: SimOptions,
    ) -> Result<Simulation, String> {
        if !(1..=MAX_SCHEDULERS).contains(&options.schedulers) {
            return Err(SimError::Schedulers(options.schedulers).to_string());
        }
        if options.sequential && options.schedulers > 1 {
            return Err(SimError::SequentialWithInstances(options.schedulers).to_string());
        }
        let objects = ApiObjects::from_cluster(&cluster);
        let config = InstanceConfig {
            profiles: &profiles,
            objects: &objects,
            initial_backoff: options.initial_backoff,
            max_backoff: options.max_backoff,
            assume: options.assume,
        };
        let instances: Vec<Instance> = (0..options.schedulers)
            .map(|index| {
                let shard = Shard {
                    index,
                    count: options.schedulers,
                };
                Instance::new(shard, &config, options.seed)
            })
            .collect();
        let mut api = SimulatedApi::new(options.seed);
        api.capacity_check = options.capacity_check || options.schedulers > 1;
        api.load_dra(&cluster.dra, options.seed);
        let claims: Vec<ClaimChange> = api
            .claims
            .claims()
            .map(|c| ClaimChange::Set(c.clone()))
            .collect();
        for instance in &instances {
            crate::api::load_dra_catalog(&instance.cache, api.dra_catalog());
            crate::api::apply_claim_changes(&instance.cache, &claims);
        }
        if options.schedulers > 1 {
            api.enable_admission(profiles.clone(), objects.clone());
        }
        api.failure_rate = options.bind_failure_rate;
        for node in cluster.nodes {
            let node = Arc::new(node);
            for instance in &instances {
                instance.cache.add_node(node.clone());
            }
            api.add_node(node);
        }
        let mut records = PodRecords::default();
        let mut pending = Vec::new();
        for pod in cluster.pods {
            if pod.node_name.is_none() {
                pending.push(pod);
                continue;
            }
            let pod = Arc::new(pod);
            for instance in &instances {
                instance
                    .cache
                    .add_pod(pod.clone())
                    .map_err(|e| e.to_string())?;
            }
            records.add_bound(&pod);
            api.add_bound_pod(pod);
        }
        let latency_rng = Rng::new(options.seed ^ 0xB1_4D_1A_7E);
        let mut sim = Simulation {
            options,
            clock: Duration::ZERO,
            seq: 0,
            events: BinaryHeap::new(),
            payloads: HashMap::new(),
            external_events: 0,
            steps: 0,
            instances,
            next_instance: 0,
            api,
            latency_rng,
            backlog: VecDeque::new(),
            current: None,
            records,
            preempted: 0,
            attempts: 0,
            conflicts: Conflicts::default(),
            latencies_us: Vec::new(),
            samples: Vec::new(),
        };
        for pod in pending {
            sim.schedule(Duration::ZERO, SimEvent::CreatePod(Arc::new(pod)));
        }
        Ok(sim)
    }

    /// Schedules a cluster event at virtual time `at`.
    pub fn schedule(&mut self, at: Duration, event: SimEvent) {
        self.external_events += 1;
        self.push(at, Event::External(event));
    }

    fn push(&mut self, at: Duration, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq)));
        self.payloads.insert(self.seq, event);
    }

    /// Runs until nothing can happen any more; returns the summary.
    pub fn run(&mut self) -> Result<Summary, SimError> {
        self.run_with_progress(|_| {})
    }

    /// As `run`, calling `progress` with the number of pods bound so far now and then.
    pub fn run_with_progress(&mut self, progress: impl FnMut(usize)) -> Result<Summary, SimError> {
        let start = Instant::now();
        self.advance(None, progress, start)?;
        Ok(self.summary(start.elapsed().as_secs_f64()))
    }

    /// Runs everything due up to virtual time `until` (benchmarks use it to settle the
    /// init pods before measuring).
    pub fn run_until(&mut self, until: Duration) -> Result<(), SimError> {
        self.advance(Some(until), |_| {}, Instant::now())
    }

    fn advance(
        &mut self,
        until: Option<Duration>,
        mut progress: impl FnMut(usize),
        start: Instant,
    ) -> Result<(), SimError> {
        let mut cycles = 0u64;
        if self.samples.is_empty() {
            self.sample(start);
        }
        loop {
            self.count_step()?;
            self.deliver_due_events()?;
            // Upstream retries pods unschedulable for over five minutes (checked every 30 s).
            for instance in &mut self.instances {
                instance.queue.flush_unschedulable_leftover(self.clock);
            }
            if self.options.sequential && self.current.is_none() {
                self.submit_next_sequential();
            }
            if let Some((instance, queued)) = self.pop_next() {
                self.attempt(instance, queued);
                cycles += 1;
                if cycles.is_multiple_of(SAMPLE_EVERY) {
                    self.sample(start);
                    progress(self.settled());
                }
                continue;
            }
            let next_event = self.events.peek().map(|Reverse((t, _))| *t);
            let next_backoff = self
                .instances
                .iter()
                .filter_map(|i| i.queue.next_backoff_expiry())
                .min();
            let next = match (next_event, next_backoff) {
                (None, None) => break,
                (Some(e), Some(b)) => e.min(b),
                (Some(t), None) | (None, Some(t)) => t,
            };
            if until.is_some_and(|u| next > u) {
                break;
            }
            // Everything due now has happened: a sample here holds until the clock moves.
            // It is taken when the last one is old enough, or was taken earlier at this
            // same time (so the state after the first instant is kept too).
            let now = self.clock.as_secs_f64();
            let last_sample = self.samples.last().map_or(-1.0, |s| s.virtual_s);
            if now == last_sample
                || now - last_sample >= (now * SAMPLE_SHARE).max(MIN_SAMPLE_INTERVAL)
            {
                self.sample(start);
            }
            self.clock = self.clock.max(next);
        }
        self.sample(start);
        progress(self.settled());
        Ok(())
    }

    /// The next pod to try: instances take turns, each popping one pod when it has one.
    fn pop_next(&mut self) -> Option<(usize, QueuedPod)> {
        let count = self.instances.len();
        for turn in 0..count {
            let index = (self.next_instance + turn) % count;
            if let Some(queued) = self.instances[index].queue.pop(self.clock) {
                self.next_instance = (index + 1) % count;
                return Some((index, queued));
            }
        }
        None
    }

    /// The hard guard: one more step, unless the run has taken more than its input explains.
    fn count_step(&mut self) -> Result<(), SimError> {
        self.steps += 1;
        let limit = self.options.step_limit.unwrap_or(
            GUARD_STEPS_PER_EVENT.saturating_mul(self.external_events) + GUARD_BASE_STEPS,
        );
        if self.steps > limit {
            return Err(SimError::StepLimit {
                steps: self.steps - 1,
                limit,
                events: self.external_events,
                virtual_s: self.clock.as_secs_f64(),
            });
        }
        Ok(())
    }

    /// Pods bound through the API so far (the progress measure).
    fn settled(&self) -> usize {
        self.api.binds as usize
    }

    fn sample(&mut self, start: Instant) {
        let totals = self.api.totals();
        let share = |used: i128, total: i128| {
            if total > 0 {
                used as f64 / total as f64
            } else {
                0.0
            }
        };
        self.samples.push(Sample {
            virtual_s: self.clock.as_secs_f64(),
            wall_s: start.elapsed().as_secs_f64(),
            scheduled: self.settled(),
            pending: self.instances.iter().map(|i| i.queue.len()).sum(),
            cpu_utilisation: share(totals.requested_milli_cpu, totals.allocatable_milli_cpu),
            memory_utilisation: share(totals.requested_memory, totals.allocatable_memory),
        });
    }

    fn deliver_due_events(&mut self) -> Result<(), SimError> {
        while let Some(Reverse((at, seq))) = self.events.peek().copied() {
            if at > self.clock {
                break;
            }
            self.events.pop();
            let event = self
                .payloads
                .remove(&seq)
                .expect("every queued event has a payload");
            match event {
                Event::External(e) => self.apply(e)?,
                Event::BindDue {
                    instance,
                    pod,
                    state,
                    attempts,
                } => self.finish_bind(instance, pod, state, attempts),
                Event::Watch(change) => self.deliver(&change),
            }
        }
        Ok(())
    }

    /// A change at the API goes out on the watch: it reaches the instances an event
    /// latency from now (at once without latency, before anything else happens).
    fn broadcast(&mut self, change: WatchEvent) {
        if self.options.event_latency.is_zero() {
            self.deliver(&change);
        } else {
            self.push(
                self.clock.saturating_add(self.options.event_latency),
                Event::Watch(change),
            );
        }
    }

    /// Every instance handles the change; a created pod its owner holds back for its
    /// scheduling gates is written as gated.
    fn deliver(&mut self, change: &WatchEvent) {
        for instance in &mut self.instances {
            instance.watch(change, self.clock);
        }
        if let WatchEvent::PodCreated(pod) = change {
            let owner = self.owner(&pod.uid);
            if self.instances[owner].queue.is_gated(&pod.uid) {
                self.mark_gated(&pod.uid);
            }
        }
    }

    /// The index of the instance that owns the pod.
    fn owner(&self, uid: &str) -> usize {
        gantry_scheduler::shard::owner(uid, self.options.schedulers) as usize
    }

    /// Sequential mode: submits the next pod that is not gated (to the only instance).
    fn submit_next_sequential(&mut self) {
        while let Some(pod) = self.backlog.pop_front() {
            let pod = self.make_template_claims(&pod);
            let uid = pod.uid.clone();
            let queue = &mut self.instances[0].queue;
            queue.add(pod, self.clock);
            if queue.is_gated(&uid) {
                self.mark_gated(&uid);
                continue;
            }
            self.current = Some(uid);
            return;
        }
    }

    fn mark_gated(&mut self, uid: &str) {
        if let Some(i) = self.records.index(uid) {
            self.records.set_pending(i, PodStatus::Gated, GATED.into());
        }
    }

    fn apply(&mut self, event: SimEvent) -> Result<(), SimError> {
        let now = self.clock;
        match event {
            SimEvent::CreatePod(pod) => self.create_pod(pod, now)?,
            SimEvent::DeletePod(key) => self.delete_pod(&key),
            SimEvent::AddNode(node) => {
                if self.api.node(node.name).is_some() {
                    return Err(SimError::DuplicateNode(node.name.to_string()));
                }
                self.api.add_node(node.clone());
                self.broadcast(WatchEvent::NodeAdded(node));
            }
            SimEvent::DeleteNode(name) => {
                let pods = self.api.delete_node(name);
                self.broadcast(WatchEvent::NodeDeleted {
                    name,
                    pods: pods.clone(),
                });
                for pod in &pods {
                    self.release_claims(pod);
                }
            }
            SimEvent::DrainNode { node, recreate } => self.drain(node, recreate),
        }
        Ok(())
    }

    /// A new pod: queued by its owner, unless it is another scheduler's (never queued, as
    /// upstream leaves it alone) or gated (held, never tried).
    fn create_pod(&mut self, pod: Arc<Pod>, now: Duration) -> Result<(), SimError> {
        let index = self.records.arrive(&pod, now)?;
        if self.instances[0].scheduler.profile_for(&pod).is_none() {
            let reason = format!(
                "schedulerName {:?} matches no profile",
                pod.scheduler_name.as_str()
            );
            self.records
                .set_pending(index, PodStatus::OtherScheduler, reason);
            return Ok(());
        }
        if self.options.sequential {
            self.backlog.push_back(pod);
            return Ok(());
        }
        let pod = self.make_template_claims(&pod);
        self.broadcast(WatchEvent::PodCreated(pod));
        Ok(())
    }

    /// The claim controller makes the pod's claims from its templates before the
    /// scheduler sees the pod; returns the pod naming them.
    fn make_template_claims(&mut self, pod: &Arc<Pod>) -> Arc<Pod> {
        let (pod, made) = self.api.claims.make_template_claims(pod);
        self.publish_claims(made);
        pod
    }

    /// Claim changes at the API: admission's cache and the watch.
    fn publish_claims(&mut self, changes: Vec<ClaimChange>) {
        self.api.admit_claim_changes(&changes);
        for change in changes {
            self.broadcast(WatchEvent::Claim(change));
        }
    }

    /// The pod is gone: the claim controller and the garbage collector release its
    /// claims.
    fn release_claims(&mut self, pod: &Pod) {
        if pod.resource_claims.is_empty() {
            return;
        }
        let changes = self.api.claims.release(pod);
        self.publish_claims(changes);
    }

    /// Deletes a pod by `namespace/name`: a bound one leaves its node; a pending one is
    /// written as deleted, and its bind, if one is in flight, will be refused.
    fn delete_pod(&mut self, key: &str) {
        let Some(uid) = self.records.uid_of(key) else {
            tracing::warn!(pod = %key, "deleting a pod the simulation does not know");
            return;
        };
        self.backlog.retain(|p| p.uid != uid);
        if self.current.as_ref() == Some(&uid) {
            self.current = None;
        }
        if self.delete_bound(&uid) {
            return;
        }
        let Some(index) = self.records.index(&uid) else {
            return;
        };
        let status = self.records.histories()[index].status;
        if matches!(status, PodStatus::Pending | PodStatus::Gated) {
            self.records.set_pending(
                index,
                PodStatus::Pending,
                "deleted before it was scheduled".into(),
            );
            self.api.delete_unbound(uid.clone());
            self.broadcast(WatchEvent::PendingPodDeleted(uid.clone()));
            let changes = self.api.claims.delete_owned_by(&uid);
            self.publish_claims(changes);
        }
    }

    /// Cordons the node and evicts its pods, in the order they were bound.
    fn drain(&mut self, node: Sym, recreate: bool) {
        let now = self.clock;
        let Some(current) = self.api.node(node).cloned() else {
            return;
        };
        let mut cordoned = Node::clone(&current);
        cordoned.unschedulable = true;
        let cordoned = Arc::new(cordoned);
        self.api.add_node(cordoned.clone());
        self.broadcast(WatchEvent::NodeUpdated(cordoned));
        for pod in self.api.pods_on(node) {
            self.delete_bound(&pod.uid);
            if recreate {
                let mut again = Pod::clone(&pod);
                again.node_name = None;
                again.name = Arc::from(format!("{}-r{}", pod.name, self.seq));
                again.uid = Arc::from(format!("{}/{}", again.namespace, again.name));
                self.schedule(now, SimEvent::CreatePod(Arc::new(again)));
            }
        }
    }

    /// Deletes the pod if it is bound; returns whether it was.
    fn delete_bound(&mut self, uid: &str) -> bool {
        let Some(pod) = self.api.delete_pod(uid) else {
            return false;
        };
        self.broadcast(WatchEvent::BoundPodDeleted(pod.clone()));
        self.release_claims(&pod);
        true
    }

    /// One scheduling cycle of `instance` for a popped pod, and what follows from its
    /// outcome.
    fn attempt(&mut self, instance: usize, queued: QueuedPod) {
        self.attempts += 1;
        let Some(index) = self.records.index(&queued.pod.uid) else {
            tracing::error!(pod = %queued.pod.key(), "a queued pod the simulation never created");
            return;
        };
        self.records.history_mut(index).attempts += 1;
        self.instances[instance].scheduler.now = self.clock.as_secs() as i64;
        let started = Instant::now();
        let attempt = self.instances[instance].scheduler.schedule_one(&queued.pod);
        self.latencies_us.push(started.elapsed().as_micros() as u64);
        let now = self.clock;
        if let Attempt::Unschedulable { fit_error, .. } = &attempt
            && let Some(claim) = &fit_error.claim_to_deallocate
            && let Some(change) = self.api.claims.deallocate(claim)
        {
            // DynamicResources' PostFilter freed a claim that kept the pod off a node.
            self.publish_claims(vec![change]);
        }
        match attempt {
            Attempt::Scheduled { pod, state, .. } => {
                let latency = self.options.bind_latency.sample(&mut self.latency_rng);
                self.records.placement_mut(index).annotations = written(&pod);
                self.push(
                    // Saturating: the clock may stand at the end of time (a backoff of
                    // i64::MAX seconds has expired).
                    now.saturating_add(latency),
                    Event::BindDue {
                        instance,
                        pod,
                        state,
                        attempts: queued.attempts,
                    },
                );
            }
            Attempt::Unschedulable {
                fit_error,
                nominated: Some((node, victims)),
            } => {
                for victim in &victims {
                    self.delete_bound(&victim.uid);
                    self.preempted += 1;
                    if let Some(v) = self.records.index(&victim.uid) {
                        self.records.history_mut(v).preempted = true;
                    }
                    self.records.placement_mut(index).evicted.push(victim.key());
                }
                self.records.set_reason(index, fit_error.to_string());
                let mut retry = queued.clone();
                let mut nominated = Pod::clone(&queued.pod);
                nominated.nominated_node_name = Some(node);
                retry.pod = Arc::new(nominated);
                self.instances[instance].queue.add_unschedulable(
                    retry,
                    fit_error.rejecting_plugins(),
                    now,
                );
            }
            Attempt::Unschedulable {
                fit_error,
                nominated: None,
            } => {
                self.records.set_reason(index, fit_error.to_string());
                if self.options.sequential {
                    self.withdraw(instance, &queued.pod);
                } else {
                    self.instances[instance].queue.add_unschedulable(
                        queued,
                        fit_error.rejecting_plugins(),
                        now,
                    );
                }
            }
            Attempt::Error(message) => {
                if self.options.sequential {
                    self.records.set_reason(index, message);
                    self.withdraw(instance, &queued.pod);
                } else {
                    self.fail(instance, index, queued, message);
                }
            }
        }
    }

    /// An attempt errored or its bind failed: back off and retry, or give the pod up once
    /// it has failed `MAX_FAILED_ATTEMPTS` times.
    fn fail(&mut self, instance: usize, index: usize, queued: QueuedPod, reason: String) {
        let history = self.records.history_mut(index);
        history.failures += 1;
        if history.failures < MAX_FAILED_ATTEMPTS {
            self.records.set_reason(index, reason);
            self.instances[instance]
                .queue
                .add_backoff(queued, self.clock);
            return;
        }
        self.records.set_pending(
            index,
            PodStatus::GivenUp,
            format!("given up after {MAX_FAILED_ATTEMPTS} failed attempts; the last: {reason}"),
        );
        self.withdraw(instance, &queued.pod);
    }

    /// The pod is no longer worked on: it holds nothing, and sequential mode moves on.
    fn withdraw(&mut self, instance: usize, pod: &Pod) {
        self.instances[instance].scheduler.clear_nomination(pod);
        if self.current.as_deref() == Some(&*pod.uid) {
            self.current = None;
        }
    }

    /// The binding cycle of a pod `instance` decided earlier. With several instances the
    /// binder first re-checks the placement against the instance's latest cache. A bound
    /// pod goes out on the watch; a refused one is forgotten and retried after backoff.
    fn finish_bind(
        &mut self,
        instance: usize,
        pod: Arc<Pod>,
        mut state: Box<CycleState>,
        attempts: u32,
    ) {
        let now = self.clock;
        let Some(index) = self.records.index(&pod.uid) else {
            tracing::error!(pod = %pod.key(), "a bind for a pod the simulation never created");
            return;
        };
        let shared = self.instances.len() > 1;
        let binder_instance = &mut self.instances[instance];
        let check = match pod.node_name {
            Some(node) if shared => binder_instance.scheduler.check_placement(&pod).map_err(
                |status| {
                    let message = status.message();
                    let message = format!(
                        "re-checked against the latest cache, node {node} no longer fits: {message}"
                    );
                    (status.plugin(), message)
                },
            ),
            _ => Ok(()),
        };
        let mut binder = ApiBinder {
            api: &mut self.api,
            check,
            refused: None,
            claims_written: Vec::new(),
        };
        let bound = binder_instance
            .scheduler
            .bind(&pod, &mut state, &mut binder);
        let refused = binder.refused.take();
        let claims_written = std::mem::take(&mut binder.claims_written);
        let wrote_claims = !claims_written.is_empty();
        for change in claims_written {
            self.broadcast(WatchEvent::Claim(change));
        }
        if bound.is_err() && wrote_claims {
            // Unreserve takes the pod out of the claims it was written into (their
            // allocations stay, as upstream's do, until the pod's PostFilter frees them).
            let changes = self.api.claims.unreserve(&pod);
            self.publish_claims(changes);
        }
        match bound {
            Ok(()) => {
                if let Some(node) = pod.node_name {
                    self.records.set_bound(index, node, now);
                }
                if self.current.as_deref() == Some(&*pod.uid) {
                    self.current = None;
                }
                self.broadcast(WatchEvent::PodBound(pod));
            }
            Err(failure) => {
                self.count_conflict(&pod, refused);
                let binder_instance = &mut self.instances[instance];
                if failure.forgotten {
                    binder_instance.queue.assumed_pod_forgotten(now);
                }
                let deleted = binder_instance.take_deleted_in_flight(&pod.uid);
                // Back as submitted: the next attempt writes its own annotations.
                self.records.placement_mut(index).annotations.clear();
                if deleted {
                    self.withdraw(instance, &pod);
                    return;
                }
                let mut pending = Pod::clone(&pod);
                pending.node_name = None;
                pending.bind_annotations = None;
                let queued = QueuedPod {
                    pod: Arc::new(pending),
                    timestamp: now,
                    attempts,
                    initial_attempt: Some(now),
                    unschedulable_plugins: Vec::new(),
                    cycle: 0,
                };
                self.fail(
                    instance,
                    index,
                    queued,
                    format!("binding rejected: {failure}"),
                );
            }
        }
    }

    /// Counts a refused bind as a conflict when its decision was outdated (the binder's
    /// re-check or the API's admission refused it, or the API found no room left on the
    /// node), under the plugin that refused it.
    fn count_conflict(&mut self, pod: &Pod, refused: Option<Refused>) {
        let (plugin, would_overcommit) = match refused {
            Some(Refused::ByBinder(plugin)) => {
                self.conflicts.binder += 1;
                let over = pod
                    .node_name
                    .is_some_and(|node| self.api.would_overcommit(pod, node));
                (plugin, over)
            }
            Some(Refused::ByApi(BindRefusal::OverCommit { .. })) => {
                self.conflicts.api += 1;
                ("capacity", true)
            }
            Some(Refused::ByApi(BindRefusal::Constraint { plugin, .. })) => {
                self.conflicts.api += 1;
                let over = pod
                    .node_name
                    .is_some_and(|node| self.api.would_overcommit(pod, node));
                (plugin, over)
            }
            Some(Refused::ByApi(_)) | None => return,
        };
        let plugin = if plugin.is_empty() { "other" } else { plugin };
        *self
            .conflicts
            .by_plugin
            .entry(plugin.to_string())
            .or_default() += 1;
        if would_overcommit {
            self.conflicts.overcommits_prevented += 1;
        }
    }

    /// Pods evicted by preemption so far.
    pub fn preempted(&self) -> usize {
        self.preempted
    }

    /// Scheduling attempts so far.
    pub fn attempts(&self) -> u64 {
        self.attempts
    }

    /// Wall-clock duration of each scheduling attempt so far, in microseconds.
    pub fn latencies_us(&self) -> &[u64] {
        &self.latencies_us
    }

    /// Forgets the attempt latencies so far (a benchmark's warm-up).
    pub fn clear_latencies(&mut self) {
        self.latencies_us.clear();
    }

    /// One line per pod given to the simulation, in the order they arrived.
    pub fn placements(&self) -> &[Placement] {
        self.records.placements()
    }

    /// Each pod's history, in the order of `placements`.
    pub fn histories(&self) -> &[PodHistory] {
        self.records.histories()
    }

    /// Nodes run through Filter so far, by all instances.
    pub fn nodes_evaluated(&self) -> u64 {
        self.instances
            .iter()
            .map(|i| i.scheduler.nodes_evaluated)
            .sum()
    }

    fn summary(&mut self, wall_s: f64) -> Summary {
        self.latencies_us.sort_unstable();
        let at = |q: f64| {
            let n = self.latencies_us.len();
            if n == 0 {
                0
            } else {
                self.latencies_us[((n - 1) as f64 * q).round() as usize]
            }
        };
        let attempted = self.histories().iter().filter(|h| h.attempts > 0).count();
        let scheduled = self.records.count(PodStatus::Bound);
        let gpus = crate::gpu_report::GpuReport::of(self.cache());
        Summary {
            pods_total: self.placements().len(),
            scheduled,
            unschedulable: self.records.count(PodStatus::Pending),
            gated: self.records.count(PodStatus::Gated),
            other_scheduler: self.records.count(PodStatus::OtherScheduler),
            gave_up: self.records.count(PodStatus::GivenUp),
            preempted: self.preempted,
            attempts: self.attempts,
            bind_failures: self.api.bind_failures,
            retries: self.attempts.saturating_sub(attempted as u64),
            overcommitted_nodes: self.api.overcommitted_nodes(),
            schedulers: self.options.schedulers,
            event_latency_ms: self.options.event_latency.as_secs_f64() * 1e3,
            conflicts: self.conflicts.binder + self.conflicts.api,
            binder_conflicts: self.conflicts.binder,
            conflicts_by_plugin: self.conflicts.by_plugin.clone(),
            overcommits_prevented: self.conflicts.overcommits_prevented,
            wall_s,
            pods_per_sec: scheduled as f64 / wall_s.max(1e-9),
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            virtual_s: self.clock.as_secs_f64(),
            gpu_pods: gpus.gpu_pods,
            shared_cards: gpus.shared_cards,
        }
    }

    /// The first instance's cache (what it believes is bound and assumed). Once a run has
    /// ended, every instance's cache holds the same bound pods.
    pub fn cache(&self) -> &Cache {
        &self.instances[0].cache
    }

    /// DESIGN.md's invariants at the end of a run: no node was over-committed by pods this
    /// scheduler placed (a run without assume breaks this on purpose), and no pod is lost:
    /// each one is bound, or pending with the reason it is not.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.api.overcommitted_nodes() > 0 {
            return Err(format!(
                "{} nodes were over-committed",
                self.api.overcommitted_nodes()
            ));
        }
        // As for nodes, what binds did: a card the input already over-fills (bound pods
        // holding more than it has) is the cluster's state, not this scheduler's doing.
        let cards = self.api.overfilled_cards();
        if cards > 0 {
            return Err(format!("{cards} GPU cards hold more than they have"));
        }
        for (index, placement) in self.placements().iter().enumerate() {
            if placement.node.is_none() && placement.reason.is_none() {
                return Err(format!(
                    "pod {} is neither bound nor explained",
                    placement.pod
                ));
            }
            let bound = self.api.bound_pod(self.records.uid(index));
            if placement.node.is_none() && bound.is_some() {
                return Err(format!(
                    "pod {} is bound but reported pending",
                    placement.pod
                ));
            }
            if let Some(pod) = bound
                && !self.api.claims.holds_claims_of(pod)
            {
                return Err(format!(
                    "pod {} is bound without its claims allocated and reserved for it",
                    placement.pod
                ));
            }
        }
        self.api.claims.check()?;
        for (i, instance) in self.instances.iter().enumerate() {
            let dra = instance.cache.dra();
            let counts = dra.allocation_counts();
            if counts != dra.recount_allocations() || !dra.pools_agree() {
                return Err(format!(
                    "instance {i}: the cache's device index differs from a recount"
                ));
            }
            if let Some((device, n)) = counts.iter().find(|(_, n)| *n > 1) {
                return Err(format!("instance {i}: device {device} held by {n} claims"));
            }
        }
        Ok(())
    }
}

/// The annotations the scheduler wrote on the pod when it assumed it.
fn written(assumed: &Pod) -> BTreeMap<String, String> {
    assumed
        .bind_annotations
        .iter()
        .flat_map(|written| written.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Who refused a bind.
enum Refused {
    /// The binder's re-check against its instance's latest cache, by this plugin (empty
    /// when none spoke).
    ByBinder(&'static str),
    ByApi(BindRefusal),
}

/// The scheduler's Binder over the simulated API, which first applies the binder's own
/// verdict on the placement (reached before the bind): a refused placement never reaches
/// the API.
struct ApiBinder<'a> {
    api: &'a mut SimulatedApi,
    /// The binder's verdict: the refusing plugin and the message.
    check: Result<(), (&'static str, String)>,
    refused: Option<Refused>,
    /// Claim statuses PreBind wrote, for the watch.
    claims_written: Vec<ClaimChange>,
}

impl Binder for ApiBinder<'_> {
    fn write_claims(
        &mut self,
        pod: &Arc<Pod>,
        claims: &[Arc<ResourceClaim>],
        allocated_now: &[ClaimKey],
    ) -> Result<(), String> {
        if let Err((plugin, message)) = &self.check {
            self.refused = Some(Refused::ByBinder(plugin));
            return Err(message.clone());
        }
        if self.api.was_deleted(&pod.uid) {
            // Its claims went with it; the bind would be refused for the same reason.
            let refusal = BindRefusal::Deleted(pod.key());
            let message = refusal.to_string();
            self.refused = Some(Refused::ByApi(refusal));
            return Err(message);
        }
        match self.api.claims.write(claims, allocated_now) {
            Ok(changes) => {
                self.api.admit_claim_changes(&changes);
                self.claims_written.extend(changes);
                Ok(())
            }
            Err(refusal) => {
                let message = refusal.to_string();
                self.refused = Some(Refused::ByApi(BindRefusal::Constraint {
                    pod: pod.key(),
                    node: pod.node_name.unwrap_or_else(|| Sym::new("")),
                    plugin: gantry_framework::plugins::dynamic_resources::NAME,
                    message: message.clone(),
                }));
                Err(message)
            }
        }
    }

    fn bind(&mut self, pod: &Arc<Pod>, _node: Sym) -> Result<(), String> {
        if let Err((plugin, message)) = &self.check {
            self.refused = Some(Refused::ByBinder(plugin));
            return Err(message.clone());
        }
        self.api.bind(pod).map_err(|refusal| {
            let message = refusal.to_string();
            self.refused = Some(Refused::ByApi(refusal));
            message
        })
    }
}
