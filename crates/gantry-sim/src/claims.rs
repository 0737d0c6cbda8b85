//! ResourceClaims at the simulated API, and the controllers that look after them:
//! the resource-claim controller makes a pod's claims from its templates
//! (`<pod>-<claim>-<5 chars>`, owned by the pod) and, when a pod is gone, takes it out of
//! `reservedFor`, deallocates a claim nobody uses and deletes the claims the pod owned,
//! as the claim controller and the garbage collector do.

use std::collections::BTreeMap;
use std::sync::Arc;

use gantry_api::dra::{
    ClaimKey, ClaimSource, DeviceId, ResourceClaim, ResourceClaimStatus, ResourceClaimTemplate,
    ResourceSlice,
};
use gantry_api::rng::Rng;
use gantry_api::{Pod, QuantityFormat, Sym};

use crate::claim_shares::{ShareTotals, add_shares, capacity_overrun};
use crate::driver_binding::{Answer, answered};

/// A change to a claim, as the watch delivers it.
#[derive(Debug, Clone)]
pub(crate) enum ClaimChange {
    Set(Arc<ResourceClaim>),
    Deleted(ClaimKey),
}

/// Upstream's `utilrand.String` alphabet: no vowels, no confusable characters.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The name the claim controller gives a pod's claim: the `generateName` `<pod>-<claim>-`,
/// or past 57 bytes both names cut in proportion as `<pod>-<claim>` (no final hyphen),
/// then the API server's five random characters
/// (`pkg/controller/resourceclaim/controller.go`, `handleClaim`).
pub(crate) fn generated_claim_name(pod: &str, claim: &str, rng: &mut Rng) -> String {
    const MAX_BASE_LEN: usize = 57;
    let mut base = format!("{pod}-{claim}-");
    if base.len() > MAX_BASE_LEN {
        let total = base.len();
        let cut = |s: &str| -> String {
            let keep = s.len() * MAX_BASE_LEN / total;
            s.char_indices()
                .take_while(|(i, c)| i + c.len_utf8() <= keep)
                .map(|(_, c)| c)
                .collect()
        };
        base = format!("{}-{}", cut(pod), cut(claim));
    }
    for _ in 0..5 {
        base.push(ALPHANUMS[rng.below(ALPHANUMS.len() as u64) as usize] as char);
    }
    base
}

/// Why the API refused a claim write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClaimRefusal {
    /// The claim is gone.
    NotFound(ClaimKey),
    /// It was allocated differently meanwhile (upstream: a conflict on its
    /// resourceVersion, `claim ... got allocated elsewhere in the meantime`).
    AllocatedElsewhere(ClaimKey),
    /// The pod only reserves the claim, and it was deallocated meanwhile (its last user
    /// went): the API server refuses a reservation on an unallocated claim.
    Deallocated(ClaimKey),
    /// A device of the new allocation is held by another claim: the decision was made
    /// on a view that another instance's binding has outdated.
    DeviceTaken { claim: ClaimKey, device: DeviceId },
    /// The new allocations' partitions, with the devices allocated already, take more of
    /// a counter than their pool has (another instance gave another partition of the same
    /// device meanwhile).
    CounterOverrun { claim: ClaimKey, overrun: String },
    /// The new allocations' shares, with the shares held already, take more of a shared
    /// device's capacity than it has (another instance gave a share of it meanwhile).
    CapacityOverrun { claim: ClaimKey, overrun: String },
}

impl std::fmt::Display for ClaimRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClaimRefusal::NotFound(key) => {
                write!(f, "resourceclaim {}/{} not found", key.namespace, key.name)
            }
            ClaimRefusal::AllocatedElsewhere(key) => write!(
                f,
                "claim {}/{} got allocated elsewhere in the meantime",
                key.namespace, key.name
            ),
            ClaimRefusal::Deallocated(key) => write!(
                f,
                "add reservation to claim {}/{}: status.reservedFor: Forbidden: the claim is not allocated any more",
                key.namespace, key.name
            ),
            ClaimRefusal::DeviceTaken { claim, device } => write!(
                f,
                "claim {}/{}: device {device} is already allocated to another claim",
                claim.namespace, claim.name
            ),
            ClaimRefusal::CounterOverrun { claim, overrun } => write!(
                f,
                "claim {}/{}: {overrun} with the devices allocated already",
                claim.namespace, claim.name
            ),
            ClaimRefusal::CapacityOverrun { claim, overrun } => write!(
                f,
                "claim {}/{}: {overrun} with the shares allocated already",
                claim.namespace, claim.name
            ),
        }
    }
}

