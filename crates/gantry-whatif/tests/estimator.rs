//! Upstream's binpacking estimator table (cluster-autoscaler
//! `estimator/binpacking_estimator_test.go`, TestBinpackingEstimate) and its benchmark's
//! shape (BenchmarkBinpackingEstimate: 51,000 pods need 2,595 nodes), through both stores.

use std::sync::Arc;

use gantry_api::dra::DraObjects;
use gantry_api::labels::LabelSelector;
use gantry_api::{Container, HostPort, Node, Pod, Protocol, ResourceName, Resources, Sym};
use gantry_api::{InclusionPolicy, TopologySpreadConstraint, WhenUnsatisfiable};
use gantry_framework::ApiObjects;
use gantry_framework::plugins::default_profile;
use gantry_whatif::bench::AutoscalerBenchmark;
use gantry_whatif::estimator::{
    EquivalenceGroup, Gang, NodeTemplate, estimate, estimate_with_gangs,
};
use gantry_whatif::{ClusterSnapshot, StoreKind};

const MIB: i64 = 1 << 20;

/// Upstream's `makeNode`: cpu in millicores, memory in MiB, a pod count, hostname and zone.
fn make_node(milli_cpu: i64, memory_mib: i64, pods: i64, name: &str, zone: &str) -> Node {
    let mut allocatable = Resources::new(milli_cpu, memory_mib * MIB);
    allocatable.set(ResourceName::Pods, pods);
    Node::new(name, allocatable).with_labels([
        ("kubernetes.io/hostname", name),
        ("topology.kubernetes.io/zone", zone),
    ])
}

/// Upstream's `BuildTestPod(name, cpu, mem)` in namespace universe with app=estimatee:
/// cpu in millicores, memory in bytes.
fn build_pod(name: &str, milli_cpu: i64, memory: i64) -> Pod {
    let mut pod = Pod::new("universe", name).with_requests(milli_cpu, memory);
    pod.labels = gantry_api::Labels::from_strs([("app", "estimatee")]);
    pod
}

fn group(pod: Pod, count: usize) -> EquivalenceGroup {
    EquivalenceGroup {
        pods: (0..count)
            .map(|i| {
                let mut p = pod.clone();
                p.name = Arc::from(format!("{}-{i}", pod.name));
                p.uid = Arc::from(format!("{}-{i}", pod.uid));
                Arc::new(p)
            })
            .collect(),
    }
}

fn with_host_port(pod: Pod, port: i32) -> Pod {
    let mut container = Container::new("c-port", None, None);
    container.host_ports.push(HostPort {
        ip: HostPort::any_ip(),
        protocol: Protocol::Tcp,
        port,
    });
    pod.with_container(container)
}

/// Upstream's `WithMaxSkew(maxSkew, key, minDomains)`.
fn with_max_skew(mut pod: Pod, max_skew: i32, key: &str, min_domains: i32) -> Pod {
    pod.topology_spread_constraints
        .push(TopologySpreadConstraint {
            max_skew,
            topology_key: Sym::new(key),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            label_selector: Some(LabelSelector::from_pairs([(
                Sym::new("app"),
                Sym::new("estimatee"),
            )])),
            min_domains: Some(min_domains),
            node_affinity_policy: InclusionPolicy::Honor,
            node_taints_policy: InclusionPolicy::Ignore,
        });
    pod
}

fn snapshot(kind: StoreKind) -> ClusterSnapshot {
    let dra = DraObjects::default();
    let mut snapshot = ClusterSnapshot::new(
        kind,
        default_profile("default-scheduler"),
        ApiObjects::default(),
        &dra,
    );
    snapshot
        .load(
            &[make_node(100, 100, 10, "oldnode", "zone-jupiter")],
            &[],
            &dra,
        )
        .unwrap();
    snapshot
}

struct Case {
    name: &'static str,
    milli_cpu: i64,
    memory_mib: i64,
    max_nodes: Option<usize>,
    groups: Vec<EquivalenceGroup>,
    nodes: usize,
    pods: usize,
}

