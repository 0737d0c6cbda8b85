//! The six policies as score plugins (`RandomScore`, `DotProductScore`,
//! `GpuClusteringScore`, `GpuPackingScore`, `BestFitScore`, `FGDScore`, upstream's names),
//! reading HAMi's card model: a card's free share is its free memory over its memory, in
//! milli (cards registered with 1000 MiB, as `gantry sweep --manifests` writes openb
//! nodes, give the simulator's milli exactly); a pod's share per card is what HAMi would
//! give it (`nvidia.com/gpumem`, `gpumem-percentage`, or a whole card), its models
//! `nvidia.com/use-gputype`. To let them choose the node, give GPUShare
//! `nodeSchedulerPolicy: none`; GPUShare still picks the cards within the node (HAMi's
//! `gpuSchedulerPolicy`), where the simulator's Open-Gpu-Share picks per policy.

use crate::NodeInfos;
use std::sync::Arc;

use gantry_api::{Pod, Sym};
use gantry_cache::NodeInfo;
use serde::Deserialize;

use super::model::{MILLI, NodeRes, PodRes, TypicalPods};
use super::policy::{self, Affinity, Policy};
use crate::plugins::gpu_share::request::{PodRequest, asks_for_cards, pod_request};
use crate::plugins::gpu_share::{self, GpuShare};
use crate::{Cluster, CycleState, Plugin, PreScorePlugin, ScorePlugin, Status};

/// One policy as a plugin; FGD with its typical pods when configured.
#[derive(Debug, Clone)]
pub struct OpenbScore {
    pub policy: Policy,
    /// `FGDScore` args `typicalPods`; without them, the pods on the nodes and the pod
    /// being placed, counted at PreScore.
    pub typical: Option<Arc<TypicalPods>>,
}

/// `pluginConfig` args of FGDScore.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FgdArgs {
    pub typical_pods: Option<Vec<TypicalPodArg>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TypicalPodArg {
    pub cpu_milli: i64,
    #[serde(default)]
    pub gpu_milli: i64,
    #[serde(default)]
    pub gpu_count: i64,
    #[serde(default)]
    pub gpu_model: String,
    pub frequency: f64,
}

impl FgdArgs {
    /// The typical pods, or the field at fault and why.
    pub fn typical(self) -> Result<Option<Arc<TypicalPods>>, (&'static str, String)> {
        let Some(rows) = self.typical_pods else {
            return Ok(None);
        };
        let mut pods = Vec::with_capacity(rows.len());
        for (i, r) in rows.into_iter().enumerate() {
            if !(0.0..=1.0).contains(&r.frequency) {
                return Err((
                    "typicalPods",
                    format!("[{i}].frequency must be 0 to 1, not {}", r.frequency),
                ));
            }
            if r.cpu_milli < 0 || !(0..=MILLI).contains(&r.gpu_milli) || r.gpu_count < 0 {
                return Err((
                    "typicalPods",
                    format!("[{i}]: cpuMilli, gpuCount >= 0 and gpuMilli 0 to 1000"),
                ));
            }
            let model = r.gpu_model.to_uppercase().replace(',', "|");
            pods.push((
                PodRes {
                    cpu: r.cpu_milli,
                    milli: r.gpu_milli,
                    num: r.gpu_count,
                    model: Arc::from(model),
                },
                r.frequency,
            ));
        }
        Ok(Some(Arc::new(TypicalPods { pods })))
    }
}

/// What PreScore leaves for Score.
#[derive(Clone)]
struct PreState {
    typical: Arc<TypicalPods>,
    random_pick: Option<Sym>,
}

/// The node as the policies read it.
pub fn node_res(node: &NodeInfo) -> NodeRes {
    let cpu = node.allocatable().milli_cpu;
    let (cards, model) = match node.gpus() {
        Some(usage) => {
            let devices = usage.devices();
            let cards = devices
                .cards
                .iter()
                .zip(usage.cards())
                .map(|(card, used)| {
                    let total = i64::from(card.memory_mib);
                    if total <= 0 {
                        0
                    } else {
                        (total - used.memory_mib).max(0) * MILLI / total
                    }
                })
                .collect();
            let model = devices.cards.first().map_or_else(
                || Arc::from(""),
                |c| {
                    Arc::from(
                        c.type_upper
                            .strip_prefix("NVIDIA-")
                            .unwrap_or(&c.type_upper),
                    )
                },
            );
            (cards, model)
        }
        None => (Default::default(), Arc::from("")),
    };
    NodeRes {
        cpu_left: cpu - node.requested().milli_cpu,
        cpu_capacity: cpu,
        cards,
        model,
    }
}

