//! The structured allocator against cases of upstream's shared allocator table
//! (`dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go`):
//! same names, inputs and expected results. Classes select their driver
//! (`device.driver == "driver-a"`), as upstream's `class(name, driver)` helper does.

use std::sync::Arc;

use gantry_api::dra::*;
use gantry_api::{Node, NodeSelector, NodeSelectorTerm, Resources, Sym};
use gantry_framework::plugins::dynamic_resources::cel::Selector;
use gantry_framework::plugins::dynamic_resources::{
    Allocator, Features, PreparedClaim, PreparedRequest, PreparedSelection, PreparedSubRequest,
    Stats,
};

type DeviceSet = std::collections::HashSet<DeviceId, foldhash::fast::RandomState>;

fn nothing_allocated() -> Arc<dyn gantry_cache::DeviceUse> {
    Arc::new(DeviceSet::default())
}

const DRIVER_A: &str = "driver-a";
const DRIVER_B: &str = "driver-b";

fn sym(s: &str) -> Sym {
    Sym::new(s)
}

fn selectors(expressions: &[String]) -> Arc<[Arc<Selector>]> {
    expressions
        .iter()
        .map(|e| Arc::new(Selector::compile(e).unwrap()))
        .collect()
}

/// `count` devices (`None`: All) of the class selecting `driver`.
fn selection(driver: &str, count: Option<u32>, cel: &[String]) -> PreparedSelection {
    PreparedSelection::new(
        sym(&format!("class-{driver}")),
        count.map_or(AllocationMode::All, AllocationMode::ExactCount),
        selectors(&[format!("device.driver == \"{driver}\"")]),
        selectors(cel),
    )
}

/// A request (`exactly`) of `count` devices (`None`: All) of the class selecting `driver`.
fn request(name: &str, driver: &str, count: Option<u32>, cel: &[String]) -> PreparedRequest {
    PreparedRequest::exactly(name, selection(driver, count, cel))
}

/// A subrequest of `count` devices (`None`: All) of the class selecting `driver`.
fn sub(name: &str, driver: &str, count: Option<u32>, cel: &[String]) -> PreparedSubRequest {
    PreparedSubRequest {
        name: Arc::from(name),
        selection: selection(driver, count, cel),
        tolerations: Vec::new(),
    }
}

/// A request with `firstAvailable`.
fn prioritized(name: &str, subrequests: Vec<PreparedSubRequest>) -> PreparedRequest {
    PreparedRequest::first_available(name, subrequests)
}

fn claim(
    name: &str,
    requests: Vec<PreparedRequest>,
    constraints: Vec<DeviceConstraint>,
) -> PreparedClaim {
    PreparedClaim {
        claim: Arc::new(ResourceClaim {
            binding_status: None,
            namespace: sym("default"),
            name: Arc::from(name),
            uid: Arc::from(name),
            spec: Arc::new(ClaimSpec {
                requests: Vec::new(),
                constraints,
            }),
            owner_pod: None,
            deleting: false,
            allocation: None,
            reserved_for: Vec::new(),
            extended_resource: false,
        }),
        requests,
    }
}

/// The claim most cases use: `claim-0`, whose `req-0` asks for `count` devices (`None`:
/// all) of the class selecting `driver`.
fn claim_0(driver: &str, count: Option<u32>) -> Vec<PreparedClaim> {
    vec![claim(
        "claim-0",
        vec![request("req-0", driver, count, &[])],
        vec![],
    )]
}

fn device(name: &str, memory: Option<&str>, attributes: Vec<(&str, AttributeValue)>) -> Device {
    Device {
        binding: None,
        binds_to_node: false,
        name: sym(name),
        attributes: attributes
            .into_iter()
            .map(|(n, v)| {
                (
                    QualifiedName {
                        domain: sym(DRIVER_A),
                        id: sym(n),
                    },
                    v,
                )
            })
            .collect(),
        capacity: memory
            .map(|m| {
                vec![DeviceCapacity::new(
                    QualifiedName {
                        domain: sym(DRIVER_A),
                        id: sym("memory"),
                    },
                    "memory",
                    gantry_api::Quantity::parse(m)
                        .unwrap()
                        .milli_value()
                        .unwrap(),
                )]
            })
            .unwrap_or_default(),
        allow_multiple_allocations: false,
        taints: Vec::new(),
        consumes_counters: Vec::new(),
    }
}

fn slice(
    name: &str,
    node: &str,
    pool: &str,
    driver: &str,
    devices: Vec<Device>,
) -> Arc<ResourceSlice> {
    Arc::new(ResourceSlice {
        binding_conditions: false,
        name: sym(name),
        driver: sym(driver),
        pool: sym(pool),
        pool_generation: 1,
        pool_slice_count: 1,
        nodes: SliceNodes::Node(sym(node)),
        devices: devices.into(),
        shared_counters: Vec::new(),
    })
}

fn one_device(name: &str, node: &str, pool: &str, driver: &str) -> Arc<ResourceSlice> {
    slice(
        name,
        node,
        pool,
        driver,
        vec![device("device-1", None, Vec::new())],
    )
}

fn node(name: &str) -> Node {
    Node::new(name, Resources::default()).with_labels([("region", "region-1")])
}

/// One allocated device: request, driver, pool, device.
type Picked = (String, String, String, String);

/// What [`allocate`] returns: the devices of each claim, or why not.
type Outcome = Result<Option<Vec<Vec<Picked>>>, String>;

fn allocate(
    claims: Vec<PreparedClaim>,
    slices: Vec<Arc<ResourceSlice>>,
    node_name: &str,
) -> Outcome {
    allocate_with(claims, slices, node_name, &[], Features::default()).0
}

/// [`allocate`] with devices already allocated (driver, pool, device), the features, and
/// the search's statistics.
fn allocate_with(
    claims: Vec<PreparedClaim>,
    slices: Vec<Arc<ResourceSlice>>,
    node_name: &str,
    allocated: &[(&str, &str, &str)],
    features: Features,
) -> (Outcome, Stats) {
    let node = node(node_name);
    let (local, shared): (Vec<_>, Vec<_>) =
        slices.into_iter().partition(|s| s.node_name().is_some());
    let allocator = Allocator {
        claims,
        allocated: Arc::new(
            allocated
                .iter()
                .map(|(driver, pool, device)| DeviceId {
                    driver: sym(driver),
                    pool: sym(pool),
                    device: sym(device),
                })
                .collect::<DeviceSet>(),
        ),
        shared_slices: shared,
    };
    let (result, stats) = allocator.allocate_with(&node, &local, features);
    (
        result.map(|r| r.map(|allocations| picked(allocations, &local, node_name))),
        stats,
    )
}

fn picked(
    allocations: Vec<Allocation>,
    local: &[Arc<ResourceSlice>],
    node_name: &str,
) -> Vec<Vec<Picked>> {
    {
        allocations
            .into_iter()
            .map(|a| {
                if a.devices
                    .iter()
                    .any(|d| local.iter().any(|s| s.pool == d.device.pool))
                {
                    assert_eq!(
                        a.node_selector,
                        Some(local_selector(node_name)),
                        "local devices pin the node"
                    );
                }
                a.devices
                    .into_iter()
                    .map(|d| {
                        (
                            d.request.to_string(),
                            d.device.driver.to_string(),
                            d.device.pool.to_string(),
                            d.device.device.to_string(),
                        )
                    })
                    .collect()
            })
            .collect()
    }
}

fn local_selector(node: &str) -> NodeSelector {
    NodeSelector {
        terms: vec![NodeSelectorTerm {
            match_expressions: Vec::new(),
            match_fields: vec![
                gantry_api::labels::NodeSelectorRequirement::parse(
                    "metadata.name",
                    "In",
                    &[node.to_string()],
                    true,
                )
                .unwrap(),
            ],
        }],
    }
}

fn result(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
) -> (String, String, String, String) {
    (request.into(), driver.into(), pool.into(), device.into())
}

fn memory_at_least(q: &str) -> Vec<String> {
    vec![format!(
        "device.capacity[\"{DRIVER_A}\"].memory.compareTo(quantity(\"{q}\")) >= 0"
    )]
}

fn small_and_large_devices(reversed: bool) -> Vec<Device> {
    let small = device("device-1", Some("1Gi"), Vec::new());
    let large = device("device-2", Some("2Gi"), Vec::new());
    if reversed {
        vec![large, small]
    } else {
        vec![small, large]
    }
}

#[test]
fn simple() {
    let got = allocate(
        claim_0(DRIVER_A, Some(1)),
        vec![one_device("slice-1", "node-1", "pool-1", DRIVER_A)],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![result(
            "req-0", DRIVER_A, "pool-1", "device-1"
        )]]))
    );
}

#[test]
fn other_node() {
    let got = allocate(
        claim_0(DRIVER_A, Some(1)),
        vec![
            one_device("slice-1", "node-1", "pool-1", DRIVER_B),
            one_device("slice-2", "node-2", "pool-2", DRIVER_A),
        ],
        "node-2",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![result(
            "req-0", DRIVER_A, "pool-2", "device-1"
        )]]))
    );
}

#[test]
fn small_and_large_with_and_without_backtracking() {
    for reversed in [false, true] {
        let got = allocate(
            vec![claim(
                "claim-0",
                vec![
                    request("req-0", DRIVER_A, Some(1), &memory_at_least("1Gi")),
                    request("req-1", DRIVER_A, Some(1), &memory_at_least("2Gi")),
                ],
                vec![],
            )],
            vec![slice(
                "slice-1",
                "node-1",
                "pool-1",
                DRIVER_A,
                small_and_large_devices(reversed),
            )],
            "node-1",
        );
        assert_eq!(
            got,
            Ok(Some(vec![vec![
                result("req-0", DRIVER_A, "pool-1", "device-1"),
                result("req-1", DRIVER_A, "pool-1", "device-2"),
            ]])),
            "reversed: {reversed}"
        );
    }
}

#[test]
fn small_and_large_backtrack_claims() {
    let got = allocate(
        vec![
            claim(
                "claim-0",
                vec![request("req-0", DRIVER_A, Some(1), &memory_at_least("1Gi"))],
                vec![],
            ),
            claim(
                "claim-1",
                vec![request("req-1", DRIVER_A, Some(1), &memory_at_least("2Gi"))],
                vec![],
            ),
        ],
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            small_and_large_devices(true),
        )],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![
            vec![result("req-0", DRIVER_A, "pool-1", "device-1")],
            vec![result("req-1", DRIVER_A, "pool-1", "device-2")],
        ]))
    );
}

#[test]
fn devices_split_across_different_slices() {
    let got = allocate(
        claim_0(DRIVER_A, Some(2)),
        vec![
            one_device("slice-1", "node-1", "pool-1", DRIVER_A),
            one_device("slice-2", "node-1", "pool-2", DRIVER_A),
        ],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-1"),
            result("req-0", DRIVER_A, "pool-2", "device-1"),
        ]]))
    );
}

#[test]
fn obsolete_slice_leaves_an_incomplete_pool() {
    let old = slice(
        "slice-1-obsolete",
        "node-1",
        "pool-1",
        DRIVER_A,
        vec![device("device-1", None, vec![])],
    );
    let mut newer = (*slice(
        "slice-1-obsolete",
        "node-1",
        "pool-1",
        DRIVER_A,
        vec![device("device-2", None, vec![])],
    ))
    .clone();
    let mut older = (*old).clone();
    older.pool_slice_count = 2;
    newer.pool_slice_count = 2;
    newer.pool_generation += 1;
    let got = allocate(
        claim_0(DRIVER_A, Some(1)),
        vec![Arc::new(older), Arc::new(newer)],
        "node-1",
    );
    assert_eq!(got, Ok(None));
}

#[test]
fn duplicate_slice_is_an_invalid_pool() {
    let mut a = (*one_device("slice-1", "node-1", "pool-1", DRIVER_A)).clone();
    a.pool_slice_count = 2;
    let mut b = a.clone();
    b.name = sym("slice-1-2");
    let got = allocate(
        claim_0(DRIVER_A, Some(1)),
        vec![Arc::new(a), Arc::new(b)],
        "node-1",
    );
    assert!(
        got.unwrap_err()
            .contains("invalid resource pools were encountered")
    );
}

#[test]
fn no_slices_and_not_enough_devices() {
    let one = || claim_0(DRIVER_A, Some(1));
    assert_eq!(allocate(one(), vec![], "node-1"), Ok(None));
    let two = vec![
        claim(
            "claim-0",
            vec![request("req-0", DRIVER_A, Some(1), &[])],
            vec![],
        ),
        claim(
            "claim-0",
            vec![request("req-1", DRIVER_A, Some(1), &[])],
            vec![],
        ),
    ];
    assert_eq!(
        allocate(
            two,
            vec![one_device("slice-1", "node-1", "pool-1", DRIVER_A)],
            "node-1"
        ),
        Ok(None)
    );
}

#[test]
fn all_devices() {
    let all = || claim_0(DRIVER_A, None);
    assert_eq!(
        allocate(
            all(),
            vec![one_device("slice-1", "node-1", "pool-1", DRIVER_A)],
            "node-1"
        ),
        Ok(Some(vec![vec![result(
            "req-0", DRIVER_A, "pool-1", "device-1"
        )]])),
        "all-devices-single"
    );
    assert_eq!(
        allocate(
            all(),
            vec![
                one_device("slice-1", "node-1", "pool-1", DRIVER_A),
                one_device("slice-1", "node-1", "pool-2", DRIVER_A),
            ],
            "node-1"
        ),
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-1"),
            result("req-0", DRIVER_A, "pool-2", "device-1"),
        ]])),
        "all-devices-many"
    );
    let mut incomplete = (*one_device("slice-1", "node-1", "pool-1", DRIVER_A)).clone();
    incomplete.pool_slice_count += 1;
    let error = allocate(all(), vec![Arc::new(incomplete)], "node-1").unwrap_err();
    assert!(
        error.contains("request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated"),
        "{error}"
    );
}

