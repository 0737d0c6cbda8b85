//! A recorded trace ([`gantry_api::trace`]) turned into a simulation's inputs: the
//! cluster as it was when recording started, and each change as a timed event; the
//! bindings the cluster made are kept, to compare with the simulation's.
//!
//! What is replayed: pods created (pending: the simulation schedules them; bound at
//! creation, or later by a scheduler no simulated profile stands for: placed where the
//! cluster put them, at that time), pods deleted or finished (a pod whose phase becomes
//! `Succeeded` or `Failed` leaves, as kube-scheduler's informer sees it), bound pods marked
//! for deletion (`deletionTimestamp`: they keep their room until deleted), nodes added
//! and changed in what scheduling reads of them (relabelled, cordoned, tainted, resized:
//! a heartbeat alone changes nothing), deleted, PodGroups created, ResourceSlices and
//! DeviceClasses published, changed and withdrawn, DeviceTaintRules created, changed and
//! deleted (applied to the slices as the scheduler's tracker applies them), ResourceClaims
//! users created and
//! deleted (one made from a pod's template is the simulation's own claim controller's
//! work), volumes, volume claims, storage classes and CSINodes as recorded (the
//! simulation provisions and binds no volume itself). A pod bound to a node the trace has
//! not added yet (a relist of pods written before the relist of nodes) waits for its node.
//! Every other change (a ResourceClaim's status) is counted in [`Replay::not_replayed`],
//! not applied.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_api::trace::{Op, TraceHeader, TraceReader};
use gantry_api::{Node, Pod, Release};
use gantry_scheduler::OtherNode;
use serde::Serialize;
use serde_json::Value;

#[cfg(test)]
mod tests;

use crate::replay_decode::{Changed, Part, StartObject, decode_record, key_of};
use crate::replay_taints::TaintRules;
use crate::{Placement, SimEvent, StorageChange};

/// A storage object's change as the simulation replays it (`None`: it did not decode to
/// one, as an object the API server would drop).
fn storage_change(
    kind: &str,
    op: Op,
    object: Value,
    position: &str,
    release: Release,
) -> Result<Option<StorageChange>, String> {
    let text = |pointer: &str| {
        let value = object.pointer(pointer).and_then(Value::as_str);
        gantry_api::Sym::new(value.unwrap_or_default())
    };
    if op == Op::Deleted {
        let name = text("/metadata/name");
        return Ok(Some(match kind {
            "PersistentVolumeClaim" => {
                StorageChange::DeleteClaim(text("/metadata/namespace"), name)
            }
            "PersistentVolume" => StorageChange::DeleteVolume(name),
            "StorageClass" => StorageChange::DeleteClass(name),
            _ => StorageChange::DeleteCsiNode(name),
        }));
    }
    let mut objects = decode(object, position, release)?;
    Ok(match kind {
        "PersistentVolumeClaim" => objects.pvcs.pop().map(StorageChange::SetClaim),
        "PersistentVolume" => objects.pvs.pop().map(StorageChange::SetVolume),
        "StorageClass" => objects.storage_classes.pop().map(StorageChange::SetClass),
        _ => objects.csi_nodes.pop().map(StorageChange::SetCsiNode),
    })
}

/// A trace, read.
pub struct Replay {
    pub header: TraceHeader,
    /// The cluster when recording started (not yet admitted).
    pub cluster: ClusterObjects,
    /// The changes, in order.
    pub events: Vec<(Duration, SimEvent)>,
    /// Pods a simulated profile schedules that the cluster bound during the trace.
    pub recorded: Vec<RecordedBinding>,
    /// Changes not applied, by kind and what happened (`Node modified`).
    pub not_replayed: BTreeMap<String, usize>,
    /// When recording ended.
    pub end: Duration,
    /// DeviceTaintRules and the slices they taint, as replaying goes.
    taints: TaintRules,
    /// The release whose API server decodes the objects.
    release: Release,
}

/// A binding the recorded cluster made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordedBinding {
    /// `namespace/name`.
    pub pod: String,
    pub node: String,
    pub at_ms: u64,
}

/// The state a pod of the trace is in, as replaying goes.
struct Known {
    bound: bool,
    simulated: bool,
    /// Marked for deletion (`deletionTimestamp`) once bound.
    terminating: bool,
}

