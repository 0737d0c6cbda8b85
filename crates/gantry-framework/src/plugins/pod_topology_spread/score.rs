//! PreScore and Score: ScheduleAnyway constraints (or the system defaults) weigh the
//! matching pods in each node's domains; normalised to the node score range.

use crate::NodeInfos;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::{Node, Pod, Sym, WhenUnsatisfiable};
use gantry_cache::NodeInfo;

use super::constraints::{Constraint, NodeInclusion, constraints_for, domain_counts, has_all_keys};
use super::{DefaultConstraints, NAME, PRE_SCORE_STATE_KEY, PodTopologySpread};
use crate::{Cluster, CycleState, MAX_NODE_SCORE, PreScorePlugin, ScorePlugin, Status};

#[derive(Debug, Clone)]
pub(super) struct PreScoreState {
    pub(super) constraints: Arc<[Constraint]>,
    /// False only under the system defaults: nodes without a zone label still get
    /// hostname spreading instead of being ignored.
    require_all_topologies: bool,
    /// Per key slot: matching pods per value, for the values of the feasible nodes only.
    /// Hostname counts are taken from the node itself at Score.
    pod_counts: Vec<HashMap<Sym, i64, RandomState>>,
    /// Per constraint: ln(domains + 2), so small topologies are not drowned by big ones.
    pub(super) weights: Vec<f64>,
    /// Aligned with the nodes PreScore got, which is the order NormalizeScore's scores are in.
    pub(super) ignored: Vec<bool>,
}

impl PreScoreState {
    fn ignores(&self, node: &Node) -> bool {
        self.require_all_topologies && !has_all_keys(&node.labels, &self.constraints)
    }
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        nodes: &NodeInfos<'_>,
        cluster: Cluster<'_>,
    ) -> Status {
        if cluster.nodes.num_nodes() == 0 {
            return Status::skip();
        }
        let (constraints, slots) = constraints_for(
            &self.default_constraints,
            pod,
            WhenUnsatisfiable::ScheduleAnyway,
            cluster.objects,
        );
        if constraints.is_empty() {
            return Status::skip();
        }
        let require_all_topologies = !pod.topology_spread_constraints.is_empty()
            || self.default_constraints != DefaultConstraints::System;
        // Upstream reads a missing label as "": under the system defaults, zone-less nodes
        // form one more zone domain.
        let empty = Sym::new("");

        let mut pod_counts = vec![HashMap::<Sym, i64, RandomState>::default(); slots];
        let mut domains = vec![0usize; constraints.len()];
        let mut ignored = Vec::with_capacity(nodes.len());
        for info in nodes.iter() {
            let skip = info.node().is_none_or(|node| {
                require_all_topologies && !has_all_keys(&node.labels, &constraints)
            });
            ignored.push(skip);
            let Some(node) = info.node().filter(|_| !skip) else {
                continue;
            };
            for (i, c) in constraints.iter().enumerate() {
                if c.is_hostname {
                    continue;
                }
                let value = node.labels.get(c.key).unwrap_or(empty);
                if let Entry::Vacant(e) = pod_counts[c.slot].entry(value) {
                    e.insert(0);
                    domains[i] += 1;
                }
            }
        }
        let scored_nodes = ignored.iter().filter(|&&skip| !skip).count();
        let weights = constraints
            .iter()
            .zip(&domains)
            .map(|(c, &size)| {
                let size = if c.is_hostname { scored_nodes } else { size };
                ((size + 2) as f64).ln()
            })
            .collect();

        match domain_counts(pod, &constraints, cluster.nodes) {
            // Every node counts and has every key: a domain's count is the snapshot's.
            Some(found) => {
                for (c, counts) in constraints.iter().zip(found) {
                    for (value, count) in pod_counts[c.slot].iter_mut() {
                        *count += counts.pods().get(value).copied().unwrap_or(0);
                    }
                }
            }
            None => {
                for position in 0..cluster.nodes.num_nodes() {
                    let info = cluster.nodes.node_at(position);
                    let Some(node) = info.node() else { continue };
                    if require_all_topologies && !has_all_keys(&node.labels, &constraints) {
                        continue;
                    }
                    let inclusion = NodeInclusion::of(pod, node, &constraints);
                    for c in constraints.iter().filter(|c| inclusion.includes(c)) {
                        let value = node.labels.get(c.key).unwrap_or(empty);
                        if let Some(count) = pod_counts[c.slot].get_mut(&value) {
                            *count += c.count_on_node(info);
                        }
                    }
                }
            }
        }

        state.write(
            PRE_SCORE_STATE_KEY,
            PreScoreState {
                constraints,
                require_all_topologies,
                pod_counts,
                weights,
                ignored,
            },
        );
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    /// The weighted number of matching pods in the node's domains: lower is better.
    fn score(&self, state: &CycleState, _pod: &Pod, info: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return Err(Status::error(format!("{NAME}: no PreScore state")));
        };
        let Some(node) = info.node() else {
            return Ok(0);
        };
        if s.ignores(node) {
            return Ok(0);
        }
        let mut score = 0.0;
        for (c, weight) in s.constraints.iter().zip(&s.weights) {
            let Some(value) = node.labels.get(c.key) else {
                continue;
            };
            let count = if c.is_hostname {
                c.count_on_node(info)
            } else {
                s.pod_counts[c.slot].get(&value).copied().unwrap_or(0)
            };
            // maxSkew - 1 waters differences down: the larger the skew allowed, the less
            // a few pods more matter.
            score += count as f64 * weight + (c.max_skew - 1) as f64;
        }
        Ok(score.round() as i64)
    }

    /// Reverses and rescales: the least crowded node gets 100, ignored nodes 0.
    fn normalize(&self, state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return Status::error(format!("{NAME}: no PreScore state"));
        };
        if s.ignored.len() != scores.len() {
            return Status::error(format!(
                "{NAME}: {} scores for {} nodes",
                scores.len(),
                s.ignored.len()
            ));
        }
        let mut min = i64::MAX;
        let mut max = 0;
        for (&score, _) in scores
            .iter()
            .zip(&s.ignored)
            .filter(|(_, ignored)| !**ignored)
        {
            min = min.min(score);
            max = max.max(score);
        }
        for (score, &ignored) in scores.iter_mut().zip(&s.ignored) {
            *score = if ignored {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - *score) / max
            };
        }
        Status::success()
    }
}
