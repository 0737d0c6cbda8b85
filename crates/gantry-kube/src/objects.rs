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
use gantry_framework::{ActionType, ApiObjects, ClusterEvent, EventResource};

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

/// What [`ObjectMirror::apply`] did with an object.
#[derive(Debug)]
pub enum Mirrored {
    /// A node, a pod or a DRA object: the caller's to handle.
    Forward(Object),
    /// Kept here; for the storage kinds plugins register events for, the event.
    Kept(Option<StorageEvent>),
}

/// A storage object added, changed or deleted, as the scheduling queue hears of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageEvent {
    pub event: ClusterEvent,
    /// For a claim, its namespace and name: only pods using it may now fit (the
    /// storage plugins' queueing hints for claims look at nothing else).
    pub claim: Option<(Sym, Sym)>,
}

impl StorageEvent {
    /// Whether the event may let `pod` in: a claim's concerns the pods using it, any
    /// other every pod (the plugins registered for it judge).
    pub fn concerns(&self, pod: &gantry_api::Pod) -> bool {
        self.claim.is_none_or(|(namespace, name)| {
            pod.namespace == namespace
                && (pod.volumes.iter()).any(|v| v.claim_name.as_deref() == Some(name.as_str()))
        })
    }
}

impl ObjectMirror {
    /// Records an applied or deleted object of the kinds kept here; a node, a pod, a
    /// PodGroup or a DRA object is handed back.
    pub fn apply(&mut self, object: Object, deleted: bool) -> Mirrored {
        /// Puts or removes the object; the action, `None` when a deleted object was not
        /// known.
        fn put<K: Ord, T>(
            map: &mut BTreeMap<K, T>,
            key: K,
            value: T,
            deleted: bool,
        ) -> Option<ActionType> {
            if deleted {
                map.remove(&key).map(|_| ActionType::DELETE)
            } else {
                Some(match map.insert(key, value) {
                    Some(_) => ActionType::UPDATE,
                    None => ActionType::ADD,
                })
            }
        }
        let storage = |resource, action: Option<ActionType>| {
            action.map(|action| StorageEvent {
                event: ClusterEvent::new(resource, action),
                claim: None,
            })
        };
        let event = match object {
            Object::Node(_)
            | Object::Pod(..)
            | Object::DeviceClass(..)
            | Object::ResourceSlice(_)
            | Object::ResourceClaim(..)
            | Object::DeviceTaintRule(_)
            | Object::PodGroup(..)
            | Object::CoschedulingGroup(_) => return Mirrored::Forward(object),
            Object::Namespace(ns) => {
                put(&mut self.namespaces, ns.name.to_string(), ns, deleted);
                None
            }
            Object::PriorityClass(pc) => {
                put(&mut self.priority_classes, pc.name.to_string(), pc, deleted);
                None
            }
            Object::Service(svc) => {
                let key = format!("{}/{}", svc.namespace, svc.name);
                put(&mut self.services, key, svc, deleted);
                None
            }
            Object::Controller(controller) => {
                let key = (
                    controller.kind,
                    format!("{}/{}", controller.namespace, controller.name),
                );
                put(&mut self.controllers, key, controller, deleted);
                None
            }
            Object::PodDisruptionBudget(pdb) => {
                let key = format!("{}/{}", pdb.namespace, pdb.name);
                put(&mut self.budgets, key, pdb, deleted);
                None
            }
            Object::PersistentVolume(pv) => {
                let action = put(&mut self.pvs, pv.name.to_string(), pv, deleted);
                storage(EventResource::PersistentVolume, action)
            }
            Object::PersistentVolumeClaim(pvc) => {
                let claim = (pvc.namespace, pvc.name);
                let key = format!("{}/{}", pvc.namespace, pvc.name);
                let action = put(&mut self.pvcs, key, pvc, deleted);
                storage(EventResource::PersistentVolumeClaim, action).map(|event| StorageEvent {
                    claim: Some(claim),
                    ..event
                })
            }
            Object::StorageClass(sc) => {
                let action = put(&mut self.storage_classes, sc.name.to_string(), sc, deleted);
                storage(EventResource::StorageClass, action)
            }
            Object::CsiNode(csi) => {
                let action = put(&mut self.csi_nodes, csi.node_name.to_string(), csi, deleted);
                storage(EventResource::CsiNode, action)
            }
            Object::CsiDriver(driver) => {
                let name = driver.name.to_string();
                let action = put(&mut self.csi_drivers, name, driver, deleted);
                storage(EventResource::CsiDriver, action)
            }
            Object::StorageCapacity(capacity) => {
                let key = capacity.key.clone();
                let action = put(&mut self.storage_capacities, key, capacity, deleted);
                storage(EventResource::CsiStorageCapacity, action)
            }
        };
        self.changed = true;
        Mirrored::Kept(event)
    }

