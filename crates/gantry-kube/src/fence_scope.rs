//! Which fences a bind takes when instances share a cluster (docs/shared-state.md). Two
//! binds must be serialised when one could change a Filter verdict of the other: on the
//! same node (the node's fence), or in the same topology domain of a key that a required
//! term or a DoNotSchedule spread constraint reaching either pod uses (a domain's fence),
//! or, for pods that a required affinity term of their own selects, placed by the
//! first-pod rule (one fence per such term, cluster-wide: two "first" pods in two zones
//! would each see none). A bind that takes no fence in common with another cannot change
//! its verdicts: it adds no pod to the other's domains, and a spread minimum only rises.

use std::collections::BTreeSet;

use gantry_api::rng::fnv1a;
use gantry_api::{Node, Pod, PodAffinityTerm, Sym, WhenUnsatisfiable};

/// The hostname key: its domain is the node, which the node's fence already covers.
const HOSTNAME: &str = "kubernetes.io/hostname";

/// What every node fence's name starts with.
pub const NODE_FENCE_PREFIX: &str = "gantry-bind-";

/// The fence of one node (the name kept from the first fences, so that an upgrade
/// serialises with instances still running the older release).
pub fn node_fence(node: Sym) -> String {
    let name = format!("{NODE_FENCE_PREFIX}{node}");
    if name.len() <= 253 {
        name
    } else {
        format!("gantry-bind-{:016x}", fnv1a(node.as_str().bytes()))
    }
}

fn domain_fence(key: Sym, value: Sym) -> String {
    format!(
        "gantry-domain-{:016x}",
        fnv1a(format!("{key}={value}").bytes())
    )
}

fn first_pod_fence(pod: &Pod, term: &PodAffinityTerm) -> String {
    format!(
        "gantry-first-{:016x}",
        fnv1a(format!("{}/{term:?}", pod.namespace).bytes())
    )
}

/// Whether `term`, of `owner`, may select `pod`: its selector matches the pod's labels
/// and its namespaces may include the pod's (a namespace selector is taken to include
/// every namespace: a fence too many costs a wait, a fence too few a violation).
fn may_select(owner: &Pod, term: &PodAffinityTerm, pod: &Pod) -> bool {
    let in_scope = if term.namespace_selector.is_some() {
        true
    } else if term.namespaces.is_empty() {
        owner.namespace == pod.namespace
    } else {
        term.namespaces.contains(&pod.namespace)
    };
    in_scope
        && term
            .label_selector
            .as_ref()
            .is_some_and(|s| s.matches(&pod.labels))
}

