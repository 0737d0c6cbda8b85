//! VolumeBinding's unit tests: the plugin's table after upstream's.

use gantry_api::storage::{ClaimPhase, VolumeBindingMode};
use gantry_api::{PersistentVolume, PersistentVolumeClaim, Pod, StorageClass, Sym};

use crate::{
    Cluster, CycleState, FilterPlugin, PreFilterPlugin, PreFilterResult, ReservePlugin, Status,
};

use super::testing::*;
use super::*;
use crate::plugins::testing::{node, node_info};
use crate::{ApiObjects, Code};
use gantry_api::Node;
use gantry_api::storage::{AccessMode, ClaimRef};

const GIB: i64 = 1 << 30;

fn storage_classes() -> Vec<StorageClass> {
    vec![
        class("immediate-sc", VolumeBindingMode::Immediate, ""),
        class("wait-sc", VolumeBindingMode::WaitForFirstConsumer, ""),
        class("wait-hdd-sc", VolumeBindingMode::WaitForFirstConsumer, ""),
    ]
}

fn local(name: &str, class: &str, gib: i64, host: &str) -> PersistentVolume {
    PersistentVolume {
        capacity: gib * GIB,
        node_affinity: affinity(&[("kubernetes.io/hostname", &[host])]),
        ..volume(name, Some(class))
    }
}

fn sized(mut claim: PersistentVolumeClaim, gib: i64) -> PersistentVolumeClaim {
    claim.requested = gib * GIB;
    claim
}

struct Case {
    name: &'static str,
    pod: Pod,
    nodes: Vec<Node>,
    claims: Vec<PersistentVolumeClaim>,
    volumes: Vec<PersistentVolume>,
    classes: Vec<StorageClass>,
    /// PreFilter's code and message.
    pre_filter: (Code, String),
    /// Per node, Filter's reasons (empty: fits); checked when PreFilter succeeded.
    filter: Vec<Vec<&'static str>>,
}

fn ok() -> (Code, String) {
    (Code::Success, String::new())
}

fn unresolvable(message: &str) -> (Code, String) {
    (Code::UnschedulableAndUnresolvable, message.to_string())
}

fn run(case: Case) {
    let mut objects = ApiObjects::default();
    objects.set_storage(&case.volumes, &case.claims, &case.classes, &[]);
    let snapshot = snapshot(&case.nodes, &[]);
    let mut state = CycleState::new();
    let cluster = Cluster {
        nodes: &snapshot,
        objects: &objects,
    };
    let (result, status) = v1_28().pre_filter(&mut state, &case.pod, cluster);
    assert_eq!(result, None, "{}", case.name);
    let got = (status.code(), status.message());
    assert_eq!(got, case.pre_filter, "{}: PreFilter", case.name);
    if !status.is_success() {
        return;
    }
    for (node, want) in case.nodes.iter().zip(&case.filter) {
        let status = v1_28().filter(&state, &case.pod, &node_info(node, &[]));
        let reasons: Vec<&str> = status.reasons().collect();
        assert_eq!(&reasons, want, "{}: Filter on {}", case.name, node.name);
        if !want.is_empty() {
            assert_eq!(status.code(), Code::UnschedulableAndUnresolvable);
        }
    }
}

fn base(name: &'static str, pod: Pod) -> Case {
    Case {
        name,
        pod,
        nodes: vec![node("node-a", 1000, GIB)],
        claims: vec![],
        volumes: vec![],
        classes: storage_classes(),
        pre_filter: ok(),
        filter: vec![vec![]],
    }
}

/// Upstream's VolumeBinding and NodeVolumeLimits count an ephemeral volume's claim;
/// VolumeZone, VolumeRestrictions and the nodes' claim counts do not.
#[test]
fn ephemeral_volumes_are_claims_only_where_upstream_counts_them() {
    let mut objects = ApiObjects::default();
    let claims = [claim("data", None), claim("pod-a-scratch", None)];
    objects.set_storage(&[], &claims, &[], &[]);
    let mut pod = pod_with_claims("pod-a", &["data"]);
    pod.volumes.push(gantry_api::Volume {
        ephemeral: true,
        ..gantry_api::Volume::claim("scratch", "pod-a-scratch")
    });
    let storage = objects.storage();
    let all: Vec<(&str, bool)> = storage
        .claims_of(&pod)
        .map(|(volume, claim)| (&*volume.name, claim.is_some()))
        .collect();
    assert_eq!(all, [("data", true), ("scratch", true)]);
    let persistent: Vec<&str> = storage.persistent_claims_of(&pod).map(|(n, _)| n).collect();
    assert_eq!(persistent, ["data"]);
    let counted = node_info(&node("n", 1000, GIB), &[pod.on_node("n")]);
    let counted: Vec<&str> = counted
        .pvc_ref_counts()
        .map(|(k, _)| k.claim.as_str())
        .collect();
    assert_eq!(counted, ["data"]);
}

