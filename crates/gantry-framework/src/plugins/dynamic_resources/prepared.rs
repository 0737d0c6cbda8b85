//! A claim as the allocator takes it: its requests with their device classes found and
//! their CEL selectors compiled (by the plugin's PreFilter, or by a what-if store).

use std::sync::Arc;

use gantry_api::Sym;
use gantry_api::dra::{AllocationMode, CapacityAmounts, DeviceToleration, ResourceClaim};

use super::cel::Selector;
use super::selection_verdicts::SelectionVerdicts;

/// What a request (`exactly`) or one subrequest selects: the class and the compiled
/// selectors (the class's first, then the request's), and how many devices.
#[derive(Clone)]
pub struct PreparedSelection {
    pub class: Sym,
    pub mode: AllocationMode,
    pub class_selectors: Arc<[Arc<Selector>]>,
    pub request_selectors: Arc<[Arc<Selector>]>,
    /// The selectors' verdicts together, per slice (shared by the requests of every pod
    /// with these selectors, when the plugin prepares them).
    pub together: Arc<SelectionVerdicts>,
    /// `capacity.requests` (DRAConsumableCapacity): what a share of a shared device takes.
    pub capacity: CapacityAmounts,
}

impl PreparedSelection {
    /// A selection whose verdicts together are remembered for it alone.
    pub fn new(
        class: Sym,
        mode: AllocationMode,
        class_selectors: Arc<[Arc<Selector>]>,
        request_selectors: Arc<[Arc<Selector>]>,
    ) -> PreparedSelection {
        let together = Arc::new(SelectionVerdicts::new(
            class_selectors
                .iter()
                .chain(request_selectors.iter())
                .cloned(),
        ));
        PreparedSelection {
            class,
            mode,
            class_selectors,
            request_selectors,
            together,
            capacity: Vec::new(),
        }
    }
}

/// One subrequest of a `firstAvailable` list, by its own name.
#[derive(Clone)]
pub struct PreparedSubRequest {
    pub name: Arc<str>,
    pub selection: PreparedSelection,
    pub tolerations: Vec<DeviceToleration>,
}

/// A request's devices: `exactly`, or alternatives tried in order.
#[derive(Clone)]
pub enum PreparedKind {
    Exactly(PreparedSelection),
    FirstAvailable(Vec<PreparedSubRequest>),
}

/// A request of a claim, with its classes and compiled selectors.
#[derive(Clone)]
pub struct PreparedRequest {
    pub name: Arc<str>,
    pub kind: PreparedKind,
    /// `exactly.adminAccess`: devices other claims hold may be taken, and are not held.
    pub admin_access: bool,
    /// `exactly.tolerations` of device taints.
    pub tolerations: Vec<DeviceToleration>,
}

impl PreparedRequest {
    pub fn exactly(name: impl Into<Arc<str>>, selection: PreparedSelection) -> PreparedRequest {
        PreparedRequest {
            name: name.into(),
            kind: PreparedKind::Exactly(selection),
            admin_access: false,
            tolerations: Vec::new(),
        }
    }

    pub fn first_available(
        name: impl Into<Arc<str>>,
        subrequests: Vec<PreparedSubRequest>,
    ) -> PreparedRequest {
        // Subrequests have no admin access (upstream's `deviceSubRequestAccessor`).
        PreparedRequest {
            name: name.into(),
            kind: PreparedKind::FirstAvailable(subrequests),
            admin_access: false,
            tolerations: Vec::new(),
        }
    }
}

/// A claim to allocate, with its requests prepared.
#[derive(Clone)]
pub struct PreparedClaim {
    pub claim: Arc<ResourceClaim>,
    pub requests: Vec<PreparedRequest>,
}

impl PreparedClaim {
    /// Whether any request has a `firstAvailable` list.
    pub fn has_subrequests(&self) -> bool {
        self.requests
            .iter()
            .any(|r| matches!(r.kind, PreparedKind::FirstAvailable(_)))
    }

    /// `namespace/name`, as upstream's `klog.KObj` prints a claim.
    pub(super) fn label(&self) -> String {
        format!("{}/{}", self.claim.namespace, self.claim.name)
    }
}
