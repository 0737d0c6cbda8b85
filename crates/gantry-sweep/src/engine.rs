//! One experiment: a trace, a policy, a seed. The workload is prepared as the simulator's
//! `Simulate` prepares it (sort, shuffle, tune to `inflation` × the cluster's GPUs, random
//! node ranks), then each task is filtered, scored and placed in turn on a compact node
//! state, and one [`Line`] is recorded after each, as `ClusterGpuFragReport` logs one.
//! Scores of unchanged nodes are kept per task shape: a placement changes one node.

use foldhash::HashMap;
use gantry_api::rng::Rng;
use gantry_framework::plugins::openb::model::{Frag, MILLI};
use gantry_framework::plugins::openb::policy::{self, Affinity, CardChoice, Policy};
use gantry_framework::plugins::openb::{NodeRes, PodRes, TypicalPods};
use smallvec::SmallVec;

use crate::trace::{NodeTrace, PodTrace, TraceNode, TracePod};

/// Pods a node takes (the openb nodes' `pods: 1001`).
pub const MAX_PODS: u32 = 1001;

/// What is logged after each task: `[Alloc]` and `[Report] (origin)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    /// GPU milli of the tasks arrived so far, failed ones included.
    pub arrived: i64,
    /// GPU milli allocated.
    pub used: i64,
    /// Cluster fragment (Σ nodes F) and idle GPU milli (Σ buckets).
    pub frag: f64,
    pub idle: f64,
    pub failed: bool,
}

/// A trace's tasks in the simulator's name order, their shapes, and the typical pods.
#[derive(Debug, Clone)]
pub struct Workload {
    pub stem: String,
    pods: Vec<TracePod>,
    /// Shape (index into `shapes`) of each pod.
    shape: Vec<u32>,
    shapes: Vec<PodRes>,
    pub typical: TypicalPods,
    nodes: Vec<TraceNode>,
    pub total_gpus: i64,
}

impl Workload {
    pub fn new(nodes: &NodeTrace, pods: &PodTrace) -> Workload {
        let mut sorted = pods.pods.clone();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        let mut shapes: Vec<PodRes> = Vec::new();
        let mut index: HashMap<PodRes, u32> = HashMap::default();
        let shape = sorted
            .iter()
            .map(|p| {
                let r = p.res();
                *index.entry(r.clone()).or_insert_with(|| {
                    shapes.push(r);
                    (shapes.len() - 1) as u32
                })
            })
            .collect();
        let res: Vec<PodRes> = sorted.iter().map(TracePod::res).collect();
        let mut node_list = nodes.nodes.clone();
        node_list.sort_by(|a, b| a.name.cmp(&b.name));
        Workload {
            stem: pods.stem.clone(),
            typical: TypicalPods::from_workload(&res),
            pods: sorted,
            shape,
            shapes,
            total_gpus: nodes.total_gpus(),
            nodes: node_list,
        }
    }

    /// Arrival order for `seed`: shuffled tasks, then the tuning copies (indices into the
    /// name-sorted tasks); and each node's place in the tie order (its rank-prefixed name).
    /// The nodes and tasks in name order: what `arrivals` indexes.
    pub fn trace(&self) -> (&[TraceNode], &[TracePod]) {
        (&self.nodes, &self.pods)
    }

    pub fn arrivals(&self, seed: u64, inflation: f64) -> (Vec<u32>, Vec<u32>) {
        let mut rng = Rng::new(seed);
        let mut order: Vec<u32> = (0..self.pods.len() as u32).collect();
        for i in (1..order.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        let total = |i: u32| self.shapes[self.shape[i as usize] as usize].total_milli();
        let mut requested: i64 = order.iter().map(|&i| total(i)).sum();
        let target = inflation * (self.total_gpus * MILLI) as f64;
        if inflation > 0.0 && (requested as f64) > target {
            while (requested as f64) > target && !order.is_empty() {
                let k = rng.below(order.len() as u64) as usize;
                requested -= total(order.remove(k));
            }
        } else if inflation > 0.0 && (requested as f64) < target && !self.pods.is_empty() {
            loop {
                let i = rng.below(self.pods.len() as u64) as u32;
                let per_card = self.shapes[self.shape[i as usize] as usize].milli;
                if (requested + per_card) as f64 > target {
                    break;
                }
                requested += total(i);
                order.push(i);
            }
        }
        // rand.Perm, then names "%04d-<name>": ties go to the smallest such name.
        let n = self.nodes.len();
        let mut perm: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            perm.swap(i, j);
        }
        let mut names: Vec<(String, usize)> = (0..n)
            .map(|i| (format!("{:04}-{}", perm[i], self.nodes[i].name), i))
            .collect();
        names.sort();
        let mut place = vec![0u32; n];
        for (p, (_, i)) in names.into_iter().enumerate() {
            place[i] = p as u32;
        }
        (order, place)
    }
}

