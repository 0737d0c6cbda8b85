//! PodTopologySpread's unit tests: Filter and Score tables after upstream's.

use crate::NodeInfos;
use std::sync::Arc;

use gantry_api::{
    InclusionPolicy, LabelSelector, Labels, Node, Pod, Sym, TaintEffect, TopologySpreadConstraint,
    WhenUnsatisfiable,
};
use gantry_cache::NodeInfo;

use super::filter::PreFilterState;
use super::score::PreScoreState;
use crate::{
    ApiObjects, Cluster, CycleState, FilterPlugin, PreFilterPlugin, PreScorePlugin, ScorePlugin,
};

use super::*;
use crate::Code;
use crate::plugins::testing;
use gantry_api::decode::Service;
use gantry_api::labels::{NodeSelectorOp, NodeSelectorRequirement, Requirement, SelectorOp};
use gantry_api::{NodeSelector, NodeSelectorTerm, Toleration, TolerationOp};
use gantry_cache::{ClusterState, PvcKey};

/// A cluster of NodeInfos in a Vec, enough for this plugin.
struct Nodes(Vec<NodeInfo>);

impl ClusterState for Nodes {
    fn num_nodes(&self) -> usize {
        self.0.len()
    }
    fn node_at(&self, position: usize) -> &NodeInfo {
        &self.0[position]
    }
    fn position(&self, name: Sym) -> Option<usize> {
        self.0.iter().position(|n| n.name() == name)
    }
    fn with_affinity_pods(&self) -> &[u32] {
        &[]
    }
    fn with_required_anti_affinity_pods(&self) -> &[u32] {
        &[]
    }
    fn is_pvc_used(&self, _key: PvcKey) -> bool {
        false
    }
}

/// Nodes with the pods on them.
type Layout = Vec<(Node, Vec<Pod>)>;

const NS: &str = "default";
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A node labelled with its name under "node" plus the given labels (upstream's tests
/// use the "zone" and "node" keys).
fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    testing::node(name, 1000, 1 << 30)
        .with_labels([("node", name)])
        .with_labels(labels.iter().copied())
}

fn zoned(name: &str, zone: &str) -> Node {
    node(name, &[("zone", zone)])
}

fn tainted(n: Node) -> Node {
    n.with_taint(UNSCHEDULABLE_TAINT, "", TaintEffect::NoSchedule)
}

/// `count` pods labelled `label` ("foo" unless said otherwise), in the default namespace.
fn pods(prefix: &str, count: usize, label: &str) -> Vec<Pod> {
    (0..count)
        .map(|i| Pod::new(NS, &format!("{prefix}{i}")).with_labels([(label, "")]))
        .collect()
}

fn exists(key: &str) -> LabelSelector {
    LabelSelector {
        requirements: vec![Requirement {
            key: Sym::new(key),
            op: SelectorOp::Exists,
            values: Default::default(),
        }],
    }
}

fn spread(max_skew: i32, key: &str, when: WhenUnsatisfiable) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew,
        topology_key: Sym::new(key),
        when_unsatisfiable: when,
        label_selector: Some(exists("foo")),
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    }
}

fn hard(max_skew: i32, key: &str) -> TopologySpreadConstraint {
    spread(max_skew, key, WhenUnsatisfiable::DoNotSchedule)
}

fn soft(max_skew: i32, key: &str) -> TopologySpreadConstraint {
    spread(max_skew, key, WhenUnsatisfiable::ScheduleAnyway)
}

/// The incoming pod "p", labelled foo, with the given constraints.
fn incoming(constraints: Vec<TopologySpreadConstraint>) -> Pod {
    let mut pod = Pod::new(NS, "p").with_labels([("foo", "")]);
    pod.topology_spread_constraints = constraints;
    pod
}

fn node_affinity(mut pod: Pod, key: &str, op: NodeSelectorOp, values: &[&str]) -> Pod {
    pod.affinity.node_affinity.required = Some(NodeSelector {
        terms: vec![NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement {
                key: Sym::new(key),
                op,
                values: values.iter().map(|v| Sym::new(v)).collect(),
            }],
            match_fields: vec![],
        }],
    });
    pod
}

