//! Decoding of real Kubernetes objects (`kubectl get nodes,pods -A -o yaml`, `kind: List`,
//! multi-document YAML, JSON) through the k8s-openapi types into Gantry's compact types.
//!
//! Every error names the object (`Pod default/web-1`) and the field path
//! (`spec.containers[0].resources.requests.cpu`). Objects of kinds the scheduler does not
//! read are listed in [`ClusterObjects::ignored`], never dropped silently.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::scheduling::v1::PriorityClass as K8sPriorityClass;
use k8s_openapi::api::storage::v1 as storage_v1;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;
use smallvec::SmallVec;
use thiserror::Error;

use crate::labels::{
    LabelSelector, NodeSelector, NodeSelectorOp, NodeSelectorRequirement, NodeSelectorTerm,
    Requirement, SelectorOp,
};
use crate::pod::*;
use crate::storage::{
    AccessMode, AccessModes, ClaimPhase, ClaimRef, CsiNode, CsiNodeDriver, PersistentVolume,
    PersistentVolumeClaim, StorageClass, VolumeBindingMode,
};
use crate::{
    ContainerImage, Labels, Node, OwnerRef, PodDisruptionBudget, Quantity, ResourceName, Resources,
    Sym, Taint, TaintEffect,
};

/// A problem with one field of one object.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{object}: {field}: {message}")]
pub struct ObjectError {
    /// Kind and name, e.g. `Pod default/web-1` (or `document 3` when it has no name yet).
    pub object: String,
    /// Field path, e.g. `spec.containers[0].resources.requests.cpu`.
    pub field: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("{source_name}: not valid YAML or JSON: {message}")]
    Syntax {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: {error}")]
    Object {
        source_name: String,
        error: ObjectError,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub name: Sym,
    pub labels: Labels,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityClass {
    pub name: Sym,
    pub value: i32,
    pub global_default: bool,
    pub preemption_policy: PreemptionPolicy,
}

/// A service: only its selector matters, for the default topology spread constraints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub selector: LabelSelector,
}

/// Everything decoded from one or more sources.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub namespaces: Vec<Namespace>,
    pub priority_classes: Vec<PriorityClass>,
    pub services: Vec<Service>,
    pub pvs: Vec<PersistentVolume>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub storage_classes: Vec<StorageClass>,
    pub csi_nodes: Vec<CsiNode>,
    pub pdbs: Vec<PodDisruptionBudget>,
    /// DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates.
    pub dra: crate::dra::DraObjects,
    /// Objects of kinds the scheduler does not read, as `Kind namespace/name`.
    pub ignored: Vec<String>,
    /// Pods (indices into `pods`) that name a priority class but carry no resolved priority.
    unresolved_priority: Vec<usize>,
}

impl ClusterObjects {
    /// Decodes YAML (one or more documents) or JSON text. `source_name` names the input in errors.
    pub fn decode(text: &str, source_name: &str) -> Result<ClusterObjects, DecodeError> {
        let mut objects = ClusterObjects::default();
        objects.decode_more(text, source_name)?;
        Ok(objects)
    }

