//! Nodes grouped by zone, listed round-robin across zones (upstream's `nodeTree`), so that
//! a scheduling cycle that evaluates only part of the cluster still visits every zone.

use gantry_api::{Node, Sym};

const ZONE: &str = "topology.kubernetes.io/zone";
const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";

/// Region and zone of a node; `None` for both unset (one zone of its own). The beta
/// labels win over the GA ones, as in upstream's `GetZoneKey`.
pub fn zone_key(node: &Node) -> (Option<Sym>, Option<Sym>) {
    let get = |beta: &str, ga: &str| {
        node.labels
            .get_str(beta)
            .or_else(|| node.labels.get_str(ga))
    };
    (get(REGION_BETA, REGION), get(ZONE_BETA, ZONE))
}

type ZoneKey = (Option<Sym>, Option<Sym>);

#[derive(Debug, Clone, Default)]
pub struct NodeTree {
    /// Zones in order of first appearance, each with its nodes in order of arrival.
    zones: Vec<(ZoneKey, Vec<Sym>)>,
    num_nodes: usize,
}

impl NodeTree {
    pub fn len(&self) -> usize {
        self.num_nodes
    }

    pub fn is_empty(&self) -> bool {
        self.num_nodes == 0
    }

    pub fn add(&mut self, node: &Node) {
        self.insert(zone_key(node), node.name);
    }

    fn insert(&mut self, zone: ZoneKey, name: Sym) {
        match self.zones.iter_mut().find(|(z, _)| *z == zone) {
            Some((_, names)) if names.contains(&name) => return,
            Some((_, names)) => names.push(name),
            None => self.zones.push((zone, vec![name])),
        }
        self.num_nodes += 1;
    }

    /// Removes a node; returns false if it was not in the tree.
    pub fn remove(&mut self, node: &Node) -> bool {
        let zone = zone_key(node);
        let Some(z) = self.zones.iter().position(|(k, _)| *k == zone) else {
            return false;
        };
        let names = &mut self.zones[z].1;
        let Some(i) = names.iter().position(|n| *n == node.name) else {
            return false;
        };
        names.remove(i);
        if names.is_empty() {
            self.zones.remove(z);
        }
        self.num_nodes -= 1;
        true
    }

    /// Moves a node whose zone labels changed; returns whether the order changed.
    pub fn update(&mut self, old: &Node, new: &Node) -> bool {
        if zone_key(old) == zone_key(new) {
            return false;
        }
        self.remove(old);
        self.add(new);
        true
    }

    /// All nodes, one from each zone in turn.
    pub fn list(&self) -> Vec<Sym> {
        let mut out = Vec::with_capacity(self.num_nodes);
        let mut row = 0;
        while out.len() < self.num_nodes {
            for (_, names) in &self.zones {
                if let Some(&name) = names.get(row) {
                    out.push(name);
                }
            }
            row += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::Resources;

    fn node(name: &str, zone: &str) -> Node {
        let n = Node::new(name, Resources::default());
        if zone.is_empty() {
            n
        } else {
            n.with_labels([(ZONE, zone), (REGION, "r")])
        }
    }

    fn names(tree: &NodeTree) -> Vec<&'static str> {
        tree.list().into_iter().map(Sym::as_str).collect()
    }

    #[test]
    fn lists_round_robin_across_zones() {
        // Upstream's node_tree_test "add nodes to a new and to an exhausted zone".
        let mut tree = NodeTree::default();
        for (n, z) in [
            ("a1", "a"),
            ("a2", "a"),
            ("a3", "a"),
            ("b1", "b"),
            ("c1", "c"),
            ("c2", "c"),
            ("x", ""),
        ] {
            tree.add(&node(n, z));
        }
        assert_eq!(names(&tree), ["a1", "b1", "c1", "x", "a2", "c2", "a3"]);
        tree.add(&node("a1", "a"));
        assert_eq!(tree.len(), 7, "adding a node twice is a no-op");
    }

    #[test]
    fn removing_the_last_node_of_a_zone_removes_the_zone() {
        let mut tree = NodeTree::default();
        tree.add(&node("a1", "a"));
        tree.add(&node("b1", "b"));
        tree.add(&node("a2", "a"));
        assert!(tree.remove(&node("b1", "b")));
        assert!(!tree.remove(&node("b1", "b")));
        assert_eq!(names(&tree), ["a1", "a2"]);
        assert!(tree.update(&node("a1", "a"), &node("a1", "b")));
        assert_eq!(names(&tree), ["a2", "a1"]);
        assert!(!tree.update(&node("a2", "a"), &node("a2", "a")));
    }

    #[test]
    fn beta_zone_labels_count() {
        let n = Node::new("n", Resources::default()).with_labels([(ZONE_BETA, "z")]);
        assert_eq!(zone_key(&n), (None, Some(Sym::new("z"))));
    }
}