/// A node during the experiment.
#[derive(Debug, Clone)]
struct SimNode {
    res: NodeRes,
    memory_left: i64,
    pods: u32,
    affinity: Affinity,
    version: u32,
    frag: Frag,
}

/// The key of a node state for the fragment memo: F does not depend on the card order.
#[derive(Clone, PartialEq, Eq, Hash)]
struct FragKey(i64, SmallVec<[i64; 8]>, std::sync::Arc<str>);

fn frag_key(n: &NodeRes) -> FragKey {
    let mut cards = n.cards.clone();
    cards.sort_unstable();
    FragKey(n.cpu_left, cards, n.model.clone())
}

struct Memo<'a> {
    typical: &'a TypicalPods,
    frags: HashMap<FragKey, Frag>,
}

impl Memo<'_> {
    fn frag(&mut self, n: &NodeRes) -> Frag {
        let typical = self.typical;
        *self
            .frags
            .entry(frag_key(n))
            .or_insert_with(|| typical.frag(n))
    }
}

/// A score kept for (node, shape) while the node's version stays.
#[derive(Clone, Copy)]
struct Cached {
    version: u32,
    score: i64,
    card: u8,
}

const NO_CARD: u8 = u8::MAX;

/// Runs one experiment; the lines in arrival order.
pub fn run(w: &Workload, policy: Policy, seed: u64, inflation: f64) -> Vec<Line> {
    let (order, place) = w.arrivals(seed, inflation);
    // Random's node and card draws: a generator of their own, derived from the seed.
    let mut rng = Rng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x0D15_EA5E);
    let mut memo = Memo {
        typical: &w.typical,
        frags: HashMap::default(),
    };
    let mut nodes: Vec<SimNode> = w
        .nodes
        .iter()
        .map(|n| {
            let res = n.res();
            SimNode {
                frag: memo.frag(&res),
                res,
                memory_left: n.memory_mib,
                pods: 0,
                affinity: Affinity::default(),
                version: 0,
            }
        })
        .collect();
    let mut cluster = Frag::default();
    for n in &nodes {
        cluster.add(&n.frag, 1.0);
    }
    let shapes = w.shapes.len();
    let mut cache = vec![
        Cached {
            version: u32::MAX,
            score: 0,
            card: NO_CARD,
        };
        nodes.len() * shapes
    ];
    let mut feasible: Vec<u32> = Vec::with_capacity(nodes.len());
    let mut scores: Vec<i64> = Vec::with_capacity(nodes.len());
    let (mut arrived, mut used) = (0i64, 0i64);
    let mut lines = Vec::with_capacity(order.len());
    for &i in &order {
        let task = &w.pods[i as usize];
        let shape = w.shape[i as usize] as usize;
        let pod = &w.shapes[shape];
        arrived += pod.total_milli();
        feasible.clear();
        for (k, n) in nodes.iter().enumerate() {
            if n.res.cpu_left >= task.cpu_milli
                && n.memory_left >= task.memory_mib
                && n.pods < MAX_PODS
                && policy::gpu_fits(&n.res, pod)
            {
                feasible.push(k as u32);
            }
        }
        let chosen = match feasible.len() {
            0 => None,
            1 => Some(feasible[0] as usize),
            _ if policy == Policy::Random => {
                Some(feasible[rng.below(feasible.len() as u64) as usize] as usize)
            }
            _ => {
                scores.clear();
                for &k in &feasible {
                    let slot = k as usize * shapes + shape;
                    let n = &nodes[k as usize];
                    if cache[slot].version != n.version {
                        let (score, card) = score(policy, n, pod, &mut memo);
                        cache[slot] = Cached {
                            version: n.version,
                            score,
                            card,
                        };
                    }
                    scores.push(cache[slot].score);
                }
                if policy == Policy::BestFit {
                    policy::normalize_min_max(&mut scores);
                }
                let mut best = 0usize;
                for j in 1..feasible.len() {
                    let (s, b) = (scores[j], scores[best]);
                    if s > b
                        || (s == b && place[feasible[j] as usize] < place[feasible[best] as usize])
                    {
                        best = j;
                    }
                }
                Some(feasible[best] as usize)
            }
        };
        let failed = chosen.is_none();
        if let Some(k) = chosen {
            let cards = pick_cards(
                policy,
                &nodes[k],
                pod,
                &mut rng,
                &mut memo,
                &cache,
                k * shapes + shape,
            );
            let n = &mut nodes[k];
            n.res.cpu_left -= task.cpu_milli;
            n.memory_left -= task.memory_mib;
            n.pods += 1;
            for &c in &cards {
                n.res.cards[c] -= pod.milli;
            }
            n.affinity.add(pod, 1);
            n.version += 1;
            used += pod.total_milli();
            let frag = memo.frag(&n.res);
            cluster.add(&n.frag, -1.0);
            cluster.add(&frag, 1.0);
            n.frag = frag;
        }
        lines.push(Line {
            arrived,
            used,
            frag: cluster.fragment(),
            idle: cluster.idle(),
            failed,
        });
    }
    lines
}

