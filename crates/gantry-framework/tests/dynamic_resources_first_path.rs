//! Differential: the allocator's first path (a greedy walk for claims of exact counts
//! without constraints) gives exactly what upstream's depth-first search gives, on random
//! nodes' slices (one or several slices per pool, incomplete pools, duplicate names,
//! shared slices), random devices taken, and random claims, simple or not.

use std::collections::HashSet;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::dra::*;
use gantry_api::{Node, Resources, Sym};
use gantry_framework::plugins::dynamic_resources::cel::Selector;
use gantry_framework::plugins::dynamic_resources::{
    Allocator, Features, PreparedClaim, PreparedRequest, PreparedSelection,
};
use proptest::prelude::*;

const DRIVERS: [&str; 2] = ["a.example.com", "b.example.com"];

#[derive(Debug, Clone)]
struct SliceSpec {
    driver: usize,
    pool: u8,
    slice_count: u8,
    /// Device names (small numbers, so that duplicates happen) and their `big` flag.
    devices: Vec<(u8, bool)>,
    shared: bool,
}

#[derive(Debug, Clone)]
struct RequestSpec {
    driver: usize,
    /// `None`: All.
    count: Option<u32>,
    only_big: bool,
}

fn slice_spec() -> impl Strategy<Value = SliceSpec> {
    (
        0..2usize,
        0..3u8,
        prop_oneof![4 => Just(1u8), 1 => Just(2u8)],
        prop::collection::vec((0..8u8, any::<bool>()), 0..6),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(driver, pool, slice_count, devices, shared)| SliceSpec {
            driver,
            pool,
            slice_count,
            devices,
            shared,
        })
}

fn request_spec() -> impl Strategy<Value = RequestSpec> {
    (
        0..2usize,
        prop_oneof![9 => (1..4u32).prop_map(Some), 1 => Just(None)],
        any::<bool>(),
    )
        .prop_map(|(driver, count, only_big)| RequestSpec {
            driver,
            count,
            only_big,
        })
}

fn selectors(expressions: &[String]) -> Arc<[Arc<Selector>]> {
    expressions
        .iter()
        .map(|e| Arc::new(Selector::compile(e).unwrap()))
        .collect()
}

fn build_slice(i: usize, spec: &SliceSpec) -> Arc<ResourceSlice> {
    let driver = Sym::new(DRIVERS[spec.driver]);
    Arc::new(ResourceSlice {
        binding_conditions: false,
        name: Sym::new(&format!("slice-{i}")),
        driver,
        pool: Sym::new(&format!("pool-{}", spec.pool)),
        pool_generation: 1,
        pool_slice_count: i64::from(spec.slice_count),
        nodes: if spec.shared {
            SliceNodes::All
        } else {
            SliceNodes::Node(Sym::new("node-1"))
        },
        devices: spec
            .devices
            .iter()
            .map(|&(name, big)| Device {
                binding: None,
                binds_to_node: false,
                name: Sym::new(&format!("dev-{name}")),
                attributes: vec![(
                    QualifiedName {
                        domain: driver,
                        id: Sym::new("big"),
                    },
                    AttributeValue::Bool(big),
                )],
                capacity: Vec::new(),
                taints: Vec::new(),
                consumes_counters: Vec::new(),
                allow_multiple_allocations: false,
            })
            .collect(),
        shared_counters: Vec::new(),
    })
}

