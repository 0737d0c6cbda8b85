//! Scale-down: can a node be removed? As the Cluster Autoscaler's `RemovalSimulator`
//! (`simulator/cluster.go`) decides it:
//! 1. a node not in the snapshot is `NoNodeInfo`;
//! 2. each pod on the node goes through the drainability rules (`drainability/rules`, in
//!    upstream's order): mirror and DaemonSet pods stay (they go with the node); a pod
//!    annotated safe to evict moves; a pod without a replicating controller, a kube-system
//!    pod without a disruption budget, a pod annotated not safe to evict, one with local
//!    storage (a `hostPath`, or an `emptyDir` not in memory, unless its name is listed in
//!    the safe-to-evict-local-volumes annotation), or one whose budget allows no
//!    disruption blocks the removal (`BlockedByPod`);
//! 3. in a fork, the pods to move leave the node, the node is replaced by a pod-less copy
//!    tainted `ToBeDeletedByClusterAutoscaler:NoSchedule` (it still counts as a topology
//!    domain), and each pod is placed on another node that is not itself being drained;
//!    if one finds no place the node is `NoPlaceToMovePods` and the fork is reverted;
//! 4. the pods to move together must fit their disruption budgets;
//! 5. otherwise the node is removed and the fork committed, so the next candidate sees the
//!    moved pods, and the moved pods count against their budgets.

use std::sync::Arc;

use gantry_api::{Pod, PodDisruptionBudget, Sym, Taint, TaintEffect};
use gantry_cache::NodeInfo;

use crate::snapshot::{ClusterSnapshot, SchedulingError};

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// Volume names, comma-separated, whose local data may be lost with the node.
const SAFE_TO_EVICT_LOCAL_VOLUMES: &str =
    "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes";
/// The taint the autoscaler puts on nodes it is deleting.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// Controller kinds whose pods are re-created elsewhere (upstream's `replicatedKind`).
const REPLICATED_KINDS: [&str; 4] = ["ReplicationController", "Job", "ReplicaSet", "StatefulSet"];

/// Why a node cannot be removed (upstream's `UnremovableReason` values that apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unremovable {
    NoPlaceToMovePods,
    BlockedByPod,
    NoNodeInfo,
}

impl Unremovable {
    pub fn as_str(self) -> &'static str {
        match self {
            Unremovable::NoPlaceToMovePods => "NoPlaceToMovePods",
            Unremovable::BlockedByPod => "BlockedByPod",
            Unremovable::NoNodeInfo => "NoNodeInfo",
        }
    }
}

/// Why a pod blocks its node's removal (upstream's `drain.BlockingPodReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockingReason {
    NotReplicated,
    UnmovableKubeSystemPod,
    NotSafeToEvictAnnotation,
    LocalStorageRequested,
    NotEnoughPdb,
}

impl BlockingReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockingReason::NotReplicated => "NotReplicated",
            BlockingReason::UnmovableKubeSystemPod => "UnmovableKubeSystemPod",
            BlockingReason::NotSafeToEvictAnnotation => "NotSafeToEvictAnnotation",
            BlockingReason::LocalStorageRequested => "LocalStorageRequested",
            BlockingReason::NotEnoughPdb => "NotEnoughPdb",
        }
    }
}

#[derive(Debug, Clone)]
pub struct BlockingPod {
    pub pod: Arc<Pod>,
    pub reason: BlockingReason,
    pub message: String,
}

/// The disruption budgets still available, as upstream's `RemainingPdbTracker`.
pub trait RemainingPdbTracker {
    /// The disruptions still allowed by each budget that covers the pod.
    fn matching(&self, pod: &Pod) -> Vec<i32>;

    /// Counts the pods' evictions against their budgets.
    fn remove_pods(&mut self, pods: &[Arc<Pod>]);

    /// The first pod whose eviction, after those before it, would exceed a budget (upstream's
    /// `CanRemovePods`): a node's pods share their budgets.
    fn first_over_budget(&self, pods: &[Arc<Pod>]) -> Option<usize>;
}

/// The budgets of PodDisruptionBudget objects, as upstream's `BasicRemainingPdbTracker`:
/// each covering budget's `disruptionsAllowed`, lowered as pods are moved off removed nodes.
pub struct BudgetTracker {
    budgets: Vec<(PodDisruptionBudget, i32)>,
}

impl BudgetTracker {
    pub fn new(budgets: &[PodDisruptionBudget]) -> BudgetTracker {
        BudgetTracker {
            budgets: budgets
                .iter()
                .map(|b| (b.clone(), b.disruptions_allowed))
                .collect(),
        }
    }
}

