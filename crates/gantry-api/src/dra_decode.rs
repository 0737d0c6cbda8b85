//! Decoding of resource.k8s.io/v1 objects (through k8s-openapi's types) into the compact
//! DRA model, and of a pod's `spec.resourceClaims`. Unsupported features are errors that
//! name the field. Claims and templates go through the release's API server: a field whose
//! gate is off there (`firstAvailable`, gate DRAPrioritizedList) is dropped on create, as
//! upstream's `dropDisabledFields` (`pkg/registry/resource/resourceclaim/strategy.go`)
//! does, and then validated as upstream's `pkg/apis/resource/validation` does.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;

use crate::Sym;
use crate::decode::validation;
use crate::decode::{ObjectError, field_error, node_selector, required_name, typed};
use crate::dra::*;
use crate::release::{Gate, Release};

/// The one API version of the DRA kinds Gantry reads.
pub const API_VERSION: &str = "resource.k8s.io/v1";

/// The DRA kinds, which [`add_object`] decodes.
pub const KINDS: [&str; 4] = [
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaim",
    "ResourceClaimTemplate",
];

/// Decodes one DRA object of `kind` into `out`, as `release`'s API server stores it.
pub(crate) fn add_object(
    out: &mut DraObjects,
    kind: &str,
    value: Value,
    object: &str,
    release: Release,
) -> Result<(), ObjectError> {
    let version = value.get("apiVersion").and_then(Value::as_str);
    if version != Some(API_VERSION) {
        return Err(field_error(
            object,
            "apiVersion",
            format!("{version:?} is not supported: use {API_VERSION}"),
        ));
    }
    match kind {
        "DeviceClass" => {
            let class: resource::DeviceClass = typed(value, object)?;
            out.device_classes
                .push(device_class(&class, object, release)?);
        }
        "ResourceSlice" => {
            let slice: resource::ResourceSlice = typed(value, object)?;
            let slice = resource_slice(&slice, object, release, &mut out.device_lists)?;
            let slice = crate::dra_taint_rules::apply(&out.taint_rules, &slice).unwrap_or(slice);
            out.slices.push(Arc::new(slice));
        }
        "ResourceClaim" => {
            let claim: resource::ResourceClaim = typed(value, object)?;
            out.claims.push(resource_claim(&claim, object, release)?);
        }
        "ResourceClaimTemplate" => {
            let template: resource::ResourceClaimTemplate = typed(value, object)?;
            let spec = template
                .spec
                .as_ref()
                .and_then(|s| s.spec.as_ref())
                .map(|s| claim_spec(s, object, "spec.spec", release))
                .transpose()?
                .unwrap_or_default();
            out.templates.push(ResourceClaimTemplate {
                namespace: namespace(&template.metadata),
                name: Sym::new(&required_name(&template.metadata, object)?),
                spec: Arc::new(spec),
            });
        }
        _ => unreachable!("add_object is only called for KINDS"),
    }
    Ok(())
}

/// A DeviceTaintRule (DRADeviceTaintRules on): its taint goes to the devices it picks in
/// the slices read so far, and in those read later.
pub(crate) fn add_taint_rule(
    out: &mut DraObjects,
    value: &Value,
    object: &str,
) -> Result<(), ObjectError> {
    let rule = crate::dra_taint_rules::decode(value, object)?;
    crate::dra_taint_rules::apply_to_all(&rule, &mut out.slices);
    out.taint_rules.push(rule);
    Ok(())
}

fn namespace(meta: &meta::ObjectMeta) -> Sym {
    Sym::new(meta.namespace.as_deref().unwrap_or("default"))
}

fn selectors(
    list: Option<&Vec<resource::DeviceSelector>>,
    object: &str,
    field: &str,
) -> Result<Vec<Arc<str>>, ObjectError> {
    list.into_iter()
        .flatten()
        .enumerate()
        .map(|(i, s)| match &s.cel {
            Some(cel) => match crate::dra::selector_too_long(&cel.expression) {
                // Refused uncompiled, as the API server does.
                Some(message) => Err(field_error(
                    object,
                    format!("{field}[{i}].cel.expression"),
                    message,
                )),
                None => Ok(Arc::from(cel.expression.as_str())),
            },
            None => Err(field_error(
                object,
                format!("{field}[{i}].cel"),
                "required (the only selector type)",
            )),
        })
        .collect()
}

