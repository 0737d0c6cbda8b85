//! What the API server of the release Gantry decides as keeps of a pod: fields whose
//! feature gate is off are dropped on create, as upstream's `dropDisabledFields`
//! (`pkg/api/pod/util.go`) does, so that the scheduler never sees them. A pod that uses no
//! such field is not copied.

use std::borrow::Cow;

use k8s_openapi::api::core::v1 as k8s;

use crate::release::{Gate, Release};

/// The pod as the release's API server stores it.
pub(super) fn drop_disabled_fields(pod: &k8s::Pod, release: Release) -> Cow<'_, k8s::Pod> {
    let off = |gate| !release.enabled(gate);
    let Some(spec) = &pod.spec else {
        return Cow::Borrowed(pod);
    };
    let sidecars = off(Gate::SidecarContainers)
        && spec
            .init_containers
            .iter()
            .flatten()
            .any(|c| c.restart_policy.is_some());
    // dropContainerRestartRules (v1.34 on): init containers keep only `Always`, other
    // containers no policy, and no container its rules.
    let restart_rules = release.at_least(34) && off(Gate::ContainerRestartRules) && {
        let init = spec.init_containers.iter().flatten().any(|c| {
            c.restart_policy.as_deref().is_some_and(|p| p != "Always")
                || c.restart_policy_rules.is_some()
        });
        init || (spec.containers.iter())
            .any(|c| c.restart_policy.is_some() || c.restart_policy_rules.is_some())
    };
    let pod_resources = off(Gate::PodLevelResources) && spec.resources.is_some();
    let gates = off(Gate::PodSchedulingReadiness) && spec.scheduling_gates.is_some();
    let claims = off(Gate::DynamicResourceAllocation) && spec.resource_claims.is_some();
    let group = off(Gate::GenericWorkload) && spec.scheduling_group.is_some();
    let affinity_keys =
        off(Gate::MatchLabelKeysInPodAffinity) && affinity_terms(spec).any(has_label_keys);
    let spread_keys = off(Gate::MatchLabelKeysInPodTopologySpread)
        && spread(spec).any(|c| c.match_label_keys.is_some());
    let inclusion = off(Gate::NodeInclusionPolicyInPodTopologySpread)
        && spread(spec).any(|c| c.node_affinity_policy.is_some() || c.node_taints_policy.is_some());
    let resize = off(Gate::InPlacePodVerticalScaling)
        && pod.status.as_ref().is_some_and(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
                .any(|c| c.resources.is_some() || c.allocated_resources.is_some())
        });
    if !(sidecars
        || restart_rules
        || pod_resources
        || gates
        || claims
        || group
        || affinity_keys
        || spread_keys
        || inclusion
        || resize)
    {
        return Cow::Borrowed(pod);
    }
    let mut pod = pod.clone();
    let spec = pod.spec.as_mut().expect("checked above");
    if sidecars {
        for c in spec.init_containers.iter_mut().flatten() {
            c.restart_policy = None;
        }
    }
    if restart_rules {
        for c in spec.init_containers.iter_mut().flatten() {
            if c.restart_policy.as_deref() != Some("Always") {
                c.restart_policy = None;
            }
            c.restart_policy_rules = None;
        }
        for c in &mut spec.containers {
            c.restart_policy = None;
            c.restart_policy_rules = None;
        }
    }
    if pod_resources {
        spec.resources = None;
    }
    if gates {
        spec.scheduling_gates = None;
    }
    if claims {
        spec.resource_claims = None;
    }
    if group {
        spec.scheduling_group = None;
    }
    if affinity_keys && let Some(affinity) = &mut spec.affinity {
        // PodAffinity and PodAntiAffinity are two types of one shape.
        macro_rules! clear_keys {
            ($terms:expr) => {
                if let Some(a) = $terms {
                    let required = a
                        .required_during_scheduling_ignored_during_execution
                        .iter_mut()
                        .flatten();
                    let preferred = a
                        .preferred_during_scheduling_ignored_during_execution
                        .iter_mut()
                        .flatten()
                        .map(|w| &mut w.pod_affinity_term);
                    for term in required.chain(preferred) {
                        term.match_label_keys = None;
                        term.mismatch_label_keys = None;
                    }
                }
            };
        }
        clear_keys!(&mut affinity.pod_affinity);
        clear_keys!(&mut affinity.pod_anti_affinity);
    }
    for c in spec.topology_spread_constraints.iter_mut().flatten() {
        if spread_keys {
            c.match_label_keys = None;
        }
        if inclusion {
            c.node_affinity_policy = None;
            c.node_taints_policy = None;
        }
    }
    if resize && let Some(status) = &mut pod.status {
        for c in (status.container_statuses.iter_mut().flatten())
            .chain(status.init_container_statuses.iter_mut().flatten())
        {
            c.resources = None;
            c.allocated_resources = None;
        }
    }
    Cow::Owned(pod)
}

fn affinity_terms(spec: &k8s::PodSpec) -> impl Iterator<Item = &k8s::PodAffinityTerm> {
    let affinity = spec.affinity.as_ref();
    let (required, preferred) = (
        affinity.and_then(|a| a.pod_affinity.as_ref()).map(|a| {
            (
                &a.required_during_scheduling_ignored_during_execution,
                &a.preferred_during_scheduling_ignored_during_execution,
            )
        }),
        affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .map(|a| {
                (
                    &a.required_during_scheduling_ignored_during_execution,
                    &a.preferred_during_scheduling_ignored_during_execution,
                )
            }),
    );
    [required, preferred]
        .into_iter()
        .flatten()
        .flat_map(|(required, preferred)| {
            let preferred = preferred.iter().flatten().map(|w| &w.pod_affinity_term);
            required.iter().flatten().chain(preferred)
        })
}

fn has_label_keys(term: &k8s::PodAffinityTerm) -> bool {
    term.match_label_keys.is_some() || term.mismatch_label_keys.is_some()
}

fn spread(spec: &k8s::PodSpec) -> impl Iterator<Item = &k8s::TopologySpreadConstraint> {
    spec.topology_spread_constraints.iter().flatten()
}
