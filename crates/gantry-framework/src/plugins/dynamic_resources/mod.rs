//! DynamicResources with structured parameters (upstream's `dynamicresources` plugin,
//! resource.k8s.io/v1): the claims a pod references must exist and be usable by it;
//! claims already allocated must be reachable from the node; the others must be
//! allocatable from the devices the node can reach, which Filter works out per node
//! (the allocator) and Reserve keeps for the chosen node. PreBind writes the allocation
//! and the pod's reservation into the claims' status ([`bound_claims`]); whoever holds
//! the cluster state (a what-if snapshot) stores them there.
//!
//! The plugin reads claims, classes and allocated devices through
//! [`ClusterState::dra`](gantry_cache::ClusterState::dra); a cluster view that does not
//! track them cannot place pods with claims, and says so.

mod allocator;
mod capacity;
pub mod cel;
mod constraints;
mod counters;
pub mod device_report;
mod extended;
mod first_path;
pub mod library;
mod pod_claims;
mod pools;
mod prepared;
pub mod queueing_hint;
pub mod score;
mod searched_allocations;
pub mod selection_verdicts;
mod semver;
mod verdict_key;
mod verdict_memo;

use crate::NodeInfos;
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use foldhash::fast::RandomState;
use gantry_api::dra::{Allocation, ClaimKey, ResourceClaim};
use gantry_api::dra_binding::{BindingStatus, DEFAULT_BINDING_TIMEOUT_SECONDS, Readiness};
use gantry_api::dra_extended::RequestMapping;
use gantry_api::release::Gate;
use gantry_api::{NodeSelector, Pod, Sym};
use gantry_cache::NodeInfo;

pub use allocator::{
    Allocator, Features, Found, PreparedClaim, PreparedKind, PreparedRequest, PreparedSelection,
    PreparedSubRequest, Stats,
};
pub use capacity::shares_overrun_at_bind;
use cel::Selector;
pub use counters::overrun_at_bind;
pub use extended::{asks_for_served_resources, extended_device_totals};
use pod_claims::pod_claim;
use searched_allocations::SearchedAllocations;
use selection_verdicts::SelectionVerdicts;
use smallvec::SmallVec;

use crate::{
    Cluster, CycleState, Detail, FilterPlugin, Plugin, PreBindPlugin, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, ReservePlugin, ScorePlugin, Status, VerdictKey,
};

pub const NAME: &str = "DynamicResources";

pub const REASON_CANNOT_ALLOCATE: &str = "cannot allocate all claims";
pub const REASON_NOT_AVAILABLE: &str = "resourceclaim not available on the node";
pub const REASON_IN_USE: &str = "resourceclaim in use";
/// Gantry's own: the cluster view holds no DRA state, so claims cannot be checked.
pub const REASON_NOT_TRACKED: &str =
    "dynamic resource allocation is not tracked by this cluster view";

/// Compiled CEL selectors, by expression, shared by all pods (an expression that does not
/// compile is kept with its error, so that it is not parsed again for every pod).
#[derive(Default)]
pub struct DynamicResources {
    selectors: Mutex<HashMap<Arc<str>, Compiled, RandomState>>,
    /// The verdicts of each list of selectors together, by the selectors' addresses in
    /// order (compiled selectors are kept in `selectors`, so an address names one).
    selections: Mutex<HashMap<SelectorList, Arc<SelectionVerdicts>, RandomState>>,
    /// The release whose CEL environment selectors compile in (the default: the newest).
    release: gantry_api::Release,
    /// How long PreBind waits for binding conditions, in seconds (DynamicResourcesArgs'
    /// `bindingTimeout`); `None` where the release does not serve binding conditions.
    binding_timeout: Option<i64>,
    /// Numbers for the pods' claim specs, in Filter's verdict keys.
    claim_shapes: verdict_key::ClaimShapes,
}

impl DynamicResources {
    /// The plugin of `release`: its selectors get that release's CEL libraries.
    pub fn for_release(release: gantry_api::Release) -> DynamicResources {
        let binding = release.enabled(Gate::DRADeviceBindingConditions)
            && release.enabled(Gate::DRAResourceClaimDeviceStatus);
        DynamicResources {
            selectors: Mutex::default(),
            selections: Mutex::default(),
            release,
            binding_timeout: binding.then_some(DEFAULT_BINDING_TIMEOUT_SECONDS),
            claim_shapes: Default::default(),
        }
    }