fn device_class(
    class: &resource::DeviceClass,
    object: &str,
    release: Release,
) -> Result<DeviceClass, ObjectError> {
    let spec = class.spec.as_ref();
    // With the gate off the API server drops the field.
    let extended_resource_name = spec
        .and_then(|s| s.extended_resource_name.as_deref())
        .filter(|_| release.enabled(Gate::DRAExtendedResource));
    if let Some(name) = extended_resource_name {
        // Upstream's `IsExtendedResourceName`.
        let native = !name.contains('/') || name.contains("kubernetes.io/");
        if native
            || name.starts_with("requests.")
            || !validation::qualified_name(&format!("requests.{name}")).is_empty()
        {
            return Err(field_error(
                object,
                "spec.extendedResourceName",
                validation::invalid(name, "must be a valid extended resource name"),
            ));
        }
    }
    let extended_resource_name = extended_resource_name.map(Sym::new);
    Ok(DeviceClass {
        name: Sym::new(&required_name(&class.metadata, object)?),
        selectors: selectors(
            spec.and_then(|s| s.selectors.as_ref()),
            object,
            "spec.selectors",
        )?,
        extended_resource_name,
        created: class
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |time| time.0.as_second()),
    })
}

/// Splits `domain/id`; a bare id gets the driver as its domain.
pub(crate) fn qualified(name: &str, driver: &str) -> QualifiedName {
    match name.split_once('/') {
        Some((domain, id)) => QualifiedName {
            domain: Sym::new(domain),
            id: Sym::new(id),
        },
        None => QualifiedName {
            domain: Sym::new(driver),
            id: Sym::new(name),
        },
    }
}

fn device(
    d: &resource::Device,
    driver: &str,
    object: &str,
    field: &str,
    release: Release,
) -> Result<Device, ObjectError> {
    // Binding conditions (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus);
    // with either gate off the API server drops them
    // (`dropDisabledDRADeviceBindingConditionsFields`).
    let (binding, binds_to_node) = if binding_gates(release) {
        crate::dra_binding::device_binding(d, object, field)?
    } else {
        (None, false)
    };
    // The API server's limits, which also bound what a CEL selector can iterate over.
    let count =
        d.attributes.as_ref().map_or(0, |a| a.len()) + d.capacity.as_ref().map_or(0, |c| c.len());
    if count > crate::dra::MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE {
        return Err(field_error(
            object,
            field,
            format!(
                "Invalid value: {count}: the total number of attributes and capacities must not exceed {}",
                crate::dra::MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE
            ),
        ));
    }
    let mut attributes = Vec::new();
    for (name, a) in d.attributes.iter().flatten() {
        for (kind, text) in [("string", &a.string), ("version", &a.version)] {
            if text
                .as_ref()
                .is_some_and(|t| t.len() > crate::dra::DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH)
            {
                return Err(field_error(
                    object,
                    format!("{field}.attributes.{name}.{kind}"),
                    format!(
                        "Too long: may not be more than {} bytes",
                        crate::dra::DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH
                    ),
                ));
            }
        }
        let value = match (&a.int, &a.bool, &a.string, &a.version) {
            (Some(i), None, None, None) => AttributeValue::Int(*i),
            (None, Some(b), None, None) => AttributeValue::Bool(*b),
            (None, None, Some(s), None) => AttributeValue::String(Arc::from(s.as_str())),
            (None, None, None, Some(v)) if !is_semver(v) => {
                return Err(field_error(
                    object,
                    format!("{field}.attributes.{name}.version"),
                    validation::invalid(
                        v,
                        "must be a string compatible with semver.org spec 2.0.0",
                    ),
                ));
            }
            (None, None, None, Some(v)) => AttributeValue::Version(Arc::from(v.as_str())),
            _ => {
                return Err(field_error(
                    object,
                    format!("{field}.attributes.{name}"),
                    "exactly one of int, bool, string and version must be set",
                ));
            }
        };
        attributes.push((qualified(name, driver), value));
    }
    let capacity = crate::dra_capacity::capacities(d, driver, release, object, field)?;
    // With DRADeviceTaints off the API server drops them.
    let taints = if release.enabled(Gate::DRADeviceTaints) {
        crate::dra_taints::taints(d.taints.as_ref(), object, field)?
    } else {
        Vec::new()
    };
    // With DRAPartitionableDevices off the API server drops them.
    let consumes_counters = if release.enabled(Gate::DRAPartitionableDevices) {
        crate::dra_counters::consumptions(d.consumes_counters.as_ref(), object, field)?
    } else {
        Vec::new()
    };
    Ok(Device {
        name: Sym::new(&d.name),
        attributes,
        capacity,
        allow_multiple_allocations: release.enabled(Gate::DRAConsumableCapacity)
            && d.allow_multiple_allocations == Some(true),
        taints,
        consumes_counters,
        binding,
        binds_to_node,
    })
}

