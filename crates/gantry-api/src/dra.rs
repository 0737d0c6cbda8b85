//! Dynamic resource allocation (resource.k8s.io/v1) in compact form: device classes,
//! resource slices (the devices drivers publish), resource claims (what pods ask for, and
//! what was allocated to them) and claim templates.
//!
//! Only structured parameters are modelled: prioritized lists (`firstAvailable`), admin
//! access, device taints, partitionable devices' shared counters and devices shared by
//! capacity, and binding conditions, each as its gate says.

pub use crate::dra_binding::{BindingConditions, BindingStatus, DeviceStatus, TrueCondition};
pub use crate::dra_taints::{DeviceTaint, DeviceToleration, TaintEffect};
use std::sync::Arc;

pub use crate::dra_capacity::{CapacityAmounts, DeviceCapacity};

use crate::{NodeSelector, Sym};

/// Upstream's `ResourceClaimReservedForMaxSize`: at most this many consumers per claim.
pub const RESERVED_FOR_MAX_SIZE: usize = 256;

/// Upstream's `AllocationResultsMaxSize`: at most this many devices per claim.
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;

/// Upstream's `CELSelectorExpressionMaxLength` (resource.k8s.io/v1): the API server
/// refuses a longer selector expression without compiling it.
pub const CEL_SELECTOR_EXPRESSION_MAX_LENGTH: usize = 10 * 1024;

/// Upstream's `CELSelectorExpressionMaxCost`: the API server refuses a selector whose
/// estimated worst-case cost is above it ("too complex, exceeds cost limit"), and
/// kube-scheduler stops an evaluation that costs more.
pub const CEL_SELECTOR_EXPRESSION_MAX_COST: u64 = 1_000_000;

/// Upstream's `ResourceSliceMaxAttributesAndCapacitiesPerDevice`.
pub const MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE: usize = 32;

/// Upstream's `DeviceAttributeMaxValueLength`: a string or version attribute's bytes.
pub const DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH: usize = 64;

/// `field.TooLong` for a selector expression beyond
/// [`CEL_SELECTOR_EXPRESSION_MAX_LENGTH`], as the API server words it.
pub fn selector_too_long(expression: &str) -> Option<String> {
    (expression.len() > CEL_SELECTOR_EXPRESSION_MAX_LENGTH).then(|| {
        format!("Too long: may not be more than {CEL_SELECTOR_EXPRESSION_MAX_LENGTH} bytes")
    })
}

/// One device: its driver, the pool it belongs to, and its name in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    pub driver: Sym,
    pub pool: Sym,
    pub device: Sym,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// A device attribute's value: exactly one of the four types.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AttributeValue {
    Int(i64),
    Bool(bool),
    String(Arc<str>),
    /// A semantic version string (compared for equality only).
    Version(Arc<str>),
}

/// A qualified attribute or capacity name, split at the `/`. Names without a domain get
/// the driver's name as their domain, as the CEL environment and `matchAttribute` see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QualifiedName {
    pub domain: Sym,
    pub id: Sym,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub name: Sym,
    pub attributes: Vec<(QualifiedName, AttributeValue)>,
    pub capacity: Vec<DeviceCapacity>,
    /// `allowMultipleAllocations` (DRAConsumableCapacity; dropped while the gate is off):
    /// the device is shared, each claim taking part of its capacities.
    pub allow_multiple_allocations: bool,
    /// `taints` (DRADeviceTaints).
    pub taints: Vec<DeviceTaint>,
    /// `consumesCounters` (DRAPartitionableDevices): what the device takes from its pool's
    /// counter sets while it is allocated.
    pub consumes_counters: Vec<CounterConsumption>,
    /// `bindingConditions` and `bindingFailureConditions` (DRADeviceBindingConditions):
    /// PreBind waits for the first on the device's status in the claim. Shared with the
    /// allocation results that carry them.
    pub binding: Option<Arc<BindingConditions>>,
    /// `bindsToNode` (DRADeviceBindingConditions): an allocation of the device is usable
    /// on the node chosen only.
    pub binds_to_node: bool,
}

