//! A node's cards at a glance: whether a pod's card request passes HAMi's checks on every
//! open card of a node, read from the node's [`CardSummary`] in the snapshot's columns
//! instead of walking its cards (`fit::fits`), for the pods whose checks read nothing
//! else.

use gantry_cache::CardSummary;

use super::fit::order_free;
use super::request::{NO_PERCENTAGE, PodRequest};

/// What a pod needs of every open card of a node (see [`CardSummary`]) for the node to
/// pass `fits` without visiting its cards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryNeed {
    cards: u32,
    memory_mib: i64,
    cores: i64,
}

impl SummaryNeed {
    /// `None` when a summary cannot vouch for the pod: its containers' choices depend on
    /// each other (`order_free`), or a check depends on more than the least free amounts
    /// (types, UUIDs, modes, the mutex policy, a percentage of each card's memory, a whole
    /// card's compute, which must find the card unshared).
    pub fn of(pod: &PodRequest) -> Option<SummaryNeed> {
        let restricted = pod.gpu_policy.mutex
            || !pod.use_types.is_empty()
            || !pod.nouse_types.is_empty()
            || pod.vgpu_mode.is_some()
            || pod.use_uuids.is_some()
            || pod.nouse_uuids.is_some();
        if restricted || !order_free(pod) {
            return None;
        }
        // At least one core free: a card whose compute is used up refuses even a
        // container asking for none (CardComputeUnitsExhausted).
        let mut need = SummaryNeed {
            cards: 0,
            memory_mib: 0,
            cores: 1,
        };
        // Each container alone against the node as it is (order_free): the largest asks.
        for request in pod.containers.iter().flatten() {
            let percentage = request.memory_mib <= 0 && request.memory_percentage != NO_PERCENTAGE;
            if percentage || request.granted_cores() >= 100 {
                return None;
            }
            need.cards = need.cards.max(u32::try_from(request.nums).ok()?);
            need.memory_mib = need.memory_mib.max(i64::from(request.memory_mib));
            need.cores = need.cores.max(i64::from(request.granted_cores()));
        }
        Some(need)
    }

