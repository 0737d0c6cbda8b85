//! Pods: containers and their requests, ports, tolerations, affinity, volumes, phase.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use smallvec::SmallVec;

use super::admission::PodPriorityFields;
use super::affinity::{convert_affinity, spread_constraint};
use super::object::{annotations, labels, namespace, resources};
use super::validation::{self, NameRule};
use super::{ObjectError, field_error, preemption_policy};
use crate::node_features::{NodeFeature, NodeFeatures};
use crate::pod::*;
use crate::{Gate, OwnerRef, ResourceName, Sym, TaintEffect};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// Converts a pod, validated as the API server validates it, with what it says about its
/// priority (for admission, once the priority classes are all known).
pub(super) fn convert_pod(
    pod: &k8s::Pod,
    object: &str,
    release: crate::Release,
) -> Result<(Pod, PodPriorityFields), ObjectError> {
    let pod = &*super::disabled_fields::drop_disabled_fields(pod, release);
    validation::object_meta(&pod.metadata, object, NameRule::Dns1123Subdomain)?;
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| field_error(object, "spec", validation::required("")))?;
    super::pod_checks::check_pod_spec(spec, object, release)?;
    let mut out = Pod::new(namespace(&pod.metadata).as_str(), name);
    if let Some(uid) = pod.metadata.uid.as_deref() {
        out.uid = Arc::from(uid);
    }
    out.labels = labels(pod.metadata.labels.as_ref());
    out.annotations = annotations(pod.metadata.annotations.as_ref());
    out.terminating = pod.metadata.deletion_timestamp.is_some();
    out.controller = controller(&pod.metadata);
    out.resource_claims = crate::dra_decode::pod_resource_claims(pod, object)?.into();
    out.claim_statuses = crate::dra_decode::pod_claim_statuses(pod);
    let status = pod.status.as_ref();
    out.preempted_by_scheduler = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "DisruptionTarget"))
        .is_some_and(|c| {
            c.status == "True" && c.reason.as_deref() == Some("PreemptionByScheduler")
        });
    out.phase = phase(status.and_then(|s| s.phase.as_deref()), object)?;
    out.generation = pod.metadata.generation.unwrap_or(0);
    out.start_time = status
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0.as_second());
    out.nominated_node_name = status
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
        .map(Sym::new);
    if let Some(class) = spec
        .priority_class_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        validation::check(
            validation::dns1123_subdomain(class),
            object,
            "spec.priorityClassName",
            class,
        )?;
        out.priority_class_name = Some(Sym::new(class));
    }
    let priority_fields = PodPriorityFields::new(
        spec.priority,
        preemption_policy(
            spec.preemption_policy.as_deref(),
            object,
            "spec.preemptionPolicy",
        )?,
    );
    out.priority = spec.priority.unwrap_or(0);
    if let Some(policy) = priority_fields.policy {
        out.preemption_policy = policy;
    }
    if let Some(scheduler) = spec.scheduler_name.as_deref().filter(|s| !s.is_empty()) {
        out.scheduler_name = Sym::new(scheduler);
    }
    if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        validation::check(
            validation::dns1123_subdomain(node),
            object,
            "spec.nodeName",
            node,
        )?;
        out.node_name = Some(Sym::new(node));
    }
    validation::labels(
        spec.node_selector.iter().flatten(),
        object,
        "spec.nodeSelector",
    )?;
    out.node_selector = labels(spec.node_selector.as_ref());
    out.scheduling_gates = spec
        .scheduling_gates
        .iter()
        .flatten()
        .map(|g| Arc::from(g.name.as_str()))
        .collect();
    out.tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| toleration(t, object, &format_args!("spec.tolerations[{i}]")))
        .collect::<Result<_, _>>()?;
    if let Some(affinity) = &spec.affinity {
        out.affinity = convert_affinity(affinity, &out.labels, object)?;
    }
    let merges_spread_keys = release.enabled(Gate::MatchLabelKeysInPodTopologySpread)
        && release.enabled(Gate::MatchLabelKeysInPodTopologySpreadSelectorMerge);
    out.topology_spread_constraints = spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            spread_constraint(
                c,
                &out.labels,
                merges_spread_keys,
                object,
                &format_args!("spec.topologySpreadConstraints[{i}]"),
            )
        })
        .collect::<Result<_, _>>()?;
    if spec.containers.is_empty() {
        return Err(field_error(
            object,
            "spec.containers",
            validation::required(""),
        ));
    }
    out.containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| container(c, object, &format_args!("spec.containers[{i}]")))
        .collect::<Result<_, _>>()?;
    out.init_containers = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| container(c, object, &format_args!("spec.initContainers[{i}]")))
        .collect::<Result<_, _>>()?;
    let template: &mut PodTemplate = &mut out;
    super::pod_resources::resized(
        pod,
        &mut template.containers,
        &mut template.init_containers,
        object,
        release,
    )?;
    out.pod_level = super::pod_resources::pod_level(spec, &out, object)?;
    out.rules = PodRules::of(release);
    if let Some(overhead) = &spec.overhead {
        out.overhead = Some(Box::new(resources(
            Some(overhead),
            object,
            &"spec.overhead",
        )?));
    }
    out.volumes = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| Volume {
            name: Arc::from(v.name.as_str()),
            claim_name: match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(c), _) => Some(Arc::from(c.claim_name.as_str())),
                // Upstream's ephemeral.VolumeClaimName.
                (None, Some(_)) => Some(Arc::from(format!("{name}-{}", v.name))),
                (None, None) => None,
            },
            ephemeral: v.persistent_volume_claim.is_none() && v.ephemeral.is_some(),
            read_only: v
                .persistent_volume_claim
                .as_ref()
                .and_then(|c| c.read_only)
                .unwrap_or(false),
            disk: disk(v),
            local: v.host_path.is_some()
                || (v.empty_dir.as_ref()).is_some_and(|e| e.medium.as_deref() != Some("Memory")),
        })
        // Only claims, disks and local data weigh in scheduling and draining. The others
        // (the service-account token's `kube-api-access-xxxxx`, configMaps, secrets) are
        // left out: their per-pod names would keep replicas from sharing one template.
        .filter(|v| v.claim_name.is_some() || v.disk.is_some() || v.local)
        .collect();
    out.image_volumes = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.image.as_ref()?.reference.as_deref())
        .map(Sym::new)
        .collect();
    out.needs_features = needed_features(spec);
    out.scheduling_group = scheduling_group(spec, object)?;
    let overflowed = out.update_requests();
    if let Some(resource) = overflowed.then(|| out.saturated_resource()).flatten() {
        // The API server takes each quantity that fits alone; kube-scheduler's int64 sum
        // of them would wrap and the pod fit anywhere. Refused rather than rounded down.
        let unit = if resource == ResourceName::Cpu {
            "m"
        } else {
            ""
        };
        return Err(field_error(
            object,
            format!(
                "spec.containers[*].resources.requests.{}",
                resource.as_str()
            ),
            format!(
                "the pod's {} requests (containers, init containers, overhead) add up to more than {}{unit}, the most a scheduler's int64 sum holds",
                resource.as_str(),
                i64::MAX
            ),
        ));
    }
    Ok((out, priority_fields))
}