    /// The plugin with DynamicResourcesArgs' `bindingTimeout` (seconds), which the
    /// configuration accepts only where binding conditions are served.
    pub fn with_binding_timeout(mut self, seconds: i64) -> DynamicResources {
        self.binding_timeout = self.binding_timeout.map(|_| seconds);
        self
    }
}

/// A selector compiled, or why it does not compile.
type Compiled = Result<Arc<Selector>, String>;

/// Selectors' addresses, in the order they are evaluated.
type SelectorList = SmallVec<[usize; 4]>;

/// A node's allocator: the pod's own (borrowed from its state), or one of its variants
/// with the claim for the extended resources the node leaves to devices.
type NodeAllocator<'s> = Cow<'s, Arc<Allocator>>;

/// The pod's claims and what Filter and Reserve worked out for them.
#[derive(Clone, Default)]
struct PodClaims {
    /// The claims, in the order of `spec.resourceClaims`.
    claims: Vec<Arc<ResourceClaim>>,
    /// For claims already allocated: where the allocation can be used (`None`: anywhere).
    available_on: Vec<Option<NodeSelector>>,
    /// For the claims still to allocate; `None` when all are allocated.
    allocator: Option<Arc<Allocator>>,
    /// Filter's search allocations per node (Filter runs on several nodes, possibly at
    /// once).
    node_allocations: Arc<SearchedAllocations>,
    /// Allocated claims some node could not use (their allocation is elsewhere), by
    /// index: PostFilter may free one.
    unavailable: Arc<Mutex<BTreeSet<usize>>>,
    /// Reserve's choice: the node and its allocations (the user claims' first, then the
    /// extended-resource claim's, if the node needs one).
    reserved: Option<(Sym, Arc<Vec<Allocation>>)>,
    /// The pod's extended resources served by devices (DRAExtendedResource), if any
    /// (boxed: most pods have none).
    extended: Option<Box<ExtendedState>>,
    /// PreBind's result: the claims as written back, allocated and reserved for the pod.
    bound: Vec<Arc<ResourceClaim>>,
    /// The plugin's binding timeout, in seconds, where the release serves binding
    /// conditions.
    binding_timeout: Option<i64>,
    /// The allocator's features, as the release's gates set them.
    features: Features,
    /// The DRA store's epoch at PreFilter (see `DraState::verdict_epoch`).
    verdict_epoch: Option<u64>,
}

/// What DynamicResources knows of a pod's extended resources served by devices.
#[derive(Clone)]
struct ExtendedState {
    found: Arc<extended::ExtendedClaim>,
    /// Reserve's claim for them on the chosen node, unallocated, and which container uses
    /// which of its requests; `None` where the node serves them itself.
    reserved: Option<(Arc<ResourceClaim>, Arc<[RequestMapping]>)>,
}

/// The claims PreBind wrote for the pod (allocation and `reservedFor`), to be stored by
/// whoever keeps the cluster state. Empty when the pod uses no claims.
pub fn bound_claims(state: &CycleState) -> &[Arc<ResourceClaim>] {
    state
        .read::<PodClaims>(NAME)
        .map_or(&[], |s| s.bound.as_slice())
}

/// The claims Reserve allocated for the pod, each with its new allocation (not yet
/// reserved for the pod): the scheduler assumes them in its cache, so that the next
/// cycle sees their devices taken before the binding writes them.
pub fn reserved_allocations(state: &CycleState) -> Vec<Arc<ResourceClaim>> {
    let Some(s) = state.read::<PodClaims>(NAME) else {
        return Vec::new();
    };
    let Some((_, allocations)) = &s.reserved else {
        return Vec::new();
    };
    s.to_allocate()
        .zip(allocations.iter())
        .map(|(claim, allocation)| {
            let mut allocated = ResourceClaim::clone(claim);
            allocated.allocation = Some(Arc::new(allocation.clone()));
            Arc::new(allocated)
        })
        .collect()
}

/// Which container uses which request of the claim made for the pod's extended resources
/// (`status.extendedResourceClaimStatus.requestMappings`, which `gantry run` writes), with
/// the claim's name; `None` when the pod got no such claim.
pub fn extended_resource_mappings(state: &CycleState) -> Option<(Arc<str>, Arc<[RequestMapping]>)> {
    let s = state.read::<PodClaims>(NAME)?;
    let (claim, mappings) = s.extended.as_ref()?.reserved.as_ref()?;
    Some((claim.name.clone(), mappings.clone()))
}

