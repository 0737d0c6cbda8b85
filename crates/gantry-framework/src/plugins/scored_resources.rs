//! What the resource scores (NodeResourcesFit's strategies, BalancedAllocation) read: for
//! each scored resource, every node's allocatable amount and its requested amount with the
//! pod added, as upstream's `calculateResourceAllocatableRequest` reads them. The amounts
//! come from the snapshot's columns, or from one NodeInfo seen as a one-node column set, so
//! the scores have one implementation, with inner loops over plain arrays.

use gantry_api::{Pod, ResourceName};
use gantry_cache::{Amount, NodeColumns, NodeInfo};
use smallvec::SmallVec;

use crate::plugins::dynamic_resources;
use crate::plugins::node_resources_fit::ScoredResource;
use crate::{CycleState, Plugin, ScorePlugin, Status};

/// A score read from the scored resources' rows: its Score, on one node or on the
/// snapshot's columns, is `score_rows` over the matching rows.
pub trait RowScore: Plugin {
    /// Whether cpu and memory are read as defaulted requests (see [`pod_side`]).
    const USE_NON_ZERO: bool;

    fn resources(&self) -> &[ScoredResource];

    /// Scores the nodes at `positions` (of the rows) into `scores`.
    fn score_rows(&self, rows: &[ResourceRow<'_>], positions: &[usize], scores: &mut [i64]);

    /// Whether the plugin skips `pod` (it then scores 0 everywhere).
    fn skips(&self, _pod: &Pod) -> bool {
        false
    }
}

/// Whether `pod` requests none of `resources` (upstream's `isBestEffortPod` over the
/// scored resources' real requests).
pub fn requests_none_of(pod: &Pod, resources: &[ScoredResource]) -> bool {
    resources.iter().all(|r| pod.requests().get(r.name) == 0)
}

impl<T: RowScore> ScorePlugin for T {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        if self.skips(pod) {
            return Ok(0);
        }
        let resources = self.resources();
        let node = OneNode::new(node, pod, resources, T::USE_NON_ZERO, state);
        let mut score = [0];
        self.score_rows(
            &node.rows(pod, resources, T::USE_NON_ZERO),
            &[0],
            &mut score,
        );
        Ok(score[0])
    }

    /// Upstream's resource scores have no NormalizeScore.
    fn normalizes(&self) -> bool {
        false
    }

    /// Not when a device class serves one of the pod's extended resources (the node's
    /// devices are then counted, see `OneNode`).
    fn worth_remembering(&self, state: &CycleState, _pod: &Pod) -> bool {
        !dynamic_resources::asks_for_served_resources(state)
    }

    fn score_columns(
        &self,
        state: &CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        columns: &NodeColumns,
        positions: &[usize],
        scores: &mut [i64],
    ) -> Result<bool, Status> {
        if self.skips(pod) {
            scores.fill(0);
            return Ok(true);
        }
        // Extended resources served by devices are counted node by node (`OneNode`).
        if dynamic_resources::asks_for_served_resources(state) {
            return Ok(false);
        }
        let rows = rows_from_columns(columns, pod, self.resources(), T::USE_NON_ZERO);
        self.score_rows(&rows, positions, scores);
        Ok(true)
    }
}

/// Nodes scored together.
pub const BLOCK: usize = 64;

/// Below this, integers convert to f64 exactly.
const EXACT_IN_F64: i64 = 1 << 53;

/// `x / divisor`, rounded down, for a non-negative `x` and a positive `divisor`: through
/// f64 division (several times faster than 64-bit integer division) when both are below
/// 2^53. That is exact: the conversions are, and the quotient q = x / divisor is rounded
/// by less than ulp(q) / 2 < 2^53 / divisor * 2^-53 = 1 / divisor, while a quotient that
/// is not an integer lies at least 1 / divisor below the next one, so rounding never
/// reaches it. Otherwise, integer division.
#[inline]
pub fn div_floor(x: i64, divisor: i64) -> i64 {
    if (0..EXACT_IN_F64).contains(&x) && (1..EXACT_IN_F64).contains(&divisor) {
        (x as f64 / divisor as f64) as i64
    } else {
        x / divisor
    }
}

/// `x * factor / divisor` rounded down, for a non-negative `x` and `factor` and a positive
/// `divisor`: through [`div_floor`] when the product fits in i64, in i128 when it does not
/// (upstream's int64 product wraps for amounts above i64::MAX / 100, as a node of 100 PB
/// of memory has, and turns the score negative).
#[inline]
pub fn mul_div_floor(x: i64, factor: i64, divisor: i64) -> i64 {
    match x.checked_mul(factor) {
        Some(product) => div_floor(product, divisor),
        None => (i128::from(x) * i128::from(factor) / i128::from(divisor)) as i64,
    }
}

/// One scored resource's amounts on the nodes.
#[derive(Clone, Copy)]
pub struct ResourceRow<'a> {
    allocatable: &'a [i64],
    /// What the node's pods request.
    requested: &'a [i64],
    /// What the pod requests.
    pod_request: i64,
    /// An extended resource the pod does not request is not scored (upstream scores it
    /// as 0 of 0).
    unscored: bool,
    /// No amount, nor the pod's request, is past [`EXACT_LIMIT`]: sums and products of
    /// the scores cannot overflow, and need no check.
    exact: bool,
}