fn cases() -> Vec<Case> {
    let high = group(build_pod("high", 500, 1000), 10);
    vec![
        Case {
            name: "simple resource-based binpacking",
            milli_cpu: 350 * 3 - 50,
            memory_mib: 2 * 1000,
            max_nodes: None,
            groups: vec![group(build_pod("estimatee", 350, 1000), 10)],
            nodes: 5,
            pods: 10,
        },
        Case {
            name: "pods-per-node bound binpacking",
            milli_cpu: 10000,
            memory_mib: 20000,
            max_nodes: None,
            groups: vec![group(build_pod("estimatee", 10, 100), 20)],
            nodes: 2,
            pods: 20,
        },
        Case {
            name: "hostport conflict forces pod-per-node",
            milli_cpu: 1000,
            memory_mib: 5000,
            max_nodes: None,
            groups: vec![group(
                with_host_port(build_pod("estimatee", 200, 1000), 5555),
                8,
            )],
            nodes: 8,
            pods: 8,
        },
        Case {
            name: "limiter cuts binpacking",
            milli_cpu: 1000,
            memory_mib: 5000,
            max_nodes: Some(5),
            groups: vec![group(build_pod("estimatee", 500, 1000), 20)],
            nodes: 5,
            pods: 10,
        },
        Case {
            name: "decreasing ordered pods are processed first",
            milli_cpu: 1000,
            memory_mib: 5000,
            max_nodes: Some(5),
            groups: vec![group(build_pod("estimatee", 50, 1000), 10), high],
            nodes: 5,
            pods: 10,
        },
        Case {
            name: "hostname topology spreading with maxSkew=2 forces 2 pods/node",
            milli_cpu: 1000,
            memory_mib: 5000,
            max_nodes: None,
            groups: vec![group(
                with_max_skew(
                    build_pod("estimatee", 200, 200),
                    2,
                    "kubernetes.io/hostname",
                    1,
                ),
                8,
            )],
            nodes: 4,
            pods: 8,
        },
        Case {
            name: "zonal topology spreading with maxSkew=2 only allows 2 pods to schedule",
            milli_cpu: 1000,
            memory_mib: 5000,
            max_nodes: None,
            groups: vec![group(
                with_max_skew(
                    build_pod("estimatee", 20, 100),
                    2,
                    "topology.kubernetes.io/zone",
                    1,
                ),
                8,
            )],
            nodes: 1,
            pods: 2,
        },
        Case {
            // Autoscaler #8181: a pod the last new node refuses for its hostname spread
            // is tried on the nodes before it.
            name: "hostname topology spreading with maxSkew=1 with a large scaleup handles scheduling pods retroactively",
            milli_cpu: 1000,
            memory_mib: 5000,
            max_nodes: None,
            groups: vec![group(
                with_max_skew(
                    build_pod("estimatee", 20, 100),
                    1,
                    "kubernetes.io/hostname",
                    3,
                ),
                12,
            )],
            nodes: 3,
            pods: 12,
        },
    ]
}

#[test]
fn binpacking_estimate_matches_upstream_table() {
    for kind in [StoreKind::Basic, StoreKind::Delta] {
        for case in cases() {
            let mut snapshot = snapshot(kind);
            let template = NodeTemplate {
                node: make_node(case.milli_cpu, case.memory_mib, 10, "template", "zone-mars"),
                slices: Vec::new(),
            };
            let result = estimate(&mut snapshot, &case.groups, &template, case.max_nodes).unwrap();
            assert_eq!(
                result.nodes_needed,
                case.nodes,
                "{} ({})",
                case.name,
                kind.name()
            );
            assert_eq!(
                result.scheduled.len(),
                case.pods,
                "{} ({})",
                case.name,
                kind.name()
            );
            assert_eq!(
                snapshot.cluster().num_nodes(),
                1,
                "the estimate reverts its fork"
            );
            if case.name.starts_with("decreasing") {
                assert!(
                    result
                        .scheduled
                        .iter()
                        .all(|(p, _)| p.name.starts_with("high")),
                    "the bigger pods go first"
                );
            }
        }
    }
}

#[test]
fn a_pod_too_big_for_the_template_is_reported_with_its_reason() {
    let mut snapshot = snapshot(StoreKind::Delta);
    let template = NodeTemplate {
        node: make_node(1000, 5000, 10, "template", "zone-mars"),
        slices: Vec::new(),
    };
    let groups = vec![group(build_pod("huge", 2000, 100), 3)];
    let result = estimate(&mut snapshot, &groups, &template, None).unwrap();
    assert_eq!(result.nodes_needed, 0);
    assert_eq!(result.unschedulable.len(), 3);
    assert!(
        result.unschedulable[0].reason.contains("Insufficient cpu"),
        "{}",
        result.unschedulable[0].reason
    );
}

