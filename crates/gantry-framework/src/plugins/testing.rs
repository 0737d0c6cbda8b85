//! Helpers for the plugins' table tests.

use std::sync::Arc;

use gantry_api::{Node, Pod, Resources};
use gantry_cache::NodeInfo;

use crate::{Code, CycleState, FilterPlugin};

/// A node with `milli_cpu`, `memory` and 110 pod slots, labelled with its hostname.
pub fn node(name: &str, milli_cpu: i64, memory: i64) -> Node {
    let mut allocatable = Resources::new(milli_cpu, memory);
    allocatable.pods = 110;
    Node::new(name, allocatable).with_labels([("kubernetes.io/hostname", name)])
}

/// A NodeInfo for `node` holding `pods` (each put on the node).
pub fn node_info(node: &Node, pods: &[Pod]) -> NodeInfo {
    let mut info = NodeInfo::new(Arc::new(node.clone()));
    for pod in pods {
        info.add_pod(Arc::new(pod.clone().on_node(node.name.as_str())));
    }
    info
}

/// Runs a filter with no PreFilter state and returns the verdict's code.
pub fn filter_codes(plugin: &dyn FilterPlugin, pod: &Pod, node: &Node) -> Code {
    plugin
        .filter(&CycleState::new(), pod, &node_info(node, &[]))
        .code()
}