fn score(policy: Policy, n: &SimNode, pod: &PodRes, memo: &mut Memo<'_>) -> (i64, u8) {
    match policy {
        Policy::Random => (0, NO_CARD),
        Policy::DotProd => (policy::dot_product_score(&n.res, pod), NO_CARD),
        Policy::GpuClustering => (
            policy::gpu_clustering_score(&n.res, &n.affinity, pod),
            NO_CARD,
        ),
        Policy::GpuPacking => (policy::gpu_packing_score(&n.res, pod).unwrap_or(0), NO_CARD),
        Policy::BestFit => (policy::best_fit_raw(&n.res, pod).unwrap_or(0), NO_CARD),
        Policy::Fgd => {
            let (s, cards) = policy::fgd_score(&n.res, pod, &mut |r| memo.frag(r).fragment());
            let card = if pod.is_share() {
                cards.first().map_or(NO_CARD, |&c| c as u8)
            } else {
                NO_CARD
            };
            (s, card)
        }
    }
}

/// The cards the task takes on its node (Open-Gpu-Share's Reserve).
fn pick_cards(
    policy: Policy,
    n: &SimNode,
    pod: &PodRes,
    rng: &mut Rng,
    memo: &mut Memo<'_>,
    cache: &[Cached],
    slot: usize,
) -> SmallVec<[usize; 8]> {
    if pod.num == 0 || pod.milli <= 0 {
        return SmallVec::new();
    }
    if !pod.is_share() {
        return policy::exclusive_cards(&n.res, pod);
    }
    let one = |c: Option<usize>| c.into_iter().collect();
    match policy.card_choice() {
        CardChoice::BestFit => one(policy::best_fit_card(&n.res, pod.milli)),
        CardChoice::Random => {
            let fit = policy::fitting_cards(&n.res, pod.milli);
            if fit.is_empty() {
                SmallVec::new()
            } else {
                one(Some(fit[rng.below(fit.len() as u64) as usize]))
            }
        }
        CardChoice::Fgd => {
            if cache[slot].version == n.version && cache[slot].card != NO_CARD {
                return one(Some(cache[slot].card as usize));
            }
            let (_, cards) = policy::fgd_score(&n.res, pod, &mut |r| memo.frag(r).fragment());
            cards
        }
    }
}
