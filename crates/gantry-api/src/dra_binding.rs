//! Binding conditions (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus: v1.34
//! alpha, v1.36 beta and on): a device may name conditions that its status in a claim must
//! show True before a pod using it is bound (a device the driver must first attach to the
//! node, say), and conditions that, True, fail the binding. kube-scheduler's PreBind waits
//! for them, polling every five seconds for at most `bindingTimeout` (DynamicResourcesArgs,
//! ten minutes by default); a later attempt's Filter counts a claim whose binding failed or
//! timed out as unusable, so that PostFilter frees it. A device may also bind to the node:
//! its allocation is then restricted to the node chosen (`bindsToNode`).
//!
//! Decoded as the API server validates them (`validateDeviceBindingParameters`, v1.36.2)
//! and dropped with either gate off, as it drops them.

use std::sync::Arc;

use k8s_openapi::api::resource::v1 as resource;

use crate::Sym;
use crate::decode::{ObjectError, field_error, validation};
use crate::dra::{Allocation, DeviceId, ResourceClaim};

/// Upstream's `BindingConditionsMaxSize`.
pub const BINDING_CONDITIONS_MAX_SIZE: usize = 4;

/// Upstream's `BindingFailureConditionsMaxSize`.
pub const BINDING_FAILURE_CONDITIONS_MAX_SIZE: usize = 4;

/// Upstream's `DynamicResourcesBindingTimeoutDefault`, in seconds.
pub const DEFAULT_BINDING_TIMEOUT_SECONDS: i64 = 600;

/// How often upstream's PreBind looks at the claims again while it waits (the first look
/// is at once).
pub const BINDING_POLL_INTERVAL_SECONDS: i64 = 5;

/// A device's `bindingConditions` and `bindingFailureConditions`, as the device publishes
/// them and as its allocation result carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingConditions {
    /// All must be True on the device's status in the claim before the pod is bound.
    pub conditions: Vec<Sym>,
    /// Any True fails the binding.
    pub failure_conditions: Vec<Sym>,
}

/// A condition True on an allocated device's status in a claim, with its reason and
/// message (a failed binding's error quotes them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrueCondition {
    pub kind: Sym,
    pub reason: Arc<str>,
    pub message: Arc<str>,
}

/// One entry of a claim's `status.devices` (DRAResourceClaimDeviceStatus): the conditions
/// True of one allocated device. Only conditions True are kept: nothing reads the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceStatus {
    pub device: DeviceId,
    pub true_conditions: Vec<TrueCondition>,
}

impl DeviceStatus {
    fn is_true(&self, kind: Sym) -> Option<&TrueCondition> {
        self.true_conditions.iter().find(|c| c.kind == kind)
    }
}

/// What a claim's status says for binding conditions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BindingStatus {
    /// `status.allocation.allocationTimestamp`, in seconds since the epoch: from when a
    /// binding that waits for conditions times out.
    pub allocated_at: Option<i64>,
    /// `status.devices` (DRAResourceClaimDeviceStatus): what the drivers say of the
    /// allocated devices (the API server takes entries only for allocated devices; the
    /// scheduler clears them with the allocation).
    pub device_status: Vec<DeviceStatus>,
}

/// Upstream's `isClaimReadyForBinding`, for a claim's allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Every binding condition is True (or there are none).
    Ready,
    /// Some binding condition is not True yet.
    Pending,
    /// A binding failure condition is True: the error upstream's PreBind returns.
    Failed(String),
}

impl Allocation {
    /// Whether some device of the allocation has binding conditions (`hasBindingConditions`).
    pub fn has_binding_conditions(&self) -> bool {
        self.devices.iter().any(|d| d.binding.is_some())
    }
}

impl ResourceClaim {
    /// `status.devices`, as far as binding conditions go (empty for other claims).
    pub fn device_status(&self) -> &[DeviceStatus] {
        self.binding_status
            .as_ref()
            .map_or(&[], |s| s.device_status.as_slice())
    }

    /// `status.allocation.allocationTimestamp` of a claim whose allocation has binding
    /// conditions.
    pub fn allocated_at(&self) -> Option<i64> {
        self.binding_status.as_ref().and_then(|s| s.allocated_at)
    }

    /// Upstream's `isClaimReadyForBinding`: a claim without an allocation is pending; a
    /// device with binding conditions and no status is pending; its failure conditions are
    /// looked at before its conditions.
    pub fn binding_readiness(&self) -> Readiness {
        let Some(allocation) = &self.allocation else {
            return Readiness::Pending;
        };
        for result in &allocation.devices {
            let Some(binding) = &result.binding else {
                continue;
            };
            let Some(status) = (self.device_status().iter()).find(|s| s.device == result.device)
            else {
                return Readiness::Pending;
            };
            if let Some(failed) =
                (binding.failure_conditions.iter()).find_map(|&c| status.is_true(c))
            {
                return Readiness::Failed(format!(
                    "device binding failed: claim={}, reason={}, message={:?}",
                    self.name, failed.reason, failed.message
                ));
            }
            if binding
                .conditions
                .iter()
                .any(|&c| status.is_true(c).is_none())
            {
                return Readiness::Pending;
            }
        }
        Readiness::Ready
    }

