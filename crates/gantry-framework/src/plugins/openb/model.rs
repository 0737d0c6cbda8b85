//! The FGD simulator's view of a node and a task (hkust-adsl/kubernetes-scheduler-simulator,
//! `pkg/type/resource.go`): cpu in milli, and per card the free GPU in milli (1000 a whole
//! card), plus the fragmentation measure of `pkg/utils/frag.go` over the "typical pods".
//! Pure values and functions, shared by the score plugins and by `gantry sweep`.

use std::cmp::Ordering;
use std::sync::Arc;

use smallvec::SmallVec;

/// One card, in milli-GPU.
pub const MILLI: i64 = 1000;
/// `MaxSpecCpu`, `MaxSpecGpu` (open-gpu-share `utils/const.go`): the normalisers.
pub const MAX_SPEC_CPU: i64 = 128_000;
pub const MAX_SPEC_GPU: i64 = 8_000;

/// A node as the policies read it (`NodeResource`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeRes {
    pub cpu_left: i64,
    pub cpu_capacity: i64,
    /// Free milli per card, in card order (the order is the device index).
    pub cards: SmallVec<[i64; 8]>,
    /// GPU model; empty for a node without GPUs.
    pub model: Arc<str>,
}

impl NodeRes {
    pub fn gpu_left(&self) -> i64 {
        self.cards.iter().sum()
    }

    pub fn fully_free(&self) -> usize {
        self.cards.iter().filter(|&&c| c == MILLI).count()
    }

    /// Card indices by free milli, ascending or descending, stable (`SortedMilliGpuLeftIndexList`).
    pub fn sorted_cards(&self, ascending: bool) -> SmallVec<[usize; 8]> {
        let mut idx: SmallVec<[usize; 8]> = (0..self.cards.len()).collect();
        if ascending {
            idx.sort_by_key(|&i| self.cards[i]);
        } else {
            idx.sort_by_key(|&i| std::cmp::Reverse(self.cards[i]));
        }
        idx
    }

    /// `NodeResource.Sub`: cpu taken, then each requested card from the card with the
    /// least free milli that still fits (stable). What it could not place stays placed
    /// nowhere, as upstream ignores the error.
    pub fn sub(&self, pod: &PodRes) -> NodeRes {
        let mut out = self.clone();
        out.cpu_left -= pod.cpu;
        let mut want = pod.num;
        if want == 0 {
            return out;
        }
        for i in self.sorted_cards(true) {
            if pod.milli <= out.cards[i] {
                out.cards[i] -= pod.milli;
                want -= 1;
                if want <= 0 {
                    break;
                }
            }
        }
        out
    }
}

/// A task as the policies read it (`PodResource`): non-zero cpu request, milli per card,
/// card count, and the allowed models as written (`A|B`, empty for any).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodRes {
    pub cpu: i64,
    pub milli: i64,
    pub num: i64,
    pub model: Arc<str>,
}

impl PodRes {
    pub fn total_milli(&self) -> i64 {
        self.milli * self.num
    }

    /// One card, shared (`IsGpuShare`).
    pub fn is_share(&self) -> bool {
        self.num == 1 && self.milli < MILLI
    }

    /// `IsNodeAccessibleToPodByType`: an empty list takes any node; otherwise the node's
    /// model must be one of the `|`-separated names (a node without GPUs never is).
    pub fn accepts_model(&self, node_model: &str) -> bool {
        if self.model.is_empty() {
            return true;
        }
        if node_model.is_empty() {
            return false;
        }
        let mut named = 0;
        for m in self.model.split('|').filter(|m| !m.is_empty()) {
            named += 1;
            if m == node_model {
                return true;
            }
        }
        named == 0
    }

    /// upstream `PodResource.Less`.
    fn less(&self, other: &PodRes) -> bool {
        (self.cpu, self.milli, self.num, &*self.model)
            < (other.cpu, other.milli, other.num, &*other.model)
    }
}

/// Fragment buckets (`FragRatioDataMap`), in upstream's index order.
pub const Q1_LACK_BOTH: usize = 0;
pub const Q2_LACK_GPU: usize = 1;
pub const Q3_SATISFIED: usize = 2;
pub const Q4_LACK_CPU: usize = 3;
pub const XL_SATISFIED: usize = 4;
pub const XR_LACK_CPU: usize = 5;
pub const NO_ACCESS: usize = 6;

/// A node's (or the cluster's) free GPU milli split by what the typical pods make of it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Frag(pub [f64; 7]);

