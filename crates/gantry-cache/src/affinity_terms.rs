//! The (anti-)affinity terms of a node's pods, aggregated: pods made from one template
//! carry equal terms, so a node keeps one entry per distinct term with a pod count, and
//! InterPodAffinity checks each distinct term against the incoming pod once per cycle
//! instead of once per pod.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, LazyLock};

use gantry_api::{Pod, PodAffinityTerm, Sym};
use parking_lot::Mutex;
use smallvec::SmallVec;

/// A term with the namespace of the pod that declared it where the term means it (no
/// namespaces listed, no namespace selector), shared by every pod that declares an equal
/// one: pods of one template in different namespaces share a term that lists its
/// namespaces.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct InternedTerm {
    /// Small and unique per distinct term: a key for per-cycle memos.
    pub id: u32,
    pub term: PodAffinityTerm,
    pub owner_namespace: Option<Sym>,
}

/// Interned terms by the hash of (term, owner namespace): a lookup hashes the borrowed
/// term and compares, so a term already seen is found without copying it (adding a pod
/// to a node looks its terms up on every assume and confirm).
#[derive(Default)]
struct Table {
    hasher: foldhash::fast::FixedState,
    by_hash: HashMap<u64, SmallVec<[Arc<InternedTerm>; 1]>, foldhash::fast::FixedState>,
    count: u32,
}

static TERMS: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);

fn intern(term: &PodAffinityTerm, declared_in: Sym) -> Arc<InternedTerm> {
    let owner_namespace =
        (term.namespaces.is_empty() && term.namespace_selector.is_none()).then_some(declared_in);
    let mut table = TERMS.lock();
    let table = &mut *table;
    let hash = table.hasher.hash_one((term, owner_namespace));
    let same = table.by_hash.entry(hash).or_default();
    if let Some(found) = same
        .iter()
        .find(|t| t.owner_namespace == owner_namespace && t.term == *term)
    {
        return found.clone();
    }
    let interned = Arc::new(InternedTerm {
        id: table.count,
        term: term.clone(),
        owner_namespace,
    });
    table.count += 1;
    same.push(interned.clone());
    interned
}

/// How a term of an existing pod takes part in scheduling another pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TermKind {
    RequiredAffinity,
    RequiredAntiAffinity,
    PreferredAffinity(i32),
    PreferredAntiAffinity(i32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTermCount {
    pub term: Arc<InternedTerm>,
    pub kind: TermKind,
    /// Pods on the node declaring this term this way.
    pub pods: u32,
}

/// A node's distinct terms with their pod counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AffinityTerms(SmallVec<[AffinityTermCount; 1]>);

impl AffinityTerms {
    pub(crate) fn update(&mut self, pod: &Pod, sign: i64) {
        if !pod.has_affinity() {
            return;
        }
        let a = &pod.affinity;
        let terms = a
            .pod_affinity
            .required
            .iter()
            .map(|t| (t, TermKind::RequiredAffinity))
            .chain(
                a.pod_anti_affinity
                    .required
                    .iter()
                    .map(|t| (t, TermKind::RequiredAntiAffinity)),
            )
            .chain(
                a.pod_affinity
                    .preferred
                    .iter()
                    .map(|w| (&w.term, TermKind::PreferredAffinity(w.weight))),
            )
            .chain(
                a.pod_anti_affinity
                    .preferred
                    .iter()
                    .map(|w| (&w.term, TermKind::PreferredAntiAffinity(w.weight))),
            );
        for (term, kind) in terms {
            let interned = intern(term, pod.namespace);
            let existing = self
                .0
                .iter()
                .position(|e| e.kind == kind && Arc::ptr_eq(&e.term, &interned));
            match existing {
                Some(i) if sign < 0 => {
                    self.0[i].pods -= 1;
                    if self.0[i].pods == 0 {
                        self.0.swap_remove(i);
                    }
                }
                Some(i) => self.0[i].pods += 1,
                None if sign > 0 => self.0.push(AffinityTermCount {
                    term: interned,
                    kind,
                    pods: 1,
                }),
                None => {}
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &AffinityTermCount> {
        self.0.iter()
    }

    /// Pods on the node declaring the entry's term its way (0: none).
    pub(crate) fn pods_declaring(&self, entry: &AffinityTermCount) -> u32 {
        let same =
            |e: &&AffinityTermCount| e.kind == entry.kind && Arc::ptr_eq(&e.term, &entry.term);
        self.0.iter().find(same).map_or(0, |e| e.pods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::{LabelSelector, WeightedPodAffinityTerm};

    fn term(app: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(LabelSelector::from_pairs([(
                Sym::new("app"),
                Sym::new(app),
            )])),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: Sym::new("kubernetes.io/hostname"),
        }
    }

    #[test]
    fn equal_terms_share_an_entry_and_counts_follow_pods() {
        let pod = |name: &str, app: &str| {
            let mut p = Pod::new("ns", name);
            p.affinity.pod_anti_affinity.required.push(term(app));
            p.affinity
                .pod_affinity
                .preferred
                .push(WeightedPodAffinityTerm {
                    weight: 5,
                    term: term(app),
                });
            p
        };
        let mut terms = AffinityTerms::default();
        terms.update(&pod("a", "web"), 1);
        terms.update(&pod("b", "web"), 1);
        terms.update(&pod("c", "db"), 1);
        let counts: Vec<(TermKind, u32)> = terms.iter().map(|e| (e.kind, e.pods)).collect();
        assert_eq!(
            counts,
            [
                (TermKind::RequiredAntiAffinity, 2),
                (TermKind::PreferredAffinity(5), 2),
                (TermKind::RequiredAntiAffinity, 1),
                (TermKind::PreferredAffinity(5), 1)
            ]
        );
        terms.update(&pod("a", "web"), -1);
        terms.update(&pod("b", "web"), -1);
        assert_eq!(terms.iter().count(), 2);
        let mut other_namespace = pod("d", "db");
        other_namespace.namespace = Sym::new("other");
        terms.update(&other_namespace, 1);
        assert_eq!(
            terms.iter().count(),
            4,
            "the owner's namespace is part of the term"
        );

        let listing = |namespace: &str| {
            let mut term = term("web");
            term.namespaces = vec![Sym::new("a"), Sym::new("b")];
            let mut p = Pod::new(namespace, "e");
            p.affinity.pod_anti_affinity.required.push(term);
            p
        };
        let mut terms = AffinityTerms::default();
        terms.update(&listing("a"), 1);
        terms.update(&listing("b"), 1);
        let counts: Vec<u32> = terms.iter().map(|e| e.pods).collect();
        assert_eq!(
            counts,
            [2],
            "a term that lists its namespaces is the same term in every namespace"
        );
    }
}