    /// Decodes more text into these objects (several files make one cluster).
    pub fn decode_more(&mut self, text: &str, source_name: &str) -> Result<(), DecodeError> {
        let documents: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|e| DecodeError::Syntax {
                source_name: source_name.to_string(),
                message: e.to_string(),
            })?;
        for (index, document) in documents.into_iter().enumerate() {
            if document.is_null() {
                continue;
            }
            self.add_value(document, &format!("document {}", index + 1))
                .map_err(|error| DecodeError::Object {
                    source_name: source_name.to_string(),
                    error,
                })?;
        }
        Ok(())
    }

    fn add_value(&mut self, mut value: Value, position: &str) -> Result<(), ObjectError> {
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .ok_or_else(|| ObjectError {
                object: position.to_string(),
                field: "kind".into(),
                message: "missing or not a string".into(),
            })?
            .to_string();
        if kind == "List" || (kind.ends_with("List") && value.get("items").is_some()) {
            let items = match value.get_mut("items").map(Value::take) {
                Some(Value::Array(items)) => items,
                Some(Value::Null) | None => Vec::new(),
                Some(_) => {
                    return Err(ObjectError {
                        object: format!("{kind} ({position})"),
                        field: "items".into(),
                        message: "must be a list".into(),
                    });
                }
            };
            for (i, item) in items.into_iter().enumerate() {
                self.add_value(item, &format!("{position} items[{i}]"))?;
            }
            return Ok(());
        }
        let object = object_label(&kind, &value, position);
        quantities_to_strings(&mut value);
        match kind.as_str() {
            "Node" => {
                let node: k8s::Node = typed(value, &object)?;
                self.nodes.push(convert_node(&node, &object)?);
            }
            "Pod" => {
                let pod: k8s::Pod = typed(value, &object)?;
                let (pod, priority_resolved) = convert_pod(&pod, &object)?;
                if !priority_resolved {
                    self.unresolved_priority.push(self.pods.len());
                }
                self.pods.push(pod);
            }
            "Namespace" => {
                let ns: k8s::Namespace = typed(value, &object)?;
                self.namespaces.push(convert_namespace(&ns, &object)?);
            }
            "PriorityClass" => {
                let pc: K8sPriorityClass = typed(value, &object)?;
                self.priority_classes
                    .push(convert_priority_class(&pc, &object)?);
            }
            "Service" => {
                let svc: k8s::Service = typed(value, &object)?;
                self.services.push(convert_service(&svc, &object)?);
            }
            "PersistentVolume" => {
                let pv: k8s::PersistentVolume = typed(value, &object)?;
                self.pvs.push(convert_pv(&pv, &object)?);
            }
            "PersistentVolumeClaim" => {
                let pvc: k8s::PersistentVolumeClaim = typed(value, &object)?;
                self.pvcs.push(convert_pvc(&pvc, &object)?);
            }
            "StorageClass" => {
                let sc: storage_v1::StorageClass = typed(value, &object)?;
                self.storage_classes
                    .push(convert_storage_class(&sc, &object)?);
            }
            "CSINode" => {
                counts_back_to_numbers(&mut value);
                let csi_node: storage_v1::CSINode = typed(value, &object)?;
                self.csi_nodes.push(convert_csi_node(&csi_node, &object)?);
            }
            "PodDisruptionBudget" => self.pdbs.push(crate::policy::decode(value, &object)?),
            kind if crate::dra_decode::KINDS.contains(&kind) => {
                crate::dra_decode::add_object(&mut self.dra, kind, value, &object)?;
            }
            _ => self.ignored.push(object),
        }
        Ok(())
    }

    /// Adds every object of `other` (pods awaiting a priority class stay awaiting it).
    pub fn merge(&mut self, other: ClusterObjects) {
        let offset = self.pods.len();
        self.unresolved_priority
            .extend(other.unresolved_priority.iter().map(|i| i + offset));
        self.nodes.extend(other.nodes);
        self.pods.extend(other.pods);
        self.namespaces.extend(other.namespaces);
        self.priority_classes.extend(other.priority_classes);
        self.services.extend(other.services);
        self.pvs.extend(other.pvs);
        self.pvcs.extend(other.pvcs);
        self.storage_classes.extend(other.storage_classes);
        self.csi_nodes.extend(other.csi_nodes);
        self.pdbs.extend(other.pdbs);
        self.dra.extend(other.dra);
        self.ignored.extend(other.ignored);
    }

    /// Gives pods that name a priority class (and carry no `spec.priority`) the class's
    /// value, and pods that name none the global default's, as the Priority admission
    /// plugin does. Call once all sources are decoded.
    pub fn resolve_priorities(&mut self) -> Result<(), ObjectError> {
        let default_class = self.priority_classes.iter().find(|c| c.global_default);
        for &index in &self.unresolved_priority {
            let pod = &mut self.pods[index];
            let class = match pod.priority_class_name {
                Some(name) => Some(
                    self.priority_classes
                        .iter()
                        .find(|c| c.name == name)
                        .ok_or_else(|| ObjectError {
                            object: format!("Pod {}", pod.key()),
                            field: "spec.priorityClassName".into(),
                            message: format!("no PriorityClass named {name:?}"),
                        })?,
                ),
                None => default_class,
            };
            if let Some(class) = class {
                pod.priority = class.value;
                pod.preemption_policy = class.preemption_policy;
            }
        }
        self.unresolved_priority.clear();
        Ok(())
    }
}

