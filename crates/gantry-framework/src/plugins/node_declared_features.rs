//! NodeDeclaredFeatures: a pod whose spec needs a node feature (a container restarting
//! all containers on exit, host networking in a user namespace) goes only to nodes that
//! declare it in `status.declaredFeatures` (KEP-5328; a default plugin from v1.36, last
//! in the list). Pods that need nothing skip it. Upstream:
//! `pkg/scheduler/framework/plugins/nodedeclaredfeatures` (v1.35.4, v1.36.3).

use gantry_api::Pod;
use gantry_api::node_features::NodeFeatures;
use gantry_cache::NodeInfo;

use crate::{Cluster, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status};

pub const NAME: &str = "NodeDeclaredFeatures";
/// The first release that registers the plugin.
pub const FIRST_MINOR: u8 = 35;
/// v1.36's reason (`errReasonUnsatisfiedRequirements`).
pub const REASON: &str = "node(s) didn't match Pod's required features";

pub struct NodeDeclaredFeatures {
    /// The gate is on; off, the plugin is inert (upstream's `New` then skips every pod).
    pub enabled: bool,
    /// The release's minor version: which needs its scheduler infers from a pod.
    pub minor: u8,
    /// v1.36's reason rather than v1.35's, which names the missing features.
    pub aggregate_message: bool,
}

impl NodeDeclaredFeatures {
    fn needs(&self, pod: &Pod) -> NodeFeatures {
        if self.enabled {
            pod.needs_features.inferred_at(self.minor)
        } else {
            NodeFeatures::default()
        }
    }
}

impl Plugin for NodeDeclaredFeatures {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    /// The features the release infers the pod needs.
    fn sign(&self, pod: &Pod, signature: &mut crate::Signature) -> bool {
        signature.add(crate::signature::signer::FEATURES, &self.needs(pod));
        true
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::NODE_ADD_OR_UPDATE
    }
}

impl PreFilterPlugin for NodeDeclaredFeatures {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &Pod,
        _cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        if self.needs(pod).is_empty() {
            (None, Status::skip())
        } else {
            (None, Status::success())
        }
    }
}

impl FilterPlugin for NodeDeclaredFeatures {
    fn filter_reads_only_the_node(&self, _state: &CycleState, _pod: &Pod) -> bool {
        true
    }

    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let Some(node) = node.node() else {
            return Status::unresolvable("node not found");
        };
        let missing = self.needs(pod).missing_from(node.declared_features);
        if missing.is_empty() {
            Status::success()
        } else if self.aggregate_message {
            Status::unresolvable(REASON)
        } else {
            Status::unresolvable(format!(
                "node declared features check failed - unsatisfied requirements: {missing}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, node_info};
    use gantry_api::node_features::NodeFeature;

    fn needing(features: &[NodeFeature]) -> Pod {
        let mut pod = Pod::new("ns", "p");
        let template: &mut gantry_api::PodTemplate = &mut pod;
        template.needs_features = features
            .iter()
            .fold(NodeFeatures::default(), |set, f| set.with(*f));
        pod
    }

    fn declaring(features: &[&str]) -> NodeInfo {
        let mut n = node("n", 4000, 1 << 30);
        n.declared_features = NodeFeatures::from_names(features.iter().copied());
        node_info(&n, &[])
    }

    #[test]
    fn pods_go_where_their_features_are_declared() {
        let v136 = NodeDeclaredFeatures {
            enabled: true,
            minor: 36,
            aggregate_message: true,
        };
        let state = CycleState::new();
        let cluster_free = |pod: &Pod| v136.needs(pod).is_empty();
        // Needing nothing: skipped at PreFilter.
        assert!(cluster_free(&Pod::new("ns", "plain")));
        let restart = needing(&[NodeFeature::RestartAllContainersOnContainerExits]);
        let both = needing(&[
            NodeFeature::RestartAllContainersOnContainerExits,
            NodeFeature::UserNamespacesHostNetworkSupport,
        ]);
        let full = declaring(&[
            "RestartAllContainersOnContainerExits",
            "UserNamespacesHostNetworkSupport",
        ]);
        let some = declaring(&["RestartAllContainersOnContainerExits"]);
        let none = declaring(&[]);
        assert!(v136.filter(&state, &restart, &some).is_success());
        assert!(v136.filter(&state, &both, &full).is_success());
        let refused = v136.filter(&state, &both, &some);
        assert_eq!(refused.code(), crate::Code::UnschedulableAndUnresolvable);
        assert_eq!(refused.message(), REASON);
        assert!(!v136.filter(&state, &restart, &none).is_success());
        // v1.35 infers only the restart rule, and names what is missing.
        let v135 = NodeDeclaredFeatures {
            enabled: true,
            minor: 35,
            aggregate_message: false,
        };
        assert!(v135.filter(&state, &both, &some).is_success());
        assert_eq!(
            v135.filter(&state, &both, &none).message(),
            "node declared features check failed - unsatisfied requirements: RestartAllContainersOnContainerExits"
        );
        let host_network = needing(&[NodeFeature::UserNamespacesHostNetworkSupport]);
        assert!(v135.needs(&host_network).is_empty());
        // With the gate off, the plugin takes every pod.
        let off = NodeDeclaredFeatures {
            enabled: false,
            ..v136
        };
        assert!(off.needs(&both).is_empty());
    }
}
