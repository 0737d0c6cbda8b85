//! InterPodAffinity counts pods through per-node indexes and aggregated terms. This
//! differential test checks it against a direct transcription of upstream's per-pod
//! rules on random clusters: the same Filter verdict and the same normalised score on
//! every node.

use std::collections::HashMap;
use std::sync::Arc;

use gantry_api::labels::{Requirement, SelectorOp};
use gantry_api::{
    LabelSelector, Labels, Node, Pod, PodAffinityTerm, Resources, Sym, WeightedPodAffinityTerm,
};
use gantry_cache::{Cache, ClusterState, NodeInfo, Snapshot};
use gantry_framework::NodeInfos;
use gantry_framework::plugins::inter_pod_affinity::InterPodAffinity;
use gantry_framework::{
    ApiObjects, Cluster, CycleState, FilterPlugin, PreFilterPlugin, PreScorePlugin, ScorePlugin,
};
use proptest::prelude::*;

const APPS: [&str; 3] = ["a", "b", "c"];
const NAMESPACES: [&str; 2] = ["x", "y"];
const KEYS: [&str; 2] = ["kubernetes.io/hostname", "zone"];

/// A term from a few shapes: one requirement (indexed) or two (counted pod by pod), in
/// the owner's namespace, a listed one, or every namespace.
fn term(shape: (usize, usize, usize, usize)) -> PodAffinityTerm {
    let (app, two_requirements, namespaces, key) = shape;
    let mut requirements = vec![Requirement {
        key: Sym::new("app"),
        op: SelectorOp::In,
        values: [Sym::new(APPS[app % 3])].into_iter().collect(),
    }];
    if two_requirements == 1 {
        requirements.push(Requirement {
            key: Sym::new("app"),
            op: SelectorOp::Exists,
            values: Default::default(),
        });
    }
    PodAffinityTerm {
        label_selector: Some(LabelSelector { requirements }),
        namespaces: if namespaces == 1 {
            vec![Sym::new("y")]
        } else {
            vec![]
        },
        namespace_selector: (namespaces == 2).then(LabelSelector::default),
        topology_key: Sym::new(KEYS[key % 2]),
    }
}

type Shape = (usize, usize, usize, usize);

#[derive(Debug, Clone)]
struct PodSpec {
    namespace: usize,
    app: usize,
    node: usize,
    required_affinity: Option<Shape>,
    required_anti: Option<Shape>,
    preferred: Option<(Shape, i32, bool)>,
    /// Being deleted: InterPodAffinity still counts it.
    terminating: bool,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    let shape = (0..3usize, 0..2usize, 0..3usize, 0..2usize);
    (
        0..2usize,
        0..3usize,
        0..6usize,
        proptest::option::weighted(0.2, shape.clone()),
        proptest::option::weighted(0.2, shape.clone()),
        proptest::option::weighted(0.4, (shape, 1..50i32, any::<bool>())),
        proptest::bool::weighted(0.1),
    )
        .prop_map(
            |(namespace, app, node, required_affinity, required_anti, preferred, terminating)| {
                PodSpec {
                    namespace,
                    app,
                    node,
                    required_affinity,
                    required_anti,
                    preferred,
                    terminating,
                }
            },
        )
}

fn build(spec: &PodSpec, name: &str) -> Pod {
    let mut pod = Pod::new(NAMESPACES[spec.namespace], name).with_labels([("app", APPS[spec.app])]);
    pod.terminating = spec.terminating;
    if let Some(s) = spec.required_affinity {
        pod.affinity.pod_affinity.required.push(term(s));
    }
    if let Some(s) = spec.required_anti {
        pod.affinity.pod_anti_affinity.required.push(term(s));
    }
    if let Some((s, weight, anti)) = spec.preferred {
        let w = WeightedPodAffinityTerm {
            weight,
            term: term(s),
        };
        if anti {
            pod.affinity.pod_anti_affinity.preferred.push(w);
        } else {
            pod.affinity.pod_affinity.preferred.push(w);
        }
    }
    pod
}

