//! What the order checks read of a record's object: its `kind`, and whether it has a
//! `metadata.name`. The object's text is valid JSON already (the line was parsed, the
//! object kept as raw text), so this reads from its front no further than those two
//! fields: scanning every object to its end a second time was a tenth of the work of
//! reading a trace.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// The object's `kind`, when it has a `kind` and a `metadata.name` that are both strings,
/// each given once. A second `kind` or `name` after both were found is not looked for:
/// the object's own reader reads the whole of it.
pub(super) fn named_kind(object: &str) -> Option<String> {
    let mut head = Head::default();
    let mut deserializer = serde_json::Deserializer::from_str(object);
    // Stopping early leaves the rest unread, which serde_json reports as an error;
    // whatever stopped the reading, what was found is in `head`.
    let _ = (&mut deserializer).deserialize_map(ObjectVisitor(&mut head));
    head.named.then_some(head.kind).flatten()
}

#[derive(Default)]
struct Head {
    kind: Option<String>,
    named: bool,
}

impl Head {
    fn found(&self) -> bool {
        self.kind.is_some() && self.named
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum ObjectKey {
    Kind,
    Metadata,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum MetadataKey {
    Name,
    #[serde(other)]
    Other,
}

fn duplicate<E: de::Error>(field: &'static str) -> E {
    E::duplicate_field(field)
}

struct ObjectVisitor<'h>(&'h mut Head);

impl<'de> Visitor<'de> for ObjectVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let head = self.0;
        let (mut kind_seen, mut metadata_seen) = (false, false);
        while let Some(key) = map.next_key()? {
            match key {
                ObjectKey::Kind if kind_seen => return Err(duplicate("kind")),
                ObjectKey::Kind => {
                    kind_seen = true;
                    head.kind = map.next_value()?;
                }
                ObjectKey::Metadata if metadata_seen => return Err(duplicate("metadata")),
                ObjectKey::Metadata => {
                    metadata_seen = true;
                    map.next_value_seed(MetadataSeed(head))?;
                }
                ObjectKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            if head.found() {
                return Ok(());
            }
        }
        Ok(())
    }
}

struct MetadataSeed<'h>(&'h mut Head);

impl<'de> DeserializeSeed<'de> for MetadataSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetadataSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the object's metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let head = self.0;
        let mut name_seen = false;
        while let Some(key) = map.next_key()? {
            match key {
                MetadataKey::Name if name_seen => return Err(duplicate("name")),
                MetadataKey::Name => {
                    name_seen = true;
                    head.named = map.next_value::<Option<String>>()?.is_some();
                    // The rest of the object can be left unread only once its kind is
                    // known: stopping inside the metadata stops the whole reading.
                    if head.found() {
                        return Ok(());
                    }
                }
                MetadataKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde::Deserialize;

    use super::named_kind;

    /// The whole object read, as the order checks read it before.
    fn read_whole(object: &str) -> Option<String> {
        #[derive(Deserialize)]
        struct ObjectHead {
            #[serde(default)]
            kind: Option<String>,
            #[serde(default)]
            metadata: Option<MetadataHead>,
        }
        #[derive(Deserialize)]
        struct MetadataHead {
            #[serde(default)]
            name: Option<String>,
        }
        let head: ObjectHead = serde_json::from_str(object).ok()?;
        let named = head.metadata.is_some_and(|m| m.name.is_some());
        head.kind.filter(|_| named)
    }

    #[test]
    fn kind_and_name_wherever_they_are() {
        let cases = [
            (
                r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{}}"#,
                Some("Pod"),
            ),
            (
                r#"{"metadata":{"name":"p","uid":"u"},"kind":"Pod"}"#,
                Some("Pod"),
            ),
            (
                r#"{"metadata":{"a":{"b":[1,{}]},"name":"n"},"x":[],"kind":"Node"}"#,
                Some("Node"),
            ),
            (
                r#"{"ki\u006ed":"P\u006fd","metadata":{"n\u0061me":"p"}}"#,
                Some("Pod"),
            ),
            (r#"{"kind":"Pod","metadata":{}}"#, None),
            (r#"{"kind":"Pod","metadata":{"name":null}}"#, None),
            (r#"{"kind":"Pod","metadata":{"name":5}}"#, None),
            (r#"{"kind":"Pod","metadata":null}"#, None),
            (r#"{"kind":"Pod","metadata":[]}"#, None),
            (r#"{"kind":5,"metadata":{"name":"p"}}"#, None),
            (r#"{"kind":null,"metadata":{"name":"p"}}"#, None),
            (r#"{"metadata":{"name":"p"}}"#, None),
            (
                r#"{"kind":"Pod","kind":"Node","metadata":{"name":"p"}}"#,
                None,
            ),
            (r#"{"metadata":{"name":"p","name":"q"},"kind":"Pod"}"#, None),
            (
                r#"{"metadata":{"uid":"u"},"metadata":{"name":"p"},"kind":"Pod"}"#,
                None,
            ),
            ("5", None),
            ("[]", None),
            ("null", None),
        ];
        for (object, kind) in cases {
            assert_eq!(named_kind(object).as_deref(), kind, "{object}");
            assert_eq!(read_whole(object).as_deref(), kind, "{object}");
        }
    }

    /// A field of the head, or another, with one of the values that matter.
    fn field() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just(r#""Pod""#.to_string()),
            Just("null".to_string()),
            Just("7".to_string()),
            Just(r#"{"name":"p"}"#.to_string()),
            Just(r#"{"uid":"u","name":"p"}"#.to_string()),
            Just(r#"{"name":null}"#.to_string()),
            Just(r#"{"uid":[1,2]}"#.to_string()),
        ];
        let key = prop_oneof![Just("kind"), Just("metadata"), Just("spec")];
        (key, value).prop_map(|(key, value)| format!(r#""{key}":{value}"#))
    }

    proptest! {
        /// Where neither field is given twice, reading the front agrees with reading the
        /// whole object.
        #[test]
        fn agrees_with_reading_the_whole_object(fields in prop::collection::vec(field(), 0..5)) {
            let given = |key: &str| fields.iter().filter(|f| f.starts_with(&format!(r#""{key}""#))).count();
            prop_assume!(given("kind") <= 1 && given("metadata") <= 1);
            let object = format!("{{{}}}", fields.join(","));
            prop_assert_eq!(named_kind(&object), read_whole(&object), "{}", object);
        }
    }
}
