//! Partitionable devices' counters (DRAPartitionableDevices) as the structured allocator
//! keeps them (`checkAvailableCounters`, `deallocateCountersForDevice` and the pool
//! checks of `buildPool` in `internal/stable`, v1.36.2): a pool's counter sets, less what
//! its allocated devices consume, bound what the devices picked in one search may take
//! together.

use gantry_api::dra::{CounterSet, Device, DeviceId, ResourceSlice};
use gantry_api::{QuantityFormat, Sym};
use gantry_cache::{DeviceUse, DraState, NodeInfo};

use super::allocator::Features;
use super::pools::gather_pools;

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
        for device in slice.devices.iter() {
            if device.consumes_counters.is_empty() {
                continue;
            }
            let id = DeviceId {
                driver: slice.driver,
                pool: slice.pool,
                device: device.name,
            };
            // Held alone or shared (upstream's `IsDeviceAllocated`): a shared device's
            // counters are taken once, whatever its shares.
            if allocated.is_allocated(id) || allocated.shares(id).is_some() {
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

/// The binder's re-check of partitionable devices, for several instances sharing a
/// cluster: the first counter that `devices` (an allocation decided for a pod on `node`,
/// taken or not in `dra`'s index) and every other device allocated now take more of than
/// their pool has, as `explain` words it. Two instances may each give a partition of one
/// GPU (say the whole GPU and a slice of it) on views where the other's is not taken; one
/// instance, or kube-scheduler, sees its own decisions and cannot. `None` when every
/// counter the devices consume is covered, or the release leaves counters out.
pub fn overrun_at_bind(
    node: &NodeInfo,
    dra: &dyn DraState,
    release: gantry_api::Release,
    devices: &[DeviceId],
) -> Option<String> {
    let features = Features::of(release);
    if devices.is_empty() || !features.partitionable_devices {
        return None;
    }
    let node_object = node.node()?;
    let shared = dra.shared_slices();
    let pools = gather_pools(node_object, node.resource_slices(), &shared, features);
    let taken = WithDevices {
        allocated: dra.device_use(),
        devices,
    };
    let quantity = |milli: i64| QuantityFormat::BinarySI.canonical(milli);
    for pool in &pools {
        let mine: Vec<&Device> = (pool.slices.iter().chain(pool.unreached()))
            .flat_map(|s| s.devices.iter().map(move |d| (s, d)))
            .filter(|(s, d)| {
                let id = DeviceId {
                    driver: s.driver,
                    pool: s.pool,
                    device: d.name,
                };
                devices.contains(&id)
            })
            .map(|(_, d)| d)
            .collect();
        if mine.iter().all(|d| d.consumes_counters.is_empty()) {
            continue;
        }
        let left = pool.counters_left(&taken);
        let consumed = mine.iter().flat_map(|d| &d.consumes_counters);
        let overrun = consumed
            .flat_map(|c| c.counters.iter().map(move |&(name, _)| (c.counter_set, name)))
            .find_map(|(set, counter)| {
                let (_, _, available) = *left.iter().find(|e| (e.0, e.1) == (set, counter))?;
                (available < 0).then(|| {
                    format!(
                        "counter {counter} of counter set {set} in pool {} is overrun by {} with the devices allocated meanwhile",
                        pool.id.1,
                        quantity(available.saturating_neg())
                    )
                })
            });
        if overrun.is_some() {
            return overrun;
        }
    }
    None
}

/// The devices taken with `devices` added.
struct WithDevices<'a> {
    allocated: std::sync::Arc<dyn DeviceUse>,
    devices: &'a [DeviceId],
}

impl DeviceUse for WithDevices<'_> {
    fn is_allocated(&self, device: DeviceId) -> bool {
        self.devices.contains(&device) || self.allocated.is_allocated(device)
    }

    fn shares(&self, device: DeviceId) -> Option<gantry_cache::DeviceShares> {
        self.allocated.shares(device)
    }

    fn has_shares(&self) -> bool {
        self.allocated.has_shares()
    }
}
