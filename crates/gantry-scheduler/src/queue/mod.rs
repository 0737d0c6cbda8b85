//! The scheduling queue, as upstream's `PriorityQueue`: pods ready to try (activeQ, by
//! priority then age), pods waiting out a backoff after a failure (backoffQ), pods that
//! fit nowhere until some cluster event could change that (unschedulable), and pods held
//! back by PreEnqueue (gated). Time is passed in, so a simulation can run on a virtual clock.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use gantry_api::{Gate, Pod, Release};
use gantry_cache::{DraCache, GroupKey, SharedPodGroups};
use gantry_framework::{
    ActionType, ClusterEvent, EventResource, PreEnqueuePlugin, PreEnqueueView, Profile, QueueSort,
    Status,
};

use crate::unschedulable_pods::{Moved, UnschedulablePods};
use gated::{GatedPods, Held};
use preemption_hold::PreemptionHold;
pub use preemption_hold::Preemptor;

mod gated;
mod preemption_hold;

/// Pods unschedulable for longer than this are retried anyway (upstream's
/// `podMaxInUnschedulablePodsDuration`).
pub const MAX_UNSCHEDULABLE_DURATION: Duration = Duration::from_secs(5 * 60);

/// How often the queue looks for such pods (upstream runs
/// `flushUnschedulablePodsLeftover` every 30 s): a look visits every unschedulable pod.
pub const LEFTOVER_FLUSH_PERIOD: Duration = Duration::from_secs(30);

/// A pod in the queue, with its scheduling history.
#[derive(Debug, Clone)]
pub struct QueuedPod {
    pub pod: Arc<Pod>,
    /// When it last entered a queue: orders equal priorities, and starts its backoff.
    pub timestamp: Duration,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// Attempts that ended unschedulable (rejected by a plugin), and errors (a failed
    /// bind, an API error) since the last such attempt: upstream's `UnschedulableCount`
    /// and `ConsecutiveErrorsCount`, which set the backoff from v1.34 on.
    pub unschedulable_count: u32,
    pub consecutive_errors: u32,
    /// When it was first popped, for end-to-end latency.
    pub initial_attempt: Option<Duration>,
    /// The plugins that rejected it in its last attempt.
    pub unschedulable_plugins: Vec<&'static str>,
    /// The scheduling cycle in which it was last popped.
    pub cycle: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Location {
    Active,
    Backoff,
    Unschedulable,
    Gated,
}

struct Entry {
    queued: QueuedPod,
    location: Location,
    /// Bumped on every move, so stale heap entries can be recognised and skipped.
    version: u64,
}

struct ActiveKey {
    priority: i32,
    /// PrioritySort: when the pod entered the queue. Coscheduling: its group's creation
    /// or last failure, or the pod's first attempt (nanoseconds on the queue's clock;
    /// negative for groups created before the simulation began).
    time: i128,
    /// Coscheduling orders equal times by `namespace/name`.
    named: Option<Arc<Pod>>,
    seq: u64,
    uid: Arc<str>,
    version: u64,
}

impl PartialEq for ActiveKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ActiveKey {}

impl Ord for ActiveKey {
    /// Higher priority first, then the earlier time, then (Coscheduling) the smaller
    /// `namespace/name`, then arrival order.
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.time.cmp(&self.time))
            .then_with(|| match (&self.named, &other.named) {
                (Some(a), Some(b)) => namespaced_name(b).cmp(namespaced_name(a)),
                _ => Ordering::Equal,
            })
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// The bytes of `namespace/name`, compared without building the string.
fn namespaced_name(pod: &Pod) -> impl Iterator<Item = u8> + '_ {
    pod.namespace
        .as_str()
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(pod.name.bytes())
}

impl PartialOrd for ActiveKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(PartialEq, Eq)]
struct BackoffKey {
    expiry: Duration,
    priority: i32,
    timestamp: Duration,
    seq: u64,
    uid: Arc<str>,
    version: u64,
}

impl Ord for BackoffKey {
    /// Earliest expiry on top of the (max-)heap; among equal expiries as activeQ orders
    /// (higher priority, then earlier entry), as upstream's `lessBackoffCompletedWithPriority`
    /// orders the pods an idle scheduler pops.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .expiry
            .cmp(&self.expiry)
            .then_with(|| self.priority.cmp(&other.priority))
            .then_with(|| other.timestamp.cmp(&self.timestamp))
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for BackoffKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// How many pods wait where (upstream's `scheduler_pending_pods{queue}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingCounts {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub gated: usize,
}

