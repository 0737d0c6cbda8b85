//! PreFilter and Filter: match counts per eligible domain with their critical paths, and
//! the skew a pod would make on each node.

use std::sync::Arc;

use gantry_api::{Pod, Sym, WhenUnsatisfiable};
use gantry_cache::{NodeInfo, PodsPerDomain};

use super::constraints::{
    Constraint, NodeInclusion, constraints_for, count_on_each_node, domain_counts, has_all_keys,
};
use super::{NAME, PodTopologySpread, REASON_CONSTRAINTS_NOT_MATCH, REASON_NODE_LABEL_NOT_MATCH};
use crate::{Cluster, CycleState, FilterPlugin, PreFilterPlugin, PreFilterResult, Status};

/// The two smallest match counts of a topology key (upstream's `criticalPaths`). After
/// add/remove updates `paths[1]` may no longer be the second smallest; `paths[0]` is the
/// minimum as long as preemption changes one node at a time, as upstream relies on.
#[derive(Debug, Clone, Copy)]
pub(super) struct CriticalPaths([(Option<Sym>, i64); 2]);

impl CriticalPaths {
    fn new() -> CriticalPaths {
        let unset = (None, i64::from(i32::MAX));
        CriticalPaths([unset, unset])
    }

    pub(super) fn min(&self) -> i64 {
        self.0[0].1
    }

    fn update(&mut self, value: Sym, num: i64) {
        let p = &mut self.0;
        match p.iter().position(|e| e.0 == Some(value)) {
            Some(i) => {
                p[i].1 = num;
                if p[0].1 > p[1].1 {
                    p.swap(0, 1);
                }
            }
            None if num < p[0].1 => {
                p[1] = p[0];
                p[0] = (Some(value), num);
            }
            None if num < p[1].1 => p[1] = (Some(value), num),
            None => {}
        }
    }
}

/// Match counts of one topology key, over its eligible domains.
#[derive(Debug, Clone)]
pub(super) struct Domains {
    /// Matching pods per value; a value with eligible nodes but no pods is present with 0,
    /// so `len()` is the number of eligible domains (what minDomains compares against).
    /// Shared with the snapshot when read from its domain counts.
    pub(super) match_num: Arc<PodsPerDomain>,
    pub(super) paths: CriticalPaths,
}

#[derive(Debug, Clone)]
pub(super) struct PreFilterState {
    constraints: Arc<[Constraint]>,
    /// Indexed by `Constraint::slot`.
    pub(super) domains: Vec<Domains>,
}

impl PreFilterState {
    /// Matching pods per domain over all nodes that have every topology key: the
    /// snapshot's domain counts where they apply, else counted node by node.
    fn compute(
        pod: &Pod,
        constraints: Arc<[Constraint]>,
        slots: usize,
        cluster: Cluster<'_>,
    ) -> Self {
        let match_num: Vec<Arc<PodsPerDomain>> =
            match domain_counts(pod, &constraints, cluster.nodes) {
                Some(found) => {
                    // The last constraint of each key counts, as on each node below.
                    let mut shared = vec![Arc::default(); slots];
                    for (c, counts) in constraints.iter().zip(found) {
                        shared[c.slot] = counts.pods().clone();
                    }
                    shared
                }
                None => count_on_each_node(pod, &constraints, slots, cluster.nodes)
                    .into_iter()
                    .map(Arc::new)
                    .collect(),
            };
        let domains = match_num
            .into_iter()
            .map(|match_num| {
                let mut paths = CriticalPaths::new();
                for (&value, &num) in match_num.iter() {
                    paths.update(value, num);
                }
                Domains { match_num, paths }
            })
            .collect();
        PreFilterState {
            constraints,
            domains,
        }
    }

    /// Upstream's `updateWithPod`: what preemption's add/remove of `changed` on `info`
    /// does to the counts of the pod being scheduled.
    fn update(&mut self, pod: &Pod, changed: &Pod, info: &NodeInfo, delta: i64) {
        let Some(node) = info.node() else { return };
        if changed.namespace != pod.namespace || !has_all_keys(&node.labels, &self.constraints) {
            return;
        }
        let inclusion = NodeInclusion::of(pod, node, &self.constraints);
        for c in self.constraints.iter() {
            if !c.selects(&changed.labels) || !inclusion.includes(c) {
                continue;
            }
            let Some(value) = node.labels.get(c.key) else {
                continue;
            };
            let domains = &mut self.domains[c.slot];
            let num = Arc::make_mut(&mut domains.match_num)
                .entry(value)
                .or_insert(0);
            *num += delta;
            domains.paths.update(value, *num);
        }
    }
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let (constraints, slots) = constraints_for(
            &self.default_constraints,
            pod,
            WhenUnsatisfiable::DoNotSchedule,
            cluster.objects,
        );
        if constraints.is_empty() {
            return (None, Status::skip());
        }
        state.write(
            NAME,
            PreFilterState::compute(pod, constraints, slots, cluster),
        );
        (None, Status::success())
    }

    fn update_for_pod(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        other: &Arc<Pod>,
        node: &NodeInfo,
        delta: i64,
    ) {
        if let Some(s) = state.read_mut::<PreFilterState>(NAME) {
            s.update(pod, other, node, delta);
        }
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, pod: &Pod, info: &NodeInfo) -> Status {
        let Some(node) = info.node() else {
            return Status::unresolvable("node not found");
        };
        let Some(s) = state.read::<PreFilterState>(NAME) else {
            return Status::error(format!("{NAME}: no PreFilter state"));
        };
        for c in s.constraints.iter() {
            let Some(value) = node.labels.get(c.key) else {
                return Status::unresolvable(REASON_NODE_LABEL_NOT_MATCH);
            };
            let domains = &s.domains[c.slot];
            // With fewer eligible domains than minDomains, the global minimum counts as 0.
            let min = if (domains.match_num.len() as i64) < c.min_domains {
                0
            } else {
                domains.paths.min()
            };
            let self_match = i64::from(c.selects(&pod.labels));
            let matching = domains.match_num.get(&value).copied().unwrap_or(0);
            if matching + self_match - min > c.max_skew {
                return Status::unschedulable(REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}
