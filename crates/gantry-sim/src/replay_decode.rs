//! A trace's record decoded into what the replay keeps of it, on the reading thread that
//! parsed it: nothing here reads the replay's state, so records decode in parallel and
//! join the replay in order. Pods and nodes are read straight from their text
//! ([`JsonObject`]), a deletion reads only the object's name; every other object goes
//! through a [`Value`], as it did before.

use gantry_api::decode::{ClusterObjects, JsonObject, UnknownFields};
use gantry_api::trace::{Op, RawRecord};
use gantry_api::{Node, Pod, Release};
use serde::Deserialize;
use serde_json::Value;

/// A record, its object decoded where that needs nothing but the object.
pub(crate) struct Decoded {
    pub number: u64,
    pub at: u64,
    pub op: Op,
    pub kind: String,
    /// Or why not, in full.
    pub object: Result<Part, String>,
}

/// Which part of the trace a record belongs to.
pub(crate) enum Part {
    /// The cluster at the start: joins it in order with the rest of the start.
    Start(StartObject),
    Change(Changed),
}

pub(crate) enum StartObject {
    Read(JsonObject),
    /// Read with the start's other objects of its kind, in parallel batches.
    Value(Value),
}

pub(crate) enum Changed {
    /// A pod created or changed, as the API server stores it (`None`: it drops it).
    Pod(Option<Pod>),
    /// `namespace/name` of a pod deleted, or created or changed into phase Succeeded or
    /// Failed.
    PodGone(String),
    Node(Option<Node>),
    NodeDeleted(String),
    /// An object whose decoding reads the replay's state, or its deletion.
    Value(Value),
}

/// What a deletion reads of its object.
#[derive(Deserialize)]
struct Named {
    metadata: Metadata,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

/// `namespace/name`; a pod without a namespace is in `default`, as the API server puts it.
pub(crate) fn pod_key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or("default"))
}

/// The `namespace/name` of a pod's object.
pub(crate) fn key_of(object: &Value) -> String {
    let field = |f: &str| object.get("metadata")?.get(f)?.as_str();
    pod_key(field("namespace"), field("name").unwrap_or_default())
}

pub(crate) fn decode_record(record: RawRecord, source: &str, release: Release) -> Decoded {
    let position = || format!("{source}: record {}", record.number);
    let value = || {
        (record.to_record())
            .map(|r| r.object.unwrap_or_default())
            .map_err(|e| format!("{source}: {e}"))
    };
    let text = record.object.get();
    let object = match (record.kind, record.op) {
        (kind @ ("Pod" | "Node"), Op::List) => {
            start_pod_or_node(kind, text, release, value).map(Part::Start)
        }
        (_, Op::List) => value().map(|v| Part::Start(StartObject::Value(v))),
        (kind @ ("Pod" | "Node"), Op::Deleted) => match serde_json::from_str::<Named>(text) {
            Ok(Named { metadata }) if kind == "Pod" => Ok(Changed::PodGone(pod_key(
                metadata.namespace.as_deref(),
                &metadata.name,
            ))),
            Ok(Named { metadata }) => Ok(Changed::NodeDeleted(metadata.name)),
            Err(_) => value().map(Changed::Value),
        }
        .map(Part::Change),
        (kind @ ("Pod" | "Node"), Op::Added | Op::Modified) => {
            decode_pod_or_node(kind, text, &position(), release, value).map(Part::Change)
        }
        _ => value().map(|v| Part::Change(Changed::Value(v))),
    };
    Decoded {
        number: record.number,
        at: record.at,
        op: record.op,
        kind: record.kind.to_string(),
        object,
    }
}

/// A pod or node of the start, read straight from its text where it can be. Its unknown
/// fields are warned about, as a dump's are.
fn start_pod_or_node(
    kind: &str,
    text: &str,
    release: Release,
    value: impl FnOnce() -> Result<Value, String>,
) -> Result<StartObject, String> {
    match JsonObject::read(kind, text, release, UnknownFields::Warn) {
        Ok(Some(object)) => Ok(StartObject::Read(object)),
        // One the direct read refuses is read again through a value, whose error names
        // its field as the rest of the start's errors do.
        Ok(None) | Err(_) => value().map(StartObject::Value),
    }
}

/// A pod or node created or changed, read straight from its text where it can be.
fn decode_pod_or_node(
    kind: &str,
    text: &str,
    position: &str,
    release: Release,
    value: impl FnOnce() -> Result<Value, String>,
) -> Result<Changed, String> {
    let pod = kind == "Pod";
    let mut objects = ClusterObjects::for_release(release);
    let fail = |e: gantry_api::decode::ObjectError| format!("{position}: {e}");
    // A change's unknown fields are not shown: the start's are.
    let read = JsonObject::read(kind, text, release, UnknownFields::Ignore).map_err(fail)?;
    if let Some(object) = read {
        objects.add_read(object);
    } else {
        let object = value()?;
        let finished = matches!(
            object.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        );
        if pod && finished {
            return Ok(Changed::PodGone(key_of(&object)));
        }
        objects.add_object(object, position).map_err(fail)?;
    }
    Ok(match objects.finished_pods.pop() {
        Some(key) => Changed::PodGone(key),
        None if pod => Changed::Pod(objects.pods.pop()),
        None => Changed::Node(objects.nodes.pop()),
    })
}
