//! ResourceClaims at the simulated API, and the controllers that look after them:
//! the resource-claim controller makes a pod's claims from its templates
//! (`<pod>-<claim>-<5 chars>`, owned by the pod) and, when a pod is gone, takes it out of
//! `reservedFor`, deallocates a claim nobody uses and deletes the claims the pod owned,
//! as the claim controller and the garbage collector do.

use std::collections::BTreeMap;
use std::sync::Arc;

use gantry_api::dra::{
    ClaimKey, ClaimSource, DeviceId, ResourceClaim, ResourceClaimStatus, ResourceClaimTemplate,
};
use gantry_api::rng::Rng;
use gantry_api::{Pod, Sym};

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
        }
    }
}

/// The claims and templates the API holds, with the devices allocated.
pub(crate) struct ClaimStore {
    claims: BTreeMap<ClaimKey, Arc<ResourceClaim>>,
    templates: BTreeMap<ClaimKey, Arc<ResourceClaimTemplate>>,
    /// The claim holding each allocated device.
    holders: BTreeMap<DeviceId, ClaimKey>,
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
            names: Rng::new(seed ^ 0xC1A1_3C0D),
        };
        for claim in claims {
            store.put(Arc::new(claim.clone()));
        }
        store
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
        self.claims.insert(key, claim);
    }

    fn unhold(&mut self, key: ClaimKey) {
        if let Some(old) = self.claims.get(&key) {
            for device in devices(old) {
                if self.holders.get(&device) == Some(&key) {
                    self.holders.remove(&device);
                }
            }
        }
    }

    fn delete(&mut self, key: ClaimKey) {
        self.unhold(key);
        self.claims.remove(&key);
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
    /// holds; nothing is written unless every claim is.
    pub fn write(
        &mut self,
        claims: &[Arc<ResourceClaim>],
        allocated_now: &[ClaimKey],
    ) -> Result<Vec<ClaimChange>, ClaimRefusal> {
        for claim in claims {
            let key = claim.key();
            let Some(current) = self.claims.get(&key) else {
                return Err(ClaimRefusal::NotFound(key));
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
            for device in devices(claim) {
                if let Some(holder) = self.holders.get(&device)
                    && *holder != key
                {
                    return Err(ClaimRefusal::DeviceTaken { claim: key, device });
                }
            }
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
        let freed = Arc::new(freed);
        self.put(freed.clone());
        Some(ClaimChange::Set(freed))
    }

    /// A failed binding's Unreserve: the pod leaves the `reservedFor` of its claims; their
    /// allocations stay (upstream patches out the reservation only).
    pub fn unreserve(&mut self, pod: &Pod) -> Vec<ClaimChange> {
        let mut changes = Vec::new();
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
        let mut changes = Vec::new();
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
        for claim in self.claims.values() {
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
        if holders != self.holders {
            return Err("the API's index of allocated devices disagrees with its claims".into());
        }
        Ok(())
    }

    /// Whether the bound pod's claims are all allocated and reserved for it.
    pub fn holds_claims_of(&self, pod: &Pod) -> bool {
        pod.resource_claims.iter().all(|entry| {
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

/// The devices the claim's allocation holds (admin access holds none).
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
            namespace: Sym::new("default"),
            name: Arc::from(name),
            uid: Arc::from(name),
            spec: Arc::new(ClaimSpec::default()),
            owner_pod: None,
            deleting: false,
            allocation: device.map(|d| {
                Arc::new(Allocation {
                    devices: vec![AllocatedDevice {
                        request: Arc::from("r"),
                        device: DeviceId {
                            driver: Sym::new("gpu.example.com"),
                            pool: Sym::new("n1"),
                            device: Sym::new(d),
                        },
                        admin_access: false,
                    }],
                    node_selector: None,
                })
            }),
            reserved_for: Vec::new(),
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
                .write(&[claim("held", Some("gpu-1"))], &[key("held")])
                .err(),
            Some(ClaimRefusal::AllocatedElsewhere(key("held")))
        );
        // Allocating a device another claim holds.
        assert!(matches!(
            store.write(&[claim("fresh", Some("gpu-0"))], &[key("fresh")]),
            Err(ClaimRefusal::DeviceTaken { .. })
        ));
        // Reserving a claim that was deallocated after PreFilter saw it allocated.
        assert_eq!(
            store.write(&[claim("gone", Some("gpu-2"))], &[]).err(),
            Some(ClaimRefusal::Deallocated(key("gone")))
        );
        // Reserving the claim as it is, and allocating a free device, go through.
        assert!(store.write(&[claim("held", Some("gpu-0"))], &[]).is_ok());
        assert!(
            store
                .write(&[claim("fresh", Some("gpu-1"))], &[key("fresh")])
                .is_ok()
        );
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
        store.write(&[Arc::new(reserved)], &[]).unwrap();
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
