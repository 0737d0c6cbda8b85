//! Counterfactuals for a pending pod: per node, the one thing that stands in its way when
//! only one Filter plugin rejects it (a smaller request, a toleration, no node selector,
//! an uncordoned node, no host ports), nodes where preempting lower-priority pods would
//! make room, and how many new nodes of a template would take it.
//!
//! Every suggestion is checked: the changed pod (or the cluster without the victims) is
//! run through PreFilter and Filter on the node in a fork, and only what passes is said.

use std::sync::Arc;

use gantry_api::{
    Container, NodeAffinity, Pod, PreemptionPolicy, ResourceName, Sym, TaintEffect, Toleration,
    TolerationOp,
};
use gantry_cache::NodeInfo;
use gantry_framework::Status;
use gantry_framework::plugins::{
    node_affinity, node_ports, node_resources_fit, node_unschedulable, taint_toleration,
};
use gantry_scheduler::PodFilters;

use crate::estimator::{EquivalenceGroup, NodeTemplate, estimate};
use crate::snapshot::{ClusterSnapshot, SchedulingError};

/// What would let the pod onto one node.
#[derive(Debug, Clone)]
pub struct NodeCounterfactual {
    pub node: Sym,
    /// The Filter plugins that reject the pod there, in profile order.
    pub rejected_by: Vec<&'static str>,
    /// The single change that makes it fit, in words, when one plugin rejects and a
    /// change could be found and was verified.
    pub change: Option<String>,
    /// Lower-priority pods whose eviction makes it fit (the fewest, as upstream's victim
    /// selection reprieves them), when preemption helps.
    pub preempting: Option<Vec<Arc<Pod>>>,
}

#[derive(Debug, Clone)]
pub struct TemplateAnswer {
    pub template: Sym,
    /// New nodes that would take the pod, or why a fresh one would not.
    pub nodes: Result<usize, String>,
}

#[derive(Debug, Clone, Default)]
pub struct Counterfactuals {
    pub nodes: Vec<NodeCounterfactual>,
    pub templates: Vec<TemplateAnswer>,
}

/// The counterfactuals for `pod` on every node that rejects it, and per template.
pub fn counterfactuals(
    snapshot: &mut ClusterSnapshot,
    pod: &Arc<Pod>,
    templates: &[NodeTemplate],
) -> Result<Counterfactuals, SchedulingError> {
    let mut out = Counterfactuals::default();
    for (node, rejected_by) in rejections(snapshot, pod)? {
        let change = match rejected_by.as_slice() {
            [only] => one_change(snapshot, pod, node, only)?,
            _ => None,
        };
        let preempting = victims(snapshot, pod, node)?;
        out.nodes.push(NodeCounterfactual {
            node,
            rejected_by,
            change,
            preempting,
        });
    }
    let group = [EquivalenceGroup {
        pods: vec![pod.clone()],
    }];
    for template in templates {
        let result = estimate(snapshot, &group, template, None)?;
        out.templates.push(TemplateAnswer {
            template: template.node.name,
            nodes: match result.unschedulable.first() {
                None => Ok(result.nodes_needed),
                Some(unplaced) => Err(unplaced.reason.clone()),
            },
        });
    }
    Ok(out)
}

/// Every node that rejects the pod, in the scheduler's order, with all the Filter plugins
/// that reject it there (not just the first). Nothing when PreFilter rejects the pod
/// everywhere: then no single node is to blame.
fn rejections(
    snapshot: &mut ClusterSnapshot,
    pod: &Pod,
) -> Result<Vec<(Sym, Vec<&'static str>)>, SchedulingError> {
    snapshot.fork();
    let result = match snapshot.pre_filter_state(pod) {
        Ok((state, _)) => {
            let cluster = snapshot.cluster();
            let filters = PodFilters::new(snapshot.profile(), &state);
            Ok((0..cluster.num_nodes())
                .map(|p| cluster.node_at(p))
                .map(|info| {
                    let rejecting: Vec<&'static str> = filters
                        .run_all(&state, pod, info)
                        .iter()
                        .filter(|s| s.is_rejected())
                        .map(Status::plugin)
                        .collect();
                    (info.name(), rejecting)
                })
                .filter(|(_, rejecting)| !rejecting.is_empty())
                .collect())
        }
        Err(SchedulingError::Unschedulable(_)) => Ok(Vec::new()),
        Err(e) => Err(e),
    };
    snapshot.revert().expect("forked above");
    result
}

