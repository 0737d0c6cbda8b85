//! The live cluster's dynamic resource allocation state: device classes, claims as the
//! API holds them, allocations decided but not written yet (upstream's in-flight
//! allocations), the slices reachable from several nodes, and an index of the devices
//! taken. Node-local slices travel with their node's NodeInfo instead.
//!
//! Upstream's DynamicResources reads claims from its assume cache as they are, not from
//! the cycle's snapshot, and so does Gantry: every snapshot shares this one store. The
//! device index is kept up to date claim by claim, so a pod's allocation asks it about
//! each candidate device instead of copying every allocated device first (upstream's
//! `ListAllAllocatedDevices`, whose cost grows with the cluster).

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::Sym;
use gantry_api::dra::{
    AllocatedDevice, ClaimKey, DeviceClass, DeviceId, ResourceClaim, ResourceSlice,
};
use gantry_api::dra_extended::ExtendedResourceClasses;
use parking_lot::RwLock;
use smallvec::SmallVec;

use crate::dra_reach::{ChangeReach, PoolId};
use crate::dra_state::{AllocatedView, AllocatedVisitor, DeviceShares, DeviceUse, DraState};

type Map<K, V> = HashMap<K, V, RandomState>;

#[derive(Default)]
pub struct DraCache {
    store: RwLock<DraStore>,
}

#[derive(Default)]
struct DraStore {
    classes: Map<Sym, Arc<DeviceClass>>,
    /// The classes by the extended resources they serve, rebuilt when a class changes.
    extended: Arc<ExtendedResourceClasses>,
    claims: Map<ClaimKey, Arc<ResourceClaim>>,
    in_flight: Map<ClaimKey, InFlight>,
    /// How many claims (as the API holds them, or in flight) hold each device: 1 for
    /// every device taken; more only if the API holds a double allocation.
    allocated: Map<DeviceId, u32>,
    /// The same devices by pool: the names of those taken in each.
    taken_by_pool: Map<(Sym, Sym), SmallVec<[Sym; 8]>>,
    /// The shares of shared devices (DRAConsumableCapacity) the same claims hold.
    shares: Map<DeviceId, DeviceShares>,
    /// Sorted by name, so that pools are gathered in one order.
    shared_slices: Vec<Arc<ResourceSlice>>,
    /// Which nodes' verdicts each change may move.
    reach: ChangeReach,
}

impl AllocatedView for DraStore {
    fn is_allocated(&self, device: DeviceId) -> bool {
        self.allocated.contains_key(&device)
    }

    fn taken_in_pool(&self, driver: Sym, pool: Sym) -> Option<&[Sym]> {
        Some(
            self.taken_by_pool
                .get(&(driver, pool))
                .map_or(&[], |names| names.as_slice()),
        )
    }

    fn has_shares(&self) -> bool {
        !self.shares.is_empty()
    }
}

/// An allocation Reserve decided for a pod, before its binding writes it.
struct InFlight {
    pod_uid: Arc<str>,
    claim: Arc<ResourceClaim>,
}

/// The devices the claim's allocation holds (admin access holds none).
fn devices(claim: Option<&ResourceClaim>) -> Vec<DeviceId> {
    (claim.and_then(|c| c.allocation.as_ref()))
        .map(|a| a.held_device_list())
        .unwrap_or_default()
}

/// The shares the claim's allocation holds.
fn shares(claim: Option<&ResourceClaim>) -> Vec<AllocatedDevice> {
    (claim.and_then(|c| c.allocation.as_ref()))
        .map(|a| a.shares().cloned().collect())
        .unwrap_or_default()
}

impl DraStore {
    /// The claim whose allocation counts: the one in flight, else the API's.
    fn effective(&self, key: ClaimKey) -> Option<&ResourceClaim> {
        self.in_flight
            .get(&key)
            .map(|f| &*f.claim)
            .or_else(|| self.claims.get(&key).map(|c| &**c))
    }

