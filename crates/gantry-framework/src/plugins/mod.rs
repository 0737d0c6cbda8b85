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
