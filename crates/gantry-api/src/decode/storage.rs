//! Storage objects: PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes,
//! CSIDrivers and CSIStorageCapacities.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::storage::v1 as storage_v1;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;

use super::affinity::{node_selector, values};
use super::object::{labels, resources};
use super::{ObjectError, field_error, required_name};
use crate::labels::{NodeSelector, NodeSelectorOp, NodeSelectorRequirement, NodeSelectorTerm};
use crate::storage::{
    AccessMode, AccessModes, ClaimPhase, ClaimRef, CsiDriver, CsiNode, CsiNodeDriver,
    PersistentVolume, PersistentVolumeClaim, StorageCapacity, StorageClass, VolumeBindingMode,
};
use crate::{ResourceName, Sym};

/// The beta annotation that named a claim's or volume's class before `storageClassName`;
/// upstream still lets it win.
const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// The node a scheduler chose to provision a claim on (upstream's `AnnSelectedNode`).
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// Upstream's `GetPersistentVolume(Claim)Class`: the beta annotation, else the field;
/// empty means no class.
fn storage_class_name(meta: &meta::ObjectMeta, field: Option<&str>) -> Option<Sym> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS))
        .map(String::as_str)
        .or(field)
        .filter(|c| !c.is_empty())
        .map(Sym::new)
}

fn access_modes(
    modes: Option<&Vec<String>>,
    object: &str,
    field: &str,
) -> Result<AccessModes, ObjectError> {
    modes
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, m)| {
            AccessMode::parse(m).ok_or_else(|| {
                field_error(
                    object,
                    format!("{field}[{i}]"),
                    format!(
                        "must be ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod, not {m:?}"
                    ),
                )
            })
        })
        .collect()
}

/// The `storage` entry of a capacity or request map, in bytes.
fn storage_bytes(
    map: Option<&BTreeMap<String, K8sQuantity>>,
    object: &str,
    field: &str,
) -> Result<i64, ObjectError> {
    Ok(resources(map, object, &field)?.get(ResourceName::parse("storage")))
}

pub(super) fn convert_pv(
    pv: &k8s::PersistentVolume,
    object: &str,
) -> Result<PersistentVolume, ObjectError> {
    let name = required_name(&pv.metadata, object)?;
    let spec = pv.spec.as_ref();
    let node_affinity = spec
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|required| node_selector(required, object, &"spec.nodeAffinity.required"))
        .transpose()?;
    let claim_ref = spec
        .and_then(|s| s.claim_ref.as_ref())
        .map(|r| match r.name.as_deref().filter(|n| !n.is_empty()) {
            Some(claim) => Ok(ClaimRef {
                namespace: Sym::new(r.namespace.as_deref().unwrap_or("default")),
                name: Sym::new(claim),
            }),
            None => Err(field_error(object, "spec.claimRef.name", "required")),
        })
        .transpose()?;
    Ok(PersistentVolume {
        name: Sym::new(&name),
        labels: labels(pv.metadata.labels.as_ref()),
        capacity: storage_bytes(
            spec.and_then(|s| s.capacity.as_ref()),
            object,
            "spec.capacity",
        )?,
        access_modes: access_modes(
            spec.and_then(|s| s.access_modes.as_ref()),
            object,
            "spec.accessModes",
        )?,
        storage_class: storage_class_name(
            &pv.metadata,
            spec.and_then(|s| s.storage_class_name.as_deref()),
        ),
        node_affinity,
        claim_ref,
        csi_driver: spec
            .and_then(|s| s.csi.as_ref())
            .map(|c| Sym::new(&c.driver)),
        available: pv
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_none_or(|phase| phase == "Available"),
    })
}

pub(super) fn convert_pvc(
    pvc: &k8s::PersistentVolumeClaim,
    object: &str,
) -> Result<PersistentVolumeClaim, ObjectError> {
    let name = required_name(&pvc.metadata, object)?;
    let spec = pvc.spec.as_ref();
    let phase = match pvc.status.as_ref().and_then(|s| s.phase.as_deref()) {
        None | Some("Pending") => ClaimPhase::Pending,
        Some("Bound") => ClaimPhase::Bound,
        Some("Lost") => ClaimPhase::Lost,
        Some(other) => {
            return Err(field_error(
                object,
                "status.phase",
                format!("must be Pending, Bound or Lost, not {other:?}"),
            ));
        }
    };
    Ok(PersistentVolumeClaim {
        namespace: Sym::new(pvc.metadata.namespace.as_deref().unwrap_or("default")),
        name: Sym::new(&name),
        storage_class: storage_class_name(
            &pvc.metadata,
            spec.and_then(|s| s.storage_class_name.as_deref()),
        ),
        requested: storage_bytes(
            spec.and_then(|s| s.resources.as_ref())
                .and_then(|r| r.requests.as_ref()),
            object,
            "spec.resources.requests",
        )?,
        access_modes: access_modes(
            spec.and_then(|s| s.access_modes.as_ref()),
            object,
            "spec.accessModes",
        )?,
        volume_name: spec
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty())
            .map(Sym::new),
        phase,
        terminating: pvc.metadata.deletion_timestamp.is_some(),
        controller_uid: super::pod::controller(&pvc.metadata).map(|owner| owner.uid.clone()),
        selected_node: (pvc.metadata.annotations.as_ref())
            .and_then(|a| a.get(SELECTED_NODE))
            .map(|node| Sym::new(node)),
    })
}

