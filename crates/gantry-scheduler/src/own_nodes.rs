//! The nodes a shard places pods on when shards divide the nodes ([`Divide::Nodes`]), as
//! positions in the cycle's snapshot: found once per build of the snapshot's node lists,
//! not per cycle (hashing every node's name each cycle would cost as much as filtering).

use std::sync::Arc;

use gantry_cache::{ClusterState, Snapshot};
use gantry_framework::Status;

use crate::fit_error::FitError;
use crate::shard::Shard;

#[cfg(doc)]
use crate::shard::Divide;

/// Why a node of another shard is not a candidate, in the failure message; unresolvable,
/// so that preemption leaves that node to its shard.
pub const OTHER_SHARD: &str = "node(s) belong to another shard";

pub(crate) struct OwnNodes {
    shard: Shard,
    /// The snapshot lists `positions` were found in.
    lists_version: u64,
    /// Sorted.
    positions: Arc<[usize]>,
}

impl OwnNodes {
    pub(crate) fn new(shard: Shard) -> OwnNodes {
        OwnNodes {
            shard,
            lists_version: 0,
            positions: Arc::from([]),
        }
    }

    pub(crate) fn shard(&self) -> Shard {
        self.shard
    }

    /// The positions of this shard's nodes in `snapshot`, sorted.
    pub(crate) fn positions(&mut self, snapshot: &Snapshot) -> Arc<[usize]> {
        if self.lists_version != snapshot.lists_version() {
            self.positions = (0..snapshot.num_nodes())
                .filter(|&p| self.shard.owns_node(snapshot.node_at(p).name().as_str()))
                .collect();
            self.lists_version = snapshot.lists_version();
        }
        self.positions.clone()
    }
}

/// `narrowed` (sorted positions) less the nodes not in `own` (sorted).
pub(crate) fn intersect(narrowed: &[usize], own: &[usize]) -> Vec<usize> {
    narrowed
        .iter()
        .copied()
        .filter(|p| own.binary_search(p).is_ok())
        .collect()
}

/// Records every node of `snapshot` not in `own` (sorted) as another shard's.
pub(crate) fn add_other_shards_nodes(fit_error: &mut FitError, snapshot: &Snapshot, own: &[usize]) {
    let status = Status::unresolvable(OTHER_SHARD);
    let mut own = own.iter().peekable();
    for position in 0..snapshot.num_nodes() {
        if own.next_if_eq(&&position).is_none() {
            fit_error
                .node_statuses
                .push((snapshot.node_at(position).name(), status.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersecting_keeps_the_narrowed_positions_that_are_own() {
        assert_eq!(intersect(&[1, 2, 5, 8], &[0, 2, 3, 8, 9]), vec![2, 8]);
        assert_eq!(intersect(&[1, 2], &[]), Vec::<usize>::new());
    }
}