/// How long PreBind is to wait for the binding conditions of the pod's claims, in seconds
/// (DRADeviceBindingConditions): `Some` when a claim Reserve allocated, or one allocated
/// before, has devices with binding conditions not all True yet; `None` otherwise or
/// where the release does not serve them. Known from Reserve on, so that a simulation can
/// give the binding its time.
pub fn binding_wait(state: &CycleState) -> Option<i64> {
    let s = state.read::<PodClaims>(NAME)?;
    let timeout = s.binding_timeout?;
    // Allocations Reserve made are fresh: no driver has answered them yet.
    let mut reserved = (s.reserved.iter()).flat_map(|(_, allocations)| allocations.iter());
    let mut allocated = s.claims.iter().filter(|c| c.allocation.is_some());
    let waits = reserved.any(Allocation::has_binding_conditions)
        || allocated.any(|c| c.binding_readiness() != Readiness::Ready);
    waits.then_some(timeout)
}

/// The claims Reserve allocated for the pod (the others it only reserves).
pub fn allocated_now(state: &CycleState) -> Vec<ClaimKey> {
    let Some(s) = state.read::<PodClaims>(NAME) else {
        return Vec::new();
    };
    if s.reserved.is_none() {
        return Vec::new();
    }
    s.to_allocate().map(|c| c.key()).collect()
}

/// What DynamicResources' PostFilter concludes for a pod no node fits.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimsPostFilter {
    /// PreFilter never ran (an earlier PreFilter rejected the pod outright): upstream
    /// fails reading its state, `not found`, and no other PostFilter plugin runs.
    StateNotFound,
    /// The pod has no claims, or PreFilter rejected them.
    NoNewClaims,
    /// An allocated claim that kept the pod off some node, used by no other pod, is
    /// freed: this is the claim as the cycle saw it, which the write is conditioned on
    /// (upstream's `UpdateStatus` carries its resourceVersion); the writer clears its
    /// allocation and reservations.
    Deallocate(Arc<ResourceClaim>),
    /// The claim an earlier attempt made for the pod's extended resources, left behind, is
    /// deleted (the claim as the cycle saw it, which the delete is conditioned on).
    DeleteLeftBehind(Arc<ResourceClaim>),
    /// Nothing to free.
    StillNotSchedulable,
}

impl ClaimsPostFilter {
    /// The reason upstream's PostFilter gives.
    pub fn reason(&self) -> &'static str {
        match self {
            ClaimsPostFilter::StateNotFound => "not found",
            ClaimsPostFilter::NoNewClaims => "no new claims to deallocate",
            ClaimsPostFilter::Deallocate(_) => "deallocation of ResourceClaim completed",
            ClaimsPostFilter::DeleteLeftBehind(_) => "deletion of ResourceClaim completed",
            ClaimsPostFilter::StillNotSchedulable => "still not schedulable",
        }
    }
}

/// Upstream's PostFilter: frees one claim whose allocation kept the pod off a node, if
/// no other pod uses it (upstream picks one at random from a map; Gantry the first, in
/// `spec.resourceClaims` order, so that runs repeat).
pub fn post_filter(state: &CycleState, pod: &Pod) -> ClaimsPostFilter {
    // PreFilter skips pods without claims; that it did shows it ran.
    let skipped = state.is_filter_skipped(NAME);
    let Some(s) = state.read::<PodClaims>(NAME) else {
        return if skipped {
            ClaimsPostFilter::NoNewClaims
        } else {
            ClaimsPostFilter::StateNotFound
        };
    };
    if s.claims.is_empty() && s.extended.is_none() {
        return ClaimsPostFilter::NoNewClaims;
    }
    let unavailable = s
        .unavailable
        .lock()
        .expect("unavailable claims lock poisoned");
    for &index in unavailable.iter() {
        let claim = &s.claims[index];
        let only_this_pod = match claim.reserved_for.as_slice() {
            [] => true,
            [one] => one.uid == pod.uid,
            _ => false,
        };
        if only_this_pod {
            return ClaimsPostFilter::Deallocate(claim.clone());
        }
    }
    let left_behind = (s.extended.as_ref()).and_then(|e| e.found.left_behind.clone());
    match left_behind {
        Some(claim) => ClaimsPostFilter::DeleteLeftBehind(claim),
        None => ClaimsPostFilter::StillNotSchedulable,
    }
}

