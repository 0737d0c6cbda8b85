//! The structured-parameters allocator, as kube-scheduler v1.35.4 runs it: with the
//! default gates (DRAAdminAccess and DRAPrioritizedList on) upstream picks the
//! "incubating" implementation (`dynamic-resource-allocation/structured/internal/incubating/
//! allocator_incubating.go`), which this follows step by step. For one node it finds
//! devices for every request of every claim, exhaustively and in a fixed order, stopping
//! at the first full solution.
//!
//! Pools are gathered from the slices the node can reach; only the newest generation of a
//! pool counts, and a pool with fewer slices than it announces is incomplete (skipped,
//! and an error for requests that want all devices, as is an invalid pool). Each candidate
//! device must be free (not allocated, not already picked in this search), satisfy the
//! class's and the request's CEL selectors, and keep every `matchAttribute` (and, with
//! DRAConsumableCapacity, `distinctAttribute`) constraint of its claim (`constraints.rs`);
//! one that consumes counters (partitionable devices) must also fit what its
//! pool's counters have left (`counters.rs`).
//!
//! A request with `firstAvailable` is satisfied by the first of its subrequests, in order,
//! for which the rest of the search succeeds; when a later request or claim fails, the
//! search comes back and tries the next subrequest (and the next device of earlier
//! requests, and so on). Results of a subrequest are named `<request>/<subrequest>`.
//! A constraint that names a request covers all its subrequests; one naming
//! `<request>/<subrequest>` covers that subrequest only.
//!
//! The limit of [`ALLOCATION_RESULTS_MAX_SIZE`] devices per claim is checked before the
//! search against the smallest subrequests, and during it before each request: a request
//! that would go over it makes the search try the next subrequest of the nearest earlier
//! `firstAvailable` request (upstream's `errAllocationResultMaxSizeExceeded`).
//!
//! Two behaviours of v1.35.4 that later releases changed are kept, since Gantry decides as
//! v1.35.4 does (kubernetes#134948 era fixes; see the tests citing them):
//! - when the subrequests are validated, subrequest `i > 0` is checked against the
//!   selector cache entries of subrequest `i - 1` (the cache key is updated only after the
//!   validation), so that an `All` subrequest right after an `All` subrequest 0 gets the
//!   devices of subrequest 0;
//! - after the first device of an `All` subrequest, the search continues with the
//!   subrequest index reset to 0, i.e. with what subrequest 0 asks for.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::dra::*;
use gantry_api::dra_taints::taints_prevent_allocation;
use gantry_api::{Node, Sym};
use gantry_cache::DeviceUse;

use super::capacity::{PickedShare, Sharing, capacity_without_gate, share_id};
use super::constraints::ConstraintState;
use super::counters::{self, CounterTable};
use super::pools::{Pool, gather_pools, node_selector, on_node, reachable_devices};
pub use super::prepared::{
    PreparedClaim, PreparedKind, PreparedRequest, PreparedSelection, PreparedSubRequest,
};

/// An allocation Filter found for a node.
#[derive(Debug, Clone)]
pub enum Found {
    /// The first path's: every request of every claim got its devices, which
    /// [`Allocator::find`] works out again when they are needed.
    FirstPath,
    /// The search's allocations, one per claim, without node selectors.
    Allocations(Arc<Vec<Allocation>>),
}

/// What the allocator reads besides the node: the claims, the devices already allocated,
/// and the slices not local to one node.
pub struct Allocator {
    pub claims: Vec<PreparedClaim>,
    pub allocated: Arc<dyn DeviceUse>,
    pub shared_slices: Vec<Arc<ResourceSlice>>,
}

/// The allocator features that follow gates (upstream's `structured.Features`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// DRAPrioritizedList (on by default from v1.34): without it, a claim with
    /// `firstAvailable` is an error.
    pub prioritized_list: bool,
    /// DRAPartitionableDevices (on by default from v1.36): without it, a device that
    /// consumes counters is never allocated.
    pub partitionable_devices: bool,
    /// From v1.36 the search tries each request's devices as combinations, the next
    /// device after the one picked before it (upstream's `startLocation`); before, as
    /// permutations. The first solution is the same set unless a `distinctAttribute`
    /// constraint (checked against the last device of each request) tells them apart.
    pub device_combinations: bool,
    /// DRAConsumableCapacity (on by default from v1.36): devices are shared by capacity;
    /// without it a share another claim holds takes the whole device.
    pub consumable_capacity: bool,
    /// DRAFractionalCapacityRange (on from v1.37): a request policy's range with a
    /// fractional bound or step rounds in thousandths.
    pub fractional_capacity_range: bool,
}

