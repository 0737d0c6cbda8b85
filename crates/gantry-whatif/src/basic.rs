//! The basic store: a stack of complete copies of the cluster. A fork copies every
//! NodeInfo, list and map; revert drops the top copy; commit replaces the copy below with
//! it. Simple and obviously right: the reference the delta store is tested against.

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::dra::{ClaimKey, DeviceClass, DeviceId, ResourceClaim, ResourceSlice};
use gantry_api::{Pod, Sym};
use gantry_cache::{ClusterState, DeviceUse, DraState, NodeInfo, PvcKey};

use crate::node_index::{ListFlags, NodeIndex};
use crate::store::{
    CountedDeviceUse, DeviceCounts, DraCatalog, ShareCounts, SnapshotStore, StoreError,
    claim_devices, count_shares, pvc_keys,
};

/// One complete state of the cluster.
#[derive(Debug, Default)]
pub(crate) struct ClusterData {
    pub nodes: HashMap<Sym, NodeInfo, RandomState>,
    pub index: NodeIndex,
    pub pvc_counts: HashMap<PvcKey, u32, RandomState>,
    pub claims: HashMap<ClaimKey, Arc<ResourceClaim>, RandomState>,
    /// How many claims' allocations hold each device; shared with the views handed to
    /// the allocator ([`CountedDeviceUse`]), and copied on write when one is out.
    pub allocated: Arc<DeviceCounts>,
    /// The shares of shared devices the claims hold, likewise shared.
    pub shares: Arc<ShareCounts>,
}

impl ClusterData {
    /// A copy that shares no container with this one (pods and nodes stay shared).
    fn deep_copy(&self) -> ClusterData {
        ClusterData {
            nodes: self.nodes.clone(),
            index: self.index.deep_copy(),
            pvc_counts: self.pvc_counts.clone(),
            claims: self.claims.clone(),
            allocated: Arc::new(DeviceCounts::clone(&self.allocated)),
            shares: Arc::new(ShareCounts::clone(&self.shares)),
        }
    }

    pub fn add_node(&mut self, info: NodeInfo) -> Result<(), StoreError> {
        let name = info.name();
        if self.nodes.contains_key(&name) {
            return Err(StoreError::NodeExists(name));
        }
        for pod in info.pods() {
            count_pvcs(&mut self.pvc_counts, pod, true);
        }
        self.index.push(name, ListFlags::of(&info));
        self.nodes.insert(name, info);
        Ok(())
    }

    pub fn remove_node(&mut self, name: Sym) -> Result<(), StoreError> {
        let info = self
            .nodes
            .remove(&name)
            .ok_or(StoreError::NodeNotFound(name))?;
        for pod in info.pods() {
            count_pvcs(&mut self.pvc_counts, pod, false);
        }
        self.index.remove(name);
        Ok(())
    }

    pub fn add_pod(&mut self, pod: Arc<Pod>, node: Sym) -> Result<(), StoreError> {
        let info = self
            .nodes
            .get_mut(&node)
            .ok_or(StoreError::NodeNotFound(node))?;
        let before = ListFlags::of(info);
        count_pvcs(&mut self.pvc_counts, &pod, true);
        info.add_pod(pod);
        let after = ListFlags::of(info);
        let position = self.index.position(node).expect("indexed") as u32;
        self.index.set_flags(position, before, after);
        Ok(())
    }

    pub fn remove_pod(&mut self, node: Sym, uid: &str) -> Result<Arc<Pod>, StoreError> {
        let info = self
            .nodes
            .get_mut(&node)
            .ok_or(StoreError::NodeNotFound(node))?;
        let before = ListFlags::of(info);
        let pod = info
            .remove_pod(uid)
            .ok_or_else(|| StoreError::PodNotFound {
                pod: uid.to_string(),
                node,
            })?;
        let after = ListFlags::of(info);
        count_pvcs(&mut self.pvc_counts, &pod, false);
        let position = self.index.position(node).expect("indexed") as u32;
        self.index.set_flags(position, before, after);
        Ok(pod)
    }

    pub fn set_claim(&mut self, claim: Arc<ResourceClaim>) {
        if let Some(old) = self.claims.insert(claim.key(), claim.clone()) {
            self.count(&old, false);
        }
        self.count(&claim, true);
    }

    pub fn remove_claim(&mut self, key: ClaimKey) {
        if let Some(old) = self.claims.remove(&key) {
            self.count(&old, false);
        }
    }

    /// Counts (or, `add` false, stops counting) what the claim's allocation holds.
    fn count(&mut self, claim: &ResourceClaim, add: bool) {
        count_devices(Arc::make_mut(&mut self.allocated), claim, add);
        if claim
            .allocation
            .as_ref()
            .is_some_and(|a| a.shares().next().is_some())
        {
            count_shares(
                Arc::make_mut(&mut self.shares),
                claim,
                if add { 1 } else { -1 },
            );
        }
    }
}