/// What replaying has seen so far.
#[derive(Default)]
struct Seen {
    pods: HashMap<String, Known>,
    /// The nodes, as last added or changed.
    nodes: HashMap<String, Arc<Node>>,
    /// Pods bound to a node not added yet, by node.
    waiting_for_node: HashMap<String, Vec<Arc<Pod>>>,
}

/// A change to replay.
struct Change<'a> {
    kind: &'a str,
    op: Op,
    at: Duration,
    object: Changed,
}

/// Reads the trace in `input` (`source` names it in errors), decoding objects as
/// `release`'s API server does. `simulated` says whether a pod's `schedulerName` is one
/// the simulation schedules.
pub fn read(
    input: impl Read + Send + 'static,
    source: &str,
    release: Release,
    simulated: &dyn Fn(&str) -> bool,
) -> Result<Replay, String> {
    let fail = |e: gantry_api::trace::TraceError| format!("{source}: {e}");
    let (header, mut reader) = TraceReader::open(input).map_err(fail)?;
    let mut replay = Replay {
        header,
        cluster: ClusterObjects::for_release(release),
        events: Vec::new(),
        recorded: Vec::new(),
        not_replayed: BTreeMap::new(),
        end: Duration::ZERO,
        taints: TaintRules::new(release),
        release,
    };
    let mut seen = Seen::default();
    let mut start = Vec::new();
    let mut last_at = 0;
    while !reader.is_done() {
        // Decoding pods and nodes is the other half of the work of replaying a trace, and
        // touches nothing the replay keeps: the reader does it with the parsing, in
        // parallel. Records are replayed in order, and the first error in the trace's
        // order is the one reported.
        let batch = reader.next_batch(|record| decode_record(record, source, release));
        for record in batch.records {
            last_at = record.at;
            let object = match record.object? {
                Part::Start(object) => {
                    start.push((object, format!("record {}", record.number)));
                    continue;
                }
                Part::Change(object) => object,
            };
            if !start.is_empty() {
                let start = std::mem::take(&mut start);
                replay.add_start(start, source, release, simulated, &mut seen)?;
            }
            let position = format!("{source}: record {}", record.number);
            let change = Change {
                kind: &record.kind,
                op: record.op,
                at: Duration::from_millis(record.at),
                object,
            };
            replay
                .change(change, &position, simulated, &mut seen)
                .map_err(|e| format!("{position}: {e}"))?;
        }
        if let Some(error) = batch.error {
            return Err(fail(error));
        }
    }
    if !start.is_empty() {
        replay.add_start(start, source, release, simulated, &mut seen)?;
    }
    replay.cluster.note_source(source);
    replay.end = Duration::from_millis(reader.end_at().unwrap_or(last_at));
    Ok(replay)
}

impl Replay {
    /// The state at the start, once the first change comes: the cluster's objects, and
    /// what replaying must know of its pods and nodes.
    fn add_start(
        &mut self,
        start: Vec<(StartObject, String)>,
        source: &str,
        release: Release,
        simulated: &dyn Fn(&str) -> bool,
        seen: &mut Seen,
    ) -> Result<(), String> {
        note_taint_rules(&mut self.taints, &start, release)?;
        // In the start's order: objects read already join as they are, runs of values
        // are read in parallel batches.
        let mut values = Vec::new();
        let mut start = start.into_iter().peekable();
        while let Some((object, position)) = start.next() {
            match object {
                StartObject::Read(object) => self.cluster.add_read(object),
                StartObject::Value(value) => values.push((value, position)),
            }
            let run_ends = !matches!(start.peek(), Some((StartObject::Value(_), _)));
            if run_ends && !values.is_empty() {
                (self.cluster.add_values(std::mem::take(&mut values), source))
                    .map_err(|e| e.to_string())?;
            }
        }
        for pod in &self.cluster.pods {
            let known = Known {
                bound: pod.node_name.is_some(),
                simulated: simulated(pod.scheduler_name.as_str()),
                terminating: pod.terminating,
            };
            seen.pods.insert(pod.key(), known);
        }
        let nodes = (self.cluster.nodes.iter()).map(|n| (n.name.to_string(), Arc::new(n.clone())));
        seen.nodes.extend(nodes);
        Ok(())
    }

