//! The simulated API server: the authoritative record of nodes and bound pods. It binds
//! (refusing a pod bound twice or deleted, optionally a bind that would over-commit the
//! node or one of its HAMi-registered GPU cards, and a configurable share of binds at
//! random) and deletes pods; the simulation delivers the resulting watch events to the
//! scheduler instances.
//!
//! With admission on (several scheduler instances), the API is also the serialisation
//! point of shared state (docs/shared-state.md): it keeps the authoritative bound state in
//! a cache of its own, and admits a bind only if the pod passes every PreFilter and Filter
//! plugin of its profile on its node against that state, binds admitted so far included
//! ([`gantry_scheduler::check_placement`], the binder's re-check, on the truth rather than
//! on an instance's view). This is what `gantry run`'s fences must guarantee.
//!
//! Nothing visible depends on hash-map order: each node lists its pods in the order they
//! were bound, so a drain or a node deletion walks them the same way in every run.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use gantry_api::dra::{ClaimKey, DeviceClass, DraObjects, ResourceClaim, ResourceSlice};
use gantry_api::dra_extended::ExtendedResourceClasses;
use gantry_api::{Node, Pod, Resources, Sym};
use gantry_cache::{Cache, NodeInfo, Snapshot};
use gantry_framework::{ApiObjects, Cluster, Profile, Status};
use gantry_scheduler::Rng;

use crate::claims::{ClaimChange, ClaimRefusal, ClaimStore};

struct NodeUsage {
    node: Arc<Node>,
    /// Saturates at i64::MAX: see `saturated`.
    requested: Resources,
    /// A sum in `requested` saturated (pods asking together for more than int64 holds):
    /// the node is over-committed in that resource, and removing a pod adds the others
    /// up anew.
    saturated: bool,
    /// Uids of the pods bound to the node, in bind order.
    pods: Vec<Arc<str>>,
    /// For a node with HAMi-registered GPUs, what its bound pods hold on each card (kept
    /// by a NodeInfo of the bound pods, as the cache keeps it).
    cards: Option<NodeInfo>,
}

impl NodeUsage {
    fn new(node: Arc<Node>) -> NodeUsage {
        let cards = node.gpus.is_some().then(|| NodeInfo::new(node.clone()));
        NodeUsage {
            node,
            requested: Resources::default(),
            saturated: false,
            pods: Vec::new(),
            cards,
        }
    }

    /// Whether one more pod, `pod`, would exceed what the node has, in a resource the pod
    /// asks for (or in pods): as NodeResourcesFit checks only what the pod requests, a
    /// resource the input already over-fills is the cluster's state, not this bind's doing.
    /// Extended resources a class in `served` serves are the node's only where its
    /// allocatable has them (elsewhere devices serve them: DRAExtendedResource).
    fn overcommitted_by(&self, pod: &Pod, served: &ExtendedResourceClasses) -> bool {
        let mut after = self.requested.clone();
        let saturated = after.add(pod.requests()) || self.saturated;
        exceeds(
            &after,
            saturated,
            self.pods.len() + 1,
            &self.node.allocatable,
            pod.requests(),
            served,
        )
    }

    /// Whether `pod` would overfill one of the GPU cards written on it.
    fn card_overfilled_by(&self, pod: &Pod) -> Option<Arc<str>> {
        self.cards
            .as_ref()
            .and_then(NodeInfo::gpus)
            .and_then(|usage| usage.overfilled_by(pod))
            .map(Arc::from)
    }

    fn add(&mut self, pod: &Arc<Pod>) {
        self.saturated |= self.requested.add(pod.usage());
        self.pods.push(pod.uid.clone());
        if let Some(cards) = &mut self.cards {
            cards.add_pod(pod.clone());
        }
    }

    /// Takes `pod` off the node; `bound` holds the pods still bound (for a recount).
    fn remove(&mut self, pod: &Pod, bound: &HashMap<Arc<str>, Arc<Pod>>) {
        self.pods.retain(|uid| **uid != *pod.uid);
        if self.saturated {
            self.requested = Resources::default();
            self.saturated = false;
            for other in self.pods.iter().filter_map(|uid| bound.get(uid)) {
                self.saturated |= self.requested.add(other.usage());
            }
        } else {
            self.requested.sub(pod.usage());
        }
        if let Some(cards) = &mut self.cards {
            cards.remove_pod(&pod.uid);
        }
    }
}