impl DynamicResources {
    /// The compiled selectors of `owner` (a class or a claim) listed at `field`; an error
    /// names the owner, the field and what is wrong, as the API server words it.
    fn selectors(
        &self,
        expressions: &[Arc<str>],
        owner: &str,
        field: &str,
    ) -> Result<Arc<[Arc<Selector>]>, Status> {
        let mut cache = self.selectors.lock().expect("selector cache lock poisoned");
        expressions
            .iter()
            .enumerate()
            .map(|(i, expression)| {
                let compiled = cache.entry(expression.clone()).or_insert_with(|| {
                    Selector::compile_for(expression, self.release).map(Arc::new)
                });
                compiled.clone().map_err(|e| {
                    Status::error(format!("{owner}: {field}[{i}].cel.expression: {e}"))
                })
            })
            .collect()
    }

    /// The verdicts of the class's and the request's selectors together, shared with
    /// every request of the same selectors.
    fn together(
        &self,
        class_selectors: &[Arc<Selector>],
        request_selectors: &[Arc<Selector>],
    ) -> Arc<SelectionVerdicts> {
        let all = || class_selectors.iter().chain(request_selectors);
        let key: SelectorList = all().map(|s| Arc::as_ptr(s) as usize).collect();
        let mut selections = self.selections.lock().expect("selection lock poisoned");
        selections
            .entry(key)
            .or_insert_with(|| Arc::new(SelectionVerdicts::new(all().cloned())))
            .clone()
    }

    /// Prepares the unallocated claims' requests: classes must exist (every subrequest's
    /// too, named `<request>/<subrequest>` as upstream's PreFilter names them), selectors
    /// compile.
    fn prepare(
        &self,
        claim: &Arc<ResourceClaim>,
        class_named: &dyn Fn(Sym) -> Option<Arc<gantry_api::dra::DeviceClass>>,
    ) -> Result<PreparedClaim, Status> {
        let owner = format!("claim {}/{}", claim.namespace, claim.name);
        let selection = |name: &str,
                         class: Sym,
                         selectors: &[Arc<str>],
                         mode: gantry_api::dra::AllocationMode,
                         field: &str|
         -> Result<PreparedSelection, Status> {
            let Some(class) = class_named(class) else {
                return Err(Status::unresolvable(format!(
                    "request {name}: device class {class} does not exist"
                )));
            };
            let class_selectors = self.selectors(
                &class.selectors,
                &format!("class {}", class.name),
                "spec.selectors",
            )?;
            let request_selectors = self.selectors(selectors, &owner, field)?;
            let together = self.together(&class_selectors, &request_selectors);
            Ok(PreparedSelection {
                class: class.name,
                mode,
                class_selectors,
                request_selectors,
                together,
                capacity: Vec::new(),
            })
        };
        let mut requests = Vec::with_capacity(claim.spec.requests.len());
        for (j, request) in claim.spec.requests.iter().enumerate() {
            requests.push(match &request.kind {
                gantry_api::dra::RequestKind::Exactly(exact) => PreparedRequest {
                    admin_access: exact.admin_access,
                    tolerations: exact.tolerations.clone(),
                    ..PreparedRequest::exactly(
                        request.name.clone(),
                        PreparedSelection {
                            capacity: exact.capacity.clone(),
                            ..selection(
                                &request.name,
                                exact.device_class,
                                &exact.selectors,
                                exact.mode,
                                &format!("spec.devices.requests[{j}].exactly.selectors"),
                            )?
                        },
                    )
                },
                gantry_api::dra::RequestKind::FirstAvailable(subrequests) => {
                    let mut prepared = Vec::with_capacity(subrequests.len());
                    for (k, sub) in subrequests.iter().enumerate() {
                        prepared.push(PreparedSubRequest {
                            name: sub.name.clone(),
                            selection: PreparedSelection {
                                capacity: sub.capacity.clone(),
                                ..selection(
                                    &gantry_api::dra::subrequest_ref(&request.name, &sub.name),
                                    sub.device_class,
                                    &sub.selectors,
                                    sub.mode,
                                    &format!(
                                        "spec.devices.requests[{j}].firstAvailable[{k}].selectors"
                                    ),
                                )?
                            },
                            tolerations: sub.tolerations.clone(),
                        });
                    }
                    PreparedRequest::first_available(request.name.clone(), prepared)
                }
            });
        }
        Ok(PreparedClaim {
            claim: claim.clone(),
            requests,
        })
    }
}