fn cluster(nodes: &[(Node, Vec<Pod>)]) -> Nodes {
    Nodes(
        nodes
            .iter()
            .map(|(n, pods)| testing::node_info(n, pods))
            .collect(),
    )
}

fn run_filter(pod: &Pod, nodes: &[(Node, Vec<Pod>)]) -> Vec<Code> {
    let plugin = PodTopologySpread::default();
    let nodes = cluster(nodes);
    let objects = ApiObjects::default();
    let mut state = CycleState::new();
    let (result, status) = plugin.pre_filter(
        &mut state,
        pod,
        Cluster {
            nodes: &nodes,
            objects: &objects,
        },
    );
    assert!(result.is_none());
    assert!(status.is_success(), "{status:?}");
    nodes
        .0
        .iter()
        .map(|info| plugin.filter(&state, pod, info).code())
        .collect()
}

/// Upstream's four-node, two-zone layout with `counts` matching pods on a, b, x, y.
fn abxy(counts: [usize; 4]) -> Layout {
    let names = [
        ("node-a", "zone1"),
        ("node-b", "zone1"),
        ("node-x", "zone2"),
        ("node-y", "zone2"),
    ];
    names
        .iter()
        .zip(counts)
        .map(|(&(name, zone), count)| (zoned(name, zone), pods(name, count, "foo")))
        .collect()
}

use Code::{Success as S, Unschedulable as U, UnschedulableAndUnresolvable as UU};

