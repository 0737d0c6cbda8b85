//! The pod-group scheduling cycle (v1.36.3, `schedule_one_podgroup.go`, the default
//! algorithm without TopologyAwareWorkloadScheduling): the group's pending members are
//! tried one after another on one view of the cluster, each assumed where it fits so that
//! the next sees it; GangScheduling's Permit makes each wait until `minCount` members are
//! scheduled. If any member's Permit allows it, the group is scheduled and every member
//! that fitted goes on to bind; otherwise every assumed member is forgotten and rejected
//! with its Permit message.

use std::sync::Arc;

use gantry_api::Pod;
use gantry_cache::GroupKey;

use crate::scheduler::GroupCycleState;
use crate::{Attempt, Scheduler, unreserve};

/// upstream's `errPodGroupUnschedulable`.
pub const POD_GROUP_UNSCHEDULABLE: &str = "pod group is unschedulable";

/// The PodGroupScheduled condition a group cycle writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupOutcome {
    /// `status: True`, reason `Scheduled`, no message.
    Scheduled,
    /// `status: False`, reason `Unschedulable`, this message.
    Unschedulable(String),
    /// `status: False`, reason `SchedulerError`, this message.
    Error(String),
}

/// One pod-group cycle's decisions: each member's attempt in the order tried, and the
/// group's condition.
#[derive(Debug)]
pub struct GroupAttempt {
    pub attempts: Vec<(Arc<Pod>, Attempt)>,
    pub outcome: GroupOutcome,
}

impl Scheduler {
    /// Schedules the group's pending members, `pods` in upstream's order (priority, then
    /// first attempt). Scheduled attempts are assumed in the cache, as a single pod's are.
    pub fn schedule_pod_group(&mut self, pods: &[Arc<Pod>]) -> GroupAttempt {
        if let Some(other) = pods
            .iter()
            .find(|p| p.scheduler_name != pods[0].scheduler_name)
        {
            let message = format!(
                "all pods in a single pod group should have the same .spec.schedulerName set, got: {:?} and {:?}",
                other.scheduler_name.as_str(),
                pods[0].scheduler_name.as_str()
            );
            return GroupAttempt {
                attempts: pods
                    .iter()
                    .map(|p| (p.clone(), Attempt::Error(message.clone())))
                    .collect(),
                outcome: GroupOutcome::Error(message),
            };
        }
        self.group_cycle = Some(GroupCycleState::default());
        let mut attempts = Vec::with_capacity(pods.len());
        // Each assumed member's Permit message (`None`: allowed).
        let mut waits: Vec<Option<String>> = Vec::with_capacity(pods.len());
        let mut scheduled = false;
        let mut failure = None;
        for pod in pods {
            let attempt = self.schedule_one(pod);
            match &attempt {
                Attempt::Scheduled { .. } => {
                    let wait = self
                        .group_cycle
                        .as_mut()
                        .and_then(|cycle| cycle.last_wait.take());
                    scheduled |= wait.is_none();
                    waits.push(wait);
                }
                Attempt::Error(message) => {
                    failure = Some(format!(
                        "failed to schedule other pod from a pod group: {message}"
                    ));
                    waits.push(None);
                    attempts.push((pod.clone(), attempt));
                    break;
                }
                // Rejected: the group may still be scheduled without it.
                Attempt::Unschedulable { .. } | Attempt::GroupRejected(_) => waits.push(None),
            }
            attempts.push((pod.clone(), attempt));
        }
        self.group_cycle = None;
        let outcome = match failure {
            Some(message) => GroupOutcome::Error(message),
            None if scheduled => GroupOutcome::Scheduled,
            None => GroupOutcome::Unschedulable(POD_GROUP_UNSCHEDULABLE.to_string()),
        };
        if outcome != GroupOutcome::Scheduled {
            self.revert(&mut attempts, &waits, &outcome);
        }
        // After an error every member fails with the group's error, but one that failed
        // with its own, and the pods the loop never reached with them.
        if let GroupOutcome::Error(message) = &outcome {
            for (_, attempt) in &mut attempts {
                if !matches!(attempt, Attempt::Error(_)) {
                    *attempt = Attempt::Error(message.clone());
                }
            }
            for pod in &pods[attempts.len()..] {
                attempts.push((pod.clone(), Attempt::Error(message.clone())));
            }
        }
        GroupAttempt { attempts, outcome }
    }

    /// Whether binding `pods` (members of one gang, bound together) leaves the gang with
    /// at least `minCount` members bound, its siblings counted once the cache has seen
    /// them bound. Instances sharing the cluster bind a gang only so: a member let through
    /// Permit on the count of siblings merely assumed (their binds in flight, and refused
    /// later) would otherwise be bound alone.
    pub fn check_quorum(&self, pods: &[Arc<Pod>]) -> Result<(), String> {
        let Some(key) = pods.first().and_then(|pod| GroupKey::of(pod)) else {
            return Ok(());
        };
        let groups = self.cache.pod_groups().lock();
        let Some(min_count) = groups.group(key).and_then(|g| g.min_count()) else {
            return Ok(());
        };
        let bound = groups.counts(key).assigned + pods.len();
        if bound >= min_count as usize {
            return Ok(());
        }
        Err(format!(
            "the gang {key} would have {bound} of its minCount {min_count} members bound: the siblings it was let through with are not"
        ))
    }

    /// Forgets every assumed member, last first (upstream's deferred reverts), and turns
    /// its attempt into the group's rejection.
    fn revert(
        &mut self,
        attempts: &mut [(Arc<Pod>, Attempt)],
        waits: &[Option<String>],
        outcome: &GroupOutcome,
    ) {
        for ((pod, attempt), wait) in attempts.iter_mut().zip(waits).rev() {
            let Attempt::Scheduled {
                pod: assumed,
                node,
                state,
                ..
            } = attempt
            else {
                continue;
            };
            if let Some(profile) = self.profile_for(pod) {
                unreserve(profile, state, assumed, *node);
            }
            if self.assume
                && let Err(e) = self.cache.forget_pod(assumed)
            {
                tracing::error!(pod = %assumed.key(), error = %e, "could not forget a member of an unschedulable pod group");
            }
            *attempt = match outcome {
                GroupOutcome::Error(message) => Attempt::Error(message.clone()),
                _ => Attempt::GroupRejected(match wait {
                    Some(message) => format!("{POD_GROUP_UNSCHEDULABLE}, {message}"),
                    None => POD_GROUP_UNSCHEDULABLE.to_string(),
                }),
            };
        }
    }
}
