//! The cache that event handlers write and each scheduling cycle snapshots.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use foldhash::fast::RandomState;
use gantry_api::{Node, Pod, Sym};
use parking_lot::Mutex;
use smallvec::SmallVec;
use thiserror::Error;

use crate::dra_cache::DraCache;
use crate::node_info::{ImageState, NodeInfo, PvcKey};
use crate::node_tree::NodeTree;
use crate::pod_groups::{PodGroupStates, SharedPodGroups};
use crate::snapshot::{Snapshot, SnapshotError, SnapshotUpdate};
use gantry_api::dra::{ResourceClaim, ResourceSlice};

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CacheError {
    #[error("pod {pod} is already in the cache, so it can't be assumed or added again")]
    PodExists { pod: String },
    #[error("pod {pod} is not in the cache")]
    PodNotFound { pod: String },
    #[error("pod {pod} is not assumed, so it can't be forgotten or finish binding")]
    PodNotAssumed { pod: String },
    #[error("pod {pod} is assumed, so it can't be updated or removed before it is added")]
    PodAssumed { pod: String },
    #[error("pod {pod} was assumed on node {cached} but the request names node {requested}")]
    NodeMismatch {
        pod: String,
        cached: Sym,
        requested: Sym,
    },
    /// The pod was seen bound to another node than the one asked for: an earlier try's
    /// bind landed (its answer lost) while a later try on another node was refused.
    #[error("pod {pod} is bound to node {bound}, not node {requested}: an earlier bind landed")]
    BoundElsewhere {
        pod: String,
        bound: Sym,
        requested: Sym,
    },
    #[error("pod {pod} names no node")]
    PodWithoutNode { pod: String },
    #[error("node {node} is not in the cache")]
    NodeNotFound { node: Sym },
}

type Map<K, V> = HashMap<K, V, RandomState>;

/// One entry of the recency-ordered doubly linked list (indices into `CacheState::entries`).
#[derive(Debug, Clone)]
struct Entry {
    name: Sym,
    /// Shared with the snapshots that copied it; a change copies it first (copy on
    /// write), so a snapshot update copies pointers, and a NodeInfo is copied once per
    /// change, not once per snapshot that takes it.
    info: Arc<NodeInfo>,
    prev: Option<u32>,
    next: Option<u32>,
}

impl Entry {
    fn info_mut(&mut self) -> &mut NodeInfo {
        Arc::make_mut(&mut self.info)
    }
}

/// A cached pod as the key of the pod map, hashed and compared by its uid (and looked up
/// by a `&str` uid): a million pods cost a pointer and a node name each, not a copy of
/// the uid besides.
#[derive(Debug, Clone)]
struct ByUid(Arc<Pod>);

impl PartialEq for ByUid {
    fn eq(&self, other: &ByUid) -> bool {
        self.0.uid == other.0.uid
    }
}

impl Eq for ByUid {}

impl std::hash::Hash for ByUid {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `str` hashes, so that lookups by `&str` find it.
        (*self.0.uid).hash(state);
    }
}

impl std::borrow::Borrow<str> for ByUid {
    fn borrow(&self) -> &str {
        &self.0.uid
    }
}

/// What the cache knows of a pod it assumed and that no add event confirmed yet.
#[derive(Debug, Default, Clone)]
struct Assumed {
    binding_finished: bool,
    /// When the pod expires, its binding finished (only with a TTL).
    deadline: Option<Instant>,
}

#[derive(Debug, Clone)]
struct ImageNodes {
    size_bytes: i64,
    nodes: HashSet<Sym, RandomState>,
}

