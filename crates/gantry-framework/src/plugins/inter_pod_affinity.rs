//! InterPodAffinity: required pod affinity / anti-affinity as a filter (including the
//! existing pods' required anti-affinity, which is symmetric), preferred terms as a score.
//!
//! PreFilter and PreScore walk the cluster's pods once per incoming pod and keep counts
//! (or scores) per topology pair; Filter and Score then only look up the node's labels.

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::{Labels, Node, Pod, PodAffinityTerm, Sym};
use gantry_cache::{InternedTerm, NodeInfo, PodLabelIndex, TermKind};
use smallvec::SmallVec;

use crate::{
    ApiObjects, Cluster, CycleState, FilterPlugin, MAX_NODE_SCORE, Plugin, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, ScorePlugin, Status,
};

pub const NAME: &str = "InterPodAffinity";
/// Where PreFilter keeps its counts.
pub const PRE_FILTER_STATE_KEY: &str = NAME;
/// Where PreScore keeps its topology scores.
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreInterPodAffinity";

pub const REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
pub const REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";
pub const REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

pub struct InterPodAffinity {
    /// Score given to a node for each required affinity term of an existing pod there
    /// that the incoming pod matches (upstream's `hardPodAffinityWeight`, default 1).
    pub hard_pod_affinity_weight: i64,
}

impl Default for InterPodAffinity {
    fn default() -> InterPodAffinity {
        InterPodAffinity {
            hard_pod_affinity_weight: 1,
        }
    }
}

/// Number of matching pods (or terms) per (topology key, value).
type Counts = HashMap<(Sym, Sym), i64, RandomState>;

/// Adds `delta` at (`key`, the node's value for it) if the node has the key, dropping
/// entries that fall to zero so that "is empty" means "nothing matched".
fn add_count(counts: &mut Counts, node: &Node, key: Sym, delta: i64) {
    let Some(value) = node.labels.get(key) else {
        return;
    };
    let count = counts.entry((key, value)).or_insert(0);
    *count += delta;
    if *count == 0 {
        counts.remove(&(key, value));
    }
}

fn count_at(counts: &Counts, key: Sym, value: Sym) -> i64 {
    counts.get(&(key, value)).copied().unwrap_or(0)
}

/// Upstream's `AffinityTerm.Matches` for a term of a pod in `owner_namespace`: `pod` must be
/// in one of the term's namespaces, or in one its namespace selector picks
/// (`namespace_labels` are the labels of `pod`'s namespace), and match its label selector.
fn term_matches(
    term: &PodAffinityTerm,
    owner_namespace: Sym,
    pod: &Pod,
    namespace_labels: &Labels,
) -> bool {
    let Some(selector) = &term.label_selector else {
        return false;
    };
    let in_namespace = if term.namespaces.is_empty() && term.namespace_selector.is_none() {
        pod.namespace == owner_namespace
    } else {
        term.namespaces.contains(&pod.namespace)
            || term
                .namespace_selector
                .as_ref()
                .is_some_and(|s| s.matches(namespace_labels))
    };
    in_namespace && selector.matches(&pod.labels)
}

/// The namespaces one of the incoming pod's terms covers, resolved once per cycle as
/// upstream's `mergeAffinityTermNamespacesIfNotEmpty` does: the listed namespaces plus the
/// namespace objects the selector picks. (add_pod/remove_pod then match exactly as
/// PreFilter did.)
#[derive(Debug, Clone, PartialEq)]
enum TermNamespaces {
    /// An empty namespace selector: every namespace.
    All,
    /// Sorted.
    Listed(Vec<Sym>),
}

impl TermNamespaces {
    fn resolve(
        term: &PodAffinityTerm,
        owner_namespace: Sym,
        objects: &ApiObjects,
    ) -> TermNamespaces {
        match &term.namespace_selector {
            None if term.namespaces.is_empty() => TermNamespaces::Listed(vec![owner_namespace]),
            None => TermNamespaces::Listed(term.namespaces.clone()),
            Some(selector) if selector.is_empty() => TermNamespaces::All,
            Some(selector) => {
                let mut names = term.namespaces.clone();
                names.extend(objects.namespaces_selected_by(selector));
                names.sort_unstable();
                names.dedup();
                TermNamespaces::Listed(names)
            }
        }
    }

    fn resolve_all<'a>(
        terms: impl Iterator<Item = &'a PodAffinityTerm>,
        owner_namespace: Sym,
        objects: &ApiObjects,
    ) -> Vec<TermNamespaces> {
        terms
            .map(|t| TermNamespaces::resolve(t, owner_namespace, objects))
            .collect()
    }

    fn matches(&self, term: &PodAffinityTerm, pod: &Pod) -> bool {
        let in_namespace = match self {
            TermNamespaces::All => true,
            TermNamespaces::Listed(names) => names.binary_search(&pod.namespace).is_ok(),
        };
        in_namespace
            && term
                .label_selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }

    /// How many of a node's pods the term matches, from the node's label index; `None`
    /// when the selector is beyond what the index answers.
    fn count_on(&self, term: &PodAffinityTerm, index: &PodLabelIndex) -> Option<u32> {
        let Some(selector) = &term.label_selector else {
            return Some(0);
        };
        match self {
            TermNamespaces::Listed(names) => {
                names.iter().map(|ns| index.count(*ns, selector)).sum()
            }
            TermNamespaces::All => index.namespaces().map(|ns| index.count(ns, selector)).sum(),
        }
    }
}

/// Whether each distinct existing term matches the incoming pod, computed once per cycle.
#[derive(Default)]
struct TermMemo(Vec<(u32, bool)>);

impl TermMemo {
    fn matches(&mut self, term: &InternedTerm, pod: &Pod, pod_namespace_labels: &Labels) -> bool {
        if let Some(&(_, m)) = self.0.iter().find(|(id, _)| *id == term.id) {
            return m;
        }
        let m = term_matches(&term.term, term.owner_namespace, pod, pod_namespace_labels);
        self.0.push((term.id, m));
        m
    }
}

