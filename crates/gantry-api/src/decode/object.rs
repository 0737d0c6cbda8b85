//! One object: its `kind` decides the type it is read as (through k8s-openapi, noting
//! every field that type does not know), its metadata is validated, and it joins the
//! collection of its kind.

use std::collections::BTreeMap;
use std::fmt::{self, Write};
use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::scheduling::v1::PriorityClass as K8sPriorityClass;
use k8s_openapi::api::storage::v1 as storage_v1;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::admission::PodPriorityFields;
use super::priority::PriorityClass;
use super::validation::{self, NameRule};
use super::{ClusterObjects, Namespace, ObjectError, Service, Warning, field_error};
use crate::labels::LabelSelector;
use crate::storage::{
    CsiDriver, CsiNode, PersistentVolume, PersistentVolumeClaim, StorageCapacity, StorageClass,
};
use crate::{Labels, Node, Pod, PodDisruptionBudget, Quantity, ResourceName, Resources, Sym};

/// Whether a document of this kind holds `items` (`List`, `PodList`...).
pub(super) fn is_list_kind(kind: &str) -> bool {
    kind.ends_with("List")
}

/// One object converted, before it joins the collection of its kind.
pub(super) struct Converted {
    pub(super) object: Object,
    /// Named from `generateName`.
    pub(super) generated: bool,
    pub(super) warnings: Vec<Warning>,
}

/// Nodes and pods boxed: the rest are small.
pub(super) enum Object {
    Node(Box<Node>),
    Pod(Box<Pod>, PodPriorityFields),
    /// `namespace/name` of a pod in phase Succeeded or Failed.
    FinishedPod(String),
    Namespace(Namespace),
    PriorityClass(PriorityClass),
    Service(Service),
    Controller(super::PodController),
    Pv(PersistentVolume),
    Pvc(PersistentVolumeClaim),
    StorageClass(StorageClass),
    CsiNode(CsiNode),
    CsiDriver(CsiDriver),
    StorageCapacity(StorageCapacity),
    Pdb(PodDisruptionBudget),
    PodGroup(crate::PodGroup),
    CoschedulingGroup(crate::coscheduling::CoschedulingGroup),
    /// `Kind namespace/name` of a kind the scheduler does not read.
    Ignored(String),
}

/// The object's `kind`.
pub(super) fn kind_of<'v>(value: &'v Value, position: &str) -> Result<&'v str, ObjectError> {
    value
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| field_error(position, "kind", "missing or not a string"))
}

/// Whether the object must be added in input order, one at a time: a nested list, an
/// object the name generator names, or a DRA object (its decoder adds to shared state).
pub(super) fn needs_sequential(value: &Value) -> bool {
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let metadata = value.get("metadata");
    let named = metadata
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let generates = metadata.and_then(|m| m.get("generateName")).is_some();
    (is_list_kind(kind) && value.get("items").is_some())
        || (generates && !named)
        || crate::dra_decode::KINDS.contains(&kind)
        || kind == "DeviceTaintRule"
}