pub struct SchedulingQueue {
    /// Every pod in the queue, by UID (looked up several times a move: hashed fast;
    /// never iterated for a decision).
    entries: HashMap<Arc<str>, Entry, foldhash::fast::RandomState>,
    active: BinaryHeap<ActiveKey>,
    /// Pods backing off after being found unschedulable (upstream's `podBackoffQ`).
    backoff: BinaryHeap<BackoffKey>,
    /// Pods backing off after an error (`podErrorBackoffQ`): never popped early.
    error_backoff: BinaryHeap<BackoffKey>,
    /// SchedulerPopFromBackoffQ (v1.33 on): with activeQ empty, pop the backoff's head.
    pop_from_backoff: bool,
    /// The pods waiting for an event, grouped so that events need not look at every pod.
    unschedulable: UnschedulablePods,
    initial_backoff: Duration,
    max_backoff: Duration,
    /// The release each scheduler name decides as (its backoff rule).
    releases: Vec<(gantry_api::Sym, Release)>,
    /// PreEnqueue plugins per scheduler name.
    pre_enqueue: Vec<(gantry_api::Sym, Vec<Arc<dyn PreEnqueuePlugin>>)>,
    /// The events each plugin registered.
    registrations: HashMap<&'static str, &'static [ClusterEvent]>,
    scheduling_cycle: u64,
    /// The cycle in which the last cluster event arrived: a pod whose attempt started
    /// before it may have missed it, so it goes to backoff rather than unschedulable.
    move_request_cycle: u64,
    /// When `flush_unschedulable_leftover` next looks.
    next_leftover_flush: Duration,
    seq: u64,
    /// The PodGroups and their members, which PreEnqueue reads (the cache's, once shared).
    pod_groups: SharedPodGroups,
    /// The claims, which DynamicResources' PreEnqueue reads (the cache's, once shared).
    claims: Option<Arc<DraCache>>,
    /// Pods held back by PreEnqueue, by what may let them in, so that a new member or
    /// claim looks at the pods it may help, not at the whole queue.
    gated: GatedPods,
    /// The profiles' queue sort (upstream requires every profile to have the same).
    sort: QueueSort,
    /// The latest cluster events with the cycle each arrived in (at most
    /// `RECENT_EVENTS`), for the queueing hints of a pod back from a long wait.
    recent_events: VecDeque<(u64, ClusterEvent)>,
    /// Preemptors whose victims are still being deleted, held back by DefaultPreemption's
    /// PreEnqueue.
    preemption_hold: PreemptionHold,
}

/// How many of the latest cluster events the queue keeps.
const RECENT_EVENTS: usize = 1024;

impl SchedulingQueue {
    /// A queue for these profiles, with upstream's default backoff (1 s doubling to 10 s).
    pub fn new(profiles: &[Profile]) -> SchedulingQueue {
        SchedulingQueue::with_backoff(profiles, Duration::from_secs(1), Duration::from_secs(10))
    }

    pub fn with_backoff(
        profiles: &[Profile],
        initial_backoff: Duration,
        max_backoff: Duration,
    ) -> SchedulingQueue {
        let mut registrations = HashMap::new();
        for profile in profiles {
            let plugins = profile
                .pre_enqueue
                .iter()
                .map(|p| (p.name(), p.events_to_register()))
                .chain(
                    profile
                        .pre_filter
                        .iter()
                        .map(|p| (p.name(), p.events_to_register())),
                )
                .chain(
                    profile
                        .filter
                        .iter()
                        .map(|p| (p.name(), p.events_to_register())),
                );
            registrations.extend(plugins);
        }
        SchedulingQueue {
            entries: HashMap::default(),
            active: BinaryHeap::new(),
            backoff: BinaryHeap::new(),
            error_backoff: BinaryHeap::new(),
            pop_from_backoff: profiles
                .iter()
                .any(|p| p.release.enabled(Gate::SchedulerPopFromBackoffQ)),
            unschedulable: UnschedulablePods::default(),
            initial_backoff,
            max_backoff,
            releases: profiles
                .iter()
                .map(|p| (p.scheduler_name, p.release))
                .collect(),
            pre_enqueue: profiles
                .iter()
                .map(|p| (p.scheduler_name, p.pre_enqueue.clone()))
                .collect(),
            registrations,
            scheduling_cycle: 0,
            move_request_cycle: 0,
            next_leftover_flush: Duration::ZERO,
            seq: 0,
            pod_groups: SharedPodGroups::default(),
            claims: None,
            gated: GatedPods::default(),
            sort: profiles
                .first()
                .map_or(QueueSort::PrioritySort, |p| p.queue_sort),
            recent_events: VecDeque::new(),
            preemption_hold: PreemptionHold::default(),
        }
    }

