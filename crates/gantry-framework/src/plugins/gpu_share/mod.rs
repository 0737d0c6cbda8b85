//! GPUShare: NVIDIA GPUs shared by slots, memory and compute, decided as HAMi
//! (Project-HAMi/HAMi) decides. Filter checks a node's cards as HAMi's `Fit` does, with
//! its reasons; once every node is filtered the plugin picks the node HAMi would pick
//! (its node score, per node policy) as HAMi's scheduler extender does, and writes HAMi's
//! annotations (the cards given to each container) on the pod it places. The cards'
//! usage lives in each node's NodeInfo. Pods that ask for no card are not its business.

mod fit;
mod policy;
pub(crate) mod request;
mod score;
mod summary;
mod topology;

use std::sync::{Arc, LazyLock};

use gantry_api::Pod;
use gantry_api::gpu::{self, AssignedCard};
use gantry_cache::{NodeColumns, NodeInfo};
use serde::Deserialize;

pub use fit::{NODE_INSUFFICIENT_DEVICE, NODE_UNREGISTERED};
pub use policy::NodePolicy;
use request::PodRequest;

use crate::{
    Cluster, CycleState, Detail, FeasibleNodes, FilterPlugin, Plugin, PreFilterPlugin,
    PreFilterResult, Status,
};

pub const NAME: &str = "GPUShare";

/// The keys of what HAMi writes on a pod (and the bind phase), allocated once.
static WRITTEN_KEYS: LazyLock<[Arc<str>; 7]> = LazyLock::new(|| {
    [
        gpu::ASSIGNED_NODE,
        gpu::ASSIGNED_TIME,
        gpu::DEVICES_TO_ALLOCATE,
        gpu::DEVICES_ALLOCATED,
        gpu::BIND_PHASE,
        gpu::BIND_TIME,
        gpu::BIND_PHASE_ALLOCATING,
    ]
    .map(Arc::from)
});

/// The plugin, with its arguments: the cluster-wide defaults of HAMi's scheduler and
/// device configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuShare {
    /// `--gpu-scheduler-policy`: how cards are chosen on a node (default spread).
    pub gpu_scheduler_policy: String,
    /// `--node-scheduler-policy`: which node is chosen (default binpack).
    pub node_scheduler_policy: NodePolicy,
    /// `nodeSchedulerPolicy: none` (Gantry's): GPUShare filters and assigns cards but
    /// leaves the choice of node to the score plugins (the FGD simulator's Open-Gpu-Share
    /// does so; its policies are score plugins, see plugins/openb).
    pub chooses_node: bool,
    /// `defaultMemory`: MiB per card when a container names neither memory nor share.
    pub default_memory: i32,
    /// `defaultCores`: compute per card when a container names none.
    pub default_cores: i32,
    /// `defaultGPUNum`: cards for a container that names memory or compute but no count.
    pub default_gpu_num: i32,
}

impl Default for GpuShare {
    fn default() -> GpuShare {
        GpuShare {
            gpu_scheduler_policy: "spread".into(),
            node_scheduler_policy: NodePolicy::Binpack,
            chooses_node: true,
            default_memory: 0,
            default_cores: 0,
            default_gpu_num: 1,
        }
    }
}

/// `pluginConfig` arguments of GPUShare, named as HAMi names its settings.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuShareArgs {
    gpu_scheduler_policy: Option<String>,
    node_scheduler_policy: Option<String>,
    default_memory: Option<i32>,
    default_cores: Option<i32>,
    #[serde(rename = "defaultGPUNum")]
    default_gpu_num: Option<i32>,
}

