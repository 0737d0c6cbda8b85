//! Scale-up estimation with the Cluster Autoscaler's binpacking semantics
//! (`estimator/binpacking_estimator.go`, `decreasing_pod_orderer.go`):
//! - pods come in equivalence groups (same controller and same spec), processed in
//!   decreasing order of `cpu request / template cpu + memory request / template memory`;
//! - in a fork, each pod of a group is first tried on the nodes added so far (from a
//!   rotating start, as the scheduler searches); at the first failure the rest of the
//!   group goes to new nodes;
//! - for those, only the node added last is tried; if the pod does not fit it, a new copy
//!   of the template is added (unless the last one is still empty, which means the pod
//!   will not fit any copy, or the node limit is reached), and a pod that does not fit an
//!   empty copy ends the group;
//! - the answer is the number of added nodes that received pods; the fork is reverted.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::dra::{ResourceSlice, SliceNodes};
use gantry_api::{Node, Pod, ResourceName, Sym};
use gantry_cache::NodeInfo;

use gantry_framework::plugins::pod_topology_spread;

use crate::snapshot::{ClusterSnapshot, SchedulingError};

/// Pods with the same controller and the same spec: one pod's fate predicts the others'.
#[derive(Debug, Clone)]
pub struct EquivalenceGroup {
    pub pods: Vec<Arc<Pod>>,
}

/// Groups pods by controller and spec, in order of first appearance. Pods without a
/// controller are never grouped (as upstream).
pub fn equivalence_groups(pods: &[Arc<Pod>]) -> Vec<EquivalenceGroup> {
    let mut groups: Vec<EquivalenceGroup> = Vec::new();
    // The groups of each controller, so a pod is compared with its siblings' groups only.
    let mut by_owner: HashMap<&str, Vec<usize>, RandomState> = HashMap::default();
    for pod in pods {
        let Some(owner) = &pod.controller else {
            groups.push(EquivalenceGroup {
                pods: vec![pod.clone()],
            });
            continue;
        };
        let candidates = by_owner.entry(&owner.uid).or_default();
        match candidates
            .iter()
            .find(|&&g| same_spec(&groups[g].pods[0], pod))
        {
            Some(&g) => groups[g].pods.push(pod.clone()),
            None => {
                candidates.push(groups.len());
                groups.push(EquivalenceGroup {
                    pods: vec![pod.clone()],
                });
            }
        }
    }
    groups
}

/// Pods found to fit nowhere, remembered so that their controller's like pods are not tried
/// again, as the autoscaler's filter-out-schedulable pass does (`SimilarPodsScheduling`,
/// `simulator/scheduling/similar_pods.go`): without it every pending pod of a large
/// controller was tried on every node. Keyed by the controller's UID; at most
/// [`MAX_PODS_PER_OWNER`] different pods a controller (upstream's `maxPodsPerOwnerRef`);
/// DaemonSet pods are never remembered.
///
/// Pods of no controller, which upstream tries one by one, are remembered only until a pod
/// is placed ([`SimilarUnschedulable::placed`]), and only as exactly alike pods (every
/// field scheduling reads, but their names): with the nodes unchanged since, such a pod
/// fits nowhere either, so skipping it changes no answer (it made a pass over 5,000 full
/// nodes cost 2.8 s for 2,000 bare pods).
#[derive(Default)]
pub struct SimilarUnschedulable {
    by_owner: HashMap<Arc<str>, Vec<Arc<Pod>>, RandomState>,
    /// Pods of no controller that fitted nowhere since the last placement.
    ownerless: Vec<Arc<Pod>>,
}

/// Upstream's `maxPodsPerOwnerRef`.
pub const MAX_PODS_PER_OWNER: usize = 10;

impl SimilarUnschedulable {
    /// Whether a pod like `pod` (same controller, labels and spec) was found to fit nowhere.
    pub fn is_similar_unschedulable(&self, pod: &Pod) -> bool {
        match &pod.controller {
            Some(owner) => (self.by_owner.get(&owner.uid))
                .is_some_and(|seen| seen.iter().any(|other| same_spec(other, pod))),
            None => self.ownerless.iter().any(|other| alike(other, pod)),
        }
    }

    /// A pod was placed: the nodes changed, so pods of no controller are tried again.
    pub fn placed(&mut self) {
        self.ownerless.clear();
    }

