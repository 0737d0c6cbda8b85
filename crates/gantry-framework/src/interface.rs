//! The extension points. A plugin implements the traits of the points it takes part in;
//! a [`Profile`](crate::Profile) lists the plugins per point, in order.

use crate::NodeInfos;
use std::sync::Arc;

use gantry_api::{Pod, Sym};
use gantry_cache::{ClusterState, NodeColumns, NodeInfo};

use crate::{ApiObjects, ClusterEvent, CycleState, Status};

/// Highest score a plugin may give a node after normalisation.
pub const MAX_NODE_SCORE: i64 = 100;

/// What PreFilter and PreScore plugins can read: the nodes, and the other API objects.
#[derive(Clone, Copy)]
pub struct Cluster<'a> {
    pub nodes: &'a dyn ClusterState,
    pub objects: &'a ApiObjects,
}

pub trait Plugin: Send + Sync {
    fn name(&self) -> &'static str;

    /// The cluster events that can make a pod this plugin rejected schedulable again.
    /// The queue moves such a pod back only on these; the default is every event.
    fn events_to_register(&self) -> &'static [ClusterEvent] {
        crate::events::ALL_EVENTS
    }

    /// OpportunisticBatching: whether this plugin can sign pods (upstream's `SignPlugin`).
    /// A profile running a plugin that cannot at PreFilter, Filter, PreScore or Score signs
    /// no pod. The default: it cannot.
    fn signs_pods(&self) -> bool {
        false
    }

    /// Writes into `signature` what of `pod` this plugin's PreFilter, Filter, PreScore and
    /// Score read, or refuses the pod (`false`: its outcome depends on more than the pod,
    /// such as the pods placed meanwhile). Asked only of plugins that sign pods.
    fn sign(&self, _pod: &Pod, _signature: &mut crate::Signature) -> bool {
        false
    }

    /// Whether what this plugin's PreFilter found still lets the pod be signed (upstream's
    /// `SignPod` asks the cluster too: NodeResourcesFit refuses pods whose extended
    /// resources a device class serves). Asked after `sign`; the default: it does.
    fn signs_after_pre_filter(&self, _state: &crate::CycleState) -> bool {
        true
    }
}

/// A PreFilter may narrow the nodes to consider (`Some(names)`); `None` means all nodes.
pub type PreFilterResult = Option<Vec<Sym>>;

pub trait PreFilterPlugin: Plugin {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status);

    /// Updates the PreFilter state as if `other` were added to `node` (`delta` 1) or gone
    /// from it (`delta` -1): preemption's what-if. One method for both ways, as the
    /// plugins' counts go both ways alike.
    fn update_for_pod(
        &self,
        _state: &mut CycleState,
        _pod: &Pod,
        _other: &Arc<Pod>,
        _node: &NodeInfo,
        _delta: i64,
    ) {
    }

    /// Upstream's AddPod: the PreFilter state as if `added` were on `node`.
    fn add_pod(&self, state: &mut CycleState, pod: &Pod, added: &Arc<Pod>, node: &NodeInfo) {
        self.update_for_pod(state, pod, added, node, 1);
    }

    /// Upstream's RemovePod: the PreFilter state as if `removed` were gone from `node`.
    fn remove_pod(&self, state: &mut CycleState, pod: &Pod, removed: &Arc<Pod>, node: &NodeInfo) {
        self.update_for_pod(state, pod, removed, node, -1);
    }
}

/// The feasible nodes a plugin chooses among (`FilterPlugin::choose`) or the runner scores:
/// their NodeInfos and, when the snapshot keeps columns, the snapshot's columns with each
/// node's position in them (the plugins' column loops read them).
#[derive(Clone, Copy)]
pub struct FeasibleNodes<'a, 'n> {
    pub infos: &'a NodeInfos<'n>,
    pub columns: Option<(&'a NodeColumns, &'a [usize])>,
}

/// What a cycle's Filter verdicts depend on besides the pod and the node (see
/// [`FilterPlugin::filter_verdict_key`]).
pub type VerdictKey = smallvec::SmallVec<[u64; 4]>;

pub trait FilterPlugin: Plugin {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status;

    /// Whether `filter`'s verdict for this pod (after its PreFilter wrote `state`) reads
    /// nothing but the pod's spec and the node's NodeInfo: no other node, no other API
    /// object, no clock. The scheduler then remembers the verdicts of a run of pods of one
    /// template on nodes that did not change (`gantry_scheduler`'s verdict memo). The
    /// default: it may read more.
    fn filter_reads_only_the_node(&self, _state: &CycleState, _pod: &Pod) -> bool {
        false
    }

    /// Whether `filter`'s verdict for this pod reads nothing but the pod's spec, the
    /// node's NodeInfo and what this appends to `key`: two cycles of like pods whose keys
    /// are equal get the same verdict on a node whose generation did not move, and the
    /// verdict memo answers for such nodes (DynamicResources: the shape of the pod's
    /// claims and the DRA store's epoch). The default: [`Self::filter_reads_only_the_node`],
    /// appending nothing.
    fn filter_verdict_key(&self, state: &CycleState, pod: &Pod, _key: &mut VerdictKey) -> bool {
        self.filter_reads_only_the_node(state, pod)
    }

