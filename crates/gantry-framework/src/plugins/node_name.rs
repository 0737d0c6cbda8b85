//! NodeName: a pod that names a node fits only that node.

use gantry_api::Pod;
use gantry_cache::{NodeColumns, NodeInfo};

use crate::{CycleState, FilterPlugin, Plugin, Status};

pub const NAME: &str = "NodeName";
pub const REASON: &str = "node(s) didn't match the requested node name";

pub struct NodeName;

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    fn sign(&self, pod: &Pod, signature: &mut crate::Signature) -> bool {
        let node_name = pod.node_name.map(|n| n.as_str());
        signature.add(crate::signature::signer::NODE_NAME, &node_name);
        true
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::NODE_ADD_OR_UPDATE
    }
}

impl FilterPlugin for NodeName {
    fn filter_reads_only_the_node(&self, _state: &CycleState, _pod: &Pod) -> bool {
        true
    }

    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        match pod.node_name {
            Some(wanted) if wanted != node.name() => Status::unresolvable(REASON),
            _ => Status::success(),
        }
    }

    /// A pod that names no node passes everywhere.
    fn filter_columns(
        &self,
        _state: &CycleState,
        pod: &Pod,
        _columns: &NodeColumns,
        _positions: &[usize],
        proven: &mut [bool],
    ) -> bool {
        proven.fill(pod.node_name.is_none());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;
    use crate::plugins::testing::{filter_codes, node};

    #[test]
    fn table() {
        let n = node("foo", 1000, 1000);
        assert_eq!(
            filter_codes(&NodeName, &Pod::new("ns", "p"), &n),
            Code::Success
        );
        assert_eq!(
            filter_codes(&NodeName, &Pod::new("ns", "p").on_node("foo"), &n),
            Code::Success
        );
        assert_eq!(
            filter_codes(&NodeName, &Pod::new("ns", "p").on_node("bar"), &n),
            Code::UnschedulableAndUnresolvable
        );
    }
}