fn build_claim(i: usize, requests: &[RequestSpec], constrained: bool) -> PreparedClaim {
    PreparedClaim {
        claim: Arc::new(ResourceClaim {
            binding_status: None,
            namespace: Sym::new("default"),
            name: Arc::from(format!("claim-{i}")),
            uid: Arc::from(format!("claim-{i}")),
            spec: Arc::new(ClaimSpec {
                requests: Vec::new(),
                constraints: if constrained {
                    vec![DeviceConstraint {
                        kind: ConstraintKind::Match,
                        requests: Vec::new(),
                        attribute: QualifiedName {
                            domain: Sym::new(DRIVERS[0]),
                            id: Sym::new("big"),
                        },
                    }]
                } else {
                    Vec::new()
                },
            }),
            owner_pod: None,
            deleting: false,
            allocation: None,
            reserved_for: Vec::new(),
            extended_resource: false,
        }),
        requests: requests
            .iter()
            .enumerate()
            .map(|(r, spec)| {
                let driver = DRIVERS[spec.driver];
                let request_selectors: Vec<String> = if spec.only_big {
                    vec![format!("device.attributes[\"{driver}\"].big")]
                } else {
                    Vec::new()
                };
                PreparedRequest::exactly(
                    format!("req-{r}"),
                    PreparedSelection::new(
                        Sym::new(&format!("class-{driver}")),
                        spec.count
                            .map_or(AllocationMode::All, AllocationMode::ExactCount),
                        selectors(&[format!("device.driver == \"{driver}\"")]),
                        selectors(&request_selectors),
                    ),
                )
            })
            .collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_first_path_agrees_with_the_search(
        slices in prop::collection::vec(slice_spec(), 0..5),
        claims in prop::collection::vec(
            (prop::collection::vec(request_spec(), 1..3), prop::bool::weighted(0.2)),
            1..3,
        ),
        taken in prop::collection::vec((0..2usize, 0..3u8, 0..8u8), 0..4),
    ) {
        let built: Vec<Arc<ResourceSlice>> =
            slices.iter().enumerate().map(|(i, s)| build_slice(i, s)).collect();
        let (shared, local): (Vec<_>, Vec<_>) =
            built.into_iter().partition(|s| s.node_name().is_none());
        let allocated: HashSet<DeviceId, RandomState> = taken
            .iter()
            .map(|&(driver, pool, device)| DeviceId {
                driver: Sym::new(DRIVERS[driver]),
                pool: Sym::new(&format!("pool-{pool}")),
                device: Sym::new(&format!("dev-{device}")),
            })
            .collect();
        let allocator = Allocator {
            claims: claims
                .iter()
                .enumerate()
                .map(|(i, (requests, constrained))| build_claim(i, requests, *constrained))
                .collect(),
            allocated: Arc::new(allocated),
            shared_slices: shared,
        };
        let node = Node::new("node-1", Resources::default());
        let fast = allocator.find(&node, &local, Features::default()).0;
        let slow = allocator.search(&node, &local, Features::default()).0;
        prop_assert_eq!(fast, slow);
    }
}

/// The first request takes the only big device, which the second needs: the walk fails
/// where the search, backtracking, gives the first request the small one.
#[test]
fn the_search_backtracks_where_the_walk_cannot() {
    let slice = build_slice(
        0,
        &SliceSpec {
            driver: 0,
            pool: 0,
            slice_count: 1,
            devices: vec![(1, true), (2, false)],
            shared: false,
        },
    );
    let any = RequestSpec {
        driver: 0,
        count: Some(1),
        only_big: false,
    };
    let big = RequestSpec {
        only_big: true,
        ..any.clone()
    };
    let allocator = Allocator {
        claims: vec![build_claim(0, &[any, big], false)],
        allocated: Arc::new(HashSet::<DeviceId, RandomState>::default()),
        shared_slices: Vec::new(),
    };
    let node = Node::new("node-1", Resources::default());
    let found = allocator.find(&node, &[slice], Features::default()).0;
    let devices: Vec<String> = found.unwrap().expect("the search finds both devices")[0]
        .devices
        .iter()
        .map(|d| format!("{}={}", d.request, d.device.device))
        .collect();
    assert_eq!(devices, ["req-0=dev-2", "req-1=dev-1"]);
}

/// A slice's names are checked once and remembered: a duplicate name, the last of 20
/// devices, sends the claim to the search (which finds the pool invalid), both on the
/// first ask and from the memo.
#[test]
fn a_duplicate_name_leaves_the_claim_to_the_search_also_when_remembered() {
    let mut devices: Vec<(u8, bool)> = (0..20).map(|n| (n, true)).collect();
    devices[19].0 = 3;
    let slice = build_slice(
        0,
        &SliceSpec {
            driver: 0,
            pool: 0,
            slice_count: 1,
            devices,
            shared: false,
        },
    );
    let allocator = Allocator {
        claims: vec![build_claim(
            0,
            &[RequestSpec {
                driver: 0,
                count: Some(1),
                only_big: false,
            }],
            false,
        )],
        allocated: Arc::new(HashSet::<DeviceId, RandomState>::default()),
        shared_slices: Vec::new(),
    };
    let node = Node::new("node-1", Resources::default());
    let slow = allocator
        .search(&node, std::slice::from_ref(&slice), Features::default())
        .0;
    assert!(slow.is_err(), "the search refuses the pool: {slow:?}");
    for _ in 0..2 {
        let fast = allocator
            .find(&node, std::slice::from_ref(&slice), Features::default())
            .0;
        assert_eq!(fast, slow);
    }
}
