//! VolumeBinding: a bound claim's volume must be reachable from the node (its node
//! affinity), and each unbound WaitForFirstConsumer claim must find an available volume the
//! node can reach, or be provisionable there.
//!
//! Until v1.31, PreFilter narrows the nodes to the hostnames that bound local volumes name
//! (`GetEligibleNodes`, which takes `kubernetes.io/hostname` values for node names; removed
//! by kubernetes#125398, as hostnames need not be node names). Reserve
//! assumes the bindings chosen for the pod's node, as upstream's assume cache does, so that
//! the next pod cannot take a volume a pod just got; Unreserve gives them back.
//!
//! Left out: PreBind (writing the bindings to the API; the simulation has no PV
//! controller), storage-capacity checks (CSIStorageCapacity), claims already carrying a
//! selected-node annotation, claim label selectors, volume modes and PV phases (a volume
//! without a claimRef counts as available), and the optional Score.

use std::sync::Arc;

use gantry_api::storage::{ClaimPhase, ClaimRef, VolumeBindingMode};
use gantry_api::{Labels, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass, Sym};
use gantry_cache::NodeInfo;
use parking_lot::Mutex;
use smallvec::SmallVec;

use super::volume_restrictions::claim_not_found;
use crate::events::{ActionType, ClusterEvent, EventResource};
use crate::objects::ephemeral_claim_is_for_pod;
use crate::{
    Cluster, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, ReservePlugin,
    Status,
};

pub const NAME: &str = "VolumeBinding";
pub const REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// v1.28 to v1.32; [`REASON_PV_NODE_AFFINITY`] from v1.33 (kubernetes#129887).
pub const REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const REASON_PV_NODE_AFFINITY: &str = "node(s) didn't match PersistentVolume's node affinity";
pub const REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// The label whose values v1.28 takes for node names when a local volume names its node.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

const ADD_OR_UPDATE: ActionType = ActionType::ADD.or(ActionType::UPDATE);

/// Upstream v1.28: new or changed volumes, claims, classes, nodes and CSINodes.
const EVENTS: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::PersistentVolume, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::PersistentVolumeClaim, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::StorageClass, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::Node, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::CsiNode, ADD_OR_UPDATE),
];

/// The plugin, with the bindings it assumed for pods it reserved (upstream's assume
/// caches): volumes promised to a claim, and claims to be provisioned on a node.
pub struct VolumeBinding {
    assumed: Mutex<Assumed>,
    /// PreFilter narrows the nodes to bound local volumes' hostnames (until v1.31).
    pub narrows_to_hostnames: bool,
    /// Say [`REASON_PV_NODE_AFFINITY`] rather than [`REASON_NODE_CONFLICT`] (v1.33 on).
    pub says_pv_node_affinity: bool,
}

impl Default for VolumeBinding {
    /// As the newest release has it.
    fn default() -> VolumeBinding {
        VolumeBinding::new(false, true)
    }
}

impl VolumeBinding {
    pub fn new(narrows_to_hostnames: bool, says_pv_node_affinity: bool) -> VolumeBinding {
        VolumeBinding {
            assumed: Mutex::default(),
            narrows_to_hostnames,
            says_pv_node_affinity,
        }
    }
}

#[derive(Default, Clone)]
struct Assumed {
    /// Volume name and the claim it is promised to.
    volumes: Vec<(Sym, ClaimRef)>,
    /// Claim and the node it is to be provisioned on (upstream's selected-node annotation).
    provisioned: Vec<(ClaimRef, Sym)>,
}

impl Assumed {
    fn volume_claim(&self, pv: Sym) -> Option<ClaimRef> {
        self.volumes.iter().find(|(v, _)| *v == pv).map(|(_, c)| *c)
    }

    fn selected_node(&self, claim: ClaimRef) -> Option<Sym> {
        self.provisioned
            .iter()
            .find(|(c, _)| *c == claim)
            .map(|(_, n)| *n)
    }
}

fn claim_ref(claim: &PersistentVolumeClaim) -> ClaimRef {
    ClaimRef {
        namespace: claim.namespace,
        name: claim.name,
    }
}

/// An unbound WaitForFirstConsumer claim and the volumes that could be bound to it.
#[derive(Clone)]
struct UnboundClaim {
    claim: ClaimRef,
    class: StorageClass,
    /// Volumes of the claim's class, big enough and not promised to another claim, in
    /// upstream's scan order; `.1` says the volume is promised to this very claim.
    candidates: Vec<(Arc<PersistentVolume>, bool)>,
    /// A node an earlier pod's Reserve chose to provision the claim on.
    selected_node: Option<Sym>,
}