    /// A shortcut through Filter for many nodes at once, read from the snapshot's
    /// columns: writes `proven[i]`, true when the columns of the node at `positions[i]`
    /// show that `filter` would succeed there, false when they do not tell (`filter` then
    /// runs on that node and decides). It may prove less than `filter` passes, never more.
    /// Returns false, writing nothing, when the plugin has no shortcut for this pod (the
    /// default).
    fn filter_columns(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        _columns: &NodeColumns,
        _positions: &[usize],
        _proven: &mut [bool],
    ) -> bool {
        false
    }

    /// Once every node was filtered, a plugin may choose among the feasible ones itself,
    /// as a kube-scheduler extender's filter verb does (it sees them all at once; HAMi's
    /// GPU scheduler returns the node it picked): writes the indices in `nodes.infos` to
    /// keep into `kept` (cleared, ascending) and returns true, or returns false to keep
    /// them all. Not asked when the plugin's PreFilter said Skip.
    fn choose(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        _nodes: FeasibleNodes<'_, '_>,
        _kept: &mut Vec<usize>,
    ) -> bool {
        false
    }

    /// Annotations the plugin writes on the pod once it is assumed on `node` (HAMi's card
    /// assignment), `now` being the scheduler's clock in seconds. An error aborts the
    /// attempt.
    fn annotations(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        _node: &NodeInfo,
        _now: i64,
    ) -> Result<Vec<gantry_api::Annotation>, Status> {
        Ok(Vec::new())
    }

    /// At bind time, after Filter passed on the pod's node: whether what this plugin chose
    /// within the node for the pod, and wrote on it (`annotations`: HAMi's cards), is still
    /// free on `node`, which does not hold the pod. Filter asks whether the pod fits the
    /// node somehow; a decision fixed more than the node, and this checks that. For the
    /// binder's re-check and the shared-state API's admission
    /// (`gantry_scheduler::check_placement`). The default: nothing chosen within the node.
    fn filter_chosen(&self, _state: &CycleState, _pod: &Pod, _node: &NodeInfo) -> Status {
        Status::success()
    }

    /// Finer verdicts than Filter's, for explanations (HAMi's verdict on every card).
    fn details(&self, _state: &CycleState, _pod: &Pod, _node: &NodeInfo) -> Vec<Detail> {
        Vec::new()
    }
}

/// One part of a node (a GPU card, say) and what a plugin makes of it for the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Detail {
    /// What the line is about, e.g. `GPU-0 (NVIDIA-A100, numa 0)`.
    pub item: String,
    /// Its state, e.g. `3/10 shares, 3072/81920 MiB, 30/100 cores`.
    pub state: String,
    /// `None`: it fits; otherwise the plugin's reason.
    pub reason: Option<String>,
    /// The plugin's score of it, when it scores one.
    pub score: Option<f64>,
    /// The pod would be given this item.
    pub chosen: bool,
}

pub trait PreScorePlugin: Plugin {
    /// `nodes` are the feasible nodes, which Score will be asked about.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        nodes: &NodeInfos<'_>,
        cluster: Cluster<'_>,
    ) -> Status;
}

pub trait ScorePlugin: Plugin {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status>;

    /// Whether `score` (before `normalize`) for this pod reads nothing but the pod's spec
    /// and the node's NodeInfo, as [`FilterPlugin::filter_reads_only_the_node`] asks, and
    /// costs enough that the scheduler should remember it rather than ask again. The
    /// default: no.
    fn worth_remembering(&self, _state: &CycleState, _pod: &Pod) -> bool {
        false
    }

    /// Score for many nodes at once, reading the snapshot's columns where it can: writes
    /// into `scores[i]` what `score` gives `nodes[i]`, the node at `positions[i]`.
    /// `Ok(false)`, writing nothing, when the plugin has no such loop for this pod (the
    /// default): `score` is then asked node by node.
    fn score_columns(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        _nodes: &[&NodeInfo],
        _columns: &NodeColumns,
        _positions: &[usize],
        _scores: &mut [i64],
    ) -> Result<bool, Status> {
        Ok(false)
    }

    /// The raw score `score` would give every node in `columns` for this pod, when the
    /// plugin can tell without a look at any node that it is one and the same (0 where no
    /// node carries what the plugin scores): the scheduler then adds one normalised figure
    /// to every total instead of scoring, normalising and adding node by node. A plugin
    /// that answers must have a `normalize` that gives each of any number of equal scores
    /// what it gives one alone. `Ok(None)` (the default): score the nodes.
    fn uniform_score(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        _columns: &NodeColumns,
    ) -> Result<Option<i64>, Status> {
        Ok(None)
    }