    /// Remembers that `pod` fits nowhere.
    pub fn set_unschedulable(&mut self, pod: &Arc<Pod>) {
        let Some(owner) = &pod.controller else {
            if self.ownerless.len() < MAX_PODS_PER_OWNER {
                self.ownerless.push(pod.clone());
            }
            return;
        };
        if owner.kind.as_str() == "DaemonSet" {
            return;
        }
        let seen = self.by_owner.entry(owner.uid.clone()).or_default();
        if seen.len() < MAX_PODS_PER_OWNER {
            seen.push(pod.clone());
        }
    }
}

/// The parts of two pods that decide where they can run are equal (pods decoded from one
/// template share them outright).
fn same_spec(a: &Pod, b: &Pod) -> bool {
    if a.shares_template(b) {
        return a.namespace == b.namespace;
    }
    a.namespace == b.namespace
        && a.labels == b.labels
        && a.priority == b.priority
        && a.scheduler_name == b.scheduler_name
        && a.node_selector == b.node_selector
        && a.tolerations == b.tolerations
        && a.affinity == b.affinity
        && a.topology_spread_constraints == b.topology_spread_constraints
        && a.containers == b.containers
        && a.init_containers == b.init_containers
        && a.overhead == b.overhead
        && a.volumes == b.volumes
        && a.resource_claims == b.resource_claims
}

/// Two pods differ in nothing scheduling reads, their names and UIDs aside: [`same_spec`]
/// and the rest (annotations, pod-level resources, needed node features, image volumes,
/// pod group), neither nominated to a node nor with claims already made for it.
fn alike(a: &Pod, b: &Pod) -> bool {
    same_spec(a, b)
        && a.annotations == b.annotations
        && a.pod_level == b.pod_level
        && a.needs_features == b.needs_features
        && a.image_volumes == b.image_volumes
        && a.scheduling_group == b.scheduling_group
        && a.scheduling_gates == b.scheduling_gates
        && a.rules == b.rules
        && [a, b]
            .iter()
            .all(|p| p.nominated_node_name.is_none() && p.claim_statuses.is_none())
}

/// A node template: the Node to copy, and the ResourceSlices each copy publishes.
#[derive(Debug, Clone)]
pub struct NodeTemplate {
    pub node: Node,
    pub slices: Vec<ResourceSlice>,
}

impl NodeTemplate {
    /// A fresh copy named `name`: its `kubernetes.io/hostname` label is the new name, and
    /// its slices are the template's, renamed for the node (pools get the node's name as
    /// a suffix, so devices of different copies stay distinct).
    pub fn instantiate(&self, name: &str) -> NodeInfo {
        let mut node = self.node.clone();
        node.name = Sym::new(name);
        node.uid = Arc::from(name);
        let hostname = Sym::new("kubernetes.io/hostname");
        node.labels = gantry_api::Labels::new(
            node.labels
                .iter()
                .filter(|(k, _)| *k != hostname)
                .chain([(hostname, Sym::new(name))]),
        );
        let mut info = NodeInfo::new(Arc::new(node));
        let slices: Vec<_> = self
            .slices
            .iter()
            .map(|s| {
                let mut slice = s.clone();
                slice.name = Sym::new(&format!("{}-{name}", s.name));
                slice.pool = Sym::new(&format!("{}-{name}", s.pool));
                slice.nodes = SliceNodes::Node(Sym::new(name));
                Arc::new(slice)
            })
            .collect();
        if !slices.is_empty() {
            info.set_resource_slices(slices);
        }
        info
    }

    /// Upstream's pod score for ordering groups: request relative to the template.
    fn pod_score(&self, pod: &Pod) -> f64 {
        let (mut cpu, mut memory) = (0i64, 0i64);
        for c in &pod.containers {
            cpu = cpu.saturating_add(c.requests.get(ResourceName::Cpu));
            memory = memory.saturating_add(c.requests.get(ResourceName::Memory));
        }
        let allocatable = &self.node.allocatable;
        let mut score = 0.0;
        let template_cpu = allocatable.get(ResourceName::Cpu);
        if template_cpu > 0 {
            score += cpu as f64 / template_cpu as f64;
        }
        let template_memory = allocatable.get(ResourceName::Memory);
        if template_memory > 0 {
            score += memory as f64 / template_memory as f64;
        }
        score
    }
}

