//! The structured-parameters allocator (upstream's `structured` package, stable channel):
//! for one node, find devices for every request of every claim, exhaustively and in a
//! fixed order, stopping at the first full solution.
//!
//! Pools are gathered from the slices the node can reach; only the newest generation of a
//! pool counts, and a pool with fewer slices than it announces is incomplete (skipped,
//! and an error for requests that want all devices). Each candidate device must be free
//! (not allocated, not already picked in this search), satisfy the class's and the
//! request's CEL selectors, and keep every `matchAttribute` constraint of its claim.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::dra::*;
use gantry_api::labels::NodeSelectorRequirement;
use gantry_api::{Node, NodeSelector, NodeSelectorTerm, Sym};
use gantry_cache::DeviceUse;

use super::cel::Selector;

/// A request of a claim, with its class and compiled selectors (class selectors first).
#[derive(Clone)]
pub struct PreparedRequest {
    pub name: Arc<str>,
    pub class: Sym,
    pub mode: AllocationMode,
    pub class_selectors: Arc<[Arc<Selector>]>,
    pub request_selectors: Arc<[Arc<Selector>]>,
}

/// A claim to allocate, with its requests prepared.
#[derive(Clone)]
pub struct PreparedClaim {
    pub claim: Arc<ResourceClaim>,
    pub requests: Vec<PreparedRequest>,
}

/// What the allocator reads besides the node: the claims, the devices already allocated,
/// and the slices not local to one node.
pub struct Allocator {
    pub claims: Vec<PreparedClaim>,
    pub allocated: Arc<dyn DeviceUse>,
    pub shared_slices: Vec<Arc<ResourceSlice>>,
}

struct Pool<'a> {
    id: (Sym, Sym),
    /// Fewer slices of the newest generation than the pool announces.
    incomplete: bool,
    /// The same device name twice in the pool's slices.
    invalid: bool,
    slices: Vec<&'a ResourceSlice>,
}

/// A device reachable from the node, with its slice.
#[derive(Clone, Copy)]
struct Candidate<'a> {
    id: DeviceId,
    device: &'a Device,
    slice: &'a ResourceSlice,
}

struct Search<'a> {
    allocator: &'a Allocator,
    pools: Vec<Pool<'a>>,
    /// The devices each request of each claim needs (resolved for `All`).
    needed: Vec<Vec<usize>>,
    /// `All` requests: their devices, decided before the search.
    all_devices: HashMap<(usize, usize), Vec<Candidate<'a>>, RandomState>,
    matches: HashMap<(DeviceId, usize, usize), bool, RandomState>,
    picking: HashSet<DeviceId, RandomState>,
    constraints: Vec<Vec<ConstraintState>>,
    result: Vec<Vec<(usize, Candidate<'a>)>>,
}

struct ConstraintState {
    requests: Vec<Arc<str>>,
    attribute: QualifiedName,
    value: Option<AttributeValue>,
    count: usize,
}

impl ConstraintState {
    fn applies(&self, request: &str) -> bool {
        self.requests.is_empty() || self.requests.iter().any(|r| &**r == request)
    }

    fn add(&mut self, request: &str, device: &Device) -> bool {
        if !self.applies(request) {
            return true;
        }
        let Some(value) = device.attribute(self.attribute) else {
            return false;
        };
        match &self.value {
            Some(current) if self.count > 0 && current != value => false,
            _ => {
                if self.count == 0 {
                    self.value = Some(value.clone());
                }
                self.count += 1;
                true
            }
        }
    }

    fn remove(&mut self, request: &str) {
        if self.applies(request) {
            self.count -= 1;
        }
    }
}

