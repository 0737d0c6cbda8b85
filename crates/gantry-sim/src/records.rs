//! What became of each pod the simulation was given: its placement line (where it went, or
//! why not) and its history (when it arrived and was bound, how often it was tried), in the
//! order the pods arrived.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::{Pod, Sym};
use serde::{Serialize, Serializer};

/// Where one pod went, in the format of the parity scenarios' `expected.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub pod: PodName,
    pub node: Option<NodeName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evicted: Vec<String>,
    /// The annotations the scheduler wrote on the pod (HAMi's card assignment).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A pod's `namespace/name` in a placement line, kept as the parts the pod already
/// shares: recording a pod's arrival copies no string.
#[derive(Clone, PartialEq, Eq)]
pub struct PodName {
    pub namespace: Sym,
    pub name: Arc<str>,
}

impl PodName {
    pub fn of(pod: &Pod) -> PodName {
        PodName {
            namespace: pod.namespace,
            name: pod.name.clone(),
        }
    }
}

impl From<&str> for PodName {
    /// `namespace/name` (a name alone is in `default`), as placement lines write it.
    fn from(key: &str) -> PodName {
        let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
        PodName {
            namespace: Sym::new(namespace),
            name: name.into(),
        }
    }
}

impl fmt::Display for PodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl fmt::Debug for PodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

impl PartialEq<str> for PodName {
    fn eq(&self, key: &str) -> bool {
        key.split_once('/')
            .is_some_and(|(namespace, name)| self.namespace == *namespace && *self.name == *name)
    }
}

impl PartialEq<&str> for PodName {
    fn eq(&self, key: &&str) -> bool {
        *self == **key
    }
}

impl Serialize for PodName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A node's name in a placement line: interned, so recording a binding copies nothing.
/// It reads as the name (`placement.node.as_deref()` is an `Option<&str>`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeName(pub Sym);

impl Deref for NodeName {
    type Target = str;
    fn deref(&self) -> &str {
        self.0.as_str()
    }
}

impl From<&str> for NodeName {
    fn from(name: &str) -> NodeName {
        NodeName(Sym::new(name))
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl fmt::Debug for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl Serialize for NodeName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self)
    }
}

/// Where a pod stands at the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PodStatus {
    /// Not bound (yet): waiting, unschedulable, or deleted before it was bound.
    Pending,
    /// Bound to a node (it may have been evicted or deleted since).
    Bound,
    /// Held back by PreEnqueue (scheduling gates, a gang short of members, claims not
    /// there yet); never tried.
    Gated,
    /// Its `schedulerName` matches no profile: another scheduler's pod, never queued.
    OtherScheduler,
    /// Its attempts kept erroring or its binds kept failing, so the simulation stopped
    /// trying (see `MAX_FAILED_ATTEMPTS`).
    GivenUp,
}

/// The history of one pod, in virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PodHistory {
    pub status: PodStatus,
    pub arrived: Duration,
    /// When its bind completed.
    pub bound: Option<Duration>,
    /// Scheduling attempts.
    pub attempts: u32,
    /// Attempts that errored, and binds that failed.
    pub failures: u32,
    /// Evicted to make room for a higher-priority pod.
    pub preempted: bool,
}

/// The simulation found a second object where the API server would refuse one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pod {0} is created twice: two pods with one namespace and name")]
pub struct DuplicatePod(pub String);

/// A PodGroup's `PodGroupScheduled` condition, as the scheduler last wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupCondition {
    /// `True` or `False`.
    pub status: &'static str,
    /// `Scheduled`, `Unschedulable` or `SchedulerError`.
    pub reason: &'static str,
    pub message: String,
}

/// What became of one PodGroup: its condition, and when it was first scheduled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupRecord {
    #[serde(rename = "podGroup")]
    pub group: String,
    /// The condition, once a pod-group cycle ran (upstream writes none before).
    pub condition: Option<GroupCondition>,
    /// Pod-group cycles run for it.
    pub cycles: u32,
    /// When it was created (zero for those there at the start).
    pub created_at: Duration,
    /// When a cycle first scheduled it.
    pub scheduled_at: Option<Duration>,
}

impl GroupRecord {
    /// How long the group waited from its creation to its members' placement (the quorum
    /// bound together), once scheduled.
    pub fn time_to_placement(&self) -> Option<Duration> {
        self.scheduled_at
            .map(|at| at.saturating_sub(self.created_at))
    }
}

#[derive(Default)]
pub(crate) struct PodRecords {
    placements: Vec<Placement>,
    histories: Vec<PodHistory>,
    /// PodGroups by `namespace/name`.
    groups: BTreeMap<String, GroupRecord>,
    /// Pods held back by PreEnqueue until an event lets them in, by index.
    held_until_event: Vec<usize>,
    uids: Vec<Arc<str>>,
    by_uid: HashMap<Arc<str>, usize>,
    /// Every pod by namespace and name (the name shared with the pod), with its uid:
    /// those given to the simulation and those bound before it started.
    by_name: HashMap<(Sym, Arc<str>), Arc<str>>,
}

impl PodRecords {
    /// Records a pod bound before the simulation started (deletions find it by name).
    pub fn add_bound(&mut self, pod: &Pod) {
        self.by_name
            .insert((pod.namespace, pod.name.clone()), pod.uid.clone());
    }