/// Whether the pod fits the node, checked in a fork.
fn fits(snapshot: &mut ClusterSnapshot, pod: &Pod, node: Sym) -> Result<bool, SchedulingError> {
    snapshot.fork();
    let result = snapshot.check_on_node(pod, node);
    snapshot.revert().expect("forked above");
    match result {
        Ok(_) => Ok(true),
        Err(SchedulingError::Unschedulable(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The one change for the plugin that alone rejects the pod, verified.
fn one_change(
    snapshot: &mut ClusterSnapshot,
    pod: &Pod,
    node: Sym,
    plugin: &str,
) -> Result<Option<String>, SchedulingError> {
    let info = snapshot.cluster().node(node).expect("listed").clone();
    let candidate = match plugin {
        node_resources_fit::NAME => smaller_request(pod, &info),
        taint_toleration::NAME => toleration_for_taint(pod, &info),
        node_unschedulable::NAME => {
            let mut changed = pod.clone();
            changed.tolerations.push(Toleration {
                key: Some(Sym::new("node.kubernetes.io/unschedulable")),
                op: TolerationOp::Exists,
                value: Sym::new(""),
                effect: Some(TaintEffect::NoSchedule),
            });
            Some((changed, format!("fits {node} if the node were uncordoned")))
        }
        node_affinity::NAME => {
            let mut changed = pod.clone();
            changed.node_selector = gantry_api::Labels::default();
            changed.affinity.node_affinity = NodeAffinity {
                required: None,
                preferred: pod.affinity.node_affinity.preferred.clone(),
            };
            Some((
                changed,
                format!("fits {node} without its node selector and required node affinity"),
            ))
        }
        node_ports::NAME => {
            let mut changed = pod.clone();
            for c in &mut changed.containers {
                c.host_ports.clear();
            }
            Some((changed, format!("fits {node} without its host ports")))
        }
        _ => None,
    };
    let Some((changed, words)) = candidate else {
        return Ok(None);
    };
    Ok(fits(snapshot, &changed, node)?.then_some(words))
}

/// The pod with every request the node lacks cut to what the node has free.
fn smaller_request(pod: &Pod, info: &NodeInfo) -> Option<(Pod, String)> {
    let free = |r: ResourceName| info.allocatable().get(r) - info.requested().get(r);
    let mut wanted = pod.requests().clone();
    let mut words = Vec::new();
    for (resource, unit) in [
        (ResourceName::Cpu, "m"),
        (ResourceName::Memory, ""),
        (ResourceName::EphemeralStorage, ""),
    ] {
        let available = free(resource);
        if wanted.get(resource) > available {
            if available <= 0 {
                return None;
            }
            wanted.set(resource, available);
            words.push(format!(
                "{} request were ≤ {available}{unit}",
                resource.as_str()
            ));
        }
    }
    if words.is_empty() {
        return None;
    }
    let mut changed = pod.clone();
    let mut container = Container::new("what-if", None, None);
    container.requests = wanted;
    changed.containers = vec![container];
    changed.init_containers.clear();
    changed.overhead = None;
    changed.pod_level = None;
    changed.update_requests();
    Some((
        changed,
        format!("fits {} if its {}", info.name(), words.join(" and its ")),
    ))
}

/// The pod tolerating the node's first untolerated NoSchedule or NoExecute taint.
fn toleration_for_taint(pod: &Pod, info: &NodeInfo) -> Option<(Pod, String)> {
    let node = info.node()?;
    let taint = node.taints.iter().find(|t| {
        matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute)
            && !pod.tolerations.iter().any(|tol| tol.tolerates(t))
    })?;
    let mut changed = pod.clone();
    changed.tolerations.push(Toleration {
        key: Some(taint.key),
        op: TolerationOp::Equal,
        value: taint.value,
        effect: Some(taint.effect),
    });
    let value = if taint.value.as_str().is_empty() {
        String::new()
    } else {
        format!("={}", taint.value)
    };
    Some((
        changed,
        format!(
            "fits {} with a toleration for {}{value}:{:?}",
            info.name(),
            taint.key,
            taint.effect
        ),
    ))
}

/// Upstream's victim selection on one node: remove every lower-priority pod; if the pod
/// then fits, give back as many as possible, highest priority first.
fn victims(
    snapshot: &mut ClusterSnapshot,
    pod: &Pod,
    node: Sym,
) -> Result<Option<Vec<Arc<Pod>>>, SchedulingError> {
    if pod.preemption_policy == PreemptionPolicy::Never {
        return Ok(None);
    }
    let info = snapshot.cluster().node(node).expect("listed");
    let mut lower: Vec<Arc<Pod>> = info
        .pods()
        .iter()
        .filter(|p| p.priority < pod.priority)
        .cloned()
        .collect();
    if lower.is_empty() {
        return Ok(None);
    }
    lower.sort_by_key(|p| std::cmp::Reverse(p.priority));
    snapshot.fork();
    let result = select_victims(snapshot, pod, node, &lower);
    snapshot.revert().expect("forked above");
    result
}

fn select_victims(
    snapshot: &mut ClusterSnapshot,
    pod: &Pod,
    node: Sym,
    lower: &[Arc<Pod>],
) -> Result<Option<Vec<Arc<Pod>>>, SchedulingError> {
    let internal = |e: crate::StoreError| SchedulingError::Internal {
        pod: pod.key(),
        message: e.to_string(),
    };
    for victim in lower {
        snapshot.remove_pod(node, victim).map_err(internal)?;
    }
    if !fits(snapshot, pod, node)? {
        return Ok(None);
    }
    let mut chosen = Vec::new();
    for victim in lower {
        snapshot.add_pod(victim.clone(), node).map_err(internal)?;
        if !fits(snapshot, pod, node)? {
            snapshot.remove_pod(node, victim).map_err(internal)?;
            chosen.push(victim.clone());
        }
    }
    Ok(Some(chosen))
}