/// Cpu and memory requested and allocatable over all nodes, kept as binds and deletions
/// happen, for utilisation over time. In i128: the sum over many nodes of amounts each
/// up to i64::MAX stays exact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterTotals {
    pub requested_milli_cpu: i128,
    pub allocatable_milli_cpu: i128,
    pub requested_memory: i128,
    pub allocatable_memory: i128,
}

/// Why the API refused a bind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindRefusal {
    #[error("pod {0} names no node")]
    NoNode(String),
    #[error("pod {0} is already bound")]
    AlreadyBound(String),
    #[error("pod {0} was deleted")]
    Deleted(String),
    #[error("binding pod {0} failed (injected failure)")]
    Injected(String),
    #[error("node {0} not found")]
    NodeNotFound(Sym),
    /// The capacity check: the node has no room for the pod any more.
    #[error("binding pod {pod} would over-commit node {node}")]
    OverCommit { pod: String, node: Sym },
    /// Admission: a Filter plugin of the pod's profile rejects the pod on its node in the
    /// authoritative state (`plugin` is empty when no plugin spoke: no profile for the
    /// pod, or its node is gone).
    #[error("binding pod {pod} to node {node} refused by {plugin}: {message}")]
    Constraint {
        pod: String,
        node: Sym,
        plugin: &'static str,
        message: String,
    },
}

/// Gives a cache the device classes and ResourceSlices.
pub(crate) fn load_dra_catalog(cache: &Cache, catalog: &DraObjects) {
    for class in &catalog.device_classes {
        cache.dra().set_device_class(Arc::new(class.clone()));
    }
    for slice in &catalog.slices {
        cache.set_resource_slice(slice.clone());
    }
}

/// A change of the DRA catalog (slices and device classes), as the watch delivers it.
#[derive(Debug, Clone)]
pub(crate) enum CatalogChange {
    SetSlice(Arc<ResourceSlice>),
    DeleteSlice(Sym),
    SetClass(Arc<DeviceClass>),
    DeleteClass(Sym),
}

impl CatalogChange {
    /// Applies the change to a cache.
    pub(crate) fn apply(&self, cache: &Cache) {
        match self {
            CatalogChange::SetSlice(slice) => cache.set_resource_slice(slice.clone()),
            CatalogChange::DeleteSlice(name) => cache.remove_resource_slice(*name),
            CatalogChange::SetClass(class) => cache.dra().set_device_class(class.clone()),
            CatalogChange::DeleteClass(name) => cache.dra().remove_device_class(*name),
        }
    }
}

/// The slices of the pools that have counter sets or shared devices.
fn checked_slices(slices: &[Arc<ResourceSlice>]) -> Vec<Arc<ResourceSlice>> {
    let counted: Vec<(Sym, Sym)> = (slices.iter())
        .filter(|s| {
            !s.shared_counters.is_empty() || s.devices.iter().any(|d| d.allow_multiple_allocations)
        })
        .map(|s| (s.driver, s.pool))
        .collect();
    (slices.iter())
        .filter(|s| counted.contains(&(s.driver, s.pool)))
        .cloned()
        .collect()
}

/// Applies claim changes to a cache's DRA store.
pub(crate) fn apply_claim_changes(cache: &Cache, changes: &[ClaimChange]) {
    for change in changes {
        match change {
            ClaimChange::Set(claim) => cache.dra().set_claim(claim.clone()),
            ClaimChange::Deleted(key) => cache.dra().remove_claim(*key),
        }
    }
}

/// The authoritative bound state admission checks binds against: a cache of the nodes
/// and the pods bound so far (in bind order), its snapshot (updated by the delta of each
/// bind), and the profiles and API objects the plugins read.
struct Admission {
    cache: Cache,
    snapshot: Snapshot,
    profiles: Vec<Profile>,
    objects: ApiObjects,
}

impl Admission {
    /// Whether `pod` (naming its node, not bound yet) passes every Filter plugin of its
    /// profile there now.
    fn admit(&mut self, pod: &Arc<Pod>) -> Result<(), Status> {
        let Some(profile) = self
            .profiles
            .iter()
            .find(|p| p.scheduler_name == pod.scheduler_name)
        else {
            return Err(Status::error(format!(
                "no profile schedules pods of {:?}",
                pod.scheduler_name.as_str()
            )));
        };
        self.cache
            .update_snapshot(&mut self.snapshot)
            .map_err(|inconsistent| Status::error(inconsistent.to_string()))?;
        self.objects.ensure_namespace(pod.namespace);
        let cluster = Cluster {
            nodes: &self.snapshot,
            objects: &self.objects,
        };
        gantry_scheduler::check_placement(profile, cluster, pod)
    }