/// Whether binding conditions are served: DRADeviceBindingConditions with
/// DRAResourceClaimDeviceStatus, as upstream requires both.
fn binding_gates(release: Release) -> bool {
    release.enabled(Gate::DRADeviceBindingConditions)
        && release.enabled(Gate::DRAResourceClaimDeviceStatus)
}

fn resource_slice(
    slice: &resource::ResourceSlice,
    object: &str,
    release: Release,
    device_lists: &mut crate::dra_device_lists::DeviceLists,
) -> Result<ResourceSlice, ObjectError> {
    let spec = &slice.spec;
    let partitionable = release.enabled(Gate::DRAPartitionableDevices);
    let shared_counters = match partitionable {
        true => crate::dra_counters::counter_sets(spec.shared_counters.as_ref(), object)?,
        false => Vec::new(),
    };
    if !shared_counters.is_empty() && spec.devices.is_some() {
        return Err(field_error(
            object,
            "spec",
            validation::invalid("", "only one of `sharedCounters` or `devices` is allowed"),
        ));
    }
    let nodes = crate::dra_nodes::slice_nodes(spec, object, release)?;
    let per_device = matches!(nodes, SliceNodes::PerDevice(_));
    // The count is checked before the devices (upstream's `validateSet`), counting only
    // the taints and counters the gates keep.
    let raw = spec.devices.as_deref().unwrap_or_default();
    let advanced = raw.iter().any(|d| {
        (release.enabled(Gate::DRADeviceTaints) && d.taints.as_ref().is_some_and(|t| !t.is_empty()))
            || (partitionable && d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty()))
    });
    let max = match advanced {
        true => crate::dra_counters::MAX_DEVICES_WITH_ADVANCED_FEATURES,
        false => crate::dra_counters::MAX_DEVICES,
    };
    if raw.len() > max {
        return Err(field_error(
            object,
            "spec.devices",
            crate::dra_counters::too_many(raw.len(), max),
        ));
    }
    let devices = spec
        .devices
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, d)| {
            let field = format!("spec.devices[{i}]");
            crate::dra_nodes::no_device_nodes(d, per_device, object, &field, release)?;
            device(d, &spec.driver, object, &field, release)
        })
        .collect::<Result<Vec<Device>, _>>()?;
    // Upstream's `validateSet` over the devices, by name.
    let mut names = std::collections::HashSet::with_capacity(devices.len());
    if let Some(i) = devices.iter().position(|d| !names.insert(d.name)) {
        let field = format!("spec.devices[{i}]");
        let duplicate = validation::duplicate(devices[i].name.as_str());
        return Err(field_error(object, &field, duplicate));
    }
    Ok(ResourceSlice {
        name: Sym::new(&required_name(&slice.metadata, object)?),
        driver: Sym::new(&spec.driver),
        pool: Sym::new(&spec.pool.name),
        pool_generation: spec.pool.generation,
        pool_slice_count: spec.pool.resource_slice_count,
        nodes,
        binding_conditions: devices.iter().any(|d| d.binding.is_some()),
        devices: device_lists.share(devices),
        shared_counters,
    })
}

