//! The simulation: the real cache, queue, scheduler and binding cycle, driven by a
//! discrete-event clock. Pods arrive and cluster events happen at virtual times; a bind
//! completes `bind_latency` after its pod was assumed, while later pods are scheduled in
//! the meantime, so what assume is worth shows up in the numbers.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry_api::decode::ClusterObjects;
use gantry_api::{Node, Pod, Sym};
use gantry_cache::Cache;
use gantry_framework::{ActionType, ApiObjects, ClusterEvent, CycleState, EventResource, Profile};
use gantry_scheduler::queue::{QueuedPod, SchedulingQueue};
use gantry_scheduler::{Attempt, Binder, Scheduler};
use serde::Serialize;

use crate::SimulatedApi;

/// Where one pod went, in the format of the parity scenarios' `expected.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub pod: String,
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evicted: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct SimOptions {
    pub seed: u64,
    /// Assume decided pods before binding (kube-scheduler's behaviour).
    pub assume: bool,
    /// Submit pods one at a time, each after the previous was bound or found
    /// unschedulable; an unschedulable pod is withdrawn (the parity procedure).
    pub sequential: bool,
    /// Virtual time from a scheduling decision to the bind's completion.
    pub bind_latency: Duration,
    /// Share of binds the API refuses at random.
    pub bind_failure_rate: f64,
    /// The API refuses binds that would over-commit a node.
    pub capacity_check: bool,
    /// The queue's backoff after a failed attempt: initial, doubling up to the maximum.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            seed: 0,
            assume: true,
            sequential: false,
            bind_latency: Duration::ZERO,
            bind_failure_rate: 0.0,
            capacity_check: false,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
        }
    }
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

enum Event {
    External(SimEvent),
    /// The binding cycle of a pod decided `bind_latency` earlier.
    BindDue {
        pod: Arc<Pod>,
        state: Box<CycleState>,
    },
}

/// The outcome of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub pods_total: usize,
    pub scheduled: usize,
    pub unschedulable: usize,
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
}

/// Over time: for plots of throughput and pending pods.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    pub virtual_s: f64,
    pub wall_s: f64,
    pub scheduled: usize,
    pub pending: usize,
}

pub struct Simulation {
    options: SimOptions,
    clock: Duration,
    seq: u64,
    events: BinaryHeap<Reverse<(Duration, u64)>>,
    payloads: HashMap<u64, Event>,
    cache: Arc<Cache>,
    pub scheduler: Scheduler,
    queue: SchedulingQueue,
    pub api: SimulatedApi,
    /// Sequential mode: pods waiting to be submitted.
    backlog: VecDeque<Arc<Pod>>,
    /// Sequential mode: the pod being worked on.
    current: Option<Arc<str>>,
    placements: Vec<Placement>,
    placement_index: HashMap<Arc<str>, usize>,
    /// Pods known to the simulation by namespace and name (the name shared with the
    /// pod, not copied), with their uid.
    names: HashMap<(Sym, Arc<str>), Arc<str>>,
    pods_total: usize,
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
        let mut names = HashMap::new();
        let mut pending = Vec::new();
        for pod in cluster.pods {
            if pod.node_name.is_none() {
                pending.push(pod);
                continue;
            }
            let pod = Arc::new(pod);
            cache.add_pod(pod.clone()).map_err(|e| e.to_string())?;
            names.insert((pod.namespace, pod.name.clone()), pod.uid.clone());
            api.add_bound_pod(pod);
        }
        let queue =
            SchedulingQueue::with_backoff(&profiles, options.initial_backoff, options.max_backoff);
        let mut scheduler = Scheduler::new(cache.clone(), profiles, objects, options.seed);
        scheduler.assume = options.assume;
        let mut sim = Simulation {
            options,
            clock: Duration::ZERO,
            seq: 0,
            events: BinaryHeap::new(),
            payloads: HashMap::new(),
            cache,
            scheduler,
            queue,
            api,
            backlog: VecDeque::new(),
            current: None,
            placements: Vec::new(),
            placement_index: HashMap::new(),
            names,
            pods_total: 0,
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
        self.push(at, Event::External(event));
    }