impl Plugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        queueing_hint::EVENTS
    }

    fn signs_pods(&self) -> bool {
        true
    }

    /// A pod with claims is not signable: its devices change what is left on a node.
    fn sign(&self, pod: &Pod, _signature: &mut crate::Signature) -> bool {
        pod.resource_claims.is_empty()
    }

    /// Nor is a pod given devices for its extended resources.
    fn signs_after_pre_filter(&self, state: &CycleState) -> bool {
        state
            .read::<PodClaims>(NAME)
            .is_none_or(|s| s.extended.is_none())
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let extended = match self.extended_claim(pod, cluster) {
            Ok(extended) => extended,
            Err(status) => {
                state.write(NAME, PodClaims::default());
                return (None, status);
            }
        };
        if pod.resource_claims.is_empty() && extended.is_none() {
            return (None, Status::skip());
        }
        // As upstream: the state is written before anything can fail, so that PostFilter
        // tells "PreFilter rejected the pod" (no claims to free) from "never ran".
        state.write(NAME, PodClaims::default());
        let Some(dra) = cluster.nodes.dra() else {
            return (None, Status::unresolvable(REASON_NOT_TRACKED));
        };
        let mut claims = Vec::with_capacity(pod.resource_claims.len());
        for entry in &pod.resource_claims {
            match pod_claim(pod, entry, |key| dra.claim(key)) {
                Ok(claim) => claims.push(claim),
                Err(message) => return (None, Status::unresolvable(message)),
            }
        }
        let mut available_on = Vec::with_capacity(claims.len());
        let mut to_allocate = Vec::new();
        for claim in &claims {
            match &claim.allocation {
                Some(allocation) => {
                    if !claim.can_be_reserved() && !claim.is_reserved_for(&pod.uid) {
                        return (None, Status::unresolvable(REASON_IN_USE));
                    }
                    // A claim whose binding failed or timed out is usable nowhere, so that
                    // PostFilter may free it (upstream's Filter, DRADeviceBindingConditions).
                    let blocked = (self.binding_timeout)
                        .is_some_and(|t| binding_refusal(claim, state.now(), t).is_some());
                    available_on.push(match blocked {
                        true => Some(NodeSelector { terms: Vec::new() }),
                        false => allocation.node_selector.clone(),
                    });
                }
                None => {
                    available_on.push(None);
                    if dra.allocation_in_flight(claim.key()) {
                        return (
                            None,
                            Status::unresolvable(format!(
                                "resource claim {}/{} is in the process of being allocated",
                                claim.namespace, claim.name
                            )),
                        );
                    }
                    match self.prepare(claim, &|c| dra.device_class(c)) {
                        Ok(prepared) => to_allocate.push(prepared),
                        Err(status) => return (None, status),
                    }
                }
            }
        }
        let allocator = (!to_allocate.is_empty()).then(|| {
            Arc::new(Allocator {
                claims: to_allocate,
                allocated: dra.device_use(),
                shared_slices: dra.shared_slices(),
            })
        });
        state.write(
            NAME,
            PodClaims {
                claims,
                available_on,
                allocator,
                node_allocations: Arc::default(),
                features: Features::of(self.release),
                binding_timeout: self.binding_timeout,
                verdict_epoch: dra.verdict_epoch(),
                extended: extended.map(|found| {
                    Box::new(ExtendedState {
                        found,
                        reserved: None,
                    })
                }),
                ..PodClaims::default()
            },
        );
        (None, Status::success())
    }
}

/// Why upstream's Filter finds an allocated claim with binding conditions unusable: a
/// failure condition True, or conditions still pending `timeout` seconds after the
/// allocation; `None` when it is usable.
fn binding_refusal(claim: &ResourceClaim, now: i64, timeout: i64) -> Option<String> {
    match claim.binding_readiness() {
        Readiness::Ready => None,
        Readiness::Failed(message) => Some(format!("its binding failed: {message}")),
        Readiness::Pending if claim.binding_timed_out(now, timeout) => Some(format!(
            "its binding conditions were not all True {timeout} s after its allocation"
        )),
        Readiness::Pending => None,
    }
}

