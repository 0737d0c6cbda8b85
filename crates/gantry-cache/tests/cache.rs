//! The cache's pod lifecycle, ghost nodes, and the central invariant: an incremental
//! snapshot equals one built from scratch after any sequence of events, and copies
//! exactly the nodes that changed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry_api::{LabelSelector, Node, Pod, PodAffinityTerm, Resources, Sym, Volume};
use gantry_cache::{Cache, CacheError, ClusterState, NamespaceScope, PodSelection, Snapshot};
use proptest::prelude::*;

fn node(name: &str, zone: usize) -> Arc<Node> {
    let zone = format!("zone-{zone}");
    Arc::new(
        Node::new(name, Resources::new(4000, 8 << 30))
            .with_labels([("topology.kubernetes.io/zone", zone.as_str())]),
    )
}

fn pod(name: &str, node: &str) -> Arc<Pod> {
    Arc::new(
        Pod::new("ns", name)
            .with_requests(100, 1 << 20)
            .on_node(node),
    )
}

#[test]
fn for_each_node_visits_live_nodes_only() {
    let cache = Cache::new();
    cache.add_node(node("n1", 0));
    cache.add_node(node("n2", 1));
    cache.add_pod(pod("p", "n2")).unwrap();
    // n2 becomes a ghost: its pod is still accounted, the node is gone.
    cache.remove_node(Sym::new("n2")).unwrap();
    let mut seen = Vec::new();
    cache.for_each_node(|info| seen.push(info.name().to_string()));
    assert_eq!(seen, ["n1"]);
}

/// Workload-aware preemption's trials: pods set aside and put back on a fork change what
/// the fork's snapshots see, never the cache forked nor its snapshots.
#[test]
fn a_fork_takes_pods_away_without_touching_the_cache_it_came_from() {
    let cache = Cache::new();
    cache.add_node(node("n1", 0));
    cache.add_node(node("n2", 0));
    let bound = pod("bound", "n1");
    let assumed = pod("assumed", "n2");
    cache.add_pod(bound.clone()).unwrap();
    cache.assume_pod(assumed.clone()).unwrap();
    let mut real = Snapshot::new();
    cache.update_snapshot(&mut real).unwrap();

    let fork = cache.fork();
    fork.set_aside(&bound).unwrap();
    fork.set_aside(&assumed).unwrap();
    assert!(matches!(
        fork.set_aside(&bound),
        Err(CacheError::PodNotFound { .. })
    ));
    let mut trial = Snapshot::new();
    fork.update_snapshot(&mut trial).unwrap();
    let pods_on =
        |s: &Snapshot| -> usize { (0..s.num_nodes()).map(|i| s.node_at(i).pods().len()).sum() };
    assert_eq!(pods_on(&trial), 0);
    fork.put_back(bound.clone()).unwrap();
    assert!(matches!(
        fork.put_back(bound.clone()),
        Err(CacheError::PodExists { .. })
    ));
    fork.update_snapshot(&mut trial).unwrap();
    assert_eq!(pods_on(&trial), 1);
    assert!(trial.same_state(&fork.full_snapshot()));

    // The cache forked from is as it was: its snapshot needs no change.
    let before = real.generation();
    cache.update_snapshot(&mut real).unwrap();
    assert_eq!(real.generation(), before);
    assert_eq!(pods_on(&real), 2);
    assert!(cache.is_assumed(&assumed.uid));
    assert!(real.same_state(&cache.full_snapshot()));
}

