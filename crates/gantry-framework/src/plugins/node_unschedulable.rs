//! NodeUnschedulable: cordoned nodes take only pods that tolerate
//! `node.kubernetes.io/unschedulable:NoSchedule`.

use gantry_api::{Pod, Sym, Taint, TaintEffect};
use gantry_cache::{NodeColumns, NodeFlags, NodeInfo};

use crate::{CycleState, FilterPlugin, Plugin, Status};

pub const NAME: &str = "NodeUnschedulable";
pub const REASON: &str = "node(s) were unschedulable";
const TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    fn sign(&self, pod: &Pod, signature: &mut crate::Signature) -> bool {
        signature.add_tolerations(pod);
        true
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::NODE_ADD_OR_UPDATE
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter_reads_only_the_node(&self, _state: &CycleState, _pod: &Pod) -> bool {
        true
    }

    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let Some(node) = node.node() else {
            return Status::unresolvable("node not found");
        };
        if !node.unschedulable {
            return Status::success();
        }
        static TAINT: std::sync::LazyLock<Taint> = std::sync::LazyLock::new(|| Taint {
            key: Sym::new(TAINT_KEY),
            value: Sym::new(""),
            effect: TaintEffect::NoSchedule,
        });
        if pod.tolerations.iter().any(|t| t.tolerates(&TAINT)) {
            Status::success()
        } else {
            Status::unresolvable(REASON)
        }
    }

    /// A node that is not cordoned takes any pod.
    fn filter_columns(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        columns: &NodeColumns,
        positions: &[usize],
        proven: &mut [bool],
    ) -> bool {
        super::prove_nodes_without(NodeFlags::UNSCHEDULABLE, columns, positions, proven)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;
    use crate::plugins::testing::{filter_codes, node};
    use gantry_api::{Toleration, TolerationOp};

    #[test]
    fn table() {
        // Upstream's node_unschedulable_test cases.
        let tolerating = {
            let mut p = Pod::new("ns", "p");
            p.tolerations.push(Toleration {
                key: Some(Sym::new(TAINT_KEY)),
                op: TolerationOp::Exists,
                value: Sym::new(""),
                effect: Some(TaintEffect::NoSchedule),
            });
            p
        };
        let plain = Pod::new("ns", "p");
        let open = node("n", 1000, 1 << 30);
        let cordoned = node("n", 1000, 1 << 30).unschedulable();
        let cases = [
            (&plain, &open, Code::Success),
            (&plain, &cordoned, Code::UnschedulableAndUnresolvable),
            (&tolerating, &cordoned, Code::Success),
        ];
        for (pod, n, expected) in cases {
            assert_eq!(filter_codes(&NodeUnschedulable, pod, n), expected);
        }
    }
}
