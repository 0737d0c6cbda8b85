//! NodeAffinity: `nodeSelector` and required node affinity filter nodes; preferred terms
//! add their weights to the nodes they match.

use crate::NodeInfos;
use gantry_api::{NodeSelector, Pod, Sym};
use gantry_cache::NodeInfo;

use crate::{
    Cluster, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, PreScorePlugin,
    ScorePlugin, Status, default_normalize,
};

pub const NAME: &str = "NodeAffinity";
pub const REASON: &str = "node(s) didn't match Pod's node affinity/selector";

/// `added_affinity`: the profile's `addedAffinity`, required of every pod in addition to its own.
#[derive(Default)]
pub struct NodeAffinity {
    pub added_affinity: Option<NodeSelector>,
}

pub const ADDED_AFFINITY_REASON: &str = "node(s) didn't match scheduler-enforced node affinity";
/// PreFilter: the required terms name no node in common.
pub const REASON_CONFLICT: &str = "pod affinity terms conflict";

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    fn sign(&self, pod: &Pod, signature: &mut crate::Signature) -> bool {
        use crate::signature::{signer, sorted_spellings};
        // Required terms and preferred (weight, term) pairs, each in any order.
        let affinity = &pod.affinity.node_affinity;
        let required = sorted_spellings(affinity.required.iter().flat_map(|r| r.terms.iter()));
        let preferred = sorted_spellings(affinity.preferred.iter().map(|p| (p.weight, &p.term)));
        signature.add(signer::NODE_AFFINITY, &(required, preferred));
        signature.add(signer::NODE_SELECTOR, &pod.node_selector);
        true
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::NODE_ADD_OR_UPDATE
    }
}

/// Whether the node satisfies the pod's nodeSelector and required node affinity.
pub fn matches_required(pod: &Pod, node: &gantry_api::Node) -> bool {
    pod.node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
        && pod
            .affinity
            .node_affinity
            .required
            .as_ref()
            .is_none_or(|r| r.matches(node.name, &node.labels))
}

/// The nodes a required node affinity names (`matchFields` `metadata.name In [...]`):
/// `None` when some term names none (the terms are ORed, so any node may match); the
/// union over the terms of each term's intersection otherwise, sorted.
fn named_nodes(required: &NodeSelector) -> Option<Vec<Sym>> {
    let name_field = Sym::new("metadata.name");
    let mut union: Vec<Sym> = Vec::new();
    for term in &required.terms {
        union.extend(term.admitted_values(name_field, true)?);
    }
    union.sort_unstable();
    union.dedup();
    Some(union)
}

impl PreFilterPlugin for NodeAffinity {
    /// Upstream's PreFilter: when every required term names its nodes, only those nodes
    /// are checked (and counted in the pod's failure message); terms that name no node in
    /// common conflict.
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &Pod,
        _cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let required = pod.affinity.node_affinity.required.as_ref();
        if pod.node_selector.is_empty() && required.is_none() && self.added_affinity.is_none() {
            return (None, Status::skip());
        }
        let Some(required) = required.filter(|r| !r.terms.is_empty()) else {
            return (None, Status::success());
        };
        match named_nodes(required) {
            Some(nodes) if nodes.is_empty() => (None, Status::unresolvable(REASON_CONFLICT)),
            narrowed => (narrowed, Status::success()),
        }
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter_reads_only_the_node(&self, _state: &CycleState, _pod: &Pod) -> bool {
        true
    }

    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let Some(node) = node.node() else {
            return Status::unresolvable("node not found");
        };
        if let Some(added) = &self.added_affinity
            && !added.matches(node.name, &node.labels)
        {
            return Status::unresolvable(ADDED_AFFINITY_REASON);
        }
        if matches_required(pod, node) {
            Status::success()
        } else {
            Status::unresolvable(REASON)
        }
    }
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(
        &self,
        _state: &mut CycleState,
        pod: &Pod,
        _nodes: &NodeInfos<'_>,
        _cluster: Cluster<'_>,
    ) -> Status {
        if pod.affinity.node_affinity.preferred.is_empty() {
            Status::skip()
        } else {
            Status::success()
        }
    }
}

impl ScorePlugin for NodeAffinity {
    /// The preferred terms are matched against the node's labels: worth remembering.
    fn worth_remembering(&self, _state: &CycleState, _pod: &Pod) -> bool {
        true
    }

    fn score(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let node = node.node().ok_or_else(|| Status::error("node not found"))?;
        Ok(pod
            .affinity
            .node_affinity
            .preferred
            .iter()
            .filter(|p| p.term.matches(node.name, &node.labels))
            .map(|p| i64::from(p.weight))
            .sum())
    }

    fn normalize(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        default_normalize(scores, false);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, node_info};
    use gantry_api::labels::{NodeSelectorOp, NodeSelectorRequirement};
    use gantry_api::{Labels, NodeSelectorTerm, PreferredSchedulingTerm};