#[derive(Clone)]
struct PreFilterState {
    /// The volumes of the bound claims, in the pod's order; `None` when missing.
    bound: Vec<Option<Arc<PersistentVolume>>>,
    /// Sorted by increasing request, so the smallest claims pick first.
    unbound: Vec<UnboundClaim>,
    /// What Reserve assumed for this pod, for Unreserve to give back.
    reserved: Assumed,
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn events_to_register(&self) -> &'static [ClusterEvent] {
        EVENTS
    }
}

/// Upstream's `GetLocalPersistentVolumeNodeNames`: per required term, the intersection of
/// its `kubernetes.io/hostname In` values; the union over the terms.
fn local_volume_node_names(pv: &PersistentVolume) -> Vec<Sym> {
    let Some(affinity) = &pv.node_affinity else {
        return Vec::new();
    };
    let hostname = Sym::new(HOSTNAME_LABEL);
    let mut union = Vec::new();
    for term in &affinity.terms {
        union.extend(term.admitted_values(hostname, false).unwrap_or_default());
    }
    union.sort_unstable();
    union.dedup();
    union
}

/// Upstream's `GetEligibleNodes`: the nodes every bound local volume names, or `None`
/// (all nodes) when none names nodes or a volume is missing (Filter reports that).
fn eligible_nodes(bound: &[Option<Arc<PersistentVolume>>]) -> Option<Vec<Sym>> {
    let mut eligible: Option<Vec<Sym>> = None;
    for pv in bound {
        let names = local_volume_node_names(pv.as_ref()?);
        if names.is_empty() {
            continue;
        }
        eligible = Some(match eligible {
            None => names,
            Some(previous) => previous.into_iter().filter(|n| names.contains(n)).collect(),
        });
    }
    eligible
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
        for (volume, claim) in storage.claims_of(pod) {
            let name = volume.claim_name.as_deref().unwrap_or_default();
            let Some(claim) = claim else {
                // Normal for an ephemeral volume just after the pod was created.
                let message = if volume.ephemeral {
                    format!(
                        "waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}"
                    )
                } else {
                    claim_not_found(name)
                };
                return (None, Status::unresolvable(message));
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
            if volume.ephemeral
                && let Err(message) = ephemeral_claim_is_for_pod(claim, pod)
            {
                return (None, Status::unresolvable(message));
            }
            claims.push(claim);
        }
        if claims.is_empty() {
            return (None, Status::skip());
        }
        let assumed = self.assumed.lock();
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
            let this = claim_ref(claim);
            let candidates = storage
                .pvs_of_class(claim.storage_class)
                .filter_map(|pv| {
                    let promised = pv.claim_ref.or_else(|| assumed.volume_claim(pv.name));
                    match promised {
                        None => Some((pv.clone(), false)),
                        Some(c) if c == this => Some((pv.clone(), true)),
                        Some(_) => None,
                    }
                })
                .filter(|(pv, reserved)| {
                    pv.capacity >= claim.requested
                        && (*reserved
                            || claim
                                .access_modes
                                .iter()
                                .all(|m| pv.access_modes.contains(m)))
                })
                .collect();
            unbound.push((
                claim.requested,
                UnboundClaim {
                    claim: this,
                    class: class.clone(),
                    candidates,
                    selected_node: assumed.selected_node(this),
                },
            ));
        }
        drop(assumed);
        unbound.sort_by_key(|(requested, _)| *requested);
        let eligible = if self.narrows_to_hostnames {
            eligible_nodes(&bound)
        } else {
            None
        };
        state.write(
            NAME,
            PreFilterState {
                bound,
                unbound: unbound.into_iter().map(|(_, c)| c).collect(),
                reserved: Assumed::default(),
            },
        );
        (eligible, Status::success())
    }
}

impl UnboundClaim {
    /// Upstream's `FindMatchingVolume` on one node: a volume promised to the claim decides
    /// alone; otherwise the smallest reachable one wins (the first of equals). `chosen`
    /// holds the volumes the pod's earlier claims took on this node. The flag says the
    /// volume was already promised to the claim.
    fn find_match(&self, labels: &Labels, chosen: &[Sym]) -> Option<(&PersistentVolume, bool)> {
        let mut best: Option<&PersistentVolume> = None;
        for (pv, reserved) in &self.candidates {
            if chosen.contains(&pv.name) {
                continue;
            }
            let fits = pv.fits_node(labels);
            if *reserved {
                return fits.then_some((pv, true));
            }
            if fits && best.is_none_or(|b| pv.capacity < b.capacity) {
                best = Some(pv);
            }
        }
        best.map(|pv| (pv, false))
    }