#[test]
fn assume_confirm_forget_and_errors() {
    let cache = Cache::new();
    cache.add_node(node("n1", 0));
    cache.add_node(node("n2", 0));
    let p = pod("p", "n1");
    cache.assume_pod(p.clone()).unwrap();
    assert!(cache.is_assumed(&p.uid));
    assert!(matches!(
        cache.assume_pod(p.clone()),
        Err(CacheError::PodExists { .. })
    ));
    assert!(matches!(
        cache.update_pod(p.clone()),
        Err(CacheError::PodAssumed { .. })
    ));

    // Confirmation on another node moves the pod.
    let landed = pod("p", "n2");
    cache.add_pod(landed.clone()).unwrap();
    assert!(!cache.is_assumed(&p.uid));
    let snap = cache.full_snapshot();
    assert_eq!(snap.node(Sym::new("n1")).unwrap().pods().len(), 0);
    assert_eq!(
        snap.node(Sym::new("n2")).unwrap().requested().milli_cpu,
        100
    );
    assert!(matches!(
        cache.add_pod(landed.clone()),
        Err(CacheError::PodExists { .. })
    ));
    assert!(matches!(
        cache.forget_pod(&landed),
        Err(CacheError::PodNotAssumed { .. })
    ));
    // A later try of p on n1 refused after the watch showed it bound to n2.
    assert!(matches!(
        cache.forget_pod(&pod("p", "n1")),
        Err(CacheError::BoundElsewhere { .. })
    ));

    let q = pod("q", "n1");
    assert!(matches!(
        cache.forget_pod(&q),
        Err(CacheError::PodNotFound { .. })
    ));
    cache.assume_pod(q.clone()).unwrap();
    assert!(matches!(
        cache.forget_pod(&pod("q", "n2")),
        Err(CacheError::NodeMismatch { .. })
    ));
    cache.forget_pod(&q).unwrap();
    assert_eq!(cache.num_pods(), 1);
    cache.finish_binding(&q.uid, Instant::now());
    assert!(
        !cache.is_assumed(&q.uid),
        "finishing the binding of a forgotten pod changes nothing"
    );
    assert!(matches!(
        cache.assume_pod(Arc::new(Pod::new("ns", "nowhere"))),
        Err(CacheError::PodWithoutNode { .. })
    ));
    assert!(matches!(
        cache.remove_node(Sym::new("n9")),
        Err(CacheError::NodeNotFound { .. })
    ));
}

#[test]
fn assumed_pods_never_expire_by_default_and_do_with_a_ttl() {
    let now = Instant::now();
    let later = now + Duration::from_secs(3600);
    let cache = Cache::new();
    cache.add_node(node("n1", 0));
    cache.assume_pod(pod("p", "n1")).unwrap();
    cache.finish_binding("ns/p", now);
    assert!(cache.cleanup_expired_assumed_pods(later).is_empty());
    assert!(cache.is_assumed("ns/p"));

    let cache = Cache::with_assumed_ttl(Duration::from_secs(30));
    cache.add_node(node("n1", 0));
    cache.assume_pod(pod("p", "n1")).unwrap();
    cache.assume_pod(pod("unfinished", "n1")).unwrap();
    assert!(
        cache.cleanup_expired_assumed_pods(later).is_empty(),
        "binding not finished: kept"
    );
    cache.finish_binding("ns/p", now);
    assert!(
        cache
            .cleanup_expired_assumed_pods(now + Duration::from_secs(29))
            .is_empty()
    );
    let expired = cache.cleanup_expired_assumed_pods(now + Duration::from_secs(30));
    assert_eq!(expired.len(), 1);
    assert_eq!(&*expired[0].uid, "ns/p");
    assert_eq!(
        cache
            .full_snapshot()
            .node(Sym::new("n1"))
            .unwrap()
            .pods()
            .len(),
        1
    );
}

#[test]
fn assumed_pods_expiring_together_come_back_in_uid_order() {
    let now = Instant::now();
    let cache = Cache::with_assumed_ttl(Duration::from_secs(1));
    cache.add_node(node("n1", 0));
    let names = ["m", "c", "x", "a", "q", "f", "z", "b"];
    for name in names {
        cache.assume_pod(pod(name, "n1")).unwrap();
        cache.finish_binding(&format!("ns/{name}"), now);
    }
    let expired = cache.cleanup_expired_assumed_pods(now + Duration::from_secs(1));
    let uids: Vec<&str> = expired.iter().map(|p| &*p.uid).collect();
    assert_eq!(
        uids,
        [
            "ns/a", "ns/b", "ns/c", "ns/f", "ns/m", "ns/q", "ns/x", "ns/z"
        ]
    );
    assert!(
        names
            .iter()
            .all(|n| cache.pod(&format!("ns/{n}")).is_none())
    );
}