    fn term(key: &str, op: NodeSelectorOp, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement {
                key: Sym::new(key),
                op,
                values: values.iter().map(|v| Sym::new(v)).collect(),
            }],
            match_fields: vec![],
        }
    }

    #[test]
    fn filter_table() {
        let labelled = node("n", 1, 1).with_labels([("foo", "bar"), ("zone", "a")]);
        let check = |pod: &Pod| {
            NodeAffinity::default().filter(&CycleState::new(), pod, &node_info(&labelled, &[]))
        };
        let mut selector = Pod::new("ns", "p");
        selector.node_selector = Labels::from_strs([("foo", "bar")]);
        assert!(check(&selector).is_success());
        selector.node_selector = Labels::from_strs([("foo", "baz")]);
        assert_eq!(check(&selector).message(), REASON);
        let mut required = Pod::new("ns", "p");
        required.affinity.node_affinity.required = Some(NodeSelector {
            terms: vec![
                term("zone", NodeSelectorOp::In, &["b"]),
                term("foo", NodeSelectorOp::Exists, &[]),
            ],
        });
        assert!(check(&required).is_success(), "terms are ORed");
        required.node_selector = Labels::from_strs([("zone", "b")]);
        assert!(
            !check(&required).is_success(),
            "nodeSelector and affinity are ANDed"
        );
        let enforced = NodeAffinity {
            added_affinity: Some(NodeSelector {
                terms: vec![term("zone", NodeSelectorOp::In, &["z"])],
            }),
        };
        let status = enforced.filter(
            &CycleState::new(),
            &Pod::new("ns", "p"),
            &node_info(&labelled, &[]),
        );
        assert_eq!(status.message(), ADDED_AFFINITY_REASON);
    }

    fn by_name(op: NodeSelectorOp, names: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: vec![NodeSelectorRequirement {
                key: Sym::new("metadata.name"),
                op,
                values: names.iter().map(|v| Sym::new(v)).collect(),
            }],
        }
    }

    /// Upstream's TestNodeAffinityPreFilter (PreFilterResult cases).
    #[test]
    fn pre_filter_narrows_to_the_nodes_match_fields_name() {
        let pre_filter = |terms: Vec<NodeSelectorTerm>| {
            let mut pod = Pod::new("ns", "p");
            pod.affinity.node_affinity.required = Some(NodeSelector { terms });
            let snapshot = gantry_cache::Snapshot::new();
            let objects = crate::ApiObjects::default();
            let cluster = Cluster {
                nodes: &snapshot,
                objects: &objects,
            };
            let (result, status) =
                NodeAffinity::default().pre_filter(&mut CycleState::new(), &pod, cluster);
            let names = result.map(|r| r.iter().map(|n| n.as_str()).collect::<Vec<_>>());
            (names, status.code(), status.message())
        };
        use crate::Code::{Success, UnschedulableAndUnresolvable};
        let in_ = NodeSelectorOp::In;
        let label = || term("foo", NodeSelectorOp::In, &["bar"]);
        assert_eq!(
            pre_filter(vec![by_name(in_, &["node1"])]),
            (Some(vec!["node1"]), Success, String::new()),
            "metadata.name field"
        );
        let mut both = by_name(in_, &["node1", "node2"]);
        both.match_fields
            .push(by_name(in_, &["node2", "node3"]).match_fields.remove(0));
        assert_eq!(
            pre_filter(vec![both, by_name(in_, &["node5"])]).0,
            Some(vec!["node2", "node5"]),
            "requirements intersect within a term, terms unite"
        );
        assert_eq!(
            pre_filter(vec![by_name(in_, &["node1"]), label()]).0,
            None,
            "a term without a name matches any node"
        );
        assert_eq!(
            pre_filter(vec![by_name(NodeSelectorOp::NotIn, &["node1"])]).0,
            None,
            "NotIn does not narrow"
        );
        let mut disjoint = by_name(in_, &["node1"]);
        disjoint
            .match_fields
            .push(by_name(in_, &["node2"]).match_fields.remove(0));
        assert_eq!(
            pre_filter(vec![disjoint]),
            (
                None,
                UnschedulableAndUnresolvable,
                REASON_CONFLICT.to_string()
            ),
            "conflicting names"
        );
        assert_eq!(pre_filter(vec![label()]).0, None);
    }

    #[test]
    fn score_sums_matching_preferred_weights() {
        // Upstream's "all nodes match different preferences" case: weights 2, 4, 5.
        let mut pod = Pod::new("ns", "p");
        pod.affinity.node_affinity.preferred = vec![
            PreferredSchedulingTerm {
                weight: 2,
                term: term("foo", NodeSelectorOp::In, &["bar"]),
            },
            PreferredSchedulingTerm {
                weight: 4,
                term: term("key", NodeSelectorOp::In, &["value"]),
            },
            PreferredSchedulingTerm {
                weight: 5,
                term: term("az", NodeSelectorOp::In, &["az1"]),
            },
        ];
        let nodes = [
            node("1", 1, 1).with_labels([("foo", "bar")]),
            node("2", 1, 1).with_labels([("key", "value"), ("az", "az1")]),
            node("3", 1, 1).with_labels([("foo", "bar"), ("az", "az1")]),
            node("4", 1, 1),
        ];
        let mut scores: Vec<i64> = nodes
            .iter()
            .map(|n| {
                NodeAffinity::default()
                    .score(&CycleState::new(), &pod, &node_info(n, &[]))
                    .unwrap()
            })
            .collect();
        assert_eq!(scores, [2, 9, 7, 0]);
        NodeAffinity::default().normalize(&CycleState::new(), &pod, &mut scores);
        assert_eq!(scores, [22, 100, 77, 0]);
    }
}
