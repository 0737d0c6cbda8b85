//! NodeResourcesBalancedAllocation: prefers nodes whose cpu and memory would be used in
//! similar fractions after placing the pod; from v1.36, nodes whose balance the pod
//! improves most (kubernetes#135573).

use crate::plugins::node_resources_fit::{ScoredResource, default_scored_resources};
use crate::plugins::scored_resources::{
    BLOCK, ResourceRow, RowPair, RowScore, Rows, requests_none_of,
};
use crate::{MAX_NODE_SCORE, Plugin};
use gantry_api::Pod;

pub const NAME: &str = "NodeResourcesBalancedAllocation";

pub struct BalancedAllocation {
    pub resources: Vec<ScoredResource>,
    /// Score BestEffort pods (no request of any scored resource) 0 everywhere, so that
    /// they do not all pile onto one balanced node (kubernetes#129138; v1.32 on).
    pub skips_best_effort: bool,
    /// Score the change the pod makes to the node's balance, `50 + (50 + B(with) -
    /// B(without)) / 2` (v1.36 on), rather than the balance with the pod, `B(with)`.
    pub scores_change: bool,
}

impl Default for BalancedAllocation {
    fn default() -> BalancedAllocation {
        BalancedAllocation {
            resources: default_scored_resources(),
            skips_best_effort: true,
            scores_change: true,
        }
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    fn sign(&self, pod: &Pod, signature: &mut crate::Signature) -> bool {
        signature.add_resources(pod);
        true
    }
}

/// At most this many resources are balanced.
const MAX_RESOURCES: usize = 8;

impl RowScore for BalancedAllocation {
    /// Real requests (not the defaulted ones), as upstream's `useRequested: true`.
    const USE_NON_ZERO: bool = false;

    fn resources(&self) -> &[ScoredResource] {
        &self.resources
    }

    fn skips(&self, pod: &Pod) -> bool {
        self.skips_best_effort && requests_none_of(pod, &self.resources)
    }

