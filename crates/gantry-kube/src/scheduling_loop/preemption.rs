//! Preemption's victims removed through the API: a pod's, or a pod group's (workload-aware
//! preemption), in the background where the release has SchedulerAsyncPreemption.

use std::sync::Arc;

use gantry_api::{Gate, Pod, Sym};

use super::SchedulingLoop;
use crate::writes::Preemptor;

impl SchedulingLoop {
    /// Removes the victims `preemptor`'s preemption chose: in the background, the
    /// preemptor held back meanwhile, where its release has SchedulerAsyncPreemption.
    pub(super) fn preempt(&mut self, victims: &[Arc<Pod>], preemptor: &Arc<Pod>, node: Sym) {
        self.remove_victims(victims, preemptor, &Preemptor::pod(preemptor, node));
    }

    /// The same for `preemptor`, whose pods are decided by `pod`'s profile.
    pub(super) fn remove_victims(
        &mut self,
        victims: &[Arc<Pod>],
        pod: &Pod,
        preemptor: &Preemptor,
    ) {
        let in_background = (self.scheduler.profile_for(pod))
            .is_some_and(|p| p.release.enabled(Gate::SchedulerAsyncPreemption));
        if in_background && !victims.is_empty() {
            self.queue.preemption_started(preemptor.held.clone());
            self.writer.preempt_in_background(victims, preemptor);
            return;
        }
        for victim in victims {
            self.writer.preempt(victim, preemptor);
        }
    }
}