    fn change(
        &mut self,
        change: Change,
        position: &str,
        simulated: &dyn Fn(&str) -> bool,
        seen: &mut Seen,
    ) -> Result<(), String> {
        let Change {
            kind,
            op,
            at,
            object,
        } = change;
        let release = self.release;
        let object = match object {
            Changed::Pod(pod) => {
                if let Some(pod) = pod {
                    self.pod_change(pod, at, simulated, seen);
                }
                return Ok(());
            }
            Changed::PodGone(key) => {
                self.pod_gone(key, at, seen);
                return Ok(());
            }
            Changed::Node(node) => {
                if let Some(node) = node {
                    self.node_change(Arc::new(node), at, seen);
                }
                return Ok(());
            }
            Changed::NodeDeleted(name) => {
                self.node_deleted(&name, at, seen);
                return Ok(());
            }
            Changed::Value(object) => object,
        };
        match (kind, op) {
            ("Pod", Op::Deleted) => self.pod_gone(key_of(&object), at, seen),
            ("Node", Op::Deleted) => {
                let name = object.pointer("/metadata/name").and_then(Value::as_str);
                self.node_deleted(name.unwrap_or_default(), at, seen);
            }
            ("PodGroup", Op::Added) => {
                let mut objects = decode(object, position, release)?;
                if let Some(group) = objects.pod_groups.pop() {
                    self.events
                        .push((at, SimEvent::CreatePodGroup(Arc::new(group))));
                }
                if let Some(group) = objects.coscheduling_groups.pop() {
                    let event = SimEvent::CreateCoschedulingGroup(Arc::new(group));
                    self.events.push((at, event));
                }
            }
            ("ResourceClaim" | "ResourceSlice" | "DeviceClass", _) => {
                if !self.dra_change(kind, op, object, at, position, release)? {
                    self.count_not_replayed(kind, op);
                }
            }
            ("DeviceTaintRule", _) => {
                let deleted = op == Op::Deleted;
                for slice in self.taints.rule_changed(&object, deleted, position)? {
                    self.events.push((at, SimEvent::SetResourceSlice(slice)));
                }
            }
            ("PersistentVolumeClaim" | "PersistentVolume" | "StorageClass" | "CSINode", _) => {
                let change = storage_change(kind, op, object, position, release)?;
                match change {
                    Some(change) => self.events.push((at, SimEvent::Storage(change))),
                    None => self.count_not_replayed(kind, op),
                }
            }
            _ => self.count_not_replayed(kind, op),
        }
        Ok(())
    }

    fn count_not_replayed(&mut self, kind: &str, op: Op) {
        let what = format!("{kind} {}", format!("{op:?}").to_lowercase());
        *self.not_replayed.entry(what).or_default() += 1;
    }

    /// A DRA object changed: slices and device classes as the drivers and admins changed
    /// them; claims users created or deleted. Returns whether it is replayed: a claim's
    /// status (allocation, reservations: the scheduler's and kubelet's work) is not, and a
    /// claim made from a pod's template is the simulation's own claim controller's work
    /// (made when the pod is created, deleted when it goes), so it is left out.
    fn dra_change(
        &mut self,
        kind: &str,
        op: Op,
        object: Value,
        at: Duration,
        position: &str,
        release: Release,
    ) -> Result<bool, String> {
        let name = || {
            let name = object.pointer("/metadata/name").and_then(Value::as_str);
            gantry_api::Sym::new(name.unwrap_or_default())
        };
        let event = match (kind, op) {
            ("ResourceSlice", Op::Deleted) => {
                self.taints.slice_deleted(name());
                SimEvent::DeleteResourceSlice(name())
            }
            ("DeviceClass", Op::Deleted) => SimEvent::DeleteDeviceClass(name()),
            ("ResourceSlice", _) => {
                let slice = decode(object, position, release)?.dra.slices.pop();
                let Some(slice) = slice else {
                    return Ok(false);
                };
                SimEvent::SetResourceSlice(self.taints.slice_published(slice))
            }
            ("DeviceClass", _) => {
                let class = decode(object, position, release)?.dra.device_classes.pop();
                let Some(class) = class else {
                    return Ok(false);
                };
                SimEvent::SetDeviceClass(Arc::new(class))
            }
            ("ResourceClaim", Op::Added | Op::Deleted) => {
                let claim = decode(object, position, release)?.dra.claims.pop();
                let Some(claim) = claim else {
                    return Ok(false);
                };
                if claim.owner_pod.is_some() {
                    return Ok(true);
                }
                match op {
                    Op::Added => SimEvent::CreateClaim(Arc::new(claim)),
                    _ => SimEvent::DeleteClaim(claim.key()),
                }
            }
            _ => return Ok(false),
        };
        self.events.push((at, event));
        Ok(true)
    }

