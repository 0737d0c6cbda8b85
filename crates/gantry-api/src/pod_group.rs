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
    pub policy: GroupPolicy,
    /// `metadata.generation`: the PodGroupScheduled condition's `observedGeneration`.
    pub generation: i64,
}

impl PodGroup {
    /// A gang of `min_count` (a builder for tests and scenarios).
    pub fn gang(namespace: &str, name: &str, min_count: u32) -> PodGroup {
        PodGroup {
            namespace: Sym::new(namespace),
            name: Sym::new(name),
            policy: GroupPolicy::Gang { min_count },
            generation: 1,
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The gang's quorum, if it is a gang.
    pub fn min_count(&self) -> Option<u32> {
        match self.policy {
            GroupPolicy::Gang { min_count } => Some(min_count),
            GroupPolicy::Basic => None,
        }
    }
}