/// The in-tree disk a volume names, if any (the sources VolumeRestrictions checks).
/// The node features `spec` needs, as upstream's NodeDeclaredFeatures infers them
/// (`restartallcontainers` and `usernamespaceshostnetwork` in
/// `component-helpers/nodedeclaredfeatures/features`, v1.36.3).
fn needed_features(spec: &k8s::PodSpec) -> NodeFeatures {
    let restarts_all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.restart_policy_rules.iter().flatten())
        .any(|rule| rule.action == "RestartAllContainers");
    let host_network_in_user_namespace =
        spec.host_network == Some(true) && spec.host_users == Some(false);
    let mut needs = NodeFeatures::default();
    if restarts_all {
        needs = needs.with(NodeFeature::RestartAllContainersOnContainerExits);
    }
    if host_network_in_user_namespace {
        needs = needs.with(NodeFeature::UserNamespacesHostNetworkSupport);
    }
    needs
}

fn disk(v: &k8s::Volume) -> Option<Disk> {
    let read_only = |r: Option<bool>| r.unwrap_or(false);
    if let Some(d) = &v.gce_persistent_disk {
        return Some(Disk::GcePersistentDisk {
            pd_name: Arc::from(d.pd_name.as_str()),
            read_only: read_only(d.read_only),
        });
    }
    if let Some(d) = &v.aws_elastic_block_store {
        return Some(Disk::AwsElasticBlockStore {
            volume_id: Arc::from(d.volume_id.as_str()),
        });
    }
    if let Some(d) = &v.iscsi {
        return Some(Disk::Iscsi {
            iqn: Arc::from(d.iqn.as_str()),
            read_only: read_only(d.read_only),
        });
    }
    v.rbd.as_ref().map(|d| Disk::Rbd {
        monitors: d.monitors.iter().map(|m| Arc::from(m.as_str())).collect(),
        // The API server defaults the pool to "rbd".
        pool: Arc::from(d.pool.as_deref().filter(|p| !p.is_empty()).unwrap_or("rbd")),
        image: Arc::from(d.image.as_str()),
        read_only: read_only(d.read_only),
    })
}

