//! PodTopologySpread reads matching pods per domain from the snapshot's domain counts
//! where they apply, and counts node by node elsewhere (the way its table tests, taken
//! from upstream, check it). On random clusters, constraints and changes, both ways give
//! the same PreFilter and Filter verdicts and the same scores.

use std::sync::Arc;

use gantry_api::decode::Service;
use gantry_api::labels::{NodeSelectorOp, NodeSelectorRequirement, Requirement, SelectorOp};
use gantry_api::{
    InclusionPolicy, LabelSelector, Labels, Node, NodeSelector, NodeSelectorTerm, Pod, Resources,
    Sym, TaintEffect, TopologySpreadConstraint, WhenUnsatisfiable,
};
use gantry_cache::{Cache, ClusterState, NodeInfo, Snapshot};
use gantry_framework::NodeInfos;
use gantry_framework::plugins::pod_topology_spread::PodTopologySpread;
use gantry_framework::{
    ApiObjects, Cluster, CycleState, FilterPlugin, PreFilterPlugin, PreScorePlugin, ScorePlugin,
    Status,
};
use proptest::prelude::*;

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";
const NODES: usize = 6;

#[derive(Debug, Clone)]
struct PodSpec {
    namespace: usize,
    app: Option<usize>,
    node: usize,
    terminating: bool,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        0..2usize,
        proptest::option::of(0..2usize),
        0..NODES,
        proptest::bool::weighted(0.1),
    )
        .prop_map(|(namespace, app, node, terminating)| PodSpec {
            namespace,
            app,
            node,
            terminating,
        })
}

fn pod(spec: &PodSpec, name: &str) -> Pod {
    let mut pod = Pod::new(["x", "y"][spec.namespace], name).on_node(&format!("n{}", spec.node));
    if let Some(app) = spec.app {
        pod = pod.with_labels([("app", ["a", "b"][app])]);
    }
    pod.terminating = spec.terminating;
    pod
}

/// (zone key?, hard?, max skew, selector shape, min domains, honour affinity, honour taints)
type ConstraintSpec = (bool, bool, i32, usize, Option<i32>, bool, bool);

fn constraint(spec: ConstraintSpec) -> TopologySpreadConstraint {
    let (zone, hard, max_skew, selector, min_domains, affinity, taints) = spec;
    let policy = |honour: bool| match honour {
        true => InclusionPolicy::Honor,
        false => InclusionPolicy::Ignore,
    };
    let label_selector = match selector {
        0 => None,
        1 => Some(LabelSelector::from_pairs([(
            Sym::new("app"),
            Sym::new("a"),
        )])),
        _ => Some(LabelSelector {
            requirements: vec![Requirement {
                key: Sym::new("app"),
                op: SelectorOp::Exists,
                values: Default::default(),
            }],
        }),
    };
    TopologySpreadConstraint {
        max_skew,
        topology_key: Sym::new(if zone { ZONE } else { HOSTNAME }),
        when_unsatisfiable: match hard {
            true => WhenUnsatisfiable::DoNotSchedule,
            false => WhenUnsatisfiable::ScheduleAnyway,
        },
        label_selector,
        min_domains: min_domains.filter(|_| hard),
        node_affinity_policy: policy(affinity),
        node_taints_policy: policy(taints),
    }
}

fn constraint_spec() -> impl Strategy<Value = ConstraintSpec> {
    (
        any::<bool>(),
        any::<bool>(),
        1..3i32,
        0..3usize,
        proptest::option::of(1..5i32),
        any::<bool>(),
        any::<bool>(),
    )
}

/// Node `i`: a hostname always, a zone unless `zoneless`, the pool label on even nodes,
/// a taint on node 1.
fn node(i: usize, zoneless: bool, zones: usize) -> Arc<Node> {
    let name = format!("n{i}");
    let mut node =
        Node::new(&name, Resources::new(100_000, 1 << 40)).with_labels([(HOSTNAME, name.as_str())]);
    if !zoneless {
        node = node.with_labels([(ZONE, ["z1", "z2", "z3"][i % zones])]);
    }
    if i.is_multiple_of(2) {
        node = node.with_labels([("pool", "p1")]);
    }
    if i == 1 {
        node = node.with_taint("dedicated", "x", TaintEffect::NoSchedule);
    }
    Arc::new(node)
}

/// What the plugin decides on every node: PreFilter, Filter per node, PreScore, Score
/// per node after normalising.
#[derive(Debug, PartialEq)]
struct Decisions {
    pre_filter: Status,
    filter: Vec<Status>,
    pre_score: Status,
    scores: Option<Vec<i64>>,
}

