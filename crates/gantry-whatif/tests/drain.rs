//! Scale-down simulation, as the Cluster Autoscaler's RemovalSimulator: drainability
//! rules, placing the pods elsewhere, the tainted ghost node that still counts as a
//! topology domain, sequential candidates, disruption budgets.

use std::sync::Arc;

use gantry_api::dra::DraObjects;
use gantry_api::labels::LabelSelector;
use gantry_api::{
    InclusionPolicy, Node, OwnerRef, Pod, ResourceName, Resources, Sym, TopologySpreadConstraint,
    WhenUnsatisfiable,
};
use gantry_framework::ApiObjects;
use gantry_framework::plugins::default_profile;
use gantry_whatif::drain::{BlockingReason, BudgetTracker, Unremovable, simulate_removals};
use gantry_whatif::{ClusterSnapshot, StoreKind};

fn node(name: &str, milli_cpu: i64) -> Node {
    let mut allocatable = Resources::new(milli_cpu, 8 << 30);
    allocatable.set(ResourceName::Pods, 110);
    Node::new(name, allocatable).with_labels([("kubernetes.io/hostname", name)])
}

fn owned(mut pod: Pod, kind: &str) -> Pod {
    pod.controller = Some(Arc::new(OwnerRef {
        api_version: Sym::new("apps/v1"),
        kind: Sym::new(kind),
        name: Arc::from("owner"),
        uid: Arc::from(format!("{kind}-owner")),
    }));
    pod
}

fn pod(name: &str, node: &str, milli_cpu: i64) -> Pod {
    owned(
        Pod::new("default", name)
            .with_requests(milli_cpu, 1 << 20)
            .on_node(node),
        "ReplicaSet",
    )
}

fn annotated(mut pod: Pod, key: &str, value: &str) -> Pod {
    pod.annotations = Arc::from([(Arc::from(key), Arc::from(value))]);
    pod
}

fn snapshot(kind: StoreKind, nodes: &[Node], pods: Vec<Pod>) -> ClusterSnapshot {
    let dra = DraObjects::default();
    let mut s = ClusterSnapshot::new(
        kind,
        default_profile("default-scheduler"),
        ApiObjects::default(),
        &dra,
    );
    let pods: Vec<Arc<Pod>> = pods.into_iter().map(Arc::new).collect();
    s.load(nodes, &pods, &dra).unwrap();
    s
}

const KINDS: [StoreKind; 2] = [StoreKind::Basic, StoreKind::Delta];

#[test]
fn replicated_pods_move_and_daemonset_and_mirror_pods_stay() {
    for kind in KINDS {
        let mut s = snapshot(
            kind,
            &[node("n1", 4000), node("n2", 4000)],
            vec![
                pod("web-0", "n1", 1000),
                owned(
                    Pod::new("default", "ds")
                        .with_requests(100, 1)
                        .on_node("n1"),
                    "DaemonSet",
                ),
                annotated(
                    Pod::new("kube-system", "static")
                        .with_requests(100, 1)
                        .on_node("n1"),
                    "kubernetes.io/config.mirror",
                    "x",
                ),
                annotated(
                    Pod::new("default", "bare").on_node("n1"),
                    "cluster-autoscaler.kubernetes.io/safe-to-evict",
                    "true",
                ),
            ],
        );
        let results =
            simulate_removals(&mut s, &[Sym::new("n1")], &mut BudgetTracker::new(&[])).unwrap();
        let r = &results[0];
        assert_eq!(r.unremovable, None, "{r:?}");
        let moved: Vec<String> = r
            .moves
            .iter()
            .map(|(p, n)| format!("{} {n}", p.name))
            .collect();
        assert_eq!(moved, ["web-0 n2", "bare n2"]);
        assert!(
            s.cluster().node(Sym::new("n1")).is_none(),
            "the removal is kept for later candidates"
        );
        assert_eq!(s.cluster().node(Sym::new("n2")).unwrap().pods().len(), 2);
    }
}

#[test]
fn blocking_pods_name_their_reason() {
    let cases = [
        (
            Pod::new("default", "bare").on_node("n1"),
            BlockingReason::NotReplicated,
            "default/bare is not replicated",
        ),
        (
            owned(
                Pod::new("kube-system", "dns")
                    .with_requests(100, 1)
                    .on_node("n1"),
                "ReplicaSet",
            ),
            BlockingReason::UnmovableKubeSystemPod,
            "non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: dns",
        ),
        (
            annotated(
                pod("keep", "n1", 100),
                "cluster-autoscaler.kubernetes.io/safe-to-evict",
                "false",
            ),
            BlockingReason::NotSafeToEvictAnnotation,
            "pod annotated as not safe to evict present: keep",
        ),
    ];
    for (blocker, reason, message) in cases {
        let mut s = snapshot(
            StoreKind::Delta,
            &[node("n1", 4000), node("n2", 4000)],
            vec![blocker],
        );
        let r = simulate_removals(&mut s, &[Sym::new("n1")], &mut BudgetTracker::new(&[]))
            .unwrap()
            .remove(0);
        assert_eq!(r.unremovable, Some(Unremovable::BlockedByPod));
        let blocking = r.blocking_pod.unwrap();
        assert_eq!(blocking.reason, reason);
        assert_eq!(blocking.message, message);
    }
}

