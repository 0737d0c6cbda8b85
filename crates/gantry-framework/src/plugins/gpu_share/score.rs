//! HAMi's scores, in its float32 arithmetic: a card's, with the container's request
//! added (`DeviceListsScore.ComputeScore`), which orders the cards; and a node's, of the
//! usage before the pod (`NodeScore.ComputeDefaultScore`), which picks the node.

use gantry_api::gpu::Card;
use gantry_cache::{CardUsage, DeviceUsage};

use super::policy::Weights;
use super::request::CardRequest;

/// HAMi's `util.Weight`.
const WEIGHT: f32 = 10.0;

/// A card's score once the container's request is on it: shares, compute and memory in
/// use as fractions of the card, weighted and summed.
pub fn card_score(card: &Card, used: &CardUsage, request: &CardRequest, w: &Weights) -> f32 {
    if card.count == 0 || card.cores == 0 || card.memory_mib == 0 {
        return 0.0;
    }
    let memory = if request.memory_percentage != 0
        && request.memory_percentage != super::request::NO_PERCENTAGE
    {
        ((i64::from(card.memory_mib) * i64::from(request.memory_percentage)) / 100) as i32
    } else {
        request.memory_mib
    };
    // One share per request type (HAMi's `request += 1`); summed in i64, where HAMi's
    // int32 sums would wrap.
    let used_score = 1i64.saturating_add(used.used) as f32 / card.count as f32;
    let core_score = i64::from(request.cores).saturating_add(used.cores) as f32 / card.cores as f32;
    let memory_score =
        i64::from(memory).saturating_add(used.memory_mib) as f32 / card.memory_mib as f32;
    WEIGHT
        * (w.slot as f32 * used_score + w.core as f32 * core_score + w.memory as f32 * memory_score)
}

/// A node's score before the pod: shares, compute and memory in use over all its cards,
/// as fractions, summed and weighted.
pub fn node_score(usage: &DeviceUsage) -> f32 {
    node_score_of(usage.total(), usage.capacity())
}

/// `node_score` from what the cards hold and offer in all.
pub fn node_score_of(used: &CardUsage, offered: &CardUsage) -> f32 {
    WEIGHT
        * (used.used as f32 / offered.used as f32
            + used.cores as f32 / offered.cores as f32
            + used.memory_mib as f32 / offered.memory_mib as f32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::gpu_share::fit::tests::{card, req, usage};
    use crate::plugins::gpu_share::request::NO_PERCENTAGE;

    #[test]
    fn card_scores_follow_hamis_formula() {
        let c = card("a", 10, 8000, 100, 0, true);
        let idle = CardUsage::default();
        // 10 × (1/10 + 30/100 + 1000/8000) = 5.25, HAMi's one-card case.
        let r = req(1, 1000, NO_PERCENTAGE, 30);
        assert_eq!(card_score(&c, &idle, &r, &Weights::default()), 5.25);
        let half = CardUsage {
            used: 5,
            memory_mib: 4000,
            cores: 50,
            exclusive: 0,
        };
        // HAMi's "device having use 50% core, 50% mem" case: 20.25.
        assert_eq!(card_score(&c, &half, &r, &Weights::default()), 20.25);
        // A percentage counts that share of the card's memory.
        let pct = req(1, 0, 50, 0);
        assert_eq!(card_score(&c, &idle, &pct, &Weights::default()), 6.0);
        // Weights scale each part; a card with no compute scores 0.
        let w = Weights {
            slot: 0,
            core: 0,
            memory: 2,
        };
        assert_eq!(card_score(&c, &idle, &r, &w), 2.5);
        assert_eq!(
            card_score(
                &card("z", 10, 8000, 0, 0, true),
                &idle,
                &r,
                &Weights::default()
            ),
            0.0
        );
    }

    #[test]
    fn node_scores_are_hamis_default_score() {
        // HAMi's TestComputeDefaultScore: 125/250 shares, 300/300 cores, 300/300 MiB
        // over two devices score 25.
        let u = usage(
            vec![
                card("d1", 100, 100, 100, 0, true),
                card("d2", 150, 200, 200, 1, false),
            ],
            &[(50, 100, 100), (75, 200, 200)],
        );
        assert_eq!(node_score(&u), 25.0);
        let empty = usage(vec![card("d1", 10, 100, 100, 0, true)], &[]);
        assert_eq!(node_score(&empty), 0.0);
    }
}