impl Default for Features {
    /// The defaults of v1.35.
    fn default() -> Features {
        Features {
            prioritized_list: true,
            partitionable_devices: false,
            device_combinations: false,
            consumable_capacity: false,
            fractional_capacity_range: false,
        }
    }
}

impl Features {
    /// The features of `release` (its gates).
    pub fn of(release: gantry_api::Release) -> Features {
        Features {
            prioritized_list: release.enabled(gantry_api::Gate::DRAPrioritizedList),
            partitionable_devices: release.enabled(gantry_api::Gate::DRAPartitionableDevices),
            device_combinations: release.at_least(36),
            consumable_capacity: release.enabled(gantry_api::Gate::DRAConsumableCapacity),
            fractional_capacity_range: release
                .enabled(gantry_api::Gate::DRAFractionalCapacityRange),
        }
    }
}

/// How much work one allocation took (upstream's `Stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Calls of the recursive step (upstream's `NumAllocateOneInvocations`).
    pub allocate_one_calls: u64,
}

/// Where in the pools a search for a request's next device starts: pool, slice and
/// device indexes (upstream's `deviceLocation`).
type Location = (usize, usize, usize);

/// Every device: the first device of a request, or any device before v1.36.
const ANYWHERE: Location = (0, 0, 0);

/// A device reachable from the node, with its slice.
#[derive(Clone, Copy)]
struct Candidate<'a> {
    id: DeviceId,
    device: &'a Device,
    slice: &'a Arc<ResourceSlice>,
    /// The device's index in its slice (selector verdicts are remembered by it).
    index: usize,
}

/// A request or one subrequest as the search sees it (upstream's `requestData`).
struct RequestData<'a> {
    selection: &'a PreparedSelection,
    /// The request's name.
    base: &'a str,
    /// The subrequest's own name, for a subrequest.
    sub: Option<&'a str>,
    /// The name in allocation results: the request's, or `<request>/<subrequest>`.
    result_name: Arc<str>,
    /// How many devices: the count, or how many `all_devices` there are.
    num_devices: usize,
    /// `All`: the devices, decided before the search.
    all_devices: Vec<Candidate<'a>>,
}

impl RequestData<'_> {
    /// The name in messages: the subrequest's own name, or the request's.
    fn name(&self) -> &str {
        self.sub.unwrap_or(self.base)
    }
}

/// One picked device: which request (or subrequest) of its claim it is for.
struct Picked<'a> {
    request: usize,
    sub: usize,
    candidate: Candidate<'a>,
    /// Whether its counters were taken (a later share of a shared device takes none).
    took_counters: bool,
    /// The share, for a device shared by capacity.
    share: Option<PickedShare>,
}

/// Why the search stops early.
enum Stop {
    /// The claim would get more than [`ALLOCATION_RESULTS_MAX_SIZE`] devices
    /// (upstream's `errAllocationResultMaxSizeExceeded`): try other subrequests.
    Exceeded,
    /// A broken claim or class: the whole allocation fails with this message.
    Fatal(String),
}

/// The selector cache key: device, claim, request, subrequest.
type MatchKey = (DeviceId, usize, usize, usize);

struct Search<'a> {
    allocator: &'a Allocator,
    node: &'a Node,
    pools: Vec<Pool<'a>>,
    /// Per claim, per request, one entry (`exactly`) or one per subrequest.
    data: Vec<Vec<Vec<RequestData<'a>>>>,
    matches: HashMap<MatchKey, bool, RandomState>,
    /// The devices picked so far in this search (upstream's `allocatingDevices`; two
    /// claims with admin access may pick one device).
    picking: HashSet<DeviceId, RandomState>,
    constraints: Vec<Vec<ConstraintState>>,
    result: Vec<Vec<Picked<'a>>>,
    calls: u64,
    features: Features,
    /// Per pool name, the counters the devices already allocated leave, worked out on
    /// first use. Upstream keys both tables by the pool's name alone, so two drivers'
    /// pools of one name share them; so does Gantry.
    counters_left: Vec<(Sym, CounterTable)>,
    /// Per pool name, the counters the devices picked in this search take.
    counters_taken: Vec<(Sym, CounterTable)>,
    /// The shares of shared devices picked in this search.
    sharing: Sharing,
    /// Whether any claim holds a share of any device (asked once, so that the devices
    /// of a cluster without shares cost no question each).
    any_shares: bool,
}

