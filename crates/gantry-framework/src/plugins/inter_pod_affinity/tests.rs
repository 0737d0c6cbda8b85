//! InterPodAffinity's unit tests: Filter and Score tables after upstream's.

use crate::NodeInfos;
use std::sync::Arc;

use super::filter::PreFilterState;
use super::score::TopologyScore;
use super::*;
use crate::{
    ApiObjects, Cluster, Code, CycleState, FilterPlugin, PreFilterPlugin, PreScorePlugin,
    ScorePlugin, Status,
};
use gantry_api::decode::Namespace;
use gantry_api::labels::{LabelSelector, Requirement, SelectorOp};
use gantry_api::{Labels, Node, Pod, PodAffinityTerm, Resources, Sym, WeightedPodAffinityTerm};
use gantry_cache::{Cache, ClusterState, NodeColumns, NodeInfo, PodsPerDomain, Snapshot};

fn req(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
    Requirement {
        key: Sym::new(key),
        op,
        values: values.iter().map(|v| Sym::new(v)).collect(),
    }
}

fn selector(requirements: Vec<Requirement>) -> LabelSelector {
    LabelSelector { requirements }
}

fn term(label_selector: LabelSelector, topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(label_selector),
        namespaces: Vec::new(),
        namespace_selector: None,
        topology_key: Sym::new(topology_key),
    }
}

fn term_in(key: &str, values: &[&str], topology_key: &str) -> PodAffinityTerm {
    term(
        selector(vec![req(key, SelectorOp::In, values)]),
        topology_key,
    )
}

fn weighted(weight: i32, term: PodAffinityTerm) -> WeightedPodAffinityTerm {
    WeightedPodAffinityTerm { weight, term }
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> Node {
    Node::new(name, Resources::new(1000, 1 << 30)).with_labels(labels.iter().copied())
}

fn pod(labels: &[(&str, &str)]) -> Pod {
    Pod::new("default", "incoming").with_labels(labels.iter().copied())
}

fn required(mut pod: Pod, affinity: Vec<PodAffinityTerm>, anti: Vec<PodAffinityTerm>) -> Pod {
    pod.affinity.pod_affinity.required = affinity;
    pod.affinity.pod_anti_affinity.required = anti;
    pod
}

fn preferred(
    mut pod: Pod,
    affinity: Vec<WeightedPodAffinityTerm>,
    anti: Vec<WeightedPodAffinityTerm>,
) -> Pod {
    pod.affinity.pod_affinity.preferred = affinity;
    pod.affinity.pod_anti_affinity.preferred = anti;
    pod
}

/// `pod` bound to `node`, with a name unique within the test.
fn on(node: &str, pod: Pod, index: usize) -> Pod {
    let mut pod = pod.on_node(node);
    pod.name = Arc::from(format!("existing-{index}"));
    pod.uid = Arc::from(format!("{}/existing-{index}", pod.namespace));
    pod
}

/// Existing pods given as (node, pod).
fn bound(pods: Vec<(&str, Pod)>) -> Vec<Pod> {
    pods.into_iter()
        .enumerate()
        .map(|(i, (node, pod))| on(node, pod, i))
        .collect()
}

fn cache(nodes: &[Node], pods: &[Pod]) -> Cache {
    let cache = Cache::new();
    for node in nodes {
        cache.add_node(Arc::new(node.clone()));
    }
    for pod in pods {
        cache
            .add_pod(Arc::new(pod.clone()))
            .expect("test pods are unique");
    }
    cache
}

/// A snapshot that has not been asked for any selection: the plugin counts node by node.
fn snapshot(nodes: &[Node], pods: &[Pod]) -> Snapshot {
    let mut snapshot = Snapshot::new();
    cache(nodes, pods).update_snapshot(&mut snapshot).unwrap();
    snapshot
}

/// A snapshot that keeps the domain counts of `incoming`'s selections: asked for by a
/// first PreFilter and PreScore, counted by the next update.
fn warm_snapshot(nodes: &[Node], pods: &[Pod], incoming: &Pod, objects: &ApiObjects) -> Snapshot {
    let cache = cache(nodes, pods);
    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot).unwrap();
    let cluster = Cluster {
        nodes: &snapshot,
        objects,
    };
    let plugin = InterPodAffinity::default();
    plugin.pre_filter(&mut CycleState::new(), incoming, cluster);
    let infos: Vec<&NodeInfo> = (0..snapshot.num_nodes())
        .map(|i| snapshot.node_at(i))
        .collect();
    plugin.pre_score(
        &mut CycleState::new(),
        incoming,
        &NodeInfos::given(&infos),
        cluster,
    );
    cache.update_snapshot(&mut snapshot).unwrap();
    // Every term with a label selector is asked for, but the affinity terms of a pod
    // with several (counted pod by pod).
    let a = &incoming.affinity;
    let affinity = &a.pod_affinity.required;
    let asked = (if affinity.len() == 1 {
        &affinity[..]
    } else {
        &[]
    })
    .iter()
    .chain(&a.pod_anti_affinity.required)
    .chain(a.pod_affinity.preferred.iter().map(|w| &w.term))
    .chain(a.pod_anti_affinity.preferred.iter().map(|w| &w.term));
    let selects = asked.filter(|t| t.label_selector.is_some()).count() > 0;
    assert_eq!(
        snapshot.selections_counted() > 0,
        selects,
        "the snapshot counts the selections asked for"
    );
    snapshot
}

