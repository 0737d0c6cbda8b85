//! PodGroup of `scheduling.k8s.io/v1alpha2` (v1.36's Workload API). k8s-openapi carries
//! no v1alpha2 types, so the fields the scheduler reads are declared here; the rest of
//! the object is noted as unknown like any other kind's.

use serde::Deserialize;
use serde_json::Value;

use super::validation::{self, NameRule};
use super::{ObjectError, Warning, field_error};
use crate::pod_group::{GroupConstraints, GroupPolicy, GroupPreemption, PodGroup};
use crate::{Gate, Release, Sym};

/// The Workload API version whose PodGroup Gantry reads.
pub(super) const API_VERSION: &str = "scheduling.k8s.io/v1alpha2";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPodGroup {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: RawSpec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSpec {
    scheduling_policy: RawPolicy,
    scheduling_constraints: Option<RawConstraints>,
    disruption_mode: Option<String>,
    priority_class_name: Option<String>,
    priority: Option<i32>,
}

#[derive(Deserialize)]
struct RawConstraints {
    topology: Option<Vec<RawTopology>>,
}

#[derive(Deserialize)]
struct RawTopology {
    key: Option<String>,
}

#[derive(Deserialize)]
struct RawPolicy {
    basic: Option<Value>,
    gang: Option<RawGang>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawGang {
    min_count: i32,
}

/// A PodGroup object: `spec.schedulingPolicy` must be exactly one of `basic` and `gang`,
/// and a gang's `minCount` at least 1.
pub(super) fn convert(
    mut value: Value,
    object: &str,
    release: Release,
    warnings: &mut Vec<Warning>,
) -> Result<PodGroup, ObjectError> {
    let api_version = value.get("apiVersion").and_then(Value::as_str);
    if api_version != Some(API_VERSION) {
        return Err(field_error(
            object,
            "apiVersion",
            format!(
                "{api_version:?}: Gantry reads PodGroup of {API_VERSION} (kube-scheduler v1.36's Workload API) and of {} (scheduler-plugins' Coscheduling) only",
                super::coscheduling_group::API_VERSION
            ),
        ));
    }
    // Read already (the type), or the scheduler's to write (the status).
    if let Some(fields) = value.as_object_mut() {
        for field in ["apiVersion", "kind", "status"] {
            fields.remove(field);
        }
    }
    let raw: RawPodGroup = super::object::typed(value, object, warnings)?;
    validation::object_meta(&raw.metadata, object, NameRule::Dns1123Subdomain)?;
    // Declarative validation of `scheduling.k8s.io/v1alpha2` (apimachinery's
    // `validate.Union` and `validate.Minimum`, v0.36.3): the union's members are listed
    // in backticks, the set ones in braces.
    let policy = match (
        raw.spec.scheduling_policy.basic,
        raw.spec.scheduling_policy.gang,
    ) {
        (Some(_), None) => GroupPolicy::Basic,
        (None, Some(gang)) => match u32::try_from(gang.min_count) {
            Ok(min_count) if min_count > 0 => GroupPolicy::Gang { min_count },
            _ => {
                return Err(field_error(
                    object,
                    "spec.schedulingPolicy.gang.minCount",
                    format!(
                        "Invalid value: {}: must be greater than or equal to 1",
                        gang.min_count
                    ),
                ));
            }
        },
        (None, None) => {
            return Err(field_error(
                object,
                "spec.schedulingPolicy",
                "Invalid value: \"\": must specify one of: `basic`, `gang`",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(field_error(
                object,
                "spec.schedulingPolicy",
                "Invalid value: \"{basic, gang}\": must specify exactly one of: `basic`, `gang`",
            ));
        }
    };
    // The API server drops the constraints while the gate is off (`dropDisabled...`).
    let constraints = match raw.spec.scheduling_constraints {
        Some(raw) if release.enabled(Gate::TopologyAwareWorkloadScheduling) => {
            Some(constraints(raw, object)?)
        }
        _ => None,
    };
    // So are the preemption fields while WorkloadAwarePreemption is off.
    let spec = (
        raw.spec.disruption_mode,
        raw.spec.priority_class_name,
        raw.spec.priority,
    );
    let preemption = release
        .enabled(Gate::WorkloadAwarePreemption)
        .then(|| preemption(spec.0, spec.1, spec.2, object))
        .transpose()?;
    Ok(PodGroup {
        constraints,
        preemption,
        namespace: Sym::new(raw.metadata.namespace.as_deref().unwrap_or("default")),
        name: Sym::new(raw.metadata.name.as_deref().unwrap_or_default()),
        uid: raw.metadata.uid.as_deref().map(std::sync::Arc::from),
        policy,
        // v1.36.2's API server sets none on a PodGroup (its strategy keeps no generation).
        generation: raw.metadata.generation.unwrap_or(0),
    })
}

/// WorkloadAwarePreemption's fields, validated as v1.36's declarative validation does:
/// `disruptionMode` one of its two values (`Pod` by default), the class name a DNS
/// subdomain, the priority at most the highest a user may give. Admission resolves the
/// class into the priority once the PriorityClasses are known.
fn preemption(
    mode: Option<String>,
    class: Option<String>,
    priority: Option<i32>,
    object: &str,
) -> Result<GroupPreemption, ObjectError> {
    let disrupted_whole = match mode.as_deref() {
        None | Some("Pod") => false,
        Some("PodGroup") => true,
        Some(other) => {
            return Err(field_error(
                object,
                "spec.disruptionMode",
                format!("Unsupported value: {other:?}: supported values: \"Pod\", \"PodGroup\""),
            ));
        }
    };
    let class = class.filter(|c| !c.is_empty());
    if let Some(class) = &class {
        let field = "spec.priorityClassName";
        validation::check(validation::dns1123_subdomain(class), object, field, class)?;
    }
    if let Some(p) = priority.filter(|p| *p > HIGHEST_USER_DEFINABLE_PRIORITY) {
        return Err(field_error(
            object,
            "spec.priority",
            format!(
                "Invalid value: {p}: must be less than or equal to {HIGHEST_USER_DEFINABLE_PRIORITY}"
            ),
        ));
    }
    Ok(GroupPreemption {
        priority_class_name: class.map(|c| Sym::new(&c)),
        priority,
        disrupted_whole,
    })
}

/// `HighestUserDefinablePriority`: the most a PodGroup's `spec.priority` may be.
const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;

/// `spec.schedulingConstraints`, validated as v1.36's declarative validation does: at most
/// one topology constraint, its key required and a label key.
fn constraints(raw: RawConstraints, object: &str) -> Result<GroupConstraints, ObjectError> {
    let topology = raw.topology.unwrap_or_default();
    if topology.len() > 1 {
        return Err(field_error(
            object,
            "spec.schedulingConstraints.topology",
            format!("Too many: {}: must have at most 1 item", topology.len()),
        ));
    }
    let Some(first) = topology.into_iter().next() else {
        return Ok(GroupConstraints::default());
    };
    let field = "spec.schedulingConstraints.topology[0].key";
    let key = first.key.unwrap_or_default();
    if key.is_empty() {
        return Err(field_error(object, field, "Required value"));
    }
    validation::check(validation::qualified_name(&key), object, field, &key)?;
    Ok(GroupConstraints {
        topology_key: Some(Sym::new(&key)),
    })
}
