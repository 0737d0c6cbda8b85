//! The queue's unschedulable pods, grouped by the plugins that rejected them: a cluster
//! event asks each group once whether it may help, not each pod. With two million pods
//! waiting on three full nodes, asking per pod made every bind cost a pass over them all.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The plugins that rejected a pod, sorted and without repeats (the group's key).
type Rejecters = Box<[&'static str]>;

#[derive(Default)]
pub(crate) struct UnschedulablePods {
    group_of: HashMap<Arc<str>, Rejecters>,
    groups: HashMap<Rejecters, HashSet<Arc<str>>>,
}

impl UnschedulablePods {
    /// Adds the pod (moving it, if it was in another group) under the plugins that
    /// rejected it.
    pub fn insert(&mut self, uid: Arc<str>, plugins: &[&'static str]) {
        self.remove(&uid);
        let mut key = plugins.to_vec();
        key.sort_unstable();
        key.dedup();
        let key: Rejecters = key.into_boxed_slice();
        self.groups
            .entry(key.clone())
            .or_default()
            .insert(uid.clone());
        self.group_of.insert(uid, key);
    }

    pub fn remove(&mut self, uid: &str) {
        let Some(key) = self.group_of.remove(uid) else {
            return;
        };
        if let Some(group) = self.groups.get_mut(&key) {
            group.remove(uid);
            if group.is_empty() {
                self.groups.remove(&key);
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<str>> {
        self.group_of.keys()
    }

    /// The pods of every group whose rejecting plugins `may_help` says yes to (in no
    /// particular order: the caller orders them).
    pub fn helped(&self, may_help: impl Fn(&[&'static str]) -> bool) -> Vec<Arc<str>> {
        self.groups
            .iter()
            .filter(|(plugins, _)| may_help(plugins))
            .flat_map(|(_, uids)| uids.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_move_between_groups_and_leave_them() {
        let mut pods = UnschedulablePods::default();
        pods.insert(
            "a".into(),
            &["NodeAffinity", "NodeResourcesFit", "NodeAffinity"],
        );
        pods.insert("b".into(), &["NodeResourcesFit", "NodeAffinity"]);
        pods.insert("c".into(), &["TaintToleration"]);
        let mut helped = pods.helped(|plugins| plugins.contains(&"NodeAffinity"));
        helped.sort();
        assert_eq!(helped, [Arc::from("a"), Arc::from("b")]);
        pods.insert("a".into(), &["TaintToleration"]);
        pods.remove("c");
        assert_eq!(
            pods.helped(|plugins| plugins.contains(&"NodeAffinity")),
            [Arc::from("b")]
        );
        assert_eq!(
            pods.helped(|plugins| plugins.contains(&"TaintToleration")),
            [Arc::from("a")]
        );
        pods.remove("a");
        pods.remove("b");
        assert!(pods.groups.is_empty() && pods.iter().next().is_none());
    }
}