/// The claims and templates the API holds, with the devices allocated.
pub(crate) struct ClaimStore {
    claims: BTreeMap<ClaimKey, Arc<ResourceClaim>>,
    templates: BTreeMap<ClaimKey, Arc<ResourceClaimTemplate>>,
    /// The claim holding each allocated device.
    holders: BTreeMap<DeviceId, ClaimKey>,
    /// How many shares of each shared device the claims hold.
    shared: BTreeMap<DeviceId, u32>,
    names: Rng,
}

impl ClaimStore {
    pub fn new(
        claims: &[ResourceClaim],
        templates: &[ResourceClaimTemplate],
        seed: u64,
    ) -> ClaimStore {
        let mut store = ClaimStore {
            claims: BTreeMap::new(),
            templates: templates
                .iter()
                .map(|t| (t.key(), Arc::new(t.clone())))
                .collect(),
            holders: BTreeMap::new(),
            shared: BTreeMap::new(),
            names: Rng::new(seed ^ 0xC1A1_3C0D),
        };
        for claim in claims {
            store.put(Arc::new(claim.clone()));
        }
        store
    }

    pub fn get(&self, key: ClaimKey) -> Option<&Arc<ResourceClaim>> {
        self.claims.get(&key)
    }

    pub fn claims(&self) -> impl Iterator<Item = &Arc<ResourceClaim>> {
        self.claims.values()
    }

    fn put(&mut self, claim: Arc<ResourceClaim>) {
        let key = claim.key();
        self.unhold(key);
        for device in devices(&claim) {
            self.holders.insert(device, key);
        }
        for device in shared_devices(&claim) {
            *self.shared.entry(device).or_default() += 1;
        }
        self.claims.insert(key, claim);
    }

    fn unhold(&mut self, key: ClaimKey) {
        if let Some(old) = self.claims.get(&key) {
            for device in devices(old) {
                if self.holders.get(&device) == Some(&key) {
                    self.holders.remove(&device);
                }
            }
            for device in shared_devices(old) {
                if let Some(count) = self.shared.get_mut(&device) {
                    *count -= 1;
                    if *count == 0 {
                        self.shared.remove(&device);
                    }
                }
            }
        }
    }

    fn delete(&mut self, key: ClaimKey) {
        self.unhold(key);
        self.claims.remove(&key);
    }

    /// A claim a user created (a replayed trace's): held as it is, unless one of that name
    /// is held already (then nothing changes).
    pub fn create(&mut self, claim: Arc<ResourceClaim>) -> Option<ClaimChange> {
        if self.claims.contains_key(&claim.key()) {
            return None;
        }
        self.put(claim.clone());
        Some(ClaimChange::Set(claim))
    }

    /// A claim a user deleted: gone, unless pods still use it (reserved): then it is
    /// being deleted (no new pod may use it, as the API server's finalizer keeps it).
    pub fn delete_by_user(&mut self, key: ClaimKey) -> Option<ClaimChange> {
        let claim = self.claims.get(&key)?;
        if claim.reserved_for.is_empty() {
            self.delete(key);
            return Some(ClaimChange::Deleted(key));
        }
        let mut deleting = ResourceClaim::clone(claim);
        deleting.deleting = true;
        let deleting = Arc::new(deleting);
        self.put(deleting.clone());
        Some(ClaimChange::Set(deleting))
    }

    /// The claim controller's work for a new pod: a claim for each template entry that
    /// has none yet, named in the pod's `status.resourceClaimStatuses`. Returns the pod as
    /// the controller leaves it and the claims it made. A template that does not exist
    /// makes no claim (the pod then waits for one, as upstream's would).
    pub fn make_template_claims(&mut self, pod: &Arc<Pod>) -> (Arc<Pod>, Vec<ClaimChange>) {
        let needs_claim = |e: &gantry_api::dra::PodResourceClaim| {
            matches!(e.source, ClaimSource::Template(_)) && !pod.has_claim_status(&e.name)
        };
        if !pod.resource_claims.iter().any(needs_claim) {
            return (pod.clone(), Vec::new());
        }
        let mut statuses: Vec<ResourceClaimStatus> = pod
            .claim_statuses
            .iter()
            .flat_map(|s| s.iter().cloned())
            .collect();
        let mut made = Vec::new();
        for entry in pod.resource_claims.iter().filter(|e| needs_claim(e)) {
            let ClaimSource::Template(template) = entry.source else {
                continue;
            };
            let template_key = ClaimKey {
                namespace: pod.namespace,
                name: template,
            };
            let Some(template) = self.templates.get(&template_key).cloned() else {
                continue;
            };
            let name: Arc<str> = loop {
                let name = generated_claim_name(&pod.name, &entry.name, &mut self.names);
                let key = ClaimKey {
                    namespace: pod.namespace,
                    name: Sym::new(&name),
                };
                if !self.claims.contains_key(&key) {
                    break Arc::from(name);
                }
            };
            let claim = Arc::new(template.claim_for(pod, name.clone()));
            self.put(claim.clone());
            made.push(ClaimChange::Set(claim));
            statuses.push(ResourceClaimStatus {
                name: entry.name.clone(),
                claim: name,
            });
        }
        // The pod's own status changes; its template (spec) stays shared.
        let mut updated = Pod::clone(pod);
        updated.claim_statuses = Some(statuses.into());
        (Arc::new(updated), made)
    }