fn object_label(kind: &str, value: &Value, position: &str) -> String {
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

pub(crate) fn typed<T: serde::de::DeserializeOwned>(
    value: Value,
    object: &str,
) -> Result<T, ObjectError> {
    serde_path_to_error::deserialize(value).map_err(|e| ObjectError {
        object: object.to_string(),
        field: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

pub(crate) fn field_error(
    object: &str,
    field: impl Into<String>,
    message: impl Into<String>,
) -> ObjectError {
    ObjectError {
        object: object.to_string(),
        field: field.into(),
        message: message.into(),
    }
}

pub(crate) fn required_name(meta: &meta::ObjectMeta, object: &str) -> Result<String, ObjectError> {
    match meta.name.as_deref() {
        Some(name) if !name.is_empty() => Ok(name.to_string()),
        _ => Err(field_error(object, "metadata.name", "required")),
    }
}

fn labels(map: Option<&BTreeMap<String, String>>) -> Labels {
    Labels::new(
        map.into_iter()
            .flatten()
            .map(|(k, v)| (Sym::new(k), Sym::new(v))),
    )
}

/// Converts a resource map; `cpu` in millicores, everything else in whole units.
fn resources(
    map: Option<&BTreeMap<String, K8sQuantity>>,
    object: &str,
    field: &str,
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
                format!("must not be negative: {:?}", quantity.0),
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

fn convert_node(node: &k8s::Node, object: &str) -> Result<Node, ObjectError> {
    let name = required_name(&node.metadata, object)?;
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    let mut taints = Vec::new();
    for (i, taint) in spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let effect = TaintEffect::parse(&taint.effect).ok_or_else(|| {
            field_error(
                object,
                format!("spec.taints[{i}].effect"),
                format!("unknown taint effect {:?}", taint.effect),
            )
        })?;
        taints.push(Taint {
            key: Sym::new(&taint.key),
            value: Sym::new(taint.value.as_deref().unwrap_or("")),
            effect,
        });
    }
    let capacity = resources(
        status.and_then(|s| s.capacity.as_ref()),
        object,
        "status.capacity",
    )?;
    // A node that reports no allocatable offers its capacity, as the kubelet would.
    let allocatable = match status.and_then(|s| s.allocatable.as_ref()) {
        Some(map) => resources(Some(map), object, "status.allocatable")?,
        None => capacity.clone(),
    };
    let images = status
        .and_then(|s| s.images.as_ref())
        .into_iter()
        .flatten()
        .map(|image| ContainerImage {
            names: image.names.iter().flatten().map(|n| Sym::new(n)).collect(),
            size_bytes: image.size_bytes.unwrap_or(0),
        })
        .collect();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let annotations = annotations(node.metadata.annotations.as_ref());
    let gpus = crate::gpu::parse_node_devices(&annotations)
        .map_err(|e| {
            field_error(
                object,
                format!("metadata.annotations[{:?}]", e.annotation),
                e.message,
            )
        })?
        .map(Arc::new);
    Ok(Node {
        name: Sym::new(&name),
        uid: Arc::from(node.metadata.uid.as_deref().unwrap_or(&name)),
        labels: labels(node.metadata.labels.as_ref()),
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        capacity,
        allocatable,
        images,
        ready,
        annotations,
        gpus,
    })
}

fn annotations(map: Option<&BTreeMap<String, String>>) -> Arc<[(Arc<str>, Arc<str>)]> {
    map.into_iter()
        .flatten()
        .map(|(k, v)| (Arc::from(k.as_str()), Arc::from(v.as_str())))
        .collect()
}

fn preemption_policy(
    value: Option<&str>,
    object: &str,
    field: &str,
) -> Result<PreemptionPolicy, ObjectError> {
    match value {
        None | Some("PreemptLowerPriority") => Ok(PreemptionPolicy::PreemptLowerPriority),
        Some("Never") => Ok(PreemptionPolicy::Never),
        Some(other) => Err(field_error(
            object,
            field,
            format!("must be PreemptLowerPriority or Never, not {other:?}"),
        )),
    }
}

/// Converts a pod; the flag says whether its priority is known (set, or no class named).
fn convert_pod(pod: &k8s::Pod, object: &str) -> Result<(Pod, bool), ObjectError> {
    let name = required_name(&pod.metadata, object)?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| field_error(object, "spec", "required"))?;
    let mut out = Pod::new(namespace, &name);
    if let Some(uid) = pod.metadata.uid.as_deref() {
        out.uid = Arc::from(uid);
    }
    out.labels = labels(pod.metadata.labels.as_ref());
    out.annotations = annotations(pod.metadata.annotations.as_ref());
    out.terminating = pod.metadata.deletion_timestamp.is_some();
    out.controller = controller(&pod.metadata);
    out.resource_claims = crate::dra_decode::pod_resource_claims(pod, object)?.into();
    out.start_time = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0.as_second());
    out.nominated_node_name = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
        .map(Sym::new);
    out.priority_class_name = spec
        .priority_class_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .map(Sym::new);
    out.priority = spec.priority.unwrap_or(0);
    let priority_resolved = spec.priority.is_some();
    out.preemption_policy = preemption_policy(
        spec.preemption_policy.as_deref(),
        object,
        "spec.preemptionPolicy",
    )?;
    if let Some(scheduler) = spec.scheduler_name.as_deref().filter(|s| !s.is_empty()) {
        out.scheduler_name = Sym::new(scheduler);
    }
    out.node_name = spec
        .node_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .map(Sym::new);
    out.node_selector = labels(spec.node_selector.as_ref());
    out.scheduling_gates = spec
        .scheduling_gates
        .iter()
        .flatten()
        .map(|g| Arc::from(g.name.as_str()))
        .collect();
    out.tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| toleration(t, object, &format!("spec.tolerations[{i}]")))
        .collect::<Result<_, _>>()?;
    if let Some(affinity) = &spec.affinity {
        out.affinity = convert_affinity(affinity, &out.labels, object)?;
    }
    out.topology_spread_constraints = spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            spread_constraint(
                c,
                &out.labels,
                object,
                &format!("spec.topologySpreadConstraints[{i}]"),
            )
        })
        .collect::<Result<_, _>>()?;
    out.containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| container(c, object, &format!("spec.containers[{i}]")))
        .collect::<Result<_, _>>()?;
    out.init_containers = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| container(c, object, &format!("spec.initContainers[{i}]")))
        .collect::<Result<_, _>>()?;
    if let Some(overhead) = &spec.overhead {
        out.overhead = Some(Box::new(resources(
            Some(overhead),
            object,
            "spec.overhead",
        )?));
    }
    out.volumes = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| Volume {
            name: Arc::from(v.name.as_str()),
            claim_name: v
                .persistent_volume_claim
                .as_ref()
                .map(|c| Arc::from(c.claim_name.as_str())),
            read_only: v
                .persistent_volume_claim
                .as_ref()
                .and_then(|c| c.read_only)
                .unwrap_or(false),
            disk: disk(v),
        })
        .collect();
    out.update_requests();
    Ok((out, priority_resolved))
}

