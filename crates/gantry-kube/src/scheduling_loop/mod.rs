//! The scheduling loop: one thread that owns the scheduler, its queue and the cache's
//! writes. Between two scheduling cycles it applies what the watches reported (as
//! kube-scheduler's event handlers do), and concludes the binds its writers finished;
//! then it pops the next pod, decides, assumes, and hands the bind to a writer task, so
//! the next cycle starts while the bind is on the wire.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use gantry_api::{Node, Pod, Sym};
use gantry_cache::{Cache, GroupKey};
use gantry_framework::config::Point;
use gantry_framework::{ActionType, ClusterEvent, CycleState, EventResource};
use gantry_scheduler::queue::{QueuedPod, SchedulingQueue};
use gantry_scheduler::{Attempt, LastCycle, OtherNode, PermitWaiters, Scheduler};

use crate::dra::DraMirror;
use crate::failure::RepeatedBindFailures;
use crate::fence_scope;
use crate::objects::{Mirrored, ObjectMirror, StorageEvent};
use crate::shadow::{Decision, Disagreement, SCORED_LOWER, Shadow, placed_on};
use crate::watch::{Change, Kind, Object};
use crate::writes::{ApiWriter, BindDone, REASON_SCHEDULER_ERROR, REASON_UNSCHEDULABLE};
use crate::{Input, Shared};
use gantry_scheduler::shard::{self, Divide, Shard};
use serde_json::Value;

mod coscheduling;
mod pod_groups;
mod preemption;

pub use coscheduling::WaitingPods;

/// How long the loop sleeps when it has nothing to do (it wakes at once for any input).
const IDLE_WAIT: Duration = Duration::from_millis(500);
/// How long a stopping loop waits for binds in flight before it gives up on them.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often the scheduler's metrics are rendered for `/metrics`.
const METRICS_EVERY: Duration = Duration::from_secs(1);

pub struct SchedulingLoop {
    pub scheduler: Scheduler,
    pub queue: SchedulingQueue,
    pub cache: Arc<Cache>,
    pub writer: ApiWriter,
    pub inputs: Receiver<Input>,
    pub shared: Arc<Shared>,
    pub shard: Shard,
    pub divide: Divide,
    /// The profiles' scheduler names: only their pods are queued.
    pub scheduler_names: Vec<Sym>,
    /// Without leader election the loop schedules at once.
    pub leader: bool,
    pub mirror: ObjectMirror,
    /// Device classes, resource slices and claims (the claims shared with the binders).
    pub dra: DraMirror,
    /// Every pod the watch reported, by UID (to find what a relist no longer lists).
    /// The highest resourceVersion the pod watch has delivered (see `Input::Seen`).
    pub pods_version: u64,
    pub pods: HashMap<Arc<str>, Arc<Pod>>,
    pub nodes: HashMap<Sym, Arc<Node>>,
    /// With several instances: the pods whose required anti-affinity or DoNotSchedule
    /// spread reaches across nodes, which decide the fences other pods' binds take.
    pub reaching: HashMap<Arc<str>, Arc<Pod>>,
    /// Pods whose bind is in flight, with their queue history (for a requeue).
    pub binding: HashMap<Arc<str>, QueuedPod>,
    /// The `PodScheduled=False` message last written per pod, not to write it twice.
    pub reported: HashMap<Arc<str>, String>,
    /// Shards dividing the nodes: the hop count at which this shard, the last of the
    /// pod's round, reported the pod unschedulable (its next failure here hands it on).
    pub rounds_reported: HashMap<Arc<str>, u64>,
    /// Pods whose bindings were sent but never answered (the connection failed), with
    /// every node they named: if the watch shows one bound to any of them, that binding
    /// was written, and its `Scheduled` event is owed. Every node, not the last: the
    /// retries of an outage fail unanswered too, on other nodes, after the first landed
    /// (against a real API server killed mid-backlog, 46 of 2,000 went without).
    pub maybe_bound: HashMap<Arc<str>, Vec<Sym>>,
    /// Kinds listed at least once; the loop schedules only once all watched are.
    pub synced: HashSet<Kind>,
    pub watched: Vec<Kind>,
    pub start: Instant,
    /// `--shadow`: decide, write nothing, compare with the real bindings.
    pub shadow: Option<Shadow>,
    /// GangScheduling is on: a member of a PodGroup is scheduled in its group's cycle.
    pub gang_scheduling: bool,
    /// The PodGroups watched, with the `PodGroupScheduled` condition last seen or written.
    pub pod_groups: HashMap<GroupKey, Option<Arc<Value>>>,
    /// Pods waiting at Permit (Coscheduling), assumed, their binds held.
    pub waiting: WaitingPods,
    /// Binds failed per pod, for saying at WARN that a pod's keep failing.
    pub bind_failures: RepeatedBindFailures,
}

