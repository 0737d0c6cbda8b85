//! `gantry bench multi`: N scheduler instances on real threads share one in-process API,
//! as `gantry run --shard I/N` instances share a cluster. Each instance keeps its full
//! cache from the API's stream of binds (every instance applies every bind), owns the pods
//! whose UID hashes to it, decides on its own snapshot, and binds through a per-node fence:
//! it waits until its cache has seen the last bind to the node, re-checks the placement
//! there ([`Scheduler::check_placement`]), and binds only if no other bind to that node came
//! in between (compare and set under the API's lock). Refused placements are conflicts:
//! forgotten and requeued. The API never refuses an over-commit itself: the count of
//! over-committed nodes is what the instances let through.
//!
//! Each instance thread also reports the time it ran on a core and the time it was ready
//! but waited for one (Linux's `/proc/thread-self/schedstat`): on a shared machine the
//! second, not the scheduler, often decides the wall-clock figure.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use gantry_api::{Container, Node, Pod, Resources, Sym};
use gantry_cache::Cache;
use gantry_framework::plugins::default_profile;
use gantry_framework::{ActionType, ApiObjects, ClusterEvent, EventResource};
use gantry_scheduler::queue::SchedulingQueue;
use gantry_scheduler::shard::owner;
use gantry_scheduler::{Attempt, Scheduler};
use parking_lot::Mutex;
use serde::Serialize;

const MIB: i64 = 1024 * 1024;
/// Backoff after a conflict or a failed attempt (shorter than upstream's 1 s, so that the
/// figure measures deciding and binding, not waiting).
const INITIAL_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(100);
/// How long a binder waits for its cache to see the fence's pod before giving up.
const FENCE_WAIT: Duration = Duration::from_secs(2);
/// Fence moves a binder tries before it counts the placement as a conflict.
const FENCE_ATTEMPTS: usize = 5;

#[derive(Debug, Clone, Serialize)]
pub struct MultiResult {
    pub schedulers: u32,
    pub nodes: usize,
    pub pods: usize,
    pub scheduled: usize,
    pub pods_per_sec: f64,
    /// Placements refused by the binder's re-check, or the fence staying contended.
    pub conflicts: u64,
    /// Conflicts per bind attempted.
    pub conflict_rate: f64,
    pub overcommitted_nodes: usize,
    pub wall_s: f64,
    /// Time the instance threads ran on a core, summed (`null` without /proc).
    pub cpu_s: Option<f64>,
    /// Time the instance threads were ready to run but waited for a core, summed: other
    /// processes' share of the machine (`null` without /proc).
    pub run_queue_wait_s: Option<f64>,
}

/// What one instance thread did.
#[derive(Default)]
struct InstanceOutcome {
    conflicts: u64,
    bind_attempts: u64,
    bound: usize,
    times: Option<ThreadTimes>,
}

/// Time a thread ran on a core and time it waited, ready, for one.
#[derive(Clone, Copy, Default)]
struct ThreadTimes {
    on_cpu: Duration,
    waiting: Duration,
}

impl ThreadTimes {
    /// The calling thread's times so far, from `/proc/thread-self/schedstat` (nanoseconds
    /// on a core, then waiting on a run queue).
    fn of_this_thread() -> Option<ThreadTimes> {
        let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        let mut fields = text.split_whitespace().map(str::parse::<u64>);
        let on_cpu = fields.next()?.ok()?;
        let waiting = fields.next()?.ok()?;
        Some(ThreadTimes {
            on_cpu: Duration::from_nanos(on_cpu),
            waiting: Duration::from_nanos(waiting),
        })
    }

    fn since(self, start: ThreadTimes) -> ThreadTimes {
        ThreadTimes {
            on_cpu: self.on_cpu.saturating_sub(start.on_cpu),
            waiting: self.waiting.saturating_sub(start.waiting),
        }
    }
}

/// The shared in-process API: nodes, binds, the per-node fences, and the stream of
/// binds every instance watches.
struct Api {
    allocatable: HashMap<Sym, Resources>,
    used: HashMap<Sym, (Resources, i64)>,
    bound: HashSet<Arc<str>>,
    fences: HashMap<Sym, Arc<str>>,
    watchers: Vec<Sender<Arc<Pod>>>,
    overcommitted: HashSet<Sym>,
}

enum Refusal {
    FenceMoved,
    AlreadyBound,
}

impl Api {
    /// Binds if the node's fence is still `expected`; records an over-commit if the
    /// instances let one through; streams the bind to every instance (in bind order).
    fn bind(
        &mut self,
        pod: &Arc<Pod>,
        node: Sym,
        expected: Option<&Arc<str>>,
    ) -> Result<(), Refusal> {
        if self.fences.get(&node) != expected {
            return Err(Refusal::FenceMoved);
        }
        if !self.bound.insert(pod.uid.clone()) {
            return Err(Refusal::AlreadyBound);
        }
        let (used, count) = self.used.entry(node).or_default();
        used.add(pod.requests());
        *count += 1;
        let allocatable = &self.allocatable[&node];
        if used.milli_cpu > allocatable.milli_cpu
            || used.memory > allocatable.memory
            || *count > allocatable.pods
        {
            self.overcommitted.insert(node);
        }
        self.fences.insert(node, pod.uid.clone());
        for watcher in &self.watchers {
            let _ = watcher.send(pod.clone());
        }
        Ok(())
    }
}

