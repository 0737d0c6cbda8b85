//! The pod's constraints as the plugin uses them (defaults applied, key slots), the nodes
//! they include, and the matching pods per domain, from the snapshot or node by node.

use std::sync::Arc;

use gantry_api::{
    InclusionPolicy, LabelSelector, Labels, Node, Pod, Sym, TaintEffect, TopologySpreadConstraint,
    WhenUnsatisfiable,
};
use gantry_cache::{
    ClusterState, DomainCounts, NamespaceScope, NodeInfo, PodSelection, PodsPerDomain,
};

use super::{DefaultConstraints, HOSTNAME_KEY, SYSTEM_DEFAULTS};
use crate::ApiObjects;

/// A constraint as the plugin uses it: defaults applied, and the index of its topology key
/// among the distinct keys of the pod's constraints (`slot`), where its counts live.
#[derive(Debug, Clone)]
pub(super) struct Constraint {
    pub(super) max_skew: i64,
    pub(super) key: Sym,
    pub(super) is_hostname: bool,
    /// The live pods of the incoming pod's namespace that the selector matches; `None`
    /// (an absent selector) matches no pod.
    selection: Option<PodSelection>,
    pub(super) min_domains: i64,
    honor_affinity: bool,
    honor_taints: bool,
    pub(super) slot: usize,
}

impl Constraint {
    pub(super) fn selects(&self, labels: &Labels) -> bool {
        self.selection
            .as_ref()
            .is_some_and(|s| s.selector.matches(labels))
    }

    /// Upstream's `countPodsMatchSelector` over a node's pods (live pods of the incoming
    /// pod's namespace), from the node's label index where it answers.
    pub(super) fn count_on_node(&self, info: &NodeInfo) -> i64 {
        self.selection
            .as_ref()
            .map_or(0, |s| i64::from(s.count_on(info)))
    }
}

/// The snapshot's domain counts for each constraint (in order), when it keeps them all
/// and they are what a visit to every node would count: every node is eligible for every
/// constraint (the pod's node affinity and selector exclude no node where a constraint
/// honours them, no constraint honours taints) and every node has every constraint's key.
/// `None` otherwise; the misses are asked for.
pub(super) fn domain_counts<'a>(
    pod: &Pod,
    constraints: &[Constraint],
    nodes: &'a dyn ClusterState,
) -> Option<Vec<&'a DomainCounts>> {
    let unconstrained_pod =
        pod.node_selector.is_empty() && pod.affinity.node_affinity.required.is_none();
    let every_node_eligible = constraints
        .iter()
        .all(|c| !c.honor_taints && (unconstrained_pod || !c.honor_affinity));
    if !every_node_eligible {
        return None;
    }
    let found: Vec<Option<&DomainCounts>> = constraints
        .iter()
        .map(|c| nodes.domain_counts(c.selection.as_ref()?))
        .collect();
    let found: Vec<&DomainCounts> = found.into_iter().collect::<Option<_>>()?;
    let every_node_has_every_key = found
        .iter()
        .all(|counts| counts.nodes_with_key() as usize == nodes.num_nodes());
    every_node_has_every_key.then_some(found)
}

/// The pod's constraints of kind `when`, or the default ones when the pod declares none,
/// with the number of distinct topology keys among them.
pub(super) fn constraints_for(
    defaults: &DefaultConstraints,
    pod: &Pod,
    when: WhenUnsatisfiable,
    objects: &ApiObjects,
) -> (Arc<[Constraint]>, usize) {
    let mut constraints: Vec<Constraint> = if !pod.topology_spread_constraints.is_empty() {
        pod.topology_spread_constraints
            .iter()
            .filter(|c| c.when_unsatisfiable == when)
            .map(|c| convert(c, c.label_selector.clone(), pod.namespace))
            .collect()
    } else {
        let list: &[TopologySpreadConstraint] = match defaults {
            DefaultConstraints::System => &*SYSTEM_DEFAULTS,
            DefaultConstraints::List(list) => list,
        };
        let mut wanted = list
            .iter()
            .filter(|c| c.when_unsatisfiable == when)
            .peekable();
        if wanted.peek().is_none() {
            return (Arc::default(), 0);
        }
        match objects.default_selector(pod).filter(|s| !s.is_empty()) {
            Some(selector) => wanted
                .map(|c| convert(c, Some(selector.clone()), pod.namespace))
                .collect(),
            None => Vec::new(),
        }
    };
    let mut keys: Vec<Sym> = Vec::new();
    for c in &mut constraints {
        c.slot = match keys.iter().position(|k| *k == c.key) {
            Some(slot) => slot,
            None => {
                keys.push(c.key);
                keys.len() - 1
            }
        };
    }
    if constraints.is_empty() {
        // Most pods: an empty list shared, not allocated.
        return (Arc::default(), 0);
    }
    (constraints.into(), keys.len())
}

