//! Decoding of real Kubernetes objects (`kubectl get nodes,pods -A -o yaml`, `kind: List`,
//! multi-document YAML, JSON) through the k8s-openapi types into Gantry's compact types,
//! with the API server's validation and admission.
//!
//! Every error names the object (`Pod default/web-1`) and the field path
//! (`spec.containers[0].resources.requests.cpu`). Objects of kinds the scheduler does not
//! read are listed in [`ClusterObjects::ignored`], fields it does not know become
//! [`ClusterObjects::warnings`], never dropped silently.
//!
//! The layout: `input` reads bytes (size limit, JSON or YAML documents; a list in
//! `kubectl`'s layout is cut into items, `json_values` does the same for JSON; `api_list`
//! reads one page of an API server's list), `fast_yaml`
//! reads the YAML `kubectl` prints, `document` streams any other document's `items`,
//! `batch` converts items in parallel, `object` turns one object into its kind's type
//! (`node`, `pod`, `affinity`, `storage`, `priority`, `controller`), `validation` holds the
//! API server's rules and messages, `names` the `generateName` generator, `admission` does
//! what the API server checks across objects once all are read, and `shared_templates`
//! lets a controller's equal pods share one template afterwards.

mod admission;
mod affinity;
mod api_list;
mod batch;
mod controller;
mod coscheduling_group;
mod disabled_fields;
mod document;
mod fast_yaml;
pub mod from_k8s;
mod input;
mod json_object;
mod json_values;
mod names;
mod node;
mod object;
mod pod;
mod pod_checks;
mod pod_group;
mod pod_resources;
mod priority;
mod shared_templates;
mod storage;
mod strict_value;
mod utf8_check;
pub mod validation;

use std::fmt;
use std::io::Read;
use std::sync::Arc;

use thiserror::Error;

pub use api_list::ApiListPage;
pub use controller::{ControllerKind, PodController};
pub use input::{DEFAULT_MAX_INPUT_BYTES, InputLimits, parse_yaml_value};
pub use json_object::{JsonObject, UnknownFields};
pub use priority::{PriorityClass, SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL};

use crate::labels::LabelSelector;
use crate::storage::{
    CsiDriver, CsiNode, PersistentVolume, PersistentVolumeClaim, StorageCapacity, StorageClass,
};
use crate::{Labels, Node, Pod, PodDisruptionBudget, PreemptionPolicy, Sym};

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
    #[error(
        "{source_name}: input larger than {limit} bytes (the limit for one file; a bigger dump needs a higher limit)"
    )]
    TooLarge { source_name: String, limit: u64 },
    #[error("{source_name}: cannot read: {message}")]
    Read {
        source_name: String,
        message: String,
    },
}

/// Something the input says that Gantry reads past, as `kubectl` warns about it (an unknown
/// field, a deprecated form).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{object}: {message}")]
pub struct Warning {
    pub object: String,
    /// E.g. `unknown field "spec.nodeSelecter"`.
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub name: Sym,
    pub labels: Labels,
}

/// A service: only its selector matters, for the default topology spread constraints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub selector: LabelSelector,
}

/// The nodes and pods one source added: those before these ends and after the previous
/// source's.
#[derive(Debug, Clone)]
struct SourceSpan {
    name: Arc<str>,
    nodes_end: usize,
    pods_end: usize,
}

