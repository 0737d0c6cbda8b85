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

use std::path::PathBuf;

use crate::trace::{NodeTrace, PodTrace, TraceError, TraceNode, TracePod};

/// Pods a node takes (the openb nodes' `pods: 1001`).
pub const MAX_PODS: u32 = 1001;

/// The most tasks one experiment places: the trace's and the tuning's copies together (the
/// published runs place some 10,600). A trace of more is refused, and so is a tuning
/// expected to need more; one that still passes it (a seed drawing far more copies than
/// expected) ends with an error rather than growing without bound.
pub const MAX_TASKS: usize = 1_000_000;

/// Node × task-shape pairs whose scores are kept (16 bytes each); past it, scores are
/// computed each time (the same scores, more slowly) rather than filling the memory.
const MAX_CACHED_SCORES: usize = 1 << 24;

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
    /// The pod CSV, named in errors.
    pub path: PathBuf,
    pods: Vec<TracePod>,
    /// Shape (index into `shapes`) of each pod.
    shape: Vec<u32>,
    shapes: Vec<PodRes>,
    pub typical: TypicalPods,
    nodes: Vec<TraceNode>,
    pub total_gpus: i64,
    /// GPU milli the trace's tasks ask for together.
    requested: i64,
}

impl Workload {
    /// The trace prepared; refused, naming the file, when it holds nothing the curves
    /// measure (no GPU on the nodes, no task asking for one) or more tasks or GPU milli
    /// than an experiment counts.
    pub fn new(nodes: &NodeTrace, pods: &PodTrace) -> Result<Workload, TraceError> {
        let refuse = |path: &PathBuf, message: String| TraceError::File {
            path: path.clone(),
            message,
        };
        let total_gpus = nodes.total_gpus();
        if total_gpus == 0 {
            return Err(refuse(
                &nodes.path,
                "no node has a GPU (column `gpu`): the curves are of GPU allocation".into(),
            ));
        }
        if pods.pods.len() > MAX_TASKS {
            return Err(refuse(
                &pods.path,
                format!(
                    "{} tasks, more than the {MAX_TASKS} an experiment may place",
                    pods.pods.len()
                ),
            ));
        }
        let mut requested = 0i64;
        for p in &pods.pods {
            requested = requested
                .checked_add(p.res().total_milli())
                .ok_or_else(|| {
                    refuse(
                        &pods.path,
                        format!(
                            "the tasks ask for more than {} milli-GPU together (out of range)",
                            i64::MAX
                        ),
                    )
                })?;
        }
        if requested == 0 {
            return Err(refuse(
                &pods.path,
                "no task asks for a GPU (`num_gpu` and `gpu_milli` above 0): the curves are over arrived GPU workload".into(),
            ));
        }
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
        Ok(Workload {
            stem: pods.stem.clone(),
            path: pods.path.clone(),
            typical: TypicalPods::from_workload(&res),
            pods: sorted,
            shape,
            shapes,
            total_gpus,
            nodes: node_list,
            requested,
        })
    }

    /// GPU milli the tuning aims at: `inflation` × the cluster's GPUs.
    fn target(&self, inflation: f64) -> f64 {
        inflation * (self.total_gpus * MILLI) as f64
    }

    /// Refuses, before anything runs, a tuning that would take more than [`MAX_TASKS`]
    /// tasks on average: copies are drawn from the trace until the target is reached.
    pub fn check_tuning(&self, inflation: f64) -> Result<(), TraceError> {
        let target = self.target(inflation);
        let requested = self.requested as f64;
        if inflation <= 0.0 || requested >= target {
            return Ok(());
        }
        let n = self.pods.len() as f64;
        let expected = n + (target - requested) / (requested / n);
        if expected > MAX_TASKS as f64 {
            return Err(TraceError::File {
                path: self.path.clone(),
                message: format!(
                    "--inflation {inflation}: reaching {inflation} × {} GPUs takes some {expected:.0} tasks (the trace's {} ask for {} milli-GPU), more than the {MAX_TASKS} an experiment may place",
                    self.total_gpus,
                    self.pods.len(),
                    self.requested
                ),
            });
        }
        Ok(())
    }