impl FilterPlugin for DynamicResources {
    fn details(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Vec<Detail> {
        // Devices are marked chosen only where Filter passes: `found_on` answers for such
        // nodes alone.
        let passed = self.filter(state, pod, node).is_success();
        let Some(s) = state.read::<PodClaims>(NAME) else {
            return Vec::new();
        };
        let mut details = match self.node_allocator(s, pod, node) {
            Ok((_, Some(allocator))) => self.device_details(s, &allocator, node, passed),
            _ => Vec::new(),
        };
        details.extend(self.binding_details(s, state.now()));
        details
    }

    fn filter_verdict_key(&self, state: &CycleState, _: &Pod, key: &mut VerdictKey) -> bool {
        (state.read::<PodClaims>(NAME))
            .is_none_or(|s| verdict_key::append(&self.claim_shapes, s, key))
    }

    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PodClaims>(NAME) else {
            return Status::success();
        };
        let Some(n) = node.node() else {
            return Status::error("node not found");
        };
        // Most pods ask for no extended resources: their allocator is the same everywhere.
        let (variant, allocator) = match &s.extended {
            None => (0, s.allocator.as_ref().map(Cow::Borrowed)),
            Some(_) => match self.node_allocator(s, pod, node) {
                Ok(found) => found,
                Err(status) => return status,
            },
        };
        // Extended resources the node serves itself, and no claims of the pod's own.
        if s.claims.is_empty() && variant == 0 {
            return Status::success();
        }
        let unavailable_here = |sel: &Option<NodeSelector>| {
            sel.as_ref()
                .is_some_and(|sel| !sel.matches(n.name, &n.labels))
        };
        // Looked for before anything is collected: most pods' claims are all usable.
        let unavailable: Vec<usize> = if s.available_on.iter().any(unavailable_here) {
            (s.available_on.iter().enumerate())
                .filter(|(_, sel)| unavailable_here(sel))
                .map(|(i, _)| i)
                .collect()
        } else {
            Vec::new()
        };
        let allocations = match &allocator {
            None => None,
            Some(allocator) => {
                match allocator.find_for_filter(n, node.resource_slices(), s.features) {
                    Err(message) => return Status::error(message),
                    Ok(None) => return Status::unresolvable(REASON_CANNOT_ALLOCATE),
                    Ok(Some(found)) => Some(found),
                }
            }
        };
        if !unavailable.is_empty() {
            s.unavailable
                .lock()
                .expect("unavailable claims lock poisoned")
                .extend(unavailable);
            return Status::unresolvable(REASON_NOT_AVAILABLE);
        }
        if let Some(found) = allocations {
            s.node_allocations.keep(n.name, found);
        }
        Status::success()
    }
}

impl PodClaims {
    /// Reserve's claim for the pod's extended resources, with its mappings.
    fn reserved_extended(&self) -> Option<&(Arc<ResourceClaim>, Arc<[RequestMapping]>)> {
        self.extended.as_ref()?.reserved.as_ref()
    }

    /// The pod's claims still to allocate, then the claim Reserve made for its extended
    /// resources: the claims Reserve's allocations are for, in their order.
    fn to_allocate(&self) -> impl Iterator<Item = &Arc<ResourceClaim>> {
        (self.claims.iter().filter(|c| c.allocation.is_none()))
            .chain(self.reserved_extended().map(|(claim, _)| claim))
    }

    /// What Filter found on `node`, a node that passed it (asked of no other): the search's
    /// allocations where it searched, otherwise the first path's (when there were claims
    /// to allocate).
    fn found_on(&self, node: Sym, allocator: Option<&Arc<Allocator>>) -> Option<Found> {
        let searched = self.node_allocations.get(node);
        searched.or_else(|| allocator.is_some().then_some(Found::FirstPath))
    }

    /// Filter's allocations for a node that passed it, built if Filter kept only that the
    /// first path found them (node selectors left out); `None` without claims to allocate.
    /// `allocator` is the node's (see `DynamicResources::node_allocator`).
    fn allocations_on(
        &self,
        node: &NodeInfo,
        allocator: Option<&Arc<Allocator>>,
    ) -> Option<Result<Arc<Vec<Allocation>>, String>> {
        let found = self.found_on(node.name(), allocator)?;
        Some(match found {
            Found::Allocations(allocations) => Ok(allocations),
            Found::FirstPath => {
                let (allocator, n) = (allocator?, node.node()?);
                match allocator.find(n, node.resource_slices(), self.features).0 {
                    Ok(Some(allocations)) => Ok(Arc::new(allocations)),
                    Ok(None) => Err("the devices found at Filter are taken now".to_string()),
                    Err(message) => Err(message),
                }
            }
        })
    }
}