fn claim_spec(
    spec: &resource::ResourceClaimSpec,
    object: &str,
    field: &str,
    release: Release,
) -> Result<ClaimSpec, ObjectError> {
    let Some(devices) = &spec.devices else {
        return Ok(ClaimSpec::default());
    };
    // `config` (opaque driver parameters) does not affect which devices are chosen; the
    // real API carries it into the allocation result, which a simulation does not need.
    let mut out = ClaimSpec::default();
    for (i, r) in devices.requests.iter().flatten().enumerate() {
        let at = format!("{field}.devices.requests[{i}]");
        // With the gate off the API server drops `firstAvailable` on create.
        let first_available = r
            .first_available
            .as_deref()
            .filter(|list| release.enabled(Gate::DRAPrioritizedList) && !list.is_empty());
        let kind = match (&r.exactly, first_available) {
            (None, None) => {
                return Err(field_error(
                    object,
                    at,
                    validation::required(
                        "exactly one of `exactly` or `firstAvailable` is required",
                    ),
                ));
            }
            (Some(_), Some(_)) => {
                return Err(field_error(
                    object,
                    at,
                    validation::invalid(
                        "null",
                        "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
                    ),
                ));
            }
            (Some(exact), None) => {
                RequestKind::Exactly(exact_request(exact, object, &at, release)?)
            }
            (None, Some(list)) => RequestKind::FirstAvailable(subrequests(
                list,
                object,
                &format!("{at}.firstAvailable"),
                release,
            )?),
        };
        // Upstream's `validateSlice` keyed by name: a request name used twice.
        if out
            .requests
            .iter()
            .any(|earlier| &*earlier.name == r.name.as_str())
        {
            return Err(field_error(
                object,
                format!("{at}.name"),
                validation::duplicate(&r.name),
            ));
        }
        out.requests.push(DeviceRequest {
            name: Arc::from(r.name.as_str()),
            kind,
        });
    }
    for (i, c) in devices.constraints.iter().flatten().enumerate() {
        let at = format!("{field}.devices.constraints[{i}]");
        // With DRAConsumableCapacity off the API server drops `distinctAttribute`; with
        // both set, `matchAttribute` is the one validated and the allocator keeps.
        let distinct = (c.distinct_attribute.as_deref())
            .filter(|_| release.enabled(Gate::DRAConsumableCapacity));
        let (attribute, kind, name) = match (c.match_attribute.as_deref(), distinct) {
            (Some(a), _) => (a, ConstraintKind::Match, "matchAttribute"),
            (None, Some(a)) => (a, ConstraintKind::Distinct, "distinctAttribute"),
            (None, None) if release.enabled(Gate::DRAConsumableCapacity) => {
                return Err(field_error(
                    object,
                    at,
                    validation::required(
                        r#"exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set"#,
                    ),
                ));
            }
            (None, None) => {
                return Err(field_error(
                    object,
                    format!("{at}.matchAttribute"),
                    validation::required(""),
                ));
            }
        };
        let Some((domain, id)) = attribute.split_once('/') else {
            return Err(field_error(
                object,
                format!("{at}.{name}"),
                format!("{attribute:?} is not a fully qualified name (domain/name)"),
            ));
        };
        for (j, name) in c.requests.iter().flatten().enumerate() {
            request_ref(&out.requests, name, object, &format!("{at}.requests[{j}]"))?;
        }
        out.constraints.push(DeviceConstraint {
            kind,
            requests: c
                .requests
                .iter()
                .flatten()
                .map(|r| Arc::from(r.as_str()))
                .collect(),
            attribute: QualifiedName {
                domain: Sym::new(domain),
                id: Sym::new(id),
            },
        });
    }
    Ok(out)
}