    /// A pod created or changed: created pending, bound by the cluster (kept to compare,
    /// or placed there when no simulated profile schedules it), or changed otherwise.
    fn pod_change(
        &mut self,
        pod: Pod,
        at: Duration,
        simulated: &dyn Fn(&str) -> bool,
        seen: &mut Seen,
    ) {
        let key = pod.key();
        let node = pod.node_name;
        let pod = Arc::new(pod);
        match seen.pods.get_mut(&key) {
            None => {
                let simulated = simulated(pod.scheduler_name.as_str());
                seen.pods.insert(
                    key,
                    Known {
                        bound: node.is_some(),
                        simulated,
                        terminating: false,
                    },
                );
                match node {
                    None => self.events.push((at, SimEvent::CreatePod(pod))),
                    Some(_) => self.placed_elsewhere(pod, at, seen),
                }
            }
            Some(known) if !known.bound && node.is_some() => {
                known.bound = true;
                if known.simulated {
                    self.recorded.push(RecordedBinding {
                        pod: key,
                        node: node.map(|n| n.to_string()).unwrap_or_default(),
                        at_ms: at.as_millis() as u64,
                    });
                } else {
                    self.placed_elsewhere(pod, at, seen);
                }
            }
            Some(known) if known.bound && pod.terminating && !known.terminating => {
                known.terminating = true;
                self.events.push((at, SimEvent::MarkTerminating(key)));
            }
            Some(_) => self.count_not_replayed("Pod", Op::Modified),
        }
    }
}

impl Replay {
    /// A bound pod joins its node, or waits for it to be added.
    fn placed_elsewhere(&mut self, pod: Arc<Pod>, at: Duration, seen: &mut Seen) {
        let node = pod.node_name.map(|n| n.to_string()).unwrap_or_default();
        if seen.nodes.contains_key(&node) {
            self.events.push((at, SimEvent::PlacedElsewhere(pod)));
        } else {
            seen.waiting_for_node.entry(node).or_default().push(pod);
        }
    }

    /// A node added, or changed: an update where scheduling reads something new of it
    /// (a status heartbeat alone is skipped).
    fn node_change(&mut self, node: Arc<Node>, at: Duration, seen: &mut Seen) {
        let name = node.name.to_string();
        match seen.nodes.get(&name) {
            Some(known) if **known == *node => {}
            Some(_) => self.events.push((at, SimEvent::UpdateNode(node.clone()))),
            None => {
                self.events.push((at, SimEvent::AddNode(node.clone())));
                for pod in seen.waiting_for_node.remove(&name).unwrap_or_default() {
                    self.events.push((at, SimEvent::PlacedElsewhere(pod)));
                }
            }
        }
        seen.nodes.insert(name, node);
    }

    fn node_deleted(&mut self, name: &str, at: Duration, seen: &mut Seen) {
        seen.nodes.remove(name);
        let name = gantry_api::Sym::new(name);
        self.events.push((at, SimEvent::DeleteNode(name)));
    }

    /// A pod deleted, or finished.
    fn pod_gone(&mut self, key: String, at: Duration, seen: &mut Seen) {
        for waiting in seen.waiting_for_node.values_mut() {
            waiting.retain(|p| p.key() != key);
        }
        if seen.pods.remove(&key).is_some() {
            self.events.push((at, SimEvent::DeletePod(key)));
        }
    }
}