    /// The preemptor's preemption started deleting its victims in the background
    /// (SchedulerAsyncPreemption): DefaultPreemption's PreEnqueue holds the pod, or every
    /// member of the group, back until `preemption_finished`.
    pub fn preemption_started(&mut self, preemptor: Preemptor) {
        self.preemption_hold.start(preemptor);
    }

    /// The preemption deletes its last victim now: once that victim is seen gone or
    /// terminating (`victim_gone`), its pods are no longer held back.
    pub fn preemption_deleting_last_victim(&mut self, preemptor: &Preemptor, victim: Arc<str>) {
        self.preemption_hold.deleting_last(preemptor, victim);
    }

    /// The pod was seen deleted, or terminating: a preemption whose last victim it is is
    /// done. Call it before the event the deletion is.
    pub fn victim_gone(&mut self, uid: &str) {
        self.preemption_hold.victim_gone(uid);
    }

    /// Whether the victims of the pod's preemption, or of its group's, are still being
    /// deleted in the background.
    pub fn is_preempting(&self, pod: &Pod) -> bool {
        self.preemption_hold.is_preempting(pod)
    }

    /// The preemption's victims are deleted: its pods may be tried again, once an event
    /// moves them (as their deletions do).
    pub fn preemption_finished(&mut self, preemptor: &Preemptor) {
        self.preemption_hold.finish(preemptor);
    }

    /// Why a pod held back until an event lets it in is held: the first PreEnqueue
    /// rejection of a gang member (its PodGroup or quorum missing) or of a pod whose
    /// claims are not all there; `None` for other pods, scheduling gates included (only
    /// an update of the pod lifts those).
    pub fn held_until_event(&self, uid: &str) -> Option<String> {
        let entry = self.entries.get(uid)?;
        if entry.location != Location::Gated {
            return None;
        }
        let (by, status) = self.pre_enqueue_rejection(&entry.queued)?;
        let waits_for_event = entry.queued.pod.scheduling_group.is_some()
            || by == gantry_framework::plugins::dynamic_resources::NAME;
        waits_for_event.then(|| status.message())
    }

    /// Reads PodGroups and their members from `groups` (the cache's) from now on.
    pub fn share_pod_groups(&mut self, groups: SharedPodGroups) {
        self.pod_groups = groups;
    }

    /// Reads claims from `claims` (the cache's) from now on: DynamicResources' PreEnqueue
    /// holds back a pod whose claims are not all there.
    pub fn share_claims(&mut self, claims: Arc<DraCache>) {
        self.claims = Some(claims);
    }

    /// A member or the PodGroup object of `group` appeared: its members held back by
    /// PreEnqueue are judged again, in the order they were held (upstream's queueing
    /// hints for GangScheduling, which requeue only the pods of the same group).
    pub fn requeue_gated_members(&mut self, group: GroupKey) {
        let held = self.gated.take_group(group);
        self.judge_again(held);
    }

    /// A claim was added or changed: the pods DynamicResources' PreEnqueue held back are
    /// judged again, in the order they were held (upstream's claim hint moves those that
    /// use the claim; the others would be held again).
    pub fn requeue_gated_claim_users(&mut self) {
        let held = self.gated.take_claim_users();
        self.judge_again(held);
    }

    /// Runs PreEnqueue again on the pods of `held` that are still held back as they were.
    fn judge_again(&mut self, held: Vec<Held>) {
        for (version, uid) in held {
            let still_held = self
                .entries
                .get(&uid)
                .is_some_and(|e| e.version == version && e.location == Location::Gated);
            if !still_held {
                continue;
            }
            let entry = self.entries.remove(&uid).expect("checked above");
            self.place_judged(entry.queued, Location::Active);
        }
    }

