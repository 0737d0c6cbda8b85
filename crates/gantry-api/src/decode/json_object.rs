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

/// Whether reading notes the fields a type does not know, as `kubectl` warns about them.
/// Noting them keeps every key read (a tenth of the reading): a replay's changes are read
/// without, since only the state at the start is shown to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownFields {
    Warn,
    Ignore,
}

impl JsonObject {
    /// Reads a pod or a node as `release`'s API server stores it, warning about the fields
    /// its type does not know as [`ClusterObjects::add_object`] does (with
    /// [`UnknownFields::Warn`]). `None` where the direct read does not apply (another
    /// kind, no name, or JSON the type does not take, such as a field of another type than
    /// the API's): read it through a `Value` then, which names the field. A pod that
    /// finished is not validated (it only leaves the cluster): it joins `finished_pods`.
    pub fn read(
        kind: &str,
        text: &str,
        release: Release,
        unknown: UnknownFields,
    ) -> Result<Option<Self>, ObjectError> {
        let mut warnings = (unknown == UnknownFields::Warn).then(Vec::new);
        let object = match kind {
            "Pod" => {
                let Some(pod) = typed::<k8s::Pod>(text, |m| &m.metadata, warnings.as_mut()) else {
                    return Ok(None);
                };
                let object = label(kind, &pod.metadata);
                name_object(&mut warnings, &object);
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
                let Some(node) = typed::<k8s::Node>(text, |n| &n.metadata, warnings.as_mut())
                else {
                    return Ok(None);
                };
                let object = label(kind, &node.metadata);
                name_object(&mut warnings, &object);
                Object::Node(Box::new(super::node::convert_node(&node, &object)?))
            }
            _ => return Ok(None),
        };
        Ok(Some(JsonObject(Converted {
            object,
            generated: false,
            warnings: warnings.unwrap_or_default(),
        })))
    }
}

/// The object of type `T` in `text`, when it reads and has a name; the fields `T` does
/// not know noted in `warnings`, if given (each naming its object once the caller knows
/// it).
fn typed<T: DeserializeOwned>(
    text: &str,
    metadata: impl Fn(&T) -> &ObjectMeta,
    warnings: Option<&mut Vec<Warning>>,
) -> Option<T> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let object: T = match warnings {
        Some(warnings) => {
            let note = |path: serde_ignored::Path| {
                warnings.push(Warning {
                    object: String::new(),
                    message: format!("unknown field {:?}", field_path(&path)),
                })
            };
            serde_ignored::deserialize(&mut deserializer, note).ok()?
        }
        None => T::deserialize(&mut deserializer).ok()?,
    };
    deserializer.end().ok()?;
    let meta = metadata(&object);
    meta.name
        .as_deref()
        .is_some_and(|n| !n.is_empty())
        .then_some(object)
}

fn name_object(warnings: &mut Option<Vec<Warning>>, object: &str) {
    for warning in warnings.iter_mut().flatten() {
        warning.object = object.to_string();
    }
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
    /// Adds an object read ahead, in its turn.
    pub fn add_read(&mut self, object: JsonObject) {
        self.apply(object.0);
    }
}