#[test]
fn all_devices_plus_another() {
    let got = allocate(
        vec![
            claim(
                "claim-0",
                vec![request("req-0", DRIVER_A, None, &[])],
                vec![],
            ),
            claim(
                "claim-1",
                vec![request("req-0", DRIVER_B, Some(1), &[])],
                vec![],
            ),
        ],
        vec![
            one_device("slice-1", "node-1", "pool-1", DRIVER_A),
            one_device("slice-1", "node-1", "pool-1", DRIVER_B),
        ],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![
            vec![result("req-0", DRIVER_A, "pool-1", "device-1")],
            vec![result("req-0", DRIVER_B, "pool-1", "device-1")],
        ]))
    );
}

/// Upstream's "with-constraint": two devices must share the numa attribute.
#[test]
fn match_attribute_constraint() {
    let numa = |n: i64| vec![("numa", AttributeValue::Int(n))];
    let devices = vec![
        device("device-1", None, numa(1)),
        device("device-2", None, numa(2)),
        device("device-3", None, numa(1)),
    ];
    let constraint = DeviceConstraint {
        kind: ConstraintKind::Match,
        requests: Vec::new(),
        attribute: QualifiedName {
            domain: sym(DRIVER_A),
            id: sym("numa"),
        },
    };
    let got = allocate(
        vec![claim(
            "claim-0",
            vec![
                request("req-0", DRIVER_A, Some(1), &[]),
                request("req-1", DRIVER_A, Some(1), &[]),
            ],
            vec![constraint.clone()],
        )],
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            devices.clone(),
        )],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-1"),
            result("req-1", DRIVER_A, "pool-1", "device-3"),
        ]]))
    );
    // A device without the attribute never satisfies the constraint.
    let got = allocate(
        vec![claim(
            "claim-0",
            vec![request("req-0", DRIVER_A, Some(1), &[])],
            vec![constraint],
        )],
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            vec![device("device-1", None, vec![])],
        )],
        "node-1",
    );
    assert_eq!(got, Ok(None));
}

/// Upstream's "network-attached-device" and "unsuccessful-allocation-network-attached-device":
/// a slice with a node selector serves the nodes it selects, and the allocation carries
/// its selector.
#[test]
fn network_attached_devices() {
    let selector = in_region_1();
    let mut network = (*one_device("slice-1", "", "pool-1", DRIVER_A)).clone();
    network.nodes = SliceNodes::Selector(selector.clone());
    let network = Arc::new(network);
    let allocator = Allocator {
        claims: claim_0(DRIVER_A, Some(1)),
        allocated: nothing_allocated(),
        shared_slices: vec![network],
    };
    let allocations = allocator.allocate(&node("node-1"), &[]).unwrap().unwrap();
    assert_eq!(allocations[0].node_selector, Some(selector));
    let elsewhere = Node::new("node-2", Resources::default()).with_labels([("region", "region-2")]);
    assert_eq!(allocator.allocate(&elsewhere, &[]), Ok(None));
}

/// Devices already allocated to other claims are not handed out again.
#[test]
fn allocated_devices_are_taken() {
    let slices = vec![one_device("slice-1", "node-1", "pool-1", DRIVER_A)];
    let allocator = Allocator {
        claims: claim_0(DRIVER_A, Some(1)),
        allocated: Arc::new(
            [DeviceId {
                driver: sym(DRIVER_A),
                pool: sym("pool-1"),
                device: sym("device-1"),
            }]
            .into_iter()
            .collect::<DeviceSet>(),
        ),
        shared_slices: Vec::new(),
    };
    assert_eq!(allocator.allocate(&node("node-1"), &slices), Ok(None));
}

// Prioritized lists (`firstAvailable`). Unless said otherwise, each test below is a row
// of upstream's shared table, `TestAllocator` in
// `staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/
// allocator_testing.go` (the v1.35 table), under the same name. Upstream's claims have no
// namespace; these are in `default`. Device configs (`prioritized-list-device-config`,
// `prioritized-list-class-config`) are not modelled: only the devices are compared.

const SUB_0: &str = "subReq-0";
const SUB_1: &str = "subReq-1";

/// `count` devices `device-0` .. on one slice.
fn many_devices(
    name: &str,
    node: &str,
    pool: &str,
    driver: &str,
    count: usize,
) -> Arc<ResourceSlice> {
    slice(
        name,
        node,
        pool,
        driver,
        (0..count)
            .map(|i| device(&format!("device-{i}"), None, Vec::new()))
            .collect(),
    )
}

fn one_claim(
    requests: Vec<PreparedRequest>,
    constraints: Vec<DeviceConstraint>,
) -> Vec<PreparedClaim> {
    vec![claim("claim-0", requests, constraints)]
}

fn version(v: &str) -> Vec<(&'static str, AttributeValue)> {
    vec![("driverVersion", AttributeValue::Version(Arc::from(v)))]
}

fn match_version(requests: &[&str]) -> DeviceConstraint {
    DeviceConstraint {
        kind: ConstraintKind::Match,
        requests: requests.iter().map(|r| Arc::from(*r)).collect(),
        attribute: QualifiedName {
            domain: sym(DRIVER_A),
            id: sym("driverVersion"),
        },
    }
}

fn results(
    request: &str,
    driver: &str,
    pool: &str,
    devices: std::ops::Range<usize>,
) -> Vec<Picked> {
    devices
        .map(|i| result(request, driver, pool, &format!("device-{i}")))
        .collect()
}

#[test]
fn all_devices_slice_without_devices_prioritized_list() {
    let claims = || {
        one_claim(
            vec![prioritized(
                "req-0",
                vec![
                    sub(SUB_0, DRIVER_A, None, &[]),
                    sub(SUB_1, DRIVER_B, Some(1), &[]),
                ],
            )],
            vec![],
        )
    };
    let expected = Ok(Some(vec![vec![result(
        "req-0/subReq-1",
        DRIVER_B,
        "pool-2",
        "device-1",
    )]]));
    // all-devices-slice-without-devices-prioritized-list
    assert_eq!(
        allocate(
            claims(),
            vec![
                slice("slice-1", "node-1", "pool-1", DRIVER_A, vec![]),
                one_device("slice-2", "node-1", "pool-2", DRIVER_B),
            ],
            "node-1"
        ),
        expected
    );
    // all-devices-no-slices-prioritized-list
    assert_eq!(
        allocate(
            claims(),
            vec![one_device("slice-2", "node-1", "pool-2", DRIVER_B)],
            "node-1"
        ),
        expected
    );
    // all-devices-some-allocated-prioritized-list: `All` takes every device or none.
    let (got, _) = allocate_with(
        claims(),
        vec![
            slice(
                "slice-1",
                "node-1",
                "pool-1",
                DRIVER_A,
                vec![
                    device("device-1", None, vec![]),
                    device("device-2", None, vec![]),
                ],
            ),
            one_device("slice-2", "node-1", "pool-2", DRIVER_B),
        ],
        "node-1",
        &[(DRIVER_A, "pool-1", "device-1")],
        Features::default(),
    );
    assert_eq!(got, expected);
}

#[test]
fn prioritized_list_first_unavailable_and_non_available() {
    // prioritized-list-first-unavailable
    let got = allocate(
        one_claim(
            vec![prioritized(
                "req-0",
                vec![
                    sub(SUB_0, DRIVER_B, Some(1), &[]),
                    sub(SUB_1, DRIVER_A, Some(1), &[]),
                ],
            )],
            vec![],
        ),
        vec![one_device("slice-1", "node-1", "pool-1", DRIVER_A)],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![result(
            "req-0/subReq-1",
            DRIVER_A,
            "pool-1",
            "device-1"
        )]]))
    );
    // prioritized-list-non-available
    let got = allocate(
        one_claim(
            vec![prioritized(
                "req-0",
                vec![
                    sub(SUB_0, DRIVER_B, Some(2), &[]),
                    sub(SUB_1, DRIVER_A, Some(2), &[]),
                ],
            )],
            vec![],
        ),
        vec![
            one_device("slice-1", "node-1", "pool-1", DRIVER_A),
            one_device("slice-2", "node-1", "pool-2", DRIVER_B),
        ],
        "node-1",
    );
    assert_eq!(got, Ok(None));
}

/// prioritized-list-device-config and prioritized-list-class-config (devices only).
#[test]
fn prioritized_list_second_subrequest_gets_two_devices() {
    let two_b = vec![
        device("device-1", None, vec![]),
        device("device-2", None, vec![]),
    ];
    let expected = Ok(Some(vec![vec![
        result("req-0/subReq-1", DRIVER_B, "pool-1", "device-1"),
        result("req-0/subReq-1", DRIVER_B, "pool-1", "device-2"),
    ]]));
    let got = allocate(
        one_claim(
            vec![prioritized(
                "req-0",
                vec![
                    sub(SUB_0, DRIVER_A, Some(1), &[]),
                    sub(SUB_1, DRIVER_B, Some(2), &[]),
                ],
            )],
            vec![],
        ),
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_B,
            two_b.clone(),
        )],
        "node-1",
    );
    assert_eq!(got, expected, "prioritized-list-device-config");
    let got = allocate(
        one_claim(
            vec![prioritized(
                "req-0",
                vec![
                    sub(SUB_0, DRIVER_A, Some(2), &[]),
                    sub(SUB_1, DRIVER_B, Some(2), &[]),
                ],
            )],
            vec![],
        ),
        vec![
            slice("slice-1", "node-1", "pool-1", DRIVER_B, two_b),
            slice(
                "slice-2",
                "node-1",
                "pool-2",
                DRIVER_A,
                vec![device("device-3", None, vec![])],
            ),
        ],
        "node-1",
    );
    assert_eq!(got, expected, "prioritized-list-class-config");
}

#[test]
fn prioritized_list_subrequests_with_expressions() {
    let got = allocate(
        one_claim(
            vec![
                request("req-0", DRIVER_A, Some(1), &memory_at_least("1Gi")),
                prioritized(
                    "req-1",
                    vec![
                        sub(SUB_0, DRIVER_A, Some(1), &memory_at_least("4Gi")),
                        sub(SUB_1, DRIVER_A, Some(2), &memory_at_least("2Gi")),
                    ],
                ),
            ],
            vec![],
        ),
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            vec![
                device("device-1", Some("2Gi"), vec![]),
                device("device-2", Some("2Gi"), vec![]),
                device("device-3", Some("1Gi"), vec![]),
            ],
        )],
        "node-1",
    );
    // req-0 first takes device-1; backtracking hands it device-3.
    assert_eq!(
        got,
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-3"),
            result("req-1/subReq-1", DRIVER_A, "pool-1", "device-1"),
            result("req-1/subReq-1", DRIVER_A, "pool-1", "device-2"),
        ]]))
    );
}

/// prioritized-list-subrequests-with-constraints-ref-parent-request and
/// prioritized-list-subrequests-with-constraints-ref-sub-request: a constraint naming the
/// parent covers every subrequest; one naming `req-1/subReq-0` leaves `subReq-1` free.
#[test]
fn prioritized_list_constraints_name_parent_or_subrequest() {
    let requests = || {
        vec![
            request("req-0", DRIVER_A, Some(1), &memory_at_least("8Gi")),
            prioritized(
                "req-1",
                vec![
                    sub(SUB_0, DRIVER_A, Some(1), &memory_at_least("2Gi")),
                    sub(SUB_1, DRIVER_A, Some(1), &memory_at_least("1Gi")),
                ],
            ),
        ]
    };
    let big = || {
        slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            vec![device("device-1", Some("8Gi"), version("1.0.0"))],
        )
    };
    let got = allocate(
        one_claim(requests(), vec![match_version(&["req-0", "req-1"])]),
        vec![
            big(),
            slice(
                "slice-2",
                "node-1",
                "pool-2",
                DRIVER_A,
                vec![
                    device("device-2", Some("2Gi"), version("2.0.0")),
                    device("device-3", Some("1Gi"), version("1.0.0")),
                ],
            ),
        ],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-1"),
            result("req-1/subReq-1", DRIVER_A, "pool-2", "device-3"),
        ]])),
        "ref-parent-request"
    );
    let got = allocate(
        one_claim(
            requests(),
            vec![match_version(&["req-0", "req-1/subReq-0"])],
        ),
        vec![
            big(),
            slice(
                "slice-2",
                "node-1",
                "pool-2",
                DRIVER_A,
                vec![device("device-2", Some("2Gi"), version("2.0.0"))],
            ),
        ],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-1"),
            result("req-1/subReq-1", DRIVER_A, "pool-2", "device-2"),
        ]])),
        "ref-sub-request"
    );
}

/// prioritized-list-subrequests-with-allocation-mode-all, prioritized-list-allocation-mode-all
/// and prioritized-list-allocation-mode-all-multiple-requests: an `All` subrequest one of
/// whose devices is taken (by another claim, or by an earlier request of the claim) gives
/// way to the next subrequest.
#[test]
fn prioritized_list_allocation_mode_all() {
    let two = || {
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            vec![
                device("device-1", None, vec![]),
                device("device-2", None, vec![]),
            ],
        )]
    };
    let all_then_one = || {
        prioritized(
            "req-0",
            vec![
                sub(SUB_0, DRIVER_A, None, &[]),
                sub(SUB_1, DRIVER_A, Some(1), &[]),
            ],
        )
    };
    for (taken, free) in [("device-1", "device-2"), ("device-2", "device-1")] {
        let (got, _) = allocate_with(
            one_claim(vec![all_then_one()], vec![]),
            two(),
            "node-1",
            &[(DRIVER_A, "pool-1", taken)],
            Features::default(),
        );
        assert_eq!(
            got,
            Ok(Some(vec![vec![result(
                "req-0/subReq-1",
                DRIVER_A,
                "pool-1",
                free
            )]])),
            "{taken} allocated"
        );
    }
    let got = allocate(
        one_claim(
            vec![
                request("req-0", DRIVER_A, Some(1), &[]),
                prioritized(
                    "req-1",
                    vec![
                        sub(SUB_0, DRIVER_A, None, &[]),
                        sub(SUB_1, DRIVER_A, Some(1), &[]),
                    ],
                ),
            ],
            vec![],
        ),
        two(),
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-1"),
            result("req-1/subReq-1", DRIVER_A, "pool-1", "device-2"),
        ]])),
        "multiple-requests"
    );
}