/// A request's `exactly`.
fn exact_request(
    exact: &resource::ExactDeviceRequest,
    object: &str,
    at: &str,
    release: Release,
) -> Result<ExactRequest, ObjectError> {
    let capacity = crate::dra_capacity::requests(
        exact.capacity.as_ref(),
        object,
        &format!("{at}.exactly.capacity"),
        release,
    )?;
    let mode = match exact.allocation_mode.as_deref().unwrap_or("ExactCount") {
        "ExactCount" => {
            let count = exact.count.unwrap_or(1);
            if !(1..=ALLOCATION_RESULTS_MAX_SIZE as i64).contains(&count) {
                return Err(field_error(
                    object,
                    format!("{at}.exactly.count"),
                    format!("must be 1 to {ALLOCATION_RESULTS_MAX_SIZE}, not {count}"),
                ));
            }
            AllocationMode::ExactCount(count as u32)
        }
        "All" => AllocationMode::All,
        other => {
            return Err(field_error(
                object,
                format!("{at}.exactly.allocationMode"),
                format!("{other:?} is not ExactCount or All"),
            ));
        }
    };
    Ok(ExactRequest {
        device_class: Sym::new(&exact.device_class_name),
        selectors: selectors(
            exact.selectors.as_ref(),
            object,
            &format!("{at}.exactly.selectors"),
        )?,
        mode,
        tolerations: tolerations_of(
            exact.tolerations.as_ref(),
            object,
            &format!("{at}.exactly"),
            release,
        )?,
        // With DRAAdminAccess off the API server drops the field on create
        // (`dropDisabledDRAAdminAccessFields`).
        admin_access: exact.admin_access == Some(true) && release.enabled(Gate::DRAAdminAccess),
        capacity,
    })
}

/// A request's or subrequest's tolerations at `at`, dropped with DRADeviceTaints off as
/// the API server drops them.
fn tolerations_of(
    list: Option<&Vec<resource::DeviceToleration>>,
    object: &str,
    at: &str,
    release: Release,
) -> Result<Vec<DeviceToleration>, ObjectError> {
    if !release.enabled(Gate::DRADeviceTaints) {
        return Ok(Vec::new());
    }
    crate::dra_taints::tolerations(list, object, at)
}

/// A request's `firstAvailable` (at `at`), validated as upstream's
/// `validateDeviceSubRequest` and `validateSet` do: names are RFC 1123 labels and unique,
/// a class is named, `count` is above zero for `ExactCount` and absent for `All`, at most
/// [`FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE`] entries. Unlike `exactly.count`, a count
/// above the allocation result limit is accepted, as the API server accepts it: the
/// allocator then moves on to the next subrequest.
fn subrequests(
    list: &[resource::DeviceSubRequest],
    object: &str,
    at: &str,
    release: Release,
) -> Result<Vec<SubRequest>, ObjectError> {
    let mut out = Vec::with_capacity(list.len());
    for (k, sub) in list.iter().enumerate() {
        let sat = format!("{at}[{k}]");
        validation::check(
            validation::dns1123_label(&sub.name),
            object,
            &format!("{sat}.name"),
            &sub.name,
        )?;
        if sub.device_class_name.is_empty() {
            return Err(field_error(
                object,
                format!("{sat}.deviceClassName"),
                validation::required(""),
            ));
        }
        validation::check(
            validation::dns1123_subdomain(&sub.device_class_name),
            object,
            &format!("{sat}.deviceClassName"),
            &sub.device_class_name,
        )?;
        let selectors = selectors(sub.selectors.as_ref(), object, &format!("{sat}.selectors"))?;
        let mode = match sub.allocation_mode.as_deref().unwrap_or("ExactCount") {
            "ExactCount" => {
                let count = sub.count.unwrap_or(1);
                if count <= 0 {
                    return Err(field_error(
                        object,
                        format!("{sat}.count"),
                        format!("Invalid value: {count}: must be greater than zero"),
                    ));
                }
                // Any count above the limit of 32 results behaves the same.
                AllocationMode::ExactCount(u32::try_from(count).unwrap_or(u32::MAX))
            }
            "All" => {
                if let Some(count) = sub.count.filter(|c| *c != 0) {
                    return Err(field_error(
                        object,
                        format!("{sat}.count"),
                        format!(
                            "Invalid value: {count}: must not be specified when allocationMode is 'All'"
                        ),
                    ));
                }
                AllocationMode::All
            }
            other => {
                return Err(field_error(
                    object,
                    format!("{sat}.allocationMode"),
                    validation::not_supported(other, &["All", "ExactCount"]),
                ));
            }
        };
        let capacity = crate::dra_capacity::requests(
            sub.capacity.as_ref(),
            object,
            &format!("{sat}.capacity"),
            release,
        )?;
        out.push(SubRequest {
            name: Arc::from(sub.name.as_str()),
            device_class: Sym::new(&sub.device_class_name),
            selectors,
            mode,
            tolerations: tolerations_of(sub.tolerations.as_ref(), object, &sat, release)?,
            capacity,
        });
    }
    if list.len() > FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE {
        return Err(field_error(
            object,
            at,
            format!(
                "Too many: {}: must have at most {FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE} items",
                list.len()
            ),
        ));
    }
    for (k, sub) in list.iter().enumerate() {
        if list[..k].iter().any(|earlier| earlier.name == sub.name) {
            return Err(field_error(
                object,
                format!("{at}[{k}]"),
                validation::duplicate(&sub.name),
            ));
        }
    }
    Ok(out)
}

