//! The loop's part in gang scheduling (GenericWorkload and GangScheduling, v1.36): the
//! PodGroups and their members as the watches report them, the pod-group cycle of a
//! popped member, and the `PodGroupScheduled` condition it writes.

use std::sync::Arc;

use gantry_api::{Pod, PodGroup};
use gantry_cache::{GroupKey, PodGroupStates, Stage};
use gantry_framework::{ActionType, ClusterEvent, EventResource};
use gantry_scheduler::queue::QueuedPod;
use gantry_scheduler::{Attempt, BindingCycle, GroupOutcome};
use serde_json::Value;

use super::SchedulingLoop;
use crate::pod_groups::next_condition;
use crate::watch::Object;
use crate::writes::{Preemptor, now_rfc3339};

impl SchedulingLoop {
    /// A PodGroup was created or changed: its members held back waiting for it are
    /// judged again.
    pub(super) fn pod_group_applied(
        &mut self,
        group: Arc<PodGroup>,
        condition: Option<Arc<Value>>,
    ) {
        let key = GroupKey::of_group(&group);
        let action = match self.pod_groups.insert(key, condition) {
            Some(_) => ActionType::UPDATE,
            None => ActionType::ADD,
        };
        self.cache.pod_groups().lock().set_group(group);
        self.queue.requeue_gated_members(key);
        self.queue.on_event(
            ClusterEvent::new(EventResource::PodGroup, action),
            self.now(),
        );
    }

    pub(super) fn pod_group_deleted(&mut self, key: GroupKey) {
        if self.pod_groups.remove(&key).is_none() {
            return;
        }
        self.cache.pod_groups().lock().remove_group(key);
        self.queue.on_event(
            ClusterEvent::new(EventResource::PodGroup, ActionType::DELETE),
            self.now(),
        );
    }

    /// A relist: groups it no longer lists were deleted while the watch was blind.
    pub(super) fn relist_pod_groups(&mut self, objects: Vec<Object>) {
        let listed: Vec<(Arc<PodGroup>, Option<Arc<Value>>)> = objects
            .into_iter()
            .filter_map(|o| match o {
                Object::PodGroup(group, condition) => Some((group, condition)),
                _ => None,
            })
            .collect();
        let mut gone: Vec<GroupKey> = (self.pod_groups.keys())
            .filter(|key| !listed.iter().any(|(g, _)| GroupKey::of_group(g) == **key))
            .copied()
            .collect();
        gone.sort_unstable();
        for key in gone {
            self.pod_group_deleted(key);
        }
        for (group, condition) in listed {
            self.pod_group_applied(group, condition);
        }
    }

    /// A pending pod seen: a member of a group is counted in it (unless assumed here,
    /// its bind in flight). Returns its group when it is new to it.
    pub(super) fn note_pending_member(&mut self, pod: &Arc<Pod>) -> Option<GroupKey> {
        if !PodGroupStates::is_member(pod) || self.cache.is_assumed(&pod.uid) {
            return None;
        }
        let mut groups = self.cache.pod_groups().lock();
        let new = groups.stage(&pod.uid).is_none();
        if !matches!(groups.stage(&pod.uid), None | Some(Stage::Unscheduled)) {
            return None;
        }
        groups.add_member(pod.clone());
        if new { GroupKey::of(pod) } else { None }
    }

