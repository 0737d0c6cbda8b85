//! The API objects other than nodes and pods (namespaces, services, the pods'
//! controllers, storage, priority classes, disruption budgets), as the watches last reported them. Plugins
//! read them through an [`ApiObjects`] that is rebuilt after a batch of events changed
//! any of them (they change rarely; rebuilding keeps one code path with the simulation).

use std::collections::BTreeMap;

use gantry_api::decode::{ControllerKind, Namespace, PodController, PriorityClass, Service};
use gantry_api::{
    CsiDriver, CsiNode, PersistentVolume, PersistentVolumeClaim, PodDisruptionBudget,
    PreemptionPolicy, StorageCapacity, StorageClass, Sym,
};
use gantry_framework::ApiObjects;

use crate::watch::{Kind, Object};

/// Objects by kind and key; ordered maps, so that the rebuilt lists (and ties that depend
/// on their order) do not vary between runs.
#[derive(Debug, Default)]
pub struct ObjectMirror {
    namespaces: BTreeMap<String, Namespace>,
    priority_classes: BTreeMap<String, PriorityClass>,
    services: BTreeMap<String, Service>,
    controllers: BTreeMap<(ControllerKind, String), PodController>,
    pvs: BTreeMap<String, PersistentVolume>,
    pvcs: BTreeMap<String, PersistentVolumeClaim>,
    storage_classes: BTreeMap<String, StorageClass>,
    csi_nodes: BTreeMap<String, CsiNode>,
    csi_drivers: BTreeMap<String, CsiDriver>,
    storage_capacities: BTreeMap<String, StorageCapacity>,
    budgets: BTreeMap<String, PodDisruptionBudget>,
    changed: bool,
}

impl ObjectMirror {
    /// Records an applied (`Some`) or deleted object of the kinds kept here; returns the
    /// object back when it is a node, a pod or a DRA object, which the caller handles.
    pub fn apply(&mut self, object: Object, deleted: bool) -> Option<Object> {
        fn put<K: Ord, T>(map: &mut BTreeMap<K, T>, key: K, value: T, deleted: bool) {
            if deleted {
                map.remove(&key);
            } else {
                map.insert(key, value);
            }
        }
        match object {
            Object::Node(_)
            | Object::Pod(..)
            | Object::DeviceClass(..)
            | Object::ResourceSlice(_)
            | Object::ResourceClaim(..) => return Some(object),
            Object::Namespace(ns) => put(&mut self.namespaces, ns.name.to_string(), ns, deleted),
            Object::PriorityClass(pc) => {
                put(&mut self.priority_classes, pc.name.to_string(), pc, deleted)
            }
            Object::Service(svc) => {
                let key = format!("{}/{}", svc.namespace, svc.name);
                put(&mut self.services, key, svc, deleted)
            }
            Object::Controller(controller) => {
                let key = (
                    controller.kind,
                    format!("{}/{}", controller.namespace, controller.name),
                );
                put(&mut self.controllers, key, controller, deleted)
            }
            Object::PersistentVolume(pv) => put(&mut self.pvs, pv.name.to_string(), pv, deleted),
            Object::PersistentVolumeClaim(pvc) => {
                let key = format!("{}/{}", pvc.namespace, pvc.name);
                put(&mut self.pvcs, key, pvc, deleted)
            }
            Object::StorageClass(sc) => {
                put(&mut self.storage_classes, sc.name.to_string(), sc, deleted)
            }
            Object::PodDisruptionBudget(pdb) => {
                let key = format!("{}/{}", pdb.namespace, pdb.name);
                put(&mut self.budgets, key, pdb, deleted)
            }
            Object::CsiNode(csi) => {
                put(&mut self.csi_nodes, csi.node_name.to_string(), csi, deleted)
            }
            Object::CsiDriver(driver) => put(
                &mut self.csi_drivers,
                driver.name.to_string(),
                driver,
                deleted,
            ),
            Object::StorageCapacity(capacity) => put(
                &mut self.storage_capacities,
                capacity.key.clone(),
                capacity,
                deleted,
            ),
        }
        self.changed = true;
        None
    }

