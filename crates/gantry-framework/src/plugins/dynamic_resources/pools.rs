//! Which pools a node reaches (upstream's `GatherPools` and `buildPool`, `pools_*.go`):
//! the slices local to the node and the shared slices whose node selection takes it, by
//! pool, the newest generation only; whether each pool is complete and valid; and where an
//! allocation from them can be used.

use std::sync::Arc;

use gantry_api::dra::*;
use gantry_api::labels::NodeSelectorRequirement;
use gantry_api::{Node, NodeSelector, NodeSelectorTerm, Sym};
use gantry_cache::DeviceUse;

use super::allocator::Features;
use super::counters::{self, CounterTable};

/// A pool the node reaches, as upstream's `Pool`.
pub(super) struct Pool<'a> {
    pub(super) id: (Sym, Sym),
    /// Fewer slices of the newest generation than the pool announces.
    pub(super) incomplete: bool,
    /// The same device name twice in the pool's slices, the same counter set name twice,
    /// or a device consuming a counter set or counter the pool lacks.
    pub(super) invalid: bool,
    pub(super) slices: Vec<&'a Arc<ResourceSlice>>,
    /// What few pools have, boxed: pools are gathered for every node a pod's claims are
    /// searched on (inline, they measured 4% more bytes per pod in `bench dra`).
    extras: Option<Box<PoolExtras<'a>>>,
}

#[derive(Default)]
struct PoolExtras<'a> {
    /// The pool's shared slices of its generation that the node does not reach, found
    /// when the reached ones are too few: they complete the pool, and their allocated
    /// devices consume its counters.
    unreached: Vec<&'a Arc<ResourceSlice>>,
    /// The pool's `sharedCounters`, from its counter slices.
    counter_sets: Vec<&'a CounterSet>,
}

impl<'a> Pool<'a> {
    pub(super) fn unreached(&self) -> &[&'a Arc<ResourceSlice>] {
        self.extras.as_ref().map_or(&[], |e| &e.unreached)
    }

    pub(super) fn counter_sets(&self) -> &[&'a CounterSet] {
        self.extras.as_ref().map_or(&[], |e| &e.counter_sets)
    }

    /// Upstream's `poolHasBindingConditions`, for a pool it builds (an incomplete one it
    /// does not): some device of the slices the node reaches has binding conditions.
    fn has_binding_conditions(&self) -> bool {
        !self.incomplete && self.slices.iter().any(|s| s.binding_conditions)
    }

    fn extras(&mut self) -> &mut PoolExtras<'a> {
        self.extras.get_or_insert_with(Box::default)
    }

    /// The pool's counters less what its allocated devices consume, in the slices the
    /// node reaches and those it does not.
    pub(super) fn counters_left(&self, allocated: &dyn DeviceUse) -> CounterTable {
        let slices = self.slices.iter().chain(self.unreached()).map(|s| &***s);
        counters::left_after_allocated(self.counter_sets(), slices, allocated)
    }
}