/// Upstream's `validateRequestNameRef`: a constraint names a request of the claim, or a
/// request and one of its subrequests as `<request>/<subrequest>`.
fn request_ref(
    requests: &[DeviceRequest],
    name: &str,
    object: &str,
    at: &str,
) -> Result<(), ObjectError> {
    const MUST: &str = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() > 2 {
        return Err(field_error(object, at, validation::invalid(name, MUST)));
    }
    for segment in &segments {
        validation::check(validation::dns1123_label(segment), object, at, name)?;
    }
    let found = requests
        .iter()
        .find(|r| &*r.name == segments[0])
        .is_some_and(|r| match segments.get(1) {
            None => true,
            Some(sub) => r.first_available().iter().any(|s| &*s.name == *sub),
        });
    if !found {
        return Err(field_error(object, at, validation::invalid(name, MUST)));
    }
    Ok(())
}

fn resource_claim(
    claim: &resource::ResourceClaim,
    object: &str,
    release: Release,
) -> Result<ResourceClaim, ObjectError> {
    let name = required_name(&claim.metadata, object)?;
    let namespace = namespace(&claim.metadata);
    let spec = claim
        .spec
        .as_ref()
        .map(|s| claim_spec(s, object, "spec", release))
        .transpose()?
        .unwrap_or_default();
    let status = claim.status.as_ref();
    let allocation = match status.and_then(|s| s.allocation.as_ref()) {
        None => None,
        Some(a) => Some(Arc::new(allocation(a, object, release)?)),
    };
    // Kept whatever the gates, as the API server keeps fields already in use
    // (`dropDisabledDRAResourceClaimDeviceStatusFields`); read only with them on.
    let binding = binding_gates(release);
    let allocated_at = (status.and_then(|s| s.allocation.as_ref()))
        .and_then(|a| a.allocation_timestamp.as_ref())
        .map(|t| t.0.as_second())
        .filter(|_| binding);
    let device_status = match (status, binding) {
        (Some(status), true) => crate::dra_binding::device_statuses(status),
        _ => Vec::new(),
    };
    let waits = allocation
        .as_ref()
        .is_some_and(|a| a.has_binding_conditions());
    let allocated_at = allocated_at.filter(|_| waits);
    let binding_status = (allocated_at.is_some() || !device_status.is_empty()).then(|| {
        Arc::new(crate::dra_binding::BindingStatus {
            allocated_at,
            device_status,
        })
    });
    let reserved_for = status
        .and_then(|s| s.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .map(|r| ClaimConsumer {
            name: Arc::from(r.name.as_str()),
            uid: Arc::from(r.uid.as_str()),
        })
        .collect();
    Ok(ResourceClaim {
        namespace,
        uid: Arc::from(
            claim
                .metadata
                .uid
                .clone()
                .unwrap_or_else(|| format!("{namespace}/{name}")),
        ),
        name: Arc::from(name),
        spec: Arc::new(spec),
        owner_pod: controller_pod(&claim.metadata),
        deleting: claim.metadata.deletion_timestamp.is_some(),
        allocation,
        reserved_for,
        extended_resource: claim.metadata.annotations.as_ref().is_some_and(|a| {
            a.get(crate::dra_extended::EXTENDED_RESOURCE_CLAIM_ANNOTATION)
                .is_some_and(|v| v == "true")
        }),
        binding_status,
    })
}

fn controller_pod(meta: &meta::ObjectMeta) -> Option<Arc<str>> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == "Pod")
        .map(|o| Arc::from(o.uid.as_str()))
}

