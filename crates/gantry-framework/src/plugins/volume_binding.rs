//! VolumeBinding, Filter side: a bound claim's volume must be reachable from the node (its
//! node affinity), and each unbound WaitForFirstConsumer claim must find an available
//! volume the node can reach, or be provisionable there.
//!
//! Left out: Reserve and PreBind (assuming and writing the chosen bindings to the API),
//! storage-capacity checks (CSIStorageCapacity), claims already carrying a selected-node
//! annotation, claim label selectors, volume modes and PV phases (a volume without a
//! claimRef counts as available), and the optional Score. Also left out is v1.28's
//! PreFilter narrowing to the hostnames of bound local volumes (it took hostname labels for
//! node names; upstream later removed it): Filter reaches the same verdicts.

use gantry_api::storage::{ClaimPhase, VolumeBindingMode};
use gantry_api::{Labels, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass, Sym};
use gantry_cache::NodeInfo;
use smallvec::SmallVec;

use super::volume_restrictions::claim_not_found;
use crate::events::{ActionType, ClusterEvent, EventResource};
use crate::{Cluster, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status};

pub const NAME: &str = "VolumeBinding";
pub const REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
pub const REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

const ADD_OR_UPDATE: ActionType = ActionType::ADD.or(ActionType::UPDATE);

/// Upstream v1.28: new or changed volumes, claims, classes, nodes and CSINodes.
const EVENTS: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::PersistentVolume, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::PersistentVolumeClaim, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::StorageClass, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::Node, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::CsiNode, ADD_OR_UPDATE),
];

pub struct VolumeBinding;

/// An unbound WaitForFirstConsumer claim and the volumes that could be bound to it.
#[derive(Clone)]
struct UnboundClaim {
    class: StorageClass,
    /// Volumes of the claim's class, big enough and not reserved for another claim, in
    /// upstream's scan order; `.1` says the volume is reserved for this very claim.
    candidates: Vec<(PersistentVolume, bool)>,
}

#[derive(Clone)]
struct PreFilterState {
    /// The volumes of the bound claims, in the pod's order; `None` when missing.
    bound: Vec<Option<PersistentVolume>>,
    /// Sorted by increasing request, so the smallest claims pick first.
    unbound: Vec<UnboundClaim>,
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn events_to_register(&self) -> &'static [ClusterEvent] {
        EVENTS
    }
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let storage = cluster.objects.storage();
        let mut claims: Vec<&PersistentVolumeClaim> = Vec::new();
        for name in pod.volumes.iter().filter_map(|v| v.claim_name.as_deref()) {
            let Some(claim) = Sym::get(name).and_then(|n| storage.pvc(pod.namespace, n)) else {
                return (None, Status::unresolvable(claim_not_found(name)));
            };
            if claim.phase == ClaimPhase::Lost {
                let volume = claim.volume_name.map_or("", |v| v.as_str());
                return (
                    None,
                    Status::unresolvable(format!(
                        "persistentvolumeclaim {name:?} bound to non-existent persistentvolume {volume:?}"
                    )),
                );
            }
            if claim.terminating {
                return (
                    None,
                    Status::unresolvable(format!(
                        "persistentvolumeclaim {name:?} is being deleted"
                    )),
                );
            }
            claims.push(claim);
        }
        if claims.is_empty() {
            return (None, Status::skip());
        }
        let mut bound = Vec::new();
        let mut unbound: Vec<(i64, UnboundClaim)> = Vec::new();
        for claim in claims {
            if claim.is_bound() {
                bound.push(claim.volume_name.and_then(|v| storage.pv(v)).cloned());
                continue;
            }
            // A claim without a (known) class binds immediately, as does one naming its
            // volume in advance: either way the PV controller should have bound it.
            let class = claim.storage_class.and_then(|c| storage.storage_class(c));
            let Some(class) = class.filter(|c| {
                c.binding_mode == VolumeBindingMode::WaitForFirstConsumer
                    && claim.volume_name.is_none()
            }) else {
                return (None, Status::unresolvable(REASON_UNBOUND_IMMEDIATE));
            };
            let candidates = storage
                .pvs_of_class(claim.storage_class)
                .filter(|pv| pv.claim_ref.is_none() || pv.is_reserved_for(claim))
                .filter(|pv| pv.capacity >= claim.requested)
                .map(|pv| (pv.clone(), pv.is_reserved_for(claim)))
                .filter(|(pv, reserved)| {
                    *reserved
                        || claim
                            .access_modes
                            .iter()
                            .all(|m| pv.access_modes.contains(m))
                })
                .collect();
            unbound.push((
                claim.requested,
                UnboundClaim {
                    class: class.clone(),
                    candidates,
                },
            ));
        }
        unbound.sort_by_key(|(requested, _)| *requested);
        state.write(
            NAME,
            PreFilterState {
                bound,
                unbound: unbound.into_iter().map(|(_, c)| c).collect(),
            },
        );
        (None, Status::success())
    }
}

impl UnboundClaim {
    /// Upstream's `FindMatchingVolume` on one node: a volume reserved for the claim decides
    /// alone; otherwise the smallest reachable one wins (the first of equals). `chosen`
    /// holds the volumes the pod's earlier claims took on this node.
    fn find_match(&self, labels: &Labels, chosen: &[Sym]) -> Option<Sym> {
        let mut best: Option<&PersistentVolume> = None;
        for (pv, reserved) in &self.candidates {
            if chosen.contains(&pv.name) {
                continue;
            }
            let fits = pv.fits_node(labels);
            if *reserved {
                return fits.then_some(pv.name);
            }
            if fits && best.is_none_or(|b| pv.capacity < b.capacity) {
                best = Some(pv);
            }
        }
        best.map(|pv| pv.name)
    }