/// Why a pod got no node.
#[derive(Debug, Clone)]
pub struct Unplaced {
    pub pod: Arc<Pod>,
    pub reason: String,
}

/// One template's answer.
#[derive(Debug, Clone)]
pub struct Estimate {
    pub nodes_needed: usize,
    /// Pods placed on new nodes, with the node.
    pub scheduled: Vec<(Arc<Pod>, Sym)>,
    pub unschedulable: Vec<Unplaced>,
}

/// Pods worth placing only together: a PodGroup's gang (`minCount`) or a Coscheduling
/// group (`minMember`). A template's new nodes take them only if at least `needed` of
/// them fit there, and otherwise none, as the Cluster Autoscaler's all-or-nothing
/// scale-up does for a set of pods (`ScaleUp(..., allOrNothing)`, the
/// ProvisioningRequests' `best-effort-atomic-scale-up` class: "Some pods can't fit to %s,
/// giving up due to all-or-nothing scale-up strategy").
#[derive(Debug, Clone)]
pub struct Gang {
    /// `namespace/name`, for the reason its members are left.
    pub name: String,
    /// Its pending members.
    pub pods: Vec<Arc<Pod>>,
    /// How many of them must be placed: the group's minimum less its members already
    /// bound.
    pub needed: usize,
}

#[derive(Clone)]
struct State {
    new_nodes: HashSet<Sym, RandomState>,
    with_pods: HashSet<Sym, RandomState>,
    last: Option<Sym>,
    next_index: usize,
}

/// Estimates how many copies of `template` the groups need (`max_nodes`: at most that many
/// new nodes). The snapshot is left as it was.
pub fn estimate(
    snapshot: &mut ClusterSnapshot,
    groups: &[EquivalenceGroup],
    template: &NodeTemplate,
    max_nodes: Option<usize>,
) -> Result<Estimate, SchedulingError> {
    estimate_with_gangs(snapshot, groups, &[], template, max_nodes)
}

/// [`estimate`], then each gang in turn on the nodes added so far and new ones, kept only
/// if enough of its members fit (its nodes and placements are given back otherwise).
pub fn estimate_with_gangs(
    snapshot: &mut ClusterSnapshot,
    groups: &[EquivalenceGroup],
    gangs: &[Gang],
    template: &NodeTemplate,
    max_nodes: Option<usize>,
) -> Result<Estimate, SchedulingError> {
    let mut state = State {
        new_nodes: HashSet::default(),
        with_pods: HashSet::default(),
        last: None,
        next_index: 0,
    };
    let mut out = Estimate {
        nodes_needed: 0,
        scheduled: Vec::new(),
        unschedulable: Vec::new(),
    };
    snapshot.fork();
    let result =
        binpack(snapshot, groups, template, max_nodes, &mut state, &mut out).and_then(|()| {
            for gang in gangs {
                binpack_gang(snapshot, gang, template, max_nodes, &mut state, &mut out)?;
            }
            Ok(())
        });
    snapshot.revert().expect("forked above");
    result?;
    out.nodes_needed = state.with_pods.len();
    Ok(out)
}

/// One gang on a fork of the estimate so far: committed when at least `needed` members
/// fit, else reverted with the state as it was, and every member left with the reason.
fn binpack_gang(
    snapshot: &mut ClusterSnapshot,
    gang: &Gang,
    template: &NodeTemplate,
    max_nodes: Option<usize>,
    state: &mut State,
    out: &mut Estimate,
) -> Result<(), SchedulingError> {
    let before = state.clone();
    let (scheduled, unschedulable) = (out.scheduled.len(), out.unschedulable.len());
    snapshot.fork();
    let groups = equivalence_groups(&gang.pods);
    binpack(snapshot, &groups, template, max_nodes, state, out)?;
    let placed = out.scheduled.len() - scheduled;
    if placed >= gang.needed {
        snapshot.commit().expect("forked above");
        return Ok(());
    }
    snapshot.revert().expect("forked above");
    *state = before;
    out.scheduled.truncate(scheduled);
    out.unschedulable.truncate(unschedulable);
    let reason = format!(
        "gang {}: {placed} of the {} members it needs fit on new nodes of this template, and it is placed all or nothing",
        gang.name, gang.needed
    );
    out.unschedulable
        .extend(gang.pods.iter().map(|pod| Unplaced {
            pod: pod.clone(),
            reason: reason.clone(),
        }));
    Ok(())
}

