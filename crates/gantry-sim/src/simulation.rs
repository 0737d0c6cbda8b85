//! The simulation: the real cache, queue, scheduler and binding cycle, driven by a
//! discrete-event clock. Pods arrive and cluster events happen at virtual times; a bind
//! completes a bind latency after its pod was assumed, while later pods are scheduled in
//! the meantime, so what assume is worth shows up in the numbers.
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
use gantry_api::{Node, Pod, Sym};
use gantry_cache::Cache;
use gantry_framework::{ActionType, ApiObjects, ClusterEvent, CycleState, EventResource, Profile};
use gantry_scheduler::queue::{QueuedPod, SchedulingQueue};
use gantry_scheduler::{Attempt, Binder, Rng, Scheduler};
use serde::Serialize;

use crate::SimulatedApi;
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
}

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
    /// The binding cycle of a pod decided a bind latency earlier, after `attempts`
    /// scheduling attempts.
    BindDue {
        pod: Arc<Pod>,
        state: Box<CycleState>,
        attempts: u32,
    },
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
    cache: Arc<Cache>,
    pub scheduler: Scheduler,
    queue: SchedulingQueue,
    pub api: SimulatedApi,
    latency_rng: Rng,
    /// Sequential mode: pods waiting to be submitted.
    backlog: VecDeque<Arc<Pod>>,
    /// Sequential mode: the pod being worked on.
    current: Option<Arc<str>>,
    records: PodRecords,
    preempted: usize,
    attempts: u64,
    latencies_us: Vec<u64>,
    pub samples: Vec<Sample>,
}