/// A gang is placed on new nodes all or nothing (the autoscaler's all-or-nothing
/// scale-up): three members of 3 cpu on templates of 4 cpu need three nodes; with at most
/// two new nodes (two members fit, one beside the single pod) none is placed and its
/// node is given back, while a single pod placed
/// before it keeps its node; needing only two members, the gang takes the two nodes.
#[test]
fn a_gang_is_placed_on_new_nodes_all_or_nothing() {
    let template = NodeTemplate {
        node: make_node(4000, 5000, 10, "template", "zone-mars"),
        slices: Vec::new(),
    };
    let single = group(build_pod("single", 1000, 100), 1);
    let gang = |needed| Gang {
        name: "universe/training".to_string(),
        pods: group(build_pod("worker", 3000, 100), 3).pods,
        needed,
    };
    for kind in [StoreKind::Basic, StoreKind::Delta] {
        let mut snapshot = snapshot(kind);
        let run = |snapshot: &mut ClusterSnapshot, needed, max_nodes| {
            let groups = std::slice::from_ref(&single);
            estimate_with_gangs(snapshot, groups, &[gang(needed)], &template, max_nodes).unwrap()
        };
        let all = run(&mut snapshot, 3, Some(3));
        assert_eq!((all.nodes_needed, all.scheduled.len()), (3, 4), "{kind:?}");
        assert!(all.unschedulable.is_empty());

        let short = run(&mut snapshot, 3, Some(2));
        assert_eq!(
            (short.nodes_needed, short.scheduled.len()),
            (1, 1),
            "{kind:?}"
        );
        assert_eq!(short.scheduled[0].0.name.as_ref(), "single-0");
        assert_eq!(short.unschedulable.len(), 3, "every member is left");
        assert!(
            short.unschedulable.iter().all(|u| u.reason
                == "gang universe/training: 2 of the 3 members it needs fit on new nodes of this template, and it is placed all or nothing"),
            "{:?}",
            short.unschedulable[0].reason
        );

        let enough = run(&mut snapshot, 2, Some(2));
        assert_eq!(
            (enough.nodes_needed, enough.scheduled.len()),
            (2, 3),
            "{kind:?}"
        );
        assert_eq!(enough.unschedulable.len(), 1, "the third member only");
        assert_eq!(
            snapshot.cluster().num_nodes(),
            1,
            "every estimate reverts its fork"
        );
    }
}

/// BenchmarkBinpackingEstimate (the input `gantry bench estimate` times): 51,000 pods
/// need 2,595 nodes.
#[test]
fn upstream_benchmark_needs_2595_nodes() {
    let mut bench = AutoscalerBenchmark::new(StoreKind::Delta);
    assert_eq!(bench.pods(), 51_000);
    let result = estimate(
        &mut bench.snapshot,
        &bench.groups,
        &bench.template,
        Some(bench.max_nodes),
    )
    .unwrap();
    assert_eq!(result.nodes_needed, AutoscalerBenchmark::EXPECTED_NODES);
    assert_eq!(result.scheduled.len(), 51_000);
}

/// Same controller and same spec make a group; pods without a controller stand alone.
#[test]
fn equivalence_groups_follow_controller_and_spec() {
    let owned = |name: &str, owner: &str, milli_cpu: i64| {
        let mut pod = build_pod(name, milli_cpu, 100);
        pod.controller = Some(Arc::new(gantry_api::OwnerRef {
            api_version: Sym::new("apps/v1"),
            kind: Sym::new("ReplicaSet"),
            name: Arc::from(owner),
            uid: Arc::from(owner),
        }));
        Arc::new(pod)
    };
    let pods = vec![
        owned("a-0", "a", 100),
        owned("b-0", "b", 100),
        owned("a-1", "a", 100),
        owned("a-big", "a", 200),
        Arc::new(build_pod("bare-0", 100, 100)),
        Arc::new(build_pod("bare-1", 100, 100)),
    ];
    let groups = gantry_whatif::estimator::equivalence_groups(&pods);
    let names: Vec<Vec<&str>> = groups
        .iter()
        .map(|g| g.pods.iter().map(|p| &*p.name).collect())
        .collect();
    assert_eq!(
        names,
        [
            vec!["a-0", "a-1"],
            vec!["b-0"],
            vec!["a-big"],
            vec!["bare-0"],
            vec!["bare-1"]
        ]
    );
}