/// Everything decoded from one or more sources.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    pub nodes: Vec<Node>,
    /// The pods the scheduler sees: pending, or bound and not finished.
    pub pods: Vec<Pod>,
    pub namespaces: Vec<Namespace>,
    pub priority_classes: Vec<PriorityClass>,
    pub services: Vec<Service>,
    /// ReplicationControllers, ReplicaSets and StatefulSets, for their selectors.
    pub controllers: Vec<PodController>,
    pub pvs: Vec<PersistentVolume>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub storage_classes: Vec<StorageClass>,
    pub csi_nodes: Vec<CsiNode>,
    /// CSIDrivers and CSIStorageCapacities, for VolumeBinding's capacity check.
    pub csi_drivers: Vec<CsiDriver>,
    pub storage_capacities: Vec<StorageCapacity>,
    pub pdbs: Vec<PodDisruptionBudget>,
    /// PodGroups (`scheduling.k8s.io/v1alpha2`), whose pods are scheduled together.
    pub pod_groups: Vec<crate::PodGroup>,
    /// PodGroups of scheduler-plugins' Coscheduling (`scheduling.x-k8s.io/v1alpha1`).
    pub coscheduling_groups: Vec<crate::coscheduling::CoschedulingGroup>,
    /// DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates.
    pub dra: crate::dra::DraObjects,
    /// Objects of kinds the scheduler does not read, as `Kind namespace/name`.
    pub ignored: Vec<String>,
    /// Pods in phase Succeeded or Failed, as `namespace/name`. Kube-scheduler's informer
    /// never lists them (field selector `status.phase!=Succeeded,status.phase!=Failed`):
    /// they hold no resources, ports or volumes, and are not scheduled.
    pub finished_pods: Vec<String>,
    /// Fields Gantry does not know, and other things read past.
    pub warnings: Vec<Warning>,
    /// The release whose API server the pods go through: fields behind a gate that is
    /// off there are dropped as they are decoded. Set it before reading.
    pub release: crate::Release,
    /// What each decoded pod said about its priority, for the Priority admission step.
    admission: Vec<admission::PodPriorityFields>,
    /// Which source each node and pod came from, for messages naming two objects.
    sources: Vec<SourceSpan>,
    /// Pods and nodes named from `generateName`, which admission may rename on a clash.
    generated: names::Generated,
}

impl ClusterObjects {
    /// No objects yet; those read next go through `release`'s API server.
    pub fn for_release(release: crate::Release) -> ClusterObjects {
        ClusterObjects {
            release,
            ..ClusterObjects::default()
        }
    }

    /// Decodes YAML (one or more documents) or JSON text. `source_name` names the input in errors.
    pub fn decode(text: &str, source_name: &str) -> Result<ClusterObjects, DecodeError> {
        let mut objects = ClusterObjects::default();
        objects.decode_more(text, source_name)?;
        Ok(objects)
    }

    /// Decodes more text into these objects (several files make one cluster).
    pub fn decode_more(&mut self, text: &str, source_name: &str) -> Result<(), DecodeError> {
        self.read(text.as_bytes(), source_name, &InputLimits::default())
    }

    /// Decodes a stream (a file, stdin) as it is read: memory grows with the objects kept,
    /// not with the text, and input beyond `limits` is refused.
    pub fn read(
        &mut self,
        reader: impl Read,
        source_name: &str,
        limits: &InputLimits,
    ) -> Result<(), DecodeError> {
        input::read_documents(self, reader, source_name, limits)?;
        self.note_source(source_name);
        Ok(())
    }

    /// The nodes and pods added since the previous source came from `source_name`.
    pub fn note_source(&mut self, source_name: &str) {
        self.sources.push(SourceSpan {
            name: source_name.into(),
            nodes_end: self.nodes.len(),
            pods_end: self.pods.len(),
        });
    }

    /// The source node `index` was read from, when it was read from one.
    fn source_of_node(&self, index: usize) -> Option<&str> {
        let span = self.sources.iter().find(|s| index < s.nodes_end)?;
        Some(&span.name)
    }

    /// The source pod `index` was read from, when it was read from one.
    fn source_of_pod(&self, index: usize) -> Option<&str> {
        let span = self.sources.iter().find(|s| index < s.pods_end)?;
        Some(&span.name)
    }

