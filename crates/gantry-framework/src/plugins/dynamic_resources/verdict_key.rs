//! What DynamicResources' Filter verdict on a node reads besides the node's NodeInfo,
//! for the scheduler's verdict memo: the pod's claims as requests (their specs, which
//! pods made from one template share) and the DRA store's epoch, which moves when a
//! class, a shared slice or a device no single node owns changes (the devices taken in a
//! node's own pools move that node's generation). Only pods whose verdicts are the whole
//! story are keyed: claims all to allocate (an allocated one's availability is noted for
//! PostFilter), no `firstAvailable` (Score reads the search's choice per node). Extended
//! resources served by devices are keyed too (the node's variant of the allocator follows
//! from the node and the classes); NodeResourcesFit, which reads the classes for them,
//! keeps such pods out of the memo in the default profile anyway.

use std::sync::{Arc, Mutex};

use gantry_api::dra::ClaimSpec;

use super::PodClaims;
use crate::VerdictKey;

/// The last claim specs keyed, and their number: a new number whenever they change, so
/// that one number never stands for two different lists.
#[derive(Default)]
pub(super) struct ClaimShapes(Mutex<(Vec<Arc<ClaimSpec>>, u64)>);

impl ClaimShapes {
    fn number(&self, specs: impl ExactSizeIterator<Item = Arc<ClaimSpec>> + Clone) -> u64 {
        let mut shapes = self.0.lock().expect("claim shapes lock poisoned");
        let (last, number) = &mut *shapes;
        let same = last.len() == specs.len()
            && (last.iter().zip(specs.clone())).all(|(a, b)| Arc::ptr_eq(a, &b) || *a == b);
        if !same {
            *last = specs.collect();
            *number += 1;
        }
        *number
    }
}

/// Appends the key of the pod's verdicts to `key`; false when they read more.
pub(super) fn append(shapes: &ClaimShapes, s: &PodClaims, key: &mut VerdictKey) -> bool {
    let Some(epoch) = s.verdict_epoch else {
        return false;
    };
    let plain = s.claims.iter().all(|claim| {
        claim.allocation.is_none()
            && (claim.spec.requests.iter()).all(|r| r.first_available().is_empty())
    });
    if !plain {
        return false;
    }
    key.push(shapes.number(s.claims.iter().map(|c| c.spec.clone())));
    key.push(epoch);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::Sym;
    use gantry_api::dra::{AllocationMode, DeviceRequest, ResourceClaim};

    fn spec(count: u32) -> Arc<ClaimSpec> {
        let request = DeviceRequest::exactly(
            "gpu",
            Sym::new("gpu"),
            Vec::new(),
            AllocationMode::ExactCount(count),
        );
        Arc::new(ClaimSpec {
            requests: vec![request],
            constraints: Vec::new(),
        })
    }

    fn claims(specs: &[&Arc<ClaimSpec>]) -> PodClaims {
        let claim = |spec: &Arc<ClaimSpec>| {
            Arc::new(ResourceClaim {
                namespace: Sym::new("default"),
                name: Arc::from("c"),
                uid: Arc::from("c"),
                spec: spec.clone(),
                owner_pod: None,
                deleting: false,
                allocation: None,
                reserved_for: Vec::new(),
                extended_resource: false,
                binding_status: None,
            })
        };
        PodClaims {
            claims: specs.iter().map(|s| claim(s)).collect(),
            verdict_epoch: Some(9),
            ..PodClaims::default()
        }
    }

    fn key(shapes: &ClaimShapes, s: &PodClaims) -> Option<VerdictKey> {
        let mut key = VerdictKey::new();
        append(shapes, s, &mut key).then_some(key)
    }

    #[test]
    fn one_number_stands_for_one_list_of_specs() {
        let shapes = ClaimShapes::default();
        let (one, two) = (spec(1), spec(2));
        let first = key(&shapes, &claims(&[&one])).unwrap();
        assert_eq!(first[1], 9, "the store's epoch follows");
        // The same spec, shared or decoded apart: the same number.
        assert_eq!(key(&shapes, &claims(&[&one])), Some(first.clone()));
        assert_eq!(key(&shapes, &claims(&[&spec(1)])), Some(first.clone()));
        // Another count, or another number of claims: another number, and coming back to
        // the first list does not bring its number back.
        let second = key(&shapes, &claims(&[&two])).unwrap();
        let third = key(&shapes, &claims(&[&two, &two])).unwrap();
        let fourth = key(&shapes, &claims(&[&one])).unwrap();
        let numbers = [first[0], second[0], third[0], fourth[0]];
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    }

    #[test]
    fn pods_whose_verdicts_read_more_get_no_key() {
        let shapes = ClaimShapes::default();
        let one = spec(1);
        // A store that keeps no epoch (a what-if view).
        let mut s = claims(&[&one]);
        s.verdict_epoch = None;
        assert_eq!(key(&shapes, &s), None);
        // An allocated claim (its availability is noted per node for PostFilter).
        let mut s = claims(&[&one]);
        let mut allocated = (*s.claims[0]).clone();
        allocated.allocation = Some(Arc::new(gantry_api::dra::Allocation {
            devices: Vec::new(),
            node_selector: None,
        }));
        s.claims[0] = Arc::new(allocated);
        assert_eq!(key(&shapes, &s), None);
        // A request of `firstAvailable` (Score reads which subrequest the search took).
        let mut first_available = (*one).clone();
        let sub = gantry_api::dra::SubRequest {
            name: Arc::from("any"),
            device_class: Sym::new("gpu"),
            selectors: Vec::new(),
            mode: AllocationMode::ExactCount(1),
            tolerations: Vec::new(),
            capacity: Default::default(),
        };
        first_available.requests[0].kind = gantry_api::dra::RequestKind::FirstAvailable(vec![sub]);
        assert_eq!(key(&shapes, &claims(&[&Arc::new(first_available)])), None);
    }
}
