//! Why a node's devices can or cannot serve a pod's claims, for `gantry explain`: per
//! request (and subrequest) of each claim still to allocate, every device the node
//! reaches and its verdict (usable, taken, tainted, or which selector refused it), and whether
//! the claims' `matchAttribute` constraints are what stops an allocation.

use std::sync::Arc;

use gantry_api::dra::{DeviceId, DeviceToleration, ResourceClaim, ResourceSlice};
use gantry_api::dra_taints::untolerated;
use gantry_api::{Node, QuantityFormat, Sym};

use super::allocator::{Allocator, Features, PreparedClaim, PreparedKind, PreparedSelection};
use super::pools::reachable_devices;

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
    /// Its taint (`key=value:Effect`), which the request does not tolerate.
    Tainted(String),
    /// Its capacities cannot give the request a share (DRAConsumableCapacity): what the
    /// device lacks, in `explain`'s words.
    Capacity(String),
    /// It consumes more of a counter than its pool has left (DRAPartitionableDevices):
    /// the counter set, the counter, what the device takes and what is left.
    Counters {
        set: Sym,
        counter: Sym,
        takes: String,
        left: String,
    },
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
            DeviceVerdict::Tainted(taint) => Some(format!("tainted {taint}, not tolerated")),
            DeviceVerdict::Capacity(why) => Some(why.clone()),
            DeviceVerdict::Counters {
                set,
                counter,
                takes,
                left,
            } => Some(format!(
                "takes {takes} of counter {counter} of counter set {set}, which has {left} left"
            )),
        }
    }
}

