//! The pods preemption nominated to nodes, which later pods' filters must leave room for
//! (upstream's `nominator`: pods by node, and each pod's node).

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::{Pod, Sym};

/// Pods by the node they are nominated to, and each pod's node by UID, so that forgetting
/// a nomination (every bind does) touches one node's list, not every node's.
#[derive(Default)]
pub struct Nominations {
    by_node: HashMap<Sym, Vec<Arc<Pod>>, RandomState>,
    node_of: HashMap<Arc<str>, Sym, RandomState>,
}

impl Nominations {
    /// The pods nominated to `node`, in nomination order.
    pub fn on(&self, node: Sym) -> &[Arc<Pod>] {
        self.by_node.get(&node).map_or(&[], |pods| pods)
    }

    /// Whether no pod is nominated anywhere (filters then skip the lookups per node).
    pub fn is_empty(&self) -> bool {
        self.node_of.is_empty()
    }

    /// Nominates `pod` to `node`, replacing any earlier nomination of it.
    pub fn nominate(&mut self, pod: Arc<Pod>, node: Sym) {
        self.forget(&pod.uid);
        self.node_of.insert(Arc::clone(&pod.uid), node);
        self.by_node.entry(node).or_default().push(pod);
    }

    /// Forgets the pod's nomination, if it has one (it was bound, deleted or nominated
    /// elsewhere).
    pub fn forget(&mut self, uid: &str) {
        let Some(node) = self.node_of.remove(uid) else {
            return;
        };
        if let Some(pods) = self.by_node.get_mut(&node) {
            pods.retain(|p| &*p.uid != uid);
            if pods.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str) -> Arc<Pod> {
        let mut pod = Pod::new("default", uid);
        pod.uid = uid.into();
        Arc::new(pod)
    }

    fn uids(nominations: &Nominations, node: Sym) -> Vec<&str> {
        nominations.on(node).iter().map(|p| &*p.uid).collect()
    }

    #[test]
    fn a_pod_is_nominated_to_one_node_at_a_time() {
        let (a, b) = (Sym::new("a"), Sym::new("b"));
        let mut nominations = Nominations::default();
        assert!(nominations.is_empty());
        nominations.nominate(pod("p1"), a);
        nominations.nominate(pod("p2"), a);
        assert_eq!(uids(&nominations, a), ["p1", "p2"]);
        // Nominated again elsewhere: the first node forgets it.
        nominations.nominate(pod("p1"), b);
        assert_eq!(uids(&nominations, a), ["p2"]);
        assert_eq!(uids(&nominations, b), ["p1"]);
        nominations.forget("p2");
        nominations.forget("p2");
        nominations.forget("never-nominated");
        assert!(nominations.on(a).is_empty());
        assert!(!nominations.is_empty());
        nominations.forget("p1");
        assert!(nominations.is_empty());
        assert!(nominations.by_node.is_empty(), "empty lists are dropped");
    }
}
