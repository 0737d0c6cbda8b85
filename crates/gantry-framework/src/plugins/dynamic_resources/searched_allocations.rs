//! Filter's search allocations per node, kept in the pod's cycle state for Reserve and
//! Score: only where the search, not the first path, found the devices.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use foldhash::fast::RandomState;
use gantry_api::Sym;

use super::Found;

/// Filter's allocations for the pod's claims, per node, where the search found them:
/// a node that passed Filter and has no entry got its devices on the first path (see
/// `PodClaims::found_on`), so the common case writes nothing per node, and the map
/// grows with the nodes the search served, not with the cluster.
type NodeAllocations = HashMap<Sym, Found, RandomState>;

/// Filter's search allocations per node, and whether there are any: a node the first
/// path served need not take the lock to drop an entry the search never made.
#[derive(Default)]
pub(super) struct SearchedAllocations {
    any: AtomicBool,
    by_node: Mutex<NodeAllocations>,
}

impl SearchedAllocations {
    /// Keeps the last Filter's result for the node, as upstream's map does: a first-path
    /// result drops a search an earlier Filter of this node made (in `run`, devices
    /// allocated meanwhile can change which one applies).
    pub(super) fn keep(&self, node: Sym, found: Found) {
        match found {
            Found::Allocations(_) => {
                self.lock().insert(node, found);
                self.any.store(true, Ordering::Release);
            }
            Found::FirstPath => {
                if self.any.load(Ordering::Acquire) {
                    self.lock().remove(&node);
                }
            }
        }
    }

    pub(super) fn get(&self, node: Sym) -> Option<Found> {
        self.lock().get(&node).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, NodeAllocations> {
        self.by_node.lock().expect("allocation map lock poisoned")
    }
}