fn team_namespaces() -> ApiObjects {
    let ns = |name: &str, team: &str| Namespace {
        name: Sym::new(name),
        labels: Labels::from_strs([("team", team)]),
    };
    ApiObjects::new(
        &[
            ns("subteam1.team1", "team1"),
            ns("subteam2.team1", "team1"),
            ns("subteam1.team2", "team2"),
            ns("subteam2.team2", "team2"),
        ],
        &[],
    )
}

fn pre_filter_state(pod: &Pod, snapshot: &Snapshot, objects: &ApiObjects) -> (CycleState, Status) {
    let mut state = CycleState::new();
    let cluster = Cluster {
        nodes: snapshot,
        objects,
    };
    let (result, status) = InterPodAffinity::default().pre_filter(&mut state, pod, cluster);
    assert_eq!(result, None);
    (state, status)
}

/// Runs PreFilter, then Filter on every node (in the given order), and returns the
/// verdicts as (code, message). Filter runs even after a Skip: it must then pass.
/// The same on a snapshot that keeps the pod's domain counts must agree.
fn filter_all(pod: &Pod, nodes: &[Node], pods: &[Pod], objects: &ApiObjects) -> Vec<Status> {
    let cold = filter_on(&snapshot(nodes, pods), pod, nodes, objects);
    let warm = filter_on(
        &warm_snapshot(nodes, pods, pod, objects),
        pod,
        nodes,
        objects,
    );
    assert_eq!(cold, warm, "counted node by node and from domain counts");
    cold
}

fn filter_on(snapshot: &Snapshot, pod: &Pod, nodes: &[Node], objects: &ApiObjects) -> Vec<Status> {
    let (state, status) = pre_filter_state(pod, snapshot, objects);
    assert!(status.is_success() || status.is_skip(), "{status:?}");
    let plugin = InterPodAffinity::default();
    let verdicts: Vec<Status> = nodes
        .iter()
        .map(|n| {
            let info = snapshot.node(n.name).expect("node is in the snapshot");
            plugin.filter(&state, pod, info)
        })
        .collect();
    if status.is_skip() {
        assert!(verdicts.iter().all(Status::is_success));
    }
    verdicts
}