#[test]
fn the_cache_answers_with_the_latest_version_of_a_pod() {
    let cache = Cache::new();
    cache.add_node(node("n1", 0));
    cache.add_node(node("n2", 1));
    cache.assume_pod(pod("p", "n1")).unwrap();
    // The add event confirms it on another node: that version is the cached one.
    cache.add_pod(pod("p", "n2")).unwrap();
    assert!(!cache.is_assumed("ns/p"));
    assert_eq!(cache.pod("ns/p").unwrap().node_name, Some(Sym::new("n2")));
    let relabelled = Arc::new(
        Pod::new("ns", "p")
            .with_labels([("app", "web")])
            .with_requests(100, 1 << 20)
            .on_node("n2"),
    );
    cache.update_pod(relabelled.clone()).unwrap();
    assert!(Arc::ptr_eq(&cache.pod("ns/p").unwrap(), &relabelled));
    cache.remove_pod(&relabelled).unwrap();
    assert!(cache.pod("ns/p").is_none());
}

#[test]
fn deleted_node_with_pods_is_a_ghost_until_they_go() {
    let cache = Cache::new();
    cache.add_node(node("n1", 0));
    cache.add_pod(pod("p", "n1")).unwrap();
    let mut snap = Snapshot::new();
    cache.update_snapshot(&mut snap).unwrap();
    cache.remove_node(Sym::new("n1")).unwrap();
    cache.update_snapshot(&mut snap).unwrap();
    assert_eq!(snap.num_nodes(), 0, "ghosts are not schedulable");
    assert_eq!(cache.num_nodes(), 0);
    // The pod's removal still finds it on the ghost.
    cache.remove_pod(&pod("p", "n1")).unwrap();
    assert_eq!(cache.num_pods(), 0);
    // A pod may arrive before its node does.
    cache.add_pod(pod("early", "n2")).unwrap();
    cache.update_snapshot(&mut snap).unwrap();
    assert_eq!(snap.num_nodes(), 0);
    cache.add_node(node("n2", 1));
    cache.update_snapshot(&mut snap).unwrap();
    assert_eq!(snap.node(Sym::new("n2")).unwrap().pods().len(), 1);
}

#[test]
fn recreated_node_gets_a_new_generation_and_fresh_state() {
    let cache = Cache::new();
    cache.add_node(node("n1", 0));
    cache.add_pod(pod("p", "n1")).unwrap();
    let mut snap = Snapshot::new();
    cache.update_snapshot(&mut snap).unwrap();
    let before = snap.node(Sym::new("n1")).unwrap().generation();
    cache.remove_pod(&pod("p", "n1")).unwrap();
    cache.remove_node(Sym::new("n1")).unwrap();
    cache.add_node(node("n1", 0));
    let update = cache.update_snapshot(&mut snap).unwrap();
    let after = snap.node(Sym::new("n1")).unwrap();
    assert!(after.generation() > before, "generations never repeat");
    assert_eq!(after.pods().len(), 0);
    assert_eq!(update.cloned, 1);
    assert!(snap.same_state(&cache.full_snapshot()));
}

