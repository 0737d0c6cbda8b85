//! The shares of shared devices (DRAConsumableCapacity) at the simulated API: what the
//! claims' shares take of each device, summed from the claims themselves (apart from the
//! allocator's and the cache's bookkeeping), so that the API can refuse a write that
//! gives a device more than it has and the invariants can check that none does.

use std::collections::BTreeMap;
use std::sync::Arc;

use gantry_api::dra::{CapacityAmounts, DeviceId, ResourceClaim, ResourceSlice};
use gantry_api::{QuantityFormat, dra_capacity};

/// What the shares of each device take together.
pub(crate) type ShareTotals = BTreeMap<DeviceId, CapacityAmounts>;

/// Adds the shares `claim`'s allocation holds to `totals`.
pub(crate) fn add_shares(totals: &mut ShareTotals, claim: &ResourceClaim) {
    for result in claim.allocation.iter().flat_map(|a| a.shares()) {
        if let Some(share) = &result.share {
            let total = totals.entry(result.device).or_default();
            dra_capacity::add_amounts(total, &share.consumed, 1);
        }
    }
}

/// The first device of `totals` (in device order) whose shares take more of a capacity
/// than its slice in `slices` gives it, as `capacity C of device D/P/N is overrun by Q`.
pub(crate) fn capacity_overrun(
    slices: &[Arc<ResourceSlice>],
    totals: &ShareTotals,
) -> Option<String> {
    for (id, total) in totals {
        let device = slices
            .iter()
            .filter(|s| (s.driver, s.pool) == (id.driver, id.pool))
            .flat_map(|s| s.devices.iter())
            .find(|d| d.name == id.device);
        let Some(device) = device else {
            continue;
        };
        for capacity in &device.capacity {
            let over = dra_capacity::amount(total, capacity.key).saturating_sub(capacity.value);
            if over > 0 {
                return Some(format!(
                    "capacity {} of device {id} is overrun by {}",
                    capacity.key,
                    QuantityFormat::BinarySI.canonical(over)
                ));
            }
        }
    }
    None
}
