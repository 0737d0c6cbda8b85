//! A scheduling profile: the plugins at each extension point, in order, and score weights.

use std::sync::Arc;

use gantry_api::Sym;

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
        }
    }
}
