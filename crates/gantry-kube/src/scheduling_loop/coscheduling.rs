//! The loop's part in scheduler-plugins' Coscheduling: its PodGroups as the watch reports
//! them, and the pods waiting at Permit until `minMember` of their group are placed,
//! held assumed (their room kept) between cycles, then let through to their binds,
//! rejected, or timed out, as upstream's `waitingPodsMap` and binding cycle do. The
//! simulation does the same on its virtual clock (`gantry-sim`'s `simulation/waiting.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::Pod;
use gantry_api::coscheduling::CoschedulingGroup;
use gantry_cache::GroupKey;
use gantry_framework::handle::Request;
use gantry_framework::{ActionType, ClusterEvent, CycleState, EventResource, Status};
use gantry_scheduler::queue::QueuedPod;
use gantry_scheduler::{LastCycle, PermitWait, PermitWaiters};

use super::SchedulingLoop;
use crate::shadow::Decision;
use crate::watch::Object;
use crate::writes::REASON_UNSCHEDULABLE;

/// A pod waiting at Permit: assumed and reserved, its binding cycle held.
pub struct Waiting {
    /// The pod as assumed (naming its node).
    pod: Arc<Pod>,
    state: Box<CycleState>,
    queued: QueuedPod,
    wait: PermitWait,
    /// When the wait runs out, on the loop's clock.
    deadline: Duration,
    /// The order pods began to wait in (a group's waiting pods are served in it).
    seq: u64,
    /// A shadow's: the cycle that decided the pod, to explain a disagreement with.
    seen: Option<Box<LastCycle>>,
}

/// The pods waiting at Permit, by UID.
#[derive(Default)]
pub struct WaitingPods {
    pods: BTreeMap<Arc<str>, Waiting>,
    seq: u64,
}

impl WaitingPods {
    /// When the first wait runs out, if any pod waits.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.pods.values().map(|w| w.deadline).min()
    }
}

impl SchedulingLoop {
    /// A Coscheduling PodGroup was created or changed: pods its absence or its old spec
    /// kept out are tried again (Coscheduling registers PodGroup events).
    pub(super) fn coscheduling_group_applied(&mut self, group: Arc<CoschedulingGroup>) {
        let key = GroupKey {
            namespace: group.namespace,
            name: group.name,
        };
        // The queue orders groups by creation, on the loop's clock (negative: before it).
        let start_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_sub(self.now());
        let created = (i128::from(group.created) * 1_000_000_000)
            .saturating_sub(start_unix.as_nanos() as i128);
        let mut groups = self.cache.pod_groups().lock();
        let action = match groups.coscheduling_group(key) {
            Some(_) => ActionType::UPDATE,
            None => ActionType::ADD,
        };
        groups.set_coscheduling_group(group, created);
        drop(groups);
        let event = ClusterEvent::new(EventResource::PodGroup, action);
        self.queue.on_event(event, self.now());
    }

    pub(super) fn coscheduling_group_deleted(&mut self, key: GroupKey) {
        self.cache
            .pod_groups()
            .lock()
            .remove_coscheduling_group(key);
        let event = ClusterEvent::new(EventResource::PodGroup, ActionType::DELETE);
        self.queue.on_event(event, self.now());
    }

    /// A relist: groups it no longer lists were deleted while the watch was blind.
    pub(super) fn relist_coscheduling_groups(&mut self, objects: Vec<Object>) {
        let listed: Vec<Arc<CoschedulingGroup>> = objects
            .into_iter()
            .filter_map(|o| match o {
                Object::CoschedulingGroup(group) => Some(group),
                _ => None,
            })
            .collect();
        let known: Vec<GroupKey> = self.cache.pod_groups().lock().coscheduling_keys().collect();
        for key in known {
            if !listed
                .iter()
                .any(|g| g.namespace == key.namespace && g.name == key.name)
            {
                self.coscheduling_group_deleted(key);
            }
        }
        for group in listed {
            self.coscheduling_group_applied(group);
        }
    }

