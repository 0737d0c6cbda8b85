//! DRAExtendedResource in DynamicResources (upstream's `extendeddynamicresources.go`): a
//! pod asking for an extended resource that a device class serves gets, on each node
//! whose allocatable lacks the resource, a claim of its own with one request per
//! container ([`gantry_api::dra_extended::requests_and_mappings`]), allocated with the
//! pod's other claims. Which resources a node leaves to devices is the node's *variant*
//! (bit `i`: the `i`-th served resource); each variant gets its own allocator, built on
//! first use.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use foldhash::fast::RandomState;
use gantry_api::dra::{ClaimConsumer, ClaimSpec, DeviceClass, ResourceClaim, ResourceSlice};
use gantry_api::dra_extended::{
    ExtendedRequest, RequestMapping, extended_claim_name, is_dra_extended_resource_name,
    requests_and_mappings,
};
use gantry_api::{Pod, Sym};
use gantry_cache::{DeviceUse, NodeInfo};
use smallvec::SmallVec;

use super::cel::Verdict;
use super::selection_verdicts::SelectionVerdicts;
use super::{Allocator, DynamicResources, NAME, NodeAllocator, PodClaims, PreparedClaim};
use crate::{Cluster, CycleState, Status};

/// The most extended resources backed by devices one pod may ask for (a node's variant
/// is a bit set of them).
const MAX_SERVED: usize = 64;

/// What PreFilter found of the pod's extended resources.
pub(super) struct ExtendedClaim {
    /// The pod's extended resources a class serves, sorted by name, with their classes.
    pub served: Vec<(ExtendedRequest, Arc<DeviceClass>)>,
    /// Extended resources the pod asks for that no class serves: a node whose allocatable
    /// lacks one of them cannot take the pod.
    pub unserved: SmallVec<[Sym; 2]>,
    /// What the allocators read besides the claims.
    pub allocated: Arc<dyn DeviceUse>,
    pub shared_slices: Vec<Arc<ResourceSlice>>,
    /// The allocators of the variants met so far (not variant 0: the user claims' own).
    pub variants: Mutex<HashMap<u64, Arc<Allocator>, RandomState>>,
    /// Each served resource's class selectors' verdicts, in `served`'s order (`None`: a
    /// selector does not compile), for the resource scores' device counts.
    pub class_verdicts: Vec<Option<Arc<SelectionVerdicts>>>,
    /// A claim an earlier attempt made for the pod and left behind (its binding failed):
    /// upstream refuses every node while it stands, and its PostFilter deletes it.
    pub left_behind: Option<Arc<ResourceClaim>>,
}

/// The name the claim goes by until PreBind names it (upstream's `specialClaimInMemName`,
/// not a valid claim name on purpose): Filter's errors name the claim so.
pub const IN_MEMORY_NAME: &str = "<extended-resources>";

/// Upstream's message for every node while a claim an earlier attempt made stands.
pub const REASON_LEFT_BEHIND: &str = "cannot schedule extended resource claim";

/// Upstream's message for a node that neither has nor can be given a resource.
pub const REASON_CANNOT_FIT: &str = "cannot fit resource";

impl ExtendedClaim {
    /// The pod's extended resources, when a class serves at least one (`None`: the pod
    /// needs no claim of its own); an error when it asks for more than Gantry can track.
    pub fn find(
        pod: &Pod,
        classes: &gantry_api::dra_extended::ExtendedResourceClasses,
        allocated: impl FnOnce() -> Arc<dyn DeviceUse>,
        shared_slices: impl FnOnce() -> Vec<Arc<ResourceSlice>>,
    ) -> Result<Option<ExtendedClaim>, Status> {
        let served: Vec<(ExtendedRequest, Arc<DeviceClass>)> = classes
            .requested_by(pod)
            .into_iter()
            .filter_map(|r| Some((r, classes.class_for(r.resource)?.clone())))
            .collect();
        if served.is_empty() {
            return Ok(None);
        }
        if served.len() > MAX_SERVED {
            return Err(Status::unresolvable(format!(
                "pod {} asks for {} extended resources backed by devices, more than the {MAX_SERVED} Gantry tracks",
                pod.key(),
                served.len()
            )));
        }
        let unserved = pod
            .requests()
            .scalars()
            .filter(|(name, amount)| {
                *amount > 0
                    && is_dra_extended_resource_name(name.as_str())
                    && classes.class_for(*name).is_none()
            })
            .map(|(name, _)| name)
            .collect();
        Ok(Some(ExtendedClaim {
            served,
            unserved,
            allocated: allocated(),
            shared_slices: shared_slices(),
            variants: Mutex::default(),
            class_verdicts: Vec::new(),
            left_behind: None,
        }))
    }

