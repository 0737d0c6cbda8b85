//! Storage objects the volume plugins read: persistent volumes and claims, storage classes,
//! and CSINodes, in compact form (only the fields kube-scheduler's volume plugins use).

use std::sync::LazyLock;

use smallvec::SmallVec;

use crate::{Labels, NodeSelector, Sym};

/// Upstream matches volume and class topologies against a node's labels only: a node with
/// no name, so `matchFields` terms never match.
static NO_NODE_NAME: LazyLock<Sym> = LazyLock::new(|| Sym::new(""));

/// `persistentVolume.spec.accessModes` / `persistentVolumeClaim.spec.accessModes` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessMode {
    ReadWriteOnce,
    ReadOnlyMany,
    ReadWriteMany,
    ReadWriteOncePod,
}

impl AccessMode {
    pub fn parse(s: &str) -> Option<AccessMode> {
        match s {
            "ReadWriteOnce" => Some(AccessMode::ReadWriteOnce),
            "ReadOnlyMany" => Some(AccessMode::ReadOnlyMany),
            "ReadWriteMany" => Some(AccessMode::ReadWriteMany),
            "ReadWriteOncePod" => Some(AccessMode::ReadWriteOncePod),
            _ => None,
        }
    }
}

pub type AccessModes = SmallVec<[AccessMode; 2]>;

/// The claim a volume is reserved for (`spec.claimRef`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClaimRef {
    pub namespace: Sym,
    pub name: Sym,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistentVolume {
    pub name: Sym,
    pub labels: Labels,
    /// `spec.capacity.storage` in bytes.
    pub capacity: i64,
    pub access_modes: AccessModes,
    /// `None` for no class (upstream's empty class name).
    pub storage_class: Option<Sym>,
    /// `spec.nodeAffinity.required`: the nodes that can reach the volume.
    pub node_affinity: Option<NodeSelector>,
    pub claim_ref: Option<ClaimRef>,
    /// `spec.csi.driver`, for CSI volumes.
    pub csi_driver: Option<Sym>,
    /// `status.phase` is `Available`, or not given (a hand-written file): upstream's
    /// `FindMatchingVolume` passes over a volume in another phase (a new one the PV
    /// controller has not made available yet, a released or failed one) unless it is
    /// bound to the claim.
    pub available: bool,
}

impl PersistentVolume {
    /// Upstream's `CheckNodeAffinity`: a volume without required node affinity fits every
    /// node.
    pub fn fits_node(&self, node_labels: &Labels) -> bool {
        self.node_affinity
            .as_ref()
            .is_none_or(|s| s.matches(*NO_NODE_NAME, node_labels))
    }

    pub fn is_reserved_for(&self, claim: &PersistentVolumeClaim) -> bool {
        self.claim_ref
            .is_some_and(|r| r.namespace == claim.namespace && r.name == claim.name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimPhase {
    Pending,
    Bound,
    Lost,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistentVolumeClaim {
    pub namespace: Sym,
    pub name: Sym,
    /// `None` for no class (upstream's empty class name).
    pub storage_class: Option<Sym>,
    /// `spec.resources.requests.storage` in bytes (0 when absent).
    pub requested: i64,
    pub access_modes: AccessModes,
    /// `spec.volumeName`: the volume the claim is (or is to be) bound to.
    pub volume_name: Option<Sym>,
    pub phase: ClaimPhase,
    /// Set when the claim has a deletion timestamp.
    pub terminating: bool,
    /// The uid of the object controlling the claim (its owner reference marked as
    /// controller): for an ephemeral volume's claim, the pod it was created for.
    pub controller_uid: Option<std::sync::Arc<str>>,
    /// The `volume.kubernetes.io/selected-node` annotation: a scheduler chose this node
    /// to provision the claim on (an empty value names no node).
    pub selected_node: Option<Sym>,
}

impl PersistentVolumeClaim {
    /// Bound to its volume. Upstream checks the `pv.kubernetes.io/bind-completed`
    /// annotation, which the PV controller sets together with phase Bound.
    pub fn is_bound(&self) -> bool {
        self.volume_name.is_some() && self.phase == ClaimPhase::Bound
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeBindingMode {
    Immediate,
    WaitForFirstConsumer,
}

/// The provisioner name that means "no dynamic provisioning" (local volumes).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageClass {
    pub name: Sym,
    pub provisioner: Sym,
    pub binding_mode: VolumeBindingMode,
    /// `allowedTopologies` as `In` node selector terms; `None` (no terms) allows every node.
    pub allowed_topologies: Option<NodeSelector>,
}

impl StorageClass {
    /// Whether volumes of this class can be created on demand.
    pub fn can_provision(&self) -> bool {
        !self.provisioner.as_str().is_empty() && self.provisioner.as_str() != NO_PROVISIONER
    }

    /// Upstream's `MatchTopologySelectorTerms` on the node's labels.
    pub fn allows_node(&self, node_labels: &Labels) -> bool {
        self.allowed_topologies
            .as_ref()
            .is_none_or(|s| s.matches(*NO_NODE_NAME, node_labels))
    }
}

/// A CSIDriver, as VolumeBinding and NodeVolumeLimits read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiDriver {
    pub name: Sym,
    /// Its volumes are provisioned only where CSIStorageCapacity objects say there is
    /// room (`spec.storageCapacity`).
    pub storage_capacity: bool,
    /// A pod with its volumes goes only to nodes whose CSINode lists it, under
    /// VolumeLimitScaling (`spec.preventPodSchedulingIfMissing`, v1.36).
    pub prevent_pod_scheduling_if_missing: bool,
}

/// A CSIStorageCapacity: how large a volume of a storage class can be provisioned on the
/// nodes its topology selects.
#[derive(Debug, Clone, PartialEq)]
pub struct StorageCapacity {
    /// `namespace/name`, for messages.
    pub key: String,
    pub storage_class: Sym,
    /// `nodeTopology`: `None` reaches no node, an empty selector every node.
    pub node_topology: Option<crate::LabelSelector>,
    /// `capacity` and `maximumVolumeSize`, in bytes.
    pub capacity: Option<i64>,
    pub maximum_volume_size: Option<i64>,
}

impl StorageCapacity {
    /// Upstream's `capacitySufficient`: the largest volume it allows (`maximumVolumeSize`
    /// when set, else `capacity`; neither: none) is at least `bytes`.
    pub fn allows(&self, bytes: i64) -> bool {
        self.maximum_volume_size
            .or(self.capacity)
            .is_some_and(|limit| limit >= bytes)
    }

    /// Upstream's `nodeHasAccess`: the topology selects the node's labels.
    pub fn reaches(&self, node_labels: &Labels) -> bool {
        self.node_topology
            .as_ref()
            .is_some_and(|selector| selector.matches(node_labels))
    }
}

/// A CSI driver on a node and how many of its volumes the node can attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiNodeDriver {
    pub name: Sym,
    /// `allocatable.count`; `None` means no limit.
    pub allocatable_count: Option<i32>,
}

/// A CSINode object: named after its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiNode {
    pub node_name: Sym,
    pub drivers: Vec<CsiNodeDriver>,
}

impl CsiNode {
    /// The attach limit for the driver, if the node reports one.
    pub fn limit(&self, driver: Sym) -> Option<i32> {
        self.drivers
            .iter()
            .find(|d| d.name == driver)
            .and_then(|d| d.allocatable_count)
    }
}
