//! What the DynamicResources plugin reads besides the nodes: device classes, claims with
//! their allocations, which devices are taken, and the slices not local to one node.
//! A node's own slices travel with its NodeInfo.

use std::collections::HashSet;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::Sym;
use gantry_api::dra::{
    CapacityAmounts, ClaimKey, DeviceClass, DeviceId, ResourceClaim, ResourceSlice,
};
use gantry_api::dra_extended::ExtendedResourceClasses;

/// The shares claims hold of one device (DRAConsumableCapacity): upstream's shared
/// device IDs and its `AggregatedCapacity` entry for the device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceShares {
    /// Allocation results naming the device with a share ID.
    pub count: u32,
    /// What they take together; `None` when no entry stands (no result named consumed
    /// capacity, or the amounts came back to zero and upstream's `Remove` dropped it).
    pub consumed: Option<CapacityAmounts>,
}

/// Whether a device is taken, asked once per candidate device while a pod's claims are
/// allocated (the live cache answers from its device index, a what-if store from a set).
/// Which devices are taken, asked many times in a row (see [`DeviceUse::with_allocated`]).
pub trait AllocatedView {
    fn is_allocated(&self, device: DeviceId) -> bool;

    /// The names of the devices taken in one pool, where the view keeps them by pool
    /// (one lookup for a node's slice instead of one per device); `None` otherwise.
    fn taken_in_pool(&self, _driver: Sym, _pool: Sym) -> Option<&[Sym]> {
        None
    }

    /// Whether any claim holds a share of any device.
    fn has_shares(&self) -> bool {
        false
    }
}

/// What [`DeviceUse::with_allocated`] calls.
pub type AllocatedVisitor<'a> = dyn FnMut(&dyn AllocatedView) + 'a;

/// A [`DeviceUse`] asked device by device.
struct EachDevice<'a, T: ?Sized>(&'a T);

impl<T: DeviceUse + ?Sized> AllocatedView for EachDevice<'_, T> {
    fn is_allocated(&self, device: DeviceId) -> bool {
        self.0.is_allocated(device)
    }

    fn has_shares(&self) -> bool {
        self.0.has_shares()
    }
}

pub trait DeviceUse: Send + Sync {
    /// Whether a claim holds the device alone (a result without a share ID).
    fn is_allocated(&self, device: DeviceId) -> bool;

    /// The shares claims hold of the device, if any (DRAConsumableCapacity).
    fn shares(&self, _device: DeviceId) -> Option<DeviceShares> {
        None
    }

    /// Whether any claim holds a share of any device.
    fn has_shares(&self) -> bool {
        false
    }

    /// Calls `f` with a view of the devices taken, for many questions in a row (the
    /// live cache answers them all under one lock, by pool).
    fn with_allocated(&self, f: &mut AllocatedVisitor<'_>) {
        f(&EachDevice(self));
    }

    /// The claim (`namespace/name`) holding the device, where the view knows it (for
    /// explanations; not asked while scheduling).
    fn holder(&self, _device: DeviceId) -> Option<String> {
        None
    }
}

impl DeviceUse for HashSet<DeviceId, RandomState> {
    fn is_allocated(&self, device: DeviceId) -> bool {
        self.contains(&device)
    }
}

pub trait DraState: Sync {
    fn device_class(&self, name: Sym) -> Option<Arc<DeviceClass>>;

    /// The claim as it stands now (allocation and reservations included).
    fn claim(&self, key: ClaimKey) -> Option<Arc<ResourceClaim>>;

    /// An allocation for the claim was decided (Reserve) but is not written yet
    /// (upstream's in-flight allocations): another pod using the claim waits for it.
    fn allocation_in_flight(&self, _key: ClaimKey) -> bool {
        false
    }

    /// Every allocated device, each once, in no particular order.
    fn allocated_devices(&self) -> Vec<DeviceId>;

    /// The devices taken, for one pod's allocation. By default a set of
    /// [`allocated_devices`](Self::allocated_devices); the live cache answers from its
    /// index instead of copying it.
    fn device_use(&self) -> Arc<dyn DeviceUse> {
        Arc::new(
            self.allocated_devices()
                .into_iter()
                .collect::<HashSet<_, RandomState>>(),
        )
    }

    /// ResourceSlices reachable from several nodes (a node selector, or all nodes).
    fn shared_slices(&self) -> Vec<Arc<ResourceSlice>>;

    /// Which class serves each extended resource name (DRAExtendedResource).
    fn extended_resource_classes(&self) -> Arc<ExtendedResourceClasses>;

    /// A number that moves whenever anything changes that a node's DynamicResources
    /// verdict may read besides the node's NodeInfo and the pod's own claims: the device
    /// classes, the shared slices, the devices taken in pools no single node owns. The
    /// devices taken in a node's own pools move that node's generation instead. `None`
    /// (the default) where the store keeps no such number: no verdict is remembered.
    fn verdict_epoch(&self) -> Option<u64> {
        None
    }
}
