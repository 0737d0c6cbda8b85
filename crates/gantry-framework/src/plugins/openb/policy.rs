//! The six policies of the FGD simulator (`pkg/simulator/plugin/`), their card choice
//! within a node (Open-Gpu-Share's Reserve) and its filter, as pure functions of
//! [`NodeRes`] and [`PodRes`]. docs/upstream-rules.md §18 cites each rule.

use smallvec::SmallVec;

use super::model::{MAX_SPEC_CPU, MAX_SPEC_GPU, MILLI, NodeRes, PodRes};

/// The policies, in the published order (`01-Random` … `06-FGD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Policy {
    Random,
    DotProd,
    GpuClustering,
    GpuPacking,
    BestFit,
    Fgd,
}

impl Policy {
    pub const ALL: [Policy; 6] = [
        Policy::Random,
        Policy::DotProd,
        Policy::GpuClustering,
        Policy::GpuPacking,
        Policy::BestFit,
        Policy::Fgd,
    ];

    /// The short name (`Random`, `FGD`, …) the simulator's scripts use.
    pub fn short(self) -> &'static str {
        match self {
            Policy::Random => "Random",
            Policy::DotProd => "DotProd",
            Policy::GpuClustering => "GpuClustering",
            Policy::GpuPacking => "GpuPacking",
            Policy::BestFit => "BestFit",
            Policy::Fgd => "FGD",
        }
    }

    /// The score plugin's name, upstream's and Gantry's.
    pub fn plugin_name(self) -> &'static str {
        match self {
            Policy::Random => "RandomScore",
            Policy::DotProd => "DotProductScore",
            Policy::GpuClustering => "GpuClusteringScore",
            Policy::GpuPacking => "GpuPackingScore",
            Policy::BestFit => "BestFitScore",
            Policy::Fgd => "FGDScore",
        }
    }

    /// `01-Random` … `06-FGD`, the published `sc_policy` column.
    pub fn column(self) -> String {
        let n = Policy::ALL.iter().position(|&p| p == self).unwrap_or(0) + 1;
        format!("{n:02}-{}", self.short())
    }

    /// By short name, plugin name or column, case-insensitively.
    pub fn parse(s: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| {
            s.eq_ignore_ascii_case(p.short())
                || s.eq_ignore_ascii_case(p.plugin_name())
                || s.eq_ignore_ascii_case(&p.column())
        })
    }

    /// How the card of a shared task is chosen under this policy (`gpuSelMethod`).
    pub fn card_choice(self) -> CardChoice {
        match self {
            Policy::Random => CardChoice::Random,
            Policy::Fgd => CardChoice::Fgd,
            _ => CardChoice::BestFit,
        }
    }
}

/// `gpuSelMethod` of Open-Gpu-Share's Reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardChoice {
    /// `best`: least free milli that fits, lowest index on ties.
    BestFit,
    /// `random`: uniform among the cards that fit.
    Random,
    /// `FGDScore`: the card FGD's score picked.
    Fgd,
}

/// Open-Gpu-Share's Filter on the GPU side (model, then `AllocateGpuId`); CPU-only
/// tasks (milli 0) pass.
pub fn gpu_fits(node: &NodeRes, pod: &PodRes) -> bool {
    if pod.milli <= 0 {
        return true;
    }
    if node.cards.is_empty() || !pod.accepts_model(&node.model) || pod.num <= 0 {
        return false;
    }
    if pod.num == 1 {
        return node.cards.iter().any(|&c| c >= pod.milli);
    }
    // Multi-card: greedy two pointers, several requests may share a card with room.
    let (mut dev, mut got) = (0usize, 0i64);
    let mut left: SmallVec<[i64; 8]> = node.cards.clone();
    while dev < left.len() && got < pod.num {
        if left[dev] >= pod.milli {
            left[dev] -= pod.milli;
            got += 1;
        } else {
            dev += 1;
        }
    }
    got == pod.num
}

/// `allocateGpuIdBasedOnBestFit` for a shared task.
pub fn best_fit_card(node: &NodeRes, milli: i64) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &c) in node.cards.iter().enumerate() {
        if c >= milli && best.is_none_or(|b| c < node.cards[b]) {
            best = Some(i);
        }
    }
    best
}

/// The cards that fit a shared task, in index order (Random picks one uniformly).
pub fn fitting_cards(node: &NodeRes, milli: i64) -> SmallVec<[usize; 8]> {
    (0..node.cards.len())
        .filter(|&i| node.cards[i] >= milli)
        .collect()
}

/// `AllocateExclusiveGpuId`: the lowest-indexed fully free cards, one per 1000 milli asked.
pub fn exclusive_cards(node: &NodeRes, pod: &PodRes) -> SmallVec<[usize; 8]> {
    let mut want = pod.total_milli();
    let mut out = SmallVec::new();
    for (i, &c) in node.cards.iter().enumerate() {
        if want <= 0 {
            break;
        }
        if c == MILLI {
            out.push(i);
            want -= MILLI;
        }
    }
    out
}

/// The pods on a node by GPU affinity (`GpuAffinity`): `share-gpu` (tag 0) or `<n>-gpu`
/// (tag n), with counts; CPU-only pods are not counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Affinity(pub SmallVec<[(i64, u32); 4]>);

impl Affinity {
    /// The tag of a task; `None` for a CPU-only one.
    pub fn tag(pod: &PodRes) -> Option<i64> {
        if pod.num == 0 {
            None
        } else if pod.is_share() {
            Some(0)
        } else {
            Some(pod.num)
        }
    }