#[test]
fn prioritized_list_disabled() {
    let (got, _) = allocate_with(
        one_claim(
            vec![prioritized(
                "req-0",
                vec![sub(SUB_0, DRIVER_A, Some(1), &[])],
            )],
            vec![],
        ),
        vec![one_device("slice-1", "node-1", "pool-1", DRIVER_A)],
        "node-1",
        &[],
        Features {
            prioritized_list: false,
            ..Features::default()
        },
    );
    let error = got.unwrap_err();
    assert!(
        error.contains(
            "claim default/claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled"
        ),
        "{error}"
    );
}

/// prioritized-list-multi-request and prioritized-list-with-backtracking: the plain request
/// wants the 8Gi device; the prioritized one settles for its second choice, before or
/// after it.
#[test]
fn prioritized_list_multi_request_and_backtracking() {
    let slices = || {
        vec![
            slice(
                "slice-1",
                "node-1",
                "pool-1",
                DRIVER_A,
                vec![device("device-1", Some("8Gi"), vec![])],
            ),
            slice(
                "slice-2",
                "node-1",
                "pool-2",
                DRIVER_A,
                vec![device("device-2", Some("4Gi"), vec![])],
            ),
        ]
    };
    let list = |name: &str| {
        prioritized(
            name,
            vec![
                sub(SUB_0, DRIVER_A, Some(1), &memory_at_least("8Gi")),
                sub(SUB_1, DRIVER_A, Some(1), &memory_at_least("4Gi")),
            ],
        )
    };
    let plain = |name: &str| request(name, DRIVER_A, Some(1), &memory_at_least("8Gi"));
    let got = allocate(
        one_claim(vec![plain("req-1"), list("req-0")], vec![]),
        slices(),
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![
            result("req-1", DRIVER_A, "pool-1", "device-1"),
            result("req-0/subReq-1", DRIVER_A, "pool-2", "device-2"),
        ]])),
        "prioritized-list-multi-request"
    );
    let got = allocate(
        one_claim(vec![list("req-0"), plain("req-1")], vec![]),
        slices(),
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![
            result("req-0/subReq-1", DRIVER_A, "pool-2", "device-2"),
            result("req-1", DRIVER_A, "pool-1", "device-1"),
        ]])),
        "prioritized-list-with-backtracking"
    );
}

/// prioritized-list-too-many-in-first-subrequest: a subrequest over the limit of 32
/// results is skipped, not an error.
#[test]
fn prioritized_list_too_many_in_first_subrequest() {
    let got = allocate(
        one_claim(
            vec![prioritized(
                "req-0",
                vec![
                    sub(SUB_0, DRIVER_B, Some(500), &[]),
                    sub(SUB_1, DRIVER_A, Some(1), &[]),
                ],
            )],
            vec![],
        ),
        vec![one_device("slice-1", "node-1", "pool-1", DRIVER_A)],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![result(
            "req-0/subReq-1",
            DRIVER_A,
            "pool-1",
            "device-1"
        )]]))
    );
}

/// prioritized-list-max-allocation-limit-request: two lists of (32, 16) devices settle on
/// 16 + 16, and the search takes upstream's number of steps (75).
#[test]
fn prioritized_list_max_allocation_limit_request() {
    let list = |name: &str| {
        prioritized(
            name,
            vec![
                sub(SUB_0, DRIVER_A, Some(32), &[]),
                sub(SUB_1, DRIVER_A, Some(16), &[]),
            ],
        )
    };
    let (got, stats) = allocate_with(
        one_claim(vec![list("req-0"), list("req-1")], vec![]),
        vec![many_devices("slice-1", "node-1", "pool-1", DRIVER_A, 64)],
        "node-1",
        &[],
        Features::default(),
    );
    let mut expected = results("req-0/subReq-1", DRIVER_A, "pool-1", 0..16);
    expected.extend(results("req-1/subReq-1", DRIVER_A, "pool-1", 16..32));
    assert_eq!(got, Ok(Some(vec![expected])));
    assert_eq!(stats.allocate_one_calls, 75);
}

/// prioritized-list-max-allocation-allocation-mode-all: `All` (31 devices) plus two more
/// would go over 32, so the second subrequest (2 devices) is taken; 42 steps upstream.
#[test]
fn prioritized_list_max_allocation_allocation_mode_all() {
    let (got, stats) = allocate_with(
        one_claim(
            vec![
                prioritized(
                    "req-0",
                    vec![
                        sub(SUB_0, DRIVER_A, None, &[]),
                        sub(SUB_1, DRIVER_A, Some(2), &[]),
                    ],
                ),
                request("req-1", DRIVER_B, Some(2), &[]),
            ],
            vec![],
        ),
        vec![
            many_devices("slice-1", "node-1", "pool-1", DRIVER_A, 31),
            many_devices("slice-2", "node-1", "pool-2", DRIVER_B, 2),
        ],
        "node-1",
        &[],
        Features::default(),
    );
    let mut expected = results("req-0/subReq-1", DRIVER_A, "pool-1", 0..2);
    expected.extend(results("req-1", DRIVER_B, "pool-2", 0..2));
    assert_eq!(got, Ok(Some(vec![expected])));
    assert_eq!(stats.allocate_one_calls, 42);
}

/// Upstream's rows `too-many-devices-total` and `max-number-devices`, and the claim limit
/// against the smallest subrequests: (32 or 1) + 1 fits, 32 + (33 or 2) does not.
#[test]
fn claim_limit_counts_the_smallest_subrequests() {
    let got = allocate(
        one_claim(
            vec![
                request("req-0", DRIVER_A, Some(32), &[]),
                request("req-1", DRIVER_A, Some(1), &[]),
            ],
            vec![],
        ),
        vec![many_devices("slice-1", "node-1", "pool-1", DRIVER_A, 33)],
        "node-1",
    );
    assert!(
        got.unwrap_err().contains("exceeds the claim limit"),
        "too-many-devices-total"
    );
    let got = allocate(
        one_claim(vec![request("req-0", DRIVER_A, Some(32), &[])], vec![]),
        vec![many_devices("slice-1", "node-1", "pool-1", DRIVER_A, 32)],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![results("req-0", DRIVER_A, "pool-1", 0..32)])),
        "max-number-devices"
    );
    let got = allocate(
        one_claim(
            vec![
                request("req-0", DRIVER_A, Some(32), &[]),
                prioritized(
                    "req-1",
                    vec![
                        sub(SUB_0, DRIVER_A, Some(33), &[]),
                        sub(SUB_1, DRIVER_A, Some(2), &[]),
                    ],
                ),
            ],
            vec![],
        ),
        vec![many_devices("slice-1", "node-1", "pool-1", DRIVER_A, 40)],
        "node-1",
    );
    assert_eq!(
        got,
        Err(
            "claim default/claim-0: number of requested devices 34 exceeds the claim limit of 32"
                .to_string()
        )
    );
    let got = allocate(
        one_claim(
            vec![
                prioritized(
                    "req-0",
                    vec![
                        sub(SUB_0, DRIVER_A, Some(32), &[]),
                        sub(SUB_1, DRIVER_A, Some(1), &[]),
                    ],
                ),
                request("req-1", DRIVER_A, Some(1), &[]),
            ],
            vec![],
        ),
        vec![many_devices("slice-1", "node-1", "pool-1", DRIVER_A, 40)],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![
            result("req-0/subReq-1", DRIVER_A, "pool-1", "device-0"),
            result("req-1", DRIVER_A, "pool-1", "device-1"),
        ]]))
    );
}

/// Backtracking across claims: the first claim's first choice leaves nothing for the
/// second claim, so the first claim falls back to its second subrequest.
#[test]
fn prioritized_list_backtracks_across_claims() {
    let got = allocate(
        vec![
            claim(
                "claim-0",
                vec![prioritized(
                    "req-0",
                    vec![
                        sub(SUB_0, DRIVER_A, Some(1), &memory_at_least("2Gi")),
                        sub(SUB_1, DRIVER_A, Some(1), &[]),
                    ],
                )],
                vec![],
            ),
            claim(
                "claim-1",
                vec![request("req-0", DRIVER_A, Some(1), &memory_at_least("2Gi"))],
                vec![],
            ),
        ],
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            small_and_large_devices(true),
        )],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![
            vec![result("req-0/subReq-1", DRIVER_A, "pool-1", "device-1")],
            vec![result("req-0", DRIVER_A, "pool-1", "device-2")],
        ]))
    );
}

/// Upstream's `with-constraint-not-matching-int-attribute-all-devices`: an `All` request
/// whose devices break a constraint of the claim is an error, not a failure.
#[test]
fn all_devices_breaking_a_constraint_is_an_error() {
    let numa = |n: i64| vec![("numa", AttributeValue::Int(n))];
    let got = allocate(
        one_claim(
            vec![request("req-0", DRIVER_A, None, &[])],
            vec![DeviceConstraint {
                kind: ConstraintKind::Match,
                requests: Vec::new(),
                attribute: QualifiedName {
                    domain: sym(DRIVER_A),
                    id: sym("numa"),
                },
            }],
        ),
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            vec![
                device("device-1", None, numa(1)),
                device("device-2", None, numa(2)),
            ],
        )],
        "node-1",
    );
    assert_eq!(
        got,
        Err("claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied".to_string())
    );
}

/// `All` with an invalid pool on the node is an error (upstream's `validateDeviceRequest`:
/// "is currently invalid"), as an incomplete pool is.
#[test]
fn all_devices_with_an_invalid_pool_is_an_error() {
    let mut a = (*one_device("slice-1", "node-1", "pool-1", DRIVER_A)).clone();
    a.pool_slice_count = 2;
    let mut b = a.clone();
    b.name = sym("slice-1-2");
    let got = allocate(
        one_claim(
            vec![prioritized("req-0", vec![sub(SUB_0, DRIVER_A, None, &[])])],
            vec![],
        ),
        vec![Arc::new(a), Arc::new(b)],
        "node-1",
    );
    assert_eq!(
        got,
        Err("claim default/claim-0, request subReq-0: asks for all devices, but resource pool driver-a/pool-1 is currently invalid".to_string())
    );
}

// What v1.35.4 does and later releases do not (upstream fixed both after v1.35:
// `validateDeviceRequest` is now called with the subrequest's own cache key, and the
// `All` branch of `allocateOne` keeps the subrequest index). Gantry decides as v1.35.4.

/// The later table's `prioritized-list-allocation-mode-all-with-selectors` (and its
/// `-multiple-pools` and `-deviceclass-subset` variants), which expect `req-0/subReq-1`:
/// in v1.35.4 subrequest 1 (`All`, generation v5) reads the selector answers cached for
/// subrequest 0 (`All`, generation v6), finds no device, and the claim cannot be
/// allocated.
#[test]
fn v1_35_all_subrequest_after_an_all_subrequest_reuses_its_devices() {
    let generation = |g: &str| {
        vec![format!(
            "device.attributes[\"{DRIVER_A}\"].generation == \"{g}\""
        )]
    };
    let gen_attr = |g: &str| vec![("generation", AttributeValue::String(Arc::from(g)))];
    let claims = || {
        one_claim(
            vec![prioritized(
                "req-0",
                vec![
                    sub(SUB_0, DRIVER_A, None, &generation("v6")),
                    sub(SUB_1, DRIVER_A, None, &generation("v5")),
                ],
            )],
            vec![],
        )
    };
    let got = allocate(
        claims(),
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            vec![device("device-1", None, gen_attr("v5"))],
        )],
        "node-1",
    );
    assert_eq!(got, Ok(None));
    // Subrequest 0 fails on a constraint that names it alone; subrequest 1, under its own
    // name, then takes subrequest 0's devices: the v6 device.
    let numa = |g: &str, n: i64| {
        vec![
            ("generation", AttributeValue::String(Arc::from(g))),
            ("numa", AttributeValue::Int(n)),
        ]
    };
    let got = allocate(
        one_claim(
            vec![
                prioritized(
                    "req-0",
                    vec![
                        sub(SUB_0, DRIVER_A, None, &generation("v6")),
                        sub(SUB_1, DRIVER_A, None, &generation("v5")),
                    ],
                ),
                request("req-1", DRIVER_B, Some(1), &[]),
            ],
            vec![DeviceConstraint {
                kind: ConstraintKind::Match,
                requests: vec![Arc::from("req-0/subReq-0"), Arc::from("req-1")],
                attribute: QualifiedName {
                    domain: sym(DRIVER_A),
                    id: sym("numa"),
                },
            }],
        ),
        vec![
            slice(
                "slice-1",
                "node-1",
                "pool-1",
                DRIVER_A,
                vec![
                    device("device-1", None, numa("v5", 1)),
                    device("device-2", None, numa("v6", 1)),
                ],
            ),
            slice(
                "slice-2",
                "node-1",
                "pool-2",
                DRIVER_B,
                vec![device("device-3", None, numa("v5", 2))],
            ),
        ],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![
            result("req-0/subReq-1", DRIVER_A, "pool-1", "device-2"),
            result("req-1", DRIVER_B, "pool-2", "device-3"),
        ]])),
        "later releases give req-0/subReq-1 device-1 (v5)"
    );
}

/// After the first device of an `All` subrequest other than the first, v1.35.4 goes on
/// with subrequest 0: here subrequest 0 wants one device, so the `All` subrequest gets
/// only its first device; with two, the second comes from subrequest 0's selectors and
/// under its name.
#[test]
fn v1_35_all_subrequest_continues_as_subrequest_zero() {
    let devices = || {
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            vec![
                device("device-1", Some("4Gi"), vec![]),
                device("device-2", Some("8Gi"), vec![]),
                device("device-3", Some("4Gi"), vec![]),
            ],
        )]
    };
    let claims = |first: u32| {
        one_claim(
            vec![prioritized(
                "req-0",
                vec![
                    sub(SUB_0, DRIVER_A, Some(first), &memory_at_least("16Gi")),
                    sub(SUB_1, DRIVER_A, None, &[]),
                ],
            )],
            vec![],
        )
    };
    assert_eq!(
        allocate(claims(1), devices(), "node-1"),
        Ok(Some(vec![vec![result(
            "req-0/subReq-1",
            DRIVER_A,
            "pool-1",
            "device-1"
        )]]))
    );
    let claims = || {
        one_claim(
            vec![prioritized(
                "req-0",
                vec![
                    sub(SUB_0, DRIVER_A, Some(2), &memory_at_least("8Gi")),
                    sub(SUB_1, DRIVER_A, None, &[]),
                ],
            )],
            vec![],
        )
    };
    assert_eq!(
        allocate(claims(), devices(), "node-1"),
        Ok(Some(vec![vec![
            result("req-0/subReq-1", DRIVER_A, "pool-1", "device-1"),
            result("req-0/subReq-0", DRIVER_A, "pool-1", "device-2"),
        ]]))
    );
}