impl Allocator {
    /// Allocates every claim for `node`: `Ok(Some)` with one allocation per claim (in
    /// order), `Ok(None)` when the devices do not suffice, `Err` when a claim or class is
    /// broken (a CEL error, too many devices), which aborts scheduling the pod.
    pub fn allocate(
        &self,
        node: &Node,
        local_slices: &[Arc<ResourceSlice>],
    ) -> Result<Option<Vec<Allocation>>, String> {
        let pools = gather_pools(node, local_slices, &self.shared_slices);
        let mut search = Search {
            allocator: self,
            pools,
            needed: Vec::with_capacity(self.claims.len()),
            all_devices: HashMap::default(),
            matches: HashMap::default(),
            picking: HashSet::default(),
            constraints: Vec::with_capacity(self.claims.len()),
            result: vec![Vec::new(); self.claims.len()],
        };
        for (c, claim) in self.claims.iter().enumerate() {
            let mut per_request = Vec::with_capacity(claim.requests.len());
            for (r, request) in claim.requests.iter().enumerate() {
                per_request.push(match request.mode {
                    AllocationMode::ExactCount(n) => n as usize,
                    AllocationMode::All => search.resolve_all(c, r)?,
                });
            }
            let total: usize = per_request.iter().sum();
            if total > ALLOCATION_RESULTS_MAX_SIZE {
                return Err(format!(
                    "claim {}/{}: number of requested devices {total} exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}",
                    claim.claim.namespace, claim.claim.name
                ));
            }
            search.needed.push(per_request);
            search.constraints.push(
                claim
                    .claim
                    .spec
                    .constraints
                    .iter()
                    .map(|m| ConstraintState {
                        requests: m.requests.clone(),
                        attribute: m.attribute,
                        value: None,
                        count: 0,
                    })
                    .collect(),
            );
        }
        if !search.allocate_one(0, 0, 0)? {
            // Invalid pools are an error only when nothing else could serve the claims.
            if search.pools.iter().any(|p| p.invalid) {
                return Err("invalid resource pools were encountered".to_string());
            }
            return Ok(None);
        }
        Ok(Some(
            search
                .result
                .iter()
                .enumerate()
                .map(|(c, devices)| Allocation {
                    devices: devices
                        .iter()
                        .map(|(r, d)| AllocatedDevice {
                            request: self.claims[c].requests[*r].name.clone(),
                            device: d.id,
                        })
                        .collect(),
                    node_selector: node_selector(node.name, devices.iter().map(|(_, d)| d.slice)),
                })
                .collect(),
        ))
    }
}

/// The pools the node can reach, sorted by driver and pool name.
fn gather_pools<'a>(
    node: &Node,
    local: &'a [Arc<ResourceSlice>],
    shared: &'a [Arc<ResourceSlice>],
) -> Vec<Pool<'a>> {
    let reachable = local
        .iter()
        .filter(|s| s.node_name() == Some(node.name))
        .chain(shared.iter().filter(|s| match &s.nodes {
            SliceNodes::Node(_) => false,
            SliceNodes::Selector(selector) => selector.matches(node.name, &node.labels),
            SliceNodes::All => true,
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
            });
        }
    }
    for pool in &mut pools {
        let (_, generation, count) = *newest
            .iter()
            .find(|(p, _, _)| *p == pool.id)
            .expect("every pool has a newest generation");
        pool.slices.retain(|s| s.pool_generation == generation);
        pool.slices
            .sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        pool.incomplete = (pool.slices.len() as i64) < count;
        let mut names: Vec<Sym> = pool
            .slices
            .iter()
            .flat_map(|s| s.devices.iter().map(|d| d.name))
            .collect();
        let total = names.len();
        names.sort_unstable();
        names.dedup();
        pool.invalid = names.len() != total;
    }
    pools.sort_by(|a, b| {
        (a.id.0.as_str(), a.id.1.as_str()).cmp(&(b.id.0.as_str(), b.id.1.as_str()))
    });
    pools
}

impl<'a> Search<'a> {
    fn candidates(&self) -> impl Iterator<Item = Candidate<'a>> + '_ {
        self.pools
            .iter()
            .filter(|p| !p.incomplete && !p.invalid)
            .flat_map(|p| p.slices.iter())
            .flat_map(|slice| {
                slice.devices.iter().map(move |device| Candidate {
                    id: DeviceId {
                        driver: slice.driver,
                        pool: slice.pool,
                        device: device.name,
                    },
                    device,
                    slice,
                })
            })
    }

    /// Decides the devices of an `All` request: every selectable device of every pool.
    fn resolve_all(&mut self, c: usize, r: usize) -> Result<usize, String> {
        let claim = &self.allocator.claims[c];
        if let Some(pool) = self.pools.iter().find(|p| p.incomplete) {
            return Err(format!(
                "claim {}/{}, request {}: asks for all devices, but resource pool {}/{} is currently being updated",
                claim.claim.namespace,
                claim.claim.name,
                claim.requests[r].name,
                pool.id.0,
                pool.id.1
            ));
        }
        let all: Vec<Candidate<'a>> = self.candidates().collect();
        let mut chosen = Vec::new();
        for candidate in all {
            if self.selectable(c, r, candidate)? {
                chosen.push(candidate);
            }
        }
        let n = chosen.len();
        self.all_devices.insert((c, r), chosen);
        Ok(n)
    }