/// The owner reference marked as controller, if any.
pub(super) fn controller(meta: &meta::ObjectMeta) -> Option<Arc<OwnerRef>> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| {
            Arc::new(OwnerRef {
                api_version: Sym::new(&o.api_version),
                kind: Sym::new(&o.kind),
                name: Arc::from(o.name.as_str()),
                uid: Arc::from(o.uid.as_str()),
            })
        })
}

/// `status.phase` (absent: Pending).
fn phase(value: Option<&str>, object: &str) -> Result<PodPhase, ObjectError> {
    Ok(match value {
        None | Some("Pending") => PodPhase::Pending,
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        Some(other) => {
            return Err(field_error(
                object,
                "status.phase",
                validation::not_supported(
                    other,
                    &["Failed", "Pending", "Running", "Succeeded", "Unknown"],
                ),
            ));
        }
    })
}

/// `field` names the container in errors (`spec.containers[0]`); it is written out only
/// for an error.
fn container(
    c: &k8s::Container,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<Container, ObjectError> {
    let res = c.resources.as_ref();
    let request_map = res.and_then(|r| r.requests.as_ref());
    let limit_map = res.and_then(|r| r.limits.as_ref());
    let mut requests = resources(
        request_map,
        object,
        &format_args!("{field}.resources.requests"),
    )?;
    let limits = resources(limit_map, object, &format_args!("{field}.resources.limits"))?;
    resource_requirements(
        request_map,
        limit_map,
        object,
        &format_args!("{field}.resources"),
    )?;
    let requested = |name: &str| request_map.is_some_and(|m| m.contains_key(name));
    // API defaulting: a resource with a limit and no request requests its limit.
    for name in limit_map.into_iter().flat_map(|m| m.keys()) {
        if !requested(name) {
            let resource = ResourceName::parse(name);
            requests.set(resource, limits.get(resource));
        }
    }
    let mut zero_requests: Vec<Sym> = res
        .into_iter()
        .flat_map(|r| r.requests.iter().chain(r.limits.iter()).flatten())
        .filter_map(|(name, _)| match ResourceName::parse(name) {
            ResourceName::Scalar(s) if requests.scalar(s) == 0 => Some(s),
            _ => None,
        })
        .collect();
    zero_requests.sort_unstable();
    zero_requests.dedup();
    let has_request =
        |name: &str| requested(name) || limit_map.is_some_and(|m| m.contains_key(name));
    Ok(Container {
        name: Arc::from(c.name.as_str()),
        image: Sym::new(c.image.as_deref().unwrap_or("")),
        requests,
        cpu_unset: !has_request(crate::resources::CPU),
        memory_unset: !has_request(crate::resources::MEMORY),
        host_ports: ports(c.ports.as_deref().unwrap_or_default(), object, field)?,
        restartable: c.restart_policy.as_deref() == Some("Always"),
        zero_requests: zero_requests.into_boxed_slice(),
        resized: None,
    })
}

/// Upstream's `validateContainerPorts`, and the host ports the container asks the node for.
fn ports(
    ports: &[k8s::ContainerPort],
    object: &str,
    field: &dyn fmt::Display,
) -> Result<SmallVec<[HostPort; 1]>, ObjectError> {
    let mut host_ports = SmallVec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let at = |part: &str| format!("{field}.ports[{i}].{part}");
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            validation::check(
                validation::port_name(name),
                object,
                &format_args!("{field}.ports[{i}].name"),
                name,
            )?;
            if names.contains(&name) {
                return Err(field_error(object, at("name"), validation::duplicate(name)));
            }
            names.push(name);
        }
        if port.container_port == 0 {
            return Err(field_error(
                object,
                at("containerPort"),
                validation::required(""),
            ));
        }
        for (number, part) in [
            (port.container_port, "containerPort"),
            (port.host_port.unwrap_or(0), "hostPort"),
        ] {
            if number == 0 {
                continue;
            }
            if let Some(message) = validation::port_number(number) {
                return Err(field_error(
                    object,
                    at(part),
                    validation::invalid_number(number, &message),
                ));
            }
        }
        let protocol = match port.protocol.as_deref() {
            None | Some("TCP") => Protocol::Tcp,
            Some("UDP") => Protocol::Udp,
            Some("SCTP") => Protocol::Sctp,
            Some(other) => {
                return Err(field_error(
                    object,
                    at("protocol"),
                    validation::not_supported(other, &["SCTP", "TCP", "UDP"]),
                ));
            }
        };
        if let Some(host_port) = port.host_port.filter(|p| *p > 0) {
            host_ports.push(HostPort {
                ip: Sym::new(
                    port.host_ip
                        .as_deref()
                        .filter(|ip| !ip.is_empty())
                        .unwrap_or("0.0.0.0"),
                ),
                protocol,
                port: host_port,
            });
        }
    }
    Ok(host_ports)
}