fn count_pvcs(counts: &mut HashMap<PvcKey, u32, RandomState>, pod: &Pod, add: bool) {
    for key in pvc_keys(pod) {
        let count = counts.entry(key).or_default();
        if add {
            *count += 1;
        } else {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&key);
            }
        }
    }
}

fn count_devices(
    counts: &mut HashMap<DeviceId, u32, RandomState>,
    claim: &ResourceClaim,
    add: bool,
) {
    for device in claim_devices(claim) {
        let count = counts.entry(device).or_default();
        if add {
            *count += 1;
        } else {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&device);
            }
        }
    }
}

pub struct BasicStore {
    /// The base state, then one copy per open fork.
    stack: Vec<ClusterData>,
    catalog: Arc<DraCatalog>,
}

impl BasicStore {
    pub fn new(catalog: Arc<DraCatalog>) -> BasicStore {
        BasicStore {
            stack: vec![ClusterData::default()],
            catalog,
        }
    }

    fn top(&self) -> &ClusterData {
        self.stack.last().expect("the base is never popped")
    }

    fn top_mut(&mut self) -> &mut ClusterData {
        self.stack.last_mut().expect("the base is never popped")
    }
}

impl ClusterState for BasicStore {
    fn num_nodes(&self) -> usize {
        self.top().index.len()
    }

    fn node_at(&self, position: usize) -> &NodeInfo {
        let top = self.top();
        &top.nodes[&top.index.name_at(position)]
    }

    fn position(&self, name: Sym) -> Option<usize> {
        self.top().index.position(name)
    }

    fn node(&self, name: Sym) -> Option<&NodeInfo> {
        self.top().nodes.get(&name)
    }

    fn with_affinity_pods(&self) -> &[u32] {
        self.top().index.with_affinity()
    }

    fn with_required_anti_affinity_pods(&self) -> &[u32] {
        self.top().index.with_required_anti_affinity()
    }

    fn is_pvc_used(&self, key: PvcKey) -> bool {
        self.top().pvc_counts.contains_key(&key)
    }

    fn dra(&self) -> Option<&dyn DraState> {
        Some(self)
    }
}

impl DraState for BasicStore {
    fn device_class(&self, name: Sym) -> Option<Arc<DeviceClass>> {
        self.catalog.classes.get(&name).cloned()
    }

    fn extended_resource_classes(&self) -> Arc<gantry_api::dra_extended::ExtendedResourceClasses> {
        self.catalog.extended.clone()
    }

    fn claim(&self, key: ClaimKey) -> Option<Arc<ResourceClaim>> {
        self.top().claims.get(&key).cloned()
    }

    fn allocated_devices(&self) -> Vec<DeviceId> {
        self.top().allocated.keys().copied().collect()
    }

    fn device_use(&self) -> Arc<dyn DeviceUse> {
        let top = self.top();
        Arc::new(CountedDeviceUse::new(
            top.allocated.clone(),
            top.shares.clone(),
        ))
    }

    fn shared_slices(&self) -> Vec<Arc<ResourceSlice>> {
        self.catalog.shared_slices.clone()
    }
}

impl SnapshotStore for BasicStore {
    fn add_node(&mut self, info: NodeInfo) -> Result<(), StoreError> {
        self.top_mut().add_node(info)
    }

    fn remove_node(&mut self, name: Sym) -> Result<(), StoreError> {
        self.top_mut().remove_node(name)
    }

    fn add_pod(&mut self, pod: Arc<Pod>, node: Sym) -> Result<(), StoreError> {
        self.top_mut().add_pod(pod, node)
    }

    fn remove_pod(&mut self, node: Sym, uid: &str) -> Result<Arc<Pod>, StoreError> {
        self.top_mut().remove_pod(node, uid)
    }

    fn set_claim(&mut self, claim: Arc<ResourceClaim>) {
        self.top_mut().set_claim(claim);
    }

    fn remove_claim(&mut self, key: ClaimKey) {
        self.top_mut().remove_claim(key);
    }

    fn fork(&mut self) {
        let copy = self.top().deep_copy();
        self.stack.push(copy);
    }

    fn revert(&mut self) -> Result<(), StoreError> {
        if self.stack.len() < 2 {
            return Err(StoreError::NoFork);
        }
        self.stack.pop();
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if self.stack.len() < 2 {
            return Err(StoreError::NoFork);
        }
        let top = self.stack.pop().expect("checked above");
        *self.top_mut() = top;
        Ok(())
    }

    fn depth(&self) -> usize {
        self.stack.len() - 1
    }

    fn claims(&self) -> Vec<Arc<ResourceClaim>> {
        let mut claims: Vec<_> = self.top().claims.values().cloned().collect();
        claims.sort_by_key(|c| (c.namespace.as_str(), c.name.clone()));
        claims
    }

    fn catalog(&self) -> &Arc<DraCatalog> {
        &self.catalog
    }
}
