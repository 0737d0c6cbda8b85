//! Why a node's devices can or cannot serve a pod's claims, for `gantry explain`: per
//! request (and subrequest) of each claim still to allocate, every device the node
//! reaches and its verdict (usable, taken, or which selector refused it), and whether
//! the claims' `matchAttribute` constraints are what stops an allocation.

use std::sync::Arc;

use gantry_api::dra::{DeviceId, ResourceClaim, ResourceSlice};
use gantry_api::{Node, Sym};

use super::allocator::{
    Allocator, PreparedClaim, PreparedKind, PreparedSelection, reachable_devices,
};

/// What became of one device for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceVerdict {
    /// Matches the class and the request, and is free.
    Usable,
    /// Matches, but another claim holds it (`namespace/name`, where known).
    Taken(Option<String>),
    /// The device class's selector at this index refused it.
    ClassSelector(usize),
    /// The request's selector at this index refused it.
    RequestSelector(usize),
    /// A selector failed to evaluate.
    Error(String),
}

/// A request, or one subrequest (`request/subrequest`), of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestDevices {
    /// `namespace/name`.
    pub claim: String,
    pub request: String,
    pub class: Sym,
    /// Devices the request wants (`None`: all matching).
    pub count: Option<u32>,
    pub devices: Vec<(DeviceId, DeviceVerdict)>,
}

/// The report for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDevices {
    pub requests: Vec<RequestDevices>,
    /// Claims whose devices would be found without their `matchAttribute` constraints:
    /// the constraints are what fails.
    pub blocked_by_constraints: Vec<String>,
}

impl DeviceVerdict {
    /// The verdict as `gantry explain` words it: `None` for a usable device.
    pub fn reason(&self) -> Option<String> {
        match self {
            DeviceVerdict::Usable => None,
            DeviceVerdict::Taken(Some(claim)) => Some(format!("allocated to claim {claim}")),
            DeviceVerdict::Taken(None) => Some("allocated to another claim".to_string()),
            DeviceVerdict::ClassSelector(i) => {
                Some(format!("the device class's selector #{i} does not match"))
            }
            DeviceVerdict::RequestSelector(i) => {
                Some(format!("the request's selector #{i} does not match"))
            }
            DeviceVerdict::Error(e) => Some(format!("selector error: {e}")),
        }
    }
}

/// Reports the node's devices against every claim `allocator` has to allocate.
pub fn node_devices(
    allocator: &Allocator,
    node: &Node,
    local: &[Arc<ResourceSlice>],
) -> NodeDevices {
    let devices = reachable_devices(node, local, &allocator.shared_slices);
    let mut requests = Vec::new();
    for claim in &allocator.claims {
        let label = format!("{}/{}", claim.claim.namespace, claim.claim.name);
        for request in &claim.requests {
            let selections: Vec<(String, &PreparedSelection)> = match &request.kind {
                PreparedKind::Exactly(selection) => vec![(request.name.to_string(), selection)],
                PreparedKind::FirstAvailable(subs) => subs
                    .iter()
                    .map(|sub| (format!("{}/{}", request.name, sub.name), &sub.selection))
                    .collect(),
            };
            for (name, selection) in selections {
                requests.push(RequestDevices {
                    claim: label.clone(),
                    request: name,
                    class: selection.class,
                    count: match selection.mode {
                        gantry_api::dra::AllocationMode::ExactCount(n) => Some(n),
                        gantry_api::dra::AllocationMode::All => None,
                    },
                    devices: devices
                        .iter()
                        .map(|(slice, device)| {
                            let id = DeviceId {
                                driver: slice.driver,
                                pool: slice.pool,
                                device: device.name,
                            };
                            (id, verdict(allocator, selection, id, device))
                        })
                        .collect(),
                });
            }
        }
    }
    let blocked_by_constraints = allocator
        .claims
        .iter()
        .filter(|c| !c.claim.spec.constraints.is_empty())
        .filter(|c| blocked_by_constraints(allocator, c, node, local))
        .map(|c| format!("{}/{}", c.claim.namespace, c.claim.name))
        .collect();
    NodeDevices {
        requests,
        blocked_by_constraints,
    }
}

fn verdict(
    allocator: &Allocator,
    selection: &PreparedSelection,
    id: DeviceId,
    device: &gantry_api::dra::Device,
) -> DeviceVerdict {
    for (selectors, refused) in [
        (
            &selection.class_selectors,
            DeviceVerdict::ClassSelector as fn(usize) -> DeviceVerdict,
        ),
        (&selection.request_selectors, DeviceVerdict::RequestSelector),
    ] {
        for (i, selector) in selectors.iter().enumerate() {
            match selector.matches(id.driver, device) {
                Ok(true) => {}
                Ok(false) => return refused(i),
                Err(e) => return DeviceVerdict::Error(e),
            }
        }
    }
    if allocator.allocated.is_allocated(id) {
        DeviceVerdict::Taken(allocator.allocated.holder(id))
    } else {
        DeviceVerdict::Usable
    }
}

/// Whether the claim alone cannot be allocated on the node, but could without its
/// constraints.
fn blocked_by_constraints(
    allocator: &Allocator,
    claim: &PreparedClaim,
    node: &Node,
    local: &[Arc<ResourceSlice>],
) -> bool {
    let alone = |claim: PreparedClaim| Allocator {
        claims: vec![claim],
        allocated: allocator.allocated.clone(),
        shared_slices: allocator.shared_slices.clone(),
    };
    let fails = |a: Allocator| matches!(a.allocate(node, local), Ok(None));
    let mut unconstrained = ResourceClaim::clone(&claim.claim);
    let mut spec = (*unconstrained.spec).clone();
    spec.constraints.clear();
    unconstrained.spec = Arc::new(spec);
    let without = PreparedClaim {
        claim: Arc::new(unconstrained),
        requests: claim.requests.clone(),
    };
    fails(alone(claim.clone())) && !fails(alone(without))
}