fn allocation(
    a: &resource::AllocationResult,
    object: &str,
    release: Release,
) -> Result<Allocation, ObjectError> {
    let binding = binding_gates(release);
    let mut devices = Vec::new();
    for r in a
        .devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
    {
        devices.push(AllocatedDevice {
            request: Arc::from(r.request.as_str()),
            device: DeviceId {
                driver: Sym::new(&r.driver),
                pool: Sym::new(&r.pool),
                device: Sym::new(&r.device),
            },
            // Kept whatever the gate: a result written while it was on still holds
            // nothing (`dropDisabledDRAAdminAccessStatusFields` keeps fields in use).
            admin_access: r.admin_access == Some(true),
            share: crate::dra_capacity::share(r, object, devices.len())?,
            binding: crate::dra_binding::result_binding(
                r,
                object,
                &format!("status.allocation.devices.results[{}]", devices.len()),
            )?
            .filter(|_| binding),
        });
    }
    Ok(Allocation {
        devices,
        node_selector: a
            .node_selector
            .as_ref()
            .map(|s| node_selector(s, object, &"status.allocation.nodeSelector"))
            .transpose()?,
    })
}

/// A pod's `status.resourceClaimStatuses` that name a claim, and the claim its
/// `status.extendedResourceClaimStatus` names (as the entry
/// [`EXTENDED_RESOURCE_CLAIM_STATUS`](crate::dra_extended::EXTENDED_RESOURCE_CLAIM_STATUS)).
pub(crate) fn pod_claim_statuses(pod: &k8s::Pod) -> Option<Arc<[ResourceClaimStatus]>> {
    let status = pod.status.as_ref();
    let mut statuses: Vec<ResourceClaimStatus> = status
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|s| {
            Some(ResourceClaimStatus {
                name: Arc::from(s.name.as_str()),
                claim: Arc::from(s.resource_claim_name.as_deref()?),
            })
        })
        .collect();
    let extended = status.and_then(|s| s.extended_resource_claim_status.as_ref());
    if let Some(extended) = extended.filter(|e| !e.resource_claim_name.is_empty()) {
        statuses.push(ResourceClaimStatus {
            name: Arc::from(crate::dra_extended::EXTENDED_RESOURCE_CLAIM_STATUS),
            claim: Arc::from(extended.resource_claim_name.as_str()),
        });
    }
    (!statuses.is_empty()).then(|| statuses.into())
}

/// The API server's `semverRe` for a device's version attribute: MAJOR.MINOR.PATCH without
/// leading zeros, then optional dot-separated pre-release identifiers (numeric ones without
/// leading zeros) after `-`, and build identifiers after `+`.
fn is_semver(text: &str) -> bool {
    let numeric = |id: &str| {
        !id.is_empty()
            && id.bytes().all(|b| b.is_ascii_digit())
            && (id == "0" || !id.starts_with('0'))
    };
    let identifier =
        |id: &str| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let (rest, build) = match text.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (text, None),
    };
    let (core, pre_release) = match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (rest, None),
    };
    let core_ok = {
        let parts: Vec<&str> = core.split('.').collect();
        parts.len() == 3 && parts.iter().all(|p| numeric(p))
    };
    let pre_ok = pre_release.is_none_or(|pre| {
        pre.split('.')
            .all(|id| identifier(id) && (numeric(id) || !id.bytes().all(|b| b.is_ascii_digit())))
    });
    let build_ok = build.is_none_or(|build| build.split('.').all(identifier));
    core_ok && pre_ok && build_ok
}