#[derive(Debug, Default, Clone)]
struct CacheState {
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
    by_name: Map<Sym, u32>,
    /// Most recently changed node first.
    head: Option<u32>,
    tree: NodeTree,
    /// Bumped whenever the tree's order changes, so snapshots know to re-list.
    tree_version: u64,
    /// Every cached pod, with the node it is on in the cache.
    pods: Map<ByUid, Sym>,
    assumed: Map<Arc<str>, Assumed>,
    images: Map<Sym, ImageNodes>,
    /// Claim reference changes not yet applied to the snapshot that last consumed them.
    pvc_delta: Map<PvcKey, i64>,
    pvc_consumer: Option<u64>,
    /// Node-local ResourceSlices by node, kept apart from the NodeInfos so that a node
    /// that arrives after its slices, or comes back, finds them.
    local_slices: Map<Sym, Vec<Arc<ResourceSlice>>>,
    /// The node of each node-local slice, by the slice's name: replacing or deleting one
    /// of 100,000 slices must not look through every node's.
    slice_nodes: Map<Sym, Sym>,
}

/// The scheduler cache. Event handlers write under one lock; `update_snapshot` holds it
/// only for the copy of what changed; a scheduling cycle reads its snapshot lock-free.
#[derive(Default)]
pub struct Cache {
    state: Mutex<CacheState>,
    assumed_ttl: Option<Duration>,
    /// Claims, classes and shared slices: every snapshot reads this one store.
    dra: Arc<DraCache>,
    /// PodGroups and their members' stages, which assume, forget and the pod events keep
    /// (shared with the queue, whose PreEnqueue reads them).
    pod_groups: SharedPodGroups,
    /// A fork (see [`Cache::fork`]): it leaves the claims' touched nodes to the cache it
    /// was forked from, whose snapshots must see them.
    forked: bool,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("state", &self.state)
            .field("assumed_ttl", &self.assumed_ttl)
            .finish_non_exhaustive()
    }
}

fn pod_name(pod: &Pod) -> String {
    pod.key()
}

impl Cache {
    /// A cache whose assumed pods never expire (upstream's default).
    pub fn new() -> Cache {
        Cache::default()
    }

    /// A cache whose assumed pods expire `ttl` after their binding finished, unless the
    /// pod's add event confirms them first.
    pub fn with_assumed_ttl(ttl: Duration) -> Cache {
        Cache {
            assumed_ttl: Some(ttl),
            ..Cache::default()
        }
    }

    pub fn add_node(&self, node: Arc<Node>) {
        let mut s = self.state.lock();
        let index = s.entry_for(node.name);
        let old = s.entry(index).info.node().cloned();
        if let Some(old) = &old {
            s.remove_node_images(old);
            if s.tree.update(old, &node) {
                s.tree_version += 1;
            }
        } else {
            s.tree.add(&node);
            s.tree_version += 1;
        }
        let images = s.add_node_images(&node);
        let slices = s.local_slices.get(&node.name).cloned().unwrap_or_default();
        let info = s.entry_mut(index).info_mut();
        info.set_image_states(images);
        if info.resource_slices() != slices.as_slice() {
            info.set_resource_slices(slices);
        }
        info.set_node(node);
        s.move_to_head(index);
    }

    /// The DRA store every snapshot of this cache reads.
    /// The PodGroups and their members (upstream's `PodGroupManager`).
    pub fn pod_groups(&self) -> &SharedPodGroups {
        &self.pod_groups
    }

    pub fn dra(&self) -> &Arc<DraCache> {
        &self.dra
    }

    /// A ResourceSlice was added or updated: a node's own slice goes to its NodeInfo
    /// (whose generation moves, so the next snapshot copies it); others are shared.
    pub fn set_resource_slice(&self, slice: Arc<ResourceSlice>) {
        self.remove_resource_slice(slice.name);
        match slice.node_name() {
            None => self.dra.set_shared_slice(slice),
            Some(node) => {
                let mut s = self.state.lock();
                let slices = s.local_slices.entry(node).or_default();
                let at = slices.partition_point(|old| old.name.as_str() < slice.name.as_str());
                let name = slice.name;
                self.dra.note_local_slice(&slice, node, true);
                slices.insert(at, slice);
                s.slice_nodes.insert(name, node);
                s.refresh_slices(node);
            }
        }
    }