/// Converts one object (not a list) whose name is settled. It touches nothing shared,
/// so that the items of a large list convert in parallel.
pub(super) fn convert(
    mut value: Value,
    position: &str,
    generated: bool,
    release: crate::Release,
) -> Result<Converted, ObjectError> {
    let kind = kind_of(&value, position)?.to_string();
    let object = object_label(&kind, &value, position);
    // Which manager wrote which field: large, and nothing a scheduler reads.
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    quantities_to_strings(&mut value);
    let mut warnings = Vec::new();
    let w = &mut warnings;
    let converted = match kind.as_str() {
        "Node" => {
            let node: k8s::Node = typed(value, &object, w)?;
            Object::Node(Box::new(super::node::convert_node(&node, &object)?))
        }
        "Pod" => {
            let pod: k8s::Pod = typed(value, &object, w)?;
            let (pod, priority_fields) = super::pod::convert_pod(&pod, &object, release)?;
            if pod.is_finished() {
                Object::FinishedPod(pod.key())
            } else {
                Object::Pod(Box::new(pod), priority_fields)
            }
        }
        "Namespace" => {
            let ns: k8s::Namespace = typed(value, &object, w)?;
            Object::Namespace(convert_namespace(&ns, &object)?)
        }
        "PriorityClass" => {
            let pc: K8sPriorityClass = typed(value, &object, w)?;
            Object::PriorityClass(super::priority::convert_priority_class(&pc, &object)?)
        }
        "Service" => {
            let svc: k8s::Service = typed(value, &object, w)?;
            Object::Service(convert_service(&svc, &object)?)
        }
        "ReplicationController" => {
            let rc: k8s::ReplicationController = typed(value, &object, w)?;
            Object::Controller(super::controller::convert_replication_controller(
                &rc, &object,
            )?)
        }
        "ReplicaSet" => {
            let rs: k8s_openapi::api::apps::v1::ReplicaSet = typed(value, &object, w)?;
            Object::Controller(super::controller::convert_replica_set(&rs, &object)?)
        }
        "StatefulSet" => {
            let ss: k8s_openapi::api::apps::v1::StatefulSet = typed(value, &object, w)?;
            Object::Controller(super::controller::convert_stateful_set(&ss, &object)?)
        }
        "PodDisruptionBudget" => {
            let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget = typed(value, &object, w)?;
            Object::Pdb(crate::policy::convert(&pdb, &object)?)
        }
        "PersistentVolume" => {
            let pv: k8s::PersistentVolume = typed(value, &object, w)?;
            Object::Pv(super::storage::convert_pv(&pv, &object)?)
        }
        "PersistentVolumeClaim" => {
            let pvc: k8s::PersistentVolumeClaim = typed(value, &object, w)?;
            Object::Pvc(super::storage::convert_pvc(&pvc, &object)?)
        }
        "StorageClass" => {
            let sc: storage_v1::StorageClass = typed(value, &object, w)?;
            Object::StorageClass(super::storage::convert_storage_class(&sc, &object)?)
        }
        "CSINode" => {
            super::storage::counts_back_to_numbers(&mut value);
            let csi_node: storage_v1::CSINode = typed(value, &object, w)?;
            Object::CsiNode(super::storage::convert_csi_node(&csi_node, &object)?)
        }
        "CSIDriver" => {
            let driver: storage_v1::CSIDriver = typed(value, &object, w)?;
            Object::CsiDriver(super::storage::convert_csi_driver(&driver, &object)?)
        }
        "CSIStorageCapacity" => {
            let capacity: storage_v1::CSIStorageCapacity = typed(value, &object, w)?;
            Object::StorageCapacity(super::storage::convert_storage_capacity(
                &capacity, &object,
            )?)
        }
        "PodGroup"
            if value.get("apiVersion").and_then(Value::as_str)
                == Some(super::coscheduling_group::API_VERSION) =>
        {
            Object::CoschedulingGroup(super::coscheduling_group::convert(value, &object, w)?)
        }
        "PodGroup" => Object::PodGroup(super::pod_group::convert(value, &object, release, w)?),
        // With DRADeviceTaintRules on, rules are read with the DRA objects (`add_value`);
        // off, the API server serves no rule, and the rule is read as nothing.
        "DeviceTaintRule" => {
            w.push(Warning {
                object: object.clone(),
                message: format!(
                    "DRADeviceTaintRules is off in {release}: the taint this rule gives devices is not applied"
                ),
            });
            Object::Ignored(object)
        }
        _ => Object::Ignored(object),
    };
    Ok(Converted {
        object: converted,
        generated,
        warnings,
    })
}

impl ClusterObjects {
    /// Adds one object (the items of a `List` one by one). `position` says where it is in
    /// its source (`document 3 items[5]`), for objects without a name.
    pub(super) fn add_value(
        &mut self,
        mut value: Value,
        position: &str,
    ) -> Result<(), ObjectError> {
        let kind = kind_of(&value, position)?.to_string();
        if is_list_kind(&kind) && value.get("items").is_some() {
            return self.add_list_value(value, &kind, position);
        }
        let generated = self.generated.name_object(&mut value);
        if kind == "DeviceTaintRule" && self.release.enabled(crate::Gate::DRADeviceTaintRules) {
            let object = object_label(&kind, &value, position);
            return crate::dra_decode::add_taint_rule(&mut self.dra, &value, &object);
        }
        if crate::dra_decode::KINDS.contains(&kind.as_str()) {
            let object = object_label(&kind, &value, position);
            return crate::dra_decode::add_object(
                &mut self.dra,
                &kind,
                value,
                &object,
                self.release,
            );
        }
        let converted = convert(value, position, generated, self.release)?;
        self.apply(converted);
        Ok(())
    }

