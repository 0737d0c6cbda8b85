//! The pod-group scheduling cycle (v1.36.3, `schedule_one_podgroup.go`, the default
//! algorithm without TopologyAwareWorkloadScheduling): the group's pending members are
//! tried one after another on one view of the cluster, each assumed where it fits so that
//! the next sees it; GangScheduling's Permit makes each wait until `minCount` members are
//! scheduled. If any member's Permit allows it, the group is scheduled and every member
//! that fitted goes on to bind; otherwise every assumed member is forgotten and rejected
//! with its Permit message.

use std::sync::Arc;

use gantry_api::{Gate, Pod, Sym};
use gantry_cache::{GroupKey, Stage};
use gantry_framework::CycleState;
use gantry_framework::plugins;

use crate::group_preemption::GroupPreemption;
use crate::scheduler::{GroupCycleState, Preempting};
use crate::{Attempt, Scheduler, placement, unreserve};

/// upstream's `errPodGroupUnschedulable`.
pub const POD_GROUP_UNSCHEDULABLE: &str = "pod group is unschedulable";

/// The reason upstream adds when the group would be scheduled but some member needs
/// preemption first (`podGroupSchedulingDefaultAlgorithm`).
pub const WAITING_ON_PREEMPTION: &str = "pod group is waiting for preemption to complete";

/// RunPlacementGeneratePlugins' status when the generator made no placement (no node
/// carries the group's topology key).
pub const NO_PLACEMENTS: &str = "no feasible placements found";

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
    /// After an error, the members whose preemption the cycle began (by index in
    /// `attempts`): upstream's PostFilter started deleting their victims during the
    /// cycle, and the group's error does not stop it. The caller evicts them, as it
    /// evicts a rejected member's `preempted`.
    pub preempted_before_error: Vec<(usize, Sym, Vec<Arc<Pod>>)>,
    /// Workload-aware preemption's victims (most important first): the group waits for
    /// their deletion, its members held back meanwhile.
    pub group_victims: Vec<Arc<Pod>>,
    /// The node each member fitted on before the group was found unschedulable (by index
    /// in `attempts`): where a group waiting for its preemption is nominated.
    fitted: Vec<Option<Sym>>,
}