    /// A ResourceSlice was deleted.
    pub fn remove_resource_slice(&self, name: Sym) {
        self.dra.remove_shared_slice(name);
        let mut s = self.state.lock();
        let Some(node) = s.slice_nodes.remove(&name) else {
            return;
        };
        if let Some(slices) = s.local_slices.get_mut(&node) {
            for slice in slices.iter().filter(|sl| sl.name == name) {
                self.dra.note_local_slice(slice, node, false);
            }
            slices.retain(|sl| sl.name != name);
            if slices.is_empty() {
                s.local_slices.remove(&node);
            }
        }
        s.refresh_slices(node);
    }

    /// Claims a binding wrote: held as written until their watch events arrive (which
    /// carry the same), so that the next cycle does not read them as they were.
    pub fn assume_written_claims(&self, claims: &[Arc<ResourceClaim>]) {
        for claim in claims {
            self.dra.set_claim(claim.clone());
        }
    }

    /// Reserve allocated devices to the pod's claims: taken from now on (see
    /// [`DraCache::assume_allocations`]); forgetting the pod gives them back.
    pub fn assume_allocations(&self, pod: &Pod, claims: &[Arc<ResourceClaim>]) {
        self.dra.assume_allocations(&pod.uid, claims);
    }

    /// Same as `add_node`: an update of a node the cache has not seen adds it.
    pub fn update_node(&self, node: Arc<Node>) {
        self.add_node(node);
    }

    /// Removes a node. Its NodeInfo stays as a ghost while pods remain on it, so that
    /// their removal events still find them.
    pub fn remove_node(&self, name: Sym) -> Result<(), CacheError> {
        let mut s = self.state.lock();
        let index = *s
            .by_name
            .get(&name)
            .ok_or(CacheError::NodeNotFound { node: name })?;
        let Some(node) = s.entry(index).info.node().cloned() else {
            return Err(CacheError::NodeNotFound { node: name });
        };
        s.tree.remove(&node);
        s.tree_version += 1;
        s.remove_node_images(&node);
        if s.entry(index).info.pods().is_empty() {
            s.delete_entry(index);
        } else {
            s.entry_mut(index).info_mut().remove_node();
            s.move_to_head(index);
        }
        Ok(())
    }

    /// Puts a pod whose node was just chosen onto that node, before it is bound, so that
    /// the next cycle sees the resources as taken.
    pub fn assume_pod(&self, pod: Arc<Pod>) -> Result<(), CacheError> {
        let mut s = self.state.lock();
        s.place_new(pod.clone())?;
        s.assumed.insert(pod.uid.clone(), Assumed::default());
        if PodGroupStates::is_member(&pod) {
            self.pod_groups.lock().assume(&pod);
        }
        Ok(())
    }

    /// Marks the binding of an assumed pod as done; with a TTL, its expiry clock starts.
    /// A pod whose add event already confirmed it (the event can beat this call) is left
    /// as it is, as upstream does.
    pub fn finish_binding(&self, uid: &str, now: Instant) {
        let mut s = self.state.lock();
        if let Some(assumed) = s.assumed.get_mut(uid) {
            assumed.binding_finished = true;
            assumed.deadline = self.assumed_ttl.map(|ttl| now + ttl);
        }
    }

    /// Undoes an assume (the binding failed).
    pub fn forget_pod(&self, pod: &Pod) -> Result<(), CacheError> {
        let mut s = self.state.lock();
        let node = *s
            .pods
            .get(&*pod.uid)
            .ok_or_else(|| CacheError::PodNotFound { pod: pod_name(pod) })?;
        let assumed = s.assumed.contains_key(&*pod.uid);
        if let Some(requested) = pod.node_name
            && requested != node
        {
            let pod = pod_name(pod);
            return Err(if assumed {
                CacheError::NodeMismatch {
                    pod,
                    cached: node,
                    requested,
                }
            } else {
                CacheError::BoundElsewhere {
                    pod,
                    bound: node,
                    requested,
                }
            });
        }
        if !assumed {
            return Err(CacheError::PodNotAssumed { pod: pod_name(pod) });
        }
        s.remove_pod_from_node(node, &pod.uid);
        s.assumed.remove(&*pod.uid);
        if let Some((ByUid(cached), _)) = s.pods.remove_entry(&*pod.uid)
            && PodGroupStates::is_member(&cached)
        {
            self.pod_groups.lock().forget(&cached);
        }
        self.dra.forget_allocations(&pod.uid);
        Ok(())
    }