/// Whether a pod has required terms that reach across nodes (affinity, anti-affinity,
/// DoNotSchedule spread): the scheduling loop keeps such pods indexed, so that a bind
/// looks only at them.
pub fn reaches_across_nodes(pod: &Pod) -> bool {
    !pod.affinity.pod_anti_affinity.required.is_empty()
        || !pod.affinity.pod_affinity.required.is_empty()
        || pod
            .topology_spread_constraints
            .iter()
            .any(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
}

/// The fences a bind of `pod` on `node` takes, sorted (binders take them in this order,
/// so that two binders never wait on each other in a cycle): the node's, the domains of
/// `node` for the keys `pod`'s own required terms and DoNotSchedule constraints use and
/// for the keys of `others`' required anti-affinity terms and DoNotSchedule constraints
/// that select `pod`, and the first-pod fences of the self-selecting affinity terms, its
/// own and others' that select it.
pub fn fences_for<'a>(
    pod: &Pod,
    node: &Node,
    others: impl Iterator<Item = &'a Pod>,
) -> Vec<String> {
    let mut keys: BTreeSet<Sym> = BTreeSet::new();
    let mut fences = BTreeSet::from([node_fence(node.name)]);
    let affinity = &pod.affinity;
    keys.extend(
        affinity
            .pod_anti_affinity
            .required
            .iter()
            .map(|t| t.topology_key),
    );
    for term in &affinity.pod_affinity.required {
        keys.insert(term.topology_key);
        if may_select(pod, term, pod) {
            fences.insert(first_pod_fence(pod, term));
        }
    }
    let own_spread = pod
        .topology_spread_constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule);
    keys.extend(own_spread.map(|c| c.topology_key));
    for other in others.filter(|o| o.uid != pod.uid) {
        for term in &other.affinity.pod_anti_affinity.required {
            if may_select(other, term, pod) {
                keys.insert(term.topology_key);
            }
        }
        // A pod another may be placed "first" beside: binding it ends that.
        for term in &other.affinity.pod_affinity.required {
            if may_select(other, term, other) && may_select(other, term, pod) {
                fences.insert(first_pod_fence(other, term));
            }
        }
        for constraint in &other.topology_spread_constraints {
            let selects = other.namespace == pod.namespace
                && constraint
                    .label_selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&pod.labels));
            if constraint.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule && selects {
                keys.insert(constraint.topology_key);
            }
        }
    }
    for key in keys.into_iter().filter(|k| k.as_str() != HOSTNAME) {
        if let Some(value) = node.labels.get(key) {
            fences.insert(domain_fence(key, value));
        }
    }
    fences.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::{InclusionPolicy, LabelSelector, Resources, TopologySpreadConstraint};

    fn node(name: &str, zone: &str) -> Node {
        let mut node = Node::new(name, Resources::new(1000, 1000));
        node.labels = gantry_api::Labels::from_strs([(ZONE, zone), (HOSTNAME, name)]);
        node
    }

    fn app(value: &str) -> LabelSelector {
        LabelSelector::from_pairs([(Sym::new("app"), Sym::new(value))])
    }

    fn term(key: &str, selector: LabelSelector) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(selector),
            namespaces: Vec::new(),
            namespace_selector: None,
            topology_key: Sym::new(key),
        }
    }

    fn pod(name: &str, label: &str) -> Pod {
        let mut pod = Pod::new("default", name).with_labels([("app", label)]);
        pod.uid = name.into();
        pod
    }

    const ZONE: &str = "topology.kubernetes.io/zone";

    /// (case, the pod, the others, how many fences beyond the node's).
    #[test]
    fn a_bind_takes_the_fences_of_every_constraint_reaching_it() {
        let zone_anti = |name: &str, label: &str, selects: &str| {
            let mut p = pod(name, label);
            p.affinity.pod_anti_affinity.required = vec![term(ZONE, app(selects))];
            p
        };
        let spread = |name: &str, label: &str, key: &str, how| {
            let mut p = pod(name, label);
            p.topology_spread_constraints = vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: Sym::new(key),
                when_unsatisfiable: how,
                label_selector: Some(app(label)),
                min_domains: None,
                node_affinity_policy: InclusionPolicy::Honor,
                node_taints_policy: InclusionPolicy::Ignore,
            }];
            p
        };
        let self_affine = |name: &str| {
            let mut p = pod(name, "db");
            p.affinity.pod_affinity.required = vec![term(ZONE, app("db"))];
            p
        };
        let mut other_namespace = zone_anti("o", "x", "web");
        other_namespace.namespace = Sym::new("elsewhere");
        let mut across_namespaces = other_namespace.clone();
        across_namespaces.affinity.pod_anti_affinity.required[0].namespace_selector =
            Some(LabelSelector::default());
        let cases: Vec<(&str, Pod, Vec<Pod>, usize)> = vec![
            ("no terms anywhere", pod("p", "web"), vec![], 0),
            (
                "own zone anti-affinity",
                zone_anti("p", "web", "web"),
                vec![],
                1,
            ),
            (
                "own hostname anti-affinity: the node's fence",
                {
                    let mut p = pod("p", "web");
                    p.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, app("web"))];
                    p
                },
                vec![],
                0,
            ),
            (
                "another pod's zone anti-affinity selects it",
                pod("p", "web"),
                vec![zone_anti("o", "x", "web")],
                1,
            ),
            (
                "another pod's anti-affinity selects others",
                pod("p", "web"),
                vec![zone_anti("o", "x", "db")],
                0,
            ),
            (
                "another namespace's term, scoped to its own",
                pod("p", "web"),
                vec![other_namespace],
                0,
            ),
            (
                "another namespace's term with a namespace selector",
                pod("p", "web"),
                vec![across_namespaces],
                1,
            ),
            (
                "own DoNotSchedule zone spread",
                spread("p", "web", ZONE, WhenUnsatisfiable::DoNotSchedule),
                vec![],
                1,
            ),
            (
                "own ScheduleAnyway spread",
                spread("p", "web", ZONE, WhenUnsatisfiable::ScheduleAnyway),
                vec![],
                0,
            ),
            (
                "another pod's zone spread counts it",
                pod("p", "web"),
                vec![spread("o", "web", ZONE, WhenUnsatisfiable::DoNotSchedule)],
                1,
            ),
            (
                "a spread over a key the node lacks",
                spread("p", "web", "rack", WhenUnsatisfiable::DoNotSchedule),
                vec![],
                0,
            ),
            (
                "its own term is not another's",
                zone_anti("p", "web", "web"),
                vec![zone_anti("p", "web", "web")],
                1,
            ),
            (
                "self-affinity: its zone and the first-pod fence",
                self_affine("p"),
                vec![],
                2,
            ),
        ];
        let on = node("n1", "a");
        for (case, pod, others, extra) in cases {
            let fences = fences_for(&pod, &on, others.iter());
            assert_eq!(fences.len(), 1 + extra, "{case}: {fences:?}");
            assert!(fences.contains(&node_fence(on.name)), "{case}");
            let mut sorted = fences.clone();
            sorted.sort();
            assert_eq!(fences, sorted, "{case}: taken in one order");
        }
    }

    #[test]
    fn binds_in_one_zone_share_its_fence_and_binds_in_two_do_not() {
        let mut p = pod("p", "web");
        p.affinity.pod_anti_affinity.required = vec![term(ZONE, app("web"))];
        let zone_fences = |n: &Node| {
            let node_fence = node_fence(n.name);
            fences_for(&p, n, std::iter::empty())
                .into_iter()
                .filter(|f| *f != node_fence)
                .collect::<Vec<_>>()
        };
        assert_eq!(zone_fences(&node("n1", "a")), zone_fences(&node("n2", "a")));
        assert_ne!(zone_fences(&node("n1", "a")), zone_fences(&node("n3", "b")));
    }

    #[test]
    fn a_node_name_too_long_for_a_lease_is_hashed() {
        assert_eq!(node_fence(Sym::new("n1")), "gantry-bind-n1");
        let long = "n".repeat(250);
        let name = node_fence(Sym::new(&long));
        assert!(
            name.len() <= 253 && name.starts_with("gantry-bind-"),
            "{name}"
        );
    }

    /// An independent statement of when one bind can change another's Filter verdict,
    /// from the constraints' definitions: the same node; a required anti-affinity term
    /// of either selecting the other with both nodes in one domain of its key; a
    /// DoNotSchedule constraint of either counting the other in one domain; a
    /// self-selecting affinity term of either (the first-pod rule) selecting the other.
    fn could_interact(p: &Pod, on_p: &Node, q: &Pod, on_q: &Node) -> bool {
        let same_domain = |key: Sym| {
            let (a, b) = (on_p.labels.get(key), on_q.labels.get(key));
            a.is_some() && a == b
        };
        let one_way = |a: &Pod, b: &Pod| {
            let anti = a.affinity.pod_anti_affinity.required.iter();
            let spread = a.topology_spread_constraints.iter();
            let first = a.affinity.pod_affinity.required.iter();
            anti.clone()
                .any(|t| may_select(a, t, b) && same_domain(t.topology_key))
                || spread.clone().any(|c| {
                    c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule
                        && a.namespace == b.namespace
                        && c.label_selector
                            .as_ref()
                            .is_some_and(|s| s.matches(&b.labels))
                        && same_domain(c.topology_key)
                })
                || first
                    .clone()
                    .any(|t| may_select(a, t, a) && may_select(a, t, b))
        };
        on_p.name == on_q.name || one_way(p, q) || one_way(q, p)
    }

    fn arbitrary_pod(name: &'static str) -> impl proptest::strategy::Strategy<Value = Pod> {
        use proptest::prelude::*;
        let keys = prop::sample::select(vec![ZONE, HOSTNAME, "rack"]);
        let apps = prop::sample::select(vec!["web", "db"]);
        let scope = prop::sample::select(vec![0u8, 1, 2]);
        let term = (keys.clone(), apps.clone(), scope).prop_map(|(key, selects, scope)| {
            let mut t = term(key, app(selects));
            match scope {
                1 => t.namespaces = vec![Sym::new("other")],
                2 => t.namespace_selector = Some(LabelSelector::default()),
                _ => {}
            }
            t
        });
        let spread = (keys, apps.clone(), any::<bool>()).prop_map(|(key, selects, hard)| {
            TopologySpreadConstraint {
                max_skew: 1,
                topology_key: Sym::new(key),
                when_unsatisfiable: if hard {
                    WhenUnsatisfiable::DoNotSchedule
                } else {
                    WhenUnsatisfiable::ScheduleAnyway
                },
                label_selector: Some(app(selects)),
                min_domains: None,
                node_affinity_policy: InclusionPolicy::Honor,
                node_taints_policy: InclusionPolicy::Ignore,
            }
        });
        (
            apps,
            any::<bool>(),
            prop::collection::vec(term.clone(), 0..2),
            prop::collection::vec(term, 0..2),
            prop::collection::vec(spread, 0..2),
        )
            .prop_map(move |(label, elsewhere, anti, affinity, spread)| {
                let mut p = pod(name, label);
                if elsewhere {
                    p.namespace = Sym::new("other");
                }
                p.affinity.pod_anti_affinity.required = anti;
                p.affinity.pod_affinity.required = affinity;
                p.topology_spread_constraints = spread;
                p
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// Two binds that could change each other's verdicts always share a fence, when
        /// each binder's cache knows the other pod (what remains is said in
        /// docs/shared-state.md).
        #[test]
        fn binds_that_could_interact_share_a_fence(
            p in arbitrary_pod("p"),
            q in arbitrary_pod("q"),
            (np, nq) in (0usize..4, 0usize..4),
        ) {
            // Four nodes: two zones, two racks across them.
            let node_at = |i: usize| {
                let mut n = node(&format!("n{i}"), ["a", "b"][i / 2]);
                let mut labels: Vec<(&str, String)> = n.labels.iter().map(|(k, v)| (k.as_str(), v.to_string())).collect();
                labels.push(("rack", ["r1", "r2"][i % 2].to_string()));
                n.labels = gantry_api::Labels::from_strs(labels.iter().map(|(k, v)| (*k, v.as_str())));
                n
            };
            let (on_p, on_q) = (node_at(np), node_at(nq));
            let fp = fences_for(&p, &on_p, std::iter::once(&q));
            let fq = fences_for(&q, &on_q, std::iter::once(&p));
            let shared = fp.iter().any(|f| fq.contains(f));
            proptest::prop_assert!(
                !could_interact(&p, &on_p, &q, &on_q) || shared,
                "no fence in common: {fp:?} / {fq:?}"
            );
        }
    }
}
