//! kube-scheduler's default plugins, one file each, and the default profile.

pub mod balanced_allocation;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod pod_topology_spread;
pub mod scheduling_gates;
pub mod taint_toleration;
#[cfg(test)]
pub(crate) mod testing;

use std::sync::Arc;

use crate::{Profile, WeightedScorePlugin};

/// kube-scheduler's default profile (v1.28 `default_plugins.go`): plugins in upstream's
/// order at every extension point, with upstream's score weights.
pub fn default_profile(scheduler_name: &str) -> Profile {
    let taints = Arc::new(taint_toleration::TaintToleration);
    let node_affinity = Arc::new(node_affinity::NodeAffinity::default());
    let ports = Arc::new(node_ports::NodePorts);
    let fit = Arc::new(node_resources_fit::NodeResourcesFit::default());
    let spread = Arc::new(pod_topology_spread::PodTopologySpread::default());
    let pod_affinity = Arc::new(inter_pod_affinity::InterPodAffinity::default());
    let balanced = Arc::new(balanced_allocation::BalancedAllocation::default());
    let images = Arc::new(image_locality::ImageLocality);
    let mut profile = Profile::empty(scheduler_name);
    profile.pre_enqueue = vec![Arc::new(scheduling_gates::SchedulingGates)];
    profile.pre_filter = vec![
        node_affinity.clone(),
        ports.clone(),
        spread.clone(),
        pod_affinity.clone(),
    ];
    profile.filter = vec![
        Arc::new(node_unschedulable::NodeUnschedulable),
        Arc::new(node_name::NodeName),
        taints.clone(),
        node_affinity.clone(),
        ports,
        fit.clone(),
        spread.clone(),
        pod_affinity.clone(),
    ];
    profile.pre_score = vec![
        taints.clone(),
        node_affinity.clone(),
        spread.clone(),
        pod_affinity.clone(),
        images.clone(),
    ];
    let weighted =
        |plugin: Arc<dyn crate::ScorePlugin>, weight| WeightedScorePlugin { plugin, weight };
    profile.score = vec![
        weighted(taints, 3),
        weighted(node_affinity, 2),
        weighted(fit, 1),
        weighted(spread, 2),
        weighted(pod_affinity, 2),
        weighted(balanced, 1),
        weighted(images, 1),
    ];
    profile.preemption = true;
    profile
}