    /// Whether `normalize` may change a score (upstream: the plugin's `ScoreExtensions()`
    /// is not nil). The scheduler adds the raw scores of a plugin that says no straight
    /// to the totals. The default: it may.
    fn normalizes(&self) -> bool {
        true
    }

    /// Rescales the raw scores of all feasible nodes (in the order Score saw them) to
    /// 0..=MAX_NODE_SCORE. The default leaves them as they are.
    fn normalize(&self, _state: &CycleState, _pod: &Pod, _scores: &mut [i64]) -> Status {
        Status::success()
    }
}

/// A PostFilter plugin other than DynamicResources and DefaultPreemption, which the
/// scheduler runs itself and first: asked in order once the pod fits nowhere and
/// preemption nominated no node. The reasons of its Unschedulable status join the pod's
/// message (`RunPostFilterPlugins`).
pub trait PostFilterPlugin: Plugin {
    fn post_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        groups: &gantry_cache::PodGroupStates,
    ) -> Status;
}

/// Reserve sees the chosen node (what Filter saw there can be worked out again, rather
/// than kept for every node); Unreserve, which may run in the binding cycle, its name.
pub trait ReservePlugin: Plugin {
    fn reserve(&self, state: &mut CycleState, pod: &Pod, node: &NodeInfo) -> Status;
    fn unreserve(&self, state: &mut CycleState, pod: &Pod, node: Sym);
}

/// Permit: allow, reject, or ask to wait (`Code::Wait`) up to the returned timeout. It
/// sees the PodGroups' members as the cache holds them (upstream's `PodGroupManager`).
pub trait PermitPlugin: Plugin {
    fn permit(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        node: Sym,
        groups: &gantry_cache::PodGroupStates,
    ) -> (Status, PermitTimeout);
}

/// How long a Permit plugin asks a pod to wait: a Go `time.Duration` of whole seconds,
/// which may be negative (Coscheduling's `scheduleTimeoutSeconds` is not checked by its
/// CRD). A negative wait ends at once, and the rejection names it as Go prints it (`-5s`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct PermitTimeout {
    pub seconds: i64,
}

impl PermitTimeout {
    pub const ZERO: PermitTimeout = PermitTimeout { seconds: 0 };

    pub const fn from_secs(seconds: i64) -> PermitTimeout {
        PermitTimeout { seconds }
    }

    /// The wait itself: none when negative.
    pub fn wait(self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::try_from(self.seconds).unwrap_or(0))
    }
}

/// Go's `time.Duration.String()` for whole seconds: `4s`, `1m0s`, `1h0m0s`, `-5s`.
impl std::fmt::Display for PermitTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.seconds < 0 {
            f.write_str("-")?;
        }
        let seconds = self.seconds.unsigned_abs();
        let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
        match (h, m) {
            (0, 0) => write!(f, "{s}s"),
            (0, _) => write!(f, "{m}m{s}s"),
            _ => write!(f, "{h}h{m}m{s}s"),
        }
    }
}

/// PreBind: work before the bind (attaching volumes, say); a failure aborts the binding
/// cycle, which unreserves and forgets the pod.
pub trait PreBindPlugin: Plugin {
    fn pre_bind(&self, state: &mut CycleState, pod: &Pod, node: Sym) -> Status;
}

/// PostBind: informational, after a successful bind.
pub trait PostBindPlugin: Plugin {
    fn post_bind(&self, state: &CycleState, pod: &Pod, node: Sym);
}

/// PreEnqueue: whether a pending pod may enter the queue at all (its scheduling gates,
/// its gang's quorum, its claims' existence).
pub trait PreEnqueuePlugin: Plugin {
    fn pre_enqueue(&self, pod: &Pod, cluster: &PreEnqueueView<'_>) -> Status;
}

/// What PreEnqueue reads besides the pod, as the queue sees it between cycles: the
/// PodGroups with their members, and the claims as the cache holds them (`None` where
/// nothing shares them with the queue: DynamicResources then leaves its check to
/// PreFilter).
#[derive(Clone, Copy)]
pub struct PreEnqueueView<'a> {
    pub groups: &'a gantry_cache::PodGroupStates,
    pub claims: Option<&'a gantry_cache::DraCache>,
}

impl<'a> PreEnqueueView<'a> {
    /// A view of `groups` alone.
    pub fn of_groups(groups: &'a gantry_cache::PodGroupStates) -> PreEnqueueView<'a> {
        PreEnqueueView {
            groups,
            claims: None,
        }
    }
}

/// DefaultScore helper: `score * MAX / max`, or its reverse, as upstream's
/// `DefaultNormalizeScore`.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    // Most often every score is 0 (no node has what the plugin looks for): one pass that
    // vectorises says so, where the maximum of 64-bit integers does not.
    let any_positive = scores.iter().fold(false, |any, &s| any | (s > 0));
    let max = match any_positive {
        true => scores.iter().copied().max().unwrap_or(0),
        false => 0,
    };
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        *s = MAX_NODE_SCORE * *s / max;
        if reverse {
            *s = MAX_NODE_SCORE - *s;
        }
    }
}