    /// Applies `change` to the claim `key`, moving its devices in the index from its
    /// allocation before to its allocation after.
    fn change(&mut self, key: ClaimKey, change: impl FnOnce(&mut DraStore)) {
        let before = devices(self.effective(key));
        let shares_before = shares(self.effective(key));
        change(self);
        let after = devices(self.effective(key));
        let shares_after = shares(self.effective(key));
        if shares_before != shares_after {
            for share in &shares_before {
                crate::dra_shares::remove(&mut self.shares, share);
            }
            for share in &shares_after {
                crate::dra_shares::insert(&mut self.shares, share);
            }
            let shared = shares_before.iter().chain(&shares_after);
            self.reach_pools(shared.map(|share| share.device));
        }
        if before == after {
            return;
        }
        self.reach_pools(before.iter().chain(&after).copied());
        for device in before {
            if let Some(count) = self.allocated.get_mut(&device) {
                *count -= 1;
                if *count == 0 {
                    self.allocated.remove(&device);
                    let pool = (device.driver, device.pool);
                    if let Some(names) = self.taken_by_pool.get_mut(&pool) {
                        names.retain(|n| *n != device.device);
                        if names.is_empty() {
                            self.taken_by_pool.remove(&pool);
                        }
                    }
                }
            }
        }
        for device in after {
            let count = self.allocated.entry(device).or_default();
            *count += 1;
            if *count == 1 {
                self.taken_by_pool
                    .entry((device.driver, device.pool))
                    .or_default()
                    .push(device.device);
            } else {
                tracing::warn!(claim = %key.name, %device, "device allocated to two claims");
            }
        }
    }
}

impl DraStore {
    fn remove_shared_slice(&mut self, name: Sym) {
        if let Some(at) = self.shared_slices.iter().position(|s| s.name == name) {
            let old = self.shared_slices.remove(at);
            self.reach.shared_slice((old.driver, old.pool), false);
        }
    }

    /// Tells the nodes that read these devices' pools that they changed.
    fn reach_pools(&mut self, devices: impl Iterator<Item = DeviceId>) {
        let mut pools: SmallVec<[PoolId; 2]> = SmallVec::new();
        for device in devices {
            let pool = (device.driver, device.pool);
            if !pools.contains(&pool) {
                pools.push(pool);
                self.reach.device_changed(pool);
            }
        }
    }
}

impl DraCache {
    pub fn set_device_class(&self, class: Arc<DeviceClass>) {
        let mut s = self.store.write();
        s.classes.insert(class.name, class);
        s.extended = Arc::new(ExtendedResourceClasses::new(s.classes.values()));
        s.reach.everywhere();
    }

    pub fn remove_device_class(&self, name: Sym) {
        let mut s = self.store.write();
        s.classes.remove(&name);
        s.extended = Arc::new(ExtendedResourceClasses::new(s.classes.values()));
        s.reach.everywhere();
    }

    /// A claim as the API holds it (added or updated). An allocation in flight for it is
    /// done once the API holds an allocation.
    pub fn set_claim(&self, claim: Arc<ResourceClaim>) {
        let key = claim.key();
        self.store.write().change(key, |s| {
            if claim.allocation.is_some() {
                s.in_flight.remove(&key);
            }
            s.claims.insert(key, claim);
        });
    }

    pub fn remove_claim(&self, key: ClaimKey) {
        self.store.write().change(key, |s| {
            s.in_flight.remove(&key);
            s.claims.remove(&key);
        });
    }

    /// Adds or replaces a slice reachable from several nodes.
    pub fn set_shared_slice(&self, slice: Arc<ResourceSlice>) {
        let mut s = self.store.write();
        s.remove_shared_slice(slice.name);
        let at = s
            .shared_slices
            .partition_point(|old| old.name.as_str() < slice.name.as_str());
        s.reach.shared_slice((slice.driver, slice.pool), true);
        s.shared_slices.insert(at, slice);
    }

    pub fn remove_shared_slice(&self, name: Sym) {
        self.store.write().remove_shared_slice(name);
    }

    /// The cache added a node-local slice to `node`, or removed one from it.
    pub(crate) fn note_local_slice(&self, slice: &ResourceSlice, node: Sym, added: bool) {
        let pool = (slice.driver, slice.pool);
        self.store.write().reach.local_slice(pool, node, added);
    }