    fn add_pod(&self, pod: &Arc<Pod>) {
        if let Err(e) = self.cache.add_pod(pod.clone()) {
            tracing::error!(pod = %pod.key(), error = %e, "the API's own cache refused a bound pod");
        }
    }

    fn remove_pod(&self, pod: &Pod) {
        if let Err(e) = self.cache.remove_pod(pod) {
            tracing::error!(pod = %pod.key(), error = %e, "a deleted pod was not in the API's own cache");
        }
    }
}

pub struct SimulatedApi {
    nodes: HashMap<Sym, NodeUsage>,
    /// Bound pods by uid.
    bound: HashMap<Arc<str>, Arc<Pod>>,
    /// Uids of pods deleted before they were bound: a late bind of one is refused.
    deleted: HashSet<Arc<str>>,
    /// Nodes whose bound pods ever asked for more than the node has, through a bind.
    overcommitted: HashSet<Sym>,
    /// GPU cards (node, card id) that a bind ever filled beyond what they have.
    overfilled_cards: HashSet<(Sym, Arc<str>)>,
    totals: ClusterTotals,
    /// Refuse binds that would over-commit the node (a binder that re-checks capacity).
    pub capacity_check: bool,
    /// Share of binds that fail at random (a flaky API).
    pub failure_rate: f64,
    rng: Rng,
    pub binds: u64,
    pub bind_failures: u64,
    /// Admission of every bind by the Filter plugins, on the authoritative state (see
    /// [`SimulatedApi::enable_admission`]).
    admission: Option<Admission>,
    /// ResourceClaims and their templates, with the claim controller's work.
    pub(crate) claims: ClaimStore,
    /// Device classes and ResourceSlices (which the simulation does not change).
    dra_catalog: DraObjects,
    /// The classes by the extended resources they serve.
    extended: ExtendedResourceClasses,
    /// The slices of the pools that have counter sets (partitionable devices) or shared
    /// devices, against which claim writes are checked; none in most clusters, and then
    /// nothing is.
    checked_slices: Vec<Arc<ResourceSlice>>,
}

impl SimulatedApi {
    pub fn new(seed: u64) -> SimulatedApi {
        SimulatedApi {
            nodes: HashMap::new(),
            bound: HashMap::new(),
            deleted: HashSet::new(),
            overcommitted: HashSet::new(),
            overfilled_cards: HashSet::new(),
            totals: ClusterTotals::default(),
            capacity_check: false,
            failure_rate: 0.0,
            rng: Rng::new(seed ^ 0x5EED_0FB1),
            binds: 0,
            bind_failures: 0,
            admission: None,
            claims: ClaimStore::new(&[], &[], seed),
            dra_catalog: DraObjects::default(),
            extended: ExtendedResourceClasses::default(),
            checked_slices: Vec::new(),
        }
    }

    /// Takes over the input's DRA objects: claims and templates live here, classes and
    /// slices are read by every cache (see `load_dra_catalog`). Call before
    /// [`enable_admission`](Self::enable_admission).
    pub fn load_dra(&mut self, dra: &DraObjects, seed: u64) {
        self.claims = ClaimStore::new(&dra.claims, &dra.templates, seed);
        self.dra_catalog = DraObjects {
            device_classes: dra.device_classes.clone(),
            slices: dra.slices.clone(),
            ..DraObjects::default()
        };
        self.checked_slices = checked_slices(&dra.slices);
        self.extended = extended_classes(&self.dra_catalog);
    }

    /// A slice or device class changes at the API (a replayed trace's): the catalog new
    /// caches are given, the slices claim writes are checked against, and admission's
    /// cache follow it; the caller delivers it to the instances.
    pub(crate) fn change_catalog(&mut self, change: &CatalogChange) {
        let catalog = &mut self.dra_catalog;
        match change {
            CatalogChange::SetSlice(slice) => {
                catalog.slices.retain(|s| s.name != slice.name);
                catalog.slices.push(slice.clone());
            }
            CatalogChange::DeleteSlice(name) => catalog.slices.retain(|s| s.name != *name),
            CatalogChange::SetClass(class) => {
                catalog.device_classes.retain(|c| c.name != class.name);
                catalog.device_classes.push(DeviceClass::clone(class));
            }
            CatalogChange::DeleteClass(name) => {
                catalog.device_classes.retain(|c| c.name != *name);
            }
        }
        self.checked_slices = checked_slices(&self.dra_catalog.slices);
        self.extended = extended_classes(&self.dra_catalog);
        if let Some(admission) = &self.admission {
            change.apply(&admission.cache);
        }
    }

