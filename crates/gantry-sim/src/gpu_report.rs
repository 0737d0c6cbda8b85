//! What the HAMi-registered GPUs hold, read from the cache's card usage: at the end of a
//! run, pods holding cards, cards shared and each card's utilisation; over a run, how
//! much of the free GPU memory is stranded on cards already in use.

use gantry_cache::Cache;

/// One card's utilisation, as fractions of what it offers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CardUtilisation {
    pub shares: f64,
    pub memory: f64,
    pub cores: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuReport {
    /// Pods holding at least one card.
    pub gpu_pods: usize,
    /// Cards more than one container shares.
    pub shared_cards: usize,
    /// Cards whose pods hold more shares, memory or compute than the card has.
    pub overcommitted_cards: usize,
    /// Every card of every node, least used first.
    pub cards: Vec<CardUtilisation>,
}

impl GpuReport {
    pub fn of(cache: &Cache) -> GpuReport {
        let mut report = GpuReport::default();
        cache.for_each_node(|info| {
            let Some(usage) = info.gpus() else {
                return;
            };
            report.gpu_pods += usage.gpu_pods() as usize;
            for (card, used) in usage.devices().cards.iter().zip(usage.cards()) {
                if used.used > 1 {
                    report.shared_cards += 1;
                }
                if used.used > i64::from(card.count)
                    || used.memory_mib > i64::from(card.memory_mib)
                    || used.cores > i64::from(card.cores)
                {
                    report.overcommitted_cards += 1;
                }
                let fraction = |used: i64, total: i32| {
                    if total > 0 {
                        used as f64 / f64::from(total)
                    } else {
                        0.0
                    }
                };
                report.cards.push(CardUtilisation {
                    shares: fraction(used.used, card.count),
                    memory: fraction(used.memory_mib, card.memory_mib),
                    cores: fraction(used.cores, card.cores),
                });
            }
        });
        // The cache visits nodes in no fixed order.
        report.cards.sort_by(|a, b| {
            (a.shares, a.memory, a.cores)
                .partial_cmp(&(b.shares, b.memory, b.cores))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        report
    }
}

/// Of the GPU memory left free on HAMi-registered cards, the share on cards some pod
/// already uses: memory that a pod asking for a card of its own cannot have (the
/// fragmentation a comparison of GPU policies looks at). `None` when no card has free
/// memory. Sums whole MiB, so the cache's node order cannot change the answer.
pub fn stranded_memory_share(cache: &Cache) -> Option<f64> {
    let (mut free, mut stranded) = (0i64, 0i64);
    cache.for_each_node(|info| {
        let Some(usage) = info.gpus() else {
            return;
        };
        for (card, used) in usage.devices().cards.iter().zip(usage.cards()) {
            let left = (i64::from(card.memory_mib) - used.memory_mib).max(0);
            free = free.saturating_add(left);
            if used.used > 0 {
                stranded = stranded.saturating_add(left);
            }
        }
    });
    (free > 0).then(|| stranded as f64 / free as f64)
}
