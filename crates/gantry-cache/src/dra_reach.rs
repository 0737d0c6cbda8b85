//! Who must hear that the devices taken changed, so that a remembered DynamicResources
//! verdict is asked again (the scheduler's verdict memo). A device of a node's own pool
//! is read by that node's Filter alone: the node's generation moves (as when a pod lands
//! there), and a like pod's verdicts elsewhere stay good. Anything else the plugin reads
//! for every node (a shared pool's devices, the shared slices, the device classes) moves
//! one epoch for all of them.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use gantry_api::Sym;
use smallvec::SmallVec;

type Map<K, V> = HashMap<K, V, RandomState>;

/// A pool by driver and name.
pub(crate) type PoolId = (Sym, Sym);

#[derive(Default)]
pub(crate) struct ChangeReach {
    /// Moves whenever something every node's verdict may read changed.
    epoch: u64,
    /// Pools with shared slices, and how many slices each.
    shared_pools: Map<PoolId, u32>,
    /// Pools with node-local slices: their nodes, each with how many slices.
    local_pools: Map<PoolId, SmallVec<[(Sym, u32); 1]>>,
    /// Nodes whose own pools' devices changed since the last snapshot update.
    touched: Vec<Sym>,
}

impl ChangeReach {
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Something every node's verdict may read changed.
    pub(crate) fn everywhere(&mut self) {
        self.epoch += 1;
    }

    pub(crate) fn shared_slice(&mut self, pool: PoolId, added: bool) {
        count(self.shared_pools.entry(pool).or_default(), added);
        if self.shared_pools.get(&pool) == Some(&0) {
            self.shared_pools.remove(&pool);
        }
        self.everywhere();
    }

    /// A node-local slice was added to or removed from `node` (whose generation the
    /// cache moves itself).
    pub(crate) fn local_slice(&mut self, pool: PoolId, node: Sym, added: bool) {
        let nodes = self.local_pools.entry(pool).or_default();
        match nodes.iter().position(|(n, _)| *n == node) {
            Some(i) => count(&mut nodes[i].1, added),
            None if added => nodes.push((node, 1)),
            None => {}
        }
        nodes.retain(|(_, slices)| *slices > 0);
        if nodes.is_empty() {
            self.local_pools.remove(&pool);
        }
    }

    /// A device of `pool` was taken or given back (or its shares changed).
    pub(crate) fn device_changed(&mut self, pool: PoolId) {
        match self.local_pools.get(&pool) {
            Some(nodes) if !self.shared_pools.contains_key(&pool) => {
                for &(node, _) in nodes {
                    if !self.touched.contains(&node) {
                        self.touched.push(node);
                    }
                }
            }
            // A shared pool, or one no slice publishes (yet): every node may read it.
            _ => self.everywhere(),
        }
    }

    /// The nodes touched since the last call (the buffer is kept: a node a pod).
    pub(crate) fn drain_touched(&mut self) -> std::vec::Drain<'_, Sym> {
        self.touched.drain(..)
    }

    /// The nodes touched since the last drain, left for it.
    pub(crate) fn touched(&self) -> &[Sym] {
        &self.touched
    }
}

fn count(slices: &mut u32, added: bool) {
    *slices = if added {
        *slices + 1
    } else {
        slices.saturating_sub(1)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str) -> PoolId {
        (Sym::new("gpu.example.com"), Sym::new(name))
    }

    #[test]
    fn a_node_pool_touches_its_node_and_anything_else_moves_the_epoch() {
        let mut reach = ChangeReach::default();
        let n1 = Sym::new("n1");
        reach.local_slice(pool("n1"), n1, true);
        reach.device_changed(pool("n1"));
        reach.device_changed(pool("n1"));
        assert_eq!(reach.epoch(), 0);
        assert_eq!(reach.drain_touched().collect::<Vec<_>>(), [n1]);
        assert!(reach.drain_touched().next().is_none());
        // No slice publishes it: every node.
        reach.device_changed(pool("elsewhere"));
        assert_eq!(reach.epoch(), 1);
        reach.shared_slice(pool("shared"), true);
        assert_eq!(reach.epoch(), 2);
        reach.device_changed(pool("shared"));
        assert_eq!(reach.epoch(), 3);
        // A pool both shared and local is read by every node.
        reach.shared_slice(pool("n1"), true);
        reach.device_changed(pool("n1"));
        assert!(reach.drain_touched().next().is_none());
        assert_eq!(reach.epoch(), 5);
        // The node's last slice gone: the pool is nobody's.
        reach.shared_slice(pool("n1"), false);
        reach.local_slice(pool("n1"), n1, false);
        reach.device_changed(pool("n1"));
        assert!(reach.drain_touched().next().is_none());
        assert_eq!(reach.epoch(), 7);
    }
}
