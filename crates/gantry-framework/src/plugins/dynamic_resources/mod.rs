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
pub mod cel;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use foldhash::fast::RandomState;
use gantry_api::dra::{Allocation, ClaimConsumer, ClaimKey, ResourceClaim};
use gantry_api::{NodeSelector, Pod, Sym};
use gantry_cache::NodeInfo;

pub use allocator::{Allocator, PreparedClaim, PreparedRequest};
use cel::Selector;

use crate::{
    Cluster, CycleState, FilterPlugin, Plugin, PreBindPlugin, PreFilterPlugin, PreFilterResult,
    ReservePlugin, Status,
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
}

/// A selector compiled, or why it does not compile.
type Compiled = Result<Arc<Selector>, String>;

/// Filter's allocations for the pod's claims, per node.
type NodeAllocations = HashMap<Sym, Arc<Vec<Allocation>>, RandomState>;

/// The pod's claims and what Filter and Reserve worked out for them.
#[derive(Clone)]
struct PodClaims {
    /// The claims, in the order of `spec.resourceClaims`.
    claims: Vec<Arc<ResourceClaim>>,
    /// For claims already allocated: where the allocation can be used (`None`: anywhere).
    available_on: Vec<Option<NodeSelector>>,
    /// For the claims still to allocate; `None` when all are allocated.
    allocator: Option<Arc<Allocator>>,
    /// Filter's allocations per node (Filter runs on several nodes, possibly at once).
    node_allocations: Arc<Mutex<NodeAllocations>>,
    /// Reserve's choice: the node and its allocations.
    reserved: Option<(Sym, Arc<Vec<Allocation>>)>,
    /// PreBind's result: the claims as written back, allocated and reserved for the pod.
    bound: Vec<Arc<ResourceClaim>>,
}

