//! A scheduling profile: the plugins at each extension point, in order, and score weights.

use std::sync::Arc;

use gantry_api::{Gate, Pod, Sym};

use crate::Signature;
use crate::interface::*;

#[derive(Clone)]
pub struct WeightedScorePlugin {
    pub plugin: Arc<dyn ScorePlugin>,
    pub weight: i64,
}

/// How the queue orders pending pods: the profile's QueueSort plugin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueSort {
    /// Priority, then the time the pod entered the queue.
    #[default]
    PrioritySort,
    /// scheduler-plugins' Coscheduling: priority, then the pod's group's creation (or
    /// last failure) or the pod's first attempt, then `namespace/name`.
    Coscheduling,
}

/// One profile of a KubeSchedulerConfiguration, selected by the pod's `schedulerName`.
#[derive(Clone)]
pub struct Profile {
    pub scheduler_name: Sym,
    pub queue_sort: QueueSort,
    pub pre_enqueue: Vec<Arc<dyn PreEnqueuePlugin>>,
    pub pre_filter: Vec<Arc<dyn PreFilterPlugin>>,
    pub filter: Vec<Arc<dyn FilterPlugin>>,
    pub pre_score: Vec<Arc<dyn PreScorePlugin>>,
    pub score: Vec<WeightedScorePlugin>,
    pub reserve: Vec<Arc<dyn ReservePlugin>>,
    /// PostFilter plugins after DynamicResources and DefaultPreemption.
    pub post_filter: Vec<Arc<dyn PostFilterPlugin>>,
    pub permit: Vec<Arc<dyn PermitPlugin>>,
    pub pre_bind: Vec<Arc<dyn PreBindPlugin>>,
    pub post_bind: Vec<Arc<dyn PostBindPlugin>>,
    /// The release whose rules the profile follows (messages, what preemption considers).
    pub release: gantry_api::Release,
    /// DynamicResources at PostFilter (before DefaultPreemption, as upstream orders them):
    /// it frees claims that block the pod, and says so.
    pub deallocates_claims: bool,
    /// DefaultPreemption at PostFilter.
    pub preemption: bool,
    /// `None`: upstream's adaptive percentage.
    pub percentage_of_nodes_to_score: Option<u32>,
    /// DefaultPreemption's `minCandidateNodesPercentage` (default 10).
    pub min_candidate_nodes_percentage: u32,
    /// DefaultPreemption's `minCandidateNodesAbsolute` (default 100).
    pub min_candidate_nodes_absolute: u32,
    /// PlacementGenerate plugins (TopologyAwareWorkloadScheduling); upstream runs the
    /// first only.
    pub placement_generate: Vec<&'static str>,
    /// PlacementScore plugins with their weights.
    pub placement_score: Vec<(&'static str, i64)>,
}

impl Profile {
    /// A profile with no plugins at all, to be filled in.
    pub fn empty(scheduler_name: &str) -> Profile {
        Profile {
            scheduler_name: Sym::new(scheduler_name),
            queue_sort: QueueSort::PrioritySort,
            pre_enqueue: Vec::new(),
            pre_filter: Vec::new(),
            filter: Vec::new(),
            pre_score: Vec::new(),
            score: Vec::new(),
            reserve: Vec::new(),
            post_filter: Vec::new(),
            permit: Vec::new(),
            pre_bind: Vec::new(),
            post_bind: Vec::new(),
            release: gantry_api::Release::default(),
            deallocates_claims: false,
            preemption: false,
            percentage_of_nodes_to_score: None,
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100,
            placement_generate: Vec::new(),
            placement_score: Vec::new(),
        }
    }

    /// The plugins that take part in signing a pod (upstream's `computeBatchablePlugins`):
    /// those at PreFilter, Filter, PreScore and Score, in that order (a plugin at several
    /// points signs alike each time).
    fn signing_plugins(&self) -> impl Iterator<Item = &dyn Plugin> + Clone {
        let pre_filter = self.pre_filter.iter().map(|p| &**p as &dyn Plugin);
        let filter = self.filter.iter().map(|p| &**p as &dyn Plugin);
        let pre_score = self.pre_score.iter().map(|p| &**p as &dyn Plugin);
        let score = self.score.iter().map(|s| &*s.plugin as &dyn Plugin);
        pre_filter.chain(filter).chain(pre_score).chain(score)
    }

    /// OpportunisticBatching's signature of `pod` (upstream's `SignPod`): `None` when the
    /// gate is off, when a plugin of those points cannot sign (the default profile's
    /// PodTopologySpread, with its system default constraints, cannot), or when one
    /// refuses this pod (asked after PreFilter, whose `state` some plugins read).
    pub fn sign(&self, pod: &Pod, state: &crate::CycleState) -> Option<Signature> {
        if !self.release.enabled(Gate::OpportunisticBatching) {
            return None;
        }
        let mut plugins = self.signing_plugins();
        if !plugins.clone().all(|p| p.signs_pods()) {
            return None;
        }
        let mut signature = Signature::new(pod);
        plugins
            .all(|p| p.sign(pod, &mut signature) && p.signs_after_pre_filter(state))
            .then_some(signature)
    }
}
