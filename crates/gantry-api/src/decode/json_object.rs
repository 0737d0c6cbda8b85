//! A pod or a node read straight from its JSON text into its type. Every other object
//! is read through a serde_json [`Value`](serde_json::Value), built, walked and dropped;
//! for the pods and nodes of a trace that was most of the work of replaying it. Reading
//! touches nothing shared, so a trace's records are read on any thread, ahead of joining
//! the cluster in order.

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use super::object::{Converted, Object, field_path};
use super::{ClusterObjects, ObjectError, Warning};
use crate::Release;

/// A pod or node read from its text, ready to join a [`ClusterObjects`].
pub struct JsonObject(Converted);

impl JsonObject {
    /// Reads a pod or a node as `release`'s API server stores it, warning about the fields
    /// its type does not know as [`ClusterObjects::add_object`] does. `None` where the
    /// direct read does not apply (another kind, no name, or JSON the type does not take,
    /// such as a field of another type than the API's): read it through a `Value` then,
    /// which names the field. A pod that finished is not validated (it only leaves the
    /// cluster): it joins `finished_pods`.
    pub fn read(kind: &str, text: &str, release: Release) -> Result<Option<Self>, ObjectError> {
        let mut warnings = Vec::new();
        let object = match kind {
            "Pod" => {
                let Some(pod) = typed::<k8s::Pod>(text, |m| &m.metadata, &mut warnings) else {
                    return Ok(None);
                };
                let object = label(kind, &pod.metadata);
                for warning in &mut warnings {
                    warning.object.clone_from(&object);
                }
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                if matches!(phase, Some("Succeeded" | "Failed")) {
                    let meta = &pod.metadata;
                    let namespace = meta.namespace.as_deref().unwrap_or("default");
                    let name = meta.name.as_deref().unwrap_or_default();
                    Object::FinishedPod(format!("{namespace}/{name}"))
                } else {
                    let (pod, priority_fields) = super::pod::convert_pod(&pod, &object, release)?;
                    Object::Pod(Box::new(pod), priority_fields)
                }
            }
            "Node" => {
                let Some(node) = typed::<k8s::Node>(text, |n| &n.metadata, &mut warnings) else {
                    return Ok(None);
                };
                let object = label(kind, &node.metadata);
                for warning in &mut warnings {
                    warning.object.clone_from(&object);
                }
                Object::Node(Box::new(super::node::convert_node(&node, &object)?))
            }
            _ => return Ok(None),
        };
        Ok(Some(JsonObject(Converted {
            object,
            generated: false,
            warnings,
        })))
    }
}

/// The object of type `T` in `text`, when it reads and has a name; the fields `T` does
/// not know noted in `warnings` (each naming its object once the caller knows it).
fn typed<T: DeserializeOwned>(
    text: &str,
    metadata: impl Fn(&T) -> &ObjectMeta,
    warnings: &mut Vec<Warning>,
) -> Option<T> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let note = |path: serde_ignored::Path| {
        warnings.push(Warning {
            object: String::new(),
            message: format!("unknown field {:?}", field_path(&path)),
        })
    };
    let object: T = serde_ignored::deserialize(&mut deserializer, note).ok()?;
    deserializer.end().ok()?;
    let meta = metadata(&object);
    meta.name
        .as_deref()
        .is_some_and(|n| !n.is_empty())
        .then_some(object)
}

/// `Pod namespace/name` (a pod without a namespace is in `default`), `Node name`.
fn label(kind: &str, meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None if kind == "Pod" => format!("{kind} default/{name}"),
        None => format!("{kind} {name}"),
    }
}

impl ClusterObjects {
    /// Adds a pod or a node from its JSON text ([`JsonObject::read`]). Returns whether it
    /// was read; on `false` read it with [`ClusterObjects::add_object`].
    pub fn add_json(&mut self, kind: &str, text: &str) -> Result<bool, ObjectError> {
        let object = JsonObject::read(kind, text, self.release)?;
        let read = object.is_some();
        if let Some(object) = object {
            self.add_read(object);
        }
        Ok(read)
    }

    /// Adds an object read ahead, in its turn.
    pub fn add_read(&mut self, object: JsonObject) {
        self.apply(object.0);
    }
}