/// A pod's `spec.resourceClaims`.
pub(crate) fn pod_resource_claims(
    pod: &k8s::Pod,
    object: &str,
) -> Result<Vec<PodResourceClaim>, ObjectError> {
    let spec = pod.spec.as_ref();
    let mut out: Vec<PodResourceClaim> = Vec::new();
    for (i, c) in spec
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        // validatePodResourceClaim: a name, given once, a DNS label; one source.
        let at = format!("spec.resourceClaims[{i}]");
        let name_at = format!("{at}.name");
        if c.name.is_empty() {
            return Err(field_error(object, name_at, validation::required("")));
        }
        if out.iter().any(|earlier| *earlier.name == *c.name) {
            return Err(field_error(object, name_at, validation::duplicate(&c.name)));
        }
        validation::check(
            validation::dns1123_label(&c.name),
            object,
            &name_at,
            &c.name,
        )?;
        let source = match (&c.resource_claim_name, &c.resource_claim_template_name) {
            (Some(name), None) => ClaimSource::Claim(Arc::from(name.as_str())),
            (None, Some(template)) => ClaimSource::Template(Sym::new(template)),
            (Some(_), Some(_)) => {
                let detail = "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified";
                return Err(field_error(object, at, detail));
            }
            (None, None) => {
                let detail =
                    "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`";
                return Err(field_error(object, at, detail));
            }
        };
        out.push(PodResourceClaim {
            name: Arc::from(c.name.as_str()),
            source,
        });
    }
    if let Some(spec) = spec {
        container_claims(spec, &out, object)?;
    }
    Ok(out)
}

/// `validateResourceClaimNames`: each container's `resources.claims` names one of the
/// pod's claims, and no claim (or claim and request) twice. A container naming a claim the
/// pod does not have was kept and ignored.
fn container_claims(
    spec: &k8s::PodSpec,
    pod_claims: &[PodResourceClaim],
    object: &str,
) -> Result<(), ObjectError> {
    let lists = [
        ("spec.containers", spec.containers.as_slice()),
        (
            "spec.initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
    ];
    for (list, containers) in lists {
        for (i, container) in containers.iter().enumerate() {
            let claims = container
                .resources
                .as_ref()
                .and_then(|r| r.claims.as_deref());
            let mut seen: Vec<String> = Vec::new();
            for (j, claim) in claims.unwrap_or_default().iter().enumerate() {
                let at = format!("{list}[{i}].resources.claims[{j}]");
                let name = claim.name.as_str();
                if name.is_empty() {
                    return Err(field_error(object, at, validation::required("")));
                }
                let request = claim.request.as_deref().unwrap_or_default();
                let key = if request.is_empty() {
                    name.to_string()
                } else {
                    let request_at = format!("{at}.request");
                    validation::check(
                        validation::dns1123_label(request),
                        object,
                        &request_at,
                        request,
                    )?;
                    format!("{name}/{request}")
                };
                // A whole claim overlaps any of its requests named before, and the reverse.
                let overlaps = |earlier: &String| {
                    *earlier == key
                        || *earlier == name
                        || (request.is_empty()
                            && earlier.split_once('/').is_some_and(|(n, _)| n == name))
                };
                if let Some(earlier) = seen.iter().find(|e| overlaps(e)) {
                    let value = if *earlier == name { name } else { key.as_str() };
                    return Err(field_error(object, at, validation::duplicate(value)));
                }
                seen.push(key);
                if !pod_claims.iter().any(|c| *c.name == *name) {
                    let mut names: Vec<&str> = pod_claims.iter().map(|c| &*c.name).collect();
                    names.sort_unstable();
                    let listed = if names.is_empty() {
                        " which is empty".to_string()
                    } else {
                        format!(": {}", names.join(", "))
                    };
                    let message = format!(
                        "Not found: {name:?}: must be one of the names in pod.spec.resourceClaims{listed}"
                    );
                    return Err(field_error(object, at, message));
                }
            }
        }
    }
    Ok(())
}
