//! A JSON value that refuses an object with the same key twice. `serde_json::Value` keeps
//! the last of two, so `{"name": "a", "name": "b"}` would decode as `b` without a word;
//! kube-apiserver's strict decoding (what `kubectl` asks for) refuses it with
//! `duplicate field "name"`, and so does Gantry's YAML parser.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// A `Value` decoded with every object's keys distinct.
pub(super) struct StrictValue(pub Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<StrictValue, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Value, E> {
        Number::deserialize(de::value::I128Deserializer::new(value)).map(Value::Number)
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Value, E> {
        Number::deserialize(de::value::U128Deserializer::new(value)).map(Value::Number)
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(StrictValue(value)) = seq.next_element()? {
            values.push(value);
        }
        Ok(Value::Array(values))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(value) = map.next_value()?;
            insert_once(&mut fields, key, value)?;
        }
        Ok(Value::Object(fields))
    }
}

/// Adds a field to an object being decoded, refusing a key it already has.
pub(super) fn insert_once<E: de::Error>(
    fields: &mut Map<String, Value>,
    key: String,
    value: Value,
) -> Result<(), E> {
    match fields.entry(key) {
        Entry::Vacant(vacant) => {
            vacant.insert(value);
            Ok(())
        }
        Entry::Occupied(taken) => Err(E::custom(format_args!("duplicate field {:?}", taken.key()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(text: &str) -> Result<Value, String> {
        serde_json::from_str::<StrictValue>(text)
            .map(|v| v.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn decodes_as_serde_json_does() {
        let text = r#"{"a": [1, -2, 3.5, 18446744073709551615, true, null, "x"], "b": {}}"#;
        assert_eq!(
            decode(text).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }

    #[test]
    fn refuses_a_key_twice_at_any_depth() {
        let err = decode(r#"{"spec": {"containers": [{"name": "a", "name": "b"}]}}"#).unwrap_err();
        assert!(
            err.starts_with(r#"duplicate field "name" at line 1"#),
            "{err}"
        );
        let escaped = decode(r#"{"name": 1, "n\u0061me": 2}"#).unwrap_err();
        assert!(
            escaped.starts_with(r#"duplicate field "name""#),
            "{escaped}"
        );
    }
}