// Admin access (DRAAdminAccess, GA in v1.36): rows of upstream's shared table under the
// same names (v1.36.2 `allocator_testing.go`).

/// `request` with `adminAccess: true`.
fn admin(request: PreparedRequest) -> PreparedRequest {
    PreparedRequest {
        admin_access: true,
        ..request
    }
}

/// Each claim's devices as (device name, admin access), with `device-1` of pool-1 already
/// allocated when `device_1_allocated`; two devices on node-1.
fn with_admin_flags(
    claims: Vec<PreparedClaim>,
    device_1_allocated: bool,
) -> Option<Vec<Vec<(String, bool)>>> {
    let two = slice(
        "slice-1",
        "node-1",
        "pool-1",
        DRIVER_A,
        vec![
            device("device-1", None, Vec::new()),
            device("device-2", None, Vec::new()),
        ],
    );
    let allocated: DeviceSet = device_1_allocated
        .then(|| DeviceId {
            driver: sym(DRIVER_A),
            pool: sym("pool-1"),
            device: sym("device-1"),
        })
        .into_iter()
        .collect();
    let allocator = Allocator {
        claims,
        allocated: Arc::new(allocated),
        shared_slices: Vec::new(),
    };
    let allocations = allocator.allocate(&node("node-1"), &[two]).unwrap()?;
    Some(
        allocations
            .into_iter()
            .map(|a| {
                (a.devices.into_iter())
                    .map(|d| (d.device.device.to_string(), d.admin_access))
                    .collect()
            })
            .collect(),
    )
}

fn admitted(devices: &[(&str, bool)]) -> Vec<(String, bool)> {
    devices.iter().map(|(d, a)| (d.to_string(), *a)).collect()
}

#[test]
fn admin_access_takes_devices_others_hold() {
    let all = |admin_access: bool| {
        let r = request("req-0", DRIVER_A, None, &[]);
        vec![claim(
            "claim-0",
            vec![PreparedRequest { admin_access, ..r }],
            vec![],
        )]
    };
    // all-devices-some-allocated: without admin access, `All` cannot have device-1.
    assert_eq!(with_admin_flags(all(false), true), None);
    assert_eq!(
        with_admin_flags(all(true), true),
        Some(vec![admitted(&[("device-1", true), ("device-2", true)])]),
        "all-devices-some-allocated-admin-access"
    );
    let two = vec![claim(
        "claim-0",
        vec![admin(request("req-0", DRIVER_A, Some(2), &[]))],
        vec![],
    )];
    assert_eq!(
        with_admin_flags(two, true),
        Some(vec![admitted(&[("device-1", true), ("device-2", true)])]),
        "count-devices-some-allocated-admin-access"
    );
}

#[test]
fn admin_access_shares_across_claims_but_not_within_one() {
    // The second request's `All` cannot take device-1, which the first request of the
    // same claim is being given.
    let same_claim = vec![claim(
        "claim-0",
        vec![
            admin(request("req-0", DRIVER_A, Some(1), &[])),
            admin(request("req-1", DRIVER_A, None, &[])),
        ],
        vec![],
    )];
    assert_eq!(
        with_admin_flags(same_claim, false),
        None,
        "all-devices-some-allocating-admin-access"
    );
    let one = |name: &str| {
        claim(
            name,
            vec![admin(request("req-0", DRIVER_A, Some(1), &[]))],
            vec![],
        )
    };
    assert_eq!(
        with_admin_flags(vec![one("claim-0"), one("claim-1")], false),
        Some(vec![
            admitted(&[("device-1", true)]),
            admitted(&[("device-1", true)])
        ]),
        "separate-claims-share-device-admin-access"
    );
    let plain = claim(
        "claim-0",
        vec![request("req-0", DRIVER_A, Some(1), &[])],
        vec![],
    );
    assert_eq!(
        with_admin_flags(vec![plain, one("claim-1")], false),
        Some(vec![
            admitted(&[("device-1", false)]),
            admitted(&[("device-1", true)])
        ]),
        "admin-access-claims-device-allocating-for-non-admin-access"
    );
}

/// A device given for admin access is not held: an allocation's held devices leave it
/// out, and so does the cache's count of allocated devices.
#[test]
fn admin_access_results_hold_nothing() {
    let device = |name: &str, admin_access: bool| AllocatedDevice {
        binding: None,
        request: Arc::from("req-0"),
        device: DeviceId {
            driver: sym(DRIVER_A),
            pool: sym("pool-1"),
            device: sym(name),
        },
        admin_access,
        share: None,
    };
    let allocation = Allocation {
        devices: vec![device("device-1", true), device("device-2", false)],
        node_selector: None,
    };
    let held: Vec<String> = allocation
        .held_devices()
        .map(|d| d.device.to_string())
        .collect();
    assert_eq!(held, ["device-2"]);
}

// Device taints (DRADeviceTaints, beta and on in v1.36, GA in v1.37): rows of upstream's
// shared table under the same names (v1.36.2). Simple requests take the first path,
// `firstAvailable`, `All` and admin access the full search: both are covered.

fn taint(value: &str, effect: TaintEffect) -> DeviceTaint {
    DeviceTaint {
        key: sym("taint-key"),
        value: sym(value),
        effect,
    }
}

/// Upstream's `taintNoSchedule`, `taintNoExecute` and `taintNone`.
fn no_schedule() -> DeviceTaint {
    taint("taint-value", TaintEffect::NoSchedule)
}

fn no_execute() -> DeviceTaint {
    taint("taint-value-2", TaintEffect::NoExecute)
}

/// Upstream's `tolerationNoSchedule` (Exists) and `tolerationNoExecute` (Equal).
fn tolerates_no_schedule() -> DeviceToleration {
    DeviceToleration {
        key: Some(sym("taint-key")),
        exists: true,
        value: sym(""),
        effect: Some(TaintEffect::NoSchedule),
    }
}

fn tolerates_no_execute() -> DeviceToleration {
    DeviceToleration {
        key: Some(sym("taint-key")),
        exists: false,
        value: sym("taint-value-2"),
        effect: Some(TaintEffect::NoExecute),
    }
}

fn tainted(name: &str, taints: Vec<DeviceTaint>) -> Device {
    Device {
        taints,
        ..device(name, None, Vec::new())
    }
}

fn tainted_slice(devices: Vec<Device>) -> Vec<Arc<ResourceSlice>> {
    vec![slice("slice-1", "node-1", "pool-1", DRIVER_A, devices)]
}

fn tolerating(tolerations: Vec<DeviceToleration>) -> Vec<PreparedClaim> {
    let request = PreparedRequest {
        tolerations,
        ..request("req-0", DRIVER_A, Some(1), &[])
    };
    vec![claim("claim-0", vec![request], vec![])]
}

#[test]
fn tainted_devices_go_only_to_requests_that_tolerate_them() {
    let two = || {
        tainted_slice(vec![
            tainted("device-1", vec![no_schedule()]),
            tainted("device-2", vec![no_execute()]),
        ])
    };
    assert_eq!(
        allocate(tolerating(vec![]), two(), "node-1"),
        Ok(None),
        "tainted-two-devices"
    );
    let both_taints =
        || tainted_slice(vec![tainted("device-1", vec![no_schedule(), no_execute()])]);
    assert_eq!(
        allocate(tolerating(vec![]), both_taints(), "node-1"),
        Ok(None),
        "tainted-one-device-two-taints"
    );
    assert_eq!(
        allocate(tolerating(vec![tolerates_no_execute()]), two(), "node-1"),
        Ok(Some(vec![vec![result(
            "req-0", DRIVER_A, "pool-1", "device-2"
        )]])),
        "tainted-two-devices-tolerated"
    );
    assert_eq!(
        allocate(
            tolerating(vec![]),
            tainted_slice(vec![tainted(
                "device-1",
                vec![taint("taint-value", TaintEffect::None)]
            )]),
            "node-1"
        ),
        Ok(Some(vec![vec![result(
            "req-0", DRIVER_A, "pool-1", "device-1"
        )]])),
        "tainted-no-effect"
    );
    assert_eq!(
        allocate(
            tolerating(vec![tolerates_no_schedule(), tolerates_no_execute()]),
            both_taints(),
            "node-1"
        ),
        Ok(Some(vec![vec![result(
            "req-0", DRIVER_A, "pool-1", "device-1"
        )]])),
        "tainted-one-device-two-taints-both-tolerated"
    );
}

#[test]
fn tainted_devices_in_the_full_search() {
    let two = tainted_slice(vec![
        tainted("device-1", vec![no_schedule()]),
        tainted("device-2", vec![no_execute()]),
    ]);
    let subrequests = vec![
        sub(SUB_0, DRIVER_A, Some(1), &[]),
        PreparedSubRequest {
            tolerations: vec![tolerates_no_execute()],
            ..sub(SUB_1, DRIVER_A, Some(1), &[])
        },
    ];
    let claims = vec![claim(
        "claim-0",
        vec![prioritized("req-0", subrequests)],
        vec![],
    )];
    assert_eq!(
        allocate(claims, two, "node-1"),
        Ok(Some(vec![vec![result(
            "req-0/subReq-1",
            DRIVER_A,
            "pool-1",
            "device-2"
        )]])),
        "tainted-two-devices-prioritized-list-tolerated"
    );
    let one = || tainted_slice(vec![tainted("device-1", vec![no_schedule()])]);
    let claims = vec![claim(
        "claim-0",
        vec![prioritized(
            "req-0",
            vec![
                sub(SUB_0, DRIVER_B, Some(1), &[]),
                sub(SUB_1, DRIVER_A, Some(1), &[]),
            ],
        )],
        vec![],
    )];
    assert_eq!(
        allocate(claims, one(), "node-1"),
        Ok(None),
        "tainted-prioritized-list"
    );
    let all = claim_0(DRIVER_A, None);
    assert_eq!(
        allocate(all, one(), "node-1"),
        Ok(None),
        "tainted-all-devices-single"
    );
    // Admin access does not pass a taint.
    let admin_claim = vec![claim(
        "claim-0",
        vec![admin(request("req-0", DRIVER_A, Some(1), &[]))],
        vec![],
    )];
    let allocated = [
        (DRIVER_A, "pool-1", "device-1"),
        (DRIVER_A, "pool-1", "device-2"),
    ];
    let (got, _) = allocate_with(
        admin_claim,
        one(),
        "node-1",
        &allocated,
        Features::default(),
    );
    assert_eq!(got, Ok(None), "tainted-admin-access");
}

// Partitionable devices (DRAPartitionableDevices): upstream's `partitionable-devices-*`
// rows and `all-devices-with-consumed-counters`.

fn partitionable() -> Features {
    Features {
        partitionable_devices: true,
        ..Features::default()
    }
}

type CounterList<'a> = Vec<(&'a str, &'a str)>;

fn counters(list: &CounterList<'_>) -> Counters {
    list.iter()
        .map(|(name, q)| {
            let milli = gantry_api::Quantity::parse(q).unwrap().milli_value();
            (sym(name), milli.unwrap())
        })
        .collect()
}

/// A device consuming from counter sets (set, counters); with `capacity_from_counters`
/// its capacities are the counters it consumes (upstream's `fromCounters`).
fn partition(
    name: &str,
    consumes: &[(&str, CounterList<'_>)],
    capacity_from_counters: bool,
) -> Device {
    let consumes_counters: Vec<CounterConsumption> = consumes
        .iter()
        .map(|(set, list)| CounterConsumption {
            counter_set: sym(set),
            counters: counters(list),
        })
        .collect();
    let capacity = match capacity_from_counters {
        false => Vec::new(),
        true => {
            let mut capacity: Vec<DeviceCapacity> = Vec::new();
            for (name, value) in consumes_counters.iter().flat_map(|c| &c.counters) {
                let qualified = QualifiedName {
                    domain: sym(DRIVER_A),
                    id: *name,
                };
                capacity.retain(|c| c.name != qualified);
                capacity.push(DeviceCapacity::new(qualified, name.as_str(), *value));
            }
            capacity
        }
    };
    Device {
        capacity,
        consumes_counters,
        ..device(name, None, Vec::new())
    }
}

/// A slice of `devices` in a pool of `count` slices.
fn pool_slice(
    name: &str,
    node: &str,
    pool: &str,
    count: i64,
    devices: Vec<Device>,
) -> Arc<ResourceSlice> {
    let mut slice = (*slice(name, node, pool, DRIVER_A, devices)).clone();
    slice.pool_slice_count = count;
    Arc::new(slice)
}

/// A slice of counter sets (name, counters) in a pool of `count` slices.
fn counter_slice(
    name: &str,
    node: &str,
    pool: &str,
    count: i64,
    sets: &[(&str, CounterList<'_>)],
) -> Arc<ResourceSlice> {
    let mut slice = (*pool_slice(name, node, pool, count, Vec::new())).clone();
    slice.shared_counters = sets
        .iter()
        .map(|(set, list)| CounterSet {
            name: sym(set),
            counters: counters(list),
        })
        .collect();
    Arc::new(slice)
}

const SET_1: &str = "counter-set-1";
const SET_2: &str = "counter-set-2";

/// Three partitions of one counter set of 8Gi (4Gi, 6Gi, 4Gi), capacities from counters.
fn three_partitions_of_8gi() -> Vec<Arc<ResourceSlice>> {
    let memory = |q| [(SET_1, vec![("memory", q)])];
    vec![
        pool_slice(
            "slice-1",
            "node-1",
            "pool-1",
            2,
            vec![
                partition("device-1", &memory("4Gi"), true),
                partition("device-2", &memory("6Gi"), true),
                partition("device-3", &memory("4Gi"), true),
            ],
        ),
        counter_slice("slice-2", "node-1", "pool-1", 2, &memory("8Gi")),
    ]
}

/// `claim-0` with `req-0` and `req-1`, one device each.
fn two_requests_of_one() -> Vec<PreparedClaim> {
    let one = |name| request(name, DRIVER_A, Some(1), &[]);
    vec![claim("claim-0", vec![one("req-0"), one("req-1")], vec![])]
}

fn allocate_partitions(
    claims: Vec<PreparedClaim>,
    slices: Vec<Arc<ResourceSlice>>,
    allocated: &[(&str, &str, &str)],
    features: Features,
) -> Outcome {
    allocate_with(claims, slices, "node-1", allocated, features).0
}

#[test]
fn partitionable_devices_single_device() {
    let memory = |q| [(SET_1, vec![("memory", q)])];
    let slices = vec![
        pool_slice(
            "slice-1",
            "node-1",
            "pool-1",
            2,
            vec![partition("device-1", &memory("4Gi"), false)],
        ),
        counter_slice("slice-2", "node-1", "pool-1", 2, &memory("8Gi")),
    ];
    assert_eq!(
        allocate_partitions(claim_0(DRIVER_A, Some(1)), slices, &[], partitionable()),
        Ok(Some(vec![vec![result(
            "req-0", DRIVER_A, "pool-1", "device-1"
        )]]))
    );
}

#[test]
fn partitionable_devices_prioritized_list() {
    let claims = vec![claim(
        "claim-0",
        vec![
            request("req-0", DRIVER_A, Some(1), &[]),
            prioritized(
                "req-1",
                vec![
                    sub(SUB_0, DRIVER_A, Some(1), &memory_at_least("6Gi")),
                    sub(SUB_1, DRIVER_A, Some(1), &memory_at_least("4Gi")),
                ],
            ),
        ],
        vec![],
    )];
    assert_eq!(
        allocate_partitions(claims, three_partitions_of_8gi(), &[], partitionable()),
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-1"),
            result("req-1/subReq-1", DRIVER_A, "pool-1", "device-3"),
        ]]))
    );
}