impl Allocator {
    /// Allocates every claim for `node` with the default features of v1.35: `Ok(Some)`
    /// with one allocation per claim (in order), `Ok(None)` when the devices do not
    /// suffice, `Err` when a claim or class is broken (a CEL error, too many devices),
    /// which aborts scheduling the pod.
    pub fn allocate(
        &self,
        node: &Node,
        local_slices: &[Arc<ResourceSlice>],
    ) -> Result<Option<Vec<Allocation>>, String> {
        self.allocate_with(node, local_slices, Features::default())
            .0
    }

    /// [`Allocator::allocate`] with the features of a release, and how much work it took.
    pub fn allocate_with(
        &self,
        node: &Node,
        local_slices: &[Arc<ResourceSlice>],
        features: Features,
    ) -> (Result<Option<Vec<Allocation>>, String>, Stats) {
        let (mut result, stats) = self.find(node, local_slices, features);
        if let Ok(Some(allocations)) = &mut result {
            self.fill_from_devices(node, local_slices, allocations, features);
        }
        (result, stats)
    }

    /// What Filter needs: [`Allocator::allocate_with`] without the allocations' node
    /// selectors and binding conditions, which [`Allocator::fill_from_devices`] adds for the
    /// node chosen.
    pub fn find(
        &self,
        node: &Node,
        local_slices: &[Arc<ResourceSlice>],
        features: Features,
    ) -> (Result<Option<Vec<Allocation>>, String>, Stats) {
        match super::first_path::allocate(self, node, local_slices) {
            Some(settled) => (settled, Stats::default()),
            None => self.search(node, local_slices, features),
        }
    }

    /// What Filter keeps for a node, as cheaply as it can: [`Found::FirstPath`] when the
    /// first path finds the devices (nothing is built; [`Allocator::find`] builds the
    /// same allocations again for the node chosen), or the search's allocations.
    pub fn find_for_filter(
        &self,
        node: &Node,
        local_slices: &[Arc<ResourceSlice>],
        features: Features,
    ) -> Result<Option<Found>, String> {
        match super::first_path::fits(self, node, local_slices) {
            Some(fits) => fits.map(|found| found.then_some(Found::FirstPath)),
            None => self
                .search(node, local_slices, features)
                .0
                .map(|found| found.map(|a| Found::Allocations(Arc::new(a)))),
        }
    }

    /// The depth-first search alone (upstream's allocator), without the first path's
    /// shortcut: what [`Allocator::find`] must always agree with.
    pub fn search(
        &self,
        node: &Node,
        local_slices: &[Arc<ResourceSlice>],
        features: Features,
    ) -> (Result<Option<Vec<Allocation>>, String>, Stats) {
        let mut search = Search {
            allocator: self,
            node,
            pools: gather_pools(node, local_slices, &self.shared_slices, features),
            data: Vec::with_capacity(self.claims.len()),
            matches: HashMap::default(),
            picking: HashSet::default(),
            constraints: Vec::with_capacity(self.claims.len()),
            result: (0..self.claims.len()).map(|_| Vec::new()).collect(),
            calls: 0,
            features,
            counters_left: Vec::new(),
            counters_taken: Vec::new(),
            sharing: Sharing::new(features.fractional_capacity_range),
            any_shares: self.allocated.has_shares(),
        };
        let result = search.run();
        let stats = Stats {
            allocate_one_calls: search.calls,
        };
        (result, stats)
    }
}

impl Allocator {
    /// What the device's pool has left of its counters after the devices allocated
    /// already, as the search starts from (for `explain`); `None` if the node does not
    /// reach the pool.
    pub(super) fn counters_left(
        &self,
        node: &Node,
        local_slices: &[Arc<ResourceSlice>],
        features: Features,
        id: DeviceId,
    ) -> Option<CounterTable> {
        let pools = gather_pools(node, local_slices, &self.shared_slices, features);
        let pool = pools.iter().find(|p| p.id == (id.driver, id.pool))?;
        Some(pool.counters_left(&*self.allocated))
    }