    /// Replaces every object of a kind kept here with a complete list.
    pub fn relist(&mut self, kind: Kind, objects: Vec<Object>) {
        match kind {
            Kind::Namespace => self.namespaces.clear(),
            Kind::PriorityClass => self.priority_classes.clear(),
            Kind::Service => self.services.clear(),
            Kind::ReplicationController => {
                self.clear_controllers(ControllerKind::ReplicationController)
            }
            Kind::ReplicaSet => self.clear_controllers(ControllerKind::ReplicaSet),
            Kind::StatefulSet => self.clear_controllers(ControllerKind::StatefulSet),
            Kind::PersistentVolume => self.pvs.clear(),
            Kind::PersistentVolumeClaim => self.pvcs.clear(),
            Kind::StorageClass => self.storage_classes.clear(),
            Kind::CsiNode => self.csi_nodes.clear(),
            Kind::CsiDriver => self.csi_drivers.clear(),
            Kind::CsiStorageCapacity => self.storage_capacities.clear(),
            Kind::PodDisruptionBudget => self.budgets.clear(),
            Kind::Node
            | Kind::Pod
            | Kind::DeviceClass
            | Kind::ResourceSlice
            | Kind::ResourceClaim => return,
        }
        self.changed = true;
        for object in objects {
            self.apply(object, false);
        }
    }

    fn clear_controllers(&mut self, kind: ControllerKind) {
        self.controllers.retain(|(k, _), _| *k != kind);
    }

    /// A fresh `ApiObjects` if anything changed since the last call.
    pub fn take_changed(&mut self) -> Option<ApiObjects> {
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        let namespaces: Vec<Namespace> = self.namespaces.values().cloned().collect();
        let services: Vec<Service> = self.services.values().cloned().collect();
        let mut objects = ApiObjects::new(&namespaces, &services);
        let controllers: Vec<PodController> = self.controllers.values().cloned().collect();
        objects.set_controllers(&controllers);
        let pvs: Vec<_> = self.pvs.values().cloned().collect();
        let pvcs: Vec<_> = self.pvcs.values().cloned().collect();
        let classes: Vec<_> = self.storage_classes.values().cloned().collect();
        let csi: Vec<_> = self.csi_nodes.values().cloned().collect();
        objects.set_storage(&pvs, &pvcs, &classes, &csi);
        let drivers: Vec<_> = self.csi_drivers.values().cloned().collect();
        let capacities: Vec<_> = self.storage_capacities.values().cloned().collect();
        objects.set_storage_capacities(&drivers, &capacities);
        let budgets: Vec<_> = self.budgets.values().cloned().collect();
        objects.set_disruption_budgets(&budgets);
        Some(objects)
    }

    /// The priority a pod without `spec.priority` gets, as the Priority admission plugin
    /// gives it: its class's value, or the global default's (an API server has always
    /// done this already; a pod written around admission still gets its due).
    pub fn priority_of(&self, class: Option<Sym>) -> Option<(i32, PreemptionPolicy)> {
        let class = match class {
            Some(name) => self.priority_classes.get(name.as_str()),
            None => self.priority_classes.values().find(|c| c.global_default),
        }?;
        Some((class.value, class.preemption_policy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::LabelSelector;
    use gantry_api::storage::VolumeBindingMode;

    /// The watches' CSIDrivers and CSIStorageCapacities reach VolumeBinding's capacity
    /// check: added, then the capacity deleted.
    #[test]
    fn storage_capacities_follow_their_watches() {
        let class = StorageClass {
            name: Sym::new("fast"),
            provisioner: Sym::new("csi.example.com"),
            binding_mode: VolumeBindingMode::WaitForFirstConsumer,
            allowed_topologies: None,
        };
        let capacity = StorageCapacity {
            key: "default/fast-n1".into(),
            storage_class: class.name,
            node_topology: Some(LabelSelector::default()),
            capacity: Some(10 << 30),
            maximum_volume_size: None,
        };
        let mut mirror = ObjectMirror::default();
        let driver = CsiDriver {
            name: class.provisioner,
            storage_capacity: true,
        };
        mirror.apply(Object::CsiDriver(driver), false);
        mirror.apply(Object::StorageCapacity(capacity.clone()), false);
        let objects = mirror.take_changed().expect("changed");
        let found = objects.storage_capacities().candidates(&class, 1 << 30);
        assert_eq!(found.map(|c| c.len()), Some(1));
        mirror.apply(Object::StorageCapacity(capacity), true);
        let objects = mirror.take_changed().expect("changed");
        let found = objects.storage_capacities().candidates(&class, 1 << 30);
        assert_eq!(found.map(|c| c.len()), Some(0), "tracked, and none left");
    }
}
