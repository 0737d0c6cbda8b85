//! The feasible nodes' NodeInfos as the plugins after Filter see them. A cycle at 100,000
//! nodes scores 5,000 of them, and the verdict memo serves most of their scores without a
//! look at a NodeInfo: gathering 5,000 references a cycle cost 13% of `bench scale`'s time.
//! So the list is looked up in the cluster by position, and gathered whole only when a
//! plugin reads it as a slice.

use std::cell::{Cell, OnceCell};
use std::ops::Deref;

use gantry_cache::{ClusterState, NodeInfo};

/// The NodeInfos of the feasible nodes, by index: given as a slice, or the nodes at
/// `positions` in a cluster, gathered into a slice the first time one is asked for (by
/// `Deref`). [`Self::len`] and [`Self::at`] gather nothing.
pub struct NodeInfos<'a> {
    source: Source<'a>,
}

enum Source<'a> {
    Given(&'a [&'a NodeInfo]),
    AtPositions {
        cluster: &'a dyn ClusterState,
        positions: &'a [usize],
        gathered: OnceCell<Vec<&'a NodeInfo>>,
        /// The buffer the gathering fills (kept between cycles by the caller).
        buffer: Cell<Vec<&'a NodeInfo>>,
    },
}

impl<'a> NodeInfos<'a> {
    pub fn given(infos: &'a [&'a NodeInfo]) -> NodeInfos<'a> {
        NodeInfos {
            source: Source::Given(infos),
        }
    }

    /// The nodes at `positions` in `cluster`; `buffer` (emptied) is what a gathering fills.
    pub fn at_positions(
        cluster: &'a dyn ClusterState,
        positions: &'a [usize],
        mut buffer: Vec<&'a NodeInfo>,
    ) -> NodeInfos<'a> {
        buffer.clear();
        NodeInfos {
            source: Source::AtPositions {
                cluster,
                positions,
                gathered: OnceCell::new(),
                buffer: Cell::new(buffer),
            },
        }
    }

    pub fn len(&self) -> usize {
        match &self.source {
            Source::Given(infos) => infos.len(),
            Source::AtPositions { positions, .. } => positions.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th node's NodeInfo.
    pub fn at(&self, i: usize) -> &'a NodeInfo {
        match &self.source {
            Source::Given(infos) => infos[i],
            Source::AtPositions {
                cluster,
                positions,
                gathered,
                ..
            } => match gathered.get() {
                Some(gathered) => gathered[i],
                None => cluster.node_at(positions[i]),
            },
        }
    }

    /// The buffer back, for the next cycle's gathering.
    pub fn into_buffer(self) -> Vec<&'a NodeInfo> {
        match self.source {
            Source::Given(_) => Vec::new(),
            Source::AtPositions {
                gathered, buffer, ..
            } => gathered.into_inner().unwrap_or_else(|| buffer.take()),
        }
    }
}

impl<'a> Deref for NodeInfos<'a> {
    type Target = [&'a NodeInfo];

    fn deref(&self) -> &[&'a NodeInfo] {
        match &self.source {
            Source::Given(infos) => infos,
            Source::AtPositions {
                cluster,
                positions,
                gathered,
                buffer,
            } => gathered.get_or_init(|| {
                let mut infos = buffer.take();
                infos.extend(positions.iter().map(|&p| cluster.node_at(p)));
                infos
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gantry_api::{Node, Resources};
    use gantry_cache::{Cache, Snapshot};

    use super::*;

    #[test]
    fn nodes_at_positions_are_those_of_the_cluster_gathered_or_not() {
        let cache = Cache::new();
        for name in ["a", "b", "c", "d"] {
            cache.add_node(Arc::new(Node::new(name, Resources::new(1, 1))));
        }
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        let positions = [3, 1, 2];
        let want: Vec<&str> = positions
            .iter()
            .map(|&p| snapshot.node_at(p).name().as_str())
            .collect();
        let buffer = Vec::with_capacity(8);
        let infos = NodeInfos::at_positions(&snapshot, &positions, buffer);
        assert_eq!(infos.len(), 3);
        let one_by_one: Vec<&str> = (0..3).map(|i| infos.at(i).name().as_str()).collect();
        assert_eq!(one_by_one, want);
        let gathered: Vec<&str> = infos.iter().map(|n| n.name().as_str()).collect();
        assert_eq!(gathered, want);
        assert_eq!(infos.at(2).name().as_str(), want[2], "after gathering");
        let buffer = infos.into_buffer();
        assert!(
            buffer.capacity() >= 8,
            "the buffer given is the one returned"
        );
    }
}