#[test]
fn filter_table() {
    // Re-derived from upstream's TestSingleConstraint and TestMultipleConstraints.
    let other_ns = |name: &str, ns: &str| Pod::new(ns, name).with_labels([("foo", "")]);
    let mut terminating = pods("t", 1, "foo");
    terminating[0].terminating = true;
    let two_two_one = |min_domains| {
        let mut c = hard(2, "node");
        c.min_domains = Some(min_domains);
        let nodes = vec![
            (node("node-a", &[]), pods("a", 2, "foo")),
            (node("node-b", &[]), pods("b", 2, "foo")),
            (node("node-c", &[]), pods("c", 1, "foo")),
        ];
        (incoming(vec![c]), nodes)
    };
    let zones_two_one = |min_domains| {
        let mut c = hard(2, "zone");
        c.min_domains = Some(min_domains);
        (incoming(vec![c]), abxy([1, 1, 0, 1]))
    };
    // Pods spread 1/1/0/1 over a, b, x, y; y lacks the pod's node selector label
    // "foo" (or is tainted), so with Honor it does not count.
    let honor_layout = |y: Node| {
        vec![
            (node("node-a", &[("foo", "")]), pods("a", 1, "foo")),
            (node("node-b", &[("foo", "")]), pods("b", 1, "foo")),
            (node("node-x", &[("foo", "")]), vec![]),
            (y, pods("y", 1, "foo")),
        ]
    };
    let with_policy = |affinity, taints| {
        let mut c = hard(1, "node");
        c.node_affinity_policy = affinity;
        c.node_taints_policy = taints;
        incoming(vec![c])
    };
    let with_selector = |pod: Pod| {
        let mut pod = pod;
        pod.node_selector = Labels::from_strs([("foo", "")]);
        pod
    };
    let (honor, ignore) = (InclusionPolicy::Honor, InclusionPolicy::Ignore);

    let cases = vec![
        (
            "no existing pods",
            incoming(vec![hard(1, "zone")]),
            abxy([0; 4]),
            vec![S, S, S, S],
        ),
        (
            "no existing pods, incoming pod doesn't match itself",
            incoming(vec![TopologySpreadConstraint {
                label_selector: Some(exists("bar")),
                ..hard(1, "zone")
            }]),
            abxy([0; 4]),
            vec![S, S, S, S],
        ),
        (
            "existing pods in a different namespace do not count",
            incoming(vec![hard(1, "zone")]),
            vec![
                (
                    zoned("node-a", "zone1"),
                    vec![other_ns("a1", "ns1"), other_ns("a2", "ns2")],
                ),
                (zoned("node-b", "zone1"), vec![]),
                (zoned("node-x", "zone2"), pods("x", 1, "foo")),
                (zoned("node-y", "zone2"), pods("y", 1, "foo")),
            ],
            vec![S, S, U, U],
        ),
        (
            "pods spread across zones as 3/3, all nodes fit",
            incoming(vec![hard(1, "zone")]),
            abxy([2, 1, 0, 3]),
            vec![S, S, S, S],
        ),
        (
            "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
            incoming(vec![hard(1, "zone")]),
            vec![
                (zoned("node-a", "zone1"), pods("a", 1, "foo")),
                (node("node-b", &[("zon", "zone1")]), pods("b", 1, "foo")),
                (zoned("node-x", "zone2"), pods("x", 1, "foo")),
                (zoned("node-y", "zone2"), pods("y", 1, "foo")),
            ],
            vec![S, UU, U, U],
        ),
        (
            "pod cannot be scheduled as all nodes don't have label 'rack'",
            incoming(vec![hard(1, "rack")]),
            vec![
                (zoned("node-a", "zone1"), vec![]),
                (zoned("node-x", "zone2"), vec![]),
            ],
            vec![UU, UU],
        ),
        (
            "pods spread across nodes as 2/1/0/3, only node-x fits",
            incoming(vec![hard(1, "node")]),
            abxy([2, 1, 0, 3]),
            vec![U, U, S, U],
        ),
        (
            "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
            incoming(vec![hard(2, "node")]),
            abxy([2, 1, 0, 3]),
            vec![U, S, S, U],
        ),
        (
            "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
            incoming(vec![hard(1, "node")]).with_labels([("bar", "")]),
            abxy([2, 1, 0, 3]),
            vec![U, S, S, U],
        ),
        (
            // Only a and y count (2/~1~/~0~/3); b and x pass here, NodeAffinity rejects them.
            "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
            node_affinity(
                incoming(vec![hard(1, "node")]),
                "node",
                NodeSelectorOp::In,
                &["node-a", "node-y"],
            ),
            abxy([2, 1, 0, 3]),
            vec![S, S, S, U],
        ),
        (
            "terminating Pods should be excluded",
            incoming(vec![hard(1, "node")]),
            vec![
                (node("node-a", &[]), terminating),
                (node("node-b", &[]), pods("b", 1, "foo")),
            ],
            vec![S, U],
        ),
        (
            "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
            node_affinity(
                incoming(vec![hard(1, "zone")]),
                "node",
                NodeSelectorOp::NotIn,
                &["node-b"],
            ),
            abxy([0, 2, 0, 1]),
            vec![S, S, U, U],
        ),
        (
            "pods spread across nodes as 2/2/1, maxSkew 2, domains (3) < minDomains (4)",
            two_two_one(4).0,
            two_two_one(4).1,
            vec![U, U, S],
        ),
        (
            "pods spread across nodes as 2/2/1, maxSkew 2, domains (3) > minDomains (2)",
            two_two_one(2).0,
            two_two_one(2).1,
            vec![S, S, S],
        ),
        (
            "pods spread across zones as 2/1, maxSkew 2, domains (2) < minDomains (3)",
            zones_two_one(3).0,
            zones_two_one(3).1,
            vec![U, U, S, S],
        ),
        (
            "pods spread across zones as 2/1, maxSkew 2, domains (2) > minDomains (1)",
            zones_two_one(1).0,
            zones_two_one(1).1,
            vec![S, S, S, S],
        ),
        (
            "NodeAffinityPolicy honored with nodeSelector: 1/1/0/~1~",
            with_selector(with_policy(honor, ignore)),
            honor_layout(node("node-y", &[])),
            vec![U, U, S, S],
        ),
        (
            "NodeAffinityPolicy ignored with nodeSelector: 1/1/0/1",
            with_selector(with_policy(ignore, ignore)),
            honor_layout(node("node-y", &[])),
            vec![U, U, S, U],
        ),
        (
            "NodeAffinityPolicy honored with nodeAffinity: 1/1/0/~1~",
            node_affinity(with_policy(honor, ignore), "foo", NodeSelectorOp::In, &[""]),
            honor_layout(node("node-y", &[])),
            vec![U, U, S, S],
        ),
        (
            "NodeAffinityPolicy ignored with nodeAffinity: 1/1/0/1",
            node_affinity(
                with_policy(ignore, ignore),
                "foo",
                NodeSelectorOp::In,
                &[""],
            ),
            honor_layout(node("node-y", &[])),
            vec![U, U, S, U],
        ),
        (
            "NodeTaintsPolicy honored: 1/1/0/~1~",
            with_policy(honor, honor),
            honor_layout(tainted(node("node-y", &[]))),
            vec![U, U, S, S],
        ),
        (
            "NodeTaintsPolicy ignored: 1/1/0/1",
            with_policy(honor, ignore),
            honor_layout(tainted(node("node-y", &[]))),
            vec![U, U, S, U],
        ),
        (
            "two constraints on zone and node, spreads = [3/3, 2/1/0/3]",
            incoming(vec![hard(1, "zone"), hard(1, "node")]),
            abxy([2, 1, 0, 3]),
            vec![U, U, S, U],
        ),
        (
            // Zone allows only zone1, node only node-x: nothing fits.
            "two constraints on zone and node, spreads = [3/4, 2/1/0/4]",
            incoming(vec![hard(1, "zone"), hard(1, "node")]),
            abxy([2, 1, 0, 4]),
            vec![U, U, U, U],
        ),
    ];
    for (name, pod, nodes, want) in cases {
        assert_eq!(run_filter(&pod, &nodes), want, "{name}");
    }
}