#[test]
fn partitionable_devices_multiple_devices() {
    let claims = two_requests_of_one();
    assert_eq!(
        allocate_partitions(claims, three_partitions_of_8gi(), &[], partitionable()),
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-1"),
            result("req-1", DRIVER_A, "pool-1", "device-3"),
        ]]))
    );
}

#[test]
fn partitionable_devices_multiple_counters() {
    let device = |name, m1, c1, c2, m2| {
        partition(
            name,
            &[
                (SET_1, vec![("memory", m1), ("cpus", c1)]),
                (SET_2, vec![("cpus", c2), ("memory", m2)]),
            ],
            true,
        )
    };
    let slices = vec![
        pool_slice(
            "slice-1",
            "node-1",
            "pool-1",
            2,
            vec![
                device("device-1", "4Gi", "6", "4", "2Gi"),
                device("device-2", "6Gi", "4", "6", "6Gi"),
                device("device-3", "4Gi", "4", "4", "4Gi"),
            ],
        ),
        counter_slice(
            "slice-2",
            "node-1",
            "pool-1",
            2,
            &[
                (SET_1, vec![("cpus", "8"), ("memory", "18Gi")]),
                (SET_2, vec![("cpus", "12"), ("memory", "18Gi")]),
            ],
        ),
    ];
    let claims = two_requests_of_one();
    // device-1 and either other would take 10 cpus of counter-set-1's 8: backtracking
    // gives up device-1.
    assert_eq!(
        allocate_partitions(claims, slices, &[], partitionable()),
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-2"),
            result("req-1", DRIVER_A, "pool-1", "device-3"),
        ]]))
    );
}

#[test]
fn partitionable_devices_multiple_pools_count_devices_already_allocated() {
    let device = |name, cpus, memory| {
        partition(
            name,
            &[(SET_1, vec![("cpus", cpus), ("memory", memory)])],
            true,
        )
    };
    let counters = [(SET_1, vec![("cpus", "8"), ("memory", "18Gi")])];
    let slices = vec![
        pool_slice(
            "slice-1",
            "node-1",
            "pool-1",
            2,
            vec![
                device("device-1", "6", "4Gi"),
                device("device-2", "4", "6Gi"),
                device("device-3", "4", "4Gi"),
            ],
        ),
        counter_slice("slice-2", "node-1", "pool-1", 2, &counters),
        pool_slice(
            "slice-3",
            "node-1",
            "pool-2",
            2,
            vec![
                device("device-1", "6", "4Gi"),
                device("device-2", "1", "7Gi"),
                device("device-3", "1", "7Gi"),
            ],
        ),
        counter_slice("slice-4", "node-1", "pool-2", 2, &counters),
    ];
    let claims = two_requests_of_one();
    let allocated = [
        (DRIVER_A, "pool-1", "device-2"),
        (DRIVER_A, "pool-1", "device-3"),
        (DRIVER_A, "pool-2", "device-1"),
    ];
    assert_eq!(
        allocate_partitions(claims, slices, &allocated, partitionable()),
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-2", "device-2"),
            result("req-1", DRIVER_A, "pool-2", "device-3"),
        ]]))
    );
}

#[test]
fn partitionable_devices_unused_counters_in_counter_set() {
    let memory = |q| [(SET_1, vec![("memory", q)])];
    let slices = vec![
        pool_slice(
            "slice-1",
            "node-1",
            "pool-1",
            2,
            vec![
                partition("device-1", &memory("5Gi"), false),
                partition("device-2", &memory("4Gi"), false),
                partition("device-3", &memory("4Gi"), false),
            ],
        ),
        counter_slice(
            "slice-2",
            "node-1",
            "pool-1",
            2,
            &[(SET_1, vec![("memory", "8Gi"), ("unused", "1Gi")])],
        ),
    ];
    assert_eq!(
        allocate_partitions(claim_0(DRIVER_A, Some(2)), slices, &[], partitionable()),
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-2"),
            result("req-0", DRIVER_A, "pool-1", "device-3"),
        ]]))
    );
}

#[test]
fn partitionable_devices_no_capacity_left_and_overallocated_pool() {
    // Upstream's rows put both slices in a pool of one slice (incomplete: no result
    // either way); here the pool is complete, so the counters are what refuses.
    for (second, name) in [("16Gi", "no-capacity-available"), ("20Gi", "overallocated")] {
        let memory = |q| [(SET_1, vec![("memory", q)])];
        let slices = vec![
            pool_slice(
                "slice-1",
                "node-1",
                "pool-1",
                2,
                vec![
                    partition("device-1", &memory("4Gi"), true),
                    partition("device-2", &memory(second), true),
                ],
            ),
            counter_slice("slice-2", "node-1", "pool-1", 2, &memory("18Gi")),
        ];
        let allocated = [(DRIVER_A, "pool-1", "device-2")];
        let got = allocate_partitions(
            claim_0(DRIVER_A, Some(1)),
            slices,
            &allocated,
            partitionable(),
        );
        assert_eq!(got, Ok(None), "{name}");
    }
}

#[test]
fn partitionable_devices_disabled() {
    let memory = [(SET_1, vec![("memory", "4Gi")])];
    let counters = [(SET_1, vec![("memory", "18Gi")])];
    let consuming = partition("device-1", &memory, false);
    let slices = |devices| {
        vec![
            pool_slice("slice-1", "node-1", "pool-1", 2, devices),
            counter_slice("slice-2", "node-1", "pool-1", 2, &counters),
        ]
    };
    let claims = || claim_0(DRIVER_A, Some(1));
    let off = Features::default();
    assert_eq!(
        allocate_partitions(claims(), slices(vec![consuming.clone()]), &[], off),
        Ok(None),
        "partitionable-devices-disabled-device-consumes-counters"
    );
    let other = device("device-2", None, Vec::new());
    assert_eq!(
        allocate_partitions(claims(), slices(vec![consuming, other]), &[], off),
        Ok(Some(vec![vec![result(
            "req-0", DRIVER_A, "pool-1", "device-2"
        )]])),
        "partitionable-devices-disabled-other-device-do-not-consume-counters"
    );
}

#[test]
fn all_devices_with_consumed_counters() {
    let slices = vec![
        pool_slice(
            "slice-1",
            "node-1",
            "pool-1",
            2,
            vec![partition(
                "device-1",
                &[(SET_1, vec![("memory", "4Gi")])],
                false,
            )],
        ),
        counter_slice(
            "slice-2",
            "node-1",
            "pool-1",
            2,
            &[(SET_1, vec![("memory", "8Gi")])],
        ),
    ];
    assert_eq!(
        allocate_partitions(claim_0(DRIVER_A, None), slices, &[], partitionable()),
        Ok(Some(vec![vec![result(
            "req-0", DRIVER_A, "pool-1", "device-1"
        )]]))
    );
}

#[test]
fn partitionable_devices_invalid_pools() {
    let memory = [(SET_1, vec![("memory", "8Gi")])];
    let cases: Vec<(&str, Vec<Arc<ResourceSlice>>)> = vec![
        (
            "same-counter-set-name-in-different-resource-slices",
            vec![
                pool_slice(
                    "slice-1",
                    "node-1",
                    "pool-1",
                    4,
                    vec![device("device-1", None, vec![])],
                ),
                counter_slice("slice-2", "node-1", "pool-1", 4, &memory),
                pool_slice(
                    "slice-3",
                    "node-1",
                    "pool-1",
                    4,
                    vec![device("device-2", None, vec![])],
                ),
                counter_slice("slice-4", "node-1", "pool-1", 4, &memory),
            ],
        ),
        (
            "device-counter-consumption-references-unknown-counter-set",
            vec![
                pool_slice(
                    "slice-1",
                    "node-1",
                    "pool-1",
                    2,
                    vec![partition(
                        "device-1",
                        &[(SET_2, vec![("memory", "1Gi")])],
                        false,
                    )],
                ),
                counter_slice("slice-2", "node-1", "pool-1", 2, &memory),
            ],
        ),
        (
            "device-counter-consumption-references-unknown-counter-in-counter-set",
            vec![
                pool_slice(
                    "slice-1",
                    "node-1",
                    "pool-1",
                    2,
                    vec![partition(
                        "device-1",
                        &[(SET_1, vec![("memory", "8Gi")])],
                        false,
                    )],
                ),
                counter_slice(
                    "slice-2",
                    "node-1",
                    "pool-1",
                    2,
                    &[(SET_1, vec![("other-memory", "8Gi")])],
                ),
            ],
        ),
        (
            "device-counter-consumption-references-counter-set-in-other-pool",
            vec![
                pool_slice(
                    "slice-1",
                    "node-1",
                    "pool-1",
                    1,
                    vec![partition(
                        "device-1",
                        &[(SET_1, vec![("memory", "8Gi")])],
                        false,
                    )],
                ),
                counter_slice("slice-2", "node-1", "pool-2", 1, &memory),
            ],
        ),
    ];
    for (name, slices) in cases {
        let got = allocate_partitions(claim_0(DRIVER_A, Some(1)), slices, &[], partitionable());
        assert!(
            got.as_ref()
                .is_err_and(|e| e.contains("invalid resource pools were encountered")),
            "{name}: {got:?}"
        );
    }
}

#[test]
fn partitionable_devices_counters_of_a_shared_pool_count_devices_other_nodes_reach() {
    // Upstream's `devices-on-different-nodes-consume-same-counter-set`, with the pool's
    // slices shared (Gantry's allocator sees other nodes' local slices only through
    // their nodes): device-3, reachable only from node-2, is allocated and takes 6Gi of
    // the 8Gi, so node-1's request gets its second subrequest.
    let memory = |q| [(SET_1, vec![("memory", q)])];
    let on = |slice: Arc<ResourceSlice>, node: &str| {
        let mut slice = (*slice).clone();
        slice.nodes = SliceNodes::Selector(NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions: Vec::new(),
                match_fields: vec![
                    gantry_api::labels::NodeSelectorRequirement::parse(
                        "metadata.name",
                        "In",
                        &[node.to_string()],
                        true,
                    )
                    .unwrap(),
                ],
            }],
        });
        Arc::new(slice)
    };
    let slices = vec![
        on(
            counter_slice("slice-1", "x", "pool-1", 3, &memory("8Gi")),
            "node-1",
        ),
        on(
            pool_slice(
                "slice-2",
                "x",
                "pool-1",
                3,
                vec![
                    partition("device-1", &memory("6Gi"), true),
                    partition("device-2", &memory("2Gi"), true),
                ],
            ),
            "node-1",
        ),
        on(
            pool_slice(
                "slice-3",
                "x",
                "pool-1",
                3,
                vec![partition("device-3", &memory("6Gi"), false)],
            ),
            "node-2",
        ),
    ];
    let claims = vec![claim(
        "claim-0",
        vec![prioritized(
            "req-0",
            vec![
                sub(SUB_0, DRIVER_A, Some(1), &memory_at_least("6Gi")),
                sub(SUB_1, DRIVER_A, Some(1), &memory_at_least("2Gi")),
            ],
        )],
        vec![],
    )];
    let allocated = [(DRIVER_A, "pool-1", "device-3")];
    let got = allocate_partitions(claims, slices, &allocated, partitionable());
    let picked = got.map(|r| r.map(|claims| claims[0].clone()));
    assert_eq!(
        picked,
        Ok(Some(vec![result(
            "req-0/subReq-1",
            DRIVER_A,
            "pool-1",
            "device-2"
        )]))
    );
}

