//! ClusterSnapshot: a store plus the scheduler profile that decides what fits. Pods are
//! placed with the scheduler's own PreFilter, Filter, Reserve and PreBind runners, so a
//! what-if answer is the scheduler's answer; DRA claims made, allocated and reserved on
//! the way live in the current fork and vanish on revert.

use std::collections::HashMap;
use std::sync::Arc;

use gantry_api::decode::ClusterObjects;
use gantry_api::dra::{
    ClaimKey, ClaimSource, DraObjects, ResourceClaim, ResourceSlice, SliceNodes,
};
use gantry_api::dra_extended::ExtendedResourceClasses;
use gantry_api::{Node, Pod, Sym};
use gantry_cache::{ClusterState, NodeInfo, NodeTree};
use gantry_framework::plugins::dynamic_resources;
use gantry_framework::{ApiObjects, Cluster, CycleState, Profile, Status};
use gantry_scheduler::{
    FitError, PluginTimer, PodFilters, run_annotations, run_pre_bind, run_pre_filter, run_reserve,
    unreserve,
};
use thiserror::Error;

use crate::store::{DraCatalog, SnapshotStore, StoreError, StoreKind};

#[derive(Debug, Clone, Error)]
pub enum SchedulingError {
    /// The pod does not fit: kube-scheduler's message over the nodes tried.
    #[error("{0}")]
    Unschedulable(FitError),
    /// A plugin failed (not a verdict on the pod's fit), or the store refused a change.
    #[error("pod {pod}: {message}")]
    Internal { pod: String, message: String },
}

impl SchedulingError {
    fn internal(pod: &Pod, message: impl Into<String>) -> SchedulingError {
        SchedulingError::Internal {
            pod: pod.key(),
            message: message.into(),
        }
    }

    /// The FitError, when the pod simply does not fit.
    pub fn fit_error(&self) -> Option<&FitError> {
        match self {
            SchedulingError::Unschedulable(e) => Some(e),
            SchedulingError::Internal { .. } => None,
        }
    }
}

pub struct ClusterSnapshot {
    store: Box<dyn SnapshotStore>,
    profile: Profile,
    /// The Reserve and PreBind plugins whose effects live in the snapshot: only
    /// DynamicResources (its allocations are stored as claims). Others, such as
    /// VolumeBinding, keep what they promise inside the plugin, where a revert could not
    /// undo it; on a fork their Filter verdicts stand and nothing is promised.
    binding: Profile,
    objects: ApiObjects,
    /// Where the next search over all nodes starts (as upstream's rotating start).
    next_start: usize,
}

/// The nodes a what-if placement may use, and what the others are called when a pod
/// fits nowhere (`2 being drained`).
pub struct Destinations<'a> {
    pub accepts: &'a dyn Fn(&NodeInfo) -> bool,
    pub others_are: &'static str,
}

impl Destinations<'_> {
    /// Every node.
    pub const ANY: Destinations<'static> = Destinations {
        accepts: &|_| true,
        others_are: "",
    };
}

/// Whether a search that finds no node keeps why each node refused the pod.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Explain {
    Yes,
    No,
}

impl ClusterSnapshot {
    /// An empty snapshot; `profile` decides what fits (add DynamicResources to it for
    /// pods with claims, see [`with_dynamic_resources`]).
    pub fn new(
        kind: StoreKind,
        profile: Profile,
        objects: ApiObjects,
        dra: &DraObjects,
    ) -> ClusterSnapshot {
        let classes: HashMap<_, _, _> = dra
            .device_classes
            .iter()
            .map(|c| (c.name, Arc::new(c.clone())))
            .collect();
        let catalog = DraCatalog {
            extended: Arc::new(ExtendedResourceClasses::new(classes.values())),
            classes,
            templates: dra
                .templates
                .iter()
                .map(|t| (t.key(), Arc::new(t.clone())))
                .collect(),
            shared_slices: dra
                .slices
                .iter()
                .filter(|s| s.node_name().is_none())
                .cloned()
                .collect(),
        };
        let mut store = kind.new_store(Arc::new(catalog));
        for claim in &dra.claims {
            store.set_claim(Arc::new(claim.clone()));
        }
        ClusterSnapshot {
            store,
            binding: binding_profile(&profile),
            profile,
            objects,
            next_start: 0,
        }
    }