/// The start state's DeviceTaintRules, then its slices as published (each decoded alone,
/// without the rules), so that later changes of either taint the slices as they should.
fn note_taint_rules(
    taints: &mut TaintRules,
    start: &[(StartObject, String)],
    release: Release,
) -> Result<(), String> {
    let of_kind = |kind: &'static str| {
        start
            .iter()
            .filter_map(move |(object, position)| match object {
                StartObject::Value(v) if v.get("kind").and_then(Value::as_str) == Some(kind) => {
                    Some((v, position))
                }
                _ => None,
            })
    };
    for (object, position) in of_kind("DeviceTaintRule") {
        taints.rule_changed(object, false, position)?;
    }
    for (object, position) in of_kind("ResourceSlice") {
        for slice in decode(object.clone(), position, release)?.dra.slices {
            taints.slice_published(slice);
        }
    }
    Ok(())
}

/// One object, decoded as the release's API server stores it.
fn decode(object: Value, position: &str, release: Release) -> Result<ClusterObjects, String> {
    let mut objects = ClusterObjects::for_release(release);
    objects
        .add_object(object, position)
        .map_err(|e| e.to_string())?;
    Ok(objects)
}

/// How the simulation's placements compare with the bindings the cluster made.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Divergence {
    /// Bindings recorded for pods a simulated profile schedules.
    pub recorded: usize,
    /// Of those, placed on the same node by the simulation.
    pub same_node: usize,
    /// Placed on another node: `(pod, recorded node, simulated node, why)`, the why
    /// being how the pod's cycle judged the recorded node.
    pub other_node: Vec<(String, String, String, String)>,
    /// Those, counted by how the recorded node was judged: `tie`, `score`, the Filter
    /// plugin that refused it, `not searched`, `unknown`.
    pub other_node_by_cause: BTreeMap<String, usize>,
    /// Left pending by the simulation: `(pod, recorded node, the simulation's reason)`.
    pub pending: Vec<(String, String, String)>,
    /// Pods the simulation bound that the cluster had not bound when recording ended.
    pub bound_only_in_simulation: Vec<(String, String)>,
}

impl Divergence {
    /// Compares `placements` (a run of the replay) with the recorded bindings; `judged`
    /// says how the cycles of pods placed elsewhere judged the recorded node
    /// ([`Simulation::recorded_nodes_judged`](crate::Simulation::recorded_nodes_judged)).
    pub fn of(
        recorded: &[RecordedBinding],
        placements: &[Placement],
        judged: &HashMap<String, OtherNode>,
    ) -> Divergence {
        let by_pod: HashMap<String, &Placement> =
            placements.iter().map(|p| (p.pod.to_string(), p)).collect();
        let mut divergence = Divergence {
            recorded: recorded.len(),
            ..Divergence::default()
        };
        for binding in recorded {
            let placement = by_pod.get(&binding.pod);
            match placement.and_then(|p| p.node.as_ref()) {
                Some(node) if **node == *binding.node => divergence.same_node += 1,
                Some(node) => {
                    let why = judged.get(&binding.pod).unwrap_or(&OtherNode::Unknown);
                    *(divergence.other_node_by_cause)
                        .entry(why.kind().to_string())
                        .or_default() += 1;
                    divergence.other_node.push((
                        binding.pod.clone(),
                        binding.node.clone(),
                        node.to_string(),
                        why.to_string(),
                    ));
                }
                None => divergence.pending.push((
                    binding.pod.clone(),
                    binding.node.clone(),
                    placement
                        .and_then(|p| p.reason.clone())
                        .unwrap_or_else(|| "not in the simulation".into()),
                )),
            }
        }
        let recorded_pods: std::collections::HashSet<&str> =
            recorded.iter().map(|b| b.pod.as_str()).collect();
        for placement in placements {
            let pod = placement.pod.to_string();
            if let Some(node) = &placement.node
                && !recorded_pods.contains(pod.as_str())
                && placement.reason.is_none()
            {
                divergence
                    .bound_only_in_simulation
                    .push((pod, node.to_string()));
            }
        }
        divergence
    }

    /// The share of recorded bindings the simulation reproduced (1 when none were made).
    pub fn reproduced(&self) -> f64 {
        if self.recorded == 0 {
            1.0
        } else {
            self.same_node as f64 / self.recorded as f64
        }
    }
}
