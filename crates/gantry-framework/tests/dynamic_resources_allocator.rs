//! The structured allocator against cases of upstream's shared allocator table
//! (`dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go`):
//! same names, inputs and expected results. Classes select their driver
//! (`device.driver == "driver-a"`), as upstream's `class(name, driver)` helper does.

use std::sync::Arc;

use gantry_api::dra::*;
use gantry_api::{Node, NodeSelector, NodeSelectorTerm, Resources, Sym};
use gantry_framework::plugins::dynamic_resources::cel::Selector;
use gantry_framework::plugins::dynamic_resources::{Allocator, PreparedClaim, PreparedRequest};

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

/// A request of `count` devices (`None`: All) of the class selecting `driver`.
fn request(name: &str, driver: &str, count: Option<u32>, cel: &[String]) -> PreparedRequest {
    PreparedRequest {
        name: Arc::from(name),
        class: sym(&format!("class-{driver}")),
        mode: count.map_or(AllocationMode::All, AllocationMode::ExactCount),
        class_selectors: selectors(&[format!("device.driver == \"{driver}\"")]),
        request_selectors: selectors(cel),
    }
}

fn claim(
    name: &str,
    requests: Vec<PreparedRequest>,
    constraints: Vec<MatchAttribute>,
) -> PreparedClaim {
    PreparedClaim {
        claim: Arc::new(ResourceClaim {
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
                vec![(
                    QualifiedName {
                        domain: sym(DRIVER_A),
                        id: sym("memory"),
                    },
                    gantry_api::Quantity::parse(m)
                        .unwrap()
                        .milli_value()
                        .unwrap(),
                )]
            })
            .unwrap_or_default(),
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
        name: sym(name),
        driver: sym(driver),
        pool: sym(pool),
        pool_generation: 1,
        pool_slice_count: 1,
        nodes: SliceNodes::Node(sym(node)),
        devices,
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

fn allocate(
    claims: Vec<PreparedClaim>,
    slices: Vec<Arc<ResourceSlice>>,
    node_name: &str,
) -> Result<Option<Vec<Vec<Picked>>>, String> {
    let node = node(node_name);
    let (local, shared): (Vec<_>, Vec<_>) =
        slices.into_iter().partition(|s| s.node_name().is_some());
    let allocator = Allocator {
        claims,
        allocated: nothing_allocated(),
        shared_slices: shared,
    };
    let result = allocator.allocate(&node, &local)?;
    Ok(result.map(|allocations| {
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
    }))
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
    let constraint = MatchAttribute {
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
    let selector = NodeSelector {
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
    };
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
