//! The basic store (full copies) and the delta store (layers) must be indistinguishable:
//! random operation sequences, with forks inside forks, reverts and commits, are applied
//! to both, and after every step their node lists, NodeInfos, affinity sub-lists, claim
//! (PVC) usage, DRA claims and allocated devices must be identical, as must every error.

use std::sync::Arc;

use gantry_api::dra::{AllocatedDevice, Allocation, ClaimKey, ClaimSpec, DeviceId, ResourceClaim};
use gantry_api::labels::LabelSelector;
use gantry_api::{Node, Pod, PodAffinityTerm, Resources, Sym, Volume};
use gantry_cache::{ClusterState, DraState, NodeInfo, PvcKey};
use gantry_whatif::{BasicStore, DeltaStore, DraCatalog, SnapshotStore};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    AddNode(u8),
    RemoveNode(u8),
    AddPod { node: u8, pod: u8 },
    RemovePod { node: u8, pod: u8 },
    SetClaim { claim: u8, devices: Vec<u8> },
    RemoveClaim(u8),
    Fork,
    Revert,
    Commit,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..8).prop_map(Op::AddNode),
        1 => (0u8..8).prop_map(Op::RemoveNode),
        6 => (0u8..8, 0u8..24).prop_map(|(node, pod)| Op::AddPod { node, pod }),
        3 => (0u8..8, 0u8..24).prop_map(|(node, pod)| Op::RemovePod { node, pod }),
        2 => (0u8..4, proptest::collection::vec(0u8..6, 0..3))
            .prop_map(|(claim, devices)| Op::SetClaim { claim, devices }),
        1 => (0u8..4).prop_map(Op::RemoveClaim),
        2 => Just(Op::Fork),
        1 => Just(Op::Revert),
        1 => Just(Op::Commit),
    ]
}

fn node_name(i: u8) -> Sym {
    Sym::new(&format!("node-{i}"))
}

fn node(i: u8) -> NodeInfo {
    let zone = format!("zone-{}", i % 3);
    NodeInfo::new(Arc::new(
        Node::new(&format!("node-{i}"), Resources::new(4000, 1 << 34))
            .with_labels([("topology.kubernetes.io/zone", zone.as_str())]),
    ))
}

/// Pods share one `Arc` per index, so identity can be compared. Every third pod has
/// (anti-)affinity, every fourth uses a PVC.
fn pods() -> Vec<Arc<Pod>> {
    (0..24)
        .map(|i| {
            let mut pod =
                Pod::new("ns", &format!("pod-{i}")).with_requests(100 * (i % 5 + 1), 1 << 20);
            pod.labels =
                gantry_api::Labels::from_strs([("app", if i % 2 == 0 { "a" } else { "b" })]);
            let term = PodAffinityTerm {
                label_selector: Some(LabelSelector::from_pairs([(
                    Sym::new("app"),
                    Sym::new("a"),
                )])),
                namespaces: Vec::new(),
                namespace_selector: None,
                topology_key: Sym::new("kubernetes.io/hostname"),
            };
            if i % 3 == 0 {
                pod.affinity.pod_anti_affinity.required.push(term.clone());
            }
            if i % 6 == 0 {
                pod.affinity.pod_affinity.required.push(term);
            }
            if i % 4 == 0 {
                pod.volumes
                    .push(Volume::claim("data", &format!("pvc-{}", i % 8)));
            }
            Arc::new(pod)
        })
        .collect()
}

fn claim(i: u8, devices: &[u8]) -> Arc<ResourceClaim> {
    Arc::new(ResourceClaim {
        binding_status: None,
        namespace: Sym::new("ns"),
        name: Arc::from(format!("claim-{i}")),
        uid: Arc::from(format!("uid-{i}")),
        spec: Arc::new(ClaimSpec::default()),
        owner_pod: None,
        deleting: false,
        allocation: (!devices.is_empty()).then(|| {
            Arc::new(Allocation {
                devices: devices
                    .iter()
                    .map(|d| AllocatedDevice {
                        binding: None,
                        request: Arc::from("gpu"),
                        device: DeviceId {
                            driver: Sym::new("gpu.example.com"),
                            pool: Sym::new("pool"),
                            device: Sym::new(&format!("gpu-{d}")),
                        },
                        admin_access: false,
                        share: None,
                    })
                    .collect(),
                node_selector: None,
            })
        }),
        reserved_for: Vec::new(),
        extended_resource: false,
    })
}