/// Why the loop ended.
#[derive(Debug, PartialEq, Eq)]
pub enum LoopEnd {
    Stopped,
    LostLeadership,
    /// Something no retry mends, in one line.
    Fatal(String),
}

impl SchedulingLoop {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Runs until told to stop (finishing or forgetting the binds in flight), or until
    /// leadership is lost.
    pub fn run(mut self) -> LoopEnd {
        let mut stopping: Option<Instant> = None;
        let mut rendered = Instant::now() - METRICS_EVERY;
        loop {
            let wait = self.wait_time(stopping.is_some());
            match self.inputs.recv_timeout(wait) {
                Ok(input) => {
                    if let Some(end) = self.handle(input, &mut stopping) {
                        return end;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return LoopEnd::Stopped,
            }
            while let Ok(input) = self.inputs.try_recv() {
                if let Some(end) = self.handle(input, &mut stopping) {
                    return end;
                }
            }
            if let Some(objects) = self.mirror.take_changed() {
                self.scheduler.set_objects(objects);
            }
            if rendered.elapsed() >= METRICS_EVERY {
                self.publish_metrics();
                rendered = Instant::now();
            }
            if let Some(line) = self.shadow.as_mut().and_then(Shadow::summary_due) {
                tracing::info!("{line}");
            }
            if let Some(since) = stopping {
                if self.binding.is_empty() || since.elapsed() >= STOP_GRACE {
                    self.forget_binds_in_flight();
                    self.publish_metrics();
                    return LoopEnd::Stopped;
                }
                continue;
            }
            if self.leader && self.is_synced() {
                self.time_out_waits();
                let now = self.now();
                self.queue.flush_unschedulable_leftover(now);
                if let Some(queued) = self.queue.pop(now) {
                    self.attempt(queued);
                }
                // What the cycle's (or a failed bind's) plugins asked of the waiting pods.
                self.serve_requests();
            }
        }
    }

    /// Every watched kind has been listed.
    fn is_synced(&self) -> bool {
        self.watched.iter().all(|k| self.synced.contains(k))
    }

    fn wait_time(&self, stopping: bool) -> Duration {
        if stopping || !self.leader || !self.is_synced() {
            return IDLE_WAIT;
        }
        let now = self.now();
        if self.queue.pending().active > 0 {
            return Duration::ZERO;
        }
        let next = match (
            self.queue.next_backoff_expiry(),
            self.waiting.next_deadline(),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        next.map_or(IDLE_WAIT, |at| at.saturating_sub(now).min(IDLE_WAIT))
    }

    fn handle(&mut self, input: Input, stopping: &mut Option<Instant>) -> Option<LoopEnd> {
        match input {
            Input::Watch(change) => self.apply(change),
            Input::BindDone(done) => self.conclude_bind(*done),
            Input::PreemptionDeletingLastVictim { preemptor, victim } => {
                (self.queue).preemption_deleting_last_victim(&preemptor, victim)
            }
            Input::PreemptionDone(preemptor) => self.queue.preemption_finished(&preemptor),
            Input::Check { pods, reply } => {
                let checked = pods.iter().try_for_each(|pod| {
                    self.check_placement(pod)
                        .map_err(|message| match pods.len() {
                            1 => message,
                            _ => format!("the gang's member {}: {message}", pod.key()),
                        })
                });
                let _ = reply.send(checked.and_then(|()| self.scheduler.check_quorum(&pods)));
            }
            Input::Seen {
                uid,
                fence_version,
                reply,
            } => {
                // Bound (or gone), and its claims seen as its binder wrote them before
                // the binding (the claims' watch is not ordered with the pods'). A pod
                // of this instance's own, assumed, is in the cache already: everything
                // serialised before it was seen by its binder, and so by this cache. A
                // pod not known here is gone only if the pod watch has passed the
                // fence's version (resourceVersions are etcd's revisions, one sequence
                // for every kind): before that, it may be a pod whose creation this
                // watch has not delivered yet, bound meanwhile by another instance.
                let with_claims = self.watched.contains(&Kind::ResourceClaim);
                let seen = self.cache.is_assumed(&uid)
                    || match self.pods.get(&uid) {
                        Some(p) => {
                            p.node_name.is_some()
                                && (!with_claims || self.dra.store.all_reserved_for(p))
                        }
                        None => version_number(fence_version.as_deref())
                            .is_none_or(|fence| self.pods_version >= fence),
                    };
                let _ = reply.send(seen);
            }
            Input::Leader(true) => {
                tracing::info!("leading: scheduling starts");
                self.leader = true;
            }
            Input::Leader(false) => {
                tracing::error!("lost the leader lease: scheduling stops");
                self.leader = false;
                self.forget_binds_in_flight();
                return Some(LoopEnd::LostLeadership);
            }
            Input::Fatal(message) => {
                self.forget_binds_in_flight();
                return Some(LoopEnd::Fatal(message));
            }
            Input::Abort => return Some(LoopEnd::Stopped),
            Input::Stop => {
                if stopping.is_none() {
                    tracing::info!(
                        in_flight = self.binding.len(),
                        "stopping: no new pods are taken"
                    );
                    *stopping = Some(Instant::now());
                }
            }
        }
        None
    }

    // ---- watch events: kube-scheduler's event handlers -------------------------------

    fn apply(&mut self, change: Change) {
        match change {
            Change::Applied(object) => match self.mirror.apply(object, false) {
                Mirrored::Forward(object) => self.apply_node_or_pod(object, false),
                Mirrored::Kept(event) => self.storage_event(event),
            },
            Change::Deleted(object) => match self.mirror.apply(object, true) {
                Mirrored::Forward(object) => self.apply_node_or_pod(object, true),
                Mirrored::Kept(event) => self.storage_event(event),
            },
            Change::Relisted(kind, objects) => {
                self.synced.insert(kind);
                self.shared.set_synced(self.is_synced());
                match kind {
                    Kind::Node => self.relist_nodes(objects),
                    Kind::Pod => self.relist_pods(objects),
                    Kind::DeviceClass
                    | Kind::ResourceSlice
                    | Kind::ResourceClaim
                    | Kind::DeviceTaintRule => {
                        let event = self.dra.relist(kind, objects);
                        self.dra_event(event);
                    }
                    Kind::PodGroup => self.relist_pod_groups(objects),
                    Kind::CoschedulingGroup => self.relist_coscheduling_groups(objects),
                    _ => {
                        let event = self.mirror.relist(kind, objects);
                        self.storage_event(event);
                    }
                }
            }
        }
    }

    fn apply_node_or_pod(&mut self, object: Object, deleted: bool) {
        match (object, deleted) {
            (Object::Node(node), false) => self.node_applied(node),
            (Object::Node(node), true) => self.node_deleted(node.name),
            (Object::Pod(pod, version), false) => {
                self.note_pods_version(version.as_deref());
                self.writer.versions.note(&pod.uid, version);
                self.pod_applied(pod)
            }
            (Object::Pod(pod, version), true) => {
                self.note_pods_version(version.as_deref());
                self.pod_deleted(&pod.uid)
            }
            (Object::PodGroup(group, condition), false) => self.pod_group_applied(group, condition),
            (Object::PodGroup(group, _), true) => {
                self.pod_group_deleted(GroupKey::of_group(&group))
            }
            (Object::CoschedulingGroup(group), false) => self.coscheduling_group_applied(group),
            (Object::CoschedulingGroup(group), true) => self.coscheduling_group_deleted(GroupKey {
                namespace: group.namespace,
                name: group.name,
            }),
            (object, deleted) => {
                let Some(changed) = self.dra.apply(object, deleted) else {
                    return;
                };
                let now = self.now();
                match changed.claim {
                    Some(hint) => {
                        (self.queue).on_event_for(changed.event, now, |p| hint.concerns(p));
                        self.queue.requeue_gated_claim_users();
                    }
                    None => self.queue.on_event(changed.event, now),
                }
            }
        }
    }

    /// A volume, claim, class, CSINode, CSIDriver or capacity changed: pods the storage
    /// plugins rejected may fit (for a claim, only the pods using it).
    fn storage_event(&mut self, event: Option<StorageEvent>) {
        let Some(event) = event else {
            return;
        };
        let now = self.now();
        self.queue
            .on_event_for(event.event, now, |pod| event.concerns(pod));
    }

    /// A relist changed device classes, slices or claims: pods DynamicResources rejected
    /// may fit, and those it held back may have their claims now.
    fn dra_event(&mut self, event: Option<(EventResource, ActionType)>) {
        if let Some((resource, action)) = event {
            self.queue
                .on_event(ClusterEvent::new(resource, action), self.now());
            self.queue.requeue_gated_claim_users();
        }
    }

    /// A relist replaces what the loop knew: nodes it no longer lists were deleted while
    /// the watch was blind.
    fn relist_nodes(&mut self, objects: Vec<Object>) {
        let listed: HashSet<Sym> = objects
            .iter()
            .filter_map(|o| match o {
                Object::Node(n) => Some(n.name),
                _ => None,
            })
            .collect();
        let gone: Vec<Sym> = self
            .nodes
            .keys()
            .filter(|name| !listed.contains(name))
            .copied()
            .collect();
        for name in gone {
            self.node_deleted(name);
        }
        for object in objects {
            if let Object::Node(node) = object {
                self.node_applied(node);
            }
        }
    }

    /// Pods the relist no longer shows were deleted while the watch was blind. Assumed
    /// pods survive: the relist shows them pending (their bind not yet written) or bound,
    /// and both keep them.
    fn relist_pods(&mut self, objects: Vec<Object>) {
        let listed: HashSet<Arc<str>> = objects
            .iter()
            .filter_map(|o| match o {
                Object::Pod(p, _) => Some(p.uid.clone()),
                _ => None,
            })
            .collect();
        let gone: Vec<Arc<str>> = self
            .pods
            .keys()
            .filter(|uid| !listed.contains(*uid))
            .cloned()
            .collect();
        for uid in gone {
            self.pod_deleted(&uid);
        }
        for object in objects {
            if let Object::Pod(pod, version) = object {
                self.note_pods_version(version.as_deref());
                self.writer.versions.note(&pod.uid, version);
                self.pod_applied(pod);
            }
        }
    }

    /// The pod watch has delivered `version`.
    fn note_pods_version(&mut self, version: Option<&str>) {
        if let Some(version) = version_number(version) {
            self.pods_version = self.pods_version.max(version);
        }
    }

    fn node_applied(&mut self, node: Arc<Node>) {
        let action = match self.nodes.insert(node.name, node.clone()) {
            Some(old) if *old == *node => return,
            Some(_) => ActionType::UPDATE,
            None => ActionType::ADD,
        };
        self.cache.update_node(node);
        self.queue
            .on_event(ClusterEvent::new(EventResource::Node, action), self.now());
    }

    fn node_deleted(&mut self, name: Sym) {
        if self.nodes.remove(&name).is_none() {
            return;
        }
        if let Err(error) = self.cache.remove_node(name) {
            tracing::warn!(node = %name, %error, "deleted node was not in the cache");
        }
        if self.divide == Divide::Pods {
            self.writer.delete_node_fence(name);
        }
        self.queue.on_event(
            ClusterEvent::new(EventResource::Node, ActionType::DELETE),
            self.now(),
        );
    }

    /// Whether this instance schedules the pod: its scheduler name is one of the
    /// profiles', and this shard holds it.
    fn responsible_for(&self, pod: &Pod) -> bool {
        self.scheduler_names.contains(&pod.scheduler_name) && self.holds(pod)
    }

    /// Whether this shard holds the pod: its UID hashes to it, or (shards dividing the
    /// nodes) it was handed on to it.
    fn holds(&self, pod: &Pod) -> bool {
        match self.divide {
            // A gang is one instance's, all of it: its Reserve is never split.
            Divide::Pods => self.shard.owns_pod(pod, self.gang_scheduling),
            Divide::Nodes => self.shard.holds(&pod.uid, shard::hops(pod)),
        }
    }

    /// Shards dividing the nodes: whether a pod that fits none of this shard's nodes goes
    /// on to the next shard (unreported, without preemption) rather than being reported
    /// here. Every shard of a round but the last hands it on; the last reports it, and
    /// hands it on (a new round) when it fails again, unless preemption made room for it
    /// on a node of this shard.
    fn hands_on(&self, pod: &Pod) -> bool {
        if self.divide != Divide::Nodes || !self.shard.is_shared() {
            return false;
        }
        if pod
            .nominated_node_name
            .is_some_and(|node| self.shard.owns_node(node.as_str()))
        {
            return false;
        }
        let hops = shard::hops(pod);
        !self.shard.ends_round(hops) || self.rounds_reported.get(&pod.uid) == Some(&hops)
    }

    fn pod_applied(&mut self, pod: Arc<Pod>) {
        let pod = self.with_priority(pod);
        let old = self.pods.insert(pod.uid.clone(), pod.clone());
        if self.shard.is_shared() {
            if fence_scope::reaches_across_nodes(&pod) {
                self.reaching.insert(pod.uid.clone(), pod.clone());
            } else {
                self.reaching.remove(&pod.uid);
            }
        }
        if pod.node_name.is_some() {
            self.assigned_pod_applied(pod, old);
            return;
        }
        let new_member_of = self.note_pending_member(&pod);
        let arrived = old.is_none();
        // Queued first, then the events its arrival sends, as upstream's handler does.
        self.pending_pod_queued(pod, old);
        if arrived {
            self.pending_pod_arrived(new_member_of);
        }
    }

    /// A pending pod seen: queued (or its queue entry updated) if this instance schedules
    /// it.
    fn pending_pod_queued(&mut self, pod: Arc<Pod>, old: Option<Arc<Pod>>) {
        if !self.responsible_for(&pod) || self.cache.is_assumed(&pod.uid) {
            // Someone else's pod, or ours while its bind is in flight. Another
            // instance's preemptor keeps the room it freed from this one too.
            let nomination_changed =
                old.as_ref().map(|o| o.nominated_node_name) != Some(pod.nominated_node_name);
            if self.scheduler_names.contains(&pod.scheduler_name)
                && !self.holds(&pod)
                && nomination_changed
            {
                self.scheduler.note_nomination(pod.clone());
            }
            if !self.holds(&pod) && self.queue.delete(&pod.uid) {
                tracing::debug!(pod = %pod.key(), "pod handed on to another shard");
            }
            return;
        }
        if pod.terminating {
            self.queue.delete(&pod.uid);
            return;
        }
        let now = self.now();
        match old {
            // Only a change of what scheduling reads moves a queued pod (kube-scheduler
            // ignores status-only updates, such as the condition Gantry itself writes).
            Some(old) if self.queue.contains(&pod.uid) => {
                if !same_but_status(&old, &pod) {
                    self.queue.update(pod, now);
                }
            }
            _ => {
                if !self.queue.contains(&pod.uid) && !self.binding.contains_key(&pod.uid) {
                    self.queue.add(pod, now);
                }
            }
        }
    }

    fn assigned_pod_applied(&mut self, pod: Arc<Pod>, old: Option<Arc<Pod>>) {
        // One of the shadowed scheduler's pods, seen pending before and now bound: its
        // decision.
        if self.shadow.is_some()
            && self.responsible_for(&pod)
            && old.as_ref().is_some_and(|o| o.node_name.is_none())
        {
            self.compare_with_shadow(&pod);
        }
        let was_queued = self.queue.delete(&pod.uid);
        if was_queued {
            tracing::debug!(pod = %pod.key(), "pod was bound by someone else");
        }
        if pod.terminating {
            // A preemption whose last victim this is is done (`IsPodRunningPreemption`).
            self.queue.victim_gone(&pod.uid);
        }
        self.reported.remove(&pod.uid);
        self.bind_failures.forget(&pod.uid);
        self.rounds_reported.remove(&pod.uid);
        self.scheduler.clear_nomination(&pod);
        if !self.binding.contains_key(&pod.uid) {
            self.owe_scheduled_event(&pod);
        }
        let known = self.cache.pod(&pod.uid).is_some();
        let result = if known && !self.cache.is_assumed(&pod.uid) {
            if old.as_deref() == Some(&*pod) {
                return;
            }
            self.cache.update_pod(pod.clone())
        } else {
            // New to the cache, or the confirmation of a pod this instance assumed.
            self.cache.add_pod(pod.clone())
        };
        if let Err(error) = result {
            tracing::warn!(pod = %pod.key(), %error, "cache refused a bound pod");
        }
        let action = if known {
            ActionType::UPDATE
        } else {
            ActionType::ADD
        };
        self.queue.on_event(
            ClusterEvent::new(EventResource::AssignedPod, action),
            self.now(),
        );
    }

    fn pod_deleted(&mut self, uid: &Arc<str>) {
        let Some(pod) = self.pods.remove(uid) else {
            return;
        };
        // Waiting at Permit: rejected (and forgotten), not retried.
        self.reject_waiting(uid, gantry_framework::Status::unschedulable("removed"));
        if let Some(Decision::Node(cycle, _)) = self.shadow.as_mut().and_then(|s| s.take(uid)) {
            let _ = cycle.finish(Err("deleted before it was bound".into()));
        }
        self.reaching.remove(uid);
        self.bind_failures.forget(uid);
        self.rounds_reported.remove(uid);
        self.maybe_bound.remove(uid);
        self.writer.versions.forget(uid);
        self.queue.delete(uid);
        self.cache.pod_groups().lock().remove_member(uid);
        self.reported.remove(uid);
        self.scheduler.clear_nomination(&pod);
        self.queue.victim_gone(uid);
        if let Some(cached) = self.cache.pod(uid)
            && self.cache.remove_pod(&cached).is_ok()
        {
            self.queue.on_event(
                ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                self.now(),
            );
        }
    }

    /// A pod whose priority the API server did not set gets its class's (see
    /// [`ObjectMirror::priority_of`]); the usual pod is returned as it is.
    fn with_priority(&self, pod: Arc<Pod>) -> Arc<Pod> {
        if pod.priority != 0 {
            return pod;
        }
        match self.mirror.priority_of(pod.priority_class_name) {
            Some((priority, policy)) if priority != 0 => {
                let mut resolved = Pod::clone(&pod);
                resolved.priority = priority;
                resolved.preemption_policy = policy;
                Arc::new(resolved)
            }
            _ => pod,
        }
    }

    // ---- scheduling and binding ----------------------------------------------------

    fn attempt(&mut self, queued: QueuedPod) {
        let now = self.now();
        // The time since start, for what the scheduler remembers for a while
        // (OpportunisticBatching's rankings).
        self.scheduler.clock = now;
        // The wall clock, for the times plugins write on pods (HAMi's bind time).
        self.scheduler.now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let hands_on = self.hands_on(&queued.pod);
        // A shadow deletes no victims: preemption is the shadowed scheduler's.
        self.scheduler.may_preempt = !hands_on && self.shadow.is_none();
        if self.gang_scheduling
            && let Some(group) = GroupKey::of(&queued.pod)
        {
            self.attempt_group(group, queued);
            return;
        }
        let attempt = self.scheduler.schedule_one(&queued.pod);
        self.conclude(queued, attempt, hands_on);
    }

    /// What follows from an attempt: a bind handed to a writer (or, for a shadow, the
    /// decision kept to compare), or the pod back in the queue with its failure written.
    fn conclude(&mut self, queued: QueuedPod, attempt: Attempt, hands_on: bool) {
        let now = self.now();
        match attempt {
            Attempt::Scheduled {
                pod,
                state,
                wait: Some(wait),
                ..
            } => self.start_waiting(queued, pod, state, wait),
            Attempt::Scheduled { pod, state, .. } => self.start_binding(queued, pod, state, None),
            Attempt::Unschedulable { fit_error, .. } if self.shadow.is_some() => {
                let plugins = fit_error.rejecting_plugins();
                let decision = Decision::Unschedulable {
                    message: fit_error.to_string(),
                    plugins: plugins.iter().map(|p| p.to_string()).collect(),
                };
                let uid = queued.pod.uid.clone();
                if let Some(shadow) = self.shadow.as_mut() {
                    shadow.decided(uid, decision);
                }
                self.queue.add_unschedulable(queued, plugins, now);
            }
            Attempt::Unschedulable {
                fit_error,
                nominated,
            } => {
                if let Some(claim) = &fit_error.claim_to_deallocate {
                    self.writer.deallocate(claim.clone());
                }
                if let Some(claim) = &fit_error.claim_to_delete {
                    self.writer.delete_left_behind(claim.clone());
                }
                if hands_on {
                    // Gone from this queue once the watch shows it handed on; should the
                    // write be refused, its retry here hands it on again.
                    let hops = shard::hops(&queued.pod).wrapping_add(1);
                    self.writer.hand_off(&queued.pod, hops);
                    self.queue.add_backoff(queued, now);
                    return;
                }
                if self.divide == Divide::Nodes && self.shard.is_shared() {
                    let hops = shard::hops(&queued.pod);
                    self.rounds_reported.insert(queued.pod.uid.clone(), hops);
                }
                let message = fit_error.to_string();
                let plugins = fit_error.rejecting_plugins();
                let mut retry = queued;
                let mut nominated_node = None;
                if let Some((node, victims)) = nominated {
                    self.preempt(&victims, &retry.pod, node);
                    let mut pod = Pod::clone(&retry.pod);
                    pod.nominated_node_name = Some(node);
                    retry.pod = Arc::new(pod);
                    nominated_node = Some(node);
                }
                self.report(&retry.pod, message, REASON_UNSCHEDULABLE, nominated_node);
                self.queue.add_unschedulable(retry, plugins, now);
            }
            // A member of a group that was not scheduled: no plugin in particular
            // rejected it, so any cluster event retries it.
            Attempt::GroupRejected {
                message,
                nominated,
                preempted,
            } => {
                if let Some((node, victims)) = &preempted {
                    self.preempt(victims, &queued.pod, *node);
                }
                let mut retry = queued;
                if let Some(node) = nominated {
                    let mut pod = Pod::clone(&retry.pod);
                    pod.nominated_node_name = Some(node);
                    retry.pod = Arc::new(pod);
                }
                self.report(&retry.pod, message, REASON_UNSCHEDULABLE, nominated);
                self.queue.add_unschedulable(retry, Vec::new(), now);
            }
            Attempt::Error(message) => {
                self.report(&queued.pod, message, REASON_SCHEDULER_ERROR, None);
                self.queue.add_backoff(queued, now);
            }
        }
    }

    /// The binding cycle of a pod Permit let through: handed to a writer (or, for a
    /// shadow, kept as the decision to compare).
    /// `seen`: the cycle that decided it, kept while it waited (a shadow's; by default
    /// the last one).
    fn start_binding(
        &mut self,
        queued: QueuedPod,
        pod: Arc<Pod>,
        state: Box<CycleState>,
        seen: Option<Box<LastCycle>>,
    ) {
        let uid = pod.uid.clone();
        let Some(cycle) = self.scheduler.binding_cycle(pod, state) else {
            self.queue.add_backoff(queued, self.now());
            return;
        };
        if let Some(shadow) = self.shadow.as_mut() {
            let seen = seen.unwrap_or_else(|| Box::new(self.scheduler.take_last_cycle()));
            shadow.decided(uid, Decision::Node(Box::new(cycle), seen));
            return;
        }
        let fences = self.fences_for(cycle.pod(), cycle.node());
        self.binding.insert(uid, queued);
        self.writer.bind(cycle, fences);
    }

    /// The fences the bind of `pod` on `node` takes when instances share the cluster
    /// ([`fence_scope`]); none alone.
    fn fences_for(&self, pod: &Pod, node: Sym) -> Vec<String> {
        if !self.shard.is_shared() {
            return Vec::new();
        }
        let mut fences = match self.nodes.get(&node) {
            Some(info) => fence_scope::fences_for(pod, info, self.reaching.values().map(|p| &**p)),
            None => vec![fence_scope::node_fence(node)],
        };
        if self.divide == Divide::Nodes {
            // This shard is the only one binding onto its nodes.
            let own = fence_scope::node_fence(node);
            fences.retain(|fence| *fence != own);
        }
        fences
    }

    /// The binder's re-check at the node's fence ([`Scheduler::check_placement`], which
    /// also checks that the devices Reserve chose are still the pod's alone).
    fn check_placement(&mut self, pod: &Arc<Pod>) -> Result<(), String> {
        self.scheduler
            .check_placement(pod)
            .map_err(|status| match status.plugin() {
                "" => status.message(),
                plugin => format!("{plugin}: {}", status.message()),
            })
    }

    /// Compares the other scheduler's binding of `pod` with Gantry's decision.
    fn compare_with_shadow(&mut self, pod: &Arc<Pod>) {
        let Some(real) = pod.node_name else { return };
        let Some(shadow) = self.shadow.as_mut() else {
            return;
        };
        let at_s = self.start.elapsed().as_secs_f64();
        let disagreement = match shadow.take(&pod.uid) {
            None => {
                shadow.missed();
                return;
            }
            Some(Decision::Node(cycle, _)) if cycle.node() == real => {
                let _ = cycle.finish(Ok(()));
                shadow.agreed();
                return;
            }
            Some(Decision::Node(cycle, seen)) => {
                let ours = cycle.node();
                // Given back (unreserved, forgotten): the real node is judged without it.
                let _ = cycle.finish(Err("bound elsewhere by the shadowed scheduler".into()));
                let (reason, message) = match self.scheduler.check_placement(&placed_on(pod, real))
                {
                    Ok(()) => match seen.judge(real) {
                        OtherNode::Unknown => (SCORED_LOWER.to_string(), String::new()),
                        judged @ OtherNode::ScoredLower { .. } => {
                            (SCORED_LOWER.to_string(), judged.to_string())
                        }
                        judged => (judged.kind().to_string(), judged.to_string()),
                    },
                    Err(status) => (status.plugin().to_string(), status.message()),
                };
                Disagreement {
                    pod: pod.key(),
                    bound_to: real.to_string(),
                    gantry: Some(ours.to_string()),
                    reason,
                    message,
                    at_s,
                }
            }
            Some(Decision::Unschedulable { message, plugins }) => Disagreement {
                pod: pod.key(),
                bound_to: real.to_string(),
                gantry: None,
                reason: format!("unschedulable: {}", plugins.join(",")),
                message,
                at_s,
            },
        };
        if let Some(shadow) = self.shadow.as_mut() {
            shadow.disagreed(disagreement);
        }
    }

    /// Writes the failure (event always, condition when it changed); a shadow writes
    /// nothing.
    fn report(
        &mut self,
        pod: &Arc<Pod>,
        message: String,
        reason: &'static str,
        nominated: Option<Sym>,
    ) {
        if self.shadow.is_some() {
            return;
        }
        let changed = self.reported.get(&pod.uid) != Some(&message) || nominated.is_some();
        self.writer
            .report_failure(pod, &message, reason, nominated, changed);
        self.reported.insert(pod.uid.clone(), message);
    }

    fn conclude_bind(&mut self, done: BindDone) {
        let BindDone {
            cycle,
            result,
            took,
        } = done;
        self.scheduler
            .metrics
            .observe_extension_point(Point::Bind, took);
        let pod = cycle.pod().clone();
        let node = cycle.node();
        let queued = self.binding.remove(&pod.uid);
        let failure = result.as_ref().err().cloned();
        let concluded = (self.scheduler).finish_binding_cycle(cycle, result.map_err(|f| f.message));
        let (Err(message), Some(failure)) = (concluded, failure) else {
            self.maybe_bound.remove(&pod.uid);
            return;
        };
        if failure.outcome_unknown {
            // The outage is reported once a minute by the writer, not once per pod.
            tracing::debug!(pod = %pod.key(), %message, "bind unanswered; the pod goes back to the queue");
            let nodes = self.maybe_bound.entry(pod.uid.clone()).or_default();
            if !nodes.contains(&node) {
                nodes.push(node);
            }
        } else {
            tracing::info!(pod = %pod.key(), %message, conflict = failure.conflict, "bind failed; the pod goes back to the queue");
            if let Some(times) = self.bind_failures.failed(&pod.uid) {
                tracing::warn!(pod = %pod.key(), times, %message, "binding the pod keeps failing");
            }
        }
        if let Some(bound) = self.pods.get(&pod.uid).cloned() {
            // The watch showed the pod bound while this bind was on the wire.
            self.owe_scheduled_event(&bound);
        }
        // The watch may already have shown the pod bound (by another instance) or
        // deleted: then there is nothing to retry.
        let still_pending = self
            .pods
            .get(&pod.uid)
            .is_some_and(|p| p.node_name.is_none());
        if !still_pending || !self.responsible_for(&pod) {
            return;
        }
        // The forgotten pod's room is free again: what it kept out may fit now.
        if message.forgotten {
            self.queue.assumed_pod_forgotten(self.now());
        }
        let Some(mut queued) = queued else { return };
        let current = self.pods[&pod.uid].clone();
        queued.pod = current;
        self.report(&queued.pod, message.message, REASON_SCHEDULER_ERROR, None);
        self.queue.add_backoff(queued, self.now());
    }

    /// Writes the `Scheduled` event of a pod the watch shows bound to the node an
    /// unanswered binding of this instance named: that binding was written.
    fn owe_scheduled_event(&mut self, pod: &Pod) {
        let Some(node) = pod.node_name else { return };
        if self
            .maybe_bound
            .get(&pod.uid)
            .is_some_and(|nodes| nodes.contains(&node))
        {
            self.maybe_bound.remove(&pod.uid);
            let version = self.writer.versions.of(&pod.uid);
            self.writer.scheduled(pod, node, version);
        }
    }

    /// Forgets the assumed pods whose binds are still in flight (stopping, or no longer
    /// leading): their room is freed; if a bind lands anyway, the watch shows it.
    fn forget_binds_in_flight(&mut self) {
        self.forget_waiting();
        for (uid, queued) in self.binding.drain() {
            if let Some(assumed) = self.cache.pod(&uid)
                && self.cache.is_assumed(&uid)
                && let Err(error) = self.cache.forget_pod(&assumed)
            {
                tracing::warn!(pod = %queued.pod.key(), %error, "could not forget an assumed pod");
            }
        }
    }

    fn publish_metrics(&mut self) {
        let p = self.queue.pending();
        self.scheduler.metrics.pending_pods = [p.active, p.backoff, p.unschedulable, p.gated];
        let mut text = self.scheduler.metrics.render_prometheus();
        if let Some(shadow) = &self.shadow {
            text.push_str(&shadow.render());
        }
        self.shared.set_scheduler_metrics(text);
    }
}

/// Whether two versions of a pending pod differ only in status (nominated node, start
/// time): kube-scheduler does not requeue for such updates.
fn same_but_status(old: &Pod, new: &Pod) -> bool {
    if old.nominated_node_name == new.nominated_node_name && old.start_time == new.start_time {
        return old == new;
    }
    let mut aligned = old.clone();
    aligned.nominated_node_name = new.nominated_node_name;
    aligned.start_time = new.start_time;
    aligned == *new
}

/// A resourceVersion as the number etcd's revision is, when it is one.
fn version_number(version: Option<&str>) -> Option<u64> {
    version?.parse().ok()
}