impl GpuShare {
    /// Validated arguments; an error names the field and says what is wrong.
    pub fn from_args(args: GpuShareArgs) -> Result<GpuShare, (&'static str, String)> {
        let mut out = GpuShare::default();
        if let Some(p) = args.gpu_scheduler_policy {
            if !policy::valid_gpu_policy(&p) {
                return Err((
                    "gpuSchedulerPolicy",
                    format!(
                        "{p:?} is not a comma-separated list of binpack, spread, numa, mutex, topology-aware"
                    ),
                ));
            }
            out.gpu_scheduler_policy = p.trim().to_string();
        }
        if let Some(p) = args.node_scheduler_policy.filter(|p| {
            let none = p.trim() == "none";
            out.chooses_node &= !none;
            !none
        }) {
            out.node_scheduler_policy = policy::node_policy(&p).ok_or_else(|| {
                (
                    "nodeSchedulerPolicy",
                    format!("must be binpack, spread or none, not {p:?}"),
                )
            })?;
        }
        let not_negative = |field, value: Option<i32>, default| match value {
            Some(v) if v < 0 => Err((field, format!("must not be negative, not {v}"))),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        out.default_memory = not_negative("defaultMemory", args.default_memory, 0)?;
        out.default_gpu_num = not_negative("defaultGPUNum", args.default_gpu_num, 1)?;
        out.default_cores = match args.default_cores {
            Some(c) if !(0..=100).contains(&c) => {
                return Err(("defaultCores", format!("must be 0 to 100, not {c}")));
            }
            Some(c) => c,
            None => 0,
        };
        Ok(out)
    }

    fn request<'s>(&self, state: &'s CycleState) -> Option<&'s PodRequest> {
        state.read::<PodRequest>(NAME)
    }
}

impl Plugin for GpuShare {
    fn name(&self) -> &'static str {
        NAME
    }

    /// HAMi runs beside kube-scheduler as an extender, which turns signatures off for the
    /// pods it serves; a pod asking for no shared card never reaches it, and its
    /// signature is kube-scheduler's alone.
    fn signs_pods(&self) -> bool {
        true
    }

    fn sign(&self, pod: &Pod, _signature: &mut crate::Signature) -> bool {
        !request::asks_for_cards(pod)
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::POD_DELETE_OR_NODE_ADD_OR_UPDATE
    }
}

impl PreFilterPlugin for GpuShare {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        if !request::asks_for_cards(pod) {
            return (None, Status::skip());
        }
        match request::pod_request(pod, self) {
            Ok(Some(request)) => {
                state.write(NAME, request);
                (None, Status::success())
            }
            Ok(None) => (None, Status::skip()),
            Err(message) => (None, Status::unresolvable(message)),
        }
    }
}

