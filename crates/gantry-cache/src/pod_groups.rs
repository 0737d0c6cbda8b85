//! Which pods each PodGroup has and how far each got: upstream's `podGroupState`
//! (`backend/cache/podgroupstate.go`), which its cache keeps from the pod events and from
//! assume and forget. GangScheduling reads it: PreEnqueue counts all members, Permit the
//! scheduled ones (assumed or assigned). Ordered maps, so that nothing visible depends on
//! a hash order.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use gantry_api::{Pod, PodGroup, Sym};
use parking_lot::Mutex;

/// A PodGroup's identity: its namespace and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKey {
    pub namespace: Sym,
    pub name: Sym,
}

impl GroupKey {
    /// The group a pod names, if it names one.
    pub fn of(pod: &Pod) -> Option<GroupKey> {
        pod.scheduling_group.map(|name| GroupKey {
            namespace: pod.namespace,
            name,
        })
    }

    pub fn of_group(group: &PodGroup) -> GroupKey {
        GroupKey {
            namespace: group.namespace,
            name: group.name,
        }
    }
}

impl std::fmt::Display for GroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// How far a member got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Pending: in the queue, or being scheduled.
    Unscheduled,
    /// Assumed onto a node, not yet bound.
    Assumed,
    /// Bound to a node.
    Assigned,
}

#[derive(Debug, Clone)]
struct Member {
    pod: Arc<Pod>,
    stage: Stage,
}

/// How many members a group has at each stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCounts {
    pub unscheduled: usize,
    pub assumed: usize,
    pub assigned: usize,
}

impl GroupCounts {
    /// Every member (upstream's `AllPodsCount`).
    pub fn all(&self) -> usize {
        self.unscheduled + self.assumed + self.assigned
    }

    /// Members assumed or bound (upstream's `ScheduledPodsCount`).
    pub fn scheduled(&self) -> usize {
        self.assumed + self.assigned
    }
}

/// The PodGroup objects and their members.
#[derive(Debug, Default)]
pub struct PodGroupStates {
    groups: BTreeMap<GroupKey, Arc<PodGroup>>,
    members: BTreeMap<GroupKey, BTreeMap<Arc<str>, Member>>,
    /// The group of each member, by uid (looked up, never iterated).
    group_of: HashMap<Arc<str>, GroupKey>,
}

/// The states as the cache and the queue share them.
pub type SharedPodGroups = Arc<Mutex<PodGroupStates>>;

impl PodGroupStates {
    /// A PodGroup object was created or changed.
    pub fn set_group(&mut self, group: Arc<PodGroup>) {
        self.groups.insert(GroupKey::of_group(&group), group);
    }

    /// A PodGroup object was deleted (its members stay members).
    pub fn remove_group(&mut self, key: GroupKey) {
        self.groups.remove(&key);
    }

    pub fn group(&self, key: GroupKey) -> Option<&Arc<PodGroup>> {
        self.groups.get(&key)
    }

    /// Every PodGroup object, in key order.
    pub fn groups(&self) -> impl Iterator<Item = &Arc<PodGroup>> {
        self.groups.values()
    }

    /// A pod that names a group appeared (pending, or bound by someone else).
    pub fn add_member(&mut self, pod: Arc<Pod>) {
        let Some(key) = GroupKey::of(&pod) else {
            return;
        };
        let stage = if pod.node_name.is_some() {
            Stage::Assigned
        } else {
            Stage::Unscheduled
        };
        self.group_of.insert(pod.uid.clone(), key);
        self.members
            .entry(key)
            .or_default()
            .insert(pod.uid.clone(), Member { pod, stage });
    }

    /// A member was deleted.
    pub fn remove_member(&mut self, uid: &str) {
        let Some(key) = self.group_of.remove(uid) else {
            return;
        };
        if let Some(members) = self.members.get_mut(&key) {
            members.remove(uid);
            if members.is_empty() {
                self.members.remove(&key);
            }
        }
    }