const OK: Option<&str> = None;
const AFFINITY: Option<&str> = Some(REASON_AFFINITY_RULES_NOT_MATCH);
const ANTI: Option<&str> = Some(REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
const EXISTING: Option<&str> = Some(REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);

fn check(name: &str, got: &[Status], want: &[Option<&str>]) {
    assert_eq!(got.len(), want.len(), "{name}");
    for (status, want) in got.iter().zip(want) {
        match want {
            None => assert!(status.is_success(), "{name}: {status:?}"),
            Some(reason) => {
                let code = if *reason == REASON_AFFINITY_RULES_NOT_MATCH {
                    Code::UnschedulableAndUnresolvable
                } else {
                    Code::Unschedulable
                };
                assert_eq!(status.code(), code, "{name}");
                assert_eq!(status.message(), *reason, "{name}");
            }
        }
    }
}

#[test]
fn filter_single_node() {
    // Upstream's TestRequiredAffinitySingleNode, on machine1 {region: r1, zone: z11}.
    let security_scan = [("service", "securityscan")];
    let s1 = [("security", "S1")];
    let in_scan = || term_in("service", &["securityscan", "value2"], "region");
    let anti_virus = || term_in("service", &["antivirusscan", "value2"], "node");
    let scan_in_zone = || term_in("service", &["securityscan", "value2"], "zone");
    let plain_scan = || pod(&security_scan);
    let cases: Vec<(&str, Pod, Vec<Pod>, Option<&str>)> = vec![
        ("no affinity, no pods", pod(&[]), vec![], OK),
        (
            "affinity In matches the existing pod",
            required(pod(&s1), vec![in_scan()], vec![]),
            vec![plain_scan()],
            OK,
        ),
        (
            "affinity NotIn matches the existing pod",
            required(
                pod(&s1),
                vec![term(
                    selector(vec![req(
                        "service",
                        SelectorOp::NotIn,
                        &["securityscan3", "value3"],
                    )]),
                    "region",
                )],
                vec![],
            ),
            vec![plain_scan()],
            OK,
        ),
        (
            "selector does not match the existing pod",
            required(
                pod(&security_scan),
                vec![term_in("service", &["antivirusscan", "value2"], "region")],
                vec![],
            ),
            vec![plain_scan()],
            AFFINITY,
        ),
        (
            "requirements of one term are ANDed, terms too: all match",
            required(
                pod(&s1),
                vec![
                    term(
                        selector(vec![
                            req("service", SelectorOp::Exists, &[]),
                            req("wrongkey", SelectorOp::DoesNotExist, &[]),
                        ]),
                        "region",
                    ),
                    term(
                        selector(vec![
                            req("service", SelectorOp::In, &["securityscan"]),
                            req("service", SelectorOp::NotIn, &["WrongValue"]),
                        ]),
                        "region",
                    ),
                ],
                vec![],
            ),
            vec![plain_scan()],
            OK,
        ),
        (
            "requirements of one term are ANDed: one does not match",
            required(
                pod(&s1),
                vec![
                    term(
                        selector(vec![req("service", SelectorOp::Exists, &[])]),
                        "region",
                    ),
                    term(
                        selector(vec![
                            req("service", SelectorOp::In, &["securityscan2"]),
                            req("service", SelectorOp::NotIn, &["WrongValue"]),
                        ]),
                        "region",
                    ),
                ],
                vec![],
            ),
            vec![plain_scan()],
            AFFINITY,
        ),
        (
            "affinity and anti-affinity satisfied",
            required(pod(&s1), vec![in_scan()], vec![anti_virus()]),
            vec![plain_scan()],
            OK,
        ),
        (
            "affinity, anti-affinity and the existing pod's anti-affinity satisfied",
            required(pod(&s1), vec![in_scan()], vec![anti_virus()]),
            vec![required(plain_scan(), vec![], vec![anti_virus()])],
            OK,
        ),
        (
            "affinity satisfied, anti-affinity not",
            required(pod(&s1), vec![in_scan()], vec![scan_in_zone()]),
            vec![plain_scan()],
            ANTI,
        ),
        (
            "the existing pod's anti-affinity is not satisfied (symmetry)",
            required(pod(&security_scan), vec![in_scan()], vec![anti_virus()]),
            vec![required(plain_scan(), vec![], vec![scan_in_zone()])],
            EXISTING,
        ),
        (
            "existing anti-affinity applies to a pod without affinity",
            pod(&security_scan),
            vec![required(plain_scan(), vec![], vec![scan_in_zone()])],
            EXISTING,
        ),
        (
            "existing anti-affinity that the pod does not match",
            pod(&security_scan),
            vec![required(
                plain_scan(),
                vec![],
                vec![term(
                    selector(vec![req(
                        "service",
                        SelectorOp::NotIn,
                        &["securityscan", "value2"],
                    )]),
                    "zone",
                )],
            )],
            OK,
        ),
        (
            "affinity fails before anti-affinity is checked",
            required(
                pod(&s1),
                vec![term_in("service", &["nothing"], "region")],
                vec![scan_in_zone()],
            ),
            vec![plain_scan()],
            AFFINITY,
        ),
        (
            "an absent label selector matches no pod",
            required(
                pod(&s1),
                vec![PodAffinityTerm {
                    label_selector: None,
                    ..in_scan()
                }],
                vec![],
            ),
            vec![plain_scan()],
            AFFINITY,
        ),
    ];
    let machine1 = labelled("machine1", &[("region", "r1"), ("zone", "z11")]);
    let objects = ApiObjects::default();
    for (name, incoming, existing, want) in cases {
        let existing = bound(existing.into_iter().map(|p| ("machine1", p)).collect());
        let got = filter_all(
            &incoming,
            std::slice::from_ref(&machine1),
            &existing,
            &objects,
        );
        check(name, &got, &[want]);
    }
}

#[test]
fn filter_multiple_nodes() {
    // After upstream's TestRequiredAffinityMultipleNodes.
    let nodes = [
        labelled("n1", &[("region", "r1"), ("zone", "z11")]),
        labelled("n2", &[("region", "r1"), ("zone", "z12")]),
        labelled("n3", &[("region", "r2"), ("zone", "z21")]),
        labelled("n4", &[("zone", "z41")]),
    ];
    let foo = [("foo", "bar")];
    let objects = team_namespaces();
    let in_ns =
        |ns: &str, labels: &[(&str, &str)]| Pod::new(ns, "p").with_labels(labels.iter().copied());
    type Case<'a> = (&'a str, Pod, Vec<(&'a str, Pod)>, [Option<&'a str>; 4]);
    let cases: Vec<Case> = vec![
        (
            "nodes sharing the region of a matching pod fit; a node without the key never",
            required(pod(&[]), vec![term_in("foo", &["bar"], "region")], vec![]),
            vec![("n1", pod(&foo))],
            [OK, OK, AFFINITY, AFFINITY],
        ),
        (
            "first pod of a self-affine group: any node with the topology key",
            required(pod(&foo), vec![term_in("foo", &["bar"], "region")], vec![]),
            vec![],
            [OK, OK, OK, AFFINITY],
        ),
        (
            "self-affinity does not apply once a matching pod exists elsewhere",
            required(pod(&foo), vec![term_in("foo", &["bar"], "region")], vec![]),
            vec![("n3", pod(&foo))],
            [AFFINITY, AFFINITY, OK, AFFINITY],
        ),
        (
            "self-affinity needs the pod to match its own terms",
            required(pod(&[]), vec![term_in("foo", &["bar"], "region")], vec![]),
            vec![],
            [AFFINITY, AFFINITY, AFFINITY, AFFINITY],
        ),
        (
            "anti-affinity rejects the matching pod's zone only",
            required(pod(&[]), vec![], vec![term_in("foo", &["bar"], "zone")]),
            vec![("n1", pod(&foo))],
            [ANTI, OK, OK, OK],
        ),
        (
            "anti-affinity by region rejects both nodes of the region",
            required(pod(&[]), vec![], vec![term_in("foo", &["bar"], "region")]),
            vec![("n2", pod(&foo))],
            [ANTI, ANTI, OK, OK],
        ),
        (
            "existing pod's anti-affinity by region (symmetry)",
            pod(&foo),
            vec![(
                "n1",
                required(pod(&[]), vec![], vec![term_in("foo", &["bar"], "region")]),
            )],
            [EXISTING, EXISTING, OK, OK],
        ),
        (
            "pods of other namespaces do not count",
            required(pod(&[]), vec![term_in("foo", &["bar"], "region")], vec![]),
            vec![("n1", in_ns("other", &foo))],
            [AFFINITY, AFFINITY, AFFINITY, AFFINITY],
        ),
        (
            "listed namespaces count",
            required(
                pod(&[]),
                vec![PodAffinityTerm {
                    namespaces: vec![Sym::new("other")],
                    ..term_in("foo", &["bar"], "region")
                }],
                vec![],
            ),
            vec![("n1", in_ns("other", &foo))],
            [OK, OK, AFFINITY, AFFINITY],
        ),
        (
            "a namespace selector picks namespaces by label",
            required(
                pod(&[]),
                vec![PodAffinityTerm {
                    namespace_selector: Some(selector(vec![req(
                        "team",
                        SelectorOp::In,
                        &["team1"],
                    )])),
                    ..term_in("foo", &["bar"], "region")
                }],
                vec![],
            ),
            vec![
                ("n1", in_ns("subteam2.team1", &foo)),
                ("n3", in_ns("subteam1.team2", &foo)),
            ],
            [OK, OK, AFFINITY, AFFINITY],
        ),
        (
            "an empty namespace selector picks every namespace",
            required(
                pod(&[]),
                vec![],
                vec![PodAffinityTerm {
                    namespace_selector: Some(LabelSelector::default()),
                    ..term_in("foo", &["bar"], "zone")
                }],
            ),
            vec![("n2", in_ns("anywhere", &foo))],
            [OK, ANTI, OK, OK],
        ),
        (
            "an existing pod's namespace selector is matched against the pod's namespace",
            in_ns("subteam1.team1", &foo),
            vec![(
                "n3",
                required(
                    pod(&[]),
                    vec![],
                    vec![PodAffinityTerm {
                        namespace_selector: Some(selector(vec![req(
                            "team",
                            SelectorOp::In,
                            &["team1"],
                        )])),
                        ..term_in("foo", &["bar"], "region")
                    }],
                ),
            )],
            [OK, OK, EXISTING, OK],
        ),
    ];
    for (name, incoming, existing, want) in cases {
        let existing = bound(existing);
        let got = filter_all(&incoming, &nodes, &existing, &objects);
        check(name, &got, &want);
    }
}