/// Upstream's TestVolumeBinding, Filter verdicts (its scoring cases run with the
/// VolumeCapacityPriority gate, off by default).
#[test]
fn volume_binding_table() {
    let pod_a = || pod_with_claims("pod-a", &["pvc-a"]);
    let ephemeral_pod = || {
        let mut pod = Pod::new("default", "pod-a");
        pod.volumes.push(gantry_api::Volume {
            ephemeral: true,
            ..gantry_api::Volume::claim("data", "pod-a-data")
        });
        pod
    };
    let hosts = || {
        vec![
            node("node-a", 1000, GIB),
            node("node-b", 1000, GIB),
            node("node-c", 1000, GIB),
        ]
    };
    let cases = vec![
        Case {
            pre_filter: (Code::Skip, String::new()),
            ..base("pod has not pvcs", Pod::new("default", "pod-a"))
        },
        Case {
            claims: vec![bound_claim("pvc-a", "wait-sc", "pv-a")],
            volumes: vec![volume("pv-a", Some("wait-sc"))],
            ..base("all bound", pod_a())
        },
        Case {
            pre_filter: unresolvable(r#"persistentvolumeclaim "pvc-a" not found"#),
            ..base("PVC does not exist", pod_a())
        },
        Case {
            claims: vec![bound_claim("pvc-a", "wait-sc", "pv-a")],
            pre_filter: unresolvable(r#"persistentvolumeclaim "pvc-b" not found"#),
            ..base(
                "Part of PVCs do not exist",
                pod_with_claims("pod-a", &["pvc-a", "pvc-b"]),
            )
        },
        Case {
            claims: vec![claim("pvc-a", Some("immediate-sc"))],
            pre_filter: unresolvable(REASON_UNBOUND_IMMEDIATE),
            ..base("immediate claims not bound", pod_a())
        },
        Case {
            claims: vec![claim("pvc-a", Some("wait-sc"))],
            filter: vec![vec![REASON_BIND_CONFLICT]],
            ..base("unbound claims no matches", pod_a())
        },
        Case {
            nodes: vec![node("node-a", 1000, GIB).with_labels([("foo", "barbar")])],
            claims: vec![
                bound_claim("pvc-a", "wait-sc", "pv-a"),
                claim("pvc-b", Some("wait-sc")),
            ],
            volumes: vec![PersistentVolume {
                node_affinity: affinity(&[("foo", &["bar"])]),
                ..volume("pv-a", Some("wait-sc"))
            }],
            filter: vec![vec![REASON_NODE_CONFLICT, REASON_BIND_CONFLICT]],
            ..base(
                "bound and unbound unsatisfied",
                pod_with_claims("pod-a", &["pvc-a", "pvc-b"]),
            )
        },
        Case {
            claims: vec![bound_claim("pvc-a", "wait-sc", "pv-a")],
            filter: vec![vec![REASON_PV_NOT_EXIST]],
            ..base("pv not found", pod_a())
        },
        // Generic ephemeral volumes: the claim `<pod>-<volume>` the ephemeral volume
        // controller creates, owned by the pod (upstream's podHasPVCs).
        Case {
            pre_filter: unresolvable(
                r#"waiting for ephemeral volume controller to create the persistentvolumeclaim "pod-a-data""#,
            ),
            ..base("ephemeral volume not created yet", ephemeral_pod())
        },
        Case {
            claims: vec![bound_claim("pod-a-data", "wait-sc", "pv-a")],
            volumes: vec![volume("pv-a", Some("wait-sc"))],
            pre_filter: unresolvable(
                "PVC default/pod-a-data was not created for pod default/pod-a (pod is not owner)",
            ),
            ..base(
                "ephemeral volume's claim not owned by the pod",
                ephemeral_pod(),
            )
        },
        Case {
            claims: vec![PersistentVolumeClaim {
                controller_uid: Some(ephemeral_pod().uid),
                ..bound_claim("pod-a-data", "wait-sc", "pv-a")
            }],
            volumes: vec![volume("pv-a", Some("wait-sc"))],
            ..base("ephemeral volume bound", ephemeral_pod())
        },
        Case {
            claims: vec![PersistentVolumeClaim {
                phase: ClaimPhase::Lost,
                ..bound_claim("pvc-a", "wait-sc", "pv-a")
            }],
            pre_filter: unresolvable(
                r#"persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a""#,
            ),
            ..base("pv not found claim lost", pod_a())
        },
        Case {
            nodes: hosts(),
            claims: vec![sized(claim("pvc-a", Some("wait-sc")), 50)],
            volumes: vec![
                local("pv-a-0", "wait-sc", 200, "node-a"),
                local("pv-a-1", "wait-sc", 200, "node-a"),
                local("pv-b-0", "wait-sc", 100, "node-b"),
                local("pv-b-1", "wait-sc", 100, "node-b"),
            ],
            filter: vec![vec![], vec![], vec![REASON_BIND_CONFLICT]],
            ..base("local volumes with close capacity are preferred", pod_a())
        },
        Case {
            nodes: hosts(),
            claims: vec![
                sized(claim("pvc-0", Some("wait-sc")), 50),
                sized(claim("pvc-1", Some("wait-hdd-sc")), 100),
            ],
            volumes: vec![
                local("pv-a-0", "wait-sc", 200, "node-a"),
                local("pv-a-1", "wait-sc", 200, "node-a"),
                local("pv-a-2", "wait-hdd-sc", 200, "node-a"),
                local("pv-a-3", "wait-hdd-sc", 200, "node-a"),
                local("pv-b-0", "wait-sc", 100, "node-b"),
                local("pv-b-1", "wait-sc", 100, "node-b"),
                local("pv-b-2", "wait-hdd-sc", 100, "node-b"),
                local("pv-b-3", "wait-hdd-sc", 100, "node-b"),
            ],
            filter: vec![vec![], vec![], vec![REASON_BIND_CONFLICT]],
            ..base(
                "local volumes with close capacity are preferred (multiple pvcs)",
                pod_with_claims("pod-a", &["pvc-0", "pvc-1"]),
            )
        },
    ];
    for case in cases {
        run(case);
    }
}

/// Cases of upstream's binder tests: provisioning, reserved volumes, access modes, and
/// one volume never serving two claims.
#[test]
fn unbound_claims_match_or_provision() {
    let zone = |name: &str, zone: &str| {
        node(name, 1000, GIB).with_labels([("topology.kubernetes.io/zone", zone)])
    };
    let mut provisioned = class("csi-sc", VolumeBindingMode::WaitForFirstConsumer, "csi");
    provisioned.allowed_topologies = affinity(&[("topology.kubernetes.io/zone", &["z1"])]);
    let local_sc = class(
        "local-sc",
        VolumeBindingMode::WaitForFirstConsumer,
        gantry_api::storage::NO_PROVISIONER,
    );
    let mut classes = storage_classes();
    classes.extend([provisioned, local_sc]);
    let rwx = |mut c: PersistentVolumeClaim| {
        c.access_modes = smallvec::smallvec![AccessMode::ReadWriteMany];
        c
    };
    let cases = vec![
        Case {
            nodes: vec![zone("n1", "z1"), zone("n2", "z2")],
            claims: vec![claim("pvc-a", Some("csi-sc"))],
            filter: vec![vec![], vec![REASON_BIND_CONFLICT]],
            ..base(
                "provisioning within the class's allowed topologies",
                pod_with_claims("p", &["pvc-a"]),
            )
        },
        Case {
            claims: vec![claim("pvc-a", Some("local-sc"))],
            filter: vec![vec![REASON_BIND_CONFLICT]],
            ..base(
                "no-provisioner class cannot provision",
                pod_with_claims("p", &["pvc-a"]),
            )
        },
        Case {
            nodes: vec![node("node-a", 1000, GIB), node("node-b", 1000, GIB)],
            claims: vec![claim("pvc-a", Some("local-sc"))],
            volumes: vec![
                local("small-free", "local-sc", 1, "node-b"),
                PersistentVolume {
                    claim_ref: Some(ClaimRef {
                        namespace: Sym::new("default"),
                        name: Sym::new("pvc-a"),
                    }),
                    ..local("reserved", "local-sc", 5, "node-a")
                },
            ],
            filter: vec![vec![], vec![REASON_BIND_CONFLICT]],
            ..base(
                "a volume reserved for the claim decides alone",
                pod_with_claims("p", &["pvc-a"]),
            )
        },
        Case {
            claims: vec![rwx(claim("pvc-a", Some("local-sc")))],
            volumes: vec![PersistentVolume {
                access_modes: smallvec::smallvec![AccessMode::ReadWriteOnce],
                ..local("rwo", "local-sc", 1, "node-a")
            }],
            filter: vec![vec![REASON_BIND_CONFLICT]],
            ..base(
                "access modes must be offered",
                pod_with_claims("p", &["pvc-a"]),
            )
        },
        Case {
            claims: vec![
                claim("pvc-a", Some("local-sc")),
                claim("pvc-b", Some("local-sc")),
            ],
            volumes: vec![local("only", "local-sc", 1, "node-a")],
            filter: vec![vec![REASON_BIND_CONFLICT]],
            ..base(
                "one volume cannot serve two claims",
                pod_with_claims("p", &["pvc-a", "pvc-b"]),
            )
        },
        Case {
            claims: vec![PersistentVolumeClaim {
                volume_name: Some(Sym::new("pv-a")),
                ..claim("pvc-a", Some("wait-sc"))
            }],
            pre_filter: unresolvable(REASON_UNBOUND_IMMEDIATE),
            ..base(
                "prebound claims count as immediate",
                pod_with_claims("p", &["pvc-a"]),
            )
        },
    ];
    for mut case in cases {
        case.classes = classes.clone();
        run(case);
    }
}

fn pre_filter(
    plugin: &VolumeBinding,
    state: &mut CycleState,
    pod: &Pod,
    objects: &ApiObjects,
    nodes: &[Node],
) -> (PreFilterResult, Status) {
    let snapshot = snapshot(nodes, &[]);
    let cluster = Cluster {
        nodes: &snapshot,
        objects,
    };
    plugin.pre_filter(state, pod, cluster)
}

/// The plugin as v1.28 runs it (the table's messages are v1.28's).
fn v1_28() -> VolumeBinding {
    VolumeBinding::new(true, false)
}

/// Upstream v1.28's `GetEligibleNodes` (after its binder tests): the hostnames bound
/// local volumes name narrow the nodes; volumes naming disjoint hosts leave none; a
/// volume without a hostname term, or a missing one, does not narrow.
#[test]
fn bound_local_volumes_narrow_the_nodes() {
    let hosts = [
        node("node-a", 1000, GIB),
        node("node-b", 1000, GIB),
        node("node-c", 1000, GIB),
    ];
    let two_hosts = PersistentVolume {
        node_affinity: affinity(&[("kubernetes.io/hostname", &["node-a", "node-b"])]),
        ..volume("pv-ab", Some("wait-sc"))
    };
    let zonal = PersistentVolume {
        node_affinity: affinity(&[("topology.kubernetes.io/zone", &["z1"])]),
        ..volume("pv-zone", Some("wait-sc"))
    };
    let volumes = vec![
        local("pv-a", "wait-sc", 1, "node-a"),
        local("pv-b", "wait-sc", 1, "node-b"),
        two_hosts,
        zonal,
    ];
    let claims = vec![
        bound_claim("on-a", "wait-sc", "pv-a"),
        bound_claim("on-b", "wait-sc", "pv-b"),
        bound_claim("on-ab", "wait-sc", "pv-ab"),
        bound_claim("zonal", "wait-sc", "pv-zone"),
        bound_claim("missing", "wait-sc", "pv-gone"),
    ];
    let mut objects = ApiObjects::default();
    objects.set_storage(&volumes, &claims, &storage_classes(), &[]);
    let narrowed = |claims: &[&str]| {
        let pod = pod_with_claims("p", claims);
        let (result, status) = pre_filter(&v1_28(), &mut CycleState::new(), &pod, &objects, &hosts);
        assert!(status.is_success(), "{claims:?}: {}", status.message());
        // From v1.32 nothing narrows.
        let (newer, _) = pre_filter(
            &VolumeBinding::default(),
            &mut CycleState::new(),
            &pod,
            &objects,
            &hosts,
        );
        assert_eq!(newer, None, "{claims:?}");
        result.map(|r| r.iter().map(|n| n.as_str()).collect::<Vec<_>>())
    };
    assert_eq!(narrowed(&["on-a"]), Some(vec!["node-a"]));
    assert_eq!(narrowed(&["on-ab"]), Some(vec!["node-a", "node-b"]));
    assert_eq!(
        narrowed(&["on-ab", "on-b"]),
        Some(vec!["node-b"]),
        "intersection"
    );
    assert_eq!(
        narrowed(&["on-a", "on-b"]),
        Some(vec![]),
        "disjoint: no node"
    );
    assert_eq!(narrowed(&["zonal"]), None, "no hostname term");
    assert_eq!(narrowed(&["zonal", "on-a"]), Some(vec!["node-a"]));
    assert_eq!(
        narrowed(&["on-a", "missing"]),
        None,
        "a missing volume: all nodes"
    );
}

/// A claim marked Lost is rejected at PreFilter; a claim bound to a volume the input
/// lacks passes PreFilter and fails Filter on every node, as in v1.28.
#[test]
fn claims_bound_to_missing_volumes() {
    let mut objects = ApiObjects::default();
    let lost = PersistentVolumeClaim {
        phase: ClaimPhase::Lost,
        ..bound_claim("lost", "wait-sc", "pv-gone")
    };
    let dangling = bound_claim("dangling", "wait-sc", "pv-gone");
    objects.set_storage(&[], &[lost, dangling], &storage_classes(), &[]);
    let nodes = [node("node-a", 1000, GIB)];
    let (_, status) = pre_filter(
        &VolumeBinding::default(),
        &mut CycleState::new(),
        &pod_with_claims("p", &["lost"]),
        &objects,
        &nodes,
    );
    assert_eq!(
        (status.code(), status.message()),
        (
            Code::UnschedulableAndUnresolvable,
            r#"persistentvolumeclaim "lost" bound to non-existent persistentvolume "pv-gone""#
                .to_string()
        )
    );
    let plugin = VolumeBinding::default();
    let pod = pod_with_claims("p", &["dangling"]);
    let mut state = CycleState::new();
    let (_, status) = pre_filter(&plugin, &mut state, &pod, &objects, &nodes);
    assert!(status.is_success());
    let verdict = plugin.filter(&state, &pod, &node_info(&nodes[0], &[]));
    assert_eq!(verdict.message(), REASON_PV_NOT_EXIST);
}

/// Upstream's assume cache: once a pod is reserved with a static volume for its
/// WaitForFirstConsumer claim, the next pod's claim cannot have it; a pod sharing the
/// claim gets the same volume; Unreserve gives the volume back.
#[test]
fn a_reserved_volume_is_taken_until_unreserved() {
    let nodes = [node("node-a", 1000, GIB), node("node-b", 1000, GIB)];
    let mut objects = ApiObjects::default();
    objects.set_storage(
        &[local("only-pv", "wait-sc", 1, "node-a")],
        &[
            claim("first", Some("wait-sc")),
            claim("second", Some("wait-sc")),
        ],
        &storage_classes(),
        &[],
    );
    let plugin = VolumeBinding::default();
    let verdicts = |pod: &Pod| -> (CycleState, Vec<bool>) {
        let mut state = CycleState::new();
        let (_, status) = pre_filter(&plugin, &mut state, pod, &objects, &nodes);
        assert!(status.is_success());
        let fits = nodes
            .iter()
            .map(|n| plugin.filter(&state, pod, &node_info(n, &[])).is_success())
            .collect();
        (state, fits)
    };
    let first = pod_with_claims("first-user", &["first"]);
    let (mut state, fits) = verdicts(&first);
    assert_eq!(fits, [true, false]);
    let reserved = plugin.reserve(&mut state, &first, &node_info(&nodes[0], &[]));
    assert!(reserved.is_success());

    let second = pod_with_claims("second-user", &["second"]);
    assert_eq!(verdicts(&second).1, [false, false], "the volume is taken");
    let sharer = pod_with_claims("sharer", &["first"]);
    assert_eq!(
        verdicts(&sharer).1,
        [true, false],
        "same claim, same volume"
    );

    plugin.unreserve(&mut state, &first, nodes[0].name);
    assert_eq!(verdicts(&second).1, [true, false], "given back");
}

/// A claim provisioned for a reserved pod is pinned to that pod's node (upstream's
/// selected-node annotation on the assumed claim).
#[test]
fn a_claim_provisioned_for_a_reserved_pod_stays_on_its_node() {
    let nodes = [node("node-a", 1000, GIB), node("node-b", 1000, GIB)];
    let mut objects = ApiObjects::default();
    let mut classes = storage_classes();
    classes.push(class(
        "csi-sc",
        VolumeBindingMode::WaitForFirstConsumer,
        "csi",
    ));
    objects.set_storage(&[], &[claim("data", Some("csi-sc"))], &classes, &[]);
    let plugin = VolumeBinding::default();
    let pod = pod_with_claims("writer", &["data"]);
    reserved_on(&plugin, &objects, &nodes, &pod, 1);
    let reader = pod_with_claims("reader", &["data"]);
    let mut reader_state = CycleState::new();
    assert!(
        pre_filter(&plugin, &mut reader_state, &reader, &objects, &nodes)
            .1
            .is_success()
    );
    let fits: Vec<bool> = nodes
        .iter()
        .map(|n| {
            plugin
                .filter(&reader_state, &reader, &node_info(n, &[]))
                .is_success()
        })
        .collect();
    assert_eq!(fits, [false, true]);
}

/// The cycle state of `pod` after PreFilter over `nodes` and Reserve on `nodes[chosen]`
/// (both must pass).
fn reserved_on(
    plugin: &VolumeBinding,
    objects: &ApiObjects,
    nodes: &[Node],
    pod: &Pod,
    chosen: usize,
) -> CycleState {
    let mut state = CycleState::new();
    assert!(
        pre_filter(plugin, &mut state, pod, objects, nodes)
            .1
            .is_success()
    );
    let node = node_info(&nodes[chosen], &[]);
    assert!(plugin.reserve(&mut state, pod, &node).is_success());
    state
}

/// Filter's reasons for `pod` on `node` alone (PreFilter must pass).
fn reasons_on(plugin: &VolumeBinding, objects: &ApiObjects, node: &Node, pod: &Pod) -> Vec<String> {
    let mut state = CycleState::new();
    let nodes = std::slice::from_ref(node);
    assert!(
        pre_filter(plugin, &mut state, pod, objects, nodes)
            .1
            .is_success()
    );
    let status = plugin.filter(&state, pod, &node_info(node, &[]));
    status.reasons().map(str::to_string).collect()
}

/// A CSIStorageCapacity of `class` on the node labelled `nodeKey: node` (`None`: every
/// node), of `capacity` and `maximum` bytes: upstream's `makeCapacity`.
fn capacity(
    class: &str,
    node: Option<&str>,
    capacity: Option<i64>,
    maximum: Option<i64>,
) -> gantry_api::StorageCapacity {
    let pairs = node.map(|n| (Sym::new("nodeKey"), Sym::new(n)));
    gantry_api::StorageCapacity {
        key: "default/net".into(),
        storage_class: Sym::new(class),
        node_topology: Some(gantry_api::LabelSelector::from_pairs(pairs)),
        capacity,
        maximum_volume_size: maximum,
    }
}

/// Upstream's `TestCapacity` (`binder_test.go`): a claim of 1Gi to provision through
/// `test-provisioner` on node1, against the CSIStorageCapacities of each row; each row
/// with the driver opting in (`storageCapacity: true`) and not.
#[test]
fn storage_capacity_as_upstreams_test_capacity() {
    const MI: i64 = 1 << 20;
    let wait = "waitClassWithProvisioner";
    let rows: [(&str, Vec<gantry_api::StorageCapacity>, bool); 11] = [
        (
            "network-attached",
            vec![capacity(wait, None, Some(GIB), None)],
            true,
        ),
        (
            "local-storage",
            vec![capacity(wait, Some("node1"), Some(GIB), None)],
            true,
        ),
        (
            "multiple",
            vec![
                capacity(wait, None, Some(GIB), None),
                capacity(wait, Some("node2"), Some(GIB), None),
                capacity(wait, Some("node1"), Some(GIB), None),
            ],
            true,
        ),
        ("no-storage", vec![], false),
        (
            "wrong-node",
            vec![capacity(wait, Some("node2"), Some(GIB), None)],
            false,
        ),
        (
            "wrong-storage-class",
            vec![capacity("waitClass", Some("node1"), Some(GIB), None)],
            false,
        ),
        (
            "insufficient-storage",
            vec![capacity(wait, Some("node1"), Some(MI), None)],
            false,
        ),
        (
            "insufficient-volume-size",
            vec![capacity(wait, Some("node1"), Some(GIB), Some(MI))],
            false,
        ),
        (
            "zero-storage",
            vec![capacity(wait, Some("node1"), Some(0), None)],
            false,
        ),
        (
            "zero-volume-size",
            vec![capacity(wait, Some("node1"), None, Some(0))],
            false,
        ),
        (
            "nil-storage",
            vec![capacity(wait, Some("node1"), None, None)],
            false,
        ),
    ];
    let node1 = node("node1", 1000, GIB).with_labels([("nodeKey", "node1")]);
    let mut provisioned = class(
        wait,
        VolumeBindingMode::WaitForFirstConsumer,
        "test-provisioner",
    );
    provisioned.allowed_topologies = affinity(&[("nodeKey", &["node1", "reference-value"])]);
    let classes = [
        provisioned,
        class(
            "waitClass",
            VolumeBindingMode::WaitForFirstConsumer,
            "kubernetes.io/no-provisioner",
        ),
    ];
    let plugin = VolumeBinding::default();
    let pod = pod_with_claims("test-pod", &["provisioned-pvc"]);
    for opt_in in [true, false] {
        for (name, capacities, fits) in &rows {
            let mut objects = ApiObjects::default();
            let pvc = sized(claim("provisioned-pvc", Some(wait)), 1);
            objects.set_storage(&[], &[pvc], &classes, &[]);
            let driver = gantry_api::CsiDriver {
                name: Sym::new("test-provisioner"),
                storage_capacity: opt_in,
                prevent_pod_scheduling_if_missing: false,
            };
            objects.set_storage_capacities(&[driver], capacities);
            let mut state = CycleState::new();
            let nodes = std::slice::from_ref(&node1);
            let (_, status) = pre_filter(&plugin, &mut state, &pod, &objects, nodes);
            assert!(status.is_success(), "{name}");
            let status = plugin.filter(&state, &pod, &node_info(&node1, &[]));
            let want: Vec<&str> = if *fits || !opt_in {
                vec![]
            } else {
                vec![REASON_NOT_ENOUGH_SPACE]
            };
            assert_eq!(
                status.reasons().collect::<Vec<_>>(),
                want,
                "{name}, opt in {opt_in}"
            );
        }
    }
}

/// A claim that fails only for capacity clears the "didn't find available persistent
/// volumes" reason (`binder.go`: `checkVolumeProvisions` returns provisioned, not
/// sufficient); a class that cannot provision on the node keeps it, and is checked first.
#[test]
fn not_enough_space_replaces_the_bind_conflict_reason() {
    let wait = "csi-sc";
    let node_a = node("node-a", 1000, GIB);
    let mut classes = storage_classes();
    classes.push(class(wait, VolumeBindingMode::WaitForFirstConsumer, "csi"));
    let mut objects = ApiObjects::default();
    let claims = [
        sized(claim("small", Some(wait)), 1),
        sized(claim("static", Some("wait-sc")), 2),
    ];
    objects.set_storage(&[], &claims, &classes, &[]);
    let driver = gantry_api::CsiDriver {
        name: Sym::new("csi"),
        storage_capacity: true,
        prevent_pod_scheduling_if_missing: false,
    };
    objects.set_storage_capacities(&[driver], &[]);
    let plugin = VolumeBinding::default();
    let filter = |pod: &Pod| reasons_on(&plugin, &objects, &node_a, pod);
    assert_eq!(
        filter(&pod_with_claims("p", &["small"])),
        [REASON_NOT_ENOUGH_SPACE]
    );
    // The smaller claim is checked first: its capacity decides.
    assert_eq!(
        filter(&pod_with_claims("p", &["small", "static"])),
        [REASON_NOT_ENOUGH_SPACE]
    );
    // Alone, the static claim (no volume, no provisioner) is a bind conflict.
    assert_eq!(
        filter(&pod_with_claims("p", &["static"])),
        [REASON_BIND_CONFLICT]
    );
}

/// A claim annotated `volume.kubernetes.io/selected-node` (a scheduler chose where to
/// provision it) is provisioned there without looking for a volume, even where one would
/// match; on any other node it is a conflict (`FindPodVolumes`' "Filter out claims to
/// provision").
#[test]
fn a_claim_with_a_selected_node_is_provisioned_there_not_matched() {
    let wait = "csi-sc";
    let nodes = [node("node-a", 1000, GIB), node("node-b", 1000, GIB)];
    let mut classes = storage_classes();
    classes.push(class(wait, VolumeBindingMode::WaitForFirstConsumer, "csi"));
    let mut objects = ApiObjects::default();
    let annotated = PersistentVolumeClaim {
        selected_node: Some(Sym::new("node-a")),
        ..sized(claim("data", Some(wait)), 1)
    };
    let volumes = [
        local("pv-a", wait, 1, "node-a"),
        local("pv-b", wait, 1, "node-b"),
    ];
    objects.set_storage(&volumes, &[annotated], &classes, &[]);
    let plugin = VolumeBinding::default();
    let pod = pod_with_claims("p", &["data"]);
    assert!(reasons_on(&plugin, &objects, &nodes[0], &pod).is_empty());
    assert_eq!(
        reasons_on(&plugin, &objects, &nodes[1], &pod),
        [REASON_BIND_CONFLICT],
        "a volume would match on node-b, but the claim's node is node-a"
    );
    let writes = volume_writes(&reserved_on(&plugin, &objects, &nodes, &pod, 0));
    let data = ClaimRef {
        namespace: Sym::new("default"),
        name: Sym::new("data"),
    };
    assert_eq!(writes.bind, [], "pv-a is not bound to it");
    assert_eq!(writes.provision, [(data, Sym::new("node-a"))]);
}

/// A claim `small` (1 Gi) of a class whose driver tracks capacity, and none of it
/// anywhere, and a claim `big` (2 Gi) of a class with no provisioner, selected for
/// `selected`.
fn small_untracked_and_big_selected_for(selected: &str) -> ApiObjects {
    let wait = "csi-sc";
    let mut classes = storage_classes();
    classes.push(class(wait, VolumeBindingMode::WaitForFirstConsumer, "csi"));
    let mut objects = ApiObjects::default();
    let claims = [
        sized(claim("small", Some(wait)), 1),
        PersistentVolumeClaim {
            selected_node: Some(Sym::new(selected)),
            ..sized(claim("big", Some("wait-sc")), 2)
        },
    ];
    objects.set_storage(&[], &claims, &classes, &[]);
    let driver = gantry_api::CsiDriver {
        name: Sym::new("csi"),
        storage_capacity: true,
        prevent_pod_scheduling_if_missing: false,
    };
    objects.set_storage_capacities(&[driver], &[]);
    objects
}

/// The selected nodes are checked before any claim is matched or provisioned: a claim
/// selected for another node makes a conflict even where a smaller claim, sorted first,
/// finds no storage capacity on the node (which alone says "not enough space").
#[test]
fn a_claim_selected_elsewhere_is_a_conflict_before_capacity_is_checked() {
    let node_a = node("node-a", 1000, GIB);
    let objects = small_untracked_and_big_selected_for("node-b");
    let plugin = VolumeBinding::default();
    let filter = |pod: &Pod| reasons_on(&plugin, &objects, &node_a, pod);
    assert_eq!(
        filter(&pod_with_claims("p", &["small"])),
        [REASON_NOT_ENOUGH_SPACE]
    );
    assert_eq!(
        filter(&pod_with_claims("p", &["small", "big"])),
        [REASON_BIND_CONFLICT]
    );
}

/// Claims to provision are checked with the selected ones first, then those no volume
/// matched: a claim selected for this node whose class cannot provision (no provisioner)
/// decides, a conflict, before a smaller unselected claim that finds no capacity.
#[test]
fn selected_claims_are_checked_for_provisioning_first() {
    let node_a = node("node-a", 1000, GIB);
    let objects = small_untracked_and_big_selected_for("node-a");
    let pod = pod_with_claims("p", &["small", "big"]);
    assert_eq!(
        reasons_on(&VolumeBinding::default(), &objects, &node_a, &pod),
        [REASON_BIND_CONFLICT]
    );
}

/// Upstream's `FindMatchingVolume` passes over a volume not in phase Available (the PV
/// controller has not made it available, or it was released) unless the claim is bound
/// to it already.
#[test]
fn only_available_volumes_are_matched() {
    let node_a = node("node-a", 1000, GIB);
    let mut objects = ApiObjects::default();
    let pending = PersistentVolume {
        available: false,
        ..local("pending-pv", "wait-sc", 1, "node-a")
    };
    let promised = PersistentVolume {
        available: false,
        claim_ref: Some(ClaimRef {
            namespace: Sym::new("default"),
            name: Sym::new("mine"),
        }),
        ..local("promised-pv", "wait-sc", 1, "node-a")
    };
    let claims = [
        claim("data", Some("wait-sc")),
        claim("mine", Some("wait-sc")),
    ];
    objects.set_storage(&[pending, promised], &claims, &storage_classes(), &[]);
    let plugin = VolumeBinding::default();
    let reasons = |pod: &Pod| reasons_on(&plugin, &objects, &node_a, pod);
    assert_eq!(
        reasons(&pod_with_claims("p", &["data"])),
        [REASON_BIND_CONFLICT]
    );
    assert_eq!(
        reasons(&pod_with_claims("q", &["mine"])),
        Vec::<String>::new()
    );
}