#[test]
fn a_refused_partition_gives_its_counters_back() {
    // v1.36.3's `rollbackDevice`: device-1 takes 6Gi of the 8Gi, then its taint refuses
    // it; the 6Gi go back, so device-2's 4Gi fit (v1.36.2 kept them: no device).
    let memory = |q| [(SET_1, vec![("memory", q)])];
    let tainted_partition = Device {
        taints: vec![no_schedule()],
        ..partition("device-1", &memory("6Gi"), false)
    };
    let slices = vec![
        pool_slice(
            "slice-1",
            "node-1",
            "pool-1",
            2,
            vec![
                tainted_partition,
                partition("device-2", &memory("4Gi"), false),
            ],
        ),
        counter_slice("slice-2", "node-1", "pool-1", 2, &memory("8Gi")),
    ];
    assert_eq!(
        allocate_partitions(claim_0(DRIVER_A, Some(1)), slices, &[], partitionable()),
        Ok(Some(vec![vec![result(
            "req-0", DRIVER_A, "pool-1", "device-2"
        )]]))
    );
}

/// The slice with per-device node selection: each device reachable as `nodes` says.
fn per_device(slice: Arc<ResourceSlice>, nodes: Vec<SliceNodes>) -> Arc<ResourceSlice> {
    let mut slice = (*slice).clone();
    slice.nodes = SliceNodes::PerDevice(nodes.into());
    Arc::new(slice)
}

/// Nodes of the label `region` `region-1`.
fn in_region_1() -> NodeSelector {
    NodeSelector {
        terms: vec![NodeSelectorTerm {
            match_expressions: vec![
                gantry_api::labels::NodeSelectorRequirement::parse(
                    "region",
                    "In",
                    &["region-1".to_string()],
                    false,
                )
                .unwrap(),
            ],
            match_fields: Vec::new(),
        }],
    }
}

#[test]
fn partitionable_devices_per_device_node_selection_nodename() {
    let memory = |q| [(SET_1, vec![("memory", q)])];
    let devices = pool_slice(
        "slice-1",
        "x",
        "pool-1",
        2,
        vec![
            partition("device-1", &memory("4Gi"), true),
            partition("device-2", &memory("6Gi"), true),
        ],
    );
    let on = |node: &str| SliceNodes::Node(sym(node));
    let slices = vec![
        per_device(devices, vec![on("node-1"), on("node-2")]),
        per_device(
            counter_slice("slice-2", "x", "pool-1", 2, &memory("18Gi")),
            vec![],
        ),
    ];
    let claims = vec![claim(
        "claim-0",
        vec![prioritized(
            "req-0",
            vec![
                sub(SUB_0, DRIVER_A, Some(1), &memory_at_least("6Gi")),
                sub(SUB_1, DRIVER_A, Some(1), &memory_at_least("4Gi")),
            ],
        )],
        vec![],
    )];
    let (node, allocator) = allocator_for(claims, slices);
    let found = allocator.allocate_with(&node, &[], partitionable()).0;
    let allocation = &found.unwrap().unwrap()[0];
    assert_eq!(allocation.devices.len(), 1);
    assert_eq!(&*allocation.devices[0].request, "req-0/subReq-1");
    assert_eq!(allocation.devices[0].device.device, sym("device-1"));
    assert_eq!(allocation.node_selector, Some(local_selector("node-1")));
    // With the gate off the slice is not read at all.
    let off = allocator.allocate_with(&node, &[], Features::default()).0;
    assert_eq!(off.map(|found| found.is_some()), Ok(false));
}

#[test]
fn partitionable_devices_per_device_node_selection_node_selector() {
    let memory = |q| [(SET_1, vec![("memory", q)])];
    let devices = pool_slice(
        "slice-1",
        "x",
        "pool-1",
        2,
        vec![partition("device-1", &memory("4Gi"), true)],
    );
    let slices = vec![
        per_device(devices, vec![SliceNodes::Selector(in_region_1())]),
        per_device(
            counter_slice("slice-2", "x", "pool-1", 2, &memory("18Gi")),
            vec![],
        ),
    ];
    let (node, allocator) = allocator_for(claim_0(DRIVER_A, Some(1)), slices);
    let found = allocator.allocate_with(&node, &[], partitionable()).0;
    let allocation = &found.unwrap().unwrap()[0];
    assert_eq!(allocation.devices[0].device.device, sym("device-1"));
    assert_eq!(allocation.node_selector, Some(in_region_1()));
}

#[test]
fn partitionable_devices_per_device_node_selection_node_selector_multiple_devices() {
    let memory = |set, q| [(set, vec![("memory", q)])];
    let a_devices: Vec<Device> = (1..=3)
        .map(|i| partition(&format!("device-{i}"), &memory(SET_1, "4Gi"), true))
        .collect();
    let b_devices: Vec<Device> = (1..=3)
        .map(|i| partition(&format!("device-{i}"), &memory(SET_2, "4Gi"), true))
        .collect();
    let mut b_slice = (*pool_slice("slice-3", "node-1", "pool-2", 2, b_devices)).clone();
    b_slice.driver = sym(DRIVER_B);
    let mut b_counters =
        (*counter_slice("slice-4", "node-1", "pool-2", 2, &memory(SET_2, "12Gi"))).clone();
    b_counters.driver = sym(DRIVER_B);
    let slices = vec![
        per_device(
            pool_slice("slice-1", "x", "pool-1", 2, a_devices),
            vec![
                SliceNodes::Selector(in_region_1()),
                SliceNodes::Node(sym("node-1")),
                SliceNodes::All,
            ],
        ),
        per_device(
            counter_slice("slice-2", "x", "pool-1", 2, &memory(SET_1, "18Gi")),
            vec![],
        ),
        Arc::new(b_slice),
        Arc::new(b_counters),
    ];
    let claims = vec![claim(
        "claim-0",
        vec![
            request("req-0", DRIVER_A, Some(3), &[]),
            request("req-1", DRIVER_B, Some(3), &[]),
        ],
        vec![],
    )];
    assert_eq!(
        allocate_partitions(claims, slices, &[], partitionable()),
        Ok(Some(vec![vec![
            result("req-0", DRIVER_A, "pool-1", "device-1"),
            result("req-0", DRIVER_A, "pool-1", "device-2"),
            result("req-0", DRIVER_A, "pool-1", "device-3"),
            result("req-1", DRIVER_B, "pool-2", "device-1"),
            result("req-1", DRIVER_B, "pool-2", "device-2"),
            result("req-1", DRIVER_B, "pool-2", "device-3"),
        ]]))
    );
}

/// `node-1` and an allocator of `claims` over the shared `slices` (nothing allocated).
fn allocator_for(claims: Vec<PreparedClaim>, slices: Vec<Arc<ResourceSlice>>) -> (Node, Allocator) {
    let allocator = Allocator {
        claims,
        allocated: nothing_allocated(),
        shared_slices: slices,
    };
    (node("node-1"), allocator)
}

/// A pool of one slice with per-device node selection is the search's: the first path
/// would take a device of another node.
#[test]
fn per_device_node_selection_in_a_one_slice_pool_skips_other_nodes_devices() {
    let devices = vec![
        device("device-1", None, Vec::new()),
        device("device-2", None, Vec::new()),
    ];
    let on = |node: &str| SliceNodes::Node(sym(node));
    let slice = per_device(
        slice("slice-1", "x", "pool-1", DRIVER_A, devices),
        vec![on("node-2"), on("node-1")],
    );
    let (node, allocator) = allocator_for(claim_0(DRIVER_A, Some(1)), vec![slice]);
    let found = allocator.allocate_with(&node, &[], partitionable()).0;
    let allocation = &found.unwrap().unwrap()[0];
    assert_eq!(allocation.devices[0].device.device, sym("device-2"));
}

/// A `distinctAttribute` constraint on `attribute` over `requests` (all when empty).
fn distinct(attribute: &str, requests: &[&str]) -> DeviceConstraint {
    DeviceConstraint {
        kind: ConstraintKind::Distinct,
        requests: requests.iter().map(|r| Arc::from(*r)).collect(),
        attribute: QualifiedName {
            domain: sym(DRIVER_A),
            id: sym(attribute),
        },
    }
}

/// A `matchAttribute` constraint on `attribute` over `requests` (all when empty).
fn matching(attribute: &str, requests: &[&str]) -> DeviceConstraint {
    DeviceConstraint {
        kind: ConstraintKind::Match,
        ..distinct(attribute, requests)
    }
}

/// Upstream's "with-distinct-constraints" (v1.36.2 `allocator_testing.go`): three
/// constraints over nested sets of requests, each request picking the first device that
/// differs where its constraints say. Upstream's devices allow multiple allocations (each
/// request gets a share); on devices held alone the choice is the same.
#[test]
fn distinct_attribute_constraints() {
    let attributes = |version: &str, numa: i64, flag: bool| {
        vec![
            ("driverVersion", AttributeValue::Version(Arc::from(version))),
            ("numa", AttributeValue::Int(numa)),
            ("boolAttribute", AttributeValue::Bool(flag)),
        ]
    };
    let devices = vec![
        device("device-1", None, attributes("1.0.0", 0, true)),
        device("device-2", None, attributes("1.0.1", 1, false)),
        device("device-3", None, attributes("1.0.2", 2, true)),
        device("device-4", None, attributes("1.0.0", 3, true)),
    ];
    let claims = || {
        let requests = (0..4)
            .map(|i| request(&format!("req-{i}"), DRIVER_A, Some(1), &[]))
            .collect();
        vec![claim(
            "claim-0",
            requests,
            vec![
                distinct("boolAttribute", &["req-0", "req-1"]),
                distinct("driverVersion", &["req-0", "req-1", "req-2"]),
                distinct("numa", &["req-0", "req-1", "req-2", "req-3"]),
            ],
        )]
    };
    let shared: Vec<Device> = (devices.iter())
        .map(|d| Device {
            allow_multiple_allocations: true,
            ..d.clone()
        })
        .collect();
    let got = allocate_shares(claims(), one_slice(shared), Held::default(), consumable());
    let picked = |i: usize| (format!("req-{}", i - 1), format!("device-{i}"));
    assert_eq!(
        got,
        Ok(Some(vec![
            (1..=4)
                .map(|i| {
                    let (request, device) = picked(i);
                    share(&request, &device, None)
                })
                .collect()
        ]))
    );
    let got = allocate(
        claims(),
        vec![slice("slice-1", "node-1", "pool-1", DRIVER_A, devices)],
        "node-1",
    );
    assert_eq!(
        got,
        Ok(Some(vec![
            (1..=4)
                .map(|i| {
                    let (request, device) = picked(i);
                    result(&request, DRIVER_A, "pool-1", &device)
                })
                .collect()
        ]))
    );
}

/// Upstream's "with-distinct-constraints-attribute-not-set": a device without the
/// attribute never satisfies the constraint.
#[test]
fn distinct_attribute_constraint_needs_the_attribute() {
    let got = allocate(
        vec![claim(
            "claim-0",
            vec![request("req-0", DRIVER_A, Some(1), &[])],
            vec![distinct("boolAttribute", &["req-0"])],
        )],
        vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            vec![device("device-1", None, vec![])],
        )],
        "node-1",
    );
    assert_eq!(got, Ok(None));
}

/// Upstream keeps one value per request (the device picked for it last), so three devices
/// of one request need only differ from the one before. Before v1.36 the search tries a
/// request's devices as permutations (each from the first device again): numa 0, 1 and 0
/// are allocated together (device-1, device-3, then device-2; the gate was alpha then).
/// From v1.36 it tries combinations (each after the one before, `startLocation`): after
/// device-1 and device-3 nothing is left, and no three devices fit. Recorded with the
/// real v1.36.3 code (testdata/dra-1.36/distinct: such a node is refused).
#[test]
fn distinct_attribute_compares_with_the_last_device_of_each_request() {
    let numa = |n: i64| vec![("numa", AttributeValue::Int(n))];
    let devices = vec![
        device("device-1", None, numa(0)),
        device("device-2", None, numa(0)),
        device("device-3", None, numa(1)),
    ];
    let run = |features: Features| {
        let claims = vec![claim(
            "claim-0",
            vec![request("req-0", DRIVER_A, Some(3), &[])],
            vec![distinct("numa", &[])],
        )];
        let slices = vec![slice(
            "slice-1",
            "node-1",
            "pool-1",
            DRIVER_A,
            devices.clone(),
        )];
        allocate_with(claims, slices, "node-1", &[], features).0
    };
    assert_eq!(
        run(Features::default()),
        Ok(Some(vec![
            ["device-1", "device-3", "device-2"]
                .iter()
                .map(|d| result("req-0", DRIVER_A, "pool-1", d))
                .collect()
        ]))
    );
    let v1_36 = Features::of(gantry_api::Release::parse(Some("1.36"), None).unwrap());
    assert_eq!(run(v1_36), Ok(None));
}

// Consumable capacity (DRAConsumableCapacity): upstream's `consumable-capacity-*` and
// `allow-multiple-allocations-*` rows. Upstream's quantities one to four are 1 to 4 units
// (1000 to 4000 thousandths); its share IDs are random (the rows fix them), Gantry's are
// derived from the claim, so the rows check that a share has one.

fn consumable() -> Features {
    Features {
        consumable_capacity: true,
        prioritized_list: true,
        partitionable_devices: true,
        ..Features::default()
    }
}

const CAPACITY_0: &str = "capacity-0";

fn units(n: i64) -> i64 {
    n * 1000
}

/// A capacity `capacity-0` (as the slice writes it) of `value`, with `policy`.
fn capacity_0(
    value: i64,
    policy: Option<gantry_api::dra_capacity::RequestPolicy>,
) -> DeviceCapacity {
    DeviceCapacity {
        request_policy: policy.map(Box::new),
        ..capacity_named(CAPACITY_0, value)
    }
}

/// A capacity `name` (as the slice writes it) of `value`, without a policy.
fn capacity_named(name: &str, value: i64) -> DeviceCapacity {
    let qualified = QualifiedName {
        domain: sym(DRIVER_A),
        id: sym(name),
    };
    DeviceCapacity::new(qualified, name, value)
}

/// Upstream's `withCapacityRequestPolicyRange`: default 2, min 2, step 2, max 4.
fn range_policy() -> gantry_api::dra_capacity::RequestPolicy {
    gantry_api::dra_capacity::RequestPolicy {
        default: Some(units(2)),
        valid: gantry_api::dra_capacity::ValidAmounts::Range {
            min: units(2),
            max: Some(units(4)),
            step: Some(units(2)),
        },
    }
}

