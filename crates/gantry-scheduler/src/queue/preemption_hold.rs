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
//! and `plugins/defaultpreemption/default_preemption.go`, v1.36.3.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use smallvec::SmallVec;

use gantry_framework::{ActionType, ClusterEvent, EventResource};

/// The plugin whose PreEnqueue holds a preemptor back.
pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";

#[derive(Default)]
pub(super) struct PreemptionHold {
    /// Preemptors whose victims' deletions are in flight, with the last victim once its
    /// deletion has begun (upstream's `lastVictimsPendingPreemption`).
    preempting: HashMap<Arc<str>, Option<Arc<str>>>,
    /// The preemptors whose last victim each pod is (one, nearly always).
    last_victims: HashMap<Arc<str>, SmallVec<[Arc<str>; 1]>>,
    /// Pods the hold turned away, still waiting for an event that moves them.
    held: HashSet<Arc<str>>,
}

impl PreemptionHold {
    pub fn start(&mut self, uid: Arc<str>) {
        self.preempting.insert(uid, None);
    }

    /// The preemption deletes its last victim now.
    pub fn deleting_last(&mut self, uid: &Arc<str>, victim: Arc<str>) {
        if let Some(last) = self.preempting.get_mut(uid) {
            *last = Some(victim.clone());
            self.last_victims
                .entry(victim)
                .or_default()
                .push(uid.clone());
        }
    }

    /// The victims' deletions are done: the pod passes PreEnqueue again, but still waits
    /// for an event (the deletions themselves) to move it.
    pub fn finish(&mut self, uid: &str) {
        let Some(Some(victim)) = self.preempting.remove(uid) else {
            return;
        };
        if let Some(preemptors) = self.last_victims.get_mut(&victim) {
            preemptors.retain(|p| &**p != uid);
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
            self.preempting.remove(&preemptor);
        }
    }

    // The checks below look nothing up while no preemption runs and no pod is held
    // (hashing a UID at every move of every pod showed in the budgets' instruction
    // counts).

    pub fn is_preempting(&self, uid: &str) -> bool {
        !self.preempting.is_empty() && self.preempting.contains_key(uid)
    }

    pub fn is_held(&self, uid: &str) -> bool {
        !self.held.is_empty() && self.held.contains(uid)
    }

    /// The pod is on its way to activeQ or backoffQ: whether PreEnqueue turns it away. A
    /// pod turned away has DefaultPreemption among its rejecting plugins from now on.
    pub fn turns_away(&mut self, uid: &Arc<str>, plugins: &mut Vec<&'static str>) -> bool {
        if !self.is_preempting(uid) {
            self.release(uid);
            return false;
        }
        if !plugins.contains(&DEFAULT_PREEMPTION) {
            plugins.push(DEFAULT_PREEMPTION);
        }
        self.held.insert(uid.clone());
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