#[test]
fn filter_reasons() {
    let pod = incoming(vec![hard(1, "zone")]);
    let nodes = vec![
        (zoned("node-a", "zone1"), pods("a", 2, "foo")),
        (node("node-b", &[]), vec![]),
        (zoned("node-x", "zone2"), vec![]),
    ];
    let plugin = PodTopologySpread::default();
    let cluster = cluster(&nodes);
    let objects = ApiObjects::default();
    let mut state = CycleState::new();
    plugin.pre_filter(
        &mut state,
        &pod,
        Cluster {
            nodes: &cluster,
            objects: &objects,
        },
    );
    let a = plugin.filter(&state, &pod, &cluster.0[0]);
    assert_eq!(a.message(), REASON_CONSTRAINTS_NOT_MATCH);
    let b = plugin.filter(&state, &pod, &cluster.0[1]);
    assert_eq!(b.code(), UU);
    assert_eq!(b.message(), REASON_NODE_LABEL_NOT_MATCH);
}

#[test]
fn pre_filter_skips_without_hard_constraints() {
    let plugin = PodTopologySpread::default();
    let nodes = cluster(&abxy([1, 0, 0, 0]));
    let service = Service {
        namespace: Sym::new(NS),
        name: Arc::from("svc"),
        selector: LabelSelector::from_pairs([(Sym::new("foo"), Sym::new(""))]),
    };
    let objects = ApiObjects::new(&[], &[service]);
    // Soft constraints only; and no constraints at all (the system defaults are soft).
    for pod in [incoming(vec![soft(1, "zone")]), incoming(vec![])] {
        let mut state = CycleState::new();
        let (result, status) = plugin.pre_filter(
            &mut state,
            &pod,
            Cluster {
                nodes: &nodes,
                objects: &objects,
            },
        );
        assert!(result.is_none());
        assert!(status.is_skip());
        assert!(state.read::<PreFilterState>(NAME).is_none());
        assert!(!state.is_filter_skipped(NAME), "the framework marks skips");
    }
}