fn decide(snapshot: &Snapshot, incoming: &Pod, objects: &ApiObjects) -> Decisions {
    let plugin = PodTopologySpread::default();
    let cluster = Cluster {
        nodes: snapshot,
        objects,
    };
    let infos: Vec<&NodeInfo> = (0..snapshot.num_nodes())
        .map(|i| snapshot.node_at(i))
        .collect();
    let mut state = CycleState::new();
    let (_, pre_filter) = plugin.pre_filter(&mut state, incoming, cluster);
    let filter = match pre_filter.is_success() {
        true => infos
            .iter()
            .map(|info| plugin.filter(&state, incoming, info))
            .collect(),
        false => Vec::new(),
    };
    let pre_score = plugin.pre_score(&mut state, incoming, &NodeInfos::given(&infos), cluster);
    let scores = pre_score.is_success().then(|| {
        let mut scores: Vec<i64> = infos
            .iter()
            .map(|info| plugin.score(&state, incoming, info).expect("score"))
            .collect();
        assert!(plugin.normalize(&state, incoming, &mut scores).is_success());
        scores
    });
    Decisions {
        pre_filter,
        filter,
        pre_score,
        scores,
    }
}

/// A snapshot never asked for a selection: the plugin counts node by node.
fn cold(cache: &Cache) -> Snapshot {
    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot).unwrap();
    snapshot
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn domain_counts_decide_as_counting_node_by_node(
        pods in proptest::collection::vec(pod_spec(), 0..30),
        later in proptest::collection::vec(pod_spec(), 0..6),
        removed in proptest::collection::vec(any::<proptest::sample::Index>(), 0..4),
        constraints in proptest::collection::vec(constraint_spec(), 0..3),
        zoneless in proptest::option::of(0..NODES),
        zones in 1..4usize,
        node_selector in any::<bool>(),
        node_affinity in any::<bool>(),
        service in any::<bool>(),
        moved in proptest::option::of(0..NODES),
    ) {
        let cache = Cache::new();
        for i in 0..NODES {
            cache.add_node(node(i, zoneless == Some(i), zones));
        }
        let mut existing: Vec<Pod> = Vec::new();
        for (i, spec) in pods.iter().enumerate() {
            let pod = pod(spec, &format!("p{i}"));
            cache.add_pod(Arc::new(pod.clone())).unwrap();
            existing.push(pod);
        }
        let mut incoming = Pod::new("x", "incoming").with_labels([("app", "a")]);
        incoming.topology_spread_constraints = constraints.into_iter().map(constraint).collect();
        if node_selector {
            incoming.node_selector = Labels::from_strs([("pool", "p1")]);
        }
        if node_affinity {
            incoming.affinity.node_affinity.required = Some(NodeSelector {
                terms: vec![NodeSelectorTerm {
                    match_expressions: vec![NodeSelectorRequirement {
                        key: Sym::new(HOSTNAME),
                        op: NodeSelectorOp::NotIn,
                        values: [Sym::new("n0")].into_iter().collect(),
                    }],
                    match_fields: vec![],
                }],
            });
        }
        // A Service selecting the pod gives it the system default constraints when it
        // declares none.
        let services = match service {
            true => vec![Service {
                namespace: Sym::new("x"),
                name: Arc::from("web"),
                selector: LabelSelector::from_pairs([(Sym::new("app"), Sym::new("a"))]),
            }],
            false => vec![],
        };
        let objects = ApiObjects::new(&[], &services);

        let mut snapshot = cold(&cache);
        let node_by_node = decide(&snapshot, &incoming, &objects);
        cache.update_snapshot(&mut snapshot).unwrap();
        prop_assert_eq!(&decide(&snapshot, &incoming, &objects), &node_by_node);

        // Pods come and go, a node may lose its zone; the kept counts follow.
        for index in removed {
            if existing.is_empty() {
                break;
            }
            let pod = existing.remove(index.index(existing.len()));
            cache.remove_pod(&pod).unwrap();
        }
        for (i, spec) in later.iter().enumerate() {
            cache.assume_pod(Arc::new(pod(spec, &format!("later{i}")))).unwrap();
        }
        if let Some(i) = moved {
            cache.update_node(node(i, zoneless != Some(i), zones));
        }
        cache.update_snapshot(&mut snapshot).unwrap();
        prop_assert!(snapshot.topology_counts_agree());
        prop_assert_eq!(
            decide(&snapshot, &incoming, &objects),
            decide(&cold(&cache), &incoming, &objects)
        );
    }
}
