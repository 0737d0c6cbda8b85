//! Which pods each PodGroup has and how far each got: upstream's `podGroupState`
//! (`backend/cache/podgroupstate.go`), which its cache keeps from the pod events and from
//! assume and forget. GangScheduling reads it: PreEnqueue counts all members, Permit the
//! scheduled ones (assumed or assigned). scheduler-plugins' Coscheduling reads the same of
//! the pods its label groups, and keeps what its `PodGroupManager` remembers here. Ordered
//! maps, so that nothing visible depends on a hash order.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use gantry_api::coscheduling::CoschedulingGroup;
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

    /// The Coscheduling group a pod's `scheduling.x-k8s.io/pod-group` label names.
    pub fn labelled(pod: &Pod) -> Option<GroupKey> {
        gantry_api::coscheduling::group_name(pod).map(|name| GroupKey {
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

/// Pods grouped by a key read from the pod, and how far each got.
#[derive(Debug, Default)]
struct Memberships {
    members: BTreeMap<GroupKey, BTreeMap<Arc<str>, Member>>,
    /// The group of each member, by uid (looked up, never iterated).
    group_of: HashMap<Arc<str>, GroupKey>,
}

impl Memberships {
    fn add(&mut self, key: GroupKey, pod: Arc<Pod>) {
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

    fn remove(&mut self, uid: &str) {
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

    fn stage(&self, uid: &str) -> Option<Stage> {
        let key = self.group_of.get(uid)?;
        Some(self.members.get(key)?.get(uid)?.stage)
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

    /// Assumed, forgotten or bound, as [`PodGroupStates`] says.
    fn track(&mut self, pod: &Arc<Pod>, event: Track, key: impl FnOnce() -> Option<GroupKey>) {
        match (event, self.stage(&pod.uid)) {
            (Track::Assume, _) => self.set_stage(pod, Stage::Assumed),
            (Track::Forget, Some(Stage::Assumed)) => self.set_stage(pod, Stage::Unscheduled),
            (Track::Forget, _) => {}
            (Track::Bound, None) => {
                if let Some(key) = key() {
                    self.add(key, pod.clone());
                }
            }
            (Track::Bound, Some(_)) => self.set_stage(pod, Stage::Assigned),
        }
    }

    fn members(&self, key: GroupKey) -> impl Iterator<Item = &Member> {
        self.members.get(&key).into_iter().flat_map(|m| m.values())
    }

    fn counts(&self, key: GroupKey) -> GroupCounts {
        let mut counts = GroupCounts::default();
        for member in self.members(key) {
            match member.stage {
                Stage::Unscheduled => counts.unscheduled += 1,
                Stage::Assumed => counts.assumed += 1,
                Stage::Assigned => counts.assigned += 1,
            }
        }
        counts
    }
}

#[derive(Debug, Clone, Copy)]
enum Track {
    Assume,
    Forget,
    Bound,
}

/// What Coscheduling remembers of a group between cycles (its `PodGroupManager`'s
/// caches), in the simulation's time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoschedulingMemory {
    /// `lastFailedSchedulePG`: when the group last failed; the queue orders its pods by
    /// this rather than by the group's creation while it is set.
    pub failed_at: Option<Duration>,
    /// `backedOffPG`: PreFilter refuses the group's pods until then.
    pub backed_off_until: Option<Duration>,
    /// `permittedPG`: the group passed the minResources check, which is not redone
    /// until then.
    pub permitted_until: Option<Duration>,
}

/// The PodGroup objects and their members: kube-scheduler's (`spec.schedulingGroup`) and
/// scheduler-plugins' Coscheduling groups (the `scheduling.x-k8s.io/pod-group` label).
#[derive(Debug, Default)]
pub struct PodGroupStates {
    groups: BTreeMap<GroupKey, Arc<PodGroup>>,
    members: Memberships,
    coscheduling_groups: BTreeMap<GroupKey, Arc<CoschedulingGroup>>,
    /// When each Coscheduling group was created, in nanoseconds on the scheduler's clock
    /// (negative: before it began), which the queue orders groups by.
    coscheduling_created: BTreeMap<GroupKey, i128>,
    /// Every pod carrying the label, whether its group exists or not.
    labelled: Memberships,
    coscheduling_memory: BTreeMap<GroupKey, CoschedulingMemory>,
}

/// The states as the cache and the queue share them.
pub type SharedPodGroups = Arc<Mutex<PodGroupStates>>;

impl PodGroupStates {
    /// Whether the pod belongs to a group of either kind (and is to be added as a member).
    pub fn is_member(pod: &Pod) -> bool {
        GroupKey::of(pod).is_some() || GroupKey::labelled(pod).is_some()
    }

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

    /// A Coscheduling PodGroup was created (at `created`, nanoseconds on the scheduler's
    /// clock, negative before it began) or changed.
    pub fn set_coscheduling_group(&mut self, group: Arc<CoschedulingGroup>, created: i128) {
        let key = GroupKey {
            namespace: group.namespace,
            name: group.name,
        };
        self.coscheduling_groups.insert(key, group);
        self.coscheduling_created.entry(key).or_insert(created);
    }

    /// A Coscheduling PodGroup was deleted: its pods name a group that does not exist.
    pub fn remove_coscheduling_group(&mut self, key: GroupKey) {
        self.coscheduling_groups.remove(&key);
        self.coscheduling_created.remove(&key);
        self.coscheduling_memory.remove(&key);
    }

    /// The Coscheduling groups, in key order.
    pub fn coscheduling_keys(&self) -> impl Iterator<Item = GroupKey> + '_ {
        self.coscheduling_groups.keys().copied()
    }

    /// When the Coscheduling group was created (see [`Self::set_coscheduling_group`]).
    pub fn coscheduling_created(&self, key: GroupKey) -> Option<i128> {
        self.coscheduling_created.get(&key).copied()
    }

    pub fn coscheduling_group(&self, key: GroupKey) -> Option<&Arc<CoschedulingGroup>> {
        self.coscheduling_groups.get(&key)
    }

    /// What Coscheduling remembers of the group.
    pub fn coscheduling_memory(&self, key: GroupKey) -> CoschedulingMemory {
        self.coscheduling_memory
            .get(&key)
            .copied()
            .unwrap_or_default()
    }

    pub fn coscheduling_memory_mut(&mut self, key: GroupKey) -> &mut CoschedulingMemory {
        self.coscheduling_memory.entry(key).or_default()
    }

    /// Forgets the backoffs and permits that ended before `now` (go-cache entries expire).
    pub fn expire_coscheduling_memory(&mut self, now: Duration) {
        self.coscheduling_memory.retain(|_, memory| {
            memory.backed_off_until = memory.backed_off_until.filter(|&until| until >= now);
            memory.permitted_until = memory.permitted_until.filter(|&until| until >= now);
            *memory != CoschedulingMemory::default()
        });
    }

    /// A pod of a group appeared (pending, or bound by someone else), or changed.
    pub fn add_member(&mut self, pod: Arc<Pod>) {
        if let Some(key) = GroupKey::labelled(&pod) {
            self.labelled.add(key, pod.clone());
        }
        if let Some(key) = GroupKey::of(&pod) {
            self.members.add(key, pod);
        }
    }

    /// A member was deleted.
    pub fn remove_member(&mut self, uid: &str) {
        self.members.remove(uid);
        self.labelled.remove(uid);
    }

    /// The member was assumed onto a node (the pod as assumed, naming it).
    pub fn assume(&mut self, pod: &Arc<Pod>) {
        self.track(pod, Track::Assume);
    }

    /// An assumed member was forgotten: it is pending again.
    pub fn forget(&mut self, pod: &Arc<Pod>) {
        self.track(pod, Track::Forget);
    }

    /// A member was bound (or a bound pod of a group was first seen).
    pub fn bound(&mut self, pod: &Arc<Pod>) {
        self.track(pod, Track::Bound);
    }

    fn track(&mut self, pod: &Arc<Pod>, event: Track) {
        self.members.track(pod, event, || GroupKey::of(pod));
        self.labelled.track(pod, event, || GroupKey::labelled(pod));
    }

    pub fn stage(&self, uid: &str) -> Option<Stage> {
        self.members.stage(uid)
    }

    /// The PodGroup a member names (`spec.schedulingGroup`).
    pub fn group_of(&self, uid: &str) -> Option<GroupKey> {
        self.members.group_of.get(uid).copied()
    }

    pub fn counts(&self, key: GroupKey) -> GroupCounts {
        self.members.counts(key)
    }

    /// The group's members at `stage`, in uid order.
    pub fn members_at(&self, key: GroupKey, stage: Stage) -> Vec<Arc<Pod>> {
        self.members
            .members(key)
            .filter(|m| m.stage == stage)
            .map(|m| m.pod.clone())
            .collect()
    }

    /// How many pods carry the Coscheduling label of `key`, at each stage.
    pub fn labelled_counts(&self, key: GroupKey) -> GroupCounts {
        self.labelled.counts(key)
    }

    /// The pods carrying the Coscheduling label of `key` (any stage), in uid order.
    /// The UIDs of the labelled group's pending members other than `except` (the
    /// siblings Coscheduling's Permit moves to the active queue).
    pub fn pending_siblings(&self, key: GroupKey, except: &str) -> Vec<Arc<str>> {
        (self.labelled_members(key))
            .filter(|p| &*p.uid != except && p.node_name.is_none())
            .map(|p| p.uid.clone())
            .collect()
    }

    pub fn labelled_members(&self, key: GroupKey) -> impl Iterator<Item = &Arc<Pod>> {
        self.labelled.members(key).map(|m| &m.pod)
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