    /// A converted object joins its kind's collection.
    pub(super) fn apply(&mut self, converted: Converted) {
        let Converted {
            object,
            generated,
            warnings,
        } = converted;
        self.warnings.extend(warnings);
        match object {
            Object::Node(node) => {
                if generated {
                    self.generated.nodes.push(self.nodes.len());
                }
                self.nodes.push(*node);
            }
            Object::Pod(pod, priority_fields) => {
                if generated {
                    self.generated.pods.push(self.pods.len());
                }
                self.admission.push(priority_fields.at(self.pods.len()));
                self.pods.push(*pod);
            }
            Object::FinishedPod(key) => self.finished_pods.push(key),
            Object::Namespace(ns) => self.namespaces.push(ns),
            Object::PriorityClass(pc) => self.priority_classes.push(pc),
            Object::Service(svc) => self.services.push(svc),
            Object::Controller(controller) => self.controllers.push(controller),
            Object::Pv(pv) => self.pvs.push(pv),
            Object::Pvc(pvc) => self.pvcs.push(pvc),
            Object::StorageClass(sc) => self.storage_classes.push(sc),
            Object::CsiNode(csi_node) => self.csi_nodes.push(csi_node),
            Object::CsiDriver(driver) => self.csi_drivers.push(driver),
            Object::StorageCapacity(capacity) => self.storage_capacities.push(capacity),
            Object::Pdb(pdb) => self.pdbs.push(pdb),
            Object::PodGroup(group) => self.pod_groups.push(group),
            Object::CoschedulingGroup(group) => self.coscheduling_groups.push(group),
            Object::Ignored(label) => self.ignored.push(label),
        }
    }

    /// A `List` read as one value (nested in another list, or built in memory).
    fn add_list_value(
        &mut self,
        mut value: Value,
        kind: &str,
        position: &str,
    ) -> Result<(), ObjectError> {
        match value.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => {
                for (i, item) in items.into_iter().enumerate() {
                    self.add_value(item, &format!("{position} items[{i}]"))?;
                }
                Ok(())
            }
            Some(Value::Null) | None => Ok(()),
            Some(_) => Err(field_error(
                &format!("{kind} ({position})"),
                "items",
                "must be a list",
            )),
        }
    }
}

/// Deserializes `value` as `T`, naming the failing field by its path, and records a
/// warning for every field `T` does not have, as `kubectl` warns about them.
pub(super) fn typed<T: DeserializeOwned>(
    value: Value,
    object: &str,
    warnings: &mut Vec<Warning>,
) -> Result<T, ObjectError> {
    let mut unknown = Vec::new();
    let mut note = |path: serde_ignored::Path| unknown.push(field_path(&path));
    // Most objects decode: their paths are not tracked; a failure is decoded again to
    // name its field.
    let result = T::deserialize(serde_ignored::Deserializer::new(&value, &mut note));
    let result = result.or_else(|_| {
        serde_path_to_error::deserialize(value).map_err(|e| ObjectError {
            object: object.to_string(),
            field: e.path().to_string(),
            message: e.inner().to_string(),
        })
    });
    warnings.extend(unknown.into_iter().map(|field| Warning {
        object: object.to_string(),
        message: format!("unknown field {field:?}"),
    }));
    result
}

pub(super) fn convert_namespace(
    ns: &k8s::Namespace,
    object: &str,
) -> Result<Namespace, ObjectError> {
    validation::object_meta(&ns.metadata, object, NameRule::Dns1123Label)?;
    Ok(Namespace {
        name: Sym::new(ns.metadata.name.as_deref().unwrap_or_default()),
        labels: labels(ns.metadata.labels.as_ref()),
    })
}

pub(super) fn convert_service(svc: &k8s::Service, object: &str) -> Result<Service, ObjectError> {
    validation::object_meta(&svc.metadata, object, NameRule::Dns1035Label)?;
    let selector = svc.spec.as_ref().and_then(|s| s.selector.as_ref());
    validation::labels(selector.into_iter().flatten(), object, "spec.selector")?;
    Ok(Service {
        namespace: namespace(&svc.metadata),
        name: svc.metadata.name.as_deref().unwrap_or_default().into(),
        selector: LabelSelector::from_pairs(
            selector
                .into_iter()
                .flatten()
                .map(|(k, v)| (Sym::new(k), Sym::new(v))),
        ),
    })
}