    /// The storage objects changed: admission's plugins read them as they are now.
    pub(crate) fn change_storage(&mut self, storage: &crate::storage::StorageState) {
        if let Some(admission) = &mut self.admission {
            storage.write_to(&mut admission.objects);
        }
    }

    /// The device classes and slices every cache is given.
    pub(crate) fn dra_catalog(&self) -> &DraObjects {
        &self.dra_catalog
    }

    /// Writes claims' status as a scheduler's PreBind sent it ([`ClaimStore::write`],
    /// counters checked against the input's pools that have counter sets).
    pub(crate) fn write_claims(
        &mut self,
        claims: &[Arc<ResourceClaim>],
        allocated_now: &[ClaimKey],
    ) -> Result<Vec<ClaimChange>, ClaimRefusal> {
        self.claims
            .write(claims, allocated_now, &self.checked_slices)
    }

    /// Tells admission's own cache about claim changes (what the watch delivers to the
    /// instances), so that its DynamicResources Filter sees the claims as they are.
    pub(crate) fn admit_claim_changes(&self, changes: &[ClaimChange]) {
        if let Some(admission) = &self.admission {
            apply_claim_changes(&admission.cache, changes);
        }
    }

    /// From now on, a bind is admitted only if the pod passes every PreFilter and Filter
    /// plugin of its profile (among `profiles`) on its node, against the nodes and pods
    /// bound so far and `objects` (the serialisation point of several scheduler
    /// instances). The nodes and pods already here are taken over.
    pub fn enable_admission(&mut self, profiles: Vec<Profile>, objects: ApiObjects) {
        let cache = Cache::new();
        let mut names: Vec<Sym> = self.nodes.keys().copied().collect();
        names.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
        for name in &names {
            cache.add_node(self.nodes[name].node.clone());
        }
        let claims: Vec<ClaimChange> = self
            .claims
            .claims()
            .map(|c| ClaimChange::Set(c.clone()))
            .collect();
        load_dra_catalog(&cache, &self.dra_catalog);
        apply_claim_changes(&cache, &claims);
        let admission = Admission {
            cache,
            snapshot: Snapshot::new(),
            profiles,
            objects,
        };
        for name in &names {
            for pod in self.pods_on(*name) {
                admission.add_pod(&pod);
            }
        }
        self.admission = Some(admission);
    }

    /// Whether binds go through admission by the Filter plugins.
    pub fn admission_enabled(&self) -> bool {
        self.admission.is_some()
    }

    /// Adds a node, or replaces it (an update such as a cordon) keeping its pods.
    pub fn add_node(&mut self, node: Arc<Node>) {
        self.totals.allocatable_milli_cpu += i128::from(node.allocatable.milli_cpu);
        self.totals.allocatable_memory += i128::from(node.allocatable.memory);
        match self.nodes.get_mut(&node.name) {
            Some(usage) => {
                self.totals.allocatable_milli_cpu -= i128::from(usage.node.allocatable.milli_cpu);
                self.totals.allocatable_memory -= i128::from(usage.node.allocatable.memory);
                if let Some(cards) = &mut usage.cards {
                    cards.set_node(node.clone());
                }
                if let Some(admission) = &self.admission {
                    admission.cache.update_node(node.clone());
                }
                usage.node = node;
            }
            None => {
                if let Some(admission) = &self.admission {
                    admission.cache.add_node(node.clone());
                }
                self.nodes.insert(node.name, NodeUsage::new(node));
            }
        }
    }

    pub fn node(&self, name: Sym) -> Option<&Arc<Node>> {
        self.nodes.get(&name).map(|u| &u.node)
    }

    /// Deletes a node and returns the pods bound to it, in bind order (deleted with it,
    /// as pod GC does).
    pub fn delete_node(&mut self, name: Sym) -> Vec<Arc<Pod>> {
        let Some(usage) = self.nodes.remove(&name) else {
            return Vec::new();
        };
        self.totals.allocatable_milli_cpu -= i128::from(usage.node.allocatable.milli_cpu);
        self.totals.allocatable_memory -= i128::from(usage.node.allocatable.memory);
        let pods: Vec<Arc<Pod>> = usage
            .pods
            .iter()
            .filter_map(|uid| self.bound.remove(uid))
            .collect();
        // Pod by pod: the node's own total may have saturated.
        for pod in &pods {
            self.totals.requested_milli_cpu -= i128::from(pod.usage().milli_cpu);
            self.totals.requested_memory -= i128::from(pod.usage().memory);
        }
        if let Some(admission) = &self.admission {
            for pod in &pods {
                admission.remove_pod(pod);
            }
            if let Err(e) = admission.cache.remove_node(name) {
                tracing::error!(node = %name, error = %e, "a deleted node was not in the API's own cache");
            }
        }
        pods
    }