/// Below this magnitude, an amount plus a request, times 100, fits in i64 with room to
/// spare (2^56 · 100 < 2^63).
pub const EXACT_LIMIT: u64 = 1 << 55;

/// Resources held inline (no allocation when scoring one node) up to this many.
const INLINE_RESOURCES: usize = 8;

/// Each scored resource's row, in the plugin's order.
pub type Rows<'a> = SmallVec<[ResourceRow<'a>; INLINE_RESOURCES]>;

/// Which requests of `resource` the score reads (cpu and memory defaulted when
/// `use_non_zero`), and what the pod asks of it.
fn pod_side(pod: &Pod, resource: ResourceName, use_non_zero: bool) -> (Amount, i64) {
    if use_non_zero && matches!(resource, ResourceName::Cpu | ResourceName::Memory) {
        (
            Amount::NonZeroRequested,
            pod.non_zero_requests().get(resource),
        )
    } else {
        (Amount::Requested, pod.requests().get(resource))
    }
}

impl<'a> ResourceRow<'a> {
    /// `largest`: an upper bound of the magnitudes in the two columns.
    fn new(
        resource: ResourceName,
        allocatable: &'a [i64],
        requested: &'a [i64],
        pod_request: i64,
        largest: u64,
    ) -> ResourceRow<'a> {
        ResourceRow {
            allocatable,
            requested,
            pod_request,
            unscored: matches!(resource, ResourceName::Scalar(_)) && pod_request == 0,
            exact: largest <= EXACT_LIMIT && pod_request.unsigned_abs() <= EXACT_LIMIT,
        }
    }
}

/// The rows of `resources` over the snapshot's columns (positions are node positions).
fn rows_from_columns<'a>(
    columns: &'a NodeColumns,
    pod: &Pod,
    resources: &[ScoredResource],
    use_non_zero: bool,
) -> Rows<'a> {
    resources
        .iter()
        .map(|r| {
            let (amount, pod_request) = pod_side(pod, r.name, use_non_zero);
            ResourceRow::new(
                r.name,
                columns.column(r.name, Amount::Allocatable),
                columns.column(r.name, amount),
                pod_request,
                columns.largest_amount(),
            )
        })
        .collect()
}

/// One node's amounts, which `rows` lends as a one-node column set (position 0).
struct OneNode {
    /// (allocatable, requested) per scored resource.
    amounts: SmallVec<[(i64, i64); INLINE_RESOURCES]>,
}

impl OneNode {
    /// An extended resource the pod asks for that the node's allocatable lacks and a class
    /// serves (DRAExtendedResource) is the node's devices of the class: how many it
    /// reaches, and how many are allocated (upstream's `calculateResourceAllocatableRequest`).
    fn new(
        node: &NodeInfo,
        pod: &Pod,
        resources: &[ScoredResource],
        use_non_zero: bool,
        state: &CycleState,
    ) -> OneNode {
        let amounts = resources
            .iter()
            .map(|r| {
                let (amount, pod_request) = pod_side(pod, r.name, use_non_zero);
                let allocatable = node.allocatable().get(r.name);
                if let ResourceName::Scalar(name) = r.name
                    && allocatable == 0
                    && pod_request > 0
                    && let Some((devices, allocated)) =
                        dynamic_resources::extended_device_totals(state, name, node)
                    && devices > 0
                {
                    return (devices, allocated);
                }
                let requested = match amount {
                    Amount::NonZeroRequested => node.non_zero_requested().get(r.name),
                    _ => node.requested().get(r.name),
                };
                (allocatable, requested)
            })
            .collect();
        OneNode { amounts }
    }

    fn rows<'a>(&'a self, pod: &Pod, resources: &[ScoredResource], use_non_zero: bool) -> Rows<'a> {
        resources
            .iter()
            .zip(&self.amounts)
            .map(|(r, (allocatable, requested))| {
                ResourceRow::new(
                    r.name,
                    std::slice::from_ref(allocatable),
                    std::slice::from_ref(requested),
                    pod_side(pod, r.name, use_non_zero).1,
                    allocatable.unsigned_abs().max(requested.unsigned_abs()),
                )
            })
            .collect()
    }
}