    /// Adds every object of `other` (pods awaiting admission stay awaiting it).
    pub fn merge(&mut self, other: ClusterObjects) {
        let offset = self.pods.len();
        let node_offset = self.nodes.len();
        self.admission
            .extend(other.admission.into_iter().map(|a| a.shifted(offset)));
        self.generated
            .extend(other.generated.shifted(offset, node_offset));
        self.sources
            .extend(other.sources.into_iter().map(|span| SourceSpan {
                nodes_end: span.nodes_end + node_offset,
                pods_end: span.pods_end + offset,
                ..span
            }));
        self.nodes.extend(other.nodes);
        self.pods.extend(other.pods);
        self.namespaces.extend(other.namespaces);
        self.priority_classes.extend(other.priority_classes);
        self.services.extend(other.services);
        self.controllers.extend(other.controllers);
        self.pvs.extend(other.pvs);
        self.pvcs.extend(other.pvcs);
        self.storage_classes.extend(other.storage_classes);
        self.csi_nodes.extend(other.csi_nodes);
        self.csi_drivers.extend(other.csi_drivers);
        self.storage_capacities.extend(other.storage_capacities);
        self.pdbs.extend(other.pdbs);
        self.pod_groups.extend(other.pod_groups);
        self.coscheduling_groups.extend(other.coscheduling_groups);
        self.dra.extend(other.dra);
        self.ignored.extend(other.ignored);
        self.finished_pods.extend(other.finished_pods);
        self.warnings.extend(other.warnings);
    }

    /// The Priority admission plugin's work: pods that carry no `spec.priority` get their
    /// class's value (the global default's when they name none), `preemptionPolicy` from
    /// the class when they carry none; a pod whose values contradict its class, or that
    /// names no known class and carries no priority, is refused with the API server's
    /// message. The built-in `system-cluster-critical` and `system-node-critical` exist
    /// in every cluster. Call once all sources are decoded.
    pub fn resolve_priorities(&mut self) -> Result<(), ObjectError> {
        admission::resolve_priorities(self, None)
    }

    /// Everything the API server checks across objects, for a cluster read from files:
    /// priority admission, unique names (renaming `generateName` objects that clash, as a
    /// client retrying would), and pods bound to nodes that exist; then the nodes and pods
    /// are in the order the API server lists them (by key), which a scheduler starting
    /// against the cluster adds them in.
    pub fn admit(&mut self) -> Result<(), ObjectError> {
        admission::admit(self, None)
    }

    /// [`ClusterObjects::admit`] for a cluster and pods to add to it (`--pods`): the pods
    /// see the cluster's priority classes, and their names must not clash with its pods.
    pub fn admit_with(&mut self, pending: &mut ClusterObjects) -> Result<(), ObjectError> {
        admission::admit(self, Some(pending))
    }
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

pub(crate) use affinity::{label_selector, node_selector};

/// Deserializes a typed object for decoders outside this module (DRA objects); fields the
/// type does not know are not reported from there.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    object: &str,
) -> Result<T, ObjectError> {
    object::typed(value, object, &mut Vec::new())
}

/// The object's name, validated as upstream's `ValidateObjectMeta` does.
pub(crate) fn required_name(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    object: &str,
) -> Result<String, ObjectError> {
    validation::object_meta(meta, object, validation::NameRule::Dns1123Subdomain)?;
    Ok(meta.name.clone().unwrap_or_default())
}

/// An error at `field` of `object`.
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

/// Parses `preemptionPolicy` (absent: `None`).
fn preemption_policy(
    value: Option<&str>,
    object: &str,
    field: &str,
) -> Result<Option<PreemptionPolicy>, ObjectError> {
    match value {
        None => Ok(None),
        Some("PreemptLowerPriority") => Ok(Some(PreemptionPolicy::PreemptLowerPriority)),
        Some("Never") => Ok(Some(PreemptionPolicy::Never)),
        Some(other) => Err(field_error(
            object,
            field,
            validation::not_supported(other, &["Never", "PreemptLowerPriority"]),
        )),
    }
}