    /// The member was assumed onto a node (the pod as assumed, naming it).
    pub fn assume(&mut self, pod: &Arc<Pod>) {
        self.set_stage(pod, Stage::Assumed);
    }

    /// An assumed member was forgotten: it is pending again.
    pub fn forget(&mut self, pod: &Arc<Pod>) {
        if self.stage(&pod.uid) == Some(Stage::Assumed) {
            self.set_stage(pod, Stage::Unscheduled);
        }
    }

    /// A member was bound (or a bound pod of a group was first seen).
    pub fn bound(&mut self, pod: &Arc<Pod>) {
        if self.stage(&pod.uid).is_none() {
            self.add_member(pod.clone());
        } else {
            self.set_stage(pod, Stage::Assigned);
        }
    }

    pub fn stage(&self, uid: &str) -> Option<Stage> {
        let key = self.group_of.get(uid)?;
        Some(self.members.get(key)?.get(uid)?.stage)
    }

    pub fn counts(&self, key: GroupKey) -> GroupCounts {
        let mut counts = GroupCounts::default();
        for member in self.members.get(&key).into_iter().flat_map(|m| m.values()) {
            match member.stage {
                Stage::Unscheduled => counts.unscheduled += 1,
                Stage::Assumed => counts.assumed += 1,
                Stage::Assigned => counts.assigned += 1,
            }
        }
        counts
    }

    /// The group's members at `stage`, in uid order.
    pub fn members_at(&self, key: GroupKey, stage: Stage) -> Vec<Arc<Pod>> {
        self.members
            .get(&key)
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|m| m.stage == stage)
            .map(|m| m.pod.clone())
            .collect()
    }

    fn set_stage(&mut self, pod: &Arc<Pod>, stage: Stage) {
        let Some(key) = self.group_of.get(&pod.uid) else {
            return;
        };
        if let Some(member) = self.members.get_mut(key).and_then(|m| m.get_mut(&pod.uid)) {
            member.stage = stage;
            if stage != Stage::Unscheduled {
                member.pod = pod.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str) -> Arc<Pod> {
        let mut pod = Pod::new("default", name);
        pod.scheduling_group = Some(Sym::new("g"));
        Arc::new(pod)
    }

    fn key() -> GroupKey {
        GroupKey {
            namespace: Sym::new("default"),
            name: Sym::new("g"),
        }
    }

    /// Upstream's podGroupStateData: assume moves a pending member to assumed, forget back,
    /// bind to assigned; deleting a member forgets it wherever it was.
    #[test]
    fn members_move_through_the_stages_as_upstream_counts_them() {
        let mut states = PodGroupStates::default();
        let (a, b) = (member("a"), member("b"));
        states.add_member(a.clone());
        states.add_member(b.clone());
        states.add_member(Arc::new(Pod::new("default", "loner")));
        assert_eq!(states.counts(key()).all(), 2);
        let assumed_a = Arc::new(a.bound_to(Sym::new("n1")));
        states.assume(&assumed_a);
        assert_eq!(states.counts(key()).scheduled(), 1);
        assert_eq!(
            states.members_at(key(), Stage::Unscheduled),
            vec![b.clone()]
        );
        states.forget(&assumed_a);
        assert_eq!(states.counts(key()).scheduled(), 0);
        states.assume(&assumed_a);
        states.bound(&assumed_a);
        assert_eq!(
            states.counts(key()),
            GroupCounts {
                unscheduled: 1,
                assumed: 0,
                assigned: 1
            }
        );
        // Forgetting a bound member changes nothing.
        states.forget(&assumed_a);
        assert_eq!(states.counts(key()).assigned, 1);
        states.remove_member(&a.uid);
        states.remove_member(&b.uid);
        assert_eq!(states.counts(key()).all(), 0);
        // A bound member seen first counts as assigned.
        states.bound(&Arc::new(member("c").bound_to(Sym::new("n2"))));
        assert_eq!(states.counts(key()).assigned, 1);
    }
}