impl<'a> ResourceRow<'a> {
    /// The same row as if the pod requested nothing, scored or not as the pod's own
    /// request decides (NodeResourcesBalancedAllocation's balance without the pod).
    pub fn without_pod(&self) -> ResourceRow<'a> {
        ResourceRow {
            pod_request: 0,
            ..*self
        }
    }

    /// False for an extended resource the pod does not request.
    pub fn is_scored(&self) -> bool {
        !self.unscored
    }

    /// The allocatable and requested-with-the-pod amounts of the node at `position`, for
    /// a scored resource.
    #[inline]
    pub fn at(&self, position: usize) -> (i64, i64) {
        (
            self.allocatable[position],
            self.requested[position].saturating_add(self.pod_request),
        )
    }

    /// The allocatable and requested-with-the-pod amounts of the nodes at `positions` (a
    /// block); false, writing nothing, when the resource is not scored for this pod.
    #[inline]
    pub fn read_block(
        &self,
        positions: &[usize],
        allocatable: &mut [i64; BLOCK],
        requested: &mut [i64; BLOCK],
    ) -> bool {
        if self.unscored {
            return false;
        }
        for ((a, q), &p) in allocatable
            .iter_mut()
            .zip(requested.iter_mut())
            .zip(positions)
        {
            *a = self.allocatable[p];
            *q = self.requested[p].saturating_add(self.pod_request);
        }
        true
    }
}

/// Two scored resources' rows cut to one length, so that a loop reading both at a
/// position checks the bounds once (the default: cpu and memory).
pub struct RowPair<'a> {
    allocatable: [&'a [i64]; 2],
    requested: [&'a [i64]; 2],
    pod_request: [i64; 2],
    exact: bool,
}

impl<'a> RowPair<'a> {
    pub fn new(first: &ResourceRow<'a>, second: &ResourceRow<'a>) -> RowPair<'a> {
        let n = [first, second]
            .iter()
            .map(|row| row.allocatable.len().min(row.requested.len()))
            .min()
            .unwrap_or(0);
        RowPair {
            allocatable: [&first.allocatable[..n], &second.allocatable[..n]],
            requested: [&first.requested[..n], &second.requested[..n]],
            pod_request: [first.pod_request, second.pod_request],
            exact: first.exact && second.exact,
        }
    }

    /// Whether both rows are exact (see [`ResourceRow`]): then [`RowPair::at_exact`]
    /// reads them.
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// As [`RowPair::at`], for exact rows: the sums cannot overflow.
    #[inline]
    pub fn at_exact(&self, position: usize) -> [(i64, i64); 2] {
        let [a0, a1] = self.allocatable;
        let [q0, q1] = self.requested;
        let [add0, add1] = self.pod_request;
        [
            (a0[position], q0[position] + add0),
            (a1[position], q1[position] + add1),
        ]
    }

    /// Both resources' allocatable and requested amounts at `position`, without the pod
    /// and with it: `[(allocatable, without, with); 2]`.
    #[inline]
    pub fn at_without_and_with(&self, position: usize) -> [(i64, i64, i64); 2] {
        let [a0, a1] = self.allocatable;
        let [q0, q1] = self.requested;
        let [add0, add1] = self.pod_request;
        let (q0, q1) = (q0[position], q1[position]);
        [
            (a0[position], q0, q0.saturating_add(add0)),
            (a1[position], q1, q1.saturating_add(add1)),
        ]
    }

    /// As [`ResourceRow::at`] for both resources.
    #[inline]
    pub fn at(&self, position: usize) -> [(i64, i64); 2] {
        let [a0, a1] = self.allocatable;
        let [q0, q1] = self.requested;
        let [add0, add1] = self.pod_request;
        [
            (a0[position], q0[position].saturating_add(add0)),
            (a1[position], q1[position].saturating_add(add1)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn float_division_agrees_with_integer_division(
            x in prop_oneof![0i64..1_000_000, 0i64..EXACT_IN_F64, (EXACT_IN_F64 - 1000)..EXACT_IN_F64],
            divisor in prop_oneof![1i64..1000, 1i64..EXACT_IN_F64, (EXACT_IN_F64 - 1000)..EXACT_IN_F64],
        ) {
            prop_assert_eq!(div_floor(x, divisor), x / divisor);
            // Quotients just below an integer, the case rounding could break.
            let k = x % 1000 + 1;
            if let Some(y) = k.checked_mul(divisor).map(|y| y - 1).filter(|y| *y < EXACT_IN_F64) {
                prop_assert_eq!(div_floor(y, divisor), k - 1);
            }
        }
    }

    #[test]
    fn products_past_i64_are_exact() {
        assert_eq!(mul_div_floor(i64::MAX, 100, i64::MAX), 100);
        assert_eq!(mul_div_floor(i64::MAX / 2, 100, i64::MAX), 49);
        assert_eq!(mul_div_floor(7, 100, 3), 233);
    }

    #[test]
    fn out_of_range_operands_divide_as_integers() {
        assert_eq!(div_floor(i64::MAX, 3), i64::MAX / 3);
        assert_eq!(div_floor(-7, 2), -3);
        assert_eq!(div_floor(EXACT_IN_F64 + 1, EXACT_IN_F64 + 1), 1);
    }
}
