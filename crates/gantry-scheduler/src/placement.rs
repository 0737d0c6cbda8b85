//! TopologyAwareWorkloadScheduling (v1.36, alpha): the placements a pod group is tried on,
//! as upstream's TopologyPlacementGenerator makes them (`topologyaware/topology_placement.go`),
//! and the choice among those that fit, as PodGroupPodsCount scores them
//! (`podgrouppodscount/podgroup_pods_count.go`).

use std::collections::BTreeMap;
use std::sync::Arc;

use gantry_api::{Pod, Sym};
use gantry_cache::{ClusterState, Snapshot};

/// A set of nodes a pod-group cycle is tried on: every node, or one domain of the group's
/// topology key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The domain (the label's value); empty for every node.
    pub name: String,
    /// The nodes' positions in the cycle's snapshot, ascending.
    pub positions: Arc<[usize]>,
}

/// The placements of a group: every node when it names no topology key; otherwise one per
/// value of `key` among the nodes that carry it, only the value of its members already
/// scheduled (`scheduled`, naming their nodes) if any are. Upstream lists the domains in
/// Go map order; here they are in the order of their names. An `Err` is upstream's error
/// (the group's cycle fails with it).
pub fn generate(
    snapshot: &Snapshot,
    key: Option<Sym>,
    scheduled: &[Arc<Pod>],
) -> Result<Vec<Placement>, String> {
    let Some(key) = key else {
        return Ok(vec![Placement {
            name: String::new(),
            positions: (0..snapshot.num_nodes()).collect(),
        }]);
    };
    let required = scheduled_domain(snapshot, key, scheduled)
        .map_err(|e| format!("cannot determine domain for already scheduled pods: {e}"))?;
    let mut domains: BTreeMap<Sym, Vec<usize>> = BTreeMap::new();
    for position in 0..snapshot.num_nodes() {
        let Some(node) = snapshot.node_at(position).node() else {
            continue;
        };
        if let Some(domain) = node.labels.get(key)
            && required.is_none_or(|r| r == domain)
        {
            domains.entry(domain).or_default().push(position);
        }
    }
    Ok(domains
        .into_iter()
        .map(|(name, positions)| Placement {
            name: name.to_string(),
            positions: positions.into(),
        })
        .collect())
}

/// The one domain of `key` the group's scheduled members are in (`None`: none is).
fn scheduled_domain(
    snapshot: &Snapshot,
    key: Sym,
    scheduled: &[Arc<Pod>],
) -> Result<Option<Sym>, String> {
    let mut found: Option<Sym> = None;
    for pod in scheduled {
        let Some(name) = pod.node_name else { continue };
        let node = snapshot
            .node(name)
            .and_then(|info| info.node())
            .ok_or_else(|| {
                format!(
                    "getting node for pod {}: nodeinfo not found for node name {:?}",
                    pod.key(),
                    name.as_str()
                )
            })?;
        let domain = node
            .labels
            .get(key)
            .ok_or_else(|| format!("no topology domain found for pod {}", pod.key()))?;
        match found {
            Some(other) if other != domain => {
                return Err(format!(
                    "more than 1 domain found for pod group: {other}, {domain}"
                ));
            }
            _ => found = Some(domain),
        }
    }
    Ok(found)
}