    /// Calls `each` with the nodes whose own pools' devices were taken or given back
    /// since the last call (their generations must move), under the store's lock.
    pub(crate) fn drain_touched_nodes(&self, each: impl FnMut(Sym)) {
        self.store.write().reach.drain_touched().for_each(each);
    }

    /// Calls `each` with the same nodes, leaving them to the next drain: a fork of the
    /// cache sees them without taking them from the cache it was forked from.
    pub(crate) fn peek_touched_nodes(&self, each: impl FnMut(Sym)) {
        self.store
            .read()
            .reach
            .touched()
            .iter()
            .copied()
            .for_each(each);
    }

    /// Reserve decided these claims' allocations for the pod: their devices are taken
    /// from now on, until the API holds them or the pod is forgotten. Claims that were
    /// allocated already (shared ones) need nothing here.
    pub fn assume_allocations(&self, pod_uid: &Arc<str>, claims: &[Arc<ResourceClaim>]) {
        let mut s = self.store.write();
        for claim in claims {
            let key = claim.key();
            let allocated_before = s.claims.get(&key).is_some_and(|c| c.allocation.is_some());
            if allocated_before || claim.allocation.is_none() {
                continue;
            }
            s.change(key, |s| {
                s.in_flight.insert(
                    key,
                    InFlight {
                        pod_uid: pod_uid.clone(),
                        claim: claim.clone(),
                    },
                );
            });
        }
    }

    /// The pod's allocations in flight are dropped (its binding failed, or it is gone).
    pub fn forget_allocations(&self, pod_uid: &str) {
        let mut s = self.store.write();
        let mut keys: Vec<ClaimKey> = s
            .in_flight
            .iter()
            .filter(|(_, f)| &*f.pod_uid == pod_uid)
            .map(|(k, _)| *k)
            .collect();
        keys.sort_unstable();
        for key in keys {
            s.change(key, |s| {
                s.in_flight.remove(&key);
            });
        }
    }

    /// The pod's allocations in flight, sorted by claim.
    pub fn in_flight_of(&self, pod_uid: &str) -> Vec<Arc<ResourceClaim>> {
        let s = self.store.read();
        let mut claims: Vec<Arc<ResourceClaim>> = s
            .in_flight
            .values()
            .filter(|f| &*f.pod_uid == pod_uid)
            .map(|f| f.claim.clone())
            .collect();
        claims.sort_by_key(|c| c.key());
        claims
    }

    /// A device of these allocations that another claim holds too (the index counts
    /// it twice): the allocation was decided on a view that is outdated now.
    pub fn device_held_twice(&self, claims: &[Arc<ResourceClaim>]) -> Option<DeviceId> {
        let s = self.store.read();
        claims
            .iter()
            .flat_map(|c| devices(Some(c)))
            .find(|d| s.allocated.get(d).is_some_and(|&n| n > 1))
    }

    /// The claim as the cache holds it now.
    pub fn claim(&self, key: ClaimKey) -> Option<Arc<ResourceClaim>> {
        self.store.read().claims.get(&key).cloned()
    }

    /// Every claim as the API holds it, sorted by key (for reports and explanations).
    pub fn claims(&self) -> Vec<Arc<ResourceClaim>> {
        let s = self.store.read();
        let mut claims: Vec<_> = s.claims.values().cloned().collect();
        claims.sort_by_key(|c| c.key());
        claims
    }

    /// The device index: how many claims hold each device, sorted by device.
    pub fn allocation_counts(&self) -> Vec<(DeviceId, u32)> {
        let s = self.store.read();
        let mut counts: Vec<_> = s.allocated.iter().map(|(d, n)| (*d, *n)).collect();
        counts.sort_unstable();
        counts
    }

    /// The shares index: what the shares of each shared device take, sorted by device.
    pub fn share_counts(&self) -> Vec<(DeviceId, DeviceShares)> {
        let s = self.store.read();
        let mut counts: Vec<_> = s.shares.iter().map(|(d, n)| (*d, n.clone())).collect();
        counts.sort_unstable_by_key(|(d, _)| *d);
        counts
    }

