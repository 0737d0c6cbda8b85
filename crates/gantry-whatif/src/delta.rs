//! The delta store: a base state and a stack of layers, one per open fork. A layer holds
//! only what changed since its fork: NodeInfos added or modified (copied up on their
//! first change), nodes deleted, claim-usage and device-allocation count changes, and
//! claims set or removed. Reads look through the layers from the top down to the base.
//! The node index (order and sub-lists) is shared with the layer below until a change
//! needs its own copy.
//!
//! Fork and revert are O(1); commit is O(changes in the top layer).

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::dra::{ClaimKey, DeviceClass, DeviceId, ResourceClaim, ResourceSlice};
use gantry_api::{Pod, Sym};
use gantry_cache::{ClusterState, DeviceUse, DraState, NodeInfo, PvcKey};

use crate::basic::ClusterData;
use crate::node_index::{ListFlags, NodeIndex};
use crate::store::{
    CountedDeviceUse, DraCatalog, ShareCounts, SnapshotStore, StoreError, claim_devices,
    count_shares, merge_shares, pvc_keys,
};

type Map<K, V> = HashMap<K, V, RandomState>;

#[derive(Default)]
struct Layer {
    /// `Some`: added or modified here; `None`: deleted here.
    nodes: Map<Sym, Option<NodeInfo>>,
    index: NodeIndex,
    pvc_changes: Map<PvcKey, i64>,
    /// `Some`: set here; `None`: removed here.
    claims: Map<ClaimKey, Option<Arc<ResourceClaim>>>,
    allocation_changes: Map<DeviceId, i64>,
    share_changes: ShareCounts,
}

pub struct DeltaStore {
    base: ClusterData,
    layers: Vec<Layer>,
    catalog: Arc<DraCatalog>,
}

impl DeltaStore {
    pub fn new(catalog: Arc<DraCatalog>) -> DeltaStore {
        DeltaStore {
            base: ClusterData::default(),
            layers: Vec::new(),
            catalog,
        }
    }

    fn index(&self) -> &NodeIndex {
        self.layers.last().map_or(&self.base.index, |l| &l.index)
    }

    /// The node as the top of the stack sees it.
    fn lookup(&self, name: Sym) -> Option<&NodeInfo> {
        for layer in self.layers.iter().rev() {
            if let Some(entry) = layer.nodes.get(&name) {
                return entry.as_ref();
            }
        }
        self.base.nodes.get(&name)
    }

    /// The node in the top layer, copied up from below on its first change there.
    fn node_mut<'a>(
        layers: &'a mut [Layer],
        base: &ClusterData,
        name: Sym,
    ) -> Result<&'a mut NodeInfo, StoreError> {
        let (top, below) = layers.split_last_mut().expect("called with a layer");
        let entry = match top.nodes.entry(name) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let found = below
                    .iter()
                    .rev()
                    .find_map(|l| l.nodes.get(&name))
                    .map_or_else(|| base.nodes.get(&name), Option::as_ref)
                    .ok_or(StoreError::NodeNotFound(name))?;
                entry.insert(Some(found.clone()))
            }
        };
        entry.as_mut().ok_or(StoreError::NodeNotFound(name))
    }

    fn pvc_count(&self, key: PvcKey) -> i64 {
        let base = i64::from(self.base.pvc_counts.get(&key).copied().unwrap_or(0));
        base + self
            .layers
            .iter()
            .map(|l| l.pvc_changes.get(&key).copied().unwrap_or(0))
            .sum::<i64>()
    }

    fn allocation_count(&self, device: DeviceId) -> i64 {
        let base = i64::from(self.base.allocated.get(&device).copied().unwrap_or(0));
        base + self
            .layers
            .iter()
            .map(|l| l.allocation_changes.get(&device).copied().unwrap_or(0))
            .sum::<i64>()
    }

    fn change_pvcs(layer: &mut Layer, pod: &Pod, sign: i64) {
        for key in pvc_keys(pod) {
            *layer.pvc_changes.entry(key).or_default() += sign;
        }
    }

    fn change_devices(layer: &mut Layer, claim: &ResourceClaim, sign: i64) {
        for device in claim_devices(claim) {
            *layer.allocation_changes.entry(device).or_default() += sign;
        }
        count_shares(&mut layer.share_changes, claim, sign);
    }
}

impl ClusterState for DeltaStore {
    fn num_nodes(&self) -> usize {
        self.index().len()
    }

