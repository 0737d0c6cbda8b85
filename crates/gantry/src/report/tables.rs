//! The report's tables: pods grouped into workloads, pending pods grouped by reason, and
//! nodes grouped into node groups, each with the figures a person compares.
//!
//! Kubernetes objects do not say which workload or node pool they belong to in a way a
//! dump keeps, so the report groups by name, as a person reading `kubectl get pods` does:
//! - a pod's workload is its name without the suffixes controllers add: `-<ordinal>`
//!   (a scenario's pods, StatefulSets), or `-<5 random characters>` and then
//!   `-<pod-template-hash>` (Jobs, DaemonSets, Deployments); a pod a drain re-created
//!   (`-r<n>`) counts with its workload;
//! - a node's group is its cloud node-pool label when it has one (GKE, EKS, Karpenter,
//!   AKS), else its instance type, else its name without a trailing `-<number>` (a
//!   scenario's node groups).

use std::collections::BTreeMap;
use std::time::Duration;

use gantry_api::{Node, Resources};
use gantry_sim::{Placement, PodHistory, PodStatus};

/// The characters Kubernetes draws generated name suffixes from (`rand.String`), and
/// pod-template hashes (`SafeEncodeString`): no vowels, no 0, 1 or 3.
const GENERATED: &str = "bcdfghjklmnpqrstvwxz2456789";

/// Labels that name a node's pool, most specific first.
const NODE_POOL_LABELS: [&str; 5] = [
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool",
    "node.kubernetes.io/instance-type",
];

