//! PreScore and Score: the preferred terms of the incoming pod and the existing pods'
//! terms it matches, weighted per topology pair, normalised to the node score range.

use crate::NodeInfos;
use std::sync::Arc;

use gantry_api::{Labels, Node, Pod, Sym};
use gantry_cache::{ClusterState, NodeColumns, NodeInfo, PodSelection, PodsPerDomain, TermKind};

use super::terms::{TermMemo, domain_counts, resolve_namespaces, selection, term_matches};
use super::{InterPodAffinity, NAME, PRE_SCORE_STATE_KEY};
use crate::{ApiObjects, Cluster, CycleState, MAX_NODE_SCORE, PreScorePlugin, ScorePlugin, Status};

/// PreScore's result: weighted counts per topology key and value; a node scores the sum
/// at its values. The counts are the snapshot's, shared, or this cycle's own.
#[derive(Debug, Clone, Default)]
pub(super) struct TopologyScore(Vec<WeightedCounts>);

#[derive(Debug, Clone)]
struct WeightedCounts {
    key: Sym,
    weight: i64,
    pods: Arc<PodsPerDomain>,
    /// Counted in this cycle (weights already applied), not shared.
    own: bool,
}

impl TopologyScore {
    pub(super) fn share(&mut self, key: Sym, weight: i64, pods: &Arc<PodsPerDomain>) {
        self.0.push(WeightedCounts {
            key,
            weight,
            pods: pods.clone(),
            own: false,
        });
    }

    /// Adds `weight` at the node's value of `key`, if the node has the key.
    fn add(&mut self, key: Sym, node: &Node, weight: i64) {
        let Some(value) = node.labels.get(key) else {
            return;
        };
        let index = match self.0.iter().position(|w| w.own && w.key == key) {
            Some(index) => index,
            None => {
                self.0.push(WeightedCounts {
                    key,
                    weight: 1,
                    pods: Arc::default(),
                    own: true,
                });
                self.0.len() - 1
            }
        };
        *Arc::make_mut(&mut self.0[index].pods)
            .entry(value)
            .or_insert(0) += weight;
    }

    /// The counts grouped, as PreScore leaves them.
    #[cfg(test)]
    pub(super) fn grouped(mut self) -> TopologyScore {
        self.group_by_key();
        self
    }

    /// Puts counts of one key next to each other, so that `score` looks a node's label
    /// up once per key (the sum does not depend on the order).
    fn group_by_key(&mut self) {
        self.0.sort_by_key(|w| w.key);
    }

    fn score(&self, labels: &Labels) -> i64 {
        let mut total = 0;
        let mut looked_up: Option<(Sym, Option<Sym>)> = None;
        for w in &self.0 {
            let value = match looked_up {
                Some((key, value)) if key == w.key => value,
                _ => {
                    let value = labels.get(w.key);
                    looked_up = Some((w.key, value));
                    value
                }
            };
            if let Some(count) = value.and_then(|value| w.pods.get(&value)) {
                total += w.weight * count;
            }
        }
        total
    }
}

/// The incoming pod's preferred terms with their weights (negative for anti-affinity)
/// and what they select, for PreScore.
struct PreferredTerms(Vec<(i64, Option<PodSelection>)>);

impl PreferredTerms {
    fn of(pod: &Pod, objects: &ApiObjects) -> PreferredTerms {
        let weighted = pod
            .affinity
            .pod_affinity
            .preferred
            .iter()
            .map(|w| (w, 1))
            .chain(
                pod.affinity
                    .pod_anti_affinity
                    .preferred
                    .iter()
                    .map(|w| (w, -1)),
            );
        PreferredTerms(
            weighted
                .map(|(w, sign)| {
                    let namespaces = resolve_namespaces(&w.term, pod.namespace, objects);
                    (sign * i64::from(w.weight), selection(&w.term, &namespaces))
                })
                .collect(),
        )
    }

    /// Half of upstream's `processExistingPod` (these terms against the existing pods)
    /// from the snapshot's domain counts; false (nothing added) when not all are kept.
    fn score_from_domains(&self, scores: &mut TopologyScore, nodes: &dyn ClusterState) -> bool {
        let Some(found) = domain_counts(nodes, self.0.iter().map(|(_, s)| s.as_ref())) else {
            return false;
        };
        for ((weight, selection), counts) in self.0.iter().zip(found) {
            if let (Some(selection), Some(counts)) = (selection, counts)
                && *weight != 0
                && counts.occupied_domains() > 0
            {
                scores.share(selection.topology_key, *weight, counts.pods());
            }
        }
        true
    }

    /// The same, node by node.
    fn score_on_node(&self, scores: &mut TopologyScore, info: &NodeInfo) {
        let Some(node) = info.node() else {
            return;
        };
        for (weight, selection) in &self.0 {
            let Some(selection) = selection else {
                continue;
            };
            let count = i64::from(selection.count_on(info));
            if weight * count != 0 {
                scores.add(selection.topology_key, node, weight * count);
            }
        }
    }
}