/// What PreFilter computes for the incoming pod (upstream's `preFilterState`).
#[derive(Debug, Clone, PartialEq)]
struct PreFilterState {
    /// Existing pods' required anti-affinity terms that the incoming pod matches.
    existing_anti_affinity_counts: Counts,
    /// Existing pods matching all of the incoming pod's required affinity terms, counted
    /// once per term.
    affinity_counts: Counts,
    /// Existing pods matching each of the incoming pod's required anti-affinity terms.
    anti_affinity_counts: Counts,
    /// Resolved namespaces of the incoming pod's required (anti-)affinity terms, in order.
    affinity_namespaces: Vec<TermNamespaces>,
    anti_affinity_namespaces: Vec<TermNamespaces>,
    /// Labels of the incoming pod's namespace, for existing pods' namespace selectors.
    namespace_labels: Arc<Labels>,
    /// The incoming pod matches all its own required affinity terms.
    matches_own_affinity: bool,
}

impl PreFilterState {
    fn compute(pod: &Pod, cluster: Cluster<'_>) -> PreFilterState {
        let nodes = cluster.nodes;
        let mut state = PreFilterState {
            existing_anti_affinity_counts: Counts::default(),
            affinity_counts: Counts::default(),
            anti_affinity_counts: Counts::default(),
            affinity_namespaces: Vec::new(),
            anti_affinity_namespaces: Vec::new(),
            namespace_labels: cluster.objects.namespace_labels(pod.namespace).clone(),
            matches_own_affinity: false,
        };
        // Existing pods' required anti-affinity, one check per distinct term.
        let mut memo = TermMemo::default();
        for &position in nodes.with_required_anti_affinity_pods() {
            let info = nodes.node_at(position as usize);
            let Some(node) = info.node() else {
                continue;
            };
            for entry in info.affinity_terms().iter() {
                if entry.kind == TermKind::RequiredAntiAffinity
                    && memo.matches(&entry.term, pod, &state.namespace_labels)
                {
                    add_count(
                        &mut state.existing_anti_affinity_counts,
                        node,
                        entry.term.term.topology_key,
                        i64::from(entry.pods),
                    );
                }
            }
        }

        let affinity = &pod.affinity.pod_affinity.required;
        let anti_affinity = &pod.affinity.pod_anti_affinity.required;
        if affinity.is_empty() && anti_affinity.is_empty() {
            return state;
        }
        state.affinity_namespaces =
            TermNamespaces::resolve_all(affinity.iter(), pod.namespace, cluster.objects);
        state.anti_affinity_namespaces =
            TermNamespaces::resolve_all(anti_affinity.iter(), pod.namespace, cluster.objects);
        state.matches_own_affinity = state.matches_all_affinity_terms(pod, pod);

        for position in 0..nodes.num_nodes() {
            let info = nodes.node_at(position);
            let Some(node) = info.node() else {
                continue;
            };
            if !state.count_incoming_from_index(pod, info, node) {
                for existing in info.pods() {
                    state.count_incoming(pod, existing, node, 1);
                }
            }
        }
        state
    }

    /// `count_incoming` over all of a node's pods at once, from the node's label index;
    /// false (nothing counted) when the terms are beyond what the index answers.
    fn count_incoming_from_index(&mut self, incoming: &Pod, info: &NodeInfo, node: &Node) -> bool {
        let index = info.label_index();
        let affinity = &incoming.affinity.pod_affinity.required;
        let anti_affinity = &incoming.affinity.pod_anti_affinity.required;
        // "Matches all terms" is one count only when there is at most one term.
        if affinity.len() > 1 {
            return false;
        }
        let affinity_count = match affinity.first().zip(self.affinity_namespaces.first()) {
            Some((term, namespaces)) => match namespaces.count_on(term, index) {
                Some(n) => Some((term.topology_key, n)),
                None => return false,
            },
            None => None,
        };
        let mut anti_counts: SmallVec<[(Sym, u32); 2]> = SmallVec::new();
        for (term, namespaces) in anti_affinity.iter().zip(&self.anti_affinity_namespaces) {
            match namespaces.count_on(term, index) {
                Some(n) => anti_counts.push((term.topology_key, n)),
                None => return false,
            }
        }
        if let Some((key, n)) = affinity_count.filter(|(_, n)| *n > 0) {
            add_count(&mut self.affinity_counts, node, key, i64::from(n));
        }
        for (key, n) in anti_counts.into_iter().filter(|(_, n)| *n > 0) {
            add_count(&mut self.anti_affinity_counts, node, key, i64::from(n));
        }
        true
    }

    /// Counts `existing`'s required anti-affinity terms that `incoming` matches.
    fn count_existing_anti_affinity(
        &mut self,
        incoming: &Pod,
        existing: &Pod,
        node: &Node,
        delta: i64,
    ) {
        for term in &existing.affinity.pod_anti_affinity.required {
            if term_matches(term, existing.namespace, incoming, &self.namespace_labels) {
                add_count(
                    &mut self.existing_anti_affinity_counts,
                    node,
                    term.topology_key,
                    delta,
                );
            }
        }
    }

    /// Counts `existing` against the incoming pod's required (anti-)affinity terms.
    fn count_incoming(&mut self, incoming: &Pod, existing: &Pod, node: &Node, delta: i64) {
        if self.matches_all_affinity_terms(incoming, existing) {
            for term in &incoming.affinity.pod_affinity.required {
                add_count(&mut self.affinity_counts, node, term.topology_key, delta);
            }
        }
        let anti_affinity = &incoming.affinity.pod_anti_affinity.required;
        for (term, namespaces) in anti_affinity.iter().zip(&self.anti_affinity_namespaces) {
            if namespaces.matches(term, existing) {
                add_count(
                    &mut self.anti_affinity_counts,
                    node,
                    term.topology_key,
                    delta,
                );
            }
        }
    }

    /// Upstream's `podMatchesAllAffinityTerms`: false when there are no terms.
    fn matches_all_affinity_terms(&self, incoming: &Pod, pod: &Pod) -> bool {
        let terms = &incoming.affinity.pod_affinity.required;
        !terms.is_empty()
            && terms
                .iter()
                .zip(&self.affinity_namespaces)
                .all(|(term, namespaces)| namespaces.matches(term, pod))
    }