/// Resources the kubelet may over-commit (upstream `IsOvercommitAllowed`): the native ones
/// but hugepages. Extended resources and hugepages need requests equal to limits.
fn overcommit_allowed(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    native && !name.starts_with("hugepages-")
}

/// Upstream's `ValidateResourceRequirements` for a container: standard resource names,
/// requests not above limits (equal to them where over-commit is not allowed).
fn resource_requirements(
    requests: Option<&std::collections::BTreeMap<String, K8sQuantity>>,
    limits: Option<&std::collections::BTreeMap<String, K8sQuantity>>,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<(), ObjectError> {
    let names = limits
        .into_iter()
        .flatten()
        .map(|(n, _)| ("limits", n))
        .chain(requests.into_iter().flatten().map(|(n, _)| ("requests", n)));
    for (part, name) in names {
        let at = format_args!("{field}.{part}.{name}");
        if name.contains('/') {
            validation::check(validation::qualified_name(name), object, &at, name)?;
        } else if !matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage")
            && !name.starts_with("hugepages-")
        {
            return Err(field_error(
                object,
                at.to_string(),
                validation::invalid(name, "must be a standard resource for containers"),
            ));
        }
    }
    // Both sides parsed already (`resources`): compare in thousandths.
    let milli = |q: &K8sQuantity| {
        crate::Quantity::parse(&q.0)
            .and_then(|q| q.milli_value())
            .unwrap_or(0)
    };
    for (name, request) in requests.into_iter().flatten() {
        match limits.and_then(|l| l.get(name)) {
            Some(limit) => {
                let (r, l) = (milli(request), milli(limit));
                let detail = if r != l && !overcommit_allowed(name) {
                    format!("must be equal to {name} limit of {}", limit.0)
                } else if r > l {
                    format!("must be less than or equal to {name} limit of {}", limit.0)
                } else {
                    continue;
                };
                return Err(field_error(
                    object,
                    format!("{field}.requests"),
                    validation::invalid(&request.0, &detail),
                ));
            }
            None if !overcommit_allowed(name) => {
                return Err(field_error(
                    object,
                    format!("{field}.limits"),
                    validation::required("Limit must be set for non overcommitable resources"),
                ));
            }
            None => {}
        }
    }
    Ok(())
}

fn toleration(
    t: &k8s::Toleration,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<Toleration, ObjectError> {
    let op = match t.operator.as_deref() {
        None | Some("Equal") => TolerationOp::Equal,
        Some("Exists") => TolerationOp::Exists,
        Some(other) => {
            return Err(field_error(
                object,
                format!("{field}.operator"),
                format!("must be Equal or Exists, not {other:?}"),
            ));
        }
    };
    let key = t.key.as_deref().filter(|k| !k.is_empty()).map(Sym::new);
    if key.is_none() && op != TolerationOp::Exists {
        return Err(field_error(
            object,
            format!("{field}.operator"),
            "must be Exists when key is empty",
        ));
    }
    let effect = match t.effect.as_deref().filter(|e| !e.is_empty()) {
        None => None,
        Some(e) => Some(TaintEffect::parse(e).ok_or_else(|| {
            field_error(
                object,
                format!("{field}.effect"),
                format!("unknown taint effect {e:?}"),
            )
        })?),
    };
    // kube-apiserver's `ValidateTolerations`.
    if t.toleration_seconds.is_some() && effect != Some(TaintEffect::NoExecute) {
        return Err(field_error(
            object,
            format!("{field}.effect"),
            validation::invalid(
                t.effect.as_deref().unwrap_or_default(),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ),
        ));
    }
    let value = t.value.as_deref().unwrap_or_default();
    if op == TolerationOp::Exists && !value.is_empty() {
        return Err(field_error(
            object,
            format!("{field}.operator"),
            validation::invalid(value, "value must be empty when `operator` is 'Exists'"),
        ));
    }
    Ok(Toleration {
        key,
        op,
        value: Sym::new(t.value.as_deref().unwrap_or("")),
        effect,
    })
}

/// `spec.schedulingGroup`, validated as upstream's `validateSchedulingGroup`: one of its
/// members (only `podGroupName` so far), a DNS subdomain.
fn scheduling_group(spec: &k8s::PodSpec, object: &str) -> Result<Option<Sym>, ObjectError> {
    let Some(group) = &spec.scheduling_group else {
        return Ok(None);
    };
    let field = "spec.schedulingGroup.podGroupName";
    let Some(name) = group.pod_group_name.as_deref() else {
        return Err(field_error(
            object,
            field,
            "Invalid value: null: must specify one of: `podGroupName`",
        ));
    };
    if let Some(problem) = validation::dns1123_subdomain(name).first() {
        return Err(field_error(
            object,
            field,
            format!("Invalid value: {name:?}: {problem}"),
        ));
    }
    Ok(Some(Sym::new(name)))
}