    /// The shares index rebuilt from the claims and the allocations in flight: what
    /// [`share_counts`](Self::share_counts) must equal, but for the order of amounts and
    /// an aggregated entry of zeros (which the index drops once a share is taken away, as
    /// upstream's tracker does, and a recount keeps).
    pub fn recount_shares(&self) -> Vec<(DeviceId, DeviceShares)> {
        let s = self.store.read();
        let mut counts: Map<DeviceId, DeviceShares> = Map::default();
        let mut keys: Vec<ClaimKey> = s.claims.keys().chain(s.in_flight.keys()).copied().collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            for share in shares(s.effective(key)) {
                crate::dra_shares::insert(&mut counts, &share);
            }
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort_unstable_by_key(|(d, _)| *d);
        counts
    }

    /// The device index rebuilt from scratch from the claims and the allocations in
    /// flight: what [`allocation_counts`](Self::allocation_counts) must always equal.
    pub fn recount_allocations(&self) -> Vec<(DeviceId, u32)> {
        let s = self.store.read();
        let mut counts: Map<DeviceId, u32> = Map::default();
        let keys = s.claims.keys().chain(s.in_flight.keys());
        let mut keys: Vec<ClaimKey> = keys.copied().collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            for device in devices(s.effective(key)) {
                *counts.entry(device).or_default() += 1;
            }
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort_unstable();
        counts
    }

    /// Whether the index by pool names exactly the devices of the index (checked with
    /// [`recount_allocations`](Self::recount_allocations) by the invariant checks).
    pub fn pools_agree(&self) -> bool {
        let s = self.store.read();
        let by_pool: usize = s.taken_by_pool.values().map(|n| n.len()).sum();
        by_pool == s.allocated.len()
            && s.allocated.keys().all(|d| {
                s.taken_by_pool
                    .get(&(d.driver, d.pool))
                    .is_some_and(|names| names.contains(&d.device))
            })
    }

    /// The claim in flight or held by the API that holds the device, if any.
    pub fn holder_of(&self, device: DeviceId) -> Option<Arc<ResourceClaim>> {
        let s = self.store.read();
        if let Some(f) = s
            .in_flight
            .values()
            .find(|f| devices(Some(&f.claim)).contains(&device))
        {
            return Some(f.claim.clone());
        }
        let mut holders: Vec<&Arc<ResourceClaim>> = s
            .claims
            .values()
            .filter(|c| devices(Some(c)).contains(&device))
            .collect();
        holders.sort_by_key(|c| c.key());
        holders.first().map(|c| (*c).clone())
    }
}

impl DeviceUse for DraCache {
    fn is_allocated(&self, device: DeviceId) -> bool {
        self.store.read().allocated.contains_key(&device)
    }

    fn shares(&self, device: DeviceId) -> Option<DeviceShares> {
        let s = self.store.read();
        if s.shares.is_empty() {
            return None;
        }
        s.shares.get(&device).cloned()
    }

    fn has_shares(&self) -> bool {
        !self.store.read().shares.is_empty()
    }

    fn with_allocated(&self, f: &mut AllocatedVisitor<'_>) {
        f(&*self.store.read());
    }

    fn holder(&self, device: DeviceId) -> Option<String> {
        self.holder_of(device)
            .map(|c| format!("{}/{}", c.namespace, c.name))
    }
}

/// The view a snapshot gives plugins: the one live store, shared.
#[derive(Clone)]
pub(crate) struct DraView(pub(crate) Arc<DraCache>);

impl std::fmt::Debug for DraView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DraView")
    }
}

impl DraState for DraView {
    fn device_class(&self, name: Sym) -> Option<Arc<DeviceClass>> {
        self.0.store.read().classes.get(&name).cloned()
    }

    fn extended_resource_classes(&self) -> Arc<ExtendedResourceClasses> {
        self.0.store.read().extended.clone()
    }

    fn claim(&self, key: ClaimKey) -> Option<Arc<ResourceClaim>> {
        self.0.store.read().claims.get(&key).cloned()
    }

