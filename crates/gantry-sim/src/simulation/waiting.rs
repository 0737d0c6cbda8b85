//! Pods waiting at Permit (scheduler-plugins' Coscheduling holds a gang's members there
//! until `minMember` of them are placed): held assumed, then let through, rejected, or
//! timed out on the virtual clock, as upstream's `waitingPodsMap` and binding cycle do.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;

use gantry_api::Pod;
use gantry_cache::GroupKey;
use gantry_framework::handle::Request;
use gantry_framework::{CycleState, Status};
use gantry_scheduler::queue::QueuedPod;
use gantry_scheduler::{PermitWait, PermitWaiters};

use super::{Event, Simulation};

/// A pod waiting at Permit: assumed and reserved, its binding cycle held.
pub(super) struct Waiting {
    pub instance: usize,
    pub pod: Arc<Pod>,
    pub state: Box<CycleState>,
    pub queued: QueuedPod,
    pub wait: PermitWait,
    /// Which wait this is: a timeout set for an earlier wait of the pod does nothing.
    pub seq: u64,
}

/// The pods waiting at Permit, by uid.
pub(super) type WaitingPods = BTreeMap<Arc<str>, Waiting>;

impl Simulation {
    /// The pod waits at Permit until a plugin allows or rejects it, or its wait runs out.
    pub(super) fn start_waiting(
        &mut self,
        instance: usize,
        pod: Arc<Pod>,
        state: Box<CycleState>,
        queued: QueuedPod,
        wait: PermitWait,
    ) {
        self.seq += 1;
        let seq = self.seq;
        let uid = pod.uid.clone();
        let deadline = self.clock.saturating_add(wait.timeout.wait());
        self.waiting.insert(
            uid.clone(),
            Waiting {
                instance,
                pod,
                state,
                queued,
                wait,
                seq,
            },
        );
        self.push(deadline, Event::PermitTimeout { uid, seq });
    }

    /// A wait ran out: the pod is rejected by the plugin whose wait ended.
    pub(super) fn permit_timeout(&mut self, uid: &Arc<str>, seq: u64) {
        let Some(waiting) = self.waiting.get(uid).filter(|w| w.seq == seq) else {
            return;
        };
        let status =
            Status::unschedulable(waiting.wait.timeout_message()).with_plugin(waiting.wait.plugin);
        let instance = waiting.instance;
        self.reject_waiting(uid, status);
        self.serve_requests(instance);
    }

    /// Drops the timeouts of waits that ended otherwise from the head of the event queue,
    /// as upstream stops a waiting pod's timers: the clock never moves for them.
    pub(super) fn discard_stale_timeouts(&mut self) {
        while let Some(Reverse((_, seq))) = self.events.peek().copied() {
            let stale = match self.payloads.get(&seq) {
                Some(Event::PermitTimeout { uid, seq: wait }) => {
                    self.waiting.get(uid).is_none_or(|w| w.seq != *wait)
                }
                _ => false,
            };
            if !stale {
                return;
            }
            self.events.pop();
            self.payloads.remove(&seq);
        }
    }

    /// Carries out what `instance`'s plugins asked of the waiting pods and the queue.
    pub(super) fn serve_requests(&mut self, instance: usize) {
        InstanceWaiters {
            sim: self,
            instance,
        }
        .serve_requests();
    }

    /// The group's pods waiting at Permit in `instance`, in the order they began to wait.
    fn waiting_members(&self, instance: usize, group: GroupKey) -> Vec<Arc<str>> {
        let mut members: Vec<(u64, Arc<str>)> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.instance == instance && GroupKey::labelled(&w.pod) == Some(group))
            .map(|(uid, w)| (w.seq, uid.clone()))
            .collect();
        members.sort_unstable();
        members.into_iter().map(|(_, uid)| uid).collect()
    }

    /// Permit let the pod through: its binding cycle goes on.
    fn allow_waiting(&mut self, uid: &Arc<str>) {
        let Some(waiting) = self.waiting.remove(uid) else {
            return;
        };
        let due = self.api_calls(waiting.instance, self.clock, 1, 1);
        self.push(
            due,
            Event::BindDue {
                instance: waiting.instance,
                pod: waiting.pod,
                state: waiting.state,
                queued: waiting.queued,
            },
        );
    }

    /// The waiting pod was rejected: upstream's `handleBindingCycleError` unreserves and
    /// forgets it, wakes the pods it kept out, and the pod fails over its node with the
    /// rejection. The room its group's members held wakes no member of the group: their
    /// retry is Coscheduling's (a new pod, a PodGroup change, the five-minute flush),
    /// where upstream retries them in a burst that a race ends in this same state
    /// (docs/gangs.md, "Coscheduling").
    pub(super) fn reject_waiting(&mut self, uid: &Arc<str>, status: Status) {
        let Some(mut waiting) = self.waiting.remove(uid) else {
            return;
        };
        let now = self.clock;
        let instance = waiting.instance;
        let fit_error = self.instances[instance].scheduler.reject_waiting(
            &waiting.pod,
            &mut waiting.state,
            status,
        );
        let group = GroupKey::labelled(&waiting.pod);
        let instance_state = &mut self.instances[instance];
        instance_state
            .queue
            .assumed_pod_forgotten_outside(now, |pod| {
                pod.uid != waiting.pod.uid && (group.is_none() || GroupKey::labelled(pod) != group)
            });
        let Some(index) = self.records.index(uid) else {
            return;
        };
        self.records.placement_mut(index).annotations.clear();
        self.records.set_reason(index, fit_error.to_string());
        if self.instances[instance].take_deleted_in_flight(uid) {
            self.withdraw(instance, &waiting.pod);
            return;
        }
        let mut pending = Pod::clone(&waiting.pod);
        pending.node_name = None;
        pending.bind_annotations = None;
        let queued = QueuedPod {
            pod: Arc::new(pending),
            ..waiting.queued
        };
        self.instances[instance].queue.add_rejected_while_waiting(
            queued,
            fit_error.rejecting_plugins(),
            now,
        );
    }

    /// A pod deleted while it waits at Permit: it is rejected (and forgotten) and not
    /// retried.
    pub(super) fn delete_waiting(&mut self, uid: &Arc<str>) -> bool {
        let Some(waiting) = self.waiting.get(uid) else {
            return false;
        };
        let instance = waiting.instance;
        self.instances[instance].note_deleted_in_flight(uid.clone());
        self.reject_waiting(uid, Status::unschedulable("removed"));
        self.serve_requests(instance);
        true
    }
}

/// The pods waiting at Permit in one instance, as its plugins' requests reach them.
struct InstanceWaiters<'a> {
    sim: &'a mut Simulation,
    instance: usize,
}

impl PermitWaiters for InstanceWaiters<'_> {
    fn take_requests(&mut self) -> Vec<Request> {
        self.sim.instances[self.instance].scheduler.take_requests()
    }

    fn waiting_members(&self, group: GroupKey) -> Vec<Arc<str>> {
        self.sim.waiting_members(self.instance, group)
    }

    fn allow_waiting(&mut self, uid: &Arc<str>) {
        self.sim.allow_waiting(uid);
    }

    fn reject_waiting(&mut self, uid: &Arc<str>, status: Status) {
        self.sim.reject_waiting(uid, status);
    }

    fn activate_siblings(&mut self, group: GroupKey, except: &str) {
        let instance = &mut self.sim.instances[self.instance];
        let siblings = (instance.cache.pod_groups().lock()).pending_siblings(group, except);
        instance.queue.activate(&siblings);
    }
}
