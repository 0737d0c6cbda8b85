//! PodGroup of `scheduling.x-k8s.io/v1alpha1` (scheduler-plugins' Coscheduling), checked
//! as the API server checks it against the CRD's schema (`manifests/coscheduling/crd.yaml`:
//! `minMember` an int32 of at least 1, `scheduleTimeoutSeconds` an int32, `minResources`
//! quantities).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::validation::{self, NameRule};
use super::{ObjectError, Warning, field_error};
use crate::Sym;
use crate::coscheduling::{CoschedulingGroup, GoQuantity};

/// The API version of scheduler-plugins' PodGroup.
pub(super) const API_VERSION: &str = "scheduling.x-k8s.io/v1alpha1";

#[derive(Deserialize)]
struct RawPodGroup {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    #[serde(default)]
    spec: RawSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawSpec {
    min_member: Option<i32>,
    min_resources: Option<BTreeMap<String, Value>>,
    schedule_timeout_seconds: Option<i32>,
}

pub(super) fn convert(
    mut value: Value,
    object: &str,
    warnings: &mut Vec<Warning>,
) -> Result<CoschedulingGroup, ObjectError> {
    // Read already (the type), or the PodGroup controller's to write (the status).
    if let Some(fields) = value.as_object_mut() {
        for field in ["apiVersion", "kind", "status"] {
            fields.remove(field);
        }
    }
    let raw: RawPodGroup = super::object::typed(value, object, warnings)?;
    validation::object_meta(&raw.metadata, object, NameRule::Dns1123Subdomain)?;
    // The CRD's `minimum: 1` (an omitted minMember is 0 and not checked).
    let min_member = match raw.spec.min_member {
        None => 0,
        Some(given) if given >= 1 => given as u32,
        Some(given) => {
            return Err(field_error(
                object,
                "spec.minMember",
                format!(
                    "Invalid value: {given}: spec.minMember in body should be greater than or equal to 1"
                ),
            ));
        }
    };
    let given = raw.spec.min_resources.is_some();
    let mut min_resources = Vec::new();
    for (name, quantity) in raw.spec.min_resources.unwrap_or_default() {
        let field = format!("spec.minResources.{name}");
        let text = match &quantity {
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            other => {
                return Err(field_error(
                    object,
                    field.as_str(),
                    format!(
                        "Invalid value: {other}: {field} in body must be of type integer,string"
                    ),
                ));
            }
        };
        if crate::Quantity::parse(&text).is_err() {
            return Err(field_error(
                object,
                field.as_str(),
                format!(
                    "Invalid value: {text:?}: {field} in body should match '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$'"
                ),
            ));
        }
        let Some(go) = GoQuantity::parse(&text) else {
            return Err(field_error(
                object,
                field,
                format!(
                    "{text:?}: Gantry reads minResources of at most 18 digits, binary ones whole (apimachinery keeps others at arbitrary precision, which it does not model)"
                ),
            ));
        };
        min_resources.push((name, go));
    }
    Ok(CoschedulingGroup {
        namespace: Sym::new(raw.metadata.namespace.as_deref().unwrap_or("default")),
        name: Sym::new(raw.metadata.name.as_deref().unwrap_or_default()),
        min_member,
        min_resources: given.then_some(min_resources),
        schedule_timeout_seconds: raw.spec.schedule_timeout_seconds,
        created: raw
            .metadata
            .creation_timestamp
            .map_or(0, |time| time.0.as_second()),
    })
}