/// The in-tree disk a volume names, if any (the sources VolumeRestrictions checks).
fn disk(v: &k8s::Volume) -> Option<Disk> {
    let read_only = |r: Option<bool>| r.unwrap_or(false);
    if let Some(d) = &v.gce_persistent_disk {
        return Some(Disk::GcePersistentDisk {
            pd_name: Arc::from(d.pd_name.as_str()),
            read_only: read_only(d.read_only),
        });
    }
    if let Some(d) = &v.aws_elastic_block_store {
        return Some(Disk::AwsElasticBlockStore {
            volume_id: Arc::from(d.volume_id.as_str()),
        });
    }
    if let Some(d) = &v.iscsi {
        return Some(Disk::Iscsi {
            iqn: Arc::from(d.iqn.as_str()),
            read_only: read_only(d.read_only),
        });
    }
    v.rbd.as_ref().map(|d| Disk::Rbd {
        monitors: d.monitors.iter().map(|m| Arc::from(m.as_str())).collect(),
        // The API server defaults the pool to "rbd".
        pool: Arc::from(d.pool.as_deref().filter(|p| !p.is_empty()).unwrap_or("rbd")),
        image: Arc::from(d.image.as_str()),
        read_only: read_only(d.read_only),
    })
}

fn container(c: &k8s::Container, object: &str, field: &str) -> Result<Container, ObjectError> {
    let res = c.resources.as_ref();
    let mut requests = resources(
        res.and_then(|r| r.requests.as_ref()),
        object,
        &format!("{field}.resources.requests"),
    )?;
    let limits = resources(
        res.and_then(|r| r.limits.as_ref()),
        object,
        &format!("{field}.resources.limits"),
    )?;
    let requested = |name: &str| {
        res.and_then(|r| r.requests.as_ref())
            .is_some_and(|m| m.contains_key(name))
    };
    // API defaulting: a resource with a limit and no request requests its limit.
    for name in res
        .and_then(|r| r.limits.as_ref())
        .into_iter()
        .flat_map(|m| m.keys())
    {
        if !requested(name) {
            let resource = ResourceName::parse(name);
            requests.set(resource, limits.get(resource));
        }
    }
    let has_request = |name: &str| {
        requested(name)
            || res
                .and_then(|r| r.limits.as_ref())
                .is_some_and(|m| m.contains_key(name))
    };
    let mut host_ports = SmallVec::new();
    for (i, port) in c.ports.iter().flatten().enumerate() {
        let Some(host_port) = port.host_port.filter(|p| *p > 0) else {
            continue;
        };
        let protocol = match port.protocol.as_deref() {
            None | Some("TCP") => Protocol::Tcp,
            Some("UDP") => Protocol::Udp,
            Some("SCTP") => Protocol::Sctp,
            Some(other) => {
                return Err(field_error(
                    object,
                    format!("{field}.ports[{i}].protocol"),
                    format!("must be TCP, UDP or SCTP, not {other:?}"),
                ));
            }
        };
        host_ports.push(HostPort {
            ip: Sym::new(
                port.host_ip
                    .as_deref()
                    .filter(|ip| !ip.is_empty())
                    .unwrap_or("0.0.0.0"),
            ),
            protocol,
            port: host_port,
        });
    }
    let mut zero_requests: Vec<Sym> = res
        .into_iter()
        .flat_map(|r| r.requests.iter().chain(r.limits.iter()).flatten())
        .filter_map(|(name, _)| match ResourceName::parse(name) {
            ResourceName::Scalar(s) if requests.scalar(s) == 0 => Some(s),
            _ => None,
        })
        .collect();
    zero_requests.sort_unstable();
    zero_requests.dedup();
    Ok(Container {
        name: Arc::from(c.name.as_str()),
        image: Sym::new(c.image.as_deref().unwrap_or("")),
        requests,
        cpu_unset: !has_request(crate::resources::CPU),
        memory_unset: !has_request(crate::resources::MEMORY),
        host_ports,
        restartable: c.restart_policy.as_deref() == Some("Always"),
        zero_requests: zero_requests.into_boxed_slice(),
    })
}