    /// Replaces every object of a kind kept here with a complete list; for a storage
    /// kind, an event of every action (any object may have come, changed or gone while
    /// the watch was blind).
    pub fn relist(&mut self, kind: Kind, objects: Vec<Object>) -> Option<StorageEvent> {
        let resource = match kind {
            Kind::PersistentVolume => Some(EventResource::PersistentVolume),
            Kind::PersistentVolumeClaim => Some(EventResource::PersistentVolumeClaim),
            Kind::StorageClass => Some(EventResource::StorageClass),
            Kind::CsiNode => Some(EventResource::CsiNode),
            Kind::CsiDriver => Some(EventResource::CsiDriver),
            Kind::CsiStorageCapacity => Some(EventResource::CsiStorageCapacity),
            _ => None,
        };
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
            | Kind::ResourceClaim
            | Kind::DeviceTaintRule
            | Kind::PodGroup
            | Kind::CoschedulingGroup => return None,
        }
        self.changed = true;
        for object in objects {
            self.apply(object, false);
        }
        resource.map(|resource| StorageEvent {
            event: ClusterEvent::new(resource, ActionType::ALL),
            claim: None,
        })
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
            prevent_pod_scheduling_if_missing: false,
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

    /// Storage objects are told to the queue as added, updated or deleted (a claim with
    /// its key); a deletion of an object never seen, and kinds no plugin registers, are
    /// not; a relist is every action at once.
    #[test]
    fn storage_changes_are_events_for_the_queue() {
        let claim = PersistentVolumeClaim {
            namespace: Sym::new("shop"),
            name: Sym::new("data"),
            storage_class: None,
            requested: 0,
            access_modes: Default::default(),
            volume_name: None,
            phase: gantry_api::storage::ClaimPhase::Pending,
            terminating: false,
            controller_uid: None,
            selected_node: None,
        };
        let mut mirror = ObjectMirror::default();
        let event = |mirrored: Mirrored| match mirrored {
            Mirrored::Kept(event) => event,
            Mirrored::Forward(object) => panic!("{object:?} handed back"),
        };
        let claim_event = |action| {
            Some(StorageEvent {
                event: ClusterEvent::new(EventResource::PersistentVolumeClaim, action),
                claim: Some((Sym::new("shop"), Sym::new("data"))),
            })
        };
        let pvc = || Object::PersistentVolumeClaim(claim.clone());
        assert_eq!(
            event(mirror.apply(pvc(), false)),
            claim_event(ActionType::ADD)
        );
        assert_eq!(
            event(mirror.apply(pvc(), false)),
            claim_event(ActionType::UPDATE)
        );
        assert_eq!(
            event(mirror.apply(pvc(), true)),
            claim_event(ActionType::DELETE)
        );
        assert_eq!(event(mirror.apply(pvc(), true)), None, "not known any more");
        // Only the pods using the claim: by name, in its namespace.
        let added = claim_event(ActionType::ADD).unwrap();
        let using = |namespace: &str, claim: &str| {
            let mut pod = gantry_api::Pod::new(namespace, "web");
            pod.volumes = vec![gantry_api::Volume {
                name: "v".into(),
                claim_name: Some(claim.into()),
                read_only: false,
                disk: None,
                local: false,
                ephemeral: false,
            }];
            pod
        };
        assert!(added.concerns(&using("shop", "data")));
        assert!(!added.concerns(&using("shop", "logs")));
        assert!(!added.concerns(&using("other", "data")));
        let driver = CsiDriver {
            name: Sym::new("csi.example.com"),
            storage_capacity: true,
            prevent_pod_scheduling_if_missing: false,
        };
        assert_eq!(
            event(mirror.apply(Object::CsiDriver(driver), false)).map(|e| e.event),
            Some(ClusterEvent::new(EventResource::CsiDriver, ActionType::ADD))
        );
        let budget = PodDisruptionBudget {
            namespace: Sym::new("shop"),
            name: "pdb".into(),
            selector: None,
            disruptions_allowed: 0,
            disrupted_pods: Vec::new(),
        };
        assert_eq!(
            event(mirror.apply(Object::PodDisruptionBudget(budget), false)),
            None
        );
        assert_eq!(
            mirror.relist(Kind::PersistentVolumeClaim, vec![pvc()]),
            Some(StorageEvent {
                event: ClusterEvent::new(EventResource::PersistentVolumeClaim, ActionType::ALL),
                claim: None,
            })
        );
        assert_eq!(mirror.relist(Kind::Namespace, Vec::new()), None);
    }
}