    /// The pod-group cycle of `first`, just popped: takes the group's other pending
    /// `members` out of the queue wherever they wait (but held back by PreEnqueue), as
    /// upstream's `PopSpecificPod` does, and returns them all in upstream's order: higher
    /// priority first, then earlier first attempt. Upstream puts members never tried
    /// before the popped pod, in Go's map order among themselves; here they keep the
    /// order in which they entered the queue.
    pub fn pop_members(&mut self, first: QueuedPod, members: &[Arc<Pod>]) -> Vec<QueuedPod> {
        let mut group = vec![first];
        for member in members {
            let taken = self
                .entries
                .get(&member.uid)
                .is_some_and(|e| e.location != Location::Gated);
            if !taken {
                continue;
            }
            if self.preemption_hold.is_preempting(member) {
                // Activated, it is held back by DefaultPreemption's PreEnqueue.
                if !self.preemption_hold.is_held(&member.uid) {
                    let entry = self.entries.remove(&member.uid).expect("checked above");
                    self.place(entry.queued, Location::Active);
                }
                continue;
            }
            self.preemption_hold.release(&member.uid);
            self.unschedulable.remove(&member.uid);
            let mut queued = self
                .entries
                .remove(&member.uid)
                .expect("checked above")
                .queued;
            queued.cycle = self.scheduling_cycle;
            group.push(queued);
        }
        group.sort_by(|a, b| {
            b.pod
                .priority
                .cmp(&a.pod.priority)
                .then_with(|| {
                    a.initial_attempt
                        .is_some()
                        .cmp(&b.initial_attempt.is_some())
                })
                .then_with(|| a.initial_attempt.cmp(&b.initial_attempt))
                .then_with(|| a.timestamp.cmp(&b.timestamp))
        });
        group
    }

    /// Adds a new pending pod: to activeQ, or held as gated if a PreEnqueue plugin says so.
    pub fn add(&mut self, pod: Arc<Pod>, now: Duration) {
        let queued = QueuedPod {
            pod,
            timestamp: now,
            attempts: 0,
            unschedulable_count: 0,
            consecutive_errors: 0,
            initial_attempt: None,
            unschedulable_plugins: Vec::new(),
            cycle: 0,
        };
        self.place_judged(queued, Location::Active);
    }

    /// The pending pod changed (a gate removed, labels edited): it is tried again.
    pub fn update(&mut self, pod: Arc<Pod>, now: Duration) {
        let Some(entry) = self.entries.remove(&pod.uid) else {
            self.add(pod, now);
            return;
        };
        let mut queued = entry.queued;
        queued.pod = pod;
        let location = if entry.location == Location::Backoff && self.backoff_expiry(&queued) > now
        {
            Location::Backoff
        } else {
            Location::Active
        };
        self.place_judged(queued, location);
    }

    /// The pod was deleted or bound elsewhere.
    pub fn delete(&mut self, uid: &str) -> bool {
        self.unschedulable.remove(uid);
        self.preemption_hold.release(uid);
        self.entries.remove(uid).is_some()
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.entries.contains_key(uid)
    }

    /// Whether the pod is held back by a PreEnqueue plugin (its scheduling gates).
    pub fn is_gated(&self, uid: &str) -> bool {
        self.entries
            .get(uid)
            .is_some_and(|e| e.location == Location::Gated)
    }

    /// Waits out every backoff even where the release pops from backoff when idle. For
    /// `gantry run`, which does not hold a preemptor back while its victims' deletions are
    /// in flight (upstream's DefaultPreemption PreEnqueue under SchedulerAsyncPreemption):
    /// popped at once, it would preempt again before the deletions come back.
    pub fn wait_out_backoffs(&mut self) {
        self.pop_from_backoff = false;
    }