    fn satisfies_pod_affinity(&self, pod: &Pod, labels: &Labels) -> bool {
        let mut pods_exist = true;
        for term in &pod.affinity.pod_affinity.required {
            let Some(value) = labels.get(term.topology_key) else {
                return false;
            };
            if count_at(&self.affinity_counts, term.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        // The first pod of a group with affinity to itself: no pod matches anywhere yet,
        // so it may go to any node that has the topology keys.
        pods_exist || (self.affinity_counts.is_empty() && self.matches_own_affinity)
    }

    fn satisfies_pod_anti_affinity(&self, pod: &Pod, labels: &Labels) -> bool {
        pod.affinity.pod_anti_affinity.required.iter().all(|term| {
            labels.get(term.topology_key).is_none_or(|value| {
                count_at(&self.anti_affinity_counts, term.topology_key, value) <= 0
            })
        })
    }

    fn satisfies_existing_pods_anti_affinity(&self, labels: &Labels) -> bool {
        self.existing_anti_affinity_counts.is_empty()
            || labels
                .iter()
                .all(|(key, value)| count_at(&self.existing_anti_affinity_counts, key, value) <= 0)
    }
}

/// PreScore's result: for each topology key, the score of each of its values.
#[derive(Debug, Clone, Default)]
struct TopologyScore(Vec<(Sym, HashMap<Sym, i64, RandomState>)>);

impl TopologyScore {
    /// Adds `weight` at the node's value of `key`, if the node has the key.
    fn add(&mut self, key: Sym, node: &Node, weight: i64) {
        let Some(value) = node.labels.get(key) else {
            return;
        };
        let index = match self.0.iter().position(|(k, _)| *k == key) {
            Some(index) => index,
            None => {
                self.0.push((key, HashMap::default()));
                self.0.len() - 1
            }
        };
        *self.0[index].1.entry(value).or_insert(0) += weight;
    }

    fn score(&self, labels: &Labels) -> i64 {
        self.0
            .iter()
            .filter_map(|(key, values)| labels.get(*key).and_then(|v| values.get(&v)))
            .sum()
    }
}

/// The incoming pod's preferred terms with their weights (negative for anti-affinity)
/// and resolved namespaces, for PreScore.
struct PreferredTerms<'a>(Vec<(&'a PodAffinityTerm, i64, TermNamespaces)>);

impl<'a> PreferredTerms<'a> {
    fn of(pod: &'a Pod, objects: &ApiObjects) -> PreferredTerms<'a> {
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
                    let namespaces = TermNamespaces::resolve(&w.term, pod.namespace, objects);
                    (&w.term, sign * i64::from(w.weight), namespaces)
                })
                .collect(),
        )
    }

    /// Half of upstream's `processExistingPod`: these terms against `existing`, scored at
    /// `existing`'s node. (The other half, `existing`'s terms against the incoming pod,
    /// goes through the node's aggregated terms.)
    fn score_existing(&self, scores: &mut TopologyScore, existing: &Pod, node: &Node) {
        for (term, weight, namespaces) in &self.0 {
            if namespaces.matches(term, existing) {
                scores.add(term.topology_key, node, *weight);
            }
        }
    }

    /// `score_existing` over all of a node's pods at once, from the node's label index;
    /// false (nothing added) when a term is beyond what the index answers.
    fn score_from_index(&self, scores: &mut TopologyScore, info: &NodeInfo, node: &Node) -> bool {
        let index = info.label_index();
        let mut found: SmallVec<[(Sym, i64); 4]> = SmallVec::new();
        for (term, weight, namespaces) in &self.0 {
            let Some(count) = namespaces.count_on(term, index) else {
                return false;
            };
            found.push((term.topology_key, weight * i64::from(count)));
        }
        for (key, weight) in found.into_iter().filter(|(_, w)| *w != 0) {
            scores.add(key, node, weight);
        }
        true
    }
}