#[test]
fn snapshot_copies_only_changed_nodes_and_relists_only_when_needed() {
    let cache = Cache::new();
    for i in 0..10 {
        cache.add_node(node(&format!("n{i}"), i % 3));
    }
    let mut snap = Snapshot::new();
    let first = cache.update_snapshot(&mut snap).unwrap();
    assert_eq!(first.cloned, 10);
    assert!(first.lists_rebuilt);
    assert_eq!(cache.update_snapshot(&mut snap).unwrap().cloned, 0);

    cache.add_pod(pod("a", "n3")).unwrap();
    cache.add_pod(pod("b", "n7")).unwrap();
    cache.add_pod(pod("c", "n3")).unwrap();
    let update = cache.update_snapshot(&mut snap).unwrap();
    assert_eq!(update.cloned, 2);
    assert!(
        !update.lists_rebuilt,
        "no node came or went, no affinity flipped"
    );

    let mut with_affinity = Pod::new("ns", "aff").with_requests(1, 1).on_node("n5");
    with_affinity
        .affinity
        .pod_affinity
        .required
        .push(PodAffinityTerm {
            label_selector: Some(LabelSelector::default()),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: Sym::new("kubernetes.io/hostname"),
        });
    cache.add_pod(Arc::new(with_affinity)).unwrap();
    let update = cache.update_snapshot(&mut snap).unwrap();
    assert!(
        !update.lists_rebuilt,
        "a node that starts holding affinity pods joins the sub-list in place"
    );
    assert_eq!(snap.with_affinity_pods().len(), 1);
    assert_eq!(
        snap.node_at(snap.with_affinity_pods()[0] as usize).name(),
        Sym::new("n5")
    );
    assert!(snap.same_state(&cache.full_snapshot()));
    cache.remove_pod(&Pod::new("ns", "aff")).unwrap();
    cache.update_snapshot(&mut snap).unwrap();
    assert!(
        snap.with_affinity_pods().is_empty(),
        "and leaves it in place"
    );
    // Zone-interleaved order.
    let names: Vec<&str> = snap.node_names().iter().map(|s| s.as_str()).collect();
    assert_eq!(&names[..4], ["n0", "n1", "n2", "n3"]);
}

// ---- The model-based property test ----

/// The consistency check: a node whose update never reached the recency list is missing
/// from the snapshot's list; the update rebuilds everything and fails that cycle.
#[test]
fn a_node_lost_from_the_recency_list_forces_a_full_rebuild_and_an_error() {
    let cache = Cache::new();
    cache.add_node(node("n1", 0));
    cache.add_node(node("n2", 1));
    let mut snap = Snapshot::new();
    cache.update_snapshot(&mut snap).unwrap();
    cache.add_node(node("n3", 2));
    cache.add_pod(pod("p", "n3")).unwrap();
    cache.lose_node_from_recency_list(Sym::new("n3"));
    let error = cache.update_snapshot(&mut snap).unwrap_err();
    assert_eq!((error.listed, error.in_tree), (2, 3));
    assert!(
        error
            .to_string()
            .starts_with("snapshot state is not consistent"),
        "{error}"
    );
    assert!(
        snap.same_state(&cache.full_snapshot()),
        "rebuilt from scratch"
    );
    assert_eq!(snap.node(Sym::new("n3")).unwrap().pods().len(), 1);
    cache
        .update_snapshot(&mut snap)
        .expect("the next cycle is fine again");
}

/// The claim self-check: references the nodes do not hold would drive a count negative;
/// the claims are recounted from the nodes, and the cycle goes on.
#[test]
fn claim_counts_that_go_negative_are_recounted_from_the_nodes() {
    let cache = Cache::new();
    cache.add_node(node("n1", 0));
    let mut with_claim = Pod::new("ns", "user")
        .with_requests(100, 1 << 20)
        .on_node("n1");
    with_claim.volumes.push(Volume::claim("data", "claim-0"));
    cache.add_pod(Arc::new(with_claim)).unwrap();
    let mut snap = Snapshot::new();
    cache.update_snapshot(&mut snap).unwrap();
    let (ns, claim) = (Sym::new("ns"), Sym::new("claim-0"));
    let stray = Sym::new("stray-claim");
    cache.corrupt_claim_delta(ns, stray, -1);
    cache.corrupt_claim_delta(ns, claim, -1);
    let update = cache.update_snapshot(&mut snap).unwrap();
    assert!(update.claims_recounted && update.lists_rebuilt);
    let key = |claim| gantry_cache::PvcKey {
        namespace: ns,
        claim,
    };
    assert!(snap.is_pvc_used(key(claim)), "the pod on n1 still uses it");
    assert!(!snap.is_pvc_used(key(stray)));
    assert!(snap.same_state(&cache.full_snapshot()));
}