    /// Writes claims' status as a scheduler's PreBind sent it: refused if a claim is
    /// gone, was allocated differently meanwhile, or would take a device another claim
    /// holds or a counter (of a pool in `slices`) the devices allocated already leave too
    /// little of; nothing is written unless every claim is.
    pub fn write(
        &mut self,
        claims: &[Arc<ResourceClaim>],
        allocated_now: &[ClaimKey],
        slices: &[Arc<ResourceSlice>],
    ) -> Result<Vec<ClaimChange>, ClaimRefusal> {
        for claim in claims {
            let key = claim.key();
            // The claim for a pod's extended resources is made by this write.
            let made_now = claim.extended_resource && allocated_now.contains(&key);
            let current = match self.claims.get(&key) {
                Some(current) => current,
                None if made_now => {
                    self.check_devices_free(claim)?;
                    continue;
                }
                None => return Err(ClaimRefusal::NotFound(key)),
            };
            if !allocated_now.contains(&key) {
                // Only a reservation: the claim must still hold the allocation PreFilter
                // saw (the API server refuses `reservedFor` on an unallocated claim).
                match (&current.allocation, &claim.allocation) {
                    (None, _) => return Err(ClaimRefusal::Deallocated(key)),
                    (Some(held), Some(seen)) if held != seen => {
                        return Err(ClaimRefusal::AllocatedElsewhere(key));
                    }
                    _ => continue,
                }
            }
            if current.allocation.is_some() {
                return Err(ClaimRefusal::AllocatedElsewhere(key));
            }
            self.check_devices_free(claim)?;
        }
        if !slices.is_empty() {
            self.check_counters_with(claims, allocated_now, slices)?;
            self.check_shares_with(claims, allocated_now, slices)?;
        }
        let mut changes = Vec::with_capacity(claims.len());
        for claim in claims {
            let mut written = ResourceClaim::clone(claim);
            // Reservations others made meanwhile stay.
            if let Some(current) = self.claims.get(&claim.key()) {
                for consumer in &current.reserved_for {
                    if !written.is_reserved_for(&consumer.uid) {
                        written.reserved_for.push(consumer.clone());
                    }
                }
            }
            let written = Arc::new(written);
            self.put(written.clone());
            changes.push(ClaimChange::Set(written));
        }
        Ok(changes)
    }

    /// Refused if the claim's new allocation takes a device another claim holds (whole,
    /// or a share of it where the claim wants it whole).
    fn check_devices_free(&self, claim: &ResourceClaim) -> Result<(), ClaimRefusal> {
        let key = claim.key();
        for device in devices(claim) {
            let held_by_another = self.holders.get(&device).is_some_and(|h| *h != key);
            if held_by_another || self.shared.contains_key(&device) {
                return Err(ClaimRefusal::DeviceTaken { claim: key, device });
            }
        }
        for device in shared_devices(claim) {
            if self
                .holders
                .get(&device)
                .is_some_and(|holder| *holder != key)
            {
                return Err(ClaimRefusal::DeviceTaken { claim: key, device });
            }
        }
        Ok(())
    }

    /// A claim freed by a scheduler's PostFilter (no allocation, no reservation), written
    /// on the version that scheduler saw, as upstream's `UpdateStatus` of the claim from
    /// its cycle state: refused (`None`) if the claim changed since, e.g. a pod the
    /// scheduler has not seen yet reserved it.
    pub fn deallocate(&mut self, seen: &ResourceClaim) -> Option<ClaimChange> {
        let key = seen.key();
        let current = self.claims.get(&key)?;
        if **current != *seen {
            return None;
        }
        let mut freed = ResourceClaim::clone(current);
        freed.allocation = None;
        freed.reserved_for.clear();
        // Upstream's PostFilter clears the devices' status with the allocation.
        freed.binding_status = None;
        let freed = Arc::new(freed);
        self.put(freed.clone());
        Some(ClaimChange::Set(freed))
    }

    /// A claim made for a pod's extended resources and left behind, deleted by a
    /// scheduler's PostFilter: refused (`None`) if it changed since that scheduler saw it
    /// (upstream removes the finalizer with an update conditioned on its version).
    pub fn delete_left_behind(&mut self, seen: &ResourceClaim) -> Option<ClaimChange> {
        let key = seen.key();
        if **self.claims.get(&key)? != *seen {
            return None;
        }
        self.delete(key);
        Some(ClaimChange::Deleted(key))
    }

