//! One document (a YAML document or a JSON value), read as it streams in: a `List`'s
//! `items` are converted one at a time as the parser reaches them, so that a dump of
//! 100,000 pods never exists as one tree of values. `kubectl` prints `items` before
//! `kind`, so a document with `items` is taken for a list until its `kind` says otherwise.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::batch::{BATCH, BatchError, Item, Source};
use super::object::is_list_kind;
use super::strict_value::{StrictValue, insert_once};
use super::{ClusterObjects, ObjectError};

/// Reads one document into `objects`. A conversion error stops the parse at once (the
/// parser sees a custom error) and waits in `failure` with its object and field.
pub(super) struct DocumentSeed<'a> {
    pub objects: &'a mut ClusterObjects,
    /// `document 3`, for objects without a name.
    pub position: &'a str,
    pub failure: &'a mut Option<ObjectError>,
    /// The document's `items` were read from its text already (kubectl's layout); this
    /// is where they started. The rest of the document decides what they were.
    pub items_taken: Option<Checkpoint>,
}

/// The custom error a failed conversion raises inside the parser.
const CONVERSION_FAILED: &str = "conversion failed";

impl<'de> DeserializeSeed<'de> for DocumentSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl DocumentSeed<'_> {
    fn add<E: de::Error>(&mut self, value: Value, position: &str) -> Result<(), E> {
        self.objects.add_value(value, position).map_err(|error| {
            *self.failure = Some(error);
            E::custom(CONVERSION_FAILED)
        })
    }

    fn add_batch<E: de::Error>(&mut self, items: Vec<Item>) -> Result<(), E> {
        match self.objects.add_batch(items) {
            Ok(()) => Ok(()),
            Err(BatchError::Object(error)) => {
                *self.failure = Some(error);
                Err(E::custom(CONVERSION_FAILED))
            }
            Err(BatchError::Syntax(message)) => Err(E::custom(message)),
        }
    }
}

/// What a document where kind must come first holds.
fn not_an_object<E: de::Error>(failure: &mut Option<ObjectError>, position: &str) -> E {
    *failure = Some(ObjectError {
        object: position.to_string(),
        field: "kind".into(),
        message: "missing or not a string".into(),
    });
    E::custom(CONVERSION_FAILED)
}

impl<'de> Visitor<'de> for DocumentSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object or list")
    }

    /// An empty document.
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut fields = Map::new();
        let mut kind: Option<String> = None;
        let mut list_start: Option<Checkpoint> = self.items_taken.take();
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" && list_start.is_some() {
                return Err(de::Error::custom("duplicate field \"items\""));
            }
            let list_so_far = kind.as_deref().is_none_or(is_list_kind);
            if key == "items" && list_so_far && list_start.is_none() {
                list_start = Some(Checkpoint::of(self.objects));
                let position = self.position.to_string();
                map.next_value_seed(ItemsSeed {
                    document: &mut self,
                    position: &position,
                })?;
                continue;
            }
            let StrictValue(value) = map.next_value()?;
            if key == "kind" {
                kind = value.as_str().map(str::to_string);
            }
            insert_once(&mut fields, key, value)?;
        }
        match (list_start, kind.as_deref()) {
            (Some(_), Some(kind)) if is_list_kind(kind) => Ok(()),
            (Some(start), Some(_)) => {
                // Not a list after all: its `items` were a field of some other kind.
                start.restore(self.objects);
                let position = self.position.to_string();
                self.add(Value::Object(fields), &position)
            }
            (Some(_), None) => Err(not_an_object(self.failure, self.position)),
            (None, _) => {
                let position = self.position.to_string();
                self.add(Value::Object(fields), &position)
            }
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Err(not_an_object(self.failure, self.position))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(not_an_object(self.failure, self.position))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(not_an_object(self.failure, self.position))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(not_an_object(self.failure, self.position))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(not_an_object(self.failure, self.position))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(not_an_object(self.failure, self.position))
    }
}

/// A list's `items`, converted one by one.
struct ItemsSeed<'s, 'a> {
    document: &'s mut DocumentSeed<'a>,
    position: &'s str,
}

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        let mut batch = Vec::with_capacity(BATCH);
        while let Some(StrictValue(item)) = seq.next_element()? {
            batch.push(Item {
                source: Source::Value(item),
                position: format!("{} items[{index}]", self.position),
            });
            index += 1;
            if batch.len() == BATCH {
                self.document.add_batch(std::mem::take(&mut batch))?;
            }
        }
        self.document.add_batch(batch)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Err(self.not_a_list())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(self.not_a_list())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(self.not_a_list())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(self.not_a_list())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(self.not_a_list())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(self.not_a_list())
    }
}

impl ItemsSeed<'_, '_> {
    fn not_a_list<E: de::Error>(self) -> E {
        *self.document.failure = Some(ObjectError {
            object: format!("List ({})", self.position),
            field: "items".into(),
            message: "must be a list".into(),
        });
        E::custom(CONVERSION_FAILED)
    }
}

/// How many objects of each kind there were, to take back a document's `items` that
/// turned out not to be a list's.
pub(super) struct Checkpoint {
    lengths: [usize; 20],
}

impl Checkpoint {
    fn lengths(o: &ClusterObjects) -> [usize; 20] {
        [
            o.nodes.len(),
            o.pods.len(),
            o.namespaces.len(),
            o.priority_classes.len(),
            o.services.len(),
            o.controllers.len(),
            o.pvs.len(),
            o.pvcs.len(),
            o.storage_classes.len(),
            o.csi_nodes.len(),
            o.csi_drivers.len(),
            o.storage_capacities.len(),
            o.pdbs.len(),
            o.pod_groups.len(),
            o.ignored.len(),
            o.finished_pods.len(),
            o.warnings.len(),
            o.admission.len(),
            o.generated.pods.len(),
            o.generated.nodes.len(),
        ]
    }

    pub fn of(objects: &ClusterObjects) -> Checkpoint {
        Checkpoint {
            lengths: Checkpoint::lengths(objects),
        }
    }

    fn restore(self, o: &mut ClusterObjects) {
        let [
            nodes,
            pods,
            namespaces,
            classes,
            services,
            controllers,
            pvs,
            pvcs,
            storage_classes,
            csi_nodes,
            csi_drivers,
            storage_capacities,
            pdbs,
            pod_groups,
            ignored,
            finished,
            warnings,
            admission,
            generated_pods,
            generated_nodes,
        ] = self.lengths;
        o.nodes.truncate(nodes);
        o.pods.truncate(pods);
        o.namespaces.truncate(namespaces);
        o.priority_classes.truncate(classes);
        o.services.truncate(services);
        o.controllers.truncate(controllers);
        o.pvs.truncate(pvs);
        o.pvcs.truncate(pvcs);
        o.storage_classes.truncate(storage_classes);
        o.csi_nodes.truncate(csi_nodes);
        o.csi_drivers.truncate(csi_drivers);
        o.storage_capacities.truncate(storage_capacities);
        o.pdbs.truncate(pdbs);
        o.pod_groups.truncate(pod_groups);
        o.ignored.truncate(ignored);
        o.finished_pods.truncate(finished);
        o.warnings.truncate(warnings);
        o.admission.truncate(admission);
        o.generated.pods.truncate(generated_pods);
        o.generated.nodes.truncate(generated_nodes);
    }
}