    /// A new pending pod arrived: with gang scheduling, its group's members held back
    /// for want of it are judged again, and pods rejected for want of pods may fit.
    pub(super) fn pending_pod_arrived(&mut self, group: Option<GroupKey>) {
        if !self.gang_scheduling {
            return;
        }
        if let Some(group) = group {
            self.queue.requeue_gated_members(group);
        }
        self.queue.on_event(
            ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD),
            self.now(),
        );
    }

    /// The pod-group cycle of a popped member (`schedule_one_podgroup.go`): the group's
    /// other pending members are taken from the queue and tried with it; each concludes
    /// as a single pod's attempt does, and the group's condition is written.
    pub(super) fn attempt_group(&mut self, group: GroupKey, queued: QueuedPod) {
        let members = self
            .cache
            .pod_groups()
            .lock()
            .members_at(group, Stage::Unscheduled);
        let members = self.queue.pop_members(queued, &members);
        let pods: Vec<Arc<Pod>> = members.iter().map(|q| q.pod.clone()).collect();
        let uids: Vec<Arc<str>> = pods.iter().map(|pod| pod.uid.clone()).collect();
        let cycle = self.scheduler.schedule_pod_group(&pods);
        // Alone, each member binds as a single pod does; beside other instances, another
        // may take a member's room between two binds, so the gang binds together.
        let together = self.shard.is_shared()
            && self.shadow.is_none()
            && cycle.outcome == GroupOutcome::Scheduled;
        for (member, node, victims) in &cycle.preempted_before_error {
            self.preempt(victims, &members[*member].pod, *node);
        }
        if !cycle.group_victims.is_empty() {
            self.preempt_as_group(group, &pods, &cycle.group_victims);
        }
        let mut gang = Vec::new();
        for (queued, (_, attempt)) in members.into_iter().zip(cycle.attempts) {
            match attempt {
                Attempt::Scheduled { pod, state, .. } if together => {
                    match self.scheduler.binding_cycle(pod, state) {
                        Some(binding) => gang.push((queued, binding)),
                        None => self.queue.add_backoff(queued, self.now()),
                    }
                }
                attempt => self.conclude(queued, attempt, false),
            }
        }
        // A started preemption changes the next cycle (its preemptor held back): the
        // others are tried again without it, as in `simulate`.
        if pods.iter().any(|pod| self.queue.is_preempting(pod)) {
            self.queue.retry_after_backoff(&uids);
        }
        if !gang.is_empty() {
            self.bind_gang(gang);
        }
        self.write_group_condition(group, &cycle.outcome);
    }

    /// Removes the victims of the group's workload-aware preemption, every member held
    /// back meanwhile. A shadow writes nothing.
    fn preempt_as_group(&mut self, key: GroupKey, members: &[Arc<Pod>], victims: &[Arc<Pod>]) {
        if self.shadow.is_some() {
            return;
        }
        let group = self.cache.pod_groups().lock().group(key).cloned();
        match group.and_then(|g| Preemptor::group(&g, members)) {
            Some(preemptor) => self.remove_victims(victims, &members[0], &preemptor),
            None => {
                tracing::error!(group = %key, "a pod group preempted, but the API gave it no uid")
            }
        }
    }

    /// Hands the gang's binding cycles to one writer task, behind the union of their
    /// fences.
    fn bind_gang(&mut self, gang: Vec<(QueuedPod, BindingCycle)>) {
        let mut fences: Vec<String> = (gang.iter())
            .flat_map(|(_, cycle)| self.fences_for(cycle.pod(), cycle.node()))
            .collect();
        // Taken in one order by every binder, so that two never wait on each other.
        fences.sort_unstable();
        fences.dedup();
        let mut cycles = Vec::with_capacity(gang.len());
        for (queued, cycle) in gang {
            self.binding.insert(queued.pod.uid.clone(), queued);
            cycles.push(cycle);
        }
        self.writer.bind_gang(cycles, fences);
    }

    /// Writes the condition the cycle's outcome sets, unless it would change nothing (a
    /// shadow writes nothing).
    fn write_group_condition(&mut self, key: GroupKey, outcome: &GroupOutcome) {
        if self.shadow.is_some() {
            return;
        }
        let Some(group) = self.cache.pod_groups().lock().group(key).cloned() else {
            return;
        };
        let existing = self.pod_groups.get(&key).cloned().flatten();
        let Some(condition) = next_condition(existing.as_deref(), outcome, &group, &now_rfc3339())
        else {
            return;
        };
        self.writer.pod_group_condition(&group, &condition);
        // Until the watch shows the write, the next cycle starts from it.
        self.pod_groups.insert(key, Some(Arc::new(condition)));
    }
}