    /// The simulated drivers' answer to the binding conditions of `claims` (see
    /// [`answered`]); a claim gone or freed since gets nothing.
    pub fn answer_binding_conditions(
        &mut self,
        claims: &[ClaimKey],
        answer: Answer,
    ) -> Vec<ClaimChange> {
        let mut changes = Vec::new();
        for key in claims {
            let Some(updated) = self.claims.get(key).and_then(|c| answered(c, answer)) else {
                continue;
            };
            let updated = Arc::new(updated);
            self.put(updated.clone());
            changes.push(ClaimChange::Set(updated));
        }
        changes
    }

    /// A failed binding's Unreserve: the pod leaves the `reservedFor` of its claims; their
    /// allocations stay (upstream patches out the reservation only).
    pub fn unreserve(&mut self, pod: &Pod) -> Vec<ClaimChange> {
        // The claim made for its extended resources is deleted, as upstream's Unreserve
        // deletes it.
        let mut changes = self.delete_extended_claim_of(pod);
        for entry in pod.resource_claims.iter() {
            let key = ClaimKey {
                namespace: pod.namespace,
                name: Sym::new(&pod.claim_name(entry)),
            };
            let Some(claim) = self.claims.get(&key) else {
                continue;
            };
            if !claim.is_reserved_for(&pod.uid) {
                continue;
            }
            let mut updated = ResourceClaim::clone(claim);
            updated.reserved_for.retain(|c| c.uid != pod.uid);
            let updated = Arc::new(updated);
            self.put(updated.clone());
            changes.push(ClaimChange::Set(updated));
        }
        changes
    }

    /// Deletes the claim made for the pod's extended resources (DRAExtendedResource), if
    /// it has one.
    fn delete_extended_claim_of(&mut self, pod: &Pod) -> Vec<ClaimChange> {
        if !gantry_api::dra_extended::asks_for_extended_resources(pod) {
            return Vec::new();
        }
        let key = gantry_api::dra_extended::extended_claim_key(pod);
        let owned = self
            .claims
            .get(&key)
            .is_some_and(|c| c.extended_resource && c.owner_pod.as_deref() == Some(&*pod.uid));
        if !owned {
            return Vec::new();
        }
        self.delete(key);
        vec![ClaimChange::Deleted(key)]
    }

    /// The garbage collector's work for a pod deleted before it was bound: the claims it
    /// owned go.
    pub fn delete_owned_by(&mut self, pod_uid: &str) -> Vec<ClaimChange> {
        let owned: Vec<ClaimKey> = self
            .claims
            .values()
            .filter(|c| c.owner_pod.as_deref() == Some(pod_uid))
            .map(|c| c.key())
            .collect();
        owned
            .into_iter()
            .map(|key| {
                self.delete(key);
                ClaimChange::Deleted(key)
            })
            .collect()
    }

    /// The controllers' work once a pod is gone: it leaves `reservedFor`; a claim no
    /// pod uses any more is deallocated; claims the pod owned are deleted.
    pub fn release(&mut self, pod: &Pod) -> Vec<ClaimChange> {
        let mut changes = self.delete_extended_claim_of(pod);
        for entry in pod.resource_claims.iter() {
            let key = ClaimKey {
                namespace: pod.namespace,
                name: Sym::new(&pod.claim_name(entry)),
            };
            let Some(claim) = self.claims.get(&key).cloned() else {
                continue;
            };
            if claim.owner_pod.as_deref() == Some(&*pod.uid) {
                self.delete(key);
                changes.push(ClaimChange::Deleted(key));
                continue;
            }
            if !claim.is_reserved_for(&pod.uid) {
                continue;
            }
            let mut updated = ResourceClaim::clone(&claim);
            updated.reserved_for.retain(|c| c.uid != pod.uid);
            if updated.reserved_for.is_empty() {
                updated.allocation = None;
            }
            let updated = Arc::new(updated);
            self.put(updated.clone());
            changes.push(ClaimChange::Set(updated));
        }
        changes
    }
}

