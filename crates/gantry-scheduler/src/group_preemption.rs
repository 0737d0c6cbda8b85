//! Workload-aware preemption (v1.36.3, WorkloadAwarePreemption, alpha): when a pod group's
//! cycle finds it unschedulable, DefaultPreemption's PodGroupPostFilter looks across the
//! whole cluster for lower-priority pods to evict so that the group fits, rather than a
//! node for each member (`runWorkloadAwarePreemption` in `schedule_one_podgroup.go`;
//! `PodGroupEvaluator` in `framework/preemption/podgrouppreemption.go` and `types.go`).
//!
//! The units of eviction are single pods and, for a PodGroup with `disruptionMode:
//! PodGroup`, all its running pods together. Every unit of lower priority than the group is
//! taken away, and the group's algorithm is run again on what is left (without PostFilter);
//! if it then fits, the units are given back one by one, most important first (those a
//! PodDisruptionBudget protects before the others), each kept if the group still fits
//! without evicting it. The trials run on a fork of the cache, so the real one never sees
//! them. Upstream orders units of equal importance as Go's map and unstable sort leave
//! them; Gantry keeps them in the order they were found (nodes in the snapshot's order,
//! pods in each node's), which is upstream's order when the pods carry no start time
//! (each unit then gets `time.Now()` as it is built, in that order).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use gantry_api::{Pod, PodDisruptionBudget, PodGroup, PreemptionPolicy};
use gantry_cache::{Cache, ClusterState, GroupKey, PodGroupStates, Snapshot};

use crate::Scheduler;
use crate::pod_group_cycle::GroupOutcome;

/// Why preemption could not help, joined to the group's message.
pub const NOT_SUPPORTED_WITH_CONSTRAINTS: &str =
    "workload aware preemption is not supported for pod groups with scheduling constraints";
pub const NO_VICTIMS: &str = "No preemption victims found for incoming preemptor";
pub const NOT_REGISTERED: &str =
    "default preemption plugin is not registered, workload aware preemption is disabled";

/// What workload-aware preemption made of an unschedulable group.
#[derive(Debug)]
pub enum GroupPreemption {
    /// Evicting these pods (most important unit first) makes room: the group waits for it.
    Victims(Vec<Arc<Pod>>),
    /// It cannot help: why, which joins the group's message.
    Failed(String),
    /// It failed with an error, which the whole group fails with.
    Error(String),
}

/// One unit of eviction: a pod, or every running pod of a PodGroup preempted as one.
struct Victim {
    pods: Vec<Arc<Pod>>,
    priority: i32,
    /// The earliest start among its pods; a pod not started counts as starting now.
    earliest_start: i64,
    /// upstream's `IsPodGroup`: whether its first pod belongs to a pod group (true too for
    /// a lone member of a group preempted pod by pod).
    in_group: bool,
}

/// upstream's `moreImportantVictim`: higher priority; then a group before a pod; then, for
/// pods, the earlier start; for groups, the larger, then the earlier start.
fn more_important(a: &Victim, b: &Victim) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then(b.in_group.cmp(&a.in_group))
        .then_with(|| match a.in_group {
            false => a.earliest_start.cmp(&b.earliest_start),
            true => (b.pods.len().cmp(&a.pods.len())).then(a.earliest_start.cmp(&b.earliest_start)),
        })
}

fn start_time(pod: &Pod) -> i64 {
    pod.start_time.unwrap_or(i64::MAX)
}

/// upstream's `newDomainForWorkloadPreemption`: every pod of the cluster, a PodGroup's
/// pods gathered into one unit when it is preempted whole (with the group's priority).
fn units(snapshot: &Snapshot, groups: &PodGroupStates) -> Vec<Victim> {
    let mut units: Vec<Victim> = Vec::new();
    let mut by_group: HashMap<GroupKey, usize> = HashMap::new();
    for position in 0..snapshot.num_nodes() {
        for pod in snapshot.node_at(position).pods() {
            let whole = GroupKey::of(pod).and_then(|key| {
                let group = groups.group(key).filter(|g| g.disrupted_whole())?;
                Some((key, group.priority()))
            });
            if let Some((key, _)) = whole
                && let Some(&unit) = by_group.get(&key)
            {
                let unit = &mut units[unit];
                unit.pods.push(pod.clone());
                unit.earliest_start = unit.earliest_start.min(start_time(pod));
                continue;
            }
            if let Some((key, _)) = whole {
                by_group.insert(key, units.len());
            }
            units.push(Victim {
                pods: vec![pod.clone()],
                priority: whole.map_or(pod.priority, |(_, priority)| priority),
                earliest_start: start_time(pod),
                in_group: pod.scheduling_group.is_some(),
            });
        }
    }
    units
}