    /// Whether every container finds enough open cards with room on a node of this
    /// summary: each open card passes `check_card_kind` and `check_card_room`, and there
    /// are enough of them.
    pub fn met_by(&self, summary: &CardSummary) -> bool {
        summary.open >= self.cards
            && summary.min_free_shares >= 1
            && summary.min_free_memory_mib >= self.memory_mib
            && summary.min_free_cores >= self.cores
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gantry_api::gpu::{self, Card};
    use gantry_cache::DeviceUsage;

    use super::*;
    use crate::plugins::gpu_share::fit::fits;
    use crate::plugins::gpu_share::fit::tests::{card, pod, req, usage};
    use crate::plugins::gpu_share::request::CardRequest;

    #[test]
    fn a_summary_passes_a_node_whose_every_open_card_has_room() {
        let mut p = pod("spread");
        p.containers.push(Some(req(2, 1024, NO_PERCENTAGE, 10)));
        let need = SummaryNeed::of(&p).expect("a plain request");
        let cards = || {
            vec![
                card("a", 10, 8192, 100, 0, true),
                card("b", 10, 8192, 100, 0, true),
                card("sick", 10, 8192, 100, 0, false),
            ]
        };
        // The bench's shape: every card shared by four pods.
        let busy = usage(cards(), &[(4, 4096, 40), (4, 4096, 40), (10, 8192, 100)]);
        assert!(need.met_by(busy.summary()) && fits(&p, &busy).is_ok());
        // One open card full: the summary does not tell, the walk decides.
        let full = usage(cards(), &[(10, 0, 0), (0, 0, 0), (0, 0, 0)]);
        assert!(!need.met_by(full.summary()));
        // Too few open cards: the unhealthy one does not count.
        p.containers[0] = Some(req(3, 1024, NO_PERCENTAGE, 10));
        let need = SummaryNeed::of(&p).unwrap();
        assert!(!need.met_by(busy.summary()) && fits(&p, &busy).is_err());
    }

    #[test]
    fn a_summary_does_not_vouch_where_a_card_rule_reads_more_than_free_amounts() {
        let vouches = |p: &PodRequest, u: &DeviceUsage| {
            SummaryNeed::of(p).is_some_and(|need| need.met_by(u.summary()))
        };
        let one_card =
            |used: (i32, i32, i32)| usage(vec![card("a", 10, 8192, 100, 0, true)], &[used]);
        let asking = |request: CardRequest| {
            let mut p = pod("spread");
            p.containers.push(Some(request));
            p
        };
        // Each row: the request, the card's usage, and HAMi's reason.
        let cases = [
            // 60 % of 8,192 MiB is more than the 4,096 free.
            (req(1, 0, 60, 10), (1, 4096, 10), "CardInsufficientMemory"),
            // A whole card's compute, on a card another pod shares without compute.
            (
                req(1, 100, NO_PERCENTAGE, 100),
                (1, 0, 0),
                "ExclusiveDeviceAllocateConflict",
            ),
            // No compute asked, on a card whose compute is used up.
            (
                req(1, 100, NO_PERCENTAGE, 0),
                (1, 0, 100),
                "CardComputeUnitsExhausted",
            ),
        ];
        for (request, used, reason) in cases {
            let (p, u) = (asking(request), one_card(used));
            assert_eq!(fits(&p, &u), Err(format!("1/1 {reason}")));
            assert!(!vouches(&p, &u), "{request:?} on {used:?}");
        }
        // Below those limits the summary vouches.
        let (p, u) = (asking(req(1, 0, 40, 10)), one_card((1, 4096, 10)));
        assert!(
            fits(&p, &u).is_ok() && !vouches(&p, &u),
            "a percentage is never vouched for"
        );
        let (p, u) = (asking(req(1, 100, NO_PERCENTAGE, 99)), one_card((0, 0, 0)));
        assert!(fits(&p, &u).is_ok() && vouches(&p, &u));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        /// The summary shortcut never passes a node that HAMi's card walk refuses. Usage
        /// is mostly light, so that summaries often vouch and each check is put to work.
        #[test]
        fn a_summary_never_passes_a_node_the_cards_refuse(
            cards in proptest::collection::vec(
                (1..12i32, 500..4000i32, proptest::prop_oneof![0..1i32, 100..101i32, 1..200i32],
                 proptest::bool::weighted(0.9), proptest::bool::weighted(0.1), 0..4u8, 0..2i32),
                0..6,
            ),
            used in proptest::collection::vec(
                proptest::collection::vec(proptest::prop_oneof![
                    2 => 0..1i64, 6 => 0..60i64, 1 => 60..100i64, 2 => 100..101i64, 1 => 101..111i64,
                ], 3),
                6,
            ),
            containers in proptest::collection::vec(
                proptest::option::of((
                    proptest::prop_oneof![3 => 1..3i32, 1 => -1..5i32],
                    proptest::prop_oneof![1 => -1..1i32, 4 => 1..1500i32],
                    proptest::prop_oneof![4 => NO_PERCENTAGE..NO_PERCENTAGE + 1, 1 => 0..101i32],
                    proptest::prop_oneof![4 => -5..40i32, 1 => 40..120i32],
                )),
                1..4,
            ),
            init_containers in 0..3usize,
            (mutex, numa_bind) in (proptest::bool::weighted(0.2), proptest::bool::weighted(0.2)),
            (typed, listed) in (proptest::prop_oneof![3 => 0..1u8, 1 => 1..4u8],
                proptest::prop_oneof![3 => 0..1u8, 1 => 1..3u8]),
        ) {
            let n = cards.len();
            let percent = |amount: i32, p: i64| (i64::from(amount) * p / 100) as i32;
            let held: Vec<(i32, i32, i32)> = cards
                .iter()
                .zip(&used)
                .map(|(c, u)| (percent(c.0, u[0]), percent(c.1, u[1]), percent(c.2, u[2])))
                .collect();
            let cards: Vec<Card> = cards
                .into_iter()
                .enumerate()
                .map(|(i, (count, memory, cores, health, cordoned, mode, numa))| Card {
                    cordoned,
                    mode: Arc::from(["hami-core", "mig", "mps", "hami-core"][mode as usize]),
                    ..card(&format!("GPU-{i}"), count, memory, cores, numa, health)
                })
                .collect();
            let u = usage(cards, &held[..n]);
            let mut p = pod(if mutex { "spread,mutex" } else { "spread" });
            p.numa_bind = numa_bind;
            match typed {
                1 => p.use_types = vec![Box::from("A100")],
                2 => p.nouse_types = vec![Box::from(gpu::DEVICE_TYPE)],
                3 => p.vgpu_mode = Some(Box::from("mps")),
                _ => {}
            }
            match listed {
                1 => p.use_uuids = Some(vec![Box::from("GPU-1")]),
                2 => p.nouse_uuids = Some(vec![Box::from("GPU-0")]),
                _ => {}
            }
            p.containers = containers
                .into_iter()
                .map(|c| c.map(|(nums, memory, percentage, cores)| req(nums, memory, percentage, cores)))
                .collect();
            p.init_containers = init_containers.min(p.containers.len());
            if let Some(need) = SummaryNeed::of(&p) {
                proptest::prop_assert!(
                    !need.met_by(u.summary()) || fits(&p, &u).is_ok(),
                    "{need:?} met by {:?}, but {:?}", u.summary(), fits(&p, &u)
                );
            }
        }
    }
}