    /// Upstream's `checkVolumeProvisions` (capacity tracking aside).
    fn can_provision_on(&self, labels: &Labels) -> bool {
        self.class.can_provision() && self.class.allows_node(labels)
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(NAME) else {
            return Status::error(format!("cannot read {NAME:?} PreFilter state"));
        };
        let Some(node) = node.node() else {
            return Status::unresolvable("node not found");
        };
        let labels = &node.labels;
        // Upstream's `checkBoundClaims` stops at the first missing or unreachable volume.
        let mut node_conflict = false;
        let mut pv_missing = false;
        for pv in &s.bound {
            match pv {
                None => pv_missing = true,
                Some(pv) => node_conflict = !pv.fits_node(labels),
            }
            if pv_missing || node_conflict {
                break;
            }
        }
        let mut chosen: SmallVec<[Sym; 8]> = SmallVec::new();
        let mut bind_conflict = false;
        for claim in &s.unbound {
            match claim.find_match(labels, &chosen) {
                Some(pv) => chosen.push(pv),
                None if claim.can_provision_on(labels) => {}
                None => {
                    bind_conflict = true;
                    break;
                }
            }
        }
        let reasons = [
            (node_conflict, REASON_NODE_CONFLICT),
            (bind_conflict, REASON_BIND_CONFLICT),
            (pv_missing, REASON_PV_NOT_EXIST),
        ];
        let mut failed = reasons.iter().filter(|(f, _)| *f).map(|(_, r)| *r);
        let Some(first) = failed.next() else {
            return Status::success();
        };
        failed.fold(Status::unresolvable(first), Status::with_reason)
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Builders for the volume plugins' tests, after upstream's `makePVC` / `makePV`.

    use std::sync::Arc;

    use gantry_api::labels::{NodeSelectorOp, NodeSelectorRequirement};
    use gantry_api::storage::ClaimPhase;
    use gantry_api::{
        Labels, Node, NodeSelector, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, Pod,
        StorageClass, Sym, Volume,
    };
    use gantry_cache::{Cache, Snapshot};

    use super::VolumeBindingMode;

    /// An unbound claim in "default" with no access modes and no request.
    pub fn claim(name: &str, class: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            namespace: Sym::new("default"),
            name: Sym::new(name),
            storage_class: class.map(Sym::new),
            requested: 0,
            access_modes: Default::default(),
            volume_name: None,
            phase: ClaimPhase::Pending,
            terminating: false,
        }
    }

    pub fn bound_claim(name: &str, class: &str, volume: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            volume_name: Some(Sym::new(volume)),
            phase: ClaimPhase::Bound,
            ..claim(name, Some(class))
        }
    }

    /// A volume with no capacity, access modes, affinity or claim.
    pub fn volume(name: &str, class: Option<&str>) -> PersistentVolume {
        PersistentVolume {
            name: Sym::new(name),
            labels: Labels::default(),
            capacity: 0,
            access_modes: Default::default(),
            storage_class: class.map(Sym::new),
            node_affinity: None,
            claim_ref: None,
            csi_driver: None,
        }
    }

    /// One node selector term: `key In values` for each pair.
    pub fn affinity(pairs: &[(&str, &[&str])]) -> Option<NodeSelector> {
        let match_expressions = pairs
            .iter()
            .map(|(key, values)| NodeSelectorRequirement {
                key: Sym::new(key),
                op: NodeSelectorOp::In,
                values: values.iter().map(|v| Sym::new(v)).collect(),
            })
            .collect();
        Some(NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions,
                match_fields: vec![],
            }],
        })
    }

    pub fn class(name: &str, mode: VolumeBindingMode, provisioner: &str) -> StorageClass {
        StorageClass {
            name: Sym::new(name),
            provisioner: Sym::new(provisioner),
            binding_mode: mode,
            allowed_topologies: None,
        }
    }

    /// A pod in "default" using the named claims.
    pub fn pod_with_claims(name: &str, claims: &[&str]) -> Pod {
        let mut pod = Pod::new("default", name);
        pod.volumes = claims
            .iter()
            .map(|c| Volume {
                name: Arc::from(*c),
                claim_name: Some(Arc::from(*c)),
                read_only: false,
            })
            .collect();
        pod
    }

    /// A snapshot of the nodes, with the pods placed on the nodes they name.
    pub fn snapshot(nodes: &[Node], pods: &[Pod]) -> Snapshot {
        let cache = Cache::new();
        for node in nodes {
            cache.add_node(Arc::new(node.clone()));
        }
        for (i, pod) in pods.iter().enumerate() {
            let mut pod = pod.clone();
            pod.uid = Arc::from(format!("{}-{i}", pod.uid));
            if pod.node_name.is_none() {
                pod.node_name = nodes.first().map(|n| n.name);
            }
            cache.add_pod(Arc::new(pod)).expect("test pods are unique");
        }
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot);
        snapshot
    }
}

#[cfg(test)]
mod tests {
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
        let (result, status) = VolumeBinding.pre_filter(&mut state, &case.pod, cluster);
        assert_eq!(result, None, "{}", case.name);
        let got = (status.code(), status.message());
        assert_eq!(got, case.pre_filter, "{}: PreFilter", case.name);
        if !status.is_success() {
            return;
        }
        for (node, want) in case.nodes.iter().zip(&case.filter) {
            let status = VolumeBinding.filter(&state, &case.pod, &node_info(node, &[]));
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

    /// Upstream's TestVolumeBinding, Filter verdicts (its scoring cases run with the
    /// VolumeCapacityPriority gate, off by default).
    #[test]
    fn volume_binding_table() {
        let pod_a = || pod_with_claims("pod-a", &["pvc-a"]);
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
}
