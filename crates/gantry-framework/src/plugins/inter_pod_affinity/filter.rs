//! PreFilter and Filter: the required affinity and anti-affinity counts per topology pair,
//! the existing pods' required anti-affinity included.

use std::sync::{Arc, LazyLock};

use gantry_api::{Labels, Node, Pod, PodAffinityTerm};
use gantry_cache::{ClusterState, NamespaceScope, NodeInfo, TermKind};

use super::terms::{
    TermMemo, TopologyCounts, add_count_on, resolve_all, selection, share_domain_counts,
    term_in_scope_matches, term_matches,
};
use super::{
    InterPodAffinity, NAME, PRE_FILTER_STATE_KEY, REASON_AFFINITY_RULES_NOT_MATCH,
    REASON_ANTI_AFFINITY_RULES_NOT_MATCH, REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
};
use crate::{Cluster, CycleState, FilterPlugin, PreFilterPlugin, PreFilterResult, Status};

/// What PreFilter computes for the incoming pod (upstream's `preFilterState`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct PreFilterState {
    /// Existing pods' required anti-affinity terms that the incoming pod matches.
    pub(super) existing_anti_affinity_counts: TopologyCounts,
    /// Existing pods matching all of the incoming pod's required affinity terms, counted
    /// once per term.
    pub(super) affinity_counts: TopologyCounts,
    /// Existing pods matching each of the incoming pod's required anti-affinity terms.
    pub(super) anti_affinity_counts: TopologyCounts,
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