impl DynamicResources {
    /// The pod's allocated claims that no node may use because of their binding
    /// conditions, and why: the failure their driver reported, or a wait past the timeout.
    fn binding_details(&self, s: &PodClaims, now: i64) -> Vec<Detail> {
        let Some(timeout) = self.binding_timeout else {
            return Vec::new();
        };
        (s.claims.iter())
            .filter_map(|claim| {
                let reason = binding_refusal(claim, now, timeout)?;
                let devices: Vec<String> = (claim.allocation.iter())
                    .flat_map(|a| &a.devices)
                    .map(|d| d.device.to_string())
                    .collect();
                Some(Detail {
                    item: format!("claim {}/{}", claim.namespace, claim.name),
                    state: format!("allocated {}", devices.join(", ")),
                    reason: Some(reason),
                    score: None,
                    chosen: false,
                })
            })
            .collect()
    }

    /// For `gantry explain`: every device the node reaches, per request of the claims
    /// still to allocate, with its verdict; the devices Filter picked are marked chosen;
    /// a claim whose constraints (`matchAttribute`, `distinctAttribute`) are what fails is
    /// said to be.
    fn device_details(
        &self,
        s: &PodClaims,
        allocator: &Arc<Allocator>,
        node: &NodeInfo,
        passed: bool,
    ) -> Vec<Detail> {
        let Some(n) = node.node() else {
            return Vec::new();
        };
        let found = passed
            .then(|| s.allocations_on(node, Some(allocator)))
            .flatten();
        let picked: Vec<(Arc<str>, gantry_api::dra::DeviceId)> = match found {
            Some(Ok(allocations)) => allocations
                .iter()
                .flat_map(|a| a.devices.iter().map(|d| (d.request.clone(), d.device)))
                .collect(),
            _ => Vec::new(),
        };
        let report = device_report::node_devices(allocator, n, node.resource_slices(), s.features);
        let mut details: Vec<Detail> = report
            .requests
            .iter()
            .flat_map(|r| {
                let wants = r.count.map_or("all".to_string(), |n| n.to_string());
                r.devices.iter().map(move |(device, verdict)| Detail {
                    item: format!("{device}"),
                    state: format!(
                        "claim {}, request {} ({wants} of class {})",
                        r.claim, r.request, r.class
                    ),
                    reason: verdict.reason(),
                    score: None,
                    chosen: false,
                })
            })
            .collect();
        for detail in &mut details {
            detail.chosen = picked.iter().any(|(request, device)| {
                detail.item == device.to_string()
                    && detail.state.contains(&format!("request {request} "))
            });
        }
        for claim in report.blocked_by_constraints {
            details.push(Detail {
                item: format!("claim {claim}"),
                state: "constraints (matchAttribute, distinctAttribute)".to_string(),
                reason: Some(
                    "enough devices match each request, but no choice of them keeps the constraints"
                        .to_string(),
                ),
                score: None,
                chosen: false,
            });
        }
        details
    }
}

impl PreScorePlugin for DynamicResources {
    /// Gantry's own step (upstream's plugin has no PreScore): Score is skipped where it
    /// would give every node 0 — no claims, or no `firstAvailable` request and as many
    /// claims to allocate as claims (computeScore reads only subrequests, and fails only
    /// when the claims outnumber the allocations).
    fn pre_score(
        &self,
        state: &mut CycleState,
        _pod: &Pod,
        _nodes: &NodeInfos<'_>,
        _cluster: Cluster<'_>,
    ) -> Status {
        let Some(s) = state.read::<PodClaims>(NAME) else {
            return Status::skip();
        };
        let subrequests = s.claims.iter().any(|c| {
            c.spec
                .requests
                .iter()
                .any(|r| !r.first_available().is_empty())
        });
        let all_to_allocate = s.claims.iter().all(|c| c.allocation.is_none());
        if subrequests || !all_to_allocate {
            Status::success()
        } else {
            Status::skip()
        }
    }
}

impl ScorePlugin for DynamicResources {
    /// Upstream's `Score`: 0 without claims or without an allocation Filter kept for the
    /// node; otherwise `computeScore` (see [`score`]), whose error fails the cycle.
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<PodClaims>(NAME) else {
            return Ok(0);
        };
        let reads_allocated = self.release.dynamic_resources_scores_allocated_claims();
        if s.claims.is_empty()
            || (reads_allocated && !self.release.enabled(gantry_api::Gate::DRAPrioritizedList))
        {
            return Ok(0);
        }
        let allocator = match self.node_allocator(s, pod, node) {
            Ok((_, allocator)) => allocator,
            Err(_) => return Ok(0),
        };
        match s.found_on(node.name(), allocator.as_deref()) {
            None => Ok(0),
            Some(Found::Allocations(allocations)) => {
                score::first_available_score(&s.claims, &allocations, reads_allocated)
                    .map_err(Status::error)
            }
            // No subrequests on the first path: what computeScore gives without reading
            // devices (0, or its error when claims outnumber the allocations).
            Some(Found::FirstPath) => {
                let to_allocate = s.claims.iter().filter(|c| c.allocation.is_none()).count();
                score::first_path_score(s.claims.len(), to_allocate, reads_allocated)
                    .map_err(Status::error)
            }
        }
    }

    fn normalize(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        score::normalize(scores);
        Status::success()
    }
}