    /// Moves pods whose backoff ended to activeQ, then pops the next pod to schedule:
    /// activeQ's head, or with SchedulerPopFromBackoffQ, when activeQ is empty, the head of
    /// the pods backing off after being found unschedulable, backoff or not (upstream's
    /// `unlockedPop`; pods backing off after an error wait theirs out).
    pub fn pop(&mut self, now: Duration) -> Option<QueuedPod> {
        self.flush_backoff_completed(now);
        let entries = &self.entries;
        let live = |uid: &str, version: u64, location: Location| {
            entries
                .get(uid)
                .is_some_and(|e| e.version == version && e.location == location)
        };
        let active = &mut self.active;
        let backoff = &mut self.backoff;
        let uid = std::iter::from_fn(|| active.pop())
            .find(|key| live(&key.uid, key.version, Location::Active))
            .map(|key| key.uid)
            .or_else(|| {
                let mut popped = std::iter::from_fn(|| backoff.pop());
                (self.pop_from_backoff)
                    .then(|| popped.find(|key| live(&key.uid, key.version, Location::Backoff)))
                    .flatten()
                    .map(|key| key.uid)
            })?;
        let mut queued = self.entries.remove(&uid).expect("checked live").queued;
        self.scheduling_cycle += 1;
        queued.attempts += 1;
        queued.cycle = self.scheduling_cycle;
        queued.initial_attempt.get_or_insert(now);
        Some(queued)
    }

    fn is_live(&self, uid: &str, version: u64, location: Location) -> bool {
        self.entries
            .get(uid)
            .is_some_and(|e| e.version == version && e.location == location)
    }

    /// A popped pod fit nowhere: it waits for an event its rejecting plugins registered,
    /// or goes to backoff at once if such an event already arrived during its attempt.
    pub fn add_unschedulable(
        &mut self,
        mut queued: QueuedPod,
        plugins: Vec<&'static str>,
        now: Duration,
    ) {
        // Upstream's `AddUnschedulableIfNotPresent`: no rejecting plugin means an error.
        if plugins.is_empty() {
            queued.consecutive_errors += 1;
        } else {
            queued.unschedulable_count += 1;
            queued.consecutive_errors = 0;
        }
        queued.unschedulable_plugins = plugins;
        queued.timestamp = now;
        let location = if self.move_request_cycle >= queued.cycle {
            Location::Backoff
        } else {
            Location::Unschedulable
        };
        self.place(queued, location);
    }

    /// Members of a pod group whose cycle just failed and started a preemption go to
    /// backoff rather than wait for an event. Upstream retries a failed member after its
    /// backoff whatever happens (`determineSchedulingHintForInFlightPod` has no
    /// event-based requeueing for pod groups, v1.36.3); where nothing changes, each retry
    /// decides as the last, so Gantry waits for an event instead (and a run ends). A
    /// started preemption changes the next cycle without an event: its preemptor is held
    /// back, and the others are tried without it, as upstream tries them.
    pub fn retry_after_backoff(&mut self, uids: &[Arc<str>]) {
        for uid in uids {
            let waiting = self
                .entries
                .get(uid)
                .is_some_and(|e| e.location == Location::Unschedulable);
            if waiting && !self.preemption_hold.is_held(uid) {
                let entry = self.entries.remove(uid).expect("checked above");
                self.place(entry.queued, Location::Backoff);
            }
        }
    }

    /// A popped pod failed for another reason (an error, a failed bind): back off and retry.
    pub fn add_backoff(&mut self, mut queued: QueuedPod, now: Duration) {
        queued.consecutive_errors += 1;
        // Rejected by no plugin: it backs off among the errors (upstream clears the
        // rejecting plugins at every pop).
        queued.unschedulable_plugins.clear();
        queued.timestamp = now;
        self.place(queued, Location::Backoff);
    }

    /// A cluster event: unschedulable pods that a rejecting plugin says this event may
    /// help move to backoff (if still backing off) or activeQ.
    pub fn on_event(&mut self, event: ClusterEvent, now: Duration) {
        self.on_event_for(event, now, |_| true);
    }

    /// `on_event` for the unschedulable pods `concerned` accepts only (a plugin's
    /// queueing hint that looks at the pod, as the storage plugins' for a claim).
    pub fn on_event_for(
        &mut self,
        event: ClusterEvent,
        now: Duration,
        concerned: impl Fn(&Pod) -> bool,
    ) {
        self.move_request_cycle = self.scheduling_cycle;
        if self.recent_events.len() == RECENT_EVENTS {
            self.recent_events.pop_front();
        }
        self.recent_events.push_back((self.scheduling_cycle, event));
        let mut movable = self
            .unschedulable
            .helped(|plugins| self.may_help(plugins, &event));
        movable.retain(|uid| {
            self.entries
                .get(uid)
                .is_some_and(|entry| concerned(&entry.queued.pod))
        });
        self.move_to_active_or_backoff(movable, now);
    }