impl ClaimStore {
    /// The claims' invariants: no device held by two claims, the index of holders as a
    /// recount finds it, and every reservation on an allocated claim.
    pub fn check(&self) -> Result<(), String> {
        let mut holders: BTreeMap<DeviceId, ClaimKey> = BTreeMap::new();
        let mut shared: BTreeMap<DeviceId, u32> = BTreeMap::new();
        for claim in self.claims.values() {
            for device in shared_devices(claim) {
                *shared.entry(device).or_default() += 1;
            }
            for device in devices(claim) {
                if let Some(other) = holders.insert(device, claim.key()) {
                    return Err(format!(
                        "device {device} is allocated to claims {}/{} and {}/{}",
                        other.namespace, other.name, claim.namespace, claim.name
                    ));
                }
            }
            if claim.allocation.is_none() && !claim.reserved_for.is_empty() {
                return Err(format!(
                    "claim {}/{} is reserved but not allocated",
                    claim.namespace, claim.name
                ));
            }
        }
        if holders != self.holders || shared != self.shared {
            return Err("the API's index of allocated devices disagrees with its claims".into());
        }
        if let Some(device) = holders.keys().find(|d| shared.contains_key(d)) {
            return Err(format!("device {device} is held alone and shared"));
        }
        Ok(())
    }

    /// The counters of the pools in `slices` that the new allocations among `claims` take
    /// from, with the devices allocated already: refused if one is overrun.
    fn check_counters_with(
        &self,
        claims: &[Arc<ResourceClaim>],
        allocated_now: &[ClaimKey],
        slices: &[Arc<ResourceSlice>],
    ) -> Result<(), ClaimRefusal> {
        let new: Vec<(ClaimKey, DeviceId)> = (claims.iter())
            .filter(|c| allocated_now.contains(&c.key()))
            .flat_map(|c| devices(c).into_iter().map(move |d| (c.key(), d)))
            .collect();
        let pools: Vec<(Sym, Sym)> = new.iter().map(|(_, d)| (d.driver, d.pool)).collect();
        let new_shares: Vec<DeviceId> = (claims.iter())
            .filter(|c| allocated_now.contains(&c.key()))
            .flat_map(|c| shared_devices(c))
            .collect();
        let taken =
            |d: DeviceId| self.holds(d) || new.iter().any(|n| n.1 == d) || new_shares.contains(&d);
        match (counter_overrun(slices, &taken, Some(&pools)), new.first()) {
            (Some(overrun), Some(&(claim, _))) => {
                Err(ClaimRefusal::CounterOverrun { claim, overrun })
            }
            _ => Ok(()),
        }
    }

    /// No counter of a pool (partitionable devices) is consumed beyond what the pool's
    /// counter sets in `slices` hold by the devices allocated: summed here from the
    /// claims, apart from the allocator's and the binder's own bookkeeping.
    pub fn check_counters(&self, slices: &[Arc<ResourceSlice>]) -> Result<(), String> {
        match counter_overrun(slices, &|d| self.holds(d), None) {
            Some(overrun) => Err(format!("{overrun} by the devices allocated")),
            None => Ok(()),
        }
    }

    /// Whether a claim holds the device, alone or a share of it (its counters are taken).
    fn holds(&self, device: DeviceId) -> bool {
        self.holders.contains_key(&device) || self.shared.contains_key(&device)
    }

    /// The capacities of the shared devices the new allocations among `claims` take
    /// shares of, with the shares held already: refused if one is overrun.
    fn check_shares_with(
        &self,
        claims: &[Arc<ResourceClaim>],
        allocated_now: &[ClaimKey],
        slices: &[Arc<ResourceSlice>],
    ) -> Result<(), ClaimRefusal> {
        let new: Vec<&Arc<ResourceClaim>> = (claims.iter())
            .filter(|c| allocated_now.contains(&c.key()) && !shared_devices(c).is_empty())
            .collect();
        let Some(first) = new.first() else {
            return Ok(());
        };
        let mut totals = ShareTotals::new();
        for claim in self.claims.values().chain(new.iter().copied()) {
            add_shares(&mut totals, claim);
        }
        let touched: Vec<DeviceId> = new.iter().flat_map(|c| shared_devices(c)).collect();
        totals.retain(|d, _| touched.contains(d));
        match capacity_overrun(slices, &totals) {
            Some(overrun) => Err(ClaimRefusal::CapacityOverrun {
                claim: first.key(),
                overrun,
            }),
            None => Ok(()),
        }
    }

    /// No shared device's capacity (in `slices`) is taken beyond what it has by the
    /// claims' shares: summed here from the claims.
    pub fn check_shares(&self, slices: &[Arc<ResourceSlice>]) -> Result<(), String> {
        let mut totals = ShareTotals::new();
        for claim in self.claims.values() {
            add_shares(&mut totals, claim);
        }
        match capacity_overrun(slices, &totals) {
            Some(overrun) => Err(format!("{overrun} by the shares allocated")),
            None => Ok(()),
        }
    }

