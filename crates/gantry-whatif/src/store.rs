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
    CapacityAmounts, ClaimKey, DeviceClass, DeviceId, ResourceClaim, ResourceClaimTemplate,
    ResourceSlice,
};
use gantry_api::dra_capacity;
use gantry_api::{Pod, Sym};
use gantry_cache::{ClusterState, DeviceShares, DeviceUse, DraState, NodeInfo, PvcKey};
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
    /// The classes by the extended resources they serve (built from `classes`).
    pub extended: Arc<gantry_api::dra_extended::ExtendedResourceClasses>,
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

/// The shares of one shared device (DRAConsumableCapacity) claims hold, summed (signed,
/// so that a fork's changes add to its base's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShareTally {
    shares: i64,
    /// Shares that name consumed capacity (upstream keeps an aggregated entry for them).
    naming_capacity: i64,
    consumed: CapacityAmounts,
}

impl ShareTally {
    fn add(&mut self, other: &ShareTally, sign: i64) {
        self.shares += sign * other.shares;
        self.naming_capacity += sign * other.naming_capacity;
        dra_capacity::add_amounts(&mut self.consumed, &other.consumed, sign);
    }
}

/// Share tallies by device.
pub(crate) type ShareCounts = HashMap<DeviceId, ShareTally, RandomState>;

/// Adds (`sign` 1) or takes away (-1) the shares the claim's allocation holds.
pub(crate) fn count_shares(counts: &mut ShareCounts, claim: &ResourceClaim, sign: i64) {
    for result in claim.allocation.iter().flat_map(|a| a.shares()) {
        let Some(share) = &result.share else {
            continue;
        };
        let one = ShareTally {
            shares: 1,
            naming_capacity: i64::from(!share.consumed.is_empty()),
            consumed: share.consumed.clone(),
        };
        let tally = counts.entry(result.device).or_default();
        tally.add(&one, sign);
        if tally.shares == 0 && tally.naming_capacity == 0 {
            counts.remove(&result.device);
        }
    }
}

/// Adds one set of share changes to another.
pub(crate) fn merge_shares(into: &mut ShareCounts, changes: &ShareCounts) {
    for (device, change) in changes {
        let tally = into.entry(*device).or_default();
        tally.add(change, 1);
        if tally.shares == 0 && tally.naming_capacity == 0 {
            into.remove(device);
        }
    }
}

/// The devices taken, as the allocator asks about them during one pod's cycle: a store's
/// counts (shared, not copied) with the open forks' changes on top.
pub(crate) struct CountedDeviceUse {
    base: Arc<DeviceCounts>,
    changes: HashMap<DeviceId, i64, RandomState>,
    base_shares: Arc<ShareCounts>,
    share_changes: ShareCounts,
}

impl CountedDeviceUse {
    pub(crate) fn new(base: Arc<DeviceCounts>, base_shares: Arc<ShareCounts>) -> CountedDeviceUse {
        CountedDeviceUse {
            base,
            changes: HashMap::default(),
            base_shares,
            share_changes: ShareCounts::default(),
        }
    }

    /// Adds `change` claims holding `device`.
    pub(crate) fn change(&mut self, device: DeviceId, change: i64) {
        *self.changes.entry(device).or_default() += change;
    }

    /// Adds a fork's share changes.
    pub(crate) fn change_shares(&mut self, changes: &ShareCounts) {
        merge_shares(&mut self.share_changes, changes);
    }
}

impl DeviceUse for CountedDeviceUse {
    fn is_allocated(&self, device: DeviceId) -> bool {
        let base = i64::from(self.base.get(&device).copied().unwrap_or(0));
        base + self.changes.get(&device).copied().unwrap_or(0) > 0
    }

    /// What the claims' shares of the device take: an aggregated amount while any share
    /// names consumed capacity (upstream's tracker also keeps an entry whose amounts
    /// came back to zero until a share is removed; a what-if store does not).
    fn shares(&self, device: DeviceId) -> Option<DeviceShares> {
        if self.base_shares.is_empty() && self.share_changes.is_empty() {
            return None;
        }
        let mut tally = self.base_shares.get(&device).cloned().unwrap_or_default();
        if let Some(change) = self.share_changes.get(&device) {
            tally.add(change, 1);
        }
        (tally.shares > 0).then(|| DeviceShares {
            count: u32::try_from(tally.shares).unwrap_or(u32::MAX),
            consumed: (tally.naming_capacity > 0).then_some(tally.consumed),
        })
    }

    fn has_shares(&self) -> bool {
        self.base_shares.values().any(|t| t.shares > 0)
            || self.share_changes.values().any(|t| t.shares != 0)
    }
}

pub(crate) fn claim_devices(claim: &ResourceClaim) -> impl Iterator<Item = DeviceId> + '_ {
    claim.allocation.iter().flat_map(|a| a.held_devices())
}