fn apply(store: &mut dyn SnapshotStore, op: &Op, pods: &[Arc<Pod>]) -> Result<(), String> {
    let r = match op {
        Op::AddNode(i) => store.add_node(node(*i)),
        Op::RemoveNode(i) => store.remove_node(node_name(*i)),
        Op::AddPod { node, pod } => store.add_pod(pods[*pod as usize].clone(), node_name(*node)),
        Op::RemovePod { node, pod } => store
            .remove_pod(node_name(*node), &pods[*pod as usize].uid)
            .map(|_| ()),
        Op::SetClaim { claim: c, devices } => {
            store.set_claim(claim(*c, devices));
            Ok(())
        }
        Op::RemoveClaim(c) => {
            store.remove_claim(ClaimKey {
                namespace: Sym::new("ns"),
                name: Sym::new(&format!("claim-{c}")),
            });
            Ok(())
        }
        Op::Fork => {
            store.fork();
            Ok(())
        }
        Op::Revert => store.revert(),
        Op::Commit => store.commit(),
    };
    r.map_err(|e| e.to_string())
}

fn same_node(a: &NodeInfo, b: &NodeInfo) -> bool {
    let same_pods = |x: &[Arc<Pod>], y: &[Arc<Pod>]| {
        x.len() == y.len() && x.iter().zip(y).all(|(p, q)| Arc::ptr_eq(p, q))
    };
    a.name() == b.name()
        && same_pods(a.pods(), b.pods())
        && same_pods(a.pods_with_affinity(), b.pods_with_affinity())
        && same_pods(
            a.pods_with_required_anti_affinity(),
            b.pods_with_required_anti_affinity(),
        )
        && a.requested() == b.requested()
        && a.non_zero_requested() == b.non_zero_requested()
        && a.used_ports() == b.used_ports()
        && a.pvc_ref_counts().collect::<Vec<_>>() == b.pvc_ref_counts().collect::<Vec<_>>()
        && a.label_index() == b.label_index()
        && a.affinity_terms() == b.affinity_terms()
        && a.resource_slices() == b.resource_slices()
}

fn assert_same(basic: &BasicStore, delta: &DeltaStore, step: usize) {
    assert_eq!(basic.depth(), delta.depth(), "step {step}: fork depth");
    assert_eq!(
        basic.num_nodes(),
        delta.num_nodes(),
        "step {step}: node count"
    );
    for p in 0..basic.num_nodes() {
        let (a, b) = (basic.node_at(p), delta.node_at(p));
        assert!(same_node(a, b), "step {step}: node at {p}: {a:?} vs {b:?}");
        assert_eq!(basic.position(a.name()), Some(p));
        assert_eq!(delta.position(b.name()), Some(p));
    }
    for i in 0..8 {
        let name = node_name(i);
        assert_eq!(
            basic.node(name).is_some(),
            delta.node(name).is_some(),
            "step {step}: {name}"
        );
    }
    assert_eq!(
        basic.with_affinity_pods(),
        delta.with_affinity_pods(),
        "step {step}"
    );
    assert_eq!(
        basic.with_required_anti_affinity_pods(),
        delta.with_required_anti_affinity_pods(),
        "step {step}"
    );
    for i in 0..8 {
        let key = PvcKey {
            namespace: Sym::new("ns"),
            claim: Sym::new(&format!("pvc-{i}")),
        };
        assert_eq!(
            basic.is_pvc_used(key),
            delta.is_pvc_used(key),
            "step {step}: pvc-{i}"
        );
    }
    assert_eq!(basic.claims(), delta.claims(), "step {step}: claims");
    let mut a = basic.allocated_devices();
    let mut b = delta.allocated_devices();
    a.sort();
    b.sort();
    assert_eq!(a, b, "step {step}: allocated devices");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn basic_and_delta_stores_agree(ops in proptest::collection::vec(op(), 1..80)) {
        let pods = pods();
        let mut basic = BasicStore::new(Arc::new(DraCatalog::default()));
        let mut delta = DeltaStore::new(Arc::new(DraCatalog::default()));
        for (step, op) in ops.iter().enumerate() {
            let a = apply(&mut basic, op, &pods);
            let b = apply(&mut delta, op, &pods);
            prop_assert_eq!(&a, &b, "step {}: {:?}", step, op);
            assert_same(&basic, &delta, step);
        }
    }
}