    pub fn add(&mut self, pod: &PodRes, sign: i64) {
        let Some(tag) = Affinity::tag(pod) else {
            return;
        };
        match self.0.iter().position(|(t, _)| *t == tag) {
            Some(i) if sign < 0 => {
                self.0[i].1 = self.0[i].1.saturating_sub(1);
                if self.0[i].1 == 0 {
                    self.0.remove(i);
                }
            }
            Some(i) => self.0[i].1 += 1,
            None if sign > 0 => self.0.push((tag, 1)),
            None => {}
        }
    }

    fn count(&self, tag: i64) -> u32 {
        self.0
            .iter()
            .find(|(t, _)| *t == tag)
            .map_or(0, |(_, c)| *c)
    }
}

/// DotProductScore (merge, max): `int64(100 × (1 − dot/2))`; 0 when cpu does not fit.
pub fn dot_product_score(node: &NodeRes, pod: &PodRes) -> i64 {
    if node.cpu_left < pod.cpu {
        return 0;
    }
    let (mc, mg) = (MAX_SPEC_CPU as f64, MAX_SPEC_GPU as f64);
    let nv = [node.cpu_left as f64 / mc, node.gpu_left() as f64 / mg];
    let pv = [pod.cpu as f64 / mc, pod.total_milli() as f64 / mg];
    let mut dot = 0.0;
    for (a, b) in nv.iter().zip(pv) {
        dot += a * b;
    }
    let score = 1.0 - dot / 2.0;
    (100.0 * score) as i64
}

/// GpuClusteringScore.
pub fn gpu_clustering_score(node: &NodeRes, affinity: &Affinity, pod: &PodRes) -> i64 {
    let Some(tag) = Affinity::tag(pod) else {
        return 0;
    };
    let base = 100 / 4 * (MAX_SPEC_GPU - node.gpu_left()) / MAX_SPEC_GPU;
    let band = if affinity.count(tag) > 0 {
        if affinity.0.len() == 1 { 75 } else { 50 }
    } else if affinity.0.is_empty() {
        25
    } else {
        0
    };
    base + band
}

/// GpuPackingScore; `None` where upstream errs (the cards cannot hold the task).
pub fn gpu_packing_score(node: &NodeRes, pod: &PodRes) -> Option<i64> {
    if pod.milli <= 0 {
        return Some(0);
    }
    let free = node.fully_free() as i64;
    if free == node.cards.len() as i64 {
        return Some((100 / 3 - free).max(free));
    }
    let mut want = pod.num;
    let mut free_used = 0i64;
    let mut used: SmallVec<[usize; 8]> = SmallVec::new();
    for i in node.sorted_cards(true) {
        if want == 0 {
            break;
        }
        let left = node.cards[i];
        if pod.milli <= left {
            want -= 1;
            used.push(i);
            if left == MILLI {
                free_used += 1;
            }
        }
    }
    if want != 0 {
        return None;
    }
    if free_used > 0 {
        return Some((100 / 2 - free_used).max(100 / 3));
    }
    let ratio: i64 = used.iter().map(|&i| node.cards[i] * 100 / MILLI).sum();
    Some((100 - ratio / 10).max(100 / 2))
}

/// BestFitScore before normalisation; `None` where upstream errs (does not fit).
pub fn best_fit_raw(node: &NodeRes, pod: &PodRes) -> Option<i64> {
    let free = [node.cpu_left as f64, node.gpu_left() as f64];
    let req = [pod.cpu as f64, pod.total_milli() as f64];
    let max = [MAX_SPEC_CPU as f64, MAX_SPEC_GPU as f64];
    let mut score = 0.0;
    for i in 0..2 {
        if free[i] < req[i] {
            return None;
        }
        score += (free[i] - req[i]) / max[i] * 0.5;
    }
    Some(((1.0 - score) * 100.0) as i64)
}

/// The simulator's `NormalizeScore` (BestFit, Simon): min–max to 0..100, integer
/// division; all equal → 0.
pub fn normalize_min_max(scores: &mut [i64]) {
    let (Some(&hi), Some(&lo)) = (scores.iter().max(), scores.iter().min()) else {
        return;
    };
    let range = hi - lo;
    for s in scores.iter_mut() {
        *s = if range == 0 {
            0
        } else {
            (*s - lo) * 100 / range
        };
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn fgd_of(before: f64, after: f64) -> i64 {
    (sigmoid((before - after) / 1000.0) * 100.0) as i64
}

/// FGDScore and the card(s) it picks: `frag` is the fragment F of a node state (the
/// caller may memoise it). A shared task tries each card with room, keeping the first
/// best; other tasks are placed as `NodeRes::sub` places them.
pub fn fgd_score(
    node: &NodeRes,
    pod: &PodRes,
    frag: &mut dyn FnMut(&NodeRes) -> f64,
) -> (i64, SmallVec<[usize; 8]>) {
    let before = frag(node);
    if pod.is_share() {
        let mut best: Option<(i64, usize)> = None;
        let mut after = node.clone();
        after.cpu_left -= pod.cpu;
        for i in 0..node.cards.len() {
            if node.cards[i] >= pod.milli {
                after.cards[i] -= pod.milli;
                let s = fgd_of(before, frag(&after));
                after.cards[i] += pod.milli;
                if best.is_none_or(|(b, _)| s > b) {
                    best = Some((s, i));
                }
            }
        }
        return match best {
            Some((s, i)) => (s, SmallVec::from_slice(&[i])),
            None => (0, SmallVec::new()),
        };
    }
    let after = node.sub(pod);
    (fgd_of(before, frag(&after)), exclusive_cards(node, pod))
}