    /// The pod waits at Permit until a plugin allows or rejects it, or its wait runs out.
    pub(super) fn start_waiting(
        &mut self,
        queued: QueuedPod,
        pod: Arc<Pod>,
        state: Box<CycleState>,
        wait: PermitWait,
    ) {
        self.waiting.seq += 1;
        let seen = (self.shadow.is_some()).then(|| Box::new(self.scheduler.take_last_cycle()));
        let waiting = Waiting {
            seen,
            deadline: self.now().saturating_add(wait.timeout.wait()),
            seq: self.waiting.seq,
            pod,
            state,
            queued,
            wait,
        };
        self.waiting.pods.insert(waiting.pod.uid.clone(), waiting);
    }

    /// Rejects the pods whose wait has run out, each by the plugin whose wait ended.
    pub(super) fn time_out_waits(&mut self) {
        let now = self.now();
        let mut due: Vec<(u64, Arc<str>)> = (self.waiting.pods.iter())
            .filter(|(_, w)| w.deadline <= now)
            .map(|(uid, w)| (w.seq, uid.clone()))
            .collect();
        due.sort_unstable();
        for (_, uid) in due {
            let Some(waiting) = self.waiting.pods.get(&uid) else {
                continue;
            };
            let status = Status::unschedulable(waiting.wait.timeout_message())
                .with_plugin(waiting.wait.plugin);
            self.reject_waiting(&uid, status);
            self.serve_requests();
        }
    }

    /// Drops the waiting pods without a word (stopping, or no longer leading): their
    /// room is freed in this cache; nothing of them was written.
    pub(super) fn forget_waiting(&mut self) {
        for (_, mut waiting) in std::mem::take(&mut self.waiting.pods) {
            let status = Status::unschedulable("scheduler stopping");
            self.scheduler
                .reject_waiting(&waiting.pod, &mut waiting.state, status);
        }
        let _ = self.scheduler.take_requests();
    }
}

impl PermitWaiters for SchedulingLoop {
    fn take_requests(&mut self) -> Vec<Request> {
        self.scheduler.take_requests()
    }

    /// The group's pods waiting at Permit, in the order they began to wait.
    fn waiting_members(&self, group: GroupKey) -> Vec<Arc<str>> {
        let mut members: Vec<(u64, Arc<str>)> = (self.waiting.pods.iter())
            .filter(|(_, w)| GroupKey::labelled(&w.pod) == Some(group))
            .map(|(uid, w)| (w.seq, uid.clone()))
            .collect();
        members.sort_unstable();
        members.into_iter().map(|(_, uid)| uid).collect()
    }

    /// Permit let the pod through: its binding cycle goes on.
    fn allow_waiting(&mut self, uid: &Arc<str>) {
        if let Some(waiting) = self.waiting.pods.remove(uid) {
            self.start_binding(waiting.queued, waiting.pod, waiting.state, waiting.seen);
        }
    }

    /// The waiting pod was rejected: upstream's `handleBindingCycleError` unreserves and
    /// forgets it, wakes the pods it kept out (not its own group's: their retry is
    /// Coscheduling's), and the pod fails over its node with the rejection, written as
    /// any failure is (a shadow keeps it as its decision).
    fn reject_waiting(&mut self, uid: &Arc<str>, status: Status) {
        let Some(mut waiting) = self.waiting.pods.remove(uid) else {
            return;
        };
        let now = self.now();
        let fit_error = (self.scheduler).reject_waiting(&waiting.pod, &mut waiting.state, status);
        let group = GroupKey::labelled(&waiting.pod);
        self.queue.assumed_pod_forgotten_outside(now, |pod| {
            pod.uid != waiting.pod.uid && (group.is_none() || GroupKey::labelled(pod) != group)
        });
        // Deleted while it waited: nothing to retry.
        if !self.pods.contains_key(uid) {
            return;
        }
        let plugins = fit_error.rejecting_plugins();
        let message = fit_error.to_string();
        match self.shadow.as_mut() {
            Some(shadow) => {
                let plugins = plugins.iter().map(|p| p.to_string()).collect();
                shadow.decided(uid.clone(), Decision::Unschedulable { message, plugins });
            }
            None => self.report(&waiting.queued.pod, message, REASON_UNSCHEDULABLE, None),
        }
        (self.queue).add_rejected_while_waiting(waiting.queued, plugins, now);
    }

    fn activate_siblings(&mut self, group: GroupKey, except: &str) {
        let siblings = (self.cache.pod_groups().lock()).pending_siblings(group, except);
        self.queue.activate(&siblings);
    }
}