    /// Loads nodes (in the scheduler's zone-interleaved order) with their local
    /// ResourceSlices, and the pods bound to them.
    pub fn load(
        &mut self,
        nodes: &[Node],
        pods: &[Arc<Pod>],
        dra: &DraObjects,
    ) -> Result<(), StoreError> {
        let mut tree = NodeTree::default();
        for node in nodes {
            tree.add(node);
        }
        // By name, looked up once each: the last node of a name, and each node's own
        // slices in input order (a scan of all of them per node is quadratic at 100,000).
        let by_name: HashMap<Sym, &Node> = nodes.iter().map(|n| (n.name, n)).collect();
        let mut local: HashMap<Sym, Vec<Arc<ResourceSlice>>> = HashMap::new();
        for slice in &dra.slices {
            if let SliceNodes::Node(node) = slice.nodes {
                local.entry(node).or_default().push(slice.clone());
            }
        }
        for name in tree.list() {
            let node = by_name[&name];
            let mut info = NodeInfo::new(Arc::new(node.clone()));
            if let Some(slices) = local.remove(&name) {
                info.set_resource_slices(slices);
            }
            self.store.add_node(info)?;
        }
        for pod in pods {
            if let Some(node) = pod.node_name {
                self.store.add_pod(pod.clone(), node)?;
            }
        }
        Ok(())
    }

    /// A snapshot of decoded manifests: nodes with their slices, the pods bound to them,
    /// the DRA objects, and the namespaces, services and storage objects plugins read.
    pub fn from_objects(
        kind: StoreKind,
        profile: Profile,
        cluster: &ClusterObjects,
    ) -> Result<ClusterSnapshot, StoreError> {
        let objects = ApiObjects::from_cluster(cluster);
        let mut snapshot = ClusterSnapshot::new(kind, profile, objects, &cluster.dra);
        let bound: Vec<Arc<Pod>> = cluster
            .pods
            .iter()
            .filter(|p| p.node_name.is_some())
            .map(|p| Arc::new(p.clone()))
            .collect();
        snapshot.load(&cluster.nodes, &bound, &cluster.dra)?;
        Ok(snapshot)
    }

    pub fn store(&self) -> &dyn SnapshotStore {
        &*self.store
    }