    /// What each allocation takes from its devices on the node chosen: where it can be
    /// used (see `node_selector`; a device that binds to the node keeps it to the node),
    /// and the binding conditions its results carry.
    pub fn fill_from_devices(
        &self,
        node: &Node,
        local_slices: &[Arc<ResourceSlice>],
        allocations: &mut [Allocation],
        features: Features,
    ) {
        let reachable = reachable_devices(node, local_slices, &self.shared_slices, features);
        let found = |id: DeviceId| {
            reachable.iter().find(|(slice, i)| {
                (slice.driver, slice.pool, slice.devices[*i].name)
                    == (id.driver, id.pool, id.device)
            })
        };
        for allocation in allocations {
            let mut binds_to_node = false;
            for result in &mut allocation.devices {
                if let Some((slice, i)) = found(result.device) {
                    let device = &slice.devices[*i];
                    result.binding = device.binding.clone();
                    binds_to_node |= device.binds_to_node;
                }
            }
            allocation.node_selector = match binds_to_node {
                true => Some(on_node(node.name)),
                false => {
                    let nodes = (allocation.devices.iter())
                        .filter_map(|d| found(d.device))
                        .map(|(slice, i)| slice.device_nodes(*i));
                    node_selector(node.name, nodes)
                }
            };
        }
    }
}