pub(super) fn convert_storage_class(
    sc: &storage_v1::StorageClass,
    object: &str,
) -> Result<StorageClass, ObjectError> {
    let binding_mode = match sc.volume_binding_mode.as_deref() {
        None | Some("Immediate") => VolumeBindingMode::Immediate,
        Some("WaitForFirstConsumer") => VolumeBindingMode::WaitForFirstConsumer,
        Some(other) => {
            return Err(field_error(
                object,
                "volumeBindingMode",
                format!("must be Immediate or WaitForFirstConsumer, not {other:?}"),
            ));
        }
    };
    let mut terms = Vec::new();
    for (i, term) in sc.allowed_topologies.iter().flatten().enumerate() {
        let mut out = NodeSelectorTerm::default();
        for (j, e) in term.match_label_expressions.iter().flatten().enumerate() {
            if e.values.is_empty() {
                return Err(field_error(
                    object,
                    format!("allowedTopologies[{i}].matchLabelExpressions[{j}].values"),
                    "must be non-empty",
                ));
            }
            out.match_expressions.push(NodeSelectorRequirement {
                key: Sym::new(&e.key),
                op: NodeSelectorOp::In,
                values: values(Some(&e.values)),
            });
        }
        terms.push(out);
    }
    Ok(StorageClass {
        name: Sym::new(&required_name(&sc.metadata, object)?),
        provisioner: Sym::new(&sc.provisioner),
        binding_mode,
        allowed_topologies: (!terms.is_empty()).then_some(NodeSelector { terms }),
    })
}

pub(super) fn convert_csi_node(
    csi_node: &storage_v1::CSINode,
    object: &str,
) -> Result<CsiNode, ObjectError> {
    let mut drivers = Vec::new();
    for (i, d) in csi_node.spec.drivers.iter().enumerate() {
        let count = d.allocatable.as_ref().and_then(|a| a.count);
        if count.is_some_and(|c| c < 0) {
            return Err(field_error(
                object,
                format!("spec.drivers[{i}].allocatable.count"),
                "must not be negative",
            ));
        }
        drivers.push(CsiNodeDriver {
            name: Sym::new(&d.name),
            allocatable_count: count,
        });
    }
    Ok(CsiNode {
        node_name: Sym::new(&required_name(&csi_node.metadata, object)?),
        drivers,
    })
}

pub(super) fn convert_csi_driver(
    driver: &storage_v1::CSIDriver,
    object: &str,
) -> Result<CsiDriver, ObjectError> {
    Ok(CsiDriver {
        name: Sym::new(&required_name(&driver.metadata, object)?),
        storage_capacity: driver.spec.storage_capacity == Some(true),
        prevent_pod_scheduling_if_missing: driver.spec.prevent_pod_scheduling_if_missing
            == Some(true),
    })
}

pub(super) fn convert_storage_capacity(
    capacity: &storage_v1::CSIStorageCapacity,
    object: &str,
) -> Result<StorageCapacity, ObjectError> {
    let name = required_name(&capacity.metadata, object)?;
    let namespace = capacity.metadata.namespace.as_deref().unwrap_or("default");
    if capacity.storage_class_name.is_empty() {
        return Err(field_error(object, "storageClassName", "Required value"));
    }
    let bytes = |q: Option<&K8sQuantity>, field: &str| {
        q.map(|q| {
            crate::Quantity::parse(&q.0)
                .and_then(|q| q.value())
                .map_err(|e| field_error(object, field, e.to_string()))
        })
        .transpose()
    };
    let node_topology = capacity
        .node_topology
        .as_ref()
        .map(|sel| super::affinity::label_selector(sel, object, &"nodeTopology"))
        .transpose()?;
    Ok(StorageCapacity {
        key: format!("{namespace}/{name}"),
        storage_class: Sym::new(&capacity.storage_class_name),
        node_topology,
        capacity: bytes(capacity.capacity.as_ref(), "capacity")?,
        maximum_volume_size: bytes(capacity.maximum_volume_size.as_ref(), "maximumVolumeSize")?,
    })
}

/// Undoes `quantities_to_strings` for CSINode drivers: their `allocatable` map holds a
/// plain integer `count`, not quantities.
pub(super) fn counts_back_to_numbers(value: &mut Value) {
    let drivers = value
        .pointer_mut("/spec/drivers")
        .and_then(Value::as_array_mut);
    for driver in drivers.into_iter().flatten() {
        if let Some(count) = driver.pointer_mut("/allocatable/count")
            && let Some(n) = count.as_str().and_then(|s| s.parse::<i64>().ok())
        {
            *count = Value::from(n);
        }
    }
}