impl InterPodAffinity {
    /// Updates the PreFilter counts for `other` appearing (+1) on or leaving (-1) the node.
    fn update_pre_filter_state(
        state: &mut CycleState,
        pod: &Pod,
        other: &Pod,
        node: &NodeInfo,
        delta: i64,
    ) {
        let (Some(s), Some(node)) = (
            state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY),
            node.node(),
        ) else {
            return;
        };
        s.count_existing_anti_affinity(pod, other, node, delta);
        s.count_incoming(pod, other, node, delta);
    }
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::ANY_POD_OR_NODE_ADD_OR_UPDATE
    }
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let computed = PreFilterState::compute(pod, cluster);
        // Nothing constrains this pod: upstream skips Filter. The (empty) state is still
        // written so that a Filter run regardless passes at once.
        let skip = computed.existing_anti_affinity_counts.is_empty()
            && pod.affinity.pod_affinity.required.is_empty()
            && pod.affinity.pod_anti_affinity.required.is_empty();
        state.write(PRE_FILTER_STATE_KEY, computed);
        let status = if skip {
            Status::skip()
        } else {
            Status::success()
        };
        (None, status)
    }

    fn add_pod(&self, state: &mut CycleState, pod: &Pod, added: &Arc<Pod>, node: &NodeInfo) {
        InterPodAffinity::update_pre_filter_state(state, pod, added, node, 1);
    }

    fn remove_pod(&self, state: &mut CycleState, pod: &Pod, removed: &Arc<Pod>, node: &NodeInfo) {
        InterPodAffinity::update_pre_filter_state(state, pod, removed, node, -1);
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let Some(node) = node.node() else {
            return Status::error("node not found");
        };
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!("{NAME}: no PreFilter state"));
        };
        if !s.satisfies_pod_affinity(pod, &node.labels) {
            return Status::unresolvable(REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !s.satisfies_pod_anti_affinity(pod, &node.labels) {
            return Status::unschedulable(REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if !s.satisfies_existing_pods_anti_affinity(&node.labels) {
            return Status::unschedulable(REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        Status::success()
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        cluster: Cluster<'_>,
    ) -> Status {
        if nodes.is_empty() {
            return Status::skip();
        }
        // Without preferred terms of its own, only existing pods with (anti-)affinity
        // can score the pod.
        let has_constraints = !pod.affinity.pod_affinity.preferred.is_empty()
            || !pod.affinity.pod_anti_affinity.preferred.is_empty();
        let pod_namespace_labels = cluster.objects.namespace_labels(pod.namespace);
        let preferred = PreferredTerms::of(pod, cluster.objects);
        let mut scores = TopologyScore::default();
        let mut memo = TermMemo::default();
        let mut process_node = |info: &NodeInfo| {
            let Some(node) = info.node().filter(|n| !n.labels.is_empty()) else {
                return;
            };
            if has_constraints && !preferred.score_from_index(&mut scores, info, node) {
                for existing in info.pods() {
                    preferred.score_existing(&mut scores, existing, node);
                }
            }
            // Existing pods' terms, once per distinct term on the node.
            for entry in info.affinity_terms().iter() {
                let weight = match entry.kind {
                    TermKind::RequiredAffinity if self.hard_pod_affinity_weight > 0 => {
                        self.hard_pod_affinity_weight
                    }
                    TermKind::PreferredAffinity(w) => i64::from(w),
                    TermKind::PreferredAntiAffinity(w) => -i64::from(w),
                    TermKind::RequiredAffinity | TermKind::RequiredAntiAffinity => continue,
                };
                if memo.matches(&entry.term, pod, pod_namespace_labels) {
                    scores.add(
                        entry.term.term.topology_key,
                        node,
                        weight * i64::from(entry.pods),
                    );
                }
            }
        };
        if has_constraints {
            for position in 0..cluster.nodes.num_nodes() {
                process_node(cluster.nodes.node_at(position));
            }
        } else {
            for &position in cluster.nodes.with_affinity_pods() {
                process_node(cluster.nodes.node_at(position as usize));
            }
        }
        if scores.0.is_empty() {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, scores);
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let Some(node) = node.node() else {
            return Err(Status::error("node not found"));
        };
        let Some(scores) = state.read::<TopologyScore>(PRE_SCORE_STATE_KEY) else {
            return Err(Status::error(format!("{NAME}: no PreScore state")));
        };
        Ok(scores.score(&node.labels))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;
    use gantry_api::decode::Namespace;
    use gantry_api::labels::{LabelSelector, Requirement, SelectorOp};
    use gantry_api::{Resources, WeightedPodAffinityTerm};
    use gantry_cache::{Cache, ClusterState, Snapshot};

    fn req(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
        Requirement {
            key: Sym::new(key),
            op,
            values: values.iter().map(|v| Sym::new(v)).collect(),
        }
    }

    fn selector(requirements: Vec<Requirement>) -> LabelSelector {
        LabelSelector { requirements }
    }

    fn term(label_selector: LabelSelector, topology_key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(label_selector),
            namespaces: Vec::new(),
            namespace_selector: None,
            topology_key: Sym::new(topology_key),
        }
    }

    fn term_in(key: &str, values: &[&str], topology_key: &str) -> PodAffinityTerm {
        term(
            selector(vec![req(key, SelectorOp::In, values)]),
            topology_key,
        )
    }

    fn weighted(weight: i32, term: PodAffinityTerm) -> WeightedPodAffinityTerm {
        WeightedPodAffinityTerm { weight, term }
    }

    fn labelled(name: &str, labels: &[(&str, &str)]) -> Node {
        Node::new(name, Resources::new(1000, 1 << 30)).with_labels(labels.iter().copied())
    }

    fn pod(labels: &[(&str, &str)]) -> Pod {
        Pod::new("default", "incoming").with_labels(labels.iter().copied())
    }

    fn required(mut pod: Pod, affinity: Vec<PodAffinityTerm>, anti: Vec<PodAffinityTerm>) -> Pod {
        pod.affinity.pod_affinity.required = affinity;
        pod.affinity.pod_anti_affinity.required = anti;
        pod
    }

    fn preferred(
        mut pod: Pod,
        affinity: Vec<WeightedPodAffinityTerm>,
        anti: Vec<WeightedPodAffinityTerm>,
    ) -> Pod {
        pod.affinity.pod_affinity.preferred = affinity;
        pod.affinity.pod_anti_affinity.preferred = anti;
        pod
    }

    /// `pod` bound to `node`, with a name unique within the test.
    fn on(node: &str, pod: Pod, index: usize) -> Pod {
        let mut pod = pod.on_node(node);
        pod.name = Arc::from(format!("existing-{index}"));
        pod.uid = Arc::from(format!("{}/existing-{index}", pod.namespace));
        pod
    }

    /// Existing pods given as (node, pod).
    fn bound(pods: Vec<(&str, Pod)>) -> Vec<Pod> {
        pods.into_iter()
            .enumerate()
            .map(|(i, (node, pod))| on(node, pod, i))
            .collect()
    }

    fn snapshot(nodes: &[Node], pods: &[Pod]) -> Snapshot {
        let cache = Cache::new();
        for node in nodes {
            cache.add_node(Arc::new(node.clone()));
        }
        for pod in pods {
            cache
                .add_pod(Arc::new(pod.clone()))
                .expect("test pods are unique");
        }
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        snapshot
    }

    fn team_namespaces() -> ApiObjects {
        let ns = |name: &str, team: &str| Namespace {
            name: Sym::new(name),
            labels: Labels::from_strs([("team", team)]),
        };
        ApiObjects::new(
            &[
                ns("subteam1.team1", "team1"),
                ns("subteam2.team1", "team1"),
                ns("subteam1.team2", "team2"),
                ns("subteam2.team2", "team2"),
            ],
            &[],
        )
    }

    fn pre_filter_state(
        pod: &Pod,
        snapshot: &Snapshot,
        objects: &ApiObjects,
    ) -> (CycleState, Status) {
        let mut state = CycleState::new();
        let cluster = Cluster {
            nodes: snapshot,
            objects,
        };
        let (result, status) = InterPodAffinity::default().pre_filter(&mut state, pod, cluster);
        assert_eq!(result, None);
        (state, status)
    }

    /// Runs PreFilter, then Filter on every node (in the given order), and returns the
    /// verdicts as (code, message). Filter runs even after a Skip: it must then pass.
    fn filter_all(pod: &Pod, nodes: &[Node], pods: &[Pod], objects: &ApiObjects) -> Vec<Status> {
        let snapshot = snapshot(nodes, pods);
        let (state, status) = pre_filter_state(pod, &snapshot, objects);
        assert!(status.is_success() || status.is_skip(), "{status:?}");
        let plugin = InterPodAffinity::default();
        let verdicts: Vec<Status> = nodes
            .iter()
            .map(|n| {
                let info = snapshot.node(n.name).expect("node is in the snapshot");
                plugin.filter(&state, pod, info)
            })
            .collect();
        if status.is_skip() {
            assert!(verdicts.iter().all(Status::is_success));
        }
        verdicts
    }

    const OK: Option<&str> = None;
    const AFFINITY: Option<&str> = Some(REASON_AFFINITY_RULES_NOT_MATCH);
    const ANTI: Option<&str> = Some(REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
    const EXISTING: Option<&str> = Some(REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);

    fn check(name: &str, got: &[Status], want: &[Option<&str>]) {
        assert_eq!(got.len(), want.len(), "{name}");
        for (status, want) in got.iter().zip(want) {
            match want {
                None => assert!(status.is_success(), "{name}: {status:?}"),
                Some(reason) => {
                    let code = if *reason == REASON_AFFINITY_RULES_NOT_MATCH {
                        Code::UnschedulableAndUnresolvable
                    } else {
                        Code::Unschedulable
                    };
                    assert_eq!(status.code(), code, "{name}");
                    assert_eq!(status.message(), *reason, "{name}");
                }
            }
        }
    }

    #[test]
    fn filter_single_node() {
        // Upstream's TestRequiredAffinitySingleNode, on machine1 {region: r1, zone: z11}.
        let security_scan = [("service", "securityscan")];
        let s1 = [("security", "S1")];
        let in_scan = || term_in("service", &["securityscan", "value2"], "region");
        let anti_virus = || term_in("service", &["antivirusscan", "value2"], "node");
        let scan_in_zone = || term_in("service", &["securityscan", "value2"], "zone");
        let plain_scan = || pod(&security_scan);
        let cases: Vec<(&str, Pod, Vec<Pod>, Option<&str>)> = vec![
            ("no affinity, no pods", pod(&[]), vec![], OK),
            (
                "affinity In matches the existing pod",
                required(pod(&s1), vec![in_scan()], vec![]),
                vec![plain_scan()],
                OK,
            ),
            (
                "affinity NotIn matches the existing pod",
                required(
                    pod(&s1),
                    vec![term(
                        selector(vec![req(
                            "service",
                            SelectorOp::NotIn,
                            &["securityscan3", "value3"],
                        )]),
                        "region",
                    )],
                    vec![],
                ),
                vec![plain_scan()],
                OK,
            ),
            (
                "selector does not match the existing pod",
                required(
                    pod(&security_scan),
                    vec![term_in("service", &["antivirusscan", "value2"], "region")],
                    vec![],
                ),
                vec![plain_scan()],
                AFFINITY,
            ),
            (
                "requirements of one term are ANDed, terms too: all match",
                required(
                    pod(&s1),
                    vec![
                        term(
                            selector(vec![
                                req("service", SelectorOp::Exists, &[]),
                                req("wrongkey", SelectorOp::DoesNotExist, &[]),
                            ]),
                            "region",
                        ),
                        term(
                            selector(vec![
                                req("service", SelectorOp::In, &["securityscan"]),
                                req("service", SelectorOp::NotIn, &["WrongValue"]),
                            ]),
                            "region",
                        ),
                    ],
                    vec![],
                ),
                vec![plain_scan()],
                OK,
            ),
            (
                "requirements of one term are ANDed: one does not match",
                required(
                    pod(&s1),
                    vec![
                        term(
                            selector(vec![req("service", SelectorOp::Exists, &[])]),
                            "region",
                        ),
                        term(
                            selector(vec![
                                req("service", SelectorOp::In, &["securityscan2"]),
                                req("service", SelectorOp::NotIn, &["WrongValue"]),
                            ]),
                            "region",
                        ),
                    ],
                    vec![],
                ),
                vec![plain_scan()],
                AFFINITY,
            ),
            (
                "affinity and anti-affinity satisfied",
                required(pod(&s1), vec![in_scan()], vec![anti_virus()]),
                vec![plain_scan()],
                OK,
            ),
            (
                "affinity, anti-affinity and the existing pod's anti-affinity satisfied",
                required(pod(&s1), vec![in_scan()], vec![anti_virus()]),
                vec![required(plain_scan(), vec![], vec![anti_virus()])],
                OK,
            ),
            (
                "affinity satisfied, anti-affinity not",
                required(pod(&s1), vec![in_scan()], vec![scan_in_zone()]),
                vec![plain_scan()],
                ANTI,
            ),
            (
                "the existing pod's anti-affinity is not satisfied (symmetry)",
                required(pod(&security_scan), vec![in_scan()], vec![anti_virus()]),
                vec![required(plain_scan(), vec![], vec![scan_in_zone()])],
                EXISTING,
            ),
            (
                "existing anti-affinity applies to a pod without affinity",
                pod(&security_scan),
                vec![required(plain_scan(), vec![], vec![scan_in_zone()])],
                EXISTING,
            ),
            (
                "existing anti-affinity that the pod does not match",
                pod(&security_scan),
                vec![required(
                    plain_scan(),
                    vec![],
                    vec![term(
                        selector(vec![req(
                            "service",
                            SelectorOp::NotIn,
                            &["securityscan", "value2"],
                        )]),
                        "zone",
                    )],
                )],
                OK,
            ),
            (
                "affinity fails before anti-affinity is checked",
                required(
                    pod(&s1),
                    vec![term_in("service", &["nothing"], "region")],
                    vec![scan_in_zone()],
                ),
                vec![plain_scan()],
                AFFINITY,
            ),
            (
                "an absent label selector matches no pod",
                required(
                    pod(&s1),
                    vec![PodAffinityTerm {
                        label_selector: None,
                        ..in_scan()
                    }],
                    vec![],
                ),
                vec![plain_scan()],
                AFFINITY,
            ),
        ];
        let machine1 = labelled("machine1", &[("region", "r1"), ("zone", "z11")]);
        let objects = ApiObjects::default();
        for (name, incoming, existing, want) in cases {
            let existing = bound(existing.into_iter().map(|p| ("machine1", p)).collect());
            let got = filter_all(
                &incoming,
                std::slice::from_ref(&machine1),
                &existing,
                &objects,
            );
            check(name, &got, &[want]);
        }
    }

    #[test]
    fn filter_multiple_nodes() {
        // After upstream's TestRequiredAffinityMultipleNodes.
        let nodes = [
            labelled("n1", &[("region", "r1"), ("zone", "z11")]),
            labelled("n2", &[("region", "r1"), ("zone", "z12")]),
            labelled("n3", &[("region", "r2"), ("zone", "z21")]),
            labelled("n4", &[("zone", "z41")]),
        ];
        let foo = [("foo", "bar")];
        let objects = team_namespaces();
        let in_ns = |ns: &str, labels: &[(&str, &str)]| {
            Pod::new(ns, "p").with_labels(labels.iter().copied())
        };
        type Case<'a> = (&'a str, Pod, Vec<(&'a str, Pod)>, [Option<&'a str>; 4]);
        let cases: Vec<Case> = vec![
            (
                "nodes sharing the region of a matching pod fit; a node without the key never",
                required(pod(&[]), vec![term_in("foo", &["bar"], "region")], vec![]),
                vec![("n1", pod(&foo))],
                [OK, OK, AFFINITY, AFFINITY],
            ),
            (
                "first pod of a self-affine group: any node with the topology key",
                required(pod(&foo), vec![term_in("foo", &["bar"], "region")], vec![]),
                vec![],
                [OK, OK, OK, AFFINITY],
            ),
            (
                "self-affinity does not apply once a matching pod exists elsewhere",
                required(pod(&foo), vec![term_in("foo", &["bar"], "region")], vec![]),
                vec![("n3", pod(&foo))],
                [AFFINITY, AFFINITY, OK, AFFINITY],
            ),
            (
                "self-affinity needs the pod to match its own terms",
                required(pod(&[]), vec![term_in("foo", &["bar"], "region")], vec![]),
                vec![],
                [AFFINITY, AFFINITY, AFFINITY, AFFINITY],
            ),
            (
                "anti-affinity rejects the matching pod's zone only",
                required(pod(&[]), vec![], vec![term_in("foo", &["bar"], "zone")]),
                vec![("n1", pod(&foo))],
                [ANTI, OK, OK, OK],
            ),
            (
                "anti-affinity by region rejects both nodes of the region",
                required(pod(&[]), vec![], vec![term_in("foo", &["bar"], "region")]),
                vec![("n2", pod(&foo))],
                [ANTI, ANTI, OK, OK],
            ),
            (
                "existing pod's anti-affinity by region (symmetry)",
                pod(&foo),
                vec![(
                    "n1",
                    required(pod(&[]), vec![], vec![term_in("foo", &["bar"], "region")]),
                )],
                [EXISTING, EXISTING, OK, OK],
            ),
            (
                "pods of other namespaces do not count",
                required(pod(&[]), vec![term_in("foo", &["bar"], "region")], vec![]),
                vec![("n1", in_ns("other", &foo))],
                [AFFINITY, AFFINITY, AFFINITY, AFFINITY],
            ),
            (
                "listed namespaces count",
                required(
                    pod(&[]),
                    vec![PodAffinityTerm {
                        namespaces: vec![Sym::new("other")],
                        ..term_in("foo", &["bar"], "region")
                    }],
                    vec![],
                ),
                vec![("n1", in_ns("other", &foo))],
                [OK, OK, AFFINITY, AFFINITY],
            ),
            (
                "a namespace selector picks namespaces by label",
                required(
                    pod(&[]),
                    vec![PodAffinityTerm {
                        namespace_selector: Some(selector(vec![req(
                            "team",
                            SelectorOp::In,
                            &["team1"],
                        )])),
                        ..term_in("foo", &["bar"], "region")
                    }],
                    vec![],
                ),
                vec![
                    ("n1", in_ns("subteam2.team1", &foo)),
                    ("n3", in_ns("subteam1.team2", &foo)),
                ],
                [OK, OK, AFFINITY, AFFINITY],
            ),
            (
                "an empty namespace selector picks every namespace",
                required(
                    pod(&[]),
                    vec![],
                    vec![PodAffinityTerm {
                        namespace_selector: Some(LabelSelector::default()),
                        ..term_in("foo", &["bar"], "zone")
                    }],
                ),
                vec![("n2", in_ns("anywhere", &foo))],
                [OK, ANTI, OK, OK],
            ),
            (
                "an existing pod's namespace selector is matched against the pod's namespace",
                in_ns("subteam1.team1", &foo),
                vec![(
                    "n3",
                    required(
                        pod(&[]),
                        vec![],
                        vec![PodAffinityTerm {
                            namespace_selector: Some(selector(vec![req(
                                "team",
                                SelectorOp::In,
                                &["team1"],
                            )])),
                            ..term_in("foo", &["bar"], "region")
                        }],
                    ),
                )],
                [OK, OK, EXISTING, OK],
            ),
        ];
        for (name, incoming, existing, want) in cases {
            let existing = bound(existing);
            let got = filter_all(&incoming, &nodes, &existing, &objects);
            check(name, &got, &want);
        }
    }

    #[test]
    fn pre_filter_skips_unconstrained_pods() {
        let nodes = [labelled("n1", &[("zone", "a")])];
        let objects = ApiObjects::default();
        let existing = bound(vec![(
            "n1",
            required(pod(&[]), vec![], vec![term_in("app", &["web"], "zone")]),
        )]);
        let snap = snapshot(&nodes, &existing);
        let (_, status) = pre_filter_state(&pod(&[("app", "db")]), &snap, &objects);
        assert!(status.is_skip());
        // Matching an existing pod's anti-affinity makes Filter necessary.
        let (_, status) = pre_filter_state(&pod(&[("app", "web")]), &snap, &objects);
        assert!(status.is_success());
    }

    /// A namespace selector picks namespace objects, as upstream lists them, not the
    /// namespaces that hold pods: a pod that preemption's what-if adds to an empty
    /// namespace the selector picks counts.
    #[test]
    fn namespace_selectors_resolve_over_namespace_objects() {
        let nodes = [labelled("n1", &[("zone", "z1")])];
        let objects = team_namespaces();
        let incoming = required(
            Pod::new("subteam1.team1", "incoming"),
            vec![],
            vec![PodAffinityTerm {
                namespace_selector: Some(selector(vec![req("team", SelectorOp::In, &["team2"])])),
                ..term_in("app", &["db"], "zone")
            }],
        );
        let snap = snapshot(&nodes, &[]);
        let (mut state, status) = pre_filter_state(&incoming, &snap, &objects);
        assert!(status.is_success());
        let info = snap.node(Sym::new("n1")).unwrap();
        let plugin = InterPodAffinity::default();
        assert!(plugin.filter(&state, &incoming, info).is_success());
        let db = Arc::new(on(
            "n1",
            Pod::new("subteam2.team2", "db").with_labels([("app", "db")]),
            0,
        ));
        plugin.add_pod(&mut state, &incoming, &db, info);
        assert_eq!(
            plugin.filter(&state, &incoming, info).message(),
            REASON_ANTI_AFFINITY_RULES_NOT_MATCH
        );
    }

    #[test]
    fn add_and_remove_pod_match_recomputing() {
        let nodes = [
            labelled("n1", &[("region", "r1"), ("zone", "z1")]),
            labelled("n2", &[("region", "r1"), ("zone", "z2")]),
            labelled("n3", &[("region", "r2"), ("zone", "z3")]),
        ];
        let objects = team_namespaces();
        let web = [("app", "web")];
        let incoming = required(
            Pod::new("subteam1.team1", "incoming").with_labels(web),
            vec![
                PodAffinityTerm {
                    namespace_selector: Some(selector(vec![req(
                        "team",
                        SelectorOp::In,
                        &["team1"],
                    )])),
                    ..term_in("app", &["web"], "region")
                },
                term(selector(vec![req("app", SelectorOp::Exists, &[])]), "zone"),
            ],
            vec![term_in("app", &["db"], "zone")],
        );
        let all = bound(vec![
            ("n1", Pod::new("subteam1.team1", "p").with_labels(web)),
            ("n1", Pod::new("subteam2.team1", "p").with_labels(web)),
            ("n2", Pod::new("subteam1.team2", "p").with_labels(web)),
            (
                "n2",
                Pod::new("subteam1.team1", "p").with_labels([("app", "db")]),
            ),
            (
                "n3",
                required(
                    Pod::new("subteam1.team1", "p"),
                    vec![],
                    vec![term_in("app", &["web"], "region")],
                ),
            ),
            (
                "n3",
                required(
                    Pod::new("subteam2.team2", "p").with_labels(web),
                    vec![],
                    vec![PodAffinityTerm {
                        namespace_selector: Some(LabelSelector::default()),
                        ..term_in("app", &["web"], "zone")
                    }],
                ),
            ),
        ]);
        let plugin = InterPodAffinity::default();
        let full_snapshot = snapshot(&nodes, &all);
        let (full, _) = pre_filter_state(&incoming, &full_snapshot, &objects);
        let read = |state: &CycleState| {
            state
                .read::<PreFilterState>(PRE_FILTER_STATE_KEY)
                .cloned()
                .expect("PreFilter wrote its state")
        };
        assert!(!read(&full).affinity_counts.is_empty());
        assert!(!read(&full).anti_affinity_counts.is_empty());
        assert!(!read(&full).existing_anti_affinity_counts.is_empty());
        for (i, target) in all.iter().enumerate() {
            let rest: Vec<Pod> = all
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, p)| p.clone())
                .collect();
            let rest_snapshot = snapshot(&nodes, &rest);
            let (without, _) = pre_filter_state(&incoming, &rest_snapshot, &objects);
            let node = target.node_name.expect("bound");
            let target = Arc::new(target.clone());

            let mut removed = full.clone();
            let info = full_snapshot.node(node).expect("node exists");
            plugin.remove_pod(&mut removed, &incoming, &target, info);
            assert_eq!(read(&removed), read(&without), "removing pod {i}");

            let mut added = without.clone();
            let info = rest_snapshot.node(node).expect("node exists");
            plugin.add_pod(&mut added, &incoming, &target, info);
            assert_eq!(read(&added), read(&full), "adding pod {i}");
        }
    }

    /// Runs PreScore over all nodes, Score on each (in the given order) and normalize;
    /// `None` when PreScore skips.
    fn scores(
        plugin: &InterPodAffinity,
        pod: &Pod,
        nodes: &[Node],
        pods: &[Pod],
        objects: &ApiObjects,
    ) -> Option<Vec<i64>> {
        let snapshot = snapshot(nodes, pods);
        let infos: Vec<&NodeInfo> = nodes
            .iter()
            .map(|n| snapshot.node(n.name).expect("node is in the snapshot"))
            .collect();
        let mut state = CycleState::new();
        let cluster = Cluster {
            nodes: &snapshot,
            objects,
        };
        let status = plugin.pre_score(&mut state, pod, &infos, cluster);
        if status.is_skip() {
            return None;
        }
        assert!(status.is_success(), "{status:?}");
        let mut scores: Vec<i64> = infos
            .iter()
            .map(|info| plugin.score(&state, pod, info).expect("score"))
            .collect();
        assert!(plugin.normalize(&state, pod, &mut scores).is_success());
        Some(scores)
    }

    #[test]
    fn score_preferred_affinity() {
        // Upstream's TestPreferredAffinity.
        let china = [("region", "China")];
        let india = [("region", "India")];
        let az1 = [("az", "az1")];
        let az2 = [("az", "az2")];
        let china_az1 = [("region", "China"), ("az", "az1")];
        let s1 = || pod(&[("security", "S1")]);
        let s2 = || pod(&[("security", "S2")]);
        let stay_with_s1_in_region = |p: Pod| {
            preferred(
                p,
                vec![weighted(5, term_in("security", &["S1"], "region"))],
                vec![],
            )
        };
        let stay_with_s2_in_region = |p: Pod| {
            preferred(
                p,
                vec![weighted(6, term_in("security", &["S2"], "region"))],
                vec![],
            )
        };
        let away_from_s1_in_az = |p: Pod| {
            preferred(
                p,
                vec![],
                vec![weighted(5, term_in("security", &["S1"], "az"))],
            )
        };
        let away_from_s2_in_az = |p: Pod| {
            preferred(
                p,
                vec![],
                vec![weighted(5, term_in("security", &["S2"], "az"))],
            )
        };
        let stay_s1_region_away_s2_az = |p: Pod| {
            preferred(
                p,
                vec![weighted(8, term_in("security", &["S1"], "region"))],
                vec![weighted(5, term_in("security", &["S2"], "az"))],
            )
        };
        let affinity3 = |p: Pod| {
            preferred(
                p,
                vec![
                    weighted(
                        8,
                        term(
                            selector(vec![
                                req("security", SelectorOp::NotIn, &["S1"]),
                                req("security", SelectorOp::In, &["S2"]),
                            ]),
                            "region",
                        ),
                    ),
                    weighted(
                        2,
                        term(
                            selector(vec![
                                req("security", SelectorOp::Exists, &[]),
                                req("wrongkey", SelectorOp::DoesNotExist, &[]),
                            ]),
                            "region",
                        ),
                    ),
                ],
                vec![],
            )
        };
        let namespace_selected = |p: Pod, anti: bool| {
            let t = weighted(
                5,
                PodAffinityTerm {
                    namespaces: vec![Sym::new("subteam2.team2")],
                    namespace_selector: Some(selector(vec![req(
                        "team",
                        SelectorOp::In,
                        &["team1"],
                    )])),
                    ..term_in("security", &["S1"], "region")
                },
            );
            if anti {
                preferred(p, vec![], vec![t])
            } else {
                preferred(p, vec![t], vec![])
            }
        };
        let in_team1 = |mut p: Pod| {
            p.namespace = Sym::new("subteam1.team1");
            p
        };
        let ns = |name: &str, labels: &[(&str, &str)]| labelled(name, labels);

        type Case<'a> = (
            &'a str,
            Pod,
            Vec<(&'a str, Pod)>,
            Vec<Node>,
            Option<Vec<i64>>,
        );
        let cases: Vec<Case> = vec![
            (
                "no affinity anywhere: skipped",
                s1(),
                vec![],
                vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
                None,
            ),
            (
                "matching pods in the topology score high",
                stay_with_s1_in_region(s1()),
                vec![("node1", s1()), ("node2", s2()), ("node3", s1())],
                vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
                Some(vec![100, 0, 0]),
            ),
            (
                "nodes sharing the topology value score the same",
                stay_with_s1_in_region(pod(&[])),
                vec![("node1", s1())],
                vec![
                    ns("node1", &china),
                    ns("node2", &china_az1),
                    ns("node3", &india),
                ],
                Some(vec![100, 100, 0]),
            ),
            (
                "the region with more matches scores high, the lowest scores 0",
                stay_with_s2_in_region(s1()),
                vec![
                    ("node1", s2()),
                    ("node1", s2()),
                    ("node2", s2()),
                    ("node3", s2()),
                    ("node4", s2()),
                    ("node5", s2()),
                ],
                vec![
                    ns("node1", &china),
                    ns("node2", &india),
                    ns("node3", &china),
                    ns("node4", &china),
                    ns("node5", &india),
                ],
                Some(vec![100, 0, 100, 100, 0]),
            ),
            (
                "different operators, some terms failing",
                affinity3(s1()),
                vec![("node1", s1()), ("node2", s2()), ("node3", s1())],
                vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
                Some(vec![20, 100, 0]),
            ),
            (
                "existing pods' preferred affinity (symmetry)",
                s2(),
                vec![
                    ("node1", stay_with_s1_in_region(s1())),
                    ("node2", stay_with_s2_in_region(s2())),
                ],
                vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
                Some(vec![0, 100, 0]),
            ),
            (
                "existing pods' preferred affinity with a namespace selector",
                in_team1(s1()),
                vec![
                    ("node1", namespace_selected(s1(), false)),
                    ("node2", stay_with_s2_in_region(s2())),
                ],
                vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
                Some(vec![100, 0, 0]),
            ),
            (
                "existing pods' preferred anti-affinity with a namespace selector",
                in_team1(s1()),
                vec![
                    ("node1", namespace_selected(s1(), true)),
                    ("node2", stay_with_s2_in_region(s2())),
                ],
                vec![ns("node1", &china), ns("node2", &india), ns("node3", &az1)],
                Some(vec![0, 100, 100]),
            ),
            (
                "anti-affinity: the node with a matching pod scores low",
                away_from_s1_in_az(s1()),
                vec![("node1", s1()), ("node2", s2())],
                vec![ns("node1", &az1), ns("node2", &china)],
                Some(vec![0, 100]),
            ),
            (
                "existing pods' preferred anti-affinity (symmetry)",
                s2(),
                vec![
                    ("node1", away_from_s2_in_az(s1())),
                    ("node2", away_from_s1_in_az(s2())),
                ],
                vec![ns("node1", &az1), ns("node2", &az2)],
                Some(vec![0, 100]),
            ),
            (
                "affinity, anti-affinity and both symmetries together",
                stay_s1_region_away_s2_az(s1()),
                vec![
                    ("node1", s1()),
                    ("node2", s2()),
                    ("node3", stay_s1_region_away_s2_az(pod(&[]))),
                    ("node4", away_from_s1_in_az(pod(&[]))),
                ],
                vec![
                    ns("node1", &china),
                    ns("node2", &az1),
                    ns("node3", &india),
                    ns("node4", &az2),
                ],
                Some(vec![100, 0, 100, 0]),
            ),
            (
                "equal raw scores normalize to 0",
                s1(),
                vec![
                    ("node1", s1()),
                    ("node2", stay_s1_region_away_s2_az(pod(&[]))),
                ],
                vec![ns("node1", &china), ns("node2", &china)],
                Some(vec![0, 0]),
            ),
        ];
        let objects = team_namespaces();
        let plugin = InterPodAffinity::default();
        for (name, incoming, existing, nodes, want) in cases {
            let existing = bound(existing);
            let got = scores(&plugin, &incoming, &nodes, &existing, &objects);
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn score_hard_pod_affinity_weight() {
        // Upstream's TestPreferredAffinityWithHardPodAffinitySymmetricWeight.
        let hard_affinity = |p: Pod| {
            required(
                p,
                vec![
                    term_in("security", &["S1", "value2"], "region"),
                    term(
                        selector(vec![
                            req("security", SelectorOp::Exists, &[]),
                            req("wrongkey", SelectorOp::DoesNotExist, &[]),
                        ]),
                        "region",
                    ),
                ],
                vec![],
            )
        };
        let nodes = [
            labelled("node1", &[("region", "China")]),
            labelled("node2", &[("region", "India")]),
            labelled("node3", &[("az", "az1")]),
        ];
        let existing = bound(vec![
            ("node1", hard_affinity(pod(&[("security", "S1")]))),
            ("node2", hard_affinity(pod(&[("security", "S2")]))),
        ]);
        let incoming = pod(&[("security", "S1")]);
        let objects = ApiObjects::default();
        let weighted = |w| InterPodAffinity {
            hard_pod_affinity_weight: w,
        };
        assert_eq!(
            scores(&weighted(1), &incoming, &nodes, &existing, &objects),
            Some(vec![100, 100, 0])
        );
        assert_eq!(
            scores(&weighted(0), &incoming, &nodes, &existing, &objects),
            None,
            "weight 0 ignores required terms of existing pods"
        );
    }

    #[test]
    fn normalize_spans_negative_scores() {
        let mut state = CycleState::new();
        let mut topology = TopologyScore::default();
        topology
            .0
            .push((Sym::new("zone"), HashMap::from_iter([(Sym::new("a"), -3)])));
        state.write(PRE_SCORE_STATE_KEY, topology);
        let mut scores = [-3, 0, 4, 1];
        let status = InterPodAffinity::default().normalize(&state, &pod(&[]), &mut scores);
        assert!(status.is_success());
        // 100 * (0 - -3) / 7 = 42.86, 100 * 4 / 7 = 57.14: truncated.
        assert_eq!(scores, [0, 42, 100, 57]);
    }
}