/// The autoscaler's binpacking of `groups`, in its order (see the module's doc), adding
/// to `state` and `out`.
fn binpack(
    snapshot: &mut ClusterSnapshot,
    groups: &[EquivalenceGroup],
    template: &NodeTemplate,
    max_nodes: Option<usize>,
    state: &mut State,
    out: &mut Estimate,
) -> Result<(), SchedulingError> {
    let mut ordered: Vec<(f64, &EquivalenceGroup)> = groups
        .iter()
        .filter(|g| !g.pods.is_empty())
        .map(|g| (template.pod_score(&g.pods[0]), g))
        .collect();
    ordered.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, group) in ordered {
        let mut rest = group.pods.as_slice();
        while let Some((pod, tail)) = rest.split_first() {
            let new_nodes = &state.new_nodes;
            let eligible = |info: &NodeInfo| new_nodes.contains(&info.name());
            let destinations = crate::Destinations {
                accepts: &eligible,
                others_are: "not a new node",
            };
            match snapshot.place_anywhere(pod, &destinations)? {
                Some(node) => {
                    state.with_pods.insert(node);
                    out.scheduled.push((pod.clone(), node));
                    rest = tail;
                }
                None => break,
            }
        }
        let mut stop_reason: Option<String> = None;
        for pod in rest {
            if let Some(reason) = &stop_reason {
                out.unschedulable.push(Unplaced {
                    pod: pod.clone(),
                    reason: reason.clone(),
                });
                continue;
            }
            if let Some(last) = state.last {
                match snapshot.schedule_on_node(pod, last) {
                    Ok(()) => {
                        state.with_pods.insert(last);
                        out.scheduled.push((pod.clone(), last));
                        continue;
                    }
                    Err(SchedulingError::Unschedulable(fit)) => {
                        if spread_by_hostname_refused(pod, &fit)
                            && let Some(node) = place_elsewhere(snapshot, pod, last)?
                        {
                            // As upstream's `trackScheduledPod`, which counts the node
                            // among the new nodes with pods even when it is an existing one.
                            state.with_pods.insert(node);
                            out.scheduled.push((pod.clone(), node));
                            continue;
                        }
                        if !state.with_pods.contains(&last) {
                            // The last node is empty and the pod does not fit it: no copy
                            // helps.
                            stop_reason = Some(fit.to_string());
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            if stop_reason.is_none() && max_nodes.is_some_and(|max| state.new_nodes.len() >= max) {
                stop_reason = Some(format!(
                    "no more nodes: the limit of {} new nodes is reached",
                    state.new_nodes.len()
                ));
            }
            if stop_reason.is_none() {
                let name = format!("{}-e-{}", template.node.name, state.next_index);
                state.next_index += 1;
                let info = template.instantiate(&name);
                let node = info.name();
                snapshot
                    .add_node(info)
                    .map_err(|e| SchedulingError::Internal {
                        pod: pod.key(),
                        message: e.to_string(),
                    })?;
                state.new_nodes.insert(node);
                state.last = Some(node);
                match snapshot.schedule_on_node(pod, node) {
                    Ok(()) => {
                        state.with_pods.insert(node);
                        out.scheduled.push((pod.clone(), node));
                        continue;
                    }
                    Err(SchedulingError::Unschedulable(fit)) => stop_reason = Some(fit.to_string()),
                    Err(e) => return Err(e),
                }
            }
            out.unschedulable.push(Unplaced {
                pod: pod.clone(),
                reason: stop_reason.clone().expect("set above"),
            });
        }
    }
    Ok(())
}

/// Whether the pod spreads over hostnames and the last new node refused it for the spread
/// (the autoscaler's `isPodUsingHostNameTopologyKey` and `hasTopologyConstraintError`):
/// another node, an older new one or an existing one, may still take it.
fn spread_by_hostname_refused(pod: &Pod, fit: &gantry_scheduler::FitError) -> bool {
    let by_hostname = pod
        .topology_spread_constraints
        .iter()
        .any(|c| c.topology_key.as_str() == "kubernetes.io/hostname");
    by_hostname
        && fit.node_statuses.iter().any(|(_, status)| {
            status
                .reasons()
                .any(|r| r == pod_topology_spread::REASON_CONSTRAINTS_NOT_MATCH)
        })
}

/// The autoscaler's fallback (#8181) for a pod the last new node refused for its hostname
/// spread: any node but that one.
fn place_elsewhere(
    snapshot: &mut ClusterSnapshot,
    pod: &Arc<Pod>,
    last: Sym,
) -> Result<Option<Sym>, SchedulingError> {
    let others = |info: &NodeInfo| info.name() != last;
    let destinations = crate::Destinations {
        accepts: &others,
        others_are: "the last new node",
    };
    snapshot.place_anywhere(pod, &destinations)
}

/// The Cluster Autoscaler's least-waste score of an estimate: the unused share of the new
/// nodes' cpu plus that of their memory (lower wastes less).
pub fn waste(estimate: &Estimate, template: &NodeTemplate) -> f64 {
    if estimate.nodes_needed == 0 {
        return 0.0;
    }
    let nodes = estimate.nodes_needed as f64;
    let share = |resource: ResourceName| {
        let available = template.node.allocatable.get(resource) as f64 * nodes;
        if available <= 0.0 {
            return 0.0;
        }
        let requested: i128 = estimate
            .scheduled
            .iter()
            .map(|(p, _)| i128::from(p.requests().get(resource)))
            .sum();
        (available - requested as f64) / available
    };
    share(ResourceName::Cpu) + share(ResourceName::Memory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::OwnerRef;

    fn owned(name: &str, kind: &str, uid: &str, cpu_milli: i64) -> Arc<Pod> {
        let mut pod = Pod::new("default", name).with_requests(cpu_milli, 0);
        pod.controller = Some(Arc::new(OwnerRef {
            api_version: Sym::new("apps/v1"),
            kind: Sym::new(kind),
            name: Arc::from("owner"),
            uid: Arc::from(uid),
        }));
        Arc::new(pod)
    }

    /// As upstream's `SimilarPodsScheduling`: like pods of one controller match, other
    /// specs, other controllers and DaemonSet pods do not, and a controller keeps at most
    /// ten different pods.
    #[test]
    fn like_pods_of_a_controller_are_remembered_within_bounds() {
        let mut similar = SimilarUnschedulable::default();
        let first = owned("a-1", "ReplicaSet", "rs", 100);
        similar.set_unschedulable(&first);
        assert!(similar.is_similar_unschedulable(&owned("a-2", "ReplicaSet", "rs", 100)));
        assert!(!similar.is_similar_unschedulable(&owned("a-3", "ReplicaSet", "rs", 200)));
        assert!(!similar.is_similar_unschedulable(&owned("b-1", "ReplicaSet", "other", 100)));
        let daemon = owned("d-1", "DaemonSet", "ds", 100);
        similar.set_unschedulable(&daemon);
        assert!(!similar.is_similar_unschedulable(&owned("d-2", "DaemonSet", "ds", 100)));
        // Ten different pods of one controller are kept; the eleventh is not.
        for cpu in 1..=MAX_PODS_PER_OWNER as i64 {
            similar.set_unschedulable(&owned("c", "Job", "job", cpu));
        }
        let eleventh = owned("c", "Job", "job", 1_000);
        similar.set_unschedulable(&eleventh);
        assert!(similar.is_similar_unschedulable(&owned("c", "Job", "job", 10)));
        assert!(!similar.is_similar_unschedulable(&eleventh));
    }

    /// Pods of no controller: an exactly alike pod matches until something is placed; one
    /// that differs in what scheduling reads beyond `same_spec` (an annotation) does not,
    /// nor a pod with a controller.
    #[test]
    fn alike_pods_of_no_controller_are_remembered_until_a_placement() {
        let mut similar = SimilarUnschedulable::default();
        let bare = |name: &str| Arc::new(Pod::new("default", name).with_requests(100, 0));
        similar.set_unschedulable(&bare("o-1"));
        assert!(similar.is_similar_unschedulable(&bare("o-2")));
        let mut annotated = Pod::clone(&bare("o-3"));
        annotated.annotations = Arc::from([(Arc::from("hami.io/gpu-type"), Arc::from("A100"))]);
        assert!(!similar.is_similar_unschedulable(&annotated));
        assert!(!similar.is_similar_unschedulable(&owned("o-4", "ReplicaSet", "rs", 100)));
        similar.placed();
        assert!(!similar.is_similar_unschedulable(&bare("o-2")));
    }
}