impl FilterPlugin for GpuShare {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(request) = self.request(state) else {
            return Status::error("GPUShare: PreFilter did not run");
        };
        match node.gpus() {
            Some(usage) => match fit::fits(request, usage) {
                Ok(()) => Status::success(),
                Err(reason) => Status::unschedulable(reason),
            },
            // Whole cards on a node without HAMi: NVIDIA's device plugin and
            // NodeResourcesFit's count of nvidia.com/gpu decide.
            None if !request.needs_hami => Status::success(),
            None => Status::unschedulable(NODE_UNREGISTERED),
        }
    }

    /// A node is proven when its card summary shows that every open card has room for
    /// each container (`SummaryNeed`); a node without HAMi when the pod needs no shares.
    fn filter_columns(
        &self,
        state: &CycleState,
        _pod: &Pod,
        columns: &NodeColumns,
        positions: &[usize],
        proven: &mut [bool],
    ) -> bool {
        let Some(request) = self.request(state) else {
            return false;
        };
        let Some(need) = summary::SummaryNeed::of(request) else {
            return false;
        };
        let summaries = columns.card_summaries();
        for (proof, &position) in proven.iter_mut().zip(positions) {
            *proof = match &summaries[position] {
                Some(summary) => need.met_by(summary),
                None => !request.needs_hami,
            };
        }
        true
    }

    /// HAMi's extender returns the one node it scored best; where HAMi's scores tie (its
    /// own order is that of its goroutines), the tied nodes stay and kube-scheduler's
    /// scoring decides among them. Nodes without HAMi take part only when no HAMi node
    /// fits. The scores are read from the columns' card summaries when there are columns
    /// (the same sums, without visiting each NodeInfo).
    fn choose(
        &self,
        state: &CycleState,
        _pod: &Pod,
        nodes: FeasibleNodes<'_, '_>,
        kept: &mut Vec<usize>,
    ) -> bool {
        let Some(request) = self.request(state).filter(|_| self.chooses_node) else {
            return false;
        };
        kept.clear();
        let mut best: Option<f32> = None;
        let mut consider = |i: usize, score: f32| {
            if best.is_none_or(|b| request.node_policy.prefers(score, b)) {
                best = Some(score);
                kept.clear();
            }
            if best == Some(score) {
                kept.push(i);
            }
        };
        match nodes.columns {
            Some((columns, positions)) => {
                let summaries = columns.card_summaries();
                for (i, &position) in positions.iter().enumerate() {
                    if let Some(s) = &summaries[position] {
                        consider(i, score::node_score_of(&s.total, &s.capacity));
                    }
                }
            }
            None => {
                for (i, node) in nodes.infos.iter().enumerate() {
                    if let Some(usage) = node.gpus() {
                        consider(i, node_score(usage));
                    }
                }
            }
        }
        best.is_some()
    }

    fn annotations(
        &self,
        state: &CycleState,
        _pod: &Pod,
        node: &NodeInfo,
        now: i64,
    ) -> Result<Vec<gantry_api::Annotation>, Status> {
        let (Some(request), Some(usage)) = (self.request(state), node.gpus()) else {
            return Ok(Vec::new());
        };
        let given = fit::allocate(request, usage).map_err(|reason| {
            Status::error(format!(
                "GPUShare: the pod no longer fits node {}: {reason}",
                node.name()
            ))
        })?;
        let cards = &usage.devices().cards;
        let containers: Vec<Vec<AssignedCard>> = given
            .iter()
            .map(|c| {
                c.iter()
                    .map(|g| AssignedCard {
                        uuid: cards[g.card].id.clone(),
                        memory_mib: g.memory_mib,
                        cores: g.cores,
                    })
                    .collect()
            })
            .collect();
        let assignment: Arc<str> = Arc::from(gpu::encode_assignment(&containers));
        let now: Arc<str> = Arc::from(now.to_string());
        let k = &*WRITTEN_KEYS;
        Ok(vec![
            (k[0].clone(), Arc::from(node.name().as_str())),
            (k[1].clone(), now.clone()),
            (k[2].clone(), assignment.clone()),
            (k[3].clone(), assignment),
            (k[4].clone(), k[6].clone()),
            (k[5].clone(), now),
        ])
    }

    /// The cards written on the pod, each still passing HAMi's checks with what the node's
    /// pods hold now (the mutex policy and a whole card's compute included).
    fn filter_chosen(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let (Some(request), Some(usage)) = (self.request(state), node.gpus()) else {
            return Status::success();
        };
        let assigned_here = pod.annotation(gpu::ASSIGNED_NODE) == Some(node.name().as_str());
        let Some(assignment) = pod
            .annotation(gpu::DEVICES_ALLOCATED)
            .filter(|_| assigned_here)
        else {
            return Status::unschedulable(format!(
                "no GPU cards of node {} are written on the pod",
                node.name()
            ));
        };
        match fit::assigned_cards_fit(request, usage, assignment) {
            Ok(()) => Status::success(),
            Err(reason) => Status::unschedulable(reason),
        }
    }

    fn details(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Vec<Detail> {
        let Some(request) = self.request(state) else {
            return Vec::new();
        };
        let Some(usage) = node.gpus() else {
            return vec![Detail {
                item: "node".into(),
                state: "no HAMi-registered GPUs".into(),
                reason: request.needs_hami.then(|| NODE_UNREGISTERED.to_string()),
                score: None,
                chosen: false,
            }];
        };
        let verdict = fit::allocate(request, usage);
        let given: Vec<usize> = verdict
            .iter()
            .flatten()
            .flat_map(|c| c.iter().map(|g| g.card))
            .collect();
        let (total, offered) = (usage.total(), usage.capacity());
        let cards = &usage.devices().cards;
        let mut out = vec![Detail {
            item: "node".into(),
            state: describe(total, offered.used, offered.memory_mib, offered.cores),
            reason: verdict.as_ref().err().cloned(),
            score: Some(f64::from(score::node_score(usage))),
            chosen: false,
        }];
        // Each card as the first container that asks for cards sees it.
        let first = request.containers.iter().flatten().next();
        for (i, (card, used)) in cards.iter().zip(usage.cards()).enumerate() {
            let reason = first.and_then(|r| match fit::check_card_kind(card, request) {
                Some(reason) => Some(reason),
                None => fit::check_card_room(card, used, request, r).err(),
            });
            out.push(Detail {
                item: format!("{} ({}, numa {})", card.id, card.card_type, card.numa),
                state: describe(used, card.count, card.memory_mib, card.cores),
                reason: reason.map(|r| r.name().to_string()),
                score: first.map(|r| f64::from(score::card_score(card, used, r, &request.weights))),
                chosen: given.contains(&i),
            });
        }
        out
    }
}