    /// The pods bound to a node, in bind order.
    pub fn pods_on(&self, name: Sym) -> Vec<Arc<Pod>> {
        self.nodes.get(&name).map_or_else(Vec::new, |usage| {
            usage
                .pods
                .iter()
                .filter_map(|uid| self.bound.get(uid).cloned())
                .collect()
        })
    }

    /// Records a pod that was bound before the simulation started.
    pub fn add_bound_pod(&mut self, pod: Arc<Pod>) {
        if let Some(usage) = pod.node_name.and_then(|n| self.nodes.get_mut(&n)) {
            usage.add(&pod);
            self.totals.requested_milli_cpu += i128::from(pod.usage().milli_cpu);
            self.totals.requested_memory += i128::from(pod.usage().memory);
            if let Some(admission) = &self.admission {
                admission.add_pod(&pod);
            }
        }
        self.bound.insert(pod.uid.clone(), pod);
    }

    /// Binds `pod` (which names its node). The bound pod is what the watch delivers.
    pub fn bind(&mut self, pod: &Arc<Pod>) -> Result<(), BindRefusal> {
        let result = self.try_bind(pod);
        if result.is_err() {
            self.bind_failures += 1;
        }
        result
    }

    fn try_bind(&mut self, pod: &Arc<Pod>) -> Result<(), BindRefusal> {
        self.refused_before_writing(pod)?;
        if self.failure_rate > 0.0 && (self.rng.below(1_000_000) as f64) < self.failure_rate * 1e6 {
            return Err(BindRefusal::Injected(pod.key()));
        }
        let node = self.refused_at_node(pod)?;
        let usage = self
            .nodes
            .get_mut(&node)
            .ok_or(BindRefusal::NodeNotFound(node))?;
        let over = usage.overcommitted_by(pod, &self.extended);
        let overfilled_card = usage.card_overfilled_by(pod);
        if over {
            self.overcommitted.insert(node);
        }
        if let Some(card) = overfilled_card {
            self.overfilled_cards.insert((node, card));
        }
        usage.add(pod);
        if let Some(admission) = &self.admission {
            admission.add_pod(pod);
        }
        self.totals.requested_milli_cpu += i128::from(pod.usage().milli_cpu);
        self.totals.requested_memory += i128::from(pod.usage().memory);
        self.bound.insert(pod.uid.clone(), pod.clone());
        self.binds += 1;
        Ok(())
    }

    /// Whether binding `pod` to `node` now would over-commit the node or one of the GPU
    /// cards written on the pod (whatever the capacity check says): what a refused
    /// placement would have done.
    pub fn would_overcommit(&self, pod: &Pod, node: Sym) -> bool {
        self.nodes.get(&node).is_some_and(|usage| {
            usage.overcommitted_by(pod, &self.extended) || usage.card_overfilled_by(pod).is_some()
        })
    }

    /// Whether the pod was deleted before it was bound.
    pub fn was_deleted(&self, uid: &str) -> bool {
        self.deleted.contains(uid)
    }

    /// Records that a pod was deleted before it was bound: its bind, if one is in flight,
    /// is refused.
    pub fn delete_unbound(&mut self, uid: Arc<str>) {
        self.deleted.insert(uid);
    }

    /// Why the API refuses to bind `pod` whatever its node holds: it names no node, is
    /// bound already, or was deleted.
    fn refused_before_writing(&self, pod: &Pod) -> Result<(), BindRefusal> {
        if pod.node_name.is_none() {
            return Err(BindRefusal::NoNode(pod.key()));
        }
        if self.bound.contains_key(&pod.uid) {
            return Err(BindRefusal::AlreadyBound(pod.key()));
        }
        if self.deleted.contains(&pod.uid) {
            return Err(BindRefusal::Deleted(pod.key()));
        }
        Ok(())
    }