    /// Whether the device satisfies the class's and the request's selectors (cached).
    fn selectable(&mut self, c: usize, r: usize, candidate: Candidate<'a>) -> Result<bool, String> {
        if let Some(&known) = self.matches.get(&(candidate.id, c, r)) {
            return Ok(known);
        }
        let claim = &self.allocator.claims[c];
        let request = &claim.requests[r];
        let mut matches = true;
        for (i, selector) in request.class_selectors.iter().enumerate() {
            let ok = selector
                .matches(candidate.id.driver, candidate.device)
                .map_err(|e| {
                    format!(
                        "class {}: selector #{i} on device {}: CEL runtime error: {e}",
                        request.class, candidate.id
                    )
                })?;
            if !ok {
                matches = false;
                break;
            }
        }
        if matches {
            for (i, selector) in request.request_selectors.iter().enumerate() {
                let ok = selector
                    .matches(candidate.id.driver, candidate.device)
                    .map_err(|e| {
                        format!(
                            "claim {}/{}: selector #{i} on device {}: CEL runtime error: {e}",
                            claim.claim.namespace, claim.claim.name, candidate.id
                        )
                    })?;
                if !ok {
                    matches = false;
                    break;
                }
            }
        }
        self.matches.insert((candidate.id, c, r), matches);
        Ok(matches)
    }

    /// Picks the `d`th device of request `r` of claim `c`, then the rest, recursively;
    /// true once every claim has all its devices.
    fn allocate_one(&mut self, c: usize, r: usize, d: usize) -> Result<bool, String> {
        if c >= self.allocator.claims.len() {
            return Ok(true);
        }
        if r >= self.allocator.claims[c].requests.len() {
            return self.allocate_one(c + 1, 0, 0);
        }
        if d >= self.needed[c][r] {
            if self.needed[c][r] == 0 {
                // An `All` request with no device cannot be satisfied.
                return Ok(false);
            }
            return self.allocate_one(c, r + 1, 0);
        }
        if let Some(devices) = self.all_devices.get(&(c, r)) {
            let candidate = devices[d];
            if !self.try_pick(c, r, candidate) {
                return Ok(false);
            }
            if self.allocate_one(c, r, d + 1)? {
                return Ok(true);
            }
            self.unpick(c, r);
            return Ok(false);
        }
        let candidates: Vec<Candidate<'a>> = self.candidates().collect();
        for candidate in candidates {
            if self.in_use(candidate.id) || !self.selectable(c, r, candidate)? {
                continue;
            }
            if !self.try_pick(c, r, candidate) {
                continue;
            }
            if self.allocate_one(c, r, d + 1)? {
                return Ok(true);
            }
            self.unpick(c, r);
        }
        Ok(false)
    }

    fn in_use(&self, id: DeviceId) -> bool {
        self.allocator.allocated.is_allocated(id) || self.picking.contains(&id)
    }

    /// Takes the device if it is free and keeps the claim's constraints.
    fn try_pick(&mut self, c: usize, r: usize, candidate: Candidate<'a>) -> bool {
        if self.in_use(candidate.id) {
            return false;
        }
        let request = self.allocator.claims[c].requests[r].name.clone();
        let constraints = &mut self.constraints[c];
        for i in 0..constraints.len() {
            if !constraints[i].add(&request, candidate.device) {
                for constraint in &mut constraints[..i] {
                    constraint.remove(&request);
                }
                return false;
            }
        }
        self.picking.insert(candidate.id);
        self.result[c].push((r, candidate));
        true
    }

    /// Gives back the device picked last for claim `c`.
    fn unpick(&mut self, c: usize, r: usize) {
        let (_, candidate) = self.result[c].pop().expect("a device was picked");
        let request = self.allocator.claims[c].requests[r].name.clone();
        for constraint in &mut self.constraints[c] {
            constraint.remove(&request);
        }
        self.picking.remove(&candidate.id);
    }
}

/// Where the allocation can be used: the node, if any device is local to it; otherwise
/// the requirements of the slices' node selectors in one term; `None` for everywhere.
fn node_selector<'a>(
    node: Sym,
    slices: impl Iterator<Item = &'a ResourceSlice>,
) -> Option<NodeSelector> {
    let mut term = NodeSelectorTerm::default();
    for slice in slices {
        match &slice.nodes {
            SliceNodes::Node(_) => {
                let by_name = NodeSelectorRequirement::parse(
                    "metadata.name",
                    "In",
                    &[node.as_str().to_string()],
                    true,
                )
                .expect("a name selector is valid");
                return Some(NodeSelector {
                    terms: vec![NodeSelectorTerm {
                        match_expressions: Vec::new(),
                        match_fields: vec![by_name],
                    }],
                });
            }
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
            SliceNodes::All => {}
        }
    }
    (!term.match_expressions.is_empty() || !term.match_fields.is_empty())
        .then(|| NodeSelector { terms: vec![term] })
}
