//! InterPodAffinity: required pod affinity / anti-affinity as a filter (including the
//! existing pods' required anti-affinity, which is symmetric), preferred terms as a score.
//!
//! PreFilter and PreScore count pods per topology pair once per incoming pod; Filter and
//! Score then only look up the node's labels. The counts come from the cycle's snapshot
//! where it keeps them (the existing pods' terms with their declaring pods per domain,
//! and the matching pods per domain of each selection asked about before), shared rather
//! than copied; elsewhere (a selection asked about for the first time, a what-if fork)
//! they are counted node by node.

use std::sync::{Arc, LazyLock};

use gantry_api::{Labels, Node, Pod, PodAffinityTerm, Sym};
use gantry_cache::{
    ClusterState, DomainCounts, InternedTerm, NamespaceScope, NodeInfo, PodSelection,
    PodsPerDomain, TermKind,
};
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

/// One topology key's counts per value.
#[derive(Debug, Clone)]
struct DomainMap {
    key: Sym,
    pods: Arc<PodsPerDomain>,
    /// Values with a non-zero count (a map shared with the snapshot lists empty domains
    /// too).
    occupied: u32,
}

/// Number of matching pods (or terms) per (topology key, value), as maps per key whose
/// counts add up: the snapshot's own maps where it keeps the counts (shared, nothing
/// copied; a change copies the map first), maps of this cycle's counting otherwise. Only
/// maps with a non-zero count are held, so that "is empty" means "nothing matched".
#[derive(Debug, Clone, Default)]
struct TopologyCounts(SmallVec<[DomainMap; 2]>);

impl TopologyCounts {
    fn share(&mut self, key: Sym, pods: &Arc<PodsPerDomain>, occupied: u32) {
        if occupied > 0 {
            self.0.push(DomainMap {
                key,
                pods: pods.clone(),
                occupied,
            });
        }
    }