    /// A pod that waited at Permit was rejected and forgotten: the room it held moves the
    /// unschedulable pods `concerned` accepts, as an assigned pod's deletion.
    pub fn assumed_pod_forgotten_outside(
        &mut self,
        now: Duration,
        concerned: impl Fn(&Pod) -> bool,
    ) {
        self.on_event_for(
            ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
            now,
            concerned,
        );
    }

    /// A pod rejected while it waited at Permit (its binding cycle failed): upstream's
    /// queueing hints send it to backoff only if an event one of its rejecting plugins
    /// registered arrived since it was popped, else it waits for one. (Other failures
    /// are judged by `add_unschedulable`'s coarser rule, any event at all.)
    pub fn add_rejected_while_waiting(
        &mut self,
        mut queued: QueuedPod,
        plugins: Vec<&'static str>,
        now: Duration,
    ) {
        let since = queued.cycle;
        let kept_since = self
            .recent_events
            .front()
            .is_none_or(|(cycle, _)| *cycle <= since);
        let helped = !kept_since
            || self
                .recent_events
                .iter()
                .filter(|(cycle, _)| *cycle >= since)
                .any(|(_, event)| self.may_help(&plugins, event));
        queued.unschedulable_count += 1;
        queued.consecutive_errors = 0;
        queued.unschedulable_plugins = plugins;
        queued.timestamp = now;
        let location = if helped {
            Location::Backoff
        } else {
            Location::Unschedulable
        };
        self.place(queued, location);
    }

    /// An assumed pod was forgotten (its bind failed): the room it held is free again, so
    /// the pods it kept out move as if it had been deleted (upstream's
    /// `AssignedPodDelete` in `handleBindingCycleError`). The pod itself waits out a
    /// backoff, not here.
    pub fn assumed_pod_forgotten(&mut self, now: Duration) {
        self.on_event(
            ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
            now,
        );
    }