/// The index of the placement to take among those that fit, each with the number of the
/// group's members it would place (`proposed`), given `scheduled` members already placed
/// and the PlacementScore plugins' weights (`weight` of PodGroupPodsCount; 0 when it is
/// not enabled). PodGroupPodsCount scores `scheduled + proposed`, normalised to 0..=100
/// over the highest; the highest total wins. Upstream breaks a tie at random; here the
/// first placement of the tie wins.
pub fn best(proposed: &[usize], scheduled: usize, weight: i64) -> usize {
    let counts: Vec<i64> = proposed.iter().map(|&p| (scheduled + p) as i64).collect();
    let highest = counts.iter().copied().max().unwrap_or(0).max(1);
    let totals = counts.iter().map(|&c| weight * (c * 100 / highest));
    let mut best = (0, i64::MIN);
    for (i, total) in totals.enumerate() {
        if total > best.1 {
            best = (i, total);
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::{Node, Resources};
    use gantry_cache::Cache;

    /// A snapshot of nodes named with their labels.
    fn snapshot(nodes: &[(&str, &[(&str, &str)])]) -> Snapshot {
        let cache = Cache::new();
        for (name, labels) in nodes {
            let node = Node::new(name, Resources::default()).with_labels(labels.iter().copied());
            cache.add_node(Arc::new(node));
        }
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        snapshot
    }

    /// Each placement's name and node names.
    fn named(snapshot: &Snapshot, placements: &[Placement]) -> Vec<(String, Vec<String>)> {
        let mut named: Vec<(String, Vec<String>)> = (placements.iter())
            .map(|p| {
                let mut nodes: Vec<String> = (p.positions.iter())
                    .map(|&i| snapshot.node_at(i).name().to_string())
                    .collect();
                nodes.sort();
                (p.name.clone(), nodes)
            })
            .collect();
        named.sort();
        named
    }

    fn on(node: &str) -> Arc<Pod> {
        let mut pod = Pod::new("default", &format!("on-{node}"));
        pod.node_name = Some(Sym::new(node));
        Arc::new(pod)
    }

    // upstream's TestGeneratePlacements (topology_placement_test.go), the parent placement
    // being every node as in the pod-group cycle.
    #[test]
    fn a_placement_per_domain_of_the_key_or_one_of_every_node() {
        let nodes: &[(&str, &[(&str, &str)])] = &[
            ("node0", &[("topology2", "d1")]),
            ("node1", &[("topology2", "d4")]),
            ("node2", &[("topology1", "d1")]),
            ("node3", &[("topology1", "d2")]),
            ("node4", &[("topology1", "d1")]),
            ("node5", &[("topology1", "d3")]),
        ];
        let s = snapshot(nodes);
        let all = generate(&s, None, &[]).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].positions.len(), 6);
        let by = |key| named(&s, &generate(&s, Some(Sym::new(key)), &[]).unwrap());
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            by("topology1"),
            vec![
                ("d1".to_string(), owned(&["node2", "node4"])),
                ("d2".to_string(), owned(&["node3"])),
                ("d3".to_string(), owned(&["node5"])),
            ]
        );
        // "without matching topology label, returns empty"
        assert_eq!(by("topology3"), vec![]);
    }

    #[test]
    fn members_already_scheduled_keep_the_group_to_their_domain() {
        let nodes: &[(&str, &[(&str, &str)])] = &[
            ("node0", &[("topology", "d2")]),
            ("node1", &[("topology", "d1")]),
            ("node2", &[("topology", "d1")]),
            ("node3", &[("topology", "d1")]),
            ("node5", &[("foo", "bar")]),
            ("node6", &[("topology", "d0")]),
        ];
        let s = snapshot(nodes);
        let key = Some(Sym::new("topology"));
        let placements = generate(&s, key, &[on("node2"), on("node3")]).unwrap();
        assert_eq!(named(&s, &placements).len(), 1);
        assert_eq!(placements[0].name, "d1");
        assert_eq!(placements[0].positions.len(), 3);
        // Conflicting domains, a node outside the snapshot, a node without the label.
        let error = |pods: &[Arc<Pod>]| generate(&s, key, pods).unwrap_err();
        assert_eq!(
            error(&[on("node6"), on("node3")]),
            "cannot determine domain for already scheduled pods: more than 1 domain found for pod group: d0, d1"
        );
        assert_eq!(
            error(&[on("node2"), on("node4")]),
            "cannot determine domain for already scheduled pods: getting node for pod default/on-node4: nodeinfo not found for node name \"node4\""
        );
        assert_eq!(
            error(&[on("node5")]),
            "cannot determine domain for already scheduled pods: no topology domain found for pod default/on-node5"
        );
    }

    #[test]
    fn pods_count_prefers_the_placement_holding_more_and_normalises_to_the_highest() {
        // upstream's NormalizePlacementScore: 100 * count / max.
        assert_eq!(best(&[2, 3], 0, 1), 1);
        assert_eq!(best(&[3, 2], 0, 1), 0);
        // Members already scheduled count in every placement alike.
        assert_eq!(best(&[1, 2], 5, 1), 1);
        // A tie: the first (upstream: at random).
        assert_eq!(best(&[2, 2], 0, 1), 0);
        // Without the plugin every placement scores 0: the first.
        assert_eq!(best(&[1, 3], 0, 0), 0);
    }
}
