//! `topology-aware`: when more cards fit than the container asks for, HAMi picks them by
//! the pair scores the node publishes (`hami.io/node-nvidia-score`): one card alone goes
//! to the card worst connected to the others, several go to the best connected set.

use gantry_api::gpu::Card;

use super::fit::{ContainerCards, Given};

/// The `wanted` cards of `candidates` (in the order the walk met them) HAMi keeps.
pub fn pick(cards: &[Card], candidates: &[Given], wanted: usize) -> ContainerCards {
    let score = |a: &Given, b: &Given| cards[a.card].pair_score(&cards[b.card].id);
    if wanted == 1 {
        // `computeWorstSingleCard`: the lowest total to the others; the first on ties.
        let total = |a: &Given| -> i64 {
            candidates
                .iter()
                .filter(|b| cards[b.card].id != cards[a.card].id)
                .map(|b| score(a, b))
                .sum()
        };
        let worst = candidates
            .iter()
            .min_by_key(|a| total(a))
            .expect("more candidates than wanted");
        return ContainerCards::from_slice(&[*worst]);
    }
    // `computeBestCombination` over `generateCombinations`: every subset of `wanted`
    // candidates in lexicographic order; the highest sum of pair scores, the first on ties.
    let mut best: Option<(i64, Vec<usize>)> = None;
    let mut current: Vec<usize> = (0..wanted).collect();
    loop {
        let mut total = 0;
        for (i, &a) in current.iter().enumerate() {
            for &b in &current[i + 1..] {
                total += score(&candidates[a], &candidates[b]);
            }
        }
        if best.as_ref().is_none_or(|(s, _)| total > *s) {
            best = Some((total, current.clone()));
        }
        // The next combination in lexicographic order.
        let n = candidates.len();
        let Some(i) = (0..wanted).rev().find(|&i| current[i] != i + n - wanted) else {
            break;
        };
        current[i] += 1;
        for j in i + 1..wanted {
            current[j] = current[j - 1] + 1;
        }
    }
    let (_, chosen) = best.expect("at least one combination");
    chosen.into_iter().map(|i| candidates[i]).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::plugins::gpu_share::fit::tests::card;

    /// HAMi's pair scores: gpu0–gpu1 100, gpu0–gpu2 200, gpu1–gpu2 150.
    fn cards(scores: [(i64, i64, i64); 1]) -> Vec<Card> {
        let [(s01, s02, s12)] = scores;
        let with = |id: &str, pairs: &[(&str, i64)]| {
            let mut c = card(id, 10, 8192, 100, 0, true);
            c.pair_scores = pairs.iter().map(|(o, s)| (Arc::from(*o), *s)).collect();
            c
        };
        vec![
            with("gpu0", &[("gpu1", s01), ("gpu2", s02)]),
            with("gpu1", &[("gpu0", s01), ("gpu2", s12)]),
            with("gpu2", &[("gpu0", s02), ("gpu1", s12)]),
        ]
    }

    fn all() -> Vec<Given> {
        (0..3)
            .map(|card| Given {
                card,
                memory_mib: 0,
                cores: 0,
            })
            .collect()
    }

    fn ids(cards: &[Card], picked: &ContainerCards) -> Vec<String> {
        picked
            .iter()
            .map(|g| cards[g.card].id.to_string())
            .collect()
    }

    #[test]
    fn one_card_goes_to_the_worst_connected() {
        // HAMi's TestComputeWorstSingleCard: totals 300, 250, 350.
        let c = cards([(100, 200, 150)]);
        assert_eq!(ids(&c, &pick(&c, &all(), 1)), ["gpu1"]);
        // TestFit_TopologyNegativeScores, single card: totals -8, -6, -4.
        let c = cards([(-5, -3, -1)]);
        assert_eq!(ids(&c, &pick(&c, &all(), 1)), ["gpu0"]);
    }

    #[test]
    fn several_cards_go_to_the_best_connected_set() {
        // HAMi's TestComputeBestCombination: [gpu0, gpu2] scores 200.
        let c = cards([(100, 200, 150)]);
        assert_eq!(ids(&c, &pick(&c, &all(), 2)), ["gpu0", "gpu2"]);
        // TestFit_TopologyNegativeScores, two cards: [gpu1, gpu2] scores -1.
        let c = cards([(-5, -3, -1)]);
        assert_eq!(ids(&c, &pick(&c, &all(), 2)), ["gpu1", "gpu2"]);
        // All zero: the first combination.
        let c = cards([(0, 0, 0)]);
        assert_eq!(ids(&c, &pick(&c, &all(), 2)), ["gpu0", "gpu1"]);
        assert_eq!(pick(&c, &all(), 3).len(), 3);
    }
}
