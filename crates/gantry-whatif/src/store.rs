//! The operations both snapshot stores offer, and the errors they return.
//!
//! A store holds nodes (as NodeInfos), the pods on them, claim usage and DRA claims with
//! their allocations, and can fork, revert and commit, nested to any depth. It is the
//! cluster view plugins read ([`ClusterState`], [`DraState`]): a fork is read exactly as
//! the live snapshot is.

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::dra::{
    ClaimKey, DeviceClass, DeviceId, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use gantry_api::{Pod, Sym};
use gantry_cache::{ClusterState, DeviceUse, DraState, NodeInfo, PvcKey};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    #[error("node {0} is already in the snapshot")]
    NodeExists(Sym),
    #[error("node {0} is not in the snapshot")]
    NodeNotFound(Sym),
    #[error("pod {pod} is not on node {node}")]
    PodNotFound { pod: String, node: Sym },
    #[error("revert or commit without a fork")]
    NoFork,
}

/// Which store a snapshot uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// A fork copies everything: simple, the reference.
    Basic,
    /// A fork is a new empty layer: fork and revert O(1), commit O(changes).
    Delta,
}

impl StoreKind {
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Basic => "basic",
            StoreKind::Delta => "delta",
        }
    }

    pub fn new_store(self, catalog: Arc<DraCatalog>) -> Box<dyn SnapshotStore> {
        match self {
            StoreKind::Basic => Box::new(crate::basic::BasicStore::new(catalog)),
            StoreKind::Delta => Box::new(crate::delta::DeltaStore::new(catalog)),
        }
    }
}

pub trait SnapshotStore: ClusterState + DraState + Send {
    /// Adds a node with whatever pods its NodeInfo already holds.
    fn add_node(&mut self, info: NodeInfo) -> Result<(), StoreError>;

    fn remove_node(&mut self, name: Sym) -> Result<(), StoreError>;

    /// Accounts a pod on a node, without any check.
    fn add_pod(&mut self, pod: Arc<Pod>, node: Sym) -> Result<(), StoreError>;

    fn remove_pod(&mut self, node: Sym, uid: &str) -> Result<Arc<Pod>, StoreError>;

    /// Adds or replaces a claim (its allocation marks its devices taken).
    fn set_claim(&mut self, claim: Arc<ResourceClaim>);

    fn remove_claim(&mut self, key: ClaimKey);

    fn fork(&mut self);

    /// Drops every change since the last fork.
    fn revert(&mut self) -> Result<(), StoreError>;

    /// Keeps the changes since the last fork, in the fork below (or the base).
    fn commit(&mut self) -> Result<(), StoreError>;

    /// How many forks are open.
    fn depth(&self) -> usize;

    /// Every claim, sorted by namespace and name (for comparisons and reports).
    fn claims(&self) -> Vec<Arc<ResourceClaim>>;

    /// The catalog of DRA objects that do not change in a simulation.
    fn catalog(&self) -> &Arc<DraCatalog>;
}

/// DRA objects a simulation reads but does not change: classes, claim templates, and the
/// slices reachable from several nodes.
#[derive(Debug, Default)]
pub struct DraCatalog {
    pub classes: HashMap<Sym, Arc<DeviceClass>, RandomState>,
    pub templates: HashMap<ClaimKey, Arc<ResourceClaimTemplate>, RandomState>,
    pub shared_slices: Vec<Arc<ResourceSlice>>,
}

/// The claims (PVCs) a pod's `persistentVolumeClaim` volumes use, as the cache counts
/// them per node (ephemeral volumes' claims are not counted there either).
pub(crate) fn pvc_keys(pod: &Pod) -> impl Iterator<Item = PvcKey> + '_ {
    pod.volumes.iter().filter_map(|v| {
        v.persistent_claim().map(|claim| PvcKey {
            namespace: pod.namespace,
            claim: Sym::new(claim),
        })
    })
}

/// The devices a claim's allocation takes.
/// How many claims' allocations hold each device.
pub(crate) type DeviceCounts = HashMap<DeviceId, u32, RandomState>;

/// The devices taken, as the allocator asks about them during one pod's cycle: a store's
/// counts (shared, not copied) with the open forks' changes on top.
pub(crate) struct CountedDeviceUse {
    base: Arc<DeviceCounts>,
    changes: HashMap<DeviceId, i64, RandomState>,
}

impl CountedDeviceUse {
    pub(crate) fn new(base: Arc<DeviceCounts>) -> CountedDeviceUse {
        CountedDeviceUse {
            base,
            changes: HashMap::default(),
        }
    }

    /// Adds `change` claims holding `device`.
    pub(crate) fn change(&mut self, device: DeviceId, change: i64) {
        *self.changes.entry(device).or_default() += change;
    }
}

impl DeviceUse for CountedDeviceUse {
    fn is_allocated(&self, device: DeviceId) -> bool {
        let base = i64::from(self.base.get(&device).copied().unwrap_or(0));
        base + self.changes.get(&device).copied().unwrap_or(0) > 0
    }
}

pub(crate) fn claim_devices(claim: &ResourceClaim) -> impl Iterator<Item = DeviceId> + '_ {
    claim.allocation.iter().flat_map(|a| a.held_devices())
}