#[test]
fn pre_filter_skips_unconstrained_pods() {
    let nodes = [labelled("n1", &[("zone", "a")])];
    let objects = ApiObjects::default();
    let existing = bound(vec![(
        "n1",
        required(pod(&[]), vec![], vec![term_in("app", &["web"], "zone")]),
    )]);
    let snap = snapshot(&nodes, &existing);
    let (_, status) = pre_filter_state(&pod(&[("app", "db")]), &snap, &objects);
    assert!(status.is_skip());
    // Matching an existing pod's anti-affinity makes Filter necessary.
    let (_, status) = pre_filter_state(&pod(&[("app", "web")]), &snap, &objects);
    assert!(status.is_success());
}

/// A namespace selector picks namespace objects, as upstream lists them, not the
/// namespaces that hold pods: a pod that preemption's what-if adds to an empty
/// namespace the selector picks counts.
#[test]
fn namespace_selectors_resolve_over_namespace_objects() {
    let nodes = [labelled("n1", &[("zone", "z1")])];
    let objects = team_namespaces();
    let incoming = required(
        Pod::new("subteam1.team1", "incoming"),
        vec![],
        vec![PodAffinityTerm {
            namespace_selector: Some(selector(vec![req("team", SelectorOp::In, &["team2"])])),
            ..term_in("app", &["db"], "zone")
        }],
    );
    let snap = snapshot(&nodes, &[]);
    let (mut state, status) = pre_filter_state(&incoming, &snap, &objects);
    assert!(status.is_success());
    let info = snap.node(Sym::new("n1")).unwrap();
    let plugin = InterPodAffinity::default();
    assert!(plugin.filter(&state, &incoming, info).is_success());
    let db = Arc::new(on(
        "n1",
        Pod::new("subteam2.team2", "db").with_labels([("app", "db")]),
        0,
    ));
    plugin.add_pod(&mut state, &incoming, &db, info);
    assert_eq!(
        plugin.filter(&state, &incoming, info).message(),
        REASON_ANTI_AFFINITY_RULES_NOT_MATCH
    );
}