fn cluster(nodes: usize) -> Vec<Arc<Node>> {
    (0..nodes)
        .map(|i| {
            let name = format!("node-{i}");
            let mut allocatable = Resources::new(4000, 32 * 1024 * MIB);
            allocatable.pods = 110;
            Arc::new(Node::new(&name, allocatable).with_labels([
                ("kubernetes.io/hostname", name.as_str()),
                (
                    "topology.kubernetes.io/zone",
                    ["zone-a", "zone-b", "zone-c"][i % 3],
                ),
            ]))
        })
        .collect()
}

/// Pods of one cpu: the cluster has four slots per node, and `fill_percent` of them are
/// asked for, so that the last placements contend.
fn pods(nodes: usize, fill_percent: usize) -> Vec<Arc<Pod>> {
    (0..nodes * 4 * fill_percent / 100)
        .map(|i| {
            let mut pod = Pod::new("bench", &format!("pod-{i}")).with_container(Container::new(
                "c",
                Some(1000),
                Some(500 * MIB),
            ));
            pod.uid = Arc::from(format!("bench-uid-{i:08}"));
            Arc::new(pod)
        })
        .collect()
}

struct Instance {
    scheduler: Scheduler,
    queue: SchedulingQueue,
    cache: Arc<Cache>,
    binds: Receiver<Arc<Pod>>,
    seen: HashSet<Arc<str>>,
    api: Arc<Mutex<Api>>,
    start: Instant,
    conflicts: u64,
    bind_attempts: u64,
    bound: usize,
}

impl Instance {
    /// Applies the binds streamed so far (as a watch event handler would).
    fn apply_binds(&mut self) {
        while let Ok(pod) = self.binds.try_recv() {
            self.apply(pod);
        }
    }

    fn apply(&mut self, pod: Arc<Pod>) {
        self.seen.insert(pod.uid.clone());
        if let Err(error) = self.cache.add_pod(pod) {
            tracing::debug!(%error, "bind already in the cache");
        }
        self.queue.on_event(
            ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
            self.start.elapsed(),
        );
    }

    /// Runs until no pod of its own is left to try.
    fn run(mut self) -> InstanceOutcome {
        let times_at_start = ThreadTimes::of_this_thread();
        loop {
            self.apply_binds();
            let now = self.start.elapsed();
            let Some(queued) = self.queue.pop(now) else {
                let pending = self.queue.pending();
                if pending.active == 0 && pending.backoff == 0 {
                    break;
                }
                let wait = self
                    .queue
                    .next_backoff_expiry()
                    .map_or(Duration::from_millis(1), |at| at.saturating_sub(now));
                if let Ok(pod) = self
                    .binds
                    .recv_timeout(wait.max(Duration::from_micros(100)))
                {
                    self.apply(pod);
                }
                continue;
            };
            match self.scheduler.schedule_one(&queued.pod) {
                Attempt::Scheduled { pod, state, .. } => {
                    let Some(cycle) = self.scheduler.binding_cycle(pod.clone(), state) else {
                        continue;
                    };
                    self.bind_attempts += 1;
                    match self.bind_through_fence(&pod, cycle.node()) {
                        Ok(()) => {
                            let _ = cycle.finish(Ok(()));
                            self.bound += 1;
                        }
                        Err(message) => {
                            self.conflicts += 1;
                            // The room it held is free again for this instance's pods.
                            if let Err(failure) = cycle.finish(Err(message))
                                && failure.forgotten
                            {
                                self.queue.assumed_pod_forgotten(self.start.elapsed());
                            }
                            self.queue.add_backoff(queued, self.start.elapsed());
                        }
                    }
                }
                Attempt::Unschedulable { fit_error, .. } => {
                    let plugins = fit_error.rejecting_plugins();
                    self.queue.add_unschedulable(queued, plugins, now);
                }
                Attempt::Error(_) | Attempt::GroupRejected { .. } => {
                    self.queue.add_backoff(queued, now)
                }
            }
        }
        let times = ThreadTimes::of_this_thread()
            .zip(times_at_start)
            .map(|(now, start)| now.since(start));
        InstanceOutcome {
            conflicts: self.conflicts,
            bind_attempts: self.bind_attempts,
            bound: self.bound,
            times,
        }
    }

