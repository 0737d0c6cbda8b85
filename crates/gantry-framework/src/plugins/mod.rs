//! kube-scheduler's default plugins, one file each, and the default profile.

pub mod inter_pod_affinity;
pub mod node_unschedulable;
pub mod pod_topology_spread;
#[cfg(test)]
pub(crate) mod testing;