    fn at(&self, key: Sym, value: Sym) -> i64 {
        self.0
            .iter()
            .filter(|m| m.key == key)
            .filter_map(|m| m.pods.get(&value))
            .sum()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `delta` at (`key`, the node's value for it) if the node has the key. A
    /// decrease goes to a map that counts something there, so that no count goes below
    /// zero and "is empty" stays exact.
    fn add(&mut self, node: &Node, key: Sym, delta: i64) {
        let Some(value) = node.labels.get(key) else {
            return;
        };
        let of_key = |m: &DomainMap| m.key == key;
        let found = if delta < 0 {
            self.0
                .iter()
                .position(|m| of_key(m) && m.pods.get(&value).is_some_and(|&c| c > 0))
                .or_else(|| self.0.iter().position(of_key))
        } else {
            self.0.iter().position(of_key)
        };
        let index = found.unwrap_or_else(|| {
            self.0.push(DomainMap {
                key,
                pods: Arc::default(),
                occupied: 0,
            });
            self.0.len() - 1
        });
        let map = &mut self.0[index];
        let pods = Arc::make_mut(&mut map.pods);
        let count = pods.entry(value).or_insert(0);
        let was_occupied = *count != 0;
        *count += delta;
        if *count == 0 {
            pods.remove(&value);
        }
        let occupied = pods.get(&value).is_some();
        map.occupied = map.occupied + u32::from(occupied) - u32::from(was_occupied);
        if map.occupied == 0 {
            self.0.remove(index);
        }
    }

    /// The non-zero counts, sorted: what two counts must agree on to be equal.
    fn totals(&self) -> Vec<(Sym, Sym, i64)> {
        let mut totals: Vec<(Sym, Sym, i64)> = Vec::new();
        for m in &self.0 {
            for (&value, &count) in m.pods.iter() {
                match totals.iter_mut().find(|t| t.0 == m.key && t.1 == value) {
                    Some(t) => t.2 += count,
                    None => totals.push((m.key, value, count)),
                }
            }
        }
        totals.retain(|t| t.2 != 0);
        totals.sort();
        totals
    }
}

impl PartialEq for TopologyCounts {
    fn eq(&self, other: &TopologyCounts) -> bool {
        self.totals() == other.totals()
    }
}

/// Upstream's `AffinityTerm.Matches` for a term of a pod in `owner_namespace` (needed
/// only when the term lists no namespaces and has no namespace selector): `pod` must be
/// in one of the term's namespaces, or in one its namespace selector picks
/// (`namespace_labels` are the labels of `pod`'s namespace), and match its label selector.
fn term_matches(
    term: &PodAffinityTerm,
    owner_namespace: Option<Sym>,
    pod: &Pod,
    namespace_labels: &Labels,
) -> bool {
    let Some(selector) = &term.label_selector else {
        return false;
    };
    let in_namespace = if term.namespaces.is_empty() && term.namespace_selector.is_none() {
        owner_namespace == Some(pod.namespace)
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
/// namespace objects the selector picks (an empty selector: every namespace). add_pod and
/// remove_pod then match exactly as PreFilter did.
fn resolve_namespaces(
    term: &PodAffinityTerm,
    owner_namespace: Sym,
    objects: &ApiObjects,
) -> NamespaceScope {
    match &term.namespace_selector {
        None if term.namespaces.is_empty() => NamespaceScope::listed([owner_namespace]),
        None => NamespaceScope::listed(term.namespaces.iter().copied()),
        Some(selector) if selector.is_empty() => NamespaceScope::All,
        Some(selector) => NamespaceScope::listed(
            term.namespaces
                .iter()
                .copied()
                .chain(objects.namespaces_selected_by(selector)),
        ),
    }
}

fn resolve_all<'a>(
    terms: impl Iterator<Item = &'a PodAffinityTerm>,
    owner_namespace: Sym,
    objects: &ApiObjects,
) -> Vec<NamespaceScope> {
    terms
        .map(|t| resolve_namespaces(t, owner_namespace, objects))
        .collect()
}

/// The pods a term of the incoming pod matches, with its resolved namespaces; `None` for
/// an absent label selector, which matches no pod.
fn selection(term: &PodAffinityTerm, namespaces: &NamespaceScope) -> Option<PodSelection> {
    Some(PodSelection {
        selector: term.label_selector.clone()?,
        namespaces: namespaces.clone(),
        topology_key: term.topology_key,
        live_only: false,
    })
}

/// The snapshot's domain counts for each selection, looked up all at once (so that every
/// miss is asked for); `None` if any is missing.
fn domain_counts<'a, 's>(
    nodes: &'a dyn ClusterState,
    selections: impl Iterator<Item = Option<&'s PodSelection>>,
) -> Option<Vec<Option<&'a DomainCounts>>> {
    let found: Vec<Option<Option<&DomainCounts>>> = selections
        .map(|s| match s {
            Some(s) => nodes.domain_counts(s).map(Some),
            None => Some(None),
        })
        .collect();
    found.into_iter().collect()
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
#[derive(Debug, Clone, Default, PartialEq)]
struct PreFilterState {
    /// Existing pods' required anti-affinity terms that the incoming pod matches.
    existing_anti_affinity_counts: TopologyCounts,
    /// Existing pods matching all of the incoming pod's required affinity terms, counted
    /// once per term.
    affinity_counts: TopologyCounts,
    /// Existing pods matching each of the incoming pod's required anti-affinity terms.
    anti_affinity_counts: TopologyCounts,
    /// Resolved namespaces of the incoming pod's required (anti-)affinity terms, in order.
    affinity_namespaces: Vec<NamespaceScope>,
    anti_affinity_namespaces: Vec<NamespaceScope>,
    /// Labels of the incoming pod's namespace, for existing pods' namespace selectors.
    namespace_labels: Arc<Labels>,
    /// The incoming pod matches all its own required affinity terms.
    matches_own_affinity: bool,
}

impl PreFilterState {
    fn compute(pod: &Pod, cluster: Cluster<'_>) -> PreFilterState {
        let nodes = cluster.nodes;
        let mut state = PreFilterState {
            existing_anti_affinity_counts: TopologyCounts::default(),
            affinity_counts: TopologyCounts::default(),
            anti_affinity_counts: TopologyCounts::default(),
            affinity_namespaces: Vec::new(),
            anti_affinity_namespaces: Vec::new(),
            namespace_labels: cluster.objects.namespace_labels(pod.namespace).clone(),
            matches_own_affinity: false,
        };
        state.count_existing_anti_affinity(pod, nodes);

        let affinity = &pod.affinity.pod_affinity.required;
        let anti_affinity = &pod.affinity.pod_anti_affinity.required;
        if affinity.is_empty() && anti_affinity.is_empty() {
            return state;
        }
        state.affinity_namespaces = resolve_all(affinity.iter(), pod.namespace, cluster.objects);
        state.anti_affinity_namespaces =
            resolve_all(anti_affinity.iter(), pod.namespace, cluster.objects);
        state.matches_own_affinity = state.matches_all_affinity_terms(pod, pod);
        state.count_incoming_terms(pod, nodes);
        state
    }

    /// Existing pods' required anti-affinity terms that the incoming pod matches: the
    /// declared terms' domain counts, else one check per distinct term on each node that
    /// holds such pods.
    fn count_existing_anti_affinity(&mut self, pod: &Pod, nodes: &dyn ClusterState) {
        if let Some(declared) = nodes.declared_terms() {
            for t in declared.iter() {
                if t.kind == TermKind::RequiredAntiAffinity
                    && term_matches(
                        &t.term.term,
                        t.term.owner_namespace,
                        pod,
                        &self.namespace_labels,
                    )
                {
                    let occupied = t.pods.len() as u32;
                    self.existing_anti_affinity_counts.share(
                        t.term.term.topology_key,
                        &t.pods,
                        occupied,
                    );
                }
            }
            return;
        }
        let mut memo = TermMemo::default();
        for &position in nodes.with_required_anti_affinity_pods() {
            let info = nodes.node_at(position as usize);
            let Some(node) = info.node() else {
                continue;
            };
            for entry in info.affinity_terms().iter() {
                if entry.kind == TermKind::RequiredAntiAffinity
                    && memo.matches(&entry.term, pod, &self.namespace_labels)
                {
                    self.existing_anti_affinity_counts.add(
                        node,
                        entry.term.term.topology_key,
                        i64::from(entry.pods),
                    );
                }
            }
        }
    }

    /// Existing pods against the incoming pod's required (anti-)affinity terms: from the
    /// snapshot's domain counts where it keeps them, node by node for the rest (from each
    /// node's label index where it answers), and pod by pod for the affinity of a pod
    /// with several affinity terms ("matches all of them" is no single selection).
    fn count_incoming_terms(&mut self, incoming: &Pod, nodes: &dyn ClusterState) {
        let required = |terms: &[PodAffinityTerm], namespaces: &[NamespaceScope]| {
            terms
                .iter()
                .zip(namespaces)
                .map(|(t, ns)| selection(t, ns))
                .collect::<Vec<_>>()
        };
        let affinity_terms = &incoming.affinity.pod_affinity.required;
        let affinity = (affinity_terms.len() <= 1)
            .then(|| required(affinity_terms, &self.affinity_namespaces));
        let anti_affinity = required(
            &incoming.affinity.pod_anti_affinity.required,
            &self.anti_affinity_namespaces,
        );
        let affinity_counted = affinity.as_ref().is_some_and(|selections| {
            share_domain_counts(&mut self.affinity_counts, nodes, selections)
        });
        let anti_affinity_counted =
            share_domain_counts(&mut self.anti_affinity_counts, nodes, &anti_affinity);
        if affinity_counted && anti_affinity_counted {
            return;
        }
        for position in 0..nodes.num_nodes() {
            let info = nodes.node_at(position);
            let Some(node) = info.node() else {
                continue;
            };
            match &affinity {
                _ if affinity_counted => {}
                Some(selections) => {
                    for s in selections.iter().flatten() {
                        add_count_on(&mut self.affinity_counts, s, info, node);
                    }
                }
                None => {
                    for existing in info.pods() {
                        self.count_affinity(incoming, existing, node, 1);
                    }
                }
            }
            if !anti_affinity_counted {
                for s in anti_affinity.iter().flatten() {
                    add_count_on(&mut self.anti_affinity_counts, s, info, node);
                }
            }
        }
    }

    /// Counts `existing`'s required anti-affinity terms that `incoming` matches.
    fn count_existing_anti_affinity_of(
        &mut self,
        incoming: &Pod,
        existing: &Pod,
        node: &Node,
        delta: i64,
    ) {
        for term in &existing.affinity.pod_anti_affinity.required {
            if term_matches(
                term,
                Some(existing.namespace),
                incoming,
                &self.namespace_labels,
            ) {
                self.existing_anti_affinity_counts
                    .add(node, term.topology_key, delta);
            }
        }
    }

    /// Counts `existing` against the incoming pod's required affinity terms.
    fn count_affinity(&mut self, incoming: &Pod, existing: &Pod, node: &Node, delta: i64) {
        if self.matches_all_affinity_terms(incoming, existing) {
            for term in &incoming.affinity.pod_affinity.required {
                self.affinity_counts.add(node, term.topology_key, delta);
            }
        }
    }

    /// Counts `existing` against the incoming pod's required (anti-)affinity terms.
    fn count_incoming(&mut self, incoming: &Pod, existing: &Pod, node: &Node, delta: i64) {
        self.count_affinity(incoming, existing, node, delta);
        let anti_affinity = &incoming.affinity.pod_anti_affinity.required;
        for (term, namespaces) in anti_affinity.iter().zip(&self.anti_affinity_namespaces) {
            if term_in_scope_matches(term, namespaces, existing) {
                self.anti_affinity_counts
                    .add(node, term.topology_key, delta);
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
                .all(|(term, namespaces)| term_in_scope_matches(term, namespaces, pod))
    }

    fn satisfies_pod_affinity(&self, pod: &Pod, labels: &Labels) -> bool {
        let mut pods_exist = true;
        for term in &pod.affinity.pod_affinity.required {
            let Some(value) = labels.get(term.topology_key) else {
                return false;
            };
            if self.affinity_counts.at(term.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        // The first pod of a group with affinity to itself: no pod matches anywhere yet,
        // so it may go to any node that has the topology keys.
        pods_exist || (self.affinity_counts.is_empty() && self.matches_own_affinity)
    }

    fn satisfies_pod_anti_affinity(&self, pod: &Pod, labels: &Labels) -> bool {
        pod.affinity.pod_anti_affinity.required.iter().all(|term| {
            labels
                .get(term.topology_key)
                .is_none_or(|value| self.anti_affinity_counts.at(term.topology_key, value) <= 0)
        })
    }

    /// Upstream checks every label of the node against the counts; only the counted
    /// topology keys (each once) can have a count.
    fn satisfies_existing_pods_anti_affinity(&self, labels: &Labels) -> bool {
        let maps = &self.existing_anti_affinity_counts.0;
        maps.iter().enumerate().all(|(i, m)| {
            maps[..i].iter().any(|earlier| earlier.key == m.key)
                || labels
                    .get(m.key)
                    .is_none_or(|value| self.existing_anti_affinity_counts.at(m.key, value) <= 0)
        })
    }
}

/// A term matches `pod` within the term's resolved namespaces.
fn term_in_scope_matches(term: &PodAffinityTerm, namespaces: &NamespaceScope, pod: &Pod) -> bool {
    namespaces.contains(pod.namespace)
        && term
            .label_selector
            .as_ref()
            .is_some_and(|s| s.matches(&pod.labels))
}

/// Shares the snapshot's domain counts of every selection into `counts`; false (nothing
/// shared) when it does not keep them all.
fn share_domain_counts(
    counts: &mut TopologyCounts,
    nodes: &dyn ClusterState,
    selections: &[Option<PodSelection>],
) -> bool {
    let Some(found) = domain_counts(nodes, selections.iter().map(Option::as_ref)) else {
        return false;
    };
    for (selection, domains) in selections.iter().zip(found) {
        if let (Some(selection), Some(domains)) = (selection, domains) {
            counts.share(
                selection.topology_key,
                domains.pods(),
                domains.occupied_domains(),
            );
        }
    }
    true
}

/// Adds the node's pods that `selection` matches at the node's value of its key.
fn add_count_on(
    counts: &mut TopologyCounts,
    selection: &PodSelection,
    info: &NodeInfo,
    node: &Node,
) {
    let n = selection.count_on(info);
    if n > 0 {
        counts.add(node, selection.topology_key, i64::from(n));
    }
}

/// PreScore's result: weighted counts per topology key and value; a node scores the sum
/// at its values. The counts are the snapshot's, shared, or this cycle's own.
#[derive(Debug, Clone, Default)]
struct TopologyScore(Vec<WeightedCounts>);

#[derive(Debug, Clone)]
struct WeightedCounts {
    key: Sym,
    weight: i64,
    pods: Arc<PodsPerDomain>,
    /// Counted in this cycle (weights already applied), not shared.
    own: bool,
}

impl TopologyScore {
    fn share(&mut self, key: Sym, weight: i64, pods: &Arc<PodsPerDomain>) {
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

    fn score(&self, labels: &Labels) -> i64 {
        self.0
            .iter()
            .filter_map(|w| {
                let value = labels.get(w.key)?;
                Some(w.weight * w.pods.get(&value)?)
            })
            .sum()
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
        // Nothing constrains this pod: upstream skips Filter. An empty state is still
        // written (one, shared by all such pods) so that a Filter run regardless passes
        // at once.
        let skip = computed.existing_anti_affinity_counts.is_empty()
            && pod.affinity.pod_affinity.required.is_empty()
            && pod.affinity.pod_anti_affinity.required.is_empty();
        if skip {
            static UNCONSTRAINED: LazyLock<Arc<PreFilterState>> = LazyLock::new(Default::default);
            state.write_shared(PRE_FILTER_STATE_KEY, Arc::clone(&UNCONSTRAINED));
            return (None, Status::skip());
        }
        state.write(PRE_FILTER_STATE_KEY, computed);
        (None, Status::success())
    }

    /// The counts for `other` appearing (+1) on or leaving (-1) the node.
    fn update_for_pod(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        other: &Arc<Pod>,
        node: &NodeInfo,
        delta: i64,
    ) {
        let (Some(s), Some(node)) = (
            state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY),
            node.node(),
        ) else {
            return;
        };
        s.count_existing_anti_affinity_of(pod, other, node, delta);
        s.count_incoming(pod, other, node, delta);
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

    fn cache(nodes: &[Node], pods: &[Pod]) -> Cache {
        let cache = Cache::new();
        for node in nodes {
            cache.add_node(Arc::new(node.clone()));
        }
        for pod in pods {
            cache
                .add_pod(Arc::new(pod.clone()))
                .expect("test pods are unique");
        }
        cache
    }

    /// A snapshot that has not been asked for any selection: the plugin counts node by node.
    fn snapshot(nodes: &[Node], pods: &[Pod]) -> Snapshot {
        let mut snapshot = Snapshot::new();
        cache(nodes, pods).update_snapshot(&mut snapshot).unwrap();
        snapshot
    }

    /// A snapshot that keeps the domain counts of `incoming`'s selections: asked for by a
    /// first PreFilter and PreScore, counted by the next update.
    fn warm_snapshot(
        nodes: &[Node],
        pods: &[Pod],
        incoming: &Pod,
        objects: &ApiObjects,
    ) -> Snapshot {
        let cache = cache(nodes, pods);
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        let cluster = Cluster {
            nodes: &snapshot,
            objects,
        };
        let plugin = InterPodAffinity::default();
        plugin.pre_filter(&mut CycleState::new(), incoming, cluster);
        let infos: Vec<&NodeInfo> = (0..snapshot.num_nodes())
            .map(|i| snapshot.node_at(i))
            .collect();
        plugin.pre_score(&mut CycleState::new(), incoming, &infos, cluster);
        cache.update_snapshot(&mut snapshot).unwrap();
        // Every term with a label selector is asked for, but the affinity terms of a pod
        // with several (counted pod by pod).
        let a = &incoming.affinity;
        let affinity = &a.pod_affinity.required;
        let asked = (if affinity.len() == 1 {
            &affinity[..]
        } else {
            &[]
        })
        .iter()
        .chain(&a.pod_anti_affinity.required)
        .chain(a.pod_affinity.preferred.iter().map(|w| &w.term))
        .chain(a.pod_anti_affinity.preferred.iter().map(|w| &w.term));
        let selects = asked.filter(|t| t.label_selector.is_some()).count() > 0;
        assert_eq!(
            snapshot.selections_counted() > 0,
            selects,
            "the snapshot counts the selections asked for"
        );
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
    /// The same on a snapshot that keeps the pod's domain counts must agree.
    fn filter_all(pod: &Pod, nodes: &[Node], pods: &[Pod], objects: &ApiObjects) -> Vec<Status> {
        let cold = filter_on(&snapshot(nodes, pods), pod, nodes, objects);
        let warm = filter_on(
            &warm_snapshot(nodes, pods, pod, objects),
            pod,
            nodes,
            objects,
        );
        assert_eq!(cold, warm, "counted node by node and from domain counts");
        cold
    }

    fn filter_on(
        snapshot: &Snapshot,
        pod: &Pod,
        nodes: &[Node],
        objects: &ApiObjects,
    ) -> Vec<Status> {
        let (state, status) = pre_filter_state(pod, snapshot, objects);
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
        for warm in [false, true] {
            let snapshot = |pods: &[Pod]| match warm {
                false => snapshot(&nodes, pods),
                true => warm_snapshot(&nodes, pods, &incoming, &objects),
            };
            add_and_remove_match(&incoming, &all, snapshot, &objects);
        }
    }

    fn add_and_remove_match(
        incoming: &Pod,
        all: &[Pod],
        snapshot: impl Fn(&[Pod]) -> Snapshot,
        objects: &ApiObjects,
    ) {
        let plugin = InterPodAffinity::default();
        let full_snapshot = snapshot(all);
        let (full, _) = pre_filter_state(incoming, &full_snapshot, objects);
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
            let rest_snapshot = snapshot(&rest);
            let (without, _) = pre_filter_state(incoming, &rest_snapshot, objects);
            let node = target.node_name.expect("bound");
            let target = Arc::new(target.clone());

            let mut removed = full.clone();
            let info = full_snapshot.node(node).expect("node exists");
            plugin.remove_pod(&mut removed, incoming, &target, info);
            assert_eq!(read(&removed), read(&without), "removing pod {i}");

            let mut added = without.clone();
            let info = rest_snapshot.node(node).expect("node exists");
            plugin.add_pod(&mut added, incoming, &target, info);
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
        let cold = scores_on(&snapshot(nodes, pods), plugin, pod, nodes, objects);
        let warm_snapshot = warm_snapshot(nodes, pods, pod, objects);
        let warm = scores_on(&warm_snapshot, plugin, pod, nodes, objects);
        assert_eq!(cold, warm, "counted node by node and from domain counts");
        cold
    }

    fn scores_on(
        snapshot: &Snapshot,
        plugin: &InterPodAffinity,
        pod: &Pod,
        nodes: &[Node],
        objects: &ApiObjects,
    ) -> Option<Vec<i64>> {
        let infos: Vec<&NodeInfo> = nodes
            .iter()
            .map(|n| snapshot.node(n.name).expect("node is in the snapshot"))
            .collect();
        let mut state = CycleState::new();
        let cluster = Cluster {
            nodes: snapshot,
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
        topology.share(
            Sym::new("zone"),
            -3,
            &Arc::new(PodsPerDomain::from_iter([(Sym::new("a"), 1)])),
        );
        state.write(PRE_SCORE_STATE_KEY, topology);
        let mut scores = [-3, 0, 4, 1];
        let status = InterPodAffinity::default().normalize(&state, &pod(&[]), &mut scores);
        assert!(status.is_success());
        // 100 * (0 - -3) / 7 = 42.86, 100 * 4 / 7 = 57.14: truncated.
        assert_eq!(scores, [0, 42, 100, 57]);
    }
}
