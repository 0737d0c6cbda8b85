//! The shares of shared devices (DRAConsumableCapacity) that allocation results hold,
//! counted as upstream's claim tracker counts them (`allocateddevices.go` with
//! `ConsumedCapacityCollection.Insert` and `Remove`, v1.36.3): a result with a share ID
//! adds one share of its device and, when it names consumed capacity, adds that to the
//! device's aggregated entry; taking it away subtracts, and drops the entry once every
//! amount in it is zero.

use std::collections::HashMap;
use std::hash::BuildHasher;

use gantry_api::dra::{AllocatedDevice, DeviceId};
use gantry_api::dra_capacity;

use crate::dra_state::DeviceShares;

/// Counts the share `result` holds.
pub fn insert<S: BuildHasher>(
    shares: &mut HashMap<DeviceId, DeviceShares, S>,
    result: &AllocatedDevice,
) {
    let Some(share) = &result.share else {
        return;
    };
    let entry = shares.entry(result.device).or_default();
    entry.count += 1;
    if !share.consumed.is_empty() {
        match &mut entry.consumed {
            Some(total) => dra_capacity::add_amounts(total, &share.consumed, 1),
            None => entry.consumed = Some(share.consumed.clone()),
        }
    }
}

/// Takes away the share `result` held.
pub fn remove<S: BuildHasher>(
    shares: &mut HashMap<DeviceId, DeviceShares, S>,
    result: &AllocatedDevice,
) {
    let (Some(share), Some(entry)) = (&result.share, shares.get_mut(&result.device)) else {
        return;
    };
    entry.count = entry.count.saturating_sub(1);
    if !share.consumed.is_empty()
        && let Some(total) = &mut entry.consumed
    {
        dra_capacity::add_amounts(total, &share.consumed, -1);
        if dra_capacity::all_zero(total) {
            entry.consumed = None;
        }
    }
    if entry.count == 0 && entry.consumed.is_none() {
        shares.remove(&result.device);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gantry_api::Sym;
    use gantry_api::dra::DeviceShare;

    use super::*;

    fn share(memory: i64) -> AllocatedDevice {
        AllocatedDevice {
            share: Some(Arc::new(DeviceShare {
                id: Arc::from("0f6b5d3e-8f0a-4c47-9a43-000000000001"),
                consumed: vec![(Sym::new("memory"), memory)],
            })),
            ..AllocatedDevice::exclusive(
                Arc::from("r"),
                DeviceId {
                    driver: Sym::new("gpu.example.com"),
                    pool: Sym::new("n1"),
                    device: Sym::new("gpu-0"),
                },
            )
        }
    }

    #[test]
    fn shares_add_up_and_come_off() {
        let mut shares: HashMap<DeviceId, DeviceShares> = HashMap::new();
        insert(&mut shares, &share(10));
        insert(&mut shares, &share(5));
        let device = share(0).device;
        assert_eq!(
            shares[&device],
            DeviceShares {
                count: 2,
                consumed: Some(vec![(Sym::new("memory"), 15)])
            }
        );
        remove(&mut shares, &share(10));
        assert_eq!(
            shares[&device].consumed,
            Some(vec![(Sym::new("memory"), 5)])
        );
        remove(&mut shares, &share(5));
        assert!(shares.is_empty(), "{shares:?}");
    }

    #[test]
    fn a_share_of_nothing_keeps_no_aggregated_entry() {
        // Upstream's tracker adds capacity only for a result that names some, and its
        // `Remove` drops an entry whose amounts are all zero.
        let mut shares: HashMap<DeviceId, DeviceShares> = HashMap::new();
        let mut none = share(0);
        none.share = Some(Arc::new(DeviceShare {
            id: Arc::from("0f6b5d3e-8f0a-4c47-9a43-000000000002"),
            consumed: Vec::new(),
        }));
        insert(&mut shares, &none);
        assert_eq!(shares[&none.device].consumed, None);
        insert(&mut shares, &share(3));
        remove(&mut shares, &share(3));
        assert_eq!(
            shares[&none.device],
            DeviceShares {
                count: 1,
                consumed: None
            }
        );
    }
}
