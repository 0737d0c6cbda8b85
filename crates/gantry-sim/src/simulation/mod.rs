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
use gantry_api::dra::ClaimKey;
use gantry_api::{Node, Pod, Sym};
use gantry_framework::{ApiObjects, CycleState, Profile};
use gantry_scheduler::Rng;
use gantry_scheduler::queue::QueuedPod;
use gantry_scheduler::shard::Shard;
use serde::Serialize;

use crate::SimulatedApi;
use crate::api_client::TokenBucket;
use crate::claims::ClaimChange;
use crate::driver_binding::{Answer, DriverBinding};
use crate::instance::{Instance, InstanceConfig, WatchEvent};
use crate::latency::BindLatency;
use crate::records::{DuplicatePod, PodRecords};

mod binding;
mod binding_conditions;
mod events;
mod preemption;
mod recorded;
mod report;
mod waiting;

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
    /// Remember the verdicts of node-local plugins for runs of like pods (Gantry's own
    /// shortcut; the decisions are the same either way).
    pub remember_verdicts: bool,
    /// Submit pods one at a time, each after the previous was bound or found
    /// unschedulable; an unschedulable pod is withdrawn (the parity procedure).
    pub sequential: bool,
    /// Virtual time from a scheduling decision to the bind's completion.
    pub bind_latency: BindLatency,
    /// Each scheduler's API client rate limit, which its binds and preemptions' calls wait
    /// for, and its scheduling loop for a failed pod's status patch (kube-scheduler's
    /// `clientConnection`); `None`: the client is not modelled, and calls never wait.
    pub client_rate: Option<gantry_framework::config::ClientRate>,
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
    /// Samples also read the GPU cards (a walk over every node each time): for reports.
    pub sample_gpus: bool,
    /// How the simulated DRA drivers answer devices' binding conditions.
    pub driver_binding: DriverBinding,
}

/// The most scheduler instances a simulation runs.
pub const MAX_SCHEDULERS: u32 = 64;

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            seed: 0,
            assume: true,
            remember_verdicts: true,
            sequential: false,
            bind_latency: BindLatency::REALISTIC,
            client_rate: None,
            bind_failure_rate: 0.0,
            capacity_check: false,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            step_limit: None,
            schedulers: 1,
            event_latency: Duration::ZERO,
            sample_gpus: false,
            driver_binding: DriverBinding::default(),
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
    #[error(
        "schedulers: Coscheduling is modelled for one scheduler instance, not {0}: instances dividing the pods would each hold part of a gang at Permit"
    )]
    CoschedulingWithInstances(u32),
    #[error(
        "sequential: Coscheduling holds a gang's pods at Permit until its siblings come, which submitting pods one at a time never does"
    )]
    CoschedulingSequential,
}