    /// Why the API refuses `pod` on its node as the node stands: the node is gone, the
    /// admission's Filter plugins refuse it, or (checking capacity) it would over-commit
    /// the node or a GPU card. Returns the node otherwise.
    fn refused_at_node(&mut self, pod: &Arc<Pod>) -> Result<Sym, BindRefusal> {
        let node = pod
            .node_name
            .ok_or_else(|| BindRefusal::NoNode(pod.key()))?;
        let Some(usage) = self.nodes.get(&node) else {
            return Err(BindRefusal::NodeNotFound(node));
        };
        let over =
            usage.overcommitted_by(pod, &self.extended) || usage.card_overfilled_by(pod).is_some();
        if let Some(admission) = &mut self.admission {
            admission
                .admit(pod)
                .map_err(|status| BindRefusal::Constraint {
                    pod: pod.key(),
                    node,
                    plugin: status.plugin(),
                    message: status.message(),
                })?;
        }
        if over && self.capacity_check {
            return Err(BindRefusal::OverCommit {
                pod: pod.key(),
                node,
            });
        }
        Ok(node)
    }

    /// Whether the API would bind every one of `pods`, in this order, each checked as its
    /// bind is with the ones before it counted: a gang's binds checked together before
    /// any is written, as a binder holding every member's node fence checks them (see
    /// docs/shared-state.md). Nothing is kept; injected failures are the writes' own.
    pub fn admits_together(&mut self, pods: &[Arc<Pod>]) -> Result<(), BindRefusal> {
        let mut counted: Vec<&Arc<Pod>> = Vec::with_capacity(pods.len());
        let mut verdict = Ok(());
        for pod in pods {
            if let Err(refusal) = self
                .refused_before_writing(pod)
                .and_then(|()| self.refused_at_node(pod))
            {
                verdict = Err(refusal);
                break;
            }
            self.count_tentatively(pod, true);
            counted.push(pod);
        }
        for pod in counted.into_iter().rev() {
            self.count_tentatively(pod, false);
        }
        verdict
    }

    /// Adds `pod` to its node's usage and the admission's view, or takes it back off.
    fn count_tentatively(&mut self, pod: &Arc<Pod>, add: bool) {
        let Some(node) = pod.node_name else { return };
        if let Some(usage) = self.nodes.get_mut(&node) {
            if add {
                usage.add(pod);
            } else {
                usage.remove(pod, &self.bound);
            }
        }
        if let Some(admission) = &self.admission {
            if add {
                admission.add_pod(pod);
            } else {
                admission.remove_pod(pod);
            }
        }
    }

    /// Deletes a bound pod; returns it if it was bound.
    pub fn delete_pod(&mut self, uid: &str) -> Option<Arc<Pod>> {
        let pod = self.bound.remove(uid)?;
        if let Some(usage) = pod.node_name.and_then(|n| self.nodes.get_mut(&n)) {
            usage.remove(&pod, &self.bound);
            self.totals.requested_milli_cpu -= i128::from(pod.usage().milli_cpu);
            self.totals.requested_memory -= i128::from(pod.usage().memory);
            if let Some(admission) = &self.admission {
                admission.remove_pod(&pod);
            }
        }
        Some(pod)
    }

    pub fn bound_pod(&self, uid: &str) -> Option<&Arc<Pod>> {
        self.bound.get(uid)
    }

    /// Marks a bound pod for deletion (its `deletionTimestamp` set): it keeps its room until
    /// deleted. Returns the pod as marked, if it was bound and not marked yet.
    pub fn mark_terminating(&mut self, uid: &str) -> Option<Arc<Pod>> {
        let pod = self.bound.get_mut(uid).filter(|pod| !pod.terminating)?;
        let mut marked = Pod::clone(pod);
        marked.terminating = true;
        *pod = Arc::new(marked);
        Some(pod.clone())
    }

    /// Nodes that a bind ever over-committed.
    pub fn overcommitted_nodes(&self) -> usize {
        self.overcommitted.len()
    }

    /// GPU cards that a bind ever filled beyond what they have (cards the input already
    /// over-filled count only once a bind adds to them).
    pub fn overfilled_cards(&self) -> usize {
        self.overfilled_cards.len()
    }

    /// Cpu and memory requested and allocatable over all nodes now.
    pub fn totals(&self) -> ClusterTotals {
        self.totals
    }

    /// Each node with the requests and the number of its bound pods, in node-name order
    /// (for utilisation reports).
    pub fn usage(&self) -> Vec<(&Arc<Node>, &Resources, usize)> {
        let mut usage: Vec<_> = self
            .nodes
            .values()
            .map(|u| (&u.node, &u.requested, u.pods.len()))
            .collect();
        usage.sort_unstable_by(|a, b| a.0.name.as_str().cmp(b.0.name.as_str()));
        usage
    }
}