    /// A pod bound to a node was observed: confirms an assumed pod (moving it if it
    /// landed elsewhere) or adds a pod this scheduler did not place.
    pub fn add_pod(&self, pod: Arc<Pod>) -> Result<(), CacheError> {
        let mut s = self.state.lock();
        let node = pod.node_name.ok_or_else(|| CacheError::PodWithoutNode {
            pod: pod_name(&pod),
        })?;
        if PodGroupStates::is_member(&pod) {
            self.pod_groups.lock().bound(&pod);
        }
        if s.assumed.remove(&*pod.uid).is_some() {
            let cached = s.pods.remove(&*pod.uid).expect("assumed pods are cached");
            s.remove_pod_from_node(cached, &pod.uid);
            s.add_pod_to_node(node, pod.clone());
            s.pods.insert(ByUid(pod), node);
            return Ok(());
        }
        if s.pods.contains_key(&*pod.uid) {
            return Err(CacheError::PodExists {
                pod: pod_name(&pod),
            });
        }
        s.add_pod_to_node(node, pod.clone());
        s.pods.insert(ByUid(pod), node);
        Ok(())
    }

    /// A bound pod changed (labels, say): the old version is replaced by the new one.
    pub fn update_pod(&self, new: Arc<Pod>) -> Result<(), CacheError> {
        let mut s = self.state.lock();
        let node = *s
            .pods
            .get(&*new.uid)
            .ok_or_else(|| CacheError::PodNotFound {
                pod: pod_name(&new),
            })?;
        if s.assumed.contains_key(&*new.uid) {
            return Err(CacheError::PodAssumed {
                pod: pod_name(&new),
            });
        }
        s.remove_pod_from_node(node, &new.uid);
        s.add_pod_to_node(node, new.clone());
        // The new version replaces the old one as the key too.
        s.pods.remove(&*new.uid);
        s.pods.insert(ByUid(new), node);
        Ok(())
    }

    /// A pod was deleted (or assumed and deleted before confirmation).
    pub fn remove_pod(&self, pod: &Pod) -> Result<(), CacheError> {
        let mut s = self.state.lock();
        let node = s
            .pods
            .remove(&*pod.uid)
            .ok_or_else(|| CacheError::PodNotFound { pod: pod_name(pod) })?;
        if s.assumed.remove(&*pod.uid).is_some() {
            self.dra.forget_allocations(&pod.uid);
        }
        if PodGroupStates::is_member(pod) {
            self.pod_groups.lock().remove_member(&pod.uid);
        }
        s.remove_pod_from_node(node, &pod.uid);
        Ok(())
    }

    /// A copy to try evictions on (workload-aware preemption): its nodes shared with this
    /// cache until changed (copy on write), its PodGroups and claims this cache's own, so
    /// whatever is assumed on the copy must be forgotten before the copy is dropped. A
    /// fresh [`Snapshot`] reads it.
    pub fn fork(&self) -> Cache {
        Cache {
            state: Mutex::new(self.state.lock().clone()),
            assumed_ttl: self.assumed_ttl,
            dra: self.dra.clone(),
            pod_groups: self.pod_groups.clone(),
            forked: true,
        }
    }

    /// Takes a bound or assumed pod off its node, as upstream's `NodeInfo.RemovePod` on a
    /// snapshot's node does: its PodGroup's counts and its claims stay as they are.
    pub fn set_aside(&self, pod: &Pod) -> Result<(), CacheError> {
        let mut s = self.state.lock();
        let node = s
            .pods
            .remove(&*pod.uid)
            .ok_or_else(|| CacheError::PodNotFound { pod: pod_name(pod) })?;
        s.remove_pod_from_node(node, &pod.uid);
        Ok(())
    }

