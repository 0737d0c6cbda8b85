//! Which pods a topology count counts: those a label selector matches within a namespace
//! scope (an affinity term's resolved namespaces, a spread constraint's own namespace),
//! over the domains of one topology key.

use gantry_api::{LabelSelector, Pod, Sym};

use crate::NodeInfo;

/// The namespaces a selection covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NamespaceScope {
    /// Every namespace (an affinity term's empty namespace selector).
    All,
    /// Sorted, without repeats.
    Listed(Box<[Sym]>),
}

impl NamespaceScope {
    /// The listed namespaces, in any order and with repeats, as a scope.
    pub fn listed(names: impl IntoIterator<Item = Sym>) -> NamespaceScope {
        let mut names: Vec<Sym> = names.into_iter().collect();
        names.sort_unstable();
        names.dedup();
        NamespaceScope::Listed(names.into())
    }

    pub fn contains(&self, namespace: Sym) -> bool {
        match self {
            NamespaceScope::All => true,
            NamespaceScope::Listed(names) => names.binary_search(&namespace).is_ok(),
        }
    }
}

/// Pods a label selector matches in a namespace scope, counted per value of a node label
/// (`topology_key`). Equal selections share one count in the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodSelection {
    pub selector: LabelSelector,
    pub namespaces: NamespaceScope,
    pub topology_key: Sym,
    /// Leave out pods being deleted: PodTopologySpread does, InterPodAffinity does not.
    pub live_only: bool,
}

impl PodSelection {
    pub fn matches(&self, pod: &Pod) -> bool {
        !(self.live_only && pod.terminating)
            && self.namespaces.contains(pod.namespace)
            && self.selector.matches(&pod.labels)
    }

    /// The node's pods this selection matches: from the node's label index when it can
    /// answer (one requirement at most, and no terminating pod to leave out), else pod
    /// by pod.
    pub fn count_on(&self, info: &NodeInfo) -> u32 {
        let index = info.label_index();
        if !(self.live_only && index.terminating() > 0) {
            let indexed = match &self.namespaces {
                NamespaceScope::Listed(names) => names
                    .iter()
                    .map(|ns| index.count(*ns, &self.selector))
                    .sum::<Option<u32>>(),
                NamespaceScope::All => index
                    .namespaces()
                    .map(|ns| index.count(ns, &self.selector))
                    .sum::<Option<u32>>(),
            };
            if let Some(count) = indexed {
                return count;
            }
        }
        info.pods().iter().filter(|p| self.matches(p)).count() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::labels::{Requirement, SelectorOp};
    use gantry_api::{Node, Resources};
    use proptest::prelude::*;
    use std::sync::Arc;

    fn selector(two_requirements: bool) -> LabelSelector {
        let mut requirements = vec![Requirement {
            key: Sym::new("app"),
            op: SelectorOp::In,
            values: [Sym::new("web")].into_iter().collect(),
        }];
        if two_requirements {
            requirements.push(Requirement {
                key: Sym::new("tier"),
                op: SelectorOp::DoesNotExist,
                values: Default::default(),
            });
        }
        LabelSelector { requirements }
    }

    #[test]
    fn listed_namespaces_are_sorted_and_unique() {
        let (a, b) = (Sym::new("scope-a"), Sym::new("scope-b"));
        let scope = NamespaceScope::listed([b, a, b]);
        assert_eq!(scope, NamespaceScope::listed([a, b]));
        assert!(scope.contains(a) && scope.contains(b));
        assert!(!scope.contains(Sym::new("scope-c")));
        assert!(NamespaceScope::All.contains(Sym::new("scope-c")));
    }

    proptest! {
        /// The index's answer, where it gives one, is the pod-by-pod count.
        #[test]
        fn count_on_equals_matching_each_pod(
            pods in proptest::collection::vec((0..3usize, any::<bool>(), any::<bool>(), any::<bool>()), 0..20),
            scope in 0..3usize,
            two_requirements in any::<bool>(),
            live_only in any::<bool>(),
        ) {
            let namespaces = ["a", "b", "c"];
            let mut info = NodeInfo::new(Arc::new(Node::new("n", Resources::new(1000, 1 << 30))));
            for (i, (ns, web, tier, terminating)) in pods.iter().enumerate() {
                let mut labels = vec![];
                if *web { labels.push(("app", "web")); }
                if *tier { labels.push(("tier", "x")); }
                let mut pod = Pod::new(namespaces[*ns], &format!("p{i}")).with_labels(labels);
                pod.terminating = *terminating;
                info.add_pod(Arc::new(pod));
            }
            let namespaces = match scope {
                0 => NamespaceScope::All,
                1 => NamespaceScope::listed([Sym::new("b")]),
                _ => NamespaceScope::listed([Sym::new("c"), Sym::new("a")]),
            };
            let selection = PodSelection {
                selector: selector(two_requirements),
                namespaces,
                topology_key: Sym::new("zone"),
                live_only,
            };
            let expected = info.pods().iter().filter(|p| selection.matches(p)).count() as u32;
            prop_assert_eq!(selection.count_on(&info), expected);
        }
    }
}