    pub fn cluster(&self) -> &dyn ClusterState {
        &*self.store
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    pub fn objects(&self) -> &ApiObjects {
        &self.objects
    }

    pub fn fork(&mut self) {
        self.store.fork();
    }

    pub fn revert(&mut self) -> Result<(), StoreError> {
        self.store.revert()
    }

    pub fn commit(&mut self) -> Result<(), StoreError> {
        self.store.commit()
    }

    pub fn add_node(&mut self, info: NodeInfo) -> Result<(), StoreError> {
        self.store.add_node(info)
    }

    /// Removes a node and its pods, and gives back the pods' claims as [`Self::remove_pod`]
    /// does (the autoscaler's `RemoveNodeInfo`: the claims its pods own go with them).
    pub fn remove_node(&mut self, name: Sym) -> Result<(), StoreError> {
        let pods: Vec<Arc<Pod>> = self
            .store
            .node(name)
            .map(|info| info.pods().to_vec())
            .unwrap_or_default();
        self.store.remove_node(name)?;
        for pod in &pods {
            self.release_claims(pod);
        }
        Ok(())
    }

    /// Accounts a pod on a node without checking anything (a pod already running there).
    pub fn add_pod(&mut self, pod: Arc<Pod>, node: Sym) -> Result<(), StoreError> {
        self.store.add_pod(pod, node)
    }

    /// Takes a pod off its node and gives back its claims: it leaves their `reservedFor`;
    /// a claim no pod uses any more is deallocated, and one made for this pod from a
    /// template is deleted (as the claim controller does).
    pub fn remove_pod(&mut self, node: Sym, pod: &Pod) -> Result<Arc<Pod>, StoreError> {
        let removed = self.store.remove_pod(node, &pod.uid)?;
        self.release_claims(pod);
        Ok(removed)
    }

    /// The claims of a pod that left: those it owns deleted (the claim made for its
    /// extended resources too), the others without its
    /// reservation, and deallocated when no pod holds them any more.
    fn release_claims(&mut self, pod: &Pod) {
        if gantry_api::dra_extended::asks_for_extended_resources(pod) {
            let key = gantry_api::dra_extended::extended_claim_key(pod);
            if self
                .store
                .claim(key)
                .is_some_and(|c| c.extended_resource && c.owner_pod.as_deref() == Some(&*pod.uid))
            {
                self.store.remove_claim(key);
            }
        }
        for entry in pod.resource_claims.iter() {
            let key = ClaimKey {
                namespace: pod.namespace,
                name: Sym::new(&pod.claim_name(entry)),
            };
            let Some(claim) = self.store.claim(key) else {
                continue;
            };
            if claim.owner_pod.as_deref() == Some(&*pod.uid) {
                self.store.remove_claim(key);
                continue;
            }
            let mut updated = ResourceClaim::clone(&claim);
            updated.reserved_for.retain(|c| c.uid != pod.uid);
            if updated.reserved_for.is_empty() {
                updated.allocation = None;
            }
            self.store.set_claim(Arc::new(updated));
        }
    }

    /// Makes the pod's template claims and runs PreFilter: the cycle state, and the nodes
    /// PreFilter narrowed the search to (`None`: all).
    pub fn pre_filter_state(
        &mut self,
        pod: &Pod,
    ) -> Result<(CycleState, Option<Vec<Sym>>), SchedulingError> {
        self.make_template_claims(pod);
        let mut state = CycleState::new();
        let candidates = self.pre_filter(&mut state, pod)?;
        Ok((state, candidates))
    }

    /// Runs PreFilter and Filter for the pod on one node, without placing it.
    pub fn check_on_node(&mut self, pod: &Pod, node: Sym) -> Result<CycleState, SchedulingError> {
        let Some(position) = self.store.position(node) else {
            return Err(SchedulingError::internal(
                pod,
                format!("node {node} is not in the snapshot"),
            ));
        };
        let (state, candidates) = self.pre_filter_state(pod)?;
        if let Some(names) = candidates
            && !names.contains(&node)
        {
            return Err(self.unschedulable(vec![(
                node,
                Status::unresolvable("node(s) didn't satisfy plugin(s) PreFilter"),
            )]));
        }
        let filters = PodFilters::new(&self.profile, &state);
        let status = filters.run(&state, pod, self.store.node_at(position));
        if status.is_success() {
            return Ok(state);
        }
        if status.is_rejected() {
            return Err(self.unschedulable(vec![(node, status)]));
        }
        Err(SchedulingError::internal(pod, status.message()))
    }

    /// Places the pod on the node if Filter allows it there: Reserve and PreBind run (DRA
    /// claims are allocated and reserved), then the pod is accounted on the node.
    pub fn schedule_on_node(&mut self, pod: &Arc<Pod>, node: Sym) -> Result<(), SchedulingError> {
        let state = self.check_on_node(pod, node)?;
        self.place(pod, node, state)
    }

    /// Places the pod on the first node, in the scheduler's order from a rotating start,
    /// that `destinations` accepts and Filter allows; `hint` is tried first. Returns the node,
    /// or why each node refused the pod.
    pub fn schedule_anywhere(
        &mut self,
        pod: &Arc<Pod>,
        hint: Option<Sym>,
        destinations: &Destinations,
    ) -> Result<Sym, SchedulingError> {
        self.search(pod, hint, destinations, Explain::Yes)
    }

    /// [`schedule_anywhere`](Self::schedule_anywhere) for a caller that only needs to know
    /// whether the pod fits: `Ok(None)` when it fits nowhere, without keeping why each node
    /// refused it (the autoscaler's `RunFiltersUntilPassingNode` keeps nothing either). A
    /// pod tried on thousands of full nodes otherwise makes and drops a status for each.
    pub fn place_anywhere(
        &mut self,
        pod: &Arc<Pod>,
        destinations: &Destinations,
    ) -> Result<Option<Sym>, SchedulingError> {
        match self.search(pod, None, destinations, Explain::No) {
            Ok(node) => Ok(Some(node)),
            Err(SchedulingError::Unschedulable(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The search behind both. A pod that fits nowhere is an `Unschedulable` error, with
    /// every node's status only under `Explain::Yes`.
    fn search(
        &mut self,
        pod: &Arc<Pod>,
        hint: Option<Sym>,
        destinations: &Destinations,
        explain: Explain,
    ) -> Result<Sym, SchedulingError> {
        let eligible = destinations.accepts;
        let (state, candidates) = self.pre_filter_state(pod)?;
        let filters = PodFilters::new(&self.profile, &state);
        let cluster = &*self.store;
        let total = cluster.num_nodes();
        let allowed = |info: &NodeInfo| {
            candidates
                .as_ref()
                .is_none_or(|names| names.contains(&info.name()))
                && eligible(info)
        };
        let mut statuses = Vec::new();
        // Nodes the destinations leave out are said only if the pod fits nowhere (below):
        // an estimate's pods may go to its few new nodes alone, among thousands.
        let mut left_out = false;
        let start = self.next_start;
        let mut chosen = None;
        if let Some(hint) = hint
            && let Some(info) = cluster.node(hint)
            && allowed(info)
        {
            let status = filters.run(&state, pod, info);
            if status.is_success() {
                chosen = Some(hint);
            }
        }
        if chosen.is_none() {
            for offset in 0..total {
                let position = (start + offset) % total;
                let info = cluster.node_at(position);
                if !allowed(info) {
                    left_out |= !eligible(info);
                    continue;
                }
                let status = filters.run(&state, pod, info);
                if status.is_success() {
                    chosen = Some(info.name());
                    self.next_start = (position + 1) % total.max(1);
                    break;
                }
                if !status.is_rejected() {
                    return Err(SchedulingError::internal(pod, status.message()));
                }
                if explain == Explain::Yes {
                    statuses.push((info.name(), status));
                }
            }
        }
        match chosen {
            Some(node) => {
                self.place(pod, node, state)?;
                Ok(node)
            }
            None if explain == Explain::No => Err(self.unschedulable(Vec::new())),
            None if left_out => {
                // In node order, as the search met them: each node the destinations leave
                // out is said, so that a pod that fits nowhere is not `0/N nodes are
                // available:` and nothing after.
                let mut filtered = statuses.into_iter();
                let mut all = Vec::with_capacity(total);
                for offset in 0..total {
                    let info = cluster.node_at((start + offset) % total);
                    if allowed(info) {
                        all.extend(filtered.next());
                    } else if !eligible(info) {
                        let why = Status::unresolvable(destinations.others_are);
                        all.push((info.name(), why));
                    }
                }
                Err(self.unschedulable(all))
            }
            None => Err(self.unschedulable(statuses)),
        }
    }

    fn unschedulable(&self, node_statuses: Vec<(Sym, Status)>) -> SchedulingError {
        SchedulingError::Unschedulable(FitError {
            num_all_nodes: self.store.num_nodes(),
            node_statuses,
            ..FitError::default()
        })
    }

    /// PreFilter: `Ok(Some(names))` when plugins narrowed the nodes.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
    ) -> Result<Option<Vec<Sym>>, SchedulingError> {
        let cluster = Cluster {
            nodes: &*self.store,
            objects: &self.objects,
        };
        match run_pre_filter(
            &self.profile,
            state,
            pod,
            cluster,
            &mut PluginTimer::default(),
        ) {
            Ok(narrowed) => Ok(narrowed.map(|n| n.nodes)),
            Err(status) if status.is_rejected() => Err(SchedulingError::Unschedulable(FitError {
                num_all_nodes: self.store.num_nodes(),
                pre_filter_message: Some(status.message()),
                release: self.profile.release,
                ..FitError::default()
            })),
            Err(status) => Err(SchedulingError::internal(pod, status.message())),
        }
    }

    /// Reserve and PreBind on the chosen node; the claims PreBind wrote and the pod are
    /// then stored.
    fn place(
        &mut self,
        pod: &Arc<Pod>,
        node: Sym,
        mut state: CycleState,
    ) -> Result<(), SchedulingError> {
        let info = self.store.node(node).ok_or_else(|| {
            SchedulingError::internal(pod, format!("node {node} is not in the snapshot"))
        })?;
        // The pod as the live cycle assumes it: bound to the node, with what the Filter
        // plugins write on it (GPUShare: the cards it holds, which count only on the node
        // written); a fork has no clock, so the time written is 0.
        let written = run_annotations(&self.profile, &state, pod, info, 0)
            .map_err(|status| SchedulingError::internal(pod, status.message()))?;
        let pod = &{
            let mut placed = pod.bound_to(node);
            if !written.is_empty() {
                placed.bind_annotations = Some(written.into());
            }
            Arc::new(placed)
        };
        run_reserve(&self.binding, &mut state, pod, info)
            .map_err(|m| SchedulingError::internal(pod, m))?;
        if let Err(message) = run_pre_bind(Some(&self.binding), &mut state, pod, node) {
            unreserve(&self.binding, &mut state, pod, node);
            return Err(SchedulingError::internal(pod, message));
        }
        for claim in dynamic_resources::bound_claims(&state) {
            self.store.set_claim(claim.clone());
        }
        self.store
            .add_pod(pod.clone(), node)
            .map_err(|e| SchedulingError::internal(pod, e.to_string()))
    }

    /// Makes the claims the pod's templates call for, as the claim controller would,
    /// where they do not exist yet: owned by the pod, in the current fork.
    fn make_template_claims(&mut self, pod: &Pod) {
        for entry in pod.resource_claims.iter() {
            let ClaimSource::Template(template) = entry.source else {
                continue;
            };
            let name = pod.claim_name(entry);
            let key = ClaimKey {
                namespace: pod.namespace,
                name: Sym::new(&name),
            };
            if self.store.claim(key).is_some() {
                continue;
            }
            let template_key = ClaimKey {
                namespace: pod.namespace,
                name: template,
            };
            let Some(template) = self.store.catalog().templates.get(&template_key).cloned() else {
                continue;
            };
            self.store
                .set_claim(Arc::new(template.claim_for(pod, name)));
        }
    }
}

/// The profile's DynamicResources at Reserve and PreBind, and nothing else.
fn binding_profile(profile: &Profile) -> Profile {
    let mut binding = Profile::empty(profile.scheduler_name.as_str());
    let is_dra = |name: &str| name == dynamic_resources::NAME;
    binding.reserve = profile
        .reserve
        .iter()
        .filter(|p| is_dra(p.name()))
        .cloned()
        .collect();
    binding.pre_bind = profile
        .pre_bind
        .iter()
        .filter(|p| is_dra(p.name()))
        .cloned()
        .collect();
    binding
}

/// The profile with DynamicResources added at PreFilter, Filter, Reserve and PreBind
/// (where it is not already), as upstream adds it when DRA is on.
pub fn with_dynamic_resources(mut profile: Profile) -> Profile {
    let name = dynamic_resources::NAME;
    if profile.filter.iter().any(|p| p.name() == name) {
        return profile;
    }
    let plugin = Arc::new(dynamic_resources::DynamicResources::for_release(
        profile.release,
    ));
    profile.pre_filter.push(plugin.clone());
    profile.filter.push(plugin.clone());
    profile.reserve.push(plugin.clone());
    profile.pre_bind.push(plugin);
    profile
}