    /// Upstream's `checkVolumeProvisions` (capacity tracking aside).
    fn can_provision_on(&self, labels: &Labels) -> bool {
        self.class.can_provision() && self.class.allows_node(labels)
    }
}

/// How the pod's unbound claims would be served on one node.
enum Plan {
    /// Volumes to promise to claims (`None`: the claim's volume was promised already),
    /// and claims to provision, per claim in order.
    Fits(
        SmallVec<[(ClaimRef, Option<Sym>); 4]>,
        SmallVec<[ClaimRef; 4]>,
    ),
    Conflict,
}

impl PreFilterState {
    /// Upstream's `findMatchingVolumes` then `checkVolumeProvisions` for one node.
    fn plan(&self, node: &gantry_api::Node) -> Plan {
        let mut chosen: SmallVec<[Sym; 4]> = SmallVec::new();
        let mut bindings = SmallVec::new();
        let mut provisions = SmallVec::new();
        for claim in &self.unbound {
            if claim.selected_node.is_some_and(|n| n != node.name) {
                return Plan::Conflict;
            }
            match claim.find_match(&node.labels, &chosen) {
                Some((pv, already_promised)) => {
                    chosen.push(pv.name);
                    bindings.push((claim.claim, (!already_promised).then_some(pv.name)));
                }
                None if claim.can_provision_on(&node.labels) => provisions.push(claim.claim),
                None => return Plan::Conflict,
            }
        }
        Plan::Fits(bindings, provisions)
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
        // Upstream's `checkBoundClaims` stops at the first missing or unreachable volume.
        let mut node_conflict = false;
        let mut pv_missing = false;
        for pv in &s.bound {
            match pv {
                None => pv_missing = true,
                Some(pv) => node_conflict = !pv.fits_node(&node.labels),
            }
            if pv_missing || node_conflict {
                break;
            }
        }
        let bind_conflict = matches!(s.plan(node), Plan::Conflict);
        let node_conflict_reason = if self.says_pv_node_affinity {
            REASON_PV_NODE_AFFINITY
        } else {
            REASON_NODE_CONFLICT
        };
        let reasons = [
            (node_conflict, node_conflict_reason),
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

impl ReservePlugin for VolumeBinding {
    /// Upstream's `AssumePodVolumes`: the volumes matched on the chosen node are promised
    /// to their claims, and claims to provision are pinned to the node, until Unreserve.
    fn reserve(&self, state: &mut CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(s) = state.read_mut::<PreFilterState>(NAME) else {
            // The pod has no claims (PreFilter said Skip): nothing to assume.
            return Status::success();
        };
        let Some(node) = node.node() else {
            return Status::error("node not found");
        };
        let Plan::Fits(bindings, provisions) = s.plan(node) else {
            return Status::error(format!(
                "pod's volumes no longer fit node {:?}",
                node.name.as_str()
            ));
        };
        let mut assumed = self.assumed.lock();
        for (claim, volume) in bindings {
            if let Some(pv) = volume {
                assumed.volumes.push((pv, claim));
                s.reserved.volumes.push((pv, claim));
            }
        }
        for claim in provisions {
            assumed.provisioned.push((claim, node.name));
            s.reserved.provisioned.push((claim, node.name));
        }
        Status::success()
    }

    /// Upstream's `RevertAssumedPodVolumes`.
    fn unreserve(&self, state: &mut CycleState, _pod: &Pod, _node: Sym) {
        let Some(s) = state.read_mut::<PreFilterState>(NAME) else {
            return;
        };
        let reserved = std::mem::take(&mut s.reserved);
        let mut assumed = self.assumed.lock();
        assumed
            .volumes
            .retain(|entry| !reserved.volumes.contains(entry));
        assumed
            .provisioned
            .retain(|entry| !reserved.provisioned.contains(entry));
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
            controller_uid: None,
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
        pod.volumes = claims.iter().map(|c| Volume::claim(c, c)).collect();
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
        cache.update_snapshot(&mut snapshot).unwrap();
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
            let (result, status) =
                pre_filter(&v1_28(), &mut CycleState::new(), &pod, &objects, &hosts);
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
        let mut state = CycleState::new();
        assert!(
            pre_filter(&plugin, &mut state, &pod, &objects, &nodes)
                .1
                .is_success()
        );
        assert!(
            plugin
                .reserve(&mut state, &pod, &node_info(&nodes[1], &[]))
                .is_success()
        );
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
}