impl ReservePlugin for DynamicResources {
    /// Keeps Filter's allocations for the chosen node, with where each can be used
    /// (Filter leaves that out: it is needed for one node only), and the claim for the
    /// pod's extended resources where the node leaves them to devices.
    fn reserve(&self, state: &mut CycleState, pod: &Pod, info: &NodeInfo) -> Status {
        let node = info.name();
        let Some(s) = state.read_mut::<PodClaims>(NAME) else {
            return Status::success();
        };
        let (variant, allocator) = match self.node_allocator(s, pod, info) {
            Ok(found) => found,
            Err(status) => return status,
        };
        let Some(allocator) = allocator else {
            return Status::success();
        };
        let (Some(found), Some(n)) = (s.allocations_on(info, Some(&allocator)), info.node()) else {
            return Status::error("claim allocation not found for node");
        };
        let allocations = match found {
            Ok(allocations) => allocations,
            Err(message) => return Status::error(message),
        };
        let mut allocations = Vec::clone(&allocations);
        allocator.fill_from_devices(n, info.resource_slices(), &mut allocations, s.features);
        s.reserved = Some((node, Arc::new(allocations)));
        if let Some(extended) = &mut s.extended {
            extended.reserved = (variant != 0).then(|| {
                let (claim, mappings) = extended.found.claim_for(pod, variant);
                (Arc::new(claim), Arc::from(mappings))
            });
        }
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &Pod, _node: Sym) {
        if let Some(s) = state.read_mut::<PodClaims>(NAME) {
            s.reserved = None;
            if let Some(extended) = &mut s.extended {
                extended.reserved = None;
            }
            s.bound.clear();
        }
    }
}

impl PreBindPlugin for DynamicResources {
    /// Writes each claim's status: the allocation Reserve kept (for claims that had
    /// none) and the pod in `reservedFor`; the claim for the pod's extended resources
    /// is new, made with its allocation (upstream creates it, then writes its status).
    fn pre_bind(&self, state: &mut CycleState, pod: &Pod, node: Sym) -> Status {
        let state_now = state.now();
        let Some(s) = state.read_mut::<PodClaims>(NAME) else {
            return Status::success();
        };
        let needs_allocations = s.to_allocate().next().is_some();
        let mut fresh = match &s.reserved {
            Some((reserved_on, allocations)) if *reserved_on == node => {
                allocations.iter().cloned().collect::<Vec<_>>().into_iter()
            }
            _ if !needs_allocations => Vec::new().into_iter(),
            _ => return Status::error("claim allocation not reserved for node"),
        };
        let mut bound = Vec::with_capacity(s.claims.len() + 1);
        let extended = s.reserved_extended().map(|(claim, _)| claim);
        for claim in s.claims.iter().chain(extended) {
            let mut updated = ResourceClaim::clone(claim);
            if updated.allocation.is_none() {
                let Some(allocation) = fresh.next() else {
                    return Status::error(format!(
                        "internal error, no allocation for claim {}",
                        claim.name
                    ));
                };
                // Upstream's `bindClaim` stamps the allocation where binding conditions
                // are served, so that a binding waiting for them can time out.
                if self.binding_timeout.is_some() && allocation.has_binding_conditions() {
                    updated.binding_status = Some(Arc::new(BindingStatus {
                        allocated_at: Some(state_now),
                        device_status: Vec::new(),
                    }));
                }
                updated.allocation = Some(Arc::new(allocation));
            }
            if !updated.is_reserved_for(&pod.uid) {
                if !updated.can_be_reserved() {
                    return Status::unresolvable(REASON_IN_USE);
                }
                updated.reserved_for.push(extended::consumer(pod));
            }
            bound.push(Arc::new(updated));
        }
        s.bound = bound;
        Status::success()
    }
}