/// `namespace/name` of a pod → `namespace/workload`.
pub fn workload_of(pod: &str) -> &str {
    let mut name = strip_suffix(pod, |s| {
        s.strip_prefix('r')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    if let Some(base) = strip(name, |s| s.bytes().all(|b| b.is_ascii_digit())) {
        return base;
    }
    if let Some(base) = strip(name, |s| s.len() == 5 && generated(s)) {
        name = base;
        if let Some(base) = strip(name, |s| (6..=10).contains(&s.len()) && generated(s)) {
            name = base;
        }
    }
    name
}

/// A node's group, as the module's documentation says.
pub fn node_group(node: &Node) -> String {
    if let Some(pool) = NODE_POOL_LABELS
        .iter()
        .find_map(|label| node.labels.get_str(label))
    {
        return pool.to_string();
    }
    let name = node.name.as_str();
    strip(name, |s| s.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or(name)
        .to_string()
}

fn generated(s: &str) -> bool {
    s.chars().all(|c| GENERATED.contains(c))
}

/// `text` without its last `-segment`, if the segment is non-empty and passes `test`
/// (and something is left before it).
fn strip(text: &str, test: impl Fn(&str) -> bool) -> Option<&str> {
    let (base, segment) = text.rsplit_once('-')?;
    let name_left = base.rsplit('/').next().is_some_and(|n| !n.is_empty());
    (name_left && !segment.is_empty() && test(segment)).then_some(base)
}

fn strip_suffix(text: &str, test: impl Fn(&str) -> bool) -> &str {
    strip(text, test).unwrap_or(text)
}

/// One row of the per-workload table.
#[derive(Debug, Default, PartialEq)]
pub struct WorkloadRow {
    pub submitted: usize,
    pub scheduled: usize,
    pub pending: usize,
    /// Pods evicted by preemption.
    pub preempted: usize,
    /// From arrival to bound, over the pods bound: median and 99th percentile.
    pub p50_to_bind: Option<Duration>,
    pub p99_to_bind: Option<Duration>,
}

/// Pods per workload, in name order.
pub fn workloads(placements: &[Placement], histories: &[PodHistory]) -> Vec<(String, WorkloadRow)> {
    let mut rows: BTreeMap<String, (WorkloadRow, Vec<Duration>)> = BTreeMap::new();
    for (placement, history) in placements.iter().zip(histories) {
        let key = placement.pod.to_string();
        let (row, to_bind) = rows.entry(workload_of(&key).to_string()).or_default();
        row.submitted += 1;
        if history.status == PodStatus::Bound {
            row.scheduled += 1;
        } else {
            row.pending += 1;
        }
        row.preempted += usize::from(history.preempted);
        if let Some(bound) = history.bound {
            to_bind.push(bound.saturating_sub(history.arrived));
        }
    }
    rows.into_iter()
        .map(|(name, (mut row, mut to_bind))| {
            to_bind.sort_unstable();
            row.p50_to_bind = quantile(&to_bind, 0.5);
            row.p99_to_bind = quantile(&to_bind, 0.99);
            (name.to_string(), row)
        })
        .collect()
}

/// The `q` quantile of sorted values (nearest rank).
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let last = sorted.len().checked_sub(1)?;
    Some(sorted[(last as f64 * q).round() as usize])
}

/// What a pending pod without a reason is listed under (the invariant check forbids it).
pub const NO_REASON: &str = "no reason recorded";

/// Each reason pods are pending with, and how many pods, most frequent first.
pub fn pending_reasons(placements: &[Placement]) -> Vec<(&str, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for p in placements.iter().filter(|p| p.node.is_none()) {
        *counts
            .entry(p.reason.as_deref().unwrap_or(NO_REASON))
            .or_default() += 1;
    }
    let mut reasons: Vec<(&str, usize)> = counts.into_iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    reasons
}

/// One row of the per-node-group table: what the group's nodes have and what their pods
/// ask for, at the end of the run.
#[derive(Debug, Default, PartialEq)]
pub struct NodeGroupRow {
    pub nodes: usize,
    pub pods: usize,
    pub requested: Resources,
    pub allocatable: Resources,
}

/// Nodes per group, in group-name order.
pub fn node_groups<'a>(
    usage: impl IntoIterator<Item = (&'a Node, &'a Resources, usize)>,
) -> Vec<(String, NodeGroupRow)> {
    let mut rows: BTreeMap<String, NodeGroupRow> = BTreeMap::new();
    for (node, requested, pods) in usage {
        let row = rows.entry(node_group(node)).or_default();
        row.nodes += 1;
        row.pods += pods;
        row.requested.add(requested);
        row.allocatable.add(&node.allocatable);
    }
    rows.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_grouped_by_the_names_controllers_give() {
        for (pod, workload) in [
            ("default/web-0", "default/web"),
            ("default/web-1499", "default/web"),
            ("default/web-12-r3456", "default/web"),
            ("default/web-2-0", "default/web-2"),
            (
                "kube-system/coredns-5d78c9869d-x7k2p",
                "kube-system/coredns",
            ),
            ("kube-system/kube-proxy-x7k2p", "kube-system/kube-proxy"),
            ("batch/pi-x7k2p", "batch/pi"),
            // A static pod keeps its whole name: "plane" is not a generated suffix.
            (
                "kube-system/etcd-kind-control-plane",
                "kube-system/etcd-kind-control-plane",
            ),
            ("default/solo", "default/solo"),
            ("default/-0", "default/-0"),
            ("default/123", "default/123"),
        ] {
            assert_eq!(workload_of(pod), workload, "{pod}");
        }
    }

    #[test]
    fn nodes_are_grouped_by_pool_label_then_name() {
        let mut node = Node::new("general-17", Resources::new(1000, 1 << 30));
        assert_eq!(node_group(&node), "general");
        node.name = gantry_api::Sym::new("kind-worker2");
        assert_eq!(node_group(&node), "kind-worker2");
        let labelled = gantry_api::decode::ClusterObjects::decode(
            "kind: Node\nmetadata: {name: gke-a-pool-1-abcd-xyz0, labels: {cloud.google.com/gke-nodepool: pool-1, node.kubernetes.io/instance-type: e2-standard-4}}\n",
            "n.yaml",
        )
        .unwrap();
        assert_eq!(node_group(&labelled.nodes[0]), "pool-1");
    }

    #[test]
    fn workload_rows_count_and_time_the_binds() {
        let placement = |pod: &str, node: Option<&str>| Placement {
            pod: pod.into(),
            node: node.map(Into::into),
            reason: node.is_none().then(|| "no room".to_string()),
            evicted: Vec::new(),
            annotations: Default::default(),
        };
        let history = |arrived: u64, bound: Option<u64>, preempted: bool| PodHistory {
            status: if bound.is_some() {
                PodStatus::Bound
            } else {
                PodStatus::Pending
            },
            arrived: Duration::from_secs(arrived),
            bound: bound.map(Duration::from_secs),
            attempts: 1,
            failures: 0,
            preempted,
        };
        let rows = workloads(
            &[
                placement("default/web-0", Some("n1")),
                placement("default/web-1", Some("n2")),
                placement("default/web-2", None),
                placement("default/db-0", Some("n1")),
            ],
            &[
                history(0, Some(1), false),
                history(0, Some(5), true),
                history(0, None, false),
                history(10, Some(10), false),
            ],
        );
        assert_eq!(rows[0].0, "default/db");
        assert_eq!(
            rows[1],
            (
                "default/web".to_string(),
                WorkloadRow {
                    submitted: 3,
                    scheduled: 2,
                    pending: 1,
                    preempted: 1,
                    p50_to_bind: Some(Duration::from_secs(5)),
                    p99_to_bind: Some(Duration::from_secs(5)),
                }
            )
        );
    }
}