impl<'a> Search<'a> {
    fn run(&mut self) -> Result<Option<Vec<Allocation>>, String> {
        let allocator = self.allocator;
        let features = self.features;
        for (c, claim) in allocator.claims.iter().enumerate() {
            let mut min_devices = 0usize;
            let mut requests = Vec::with_capacity(claim.requests.len());
            for (r, request) in claim.requests.iter().enumerate() {
                // (After the DRAPrioritizedList refusal of subrequests, as upstream.)
                let exact = matches!(request.kind, PreparedKind::Exactly(_));
                if !features.consumable_capacity
                    && (exact || features.prioritized_list)
                    && let Some(message) = capacity_without_gate(claim, request)
                {
                    return Err(message);
                }
                match &request.kind {
                    PreparedKind::Exactly(selection) => {
                        let data = self.validate(c, r, 0, selection, &request.name, None)?;
                        min_devices += data.num_devices;
                        requests.push(vec![data]);
                    }
                    PreparedKind::FirstAvailable(subrequests) => {
                        if !features.prioritized_list {
                            return Err(format!(
                                "claim {}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                                claim.label(),
                                request.name
                            ));
                        }
                        if subrequests.is_empty() {
                            return Err(format!(
                                "claim {}, request {}: missing device class name (unsupported request type?)",
                                claim.label(),
                                request.name
                            ));
                        }
                        let mut alternatives = Vec::with_capacity(subrequests.len());
                        let mut fewest = usize::MAX;
                        // v1.35.4 sets the cache key's subrequest index only after
                        // validating each subrequest: subrequest i is checked under the
                        // key of subrequest i - 1.
                        let mut key = 0;
                        for (i, sub) in subrequests.iter().enumerate() {
                            let data = self.validate(
                                c,
                                r,
                                key,
                                &sub.selection,
                                &request.name,
                                Some(&sub.name),
                            )?;
                            key = i;
                            fewest = fewest.min(data.num_devices);
                            alternatives.push(data);
                        }
                        min_devices += fewest;
                        requests.push(alternatives);
                    }
                }
            }
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE {
                return Err(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}",
                    claim.label()
                ));
            }
            self.data.push(requests);
            let constraints = &claim.claim.spec.constraints;
            self.constraints
                .push(constraints.iter().map(ConstraintState::new).collect());
        }
        // Upstream starts the search with a fresh selector cache.
        self.matches.clear();
        match self.allocate_one(0, 0, 0, 0, false, ANYWHERE) {
            Err(Stop::Fatal(message)) => return Err(message),
            Err(Stop::Exceeded) => return Err("allocation max size exceeded".to_string()),
            Ok(false) => {
                // Invalid pools are an error only when nothing else could serve the claims.
                if self.pools.iter().any(|p| p.invalid) {
                    return Err("invalid resource pools were encountered".to_string());
                }
                return Ok(None);
            }
            Ok(true) => {}
        }
        Ok(Some(
            self.result
                .iter()
                .enumerate()
                .map(|(c, picked)| Allocation {
                    devices: (picked.iter().enumerate())
                        .map(|(i, p)| AllocatedDevice {
                            request: self.data[c][p.request][p.sub].result_name.clone(),
                            device: p.candidate.id,
                            admin_access: self.allocator.claims[c].requests[p.request].admin_access,
                            share: p.share.as_ref().map(|share| {
                                let uid = &self.allocator.claims[c].claim.uid;
                                Arc::new(DeviceShare {
                                    id: Arc::from(share_id(uid, i, p.candidate.id)),
                                    consumed: share.consumed.clone(),
                                })
                            }),
                            binding: None,
                        })
                        .collect(),
                    node_selector: None,
                })
                .collect(),
        ))
    }

    /// Upstream's `validateDeviceRequest`: how many devices the request or subrequest
    /// needs; for `All`, which ones (every selectable device of every pool, checked under
    /// the cache key `(c, r, key)`; an incomplete or invalid pool is an error).
    fn validate(
        &mut self,
        c: usize,
        r: usize,
        key: usize,
        selection: &'a PreparedSelection,
        base: &'a Arc<str>,
        sub: Option<&'a Arc<str>>,
    ) -> Result<RequestData<'a>, String> {
        let mut data = RequestData {
            selection,
            base,
            sub: sub.map(|s| &**s),
            result_name: match sub {
                None => base.clone(),
                Some(sub) => Arc::from(subrequest_ref(base, sub)),
            },
            num_devices: 0,
            all_devices: Vec::new(),
        };
        match selection.mode {
            AllocationMode::ExactCount(n) => data.num_devices = n as usize,
            AllocationMode::All => {
                let allocator = self.allocator;
                let claim = &allocator.claims[c];
                for p in 0..self.pools.len() {
                    let pool = &self.pools[p];
                    let state = if pool.incomplete {
                        Some("being updated")
                    } else if pool.invalid {
                        Some("invalid")
                    } else {
                        None
                    };
                    if let Some(state) = state {
                        return Err(format!(
                            "claim {}, request {}: asks for all devices, but resource pool {}/{} is currently {state}",
                            claim.label(),
                            data.name(),
                            pool.id.0,
                            pool.id.1
                        ));
                    }
                    for s in 0..pool.slices.len() {
                        let slice: &'a Arc<ResourceSlice> = self.pools[p].slices[s];
                        for index in 0..slice.devices.len() {
                            let candidate = make_candidate(slice, index);
                            if self.selectable((c, r, key), selection, candidate)?
                                && self.has_room(selection, candidate)
                            {
                                data.all_devices.push(candidate);
                            }
                        }
                    }
                }
                data.num_devices = data.all_devices.len();
            }
        }
        Ok(data)
    }

    /// Whether the device satisfies the class's and the request's selectors, and the node
    /// reaches it, cached under `key` (claim, request, subrequest).
    fn selectable(
        &mut self,
        key: (usize, usize, usize),
        selection: &PreparedSelection,
        candidate: Candidate<'a>,
    ) -> Result<bool, String> {
        let (c, r, s) = key;
        if let Some(&known) = self.matches.get(&(candidate.id, c, r, s)) {
            return Ok(known);
        }
        let matches = selector_verdict(
            &self.allocator.claims[c],
            selection,
            candidate.slice,
            candidate.index,
        )? && self.reaches(candidate);
        self.matches.insert((candidate.id, c, r, s), matches);
        Ok(matches)
    }

    /// Whether the node reaches the device: always, but for a device of a slice with
    /// per-device node selection, whose own nodes say (upstream's `isSelectable` checks
    /// them after the selectors).
    fn reaches(&self, candidate: Candidate<'a>) -> bool {
        match &candidate.slice.nodes {
            SliceNodes::PerDevice(nodes) => {
                nodes[candidate.index].reached_from(self.node.name, &self.node.labels)
            }
            _ => true,
        }
    }

    /// Upstream's `allocateOne`: picks the `d`th device of request `r` (subrequest `s`) of
    /// claim `c`, then the rest, recursively; true once every claim has all its devices.
    /// `in_subrequest` is set while one particular subrequest is being tried.
    fn allocate_one(
        &mut self,
        c: usize,
        r: usize,
        s: usize,
        d: usize,
        in_subrequest: bool,
        start: Location,
    ) -> Result<bool, Stop> {
        self.calls += 1;
        if c >= self.data.len() {
            return Ok(true);
        }
        if r >= self.data[c].len() {
            // Done with the claim. Going over the limit in a later claim says nothing
            // about this one's choices: only a failure.
            return match self.allocate_one(c + 1, 0, 0, 0, false, ANYWHERE) {
                Err(Stop::Exceeded) => Ok(false),
                other => other,
            };
        }
        let data = &self.data[c][r][s];
        if !in_subrequest && data.sub.is_some() {
            // Try the subrequests in order; the first that leads to a full solution wins.
            let mut all_exceeded = true;
            for sub in 0..self.data[c][r].len() {
                match self.allocate_one(c, r, sub, d, true, ANYWHERE) {
                    Err(Stop::Exceeded) => continue,
                    Err(fatal) => return Err(fatal),
                    Ok(true) => return Ok(true),
                    Ok(false) => all_exceeded = false,
                }
            }
            return if all_exceeded {
                Err(Stop::Exceeded)
            } else {
                Ok(false)
            };
        }
        let all = data.selection.mode == AllocationMode::All;
        if all && data.all_devices.is_empty() {
            // `All` needs at least one device.
            return Ok(false);
        }
        if d >= data.num_devices {
            return self.allocate_one(c, r + 1, 0, 0, false, ANYWHERE);
        }
        if self.result[c].len() + data.num_devices - d > ALLOCATION_RESULTS_MAX_SIZE {
            return Err(Stop::Exceeded);
        }
        if all {
            // The devices are known; the order in which they are taken does not matter,
            // so a device that cannot be taken means there is no solution.
            let candidate = data.all_devices[d];
            if !self.try_pick(c, r, s, candidate, true)? {
                return Ok(false);
            }
            // v1.35.4 goes on with the subrequest index reset to 0.
            return match self.allocate_one(c, r, 0, d + 1, in_subrequest, ANYWHERE) {
                Ok(true) => Ok(true),
                other => {
                    self.unpick(c);
                    other
                }
            };
        }
        let selection = data.selection;
        let start = if self.features.device_combinations {
            start
        } else {
            ANYWHERE
        };
        for p in start.0..self.pools.len() {
            if self.pools[p].incomplete || self.pools[p].invalid {
                continue;
            }
            let first_slice = if p == start.0 { start.1 } else { 0 };
            for sl in first_slice..self.pools[p].slices.len() {
                let slice: &'a Arc<ResourceSlice> = self.pools[p].slices[sl];
                let first_device = if (p, sl) == (start.0, start.1) {
                    start.2
                } else {
                    0
                };
                for index in first_device..slice.devices.len() {
                    let candidate = make_candidate(slice, index);
                    if self.unavailable(c, r, candidate.id) {
                        continue;
                    }
                    if !self
                        .selectable((c, r, s), selection, candidate)
                        .map_err(Stop::Fatal)?
                        || !self.has_room(selection, candidate)
                    {
                        continue;
                    }
                    if !self.try_pick(c, r, s, candidate, false)? {
                        continue;
                    }
                    let next = (p, sl, index + 1);
                    match self.allocate_one(c, r, s, d + 1, in_subrequest, next) {
                        Ok(true) => return Ok(true),
                        Ok(false) => self.unpick(c),
                        Err(stop) => {
                            self.unpick(c);
                            return Err(stop);
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    /// The tolerations of request `r` of claim `c` (of its subrequest `s` for a
    /// `firstAvailable` list).
    fn tolerations(&self, c: usize, r: usize, s: usize) -> &'a [DeviceToleration] {
        let request = &self.allocator.claims[c].requests[r];
        match &request.kind {
            PreparedKind::Exactly(_) => &request.tolerations,
            PreparedKind::FirstAvailable(subrequests) => &subrequests[s].tolerations,
        }
    }

    /// Upstream's checks before taking a device for claim `c`: a request with admin
    /// access may take a device other claims hold or are being given, but not one its own
    /// claim is being given; any other request only a device nobody holds or is given.
    fn unavailable(&self, c: usize, r: usize, id: DeviceId) -> bool {
        if self.allocator.claims[c].requests[r].admin_access {
            (self.result[c].iter()).any(|p| p.candidate.id == id && p.share.is_none())
        } else {
            let allocated = &*self.allocator.allocated;
            allocated.is_allocated(id)
                // Without DRAConsumableCapacity a share holds the whole device
                // (upstream's `GatherAllocatedState`).
                || (!self.features.consumable_capacity
                    && self.any_shares
                    && allocated.shares(id).is_some())
                || self.picking.contains(&id)
        }
    }

    /// With DRAConsumableCapacity, whether the device has room for the request's
    /// capacity (a request naming a capacity the device lacks skips it, as upstream's
    /// error does); without the gate, always.
    fn has_room(&self, selection: &PreparedSelection, candidate: Candidate<'a>) -> bool {
        let device = candidate.device;
        // Without shares anywhere, a device held alone and without request policies
        // always has room for a request naming no amount (each capacity taken whole).
        let always = selection.capacity.is_empty()
            && !self.any_shares
            && !device.allow_multiple_allocations
            && device.capacity.iter().all(|c| c.request_policy.is_none());
        !self.features.consumable_capacity
            || always
            || (self.sharing)
                .fits(
                    &*self.allocator.allocated,
                    candidate.id,
                    candidate.device,
                    &selection.capacity,
                )
                .is_ok()
    }

    /// Upstream's `allocateDevice`: takes the device if it is free and keeps the claim's
    /// constraints. For `All` (`must`), a constraint the device breaks is an error.
    fn try_pick(
        &mut self,
        c: usize,
        r: usize,
        s: usize,
        candidate: Candidate<'a>,
        must: bool,
    ) -> Result<bool, Stop> {
        if self.unavailable(c, r, candidate.id) {
            return Ok(false);
        }
        let shared =
            self.features.consumable_capacity && candidate.device.allow_multiple_allocations;
        let consumes = !candidate.device.consumes_counters.is_empty();
        if consumes && !self.features.partitionable_devices {
            return Ok(false);
        }
        // A device shared already had its counters taken by its first share.
        let allocated = &*self.allocator.allocated;
        let take_counters = consumes && !(shared && self.sharing.in_use(allocated, candidate.id));
        if take_counters && !self.take_counters(candidate) {
            return Ok(false);
        }
        // A refusal from here on gives the counters back (v1.36.3's `rollbackDevice`;
        // v1.36.2 kept them for the rest of the search).
        let selection = self.data[c][r][s].selection;
        let refused =
            if taints_prevent_allocation(&candidate.device.taints, self.tolerations(c, r, s)) {
                Ok(false)
            } else {
                match self.keep_constraints(c, r, s, candidate, must) {
                    Ok(true) if !self.has_room(selection, candidate) => {
                        self.drop_constraints(c, r, s);
                        Ok(false)
                    }
                    other => other,
                }
            };
        if !matches!(refused, Ok(true)) {
            if take_counters {
                self.give_counters(candidate);
            }
            return refused;
        }
        let share = if shared {
            Some(
                self.sharing
                    .take(candidate.id, candidate.device, &selection.capacity),
            )
        } else {
            self.picking.insert(candidate.id);
            None
        };
        self.result[c].push(Picked {
            request: r,
            sub: s,
            candidate,
            took_counters: take_counters,
            share,
        });
        Ok(true)
    }

    /// Takes the device back out of the claim's constraints.
    fn drop_constraints(&mut self, c: usize, r: usize, s: usize) {
        let data = &self.data[c][r][s];
        for constraint in &mut self.constraints[c] {
            constraint.remove(data.base, data.sub);
        }
    }

    /// Adds the device to the claim's `matchAttribute` constraints, or leaves them as they
    /// were when one would break (for `All`, `must`, an error).
    fn keep_constraints(
        &mut self,
        c: usize,
        r: usize,
        s: usize,
        candidate: Candidate<'a>,
        must: bool,
    ) -> Result<bool, Stop> {
        let data = &self.data[c][r][s];
        let (base, sub) = (data.base, data.sub);
        let constraints = &mut self.constraints[c];
        for i in 0..constraints.len() {
            if !constraints[i].add(base, sub, candidate.device) {
                for constraint in &mut constraints[..i] {
                    constraint.remove(base, sub);
                }
                if must {
                    return Err(Stop::Fatal(format!(
                        "claim {}, request {}: cannot add device {} because a claim constraint would not be satisfied",
                        self.allocator.claims[c].label(),
                        self.data[c][r][s].name(),
                        candidate.id
                    )));
                }
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Takes the counters the device consumes, if the pool's counters left cover them
    /// with what this search has taken already (upstream's `checkAvailableCounters`).
    fn take_counters(&mut self, candidate: Candidate<'a>) -> bool {
        let name = candidate.id.pool;
        let left = match self.counters_left.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                let table = self.counters_left_in(candidate.id);
                self.counters_left.push((name, table));
                self.counters_left.len() - 1
            }
        };
        let taken = match self.counters_taken.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                self.counters_taken.push((name, CounterTable::new()));
                self.counters_taken.len() - 1
            }
        };
        counters::change(&mut self.counters_taken[taken].1, candidate.device, true);
        let covered = counters::covers(&self.counters_left[left].1, &self.counters_taken[taken].1);
        if !covered {
            counters::change(&mut self.counters_taken[taken].1, candidate.device, false);
        }
        covered
    }

    /// Gives back the counters of a device given back.
    fn give_counters(&mut self, candidate: Candidate<'a>) {
        let name = candidate.id.pool;
        if let Some((_, taken)) = self.counters_taken.iter_mut().find(|(n, _)| *n == name) {
            counters::change(taken, candidate.device, false);
        }
    }

    /// The counters the device's pool has left after the devices allocated already, in
    /// the slices the node reaches and those of the pool it does not.
    fn counters_left_in(&self, id: DeviceId) -> CounterTable {
        match self.pools.iter().find(|p| p.id == (id.driver, id.pool)) {
            Some(pool) => pool.counters_left(&*self.allocator.allocated),
            None => CounterTable::new(),
        }
    }

    /// Gives back the device picked last for claim `c`.
    fn unpick(&mut self, c: usize) {
        let picked = self.result[c].pop().expect("a device was picked");
        self.drop_constraints(c, picked.request, picked.sub);
        if picked.took_counters {
            self.give_counters(picked.candidate);
        }
        if let Some(share) = &picked.share {
            self.sharing.give_back(picked.candidate.id, share);
            return;
        }
        // Still picked if another claim's admin access holds it too.
        let id = picked.candidate.id;
        if !self.result.iter().flatten().any(|p| p.candidate.id == id) {
            self.picking.remove(&id);
        }
    }
}

fn make_candidate(slice: &Arc<ResourceSlice>, index: usize) -> Candidate<'_> {
    let device = &slice.devices[index];
    Candidate {
        id: DeviceId {
            driver: slice.driver,
            pool: slice.pool,
            device: device.name,
        },
        device,
        slice,
        index,
    }
}

/// Whether the `index`th device of `slice` satisfies the class's and the request's
/// selectors (verdicts remembered by the selectors); an evaluation error names the class
/// or claim, the selector and the device, as upstream's does.
pub(super) fn selector_verdict(
    claim: &PreparedClaim,
    selection: &PreparedSelection,
    slice: &Arc<ResourceSlice>,
    index: usize,
) -> Result<bool, String> {
    let id = || DeviceId {
        driver: slice.driver,
        pool: slice.pool,
        device: slice.devices[index].name,
    };
    for (i, selector) in selection.class_selectors.iter().enumerate() {
        let ok = selector.matches_in(slice, index).map_err(|e| {
            format!(
                "class {}: selector #{i} on device {}: CEL runtime error: {e}",
                selection.class,
                id()
            )
        })?;
        if !ok {
            return Ok(false);
        }
    }
    for (i, selector) in selection.request_selectors.iter().enumerate() {
        let ok = selector.matches_in(slice, index).map_err(|e| {
            format!(
                "claim {}: selector #{i} on device {}: CEL runtime error: {e}",
                claim.label(),
                id()
            )
        })?;
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}