#[test]
fn add_and_remove_pod_match_recomputing() {
    let nodes = [
        labelled("n1", &[("region", "r1"), ("zone", "z1")]),
        labelled("n2", &[("region", "r1"), ("zone", "z2")]),
        labelled("n3", &[("region", "r2"), ("zone", "z3")]),
    ];
    let objects = team_namespaces();
    let web = [("app", "web")];
    let incoming = required(
        Pod::new("subteam1.team1", "incoming").with_labels(web),
        vec![
            PodAffinityTerm {
                namespace_selector: Some(selector(vec![req("team", SelectorOp::In, &["team1"])])),
                ..term_in("app", &["web"], "region")
            },
            term(selector(vec![req("app", SelectorOp::Exists, &[])]), "zone"),
        ],
        vec![term_in("app", &["db"], "zone")],
    );
    let all = bound(vec![
        ("n1", Pod::new("subteam1.team1", "p").with_labels(web)),
        ("n1", Pod::new("subteam2.team1", "p").with_labels(web)),
        ("n2", Pod::new("subteam1.team2", "p").with_labels(web)),
        (
            "n2",
            Pod::new("subteam1.team1", "p").with_labels([("app", "db")]),
        ),
        (
            "n3",
            required(
                Pod::new("subteam1.team1", "p"),
                vec![],
                vec![term_in("app", &["web"], "region")],
            ),
        ),
        (
            "n3",
            required(
                Pod::new("subteam2.team2", "p").with_labels(web),
                vec![],
                vec![PodAffinityTerm {
                    namespace_selector: Some(LabelSelector::default()),
                    ..term_in("app", &["web"], "zone")
                }],
            ),
        ),
    ]);
    for warm in [false, true] {
        let snapshot = |pods: &[Pod]| match warm {
            false => snapshot(&nodes, pods),
            true => warm_snapshot(&nodes, pods, &incoming, &objects),
        };
        add_and_remove_match(&incoming, &all, snapshot, &objects);
    }
}

fn add_and_remove_match(
    incoming: &Pod,
    all: &[Pod],
    snapshot: impl Fn(&[Pod]) -> Snapshot,
    objects: &ApiObjects,
) {
    let plugin = InterPodAffinity::default();
    let full_snapshot = snapshot(all);
    let (full, _) = pre_filter_state(incoming, &full_snapshot, objects);
    let read = |state: &CycleState| {
        state
            .read::<PreFilterState>(PRE_FILTER_STATE_KEY)
            .cloned()
            .expect("PreFilter wrote its state")
    };
    assert!(!read(&full).affinity_counts.is_empty());
    assert!(!read(&full).anti_affinity_counts.is_empty());
    assert!(!read(&full).existing_anti_affinity_counts.is_empty());
    for (i, target) in all.iter().enumerate() {
        let rest: Vec<Pod> = all
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, p)| p.clone())
            .collect();
        let rest_snapshot = snapshot(&rest);
        let (without, _) = pre_filter_state(incoming, &rest_snapshot, objects);
        let node = target.node_name.expect("bound");
        let target = Arc::new(target.clone());

        let mut removed = full.clone();
        let info = full_snapshot.node(node).expect("node exists");
        plugin.remove_pod(&mut removed, incoming, &target, info);
        assert_eq!(read(&removed), read(&without), "removing pod {i}");

        let mut added = without.clone();
        let info = rest_snapshot.node(node).expect("node exists");
        plugin.add_pod(&mut added, incoming, &target, info);
        assert_eq!(read(&added), read(&full), "adding pod {i}");
    }
}