/// A field path as `kubectl` prints it: `spec.containers[0].containerz`.
pub(super) fn field_path(path: &serde_ignored::Path) -> String {
    use serde_ignored::Path;
    let mut out = String::new();
    fn walk(path: &Path, out: &mut String) {
        match path {
            Path::Root => {}
            Path::Seq { parent, index } => {
                walk(parent, out);
                let _ = write!(out, "[{index}]");
            }
            Path::Map { parent, key } => {
                walk(parent, out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Path::Some { parent }
            | Path::NewtypeStruct { parent }
            | Path::NewtypeVariant { parent } => walk(parent, out),
        }
    }
    walk(path, &mut out);
    out
}

/// `Kind namespace/name` (pods default to namespace `default`), or the position.
pub(super) fn object_label(kind: &str, value: &Value, position: &str) -> String {
    let meta = value.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str);
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str);
    match (namespace, name) {
        (Some(ns), Some(name)) => format!("{kind} {ns}/{name}"),
        (None, Some(name)) if kind == "Pod" => format!("{kind} default/{name}"),
        (None, Some(name)) => format!("{kind} {name}"),
        _ => format!("{kind} ({position})"),
    }
}

/// Kubernetes accepts bare numbers for quantities (`cpu: 2`); k8s-openapi wants strings.
fn quantities_to_strings(value: &mut Value) {
    const QUANTITY_MAPS: [&str; 5] = ["requests", "limits", "capacity", "allocatable", "overhead"];
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if QUANTITY_MAPS.contains(&key.as_str())
                    && let Value::Object(quantities) = child
                {
                    for q in quantities.values_mut() {
                        if let Value::Number(n) = q {
                            *q = Value::String(n.to_string());
                        }
                    }
                }
                quantities_to_strings(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(quantities_to_strings),
        _ => {}
    }
}

/// The object's namespace (`default` when it names none).
pub(super) fn namespace(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Sym {
    Sym::new(
        meta.namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("default"),
    )
}

pub(super) fn annotations(map: Option<&BTreeMap<String, String>>) -> Arc<[(Arc<str>, Arc<str>)]> {
    map.into_iter()
        .flatten()
        .map(|(k, v)| (Arc::from(k.as_str()), Arc::from(v.as_str())))
        .collect()
}

pub(super) fn labels(map: Option<&BTreeMap<String, String>>) -> Labels {
    Labels::new(
        map.into_iter()
            .flatten()
            .map(|(k, v)| (Sym::new(k), Sym::new(v))),
    )
}

/// Whether the API server counts `name` in whole units only (upstream
/// `IsIntegerResourceName` for container and node resources: extended resources).
fn is_extended_resource(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/")
}

/// Converts a resource map; `cpu` in millicores, everything else in whole units. Values
/// must not be negative, and extended resources must be whole (upstream's
/// `ValidateResourceQuantityValue`).
pub(super) fn resources(
    map: Option<&BTreeMap<String, K8sQuantity>>,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<Resources, ObjectError> {
    let mut out = Resources::default();
    for (name, quantity) in map.into_iter().flatten() {
        let at = || format!("{field}.{name}");
        let parsed =
            Quantity::parse(&quantity.0).map_err(|e| field_error(object, at(), e.to_string()))?;
        if parsed.is_negative() {
            return Err(field_error(
                object,
                at(),
                validation::invalid(&quantity.0, "must be greater than or equal to 0"),
            ));
        }
        // Only cpu is kept in thousandths: `memory: 1Ei` fits in int64 as bytes, not as
        // millibytes. An amount too large for thousandths has no fraction left to check.
        if is_extended_resource(name)
            && let Ok(milli) = parsed.milli_value()
            && milli % 1000 != 0
        {
            return Err(field_error(
                object,
                at(),
                validation::invalid(&quantity.0, "must be an integer"),
            ));
        }
        let resource = ResourceName::parse(name);
        let amount = if resource == ResourceName::Cpu {
            parsed.milli_value()
        } else {
            parsed.value()
        }
        .map_err(|e| field_error(object, at(), e.to_string()))?;
        out.set(resource, amount);
    }
    Ok(out)
}