/// Upstream's `withCapacityRequestPolicyValidValues`: the default first, then the rest.
fn values_policy(default: i64, more: &[i64]) -> gantry_api::dra_capacity::RequestPolicy {
    gantry_api::dra_capacity::RequestPolicy {
        default: Some(default),
        valid: gantry_api::dra_capacity::ValidAmounts::Values(
            std::iter::once(default)
                .chain(more.iter().copied())
                .collect(),
        ),
    }
}

/// A device that allows multiple allocations, with these capacities.
fn shared(name: &str, capacity: Vec<DeviceCapacity>) -> Device {
    Device {
        capacity,
        allow_multiple_allocations: true,
        ..device(name, None, Vec::new())
    }
}

/// A request of `count` devices (`None`: All) asking `amount` of `capacity-0`, of a class
/// that, like upstream's `classWithAllowMultipleAllocations`, also selects
/// `device.allowMultipleAllocations == multi` when `multi` is given.
fn capacity_request(
    name: &str,
    count: Option<u32>,
    amount: Option<i64>,
    multi: Option<bool>,
) -> PreparedRequest {
    PreparedRequest::exactly(name, capacity_selection(count, amount, multi))
}

fn capacity_selection(
    count: Option<u32>,
    amount: Option<i64>,
    multi: Option<bool>,
) -> PreparedSelection {
    let mut class = format!("device.driver == \"{DRIVER_A}\"");
    if let Some(multi) = multi {
        class += &format!(" && device.allowMultipleAllocations == {multi}");
    }
    PreparedSelection {
        capacity: amount
            .map(|a| vec![(sym(CAPACITY_0), a)])
            .unwrap_or_default(),
        ..PreparedSelection::new(
            sym("class-a"),
            count.map_or(AllocationMode::All, AllocationMode::ExactCount),
            selectors(&[class]),
            selectors(&[]),
        )
    }
}

/// Devices held alone and shares held (device, consumed `capacity-0`) by other claims.
#[derive(Default)]
struct Held {
    alone: DeviceSet,
    shares: std::collections::HashMap<DeviceId, gantry_cache::DeviceShares>,
}

impl gantry_cache::DeviceUse for Held {
    fn is_allocated(&self, device: DeviceId) -> bool {
        self.alone.contains(&device)
    }

    fn shares(&self, device: DeviceId) -> Option<gantry_cache::DeviceShares> {
        self.shares.get(&device).cloned()
    }

    fn has_shares(&self) -> bool {
        !self.shares.is_empty()
    }
}

fn pool_1(name: &str) -> DeviceId {
    DeviceId {
        driver: sym(DRIVER_A),
        pool: sym("pool-1"),
        device: sym(name),
    }
}

/// A share held of `device` taking `consumed` of `capacity-0` (`None`: no capacity named).
fn held_share(device: &str, consumed: Option<i64>) -> Held {
    let mut held = Held::default();
    held.shares.insert(
        pool_1(device),
        gantry_cache::DeviceShares {
            count: 1,
            consumed: consumed.map(|c| vec![(sym(CAPACITY_0), c)]),
        },
    );
    held
}

/// One result: request, device, and for a share what it takes of `capacity-0` (`None` for
/// a device taken whole; `Some(None)` for a share naming no capacity).
type ShareResult = (String, String, Option<Option<i64>>);

fn allocate_shares(
    claims: Vec<PreparedClaim>,
    slices: Vec<Arc<ResourceSlice>>,
    held: Held,
    features: Features,
) -> Result<Option<Vec<Vec<ShareResult>>>, String> {
    let node = node("node-1");
    let allocator = Allocator {
        claims,
        allocated: Arc::new(held),
        shared_slices: Vec::new(),
    };
    let result = allocator.allocate_with(&node, &slices, features).0?;
    Ok(result.map(|allocations| {
        allocations
            .into_iter()
            .map(|a| {
                (a.devices.into_iter())
                    .map(|d| {
                        let share = d.share.as_ref().map(|share| {
                            let id = &share.id;
                            assert_eq!(id.len(), 36, "a share ID is a UUID: {id}");
                            (share.consumed.iter())
                                .find(|(k, _)| *k == sym(CAPACITY_0))
                                .map(|(_, v)| *v)
                        });
                        (d.request.to_string(), d.device.device.to_string(), share)
                    })
                    .collect()
            })
            .collect()
    }))
}

fn share(request: &str, device: &str, consumed: Option<i64>) -> ShareResult {
    (request.to_string(), device.to_string(), Some(consumed))
}

fn one_slice(devices: Vec<Device>) -> Vec<Arc<ResourceSlice>> {
    vec![slice("slice-1", "node-1", "pool-1", DRIVER_A, devices)]
}

fn claims_of(requests: Vec<Vec<PreparedRequest>>) -> Vec<PreparedClaim> {
    (requests.into_iter().enumerate())
        .map(|(i, r)| claim(&format!("claim-{i}"), r, Vec::new()))
        .collect()
}

#[test]
fn consumable_capacity_disabled_feature() {
    let got = allocate_shares(
        claims_of(vec![vec![capacity_request(
            "req-0",
            Some(1),
            Some(units(1)),
            None,
        )]]),
        vec![one_device("slice-1", "node-1", "pool-1", DRIVER_A)],
        Held::default(),
        Features::default(),
    );
    assert_eq!(
        got,
        Err("claim default/claim-0, request req-0: has capacity requests, but the DRAConsumableCapacity feature is disabled".to_string())
    );
    let subrequests = |s: &str| PreparedSubRequest {
        name: Arc::from(s),
        selection: capacity_selection(Some(1), Some(units(1)), None),
        tolerations: Vec::new(),
    };
    let got = allocate_shares(
        claims_of(vec![vec![prioritized(
            "req-0",
            vec![subrequests("subReq-0"), subrequests("subReq-1")],
        )]]),
        vec![one_device("slice-1", "node-1", "pool-1", DRIVER_A)],
        Held::default(),
        Features::default(),
    );
    assert_eq!(
        got,
        Err("claim default/claim-0, subrequest subReq-0: has capacity requests, but the DRAConsumableCapacity feature is disabled".to_string()),
        "consumable-capacity-disabled-feature-with-prioritized-list"
    );
}

#[test]
fn consumable_capacity_shares_and_policies() {
    let two_claims = |amount: Option<i64>| {
        claims_of(vec![
            vec![capacity_request("req-0", Some(1), amount, Some(true))],
            vec![capacity_request("req-0", Some(1), amount, Some(true))],
        ])
    };
    let other_capacity = capacity_named("capacity-1", units(1));
    // Name, claims, devices, what other claims hold, the results expected.
    type Row = (
        &'static str,
        Vec<PreparedClaim>,
        Vec<Device>,
        Held,
        Option<Vec<Vec<ShareResult>>>,
    );
    let rows: Vec<Row> = vec![
        (
            "consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(1)),
                None,
            )]]),
            vec![shared("device-1", vec![other_capacity.clone()])],
            Held::default(),
            None,
        ),
        (
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
            claims_of(vec![vec![capacity_request(
                "req-0",
                None,
                Some(units(1)),
                Some(true),
            )]]),
            vec![shared("device-1", vec![other_capacity])],
            Held::default(),
            None,
        ),
        (
            "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",
            two_claims(None),
            vec![shared("device-1", Vec::new())],
            Held::default(),
            Some(vec![
                vec![share("req-0", "device-1", None)],
                vec![share("req-0", "device-1", None)],
            ]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
            two_claims(None),
            vec![
                shared("device-1", vec![capacity_0(units(1), None)]),
                shared("device-2", vec![capacity_0(units(1), None)]),
            ],
            Held::default(),
            Some(vec![
                vec![share("req-0", "device-1", Some(units(1)))],
                vec![share("req-0", "device-2", Some(units(1)))],
            ]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block",
            two_claims(None),
            vec![shared("device-1", vec![capacity_0(units(2), None)])],
            Held::default(),
            None,
        ),
        (
            "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
            two_claims(Some(units(1))),
            vec![shared("device-1", vec![capacity_0(units(2), None)])],
            Held::default(),
            Some(vec![
                vec![share("req-0", "device-1", Some(units(1)))],
                vec![share("req-0", "device-1", Some(units(1)))],
            ]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
            two_claims(None),
            vec![shared(
                "device-1",
                vec![capacity_0(units(4), Some(range_policy()))],
            )],
            Held::default(),
            Some(vec![
                vec![share("req-0", "device-1", Some(units(2)))],
                vec![share("req-0", "device-1", Some(units(2)))],
            ]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-zero-request-policy",
            two_claims(None),
            vec![shared(
                "device-1",
                vec![capacity_0(units(1), Some(values_policy(0, &[])))],
            )],
            Held::default(),
            Some(vec![
                vec![share("req-0", "device-1", Some(0))],
                vec![share("req-0", "device-1", Some(0))],
            ]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(1)),
                Some(true),
            )]]),
            vec![shared(
                "device-1",
                vec![capacity_0(units(1), Some(values_policy(0, &[])))],
            )],
            Held::default(),
            None,
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
            two_claims(Some(units(1))),
            vec![shared(
                "device-1",
                vec![capacity_0(units(4), Some(range_policy()))],
            )],
            Held::default(),
            Some(vec![
                vec![share("req-0", "device-1", Some(units(2)))],
                vec![share("req-0", "device-1", Some(units(2)))],
            ]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-range-policy-step",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(3)),
                Some(true),
            )]]),
            vec![shared(
                "device-1",
                vec![capacity_0(units(4), Some(range_policy()))],
            )],
            Held::default(),
            Some(vec![vec![share("req-0", "device-1", Some(units(4)))]]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-valid-values-policy",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(2)),
                Some(true),
            )]]),
            vec![shared(
                "device-1",
                vec![capacity_0(
                    units(4),
                    Some(values_policy(units(1), &[units(2)])),
                )],
            )],
            Held::default(),
            Some(vec![vec![share("req-0", "device-1", Some(units(2)))]]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(2)),
                Some(true),
            )]]),
            vec![shared(
                "device-1",
                vec![capacity_0(
                    units(3),
                    Some(values_policy(units(1), &[units(3)])),
                )],
            )],
            Held::default(),
            Some(vec![vec![share("req-0", "device-1", Some(units(3)))]]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",
            claims_of(vec![
                vec![capacity_request(
                    "req-0",
                    Some(1),
                    Some(units(1)),
                    Some(true),
                )],
                vec![capacity_request(
                    "req-0",
                    Some(1),
                    Some(units(2)),
                    Some(true),
                )],
            ]),
            vec![shared(
                "device-1",
                vec![capacity_0(units(2), Some(range_policy()))],
            )],
            Held::default(),
            None,
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(6)),
                Some(true),
            )]]),
            vec![shared(
                "device-1",
                vec![capacity_0(units(10), Some(range_policy()))],
            )],
            Held::default(),
            None,
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(2)),
                Some(true),
            )]]),
            vec![shared(
                "device-1",
                vec![capacity_0(units(4), Some(range_policy()))],
            )],
            held_share("device-1", Some(units(2))),
            Some(vec![vec![share("req-0", "device-1", Some(units(2)))]]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(2)),
                Some(true),
            )]]),
            vec![
                shared("device-1", vec![capacity_0(units(2), Some(range_policy()))]),
                shared("device-2", vec![capacity_0(units(2), Some(range_policy()))]),
            ],
            held_share("device-1", Some(units(2))),
            Some(vec![vec![share("req-0", "device-2", Some(units(2)))]]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(2)),
                Some(true),
            )]]),
            vec![shared(
                "device-1",
                vec![capacity_0(units(2), Some(range_policy()))],
            )],
            held_share("device-1", Some(units(2))),
            None,
        ),
        (
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",
            claims_of(vec![vec![capacity_request(
                "req-0",
                None,
                Some(units(2)),
                Some(true),
            )]]),
            vec![
                shared("device-1", vec![capacity_0(units(2), None)]),
                shared("device-2", Vec::new()),
            ],
            Held::default(),
            Some(vec![vec![share("req-0", "device-1", Some(units(2)))]]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
            claims_of(vec![vec![capacity_request(
                "req-0",
                None,
                Some(units(2)),
                Some(true),
            )]]),
            vec![
                shared("device-1", vec![capacity_0(units(2), None)]),
                shared("device-2", vec![capacity_0(units(1), None)]),
            ],
            Held::default(),
            Some(vec![vec![share("req-0", "device-1", Some(units(2)))]]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",
            claims_of(vec![vec![
                capacity_request("req-0", Some(1), Some(units(1)), None),
                capacity_request("req-1", None, Some(units(1)), None),
            ]]),
            vec![
                shared("device-1", vec![capacity_0(units(2), None)]),
                shared("device-2", vec![capacity_0(units(1), None)]),
            ],
            Held::default(),
            Some(vec![vec![
                share("req-0", "device-1", Some(units(1))),
                share("req-1", "device-1", Some(units(1))),
                share("req-1", "device-2", Some(units(1))),
            ]]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
            claims_of(vec![vec![capacity_request(
                "req-0",
                None,
                Some(units(1)),
                None,
            )]]),
            vec![
                shared("device-1", vec![capacity_0(units(2), None)]),
                shared("device-2", vec![capacity_0(units(1), None)]),
            ],
            held_share("device-1", Some(units(1))),
            Some(vec![vec![
                share("req-0", "device-1", Some(units(1))),
                share("req-0", "device-2", Some(units(1))),
            ]]),
        ),
        (
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
            claims_of(vec![vec![
                capacity_request("req-0", Some(1), Some(units(1)), None),
                capacity_request("req-1", None, Some(units(1)), None),
            ]]),
            vec![
                shared("device-1", vec![capacity_0(units(1), None)]),
                shared("device-2", vec![capacity_0(units(1), None)]),
            ],
            Held::default(),
            None,
        ),
        (
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
            claims_of(vec![vec![capacity_request(
                "req-0",
                None,
                Some(units(1)),
                None,
            )]]),
            vec![
                shared("device-1", vec![capacity_0(units(1), None)]),
                shared("device-2", vec![capacity_0(units(1), None)]),
            ],
            held_share("device-1", Some(units(1))),
            Some(vec![vec![share("req-0", "device-2", Some(units(1)))]]),
        ),
        (
            "consumable-capacity-dedicated-device-with-consumable-capacity-request",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(1)),
                Some(false),
            )]]),
            vec![Device {
                capacity: vec![capacity_0(units(1), None)],
                ..device("device-1", None, Vec::new())
            }],
            Held::default(),
            Some(vec![vec![(
                "req-0".to_string(),
                "device-1".to_string(),
                None,
            )]]),
        ),
        (
            "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request",
            claims_of(vec![
                vec![capacity_request(
                    "req-0",
                    Some(1),
                    Some(units(1)),
                    Some(false),
                )],
                vec![capacity_request(
                    "req-0",
                    Some(1),
                    Some(units(1)),
                    Some(false),
                )],
            ]),
            vec![Device {
                capacity: vec![capacity_0(units(2), Some(range_policy()))],
                ..device("device-1", None, Vec::new())
            }],
            Held::default(),
            None,
        ),
        (
            "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(1)),
                Some(false),
            )]]),
            vec![shared("device-1", vec![capacity_0(units(1), None)])],
            Held::default(),
            None,
        ),
        (
            "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(1)),
                Some(true),
            )]]),
            vec![shared(
                "device-1",
                vec![capacity_0(units(2), Some(range_policy()))],
            )],
            Held {
                alone: [pool_1("device-1")].into_iter().collect(),
                ..Held::default()
            },
            None,
        ),
        (
            "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
            claims_of(vec![vec![capacity_request(
                "req-0",
                Some(1),
                Some(units(1)),
                Some(true),
            )]]),
            vec![Device {
                capacity: vec![capacity_0(units(2), Some(range_policy()))],
                ..device("device-1", None, Vec::new())
            }],
            held_share("device-1", Some(units(1))),
            None,
        ),
    ];
    for (name, claims, devices, held, expected) in rows {
        let got = allocate_shares(claims, one_slice(devices), held, consumable());
        assert_eq!(got, Ok(expected), "{name}");
    }
}

