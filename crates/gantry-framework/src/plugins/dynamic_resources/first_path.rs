//! The allocator's first path, without the search's bookkeeping. For claims whose
//! requests all ask for an exact count of devices under `exactly`, with no
//! `matchAttribute` constraints, the depth-first search tries candidates in pool order
//! and takes, at every step, the first free device that the selectors accept: if that
//! greedy walk finds every device, it is the search's first solution, so it is the
//! answer. When it does not (backtracking might still find one), or when the node's
//! pools need the search's care (pools of several slices, an incomplete or invalid pool,
//! a device that consumes counters, a shared device, a capacity request or policy, a
//! share held anywhere), the full search runs instead.

use std::sync::Arc;

use gantry_api::Node;
use gantry_api::dra::{
    ALLOCATION_RESULTS_MAX_SIZE, AllocatedDevice, Allocation, AllocationMode, DeviceId,
    ResourceSlice, SliceNodes,
};
use gantry_api::dra_taints::taints_prevent_allocation;
use gantry_cache::AllocatedView;
use smallvec::SmallVec;

use super::allocator::{Allocator, PreparedKind, selector_verdict};
use super::cel::Verdict;
use super::selection_verdicts::SliceFacts;

/// `Some` with the answer when the first path settles it, `None` to run the search.
pub(super) fn allocate(
    allocator: &Allocator,
    node: &Node,
    local: &[Arc<ResourceSlice>],
) -> Option<Result<Option<Vec<Allocation>>, String>> {
    let mut allocations: Vec<Allocation> = allocator
        .claims
        .iter()
        .map(|_| Allocation {
            devices: Vec::new(),
            node_selector: None,
        })
        .collect();
    let walked = walk(allocator, node, local, |claim, request, device| {
        (allocations[claim].devices).push(AllocatedDevice::exclusive(request.clone(), device));
    })?;
    Some(walked.map(|found| found.then_some(allocations)))
}

/// Whether the first path settles the node, building nothing: `Some(Ok(true))` when it
/// finds every device (what [`allocate`] would return is then an allocation),
/// `Some(Ok(false))` when no search could.
pub(super) fn fits(
    allocator: &Allocator,
    node: &Node,
    local: &[Arc<ResourceSlice>],
) -> Option<Result<bool, String>> {
    walk(allocator, node, local, |_, _, _| {})
}

/// The greedy walk, telling `pick` each device taken (claim index, request, device).
/// When the very first request cannot get its devices, no search can (every one of its
/// branches offers that request the same free devices, which the walk has all tried, so
/// it would have met any selector error the search would): `Ok(false)`.
fn walk(
    allocator: &Allocator,
    node: &Node,
    local: &[Arc<ResourceSlice>],
    pick: impl FnMut(usize, &Arc<str>, DeviceId),
) -> Option<Result<bool, String>> {
    if !is_simple(allocator) {
        return None;
    }
    let slices = single_slice_pools(node, local, &allocator.shared_slices)?;
    // The first request's facts of every slice, which say whether each slice's names are
    // distinct (a pool with a name twice is the search's to refuse).
    let first = &allocator.claims.first()?.requests.first()?.kind;
    let PreparedKind::Exactly(first) = first else {
        return None;
    };
    let mut first_facts: SmallVec<[Arc<SliceFacts>; 4]> = SmallVec::new();
    for slice in &slices {
        let facts = first.together.on(slice);
        if !facts.names_distinct {
            return None;
        }
        first_facts.push(facts);
    }
    let mut outcome = None;
    let mut pick = Some(pick);
    allocator.allocated.with_allocated(&mut |taken| {
        // Shares (DRAConsumableCapacity) are the search's to weigh.
        if let Some(pick) = pick.take().filter(|_| !taken.has_shares()) {
            outcome = walk_slices(allocator, &slices, &first_facts, taken, pick);
        }
    });
    outcome
}