#[derive(Debug, Clone)]
enum Op {
    AddNode { node: u8, zone: u8 },
    RemoveNode { node: u8 },
    AddPod { pod: u8, node: u8, kind: u8 },
    AssumePod { pod: u8, node: u8, kind: u8 },
    FinishBinding { pod: u8 },
    ForgetPod { pod: u8 },
    ConfirmAssumed { pod: u8, node: u8 },
    UpdatePod { pod: u8, kind: u8 },
    RemovePod { pod: u8 },
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Zones 3 to 5 are zones 0 to 2 in another pool: a node added again may change
        // labels while staying in its zone.
        3 => (0..8u8, 0..6u8).prop_map(|(node, zone)| Op::AddNode { node, zone }),
        1 => (0..8u8).prop_map(|node| Op::RemoveNode { node }),
        4 => (0..30u8, 0..8u8, 0..6u8).prop_map(|(pod, node, kind)| Op::AddPod { pod, node, kind }),
        3 => (0..30u8, 0..8u8, 0..6u8).prop_map(|(pod, node, kind)| Op::AssumePod { pod, node, kind }),
        1 => (0..30u8).prop_map(|pod| Op::FinishBinding { pod }),
        1 => (0..30u8).prop_map(|pod| Op::ForgetPod { pod }),
        2 => (0..30u8, 0..8u8).prop_map(|(pod, node)| Op::ConfirmAssumed { pod, node }),
        1 => (0..30u8, 0..6u8).prop_map(|(pod, kind)| Op::UpdatePod { pod, kind }),
        2 => (0..30u8).prop_map(|pod| Op::RemovePod { pod }),
        2 => Just(Op::Snapshot),
    ]
}

/// Pods of a few shapes: plain, with affinity (by hostname, which the nodes lack), with
/// required anti-affinity (by zone), with claims, being deleted; labelled by kind.
fn make_pod(id: u8, node: u8, kind: u8) -> Arc<Pod> {
    let app = ["a", "b"][usize::from(kind % 2)];
    let mut pod = Pod::new("ns", &format!("p{id}"))
        .with_requests(10 * (i64::from(kind) + 1), 1 << 20)
        .with_labels([("app", app)])
        .on_node(&format!("n{node}"));
    let term = |key: &str| PodAffinityTerm {
        label_selector: Some(LabelSelector::default()),
        namespaces: vec![],
        namespace_selector: None,
        topology_key: Sym::new(key),
    };
    match kind {
        1 => pod
            .affinity
            .pod_affinity
            .required
            .push(term("kubernetes.io/hostname")),
        2 => pod.affinity.pod_anti_affinity.required.push(term(ZONE)),
        3 | 4 => pod
            .volumes
            .push(Volume::claim("data", &format!("claim-{}", kind - 3))),
        5 => pod.terminating = true,
        _ => {}
    }
    Arc::new(pod)
}

const ZONE: &str = "topology.kubernetes.io/zone";

/// Selections the snapshot is asked to count per zone: one the label index answers, and
/// one of live pods only, which it cannot while a pod is being deleted.
fn selections() -> [PodSelection; 2] {
    [
        PodSelection {
            selector: LabelSelector::from_pairs([(Sym::new("app"), Sym::new("a"))]),
            namespaces: NamespaceScope::listed([Sym::new("ns")]),
            topology_key: Sym::new(ZONE),
            live_only: false,
        },
        PodSelection {
            selector: LabelSelector::default(),
            namespaces: NamespaceScope::All,
            topology_key: Sym::new(ZONE),
            live_only: true,
        },
    ]
}