    /// Puts a pod set aside back on its node.
    pub fn put_back(&self, pod: Arc<Pod>) -> Result<(), CacheError> {
        self.state.lock().place_new(pod)
    }

    /// Forgets assumed pods whose binding finished more than the TTL ago; returns them,
    /// by uid (not in the hash map's order, which differs from run to run).
    pub fn cleanup_expired_assumed_pods(&self, now: Instant) -> Vec<Arc<Pod>> {
        let mut s = self.state.lock();
        let mut expired: Vec<Arc<str>> = s
            .assumed
            .iter()
            .filter(|(_, a)| a.binding_finished && a.deadline.is_some_and(|d| now >= d))
            .map(|(uid, _)| uid.clone())
            .collect();
        expired.sort_unstable();
        let mut out = Vec::with_capacity(expired.len());
        for uid in expired {
            let (ByUid(pod), node) = s.pods.remove_entry(&*uid).expect("assumed pods are cached");
            s.assumed.remove(&uid);
            s.remove_pod_from_node(node, &uid);
            self.dra.forget_allocations(&uid);
            tracing::warn!(pod = %pod.key(), node = %node, "assumed pod expired");
            out.push(pod);
        }
        out
    }

    pub fn is_assumed(&self, uid: &str) -> bool {
        self.state.lock().assumed.contains_key(uid)
    }

    pub fn pod(&self, uid: &str) -> Option<Arc<Pod>> {
        self.state
            .lock()
            .pods
            .get_key_value(uid)
            .map(|(pod, _)| pod.0.clone())
    }

    pub fn num_nodes(&self) -> usize {
        self.state.lock().tree.len()
    }

    pub fn num_pods(&self) -> usize {
        self.state.lock().pods.len()
    }

    /// Copies into `snapshot` only the nodes that changed since it was last updated. When
    /// the result disagrees with the cache, the snapshot is rebuilt from scratch and the
    /// error says so: the cycle that asked fails, the next one sees a correct snapshot.
    pub fn update_snapshot(
        &self,
        snapshot: &mut Snapshot,
    ) -> Result<SnapshotUpdate, SnapshotError> {
        let mut s = self.state.lock();
        let s = &mut *s;
        if self.forked {
            self.dra
                .peek_touched_nodes(|node| s.devices_taken_changed(node));
        } else {
            self.dra
                .drain_touched_nodes(|node| s.devices_taken_changed(node));
        }
        s.refresh_changed_image_counts(snapshot.generation());
        // Inline: a cycle usually finds one or two nodes changed since the last.
        let mut changed: SmallVec<[&Arc<NodeInfo>; 8]> = SmallVec::new();
        let mut cursor = s.head;
        while let Some(index) = cursor {
            let entry = s.entries[index as usize]
                .as_ref()
                .expect("listed entries exist");
            if entry.info.generation() <= snapshot.generation() {
                break;
            }
            changed.push(&entry.info);
            cursor = entry.next;
        }
        let head_generation = s.head.map_or(snapshot.generation(), |h| {
            s.entries[h as usize]
                .as_ref()
                .expect("head exists")
                .info
                .generation()
        });
        let pvc_delta = if s.pvc_consumer == Some(snapshot.id()) {
            Some(&s.pvc_delta)
        } else {
            None
        };
        let tree = &s.tree;
        let by_name = &s.by_name;
        let entries = &s.entries;
        let all_nodes = || {
            by_name
                .values()
                .filter_map(|&i| entries[i as usize].as_ref())
                .map(|e| &e.info)
        };
        snapshot.share_dra(&self.dra);
        let update = snapshot.apply(
            changed,
            head_generation,
            tree,
            s.tree_version,
            pvc_delta,
            all_nodes,
        );
        s.pvc_delta.clear();
        s.pvc_consumer = Some(snapshot.id());
        update
    }

