//! The test API server's storage: objects with one global resourceVersion counter (as
//! etcd's revision), and a bounded log of changes from which watches resume; a watch
//! from a resourceVersion older than the log answers `410 Gone`, as the watch cache does.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{Value, json};

use super::resources::Resource;

pub type Key = (Resource, String, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, with the object before it (for field-selector transitions).
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    pub resource: Resource,
    pub namespace: String,
    pub kind: EventType,
    pub object: Value,
    pub previous: Option<Value>,
}

#[derive(Debug)]
pub struct Store {
    pub objects: BTreeMap<Key, Value>,
    pub rv: u64,
    pub log: VecDeque<Change>,
    /// Changes kept for resuming watches.
    pub log_capacity: usize,
    /// The oldest resourceVersion a watch may resume from.
    pub oldest: u64,
    next_uid: u64,
}

impl Store {
    pub fn new(log_capacity: usize) -> Store {
        Store {
            objects: BTreeMap::new(),
            rv: 1,
            log: VecDeque::new(),
            log_capacity,
            oldest: 1,
            next_uid: 0,
        }
    }

    pub fn fresh_uid(&mut self) -> String {
        self.next_uid += 1;
        format!("00000000-0000-4000-8000-{:012x}", self.next_uid)
    }

    /// Writes an object (stamping its resourceVersion) and logs the change.
    pub fn write(&mut self, key: Key, mut object: Value, kind: EventType) -> (Value, Change) {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let previous = match kind {
            EventType::Deleted => self.objects.remove(&key),
            _ => self.objects.insert(key.clone(), object.clone()),
        };
        let change = Change {
            rv: self.rv,
            resource: key.0,
            namespace: key.1.clone(),
            kind,
            object: object.clone(),
            previous,
        };
        self.log.push_back(change.clone());
        while self.log.len() > self.log_capacity {
            let dropped = self.log.pop_front().expect("log is not empty");
            self.oldest = dropped.rv + 1;
        }
        (object, change)
    }

    /// Forgets the whole log, as a compacted watch cache: any watch resuming from a
    /// resourceVersion before now gets 410 Gone.
    pub fn compact(&mut self) {
        self.log.clear();
        self.oldest = self.rv + 1;
    }

    pub fn list(&self, resource: Resource, namespace: Option<&str>) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((r, ns, _), _)| *r == resource && namespace.is_none_or(|n| n == ns))
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// A field selector (`a=b,c!=d`) over the few fields kube-apiserver indexes for pods.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(text: &str) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        for term in text.split(',').filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!("invalid selector: {term:?}"));
            };
            terms.push((field.to_string(), equal, value.to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let path = format!("/{}", field.replace('.', "/"));
            let actual = object.pointer(&path).and_then(Value::as_str).unwrap_or("");
            (actual == value) == *equal
        })
    }
}

/// RFC 7386 JSON merge patch; with `strategic`, lists of conditions merge by `type`, and a
/// claim's `reservedFor` by `uid` (with `$patch: delete` removing an entry), as the
/// strategic merge patch does for them (the only lists patched here).
pub fn merge_patch(target: &mut Value, patch: &Value, strategic: bool) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let target = target.as_object_mut().expect("made an object");
    for (key, value) in patch {
        if key.starts_with("$setElementOrder") {
            continue;
        }
        if value.is_null() {
            target.remove(key);
        } else if strategic && key == "conditions" && value.is_array() {
            let existing = target.entry(key.clone()).or_insert_with(|| json!([]));
            if !existing.is_array() {
                *existing = json!([]);
            }
            let list = existing.as_array_mut().expect("an array");
            for item in value.as_array().expect("checked") {
                match list.iter_mut().find(|c| c["type"] == item["type"]) {
                    Some(current) => merge_patch(current, item, true),
                    None => list.push(item.clone()),
                }
            }
        } else if strategic && key == "reservedFor" && value.is_array() {
            let existing = target.entry(key.clone()).or_insert_with(|| json!([]));
            if !existing.is_array() {
                *existing = json!([]);
            }
            let list = existing.as_array_mut().expect("an array");
            for item in value.as_array().expect("checked") {
                if item["$patch"] == "delete" {
                    list.retain(|c| c["uid"] != item["uid"]);
                    continue;
                }
                match list.iter_mut().find(|c| c["uid"] == item["uid"]) {
                    Some(current) => merge_patch(current, item, true),
                    None => list.push(item.clone()),
                }
            }
        } else {
            merge_patch(
                target.entry(key.clone()).or_insert(Value::Null),
                value,
                strategic,
            );
        }
    }
}
