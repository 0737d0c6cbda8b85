//! A pod's resources beyond its containers' spec: pod-level requests and limits
//! (`spec.resources`, gate PodLevelResources) with the API server's defaulting and
//! validation, and the requests a bound pod holds while it is resized in place (gate
//! InPlacePodVerticalScaling), by the rule of the release.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::object::resources;
use super::validation;
use super::{ObjectError, field_error};
use crate::pod::{Container, ContainerRequests, PodLevelRequests, PodTemplate};
use crate::release::{Gate, Release};
use crate::resources::{CPU, MEMORY};
use crate::{Quantity, QuantityFormat, ResourceName};

type ResourceMap = BTreeMap<String, K8sQuantity>;

/// Upstream's `IsSupportedPodLevelResource`.
fn supported(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// Thousandths of a unit (as `Quantity.Cmp` compares), for quantities already parsed.
fn milli(q: &K8sQuantity) -> i64 {
    Quantity::parse(&q.0)
        .and_then(|q| q.milli_value())
        .unwrap_or(0)
}

/// `Quantity.String()` of a quantity as written.
fn canonical(q: &K8sQuantity) -> String {
    QuantityFormat::of(&q.0).canonical(milli(q))
}

/// An amount of `resource` from a [`Resources`] in thousandths.
fn amount_milli(resource: ResourceName, amount: i64) -> i64 {
    if resource == ResourceName::Cpu {
        amount
    } else {
        amount.saturating_mul(1000)
    }
}

/// An aggregate amount as a quantity text, in the format of the containers' quantities
/// (apimachinery's sum keeps the first operand's format).
fn aggregate_text(resource: ResourceName, amount: i64, format: QuantityFormat) -> String {
    format.canonical(amount_milli(resource, amount))
}

/// The format the containers write `name` in (the first that names it), for messages.
fn containers_format(spec: &k8s::PodSpec, name: &str, limits: bool) -> QuantityFormat {
    (spec.containers.iter())
        .chain(spec.init_containers.iter().flatten())
        .filter_map(|c| c.resources.as_ref())
        .find_map(|r| {
            let map = if limits { &r.limits } else { &r.requests };
            map.as_ref().and_then(|m| m.get(name))
        })
        .map_or(QuantityFormat::DecimalSI, |q| QuantityFormat::of(&q.0))
}

/// Whether any container names `resource` in its (defaulted) requests.
fn containers_name(pod: &PodTemplate, resource: ResourceName) -> bool {
    let mut all = pod.containers.iter().chain(pod.init_containers.iter());
    match resource {
        ResourceName::Cpu => all.any(|c| !c.cpu_unset),
        ResourceName::Memory => all.any(|c| !c.memory_unset),
        ResourceName::Scalar(s) => all.any(|c| c.names_resource(s)),
        _ => all.any(|c| c.requests.get(resource) != 0),
    }
}

/// `spec.resources` as the API server of `release` stores and validates it (the field is
/// already gone when the gate is off), and the pod-level requests the scheduler reads.
/// `pod` has its containers decoded.
pub(super) fn pod_level(
    spec: &k8s::PodSpec,
    pod: &PodTemplate,
    object: &str,
) -> Result<Option<Box<PodLevelRequests>>, ObjectError> {
    let Some(res) = &spec.resources else {
        return Ok(None);
    };
    let at = "spec.resources";
    if spec.os.as_ref().is_some_and(|os| os.name == "windows") {
        return Err(field_error(
            object,
            at,
            validation::forbidden("may not be set for a windows pod"),
        ));
    }
    if res.claims.is_some() {
        return Err(field_error(
            object,
            format!("{at}.claims"),
            validation::forbidden("claims may not be set for Resources at pod-level"),
        ));
    }
    let mut requests: ResourceMap = res.requests.clone().unwrap_or_default();
    let mut limits: ResourceMap = res.limits.clone().unwrap_or_default();
    // Names first (the defaulting below reads only supported ones): upstream's
    // validatePodResourceName, limits before requests.
    for (part, map) in [("limits", &limits), ("requests", &requests)] {
        for name in map.keys() {
            let field = format!("{at}.{part}.{name}");
            if name.contains('/') {
                validation::check(validation::qualified_name(name), object, &field, name)?;
            }
            if !supported(name) {
                return Err(field_error(
                    object,
                    field,
                    validation::not_supported(name, &["cpu", "hugepages-", "memory"]),
                ));
            }
        }
    }
    resources(Some(&limits), object, &format!("{at}.limits"))?;
    resources(Some(&requests), object, &format!("{at}.requests"))?;
    let aggregate = pod.aggregate_container_requests();

    // Defaulting (pkg/apis/core/v1/defaults.go, SetDefaults_Pod with PodLevelResources on).
    // defaultHugePagePodLimits: containers' hugepages become the pod's limit unless the pod
    // requests or limits them (containers' hugepage limits equal their requests).
    if !(limits.is_empty() && requests.is_empty()) {
        for (name, amount) in aggregate.scalars() {
            let name = name.as_str();
            if is_hugepages(name) && !requests.contains_key(name) && !limits.contains_key(name) {
                limits.insert(name.to_string(), K8sQuantity(amount.to_string()));
            }
        }
    }
    // defaultPodRequests: only when pod-level limits are set; cpu and memory the containers
    // request default to their aggregate, then any supported limit to itself.
    if !limits.is_empty() {
        for (name, resource) in [(CPU, ResourceName::Cpu), (MEMORY, ResourceName::Memory)] {
            if !requests.contains_key(name) && containers_name(pod, resource) {
                let amount = aggregate.get(resource);
                let text = if resource == ResourceName::Cpu {
                    format!("{amount}m")
                } else {
                    amount.to_string()
                };
                requests.insert(name.to_string(), K8sQuantity(text));
            }
        }
        for (name, limit) in &limits {
            if !requests.contains_key(name) {
                requests.insert(name.clone(), limit.clone());
            }
        }
    }

    // validateResourceRequirements: requests within limits (equal for hugepages).
    let mut cpu_or_memory = false;
    let mut hugepages = false;
    for name in limits.keys() {
        cpu_or_memory |= name == CPU || name == MEMORY;
        hugepages |= is_hugepages(name);
    }
    for (name, request) in &requests {
        cpu_or_memory |= name == CPU || name == MEMORY;
        hugepages |= is_hugepages(name);
        match limits.get(name) {
            Some(limit) => {
                let (r, l) = (milli(request), milli(limit));
                let detail = if r != l && is_hugepages(name) {
                    format!("must be equal to {name} limit of {}", canonical(limit))
                } else if r > l {
                    format!(
                        "must be less than or equal to {name} limit of {}",
                        canonical(limit)
                    )
                } else {
                    continue;
                };
                return Err(field_error(
                    object,
                    format!("{at}.requests"),
                    validation::invalid(&canonical(request), &detail),
                ));
            }
            None if is_hugepages(name) => {
                return Err(field_error(
                    object,
                    format!("{at}.limits"),
                    validation::required("Limit must be set for non overcommitable resources"),
                ));
            }
            None => {}
        }
    }
    if hugepages && !cpu_or_memory {
        return Err(field_error(
            object,
            at,
            validation::forbidden("HugePages require cpu or memory"),
        ));
    }

    // validatePodResourceConsistency: the pod-level request at least the containers'
    // aggregate, hugepage limits at least the containers', each container's limit within
    // the pod's.
    for (name, request) in &requests {
        let resource = ResourceName::parse(name);
        let needed = amount_milli(resource, aggregate.get(resource));
        if needed > milli(request) {
            let format = containers_format(spec, name, false);
            return Err(field_error(
                object,
                format!("{at}.requests.{name}"),
                validation::invalid(
                    &canonical(request),
                    &format!(
                        "must be greater than or equal to aggregate container requests of {}",
                        aggregate_text(resource, aggregate.get(resource), format)
                    ),
                ),
            ));
        }
    }
    for (name, limit) in limits.iter().filter(|(n, _)| is_hugepages(n)) {
        let resource = ResourceName::parse(name);
        if amount_milli(resource, aggregate.get(resource)) > milli(limit) {
            let format = containers_format(spec, name, true);
            return Err(field_error(
                object,
                format!("{at}.limits.{name}"),
                validation::invalid(
                    &canonical(limit),
                    &format!(
                        "must be greater than or equal to aggregate container limits of {}",
                        aggregate_text(resource, aggregate.get(resource), format)
                    ),
                ),
            ));
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        let container_limits = c.resources.as_ref().and_then(|r| r.limits.as_ref());
        for (name, container_limit) in container_limits.into_iter().flatten() {
            let Some(pod_limit) = limits.get(name) else {
                continue;
            };
            if milli(container_limit) > milli(pod_limit) {
                return Err(field_error(
                    object,
                    format!("{at}.containers[{i}].{name}.limits"),
                    validation::invalid(
                        &canonical(container_limit),
                        &format!(
                            "must be less than or equal to pod limits of {}",
                            canonical(pod_limit)
                        ),
                    ),
                ));
            }
        }
    }

    if requests.is_empty() {
        return Ok(None);
    }
    let named: Box<[ResourceName]> = requests.keys().map(|n| ResourceName::parse(n)).collect();
    Ok(Some(Box::new(PodLevelRequests {
        requests: resources(Some(&requests), object, &format!("{at}.requests"))?,
        named,
    })))
}

/// Which in-place resize rule a release's scheduler counts a bound pod's usage by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResizeRule {
    /// v1.28-v1.31 (pkg/api/v1/resource/helpers.go `PodRequests`): a regular container
    /// with a status holds `max(spec, allocatedResources)`, or `allocatedResources` alone
    /// when `status.resize` is `Infeasible`.
    Allocated,
    /// v1.32 (kubernetes#128377): the same with `status.containerStatuses[].resources`
    /// (`resources.requests`), for containers whose status reports resources.
    Actuated,
    /// v1.33 on (kubernetes#130880, component-helpers `determineEffectiveRequests`):
    /// `max(spec, resources, allocatedResources)`, or `max(resources,
    /// allocatedResources)` when the `PodResizePending` condition says `Infeasible`;
    /// sidecars too, through `initContainerStatuses`.
    Effective,
}

impl ResizeRule {
    fn of(release: Release) -> Option<ResizeRule> {
        if !release.enabled(Gate::InPlacePodVerticalScaling) {
            None
        } else if release.at_least(33) {
            Some(ResizeRule::Effective)
        } else if release.at_least(32) {
            Some(ResizeRule::Actuated)
        } else {
            Some(ResizeRule::Allocated)
        }
    }
}

/// A status map as container requests (which of cpu and memory it names).
fn status_requests(
    map: Option<&ResourceMap>,
    object: &str,
    field: &str,
) -> Result<ContainerRequests, ObjectError> {
    Ok(ContainerRequests {
        requests: resources(map, object, &field)?,
        cpu_unset: !map.is_some_and(|m| m.contains_key(CPU)),
        memory_unset: !map.is_some_and(|m| m.contains_key(MEMORY)),
    })
}

/// Upstream's `max(a, b)` of two resource lists: every resource either names, the larger.
fn max_into(into: &mut ContainerRequests, other: &ContainerRequests) {
    into.requests.max_with(&other.requests);
    into.cpu_unset &= other.cpu_unset;
    into.memory_unset &= other.memory_unset;
}

/// Sets `resized` on the containers whose status makes what they hold differ from their
/// spec, by the rule of `release`.
pub(super) fn resized(
    pod: &k8s::Pod,
    containers: &mut [Container],
    init_containers: &mut [Container],
    object: &str,
    release: Release,
) -> Result<(), ObjectError> {
    let Some(rule) = ResizeRule::of(release) else {
        return Ok(());
    };
    let Some(status) = &pod.status else {
        return Ok(());
    };
    let infeasible = match rule {
        // IsPodResizeInfeasible: the first PodResizePending condition decides.
        ResizeRule::Effective => status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "PodResizePending")
            .is_some_and(|c| c.reason.as_deref() == Some("Infeasible")),
        ResizeRule::Actuated | ResizeRule::Allocated => {
            status.resize.as_deref() == Some("Infeasible")
        }
    };
    let regular = status.container_statuses.iter().flatten().enumerate();
    let init = status.init_container_statuses.iter().flatten().enumerate();
    let statuses: Vec<(&k8s::ContainerStatus, String)> = regular
        .map(|(i, s)| (s, format!("status.containerStatuses[{i}]")))
        .chain(init.map(|(i, s)| (s, format!("status.initContainerStatuses[{i}]"))))
        .collect();
    if statuses.is_empty() {
        return Ok(());
    }
    // Upstream merges both status lists by name (names are unique in a pod); only v1.33
    // on reads the sidecars' statuses.
    let sidecars =
        (init_containers.iter_mut()).filter(|c| c.restartable && rule == ResizeRule::Effective);
    for c in containers.iter_mut().chain(sidecars) {
        let Some((cs, at)) = statuses.iter().find(|(s, _)| *s.name == *c.name) else {
            continue;
        };
        let spec = ContainerRequests {
            requests: c.requests.clone(),
            cpu_unset: c.cpu_unset,
            memory_unset: c.memory_unset,
        };
        let allocated = || {
            status_requests(
                cs.allocated_resources.as_ref(),
                object,
                &format!("{at}.allocatedResources"),
            )
        };
        let effective = match rule {
            ResizeRule::Allocated => {
                let allocated = allocated()?;
                if infeasible {
                    allocated
                } else {
                    let mut held = spec.clone();
                    max_into(&mut held, &allocated);
                    held
                }
            }
            ResizeRule::Actuated | ResizeRule::Effective => {
                let Some(actual) = &cs.resources else {
                    continue;
                };
                let mut held = status_requests(
                    actual.requests.as_ref(),
                    object,
                    &format!("{at}.resources.requests"),
                )?;
                if rule == ResizeRule::Effective {
                    max_into(&mut held, &allocated()?);
                }
                if !infeasible {
                    max_into(&mut held, &spec);
                }
                held
            }
        };
        c.resized = (effective != spec).then(|| Box::new(effective));
    }
    Ok(())
}