impl Simulation {
    /// A simulation of `cluster`'s nodes and bound pods; its pending pods arrive at time 0.
    /// The objects move into the simulation (a million pods are not copied).
    pub fn new(
        cluster: ClusterObjects,
        profiles: Vec<Profile>,
        options: SimOptions,
    ) -> Result<Simulation, String> {
        let objects = ApiObjects::from_cluster(&cluster);
        let cache = Arc::new(Cache::new());
        let mut api = SimulatedApi::new(options.seed);
        api.capacity_check = options.capacity_check;
        api.failure_rate = options.bind_failure_rate;
        for node in cluster.nodes {
            let node = Arc::new(node);
            cache.add_node(node.clone());
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
            cache.add_pod(pod.clone()).map_err(|e| e.to_string())?;
            records.add_bound(&pod);
            api.add_bound_pod(pod);
        }
        let queue =
            SchedulingQueue::with_backoff(&profiles, options.initial_backoff, options.max_backoff);
        let mut scheduler = Scheduler::new(cache.clone(), profiles, objects, options.seed);
        scheduler.assume = options.assume;
        let latency_rng = Rng::new(options.seed ^ 0xB1_4D_1A_7E);
        let mut sim = Simulation {
            options,
            clock: Duration::ZERO,
            seq: 0,
            events: BinaryHeap::new(),
            payloads: HashMap::new(),
            external_events: 0,
            steps: 0,
            cache,
            scheduler,
            queue,
            api,
            latency_rng,
            backlog: VecDeque::new(),
            current: None,
            records,
            preempted: 0,
            attempts: 0,
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
        self.scheduler.metrics.pending_pods = {
            let p = self.queue.pending();
            [p.active, p.backoff, p.unschedulable, p.gated]
        };
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
            self.queue.flush_unschedulable_leftover(self.clock);
            if self.options.sequential && self.current.is_none() {
                self.submit_next_sequential();
            }
            if let Some(queued) = self.queue.pop(self.clock) {
                self.attempt(queued);
                cycles += 1;
                if cycles.is_multiple_of(SAMPLE_EVERY) {
                    self.sample(start);
                    progress(self.settled());
                }
                continue;
            }
            let next_event = self.events.peek().map(|Reverse((t, _))| *t);
            let next_backoff = self.queue.next_backoff_expiry();
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
        let share = |used: i64, total: i64| {
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
            pending: self.queue.len(),
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
                    pod,
                    mut state,
                    attempts,
                } => self.finish_bind(pod, &mut state, attempts),
            }
        }
        Ok(())
    }

    /// Sequential mode: submits the next pod that is not gated.
    fn submit_next_sequential(&mut self) {
        while let Some(pod) = self.backlog.pop_front() {
            let uid = pod.uid.clone();
            self.queue.add(pod, self.clock);
            if self.queue.is_gated(&uid) {
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
            SimEvent::DeletePod(key) => {
                let Some(uid) = self.records.uid_of(&key) else {
                    tracing::warn!(pod = %key, "deleting a pod the simulation does not know");
                    return Ok(());
                };
                self.backlog.retain(|p| p.uid != uid);
                if self.queue.delete(&uid)
                    && let Some(i) = self.records.index(&uid)
                {
                    self.records.set_pending(
                        i,
                        PodStatus::Pending,
                        "deleted before it was scheduled".into(),
                    );
                }
                self.delete_bound(&uid);
            }
            SimEvent::AddNode(node) => {
                if self.api.node(node.name).is_some() {
                    return Err(SimError::DuplicateNode(node.name.to_string()));
                }
                self.cache.add_node(node.clone());
                self.api.add_node(node);
                self.queue
                    .on_event(ClusterEvent::new(EventResource::Node, ActionType::ADD), now);
            }
            SimEvent::DeleteNode(name) => {
                for pod in self.api.delete_node(name) {
                    let _ = self.cache.remove_pod(&pod);
                }
                if let Err(e) = self.cache.remove_node(name) {
                    tracing::warn!(node = %name, error = %e, "deleting a node the cache does not hold");
                }
                self.queue.on_event(
                    ClusterEvent::new(EventResource::Node, ActionType::DELETE),
                    now,
                );
                self.queue.on_event(
                    ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                    now,
                );
            }
            SimEvent::DrainNode { node, recreate } => self.drain(node, recreate),
        }
        Ok(())
    }

    /// A new pod: queued, unless it is another scheduler's (never queued, as upstream
    /// leaves it alone) or gated (held, never tried).
    fn create_pod(&mut self, pod: Arc<Pod>, now: Duration) -> Result<(), SimError> {
        let index = self.records.arrive(&pod, now)?;
        if self.scheduler.profile_for(&pod).is_none() {
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
        let uid = pod.uid.clone();
        self.queue.add(pod, now);
        if self.queue.is_gated(&uid) {
            self.records
                .set_pending(index, PodStatus::Gated, GATED.into());
        }
        Ok(())
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
        self.cache.update_node(cordoned.clone());
        self.api.add_node(cordoned);
        self.queue.on_event(
            ClusterEvent::new(EventResource::Node, ActionType::UPDATE),
            now,
        );
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

    fn delete_bound(&mut self, uid: &str) {
        if let Some(pod) = self.api.delete_pod(uid) {
            if let Err(e) = self.cache.remove_pod(&pod) {
                tracing::warn!(pod = %pod.key(), error = %e, "deleted pod was not in the cache");
            }
            self.scheduler.clear_nomination(&pod);
            self.queue.on_event(
                ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                self.clock,
            );
        }
    }

    /// One scheduling cycle for a popped pod, and what follows from its outcome.
    fn attempt(&mut self, queued: QueuedPod) {
        self.attempts += 1;
        let Some(index) = self.records.index(&queued.pod.uid) else {
            tracing::error!(pod = %queued.pod.key(), "a queued pod the simulation never created");
            return;
        };
        self.records.history_mut(index).attempts += 1;
        self.scheduler.now = self.clock.as_secs() as i64;
        let started = Instant::now();
        let attempt = self.scheduler.schedule_one(&queued.pod);
        self.latencies_us.push(started.elapsed().as_micros() as u64);
        let now = self.clock;
        match attempt {
            Attempt::Scheduled { pod, state, .. } => {
                let latency = self.options.bind_latency.sample(&mut self.latency_rng);
                self.records.placement_mut(index).annotations = written(&pod);
                self.push(
                    now + latency,
                    Event::BindDue {
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
                self.queue
                    .add_unschedulable(retry, fit_error.rejecting_plugins(), now);
            }
            Attempt::Unschedulable {
                fit_error,
                nominated: None,
            } => {
                self.records.set_reason(index, fit_error.to_string());
                if self.options.sequential {
                    self.withdraw(&queued.pod);
                } else {
                    self.queue
                        .add_unschedulable(queued, fit_error.rejecting_plugins(), now);
                }
            }
            Attempt::Error(message) => {
                if self.options.sequential {
                    self.records.set_reason(index, message);
                    self.withdraw(&queued.pod);
                } else {
                    self.fail(index, queued, message);
                }
            }
        }
    }

    /// An attempt errored or its bind failed: back off and retry, or give the pod up once
    /// it has failed `MAX_FAILED_ATTEMPTS` times.
    fn fail(&mut self, index: usize, queued: QueuedPod, reason: String) {
        let history = self.records.history_mut(index);
        history.failures += 1;
        if history.failures < MAX_FAILED_ATTEMPTS {
            self.records.set_reason(index, reason);
            self.queue.add_backoff(queued, self.clock);
            return;
        }
        self.records.set_pending(
            index,
            PodStatus::GivenUp,
            format!("given up after {MAX_FAILED_ATTEMPTS} failed attempts; the last: {reason}"),
        );
        self.withdraw(&queued.pod);
    }

    /// The pod is no longer worked on: it holds nothing, and sequential mode moves on.
    fn withdraw(&mut self, pod: &Pod) {
        self.scheduler.clear_nomination(pod);
        if self.current.as_deref() == Some(&*pod.uid) {
            self.current = None;
        }
    }

    /// The binding cycle of a pod decided earlier, then the watch event for it.
    fn finish_bind(&mut self, pod: Arc<Pod>, state: &mut CycleState, attempts: u32) {
        let now = self.clock;
        let Some(index) = self.records.index(&pod.uid) else {
            tracing::error!(pod = %pod.key(), "a bind for a pod the simulation never created");
            return;
        };
        let mut binder = ApiBinder { api: &mut self.api };
        match self.scheduler.bind(&pod, state, &mut binder) {
            Ok(()) => {
                if let Err(e) = self.cache.add_pod(pod.clone()) {
                    tracing::error!(pod = %pod.key(), error = %e, "watch event for a bound pod was refused by the cache");
                }
                if let Some(node) = pod.node_name {
                    self.records.set_bound(index, node, now);
                }
                if self.current.as_deref() == Some(&*pod.uid) {
                    self.current = None;
                }
                self.queue.on_event(
                    ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
                    now,
                );
            }
            Err(failure) => {
                if failure.forgotten {
                    self.queue.assumed_pod_forgotten(now);
                }
                // Back as submitted: the next attempt writes its own annotations.
                self.records.placement_mut(index).annotations.clear();
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
                self.fail(index, queued, format!("binding rejected: {failure}"));
            }
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
        let gpus = crate::gpu_report::GpuReport::of(&self.cache);
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

    /// The scheduler's cache (what it believes is bound and assumed).
    pub fn cache(&self) -> &Cache {
        &self.cache
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
        let cards = crate::GpuReport::of(&self.cache).overcommitted_cards;
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
            let bound = self.api.bound_pod(self.records.uid(index)).is_some();
            if placement.node.is_none() && bound {
                return Err(format!(
                    "pod {} is bound but reported pending",
                    placement.pod
                ));
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

/// The scheduler's Binder over the simulated API.
struct ApiBinder<'a> {
    api: &'a mut SimulatedApi,
}

impl Binder for ApiBinder<'_> {
    fn bind(&mut self, pod: &Arc<Pod>, _node: Sym) -> Result<(), String> {
        self.api.bind(pod)
    }
}