    fn push(&mut self, at: Duration, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq)));
        self.payloads.insert(self.seq, event);
    }

    /// Runs until nothing can happen any more; returns the summary.
    pub fn run(&mut self) -> Summary {
        self.run_with_progress(|_| {})
    }

    /// As `run`, calling `progress` with the number of pods bound so far now and then.
    pub fn run_with_progress(&mut self, progress: impl FnMut(usize)) -> Summary {
        let start = Instant::now();
        self.advance(None, progress, start);
        self.scheduler.metrics.pending_pods = {
            let p = self.queue.pending();
            [p.active, p.backoff, p.unschedulable, p.gated]
        };
        self.summary(start.elapsed().as_secs_f64())
    }

    /// Runs everything due up to virtual time `until` (benchmarks use it to settle the
    /// init pods before measuring).
    pub fn run_until(&mut self, until: Duration) {
        self.advance(Some(until), |_| {}, Instant::now());
    }

    fn advance(
        &mut self,
        until: Option<Duration>,
        mut progress: impl FnMut(usize),
        start: Instant,
    ) {
        let mut cycles = 0u64;
        loop {
            self.deliver_due_events();
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
            self.clock = self.clock.max(next);
        }
        self.sample(start);
        progress(self.settled());
    }

    /// Pods bound through the API so far (the progress measure).
    fn settled(&self) -> usize {
        self.api.binds as usize
    }

    fn sample(&mut self, start: Instant) {
        self.samples.push(Sample {
            virtual_s: self.clock.as_secs_f64(),
            wall_s: start.elapsed().as_secs_f64(),
            scheduled: self.settled(),
            pending: self.queue.len(),
        });
    }

    fn deliver_due_events(&mut self) {
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
                Event::External(e) => self.apply(e),
                Event::BindDue { pod, mut state } => self.finish_bind(pod, &mut state),
            }
        }
    }

    fn submit_next_sequential(&mut self) {
        if let Some(pod) = self.backlog.pop_front() {
            self.current = Some(pod.uid.clone());
            self.queue.add(pod, self.clock);
        }
    }

    fn apply(&mut self, event: SimEvent) {
        let now = self.clock;
        match event {
            SimEvent::CreatePod(pod) => {
                self.pods_total += 1;
                self.names
                    .insert((pod.namespace, pod.name.clone()), pod.uid.clone());
                if self.options.sequential {
                    self.backlog.push_back(pod);
                } else {
                    self.queue.add(pod, now);
                }
            }
            SimEvent::DeletePod(key) => {
                let Some(uid) = self.uid_of(&key) else {
                    tracing::warn!(pod = %key, "deleting a pod the simulation does not know");
                    return;
                };
                if self.queue.delete(&uid) {
                    self.note_reason(&uid, "deleted before it was scheduled".into());
                }
                self.delete_bound(&uid);
            }
            SimEvent::AddNode(node) => {
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
            SimEvent::DrainNode { node, recreate } => {
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
                let evicted: Vec<Arc<Pod>> = self
                    .api
                    .bound_pods()
                    .filter(|p| p.node_name == Some(node))
                    .cloned()
                    .collect();
                for pod in evicted {
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

    fn placement(&mut self, pod: &Pod) -> &mut Placement {
        let index = *self
            .placement_index
            .entry(pod.uid.clone())
            .or_insert_with(|| {
                self.placements.push(Placement {
                    pod: pod.key(),
                    node: None,
                    reason: None,
                    evicted: Vec::new(),
                });
                self.placements.len() - 1
            });
        &mut self.placements[index]
    }

    fn note_reason(&mut self, uid: &str, reason: String) {
        if let Some(&i) = self.placement_index.get(uid) {
            self.placements[i].reason = Some(reason);
        }
    }

    /// One scheduling cycle for a popped pod, and what follows from its outcome.
    fn attempt(&mut self, queued: QueuedPod) {
        self.attempts += 1;
        self.placement(&queued.pod);
        let started = Instant::now();
        let attempt = self.scheduler.schedule_one(&queued.pod);
        self.latencies_us.push(started.elapsed().as_micros() as u64);
        let now = self.clock;
        match attempt {
            Attempt::Scheduled { pod, state, .. } => {
                self.push(
                    now + self.options.bind_latency,
                    Event::BindDue { pod, state },
                );
            }
            Attempt::Unschedulable {
                fit_error,
                nominated: Some((node, victims)),
            } => {
                let reason = fit_error.to_string();
                for victim in &victims {
                    self.delete_bound(&victim.uid);
                    self.preempted += 1;
                    self.placement(&queued.pod).evicted.push(victim.key());
                }
                let mut retry = queued.clone();
                let mut nominated = Pod::clone(&queued.pod);
                nominated.nominated_node_name = Some(node);
                retry.pod = Arc::new(nominated);
                self.placement(&queued.pod).reason = Some(reason);
                self.queue
                    .add_unschedulable(retry, fit_error.rejecting_plugins(), now);
            }
            Attempt::Unschedulable {
                fit_error,
                nominated: None,
            } => {
                self.placement(&queued.pod).reason = Some(fit_error.to_string());
                if self.options.sequential {
                    self.withdraw(&queued.pod);
                } else {
                    self.queue
                        .add_unschedulable(queued, fit_error.rejecting_plugins(), now);
                }
            }
            Attempt::Error(message) => {
                self.placement(&queued.pod).reason = Some(message);
                if self.options.sequential {
                    self.withdraw(&queued.pod);
                } else {
                    self.queue.add_backoff(queued, now);
                }
            }
        }
    }

    /// Sequential mode: an unschedulable pod is deleted; it holds nothing.
    fn withdraw(&mut self, pod: &Pod) {
        self.scheduler.clear_nomination(pod);
        self.current = None;
    }

    /// The binding cycle of a pod decided earlier, then the watch event for it.
    fn finish_bind(&mut self, pod: Arc<Pod>, state: &mut CycleState) {
        let now = self.clock;
        let mut binder = ApiBinder { api: &mut self.api };
        match self.scheduler.bind(&pod, state, &mut binder) {
            Ok(()) => {
                if let Err(e) = self.cache.add_pod(pod.clone()) {
                    tracing::error!(pod = %pod.key(), error = %e, "watch event for a bound pod was refused by the cache");
                }
                let node = pod.node_name.map(|n| n.to_string());
                let placement = self.placement(&pod);
                placement.node = node;
                placement.reason = None;
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
                self.placement(&pod).reason = Some(format!("binding rejected: {failure}"));
                let mut pending = Pod::clone(&pod);
                pending.node_name = None;
                let queued = QueuedPod {
                    pod: Arc::new(pending),
                    timestamp: now,
                    attempts: 1,
                    initial_attempt: Some(now),
                    unschedulable_plugins: Vec::new(),
                    cycle: 0,
                };
                self.queue.add_backoff(queued, now);
            }
        }
    }

    /// The uid of the pod named `namespace/name`.
    fn uid_of(&self, key: &str) -> Option<Arc<str>> {
        let (namespace, name) = key.split_once('/')?;
        self.names
            .get(&(Sym::get(namespace)?, Arc::from(name)))
            .cloned()
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

    pub fn placements(&self) -> &[Placement] {
        &self.placements
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
        let scheduled = self.placements.iter().filter(|p| p.node.is_some()).count();
        let attempted: usize = self.placements.len();
        Summary {
            pods_total: self.pods_total,
            scheduled,
            unschedulable: self.placements.iter().filter(|p| p.node.is_none()).count(),
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
        }
    }

    /// DESIGN.md's invariants at the end of a run: no node was over-committed by pods this
    /// scheduler placed (a run without assume breaks this on purpose), and no pod is lost:
    /// each one is bound, or pending with the reason it did not fit.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.api.overcommitted_nodes() > 0 {
            return Err(format!(
                "{} nodes were over-committed",
                self.api.overcommitted_nodes()
            ));
        }
        for placement in &self.placements {
            let uid = self.uid_of(&placement.pod);
            let bound = uid.is_some_and(|u| self.api.bound_pod(&u).is_some());
            match (&placement.node, &placement.reason) {
                (Some(_), _) | (None, Some(_)) => {}
                (None, None) => {
                    return Err(format!(
                        "pod {} is neither bound nor explained",
                        placement.pod
                    ));
                }
            }
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

/// The scheduler's Binder over the simulated API.
struct ApiBinder<'a> {
    api: &'a mut SimulatedApi,
}

impl Binder for ApiBinder<'_> {
    fn bind(&mut self, pod: &Arc<Pod>, _node: Sym) -> Result<(), String> {
        self.api.bind(pod)
    }
}