    fn allocation_in_flight(&self, key: ClaimKey) -> bool {
        let s = self.0.store.read();
        s.in_flight.contains_key(&key) && s.claims.get(&key).is_none_or(|c| c.allocation.is_none())
    }

    fn allocated_devices(&self) -> Vec<DeviceId> {
        self.0.store.read().allocated.keys().copied().collect()
    }

    fn device_use(&self) -> Arc<dyn DeviceUse> {
        self.0.clone()
    }

    fn shared_slices(&self) -> Vec<Arc<ResourceSlice>> {
        self.0.store.read().shared_slices.clone()
    }

    fn verdict_epoch(&self) -> Option<u64> {
        Some(self.0.store.read().reach.epoch())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::dra::{AllocatedDevice, Allocation, ClaimSpec};

    fn device(name: &str) -> DeviceId {
        DeviceId {
            driver: Sym::new("gpu.example.com"),
            pool: Sym::new("n1"),
            device: Sym::new(name),
        }
    }

    fn claim(name: &str, devices: &[&str]) -> Arc<ResourceClaim> {
        Arc::new(ResourceClaim {
            binding_status: None,
            namespace: Sym::new("default"),
            name: Arc::from(name),
            uid: Arc::from(name),
            spec: Arc::new(ClaimSpec::default()),
            owner_pod: None,
            deleting: false,
            allocation: (!devices.is_empty()).then(|| {
                Arc::new(Allocation {
                    devices: devices
                        .iter()
                        .map(|d| AllocatedDevice::exclusive(Arc::from("r"), device(d)))
                        .collect(),
                    node_selector: None,
                })
            }),
            reserved_for: Vec::new(),
            extended_resource: false,
        })
    }

    fn view(cache: &Arc<DraCache>) -> DraView {
        DraView(cache.clone())
    }

    #[test]
    fn in_flight_allocations_take_devices_until_written_or_forgotten() {
        let cache = Arc::new(DraCache::default());
        cache.set_claim(claim("a", &[]));
        cache.set_claim(claim("b", &[]));
        let pod: Arc<str> = Arc::from("default/p");
        cache.assume_allocations(&pod, &[claim("a", &["gpu-0"])]);
        let a = claim("a", &[]).key();
        assert!(view(&cache).allocation_in_flight(a));
        assert!(cache.is_allocated(device("gpu-0")));
        assert_eq!(cache.allocation_counts(), cache.recount_allocations());
        // Forgotten: free again.
        cache.forget_allocations(&pod);
        assert!(!cache.is_allocated(device("gpu-0")) && !view(&cache).allocation_in_flight(a));
        // Written: the API's claim replaces the one in flight, the device stays taken once.
        cache.assume_allocations(&pod, &[claim("a", &["gpu-0"])]);
        cache.set_claim(claim("a", &["gpu-0"]));
        assert!(!view(&cache).allocation_in_flight(a));
        assert_eq!(cache.allocation_counts(), vec![(device("gpu-0"), 1)]);
        assert_eq!(cache.allocation_counts(), cache.recount_allocations());
        assert!(cache.pools_agree());
        // Deleted: its devices are free.
        cache.remove_claim(a);
        assert!(cache.allocation_counts().is_empty());
        assert!(cache.pools_agree());
    }

    #[test]
    fn a_device_another_claim_took_meanwhile_is_found() {
        let cache = Arc::new(DraCache::default());
        cache.set_claim(claim("a", &[]));
        let pod: Arc<str> = Arc::from("default/p");
        let mine = vec![claim("a", &["gpu-0", "gpu-1"])];
        cache.assume_allocations(&pod, &mine);
        assert_eq!(cache.in_flight_of(&pod), mine);
        assert_eq!(cache.device_held_twice(&mine), None);
        // Another instance's bind, seen through the watch.
        cache.set_claim(claim("b", &["gpu-1"]));
        assert_eq!(cache.device_held_twice(&mine), Some(device("gpu-1")));
        assert_eq!(
            cache.holder_of(device("gpu-0")).map(|c| c.key()),
            Some(claim("a", &[]).key())
        );
        assert_eq!(cache.allocation_counts(), cache.recount_allocations());
    }
}