#[test]
fn no_room_elsewhere_leaves_the_snapshot_untouched() {
    for kind in KINDS {
        let mut s = snapshot(
            kind,
            &[node("n1", 4000), node("n2", 2000)],
            vec![
                pod("a", "n1", 1500),
                pod("b", "n1", 1500),
                pod("c", "n2", 500),
            ],
        );
        let r = simulate_removals(&mut s, &[Sym::new("n1")], &mut BudgetTracker::new(&[]))
            .unwrap()
            .remove(0);
        assert_eq!(r.unremovable, Some(Unremovable::NoPlaceToMovePods));
        let (pod, why) = r.no_place.unwrap();
        assert_eq!(&*pod.name, "b");
        assert!(why.contains("Insufficient cpu"), "{why}");
        assert_eq!(
            s.cluster().node(Sym::new("n1")).unwrap().pods().len(),
            2,
            "reverted"
        );
        assert_eq!(s.cluster().node(Sym::new("n2")).unwrap().pods().len(), 1);
        assert!(
            s.cluster()
                .node(Sym::new("n1"))
                .unwrap()
                .node()
                .unwrap()
                .taints
                .is_empty()
        );
    }
}

#[test]
fn candidates_are_no_destinations_and_are_checked_in_turn() {
    let mut s = snapshot(
        StoreKind::Delta,
        &[node("n1", 2000), node("n2", 2000), node("n3", 2000)],
        vec![pod("a", "n1", 1000), pod("b", "n2", 1000)],
    );
    let results = simulate_removals(
        &mut s,
        &[Sym::new("n1"), Sym::new("n2"), Sym::new("gone")],
        &mut BudgetTracker::new(&[]),
    )
    .unwrap();
    assert_eq!(
        results[0].moves[0].1,
        Sym::new("n3"),
        "n2 is a candidate too"
    );
    assert_eq!(
        results[1].moves[0].1,
        Sym::new("n3"),
        "n3 still has room for b"
    );
    assert_eq!(results[2].unremovable, Some(Unremovable::NoNodeInfo));
}

/// The removed node stays as a tainted, pod-less domain: a pod spread by hostname with
/// maxSkew 1 cannot pile onto another node while the drained one counts as empty.
#[test]
fn the_ghost_node_still_counts_as_a_topology_domain() {
    let spread = |p: Pod| {
        let mut p = p;
        p.labels = gantry_api::Labels::from_strs([("app", "web")]);
        p.topology_spread_constraints
            .push(TopologySpreadConstraint {
                max_skew: 1,
                topology_key: Sym::new("kubernetes.io/hostname"),
                when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                label_selector: Some(LabelSelector::from_pairs([(
                    Sym::new("app"),
                    Sym::new("web"),
                )])),
                min_domains: None,
                node_affinity_policy: InclusionPolicy::Honor,
                node_taints_policy: InclusionPolicy::Ignore,
            });
        p
    };
    let mut s = snapshot(
        StoreKind::Delta,
        &[node("n1", 4000), node("n2", 4000), node("n3", 4000)],
        vec![
            spread(pod("w1", "n1", 100)),
            spread(pod("w2", "n2", 100)),
            spread(pod("w3", "n3", 100)),
        ],
    );
    let r = simulate_removals(&mut s, &[Sym::new("n3")], &mut BudgetTracker::new(&[]))
        .unwrap()
        .remove(0);
    assert_eq!(r.unremovable, Some(Unremovable::NoPlaceToMovePods), "{r:?}");
}

fn budget(allowed: i32) -> gantry_api::PodDisruptionBudget {
    let text = format!(
        "{{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {{name: web, namespace: default}},
          spec: {{selector: {{matchLabels: {{app: web}}}}}}, status: {{disruptionsAllowed: {allowed}}}}}"
    );
    gantry_api::decode::ClusterObjects::decode(&text, "pdb")
        .unwrap()
        .pdbs
        .remove(0)
}

fn web(name: &str, node: &str) -> Pod {
    let mut p = pod(name, node, 100);
    p.labels = gantry_api::Labels::from_strs([("app", "web")]);
    p
}

#[test]
fn disruption_budgets_are_used_up_by_earlier_candidates() {
    let mut s = snapshot(
        StoreKind::Delta,
        &[node("n1", 4000), node("n2", 4000), node("n3", 4000)],
        vec![web("w1", "n1"), web("w2", "n2")],
    );
    let mut budgets = BudgetTracker::new(&[budget(1)]);
    let results =
        simulate_removals(&mut s, &[Sym::new("n1"), Sym::new("n2")], &mut budgets).unwrap();
    assert_eq!(results[0].unremovable, None);
    assert_eq!(results[1].unremovable, Some(Unremovable::BlockedByPod));
    let blocking = results[1].blocking_pod.as_ref().unwrap();
    assert_eq!(blocking.reason, BlockingReason::NotEnoughPdb);
    assert_eq!(
        blocking.message,
        "not enough pod disruption budget to move default/w2"
    );
}