    /// Whether the bound pod's claims are all allocated and reserved for it (the claim
    /// made for its extended resources too, where it has one).
    pub fn holds_claims_of(&self, pod: &Pod) -> bool {
        let extended_held = !gantry_api::dra_extended::asks_for_extended_resources(pod)
            || (self
                .claims
                .get(&gantry_api::dra_extended::extended_claim_key(pod)))
            .is_none_or(|c| c.allocation.is_some() && c.is_reserved_for(&pod.uid));
        extended_held
            && pod.resource_claims.iter().all(|entry| {
                let key = ClaimKey {
                    namespace: pod.namespace,
                    name: Sym::new(&pod.claim_name(entry)),
                };
                self.claims
                    .get(&key)
                    .is_some_and(|c| c.allocation.is_some() && c.is_reserved_for(&pod.uid))
            })
    }
}

/// The first counter, by name, that the devices `taken` consume beyond what their pool's
/// counter sets in `slices` hold, among the pools (driver, pool) of `pools` (every pool
/// if `None`), as `counter C of counter set S in pool D/P is overrun by Q`.
fn counter_overrun(
    slices: &[Arc<ResourceSlice>],
    taken: &dyn Fn(DeviceId) -> bool,
    pools: Option<&[(Sym, Sym)]>,
) -> Option<String> {
    // By name, not by interned symbol: the first overrun is found in name order.
    type Key = (String, String, String, String);
    let mut left: BTreeMap<Key, i64> = BTreeMap::new();
    let key = |slice: &ResourceSlice, set: Sym, counter: Sym| -> Key {
        let name = |sym: Sym| sym.as_str().to_string();
        (
            name(slice.driver),
            name(slice.pool),
            name(set),
            name(counter),
        )
    };
    let concerned =
        |slice: &ResourceSlice| pools.is_none_or(|p| p.contains(&(slice.driver, slice.pool)));
    for slice in slices.iter().filter(|s| concerned(s)) {
        for set in &slice.shared_counters {
            for &(counter, value) in &set.counters {
                left.insert(key(slice, set.name, counter), value);
            }
        }
    }
    for slice in slices.iter().filter(|s| concerned(s)) {
        for device in slice.devices.iter() {
            let id = DeviceId {
                driver: slice.driver,
                pool: slice.pool,
                device: device.name,
            };
            if !taken(id) {
                continue;
            }
            for consumption in &device.consumes_counters {
                for &(counter, value) in &consumption.counters {
                    let entry = left
                        .entry(key(slice, consumption.counter_set, counter))
                        .or_default();
                    *entry = entry.saturating_sub(value);
                }
            }
        }
    }
    let ((driver, pool, set, counter), value) = left.into_iter().find(|(_, value)| *value < 0)?;
    Some(format!(
        "counter {counter} of counter set {set} in pool {driver}/{pool} is overrun by {}",
        QuantityFormat::BinarySI.canonical(value.saturating_neg())
    ))
}

/// The devices the claim's allocation holds shares of.
fn shared_devices(claim: &ResourceClaim) -> Vec<DeviceId> {
    (claim.allocation.iter())
        .flat_map(|a| a.shares().map(|d| d.device))
        .collect()
}

