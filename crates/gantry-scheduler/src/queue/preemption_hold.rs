//! DefaultPreemption's PreEnqueue under SchedulerAsyncPreemption (KEP-4832, on from
//! v1.33): a preemptor whose victims are still being deleted in the background is held
//! back from the queue, so that it is not tried (and does not preempt again) before they
//! are gone. Upstream keeps the preemptors in `Executor.preempting`; a pod its PreEnqueue
//! rejects waits among the unschedulable pods with DefaultPreemption added to the plugins
//! that rejected it (its `GatingPlugin`), and only a pod's deletion, the one event
//! DefaultPreemption registers, may move it, when another of those plugins says so (its own
//! queueing hint always skips). The hold ends when the deletions are done, or as soon as the
//! last victim, once its deletion has begun, is seen gone or terminating
//! (`IsPodRunningPreemption` reads it from the informer's cache: the deletion's watch event
//! may come before the deleting call returns). `pkg/scheduler/framework/preemption/executor.go`
//! and `plugins/defaultpreemption/default_preemption.go`, v1.36.3. A pod group's preemption
//! (workload-aware preemption) is kept by the group: PreEnqueue holds back every member,
//! one created while the victims are deleted too (`IsPodGroupRunningPreemption`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use smallvec::SmallVec;

use gantry_api::Pod;
use gantry_cache::GroupKey;
use gantry_framework::{ActionType, ClusterEvent, EventResource};

/// Whose preemption deletes victims: a pod's (its UID) or a pod group's (upstream's
/// executor keeps the PodGroup's UID).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Preemptor {
    Pod(Arc<str>),
    Group(GroupKey),
}

/// The plugin whose PreEnqueue holds a preemptor back.
pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";

#[derive(Default)]
pub(super) struct PreemptionHold {
    /// Pods whose victims' deletions are in flight, with the last victim once its deletion
    /// has begun (upstream's `lastVictimsPendingPreemption`), by UID.
    pods: HashMap<Arc<str>, Option<Arc<str>>>,
    /// The same for pod groups: apart, so that looking a pod up builds no key.
    groups: HashMap<GroupKey, Option<Arc<str>>>,
    /// The preemptors whose last victim each pod is (one, nearly always).
    last_victims: HashMap<Arc<str>, SmallVec<[Preemptor; 1]>>,
    /// Pods the hold turned away, still waiting for an event that moves them.
    held: HashSet<Arc<str>>,
}

impl PreemptionHold {
    pub fn start(&mut self, preemptor: Preemptor) {
        match preemptor {
            Preemptor::Pod(uid) => self.pods.insert(uid, None),
            Preemptor::Group(group) => self.groups.insert(group, None),
        };
    }

    /// The preemption's last victim, once its deletion has begun; `None` if it is done.
    fn last_victim(&mut self, preemptor: &Preemptor) -> Option<&mut Option<Arc<str>>> {
        match preemptor {
            Preemptor::Pod(uid) => self.pods.get_mut(uid),
            Preemptor::Group(group) => self.groups.get_mut(group),
        }
    }

    /// Ends the preemption; its last victim, if its deletion had begun.
    fn end(&mut self, preemptor: &Preemptor) -> Option<Arc<str>> {
        match preemptor {
            Preemptor::Pod(uid) => self.pods.remove(uid),
            Preemptor::Group(group) => self.groups.remove(group),
        }
        .flatten()
    }

    /// The preemption deletes its last victim now.
    pub fn deleting_last(&mut self, preemptor: &Preemptor, victim: Arc<str>) {
        if let Some(last) = self.last_victim(preemptor) {
            *last = Some(victim.clone());
            self.last_victims
                .entry(victim)
                .or_default()
                .push(preemptor.clone());
        }
    }

    /// The victims' deletions are done: the pod passes PreEnqueue again, but still waits
    /// for an event (the deletions themselves) to move it.
    pub fn finish(&mut self, preemptor: &Preemptor) {
        let Some(victim) = self.end(preemptor) else {
            return;
        };
        if let Some(preemptors) = self.last_victims.get_mut(&victim) {
            preemptors.retain(|p| p != preemptor);
            if preemptors.is_empty() {
                self.last_victims.remove(&victim);
            }
        }
    }

    /// The pod was seen deleted or terminating: the preemptions whose last victim it is
    /// are done.
    pub fn victim_gone(&mut self, victim: &str) {
        if self.last_victims.is_empty() {
            return;
        }
        for preemptor in self.last_victims.remove(victim).unwrap_or_default() {
            self.end(&preemptor);
        }
    }

    // The checks below look nothing up while no preemption runs and no pod is held
    // (hashing a UID at every move of every pod showed in the budgets' instruction
    // counts).

    /// Whether a preemption holds `pod` back: its group's, or its own (a member's own
    /// never runs while its group's may: DefaultPreemption refuses members under
    /// workload-aware preemption).
    pub fn is_preempting(&self, pod: &Pod) -> bool {
        let group = || GroupKey::of(pod).is_some_and(|g| self.groups.contains_key(&g));
        (!self.groups.is_empty() && group())
            || (!self.pods.is_empty() && self.pods.contains_key(&*pod.uid))
    }

    pub fn is_held(&self, uid: &str) -> bool {
        !self.held.is_empty() && self.held.contains(uid)
    }

    /// The pod is on its way to activeQ or backoffQ: whether PreEnqueue turns it away. A
    /// pod turned away has DefaultPreemption among its rejecting plugins from now on.
    pub fn turns_away(&mut self, pod: &Pod, plugins: &mut Vec<&'static str>) -> bool {
        if !self.is_preempting(pod) {
            self.release(&pod.uid);
            return false;
        }
        if !plugins.contains(&DEFAULT_PREEMPTION) {
            plugins.push(DEFAULT_PREEMPTION);
        }
        self.held.insert(pod.uid.clone());
        true
    }

    /// The pod left the queue, or was put back after an attempt (it was not held then).
    pub fn release(&mut self, uid: &str) {
        if !self.held.is_empty() {
            self.held.remove(uid);
        }
    }
}

/// Whether `event` may move a pod rejected by `rejecting_plugins`, given whether each
/// other plugin may help (`helps`). A pod held back by DefaultPreemption moves only on a
/// pod's deletion that another of its rejecting plugins cares for; others as `helps` says.
pub(super) fn may_move(
    rejecting_plugins: &[&'static str],
    event: &ClusterEvent,
    helps: impl Fn(&'static str) -> bool,
) -> bool {
    if !rejecting_plugins.contains(&DEFAULT_PREEMPTION) {
        return rejecting_plugins.is_empty() || rejecting_plugins.iter().any(|p| helps(p));
    }
    let pod_deleted = matches!(
        event.resource,
        EventResource::AssignedPod | EventResource::UnscheduledPod
    ) && event.action.intersects(ActionType::DELETE);
    pod_deleted
        && rejecting_plugins
            .iter()
            .any(|p| *p != DEFAULT_PREEMPTION && helps(p))
}