/// Things that happen to the cluster at a virtual time.
#[derive(Debug, Clone)]
pub enum SimEvent {
    /// A pending pod is created.
    CreatePod(Arc<Pod>),
    /// A pod (pending or bound) is deleted, by `namespace/name`.
    DeletePod(String),
    /// A bound pod is marked for deletion, by `namespace/name` (a recorded
    /// `deletionTimestamp`): it keeps its room until deleted, but PodTopologySpread no longer
    /// counts it. A pending pod's mark is ignored (its deletion follows).
    MarkTerminating(String),
    AddNode(Arc<Node>),
    /// The node changes (relabelled, cordoned, resized); its pods stay.
    UpdateNode(Arc<Node>),
    /// The node and the pods bound to it are deleted.
    DeleteNode(Sym),
    /// The node is cordoned and its pods are evicted (and re-created as pending pods when
    /// `recreate` says so, as their controllers would).
    DrainNode {
        node: Sym,
        recreate: bool,
    },
    /// A PodGroup is created.
    CreatePodGroup(Arc<gantry_api::PodGroup>),
    /// A PodGroup of scheduler-plugins' Coscheduling is created.
    CreateCoschedulingGroup(Arc<gantry_api::coscheduling::CoschedulingGroup>),
    /// A pod no simulated profile schedules is bound where it names (by another
    /// scheduler, or created bound), as a replayed trace recorded it: it takes its place.
    PlacedElsewhere(Arc<Pod>),
    /// A user creates a ResourceClaim (one a pod's template makes is the simulation's
    /// claim controller's work).
    CreateClaim(Arc<gantry_api::dra::ResourceClaim>),
    /// A user deletes a ResourceClaim (pods still using it keep it; no new pod may).
    DeleteClaim(gantry_api::dra::ClaimKey),
    /// A driver publishes a ResourceSlice, or a new version of it (by name).
    SetResourceSlice(Arc<gantry_api::dra::ResourceSlice>),
    /// A driver withdraws a ResourceSlice (by name).
    DeleteResourceSlice(Sym),
    /// A DeviceClass is created or changed (by name).
    SetDeviceClass(Arc<gantry_api::dra::DeviceClass>),
    DeleteDeviceClass(Sym),
    /// A volume, volume claim, storage class or CSINode is created, changed or deleted.
    Storage(crate::StorageChange),
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
        /// The pod as popped, with its attempts and failures so far.
        queued: QueuedPod,
    },
    /// The binding cycles of a gang's members that `instance` scheduled together, with
    /// several instances sharing the cluster: checked together, then bound or refused
    /// together.
    GangBindDue {
        instance: usize,
        members: Vec<(Arc<Pod>, Box<CycleState>, QueuedPod)>,
    },
    /// PreBind looks at the claims of a pod waiting for their binding conditions for the
    /// last time: the wait ends (bound, failed or timed out).
    BindingConditionsDue {
        instance: usize,
        pod: Arc<Pod>,
        state: Box<CycleState>,
        queued: QueuedPod,
        /// A look of PreBind's ends the wait (rather than its context's deadline).
        by_look: bool,
    },
    /// The simulated drivers answer the binding conditions of these claims.
    DriverAnswers {
        claims: Vec<ClaimKey>,
        answer: Answer,
    },
    /// A change at the API reaching the instances' watches.
    Watch(WatchEvent),
    /// A background preemption of the pod at `index` (or of its pod group, every member
    /// held back) deleted victims.
    VictimsDeleted {
        instance: usize,
        index: usize,
        preemptor: gantry_scheduler::queue::Preemptor,
        deleted: preemption::Deleted,
    },
    /// The wait at Permit of the pod (its wait numbered `seq`) runs out.
    PermitTimeout {
        uid: Arc<str>,
        seq: u64,
    },
    /// The instance's scheduling loop, which waited for a token of its client to write a
    /// failed pod's status, goes on.
    LoopFree,
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
    /// Of the free GPU memory, the share on cards already in use (`sample_gpus` only;
    /// `None` without free card memory).
    pub gpu_memory_stranded: Option<f64>,
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
    /// Each instance's API client rate limit (`None`: unlimited).
    clients: Vec<Option<TokenBucket>>,
    /// Until when each instance's scheduling loop waits for its client (see
    /// `binding::Simulation::write_failure`).
    loop_waits_until: Vec<Duration>,
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
    /// Pods waiting at Permit.
    waiting: waiting::WaitingPods,
    /// A replay's recorded bindings, and why the simulation placed pods elsewhere.
    recorded: recorded::RecordedNodes,
    /// The storage objects as the API holds them (a replayed trace changes them).
    storage: crate::storage::StorageState,
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
        let coscheduling = profiles
            .iter()
            .any(|p| p.queue_sort == gantry_framework::QueueSort::Coscheduling);
        if coscheduling && options.schedulers > 1 {
            return Err(SimError::CoschedulingWithInstances(options.schedulers).to_string());
        }
        if coscheduling && options.sequential {
            return Err(SimError::CoschedulingSequential.to_string());
        }
        let objects = ApiObjects::from_cluster(&cluster);
        let storage = crate::storage::StorageState::new(
            &cluster.pvs,
            &cluster.pvcs,
            &cluster.storage_classes,
            &cluster.csi_nodes,
        );
        let config = InstanceConfig {
            profiles: &profiles,
            objects: &objects,
            initial_backoff: options.initial_backoff,
            max_backoff: options.max_backoff,
            assume: options.assume,
            remember_verdicts: options.remember_verdicts,
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
        let mut records = PodRecords::default();
        for group in cluster.pod_groups {
            records.add_group(gantry_cache::GroupKey::of_group(&group), Duration::ZERO);
            let group = Arc::new(group);
            for instance in &instances {
                instance.cache.pod_groups().lock().set_group(group.clone());
            }
        }
        // Coscheduling orders groups by age: those read at the start were created before
        // it, in the order of their creation timestamps.
        let newest = cluster
            .coscheduling_groups
            .iter()
            .map(|g| g.created)
            .max()
            .unwrap_or(0);
        for group in cluster.coscheduling_groups {
            let created = (i128::from(group.created) - i128::from(newest) - 1) * 1_000_000_000;
            let group = Arc::new(group);
            for instance in &instances {
                instance
                    .cache
                    .pod_groups()
                    .lock()
                    .set_coscheduling_group(group.clone(), created);
            }
        }
        for node in cluster.nodes {
            let node = Arc::new(node);
            for instance in &instances {
                instance.cache.add_node(node.clone());
            }
            api.add_node(node);
        }
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
        let bucket = options.client_rate.and_then(TokenBucket::new);
        let clients = vec![bucket; instances.len()];
        let loop_waits_until = vec![Duration::ZERO; instances.len()];
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
            clients,
            loop_waits_until,
            backlog: VecDeque::new(),
            current: None,
            records,
            preempted: 0,
            attempts: 0,
            conflicts: Conflicts::default(),
            latencies_us: Vec::new(),
            samples: Vec::new(),
            waiting: waiting::WaitingPods::new(),
            recorded: recorded::RecordedNodes::default(),
            storage,
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

    /// When `sequential` rounds of `parallel` API calls side by side, each round made
    /// when the one before is done, starting at `at`, are done: every call waits for a
    /// token of the instance's client, and a round takes one call's latency.
    fn api_calls(
        &mut self,
        instance: usize,
        at: Duration,
        parallel: usize,
        sequential: u32,
    ) -> Duration {
        let mut done = at;
        for _ in 0..sequential {
            let mut go = done;
            if let Some(bucket) = &mut self.clients[instance] {
                for _ in 0..parallel {
                    go = bucket.reserve(done);
                }
            }
            let latency = self.options.bind_latency.sample(&mut self.latency_rng);
            done = go.saturating_add(latency);
        }
        done
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
            for instance in &mut self.instances {
                instance.scheduler.clock = self.clock;
            }
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
            self.discard_stale_timeouts();
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
            if self.loop_waits_until[index] > self.clock {
                continue;
            }
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
            gpu_memory_stranded: self
                .options
                .sample_gpus
                .then(|| crate::gpu_report::stranded_memory_share(self.cache()))
                .flatten(),
        });
    }
}