    /// The node's variant: the served resources its allocatable lacks; upstream's
    /// `cannot fit resource` when it lacks one no class serves.
    pub fn variant_on(&self, node: &NodeInfo) -> Result<u64, Status> {
        if self.left_behind.is_some() {
            return Err(Status::unresolvable(REASON_LEFT_BEHIND));
        }
        let allocatable = node.allocatable();
        if self
            .unserved
            .iter()
            .any(|name| allocatable.scalar(*name) == 0)
        {
            return Err(Status::unresolvable(REASON_CANNOT_FIT));
        }
        Ok(self
            .served
            .iter()
            .enumerate()
            .filter(|(_, (r, _))| allocatable.scalar(r.resource) == 0)
            .fold(0, |mask, (i, _)| mask | (1 << i)))
    }

    /// The served resources of `variant`.
    fn resources_of(&self, variant: u64) -> Vec<ExtendedRequest> {
        (self.served.iter().enumerate())
            .filter(|(i, _)| variant & (1 << i) != 0)
            .map(|(_, (r, _))| *r)
            .collect()
    }

    /// The class serving `name`.
    pub fn class(&self, name: Sym) -> Option<Arc<DeviceClass>> {
        (self.served.iter())
            .find(|(r, _)| r.class == name)
            .map(|(_, class)| class.clone())
    }

    /// The claim for the pod on a node of `variant` (not 0): named for the pod, owned by
    /// it, with its requests, unallocated; and which container uses which request.
    pub fn claim_for(&self, pod: &Pod, variant: u64) -> (ResourceClaim, Vec<RequestMapping>) {
        let (requests, mappings) = requests_and_mappings(pod, &self.resources_of(variant));
        let name: Arc<str> = Arc::from(extended_claim_name(pod));
        let claim = ResourceClaim {
            binding_status: None,
            namespace: pod.namespace,
            uid: Arc::from(format!("{}/{name}", pod.namespace)),
            name,
            spec: Arc::new(ClaimSpec {
                requests,
                constraints: Vec::new(),
            }),
            owner_pod: Some(pod.uid.clone()),
            deleting: false,
            allocation: None,
            reserved_for: Vec::new(),
            extended_resource: true,
        };
        (claim, mappings)
    }
}

/// Upstream's `calculateDRAResourceTotals`, which NodeResourcesFit's and
/// BalancedAllocation's scores read for an extended resource a class serves on a node
/// whose allocatable lacks it: how many devices of the class the node reaches (its own
/// slices', and the shared slices' that reach it, every slice counted as upstream counts
/// them, whatever its pool's generation), and how many of those are allocated (held
/// whole or shared). `None` when the pod asks for no such resource; (0, 0) when a class
/// selector fails, as upstream's error gives.
pub(super) fn device_totals(
    extended: &ExtendedClaim,
    resource: Sym,
    node: &NodeInfo,
) -> Option<(i64, i64)> {
    let index = extended
        .served
        .iter()
        .position(|(r, _)| r.resource == resource)?;
    let Some(verdicts) = extended.class_verdicts.get(index).cloned().flatten() else {
        return Some((0, 0));
    };
    let n = node.node()?;
    let (mut total, mut allocated) = (0, 0);
    let shared =
        (extended.shared_slices.iter()).filter(|s| s.nodes.reached_from(n.name, &n.labels));
    for slice in node.resource_slices().iter().chain(shared) {
        let facts = verdicts.on(slice);
        for (i, device) in slice.devices.iter().enumerate() {
            if !slice.device_nodes(i).reached_from(n.name, &n.labels) {
                continue;
            }
            match facts.verdicts[i] {
                Verdict::Yes => {}
                Verdict::No => continue,
                Verdict::Error => return Some((0, 0)),
            }
            total += 1;
            let id = gantry_api::dra::DeviceId {
                driver: slice.driver,
                pool: slice.pool,
                device: device.name,
            };
            if extended.allocated.is_allocated(id) || extended.allocated.shares(id).is_some() {
                allocated += 1;
            }
        }
    }
    Some((total, allocated))
}

/// The pod as a claim's consumer.
pub(super) fn consumer(pod: &Pod) -> ClaimConsumer {
    ClaimConsumer {
        name: pod.name.clone(),
        uid: pod.uid.clone(),
    }
}

