//! PriorityClasses (`scheduling.k8s.io/v1`), validated as upstream's
//! `ValidatePriorityClass` does, and the two built-in classes every cluster has.

use k8s_openapi::api::scheduling::v1::PriorityClass as K8sPriorityClass;

use super::validation::{self, NameRule, forbidden};
use super::{ObjectError, field_error, preemption_policy};
use crate::{PreemptionPolicy, Sym};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityClass {
    pub name: Sym,
    pub value: i32,
    pub global_default: bool,
    pub preemption_policy: PreemptionPolicy,
}

/// The built-in class for cluster-critical pods (upstream `SystemClusterCritical`).
pub const SYSTEM_CLUSTER_CRITICAL: &str = "system-cluster-critical";
/// The built-in class for node-critical pods (upstream `SystemNodeCritical`).
pub const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";
/// Upstream's `HighestUserDefinablePriority`.
const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;
/// Upstream's `SystemCriticalPriority`.
const SYSTEM_CRITICAL_PRIORITY: i32 = 2 * HIGHEST_USER_DEFINABLE_PRIORITY;
const SYSTEM_PREFIX: &str = "system-";

/// The classes the API server creates at start-up (upstream `SystemPriorityClasses`).
pub(super) fn system_priority_classes() -> [PriorityClass; 2] {
    let class = |name, value| PriorityClass {
        name: Sym::new(name),
        value,
        global_default: false,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
    };
    [
        class(SYSTEM_NODE_CRITICAL, SYSTEM_CRITICAL_PRIORITY + 1000),
        class(SYSTEM_CLUSTER_CRITICAL, SYSTEM_CRITICAL_PRIORITY),
    ]
}

/// Upstream's `IsKnownSystemPriorityClass`: why a `system-` class is not one of them.
fn unknown_system_class(name: &str, value: i32, global_default: bool) -> Option<String> {
    let Some(known) = system_priority_classes()
        .into_iter()
        .find(|c| c.name.as_str() == name)
    else {
        return Some(format!("{name} is not a known system priority class"));
    };
    if known.value != value {
        return Some(format!(
            "value of {name} PriorityClass must be {}",
            known.value
        ));
    }
    if known.global_default != global_default {
        return Some(format!(
            "globalDefault of {name} PriorityClass must be {}",
            known.global_default
        ));
    }
    None
}

pub(super) fn convert_priority_class(
    pc: &K8sPriorityClass,
    object: &str,
) -> Result<PriorityClass, ObjectError> {
    validation::object_meta(&pc.metadata, object, NameRule::Dns1123Subdomain)?;
    let name = pc.metadata.name.as_deref().unwrap_or_default();
    let value = pc
        .value
        .ok_or_else(|| field_error(object, "value", validation::required("")))?;
    let global_default = pc.global_default.unwrap_or(false);
    if name.starts_with(SYSTEM_PREFIX) {
        if let Some(why) = unknown_system_class(name, value, global_default) {
            return Err(field_error(
                object,
                "metadata.name",
                forbidden(&format!(
                    "priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {why}"
                )),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        return Err(field_error(
            object,
            "value",
            forbidden(&format!(
                "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
            )),
        ));
    }
    Ok(PriorityClass {
        name: Sym::new(name),
        value,
        global_default,
        // The API defaults an absent policy to PreemptLowerPriority.
        preemption_policy: preemption_policy(
            pc.preemption_policy.as_deref(),
            object,
            "preemptionPolicy",
        )?
        .unwrap_or(PreemptionPolicy::PreemptLowerPriority),
    })
}
