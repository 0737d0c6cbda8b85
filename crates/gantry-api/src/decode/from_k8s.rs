//! Conversion of one typed Kubernetes object, as a watch delivers it, into Gantry's model:
//! the same conversions [`ClusterObjects::decode`](super::ClusterObjects::decode) applies to
//! manifests, so a pod read from the API is the pod a manifest would give. Errors name the
//! object and the field.

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::scheduling::v1::PriorityClass as K8sPriorityClass;
use k8s_openapi::api::storage::v1 as storage_v1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::object::{convert_namespace, convert_service};
use super::{Namespace, ObjectError, PodController, PriorityClass, Service};
use crate::storage::{
    CsiDriver, CsiNode, PersistentVolume, PersistentVolumeClaim, StorageCapacity, StorageClass,
};
use crate::{Node, Pod, PodDisruptionBudget};

fn label(kind: &str, meta: &meta::ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or("(unnamed)");
    match meta.namespace.as_deref() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

pub fn node(node: &k8s::Node) -> Result<Node, ObjectError> {
    super::node::convert_node(node, &label("Node", &node.metadata))
}

/// The pod, and whether its priority is known (`spec.priority` set); an API server's
/// Priority admission always sets it. [`Pod::is_finished`] says whether it holds anything.
/// The pod is read as `release`'s scheduler reads it.
pub fn pod(pod: &k8s::Pod, release: crate::Release) -> Result<(Pod, bool), ObjectError> {
    let (pod, fields) = super::pod::convert_pod(pod, &label("Pod", &pod.metadata), release)?;
    Ok((pod, fields.priority_given()))
}

pub fn namespace(ns: &k8s::Namespace) -> Result<Namespace, ObjectError> {
    convert_namespace(ns, &label("Namespace", &ns.metadata))
}

pub fn priority_class(pc: &K8sPriorityClass) -> Result<PriorityClass, ObjectError> {
    super::priority::convert_priority_class(pc, &label("PriorityClass", &pc.metadata))
}

pub fn service(svc: &k8s::Service) -> Result<Service, ObjectError> {
    convert_service(svc, &label("Service", &svc.metadata))
}

pub fn replication_controller(
    rc: &k8s::ReplicationController,
) -> Result<PodController, ObjectError> {
    super::controller::convert_replication_controller(
        rc,
        &label("ReplicationController", &rc.metadata),
    )
}

pub fn replica_set(
    rs: &k8s_openapi::api::apps::v1::ReplicaSet,
) -> Result<PodController, ObjectError> {
    super::controller::convert_replica_set(rs, &label("ReplicaSet", &rs.metadata))
}

pub fn stateful_set(
    ss: &k8s_openapi::api::apps::v1::StatefulSet,
) -> Result<PodController, ObjectError> {
    super::controller::convert_stateful_set(ss, &label("StatefulSet", &ss.metadata))
}

pub fn persistent_volume(pv: &k8s::PersistentVolume) -> Result<PersistentVolume, ObjectError> {
    super::storage::convert_pv(pv, &label("PersistentVolume", &pv.metadata))
}

pub fn persistent_volume_claim(
    pvc: &k8s::PersistentVolumeClaim,
) -> Result<PersistentVolumeClaim, ObjectError> {
    super::storage::convert_pvc(pvc, &label("PersistentVolumeClaim", &pvc.metadata))
}

pub fn storage_class(sc: &storage_v1::StorageClass) -> Result<StorageClass, ObjectError> {
    super::storage::convert_storage_class(sc, &label("StorageClass", &sc.metadata))
}

pub fn csi_node(csi_node: &storage_v1::CSINode) -> Result<CsiNode, ObjectError> {
    super::storage::convert_csi_node(csi_node, &label("CSINode", &csi_node.metadata))
}

pub fn csi_driver(driver: &storage_v1::CSIDriver) -> Result<CsiDriver, ObjectError> {
    super::storage::convert_csi_driver(driver, &label("CSIDriver", &driver.metadata))
}

pub fn storage_capacity(
    capacity: &storage_v1::CSIStorageCapacity,
) -> Result<StorageCapacity, ObjectError> {
    let object = label("CSIStorageCapacity", &capacity.metadata);
    super::storage::convert_storage_capacity(capacity, &object)
}

pub fn pod_disruption_budget(
    pdb: &k8s_openapi::api::policy::v1::PodDisruptionBudget,
) -> Result<PodDisruptionBudget, ObjectError> {
    crate::policy::convert(pdb, &label("PodDisruptionBudget", &pdb.metadata))
}