    fn node_at(&self, position: usize) -> &NodeInfo {
        let name = self.index().name_at(position);
        self.lookup(name).expect("indexed nodes exist")
    }

    fn position(&self, name: Sym) -> Option<usize> {
        self.index().position(name)
    }

    fn node(&self, name: Sym) -> Option<&NodeInfo> {
        self.lookup(name)
    }

    fn with_affinity_pods(&self) -> &[u32] {
        self.index().with_affinity()
    }

    fn with_required_anti_affinity_pods(&self) -> &[u32] {
        self.index().with_required_anti_affinity()
    }

    fn is_pvc_used(&self, key: PvcKey) -> bool {
        self.pvc_count(key) > 0
    }

    fn dra(&self) -> Option<&dyn DraState> {
        Some(self)
    }
}

impl DraState for DeltaStore {
    fn device_class(&self, name: Sym) -> Option<Arc<DeviceClass>> {
        self.catalog.classes.get(&name).cloned()
    }

    fn extended_resource_classes(&self) -> Arc<gantry_api::dra_extended::ExtendedResourceClasses> {
        self.catalog.extended.clone()
    }

    fn claim(&self, key: ClaimKey) -> Option<Arc<ResourceClaim>> {
        for layer in self.layers.iter().rev() {
            if let Some(entry) = layer.claims.get(&key) {
                return entry.clone();
            }
        }
        self.base.claims.get(&key).cloned()
    }

    fn allocated_devices(&self) -> Vec<DeviceId> {
        let mut candidates: Vec<DeviceId> = self.base.allocated.keys().copied().collect();
        for layer in &self.layers {
            candidates.extend(layer.allocation_changes.keys().copied());
        }
        candidates.sort_unstable();
        candidates.dedup();
        candidates.retain(|d| self.allocation_count(*d) > 0);
        candidates
    }

    /// The base's counts, shared, and the layers' changes summed: O(changes) a pod, where
    /// a copy of every device allocated made each estimate's pod cost the whole cluster.
    fn device_use(&self) -> Arc<dyn DeviceUse> {
        let mut used = CountedDeviceUse::new(self.base.allocated.clone(), self.base.shares.clone());
        for layer in &self.layers {
            for (device, change) in &layer.allocation_changes {
                used.change(*device, *change);
            }
            used.change_shares(&layer.share_changes);
        }
        Arc::new(used)
    }

    fn shared_slices(&self) -> Vec<Arc<ResourceSlice>> {
        self.catalog.shared_slices.clone()
    }
}

impl SnapshotStore for DeltaStore {
    fn add_node(&mut self, info: NodeInfo) -> Result<(), StoreError> {
        let name = info.name();
        if self.layers.is_empty() {
            return self.base.add_node(info);
        }
        if self.lookup(name).is_some() {
            return Err(StoreError::NodeExists(name));
        }
        let layer = self.layers.last_mut().expect("checked above");
        for pod in info.pods() {
            Self::change_pvcs(layer, pod, 1);
        }
        layer.index.push(name, ListFlags::of(&info));
        layer.nodes.insert(name, Some(info));
        Ok(())
    }

    fn remove_node(&mut self, name: Sym) -> Result<(), StoreError> {
        if self.layers.is_empty() {
            return self.base.remove_node(name);
        }
        let pods: Vec<Arc<Pod>> = self
            .lookup(name)
            .ok_or(StoreError::NodeNotFound(name))?
            .pods()
            .to_vec();
        let layer = self.layers.last_mut().expect("checked above");
        for pod in &pods {
            Self::change_pvcs(layer, pod, -1);
        }
        layer.index.remove(name);
        layer.nodes.insert(name, None);
        Ok(())
    }

    fn add_pod(&mut self, pod: Arc<Pod>, node: Sym) -> Result<(), StoreError> {
        if self.layers.is_empty() {
            return self.base.add_pod(pod, node);
        }
        let info = Self::node_mut(&mut self.layers, &self.base, node)?;
        let before = ListFlags::of(info);
        info.add_pod(pod.clone());
        let after = ListFlags::of(info);
        let layer = self.layers.last_mut().expect("checked above");
        Self::change_pvcs(layer, &pod, 1);
        if before != after {
            let position = layer.index.position(node).expect("indexed") as u32;
            layer.index.set_flags(position, before, after);
        }
        Ok(())
    }