fn walk_slices(
    allocator: &Allocator,
    slices: &[&Arc<ResourceSlice>],
    first_facts: &[Arc<SliceFacts>],
    taken: &dyn AllocatedView,
    mut pick: impl FnMut(usize, &Arc<str>, DeviceId),
) -> Option<Result<bool, String>> {
    let mut picked: SmallVec<[DeviceId; 8]> = SmallVec::new();
    for (c, claim) in allocator.claims.iter().enumerate() {
        for (r, request) in claim.requests.iter().enumerate() {
            let PreparedKind::Exactly(selection) = &request.kind else {
                return None;
            };
            let AllocationMode::ExactCount(count) = selection.mode else {
                return None;
            };
            let mut found = 0;
            for (s, slice) in slices.iter().enumerate() {
                if found == count {
                    break;
                }
                // The selectors' verdicts on the whole slice, class selectors first.
                let looked_up;
                let facts: &SliceFacts = if (c, r) == (0, 0) {
                    &first_facts[s]
                } else {
                    looked_up = selection.together.on(slice);
                    &looked_up
                };
                let verdicts = &facts.verdicts;
                let taken_here = taken.taken_in_pool(slice.driver, slice.pool);
                for (index, device) in slice.devices.iter().enumerate() {
                    if found == count {
                        break;
                    }
                    let id = DeviceId {
                        driver: slice.driver,
                        pool: slice.pool,
                        device: device.name,
                    };
                    let is_taken = match taken_here {
                        Some(names) => names.contains(&id.device),
                        None => taken.is_allocated(id),
                    };
                    if is_taken || picked.contains(&id) {
                        continue;
                    }
                    // In order, as the search evaluates them: the first No rejects the
                    // device, the first Error is reported (worded by the search's code).
                    match verdicts[index] {
                        Verdict::No => continue,
                        Verdict::Error => {
                            let error = selector_verdict(claim, selection, slice, index);
                            return Some(error.and(Err("a selector failed".to_string())));
                        }
                        Verdict::Yes => {}
                    }
                    // Counters are the search's to keep (a pool that has them is several
                    // slices; this is one slice consuming counters it cannot have).
                    if !device.consumes_counters.is_empty() {
                        return None;
                    }
                    // So are shared devices and request policies (DRAConsumableCapacity).
                    if device.allow_multiple_allocations
                        || device.capacity.iter().any(|c| c.request_policy.is_some())
                    {
                        return None;
                    }
                    if taints_prevent_allocation(&device.taints, &request.tolerations) {
                        continue;
                    }
                    picked.push(id);
                    pick(c, &request.name, id);
                    found += 1;
                }
            }
            if found < count {
                return picked.is_empty().then_some(Ok(false));
            }
        }
    }
    Some(Ok(true))
}

/// Exact counts under `exactly`, no constraints, within the claim limit.
fn is_simple(allocator: &Allocator) -> bool {
    allocator.claims.iter().all(|claim| {
        let mut total = 0u64;
        // Admin access may take held devices, which the walk does not model.
        let requests_simple = claim.requests.iter().all(|r| !r.admin_access)
            && claim.requests.iter().all(|r| match &r.kind {
                PreparedKind::Exactly(selection) if !selection.capacity.is_empty() => false,
                PreparedKind::Exactly(selection) => match selection.mode {
                    AllocationMode::ExactCount(n) => {
                        total += u64::from(n);
                        true
                    }
                    AllocationMode::All => false,
                },
                PreparedKind::FirstAvailable(_) => false,
            });
        requests_simple
            && claim.claim.spec.constraints.is_empty()
            && total <= ALLOCATION_RESULTS_MAX_SIZE as u64
    })
}

/// The slices the node reaches, in the search's pool order, when every pool is one
/// complete slice; `None` otherwise.
fn single_slice_pools<'a>(
    node: &Node,
    local: &'a [Arc<ResourceSlice>],
    shared: &'a [Arc<ResourceSlice>],
) -> Option<SmallVec<[&'a Arc<ResourceSlice>; 4]>> {
    let mut slices: SmallVec<[&'a Arc<ResourceSlice>; 4]> = SmallVec::new();
    for slice in local {
        if slice.node_name() == Some(node.name) {
            slices.push(slice);
        }
    }
    for slice in shared {
        let reachable = match &slice.nodes {
            SliceNodes::Node(_) => false,
            SliceNodes::Selector(selector) => selector.matches(node.name, &node.labels),
            SliceNodes::All => true,
            // Which of its devices the node reaches is the search's to check.
            nodes if nodes.reached_from(node.name, &node.labels) => return None,
            SliceNodes::PerDevice(_) => false,
        };
        if reachable {
            slices.push(slice);
        }
    }
    // Pools with binding conditions go after the others: the search's to order.
    if slices.iter().any(|s| s.binding_conditions) {
        return None;
    }
    // By driver, then pool, as strings; a name is looked up only where the symbols differ.
    let order = |a: &&Arc<ResourceSlice>, b: &&Arc<ResourceSlice>| {
        if a.driver != b.driver {
            a.driver.as_str().cmp(b.driver.as_str())
        } else if a.pool != b.pool {
            a.pool.as_str().cmp(b.pool.as_str())
        } else {
            std::cmp::Ordering::Equal
        }
    };
    match slices.len() {
        0 | 1 => {}
        // A node's own slice and one shared: one comparison, not the sort's machinery.
        2 => {
            if order(&slices[0], &slices[1]).is_gt() {
                slices.swap(0, 1);
            }
        }
        _ => slices.sort_by(order),
    }
    for (i, slice) in slices.iter().enumerate() {
        let alone = slices[i + 1..]
            .first()
            .is_none_or(|next| (next.driver, next.pool) != (slice.driver, slice.pool));
        if !alone || slice.pool_slice_count != 1 {
            return None;
        }
    }
    Some(slices)
}