/// Upstream's `AffinityTerm.Matches` (namespace labels are all empty here).
fn matches(term: &PodAffinityTerm, owner: Sym, pod: &Pod) -> bool {
    let in_namespace = if term.namespaces.is_empty() && term.namespace_selector.is_none() {
        pod.namespace == owner
    } else {
        term.namespaces.contains(&pod.namespace)
            || term
                .namespace_selector
                .as_ref()
                .is_some_and(|s| s.matches(&Labels::default()))
    };
    in_namespace
        && term
            .label_selector
            .as_ref()
            .is_some_and(|s| s.matches(&pod.labels))
}

/// Upstream's filter, pod by pod.
fn naive_filter(incoming: &Pod, existing: &[(Pod, &Node)], node: &Node) -> bool {
    let value = |n: &Node, key: Sym| n.labels.get(key);
    for (p, m) in existing {
        for t in &p.affinity.pod_anti_affinity.required {
            if matches(t, p.namespace, incoming)
                && value(m, t.topology_key).is_some()
                && value(m, t.topology_key) == value(node, t.topology_key)
            {
                return false;
            }
        }
    }
    let terms = &incoming.affinity.pod_affinity.required;
    if !terms.is_empty() {
        let matching_all = |p: &Pod| terms.iter().all(|t| matches(t, incoming.namespace, p));
        let any_match_anywhere = existing.iter().any(|(p, m)| {
            matching_all(p) && terms.iter().any(|t| value(m, t.topology_key).is_some())
        });
        for t in terms {
            let Some(v) = value(node, t.topology_key) else {
                return false;
            };
            let here = existing
                .iter()
                .any(|(p, m)| matching_all(p) && value(m, t.topology_key) == Some(v));
            if !here && (any_match_anywhere || !matching_all(incoming)) {
                return false;
            }
        }
    }
    for t in &incoming.affinity.pod_anti_affinity.required {
        if let Some(v) = value(node, t.topology_key)
            && existing.iter().any(|(p, m)| {
                matches(t, incoming.namespace, p) && value(m, t.topology_key) == Some(v)
            })
        {
            return false;
        }
    }
    true
}

/// Upstream's PreScore and Score, pod by pod, before normalisation.
fn naive_scores(incoming: &Pod, existing: &[(Pod, &Node)], nodes: &[Node]) -> Vec<i64> {
    let mut topology: HashMap<(Sym, Sym), i64> = HashMap::new();
    let mut add = |m: &Node, key: Sym, w: i64| {
        if let Some(v) = m.labels.get(key) {
            *topology.entry((key, v)).or_default() += w;
        }
    };
    for (p, m) in existing {
        for (terms, sign) in [
            (&incoming.affinity.pod_affinity.preferred, 1),
            (&incoming.affinity.pod_anti_affinity.preferred, -1),
        ] {
            for w in terms {
                if matches(&w.term, incoming.namespace, p) {
                    add(m, w.term.topology_key, sign * i64::from(w.weight));
                }
            }
        }
        for t in &p.affinity.pod_affinity.required {
            if matches(t, p.namespace, incoming) {
                add(m, t.topology_key, 1);
            }
        }
        for (terms, sign) in [
            (&p.affinity.pod_affinity.preferred, 1),
            (&p.affinity.pod_anti_affinity.preferred, -1),
        ] {
            for w in terms {
                if matches(&w.term, p.namespace, incoming) {
                    add(m, w.term.topology_key, sign * i64::from(w.weight));
                }
            }
        }
    }
    nodes
        .iter()
        .map(|n| {
            KEYS.iter()
                .filter_map(|k| {
                    n.labels
                        .get_str(k)
                        .and_then(|v| topology.get(&(Sym::new(k), v)))
                })
                .sum()
        })
        .collect()
}