fn convert(
    c: &TopologySpreadConstraint,
    selector: Option<LabelSelector>,
    namespace: Sym,
) -> Constraint {
    Constraint {
        max_skew: i64::from(c.max_skew),
        key: c.topology_key,
        is_hostname: c.topology_key.as_str() == HOSTNAME_KEY,
        selection: selector.map(|selector| PodSelection {
            selector,
            namespaces: NamespaceScope::listed([namespace]),
            topology_key: c.topology_key,
            live_only: true,
        }),
        min_domains: i64::from(c.min_domains.unwrap_or(1)),
        honor_affinity: c.node_affinity_policy == InclusionPolicy::Honor,
        honor_taints: c.node_taints_policy == InclusionPolicy::Honor,
        slot: 0,
    }
}

pub(super) fn has_all_keys(labels: &Labels, constraints: &[Constraint]) -> bool {
    constraints.iter().all(|c| labels.contains_key(c.key))
}

/// Upstream's `matchNodeInclusionPolicies`, evaluated once per node for all constraints:
/// whether the node passes the pod's required node affinity and tolerates its taints.
/// Only the checks some constraint honours are computed.
pub(super) struct NodeInclusion {
    affinity: bool,
    taints: bool,
}

impl NodeInclusion {
    pub(super) fn of(pod: &Pod, node: &Node, constraints: &[Constraint]) -> NodeInclusion {
        let affinity = constraints.iter().any(|c| c.honor_affinity)
            && crate::plugins::node_affinity::matches_required(pod, node);
        let taints = constraints.iter().any(|c| c.honor_taints)
            && node
                .taints
                .iter()
                .filter(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute))
                .all(|t| pod.tolerations.iter().any(|tol| tol.tolerates(t)));
        NodeInclusion { affinity, taints }
    }

    pub(super) fn includes(&self, c: &Constraint) -> bool {
        (!c.honor_affinity || self.affinity) && (!c.honor_taints || self.taints)
    }
}

/// Matching pods per domain of each key slot, node by node, over the nodes that have
/// every topology key.
pub(super) fn count_on_each_node(
    pod: &Pod,
    constraints: &[Constraint],
    slots: usize,
    nodes: &dyn ClusterState,
) -> Vec<PodsPerDomain> {
    let mut match_num = vec![PodsPerDomain::default(); slots];
    // Per node and key, the count of the last included constraint with that key: v1.28
    // keeps one count per (key, value) per node, the last constraint overwriting.
    let mut node_counts: Vec<Option<(Sym, i64)>> = vec![None; slots];
    for position in 0..nodes.num_nodes() {
        let info = nodes.node_at(position);
        let Some(node) = info.node() else { continue };
        if !has_all_keys(&node.labels, constraints) {
            continue;
        }
        let inclusion = NodeInclusion::of(pod, node, constraints);
        node_counts.fill(None);
        for c in constraints.iter().filter(|c| inclusion.includes(c)) {
            if let Some(value) = node.labels.get(c.key) {
                node_counts[c.slot] = Some((value, c.count_on_node(info)));
            }
        }
        for (counts, entry) in match_num.iter_mut().zip(&node_counts) {
            if let Some((value, count)) = *entry {
                *counts.entry(value).or_insert(0) += count;
            }
        }
    }
    match_num
}
