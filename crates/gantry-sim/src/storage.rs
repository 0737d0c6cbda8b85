//! The storage objects the API holds while a replayed trace runs: volumes, claims,
//! classes and CSINodes as the recording changed them (the simulation provisions and binds
//! no volume of its own, so a claim bound or a volume provisioned in the cluster is
//! replayed as recorded). Every change replaces what the plugins read, by name: the
//! plugins' index is rebuilt from the lists, a cost that grows with the storage objects
//! (a trace's storage changes are few next to its pods').

use gantry_api::Sym;
use gantry_api::storage::{CsiNode, PersistentVolume, PersistentVolumeClaim, StorageClass};
use gantry_framework::ApiObjects;

/// One storage object created, changed or deleted.
#[derive(Debug, Clone)]
pub enum StorageChange {
    SetClaim(PersistentVolumeClaim),
    /// By namespace and name.
    DeleteClaim(Sym, Sym),
    SetVolume(PersistentVolume),
    DeleteVolume(Sym),
    SetClass(StorageClass),
    DeleteClass(Sym),
    SetCsiNode(CsiNode),
    DeleteCsiNode(Sym),
}

/// The storage objects, in the order they were first seen (upstream lists volumes from
/// an informer's cache; a fixed order keeps ties deterministic).
#[derive(Debug, Default, Clone)]
pub(crate) struct StorageState {
    pvs: Vec<PersistentVolume>,
    pvcs: Vec<PersistentVolumeClaim>,
    classes: Vec<StorageClass>,
    csi_nodes: Vec<CsiNode>,
}

/// Replaces the object `matches` finds, in place, or adds it at the end.
fn set<T>(list: &mut Vec<T>, object: T, matches: impl Fn(&T) -> bool) {
    match list.iter_mut().find(|o| matches(o)) {
        Some(old) => *old = object,
        None => list.push(object),
    }
}

impl StorageState {
    pub(crate) fn new(
        pvs: &[PersistentVolume],
        pvcs: &[PersistentVolumeClaim],
        classes: &[StorageClass],
        csi_nodes: &[CsiNode],
    ) -> StorageState {
        StorageState {
            pvs: pvs.to_vec(),
            pvcs: pvcs.to_vec(),
            classes: classes.to_vec(),
            csi_nodes: csi_nodes.to_vec(),
        }
    }

    pub(crate) fn apply(&mut self, change: StorageChange) {
        match change {
            StorageChange::SetClaim(c) => {
                let key = (c.namespace, c.name);
                set(&mut self.pvcs, c, |o| (o.namespace, o.name) == key);
            }
            StorageChange::DeleteClaim(namespace, name) => {
                self.pvcs
                    .retain(|o| (o.namespace, o.name) != (namespace, name));
            }
            StorageChange::SetVolume(v) => {
                let name = v.name;
                set(&mut self.pvs, v, |o| o.name == name);
            }
            StorageChange::DeleteVolume(name) => self.pvs.retain(|o| o.name != name),
            StorageChange::SetClass(c) => {
                let name = c.name;
                set(&mut self.classes, c, |o| o.name == name);
            }
            StorageChange::DeleteClass(name) => self.classes.retain(|o| o.name != name),
            StorageChange::SetCsiNode(c) => {
                let name = c.node_name;
                set(&mut self.csi_nodes, c, |o| o.node_name == name);
            }
            StorageChange::DeleteCsiNode(name) => self.csi_nodes.retain(|o| o.node_name != name),
        }
    }

    /// Gives `objects` these storage objects in place of theirs.
    pub(crate) fn write_to(&self, objects: &mut ApiObjects) {
        objects.set_storage(&self.pvs, &self.pvcs, &self.classes, &self.csi_nodes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str, volume: Option<&str>) -> PersistentVolumeClaim {
        let yaml = format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: default}}\n\
             spec: {{storageClassName: fast, resources: {{requests: {{storage: 1Gi}}}}{}}}",
            volume
                .map(|v| format!(", volumeName: {v}"))
                .unwrap_or_default()
        );
        let mut objects = gantry_api::decode::ClusterObjects::default();
        objects.decode_more(&yaml, "pvc").unwrap();
        objects.pvcs.remove(0)
    }

    #[test]
    fn a_change_replaces_the_object_of_its_name_in_place() {
        let mut state = StorageState::new(&[], &[claim("a", None), claim("b", None)], &[], &[]);
        state.apply(StorageChange::SetClaim(claim("a", Some("pv-1"))));
        state.apply(StorageChange::SetClaim(claim("c", None)));
        let names: Vec<&str> = state.pvcs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(state.pvcs[0].volume_name, Some(Sym::new("pv-1")));
        state.apply(StorageChange::DeleteClaim(
            Sym::new("default"),
            Sym::new("b"),
        ));
        let mut objects = ApiObjects::default();
        state.write_to(&mut objects);
        let storage = objects.storage();
        assert!(storage.pvc(Sym::new("default"), Sym::new("a")).is_some());
        assert!(storage.pvc(Sym::new("default"), Sym::new("b")).is_none());
    }
}