impl RemainingPdbTracker for BudgetTracker {
    fn matching(&self, pod: &Pod) -> Vec<i32> {
        self.budgets
            .iter()
            .filter(|(b, _)| b.covers(pod))
            .map(|(_, allowed)| *allowed)
            .collect()
    }

    fn remove_pods(&mut self, pods: &[Arc<Pod>]) {
        for pod in pods {
            for (budget, allowed) in &mut self.budgets {
                if budget.covers(pod) {
                    *allowed -= 1;
                }
            }
        }
    }

    fn first_over_budget(&self, pods: &[Arc<Pod>]) -> Option<usize> {
        let mut left: Vec<i32> = self.budgets.iter().map(|(_, allowed)| *allowed).collect();
        for (i, pod) in pods.iter().enumerate() {
            for ((budget, _), left) in self.budgets.iter().zip(&mut left) {
                if budget.covers(pod) {
                    *left -= 1;
                    if *left < 0 {
                        return Some(i);
                    }
                }
            }
        }
        None
    }
}

/// What the rules decide for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Drainability {
    /// Goes with the node (mirror and DaemonSet pods).
    Skip,
    /// Must be moved elsewhere.
    Move,
    Blocked(BlockingReason, String),
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.annotations
        .iter()
        .find(|(k, _)| &**k == key)
        .map(|(_, v)| &**v)
}

fn controller_kind(pod: &Pod) -> Option<&str> {
    pod.controller.as_ref().map(|c| c.kind.as_str())
}

/// Upstream's `HasBlockingLocalStorage`: a local volume the annotation does not list.
fn has_blocking_local_storage(pod: &Pod) -> bool {
    let listed = annotation(pod, SAFE_TO_EVICT_LOCAL_VOLUMES).unwrap_or("");
    pod.volumes
        .iter()
        .any(|v| v.local && !listed.split(',').any(|name| name == &*v.name))
}

/// Upstream's default rules, in their order; the first with an outcome decides.
fn drainability(pod: &Pod, budgets: &dyn RemainingPdbTracker) -> Drainability {
    if annotation(pod, MIRROR_ANNOTATION).is_some() || controller_kind(pod) == Some("DaemonSet") {
        return Drainability::Skip;
    }
    if annotation(pod, SAFE_TO_EVICT) == Some("true") {
        return Drainability::Move;
    }
    let key = pod.key();
    if !controller_kind(pod).is_some_and(|k| REPLICATED_KINDS.contains(&k)) {
        return Drainability::Blocked(
            BlockingReason::NotReplicated,
            format!("{key} is not replicated"),
        );
    }
    let matching = budgets.matching(pod);
    if pod.namespace.as_str() == "kube-system" && matching.is_empty() {
        return Drainability::Blocked(
            BlockingReason::UnmovableKubeSystemPod,
            format!(
                "non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: {}",
                pod.name
            ),
        );
    }
    if annotation(pod, SAFE_TO_EVICT) == Some("false") {
        return Drainability::Blocked(
            BlockingReason::NotSafeToEvictAnnotation,
            format!("pod annotated as not safe to evict present: {}", pod.name),
        );
    }
    if has_blocking_local_storage(pod) {
        return Drainability::Blocked(
            BlockingReason::LocalStorageRequested,
            format!("pod with local storage present: {}", pod.name),
        );
    }
    if matching.iter().any(|allowed| *allowed < 1) {
        return Drainability::Blocked(
            BlockingReason::NotEnoughPdb,
            format!("not enough pod disruption budget to move {key}"),
        );
    }
    Drainability::Move
}

/// One node's answer.
#[derive(Debug, Clone)]
pub struct DrainResult {
    pub node: Sym,
    pub unremovable: Option<Unremovable>,
    pub blocking_pod: Option<BlockingPod>,
    /// Where each moved pod went (empty unless removable).
    pub moves: Vec<(Arc<Pod>, Sym)>,
    /// Why the pod that found no place did not fit, for `NoPlaceToMovePods`.
    pub no_place: Option<(Arc<Pod>, String)>,
}

impl DrainResult {
    fn unremovable(node: Sym, reason: Unremovable) -> DrainResult {
        DrainResult {
            node,
            unremovable: Some(reason),
            blocking_pod: None,
            moves: Vec::new(),
            no_place: None,
        }
    }
}