    /// Records a new pod; its placement line comes after those of the pods before it.
    pub fn arrive(&mut self, pod: &Pod, at: Duration) -> Result<usize, DuplicatePod> {
        let name = (pod.namespace, pod.name.clone());
        if self.by_uid.contains_key(&pod.uid) || self.by_name.contains_key(&name) {
            return Err(DuplicatePod(pod.key()));
        }
        self.by_name.insert(name, pod.uid.clone());
        let index = self.placements.len();
        self.by_uid.insert(pod.uid.clone(), index);
        self.uids.push(pod.uid.clone());
        self.placements.push(Placement {
            pod: PodName::of(pod),
            node: None,
            reason: None,
            evicted: Vec::new(),
            annotations: BTreeMap::new(),
        });
        self.histories.push(PodHistory {
            status: PodStatus::Pending,
            arrived: at,
            bound: None,
            attempts: 0,
            failures: 0,
            preempted: false,
        });
        Ok(index)
    }

    pub fn index(&self, uid: &str) -> Option<usize> {
        self.by_uid.get(uid).copied()
    }

    /// The pod named `namespace/name` was deleted: a new pod may take its name (its
    /// placement line stays).
    pub fn release_name(&mut self, key: &str) {
        let Some((namespace, name)) = key.split_once('/') else {
            return;
        };
        if let Some(namespace) = Sym::get(namespace) {
            self.by_name.remove(&(namespace, Arc::from(name)));
        }
    }

    /// The uid of the pod named `namespace/name`.
    pub fn uid_of(&self, key: &str) -> Option<Arc<str>> {
        let (namespace, name) = key.split_once('/')?;
        self.by_name
            .get(&(Sym::get(namespace)?, Arc::from(name)))
            .cloned()
    }

    /// A pod of another scheduler was bound to `node` (a replayed trace's): its line
    /// names the node, with why the simulation did not place it.
    pub fn bound_elsewhere(&mut self, index: usize, node: Sym) {
        self.histories[index].status = PodStatus::OtherScheduler;
        self.placements[index].node = Some(NodeName(node));
        self.placements[index].reason = Some("bound by another scheduler".into());
    }

    /// Sets the pod's status and the reason it is not bound.
    pub fn set_pending(&mut self, index: usize, status: PodStatus, reason: String) {
        self.histories[index].status = status;
        self.placements[index].reason = Some(reason);
    }

    /// A PodGroup was created at `at` (or a cycle ran then for one the run did not create).
    pub fn add_group(&mut self, group: gantry_cache::GroupKey, at: Duration) -> &mut GroupRecord {
        let key = group.to_string();
        self.groups.entry(key.clone()).or_insert(GroupRecord {
            group: key,
            condition: None,
            cycles: 0,
            created_at: at,
            scheduled_at: None,
        })
    }

    /// A pod-group cycle's outcome becomes the group's condition, except that a group
    /// once scheduled is never set back to `False` (upstream's `updatePodGroupCondition`).
    pub fn set_group_outcome(
        &mut self,
        group: gantry_cache::GroupKey,
        outcome: &gantry_scheduler::GroupOutcome,
        at: Duration,
    ) {
        use gantry_scheduler::GroupOutcome;
        let record = self.add_group(group, at);
        record.cycles += 1;
        let condition = match outcome {
            GroupOutcome::Scheduled => GroupCondition {
                status: "True",
                reason: "Scheduled",
                message: String::new(),
            },
            GroupOutcome::Unschedulable(message) => GroupCondition {
                status: "False",
                reason: "Unschedulable",
                message: message.clone(),
            },
            GroupOutcome::Error(message) => GroupCondition {
                status: "False",
                reason: "SchedulerError",
                message: message.clone(),
            },
        };
        let was_scheduled = record
            .condition
            .as_ref()
            .is_some_and(|c| c.status == "True");
        if was_scheduled && condition.status != "True" {
            return;
        }
        if condition.status == "True" {
            record.scheduled_at.get_or_insert(at);
        }
        record.condition = Some(condition);
    }

    /// A pod is held back by PreEnqueue until an event lets it in (its group missing, its
    /// gang short of `minCount`, a claim not there yet), for this reason.
    pub fn hold_until_event(&mut self, index: usize, reason: String) {
        self.set_pending(index, PodStatus::Gated, reason);
        self.held_until_event.push(index);
    }

    /// Held members that `released` says the queue let in are pending again.
    pub fn release_held(&mut self, released: impl Fn(&str) -> bool) {
        let histories = &mut self.histories;
        let placements = &mut self.placements;
        let uids = &self.uids;
        self.held_until_event.retain(|&i| {
            if histories[i].status != PodStatus::Gated || released(&uids[i]) {
                if histories[i].status == PodStatus::Gated {
                    histories[i].status = PodStatus::Pending;
                    placements[i].reason = None;
                }
                return false;
            }
            true
        });
    }

    /// Every PodGroup a cycle ran for, by `namespace/name`.
    pub fn groups(&self) -> impl Iterator<Item = &GroupRecord> {
        self.groups.values()
    }

    pub fn set_reason(&mut self, index: usize, reason: String) {
        self.placements[index].reason = Some(reason);
    }

    pub fn set_bound(&mut self, index: usize, node: Sym, at: Duration) {
        let placement = &mut self.placements[index];
        placement.node = Some(NodeName(node));
        placement.reason = None;
        let history = &mut self.histories[index];
        history.status = PodStatus::Bound;
        history.bound = Some(at);
    }

    pub fn history_mut(&mut self, index: usize) -> &mut PodHistory {
        &mut self.histories[index]
    }

    pub fn placement_mut(&mut self, index: usize) -> &mut Placement {
        &mut self.placements[index]
    }

    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }

    pub fn histories(&self) -> &[PodHistory] {
        &self.histories
    }

    pub fn uid(&self, index: usize) -> &Arc<str> {
        &self.uids[index]
    }

    /// Pods with this status.
    pub fn count(&self, status: PodStatus) -> usize {
        self.histories.iter().filter(|h| h.status == status).count()
    }
}
