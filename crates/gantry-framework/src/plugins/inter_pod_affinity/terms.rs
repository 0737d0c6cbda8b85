//! Matching the pods' terms (namespaces resolved once per cycle) and counting the pods
//! they select per topology domain, shared from the snapshot or counted node by node.

use std::sync::Arc;

use gantry_api::{Labels, Node, Pod, PodAffinityTerm, Sym};
use gantry_cache::{
    ClusterState, DomainCounts, InternedTerm, NamespaceScope, NodeInfo, PodSelection, PodsPerDomain,
};
use smallvec::SmallVec;

use crate::ApiObjects;

/// One topology key's counts per value.
#[derive(Debug, Clone)]
pub(super) struct DomainMap {
    pub(super) key: Sym,
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
pub(super) struct TopologyCounts(pub(super) SmallVec<[DomainMap; 2]>);

impl TopologyCounts {
    pub(super) fn share(&mut self, key: Sym, pods: &Arc<PodsPerDomain>, occupied: u32) {
        if occupied > 0 {
            self.0.push(DomainMap {
                key,
                pods: pods.clone(),
                occupied,
            });
        }
    }

    pub(super) fn at(&self, key: Sym, value: Sym) -> i64 {
        self.0
            .iter()
            .filter(|m| m.key == key)
            .filter_map(|m| m.pods.get(&value))
            .sum()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `delta` at (`key`, the node's value for it) if the node has the key. A
    /// decrease goes to a map that counts something there, so that no count goes below
    /// zero and "is empty" stays exact.
    pub(super) fn add(&mut self, node: &Node, key: Sym, delta: i64) {
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
pub(super) fn term_matches(
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
pub(super) fn resolve_namespaces(
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

pub(super) fn resolve_all<'a>(
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
pub(super) fn selection(
    term: &PodAffinityTerm,
    namespaces: &NamespaceScope,
) -> Option<PodSelection> {
    Some(PodSelection {
        selector: term.label_selector.clone()?,
        namespaces: namespaces.clone(),
        topology_key: term.topology_key,
        live_only: false,
    })
}

/// The snapshot's domain counts for each selection, looked up all at once (so that every
/// miss is asked for); `None` if any is missing.
pub(super) fn domain_counts<'a, 's>(
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
pub(super) struct TermMemo(Vec<(u32, bool)>);

impl TermMemo {
    pub(super) fn matches(
        &mut self,
        term: &InternedTerm,
        pod: &Pod,
        pod_namespace_labels: &Labels,
    ) -> bool {
        if let Some(&(_, m)) = self.0.iter().find(|(id, _)| *id == term.id) {
            return m;
        }
        let m = term_matches(&term.term, term.owner_namespace, pod, pod_namespace_labels);
        self.0.push((term.id, m));
        m
    }
}

/// A term matches `pod` within the term's resolved namespaces.
pub(super) fn term_in_scope_matches(
    term: &PodAffinityTerm,
    namespaces: &NamespaceScope,
    pod: &Pod,
) -> bool {
    namespaces.contains(pod.namespace)
        && term
            .label_selector
            .as_ref()
            .is_some_and(|s| s.matches(&pod.labels))
}

/// Shares the snapshot's domain counts of every selection into `counts`; false (nothing
/// shared) when it does not keep them all.
pub(super) fn share_domain_counts(
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
pub(super) fn add_count_on(
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