/// Runs PreScore over all nodes, Score on each (in the given order) and normalize;
/// `None` when PreScore skips.
fn scores(
    plugin: &InterPodAffinity,
    pod: &Pod,
    nodes: &[Node],
    pods: &[Pod],
    objects: &ApiObjects,
) -> Option<Vec<i64>> {
    let cold = scores_on(&snapshot(nodes, pods), plugin, pod, nodes, objects);
    let warm_snapshot = warm_snapshot(nodes, pods, pod, objects);
    let warm = scores_on(&warm_snapshot, plugin, pod, nodes, objects);
    assert_eq!(cold, warm, "counted node by node and from domain counts");
    cold
}

fn scores_on(
    snapshot: &Snapshot,
    plugin: &InterPodAffinity,
    pod: &Pod,
    nodes: &[Node],
    objects: &ApiObjects,
) -> Option<Vec<i64>> {
    let infos: Vec<&NodeInfo> = nodes
        .iter()
        .map(|n| snapshot.node(n.name).expect("node is in the snapshot"))
        .collect();
    let mut state = CycleState::new();
    let cluster = Cluster {
        nodes: snapshot,
        objects,
    };
    let status = plugin.pre_score(&mut state, pod, &NodeInfos::given(&infos), cluster);
    if status.is_skip() {
        return None;
    }
    assert!(status.is_success(), "{status:?}");
    let mut scores: Vec<i64> = infos
        .iter()
        .map(|info| plugin.score(&state, pod, info).expect("score"))
        .collect();
    let columns = NodeColumns::of(infos.iter().copied());
    let positions: Vec<usize> = (0..infos.len()).collect();
    let mut in_one_pass = vec![0; infos.len()];
    let answered = plugin
        .score_columns(&state, pod, &infos, &columns, &positions, &mut in_one_pass)
        .expect("score_columns");
    assert!(answered, "InterPodAffinity scores many nodes in one pass");
    assert_eq!(in_one_pass, scores, "scored in one pass and node by node");
    assert!(plugin.normalize(&state, pod, &mut scores).is_success());
    Some(scores)
}

