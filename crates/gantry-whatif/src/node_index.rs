//! The node order and the sub-lists plugins read by position (nodes with affinity pods,
//! nodes with required anti-affinity pods). Held behind `Arc`s so that a delta layer
//! starts with its parent's index for free and copies it only when nodes come or go or
//! change lists.
//!
//! Order: the nodes given at load time in the scheduler's zone-interleaved order, then
//! the nodes added later in the order they were added (as the Cluster Autoscaler's
//! snapshot appends new nodes); removing a node keeps the others' order.

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::Sym;
use gantry_cache::NodeInfo;

#[derive(Debug, Clone, Default)]
pub(crate) struct NodeIndex {
    order: Arc<Vec<Sym>>,
    positions: Arc<HashMap<Sym, u32, RandomState>>,
    with_affinity: Arc<Vec<u32>>,
    with_required_anti_affinity: Arc<Vec<u32>>,
}

/// Which sub-lists a node belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListFlags {
    pub affinity: bool,
    pub required_anti_affinity: bool,
}

impl ListFlags {
    pub fn of(info: &NodeInfo) -> ListFlags {
        ListFlags {
            affinity: !info.pods_with_affinity().is_empty(),
            required_anti_affinity: !info.pods_with_required_anti_affinity().is_empty(),
        }
    }
}

impl NodeIndex {
    /// A copy that shares nothing with this one (the basic store's fork).
    pub fn deep_copy(&self) -> NodeIndex {
        NodeIndex {
            order: Arc::new(self.order.to_vec()),
            positions: Arc::new((*self.positions).clone()),
            with_affinity: Arc::new(self.with_affinity.to_vec()),
            with_required_anti_affinity: Arc::new(self.with_required_anti_affinity.to_vec()),
        }
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn name_at(&self, position: usize) -> Sym {
        self.order[position]
    }

    pub fn position(&self, name: Sym) -> Option<usize> {
        self.positions.get(&name).map(|&p| p as usize)
    }

    pub fn with_affinity(&self) -> &[u32] {
        &self.with_affinity
    }

    pub fn with_required_anti_affinity(&self) -> &[u32] {
        &self.with_required_anti_affinity
    }

    /// Appends a node (the caller checked it is new).
    pub fn push(&mut self, name: Sym, flags: ListFlags) {
        let position = self.order.len() as u32;
        Arc::make_mut(&mut self.order).push(name);
        Arc::make_mut(&mut self.positions).insert(name, position);
        self.set_flags(position, ListFlags::default(), flags);
    }

    /// Removes a node, keeping the others' order; the lists are renumbered.
    pub fn remove(&mut self, name: Sym) {
        let Some(position) = self.position(name) else {
            return;
        };
        let order = Arc::make_mut(&mut self.order);
        order.remove(position);
        let positions = Arc::make_mut(&mut self.positions);
        positions.remove(&name);
        for (i, n) in order.iter().enumerate().skip(position) {
            positions.insert(*n, i as u32);
        }
        let renumber = |list: &mut Arc<Vec<u32>>| {
            let list = Arc::make_mut(list);
            list.retain(|&p| p as usize != position);
            for p in list.iter_mut() {
                if *p as usize > position {
                    *p -= 1;
                }
            }
        };
        renumber(&mut self.with_affinity);
        renumber(&mut self.with_required_anti_affinity);
    }

    /// Moves the node at `position` into or out of the sub-lists (kept sorted).
    pub fn set_flags(&mut self, position: u32, old: ListFlags, new: ListFlags) {
        let update = |list: &mut Arc<Vec<u32>>, was: bool, is: bool| {
            if was == is {
                return;
            }
            let list = Arc::make_mut(list);
            match list.binary_search(&position) {
                Ok(i) if !is => {
                    list.remove(i);
                }
                Err(i) if is => list.insert(i, position),
                _ => {}
            }
        };
        update(&mut self.with_affinity, old.affinity, new.affinity);
        update(
            &mut self.with_required_anti_affinity,
            old.required_anti_affinity,
            new.required_anti_affinity,
        );
    }
}
