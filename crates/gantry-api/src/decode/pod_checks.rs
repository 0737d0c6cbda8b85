//! kube-apiserver's checks of a pod spec that Gantry's reading does not make on its own
//! (`pkg/apis/core/validation/validation.go`): names that must be unique or present,
//! host ports used twice, and scheduling gates on a pod that names its node. The API
//! server refuses such a pod; Gantry refuses it with the same field and words.

use k8s_openapi::api::core::v1 as k8s;

use super::validation;
use super::{ObjectError, field_error};
use crate::{Gate, Release};

pub(super) fn check_pod_spec(
    spec: &k8s::PodSpec,
    object: &str,
    release: Release,
) -> Result<(), ObjectError> {
    container_names(spec, object)?;
    container_restart_policies(spec, object, release)?;
    if let Some(policy) = spec.restart_policy.as_deref()
        && !["Always", "OnFailure", "Never"].contains(&policy)
    {
        return Err(field_error(
            object,
            "spec.restartPolicy",
            validation::not_supported(policy, &["Always", "OnFailure", "Never"]),
        ));
    }
    for (i, volume) in spec.volumes.iter().flatten().enumerate() {
        let earlier = &spec.volumes.as_deref().unwrap_or_default()[..i];
        if earlier.iter().any(|v| v.name == volume.name) {
            return Err(field_error(
                object,
                format!("spec.volumes[{i}].name"),
                validation::duplicate(&volume.name),
            ));
        }
    }
    let gates = spec.scheduling_gates.as_deref().unwrap_or_default();
    for (i, gate) in gates.iter().enumerate() {
        if gates[..i].iter().any(|g| g.name == gate.name) {
            return Err(field_error(
                object,
                format!("spec.schedulingGates[{i}]"),
                validation::duplicate(&gate.name),
            ));
        }
    }
    if !gates.is_empty() && spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
        return Err(field_error(
            object,
            "spec.nodeName",
            "Forbidden: cannot be set until all schedulingGates have been cleared",
        ));
    }
    spread_constraints_not_repeated(spec, object)?;
    host_ports(spec, object)
}

/// `ValidateSpreadConstraintNotRepeat`: one constraint per topology key and
/// `whenUnsatisfiable`, reported at the first of the two.
fn spread_constraints_not_repeated(spec: &k8s::PodSpec, object: &str) -> Result<(), ObjectError> {
    let constraints = spec
        .topology_spread_constraints
        .as_deref()
        .unwrap_or_default();
    for (i, c) in constraints.iter().enumerate() {
        let repeated = constraints[i + 1..].iter().any(|later| {
            later.topology_key == c.topology_key && later.when_unsatisfiable == c.when_unsatisfiable
        });
        if repeated {
            return Err(field_error(
                object,
                format!("spec.topologySpreadConstraints[{i}].{{topologyKey, whenUnsatisfiable}}"),
                validation::duplicate(&format!("{{{}, {}}}", c.topology_key, c.when_unsatisfiable)),
            ));
        }
    }
    Ok(())
}

/// A container's own `restartPolicy`, as the release's API server validates what its
/// `dropDisabledFields` left: an init container's is `Always` (a sidecar) unless
/// ContainerRestartRules allows the pod's three policies; a regular container's is
/// forbidden unless that gate is on (v1.35 on).
fn container_restart_policies(
    spec: &k8s::PodSpec,
    object: &str,
    release: Release,
) -> Result<(), ObjectError> {
    const SUPPORTED: &[&str] = &["Always", "Never", "OnFailure"];
    let rules = release.enabled(Gate::ContainerRestartRules);
    for (i, c) in spec.containers.iter().enumerate() {
        let Some(policy) = c.restart_policy.as_deref() else {
            continue;
        };
        let field = format!("spec.containers[{i}].restartPolicy");
        if !rules {
            let reason = validation::forbidden("may not be set for non-init containers");
            return Err(field_error(object, field, reason));
        }
        if !SUPPORTED.contains(&policy) {
            let reason = validation::not_supported(policy, SUPPORTED);
            return Err(field_error(object, field, reason));
        }
    }
    let init = spec.init_containers.as_deref().unwrap_or_default();
    for (i, c) in init.iter().enumerate() {
        let supported = if rules { SUPPORTED } else { &["Always"] };
        if let Some(policy) = c.restart_policy.as_deref()
            && !supported.contains(&policy)
        {
            return Err(field_error(
                object,
                format!("spec.initContainers[{i}].restartPolicy"),
                validation::not_supported(policy, supported),
            ));
        }
    }
    Ok(())
}

/// `validateInitContainers` and `validateContainers`: every name present, and one name
/// once across init and regular containers.
fn container_names(spec: &k8s::PodSpec, object: &str) -> Result<(), ObjectError> {
    let init = spec.init_containers.as_deref().unwrap_or_default();
    let lists = [
        ("spec.initContainers", init),
        ("spec.containers", &spec.containers[..]),
    ];
    let mut seen: Vec<&str> = Vec::new();
    for (field, containers) in lists {
        for (i, container) in containers.iter().enumerate() {
            let at = format!("{field}[{i}].name");
            if container.name.is_empty() {
                return Err(field_error(object, at, validation::required("")));
            }
            if seen.contains(&container.name.as_str()) {
                return Err(field_error(
                    object,
                    at,
                    validation::duplicate(&container.name),
                ));
            }
            seen.push(&container.name);
        }
    }
    Ok(())
}

/// `checkHostPortConflicts` over the regular containers: one `protocol/hostIP/hostPort`
/// once.
fn host_ports(spec: &k8s::PodSpec, object: &str) -> Result<(), ObjectError> {
    let mut seen: Vec<String> = Vec::new();
    for (c, container) in spec.containers.iter().enumerate() {
        for (p, port) in container.ports.iter().flatten().enumerate() {
            let Some(host_port) = port.host_port.filter(|&h| h != 0) else {
                continue;
            };
            let key = format!(
                "{}/{}/{host_port}",
                port.protocol.as_deref().unwrap_or("TCP"),
                port.host_ip.as_deref().unwrap_or_default()
            );
            if seen.contains(&key) {
                return Err(field_error(
                    object,
                    format!("spec.containers[{c}].ports[{p}].hostPort"),
                    validation::duplicate(&key),
                ));
            }
            seen.push(key);
        }
    }
    Ok(())
}
