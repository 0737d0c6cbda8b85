//! Preemption's victims leave through the API. Before SchedulerAsyncPreemption (v1.32 and
//! earlier, or with the gate off) the scheduling cycle deletes them itself, so they are
//! gone when the attempt ends. With it (on from v1.33), a goroutine deletes them while the
//! scheduler goes on with other pods, and DefaultPreemption's PreEnqueue holds the
//! preemptor back until it is done (`prepareCandidateAsync` in
//! `pkg/scheduler/framework/preemption/executor.go`, v1.36.3): each victim takes a status
//! patch (its DisruptionTarget condition) and a delete, one API call's latency each, and
//! a token of the scheduler's client each; all victims but the last go in parallel, then
//! the last. The hold ends when the goroutine
//! does, or when the scheduler sees the last victim gone once its deletion has begun.

use std::sync::Arc;

use gantry_api::{Gate, Pod};
use gantry_cache::GroupKey;
use gantry_scheduler::queue::Preemptor;

use super::{Event, Simulation};

/// API calls per victim: the DisruptionTarget status patch, then the delete.
const CALLS_PER_VICTIM: u32 = 2;

/// What a background preemption has deleted.
pub(super) enum Deleted {
    /// Every victim but the last (whose UID it names), which it deletes next.
    AllButLast(Vec<Arc<Pod>>, Arc<str>),
    /// The last victim: the preemption is done.
    Last(Arc<Pod>),
}

impl Simulation {
    /// The pod at `index` preempted `victims`: they are deleted at once, or in the
    /// background with the preemptor held back meanwhile.
    pub(super) fn preempt(
        &mut self,
        instance: usize,
        index: usize,
        preemptor: &Pod,
        victims: Vec<Arc<Pod>>,
    ) {
        let by = Preemptor::Pod(preemptor.uid.clone());
        self.preempt_for(instance, index, preemptor, by, victims);
    }

    /// As [`Self::preempt`], for a pod group whose member at `index` is `member`
    /// (workload-aware preemption, whose executor holds the group, and so every member,
    /// back).
    pub(super) fn preempt_for_group(
        &mut self,
        instance: usize,
        index: usize,
        member: &Pod,
        group: GroupKey,
        victims: Vec<Arc<Pod>>,
    ) {
        self.preempt_for(instance, index, member, Preemptor::Group(group), victims);
    }

    fn preempt_for(
        &mut self,
        instance: usize,
        index: usize,
        pod: &Pod,
        preemptor: Preemptor,
        mut victims: Vec<Arc<Pod>>,
    ) {
        let in_background = (self.instances[instance].scheduler.profile_for(pod))
            .is_some_and(|p| p.release.enabled(Gate::SchedulerAsyncPreemption));
        if !in_background {
            self.evict(index, &victims);
            return;
        }
        let Some(last) = victims.pop() else {
            return;
        };
        let queue = &mut self.instances[instance].queue;
        queue.preemption_started(preemptor.clone());
        let mut at = self.clock;
        if victims.is_empty() {
            queue.preemption_deleting_last_victim(&preemptor, last.uid.clone());
        } else {
            at = self.api_calls(instance, at, victims.len(), CALLS_PER_VICTIM);
            let deleted = Event::VictimsDeleted {
                instance,
                index,
                preemptor: preemptor.clone(),
                deleted: Deleted::AllButLast(victims, last.uid.clone()),
            };
            self.push(at, deleted);
        }
        at = self.api_calls(instance, at, 1, CALLS_PER_VICTIM);
        let deleted = Event::VictimsDeleted {
            instance,
            index,
            preemptor,
            deleted: Deleted::Last(last),
        };
        self.push(at, deleted);
    }

    /// The background preemption deleted these victims (some may be gone already): the
    /// last of them, after which its pods are no longer held back (and the deletion moves
    /// them), or all the others, after which it deletes the last.
    pub(super) fn victims_deleted(
        &mut self,
        instance: usize,
        index: usize,
        preemptor: &Preemptor,
        deleted: Deleted,
    ) {
        let queue = &mut self.instances[instance].queue;
        match deleted {
            Deleted::AllButLast(victims, last) => {
                queue.preemption_deleting_last_victim(preemptor, last.clone());
                self.evict(index, &victims);
            }
            Deleted::Last(victim) => {
                queue.preemption_finished(preemptor);
                self.evict(index, std::slice::from_ref(&victim));
            }
        }
    }

    /// Preemption's victims are deleted, each still bound noted as preempted and as
    /// evicted by the pod at `index`.
    pub(super) fn evict(&mut self, index: usize, victims: &[Arc<Pod>]) {
        for victim in victims {
            if !self.delete_bound(&victim.uid) {
                continue;
            }
            self.preempted += 1;
            if let Some(v) = self.records.index(&victim.uid) {
                self.records.history_mut(v).preempted = true;
            }
            self.records.placement_mut(index).evicted.push(victim.key());
        }
    }
}