    /// The balance with the pod (see [`balance_rows`]), or from v1.36 how the pod changes
    /// it: upstream's `balancedResourceScorer` (v1.36.3 `balanced_allocation.go`).
    fn score_rows(&self, rows: &[ResourceRow<'_>], positions: &[usize], scores: &mut [i64]) {
        if !self.scores_change {
            balance_rows(rows, positions, scores);
            return;
        }
        let rows = &rows[..rows.len().min(MAX_RESOURCES)];
        let mut scored = rows.iter().filter(|row| row.is_scored());
        if let (Some(first), Some(second), None) = (scored.next(), scored.next(), scored.next()) {
            // The default (cpu and memory): both balances from one read of the columns.
            let pair = RowPair::new(first, second);
            for (score, &p) in scores.iter_mut().zip(positions) {
                let [(a0, q0, w0), (a1, q1, w1)] = pair.at_without_and_with(p);
                *score = change(
                    pair_score([(a0, w0), (a1, w1)]),
                    pair_score([(a0, q0), (a1, q1)]),
                );
            }
            return;
        }
        let without: Rows<'_> = rows.iter().map(ResourceRow::without_pod).collect();
        for (positions, scores) in positions.chunks(BLOCK).zip(scores.chunks_mut(BLOCK)) {
            let mut before = [0; BLOCK];
            let before = &mut before[..positions.len()];
            balance_rows(rows, positions, scores);
            balance_rows(&without, positions, before);
            for (score, before) in scores.iter_mut().zip(before.iter()) {
                *score = change(*score, *before);
            }
        }
    }
}

/// v1.36's score from the balance with the pod and without it: `50 + (50 + with -
/// without) / 2`, Go's integer division (both balances lie in [50, 100]).
#[inline]
fn change(with: i64, without: i64) -> i64 {
    let half = MAX_NODE_SCORE / 2;
    half + (half + with - without) / 2
}

/// 100 less the standard deviation of the fractions of each resource the node would
/// have in use (at most 1 each), over the resources it has: v1.35's score.
fn balance_rows(rows: &[ResourceRow<'_>], positions: &[usize], scores: &mut [i64]) {
    let rows = &rows[..rows.len().min(MAX_RESOURCES)];
    let mut scored = rows.iter().filter(|row| row.is_scored());
    if let (Some(first), Some(second), None) = (scored.next(), scored.next(), scored.next()) {
        // The default (cpu and memory): straight from the columns, without buffers.
        let pair = RowPair::new(first, second);
        if pair.is_exact() {
            pair_balance(positions, scores, |p| pair.at_exact(p));
        } else {
            pair_balance(positions, scores, |p| pair.at(p));
        }
        return;
    }
    let mut allocatable = [[0; BLOCK]; MAX_RESOURCES];
    let mut requested = [[0; BLOCK]; MAX_RESOURCES];
    for (positions, scores) in positions.chunks(BLOCK).zip(scores.chunks_mut(BLOCK)) {
        let mut scored = 0;
        for row in rows {
            if row.read_block(positions, &mut allocatable[scored], &mut requested[scored]) {
                scored += 1;
            }
        }
        for (k, score) in scores.iter_mut().enumerate().take(positions.len()) {
            let mut fractions = [0f64; MAX_RESOURCES];
            let mut count = 0;
            for r in (0..scored).filter(|&r| allocatable[r][k] != 0) {
                fractions[count] = fraction(requested[r][k], allocatable[r][k]);
                count += 1;
            }
            *score = balance(&fractions[..count]);
        }
    }
}

/// The share of `allocatable` that `requested` uses, at most 1.
#[inline]
fn fraction(requested: i64, allocatable: i64) -> f64 {
    (requested as f64 / allocatable as f64).min(1.0)
}

/// The default two-resource loop of `score_rows`: `at` reads a node's two (allocatable,
/// requested) amounts.
#[inline(always)]
fn pair_balance(positions: &[usize], scores: &mut [i64], at: impl Fn(usize) -> [(i64, i64); 2]) {
    for (score, &p) in scores.iter_mut().zip(positions) {
        *score = pair_score(at(p));
    }
}

/// The balance of two (allocatable, requested) amounts.
#[inline(always)]
fn pair_score([(a0, q0), (a1, q1)]: [(i64, i64); 2]) -> i64 {
    let std = if a0 != 0 && a1 != 0 {
        (fraction(q0, a0) - fraction(q1, a1)).abs() / 2.0
    } else {
        0.0
    };
    from_std(std)
}

/// The score from the fractions in use of each resource.
fn balance(fractions: &[f64]) -> i64 {
    let n = fractions.len();
    let std = match n {
        0 | 1 => 0.0,
        2 => (fractions[0] - fractions[1]).abs() / 2.0,
        _ => {
            let mean = fractions.iter().sum::<f64>() / n as f64;
            (fractions.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / n as f64).sqrt()
        }
    };
    from_std(std)
}

#[inline]
fn from_std(std: f64) -> i64 {
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, node_info};
    use crate::{CycleState, ScorePlugin};
    use gantry_api::Pod;

    #[test]
    fn table() {
        // Re-derived from upstream's balanced_allocation_test.
        fn score(p: &Pod, n: &gantry_api::Node, existing: &[Pod]) -> i64 {
            BalancedAllocation {
                scores_change: false,
                ..BalancedAllocation::default()
            }
            .score(&CycleState::new(), p, &node_info(n, existing))
            .unwrap()
        }
        let empty = Pod::new("ns", "p");
        // "nothing scheduled, nothing requested": a BestEffort pod is skipped from v1.33
        // (kubernetes#130260); v1.28 scored fractions 0 and 0 as 100.
        assert_eq!(score(&empty, &node("n", 4000, 10000), &[]), 0);
        let v1_28 = BalancedAllocation {
            skips_best_effort: false,
            scores_change: false,
            ..BalancedAllocation::default()
        };
        let on_empty_node = |p: &Pod| {
            v1_28
                .score(
                    &CycleState::new(),
                    p,
                    &node_info(&node("n", 4000, 10000), &[]),
                )
                .unwrap()
        };
        assert_eq!(on_empty_node(&empty), 100);
        // Requests of other resources only: still BestEffort for cpu and memory.
        let mut gpu = gantry_api::Container::new("c", None, None);
        gpu.requests
            .set_scalar(gantry_api::Sym::new("example.com/gpu"), 1);
        let gpu_only = Pod::new("ns", "g").with_container(gpu);
        assert_eq!(
            gpu_only
                .requests()
                .scalar(gantry_api::Sym::new("example.com/gpu")),
            1
        );
        assert_eq!(score(&gpu_only, &node("n", 4000, 10000), &[]), 0);
        // "nothing scheduled, resources requested, differently sized nodes":
        // cpu 3000/4000 = 0.75, memory 5000/10000 = 0.5 -> std 0.125 -> 87.
        let p = Pod::new("ns", "p")
            .with_requests(1000, 2000)
            .with_requests(2000, 3000);
        assert_eq!(score(&p, &node("n1", 4000, 10000), &[]), 87);
        // cpu 3000/6000 = 0.5, memory 0.5 -> 100.
        assert_eq!(score(&p, &node("n2", 6000, 10000), &[]), 100);
        // Requests beyond capacity count as fully used.
        assert_eq!(score(&p, &node("n3", 1000, 10000), &[]), 75);
    }

    /// v1.36 (kubernetes#135573): `50 + (50 + B(with) - B(without)) / 2`. Node 4000m /
    /// 8Gi, pod 1000m / 1Gi; the balances as upstream's float arithmetic truncates them.
    #[test]
    fn v1_36_scores_the_change_in_balance() {
        let gib = 1 << 30;
        let node = node("n", 4000, 8 * gib);
        let pod = Pod::new("ns", "p").with_requests(1000, gib);
        let existing = |milli_cpu, memory| Pod::new("ns", "e").with_requests(milli_cpu, memory);
        let both = |existing: &[Pod]| {
            let info = node_info(&node, existing);
            let state = CycleState::new();
            let v1_35 = BalancedAllocation {
                scores_change: false,
                ..BalancedAllocation::default()
            };
            (
                v1_35.score(&state, &pod, &info).unwrap(),
                BalancedAllocation::default()
                    .score(&state, &pod, &info)
                    .unwrap(),
            )
        };
        // Empty: B 100 without (0, 0), 93 with (.25, .125): the pod spoils a perfect
        // balance, 50 + (50 + 93 - 100) / 2 = 71.
        assert_eq!(both(&[]), (93, 71));
        // 1000m / 4Gi: B 87 without (.25, .5), 93 with (.5, .625): 50 + 56 / 2 = 78.
        assert_eq!(both(&[existing(1000, 4 * gib)]), (93, 78));
        // 3000m / 1Gi: B 68 without (.75, .125), 62 with (1.0, .25): 50 + 44 / 2 = 72;
        // the unbalanced node now beats the empty one.
        assert_eq!(both(&[existing(3000, gib)]), (62, 72));
        // A pod that keeps the balance scores 75 wherever it goes.
        let same = Pod::new("ns", "s").with_requests(1000, 2 * gib);
        let info = node_info(&node, &[existing(2000, 4 * gib)]);
        assert_eq!(
            BalancedAllocation::default()
                .score(&CycleState::new(), &same, &info)
                .unwrap(),
            75
        );
        // BestEffort pods still score 0.
        assert_eq!(
            BalancedAllocation::default()
                .score(&CycleState::new(), &Pod::new("ns", "be"), &info)
                .unwrap(),
            0
        );
    }
}