fn toleration(t: &k8s::Toleration, object: &str, field: &str) -> Result<Toleration, ObjectError> {
    let op = match t.operator.as_deref() {
        None | Some("Equal") => TolerationOp::Equal,
        Some("Exists") => TolerationOp::Exists,
        Some(other) => {
            return Err(field_error(
                object,
                format!("{field}.operator"),
                format!("must be Equal or Exists, not {other:?}"),
            ));
        }
    };
    let key = t.key.as_deref().filter(|k| !k.is_empty()).map(Sym::new);
    if key.is_none() && op != TolerationOp::Exists {
        return Err(field_error(
            object,
            format!("{field}.operator"),
            "must be Exists when key is empty",
        ));
    }
    let effect = match t.effect.as_deref().filter(|e| !e.is_empty()) {
        None => None,
        Some(e) => Some(TaintEffect::parse(e).ok_or_else(|| {
            field_error(
                object,
                format!("{field}.effect"),
                format!("unknown taint effect {e:?}"),
            )
        })?),
    };
    Ok(Toleration {
        key,
        op,
        value: Sym::new(t.value.as_deref().unwrap_or("")),
        effect,
    })
}

fn values(v: Option<&Vec<String>>) -> SmallVec<[Sym; 2]> {
    v.into_iter().flatten().map(|s| Sym::new(s)).collect()
}

pub(crate) fn label_selector(
    sel: &meta::LabelSelector,
    object: &str,
    field: &str,
) -> Result<LabelSelector, ObjectError> {
    let mut out = LabelSelector::from_pairs(
        sel.match_labels
            .iter()
            .flatten()
            .map(|(k, v)| (Sym::new(k), Sym::new(v))),
    );
    for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
        let at = format!("{field}.matchExpressions[{i}]");
        let empty = Vec::new();
        let requirement =
            Requirement::parse(&e.key, &e.operator, e.values.as_ref().unwrap_or(&empty)).map_err(
                |e| field_error(object, format!("{at}.{}", e.part.unwrap_or("")), e.message),
            )?;
        out.requirements.push(requirement);
    }
    Ok(out)
}

fn node_selector_requirement(
    r: &k8s::NodeSelectorRequirement,
    object: &str,
    field: &str,
    is_field_selector: bool,
) -> Result<NodeSelectorRequirement, ObjectError> {
    let empty = Vec::new();
    NodeSelectorRequirement::parse(
        &r.key,
        &r.operator,
        r.values.as_ref().unwrap_or(&empty),
        is_field_selector,
    )
    .map_err(|e| {
        let at = match e.part {
            Some(part) => format!("{field}.{part}"),
            None => field.to_string(),
        };
        field_error(object, at, e.message)
    })
}

/// A NodeSelector (all its terms), as DRA objects carry them.
pub(crate) fn node_selector(
    selector: &k8s::NodeSelector,
    object: &str,
    field: &str,
) -> Result<NodeSelector, ObjectError> {
    Ok(NodeSelector {
        terms: selector
            .node_selector_terms
            .iter()
            .enumerate()
            .map(|(i, t)| node_selector_term(t, object, &format!("{field}.nodeSelectorTerms[{i}]")))
            .collect::<Result<_, _>>()?,
    })
}

/// The owner reference marked as controller, if any.
fn controller(meta: &meta::ObjectMeta) -> Option<Arc<OwnerRef>> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| {
            Arc::new(OwnerRef {
                kind: Sym::new(&o.kind),
                name: Arc::from(o.name.as_str()),
                uid: Arc::from(o.uid.as_str()),
            })
        })
}

