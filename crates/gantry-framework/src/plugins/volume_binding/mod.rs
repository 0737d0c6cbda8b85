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
//! With StorageCapacityScoring on, Score prefers the nodes where the pod's volumes would
//! take the share of storage `VolumeBindingArgs.shape` favours (`score.rs`).
//!
//! PreBind's writes (upstream's `BindPodVolumes`) are the binder's: [`volume_writes`]
//! gives `gantry run` what Reserve assumed, to write to the API and wait for; the
//! simulation has no PV controller and binds at once. Left out: claim label selectors and
//! volume modes.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::storage::ClaimRef;
use gantry_api::{PersistentVolume, PersistentVolumeClaim, StorageClass, Sym};
use parking_lot::Mutex;

use crate::Plugin;
use crate::events::{ActionType, ClusterEvent, EventResource};

mod filter;
mod reserve;
mod score;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

pub const NAME: &str = "VolumeBinding";
pub const REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// v1.28 to v1.32; [`REASON_PV_NODE_AFFINITY`] from v1.33 (kubernetes#129887).
pub const REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const REASON_PV_NODE_AFFINITY: &str = "node(s) didn't match PersistentVolume's node affinity";
pub const REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// A claim to provision fits no CSIStorageCapacity that reaches the node.
pub const REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
pub const REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// The label whose values v1.28 takes for node names when a local volume names its node.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

const ADD_OR_UPDATE: ActionType = ActionType::ADD.or(ActionType::UPDATE);

/// New or changed volumes, claims, classes, nodes and CSINodes, changed CSIDrivers and new
/// or changed CSIStorageCapacities (v1.36; v1.28 also took a new CSIDriver). Without
/// upstream's queueing hints, but for a claim's: only the pods using it move.
const EVENTS: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::PersistentVolume, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::PersistentVolumeClaim, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::StorageClass, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::Node, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::CsiNode, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::CsiDriver, ActionType::UPDATE),
    ClusterEvent::new(EventResource::CsiStorageCapacity, ADD_OR_UPDATE),
];

/// The plugin, with the bindings it assumed for pods it reserved (upstream's assume
/// caches): volumes promised to a claim, and claims to be provisioned on a node.
pub struct VolumeBinding {
    assumed: Mutex<Assumed>,
    /// PreFilter narrows the nodes to bound local volumes' hostnames (until v1.31).
    pub narrows_to_hostnames: bool,
    /// Say [`REASON_PV_NODE_AFFINITY`] rather than [`REASON_NODE_CONFLICT`] (v1.33 on).
    pub says_pv_node_affinity: bool,
    /// With StorageCapacityScoring on, the score of each utilisation: (utilisation,
    /// score 0..=10) points of `VolumeBindingArgs.shape`. `None`: Score skips.
    pub capacity_shape: Option<Vec<(i64, i64)>>,
    /// `VolumeBindingArgs.bindTimeoutSeconds`: how long PreBind waits for the claims to be
    /// bound (`gantry run`; a simulation binds them at once).
    pub bind_timeout: Duration,
}

/// `bindTimeoutSeconds` when the configuration gives none (`SetDefaults_VolumeBindingArgs`).
pub const DEFAULT_BIND_TIMEOUT: Duration = Duration::from_secs(600);

/// `VolumeBindingArgs.shape` when the gate is on and the configuration gives none
/// (`SetDefaults_VolumeBindingArgs`): the emptier the node's storage, the higher.
pub const DEFAULT_CAPACITY_SHAPE: [(i64, i64); 2] = [(0, 10), (100, 0)];

impl Default for VolumeBinding {
    /// As v1.36 has it.
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
            capacity_shape: None,
            bind_timeout: DEFAULT_BIND_TIMEOUT,
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

/// What Reserve assumed for a pod, which PreBind writes to the API (upstream's
/// `BindPodVolumes`): volumes to bind to claims (`claimRef`), and claims to be provisioned
/// on the node (the `volume.kubernetes.io/selected-node` annotation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeWrites {
    /// Volume name and the claim it goes to.
    pub bind: Vec<(Sym, ClaimRef)>,
    /// Claim and the node to provision it on.
    pub provision: Vec<(ClaimRef, Sym)>,
    /// How long to wait for the claims to be bound (the profile's `bindTimeoutSeconds`).
    pub timeout: Duration,
}

impl VolumeWrites {
    pub fn is_empty(&self) -> bool {
        self.bind.is_empty() && self.provision.is_empty()
    }
}

/// The volume writes of the pod whose cycle this is (after Reserve); empty for a pod
/// with no unbound claims.
pub fn volume_writes(state: &crate::CycleState) -> VolumeWrites {
    state
        .read::<PreFilterState>(NAME)
        .map(|s| VolumeWrites {
            bind: s.reserved.volumes.clone(),
            provision: s.reserved.provisioned.clone(),
            timeout: s.bind_timeout,
        })
        .unwrap_or_default()
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
    /// Its storage request, in bytes.
    requested: i64,
    class: StorageClass,
    /// Volumes of the claim's class, big enough and not promised to another claim, in
    /// upstream's scan order; `.1` says the volume is promised to this very claim.
    candidates: Vec<(Arc<PersistentVolume>, bool)>,
    /// A node an earlier pod's Reserve chose to provision the claim on.
    selected_node: Option<Sym>,
    /// Where its CSI driver tracks storage capacity, the CSIStorageCapacities of its class
    /// large enough for it: provisioned only on a node one of them reaches.
    capacities: Option<Vec<Arc<gantry_api::StorageCapacity>>>,
}

#[derive(Clone)]
struct PreFilterState {
    /// The volumes of the bound claims, in the pod's order; `None` when missing.
    bound: Vec<Option<Arc<PersistentVolume>>>,
    /// The first `selected` have a selected node, in the pod's order; the rest follow by
    /// increasing request, so the smallest claims pick first.
    unbound: Vec<UnboundClaim>,
    selected: usize,
    /// What Reserve assumed for this pod, for Unreserve to give back.
    reserved: Assumed,
    /// The profile's `bindTimeoutSeconds`, for PreBind's writer.
    bind_timeout: Duration,
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    fn sign(&self, pod: &gantry_api::Pod, signature: &mut crate::Signature) -> bool {
        signature.add_volumes(pod);
        true
    }

    fn events_to_register(&self) -> &'static [ClusterEvent] {
        EVENTS
    }
}