/// The devices the claim's allocation holds alone (admin access holds none).
fn devices(claim: &ResourceClaim) -> Vec<DeviceId> {
    (claim.allocation.as_ref())
        .map(|a| a.held_device_list())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    use gantry_api::dra::{AllocatedDevice, Allocation, ClaimSpec};

    fn claim(name: &str, device: Option<&str>) -> Arc<ResourceClaim> {
        Arc::new(ResourceClaim {
            binding_status: None,
            namespace: Sym::new("default"),
            name: Arc::from(name),
            uid: Arc::from(name),
            spec: Arc::new(ClaimSpec::default()),
            owner_pod: None,
            deleting: false,
            allocation: device.map(|d| {
                Arc::new(Allocation {
                    devices: vec![AllocatedDevice {
                        binding: None,
                        request: Arc::from("r"),
                        device: DeviceId {
                            driver: Sym::new("gpu.example.com"),
                            pool: Sym::new("n1"),
                            device: Sym::new(d),
                        },
                        admin_access: false,
                        share: None,
                    }],
                    node_selector: None,
                })
            }),
            reserved_for: Vec::new(),
            extended_resource: false,
        })
    }

    /// The writes PreBind makes, refused where the API server (or, for devices, the
    /// simulation's authority) refuses them.
    #[test]
    fn claim_writes_are_checked_against_the_claim_as_it_is_now() {
        let mut store = ClaimStore::new(
            &[
                (*claim("fresh", None)).clone(),
                (*claim("held", Some("gpu-0"))).clone(),
                (*claim("gone", None)).clone(),
            ],
            &[],
            1,
        );
        let key = |name: &str| claim(name, None).key();
        // Allocating a claim someone allocated meanwhile.
        assert_eq!(
            store
                .write(&[claim("held", Some("gpu-1"))], &[key("held")], &[])
                .err(),
            Some(ClaimRefusal::AllocatedElsewhere(key("held")))
        );
        // Allocating a device another claim holds.
        assert!(matches!(
            store.write(&[claim("fresh", Some("gpu-0"))], &[key("fresh")], &[]),
            Err(ClaimRefusal::DeviceTaken { .. })
        ));
        // Reserving a claim that was deallocated after PreFilter saw it allocated.
        assert_eq!(
            store.write(&[claim("gone", Some("gpu-2"))], &[], &[]).err(),
            Some(ClaimRefusal::Deallocated(key("gone")))
        );
        // Reserving the claim as it is, and allocating a free device, go through.
        assert!(
            store
                .write(&[claim("held", Some("gpu-0"))], &[], &[])
                .is_ok()
        );
        assert!(
            store
                .write(&[claim("fresh", Some("gpu-1"))], &[key("fresh")], &[])
                .is_ok()
        );
        assert_eq!(store.check(), Ok(()));
    }

    /// A GPU of 40Gi in pool n1 (the decoded slices, the default release's gates): the
    /// whole `gpu-0` and the half `gpu-0-a`.
    fn partitioned_gpu() -> Vec<Arc<ResourceSlice>> {
        let yaml = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-counters}\n\
            spec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 2}, \
            sharedCounters: [{name: g0, counters: {memory: {value: 40Gi}}}]}\n---\n\
            apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpus}\n\
            spec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 2}, devices: [\
            {name: gpu-0, consumesCounters: [{counterSet: g0, counters: {memory: {value: 40Gi}}}]}, \
            {name: gpu-0-a, consumesCounters: [{counterSet: g0, counters: {memory: {value: 20Gi}}}]}]}";
        let mut objects = gantry_api::decode::ClusterObjects::default();
        objects.decode_more(yaml, "slices").unwrap();
        objects.dra.slices
    }

    /// Another instance gave a partition of the GPU meanwhile: the write that would take
    /// more of its counters than it has is refused; the invariant check finds an overrun
    /// the store was given.
    #[test]
    fn a_partition_beyond_its_gpus_counters_is_refused_and_found() {
        let slices = partitioned_gpu();
        let mut store = ClaimStore::new(
            &[
                (*claim("whole", Some("gpu-0"))).clone(),
                (*claim("half", None)).clone(),
            ],
            &[],
            1,
        );
        let half = claim("half", Some("gpu-0-a"));
        assert_eq!(
            store
                .write(std::slice::from_ref(&half), &[half.key()], &slices)
                .err(),
            Some(ClaimRefusal::CounterOverrun {
                claim: half.key(),
                overrun:
                    "counter memory of counter set g0 in pool gpu.example.com/n1 is overrun by 20Gi"
                        .into(),
            })
        );
        assert_eq!(store.check_counters(&slices), Ok(()));
        // Without the slices' counters there is nothing to overrun.
        assert!(
            store
                .write(std::slice::from_ref(&half), &[half.key()], &[])
                .is_ok()
        );
        assert_eq!(
            store.check_counters(&slices),
            Err("counter memory of counter set g0 in pool gpu.example.com/n1 is overrun by 20Gi by the devices allocated".into())
        );
    }

    /// A claim holding a share of n1's shared `gpu-0` (40Gi of memory) taking `gib`.
    fn share(name: &str, gib: i64) -> Arc<ResourceClaim> {
        let mut shared = ResourceClaim::clone(&claim(name, Some("gpu-0")));
        let mut allocation = Allocation::clone(shared.allocation.as_ref().unwrap());
        allocation.devices[0].share = Some(Arc::new(gantry_api::dra::DeviceShare {
            id: Arc::from(format!("00000000-0000-4000-8000-{gib:012}")),
            consumed: vec![(Sym::new("memory"), gib * (1 << 30) * 1000)],
        }));
        shared.allocation = Some(Arc::new(allocation));
        Arc::new(shared)
    }

    /// Another instance gave a share of the GPU meanwhile: the write that would give it
    /// more memory than it has is refused, as is holding it alone while it is shared; the
    /// invariant check finds an overrun the store was given.
    #[test]
    fn a_share_beyond_its_gpus_capacity_is_refused_and_found() {
        let yaml = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpus}\n\
            spec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [\
            {name: gpu-0, allowMultipleAllocations: true, capacity: {memory: {value: 40Gi}}}]}";
        let mut objects = gantry_api::decode::ClusterObjects::default();
        objects.decode_more(yaml, "slices").unwrap();
        let slices = objects.dra.slices;
        let mut store = ClaimStore::new(
            &[
                (*share("first", 30)).clone(),
                (*claim("second", None)).clone(),
                (*claim("whole", None)).clone(),
            ],
            &[],
            1,
        );
        let second = share("second", 20);
        assert_eq!(
            store
                .write(std::slice::from_ref(&second), &[second.key()], &slices)
                .err(),
            Some(ClaimRefusal::CapacityOverrun {
                claim: second.key(),
                overrun: "capacity memory of device gpu.example.com/n1/gpu-0 is overrun by 10Gi"
                    .into(),
            })
        );
        let whole = claim("whole", Some("gpu-0"));
        assert!(matches!(
            store.write(std::slice::from_ref(&whole), &[whole.key()], &slices),
            Err(ClaimRefusal::DeviceTaken { .. })
        ));
        assert_eq!(
            (store.check_shares(&slices), store.check()),
            (Ok(()), Ok(()))
        );
        // Without the slices there is nothing to overrun.
        assert!(
            store
                .write(std::slice::from_ref(&second), &[second.key()], &[])
                .is_ok()
        );
        assert_eq!(
            store.check_shares(&slices),
            Err("capacity memory of device gpu.example.com/n1/gpu-0 is overrun by 10Gi by the shares allocated".into())
        );
    }

    /// A replayed trace's claims: one a user creates is held unless its name is taken;
    /// one a user deletes goes, or, while a pod uses it, is only marked as being deleted.
    #[test]
    fn claims_users_create_and_delete() {
        let mut store = ClaimStore::new(&[], &[], 1);
        assert!(store.create(claim("mine", None)).is_some());
        assert!(store.create(claim("mine", Some("gpu-0"))).is_none());
        let mut used = ResourceClaim::clone(&claim("used", Some("gpu-1")));
        used.reserved_for.push(gantry_api::dra::ClaimConsumer {
            uid: Arc::from("pod-1"),
            name: Arc::from("p1"),
        });
        assert!(store.create(Arc::new(used)).is_some());
        let key = |name: &str| claim(name, None).key();
        assert!(matches!(
            store.delete_by_user(key("mine")),
            Some(ClaimChange::Deleted(_))
        ));
        match store.delete_by_user(key("used")) {
            Some(ClaimChange::Set(kept)) => assert!(kept.deleting && kept.allocation.is_some()),
            other => panic!("{other:?}"),
        }
        assert!(store.delete_by_user(key("mine")).is_none());
        assert_eq!(store.check(), Ok(()));
    }

    /// PostFilter's deallocation is conditioned on the claim as the scheduler saw it: a
    /// reservation written meanwhile (a pod bound with it) makes it a conflict.
    #[test]
    fn deallocation_is_refused_when_the_claim_changed_since_it_was_seen() {
        let seen = claim("shared", Some("gpu-0"));
        let mut store = ClaimStore::new(&[(*seen).clone()], &[], 1);
        let mut reserved = ResourceClaim::clone(&seen);
        reserved.reserved_for.push(gantry_api::dra::ClaimConsumer {
            uid: Arc::from("pod-1"),
            name: Arc::from("p1"),
        });
        store.write(&[Arc::new(reserved)], &[], &[]).unwrap();
        assert!(store.deallocate(&seen).is_none());
        let now = store.claims().next().unwrap().clone();
        assert!(now.allocation.is_some() && now.is_reserved_for("pod-1"));
        // On the claim as it is now, it goes through.
        assert!(store.deallocate(&now).is_some());
        assert!(store.claims().next().unwrap().allocation.is_none());
    }

    #[test]
    fn generated_names_follow_the_claim_controller() {
        let mut rng = Rng::new(7);
        let name = generated_claim_name("web-0", "gpu", &mut rng);
        assert!(name.starts_with("web-0-gpu-"), "{name}");
        assert_eq!(name.len(), "web-0-gpu-".len() + 5);
        assert!(
            name["web-0-gpu-".len()..]
                .bytes()
                .all(|b| ALPHANUMS.contains(&b))
        );
        // Long names are cut in proportion, leaving room for the suffix within 63.
        let pod = "p".repeat(60);
        let claim = "c".repeat(30);
        let long = generated_claim_name(&pod, &claim, &mut rng);
        assert!(long.len() <= 63, "{} characters", long.len());
        // 60 * 57 / 92 = 37 and 30 * 57 / 92 = 18 bytes, as upstream's integer division.
        assert!(
            long.starts_with(&format!("{}-{}", "p".repeat(37), "c".repeat(18))),
            "{long}"
        );
        assert_eq!(long.len(), 37 + 1 + 18 + 5);
        // The same seed names the same claims.
        assert_eq!(
            generated_claim_name("a", "b", &mut Rng::new(1)),
            generated_claim_name("a", "b", &mut Rng::new(1))
        );
    }
}