/// Filter and raw Score on every node against the per-pod rules.
fn agrees(
    snapshot: &Snapshot,
    nodes: &[Node],
    existing: &[(Pod, &Node)],
    incoming: &Pod,
) -> Result<(), TestCaseError> {
    let objects = ApiObjects::default();
    let cluster = Cluster {
        nodes: snapshot,
        objects: &objects,
    };
    let plugin = InterPodAffinity::default();

    let mut state = CycleState::new();
    let (_, status) = plugin.pre_filter(&mut state, incoming, cluster);
    for (i, node) in nodes.iter().enumerate() {
        let info = snapshot.node(node.name).unwrap();
        let got = status.is_skip() || plugin.filter(&state, incoming, info).is_success();
        prop_assert_eq!(
            got,
            naive_filter(incoming, existing, node),
            "filter on node {}",
            i
        );
    }

    let infos: Vec<&NodeInfo> = (0..snapshot.num_nodes())
        .map(|i| snapshot.node_at(i))
        .collect();
    let mut state = CycleState::new();
    let status = plugin.pre_score(&mut state, incoming, &NodeInfos::given(&infos), cluster);
    let raw_expected = naive_scores(
        incoming,
        existing,
        &infos
            .iter()
            .map(|i| (**i.node().unwrap()).clone())
            .collect::<Vec<_>>(),
    );
    if status.is_skip() {
        prop_assert!(
            raw_expected.iter().all(|s| *s == 0),
            "skipped, but upstream scores {:?}",
            raw_expected
        );
    } else {
        let raw: Vec<i64> = infos
            .iter()
            .map(|i| plugin.score(&state, incoming, i).unwrap())
            .collect();
        prop_assert_eq!(raw, raw_expected);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// The same cluster three ways: counted node by node (the snapshot was never asked for
    /// the incoming pod's selections), from the snapshot's domain counts (asked for by
    /// the first round), and from domain counts kept up to date while pods come and go.
    #[test]
    fn indexed_affinity_agrees_with_the_per_pod_rules(
        pods in proptest::collection::vec(pod_spec(), 0..25),
        later in proptest::collection::vec(pod_spec(), 0..6),
        removed in proptest::collection::vec(any::<proptest::sample::Index>(), 0..4),
        incoming in pod_spec(),
    ) {
        let nodes: Vec<Node> = (0..6)
            .map(|i| {
                let name = format!("n{i}");
                let zone = ["z1", "z2", "z3"][i % 3];
                Node::new(&name, Resources::new(100_000, 1 << 40)).with_labels([(KEYS[0], name.as_str()), (KEYS[1], zone)])
            })
            .collect();
        let cache = Cache::new();
        for n in &nodes {
            cache.add_node(Arc::new(n.clone()));
        }
        let mut existing = Vec::new();
        for (i, spec) in pods.iter().enumerate() {
            let pod = build(spec, &format!("p{i}")).on_node(&format!("n{}", spec.node));
            cache.add_pod(Arc::new(pod.clone())).unwrap();
            existing.push((pod, &nodes[spec.node]));
        }
        let incoming = build(&incoming, "incoming");
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        agrees(&snapshot, &nodes, &existing, &incoming)?;

        cache.update_snapshot(&mut snapshot).unwrap();
        agrees(&snapshot, &nodes, &existing, &incoming)?;

        for index in removed {
            if existing.is_empty() {
                break;
            }
            let (pod, _) = existing.remove(index.index(existing.len()));
            cache.remove_pod(&pod).unwrap();
        }
        for (i, spec) in later.iter().enumerate() {
            let pod = build(spec, &format!("later{i}")).on_node(&format!("n{}", spec.node));
            cache.assume_pod(Arc::new(pod.clone())).unwrap();
            existing.push((pod, &nodes[spec.node]));
        }
        cache.update_snapshot(&mut snapshot).unwrap();
        prop_assert!(snapshot.topology_counts_agree());
        agrees(&snapshot, &nodes, &existing, &incoming)?;
    }
}