fn node_selector_term(
    t: &k8s::NodeSelectorTerm,
    object: &str,
    field: &str,
) -> Result<NodeSelectorTerm, ObjectError> {
    let convert = |list: Option<&Vec<k8s::NodeSelectorRequirement>>, name: &str, fields: bool| {
        list.into_iter()
            .flatten()
            .enumerate()
            .map(|(i, r)| {
                node_selector_requirement(r, object, &format!("{field}.{name}[{i}]"), fields)
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(NodeSelectorTerm {
        match_expressions: convert(t.match_expressions.as_ref(), "matchExpressions", false)?,
        match_fields: convert(t.match_fields.as_ref(), "matchFields", true)?,
    })
}

fn weight(w: i32, object: &str, field: &str) -> Result<i32, ObjectError> {
    if (1..=100).contains(&w) {
        Ok(w)
    } else {
        Err(field_error(
            object,
            field,
            format!("must be in the range 1-100, not {w}"),
        ))
    }
}

fn convert_affinity(
    a: &k8s::Affinity,
    pod_labels: &Labels,
    object: &str,
) -> Result<Affinity, ObjectError> {
    let mut out = Affinity::default();
    if let Some(na) = &a.node_affinity {
        let base = "spec.affinity.nodeAffinity";
        if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
            let field = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution");
            out.node_affinity.required = Some(NodeSelector {
                terms: req
                    .node_selector_terms
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        node_selector_term(t, object, &format!("{field}.nodeSelectorTerms[{i}]"))
                    })
                    .collect::<Result<_, _>>()?,
            });
        }
        for (i, p) in na
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let field = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            out.node_affinity.preferred.push(PreferredSchedulingTerm {
                weight: weight(p.weight, object, &format!("{field}.weight"))?,
                term: node_selector_term(&p.preference, object, &format!("{field}.preference"))?,
            });
        }
    }
    if let Some(pa) = &a.pod_affinity {
        out.pod_affinity = pod_affinity(
            pa.required_during_scheduling_ignored_during_execution
                .as_ref(),
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
            pod_labels,
            object,
            "spec.affinity.podAffinity",
        )?;
    }
    if let Some(pa) = &a.pod_anti_affinity {
        out.pod_anti_affinity = pod_affinity(
            pa.required_during_scheduling_ignored_during_execution
                .as_ref(),
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
            pod_labels,
            object,
            "spec.affinity.podAntiAffinity",
        )?;
    }
    Ok(out)
}

fn pod_affinity(
    required: Option<&Vec<k8s::PodAffinityTerm>>,
    preferred: Option<&Vec<k8s::WeightedPodAffinityTerm>>,
    pod_labels: &Labels,
    object: &str,
    base: &str,
) -> Result<PodAffinity, ObjectError> {
    let mut out = PodAffinity::default();
    for (i, t) in required.into_iter().flatten().enumerate() {
        let field = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.required
            .push(pod_affinity_term(t, pod_labels, object, &field)?);
    }
    for (i, w) in preferred.into_iter().flatten().enumerate() {
        let field = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.preferred.push(WeightedPodAffinityTerm {
            weight: weight(w.weight, object, &format!("{field}.weight"))?,
            term: pod_affinity_term(
                &w.pod_affinity_term,
                pod_labels,
                object,
                &format!("{field}.podAffinityTerm"),
            )?,
        });
    }
    Ok(out)
}

/// Adds `key In [pod's value]` (or `NotIn` for mismatch keys) for each listed key the pod
/// has, as the API server does for `matchLabelKeys` / `mismatchLabelKeys`.
fn merge_label_keys(
    selector: &mut Option<LabelSelector>,
    keys: &[String],
    op: SelectorOp,
    pod_labels: &Labels,
    object: &str,
    field: &str,
) -> Result<(), ObjectError> {
    if keys.is_empty() {
        return Ok(());
    }
    let Some(selector) = selector else {
        return Err(field_error(
            object,
            field,
            "may not be set when labelSelector is not set",
        ));
    };
    for key in keys {
        if let Some(value) = pod_labels.get_str(key) {
            selector.requirements.push(Requirement {
                key: Sym::new(key),
                op,
                values: smallvec::smallvec![value],
            });
        }
    }
    Ok(())
}