    /// The fence protocol of `gantry run` (see `gantry-kube`'s `fence`), in process.
    fn bind_through_fence(&mut self, pod: &Arc<Pod>, node: Sym) -> Result<(), String> {
        for _ in 0..FENCE_ATTEMPTS {
            let fence = self.api.lock().fences.get(&node).cloned();
            if let Some(previous) = &fence {
                let deadline = Instant::now() + FENCE_WAIT;
                while !self.seen.contains(previous) && Instant::now() < deadline {
                    if let Ok(bound) = self.binds.recv_timeout(Duration::from_millis(1)) {
                        self.apply(bound);
                    }
                }
            }
            self.scheduler
                .check_placement(pod)
                .map_err(|status| status.message())?;
            match self.api.lock().bind(pod, node, fence.as_ref()) {
                Ok(()) => return Ok(()),
                Err(Refusal::FenceMoved) => continue,
                Err(Refusal::AlreadyBound) => {
                    return Err(format!("pod {} is already bound", pod.key()));
                }
            }
        }
        Err(format!("node {node} stayed contended"))
    }
}

/// Slots of node-default for the one-cpu pods.
pub const SLOTS_PER_NODE: usize = 4;

/// Runs `schedulers` instances over `nodes` nodes whose slots the pods fill to
/// `fill_percent` (above 100, some pods stay pending and the full nodes contend).
pub fn run(schedulers: u32, nodes: usize, fill_percent: usize) -> MultiResult {
    let schedulers = schedulers.max(1);
    let nodes_list = cluster(nodes);
    let all_pods = pods(nodes, fill_percent);
    let api = Arc::new(Mutex::new(Api {
        allocatable: nodes_list
            .iter()
            .map(|n| (n.name, n.allocatable.clone()))
            .collect(),
        used: HashMap::new(),
        bound: HashSet::new(),
        fences: HashMap::new(),
        watchers: Vec::new(),
        overcommitted: HashSet::new(),
    }));
    let profiles = vec![default_profile(gantry_api::DEFAULT_SCHEDULER_NAME)];
    let start = Instant::now();
    let mut instances = Vec::new();
    for index in 0..schedulers {
        let (tx, rx) = channel();
        api.lock().watchers.push(tx);
        let cache = Arc::new(Cache::new());
        for node in &nodes_list {
            cache.add_node(node.clone());
        }
        let queue = SchedulingQueue::with_backoff(&profiles, INITIAL_BACKOFF, MAX_BACKOFF);
        let mut scheduler = Scheduler::new(
            cache.clone(),
            profiles.clone(),
            ApiObjects::default(),
            u64::from(index),
        );
        scheduler.random_ties = schedulers > 1;
        instances.push(Instance {
            scheduler,
            queue,
            cache,
            binds: rx,
            seen: HashSet::new(),
            api: api.clone(),
            start,
            conflicts: 0,
            bind_attempts: 0,
            bound: 0,
        });
    }
    for pod in &all_pods {
        let index = owner(&pod.uid, schedulers) as usize;
        instances[index].queue.add(pod.clone(), Duration::ZERO);
    }
    let start = Instant::now();
    let handles: Vec<_> = instances
        .into_iter()
        .map(|mut instance| {
            instance.start = start;
            std::thread::spawn(move || instance.run())
        })
        .collect();
    let outcomes: Vec<InstanceOutcome> = handles
        .into_iter()
        .map(|handle| handle.join().expect("an instance thread does not panic"))
        .collect();
    let wall_s = start.elapsed().as_secs_f64();
    let conflicts: u64 = outcomes.iter().map(|o| o.conflicts).sum();
    let attempts: u64 = outcomes.iter().map(|o| o.bind_attempts).sum();
    let scheduled: usize = outcomes.iter().map(|o| o.bound).sum();
    let times: Option<Vec<ThreadTimes>> = outcomes.iter().map(|o| o.times).collect();
    let total = |time: fn(&ThreadTimes) -> Duration| {
        times
            .as_ref()
            .map(|t| t.iter().map(time).sum::<Duration>().as_secs_f64())
    };
    let overcommitted_nodes = api.lock().overcommitted.len();
    MultiResult {
        schedulers,
        nodes,
        pods: all_pods.len(),
        scheduled,
        pods_per_sec: scheduled as f64 / wall_s.max(1e-9),
        conflicts,
        conflict_rate: conflicts as f64 / (attempts.max(1)) as f64,
        overcommitted_nodes,
        wall_s,
        cpu_s: total(|t| t.on_cpu),
        run_queue_wait_s: total(|t| t.waiting),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_fill_the_cluster_without_double_binds_or_overcommits() {
        for schedulers in [1, 3] {
            // More pods than slots: every node ends full, and the instances race for the
            // last slots.
            let r = run(schedulers, 40, 150);
            assert_eq!(r.scheduled, 40 * SLOTS_PER_NODE, "{r:?}");
            assert_eq!(r.overcommitted_nodes, 0, "{r:?}");
            if std::path::Path::new("/proc/thread-self/schedstat").exists() {
                assert!(r.cpu_s.is_some_and(|s| s > 0.0), "{r:?}");
                assert!(r.run_queue_wait_s.is_some(), "{r:?}");
            }
        }
    }
}