    /// Retries pods that have waited as unschedulable for over five minutes, looking as
    /// upstream's timer does: on the multiples of `LEFTOVER_FLUSH_PERIOD`, judging age at
    /// that tick. Between two ticks a call costs nothing, so a loop may call it every step.
    pub fn flush_unschedulable_leftover(&mut self, now: Duration) {
        if now < self.next_leftover_flush {
            return;
        }
        let periods = now.as_nanos() / LEFTOVER_FLUSH_PERIOD.as_nanos();
        let periods = u32::try_from(periods).unwrap_or(u32::MAX);
        let tick = LEFTOVER_FLUSH_PERIOD.saturating_mul(periods);
        self.next_leftover_flush = tick.saturating_add(LEFTOVER_FLUSH_PERIOD);
        let stale: Moved = self
            .unschedulable
            .iter()
            .filter_map(|uid| self.entries.get_key_value(uid))
            .filter(|(uid, e)| {
                e.location == Location::Unschedulable
                    && tick.saturating_sub(e.queued.timestamp) > MAX_UNSCHEDULABLE_DURATION
                    // Only a pod's deletion moves a pod held back for its preemption.
                    && !self.preemption_hold.is_held(uid)
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        self.move_to_active_or_backoff(stale, now);
    }

    /// When the earliest backoff ends, if any pod is backing off.
    pub fn next_backoff_expiry(&self) -> Option<Duration> {
        (self.backoff.iter())
            .chain(&self.error_backoff)
            .filter(|k| {
                self.entries
                    .get(&k.uid)
                    .is_some_and(|e| e.version == k.version && e.location == Location::Backoff)
            })
            .map(|k| k.expiry)
            .min()
    }

    pub fn pending(&self) -> PendingCounts {
        let mut counts = PendingCounts::default();
        for entry in self.entries.values() {
            match entry.location {
                Location::Active => counts.active += 1,
                Location::Backoff => counts.backoff += 1,
                Location::Unschedulable if self.preemption_hold.is_held(&entry.queued.pod.uid) => {
                    counts.gated += 1
                }
                Location::Unschedulable => counts.unschedulable += 1,
                Location::Gated => counts.gated += 1,
            }
        }
        counts
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The pods waiting anywhere in the queue (for reporting the ones never placed).
    pub fn pods(&self) -> impl Iterator<Item = &QueuedPod> {
        self.entries.values().map(|e| &e.queued)
    }

    /// Whether `event` may help a pod `rejecting_plugins` rejected: a pod rejected by no
    /// plugin in particular (an error) is moved by any event, one held back for its
    /// preemption only as `preemption_hold::may_move` says.
    fn may_help(&self, rejecting_plugins: &[&'static str], event: &ClusterEvent) -> bool {
        preemption_hold::may_move(rejecting_plugins, event, |plugin| {
            self.registrations
                .get(plugin)
                .is_none_or(|events| events.iter().any(|r| r.covers(event)))
        })
    }

    /// Moves pods in the order they entered the unschedulable set (their `version`), not
    /// in the set's hash order, which changes per process: equal-priority pods moved at
    /// one time are then tried in the same order in every run.
    fn move_to_active_or_backoff(&mut self, mut uids: Moved, now: Duration) {
        uids.sort_unstable_by_key(|uid| self.entries.get(uid).map(|e| e.version));
        for uid in uids {
            let held = |entry: &Entry| self.preemption_hold.is_preempting(&entry.queued.pod);
            if self.preemption_hold.is_held(&uid) && self.entries.get(&uid).is_some_and(held) {
                // PreEnqueue would turn it away again: nothing changes.
                continue;
            }
            let Some(entry) = self.entries.remove(&uid) else {
                continue;
            };
            let location = if self.backoff_expiry(&entry.queued) > now {
                Location::Backoff
            } else {
                Location::Active
            };
            self.place(entry.queued, location);
        }
    }

    fn flush_backoff_completed(&mut self, now: Duration) {
        let mut completed = Vec::new();
        for heap in [&mut self.backoff, &mut self.error_backoff] {
            while heap.peek().is_some_and(|top| top.expiry <= now) {
                completed.push(heap.pop().expect("peeked"));
            }
        }
        completed.sort_unstable_by(|a, b| b.cmp(a));
        for key in completed {
            if self.is_live(&key.uid, key.version, Location::Backoff) {
                let entry = self.entries.remove(&key.uid).expect("checked live");
                self.place(entry.queued, Location::Active);
            }
        }
    }

    /// Upstream's `calculateBackoffDuration`: none for a count of 0, else initial, doubled
    /// per count past the first, capped.
    fn backoff_duration(&self, count: u32) -> Duration {
        if count == 0 {
            return Duration::ZERO;
        }
        let mut duration = self.initial_backoff;
        for _ in 1..count {
            duration = duration.saturating_mul(2);
            if duration >= self.max_backoff {
                return self.max_backoff;
            }
        }
        duration
    }

    /// When the pod's backoff ends. With SchedulerPopFromBackoffQ upstream truncates the
    /// end to its whole second and counts the pod as backing off through that second
    /// (`alignToWindow`, `isPodBackingoff`), so it ends at the next whole second.
    fn backoff_expiry(&self, queued: &QueuedPod) -> Duration {
        let release = self.release_of(&queued.pod);
        let count = self.backoff_count(queued, release);
        // Saturating: a backoff of i64::MAX seconds (which upstream's validation lets
        // through) ends at the end of time, not in an overflow.
        let end = queued
            .timestamp
            .saturating_add(self.backoff_duration(count));
        if count == 0 || !release.enabled(Gate::SchedulerPopFromBackoffQ) {
            return end;
        }
        Duration::from_secs(end.as_secs()).saturating_add(Duration::from_secs(1))
    }

    /// The release the pod's scheduler name decides as.
    fn release_of(&self, pod: &Pod) -> Release {
        (self.releases.iter())
            .find(|(name, _)| *name == pod.scheduler_name)
            .map_or_else(Release::default, |(_, release)| *release)
    }

    /// What the backoff doubles with: every attempt before v1.34; from v1.34 the errors
    /// in a row when the last attempt ended in one, else the unschedulable attempts.
    fn backoff_count(&self, queued: &QueuedPod, release: Release) -> u32 {
        if !release.backoff_counts_failures() {
            queued.attempts
        } else if queued.consecutive_errors > 0 {
            queued.consecutive_errors
        } else {
            queued.unschedulable_count
        }
    }

    /// Coscheduling's `Less` time: the group's last failure, else its creation, for a
    /// member of an existing group; else the pod's first attempt (its entry, if never
    /// tried).
    fn coscheduling_time(&self, queued: &QueuedPod) -> i128 {
        let pod_time = || {
            queued
                .initial_attempt
                .unwrap_or(queued.timestamp)
                .as_nanos() as i128
        };
        let Some(key) = GroupKey::labelled(&queued.pod) else {
            return pod_time();
        };
        let groups = self.pod_groups.lock();
        match (
            groups.coscheduling_memory(key).failed_at,
            groups.coscheduling_created(key),
        ) {
            (Some(failed), _) => failed.as_nanos() as i128,
            (None, Some(created)) => created,
            (None, None) => pod_time(),
        }
    }

    /// Upstream's `Activate` (a plugin's `PodsToActivate`): pods waiting out a backoff
    /// or an event move to activeQ at once; others (in activeQ, held back, in flight)
    /// stay where they are.
    pub fn activate(&mut self, uids: &[Arc<str>]) {
        for uid in uids {
            let movable = self
                .entries
                .get(uid)
                .is_some_and(|e| matches!(e.location, Location::Backoff | Location::Unschedulable));
            if movable {
                let entry = self.entries.remove(uid).expect("checked above");
                self.place(entry.queued, Location::Active);
            }
        }
    }

    /// The first PreEnqueue plugin of the pod's profile that holds it back, and why.
    fn pre_enqueue_rejection(&self, queued: &QueuedPod) -> Option<(&'static str, Status)> {
        let (_, plugins) =
            (self.pre_enqueue.iter()).find(|(name, _)| *name == queued.pod.scheduler_name)?;
        let groups = self.pod_groups.lock();
        let view = PreEnqueueView {
            groups: &groups,
            claims: self.claims.as_deref(),
        };
        plugins.iter().find_map(|p| {
            let status = p.pre_enqueue(&queued.pod, &view);
            (!status.is_success()).then(|| (p.name(), status))
        })
    }

    /// Places the pod where PreEnqueue sends it: held back (noted by what may let it in),
    /// else at `location`.
    fn place_judged(&mut self, queued: QueuedPod, location: Location) {
        let Some((by, _)) = self.pre_enqueue_rejection(&queued) else {
            self.place(queued, location);
            return;
        };
        let pod = queued.pod.clone();
        let version = self.place(queued, Location::Gated);
        self.gated.hold(&pod, version, by);
    }

    /// Puts the pod at `location` (or where DefaultPreemption's hold turns it); returns
    /// its entry's version.
    fn place(&mut self, mut queued: QueuedPod, location: Location) -> u64 {
        let location = match location {
            Location::Active | Location::Backoff
                if (self.preemption_hold)
                    .turns_away(&queued.pod, &mut queued.unschedulable_plugins) =>
            {
                Location::Unschedulable
            }
            Location::Active | Location::Backoff => location,
            Location::Unschedulable | Location::Gated => {
                self.preemption_hold.release(&queued.pod.uid);
                location
            }
        };
        self.seq += 1;
        let version = self.seq;
        let uid = queued.pod.uid.clone();
        match location {
            Location::Active => {
                let (time, named) = match self.sort {
                    QueueSort::PrioritySort => (queued.timestamp.as_nanos() as i128, None),
                    QueueSort::Coscheduling => {
                        (self.coscheduling_time(&queued), Some(queued.pod.clone()))
                    }
                };
                self.active.push(ActiveKey {
                    priority: queued.pod.priority,
                    time,
                    named,
                    seq: self.seq,
                    uid: uid.clone(),
                    version,
                })
            }
            Location::Backoff => {
                let key = BackoffKey {
                    expiry: self.backoff_expiry(&queued),
                    priority: queued.pod.priority,
                    timestamp: queued.timestamp,
                    seq: self.seq,
                    uid: uid.clone(),
                    version,
                };
                // Upstream's `backoffQueue.add`: no rejecting plugin means an error.
                match queued.unschedulable_plugins.is_empty() {
                    true => self.error_backoff.push(key),
                    false => self.backoff.push(key),
                }
            }
            Location::Gated | Location::Unschedulable => {}
        }
        if location == Location::Unschedulable {
            self.unschedulable
                .insert(uid.clone(), &queued.unschedulable_plugins);
        } else {
            self.unschedulable.remove(&uid);
        }
        self.entries.insert(
            uid,
            Entry {
                queued,
                location,
                version,
            },
        );
        version
    }
}

#[cfg(test)]
mod tests;
