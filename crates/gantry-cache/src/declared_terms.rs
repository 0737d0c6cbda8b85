//! The (anti-)affinity terms the snapshot's pods declare, each with the declaring pods per
//! domain of its topology key: the existing pods' side of InterPodAffinity (their required
//! anti-affinity at PreFilter, their affinity and preferences at PreScore) in one entry per
//! distinct term, instead of a visit to every node that holds such pods.
//!
//! Derived from the nodes' aggregated terms and kept up to date from the nodes each
//! snapshot update copies, as the domain counts are.

use std::collections::BTreeMap;
use std::sync::Arc;

use gantry_api::Sym;
use smallvec::SmallVec;

use crate::domain_counts::{PodsPerDomain, same_labels};
use crate::{AffinityTermCount, InternedTerm, NodeInfo, TermKind};

/// One distinct term, declared one way, with the declaring pods per domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredTerm {
    pub term: Arc<InternedTerm>,
    pub kind: TermKind,
    /// Declaring pods per value of the term's topology key, on the nodes that have the
    /// key; no zero entries. Shared with the cycles that read it.
    pub pods: Arc<PodsPerDomain>,
}

/// Every term declared on a node that has its topology key, in a fixed order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeclaredTerms(BTreeMap<(u32, TermKind), DeclaredTerm>);

/// A change of declaring pods at one domain.
type Change = (Arc<InternedTerm>, TermKind, Sym, i64);

impl DeclaredTerms {
    pub fn iter(&self) -> impl Iterator<Item = &DeclaredTerm> {
        self.0.values()
    }

    /// A node changed from `old` to `new` (`None`: absent before, or gone after).
    pub(crate) fn node_changed(&mut self, old: Option<&NodeInfo>, new: Option<&NodeInfo>) {
        if let (Some(old), Some(new)) = (old, new)
            && same_labels(old, new)
        {
            self.pods_changed(old, new);
            return;
        }
        let mut changes: SmallVec<[Change; 4]> = SmallVec::new();
        for (info, sign) in [(old, -1), (new, 1)] {
            let Some(node) = info.and_then(|i| i.node()) else {
                continue;
            };
            let info = info.expect("has a node");
            for entry in info.affinity_terms().iter() {
                let Some(value) = node.labels.get(entry.term.term.topology_key) else {
                    continue;
                };
                let delta = sign * i64::from(entry.pods);
                let same = changes.iter_mut().find(|(term, kind, v, _)| {
                    term.id == entry.term.id && *kind == entry.kind && *v == value
                });
                match same {
                    Some(change) => change.3 += delta,
                    None => changes.push((entry.term.clone(), entry.kind, value, delta)),
                }
            }
        }
        for (term, kind, value, delta) in changes.into_iter().filter(|c| c.3 != 0) {
            self.add(term, kind, value, delta);
        }
    }

    /// The node stays in every domain it was in: only the terms declared by more or
    /// fewer of its pods change, at its values (pods come and go one at a time, and a
    /// node holds a handful of distinct terms: the two lists are compared as they are).
    fn pods_changed(&mut self, old: &NodeInfo, new: &NodeInfo) {
        let Some(node) = new.node() else {
            return;
        };
        let (old_terms, new_terms) = (old.affinity_terms(), new.affinity_terms());
        let came = (new_terms.iter()).map(|e| {
            (
                e,
                i64::from(e.pods) - i64::from(old_terms.pods_declaring(e)),
            )
        });
        let went = (old_terms.iter())
            .filter(|e| new_terms.pods_declaring(e) == 0)
            .map(|e| (e, -i64::from(e.pods)));
        let moved: SmallVec<[(&AffinityTermCount, i64); 2]> =
            came.chain(went).filter(|(_, delta)| *delta != 0).collect();
        for (entry, delta) in moved {
            if let Some(value) = node.labels.get(entry.term.term.topology_key) {
                self.add(entry.term.clone(), entry.kind, value, delta);
            }
        }
    }

    fn add(&mut self, term: Arc<InternedTerm>, kind: TermKind, value: Sym, delta: i64) {
        let entry = self
            .0
            .entry((term.id, kind))
            .or_insert_with(|| DeclaredTerm {
                term,
                kind,
                pods: Arc::default(),
            });
        let pods = Arc::make_mut(&mut entry.pods);
        let count = pods.entry(value).or_insert(0);
        *count += delta;
        if *count == 0 {
            pods.remove(&value);
            if pods.is_empty() {
                let id = entry.term.id;
                self.0.remove(&(id, kind));
            }
        }
    }

    /// The terms of `nodes`, counted from scratch.
    pub(crate) fn counted<'a>(nodes: impl Iterator<Item = &'a NodeInfo>) -> DeclaredTerms {
        let mut terms = DeclaredTerms::default();
        for info in nodes {
            terms.node_changed(None, Some(info));
        }
        terms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::{LabelSelector, Node, Pod, PodAffinityTerm, Resources};

    fn node(name: &str, zone: Option<&str>) -> NodeInfo {
        let mut node = Node::new(name, Resources::new(1000, 1 << 30));
        if let Some(zone) = zone {
            node = node.with_labels([("zone", zone)]);
        }
        NodeInfo::new(Arc::new(node))
    }

    fn anti(name: &str) -> Arc<Pod> {
        let mut pod = Pod::new("ns", name);
        pod.affinity
            .pod_anti_affinity
            .required
            .push(PodAffinityTerm {
                label_selector: Some(LabelSelector::default()),
                namespaces: vec![],
                namespace_selector: None,
                topology_key: Sym::new("zone"),
            });
        Arc::new(pod)
    }

    fn counts(terms: &DeclaredTerms) -> Vec<(TermKind, Vec<(String, i64)>)> {
        terms
            .iter()
            .map(|t| {
                let mut pods: Vec<(String, i64)> =
                    t.pods.iter().map(|(v, n)| (v.to_string(), *n)).collect();
                pods.sort();
                (t.kind, pods)
            })
            .collect()
    }

    #[test]
    fn declaring_pods_are_counted_per_domain_and_follow_node_changes() {
        let mut a = node("a", Some("z1"));
        let mut b = node("b", Some("z1"));
        let keyless = {
            let mut n = node("c", None);
            n.add_pod(anti("p3"));
            n
        };
        a.add_pod(anti("p1"));
        b.add_pod(anti("p2"));
        let mut terms = DeclaredTerms::counted([&a, &b, &keyless].into_iter());
        assert_eq!(
            counts(&terms),
            [(TermKind::RequiredAntiAffinity, vec![("z1".into(), 2)])],
            "a node without the topology key counts in no domain"
        );

        let before = b.clone();
        b.remove_pod("ns/p2");
        terms.node_changed(Some(&before), Some(&b));
        assert_eq!(
            counts(&terms),
            [(TermKind::RequiredAntiAffinity, vec![("z1".into(), 1)])]
        );

        // The node moves to another zone: its pods move with it.
        let moved = {
            let mut m = node("a", Some("z2"));
            m.add_pod(anti("p1"));
            m
        };
        terms.node_changed(Some(&a), Some(&moved));
        assert_eq!(
            counts(&terms),
            [(TermKind::RequiredAntiAffinity, vec![("z2".into(), 1)])]
        );
        terms.node_changed(Some(&moved), None);
        assert!(counts(&terms).is_empty(), "no declaring pod is left");
    }
}