/// The claims PreBind wrote for the pod (allocation and `reservedFor`), to be stored by
/// whoever keeps the cluster state. Empty when the pod uses no claims.
pub fn bound_claims(state: &CycleState) -> &[Arc<ResourceClaim>] {
    state
        .read::<PodClaims>(NAME)
        .map_or(&[], |s| s.bound.as_slice())
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
                let compiled = cache
                    .entry(expression.clone())
                    .or_insert_with(|| Selector::compile(expression).map(Arc::new));
                compiled.clone().map_err(|e| {
                    Status::error(format!("{owner}: {field}[{i}].cel.expression: {e}"))
                })
            })
            .collect()
    }

    /// Prepares the unallocated claims' requests: classes must exist, selectors compile.
    fn prepare(
        &self,
        claim: &Arc<ResourceClaim>,
        dra: &dyn gantry_cache::DraState,
    ) -> Result<PreparedClaim, Status> {
        let mut requests = Vec::with_capacity(claim.spec.requests.len());
        for (j, request) in claim.spec.requests.iter().enumerate() {
            let Some(class) = dra.device_class(request.device_class) else {
                return Err(Status::unresolvable(format!(
                    "request {}: device class {} does not exist",
                    request.name, request.device_class
                )));
            };
            requests.push(PreparedRequest {
                name: request.name.clone(),
                class: class.name,
                mode: request.mode,
                class_selectors: self.selectors(
                    &class.selectors,
                    &format!("class {}", class.name),
                    "spec.selectors",
                )?,
                request_selectors: self.selectors(
                    &request.selectors,
                    &format!("claim {}/{}", claim.namespace, claim.name),
                    &format!("spec.devices.requests[{j}].exactly.selectors"),
                )?,
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
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        if pod.resource_claims.is_empty() {
            return (None, Status::skip());
        }
        let Some(dra) = cluster.nodes.dra() else {
            return (None, Status::unresolvable(REASON_NOT_TRACKED));
        };
        let mut claims = Vec::with_capacity(pod.resource_claims.len());
        for entry in &pod.resource_claims {
            let name = entry.claim_name(&pod.name);
            let key = ClaimKey {
                namespace: pod.namespace,
                name: Sym::new(&name),
            };
            let Some(claim) = dra.claim(key) else {
                return (
                    None,
                    Status::unresolvable(format!(
                        "resourceclaim.resource.k8s.io {name:?} not found"
                    )),
                );
            };
            if claim.deleting {
                return (
                    None,
                    Status::unresolvable(format!("resourceclaim {name:?} is being deleted")),
                );
            }
            let from_template = matches!(entry.source, gantry_api::dra::ClaimSource::Template(_));
            if from_template && claim.owner_pod.as_deref() != Some(&*pod.uid) {
                return (
                    None,
                    Status::unresolvable(format!(
                        "ResourceClaim {}/{} was not created for pod {} (pod is not owner)",
                        claim.namespace,
                        claim.name,
                        pod.key()
                    )),
                );
            }
            claims.push(claim.clone());
        }
        let mut available_on = Vec::with_capacity(claims.len());
        let mut to_allocate = Vec::new();
        for claim in &claims {
            match &claim.allocation {
                Some(allocation) => {
                    if !claim.can_be_reserved() && !claim.is_reserved_for(&pod.uid) {
                        return (None, Status::unresolvable(REASON_IN_USE));
                    }
                    available_on.push(allocation.node_selector.clone());
                }
                None => {
                    available_on.push(None);
                    match self.prepare(claim, dra) {
                        Ok(prepared) => to_allocate.push(prepared),
                        Err(status) => return (None, status),
                    }
                }
            }
        }
        let allocator = (!to_allocate.is_empty()).then(|| {
            Arc::new(Allocator {
                claims: to_allocate,
                allocated: dra.allocated_devices().into_iter().collect(),
                shared_slices: dra.shared_slices().to_vec(),
            })
        });
        state.write(
            NAME,
            PodClaims {
                claims,
                available_on,
                allocator,
                node_allocations: Arc::default(),
                reserved: None,
                bound: Vec::new(),
            },
        );
        (None, Status::success())
    }
}

impl FilterPlugin for DynamicResources {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PodClaims>(NAME) else {
            return Status::success();
        };
        let Some(n) = node.node() else {
            return Status::error("node not found");
        };
        let unavailable = s.available_on.iter().any(|sel| {
            sel.as_ref()
                .is_some_and(|sel| !sel.matches(n.name, &n.labels))
        });
        if unavailable {
            return Status::unresolvable(REASON_NOT_AVAILABLE);
        }
        let Some(allocator) = &s.allocator else {
            return Status::success();
        };
        match allocator.allocate(n, node.resource_slices()) {
            Err(message) => Status::error(message),
            Ok(None) => Status::unresolvable(REASON_CANNOT_ALLOCATE),
            Ok(Some(allocations)) => {
                s.node_allocations
                    .lock()
                    .expect("allocation map lock poisoned")
                    .insert(n.name, Arc::new(allocations));
                Status::success()
            }
        }
    }
}

impl ReservePlugin for DynamicResources {
    fn reserve(&self, state: &mut CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let node = node.name();
        let Some(s) = state.read_mut::<PodClaims>(NAME) else {
            return Status::success();
        };
        if s.allocator.is_none() {
            return Status::success();
        }
        let found = s
            .node_allocations
            .lock()
            .expect("allocation map lock poisoned")
            .get(&node)
            .cloned();
        match found {
            Some(allocations) => {
                s.reserved = Some((node, allocations));
                Status::success()
            }
            None => Status::error("claim allocation not found for node"),
        }
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &Pod, _node: Sym) {
        if let Some(s) = state.read_mut::<PodClaims>(NAME) {
            s.reserved = None;
            s.bound.clear();
        }
    }
}

impl PreBindPlugin for DynamicResources {
    /// Writes each claim's status: the allocation Reserve kept (for claims that had
    /// none) and the pod in `reservedFor`.
    fn pre_bind(&self, state: &mut CycleState, pod: &Pod, node: Sym) -> Status {
        let Some(s) = state.read_mut::<PodClaims>(NAME) else {
            return Status::success();
        };
        let mut fresh = match (&s.allocator, &s.reserved) {
            (None, _) => Vec::new().into_iter(),
            (Some(_), Some((reserved_on, allocations))) if *reserved_on == node => {
                allocations.iter().cloned().collect::<Vec<_>>().into_iter()
            }
            (Some(_), _) => return Status::error("claim allocation not reserved for node"),
        };
        let mut bound = Vec::with_capacity(s.claims.len());
        for claim in &s.claims {
            let mut updated = ResourceClaim::clone(claim);
            if updated.allocation.is_none() {
                let Some(allocation) = fresh.next() else {
                    return Status::error(format!(
                        "internal error, no allocation for claim {}",
                        claim.name
                    ));
                };
                updated.allocation = Some(Arc::new(allocation));
            }
            if !updated.is_reserved_for(&pod.uid) {
                if !updated.can_be_reserved() {
                    return Status::unresolvable(REASON_IN_USE);
                }
                updated.reserved_for.push(ClaimConsumer {
                    name: pod.name.clone(),
                    uid: pod.uid.clone(),
                });
            }
            bound.push(Arc::new(updated));
        }
        s.bound = bound;
        Status::success()
    }
}