#[test]
fn score_preferred_affinity() {
    // Upstream's TestPreferredAffinity.
    let china = [("region", "China")];
    let india = [("region", "India")];
    let az1 = [("az", "az1")];
    let az2 = [("az", "az2")];
    let china_az1 = [("region", "China"), ("az", "az1")];
    let s1 = || pod(&[("security", "S1")]);
    let s2 = || pod(&[("security", "S2")]);
    let stay_with_s1_in_region = |p: Pod| {
        preferred(
            p,
            vec![weighted(5, term_in("security", &["S1"], "region"))],
            vec![],
        )
    };
    let stay_with_s2_in_region = |p: Pod| {
        preferred(
            p,
            vec![weighted(6, term_in("security", &["S2"], "region"))],
            vec![],
        )
    };
    let away_from_s1_in_az = |p: Pod| {
        preferred(
            p,
            vec![],
            vec![weighted(5, term_in("security", &["S1"], "az"))],
        )
    };
    let away_from_s2_in_az = |p: Pod| {
        preferred(
            p,
            vec![],
            vec![weighted(5, term_in("security", &["S2"], "az"))],
        )
    };
    let stay_s1_region_away_s2_az = |p: Pod| {
        preferred(
            p,
            vec![weighted(8, term_in("security", &["S1"], "region"))],
            vec![weighted(5, term_in("security", &["S2"], "az"))],
        )
    };
    let affinity3 = |p: Pod| {
        preferred(
            p,
            vec![
                weighted(
                    8,
                    term(
                        selector(vec![
                            req("security", SelectorOp::NotIn, &["S1"]),
                            req("security", SelectorOp::In, &["S2"]),
                        ]),
                        "region",
                    ),
                ),
                weighted(
                    2,
                    term(
                        selector(vec![
                            req("security", SelectorOp::Exists, &[]),
                            req("wrongkey", SelectorOp::DoesNotExist, &[]),
                        ]),
                        "region",
                    ),
                ),
            ],
            vec![],
        )
    };
    let namespace_selected = |p: Pod, anti: bool| {
        let t = weighted(
            5,
            PodAffinityTerm {
                namespaces: vec![Sym::new("subteam2.team2")],
                namespace_selector: Some(selector(vec![req("team", SelectorOp::In, &["team1"])])),
                ..term_in("security", &["S1"], "region")
            },
        );
        if anti {
            preferred(p, vec![], vec![t])
        } else {
            preferred(p, vec![t], vec![])
        }
    };
    let in_team1 = |mut p: Pod| {
        p.namespace = Sym::new("subteam1.team1");
        p
    };
    let ns = |name: &str, labels: &[(&str, &str)]| labelled(name, labels);

    type Case<'a> = (
        &'a str,
        Pod,
        Vec<(&'a str, Pod)>,
        Vec<Node>,
        Option<Vec<i64>>,
    );
    let cases: Vec<Case> = vec![
        (
            "no affinity anywhere: skipped",
            s1(),
            vec![],
            vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
            None,
        ),
        (
            "matching pods in the topology score high",
            stay_with_s1_in_region(s1()),
            vec![("node1", s1()), ("node2", s2()), ("node3", s1())],
            vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
            Some(vec![100, 0, 0]),
        ),
        (
            "nodes sharing the topology value score the same",
            stay_with_s1_in_region(pod(&[])),
            vec![("node1", s1())],
            vec![
                ns("node1", &china),
                ns("node2", &china_az1),
                ns("node3", &india),
            ],
            Some(vec![100, 100, 0]),
        ),
        (
            "the region with more matches scores high, the lowest scores 0",
            stay_with_s2_in_region(s1()),
            vec![
                ("node1", s2()),
                ("node1", s2()),
                ("node2", s2()),
                ("node3", s2()),
                ("node4", s2()),
                ("node5", s2()),
            ],
            vec![
                ns("node1", &china),
                ns("node2", &india),
                ns("node3", &china),
                ns("node4", &china),
                ns("node5", &india),
            ],
            Some(vec![100, 0, 100, 100, 0]),
        ),
        (
            "different operators, some terms failing",
            affinity3(s1()),
            vec![("node1", s1()), ("node2", s2()), ("node3", s1())],
            vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
            Some(vec![20, 100, 0]),
        ),
        (
            "existing pods' preferred affinity (symmetry)",
            s2(),
            vec![
                ("node1", stay_with_s1_in_region(s1())),
                ("node2", stay_with_s2_in_region(s2())),
            ],
            vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
            Some(vec![0, 100, 0]),
        ),
        (
            "existing pods' preferred affinity with a namespace selector",
            in_team1(s1()),
            vec![
                ("node1", namespace_selected(s1(), false)),
                ("node2", stay_with_s2_in_region(s2())),
            ],
            vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
            Some(vec![100, 0, 0]),
        ),
        (
            "existing pods' preferred anti-affinity with a namespace selector",
            in_team1(s1()),
            vec![
                ("node1", namespace_selected(s1(), true)),
                ("node2", stay_with_s2_in_region(s2())),
            ],
            vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
            Some(vec![0, 100, 100]),
        ),
        (
            "anti-affinity: the node with a matching pod scores low",
            away_from_s1_in_az(s1()),
            vec![("node1", s1()), ("node2", s2())],
            vec![ns("node1", &az1), ns("node2", &china)],
            Some(vec![0, 100]),
        ),
        (
            "existing pods' preferred anti-affinity (symmetry)",
            s2(),
            vec![
                ("node1", away_from_s2_in_az(s1())),
                ("node2", away_from_s1_in_az(s2())),
            ],
            vec![ns("node1", &az1), ns("node2", &az2)],
            Some(vec![0, 100]),
        ),
        (
            "affinity, anti-affinity and both symmetries together",
            stay_s1_region_away_s2_az(s1()),
            vec![
                ("node1", s1()),
                ("node2", s2()),
                ("node3", stay_s1_region_away_s2_az(pod(&[]))),
                ("node4", away_from_s1_in_az(pod(&[]))),
            ],
            vec![
                ns("node1", &china),
                ns("node2", &az1),
                ns("node3", &india),
                ns("node4", &az2),
            ],
            Some(vec![100, 0, 100, 0]),
        ),
        (
            "nodes with both keys count each key at its own value",
            stay_s1_region_away_s2_az(s1()),
            vec![("node1", s1()), ("node2", s2())],
            vec![
                ns("node1", &[("region", "China"), ("az", "az1")]),
                ns("node2", &[("region", "China"), ("az", "az2")]),
                ns("node3", &[("region", "India"), ("az", "az1")]),
            ],
            // Raw 8 (S1 in China), 8 - 5 (S2 in az2) and 0.
            Some(vec![100, 37, 0]),
        ),
        (
            "equal raw scores normalize to 0",
            s1(),
            vec![
                ("node1", s1()),
                ("node2", stay_s1_region_away_s2_az(pod(&[]))),
            ],
            vec![ns("node1", &china), ns("node2", &china)],
            Some(vec![0, 0]),
        ),
    ];
    let objects = team_namespaces();
    let plugin = InterPodAffinity::default();
    for (name, incoming, existing, nodes, want) in cases {
        let existing = bound(existing);
        let got = scores(&plugin, &incoming, &nodes, &existing, &objects);
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn score_hard_pod_affinity_weight() {
    // Upstream's TestPreferredAffinityWithHardPodAffinitySymmetricWeight.
    let hard_affinity = |p: Pod| {
        required(
            p,
            vec![
                term_in("security", &["S1", "value2"], "region"),
                term(
                    selector(vec![
                        req("security", SelectorOp::Exists, &[]),
                        req("wrongkey", SelectorOp::DoesNotExist, &[]),
                    ]),
                    "region",
                ),
            ],
            vec![],
        )
    };
    let nodes = [
        labelled("node1", &[("region", "China")]),
        labelled("node2", &[("region", "India")]),
        labelled("node3", &[("az", "az1")]),
    ];
    let existing = bound(vec![
        ("node1", hard_affinity(pod(&[("security", "S1")]))),
        ("node2", hard_affinity(pod(&[("security", "S2")]))),
    ]);
    let incoming = pod(&[("security", "S1")]);
    let objects = ApiObjects::default();
    let weighted = |w| InterPodAffinity {
        hard_pod_affinity_weight: w,
    };
    assert_eq!(
        scores(&weighted(1), &incoming, &nodes, &existing, &objects),
        Some(vec![100, 100, 0])
    );
    assert_eq!(
        scores(&weighted(0), &incoming, &nodes, &existing, &objects),
        None,
        "weight 0 ignores required terms of existing pods"
    );
}

/// Counts of two keys, two of each, whose values overlap: a node sums each count at its
/// own value of the count's key, and nothing for a key it lacks.
#[test]
fn a_node_scores_each_count_at_its_value_of_the_counts_key() {
    let counts = |pairs: &[(&str, i64)]| {
        Arc::new(PodsPerDomain::from_iter(
            pairs.iter().map(|&(value, n)| (Sym::new(value), n)),
        ))
    };
    let (zone, rack) = (Sym::new("zone"), Sym::new("rack"));
    let mut topology = TopologyScore::default();
    topology.share(rack, 5, &counts(&[("a", 1), ("b", 2)]));
    topology.share(zone, 1, &counts(&[("a", 3), ("b", 4)]));
    topology.share(rack, -2, &counts(&[("a", 10)]));
    topology.share(zone, 100, &counts(&[("b", 1)]));
    let mut state = CycleState::new();
    state.write(PRE_SCORE_STATE_KEY, topology.grouped());
    let node = |labels: &[(&str, &str)]| {
        let node = Node::new("n", Resources::default()).with_labels(labels.iter().copied());
        NodeInfo::new(Arc::new(node))
    };
    let plugin = InterPodAffinity::default();
    let score = |labels: &[(&str, &str)]| plugin.score(&state, &pod(&[]), &node(labels)).unwrap();
    // rack a: 5*1 - 2*10; zone b: 1*4 + 100*1.
    assert_eq!(score(&[("rack", "a"), ("zone", "b")]), 5 - 20 + 4 + 100);
    // rack b: 5*2; zone a: 1*3.
    assert_eq!(score(&[("rack", "b"), ("zone", "a")]), 10 + 3);
    assert_eq!(score(&[("zone", "a")]), 3);
    assert_eq!(score(&[("rack", "c")]), 0);
}

#[test]
fn normalize_spans_negative_scores() {
    let mut state = CycleState::new();
    let mut topology = TopologyScore::default();
    topology.share(
        Sym::new("zone"),
        -3,
        &Arc::new(PodsPerDomain::from_iter([(Sym::new("a"), 1)])),
    );
    state.write(PRE_SCORE_STATE_KEY, topology);
    let mut scores = [-3, 0, 4, 1];
    let status = InterPodAffinity::default().normalize(&state, &pod(&[]), &mut scores);
    assert!(status.is_success());
    // 100 * (0 - -3) / 7 = 42.86, 100 * 4 / 7 = 57.14: truncated.
    assert_eq!(scores, [0, 42, 100, 57]);
}