#[derive(Default)]
struct Model {
    /// Live nodes and their zones.
    nodes: BTreeMap<u8, u8>,
    /// Pods: node, assumed, kind.
    pods: BTreeMap<u8, (u8, bool, u8)>,
    /// Nodes whose NodeInfo changed since the last snapshot.
    changed: BTreeSet<u8>,
}

impl Model {
    fn expected_requests(&self, node: u8) -> i64 {
        self.pods
            .values()
            .filter(|(n, _, _)| *n == node)
            .map(|(_, _, kind)| 10 * (i64::from(*kind) + 1))
            .sum()
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let cache = Cache::new();
    let mut model = Model::default();
    let mut snap = Snapshot::new();
    let mut asked = false;
    for op in ops {
        match op {
            Op::AddNode { node: n, zone } => {
                let pool = format!("pool-{}", zone / 3);
                let labelled = (*node(&format!("n{n}"), usize::from(zone % 3))).clone();
                cache.add_node(Arc::new(labelled.with_labels([("pool", pool.as_str())])));
                model.nodes.insert(n, zone);
                model.changed.insert(n);
            }
            Op::RemoveNode { node: n } => {
                let result = cache.remove_node(Sym::new(&format!("n{n}")));
                prop_assert_eq!(result.is_ok(), model.nodes.remove(&n).is_some());
                model.changed.insert(n);
            }
            Op::AddPod {
                pod: p,
                node: n,
                kind,
            } => {
                // Adding an assumed pod confirms it (possibly on another node).
                let previous = model.pods.get(&p).copied();
                let result = cache.add_pod(make_pod(p, n, kind));
                prop_assert_eq!(result.is_ok(), previous.is_none_or(|s| s.1));
                if result.is_ok() {
                    if let Some((old, _, _)) = previous {
                        model.changed.insert(old);
                    }
                    model.pods.insert(p, (n, false, kind));
                    model.changed.insert(n);
                }
            }
            Op::AssumePod {
                pod: p,
                node: n,
                kind,
            } => {
                let result = cache.assume_pod(make_pod(p, n, kind));
                prop_assert_eq!(result.is_ok(), !model.pods.contains_key(&p));
                if result.is_ok() {
                    model.pods.insert(p, (n, true, kind));
                    model.changed.insert(n);
                }
            }
            Op::FinishBinding { pod: p } => {
                cache.finish_binding(&format!("ns/p{p}"), Instant::now());
                prop_assert_eq!(
                    cache.is_assumed(&format!("ns/p{p}")),
                    model.pods.get(&p).is_some_and(|s| s.1)
                );
            }
            Op::ForgetPod { pod: p } => {
                let Some(&(n, assumed, kind)) = model.pods.get(&p) else {
                    prop_assert!(cache.forget_pod(&make_pod(p, 0, 0)).is_err());
                    continue;
                };
                let result = cache.forget_pod(&make_pod(p, n, kind));
                prop_assert_eq!(result.is_ok(), assumed);
                if assumed {
                    model.pods.remove(&p);
                    model.changed.insert(n);
                }
            }
            Op::ConfirmAssumed { pod: p, node: n } => {
                let Some(&(old, true, kind)) = model.pods.get(&p) else {
                    continue;
                };
                cache.add_pod(make_pod(p, n, kind)).unwrap();
                model.pods.insert(p, (n, false, kind));
                model.changed.insert(old);
                model.changed.insert(n);
            }
            Op::UpdatePod { pod: p, kind } => {
                let Some(&(n, assumed, _)) = model.pods.get(&p) else {
                    continue;
                };
                let result = cache.update_pod(make_pod(p, n, kind));
                prop_assert_eq!(result.is_ok(), !assumed);
                if !assumed {
                    model.pods.insert(p, (n, false, kind));
                    model.changed.insert(n);
                }
            }
            Op::RemovePod { pod: p } => {
                let Some(&(n, _, kind)) = model.pods.get(&p) else {
                    continue;
                };
                cache.remove_pod(&make_pod(p, n, kind)).unwrap();
                model.pods.remove(&p);
                model.changed.insert(n);
            }
            Op::Snapshot => {
                let update = cache.update_snapshot(&mut snap);
                let full = cache.full_snapshot();
                prop_assert!(
                    snap.same_state(&full),
                    "incremental snapshot differs from a full rebuild"
                );
                let Ok(update) = update else {
                    return Err(TestCaseError::fail(
                        "consistency fallback should not be needed",
                    ));
                };
                prop_assert!(!update.claims_recounted, "claim counts should add up");
                prop_assert!(
                    snap.topology_counts_agree(),
                    "topology counts differ from a count from scratch"
                );
                prop_assert_eq!(snap.selections_counted(), if asked { 2 } else { 0 });
                asked = true;
                for selection in selections() {
                    // A miss asks for the selection; the next update counts it.
                    snap.domain_counts(&selection);
                }
                let expected_cloned = model
                    .changed
                    .iter()
                    .filter(|n| model.nodes.contains_key(n))
                    .count();
                prop_assert_eq!(update.cloned, expected_cloned);
                model.changed.clear();
                let live: Vec<String> = model.nodes.keys().map(|n| format!("n{n}")).collect();
                let mut names: Vec<String> =
                    snap.node_names().iter().map(|s| s.to_string()).collect();
                names.sort();
                let mut live_sorted = live.clone();
                live_sorted.sort();
                prop_assert_eq!(names, live_sorted);
                for &n in model.nodes.keys() {
                    let info = snap.node(Sym::new(&format!("n{n}"))).unwrap();
                    prop_assert_eq!(info.requested().milli_cpu, model.expected_requests(n));
                }
                for claim in 0..2 {
                    let used = model.pods.values().any(|(_, _, k)| *k == 3 + claim);
                    let key = gantry_cache::PvcKey {
                        namespace: Sym::new("ns"),
                        claim: Sym::new(&format!("claim-{claim}")),
                    };
                    prop_assert_eq!(snap.is_pvc_used(key), used);
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn incremental_snapshot_equals_full_rebuild(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops)?;
    }
}

/// A node-local ResourceSlice replaced (here moved to another node) or deleted leaves
/// the node it was on, and only that node's slices are looked at: setting 100,000 slices
/// once looked through every node's for each (minutes at 100,000 nodes).
#[test]
fn a_slice_moved_or_deleted_leaves_its_node() {
    use gantry_api::dra::{ResourceSlice, SliceNodes};
    let slice = |name: &str, node: &str| {
        Arc::new(ResourceSlice {
            binding_conditions: false,
            name: Sym::new(name),
            driver: Sym::new("gpu.example.com"),
            pool: Sym::new(node),
            pool_generation: 1,
            pool_slice_count: 1,
            nodes: SliceNodes::Node(Sym::new(node)),
            devices: Vec::new().into(),
            shared_counters: Vec::new(),
        })
    };
    let cache = Cache::new();
    cache.add_node(node("a", 0));
    cache.add_node(node("b", 0));
    let slices_by_node = || {
        let mut seen = BTreeMap::new();
        cache.for_each_node(|info| {
            let names: Vec<String> = info
                .resource_slices()
                .iter()
                .map(|s| s.name.to_string())
                .collect();
            seen.insert(info.name().to_string(), names);
        });
        seen
    };
    cache.set_resource_slice(slice("s1", "a"));
    cache.set_resource_slice(slice("s2", "a"));
    assert_eq!(slices_by_node()["a"], ["s1", "s2"]);
    cache.set_resource_slice(slice("s1", "b"));
    assert_eq!(slices_by_node()["a"], ["s2"]);
    assert_eq!(slices_by_node()["b"], ["s1"]);
    cache.remove_resource_slice(Sym::new("s1"));
    cache.remove_resource_slice(Sym::new("unknown"));
    assert_eq!(slices_by_node()["b"], Vec::<String>::new());
    assert_eq!(slices_by_node()["a"], ["s2"]);
}