impl GroupAttempt {
    /// Every member failed alike: with the group's error, or rejected with its reason.
    fn failed(pods: &[Arc<Pod>], outcome: GroupOutcome) -> GroupAttempt {
        let attempt = |message: &str| match &outcome {
            GroupOutcome::Error(_) => Attempt::Error(message.to_string()),
            _ => Attempt::GroupRejected {
                message: message.to_string(),
                nominated: None,
                preempted: None,
            },
        };
        let message = match &outcome {
            GroupOutcome::Error(m) | GroupOutcome::Unschedulable(m) => m.clone(),
            GroupOutcome::Scheduled => String::new(),
        };
        GroupAttempt {
            attempts: pods
                .iter()
                .map(|p| (p.clone(), attempt(&message)))
                .collect(),
            outcome,
            preempted_before_error: Vec::new(),
            group_victims: Vec::new(),
            fitted: Vec::new(),
        }
    }
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
            return GroupAttempt::failed(pods, GroupOutcome::Error(message));
        }
        let mut attempt = self.run_group_algorithm(pods);
        let preempts = (self.profile_for(&pods[0]))
            .is_some_and(|p| p.release.enabled(Gate::WorkloadAwarePreemption));
        if preempts && matches!(attempt.outcome, GroupOutcome::Unschedulable(_)) {
            self.preempt_as_group(pods, &mut attempt);
        }
        attempt
    }

    /// upstream's `podGroupSchedulingAlgorithm`: by placements (TopologyAwareWorkloadScheduling)
    /// or the default algorithm.
    pub(crate) fn run_group_algorithm(&mut self, pods: &[Arc<Pod>]) -> GroupAttempt {
        let placements = self
            .profile_for(&pods[0])
            .is_some_and(|p| !p.placement_generate.is_empty());
        if placements {
            return self.schedule_by_placements(pods);
        }
        self.run_group(pods)
    }

    /// What `podGroupCycle` does with workload-aware preemption's outcome: a group it
    /// makes room for waits for its victims, every member that fitted nominated to the
    /// node it fitted on and failing with the group's status (the others keep their own);
    /// a group it cannot help has the reason joined to its message; an error fails it.
    fn preempt_as_group(&mut self, pods: &[Arc<Pod>], attempt: &mut GroupAttempt) {
        let group = GroupKey::of(&pods[0])
            .and_then(|key| self.cache.pod_groups().lock().group(key).cloned());
        let preemption = match group {
            Some(group) => self.preempt_for_group(pods, &group),
            None => GroupPreemption::Error(format!(
                "failed to get pod group object: podgroup.scheduling.k8s.io {:?} not found",
                pods[0].scheduling_group.map_or("", |name| name.as_str())
            )),
        };
        let GroupOutcome::Unschedulable(message) = &mut attempt.outcome else {
            return;
        };
        match preemption {
            GroupPreemption::Victims(victims) => {
                let message = message.clone();
                let members = attempt.attempts.iter_mut().zip(&attempt.fitted);
                for ((pod, member), fitted) in members {
                    let Some(node) = *fitted else { continue };
                    let mut nominated = Pod::clone(pod);
                    nominated.nominated_node_name = Some(node);
                    self.note_nomination(Arc::new(nominated));
                    *member = Attempt::GroupRejected {
                        message: message.clone(),
                        nominated: Some(node),
                        preempted: None,
                    };
                }
                attempt.group_victims = victims;
            }
            GroupPreemption::Failed(reason) => {
                message.push_str(", ");
                message.push_str(&reason);
            }
            GroupPreemption::Error(error) => {
                for (_, member) in &mut attempt.attempts {
                    if !matches!(member, Attempt::Error(_)) {
                        *member = Attempt::Error(error.clone());
                    }
                }
                attempt.outcome = GroupOutcome::Error(error);
            }
        }
    }

    /// upstream's `podGroupSchedulingPlacementAlgorithm` (TopologyAwareWorkloadScheduling):
    /// the group is tried on each placement (every node, or each domain of its topology
    /// key), each try given back; of those that schedule it, the one PodGroupPodsCount
    /// scores highest is tried again and kept. When none does, the first placement's
    /// outcome stands, its condition saying how many placements there were.
    fn schedule_by_placements(&mut self, pods: &[Arc<Pod>]) -> GroupAttempt {
        if let Err(inconsistent) = self.cache.update_snapshot(&mut self.snapshot) {
            return GroupAttempt::failed(pods, GroupOutcome::Error(inconsistent.to_string()));
        }
        let (key, scheduled) = {
            let groups = self.cache.pod_groups().lock();
            let group = GroupKey::of(&pods[0]);
            let key = group
                .and_then(|g| groups.group(g))
                .and_then(|g| g.topology_key());
            let scheduled: Vec<Arc<Pod>> = (group.into_iter())
                .flat_map(|g| {
                    let mut members = groups.members_at(g, Stage::Assumed);
                    members.extend(groups.members_at(g, Stage::Assigned));
                    members
                })
                .collect();
            (key, scheduled)
        };
        let placements = match placement::generate(&self.snapshot, key, &scheduled) {
            Ok(placements) => placements,
            Err(message) => return GroupAttempt::failed(pods, GroupOutcome::Error(message)),
        };
        if placements.is_empty() {
            let outcome = GroupOutcome::Unschedulable(NO_PLACEMENTS.to_string());
            return GroupAttempt::failed(pods, outcome);
        }
        let mut first_failure = None;
        let mut fitted: Vec<(usize, usize)> = Vec::new();
        for (i, placement) in placements.iter().enumerate() {
            let mut trial = self.run_group_on(pods, placement);
            match &trial.outcome {
                GroupOutcome::Error(_) => return trial,
                GroupOutcome::Scheduled => {
                    let proposed = (trial.attempts.iter())
                        .filter(|(_, a)| matches!(a, Attempt::Scheduled { .. }))
                        .count();
                    self.forget_scheduled(&mut trial.attempts);
                    fitted.push((i, proposed));
                }
                GroupOutcome::Unschedulable(_) if i == 0 => first_failure = Some(trial),
                GroupOutcome::Unschedulable(_) => {}
            }
        }
        if fitted.is_empty() {
            let mut first = first_failure.expect("the first placement failed");
            if let GroupOutcome::Unschedulable(message) = &first.outcome {
                first.outcome = GroupOutcome::Unschedulable(format!(
                    "0/{} placements are available, first placement status: {message}",
                    placements.len()
                ));
            }
            return first;
        }
        let weight: i64 = (self.profile_for(&pods[0]).into_iter())
            .flat_map(|p| p.placement_score.iter())
            .filter(|(name, _)| *name == plugins::POD_GROUP_PODS_COUNT)
            .map(|(_, weight)| weight)
            .sum();
        let proposed: Vec<usize> = fitted.iter().map(|&(_, p)| p).collect();
        let chosen = fitted[placement::best(&proposed, scheduled.len(), weight)].0;
        self.run_group_on(pods, &placements[chosen])
    }

    /// The default algorithm with every cycle kept to `placement`'s nodes.
    fn run_group_on(
        &mut self,
        pods: &[Arc<Pod>],
        placement: &placement::Placement,
    ) -> GroupAttempt {
        self.placement = Some(placement.positions.clone());
        let attempt = self.run_group(pods);
        self.placement = None;
        attempt
    }

    /// Gives back every member a try of a placement assumed, last first.
    pub(crate) fn forget_scheduled(&mut self, attempts: &mut [(Arc<Pod>, Attempt)]) {
        for (pod, attempt) in attempts.iter_mut().rev() {
            if let Attempt::Scheduled {
                pod: assumed,
                node,
                state,
                ..
            } = attempt
            {
                self.unassume(pod, assumed, *node, state);
            }
        }
    }

    /// upstream's `podGroupSchedulingDefaultAlgorithm`: the members tried one after
    /// another on one view of the cluster, a member that needs preemption assumed on the
    /// node it nominated. If the group would be scheduled but some member needs
    /// preemption, the group waits for it: every member goes back to the queue.
    fn run_group(&mut self, pods: &[Arc<Pod>]) -> GroupAttempt {
        self.group_cycle = Some(GroupCycleState::default());
        let mut attempts = Vec::with_capacity(pods.len());
        // Each assumed member's Permit message (`None`: allowed), and whether it was
        // assumed on the node its preemption nominated.
        let mut waits: Vec<Option<String>> = Vec::with_capacity(pods.len());
        let mut preempting: Vec<Option<Preempting>> = Vec::with_capacity(pods.len());
        let mut scheduled = false;
        let mut failure = None;
        for pod in pods {
            let attempt = self.schedule_one(pod);
            preempting.push((self.group_cycle.as_mut()).and_then(|cycle| cycle.preempting.take()));
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
                Attempt::Unschedulable { .. } | Attempt::GroupRejected { .. } => waits.push(None),
            }
            attempts.push((pod.clone(), attempt));
        }
        self.group_cycle = None;
        let needs_preemption = preempting.iter().any(Option::is_some);
        let outcome = match failure {
            Some(message) => GroupOutcome::Error(message),
            None if scheduled && needs_preemption => GroupOutcome::Unschedulable(format!(
                "{POD_GROUP_UNSCHEDULABLE}, {WAITING_ON_PREEMPTION}"
            )),
            None if scheduled => GroupOutcome::Scheduled,
            None => GroupOutcome::Unschedulable(POD_GROUP_UNSCHEDULABLE.to_string()),
        };
        // Only workload-aware preemption of a group found unschedulable needs them.
        let preempts_as_group = (self.profile_for(&pods[0]))
            .is_some_and(|p| p.release.enabled(Gate::WorkloadAwarePreemption));
        let fitted = if outcome == GroupOutcome::Scheduled || !preempts_as_group {
            Vec::new()
        } else {
            (attempts.iter())
                .map(|(_, a)| match a {
                    Attempt::Scheduled { node, .. } => Some(*node),
                    _ => None,
                })
                .collect()
        };
        let mut preempted_before_error = Vec::new();
        if outcome != GroupOutcome::Scheduled {
            let waiting_on_preemption = scheduled && needs_preemption;
            preempted_before_error = self.revert(
                &mut attempts,
                &waits,
                preempting,
                &outcome,
                waiting_on_preemption,
            );
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
        GroupAttempt {
            attempts,
            outcome,
            preempted_before_error,
            group_victims: Vec::new(),
            fitted,
        }
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

    /// Unreserves an assumed member and forgets it: it is pending again.
    fn unassume(&mut self, pod: &Pod, assumed: &Arc<Pod>, node: Sym, state: &mut CycleState) {
        if let Some(profile) = self.profile_for(pod) {
            unreserve(profile, state, assumed, node);
        }
        if self.assume
            && let Err(e) = self.cache.forget_pod(assumed)
        {
            tracing::error!(pod = %assumed.key(), error = %e, "could not forget a member of a pod group");
        }
    }

    /// Forgets every assumed member, last first (upstream's deferred reverts), and turns
    /// its attempt into what upstream's `submitPodGroupAlgorithmResult` makes of it. A
    /// group waiting on preemption nominates each member to its node: a member that needs
    /// preemption fails with its own fit error, the others with the group's status. Else
    /// each is rejected with its Permit message, and a member that preempted keeps its
    /// victims evicted, not its nomination. After an error every member fails with it;
    /// the preemptions begun are returned, their victims evicted all the same.
    fn revert(
        &mut self,
        attempts: &mut [(Arc<Pod>, Attempt)],
        waits: &[Option<String>],
        preempting: Vec<Option<Preempting>>,
        outcome: &GroupOutcome,
        waiting_on_preemption: bool,
    ) -> Vec<(usize, Sym, Vec<Arc<Pod>>)> {
        let mut preempted_before_error = Vec::new();
        let members = attempts.iter_mut().zip(waits).zip(preempting);
        for (index, (((pod, attempt), wait), preempting)) in members.enumerate().rev() {
            let Attempt::Scheduled {
                pod: assumed,
                node,
                state,
                ..
            } = attempt
            else {
                continue;
            };
            let node = *node;
            self.unassume(pod, assumed, node, state);
            let message = match (outcome, waiting_on_preemption, wait) {
                (GroupOutcome::Error(message), ..) => {
                    *attempt = Attempt::Error(message.clone());
                    if let Some(p) = preempting {
                        preempted_before_error.push((index, p.node, p.victims));
                    }
                    continue;
                }
                (GroupOutcome::Unschedulable(message), true, _) => message.clone(),
                (_, _, Some(message)) => format!("{POD_GROUP_UNSCHEDULABLE}, {message}"),
                (_, _, None) => POD_GROUP_UNSCHEDULABLE.to_string(),
            };
            if waiting_on_preemption {
                let mut nominated = Pod::clone(pod);
                nominated.nominated_node_name = Some(node);
                self.note_nomination(Arc::new(nominated));
            }
            *attempt = match (preempting, waiting_on_preemption) {
                (Some(p), true) => Attempt::Unschedulable {
                    fit_error: p.fit_error,
                    nominated: Some((p.node, p.victims)),
                },
                (preempting, waiting) => Attempt::GroupRejected {
                    message,
                    nominated: waiting.then_some(node),
                    preempted: preempting.map(|p| (p.node, p.victims)),
                },
            };
        }
        preempted_before_error.reverse();
        preempted_before_error
    }
}