use score::node_score;

fn describe(
    used: &gantry_cache::CardUsage,
    count: impl std::fmt::Display,
    memory: impl std::fmt::Display,
    cores: impl std::fmt::Display,
) -> String {
    format!(
        "{}/{count} shares, {}/{memory} MiB, {}/{cores} cores",
        used.used, used.memory_mib, used.cores
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiObjects;
    use crate::NodeInfos;
    use crate::plugins::gpu_share::fit::tests::{card, usage};
    use gantry_api::{Container, Node, Resources};
    use gantry_cache::Snapshot;

    fn gpu_info(name: &str, used: &[(i32, i32, i32)]) -> NodeInfo {
        let u = usage(
            vec![
                card("c0", 10, 1000, 100, 0, true),
                card("c1", 10, 1000, 100, 0, true),
            ],
            used,
        );
        let mut node = Node::new(name, Resources::new(1000, 1 << 30));
        node.gpus = Some(u.devices().clone());
        let mut info = NodeInfo::new(Arc::new(node));
        // The same usage, through pods the NodeInfo counts.
        for (i, slot) in used.iter().enumerate() {
            for s in 0..slot.0 {
                let mut p = Pod::new("ns", &format!("{name}-{i}-{s}")).on_node(name);
                let (m, c) = if s == 0 { (slot.1, slot.2) } else { (0, 0) };
                p.annotations = [
                    (gpu::ASSIGNED_NODE, name.to_string()),
                    (gpu::DEVICES_ALLOCATED, format!("c{i},NVIDIA,{m},{c}:;")),
                ]
                .iter()
                .map(|(k, v)| (Arc::from(*k), Arc::from(v.as_str())))
                .collect();
                info.add_pod(Arc::new(p));
            }
        }
        info
    }

    fn gpu_pod(policy: Option<&str>) -> Pod {
        let mut c = Container::new("c", None, None);
        c.requests
            .set(gantry_api::ResourceName::parse(gpu::GPU_COUNT), 1);
        c.requests
            .set(gantry_api::ResourceName::parse(gpu::GPU_MEMORY), 100);
        let mut pod = Pod::new("ns", "p").with_container(c);
        if let Some(p) = policy {
            pod.annotations = [(Arc::from(gpu::NODE_SCHEDULER_POLICY), Arc::from(p))].into();
        }
        pod
    }

    fn pre_filtered(pod: &Pod) -> (CycleState, Status) {
        let mut state = CycleState::new();
        let cluster = Cluster {
            nodes: &Snapshot::new(),
            objects: &ApiObjects::default(),
        };
        let (_, status) = GpuShare::default().pre_filter(&mut state, pod, cluster);
        (state, status)
    }

    #[test]
    fn pods_without_gpus_are_skipped() {
        let pod = Pod::new("ns", "p").with_requests(100, 100);
        assert!(pre_filtered(&pod).1.is_skip());
        let (_, status) = pre_filtered(&gpu_pod(None));
        assert!(status.is_success());
    }

    #[test]
    fn the_node_policy_chooses_among_hami_nodes_and_keeps_ties() {
        let busy = gpu_info("busy", &[(1, 500, 10)]);
        let idle = gpu_info("idle", &[]);
        let idle2 = gpu_info("idle2", &[]);
        let plain = NodeInfo::new(Arc::new(Node::new("plain", Resources::new(1000, 1 << 30))));
        let nodes = [&busy, &idle, &plain, &idle2];
        // What the plugin keeps, asked with the NodeInfos and with the columns (the
        // answers must agree).
        let choose = |pod: &Pod, nodes: &[&NodeInfo]| {
            let plugin = GpuShare::default();
            let (state, _) = pre_filtered(pod);
            let mut kept = vec![7];
            let given = NodeInfos::given(nodes);
            let infos = FeasibleNodes {
                infos: &given,
                columns: None,
            };
            let by_infos = plugin
                .choose(&state, pod, infos, &mut kept)
                .then(|| kept.clone());
            let columns = NodeColumns::of(nodes.iter().copied());
            let positions: Vec<usize> = (0..nodes.len()).collect();
            let with_columns = FeasibleNodes {
                infos: &given,
                columns: Some((&columns, &positions)),
            };
            let by_columns = plugin
                .choose(&state, pod, with_columns, &mut kept)
                .then_some(kept);
            assert_eq!(by_infos, by_columns);
            by_infos
        };
        assert_eq!(choose(&gpu_pod(None), &nodes), Some(vec![0]));
        let spread = gpu_pod(Some("spread"));
        assert_eq!(
            choose(&spread, &nodes),
            Some(vec![1, 3]),
            "HAMi's tie: both idle nodes stay, kube-scheduler's scores decide"
        );
        assert_eq!(choose(&spread, &[&plain]), None);
    }

    #[test]
    fn annotations_say_which_cards_and_refuse_a_node_that_no_longer_fits() {
        let pod = gpu_pod(None);
        let (state, _) = pre_filtered(&pod);
        let plugin = GpuShare::default();
        let written = plugin
            .annotations(&state, &pod, &gpu_info("n", &[(1, 0, 0)]), 42)
            .unwrap();
        let get = |key: &str| {
            written
                .iter()
                .find(|(k, _)| &**k == key)
                .map(|(_, v)| v.to_string())
        };
        assert_eq!(
            get(gpu::DEVICES_ALLOCATED).as_deref(),
            Some("c1,NVIDIA,100,0:;")
        );
        assert_eq!(get(gpu::BIND_TIME).as_deref(), Some("42"));
        assert_eq!(get(gpu::ASSIGNED_NODE).as_deref(), Some("n"));
        // Both cards' memory taken since Filter passed: the attempt fails, it does not
        // assume a pod without cards.
        let full = gpu_info("n", &[(1, 1000, 0), (1, 1000, 0)]);
        let error = plugin.annotations(&state, &pod, &full, 42).unwrap_err();
        assert!(
            error.message().contains("2/2 CardInsufficientMemory"),
            "{}",
            error.message()
        );
        let plain = NodeInfo::new(Arc::new(Node::new("p", Resources::default())));
        assert!(
            plugin
                .annotations(&state, &pod, &plain, 42)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn args_are_validated() {
        let ok = GpuShare::from_args(GpuShareArgs::default()).unwrap();
        assert_eq!(ok, GpuShare::default());
        let negative = GpuShareArgs {
            default_memory: Some(-1),
            ..GpuShareArgs::default()
        };
        assert_eq!(
            GpuShare::from_args(negative).unwrap_err().0,
            "defaultMemory"
        );
    }
}