/// upstream's `filterVictimsWithPDBViolation` over units (most important first): each pod
/// spends the budgets that cover it until one is overdrawn, and a unit with such a pod
/// is violating (its later pods spend nothing).
fn split_by_budgets(
    units: Vec<Victim>,
    budgets: &[PodDisruptionBudget],
) -> (Vec<Victim>, Vec<Victim>) {
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.disruptions_allowed).collect();
    let mut violates = |pod: &Pod| {
        if pod.labels.is_empty() {
            return false;
        }
        for (budget, allowed) in budgets.iter().zip(allowed.iter_mut()) {
            if !budget.covers(pod) || budget.has_disrupted(pod) {
                continue;
            }
            *allowed -= 1;
            if *allowed < 0 {
                return true;
            }
        }
        false
    };
    units
        .into_iter()
        .partition(|unit| unit.pods.iter().any(|pod| violates(pod)))
}

impl Scheduler {
    /// Workload-aware preemption for the group whose cycle found it unschedulable
    /// (`pods`: the members that cycle tried).
    pub(crate) fn preempt_for_group(
        &mut self,
        pods: &[Arc<Pod>],
        group: &PodGroup,
    ) -> GroupPreemption {
        if !self.profile_for(&pods[0]).is_some_and(|p| p.preemption) {
            return GroupPreemption::Failed(NOT_REGISTERED.to_string());
        }
        if group.topology_key().is_some() {
            return GroupPreemption::Failed(NOT_SUPPORTED_WITH_CONSTRAINTS.to_string());
        }
        let never = |p: &Arc<Pod>| p.preemption_policy == PreemptionPolicy::Never;
        if pods.iter().any(never) {
            return GroupPreemption::Failed(crate::preemption::POLICY_NEVER.to_string());
        }
        if let Err(inconsistent) = self.cache.update_snapshot(&mut self.snapshot) {
            return GroupPreemption::Error(inconsistent.to_string());
        }
        let priority = group.priority();
        let mut potential = units(&self.snapshot, &self.cache.pod_groups().lock());
        potential.retain(|unit| unit.priority < priority);
        if potential.is_empty() {
            return GroupPreemption::Failed(NO_VICTIMS.to_string());
        }
        let fork = Arc::new(self.cache.fork());
        let real_cache = std::mem::replace(&mut self.cache, fork);
        let real_snapshot = std::mem::replace(&mut self.snapshot, Snapshot::new());
        let kept_cycle = self.last_cycle.take();
        self.trial = true;
        let outcome = self.select_group_victims(pods, potential);
        self.trial = false;
        self.last_cycle = kept_cycle;
        self.snapshot = real_snapshot;
        self.cache = real_cache;
        outcome
    }

    /// upstream's `selectVictimsOnDomain`, on the fork the scheduler now reads.
    fn select_group_victims(
        &mut self,
        pods: &[Arc<Pod>],
        mut potential: Vec<Victim>,
    ) -> GroupPreemption {
        let fork: Arc<Cache> = self.cache.clone();
        let set_aside = |unit: &Victim| unit.pods.iter().try_for_each(|p| fork.set_aside(p));
        let put_back = |unit: &Victim| unit.pods.iter().try_for_each(|p| fork.put_back(p.clone()));
        if let Err(e) = potential.iter().try_for_each(set_aside) {
            return GroupPreemption::Error(e.to_string());
        }
        match self.try_group(pods) {
            GroupOutcome::Scheduled => {}
            GroupOutcome::Unschedulable(message) => return GroupPreemption::Failed(message),
            GroupOutcome::Error(message) => return GroupPreemption::Error(message),
        }
        potential.sort_by(more_important);
        let budgets = self.objects.disruption_budgets().to_vec();
        let (violating, non_violating) = split_by_budgets(potential, &budgets);
        let mut victims = Vec::new();
        for unit in violating.into_iter().chain(non_violating) {
            if let Err(e) = put_back(&unit) {
                return GroupPreemption::Error(e.to_string());
            }
            if self.try_group(pods) == GroupOutcome::Scheduled {
                continue;
            }
            if let Err(e) = set_aside(&unit) {
                return GroupPreemption::Error(e.to_string());
            }
            victims.push(unit);
        }
        victims.sort_by(more_important);
        GroupPreemption::Victims(victims.into_iter().flat_map(|unit| unit.pods).collect())
    }

    /// The group's algorithm on the cluster as it now stands, without PostFilter; whatever
    /// it assumed is forgotten again.
    fn try_group(&mut self, pods: &[Arc<Pod>]) -> GroupOutcome {
        let mut attempt = self.run_group_algorithm(pods);
        if attempt.outcome == GroupOutcome::Scheduled {
            self.forget_scheduled(&mut attempt.attempts);
        }
        attempt.outcome
    }
}
