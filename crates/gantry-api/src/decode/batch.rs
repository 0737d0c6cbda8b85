//! The items of a large list, read and converted in parallel batches: parsing an item's
//! text and converting it to Gantry's types touch nothing shared, so they spread over
//! the cores; objects join their collections afterwards, in input order.

use rayon::prelude::*;
use serde_json::Value;

use super::fast_yaml;
use super::input::{parser_options, plain_parser_error};
use super::object::{Converted, convert, needs_sequential};
use super::strict_value::StrictValue;
use super::{ClusterObjects, DecodeError, ObjectError};

/// Items per batch: enough to keep every core busy, few enough to hold in memory.
pub(super) const BATCH: usize = 256;

/// One item of a list: parsed already, or its text (YAML dedented, or JSON).
pub(super) enum Source {
    Value(Value),
    Yaml(String),
    Json(Vec<u8>),
}

pub(super) struct Item {
    pub source: Source,
    /// `document 2 items[7]`.
    pub position: String,
}

/// Why a batch stopped: an object's error, or an item that is not YAML.
pub(super) enum BatchError {
    Object(ObjectError),
    Syntax(String),
}

enum Staged {
    Done(Converted),
    /// A nested list, or an object the name generator must name: added in order.
    Later(Value, String),
}

/// An item's text: the fast reader where it applies, the general parser where not.
fn parse_item(text: &str) -> Result<Value, String> {
    match fast_yaml::parse(text) {
        Some(value) => Ok(value),
        None => serde_saphyr::from_str_with_options(text, parser_options())
            .map_err(|e| plain_parser_error(&e.to_string())),
    }
}

fn stage(item: Item, release: crate::Release) -> Result<Staged, BatchError> {
    let value = match item.source {
        Source::Value(value) => value,
        Source::Yaml(text) => parse_item(&text)
            .map_err(|message| BatchError::Syntax(format!("{}: {message}", item.position)))?,
        Source::Json(text) => serde_json::from_slice(&text)
            .map(|StrictValue(value)| value)
            .map_err(|e| BatchError::Syntax(format!("{}: {e}", item.position)))?,
    };
    if needs_sequential(&value) {
        return Ok(Staged::Later(value, item.position));
    }
    convert(value, &item.position, false, release)
        .map(Staged::Done)
        .map_err(BatchError::Object)
}

impl ClusterObjects {
    /// Adds a batch of items; the first error in input order stops it.
    pub(super) fn add_batch(&mut self, items: Vec<Item>) -> Result<(), BatchError> {
        let staged: Vec<Result<Staged, BatchError>> = items
            .into_par_iter()
            .map(|item| stage(item, self.release))
            .collect();
        for staged in staged {
            match staged? {
                Staged::Done(converted) => self.apply(converted),
                Staged::Later(value, position) => self
                    .add_value(value, &position)
                    .map_err(BatchError::Object)?,
            }
        }
        Ok(())
    }
}

impl ClusterObjects {
    /// Adds objects already parsed (each with its `kind` and `apiVersion`, and its
    /// position for errors), converted in parallel batches as a dump's list items are;
    /// `source_name` names them in errors. Call [`ClusterObjects::note_source`] after.
    pub fn add_values(
        &mut self,
        values: impl IntoIterator<Item = (Value, String)>,
        source_name: &str,
    ) -> Result<(), DecodeError> {
        let mut batch = Vec::with_capacity(BATCH);
        let mut values = values.into_iter().peekable();
        while let Some((value, position)) = values.next() {
            batch.push(Item {
                source: Source::Value(value),
                position,
            });
            if batch.len() == BATCH || values.peek().is_none() {
                self.add_batch(std::mem::take(&mut batch))
                    .map_err(|error| match error {
                        BatchError::Object(error) => DecodeError::Object {
                            source_name: source_name.to_string(),
                            error,
                        },
                        BatchError::Syntax(message) => DecodeError::Syntax {
                            source_name: source_name.to_string(),
                            message,
                        },
                    })?;
            }
        }
        Ok(())
    }

    /// Adds one object (with its `kind` and `apiVersion`); `position` names it in errors
    /// when it has no name.
    pub fn add_object(&mut self, value: Value, position: &str) -> Result<(), ObjectError> {
        self.add_value(value, position)
    }
}