/// Per key slot: the match counts and the global minimum.
fn summary(state: &CycleState) -> Vec<(Vec<(&'static str, i64)>, i64)> {
    let s = state.read::<PreFilterState>(NAME).expect("PreFilter state");
    s.domains
        .iter()
        .map(|d| {
            let mut counts: Vec<_> = d.match_num.iter().map(|(v, n)| (v.as_str(), *n)).collect();
            counts.sort();
            (counts, d.paths.min())
        })
        .collect()
}

fn pre_filter_state(pod: &Pod, nodes: &Nodes) -> CycleState {
    let mut state = CycleState::new();
    let objects = ApiObjects::default();
    let (_, status) = PodTopologySpread::default().pre_filter(
        &mut state,
        pod,
        Cluster {
            nodes,
            objects: &objects,
        },
    );
    assert!(status.is_success(), "{status:?}");
    state
}

#[test]
fn pre_filter_state_table() {
    // Re-derived from upstream's TestPreFilterState.
    let taint_layout = || {
        vec![
            (node("node-a", &[]), pods("a", 1, "bar")),
            (node("node-b", &[]), pods("b", 2, "bar")),
            (tainted(node("node-c", &[("bar", "")])), pods("c", 1, "baz")),
        ]
    };
    let bar_taints = |taints| {
        incoming(vec![TopologySpreadConstraint {
            label_selector: Some(exists("bar")),
            node_taints_policy: taints,
            ..hard(1, "node")
        }])
    };
    let mut tolerating = bar_taints(InclusionPolicy::Honor);
    tolerating.tolerations.push(Toleration {
        key: Some(Sym::new(UNSCHEDULABLE_TAINT)),
        op: TolerationOp::Exists,
        value: Sym::new(""),
        effect: None,
    });
    let cases = vec![
        (
            "normal case with two spreadConstraints",
            incoming(vec![hard(1, "zone"), hard(1, "node")]),
            abxy([2, 1, 0, 4]),
            vec![
                (vec![("zone1", 3), ("zone2", 4)], 3),
                (
                    vec![("node-a", 2), ("node-b", 1), ("node-x", 0), ("node-y", 4)],
                    0,
                ),
            ],
        ),
        (
            "NodeTaintsPolicy ignored",
            bar_taints(InclusionPolicy::Ignore),
            taint_layout(),
            vec![(vec![("node-a", 1), ("node-b", 2), ("node-c", 0)], 0)],
        ),
        (
            "NodeTaintsPolicy honored",
            bar_taints(InclusionPolicy::Honor),
            taint_layout(),
            vec![(vec![("node-a", 1), ("node-b", 2)], 1)],
        ),
        (
            "NodeTaintsPolicy honored with tolerated taints",
            tolerating,
            taint_layout(),
            vec![(vec![("node-a", 1), ("node-b", 2), ("node-c", 0)], 0)],
        ),
    ];
    for (name, pod, nodes, want) in cases {
        let state = pre_filter_state(&pod, &cluster(&nodes));
        assert_eq!(summary(&state), want, "{name}");
    }
}

#[test]
fn add_and_remove_pod_match_recomputing() {
    // Two keys, an inclusion policy that leaves node-b out, and pods that do not
    // match or live in another namespace.
    let mut c = hard(1, "node");
    c.node_taints_policy = InclusionPolicy::Honor;
    let pod = incoming(vec![hard(1, "zone"), c]);
    let base = vec![
        (zoned("node-a", "zone1"), pods("a", 2, "foo")),
        (tainted(zoned("node-b", "zone1")), pods("b", 1, "foo")),
        (zoned("node-x", "zone2"), vec![]),
        (zoned("node-y", "zone2"), pods("y", 3, "foo")),
    ];
    let foreign = Pod::new("other", "f").with_labels([("foo", "")]);
    let changes = [
        (0, pods("new", 1, "foo").remove(0)),
        (1, pods("new", 1, "foo").remove(0)),
        (2, pods("new", 1, "foo").remove(0)),
        (3, pods("new", 1, "bar").remove(0)),
        (2, foreign),
    ];
    let plugin = PodTopologySpread::default();
    for (index, changed) in changes {
        let before = cluster(&base);
        let mut after_nodes = base.clone();
        after_nodes[index].1.push(changed.clone());
        let after = cluster(&after_nodes);
        let placed = Arc::new(changed.on_node(base[index].0.name.as_str()));

        let mut state = pre_filter_state(&pod, &before);
        plugin.add_pod(&mut state, &pod, &placed, &after.0[index]);
        let added = summary(&state);
        assert_eq!(
            added,
            summary(&pre_filter_state(&pod, &after)),
            "add on {index}"
        );

        let mut state = pre_filter_state(&pod, &after);
        plugin.remove_pod(&mut state, &pod, &placed, &before.0[index]);
        assert_eq!(
            summary(&state),
            summary(&pre_filter_state(&pod, &before)),
            "remove on {index}"
        );
    }
}

/// Runs PreScore over `feasible` (a subset of `all`, by name), Score, and Normalize.
fn run_score(
    pod: &Pod,
    all: &[(Node, Vec<Pod>)],
    feasible: &[&str],
    objects: &ApiObjects,
) -> Vec<i64> {
    let plugin = PodTopologySpread::default();
    let nodes = cluster(all);
    let infos: Vec<&NodeInfo> = feasible
        .iter()
        .filter_map(|name| nodes.node(Sym::new(name)))
        .collect();
    let mut state = CycleState::new();
    let status = plugin.pre_score(
        &mut state,
        pod,
        &NodeInfos::given(&infos),
        Cluster {
            nodes: &nodes,
            objects,
        },
    );
    assert!(status.is_success(), "{status:?}");
    let mut scores: Vec<i64> = infos
        .iter()
        .map(|info| plugin.score(&state, pod, info).expect("score"))
        .collect();
    assert!(plugin.normalize(&state, pod, &mut scores).is_success());
    scores
}

fn hosts(counts: &[(&str, usize)]) -> Layout {
    counts
        .iter()
        .map(|&(name, count)| (testing::node(name, 1000, 1 << 30), pods(name, count, "foo")))
        .collect()
}

#[test]
fn score_table() {
    // Re-derived from upstream's TestPodTopologySpreadScore.
    let none = ApiObjects::default();
    let service = ApiObjects::new(
        &[],
        &[Service {
            namespace: Sym::new(NS),
            name: Arc::from("svc"),
            selector: LabelSelector::from_pairs([(Sym::new("foo"), Sym::new(""))]),
        }],
    );
    let abcd = ["node-a", "node-b", "node-c", "node-d"];
    let four_three_two_one = hosts(&[("node-a", 4), ("node-b", 3), ("node-c", 2), ("node-d", 1)]);
    let two_one_zero_three = hosts(&[("node-a", 2), ("node-b", 1), ("node-c", 0), ("node-d", 3)]);
    let four_two_one_three = hosts(&[("node-a", 4), ("node-b", 2), ("node-x", 1), ("node-y", 3)]);
    let mut missing_hostname = four_two_one_three.clone();
    missing_hostname[1].0 = Node::new("node-b", Default::default()).with_labels([("n", "node-b")]);
    let zones = vec![
        (zoned("node-a", "zone1"), pods("a", 4, "foo")),
        (zoned("node-b", "zone1"), pods("b", 2, "foo")),
        (zoned("node-x", "zone2"), pods("x", 1, "foo")),
        (zoned("node-y", "zone2"), pods("y", 3, "foo")),
    ];
    let cases = vec![
        (
            "one constraint on node, no existing pods",
            incoming(vec![soft(1, HOSTNAME_KEY)]),
            hosts(&[("node-a", 0), ("node-b", 0)]),
            vec!["node-a", "node-b"],
            &none,
            vec![100, 100],
        ),
        (
            "one constraint on node, only one node is candidate",
            incoming(vec![soft(1, HOSTNAME_KEY)]),
            hosts(&[("node-a", 2), ("node-b", 1)]),
            vec!["node-a"],
            &none,
            vec![100],
        ),
        (
            "one constraint on node, all 4 nodes are candidates",
            incoming(vec![soft(1, HOSTNAME_KEY)]),
            two_one_zero_three.clone(),
            abcd.to_vec(),
            &none,
            vec![20, 60, 100, 0],
        ),
        (
            "one constraint on node, null selector",
            incoming(vec![TopologySpreadConstraint {
                label_selector: None,
                ..soft(1, HOSTNAME_KEY)
            }]),
            two_one_zero_three.clone(),
            abcd.to_vec(),
            &none,
            vec![100, 100, 100, 100],
        ),
        (
            "one constraint on node, all 4 nodes are candidates, maxSkew=2",
            incoming(vec![soft(2, HOSTNAME_KEY)]),
            two_one_zero_three,
            abcd.to_vec(),
            &none,
            vec![33, 66, 100, 16],
        ),
        (
            "one constraint on node, all 4 nodes are candidates, maxSkew=3",
            incoming(vec![soft(3, HOSTNAME_KEY)]),
            four_three_two_one.clone(),
            abcd.to_vec(),
            &none,
            vec![44, 66, 77, 100],
        ),
        (
            "system defaulting, nodes don't have zone, pods match service",
            incoming(vec![]),
            four_three_two_one,
            abcd.to_vec(),
            &service,
            vec![44, 66, 77, 100],
        ),
        (
            "one constraint on node, 3 out of 4 nodes are candidates",
            incoming(vec![soft(1, HOSTNAME_KEY)]),
            four_two_one_three,
            vec!["node-a", "node-b", "node-x"],
            &none,
            vec![33, 83, 100],
        ),
        (
            "one constraint on node, 3 out of 4 candidates, one node lacks the key",
            incoming(vec![soft(1, HOSTNAME_KEY)]),
            missing_hostname,
            vec!["node-a", "node-b", "node-x"],
            &none,
            vec![16, 0, 100],
        ),
        (
            "one constraint on zone, 3 out of 4 nodes are candidates",
            incoming(vec![soft(1, "zone")]),
            zones,
            vec!["node-a", "node-b", "node-x"],
            &none,
            vec![75, 75, 100],
        ),
    ];
    for (name, pod, all, feasible, objects, want) in cases {
        assert_eq!(run_score(&pod, &all, &feasible, objects), want, "{name}");
    }
}

#[test]
fn system_defaults_count_zoneless_nodes_as_one_zone() {
    // Upstream's "system default constraints" PreScore case: two nodes in zone mars,
    // two without a zone, which form the "" domain: the zone weight is ln(2 + 2).
    let zone = |name: &str| testing::node(name, 1000, 1 << 30).with_labels([(ZONE_KEY, "mars")]);
    let all = vec![
        (zone("node-a"), vec![]),
        (zone("node-b"), vec![]),
        (testing::node("node-c", 1000, 1 << 30), vec![]),
        (testing::node("node-d", 1000, 1 << 30), vec![]),
    ];
    let objects = ApiObjects::new(
        &[],
        &[Service {
            namespace: Sym::new(NS),
            name: Arc::from("svc"),
            selector: LabelSelector::from_pairs([(Sym::new("foo"), Sym::new(""))]),
        }],
    );
    let nodes = cluster(&all);
    let infos: Vec<&NodeInfo> = nodes.0.iter().collect();
    let mut state = CycleState::new();
    let pod = incoming(vec![]);
    let status = PodTopologySpread::default().pre_score(
        &mut state,
        &pod,
        &NodeInfos::given(&infos),
        Cluster {
            nodes: &nodes,
            objects: &objects,
        },
    );
    assert!(status.is_success());
    let s = state
        .read::<PreScoreState>(PRE_SCORE_STATE_KEY)
        .expect("state");
    assert_eq!(s.weights, vec![6f64.ln(), 4f64.ln()]);
    assert_eq!(s.ignored, vec![false; 4]);
    assert_eq!(
        s.constraints.iter().map(|c| c.max_skew).collect::<Vec<_>>(),
        vec![3, 5]
    );
}

#[test]
fn pre_score_skips_without_soft_constraints() {
    let nodes = cluster(&hosts(&[("node-a", 1)]));
    let infos: Vec<&NodeInfo> = nodes.0.iter().collect();
    let none = ApiObjects::default();
    // No Service selects the pod: no default constraints. Hard constraints only: no
    // scoring either.
    for pod in [incoming(vec![]), incoming(vec![hard(1, HOSTNAME_KEY)])] {
        let mut state = CycleState::new();
        let status = PodTopologySpread::default().pre_score(
            &mut state,
            &pod,
            &NodeInfos::given(&infos),
            Cluster {
                nodes: &nodes,
                objects: &none,
            },
        );
        assert!(status.is_skip());
        assert!(state.read::<PreScoreState>(PRE_SCORE_STATE_KEY).is_none());
    }
}
