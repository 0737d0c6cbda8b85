//! Where a pod may go: tolerations, node and pod (anti-)affinity, topology spread.

use crate::labels::{LabelSelector, NodeSelector, NodeSelectorTerm};
use crate::{Sym, TaintEffect};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TolerationOp {
    Equal,
    Exists,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    /// `None` with `Exists` tolerates every taint.
    pub key: Option<Sym>,
    pub op: TolerationOp,
    pub value: Sym,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Upstream's `Toleration.ToleratesTaint`.
    pub fn tolerates(&self, taint: &crate::Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.is_some_and(|k| k != taint.key) {
            return false;
        }
        match self.op {
            TolerationOp::Equal => self.value == taint.value,
            TolerationOp::Exists => true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferredSchedulingTerm {
    pub weight: i32,
    pub term: NodeSelectorTerm,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAffinity {
    pub required: Option<NodeSelector>,
    pub preferred: Vec<PreferredSchedulingTerm>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    /// `None` (absent) matches no pod; an empty selector matches every pod.
    pub label_selector: Option<LabelSelector>,
    pub namespaces: Vec<Sym>,
    /// `None` means "only `namespaces`" (or the pod's own namespace when that is empty too);
    /// an empty selector means every namespace.
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: Sym,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedPodAffinityTerm {
    pub weight: i32,
    pub term: PodAffinityTerm,
}

/// Pod affinity or anti-affinity: the two have the same shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinity {
    pub required: Vec<PodAffinityTerm>,
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

impl PodAffinity {
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Affinity {
    pub node_affinity: NodeAffinity,
    pub pod_affinity: PodAffinity,
    pub pod_anti_affinity: PodAffinity,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

/// Whether node affinity / taints decide which nodes count in a spread constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologySpreadConstraint {
    pub max_skew: i32,
    pub topology_key: Sym,
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// `matchLabelKeys` already merged in as `In` requirements.
    pub label_selector: Option<LabelSelector>,
    pub min_domains: Option<i32>,
    /// Default Honor.
    pub node_affinity_policy: InclusionPolicy,
    /// Default Ignore.
    pub node_taints_policy: InclusionPolicy,
}