    /// Upstream's `isClaimTimeout`: the allocation has binding conditions and was made
    /// more than `timeout` seconds before `now` (an allocation without a timestamp never
    /// times out).
    pub fn binding_timed_out(&self, now: i64, timeout: i64) -> bool {
        self.allocation
            .as_ref()
            .is_some_and(|a| a.has_binding_conditions())
            && self
                .allocated_at()
                .is_some_and(|at| at.saturating_add(timeout) < now)
    }
}

/// A device's binding conditions and `bindsToNode` at `field` of `object`, validated as
/// the API server validates them; `None` and false when the device has none.
pub(crate) fn device_binding(
    d: &resource::Device,
    object: &str,
    field: &str,
) -> Result<(Option<Arc<BindingConditions>>, bool), ObjectError> {
    let binding = conditions(
        d.binding_conditions.as_deref(),
        d.binding_failure_conditions.as_deref(),
        object,
        field,
    )?;
    Ok((binding, d.binds_to_node == Some(true)))
}

/// An allocation result's binding conditions (`validateDeviceRequestAllocationResult`
/// validates them as a device's).
pub(crate) fn result_binding(
    r: &resource::DeviceRequestAllocationResult,
    object: &str,
    field: &str,
) -> Result<Option<Arc<BindingConditions>>, ObjectError> {
    conditions(
        r.binding_conditions.as_deref(),
        r.binding_failure_conditions.as_deref(),
        object,
        field,
    )
}

/// Upstream's `validateDeviceBindingParameters`: at most four of each, each a qualified
/// name, no duplicates, no condition in both lists, and both lists or neither.
fn conditions(
    conditions: Option<&[String]>,
    failure_conditions: Option<&[String]>,
    object: &str,
    field: &str,
) -> Result<Option<Arc<BindingConditions>>, ObjectError> {
    // The bad value of a missing list, as the API server prints it (JSON of a nil or an
    // empty slice).
    let shown = |list: Option<&[String]>| if list.is_some() { "[]" } else { "null" };
    let (shown_conditions, shown_failures) = (shown(conditions), shown(failure_conditions));
    let conditions = conditions.unwrap_or_default();
    let failure_conditions = failure_conditions.unwrap_or_default();
    let lists = [
        ("bindingConditions", conditions, BINDING_CONDITIONS_MAX_SIZE),
        (
            "bindingFailureConditions",
            failure_conditions,
            BINDING_FAILURE_CONDITIONS_MAX_SIZE,
        ),
    ];
    for (name, list, max) in lists {
        let at = format!("{field}.{name}");
        if list.len() > max {
            return Err(field_error(
                object,
                at,
                format!("Too many: {}: must have at most {max} items", list.len()),
            ));
        }
        for (i, condition) in list.iter().enumerate() {
            let at = format!("{at}[{i}]");
            validation::check(
                validation::qualified_name(condition),
                object,
                &at,
                condition,
            )?;
            if list[..i].contains(condition) {
                return Err(field_error(object, at, validation::duplicate(condition)));
            }
        }
    }
    if let Some((i, overlap)) =
        (failure_conditions.iter().enumerate()).find(|(_, c)| conditions.contains(c))
    {
        return Err(field_error(
            object,
            format!("{field}.bindingFailureConditions[{i}]"),
            validation::invalid(
                overlap,
                "bindingFailureConditions must not overlap with bindingConditions",
            ),
        ));
    }
    match (conditions.is_empty(), failure_conditions.is_empty()) {
        (true, true) => Ok(None),
        (true, false) => Err(field_error(
            object,
            format!("{field}.bindingConditions"),
            format!(
                "Invalid value: {shown_conditions}: bindingConditions are required to use bindingFailureConditions"
            ),
        )),
        (false, true) => Err(field_error(
            object,
            format!("{field}.bindingFailureConditions"),
            format!(
                "Invalid value: {shown_failures}: bindingFailureConditions are required to use bindingConditions"
            ),
        )),
        (false, false) => Ok(Some(Arc::new(BindingConditions {
            conditions: conditions.iter().map(|c| Sym::new(c)).collect(),
            failure_conditions: failure_conditions.iter().map(|c| Sym::new(c)).collect(),
        }))),
    }
}

/// A claim's `status.devices`: the conditions True of each device.
pub(crate) fn device_statuses(status: &resource::ResourceClaimStatus) -> Vec<DeviceStatus> {
    (status.devices.iter().flatten())
        .map(|d| DeviceStatus {
            device: DeviceId {
                driver: Sym::new(&d.driver),
                pool: Sym::new(&d.pool),
                device: Sym::new(&d.device),
            },
            true_conditions: (d.conditions.iter().flatten())
                .filter(|c| c.status == "True")
                .map(|c| TrueCondition {
                    kind: Sym::new(&c.type_),
                    reason: Arc::from(c.reason.as_str()),
                    message: Arc::from(c.message.as_str()),
                })
                .collect(),
        })
        .collect()
}
