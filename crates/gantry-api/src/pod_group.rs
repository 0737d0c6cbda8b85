//! PodGroup (`scheduling.k8s.io/v1alpha2`, v1.36): pods scheduled together. A gang's pods
//! are placed all at once or not at all: `minCount` of them must fit in one pod-group
//! scheduling cycle. Pods name their group in `spec.schedulingGroup.podGroupName`.

use crate::Sym;

/// How the group's pods are scheduled (`spec.schedulingPolicy`: exactly one of the two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    /// Pods are scheduled one by one, as if ungrouped (but in pod-group cycles).
    Basic,
    /// At least `min_count` pods are placed together, or none.
    Gang { min_count: u32 },
}

/// A PodGroup, as the scheduler reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroup {
    pub namespace: Sym,
    pub name: Sym,
    /// `metadata.uid`, if the object came from an API server (a workload-aware
    /// preemption's events name it).
    pub uid: Option<std::sync::Arc<str>>,
    pub policy: GroupPolicy,
    /// `metadata.generation`: the PodGroupScheduled condition's `observedGeneration`.
    pub generation: i64,
    /// `spec.schedulingConstraints`, kept while TopologyAwareWorkloadScheduling is on (the
    /// API server drops it otherwise).
    pub constraints: Option<GroupConstraints>,
    /// `spec.priorityClassName`, `spec.priority` and `spec.disruptionMode`, kept while
    /// WorkloadAwarePreemption is on (the API server drops them otherwise).
    pub preemption: Option<GroupPreemption>,
}

/// What workload-aware preemption reads of a PodGroup (v1.36, WorkloadAwarePreemption).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupPreemption {
    /// `spec.priorityClassName`, the global default's once admitted.
    pub priority_class_name: Option<Sym>,
    /// `spec.priority`: the class's value once admitted (Priority admission refuses any
    /// other), none if no class was given and there is no global default.
    pub priority: Option<i32>,
    /// `spec.disruptionMode: PodGroup`: its pods are preempted all together or not at all
    /// (the default, `Pod`: one by one).
    pub disrupted_whole: bool,
}

/// A PodGroup's scheduling constraints (TopologyAwareWorkloadScheduling).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupConstraints {
    /// `topology[0].key`: the node label whose one domain must hold every member.
    pub topology_key: Option<Sym>,
}

impl PodGroup {
    /// A gang of `min_count` (a builder for tests and scenarios).
    pub fn gang(namespace: &str, name: &str, min_count: u32) -> PodGroup {
        PodGroup {
            namespace: Sym::new(namespace),
            name: Sym::new(name),
            uid: None,
            policy: GroupPolicy::Gang { min_count },
            generation: 1,
            constraints: None,
            preemption: None,
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The same gang, kept to one domain of the node label `key`.
    pub fn in_one_domain_of(mut self, key: &str) -> PodGroup {
        self.constraints = Some(GroupConstraints {
            topology_key: Some(Sym::new(key)),
        });
        self
    }

    /// The node label one domain of which must hold every member, if the group says.
    pub fn topology_key(&self) -> Option<Sym> {
        self.constraints.as_ref().and_then(|c| c.topology_key)
    }

    /// The same gang with `spec.priority` set (and WorkloadAwarePreemption's fields read).
    pub fn with_priority(mut self, priority: i32) -> PodGroup {
        self.preemption.get_or_insert_default().priority = Some(priority);
        self
    }

    /// upstream's `PodGroupPriority`: `spec.priority`, 0 when unset.
    pub fn priority(&self) -> i32 {
        self.preemption
            .as_ref()
            .and_then(|p| p.priority)
            .unwrap_or(0)
    }

    /// Whether its pods are preempted all together (`disruptionMode: PodGroup`).
    pub fn disrupted_whole(&self) -> bool {
        self.preemption.as_ref().is_some_and(|p| p.disrupted_whole)
    }

    /// The gang's quorum, if it is a gang.
    pub fn min_count(&self) -> Option<u32> {
        match self.policy {
            GroupPolicy::Gang { min_count } => Some(min_count),
            GroupPolicy::Basic => None,
        }
    }
}
