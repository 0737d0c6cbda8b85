//! DynamicResources' Score and NormalizeScore as kube-scheduler v1.35.4 has them
//! (`pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`, `Score`,
//! `computeScore`, `NormalizeScore`): a node scores higher when the allocation Filter found
//! for it uses earlier subrequests of `firstAvailable` lists. Each allocated subrequest at
//! index `i` adds [`FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE`]` - i` (8 for the first
//! choice, 1 for the eighth); requests with `exactly` add nothing. The scores are then
//! spread over 0..=100 by upstream's `DefaultNormalizeScore` (not reversed).
//!
//! Upstream's `Score` returns 0 when the pod has no claims and when Filter kept no
//! allocation for the node (every claim was allocated already); otherwise it calls
//! `computeScore` with *all* the pod's claims and the allocations of the claims that were
//! still to allocate, matched by position. When some claims were allocated already, the
//! positions differ and v1.35.4 scores the wrong pairs, then fails with
//! `number of allocations N is smaller than number of claims` (an error status, which
//! aborts the pod's scheduling cycle when more than one node is feasible).
//! [`first_available_score`] keeps that behaviour: it is what v1.35.4 decides. v1.36.3
//! reads a claim allocated before the cycle from its own allocation and pairs only the
//! others with Filter's allocations (`computeScore`, `unallocatedIndex`), failing with
//! `number of allocations N is smaller than number of claims needing allocation` only when
//! those run short; it also scores 0 everywhere while DRAPrioritizedList is off.

use std::collections::HashSet;
use std::sync::Arc;

use gantry_api::dra::{
    Allocation, FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE, RequestKind, ResourceClaim,
    is_subrequest_ref, subrequest_ref,
};

use crate::default_normalize;

/// [`first_available_score`] for allocations the first path found (no subrequests, so
/// no device is read): 0, or, where v1.35 pairs every claim with an allocation
/// (`!reads_allocated`), its error when the pod's `claims` outnumber the `to_allocate`
/// allocations.
pub fn first_path_score(
    claims: usize,
    to_allocate: usize,
    reads_allocated: bool,
) -> Result<i64, String> {
    if to_allocate < claims && !reads_allocated {
        return Err(format!(
            "number of allocations {to_allocate} is smaller than number of claims"
        ));
    }
    Ok(0)
}

/// Upstream's `computeScore`: `claims` are the pod's claims in the order of
/// `spec.resourceClaims`, `allocations` what Filter found for the node for the claims
/// that were still to allocate, in the same order. v1.35 (`!reads_allocated`) reads the
/// `i`th allocation for the `i`th claim; v1.36 reads an allocated claim's own allocation
/// and the next of `allocations` for each other. `Err` when the allocations run short.
pub fn first_available_score(
    claims: &[Arc<ResourceClaim>],
    allocations: &[Allocation],
    reads_allocated: bool,
) -> Result<i64, String> {
    let mut score = 0i64;
    let mut next = 0;
    for claim in claims {
        let allocation = match &claim.allocation {
            Some(own) if reads_allocated => &**own,
            _ => {
                let Some(allocation) = allocations.get(next) else {
                    let needing = if reads_allocated {
                        " needing allocation"
                    } else {
                        ""
                    };
                    return Err(format!(
                        "number of allocations {} is smaller than number of claims{needing}",
                        allocations.len()
                    ));
                };
                next += 1;
                allocation
            }
        };
        let allocated: HashSet<&str> = allocation
            .devices
            .iter()
            .map(|d| &*d.request)
            .filter(|r| is_subrequest_ref(r))
            .collect();
        for request in &claim.spec.requests {
            let RequestKind::FirstAvailable(subrequests) = &request.kind else {
                continue;
            };
            for (index, sub) in subrequests.iter().enumerate() {
                if allocated.contains(subrequest_ref(&request.name, &sub.name).as_str()) {
                    score += (FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE - index) as i64;
                }
            }
        }
    }
    Ok(score)
}