/// For NodeResourcesFit's and BalancedAllocation's scores: the devices of the class serving
/// `resource` that `node` reaches, and how many are allocated (upstream's
/// `calculateDRAResourceTotals`); `None` unless the pod asks for `resource` and a class
/// serves it.
pub fn extended_device_totals(
    state: &CycleState,
    resource: Sym,
    node: &NodeInfo,
) -> Option<(i64, i64)> {
    let s = state.read::<PodClaims>(NAME)?;
    device_totals(&s.extended.as_ref()?.found, resource, node)
}

/// Whether the pod asks for extended resources a class serves (the resource scores then
/// read [`extended_device_totals`] node by node).
pub fn asks_for_served_resources(state: &CycleState) -> bool {
    state
        .read::<PodClaims>(NAME)
        .is_some_and(|s| s.extended.is_some())
}

impl DynamicResources {
    /// The pod's extended resources a device class serves (DRAExtendedResource on), for
    /// which it needs a claim of its own: upstream's `preFilterExtendedResources`.
    pub(super) fn extended_claim(
        &self,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> Result<Option<Arc<ExtendedClaim>>, Status> {
        if !self.release.enabled(gantry_api::Gate::DRAExtendedResource) {
            return Ok(None);
        }
        let asks = gantry_api::dra_extended::asks_for_extended_resources(pod);
        let Some(dra) = cluster.nodes.dra().filter(|_| asks) else {
            return Ok(None);
        };
        let found = ExtendedClaim::find(
            pod,
            &dra.extended_resource_classes(),
            || dra.device_use(),
            || dra.shared_slices(),
        )?;
        Ok(found.map(|mut found| {
            // Upstream's `findExtendedResourceClaim`: a claim made for the pod before. Only
            // one with requests stands in the way (upstream's Filter checks for those).
            let key = gantry_api::dra_extended::extended_claim_key(pod);
            found.left_behind = dra.claim(key).filter(|c| {
                c.extended_resource
                    && c.owner_pod.as_deref() == Some(&*pod.uid)
                    && !c.spec.requests.is_empty()
            });
            found.class_verdicts = (found.served.iter())
                .map(|(_, class)| {
                    let owner = format!("class {}", class.name);
                    let selectors = self.selectors(&class.selectors, &owner, "spec.selectors");
                    selectors.ok().map(|s| self.together(&s, &[]))
                })
                .collect();
            Arc::new(found)
        }))
    }

    /// The allocator for the claims to allocate on a node of `variant`: the user claims'
    /// own for variant 0 (`None` when there are none), else one that also allocates the
    /// claim for the extended resources the node leaves to devices.
    pub(super) fn allocator_for<'s>(
        &self,
        s: &'s PodClaims,
        pod: &Pod,
        variant: u64,
    ) -> Result<Option<NodeAllocator<'s>>, Status> {
        let Some(extended) = s
            .extended
            .as_ref()
            .map(|e| &e.found)
            .filter(|_| variant != 0)
        else {
            return Ok(s.allocator.as_ref().map(Cow::Borrowed));
        };
        let mut variants = extended.variants.lock().expect("variant lock poisoned");
        if let Some(allocator) = variants.get(&variant) {
            return Ok(Some(Cow::Owned(allocator.clone())));
        }
        // Allocated under upstream's in-memory name, which its Filter's errors give.
        let (claim, _) = extended.claim_for(pod, variant);
        let claim = ResourceClaim {
            name: Arc::from(IN_MEMORY_NAME),
            ..claim
        };
        let prepared = self.prepare(&Arc::new(claim), &|c| extended.class(c))?;
        let mut claims: Vec<PreparedClaim> = s
            .allocator
            .as_ref()
            .map(|a| a.claims.clone())
            .unwrap_or_default();
        claims.push(prepared);
        let allocator = Arc::new(Allocator {
            claims,
            allocated: extended.allocated.clone(),
            shared_slices: extended.shared_slices.clone(),
        });
        variants.insert(variant, allocator.clone());
        Ok(Some(Cow::Owned(allocator)))
    }

    /// The node's variant and its allocator (see [`allocator_for`](Self::allocator_for)).
    pub(super) fn node_allocator<'s>(
        &self,
        s: &'s PodClaims,
        pod: &Pod,
        node: &NodeInfo,
    ) -> Result<(u64, Option<NodeAllocator<'s>>), Status> {
        let variant = match &s.extended {
            None => 0,
            Some(extended) => extended.found.variant_on(node)?,
        };
        Ok((variant, self.allocator_for(s, pod, variant)?))
    }
}