/// Counters by name, in thousandths of the unit (as capacities are), sorted by name.
pub type Counters = Vec<(Sym, i64)>;

/// A slice's `sharedCounters` entry (DRAPartitionableDevices): counters the pool's devices
/// consume while allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterSet {
    pub name: Sym,
    pub counters: Counters,
}

/// A device's `consumesCounters` entry: what it takes from one counter set of its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterConsumption {
    pub counter_set: Sym,
    pub counters: Counters,
}

impl Device {
    pub fn attribute(&self, name: QualifiedName) -> Option<&AttributeValue> {
        self.attributes
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }
}

/// Which nodes a slice's devices are reachable from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SliceNodes {
    /// Local to one node.
    Node(Sym),
    /// Reachable from the nodes the selector matches.
    Selector(NodeSelector),
    /// Reachable from every node.
    All,
    /// `perDeviceNodeSelection` (DRAPartitionableDevices): each device says where it is
    /// reachable, in the order of the slice's devices (never `PerDevice` again).
    PerDevice(Arc<[SliceNodes]>),
}

impl SliceNodes {
    /// Whether a node of this name and these labels reaches what these nodes describe (for
    /// `PerDevice`, any of the devices).
    pub fn reached_from(&self, node: Sym, labels: &crate::Labels) -> bool {
        match self {
            SliceNodes::Node(name) => *name == node,
            SliceNodes::Selector(selector) => selector.matches(node, labels),
            SliceNodes::All => true,
            SliceNodes::PerDevice(devices) => devices.iter().any(|d| d.reached_from(node, labels)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSlice {
    pub name: Sym,
    pub driver: Sym,
    pub pool: Sym,
    /// Slices of an older generation than the newest seen for the pool are ignored.
    pub pool_generation: i64,
    /// How many slices the pool has; a pool with fewer is incomplete.
    pub pool_slice_count: i64,
    pub nodes: SliceNodes,
    /// Shared with the slices that publish equal devices (see
    /// [`DeviceLists`](crate::dra_device_lists::DeviceLists)).
    pub devices: Arc<[Device]>,
    /// `sharedCounters` (DRAPartitionableDevices): a slice holds these or devices, never
    /// both.
    pub shared_counters: Vec<CounterSet>,
    /// Some device has binding conditions (DRADeviceBindingConditions): the allocator
    /// tries its pool after those without. Kept so that no search looks through the
    /// devices for it.
    pub binding_conditions: bool,
}

impl ResourceSlice {
    /// Where the slice's `index`th device is reachable: the slice's nodes, or the device's
    /// own with per-device node selection.
    pub fn device_nodes(&self, index: usize) -> &SliceNodes {
        match &self.nodes {
            SliceNodes::PerDevice(devices) => &devices[index],
            nodes => nodes,
        }
    }

    /// The node this slice is local to, if any.
    pub fn node_name(&self) -> Option<Sym> {
        match &self.nodes {
            SliceNodes::Node(name) => Some(*name),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceClass {
    pub name: Sym,
    /// CEL expressions, all of which a device must satisfy.
    pub selectors: Vec<Arc<str>>,
    /// `spec.extendedResourceName` (DRAExtendedResource): pods asking for this extended
    /// resource get devices of the class where a node's allocatable lacks it.
    pub extended_resource_name: Option<Sym>,
    /// `metadata.creationTimestamp` in seconds (0 when absent): of two classes naming one
    /// extended resource, the newer serves it.
    pub created: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationMode {
    ExactCount(u32),
    All,
}

/// Upstream's `FirstAvailableDeviceRequestMaxSize`: at most this many subrequests in a
/// request's `firstAvailable`. The score of a subrequest is this minus its index.
pub const FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE: usize = 8;

/// What a request (`exactly`) asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactRequest {
    pub device_class: Sym,
    pub selectors: Vec<Arc<str>>,
    pub mode: AllocationMode,
    /// `tolerations` of device taints (DRADeviceTaints).
    pub tolerations: Vec<DeviceToleration>,
    /// `adminAccess` (DRAAdminAccess): the devices may be held by other claims already,
    /// and what this request gets holds nothing.
    pub admin_access: bool,
    /// `capacity.requests` (DRAConsumableCapacity): how much of each capacity a share of
    /// a shared device takes.
    pub capacity: CapacityAmounts,
}

/// One alternative of a `firstAvailable` list (`DeviceSubRequest`). Allocation results
/// name it `<request>/<subrequest>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubRequest {
    pub name: Arc<str>,
    pub device_class: Sym,
    pub selectors: Vec<Arc<str>>,
    pub mode: AllocationMode,
    /// `tolerations` of device taints (DRADeviceTaints).
    pub tolerations: Vec<DeviceToleration>,
    /// `capacity.requests` (DRAConsumableCapacity).
    pub capacity: CapacityAmounts,
}

/// How a request asks for devices: exactly one of `exactly` and `firstAvailable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestKind {
    Exactly(ExactRequest),
    /// Subrequests tried in order (gate DRAPrioritizedList); the first that can be
    /// satisfied is allocated.
    FirstAvailable(Vec<SubRequest>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRequest {
    pub name: Arc<str>,
    pub kind: RequestKind,
}

impl DeviceRequest {
    /// A request with `exactly`.
    pub fn exactly(
        name: &str,
        device_class: Sym,
        selectors: Vec<Arc<str>>,
        mode: AllocationMode,
    ) -> DeviceRequest {
        DeviceRequest {
            name: Arc::from(name),
            kind: RequestKind::Exactly(ExactRequest {
                device_class,
                selectors,
                mode,
                tolerations: Vec::new(),
                admin_access: false,
                capacity: Vec::new(),
            }),
        }
    }

    /// The `exactly` part, if the request has one.
    pub fn exact(&self) -> Option<&ExactRequest> {
        match &self.kind {
            RequestKind::Exactly(exact) => Some(exact),
            RequestKind::FirstAvailable(_) => None,
        }
    }

    /// The subrequests; empty for a request with `exactly`.
    pub fn first_available(&self) -> &[SubRequest] {
        match &self.kind {
            RequestKind::Exactly(_) => &[],
            RequestKind::FirstAvailable(subrequests) => subrequests,
        }
    }
}

/// `<request>/<subrequest>`, as allocation results and constraints name a subrequest
/// (upstream's `CreateSubRequestRef`).
pub fn subrequest_ref(request: &str, subrequest: &str) -> String {
    format!("{request}/{subrequest}")
}

/// Whether a request reference names a subrequest: exactly two `/`-separated parts
/// (upstream's `IsSubRequestRef`).
pub fn is_subrequest_ref(reference: &str) -> bool {
    reference.split('/').count() == 2
}

/// A claim's constraint on the devices allocated for the listed requests (all requests
/// when empty). An entry names a request (then it covers every subrequest of it) or one
/// subrequest as `<request>/<subrequest>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceConstraint {
    pub requests: Vec<Arc<str>>,
    pub attribute: QualifiedName,
    pub kind: ConstraintKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConstraintKind {
    /// `matchAttribute`: the devices have the same value of the attribute.
    Match,
    /// `distinctAttribute` (DRAConsumableCapacity): the devices have different values of
    /// the attribute, as upstream's allocator checks it (each device against the last one
    /// picked for each request, not against every one).
    Distinct,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimSpec {
    pub requests: Vec<DeviceRequest>,
    pub constraints: Vec<DeviceConstraint>,
}

/// One allocated device, for one request of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedDevice {
    /// The request, or `<request>/<subrequest>` for a subrequest of `firstAvailable`.
    pub request: Arc<str>,
    pub device: DeviceId,
    /// Given for admin access: the device is not held (upstream's `GatherAllocatedState`
    /// skips it), and other claims may hold it too.
    pub admin_access: bool,
    /// Set for a share of a device that allows multiple allocations (DRAConsumableCapacity),
    /// which other claims' shares may use too. Boxed: most results are not shares.
    pub share: Option<Arc<DeviceShare>>,
    /// The device's binding conditions, which the result carries.
    pub binding: Option<Arc<BindingConditions>>,
}

/// A result's `shareID` and `consumedCapacity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceShare {
    pub id: Arc<str>,
    /// What the share takes of the device's capacities.
    pub consumed: CapacityAmounts,
}

impl AllocatedDevice {
    /// A result for `request` holding `device` alone.
    pub fn exclusive(request: Arc<str>, device: DeviceId) -> AllocatedDevice {
        AllocatedDevice {
            request,
            device,
            admin_access: false,
            share: None,
            binding: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub devices: Vec<AllocatedDevice>,
    /// Where the claim can be used; `None` means on every node.
    pub node_selector: Option<NodeSelector>,
}

impl Allocation {
    /// The devices the allocation holds, so that no other claim may take them: all but
    /// those given for admin access and the shares of shared devices.
    pub fn held_devices(&self) -> impl Iterator<Item = DeviceId> + '_ {
        (self.devices.iter())
            .filter(|d| !d.admin_access && d.share.is_none())
            .map(|d| d.device)
    }

    /// The shares of shared devices the allocation holds (admin access holds none).
    pub fn shares(&self) -> impl Iterator<Item = &AllocatedDevice> + '_ {
        (self.devices.iter()).filter(|d| !d.admin_access && d.share.is_some())
    }

    /// [`held_devices`](Self::held_devices) in a vector of the allocation's length (a
    /// filtered `collect` would start at four: measured as 4% more bytes per pod).
    pub fn held_device_list(&self) -> Vec<DeviceId> {
        let mut held = Vec::with_capacity(self.devices.len());
        held.extend(self.held_devices());
        held
    }
}

/// A pod that uses a claim (`status.reservedFor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimConsumer {
    pub name: Arc<str>,
    pub uid: Arc<str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceClaim {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    pub spec: Arc<ClaimSpec>,
    /// The uid of the pod that controls the claim (claims made from a pod's template).
    pub owner_pod: Option<Arc<str>>,
    /// The claim has a deletion timestamp.
    pub deleting: bool,
    pub allocation: Option<Arc<Allocation>>,
    pub reserved_for: Vec<ClaimConsumer>,
    /// The scheduler made it for its owner pod's extended resources (annotation
    /// `resource.kubernetes.io/extended-resource-claim: "true"`, DRAExtendedResource).
    pub extended_resource: bool,
    /// What the claim's status says for binding conditions (DRADeviceBindingConditions):
    /// when it was allocated and what the drivers report of its devices. Kept only for a
    /// claim whose allocation has binding conditions or whose devices have a status (an
    /// `Arc`, not inline: every other claim, copied several times per pod, would carry it).
    pub binding_status: Option<Arc<BindingStatus>>,
}

impl ResourceClaim {
    pub fn key(&self) -> ClaimKey {
        ClaimKey {
            namespace: self.namespace,
            name: Sym::new(&self.name),
        }
    }

    /// A claim a user made (no owner pod), not allocated nor reserved yet.
    pub fn unallocated(namespace: Sym, name: &str, uid: &str, spec: ClaimSpec) -> ResourceClaim {
        ResourceClaim {
            binding_status: None,
            namespace,
            name: Arc::from(name),
            uid: Arc::from(uid),
            spec: Arc::new(spec),
            owner_pod: None,
            deleting: false,
            allocation: None,
            reserved_for: Vec::new(),
            extended_resource: false,
        }
    }

    /// Upstream's `CanBeReserved`: another consumer fits in `reservedFor`.
    pub fn can_be_reserved(&self) -> bool {
        self.reserved_for.len() < RESERVED_FOR_MAX_SIZE
    }

    pub fn is_reserved_for(&self, pod_uid: &str) -> bool {
        self.reserved_for.iter().any(|c| &*c.uid == pod_uid)
    }
}

/// A claim by namespace and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimKey {
    pub namespace: Sym,
    pub name: Sym,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceClaimTemplate {
    pub namespace: Sym,
    pub name: Sym,
    pub spec: Arc<ClaimSpec>,
}

impl ResourceClaimTemplate {
    /// The template by namespace and name (a key like a claim's).
    pub fn key(&self) -> ClaimKey {
        ClaimKey {
            namespace: self.namespace,
            name: self.name,
        }
    }

    /// The claim the claim controller makes from this template for `pod`: named `name`,
    /// owned by the pod, unallocated.
    pub fn claim_for(&self, pod: &crate::Pod, name: Arc<str>) -> ResourceClaim {
        ResourceClaim {
            binding_status: None,
            namespace: pod.namespace,
            uid: Arc::from(format!("{}/{name}", pod.namespace)),
            name,
            spec: self.spec.clone(),
            owner_pod: Some(pod.uid.clone()),
            deleting: false,
            allocation: None,
            reserved_for: Vec::new(),
            extended_resource: false,
        }
    }
}

/// Where a pod's claim comes from (`spec.resourceClaims[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimSource {
    /// An existing claim, by name.
    Claim(Arc<str>),
    /// A template from which a claim is made for the pod.
    Template(Sym),
}

/// An entry of `spec.resourceClaims` (see [`Pod::claim_name`](crate::Pod::claim_name)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodResourceClaim {
    pub name: Arc<str>,
    pub source: ClaimSource,
}

/// An entry of `status.resourceClaimStatuses`: the claim made for a template entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceClaimStatus {
    /// The `spec.resourceClaims` entry.
    pub name: Arc<str>,
    pub claim: Arc<str>,
}

/// Every DRA object decoded from the input.
#[derive(Debug, Clone, Default)]
pub struct DraObjects {
    pub device_classes: Vec<DeviceClass>,
    /// Shared, never copied: a large cluster's slices hold millions of devices, and every
    /// cache of a simulation (each instance's, admission's) reads the same ones.
    pub slices: Vec<Arc<ResourceSlice>>,
    pub claims: Vec<ResourceClaim>,
    pub templates: Vec<ResourceClaimTemplate>,
    /// DeviceTaintRules (DRADeviceTaintRules), already applied to `slices`: kept so that a
    /// slice read after a rule gets its taint too.
    pub taint_rules: Vec<crate::dra_taint_rules::DeviceTaintRule>,
    /// The device lists of the slices read, each once.
    pub device_lists: crate::dra_device_lists::DeviceLists,
}

impl DraObjects {
    pub fn is_empty(&self) -> bool {
        self.device_classes.is_empty()
            && self.slices.is_empty()
            && self.claims.is_empty()
            && self.templates.is_empty()
    }

    /// Adds `other`'s objects; each side's DeviceTaintRules taint the other side's slices
    /// too, as if all had been read together.
    pub fn extend(&mut self, other: DraObjects) {
        self.device_classes.extend(other.device_classes);
        for rule in &other.taint_rules {
            crate::dra_taint_rules::apply_to_all(rule, &mut self.slices);
        }
        let mut slices = other.slices;
        for rule in &self.taint_rules {
            crate::dra_taint_rules::apply_to_all(rule, &mut slices);
        }
        // Read apart (a live import reads object by object), shared all the same.
        for slice in &mut slices {
            let shared = self.device_lists.share_list(slice.devices.clone());
            if !Arc::ptr_eq(&shared, &slice.devices) {
                Arc::make_mut(slice).devices = shared;
            }
        }
        self.slices.extend(slices);
        self.claims.extend(other.claims);
        self.templates.extend(other.templates);
        self.taint_rules.extend(other.taint_rules);
    }
}