/// Upstream's `NormalizeScore` for the plugin: `DefaultNormalizeScore(MaxNodeScore,
/// false, scores)`.
pub fn normalize(scores: &mut [i64]) {
    default_normalize(scores, false);
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::Sym;
    use gantry_api::dra::{
        AllocatedDevice, AllocationMode, ClaimSpec, DeviceId, DeviceRequest, SubRequest,
    };

    fn sub(name: &str) -> SubRequest {
        SubRequest {
            name: Arc::from(name),
            device_class: Sym::new("class"),
            selectors: Vec::new(),
            mode: AllocationMode::ExactCount(1),
            tolerations: Vec::new(),
            capacity: Vec::new(),
        }
    }

    fn claim(name: &str, requests: Vec<DeviceRequest>) -> Arc<ResourceClaim> {
        let spec = ClaimSpec {
            requests,
            constraints: Vec::new(),
        };
        Arc::new(ResourceClaim::unallocated(
            Sym::new("default"),
            name,
            name,
            spec,
        ))
    }

    fn prioritized(name: &str, subs: &[&str]) -> DeviceRequest {
        DeviceRequest {
            name: Arc::from(name),
            kind: RequestKind::FirstAvailable(subs.iter().map(|s| sub(s)).collect()),
        }
    }

    fn exactly(name: &str) -> DeviceRequest {
        DeviceRequest::exactly(
            name,
            Sym::new("class"),
            Vec::new(),
            AllocationMode::ExactCount(1),
        )
    }

    fn allocation(requests: &[&str]) -> Allocation {
        Allocation {
            devices: requests
                .iter()
                .enumerate()
                .map(|(i, r)| AllocatedDevice {
                    binding: None,
                    request: Arc::from(*r),
                    device: DeviceId {
                        driver: Sym::new("driver"),
                        pool: Sym::new("pool"),
                        device: Sym::new(&format!("device-{i}")),
                    },
                    admin_access: false,
                    share: None,
                })
                .collect(),
            node_selector: None,
        }
    }

    /// The first path's score is computeScore's on allocations without subrequests,
    /// when claims and allocations pair up and when the allocated claims outnumber them.
    #[test]
    fn the_first_paths_score_is_compute_scores() {
        let claims = vec![
            claim("a", vec![exactly("r")]),
            claim("b", vec![exactly("r")]),
        ];
        for allocations in [
            vec![allocation(&["r"]), allocation(&["r"])],
            vec![allocation(&["r"])],
        ] {
            assert_eq!(
                first_path_score(claims.len(), allocations.len(), false),
                first_available_score(&claims, &allocations, false),
                "{} allocations",
                allocations.len()
            );
        }
    }

    #[test]
    fn earlier_subrequests_score_higher() {
        let claims = [claim(
            "c",
            vec![prioritized("gpu", &["big", "medium", "small"])],
        )];
        let score = |result: &str| first_available_score(&claims, &[allocation(&[result])], false);
        assert_eq!(score("gpu/big"), Ok(8));
        assert_eq!(score("gpu/medium"), Ok(7));
        assert_eq!(score("gpu/small"), Ok(6));
    }

    #[test]
    fn exact_requests_add_nothing() {
        let claims = [claim("c", vec![exactly("gpu")])];
        assert_eq!(
            first_available_score(&claims, &[allocation(&["gpu", "gpu"])], false),
            Ok(0)
        );
        assert_eq!(first_available_score(&[], &[], false), Ok(0), "no claims");
    }

    /// Each allocated subrequest counts once however many devices it got; requests and
    /// claims add up.
    #[test]
    fn requests_and_claims_add_up() {
        let claims = [
            claim(
                "a",
                vec![
                    exactly("nic"),
                    prioritized("gpu", &["big", "small"]),
                    prioritized("fpga", &["x", "y", "z"]),
                ],
            ),
            claim("b", vec![prioritized("gpu", &["big", "small"])]),
        ];
        let allocations = [
            allocation(&["nic", "gpu/small", "gpu/small", "fpga/z"]),
            allocation(&["gpu/big"]),
        ];
        assert_eq!(
            first_available_score(&claims, &allocations, false),
            Ok((8 - 1) + (8 - 2) + 8)
        );
    }

    /// The eighth subrequest, the most an API server accepts, still scores 1.
    #[test]
    fn the_last_of_eight_scores_one() {
        let names = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"];
        let claims = [claim("c", vec![prioritized("r", &names)])];
        assert_eq!(
            first_available_score(&claims, &[allocation(&["r/s7"])], false),
            Ok(1)
        );
    }

    /// A result named like a subrequest the claim does not list scores nothing; a result
    /// with two slashes is not a subrequest reference.
    #[test]
    fn unknown_references_score_nothing() {
        let claims = [claim("c", vec![prioritized("gpu", &["big"])])];
        assert_eq!(
            first_available_score(&claims, &[allocation(&["gpu/small", "gpu/big/x"])], false),
            Ok(0)
        );
    }

    /// v1.35.4 matches claims and allocations by position although the allocations are
    /// only those of the claims still to allocate: with an allocated claim first, the
    /// second claim's allocation is read against the first claim, then the missing one
    /// is an error.
    #[test]
    fn allocations_are_matched_by_position_as_upstream_does() {
        let claims = [
            claim("allocated", vec![prioritized("gpu", &["big", "small"])]),
            claim("pending", vec![prioritized("gpu", &["big", "small"])]),
        ];
        assert_eq!(
            first_available_score(&claims, &[allocation(&["gpu/small"])], false),
            Err("number of allocations 1 is smaller than number of claims".to_string())
        );
        assert_eq!(
            first_available_score(&claims[..1], &[allocation(&["gpu/small"])], false),
            Ok(7),
            "the pending claim's result, scored against the allocated claim's spec"
        );
    }

    /// v1.36.3 reads a claim allocated before the cycle from its own allocation, and
    /// pairs Filter's allocations with the others only: the pending claim's `gpu/small`
    /// scores 7, the allocated claim's `gpu/big` 8.
    #[test]
    fn v1_36_reads_allocated_claims_from_their_own_allocation() {
        let mut allocated = ResourceClaim::clone(&claim(
            "allocated",
            vec![prioritized("gpu", &["big", "small"])],
        ));
        allocated.allocation = Some(Arc::new(allocation(&["gpu/big"])));
        let claims = [
            Arc::new(allocated),
            claim("pending", vec![prioritized("gpu", &["big", "small"])]),
        ];
        assert_eq!(
            first_available_score(&claims, &[allocation(&["gpu/small"])], true),
            Ok(8 + 7)
        );
        assert_eq!(
            first_available_score(&claims, &[], true),
            Err(
                "number of allocations 0 is smaller than number of claims needing allocation"
                    .to_string()
            )
        );
        assert_eq!(first_path_score(2, 1, true), Ok(0));
    }

    #[test]
    fn normalize_spreads_over_zero_to_a_hundred() {
        let mut scores = [0, 8, 16, 12];
        normalize(&mut scores);
        assert_eq!(scores, [0, 50, 100, 75]);
        let mut zeros = [0, 0];
        normalize(&mut zeros);
        assert_eq!(zeros, [0, 0], "not reversed: all zero stays zero");
    }
}
