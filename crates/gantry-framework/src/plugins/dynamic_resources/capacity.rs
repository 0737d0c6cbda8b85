//! Shared devices in the search (DRAConsumableCapacity, beta and on from v1.36), as
//! upstream's incubating allocator keeps them (`CmpRequestOverCapacity`,
//! `allocateDevice`'s shares and `rollbackDevice`, v1.36.3): with the gate on every
//! candidate device must have room for the request's capacity (its existing shares, plus
//! the shares this search has picked, plus this one, within each capacity and its
//! request policy); a device with `allowMultipleAllocations` is not taken whole but
//! shared, and its share is named by a share ID.

use std::hash::{BuildHasher, Hash, Hasher};

use foldhash::fast::FixedState;
use std::sync::Arc;

use gantry_api::dra::{AllocatedDevice, CapacityAmounts, Device, DeviceId, ResourceClaim};
use gantry_api::dra_capacity::{self, CapacityShortfall};
use gantry_api::{QuantityFormat, Release};
use gantry_cache::{DeviceUse, DraState, NodeInfo};

use super::allocator::{Features, PreparedClaim, PreparedKind, PreparedRequest};

/// The shares picked in one search (upstream's `allocatingCapacity`): an entry per
/// device stands while a share of it is picked, even one of nothing, and says that the
/// device is shared already (a later share of it skips the counter check).
#[derive(Default)]
pub(super) struct Sharing {
    picking: Vec<(DeviceId, CapacityAmounts)>,
    /// DRAFractionalCapacityRange (see `gantry_api::dra_capacity::consumed`).
    fractional: bool,
}

/// A share picked for a request: what it takes, and whether the device's entry stood
/// before it (undoing it must leave the entry standing then).
pub(super) struct PickedShare {
    pub consumed: CapacityAmounts,
    entry_existed: bool,
}

impl Sharing {
    pub fn new(fractional: bool) -> Sharing {
        Sharing {
            picking: Vec::new(),
            fractional,
        }
    }

    /// Whether the device has room for the request (upstream's `CmpRequestOverCapacity`
    /// against the device's aggregated capacity and what this search has picked).
    pub fn fits(
        &self,
        allocated: &dyn DeviceUse,
        id: DeviceId,
        device: &Device,
        requests: &CapacityAmounts,
    ) -> Result<(), CapacityShortfall> {
        let in_use = allocated.shares(id).and_then(|s| s.consumed);
        let picking = self.entry(id);
        dra_capacity::fits(
            requests,
            &device.capacity,
            in_use.as_ref().unwrap_or(&Vec::new()),
            picking.unwrap_or(&Vec::new()),
            self.fractional,
        )
    }

    /// Whether the device is shared already, by a claim or in this search (upstream's
    /// `deviceCapacityInUse`): its counters were taken by the first share.
    pub fn in_use(&self, allocated: &dyn DeviceUse, id: DeviceId) -> bool {
        self.entry(id).is_some() || allocated.shares(id).is_some_and(|s| s.consumed.is_some())
    }

    /// Picks a share of the device for a request asking `requests`.
    pub fn take(
        &mut self,
        id: DeviceId,
        device: &Device,
        requests: &CapacityAmounts,
    ) -> PickedShare {
        let consumed =
            dra_capacity::consumed_by_request(requests, &device.capacity, self.fractional);
        let entry_existed = match self.picking.iter_mut().find(|(d, _)| *d == id) {
            Some((_, total)) => {
                dra_capacity::add_amounts(total, &consumed, 1);
                true
            }
            None => {
                self.picking.push((id, consumed.clone()));
                false
            }
        };
        PickedShare {
            consumed,
            entry_existed,
        }
    }

    /// Gives a share back (upstream's `Remove`, which drops an entry whose amounts are
    /// zero, then restores an empty one if it stood before the share).
    pub fn give_back(&mut self, id: DeviceId, share: &PickedShare) {
        let Some(i) = self.picking.iter().position(|(d, _)| *d == id) else {
            return;
        };
        dra_capacity::add_amounts(&mut self.picking[i].1, &share.consumed, -1);
        if dra_capacity::all_zero(&self.picking[i].1) {
            if share.entry_existed {
                self.picking[i].1.clear();
            } else {
                self.picking.remove(i);
            }
        }
    }

    fn entry(&self, id: DeviceId) -> Option<&CapacityAmounts> {
        self.picking.iter().find(|(d, _)| *d == id).map(|(_, c)| c)
    }
}

/// Upstream's refusal of capacity requests while DRAConsumableCapacity is off (the API
/// server drops them then, so only a claim written while the gate was on has them).
pub(super) fn capacity_without_gate(
    claim: &PreparedClaim,
    request: &PreparedRequest,
) -> Option<String> {
    let refused = |kind: &str, name: &str| {
        format!(
            "claim {}, {kind} {name}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
            claim.label()
        )
    };
    match &request.kind {
        PreparedKind::Exactly(selection) => {
            (!selection.capacity.is_empty()).then(|| refused("request", &request.name))
        }
        PreparedKind::FirstAvailable(subrequests) => (subrequests.iter())
            .find(|sub| !sub.selection.capacity.is_empty())
            .map(|sub| refused("subrequest", &sub.name)),
    }
}