/// Reports the node's devices against every claim `allocator` has to allocate.
pub fn node_devices(
    allocator: &Allocator,
    node: &Node,
    local: &[Arc<ResourceSlice>],
    features: Features,
) -> NodeDevices {
    let devices = reachable_devices(node, local, &allocator.shared_slices, features);
    let mut requests = Vec::new();
    for claim in &allocator.claims {
        let label = format!("{}/{}", claim.claim.namespace, claim.claim.name);
        for request in &claim.requests {
            let selections: Vec<(String, &PreparedSelection, &[DeviceToleration])> =
                match &request.kind {
                    PreparedKind::Exactly(selection) => {
                        vec![(request.name.to_string(), selection, &request.tolerations)]
                    }
                    PreparedKind::FirstAvailable(subs) => (subs.iter())
                        .map(|sub| {
                            let name = format!("{}/{}", request.name, sub.name);
                            (name, &sub.selection, &sub.tolerations[..])
                        })
                        .collect(),
                };
            let asks = Asks {
                admin_access: request.admin_access,
                tolerations: &[],
                features,
            };
            for (name, selection, tolerations) in selections {
                let asks = Asks {
                    tolerations,
                    ..asks
                };
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
                        .map(|&(slice, i)| {
                            let device = &slice.devices[i];
                            let id = DeviceId {
                                driver: slice.driver,
                                pool: slice.pool,
                                device: device.name,
                            };
                            let short = || {
                                capacity_short(allocator, features, selection, id, device).or_else(
                                    || counter_short(allocator, node, local, features, id, device),
                                )
                            };
                            (id, verdict(allocator, selection, asks, id, device, short))
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

/// What a request asks besides its selection: admin access, and its tolerations (and the
/// features it is judged under).
#[derive(Clone, Copy)]
struct Asks<'a> {
    admin_access: bool,
    tolerations: &'a [DeviceToleration],
    features: Features,
}

/// In the order the allocator judges: selectors, then whether another claim holds the
/// device (not for admin access), then its counters (`short`), then its taints.
fn verdict(
    allocator: &Allocator,
    selection: &PreparedSelection,
    asks: Asks<'_>,
    id: DeviceId,
    device: &gantry_api::dra::Device,
    short: impl FnOnce() -> Option<DeviceVerdict>,
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
    let allocated = &allocator.allocated;
    // Without DRAConsumableCapacity a share holds the whole device.
    let held = allocated.is_allocated(id)
        || (!asks.features.consumable_capacity && allocated.shares(id).is_some());
    if !asks.admin_access && held {
        DeviceVerdict::Taken(allocator.allocated.holder(id))
    } else if let Some(short) = short() {
        short
    } else if let Some(taint) = untolerated(&device.taints, asks.tolerations) {
        DeviceVerdict::Tainted(taint.to_string())
    } else {
        DeviceVerdict::Usable
    }
}

/// With DRAConsumableCapacity, why the device's capacities cannot give the request a
/// share: a capacity it lacks, an amount its policy refuses, or too little left after
/// the shares other claims hold.
fn capacity_short(
    allocator: &Allocator,
    features: Features,
    selection: &PreparedSelection,
    id: DeviceId,
    device: &gantry_api::dra::Device,
) -> Option<DeviceVerdict> {
    if !features.consumable_capacity {
        return None;
    }
    let in_use = (allocator.allocated.shares(id))
        .and_then(|s| s.consumed)
        .unwrap_or_default();
    let short = gantry_api::dra_capacity::fits(
        &selection.capacity,
        &device.capacity,
        &in_use,
        &Vec::new(),
        features.fractional_capacity_range,
    )
    .err()?;
    let quantity = |milli: i64| QuantityFormat::BinarySI.canonical(milli);
    use gantry_api::dra_capacity::CapacityShortfall;
    Some(DeviceVerdict::Capacity(match short {
        CapacityShortfall::Undefined(key) => {
            format!("has no capacity {key}, which the request asks for")
        }
        CapacityShortfall::Policy(key) => {
            format!("the amount of capacity {key} asked for is not one its request policy allows")
        }
        CapacityShortfall::Exhausted { key, left, wanted } => format!(
            "takes {} of capacity {key}, which has {} left",
            quantity(wanted),
            quantity(left.max(0))
        ),
    }))
}

/// The first counter the device consumes more of than its pool has left after the devices
/// allocated already; `None` when the pool covers it (or the device consumes none).
fn counter_short(
    allocator: &Allocator,
    node: &Node,
    local: &[Arc<ResourceSlice>],
    features: Features,
    id: DeviceId,
    device: &gantry_api::dra::Device,
) -> Option<DeviceVerdict> {
    if device.consumes_counters.is_empty() || !features.partitionable_devices {
        return None;
    }
    let left = allocator.counters_left(node, local, features, id)?;
    let quantity = |milli: i64| QuantityFormat::BinarySI.canonical(milli);
    (device.consumes_counters.iter())
        .flat_map(|c| {
            c.counters
                .iter()
                .map(move |&(name, takes)| (c.counter_set, name, takes))
        })
        .find_map(|(set, counter, takes)| {
            let (_, _, available) = *left.iter().find(|e| (e.0, e.1) == (set, counter))?;
            (takes > available).then(|| DeviceVerdict::Counters {
                set,
                counter,
                takes: quantity(takes),
                left: quantity(available.max(0)),
            })
        })
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

#[cfg(test)]
mod tests {
    use gantry_api::dra::{
        AllocationMode, ClaimSpec, Device, DeviceTaint, SliceNodes, TaintEffect,
    };
    use gantry_api::{Resources, Sym};

    use super::*;
    use crate::plugins::dynamic_resources::PreparedRequest;

    /// The claim `default/c` with these requests, not allocated.
    fn claim_c(requests: Vec<PreparedRequest>) -> PreparedClaim {
        PreparedClaim {
            claim: Arc::new(ResourceClaim {
                binding_status: None,
                namespace: Sym::new("default"),
                name: Arc::from("c"),
                uid: Arc::from("c"),
                spec: Arc::new(ClaimSpec::default()),
                owner_pod: None,
                deleting: false,
                allocation: None,
                reserved_for: Vec::new(),
                extended_resource: false,
            }),
            requests,
        }
    }

    /// `explain` says how much of a shared GPU's capacity is left when a request asks for
    /// more (DRAConsumableCapacity on), a capacity the request names that the device lacks,
    /// and nothing of the capacity with the gate off.
    #[test]
    fn a_shared_device_short_of_capacity_names_the_capacity() {
        let gi = 1024 * 1024 * 1024 * 1000_i64;
        let memory = gantry_api::dra::DeviceCapacity::new(
            gantry_api::dra::QualifiedName {
                domain: Sym::new("gpu.example.com"),
                id: Sym::new("memory"),
            },
            "memory",
            40 * gi,
        );
        let gpu = Device {
            binding: None,
            binds_to_node: false,
            name: Sym::new("gpu-0"),
            attributes: Vec::new(),
            capacity: vec![memory],
            allow_multiple_allocations: true,
            taints: Vec::new(),
            consumes_counters: Vec::new(),
        };
        let slices = [Arc::new(ResourceSlice {
            binding_conditions: false,
            name: Sym::new("s"),
            driver: Sym::new("gpu.example.com"),
            pool: Sym::new("n1"),
            pool_generation: 1,
            pool_slice_count: 1,
            nodes: SliceNodes::Node(Sym::new("n1")),
            devices: vec![gpu].into(),
            shared_counters: Vec::new(),
        })];
        let asking = |key: &str, amount: i64| {
            PreparedRequest::exactly(
                "gpu",
                PreparedSelection {
                    capacity: vec![(Sym::new(key), amount)],
                    ..PreparedSelection::new(
                        Sym::new("gpu"),
                        AllocationMode::ExactCount(1),
                        Arc::from([]),
                        Arc::from([]),
                    )
                },
            )
        };
        /// 30Gi of the GPU is another claim's share.
        struct HeldShare;
        impl gantry_cache::DeviceUse for HeldShare {
            fn is_allocated(&self, _: DeviceId) -> bool {
                false
            }
            fn shares(&self, _: DeviceId) -> Option<gantry_cache::DeviceShares> {
                Some(gantry_cache::DeviceShares {
                    count: 1,
                    consumed: Some(vec![(Sym::new("memory"), 30 * 1024 * 1024 * 1024 * 1000)]),
                })
            }
        }
        let allocator = Allocator {
            claims: vec![claim_c(vec![
                asking("memory", 15 * gi),
                asking("cores", 1000),
            ])],
            allocated: Arc::new(HeldShare),
            shared_slices: Vec::new(),
        };
        let node = Node::new("n1", Resources::default());
        let reasons = |features: Features| -> Vec<Option<String>> {
            let report = node_devices(&allocator, &node, &slices, features);
            (report.requests.iter())
                .map(|r| r.devices[0].1.reason())
                .collect()
        };
        let on = Features {
            consumable_capacity: true,
            ..Features::default()
        };
        assert_eq!(
            reasons(on),
            [
                Some("takes 15Gi of capacity memory, which has 10Gi left".to_string()),
                Some("has no capacity cores, which the request asks for".to_string()),
            ]
        );
        // Without the gate a share holds the whole device.
        let taken = Some("allocated to another claim".to_string());
        assert_eq!(reasons(Features::default()), [taken.clone(), taken]);
    }

    /// `explain` names the taint a request does not tolerate, and says nothing of one it
    /// tolerates; a device another claim holds is taken, but not for admin access.
    #[test]
    fn a_device_is_tainted_or_taken_as_the_request_asks() {
        let taint = DeviceTaint {
            key: Sym::new("example.com/broken"),
            value: Sym::new("yes"),
            effect: TaintEffect::NoSchedule,
        };
        let device = |name: &str, taints: Vec<DeviceTaint>| Device {
            binding: None,
            binds_to_node: false,
            name: Sym::new(name),
            attributes: Vec::new(),
            capacity: Vec::new(),
            taints,
            consumes_counters: Vec::new(),
            allow_multiple_allocations: false,
        };
        let slice = Arc::new(ResourceSlice {
            binding_conditions: false,
            name: Sym::new("s"),
            driver: Sym::new("gpu.example.com"),
            pool: Sym::new("n1"),
            pool_generation: 1,
            pool_slice_count: 1,
            nodes: SliceNodes::Node(Sym::new("n1")),
            devices: vec![
                device("gpu-0", vec![taint.clone()]),
                device("gpu-1", vec![]),
            ]
            .into(),
            shared_counters: Vec::new(),
        });
        let selection = PreparedSelection::new(
            Sym::new("gpu"),
            AllocationMode::ExactCount(1),
            Arc::from([]),
            Arc::from([]),
        );
        let plain = PreparedRequest::exactly("plain", selection.clone());
        let tolerant = PreparedRequest {
            tolerations: vec![DeviceToleration {
                key: Some(taint.key),
                exists: true,
                value: Sym::new(""),
                effect: None,
            }],
            ..PreparedRequest::exactly("tolerant", selection.clone())
        };
        let admin = PreparedRequest {
            admin_access: true,
            ..PreparedRequest::exactly("admin", selection)
        };
        let claim = claim_c(vec![plain, tolerant, admin]);
        let held: std::collections::HashSet<DeviceId, foldhash::fast::RandomState> = [DeviceId {
            driver: Sym::new("gpu.example.com"),
            pool: Sym::new("n1"),
            device: Sym::new("gpu-1"),
        }]
        .into_iter()
        .collect();
        let allocator = Allocator {
            claims: vec![claim],
            allocated: Arc::new(held),
            shared_slices: Vec::new(),
        };
        let node = Node::new("n1", Resources::default());
        let report = node_devices(&allocator, &node, &[slice], Features::default());
        let reasons: Vec<Vec<Option<String>>> = (report.requests.iter())
            .map(|r| r.devices.iter().map(|(_, v)| v.reason()).collect())
            .collect();
        let tainted = Some("tainted example.com/broken=yes:NoSchedule, not tolerated".to_string());
        let taken = Some("allocated to another claim".to_string());
        assert_eq!(
            reasons,
            [
                vec![tainted.clone(), taken.clone()],
                vec![None, taken],
                vec![tainted, None],
            ]
        );
    }

    /// `explain` says which counter a partition would overrun, and by how much, only while
    /// DRAPartitionableDevices is on; a partition another claim holds is taken.
    #[test]
    fn a_partition_short_of_counters_names_the_counter() {
        let gi = 1024 * 1024 * 1024 * 1000_i64;
        let memory = |amount: i64| vec![(Sym::new("memory"), amount * gi)];
        let partition = |name: &str, amount: i64| Device {
            binding: None,
            binds_to_node: false,
            name: Sym::new(name),
            attributes: Vec::new(),
            capacity: Vec::new(),
            allow_multiple_allocations: false,
            taints: Vec::new(),
            consumes_counters: vec![gantry_api::dra::CounterConsumption {
                counter_set: Sym::new("gpu-0"),
                counters: memory(amount),
            }],
        };
        let slice = |name: &str, devices: Vec<gantry_api::dra::Device>, shared_counters| {
            Arc::new(ResourceSlice {
                binding_conditions: false,
                name: Sym::new(name),
                driver: Sym::new("gpu.example.com"),
                pool: Sym::new("n1"),
                pool_generation: 1,
                pool_slice_count: 2,
                nodes: SliceNodes::Node(Sym::new("n1")),
                devices: devices.into(),
                shared_counters,
            })
        };
        let slices = [
            slice(
                "counters",
                vec![],
                vec![gantry_api::dra::CounterSet {
                    name: Sym::new("gpu-0"),
                    counters: memory(40),
                }],
            ),
            slice(
                "partitions",
                vec![
                    partition("whole", 40),
                    partition("half-0", 20),
                    partition("half-1", 20),
                ],
                vec![],
            ),
        ];
        let selection = PreparedSelection::new(
            Sym::new("gpu"),
            AllocationMode::ExactCount(1),
            Arc::from([]),
            Arc::from([]),
        );
        let claim = claim_c(vec![PreparedRequest::exactly("gpu", selection)]);
        let held: std::collections::HashSet<DeviceId, foldhash::fast::RandomState> = [DeviceId {
            driver: Sym::new("gpu.example.com"),
            pool: Sym::new("n1"),
            device: Sym::new("half-0"),
        }]
        .into_iter()
        .collect();
        let allocator = Allocator {
            claims: vec![claim],
            allocated: Arc::new(held),
            shared_slices: Vec::new(),
        };
        let node = Node::new("n1", Resources::default());
        let reasons = |features: Features| -> Vec<Option<String>> {
            let report = node_devices(&allocator, &node, &slices, features);
            (report.requests[0].devices.iter())
                .map(|(_, v)| v.reason())
                .collect()
        };
        let on = Features {
            partitionable_devices: true,
            ..Features::default()
        };
        let taken = Some("allocated to another claim".to_string());
        let short = "takes 40Gi of counter memory of counter set gpu-0, which has 20Gi left";
        assert_eq!(reasons(on), [Some(short.to_string()), taken.clone(), None]);
        assert_eq!(reasons(Features::default()), [None, taken, None]);
    }
}
