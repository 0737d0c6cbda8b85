//! What the DynamicResources plugin reads besides the nodes: device classes, claims with
//! their allocations, which devices are taken, and the slices not local to one node.
//! A node's own slices travel with its NodeInfo.

use std::sync::Arc;

use gantry_api::Sym;
use gantry_api::dra::{ClaimKey, DeviceClass, DeviceId, ResourceClaim, ResourceSlice};

pub trait DraState: Sync {
    fn device_class(&self, name: Sym) -> Option<&Arc<DeviceClass>>;

    /// The claim as it stands now (allocation and reservations included).
    fn claim(&self, key: ClaimKey) -> Option<&Arc<ResourceClaim>>;

    /// Every allocated device, each once, in no particular order.
    fn allocated_devices(&self) -> Vec<DeviceId>;

    /// ResourceSlices reachable from several nodes (a node selector, or all nodes).
    fn shared_slices(&self) -> &[Arc<ResourceSlice>];
}