/// The binder's check of shared devices: the shares in the pod's allocations in flight
/// (`in_flight`, not counted in `dra`'s index while the pod is forgotten for the check),
/// with the shares every claim holds now, within each capacity of their devices. Two
/// instances may each give a share of one GPU on views where the other's is not taken;
/// one instance, or kube-scheduler, sees its own decisions and cannot. `None` when they
/// fit, or the release does not share devices.
pub fn shares_overrun_at_bind(
    node: &NodeInfo,
    dra: &dyn DraState,
    release: Release,
    in_flight: &[Arc<ResourceClaim>],
) -> Option<String> {
    let mine: Vec<&AllocatedDevice> = (in_flight.iter())
        .filter_map(|c| c.allocation.as_deref())
        .flat_map(|a| a.shares())
        .collect();
    if mine.is_empty() || !Features::of(release).consumable_capacity {
        return None;
    }
    let used = dra.device_use();
    let shared = dra.shared_slices();
    let slices = node.resource_slices().iter().chain(shared.iter());
    let devices: Vec<(DeviceId, &Device)> = slices
        .flat_map(|s| s.devices.iter().map(move |d| (s, d)))
        .map(|(s, d)| {
            let id = DeviceId {
                driver: s.driver,
                pool: s.pool,
                device: d.name,
            };
            (id, d)
        })
        .collect();
    for result in &mine {
        let Some((id, device)) = devices.iter().find(|(id, _)| *id == result.device) else {
            continue;
        };
        let mut total = (used.shares(*id))
            .and_then(|s| s.consumed)
            .unwrap_or_default();
        for other in mine.iter().filter(|r| r.device == *id) {
            if let Some(share) = &other.share {
                dra_capacity::add_amounts(&mut total, &share.consumed, 1);
            }
        }
        for capacity in &device.capacity {
            let over = dra_capacity::amount(&total, capacity.key).saturating_sub(capacity.value);
            if over > 0 {
                return Some(format!(
                    "capacity {} of device {id} is overrun by {} with the shares allocated meanwhile",
                    capacity.key,
                    QuantityFormat::BinarySI.canonical(over)
                ));
            }
        }
    }
    None
}

/// A share ID for the `index`th result of the claim with `claim_uid`, for `device`.
/// Upstream draws a random UUID; Gantry derives one from what it names, so that the same
/// input decides the same IDs: a lowercase UUID (version 4 layout), as the API server's
/// validation of `shareID` requires.
pub(super) fn share_id(claim_uid: &str, index: usize, device: DeviceId) -> String {
    let half = |seed: u64| {
        let mut hasher = FixedState::with_seed(seed).build_hasher();
        claim_uid.hash(&mut hasher);
        index.hash(&mut hasher);
        device.driver.as_str().hash(&mut hasher);
        device.pool.as_str().hash(&mut hasher);
        device.device.as_str().hash(&mut hasher);
        hasher.finish()
    };
    let (high, low) = (half(0x5eed_0001), half(0x5eed_0002));
    let bits = (u128::from(high) << 64) | u128::from(low);
    // Version 4, RFC 4122 variant.
    let bits = (bits & !(0xf << 76) & !(0x3 << 62)) | (0x4 << 76) | (0x2 << 62);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use gantry_api::Sym;

    use super::*;

    fn id(name: &str) -> DeviceId {
        DeviceId {
            driver: Sym::new("gpu.example.com"),
            pool: Sym::new("n1"),
            device: Sym::new(name),
        }
    }

    #[test]
    fn share_ids_are_uuids_fixed_by_what_they_name() {
        let a = share_id("uid-1", 0, id("gpu-0"));
        assert_eq!(a, share_id("uid-1", 0, id("gpu-0")));
        assert_ne!(a, share_id("uid-1", 1, id("gpu-0")));
        assert_ne!(a, share_id("uid-2", 0, id("gpu-0")));
        assert_ne!(a, share_id("uid-1", 0, id("gpu-1")));
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(
            a.chars()
                .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
        assert_eq!(&parts[2][..1], "4");
        assert!("89ab".contains(&parts[3][..1]));
    }

    #[test]
    fn an_entry_that_stood_before_a_share_stands_after_it() {
        let memory = Sym::new("memory");
        let device = Device {
            binding: None,
            binds_to_node: false,
            name: Sym::new("gpu-0"),
            attributes: Vec::new(),
            capacity: vec![gantry_api::dra::DeviceCapacity::new(
                gantry_api::dra::QualifiedName {
                    domain: Sym::new("gpu.example.com"),
                    id: memory,
                },
                "memory",
                10_000,
            )],
            allow_multiple_allocations: true,
            taints: Vec::new(),
            consumes_counters: Vec::new(),
        };
        let mut sharing = Sharing::default();
        let first = sharing.take(id("gpu-0"), &device, &vec![(memory, 0)]);
        let second = sharing.take(id("gpu-0"), &device, &vec![(memory, 4_000)]);
        assert!(!first.entry_existed && second.entry_existed);
        sharing.give_back(id("gpu-0"), &second);
        // Zero left, but the first share still marks the device as shared.
        assert_eq!(sharing.entry(id("gpu-0")), Some(&Vec::new()));
        sharing.give_back(id("gpu-0"), &first);
        assert_eq!(sharing.entry(id("gpu-0")), None);
    }
}