/// The property above would not notice a store that ignored forks altogether if both
/// did: pin the semantics down on one sequence.
#[test]
fn revert_undoes_and_commit_keeps_nested_changes() {
    let pods = pods();
    for store in [
        &mut BasicStore::new(Arc::new(DraCatalog::default())) as &mut dyn SnapshotStore,
        &mut DeltaStore::new(Arc::new(DraCatalog::default())),
    ] {
        store.add_node(node(0)).unwrap();
        store.fork();
        store.add_pod(pods[1].clone(), node_name(0)).unwrap();
        store.fork();
        store.add_node(node(1)).unwrap();
        store.set_claim(claim(0, &[1]));
        assert_eq!(store.num_nodes(), 2);
        assert_eq!(store.allocated_devices().len(), 1);
        store.revert().unwrap();
        assert_eq!(store.num_nodes(), 1, "revert drops the inner fork's node");
        assert!(store.allocated_devices().is_empty(), "and its allocation");
        assert_eq!(
            store.node(node_name(0)).unwrap().pods().len(),
            1,
            "the outer fork's pod stays"
        );
        store.fork();
        store.add_pod(pods[2].clone(), node_name(0)).unwrap();
        store.commit().unwrap();
        assert_eq!(store.depth(), 1);
        store.revert().unwrap();
        assert_eq!(
            store.node(node_name(0)).unwrap().pods().len(),
            0,
            "reverting the outer fork drops both"
        );
        assert!(store.revert().is_err(), "no fork left");
    }
}

/// The merges a commit makes, each driven where a broken one (a change below overwritten
/// rather than added to) shows: two levels change the same count or claim, the inner one
/// is committed, and then a step that only the sum survives. The random sequences above
/// reach these by chance; these reach them every run.
#[test]
fn nested_commits_add_to_the_changes_below() {
    let node0 = Op::AddNode(0);
    let sequences: [(&str, Vec<Op>); 3] = [
        (
            // pods 0 and 8 both use pvc-0.
            "a PVC used in two levels",
            vec![
                node0.clone(),
                Op::Fork,
                Op::AddPod { node: 0, pod: 0 },
                Op::Fork,
                Op::AddPod { node: 0, pod: 8 },
                Op::Commit,
                Op::RemovePod { node: 0, pod: 0 },
            ],
        ),
        (
            "pods added in two levels",
            vec![
                node0.clone(),
                Op::Fork,
                Op::AddPod { node: 0, pod: 1 },
                Op::Fork,
                Op::AddPod { node: 0, pod: 2 },
                Op::Commit,
                Op::RemovePod { node: 0, pod: 1 },
            ],
        ),
        (
            // gpu-1 passes from claim 0 to claim 1 in the inner level: a net change of
            // zero there, on top of the outer level's one.
            "a device allocated in two levels",
            vec![
                Op::Fork,
                Op::SetClaim {
                    claim: 0,
                    devices: vec![1],
                },
                Op::Fork,
                Op::RemoveClaim(0),
                Op::SetClaim {
                    claim: 1,
                    devices: vec![1],
                },
                Op::Commit,
            ],
        ),
    ];
    let pods = pods();
    for (what, ops) in sequences {
        let mut basic = BasicStore::new(Arc::new(DraCatalog::default()));
        let mut delta = DeltaStore::new(Arc::new(DraCatalog::default()));
        for (step, op) in ops.iter().enumerate() {
            let a = apply(&mut basic, op, &pods);
            let b = apply(&mut delta, op, &pods);
            assert_eq!(a, b, "{what}: step {step}: {op:?}");
            assert_same(&basic, &delta, step);
        }
        assert!(
            basic.is_pvc_used(PvcKey {
                namespace: Sym::new("ns"),
                claim: Sym::new("pvc-0"),
            }) || what != "a PVC used in two levels",
            "{what}: pod 8 still uses pvc-0"
        );
    }
}