/// Checks the candidates one after another; the nodes removed so far stay removed (their
/// pods moved) for the next. No candidate receives pods.
pub fn simulate_removals(
    snapshot: &mut ClusterSnapshot,
    candidates: &[Sym],
    budgets: &mut dyn RemainingPdbTracker,
) -> Result<Vec<DrainResult>, SchedulingError> {
    let mut results = Vec::with_capacity(candidates.len());
    for &node in candidates {
        results.push(simulate_removal(snapshot, node, candidates, budgets)?);
    }
    Ok(results)
}

fn simulate_removal(
    snapshot: &mut ClusterSnapshot,
    node: Sym,
    candidates: &[Sym],
    budgets: &mut dyn RemainingPdbTracker,
) -> Result<DrainResult, SchedulingError> {
    let Some(info) = snapshot.cluster().node(node) else {
        return Ok(DrainResult::unremovable(node, Unremovable::NoNodeInfo));
    };
    let mut to_move = Vec::new();
    for pod in info.pods() {
        match drainability(pod, budgets) {
            Drainability::Skip => {}
            Drainability::Move => to_move.push(pod.clone()),
            Drainability::Blocked(reason, message) => {
                let mut result = DrainResult::unremovable(node, Unremovable::BlockedByPod);
                result.blocking_pod = Some(BlockingPod {
                    pod: pod.clone(),
                    reason,
                    message,
                });
                return Ok(result);
            }
        }
    }
    if let Some(i) = budgets.first_over_budget(&to_move) {
        let pod = to_move[i].clone();
        let mut result = DrainResult::unremovable(node, Unremovable::BlockedByPod);
        result.blocking_pod = Some(BlockingPod {
            message: format!("not enough pod disruption budget to move {}", pod.key()),
            pod,
            reason: BlockingReason::NotEnoughPdb,
        });
        return Ok(result);
    }
    let ghost = tainted_copy(info);
    snapshot.fork();
    match find_places(snapshot, node, ghost, &to_move, candidates) {
        Ok(moves) => {
            snapshot.remove_node(node).expect("the ghost was added");
            snapshot.commit().expect("forked above");
            budgets.remove_pods(&to_move);
            Ok(DrainResult {
                node,
                unremovable: None,
                blocking_pod: None,
                moves,
                no_place: None,
            })
        }
        Err(Placement::NoPlace(pod, reason)) => {
            snapshot.revert().expect("forked above");
            let mut result = DrainResult::unremovable(node, Unremovable::NoPlaceToMovePods);
            result.no_place = Some((pod, reason));
            Ok(result)
        }
        Err(Placement::Failed(e)) => {
            snapshot.revert().expect("forked above");
            Err(e)
        }
    }
}

enum Placement {
    NoPlace(Arc<Pod>, String),
    Failed(SchedulingError),
}

/// The node without its pods and with the autoscaler's deletion taint.
fn tainted_copy(info: &NodeInfo) -> NodeInfo {
    let mut node = gantry_api::Node::clone(info.node().expect("snapshot nodes have a node"));
    node.taints.push(Taint {
        key: gantry_api::Sym::new(TO_BE_DELETED_TAINT),
        value: gantry_api::Sym::new("gantry"),
        effect: TaintEffect::NoSchedule,
    });
    let mut ghost = NodeInfo::new(Arc::new(node));
    if !info.resource_slices().is_empty() {
        ghost.set_resource_slices(info.resource_slices().to_vec());
    }
    ghost
}

fn find_places(
    snapshot: &mut ClusterSnapshot,
    node: Sym,
    ghost: NodeInfo,
    pods: &[Arc<Pod>],
    candidates: &[Sym],
) -> Result<Vec<(Arc<Pod>, Sym)>, Placement> {
    let internal = |e: crate::StoreError| {
        Placement::Failed(SchedulingError::Internal {
            pod: String::new(),
            message: e.to_string(),
        })
    };
    for pod in pods {
        snapshot.remove_pod(node, pod).map_err(internal)?;
    }
    snapshot.remove_node(node).map_err(internal)?;
    snapshot.add_node(ghost).map_err(internal)?;
    let eligible = |info: &NodeInfo| !candidates.contains(&info.name());
    let destinations = crate::Destinations {
        accepts: &eligible,
        others_are: "being drained",
    };
    let mut moves = Vec::with_capacity(pods.len());
    for pod in pods {
        let mut moving = Pod::clone(pod);
        moving.node_name = None;
        let moving = Arc::new(moving);
        match snapshot.schedule_anywhere(&moving, None, &destinations) {
            Ok(to) => moves.push((pod.clone(), to)),
            Err(SchedulingError::Unschedulable(fit)) => {
                return Err(Placement::NoPlace(pod.clone(), fit.to_string()));
            }
            Err(e) => return Err(Placement::Failed(e)),
        }
    }
    Ok(moves)
}
