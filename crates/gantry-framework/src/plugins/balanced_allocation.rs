//! NodeResourcesBalancedAllocation: prefers nodes whose cpu and memory would be used in
//! similar fractions after placing the pod.

use gantry_api::Pod;
use gantry_cache::{NodeColumns, NodeInfo};
use smallvec::SmallVec;

use crate::plugins::node_resources_fit::{
    ScoredColumns, ScoredResource, allocatable_and_requested, default_scored_resources,
};
use crate::{CycleState, MAX_NODE_SCORE, Plugin, ScorePlugin, Status};

pub const NAME: &str = "NodeResourcesBalancedAllocation";

pub struct BalancedAllocation {
    pub resources: Vec<ScoredResource>,
}

impl Default for BalancedAllocation {
    fn default() -> BalancedAllocation {
        BalancedAllocation {
            resources: default_scored_resources(),
        }
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// At most this many resources are balanced.
const MAX_RESOURCES: usize = 8;

impl BalancedAllocation {
    /// The score from each resource's (allocatable, requested with the pod), given in
    /// `self.resources` order.
    #[inline]
    fn balance(&self, mut amounts: impl FnMut(usize) -> (i64, i64)) -> i64 {
        let mut fractions = [0f64; MAX_RESOURCES];
        let mut n = 0;
        for i in 0..self.resources.len().min(MAX_RESOURCES) {
            let (allocatable, requested) = amounts(i);
            if allocatable == 0 {
                continue;
            }
            fractions[n] = (requested as f64 / allocatable as f64).min(1.0);
            n += 1;
        }
        let fractions = &fractions[..n];
        let std = match n {
            0 | 1 => 0.0,
            2 => (fractions[0] - fractions[1]).abs() / 2.0,
            _ => {
                let mean = fractions.iter().sum::<f64>() / n as f64;
                (fractions.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / n as f64).sqrt()
            }
        };
        ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
    }
}

impl ScorePlugin for BalancedAllocation {
    /// Real requests (not the defaulted ones), as upstream's `useRequested: true`.
    fn score(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        Ok(self.balance(|i| allocatable_and_requested(node, pod, self.resources[i].name, false)))
    }

    fn score_columns(
        &self,
        _state: &CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        columns: &NodeColumns,
        positions: &[usize],
        scores: &mut [i64],
    ) -> Result<bool, Status> {
        let resources: SmallVec<[ScoredColumns<'_>; MAX_RESOURCES]> = self
            .resources
            .iter()
            .take(MAX_RESOURCES)
            .map(|r| ScoredColumns::new(columns, pod, r.name, false))
            .collect();
        for (score, &p) in scores.iter_mut().zip(positions) {
            *score = self.balance(|i| resources[i].at(p));
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, node_info};

    #[test]
    fn table() {
        // Re-derived from upstream's balanced_allocation_test.
        fn score(p: &Pod, n: &gantry_api::Node, existing: &[Pod]) -> i64 {
            BalancedAllocation::default()
                .score(&CycleState::new(), p, &node_info(n, existing))
                .unwrap()
        }
        let empty = Pod::new("ns", "p");
        // "nothing scheduled, nothing requested": fractions 0 and 0.
        assert_eq!(score(&empty, &node("n", 4000, 10000), &[]), 100);
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
}