/// The devices the node can reach in usable pools (complete, no duplicate names), in the
/// order the allocator tries them, as their slices and indexes there.
pub(super) fn reachable_devices<'a>(
    node: &Node,
    local: &'a [Arc<ResourceSlice>],
    shared: &'a [Arc<ResourceSlice>],
    features: Features,
) -> Vec<(&'a ResourceSlice, usize)> {
    let pools = gather_pools(node, local, shared, features);
    let per_device = (pools.iter().flat_map(|p| &p.slices))
        .any(|slice| matches!(slice.nodes, SliceNodes::PerDevice(_)));
    let mut devices: Vec<(&'a ResourceSlice, usize)> = (pools.into_iter())
        .filter(|p| !p.incomplete && !p.invalid)
        .flat_map(|p| p.slices)
        .flat_map(|slice| (0..slice.devices.len()).map(move |i| (&**slice, i)))
        .collect();
    // Filtered afterwards: a filter in the collect would grow the vector (measured as one
    // allocation more per pod in `bench dra`).
    if per_device {
        devices.retain(|(slice, i)| match slice.device_nodes(*i) {
            SliceNodes::Node(_) => true,
            nodes => nodes.reached_from(node.name, &node.labels),
        });
    }
    devices
}

/// The pools the node can reach, sorted by driver and pool name. A pool's counter slices
/// count towards its slices even with DRAPartitionableDevices off (upstream leaves them
/// out, then counts them when it checks an incomplete pool against every slice).
pub(super) fn gather_pools<'a>(
    node: &Node,
    local: &'a [Arc<ResourceSlice>],
    shared: &'a [Arc<ResourceSlice>],
    features: Features,
) -> Vec<Pool<'a>> {
    let reachable = local
        .iter()
        .filter(|s| s.node_name() == Some(node.name))
        .chain(shared.iter().filter(|s| match &s.nodes {
            SliceNodes::Node(_) => false,
            // Counter slices serve every node of their pool, whatever their node selection.
            _ if !s.shared_counters.is_empty() => true,
            SliceNodes::Selector(selector) => selector.matches(node.name, &node.labels),
            SliceNodes::All => true,
            SliceNodes::PerDevice(_) if !features.partitionable_devices => false,
            nodes => nodes.reached_from(node.name, &node.labels),
        }));
    let mut pools: Vec<Pool<'a>> = Vec::new();
    let mut newest: Vec<((Sym, Sym), i64, i64)> = Vec::new();
    for slice in reachable {
        let id = (slice.driver, slice.pool);
        match newest.iter_mut().find(|(p, _, _)| *p == id) {
            Some(entry) if slice.pool_generation > entry.1 => {
                *entry = (id, slice.pool_generation, slice.pool_slice_count);
            }
            Some(_) => {}
            None => newest.push((id, slice.pool_generation, slice.pool_slice_count)),
        }
        if let Some(pool) = pools.iter_mut().find(|p| p.id == id) {
            pool.slices.push(slice);
        } else {
            pools.push(Pool {
                id,
                incomplete: false,
                invalid: false,
                slices: vec![slice],
                extras: None,
            });
        }
    }
    pools.retain_mut(|pool| {
        let (_, generation, count) = *newest
            .iter()
            .find(|(p, _, _)| *p == pool.id)
            .expect("every pool has a newest generation");
        pool.slices.retain(|s| s.pool_generation == generation);
        pool.slices
            .sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        pool.incomplete = (pool.slices.len() as i64) < count;
        if pool.incomplete {
            // Upstream's `checkSlicesInPool`, over the shared slices the node does not
            // reach: a newer generation there makes the pool obsolete (left out), and
            // the pool's slices of this generation there may complete it.
            let others = shared.iter().filter(|s| (s.driver, s.pool) == pool.id);
            if others.clone().any(|s| s.pool_generation > generation) {
                return false;
            }
            let unreached: Vec<_> = others
                .filter(|s| s.pool_generation == generation)
                .filter(|s| !pool.slices.iter().any(|reached| Arc::ptr_eq(reached, s)))
                .collect();
            pool.incomplete = ((pool.slices.len() + unreached.len()) as i64) < count;
            if !unreached.is_empty() {
                pool.extras().unreached = unreached;
            }
        }
        let mut names: Vec<Sym> = pool
            .slices
            .iter()
            .flat_map(|s| s.devices.iter().map(|d| d.name))
            .collect();
        let total = names.len();
        names.sort_unstable();
        names.dedup();
        pool.invalid = names.len() != total;
        if features.partitionable_devices && !pool.invalid {
            let sets: Vec<_> = (pool.slices.iter())
                .flat_map(|s| &s.shared_counters)
                .collect();
            let slices = pool.slices.iter().chain(pool.unreached());
            let devices = slices.flat_map(|s| s.devices.iter());
            pool.invalid = counters::pool_is_invalid(&sets, devices);
            if !sets.is_empty() {
                pool.extras().counter_sets = sets;
            }
        }
        true
    });
    // Pools with binding conditions after the others (DRADeviceBindingConditions: a
    // device that binds at once is preferred), each part by driver and pool name.
    // (A comparator, not a cached key: that would allocate for every node searched.)
    let key = |p: &Pool<'a>| (p.has_binding_conditions(), p.id.0.as_str(), p.id.1.as_str());
    pools.sort_by(|a, b| key(a).cmp(&key(b)));
    pools
}

/// The node selector of an allocation usable on `node` only (`metadata.name In [node]`).
pub(super) fn on_node(node: Sym) -> NodeSelector {
    let by_name =
        NodeSelectorRequirement::parse("metadata.name", "In", &[node.as_str().to_string()], true)
            .expect("a name selector is valid");
    NodeSelector {
        terms: vec![NodeSelectorTerm {
            match_expressions: Vec::new(),
            match_fields: vec![by_name],
        }],
    }
}

/// Where the allocation can be used: the node, if any device is local to it; otherwise
/// the requirements of the devices' node selectors (their slices', or their own) in one
/// term; `None` for everywhere.
pub(super) fn node_selector<'a>(
    node: Sym,
    device_nodes: impl Iterator<Item = &'a SliceNodes>,
) -> Option<NodeSelector> {
    let mut term = NodeSelectorTerm::default();
    for nodes in device_nodes {
        match nodes {
            SliceNodes::Node(_) => return Some(on_node(node)),
            SliceNodes::Selector(selector) => {
                if let Some(first) = selector.terms.first() {
                    for r in &first.match_expressions {
                        if !term.match_expressions.contains(r) {
                            term.match_expressions.push(r.clone());
                        }
                    }
                    for r in &first.match_fields {
                        if !term.match_fields.contains(r) {
                            term.match_fields.push(r.clone());
                        }
                    }
                }
            }
            SliceNodes::All | SliceNodes::PerDevice(_) => {}
        }
    }
    (!term.match_expressions.is_empty() || !term.match_fields.is_empty())
        .then(|| NodeSelector { terms: vec![term] })
}
