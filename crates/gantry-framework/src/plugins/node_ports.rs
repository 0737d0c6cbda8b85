//! NodePorts: a pod's host ports must be free on the node.

use gantry_api::{HostPort, Pod};
use gantry_cache::NodeInfo;

use crate::{Cluster, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status};

pub const NAME: &str = "NodePorts";
pub const REASON: &str = "node(s) didn't have free ports for the requested pod ports";

pub struct NodePorts;

#[derive(Clone)]
struct WantedPorts(Vec<HostPort>);

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    fn sign(&self, pod: &Pod, signature: &mut crate::Signature) -> bool {
        signature.add_host_ports(pod);
        true
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::POD_DELETE_OR_NODE_ADD_OR_UPDATE
    }
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let wanted: Vec<HostPort> = pod.host_ports().copied().collect();
        if wanted.is_empty() {
            return (None, Status::skip());
        }
        state.write(NAME, WantedPorts(wanted));
        (None, Status::success())
    }
}

impl FilterPlugin for NodePorts {
    fn filter_reads_only_the_node(&self, _state: &CycleState, _pod: &Pod) -> bool {
        true
    }

    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(wanted) = state.read::<WantedPorts>(NAME) else {
            return Status::success();
        };
        let conflict = wanted
            .0
            .iter()
            .any(|w| node.used_ports().iter().any(|used| used.conflicts(w)));
        if conflict {
            Status::unschedulable(REASON)
        } else {
            Status::success()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, node_info};
    use crate::{ApiObjects, Code};
    use gantry_api::{Container, Protocol, Sym};
    use gantry_cache::Snapshot;

    fn with_port(name: &str, ip: &str, protocol: Protocol, port: i32) -> Pod {
        let mut c = Container::new("c", Some(0), Some(0));
        c.host_ports.push(HostPort {
            ip: Sym::new(ip),
            protocol,
            port,
        });
        Pod::new("ns", name).with_container(c)
    }

    fn run(pod: &Pod, existing: &[Pod]) -> Code {
        let info = node_info(&node("n", 1000, 1000), existing);
        let mut state = CycleState::new();
        let snapshot = Snapshot::new();
        let (_, status) = NodePorts.pre_filter(
            &mut state,
            pod,
            Cluster {
                nodes: &snapshot,
                objects: &ApiObjects::default(),
            },
        );
        if status.is_skip() {
            return Code::Success;
        }
        NodePorts.filter(&state, pod, &info).code()
    }

    #[test]
    fn table() {
        // Re-derived from upstream's node_ports_test TestNodePorts:
        // (wanted ip, protocol, port), (existing ip, protocol, port), expected.
        use Protocol::{Tcp, Udp};
        let any = "0.0.0.0";
        assert_eq!(run(&Pod::new("ns", "p"), &[]), Code::Success);
        let cases = [
            (
                ("127.0.0.1", Udp, 8080),
                ("127.0.0.1", Udp, 9090),
                Code::Success,
            ),
            (
                ("127.0.0.1", Udp, 8080),
                ("127.0.0.1", Udp, 8080),
                Code::Unschedulable,
            ),
            (
                ("127.0.0.2", Tcp, 8080),
                ("127.0.0.1", Tcp, 8080),
                Code::Success,
            ),
            (
                ("127.0.0.1", Tcp, 8080),
                ("127.0.0.1", Udp, 8080),
                Code::Success,
            ),
            (
                (any, Tcp, 8001),
                ("127.0.0.1", Tcp, 8001),
                Code::Unschedulable,
            ),
            (
                ("10.0.10.10", Tcp, 8001),
                (any, Tcp, 8001),
                Code::Unschedulable,
            ),
            ((any, Tcp, 8001), (any, Udp, 8001), Code::Success),
        ];
        for ((ip, protocol, port), (e_ip, e_protocol, e_port), expected) in cases {
            let wanted = with_port("p", ip, protocol, port);
            let existing = with_port("e", e_ip, e_protocol, e_port);
            assert_eq!(
                run(&wanted, &[existing]),
                expected,
                "{ip} {protocol:?} {port}"
            );
        }
    }
}