#[test]
fn a_budget_lets_a_kube_system_pod_move() {
    let mut dns = web("dns", "n1");
    dns.namespace = Sym::new("kube-system");
    dns.uid = Arc::from("kube-system/dns");
    let mut covering = budget(1);
    covering.namespace = Sym::new("kube-system");
    let mut s = snapshot(
        StoreKind::Delta,
        &[node("n1", 4000), node("n2", 4000)],
        vec![dns],
    );
    let r = simulate_removals(
        &mut s,
        &[Sym::new("n1")],
        &mut BudgetTracker::new(&[covering]),
    )
    .unwrap()
    .remove(0);
    assert_eq!(r.unremovable, None, "{r:?}");
}

/// Two pods of one node share a budget that allows one disruption: the node cannot go.
#[test]
fn pods_of_one_node_share_their_budget() {
    let mut s = snapshot(
        StoreKind::Delta,
        &[node("n1", 4000), node("n2", 4000)],
        vec![web("w1", "n1"), web("w2", "n1")],
    );
    let r = simulate_removals(
        &mut s,
        &[Sym::new("n1")],
        &mut BudgetTracker::new(&[budget(1)]),
    )
    .unwrap()
    .remove(0);
    assert_eq!(r.unremovable, Some(Unremovable::BlockedByPod));
    let blocking = r.blocking_pod.unwrap();
    assert_eq!(blocking.reason, BlockingReason::NotEnoughPdb);
    assert_eq!(&*blocking.pod.name, "w2");
    let r = simulate_removals(
        &mut s,
        &[Sym::new("n1")],
        &mut BudgetTracker::new(&[budget(2)]),
    )
    .unwrap()
    .remove(0);
    assert_eq!(r.unremovable, None);
}

/// A pod with these volumes (`local`: on the node's disk) and this value of the
/// safe-to-evict-local-volumes annotation.
fn with_volumes(volumes: &[(&str, bool)], listed: Option<&str>) -> Pod {
    let mut p = pod("bar", "n1", 100);
    for &(name, local) in volumes {
        p.volumes.push(gantry_api::Volume {
            claim_name: None,
            local,
            ..gantry_api::Volume::claim(name, "")
        });
    }
    match listed {
        Some(listed) => annotated(
            p,
            "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes",
            listed,
        ),
        None => p,
    }
}

#[test]
fn local_storage_blocks_unless_the_annotation_lists_every_local_volume() {
    // Upstream's localstorage TestDrain table (the rule alone decides there; here the
    // whole chain does, so the pod is replicated and has room on n2).
    let scratch = [("scratch", true)];
    let three = [
        ("scratch-1", true),
        ("scratch-2", true),
        ("scratch-3", true),
    ];
    let cases = [
        ("pod with EmptyDir", with_volumes(&scratch, None), true),
        (
            "... and SafeToEvictLocalVolumesKey annotation",
            with_volumes(&scratch, Some("scratch")),
            false,
        ),
        (
            "... and empty value",
            with_volumes(&scratch, Some("")),
            true,
        ),
        (
            "... and non-matching value",
            with_volumes(&[("scratch-1", true)], Some("scratch-2")),
            true,
        ),
        (
            "... with matching values",
            with_volumes(&three, Some("scratch-1,scratch-2,scratch-3")),
            false,
        ),
        (
            "... with non-matching values",
            with_volumes(&three, Some("scratch-1,scratch-2,scratch-5")),
            true,
        ),
        (
            "... with some matching values",
            with_volumes(&three, Some("scratch-1,scratch-2")),
            true,
        ),
        ("... empty values", with_volumes(&three, Some(",")), true),
        (
            "EmptyDir pod with PodSafeToEvict annotation",
            annotated(
                with_volumes(&scratch, None),
                "cluster-autoscaler.kubernetes.io/safe-to-evict",
                "true",
            ),
            false,
        ),
        // An emptyDir in memory, or a claim, is not local storage.
        (
            "memory or claim",
            with_volumes(&[("cache", false)], None),
            false,
        ),
    ];
    for (desc, pod, blocked) in cases {
        let mut s = snapshot(
            StoreKind::Delta,
            &[node("n1", 4000), node("n2", 4000)],
            vec![pod],
        );
        let r = simulate_removals(&mut s, &[Sym::new("n1")], &mut BudgetTracker::new(&[]))
            .unwrap()
            .remove(0);
        if blocked {
            assert_eq!(r.unremovable, Some(Unremovable::BlockedByPod), "{desc}");
            let blocking = r.blocking_pod.unwrap();
            assert_eq!(
                blocking.reason,
                BlockingReason::LocalStorageRequested,
                "{desc}"
            );
            assert_eq!(blocking.message, "pod with local storage present: bar");
        } else {
            assert_eq!(r.unremovable, None, "{desc}");
        }
    }
}