/// The pod as the policies read it on `node`: its first container that asks for cards.
pub fn pod_res(pod: &Pod, request: Option<&PodRequest>, node: &NodeInfo) -> PodRes {
    let cpu = pod.non_zero_requests().milli_cpu;
    let card = request.and_then(|r| r.containers.iter().flatten().next());
    let Some(card) = card else {
        return PodRes {
            cpu,
            milli: 0,
            num: 0,
            model: Arc::from(""),
        };
    };
    let card_memory = node
        .gpus()
        .and_then(|u| u.devices().cards.first())
        .map_or(0, |c| c.memory_mib);
    let memory = card.memory_on(card_memory);
    let milli = if card_memory <= 0 || memory <= 0 {
        MILLI
    } else {
        ((i64::from(memory) * MILLI + i64::from(card_memory) - 1) / i64::from(card_memory))
            .min(MILLI)
    };
    let model = request.map_or(String::new(), |r| r.use_types.join("|"));
    PodRes {
        cpu,
        milli,
        num: i64::from(card.nums),
        model: Arc::from(model),
    }
}

fn request_of(pod: &Pod) -> Option<PodRequest> {
    if !asks_for_cards(pod) {
        return None;
    }
    pod_request(pod, &GpuShare::default()).ok().flatten()
}

/// The GPU affinity of the pods on the node.
fn affinity(node: &NodeInfo) -> Affinity {
    let mut a = Affinity::default();
    for p in node.pods() {
        let r = request_of(p);
        a.add(&pod_res(p, r.as_ref(), node), 1);
    }
    a
}

/// A stable hash of the pod's key: Random's pick, the same on every run.
fn pick(pod: &Pod, n: usize) -> usize {
    let key = pod
        .namespace
        .as_str()
        .bytes()
        .chain([b'/'])
        .chain(pod.name.bytes());
    (gantry_api::rng::fnv1a(key) % n as u64) as usize
}

impl Plugin for OpenbScore {
    fn name(&self) -> &'static str {
        self.policy.plugin_name()
    }
}

impl PreScorePlugin for OpenbScore {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        nodes: &NodeInfos<'_>,
        cluster: Cluster<'_>,
    ) -> Status {
        let random_pick = (self.policy == Policy::Random && !nodes.is_empty())
            .then(|| nodes[pick(pod, nodes.len())].name());
        let typical = match (&self.typical, self.policy) {
            (Some(t), _) => t.clone(),
            (None, Policy::Fgd) => {
                let mut shapes = Vec::new();
                for i in 0..cluster.nodes.num_nodes() {
                    let node = cluster.nodes.node_at(i);
                    for p in node.pods() {
                        shapes.push(pod_res(p, request_of(p).as_ref(), node));
                    }
                }
                if let Some(node) = nodes.first() {
                    let r = state.read::<PodRequest>(gpu_share::NAME);
                    shapes.push(pod_res(pod, r, node));
                }
                Arc::new(TypicalPods::from_workload(&shapes))
            }
            (None, _) => Arc::new(TypicalPods::default()),
        };
        state.write(
            self.policy.plugin_name(),
            PreState {
                typical,
                random_pick,
            },
        );
        Status::success()
    }
}

impl ScorePlugin for OpenbScore {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let Some(pre) = state.read::<PreState>(self.policy.plugin_name()) else {
            return Err(Status::error(format!(
                "{}: PreScore did not run",
                self.name()
            )));
        };
        let request = state.read::<PodRequest>(gpu_share::NAME);
        let (n, p) = (node_res(node), pod_res(pod, request, node));
        Ok(match self.policy {
            Policy::Random => 100 * i64::from(pre.random_pick == Some(node.name())),
            Policy::DotProd => policy::dot_product_score(&n, &p),
            Policy::GpuClustering => policy::gpu_clustering_score(&n, &affinity(node), &p),
            Policy::GpuPacking => policy::gpu_packing_score(&n, &p).unwrap_or(0),
            Policy::BestFit => policy::best_fit_raw(&n, &p).unwrap_or(0),
            Policy::Fgd => {
                let typical = &pre.typical;
                policy::fgd_score(&n, &p, &mut |r| typical.frag(r).fragment()).0
            }
        })
    }

    fn normalize(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        if self.policy == Policy::BestFit {
            policy::normalize_min_max(scores);
        }
        Status::success()
    }
}