fn pod_affinity_term(
    t: &k8s::PodAffinityTerm,
    pod_labels: &Labels,
    object: &str,
    field: &str,
) -> Result<PodAffinityTerm, ObjectError> {
    if t.topology_key.is_empty() {
        return Err(field_error(
            object,
            format!("{field}.topologyKey"),
            "required",
        ));
    }
    let mut label_selector = t
        .label_selector
        .as_ref()
        .map(|s| label_selector(s, object, &format!("{field}.labelSelector")))
        .transpose()?;
    let empty = Vec::new();
    merge_label_keys(
        &mut label_selector,
        t.match_label_keys.as_ref().unwrap_or(&empty),
        SelectorOp::In,
        pod_labels,
        object,
        &format!("{field}.matchLabelKeys"),
    )?;
    merge_label_keys(
        &mut label_selector,
        t.mismatch_label_keys.as_ref().unwrap_or(&empty),
        SelectorOp::NotIn,
        pod_labels,
        object,
        &format!("{field}.mismatchLabelKeys"),
    )?;
    Ok(PodAffinityTerm {
        label_selector,
        namespaces: t.namespaces.iter().flatten().map(|n| Sym::new(n)).collect(),
        namespace_selector: t
            .namespace_selector
            .as_ref()
            .map(|s| label_selector_field(s, object, &format!("{field}.namespaceSelector")))
            .transpose()?,
        topology_key: Sym::new(&t.topology_key),
    })
}

fn label_selector_field(
    s: &meta::LabelSelector,
    object: &str,
    field: &str,
) -> Result<LabelSelector, ObjectError> {
    label_selector(s, object, field)
}

fn inclusion_policy(
    v: Option<&str>,
    default: InclusionPolicy,
    object: &str,
    field: &str,
) -> Result<InclusionPolicy, ObjectError> {
    match v {
        None => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => Err(field_error(
            object,
            field,
            format!("must be Honor or Ignore, not {other:?}"),
        )),
    }
}

fn spread_constraint(
    c: &k8s::TopologySpreadConstraint,
    pod_labels: &Labels,
    object: &str,
    field: &str,
) -> Result<TopologySpreadConstraint, ObjectError> {
    if c.max_skew <= 0 {
        return Err(field_error(
            object,
            format!("{field}.maxSkew"),
            format!("must be greater than zero, not {}", c.max_skew),
        ));
    }
    if c.topology_key.is_empty() {
        return Err(field_error(
            object,
            format!("{field}.topologyKey"),
            "required",
        ));
    }
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        other => {
            return Err(field_error(
                object,
                format!("{field}.whenUnsatisfiable"),
                format!("must be DoNotSchedule or ScheduleAnyway, not {other:?}"),
            ));
        }
    };
    if let Some(m) = c.min_domains
        && (m <= 0 || when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule)
    {
        return Err(field_error(
            object,
            format!("{field}.minDomains"),
            "must be greater than zero, and set only with whenUnsatisfiable DoNotSchedule",
        ));
    }
    let mut label_selector = c
        .label_selector
        .as_ref()
        .map(|s| label_selector(s, object, &format!("{field}.labelSelector")))
        .transpose()?;
    if let Some(keys) = &c.match_label_keys {
        let selector = label_selector.get_or_insert_with(LabelSelector::default);
        for key in keys {
            if let Some(value) = pod_labels.get_str(key) {
                selector.requirements.push(Requirement {
                    key: Sym::new(key),
                    op: SelectorOp::In,
                    values: smallvec::smallvec![value],
                });
            }
        }
    }
    Ok(TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: Sym::new(&c.topology_key),
        when_unsatisfiable,
        label_selector,
        min_domains: c.min_domains,
        node_affinity_policy: inclusion_policy(
            c.node_affinity_policy.as_deref(),
            InclusionPolicy::Honor,
            object,
            &format!("{field}.nodeAffinityPolicy"),
        )?,
        node_taints_policy: inclusion_policy(
            c.node_taints_policy.as_deref(),
            InclusionPolicy::Ignore,
            object,
            &format!("{field}.nodeTaintsPolicy"),
        )?,
    })
}

impl fmt::Display for ClusterObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} nodes, {} pods, {} namespaces, {} priority classes, {} services ({} other objects ignored)",
            self.nodes.len(),
            self.pods.len(),
            self.namespaces.len(),
            self.priority_classes.len(),
            self.services.len(),
            self.ignored.len()
        )
    }
}

/// The beta annotation that named a claim's or volume's class before `storageClassName`;
/// upstream still lets it win.
const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

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
    Ok(resources(map, object, field)?.get(ResourceName::parse("storage")))
}

fn convert_pv(pv: &k8s::PersistentVolume, object: &str) -> Result<PersistentVolume, ObjectError> {
    let name = required_name(&pv.metadata, object)?;
    let spec = pv.spec.as_ref();
    let terms = spec
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|required| {
            required
                .node_selector_terms
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let at = format!("spec.nodeAffinity.required.nodeSelectorTerms[{i}]");
                    node_selector_term(t, object, &at)
                })
                .collect::<Result<Vec<_>, _>>()
        })
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
        node_affinity: terms.map(|terms| NodeSelector { terms }),
        claim_ref,
        csi_driver: spec
            .and_then(|s| s.csi.as_ref())
            .map(|c| Sym::new(&c.driver)),
    })
}