impl Frag {
    /// `FragAmountSumExceptQ3`: the fragment.
    pub fn fragment(&self) -> f64 {
        let mut out = 0.0;
        for (i, v) in self.0.iter().enumerate() {
            if i != Q3_SATISFIED {
                out += v;
            }
        }
        out
    }

    /// All buckets: the idle GPU milli (weighted by the typical pods' frequencies).
    pub fn idle(&self) -> f64 {
        self.0.iter().sum()
    }

    pub fn add(&mut self, other: &Frag, sign: f64) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += sign * b;
        }
    }
}

/// Whether the cards could hold `pod` (`CanNodeHostPodOnGpuMemory`).
pub fn cards_can_host(node: &NodeRes, pod: &PodRes) -> bool {
    let mut want = pod.num;
    for &c in &node.cards {
        if c >= pod.milli {
            want -= 1;
            if want <= 0 {
                return true;
            }
        }
    }
    false
}

/// `GetNodePodFrag`: the bucket a node's free GPU falls in for one typical pod.
pub fn node_pod_bucket(node: &NodeRes, pod: &PodRes) -> usize {
    let cpu_ok = node.cpu_left >= pod.cpu;
    if pod.milli == 0 {
        return if cpu_ok { XL_SATISFIED } else { XR_LACK_CPU };
    }
    if !pod.accepts_model(&node.model) {
        return NO_ACCESS;
    }
    match (cards_can_host(node, pod), cpu_ok) {
        (true, true) => Q3_SATISFIED,
        (true, false) => Q4_LACK_CPU,
        (false, true) => Q2_LACK_GPU,
        (false, false) => Q1_LACK_BOTH,
    }
}

/// The typical pods and their frequencies (`GetTypicalPods`), in upstream's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypicalPods {
    pub pods: Vec<(PodRes, f64)>,
}

impl TypicalPods {
    /// From the workload (before tuning), as the published runs configure it: CPU pods
    /// included, popularity threshold 95 %, step 1, no GPU weight.
    pub fn from_workload<'a>(pods: impl IntoIterator<Item = &'a PodRes>) -> TypicalPods {
        TypicalPods::with_threshold(pods, 95)
    }

    pub fn with_threshold<'a>(
        pods: impl IntoIterator<Item = &'a PodRes>,
        threshold: u32,
    ) -> TypicalPods {
        let mut counts: Vec<(PodRes, f64)> = Vec::new();
        let mut index: std::collections::HashMap<&PodRes, usize> = Default::default();
        let mut total = 0.0;
        for p in pods {
            match index.get(p) {
                Some(&i) => counts[i].1 += 1.0,
                None => {
                    index.insert(p, counts.len());
                    counts.push((p.clone(), 1.0));
                }
            }
            total += 1.0;
        }
        // sort.Sort(sort.Reverse(pl)): by count descending, then by the reverse of Less.
        counts.sort_by(|a, b| {
            b.1.partial_cmp(&a.1)
                .unwrap_or(Ordering::Equal)
                .then_with(|| {
                    if b.0.less(&a.0) {
                        Ordering::Less
                    } else if a.0.less(&b.0) {
                        Ordering::Greater
                    } else {
                        Ordering::Equal
                    }
                })
        });
        let expected = f64::from(threshold) * total / 100.0;
        let (mut i, mut taken, mut cum) = (0usize, 0usize, 0.0);
        while cum < expected && i < counts.len() {
            taken += 1;
            while i < taken && i < counts.len() {
                cum += counts[i].1;
                counts[i].1 /= total;
                i += 1;
            }
        }
        if i < counts.len() {
            counts.truncate(i);
            for c in &mut counts {
                c.1 /= cum / total;
            }
        }
        TypicalPods { pods: counts }
    }

    /// `NodeGpuShareFragAmount`.
    pub fn frag(&self, node: &NodeRes) -> Frag {
        let mut out = Frag::default();
        let left = node.gpu_left();
        for (pod, freq) in &self.pods {
            if !(0.0..=1.0).contains(freq) {
                continue;
            }
            let bucket = node_pod_bucket(node, pod);
            if bucket == Q3_SATISFIED {
                let frag: i64 = node.cards.iter().filter(|&&c| c < pod.milli).sum();
                out.0[Q2_LACK_GPU] += freq * frag as f64;
                out.0[Q3_SATISFIED] += freq * (left - frag) as f64;
            } else {
                out.0[bucket] += freq * left as f64;
            }
        }
        out
    }
}