    /// Arrival order for `seed`: shuffled tasks, then the tuning copies (indices into the
    /// name-sorted tasks); and each node's place in the tie order (its rank-prefixed name).
    /// The nodes and tasks in name order: what `arrivals` indexes.
    pub fn trace(&self) -> (&[TraceNode], &[TracePod]) {
        (&self.nodes, &self.pods)
    }

    ///
    /// Copies are drawn until the next would pass the target; a draw of a task that asks
    /// for no GPU adds nothing, so [`MAX_TASKS`] bounds the draws ([`Workload::new`] made
    /// sure some task asks for a GPU, so the target is reached).
    pub fn arrivals(&self, seed: u64, inflation: f64) -> Result<(Vec<u32>, Vec<u32>), TraceError> {
        self.arrivals_within(seed, inflation, MAX_TASKS)
    }

    fn arrivals_within(
        &self,
        seed: u64,
        inflation: f64,
        max_tasks: usize,
    ) -> Result<(Vec<u32>, Vec<u32>), TraceError> {
        let mut rng = Rng::new(seed);
        let mut order: Vec<u32> = (0..self.pods.len() as u32).collect();
        for i in (1..order.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        let total = |i: u32| self.shapes[self.shape[i as usize] as usize].total_milli();
        let mut requested: i64 = order.iter().map(|&i| total(i)).sum();
        let target = self.target(inflation);
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
                if order.len() >= max_tasks {
                    return Err(TraceError::File {
                        path: self.path.clone(),
                        message: format!(
                            "--inflation {inflation}: seed {seed} drew more than the {max_tasks} tasks an experiment may place before reaching {inflation} × {} GPUs",
                            self.total_gpus
                        ),
                    });
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
        Ok((order, place))
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
pub fn run(
    w: &Workload,
    policy: Policy,
    seed: u64,
    inflation: f64,
) -> Result<Vec<Line>, TraceError> {
    run_within(w, policy, seed, inflation, MAX_CACHED_SCORES)
}

/// [`run`], keeping scores only when there is room for `max_cached` of them.
fn run_within(
    w: &Workload,
    policy: Policy,
    seed: u64,
    inflation: f64,
    max_cached: usize,
) -> Result<Vec<Line>, TraceError> {
    let (order, place) = w.arrivals(seed, inflation)?;
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
    let slots = nodes
        .len()
        .checked_mul(shapes)
        .filter(|&n| n <= max_cached)
        .unwrap_or(0);
    let mut cache = vec![
        Cached {
            version: u32::MAX,
            score: 0,
            card: NO_CARD,
        };
        slots
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
                    let n = &nodes[k as usize];
                    // Without room for every pair's score, each is computed afresh.
                    let Some(kept) = cache.get_mut(k as usize * shapes + shape) else {
                        scores.push(score(policy, n, pod, &mut memo).0);
                        continue;
                    };
                    if kept.version != n.version {
                        let (score, card) = score(policy, n, pod, &mut memo);
                        *kept = Cached {
                            version: n.version,
                            score,
                            card,
                        };
                    }
                    scores.push(kept.score);
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
    Ok(lines)
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
            if let Some(kept) = cache.get(slot)
                && kept.version == n.version
                && kept.card != NO_CARD
            {
                return one(Some(kept.card as usize));
            }
            let (_, cards) = policy::fgd_score(&n.res, pod, &mut |r| memo.frag(r).fragment());
            cards
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::trace::{parse_nodes, parse_pods};

    const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model\na,64000,262144,4,T4\nb,32000,131072,2,T4\nc,8000,8192,0,\n";
    const HEADER: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";

    fn workload(nodes: &str, pods: &str) -> Result<Workload, String> {
        let nodes = parse_nodes(Path::new("n.csv"), nodes).map_err(|e| e.to_string())?;
        let pods = parse_pods(Path::new("p.csv"), pods).map_err(|e| e.to_string())?;
        Workload::new(&nodes, &pods).map_err(|e| e.to_string())
    }

    #[test]
    fn traces_the_curves_cannot_measure_are_refused() {
        let err = workload(
            "sn,cpu_milli,memory_mib,gpu,model\na,1000,1000,0,\n",
            &format!("{HEADER}p,1,1,1,500\n"),
        )
        .unwrap_err();
        assert_eq!(
            err,
            "n.csv: no node has a GPU (column `gpu`): the curves are of GPU allocation"
        );
        // No task asks for a GPU: copies of them never reach 1.3 × the GPUs.
        let err = workload(NODES, &format!("{HEADER}p,1,1,0,0\nq,1,1,1,0\n")).unwrap_err();
        assert_eq!(
            err,
            "p.csv: no task asks for a GPU (`num_gpu` and `gpu_milli` above 0): the curves are over arrived GPU workload"
        );
        // Each task fits i64; together they do not.
        let half = i64::MAX / 1000 / 2 + 1;
        let err = workload(
            NODES,
            &format!("{HEADER}p,1,1,{half},1000\nq,1,1,{half},1000\n"),
        )
        .unwrap_err();
        assert_eq!(
            err,
            "p.csv: the tasks ask for more than 9223372036854775807 milli-GPU together (out of range)"
        );
    }

    #[test]
    fn tuning_is_bounded() {
        // Tasks of 1 milli-GPU: 1.3 × 6 GPUs takes 7,800 of them, 100 × 70 GPUs seven
        // million, more than an experiment may place.
        let tiny = workload(NODES, &format!("{HEADER}p,1,1,1,1\n")).unwrap();
        assert!(tiny.check_tuning(1.3).is_ok());
        assert!(tiny.check_tuning(100.0).is_ok());
        let big = workload(
            &format!("{NODES}d,64000,262144,64,T4\n"),
            &format!("{HEADER}p,1,1,1,1\n"),
        )
        .unwrap();
        assert_eq!(
            big.check_tuning(100.0).unwrap_err().to_string(),
            "p.csv: --inflation 100: reaching 100 × 70 GPUs takes some 7000000 tasks (the trace's 1 ask for 1 milli-GPU), more than the 1000000 an experiment may place"
        );
        // Past the limit while drawing (here a limit of 50): an error, not a loop.
        let err = tiny.arrivals_within(1, 1.3, 50).unwrap_err().to_string();
        assert_eq!(
            err,
            "p.csv: --inflation 1.3: seed 1 drew more than the 50 tasks an experiment may place before reaching 1.3 × 6 GPUs"
        );
        let (order, _) = tiny.arrivals(1, 1.3).unwrap();
        assert_eq!(order.len(), 7800, "1.3 × 6000 milli in tasks of 1");
        // Tasks without GPUs among them are copied too, and the copies still end.
        let mixed = workload(
            NODES,
            &format!("{HEADER}g,1,1,1,1000\nc0,1,1,0,0\nc1,1,1,0,0\nc2,1,1,0,0\n"),
        )
        .unwrap();
        let (order, _) = mixed.arrivals(7, 1.3).unwrap();
        let tasks = mixed.trace().1;
        let gpu = order
            .iter()
            .filter(|&&i| tasks[i as usize].name == "g")
            .count();
        assert_eq!(
            gpu, 7,
            "the task and six copies: 7 of the 7.8 GPUs 1.3 × 6 is"
        );
        assert!(order.len() > gpu, "tasks without GPUs copied along");
    }

    #[test]
    fn scores_computed_afresh_choose_as_kept_ones() {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/openb/tiny_pods.csv"),
        )
        .unwrap();
        let nodes = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/openb/tiny_nodes.csv"),
        )
        .unwrap();
        let w = workload(&nodes, &text).unwrap();
        for policy in Policy::ALL {
            let kept = run_within(&w, policy, 3, 1.3, MAX_CACHED_SCORES).unwrap();
            let afresh = run_within(&w, policy, 3, 1.3, 0).unwrap();
            assert_eq!(kept, afresh, "{policy:?}");
        }
    }
}