fn convert_pvc(
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
    })
}

fn convert_storage_class(
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

fn convert_csi_node(csi_node: &storage_v1::CSINode, object: &str) -> Result<CsiNode, ObjectError> {
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

/// Undoes `quantities_to_strings` for CSINode drivers: their `allocatable` map holds a
/// plain integer `count`, not quantities.
fn counts_back_to_numbers(value: &mut Value) {
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

fn convert_namespace(ns: &k8s::Namespace, object: &str) -> Result<Namespace, ObjectError> {
    Ok(Namespace {
        name: Sym::new(&required_name(&ns.metadata, object)?),
        labels: labels(ns.metadata.labels.as_ref()),
    })
}

fn convert_priority_class(
    pc: &K8sPriorityClass,
    object: &str,
) -> Result<PriorityClass, ObjectError> {
    Ok(PriorityClass {
        name: Sym::new(&required_name(&pc.metadata, object)?),
        value: pc
            .value
            .ok_or_else(|| field_error(object, "value", "required"))?,
        global_default: pc.global_default.unwrap_or(false),
        preemption_policy: preemption_policy(
            pc.preemption_policy.as_deref(),
            object,
            "preemptionPolicy",
        )?,
    })
}

fn convert_service(svc: &k8s::Service, object: &str) -> Result<Service, ObjectError> {
    let selector = svc.spec.as_ref().and_then(|s| s.selector.as_ref());
    Ok(Service {
        namespace: Sym::new(svc.metadata.namespace.as_deref().unwrap_or("default")),
        name: Arc::from(required_name(&svc.metadata, object)?),
        selector: LabelSelector::from_pairs(
            selector
                .into_iter()
                .flatten()
                .map(|(k, v)| (Sym::new(k), Sym::new(v))),
        ),
    })
}

/// Conversion of one typed Kubernetes object, as a watch delivers it, into Gantry's model:
/// the same conversions [`ClusterObjects::decode`] applies to manifests, so a pod read from
/// the API is the pod a manifest would give. Errors name the object and the field.
pub mod from_k8s {
    use super::*;

    fn label(kind: &str, meta: &meta::ObjectMeta) -> String {
        let name = meta.name.as_deref().unwrap_or("(unnamed)");
        match meta.namespace.as_deref() {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        }
    }

    pub fn node(node: &k8s::Node) -> Result<Node, ObjectError> {
        convert_node(node, &label("Node", &node.metadata))
    }

    /// The pod, and whether its priority is known (`spec.priority` set, or no class
    /// named); an API server's Priority admission always sets it.
    pub fn pod(pod: &k8s::Pod) -> Result<(Pod, bool), ObjectError> {
        convert_pod(pod, &label("Pod", &pod.metadata))
    }

    pub fn namespace(ns: &k8s::Namespace) -> Result<Namespace, ObjectError> {
        convert_namespace(ns, &label("Namespace", &ns.metadata))
    }

    pub fn priority_class(pc: &K8sPriorityClass) -> Result<PriorityClass, ObjectError> {
        convert_priority_class(pc, &label("PriorityClass", &pc.metadata))
    }

    pub fn service(svc: &k8s::Service) -> Result<Service, ObjectError> {
        convert_service(svc, &label("Service", &svc.metadata))
    }

    pub fn persistent_volume(pv: &k8s::PersistentVolume) -> Result<PersistentVolume, ObjectError> {
        convert_pv(pv, &label("PersistentVolume", &pv.metadata))
    }

    pub fn persistent_volume_claim(
        pvc: &k8s::PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, ObjectError> {
        convert_pvc(pvc, &label("PersistentVolumeClaim", &pvc.metadata))
    }

    pub fn storage_class(sc: &storage_v1::StorageClass) -> Result<StorageClass, ObjectError> {
        convert_storage_class(sc, &label("StorageClass", &sc.metadata))
    }

    pub fn csi_node(csi_node: &storage_v1::CSINode) -> Result<CsiNode, ObjectError> {
        convert_csi_node(csi_node, &label("CSINode", &csi_node.metadata))
    }

    pub fn pod_disruption_budget(
        pdb: &k8s_openapi::api::policy::v1::PodDisruptionBudget,
    ) -> Result<PodDisruptionBudget, ObjectError> {
        crate::policy::convert(pdb, &label("PodDisruptionBudget", &pdb.metadata))
    }
}