    fn remove_pod(&mut self, node: Sym, uid: &str) -> Result<Arc<Pod>, StoreError> {
        if self.layers.is_empty() {
            return self.base.remove_pod(node, uid);
        }
        let info = self.lookup(node).ok_or(StoreError::NodeNotFound(node))?;
        if !info.pods().iter().any(|p| &*p.uid == uid) {
            return Err(StoreError::PodNotFound {
                pod: uid.to_string(),
                node,
            });
        }
        let info = Self::node_mut(&mut self.layers, &self.base, node)?;
        let before = ListFlags::of(info);
        let pod = info.remove_pod(uid).expect("checked above");
        let after = ListFlags::of(info);
        let layer = self.layers.last_mut().expect("checked above");
        Self::change_pvcs(layer, &pod, -1);
        if before != after {
            let position = layer.index.position(node).expect("indexed") as u32;
            layer.index.set_flags(position, before, after);
        }
        Ok(pod)
    }

    fn set_claim(&mut self, claim: Arc<ResourceClaim>) {
        if self.layers.is_empty() {
            return self.base.set_claim(claim);
        }
        let old = self.claim(claim.key());
        let layer = self.layers.last_mut().expect("checked above");
        if let Some(old) = old {
            Self::change_devices(layer, &old, -1);
        }
        Self::change_devices(layer, &claim, 1);
        layer.claims.insert(claim.key(), Some(claim));
    }

    fn remove_claim(&mut self, key: ClaimKey) {
        if self.layers.is_empty() {
            return self.base.remove_claim(key);
        }
        let Some(old) = self.claim(key) else {
            return;
        };
        let layer = self.layers.last_mut().expect("checked above");
        Self::change_devices(layer, &old, -1);
        layer.claims.insert(key, None);
    }

    fn fork(&mut self) {
        let index = self.index().clone();
        self.layers.push(Layer {
            index,
            ..Layer::default()
        });
    }

    fn revert(&mut self) -> Result<(), StoreError> {
        self.layers.pop().map(|_| ()).ok_or(StoreError::NoFork)
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        let top = self.layers.pop().ok_or(StoreError::NoFork)?;
        match self.layers.last_mut() {
            Some(below) => {
                below.nodes.extend(top.nodes);
                below.index = top.index;
                for (key, change) in top.pvc_changes {
                    *below.pvc_changes.entry(key).or_default() += change;
                }
                below.claims.extend(top.claims);
                for (device, change) in top.allocation_changes {
                    *below.allocation_changes.entry(device).or_default() += change;
                }
                merge_shares(&mut below.share_changes, &top.share_changes);
            }
            None => {
                let base = &mut self.base;
                for (name, entry) in top.nodes {
                    match entry {
                        Some(info) => base.nodes.insert(name, info),
                        None => base.nodes.remove(&name),
                    };
                }
                base.index = top.index;
                for (key, change) in top.pvc_changes {
                    apply_count(&mut base.pvc_counts, key, change);
                }
                for (key, entry) in top.claims {
                    match entry {
                        Some(claim) => base.claims.insert(key, claim),
                        None => base.claims.remove(&key),
                    };
                }
                for (device, change) in top.allocation_changes {
                    apply_count(Arc::make_mut(&mut base.allocated), device, change);
                }
                if !top.share_changes.is_empty() {
                    merge_shares(Arc::make_mut(&mut base.shares), &top.share_changes);
                }
            }
        }
        Ok(())
    }

    fn depth(&self) -> usize {
        self.layers.len()
    }

    fn claims(&self) -> Vec<Arc<ResourceClaim>> {
        let mut keys: Vec<ClaimKey> = self.base.claims.keys().copied().collect();
        for layer in &self.layers {
            keys.extend(layer.claims.keys().copied());
        }
        keys.sort_unstable();
        keys.dedup();
        let mut claims: Vec<_> = keys.into_iter().filter_map(|k| self.claim(k)).collect();
        claims.sort_by_key(|c| (c.namespace.as_str(), c.name.clone()));
        claims
    }

    fn catalog(&self) -> &Arc<DraCatalog> {
        &self.catalog
    }
}

/// Adds a change to a count, dropping the entry at zero.
fn apply_count<K: std::hash::Hash + Eq>(counts: &mut Map<K, u32>, key: K, change: i64) {
    let count = i64::from(counts.get(&key).copied().unwrap_or(0)) + change;
    if count > 0 {
        counts.insert(key, count as u32);
    } else {
        counts.remove(&key);
    }
}