/// Whether `requested` (and `pods` pods) exceeds `allocatable` in any resource.
/// Whether `requested` (by `pods` pods) is more than `allocatable`. With `saturated`, an
/// amount at i64::MAX stands for a true sum beyond it, more than any node has.
/// Whether `requested` (with `pods` pods) exceeds `allocatable` in a resource `asked`
/// requests, or in pods.
/// The catalog's classes by the extended resources they serve.
fn extended_classes(catalog: &DraObjects) -> ExtendedResourceClasses {
    let classes: Vec<Arc<DeviceClass>> = catalog
        .device_classes
        .iter()
        .cloned()
        .map(Arc::new)
        .collect();
    ExtendedResourceClasses::new(&classes)
}

fn exceeds(
    requested: &Resources,
    saturated: bool,
    pods: usize,
    allocatable: &Resources,
    asked: &Resources,
    served: &ExtendedResourceClasses,
) -> bool {
    let over = |amount: i64, has: i64, asked: i64| {
        asked > 0 && (amount > has || (saturated && amount == i64::MAX))
    };
    over(requested.milli_cpu, allocatable.milli_cpu, asked.milli_cpu)
        || over(requested.memory, allocatable.memory, asked.memory)
        || over(
            requested.ephemeral_storage,
            allocatable.ephemeral_storage,
            asked.ephemeral_storage,
        )
        || pods as i64 > allocatable.pods
        || requested.scalars().any(|(name, amount)| {
            // HAMi's shares of a card are not node resources: its scheduler accounts them.
            let has = allocatable.scalar(name);
            let by_devices = has == 0 && served.class_for(name).is_some();
            !gantry_api::gpu::ignored_by_scheduler(name)
                && !by_devices
                && over(amount, has, asked.scalar(name))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_are_checked_and_overcommit_recorded() {
        let mut api = SimulatedApi::new(1);
        let mut allocatable = Resources::new(1000, 1 << 30);
        allocatable.pods = 10;
        api.add_node(Arc::new(Node::new("n1", allocatable)));
        let pod = |name: &str| Arc::new(Pod::new("ns", name).with_requests(600, 1).on_node("n1"));
        api.bind(&pod("a")).unwrap();
        assert!(api.bind(&pod("a")).is_err(), "a pod binds once");
        api.capacity_check = true;
        assert!(
            api.bind(&pod("b")).is_err(),
            "the check refuses over-commitment"
        );
        api.capacity_check = false;
        api.bind(&pod("b")).unwrap();
        assert_eq!(api.overcommitted_nodes(), 1);
        assert_eq!(api.bind_failures, 2);
        assert!(api.delete_pod("ns/b").is_some());
        assert_eq!(api.delete_node(Sym::new("n1")).len(), 1);
    }

    /// A node the input already over-fills in memory takes a pod that asks for cpu only,
    /// as NodeResourcesFit lets it: that bind over-commits nothing.
    #[test]
    fn only_what_the_pod_asks_for_counts() {
        let mut api = SimulatedApi::new(1);
        let mut allocatable = Resources::new(4000, 1 << 30);
        allocatable.pods = 10;
        api.add_node(Arc::new(Node::new("n1", allocatable.clone())));
        let heavy = Arc::new(
            Pod::new("ns", "heavy")
                .with_requests(100, 2 << 30)
                .on_node("n1"),
        );
        api.bind(&heavy).unwrap();
        assert_eq!(api.overcommitted_nodes(), 1, "the memory is over");
        let mut api = SimulatedApi::new(1);
        api.add_node(Arc::new(Node::new("n1", allocatable)));
        api.add_bound_pod(heavy);
        let cpu_only = Arc::new(Pod::new("ns", "cpu").with_requests(500, 0).on_node("n1"));
        api.bind(&cpu_only).unwrap();
        assert_eq!(api.overcommitted_nodes(), 0);
        let memory = Arc::new(Pod::new("ns", "mem").with_requests(0, 1).on_node("n1"));
        api.bind(&memory).unwrap();
        assert_eq!(api.overcommitted_nodes(), 1);
    }

    #[test]
    fn admission_refuses_what_a_filter_plugin_refuses_on_the_bound_state() {
        use gantry_api::{HostPort, LabelSelector, PodAffinityTerm, Protocol};
        use gantry_framework::plugins::default_profile;
        let mut api = SimulatedApi::new(1);
        let mut allocatable = Resources::new(4000, 8 << 30);
        allocatable.pods = 110;
        for name in ["n1", "n2"] {
            let node = Node::new(name, allocatable.clone()).with_labels([
                ("kubernetes.io/hostname", name),
                ("topology.kubernetes.io/zone", "a"),
            ]);
            api.add_node(Arc::new(node));
        }
        // A pod bound before admission was on is taken over.
        let port = |name: &str, node: &str| {
            let mut pod = Pod::new("ns", name).with_requests(100, 1).on_node(node);
            pod.containers[0].host_ports.push(HostPort {
                ip: HostPort::any_ip(),
                protocol: Protocol::Tcp,
                port: 80,
            });
            Arc::new(pod)
        };
        api.bind(&port("a", "n1")).unwrap();
        api.enable_admission(
            vec![default_profile("default-scheduler")],
            ApiObjects::default(),
        );
        assert!(api.admission_enabled());
        let refused = api.bind(&port("b", "n1")).unwrap_err();
        assert!(
            matches!(
                &refused,
                BindRefusal::Constraint {
                    plugin: "NodePorts",
                    ..
                }
            ),
            "{refused}"
        );
        api.bind(&port("b", "n2")).unwrap();
        // Anti-affinity over a zone spans nodes: n1 is refused for a pod n2's pod repels.
        let db = |name: &str, node: &str| {
            let mut pod = Pod::new("ns", name)
                .with_requests(100, 1)
                .with_labels([("app", "db")])
                .on_node(node);
            pod.affinity
                .pod_anti_affinity
                .required
                .push(PodAffinityTerm {
                    label_selector: Some(LabelSelector::from_pairs([(
                        Sym::new("app"),
                        Sym::new("db"),
                    )])),
                    namespaces: Vec::new(),
                    namespace_selector: None,
                    topology_key: Sym::new("topology.kubernetes.io/zone"),
                });
            Arc::new(pod)
        };
        api.bind(&db("db-0", "n2")).unwrap();
        let refused = api.bind(&db("db-1", "n1")).unwrap_err();
        assert!(
            matches!(
                &refused,
                BindRefusal::Constraint {
                    plugin: "InterPodAffinity",
                    ..
                }
            ),
            "{refused}"
        );
        // Once the pod is deleted, the zone admits another.
        api.delete_pod("ns/db-0").unwrap();
        api.bind(&db("db-1", "n1")).unwrap();
        // A deleted node's pods leave the state with it: db-1 no longer repels db-2.
        assert!(api.bind(&db("db-2", "n2")).is_err());
        assert_eq!(api.delete_node(Sym::new("n1")).len(), 2);
        api.bind(&db("db-2", "n2")).unwrap();
        assert_eq!((api.binds, api.bind_failures), (5, 3));
    }

    #[test]
    fn a_nodes_pods_come_in_bind_order_and_totals_follow() {
        let mut api = SimulatedApi::new(1);
        let mut allocatable = Resources::new(4000, 8 << 30);
        allocatable.pods = 110;
        api.add_node(Arc::new(Node::new("n1", allocatable.clone())));
        // Names whose hash order is unlikely to be their bind order, many times over.
        let names: Vec<String> = (0..50).map(|i| format!("p{}", 49 - i)).collect();
        for name in &names {
            let pod = Pod::new("ns", name)
                .with_requests(10, 1 << 20)
                .on_node("n1");
            api.bind(&Arc::new(pod)).unwrap();
        }
        api.delete_pod("ns/p30");
        let order: Vec<String> = api
            .pods_on(Sym::new("n1"))
            .iter()
            .map(|p| p.name.to_string())
            .collect();
        let expected: Vec<String> = names.iter().filter(|n| *n != "p30").cloned().collect();
        assert_eq!(order, expected);
        let totals = api.totals();
        assert_eq!(
            (totals.requested_milli_cpu, totals.allocatable_milli_cpu),
            (490, 4000)
        );
        assert_eq!(totals.requested_memory, 49 << 20);
        // A cordon replaces the node and keeps its pods; deleting it takes everything.
        let mut cordoned = Node::new("n1", allocatable);
        cordoned.unschedulable = true;
        api.add_node(Arc::new(cordoned));
        assert_eq!(api.totals().allocatable_milli_cpu, 4000);
        assert_eq!(api.delete_node(Sym::new("n1")).len(), 49);
        assert_eq!(api.totals(), ClusterTotals::default());
    }
}