    /// Test hook: takes the node out of the recency list, as a bug that lost its update
    /// would, so that the next snapshot misses it and the consistency check must catch it.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn lose_node_from_recency_list(&self, name: Sym) {
        let mut s = self.state.lock();
        let index = s.by_name[&name];
        s.unlink(index);
    }

    /// Test hook: records claim references the nodes do not hold, as a bug in the delta
    /// bookkeeping would, so that the next snapshot's claim counts cannot add up.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn corrupt_claim_delta(&self, namespace: Sym, claim: Sym, change: i64) {
        let mut s = self.state.lock();
        *s.pvc_delta.entry(PvcKey { namespace, claim }).or_default() += change;
    }

    /// Calls `visit` with the NodeInfo of every node (not of deleted ones), in no
    /// particular order, under the cache's lock: for summaries that need not copy nodes.
    pub fn for_each_node(&self, mut visit: impl FnMut(&NodeInfo)) {
        let s = self.state.lock();
        for entry in s.entries.iter().flatten() {
            if entry.info.node().is_some() {
                visit(&entry.info);
            }
        }
    }

    /// A snapshot built from nothing: every node cloned. The reference that incremental
    /// updates must equal.
    pub fn full_snapshot(&self) -> Snapshot {
        let s = self.state.lock();
        let nodes = s
            .by_name
            .values()
            .filter_map(|&i| s.entries[i as usize].as_ref())
            .map(|e| &e.info);
        let mut snapshot = Snapshot::from_nodes(nodes, &s.tree);
        snapshot.share_dra(&self.dra);
        snapshot
    }
}

impl CacheState {
    /// Puts a pod the cache does not hold onto the node it names.
    fn place_new(&mut self, pod: Arc<Pod>) -> Result<(), CacheError> {
        let node = pod.node_name.ok_or_else(|| CacheError::PodWithoutNode {
            pod: pod_name(&pod),
        })?;
        if self.pods.contains_key(&*pod.uid) {
            return Err(CacheError::PodExists {
                pod: pod_name(&pod),
            });
        }
        self.add_pod_to_node(node, pod.clone());
        self.pods.insert(ByUid(pod), node);
        Ok(())
    }

    /// Devices of the node's own pools were taken or given back: its generation moves,
    /// so that verdicts remembered for it are asked again.
    fn devices_taken_changed(&mut self, node: Sym) {
        let Some(&index) = self.by_name.get(&node) else {
            return;
        };
        if self.entry(index).info.node().is_some() {
            self.entry_mut(index)
                .info_mut()
                .note_devices_taken_changed();
            self.move_to_head(index);
        }
    }

    /// Gives the node's NodeInfo its current local slices, if it has a NodeInfo.
    fn refresh_slices(&mut self, node: Sym) {
        let slices = self.local_slices.get(&node).cloned().unwrap_or_default();
        let Some(&index) = self.by_name.get(&node) else {
            return;
        };
        if self.entry(index).info.node().is_none() {
            return;
        }
        self.entry_mut(index).info_mut().set_resource_slices(slices);
        self.move_to_head(index);
    }

    fn entry(&self, index: u32) -> &Entry {
        self.entries[index as usize]
            .as_ref()
            .expect("indices in by_name are live")
    }

    fn entry_mut(&mut self, index: u32) -> &mut Entry {
        self.entries[index as usize]
            .as_mut()
            .expect("indices in by_name are live")
    }

