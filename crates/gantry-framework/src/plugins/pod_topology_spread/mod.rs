//! PodTopologySpread: keeps matching pods spread across topology domains (zones, nodes…).
//! DoNotSchedule constraints filter nodes by skew; ScheduleAnyway constraints (or the
//! system defaults, for pods a Service selects) score them. kube-scheduler v1.28 semantics:
//! counts are keyed by topology key and value, so constraints sharing a key share counts.
//!
//! PreFilter and PreScore read the matching pods per domain from the cycle's snapshot
//! where it keeps them and they are what a visit to every node would count (every node
//! eligible, every node with every key); elsewhere they count node by node.

use std::sync::LazyLock;

use gantry_api::{InclusionPolicy, Sym, TopologySpreadConstraint, WhenUnsatisfiable};

use crate::Plugin;

mod constraints;
mod filter;
mod score;
#[cfg(test)]
mod tests;

pub const NAME: &str = "PodTopologySpread";
/// Where PreScore leaves the scoring state (PreFilter's state is under [`NAME`]).
pub const PRE_SCORE_STATE_KEY: &str = "PreScorePodTopologySpread";
pub const REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
pub const REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";

const HOSTNAME_KEY: &str = "kubernetes.io/hostname";
const ZONE_KEY: &str = "topology.kubernetes.io/zone";

/// Constraints for pods that declare none. Their selector always comes from the Services
/// selecting the pod; a pod no Service selects gets no default constraints.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DefaultConstraints {
    /// Upstream's `defaultingType: System`: hostname maxSkew 3 and zone maxSkew 5, both
    /// ScheduleAnyway. Nodes without a zone label still get hostname spreading.
    #[default]
    System,
    /// Upstream's `defaultingType: List` (their label selectors are ignored).
    List(Vec<TopologySpreadConstraint>),
}

static SYSTEM_DEFAULTS: LazyLock<[TopologySpreadConstraint; 2]> = LazyLock::new(|| {
    let soft = |max_skew, key| TopologySpreadConstraint {
        max_skew,
        topology_key: Sym::new(key),
        when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
        label_selector: None,
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    };
    [soft(3, HOSTNAME_KEY), soft(5, ZONE_KEY)]
});

#[derive(Debug, Clone, Default)]
pub struct PodTopologySpread {
    pub default_constraints: DefaultConstraints,
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Default constraints (System's, or a List's) make no pod signable: what they count
    /// changes with every pod placed.
    fn signs_pods(&self) -> bool {
        match &self.default_constraints {
            DefaultConstraints::System => false,
            DefaultConstraints::List(list) => list.is_empty(),
        }
    }

    /// A pod's own constraints count the pods placed meanwhile: not signable.
    fn sign(&self, pod: &gantry_api::Pod, _signature: &mut crate::Signature) -> bool {
        pod.topology_spread_constraints.is_empty()
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::ANY_POD_OR_NODE
    }
}
