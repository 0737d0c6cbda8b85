//! Counts of a node's pods by namespace and label, so that a selector with a single
//! requirement (the common `matchLabels: {app: web}`) counts the matching pods of a node
//! without visiting them: PodTopologySpread and InterPodAffinity count pods across every
//! node for every pod they schedule.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use gantry_api::labels::{Requirement, SelectorOp};
use gantry_api::{LabelSelector, Pod, Sym};
use smallvec::SmallVec;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct PodLabelIndex {
    /// (namespace, key, value) -> pods with that label.
    values: HashMap<(Sym, Sym, Sym), u32, RandomState>,
    /// (namespace, key) -> pods with the key.
    keys: HashMap<(Sym, Sym), u32, RandomState>,
    /// namespace -> pods.
    namespaces: SmallVec<[(Sym, u32); 2]>,
    /// Pods with a deletion timestamp (counted above too).
    terminating: u32,
}

// Field by field, so that `clone_from` reuses the maps' tables (a NodeInfo copied over
// another, as preemption's dry run does).
clone_field_by_field!(PodLabelIndex {
    values,
    keys,
    namespaces via gantry_api::small_copy::copy_into,
    terminating,
});

impl PodLabelIndex {
    pub(crate) fn update(&mut self, pod: &Pod, sign: i64) {
        fn bump<K: std::hash::Hash + Eq>(
            map: &mut HashMap<K, u32, RandomState>,
            key: K,
            sign: i64,
        ) {
            if sign > 0 {
                *map.entry(key).or_insert(0) += 1;
            } else if let Some(count) = map.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    // Keep the maps as small as the pods they describe.
                    map.remove(&key);
                }
            }
        }
        let ns = pod.namespace;
        for (key, value) in pod.labels.iter() {
            bump(&mut self.values, (ns, key, value), sign);
            bump(&mut self.keys, (ns, key), sign);
        }
        match self.namespaces.iter().position(|e| e.0 == ns) {
            Some(i) => {
                self.namespaces[i].1 = self.namespaces[i].1.saturating_add_signed(sign as i32);
                if self.namespaces[i].1 == 0 {
                    self.namespaces.swap_remove(i);
                }
            }
            None if sign > 0 => self.namespaces.push((ns, 1)),
            None => {}
        }
        if pod.terminating {
            self.terminating = self.terminating.saturating_add_signed(sign as i32);
        }
    }

    /// Pods being deleted are counted like the others; callers that must skip them
    /// count by hand when there are any.
    pub fn terminating(&self) -> u32 {
        self.terminating
    }

    /// The namespaces that have pods on the node.
    pub fn namespaces(&self) -> impl Iterator<Item = Sym> + '_ {
        self.namespaces.iter().map(|e| e.0)
    }

    /// Pods of `namespace` that `selector` matches, when the selector has at most one
    /// requirement; `None` for selectors the index cannot answer.
    pub fn count(&self, namespace: Sym, selector: &LabelSelector) -> Option<u32> {
        let total = self
            .namespaces
            .iter()
            .find(|e| e.0 == namespace)
            .map_or(0, |e| e.1);
        match selector.requirements.as_slice() {
            [] => Some(total),
            [requirement] => Some(self.count_requirement(namespace, requirement, total)),
            _ => None,
        }
    }

    fn count_requirement(&self, namespace: Sym, r: &Requirement, total: u32) -> u32 {
        let with_value = |v: &Sym| {
            self.values
                .get(&(namespace, r.key, *v))
                .copied()
                .unwrap_or(0)
        };
        let with_key = || self.keys.get(&(namespace, r.key)).copied().unwrap_or(0);
        match r.op {
            SelectorOp::In => distinct(&r.values).map(with_value).sum(),
            SelectorOp::NotIn => total - distinct(&r.values).map(with_value).sum::<u32>(),
            SelectorOp::Exists => with_key(),
            SelectorOp::DoesNotExist => total - with_key(),
        }
    }
}

/// A requirement's values without repeats (`In [a, a]` matches a pod once).
fn distinct(values: &[Sym]) -> impl Iterator<Item = &Sym> {
    values
        .iter()
        .enumerate()
        .filter(|(i, v)| !values[..*i].contains(v))
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn requirement(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
        Requirement {
            key: Sym::new(key),
            op,
            values: values.iter().map(|v| Sym::new(v)).collect(),
        }
    }

    fn pod(ns: &str, i: usize, app: Option<&str>, tier: Option<&str>) -> Pod {
        let mut labels = Vec::new();
        if let Some(a) = app {
            labels.push(("app", a));
        }
        if let Some(t) = tier {
            labels.push(("tier", t));
        }
        Pod::new(ns, &format!("p{i}")).with_labels(labels)
    }

    proptest! {
        /// The index agrees with matching every pod, for every selector it can answer.
        #[test]
        fn counts_equal_matching_each_pod(
            pods in proptest::collection::vec((0..2usize, proptest::option::of(0..3usize), proptest::option::of(0..2usize)), 0..30),
            removed in 0..10usize,
            op in 0..4usize,
            values in proptest::collection::vec(0..3usize, 1..3),
            ns in 0..2usize,
        ) {
            let apps = ["web", "db", "cache"];
            let namespaces = ["a", "b"];
            let pods: Vec<Pod> = pods
                .iter()
                .enumerate()
                .map(|(i, (n, app, tier))| pod(namespaces[*n], i, app.map(|a| apps[a]), tier.map(|t| ["x", "y"][t])))
                .collect();
            let mut index = PodLabelIndex::default();
            for p in &pods {
                index.update(p, 1);
            }
            let live: Vec<&Pod> = pods.iter().skip(removed.min(pods.len())).collect();
            for p in pods.iter().take(removed.min(pods.len())) {
                index.update(p, -1);
            }
            let op = [SelectorOp::In, SelectorOp::NotIn, SelectorOp::Exists, SelectorOp::DoesNotExist][op];
            let vals: Vec<&str> = if matches!(op, SelectorOp::In | SelectorOp::NotIn) { values.iter().map(|v| apps[*v]).collect() } else { vec![] };
            let selector = LabelSelector { requirements: vec![requirement("app", op, &vals)] };
            let namespace = Sym::new(namespaces[ns]);
            let expected = live.iter().filter(|p| p.namespace == namespace && selector.matches(&p.labels)).count() as u32;
            prop_assert_eq!(index.count(namespace, &selector), Some(expected));
            let everything = LabelSelector::default();
            let in_namespace = live.iter().filter(|p| p.namespace == namespace).count() as u32;
            prop_assert_eq!(index.count(namespace, &everything), Some(in_namespace));
        }
    }

    #[test]
    fn selectors_with_several_requirements_are_not_answered() {
        let selector = LabelSelector {
            requirements: vec![
                requirement("app", SelectorOp::Exists, &[]),
                requirement("tier", SelectorOp::Exists, &[]),
            ],
        };
        assert_eq!(
            PodLabelIndex::default().count(Sym::new("a"), &selector),
            None
        );
    }
}