impl InterPodAffinity {
    /// The weight an existing pod's term of this kind gives to the domains where the
    /// incoming pod matches it; `None` for kinds that do not score.
    fn existing_term_weight(&self, kind: TermKind) -> Option<i64> {
        match kind {
            TermKind::RequiredAffinity if self.hard_pod_affinity_weight > 0 => {
                Some(self.hard_pod_affinity_weight)
            }
            TermKind::PreferredAffinity(w) => Some(i64::from(w)),
            TermKind::PreferredAntiAffinity(w) => Some(-i64::from(w)),
            TermKind::RequiredAffinity | TermKind::RequiredAntiAffinity => None,
        }
    }

    /// The other half of `processExistingPod`: the existing pods' terms that the incoming
    /// pod matches, from the declared terms' domain counts, else once per distinct term
    /// on each node that holds pods with terms.
    fn score_existing_terms(&self, scores: &mut TopologyScore, pod: &Pod, cluster: Cluster<'_>) {
        let pod_namespace_labels = cluster.objects.namespace_labels(pod.namespace);
        if let Some(declared) = cluster.nodes.declared_terms() {
            for t in declared.iter() {
                if let Some(weight) = self.existing_term_weight(t.kind)
                    && term_matches(
                        &t.term.term,
                        t.term.owner_namespace,
                        pod,
                        pod_namespace_labels,
                    )
                {
                    scores.share(t.term.term.topology_key, weight, &t.pods);
                }
            }
            return;
        }
        let mut memo = TermMemo::default();
        for &position in cluster.nodes.with_affinity_pods() {
            let info = cluster.nodes.node_at(position as usize);
            let Some(node) = info.node() else {
                continue;
            };
            for entry in info.affinity_terms().iter() {
                if let Some(weight) = self.existing_term_weight(entry.kind)
                    && memo.matches(&entry.term, pod, pod_namespace_labels)
                {
                    scores.add(
                        entry.term.term.topology_key,
                        node,
                        weight * i64::from(entry.pods),
                    );
                }
            }
        }
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        nodes: &NodeInfos<'_>,
        cluster: Cluster<'_>,
    ) -> Status {
        if nodes.is_empty() {
            return Status::skip();
        }
        let preferred = PreferredTerms::of(pod, cluster.objects);
        let mut scores = TopologyScore::default();
        if !preferred.0.is_empty() && !preferred.score_from_domains(&mut scores, cluster.nodes) {
            for position in 0..cluster.nodes.num_nodes() {
                preferred.score_on_node(&mut scores, cluster.nodes.node_at(position));
            }
        }
        self.score_existing_terms(&mut scores, pod, cluster);
        if scores.0.is_empty() {
            return Status::skip();
        }
        scores.group_by_key();
        state.write(PRE_SCORE_STATE_KEY, scores);
        Status::success()
    }
}

fn topology_score(state: &CycleState) -> Result<&TopologyScore, Status> {
    state
        .read::<TopologyScore>(PRE_SCORE_STATE_KEY)
        .ok_or_else(|| Status::error(format!("{NAME}: no PreScore state")))
}

fn labels_of(info: &NodeInfo) -> Result<&Labels, Status> {
    match info.node() {
        Some(node) => Ok(&node.labels),
        None => Err(Status::error("node not found")),
    }
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let labels = labels_of(node)?;
        Ok(topology_score(state)?.score(labels))
    }

    /// The same for many nodes, the state read once rather than once per node.
    fn score_columns(
        &self,
        state: &CycleState,
        _pod: &Pod,
        nodes: &[&NodeInfo],
        _columns: &NodeColumns,
        _positions: &[usize],
        scores: &mut [i64],
    ) -> Result<bool, Status> {
        let topology_score = topology_score(state)?;
        for (out, node) in scores.iter_mut().zip(nodes) {
            *out = topology_score.score(labels_of(node)?);
        }
        Ok(true)
    }

    /// Rescales to 0..=100 between the lowest and the highest raw score (which may be
    /// negative); all 0 when they are equal.
    fn normalize(&self, state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        let Some(topology_score) = state.read::<TopologyScore>(PRE_SCORE_STATE_KEY) else {
            return Status::error(format!("{NAME}: no PreScore state"));
        };
        if topology_score.0.is_empty() {
            return Status::success();
        }
        let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
            return Status::success();
        };
        let spread = max - min;
        for s in scores.iter_mut() {
            *s = if spread > 0 {
                (MAX_NODE_SCORE as f64 * ((*s - min) as f64 / spread as f64)) as i64
            } else {
                0
            };
        }
        Status::success()
    }
}
