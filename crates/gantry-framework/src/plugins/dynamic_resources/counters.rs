//! Partitionable devices' counters (DRAPartitionableDevices) as the structured allocator
//! keeps them (`checkAvailableCounters`, `deallocateCountersForDevice` and the pool
//! checks of `buildPool` in `internal/stable`, v1.36.2): a pool's counter sets, less what
//! its allocated devices consume, bound what the devices picked in one search may take
//! together.

use gantry_api::Sym;
use gantry_api::dra::{CounterSet, Device, DeviceId, ResourceSlice};
use gantry_cache::DeviceUse;

/// Counters by counter set and name: what is left, or what a search has taken.
pub(super) type CounterTable = Vec<(Sym, Sym, i64)>;

/// Upstream's `getAndValidateCounterSets` and `validateDeviceCounterConsumption`: whether
/// the pool is invalid because two counter slices name one counter set, or a device
/// consumes a counter set or counter the pool lacks.
pub(super) fn pool_is_invalid<'a>(
    counter_sets: &[&CounterSet],
    devices: impl Iterator<Item = &'a Device>,
) -> bool {
    let duplicate = (counter_sets.iter().enumerate())
        .any(|(i, set)| counter_sets[..i].iter().any(|s| s.name == set.name));
    duplicate || {
        let mut consumptions = devices.flat_map(|d| &d.consumes_counters);
        consumptions.any(|consumption| {
            match counter_sets
                .iter()
                .find(|s| s.name == consumption.counter_set)
            {
                None => true,
                Some(set) => (consumption.counters.iter())
                    .any(|(name, _)| !set.counters.iter().any(|(n, _)| n == name)),
            }
        })
    }
}

/// The pool's counters less what its allocated devices (in `device_slices`, whether the
/// node reaches them or not) consume; a counter may go below zero, which leaves nothing.
pub(super) fn left_after_allocated<'a>(
    counter_sets: &[&CounterSet],
    device_slices: impl Iterator<Item = &'a ResourceSlice>,
    allocated: &dyn DeviceUse,
) -> CounterTable {
    let mut left: CounterTable = (counter_sets.iter())
        .flat_map(|set| (set.counters.iter()).map(|&(name, value)| (set.name, name, value)))
        .collect();
    for slice in device_slices {
        for device in &slice.devices {
            if device.consumes_counters.is_empty() {
                continue;
            }
            let id = DeviceId {
                driver: slice.driver,
                pool: slice.pool,
                device: device.name,
            };
            if allocated.is_allocated(id) {
                change(&mut left, device, false);
            }
        }
    }
    left
}

/// Adds (`add`) or takes away what `device` consumes, entry by entry; an entry `table`
/// lacks is added (upstream's consumed map grows the same way), except when taking away.
pub(super) fn change(table: &mut CounterTable, device: &Device, add: bool) {
    for consumption in &device.consumes_counters {
        for &(name, value) in &consumption.counters {
            let key = (consumption.counter_set, name);
            match table.iter_mut().find(|(set, n, _)| (*set, *n) == key) {
                Some(entry) if add => entry.2 = entry.2.saturating_add(value),
                Some(entry) => entry.2 = entry.2.saturating_sub(value),
                None if add => table.push((key.0, key.1, value)),
                None => {}
            }
        }
    }
}

/// Upstream's last step of `checkAvailableCounters`: every counter left covers what the
/// search has taken of it.
pub(super) fn covers(left: &CounterTable, taken: &CounterTable) -> bool {
    left.iter().all(|&(set, name, available)| {
        let consumed = (taken.iter())
            .find(|(s, n, _)| (*s, *n) == (set, name))
            .map_or(0, |e| e.2);
        available >= consumed
    })
}
