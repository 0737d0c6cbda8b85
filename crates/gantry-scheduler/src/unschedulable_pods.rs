//! The queue's unschedulable pods, grouped by the plugins that rejected them: a cluster
//! event asks each group once whether it may help, not each pod. With two million pods
//! waiting on three full nodes, asking per pod made every bind cost a pass over them all.
//! The kinds of rejection are few and come back again and again: groups stay when their
//! last pod leaves, and are found by comparing their plugins, so a pod passing through (a
//! preemptor waiting for its victims) costs no allocation and hashes no plugin names.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use smallvec::SmallVec;

/// The pods one event moves, nearly always few.
pub(crate) type Moved = SmallVec<[Arc<str>; 4]>;

/// One group: the plugins that rejected its pods, sorted and without repeats, and the pods.
struct Group {
    plugins: Box<[&'static str]>,
    pods: HashSet<Arc<str>>,
}

#[derive(Default)]
pub(crate) struct UnschedulablePods {
    /// Each pod's group (an index into `groups`, which never shrinks).
    group_of: HashMap<Arc<str>, usize>,
    groups: Vec<Group>,
}

impl UnschedulablePods {
    /// Adds the pod (moving it, if it was in another group) under the plugins that
    /// rejected it.
    pub fn insert(&mut self, uid: Arc<str>, plugins: &[&'static str]) {
        self.remove(&uid);
        let mut key: SmallVec<[&'static str; 8]> = plugins.iter().copied().collect();
        key.sort_unstable();
        key.dedup();
        let group = match self.groups.iter().position(|g| *g.plugins == *key) {
            Some(group) => group,
            None => {
                self.groups.push(Group {
                    plugins: key.to_vec().into_boxed_slice(),
                    pods: HashSet::new(),
                });
                self.groups.len() - 1
            }
        };
        self.groups[group].pods.insert(uid.clone());
        self.group_of.insert(uid, group);
    }

    pub fn remove(&mut self, uid: &str) {
        if let Some(group) = self.group_of.remove(uid) {
            self.groups[group].pods.remove(uid);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<str>> {
        self.group_of.keys()
    }

    /// The pods of every group whose rejecting plugins `may_help` says yes to (in no
    /// particular order: the caller orders them).
    pub fn helped(&self, may_help: impl Fn(&[&'static str]) -> bool) -> Moved {
        self.groups
            .iter()
            .filter(|g| !g.pods.is_empty() && may_help(&g.plugins))
            .flat_map(|g| g.pods.iter().cloned())
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
        assert_eq!(helped[..], [Arc::from("a"), Arc::from("b")]);
        pods.insert("a".into(), &["TaintToleration"]);
        pods.remove("c");
        assert_eq!(
            pods.helped(|plugins| plugins.contains(&"NodeAffinity"))[..],
            [Arc::from("b")]
        );
        assert_eq!(
            pods.helped(|plugins| plugins.contains(&"TaintToleration"))[..],
            [Arc::from("a")]
        );
        pods.remove("a");
        pods.remove("b");
        assert!(pods.groups.iter().all(|g| g.pods.is_empty()) && pods.iter().next().is_none());
        // Groups are kept for the next pods rejected alike.
        pods.insert("d".into(), &["TaintToleration"]);
        assert_eq!(pods.groups.len(), 2);
        assert_eq!(
            pods.helped(|plugins| plugins.contains(&"TaintToleration"))[..],
            [Arc::from("d")]
        );
    }
}
