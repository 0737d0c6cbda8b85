//! The one read-only view of the cluster that plugins see. The scheduling cycle's
//! [`Snapshot`](crate::Snapshot) implements it, and so does any what-if snapshot, so the
//! same plugins run on the live cluster and on forks.

use gantry_api::Sym;

use crate::{DeclaredTerms, DomainCounts, DraState, NodeColumns, NodeInfo, PodSelection, PvcKey};

pub trait ClusterState: Sync {
    /// Number of nodes (ghosts excluded).
    fn num_nodes(&self) -> usize;

    /// The node at `position` in the zone-interleaved node order, `0..num_nodes()`.
    fn node_at(&self, position: usize) -> &NodeInfo;

    /// The position of the named node, if it exists.
    fn position(&self, name: Sym) -> Option<usize>;

    fn node(&self, name: Sym) -> Option<&NodeInfo> {
        self.position(name).map(|p| self.node_at(p))
    }

    /// Positions of the nodes that hold pods with (anti-)affinity terms.
    fn with_affinity_pods(&self) -> &[u32];

    /// Positions of the nodes that hold pods with required anti-affinity terms.
    fn with_required_anti_affinity_pods(&self) -> &[u32];

    /// Whether any pod in the cluster uses the claim.
    fn is_pvc_used(&self, key: PvcKey) -> bool;

    /// The nodes' amounts and flags as columns in node order, for plugins that settle
    /// many nodes in one loop; `None` where the view does not keep them (the what-if
    /// stores), and the plugins then read each NodeInfo.
    fn columns(&self) -> Option<&NodeColumns> {
        None
    }

    /// Pods per topology domain for `selection`, where this view keeps them; `None`
    /// means "count node by node" (a cycle's snapshot then keeps the selection from its
    /// next update on).
    fn domain_counts(&self, _selection: &PodSelection) -> Option<&DomainCounts> {
        None
    }

    /// The (anti-)affinity terms the pods declare, with the declaring pods per domain;
    /// `None` where this view does not keep them (walk the affinity sub-lists instead).
    fn declared_terms(&self) -> Option<&DeclaredTerms> {
        None
    }

    /// The dynamic resource allocation objects and allocations; `None` where the
    /// cluster view does not track them (the live cycle's snapshot, for now).
    fn dra(&self) -> Option<&dyn DraState> {
        None
    }
}