/// `consumable-capacity-with-multi-allocatable-device-backtrack`: claim 0's two requests
/// must share one device (`matchAttribute`); device-2 (listed first) has room for one
/// share only, so the search backtracks to device-1 for both, leaving device-2 to claim 1.
#[test]
fn consumable_capacity_with_multi_allocatable_device_backtrack() {
    let string_attribute =
        |value: &str| vec![("stringAttribute", AttributeValue::String(Arc::from(value)))];
    let devices = vec![
        Device {
            capacity: vec![capacity_0(units(2), Some(range_policy()))],
            allow_multiple_allocations: true,
            ..device("device-2", None, string_attribute("stringAttributeValue1"))
        },
        Device {
            capacity: vec![capacity_0(units(4), Some(range_policy()))],
            allow_multiple_allocations: true,
            ..device("device-1", None, string_attribute("stringAttributeValue2"))
        },
    ];
    let claims = vec![
        claim(
            "claim-0",
            vec![
                capacity_request("req-0", Some(1), Some(units(2)), None),
                capacity_request("req-1", Some(1), Some(units(2)), None),
            ],
            vec![matching("stringAttribute", &[])],
        ),
        claim(
            "claim-1",
            vec![capacity_request("req-0", Some(1), Some(units(2)), None)],
            Vec::new(),
        ),
    ];
    let got = allocate_shares(claims, one_slice(devices), Held::default(), consumable());
    assert_eq!(
        got,
        Ok(Some(vec![
            vec![
                share("req-0", "device-1", Some(units(2))),
                share("req-1", "device-1", Some(units(2)))
            ],
            vec![share("req-0", "device-2", Some(units(2)))],
        ]))
    );
}

/// `consumable-capacity-multi-allocatable-device-with-subrequest`: the first subrequest
/// asking more than the policy's maximum is passed over for the second.
#[test]
fn consumable_capacity_multi_allocatable_device_with_subrequest() {
    let sub = |name: &str, amount: Option<i64>| PreparedSubRequest {
        name: Arc::from(name),
        selection: capacity_selection(Some(1), amount, Some(true)),
        tolerations: Vec::new(),
    };
    let claims = claims_of(vec![vec![prioritized(
        "req-0",
        vec![
            sub("subReq-0", Some(units(4))),
            sub("subReq-1", Some(units(2))),
            sub("subReq-1", None),
        ],
    )]]);
    let devices = vec![shared(
        "device-1",
        vec![capacity_0(units(2), Some(range_policy()))],
    )];
    let got = allocate_shares(claims, one_slice(devices), Held::default(), consumable());
    assert_eq!(
        got,
        Ok(Some(vec![vec![share(
            "req-0/subReq-1",
            "device-1",
            Some(units(2))
        )]]))
    );
}

/// `allow-multiple-allocations-with-partitionable-device` and
/// `allow-multiple-allocations-with-shared-device-counter-cross-cycle`: a shared device
/// takes its counters once; a device shared by another claim has taken them already.
#[test]
fn allow_multiple_allocations_with_partitionable_devices() {
    let share_all = |slices: Vec<Arc<ResourceSlice>>| -> Vec<Arc<ResourceSlice>> {
        slices
            .into_iter()
            .map(|s| {
                let mut s = (*s).clone();
                for d in Arc::make_mut(&mut s.devices) {
                    d.allow_multiple_allocations = true;
                }
                Arc::new(s)
            })
            .collect()
    };
    let at_least = |q: &str| {
        vec![format!(
            "device.capacity[\"{DRIVER_A}\"].memory.compareTo(quantity(\"{q}\")) >= 0"
        )]
    };
    let sub = |name: &str, q: &str| PreparedSubRequest {
        name: Arc::from(name),
        selection: PreparedSelection::new(
            sym("class-a"),
            AllocationMode::ExactCount(1),
            selectors(&[format!(
                "device.driver == \"{DRIVER_A}\" && device.allowMultipleAllocations == true"
            )]),
            selectors(&at_least(q)),
        ),
        tolerations: Vec::new(),
    };
    let claims = claims_of(vec![vec![
        capacity_request("req-0", Some(1), None, Some(true)),
        prioritized(
            "req-1",
            vec![sub("subReq-0", "6Gi"), sub("subReq-1", "4Gi")],
        ),
    ]]);
    let node = node("node-1");
    let allocator = Allocator {
        claims,
        allocated: Arc::new(Held::default()),
        shared_slices: Vec::new(),
    };
    let slices = share_all(three_partitions_of_8gi());
    let allocations = allocator
        .allocate_with(&node, &slices, consumable())
        .0
        .unwrap()
        .unwrap();
    let gi4 = 4 * 1024 * 1024 * 1024 * 1000_i64;
    let got: Vec<(&str, &str, Option<&CapacityAmounts>)> = (allocations[0].devices.iter())
        .map(|d| {
            let consumed = d.share.as_ref().map(|s| &s.consumed);
            (&*d.request, d.device.device.as_str(), consumed)
        })
        .collect();
    let memory = vec![(sym("memory"), gi4)];
    assert_eq!(
        got,
        vec![
            ("req-0", "device-1", Some(&memory)),
            ("req-1/subReq-1", "device-3", Some(&memory))
        ],
        "allow-multiple-allocations-with-partitionable-device"
    );

    let mode = |value: &str| vec![("mode", AttributeValue::String(Arc::from(value)))];
    let one = vec![(SET_1, vec![(CAPACITY_0, "1")])];
    let devices = ["device-1", "device-2"]
        .iter()
        .zip(["a", "b"])
        .map(|(name, m)| Device {
            attributes: device(name, None, mode(m)).attributes,
            allow_multiple_allocations: true,
            ..partition(name, &one, true)
        })
        .collect();
    let slices = vec![
        pool_slice("slice-1", "node-1", "pool-1", 2, devices),
        counter_slice("slice-2", "node-1", "pool-1", 2, &one),
    ];
    let mode_b = PreparedSelection {
        capacity: vec![(sym(CAPACITY_0), units(1))],
        ..PreparedSelection::new(
            sym("class-a"),
            AllocationMode::ExactCount(1),
            selectors(&[format!(
                "device.driver == \"{DRIVER_A}\" && device.allowMultipleAllocations == true"
            )]),
            selectors(&[format!("device.attributes[\"{DRIVER_A}\"].mode == \"b\"")]),
        )
    };
    let claims = claims_of(vec![vec![PreparedRequest::exactly("req-0", mode_b)]]);
    let got = allocate_shares(
        claims,
        slices,
        held_share("device-1", Some(units(1))),
        consumable(),
    );
    assert_eq!(
        got,
        Ok(None),
        "allow-multiple-allocations-with-shared-device-counter-cross-cycle"
    );
}

/// A shared device's counters are taken by its first share only (upstream's
/// `skipCounterCheck`): two claims share a GPU whose partition takes all its counters,
/// in one search and across searches; a device held alone would take them again.
#[test]
fn a_shared_device_takes_its_counters_once() {
    let gpu = vec![(SET_1, vec![(CAPACITY_0, "8")])];
    let slices = |shared: bool| {
        vec![
            pool_slice(
                "slice-1",
                "node-1",
                "pool-1",
                2,
                vec![Device {
                    allow_multiple_allocations: shared,
                    ..partition("device-1", &gpu, true)
                }],
            ),
            counter_slice("slice-2", "node-1", "pool-1", 2, &gpu),
        ]
    };
    let half = || capacity_request("req-0", Some(1), Some(units(4)), None);
    let two_claims = || claims_of(vec![vec![half()], vec![half()]]);
    let got = allocate_shares(two_claims(), slices(true), Held::default(), consumable());
    assert_eq!(
        got,
        Ok(Some(vec![
            vec![share("req-0", "device-1", Some(units(4)))],
            vec![share("req-0", "device-1", Some(units(4)))],
        ]))
    );
    let got = allocate_shares(
        claims_of(vec![vec![half()]]),
        slices(true),
        held_share("device-1", Some(units(4))),
        consumable(),
    );
    assert_eq!(
        got,
        Ok(Some(vec![vec![share("req-0", "device-1", Some(units(4)))]]))
    );
    // The same share held without consumed capacity leaves no aggregated entry: the next
    // share checks the counters again, which the held share took (upstream's quirk).
    let got = allocate_shares(
        claims_of(vec![vec![half()]]),
        slices(true),
        held_share("device-1", None),
        consumable(),
    );
    assert_eq!(got, Ok(None));
    let got = allocate_shares(two_claims(), slices(false), Held::default(), consumable());
    assert_eq!(got, Ok(None), "held alone, the device is one claim's");
}

/// `consumable-capacity-with-partitionable-device-multiple-capacity-pools`: shared
/// partitions of two counter sets (capacity-0 4, capacity-1 8); capacity-1 of each device
/// has upstream's range policy (a share takes 2 by default). req-0 takes 1 of device-1's
/// capacity-0, req-2 asks 2 (device-1 has 1 left, device-2 would overrun capacity-0's
/// counter set) and gets device-3, req-1's first subrequest selects device-2 only (which
/// the counters refuse), its second shares device-1's last unit.
#[test]
fn consumable_capacity_with_partitionable_device_multiple_capacity_pools() {
    let capacity_1 = |value: i64| DeviceCapacity {
        request_policy: Some(Box::new(range_policy())),
        ..capacity_named("capacity-1", value)
    };
    let partition_of = |name: &str, c0: &str| {
        let mut device = partition(
            name,
            &[
                (SET_1, vec![(CAPACITY_0, c0)]),
                (SET_2, vec![("capacity-1", "4")]),
            ],
            true,
        );
        device.capacity.retain(|c| c.key == sym(CAPACITY_0));
        device.capacity.push(capacity_1(units(4)));
        device.allow_multiple_allocations = true;
        device
    };
    let slices = vec![
        pool_slice(
            "slice-1",
            "node-1",
            "pool-1",
            2,
            vec![
                partition_of("device-1", "2"),
                partition_of("device-2", "4"),
                partition_of("device-3", "2"),
            ],
        ),
        counter_slice(
            "slice-2",
            "node-1",
            "pool-1",
            2,
            &[
                (SET_1, vec![(CAPACITY_0, "4")]),
                (SET_2, vec![("capacity-1", "8")]),
            ],
        ),
    ];
    let at_least = |n: u32| PreparedSelection {
        capacity: vec![(sym(CAPACITY_0), units(1))],
        ..PreparedSelection::new(
            sym("class-a"),
            AllocationMode::ExactCount(1),
            selectors(&[format!("device.driver == \"{DRIVER_A}\"")]),
            selectors(&[format!(
                "device.capacity[\"{DRIVER_A}\"][\"{CAPACITY_0}\"].compareTo(quantity(\"{n}\")) >= 0"
            )]),
        )
    };
    let sub = |name: &str, n: u32| PreparedSubRequest {
        name: Arc::from(name),
        selection: at_least(n),
        tolerations: Vec::new(),
    };
    let claims = claims_of(vec![vec![
        capacity_request("req-0", Some(1), Some(units(1)), None),
        capacity_request("req-2", Some(1), Some(units(2)), None),
        prioritized("req-1", vec![sub("subReq-0", 4), sub("subReq-1", 2)]),
    ]]);
    let node = node("node-1");
    let allocator = Allocator {
        claims,
        allocated: Arc::new(Held::default()),
        shared_slices: Vec::new(),
    };
    let allocations = allocator
        .allocate_with(&node, &slices, consumable())
        .0
        .unwrap()
        .unwrap();
    let got: Vec<(&str, &str, CapacityAmounts)> = (allocations[0].devices.iter())
        .map(|d| {
            let mut consumed = d.share.as_ref().expect("a share").consumed.clone();
            consumed.sort_by_key(|(k, _)| k.as_str().to_string());
            (&*d.request, d.device.device.as_str(), consumed)
        })
        .collect();
    let amounts = |c0: i64| vec![(sym(CAPACITY_0), units(c0)), (sym("capacity-1"), units(2))];
    assert_eq!(
        got,
        vec![
            ("req-0", "device-1", amounts(1)),
            ("req-2", "device-3", amounts(2)),
            ("req-1/subReq-1", "device-1", amounts(1)),
        ]
    );
}