    /// The entry for a node name, created (unlinked, empty) if missing.
    fn entry_for(&mut self, name: Sym) -> u32 {
        if let Some(&index) = self.by_name.get(&name) {
            return index;
        }
        let entry = Entry {
            name,
            info: Arc::default(),
            prev: None,
            next: None,
        };
        let index = match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = Some(entry);
                i
            }
            None => {
                self.entries.push(Some(entry));
                (self.entries.len() - 1) as u32
            }
        };
        self.by_name.insert(name, index);
        self.link_at_head(index);
        index
    }

    fn unlink(&mut self, index: u32) {
        let (prev, next) = {
            let e = self.entry(index);
            (e.prev, e.next)
        };
        match prev {
            Some(p) => self.entry_mut(p).next = next,
            None => {
                if self.head == Some(index) {
                    self.head = next;
                }
            }
        }
        if let Some(n) = next {
            self.entry_mut(n).prev = prev;
        }
        let e = self.entry_mut(index);
        e.prev = None;
        e.next = None;
    }

    fn link_at_head(&mut self, index: u32) {
        let old_head = self.head;
        {
            let e = self.entry_mut(index);
            e.prev = None;
            e.next = old_head;
        }
        if let Some(h) = old_head {
            self.entry_mut(h).prev = Some(index);
        }
        self.head = Some(index);
    }

    fn move_to_head(&mut self, index: u32) {
        if self.head != Some(index) {
            self.unlink(index);
            self.link_at_head(index);
        }
    }

    fn delete_entry(&mut self, index: u32) {
        self.unlink(index);
        let name = self.entry(index).name;
        self.by_name.remove(&name);
        self.entries[index as usize] = None;
        self.free.push(index);
    }

    fn add_pod_to_node(&mut self, node: Sym, pod: Arc<Pod>) {
        self.record_claims(&pod, 1);
        let index = self.entry_for(node);
        self.entry_mut(index).info_mut().add_pod(pod);
        self.move_to_head(index);
    }

    fn remove_pod_from_node(&mut self, node: Sym, uid: &str) {
        let Some(&index) = self.by_name.get(&node) else {
            tracing::error!(%node, pod = uid, "pod's node is missing from the cache");
            return;
        };
        let Some(pod) = self.entry_mut(index).info_mut().remove_pod(uid) else {
            tracing::error!(%node, pod = uid, "pod is missing from its node in the cache");
            return;
        };
        self.record_claims(&pod, -1);
        let info = &self.entry(index).info;
        if info.node().is_none() && info.pods().is_empty() {
            self.delete_entry(index);
        } else {
            self.move_to_head(index);
        }
    }

    fn record_claims(&mut self, pod: &Pod, sign: i64) {
        for volume in &pod.volumes {
            if let Some(claim) = volume.persistent_claim() {
                let key = PvcKey {
                    namespace: pod.namespace,
                    claim: Sym::new(claim),
                };
                *self.pvc_delta.entry(key).or_default() += sign;
            }
        }
    }

    /// The nodes changed since `generation` are about to be copied into a snapshot: their
    /// images' node counts become the current ones, as upstream's
    /// `ImageStateSummary.Snapshot` takes them (no generation bump: nothing else changed).
    fn refresh_changed_image_counts(&mut self, generation: u64) {
        let mut cursor = self.head;
        while let Some(index) = cursor {
            let Some(entry) = self.entries[index as usize].as_mut() else {
                break;
            };
            if entry.info.generation() <= generation {
                break;
            }
            if entry.info.has_images() {
                let images = &self.images;
                entry.info_mut().refresh_image_counts(|name| {
                    images.get(&name).map_or(0, |i| i.nodes.len() as u32)
                });
            }
            cursor = entry.next;
        }
    }

    /// Registers the node's images and returns their summaries (with node counts as of now).
    fn add_node_images(&mut self, node: &Node) -> Vec<ImageState> {
        let mut states: Vec<ImageState> = Vec::new();
        for image in &node.images {
            for &name in &image.names {
                let entry = self.images.entry(name).or_insert_with(|| ImageNodes {
                    size_bytes: image.size_bytes,
                    nodes: HashSet::default(),
                });
                entry.nodes.insert(node.name);
                if !states.iter().any(|s| s.name == name) {
                    let num_nodes = entry.nodes.len() as u32;
                    states.push(ImageState {
                        name,
                        size_bytes: entry.size_bytes,
                        num_nodes,
                        num_nodes_when_set: num_nodes,
                    });
                }
            }
        }
        states
    }

    fn remove_node_images(&mut self, node: &Node) {
        for image in &node.images {
            for name in &image.names {
                if let Some(entry) = self.images.get_mut(name) {
                    entry.nodes.remove(&node.name);
                    if entry.nodes.is_empty() {
                        self.images.remove(name);
                    }
                }
            }
        }
    }
}
