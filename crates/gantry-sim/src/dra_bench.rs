//! `gantry bench dra`: upstream scheduler_perf's `SchedulingWithResourceClaimTemplate`
//! workload, `5000pods_500nodes` (`test/integration/scheduler_perf/dra/
//! performance-config.yaml`): 500 nodes of `node-with-dra-test-driver.yaml` (4 cpu, 32 Gi,
//! 110 pods), each publishing one ResourceSlice of `maxClaimsPerNode` = 10 devices
//! (`instance-<i>`, the test driver's attributes and a 1 Gi memory capacity, as
//! `resourceSlice` in `dra_test.go` makes them), the DeviceClass `test-class`
//! (`device.driver == "test-driver.cdi.k8s.io"`), the ResourceClaimTemplate
//! `test-claim-template` (one request of that class) in each namespace, then 2,500 init
//! pods and 2,500 measured pods of `pod-with-claim-template.yaml`. The cluster fills up
//! completely. Every claim is made by the claim controller, allocated at Filter, reserved
//! and written at PreBind, as in a live cluster.
//!
//! `--nodes N` is DRA at scale instead (issue 32; the Cluster Autoscaler benchmarks 5,000
//! nodes with 20,000 claims): N nodes of 8 devices, 2N init and 2N measured pods (20,000
//! claims at 5,000 nodes), the template's request narrowed by CEL selectors on the
//! devices' attributes and capacity, and every 100th pod sharing a claim (one per
//! namespace) on a device every node reaches.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_api::dra::{
    AllocationMode, AttributeValue, ClaimSource, ClaimSpec, Device, DeviceCapacity, DeviceClass,
    DeviceRequest, PodResourceClaim, QualifiedName, ResourceClaim, ResourceClaimTemplate,
    ResourceSlice, SliceNodes,
};
use gantry_api::{Container, Node, Pod, Resources, Sym};
use gantry_framework::plugins::default_profile;
use serde::Serialize;

use crate::bench::{BenchOptions, peak_rss_mib, run_measured};
use crate::{BindLatency, SimError, SimEvent, SimOptions, Simulation};

const DRIVER: &str = "test-driver.cdi.k8s.io";
const CLASS: &str = "test-class";
const TEMPLATE: &str = "test-claim-template";
const GIB: i64 = 1 << 30;
/// The shared claim's class, driver and name (`--nodes` only).
const SHARED_CLASS: &str = "shared-class";
const SHARED_DRIVER: &str = "shared.example.com";
const SHARED_CLAIM: &str = "shared";
/// Every this many pods of a phase shares its namespace's claim: the largest phase
/// (`--nodes 10000`: 20,000 pods) makes 200 consumers, within `reservedFor`'s 256.
const SHARED_EVERY: usize = 100;
/// The selectors of the template's request at scale: one on an attribute, one on a
/// capacity, as drivers' examples write them.
const SCALE_SELECTORS: [&str; 2] = [
    "device.attributes[\"test-driver.cdi.k8s.io\"].model == \"A100\"",
    "device.capacity[\"test-driver.cdi.k8s.io\"].memory.compareTo(quantity(\"1Gi\")) >= 0",
];

/// What one run holds.
#[derive(Debug, Clone, Copy)]
struct Shape {
    nodes: usize,
    devices_per_node: usize,
    init_pods: usize,
    measured_pods: usize,
    /// The template's request carries [`SCALE_SELECTORS`], and some pods share a claim.
    at_scale: bool,
}

impl Shape {
    /// `5000pods_500nodes`, divided by `scale_down`.
    fn scheduler_perf(scale_down: usize) -> Shape {
        Shape {
            nodes: 500 / scale_down,
            devices_per_node: 10,
            init_pods: 2_500 / scale_down,
            measured_pods: 2_500 / scale_down,
            at_scale: false,
        }
    }

    /// `--nodes N`: 8 devices a node, 2N init and 2N measured pods.
    fn at_scale(nodes: usize) -> Shape {
        Shape {
            nodes,
            devices_per_node: 8,
            init_pods: 2 * nodes,
            measured_pods: 2 * nodes,
            at_scale: true,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DraBenchResult {
    pub workload: &'static str,
    pub nodes: usize,
    pub devices_per_node: usize,
    pub init_pods: usize,
    pub measured_pods: usize,
    /// Measured pods bound at the end.
    pub scheduled: usize,
    /// The template's request has CEL selectors and every 100th pod shares a claim
    /// (`--nodes`).
    pub selectors_and_shared_claim: bool,
    pub pods_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// Heap allocations and bytes per measured pod (`null` without a counting allocator).
    pub allocs_per_pod: Option<f64>,
    pub bytes_allocated_per_pod: Option<f64>,
    /// The same measured pods on ten times the nodes (and devices): allocations that grew
    /// with the cluster would show here (`null` under `--nodes`, which sets the size).
    pub allocs_per_pod_10x_nodes: Option<f64>,
    pub peak_rss_mib: Option<f64>,
}

/// The measured phase of one run.
struct Round {
    scheduled: usize,
    pods_per_sec: f64,
    p50_us: u64,
    p99_us: u64,
    allocations: Option<u64>,
    bytes: Option<u64>,
}

pub fn run_dra(options: &BenchOptions) -> Result<DraBenchResult, SimError> {
    let shape = match options.nodes {
        Some(nodes) => Shape::at_scale(nodes),
        None => Shape::scheduler_perf(options.scale_down.max(1)),
    };
    let main = round(shape, options)?;
    let wide = if shape.at_scale {
        None
    } else {
        let wide = Shape {
            nodes: shape.nodes * 10,
            ..shape
        };
        Some(round(wide, options)?)
    };
    let per_pod = |count: Option<u64>| count.map(|c| c as f64 / shape.measured_pods.max(1) as f64);
    Ok(DraBenchResult {
        workload: "dra",
        nodes: shape.nodes,
        devices_per_node: shape.devices_per_node,
        init_pods: shape.init_pods,
        measured_pods: shape.measured_pods,
        scheduled: main.scheduled,
        selectors_and_shared_claim: shape.at_scale,
        pods_per_sec: main.pods_per_sec,
        p50_us: main.p50_us,
        p99_us: main.p99_us,
        allocs_per_pod: per_pod(main.allocations),
        bytes_allocated_per_pod: per_pod(main.bytes),
        allocs_per_pod_10x_nodes: wide.and_then(|w| per_pod(w.allocations)),
        peak_rss_mib: peak_rss_mib(),
    })
}

fn round(shape: Shape, options: &BenchOptions) -> Result<Round, SimError> {
    let mut cluster = ClusterObjects::default();
    cluster.nodes = (0..shape.nodes).map(node).collect();
    cluster.dra.device_classes.push(DeviceClass {
        name: Sym::new(CLASS),
        selectors: vec![Arc::from(format!("device.driver == \"{DRIVER}\""))],
        extended_resource_name: None,
        created: 0,
    });
    cluster.dra.slices = (0..shape.nodes)
        .map(|i| Arc::new(slice(i, shape.devices_per_node)))
        .collect();
    let selectors: &[&str] = if shape.at_scale {
        &SCALE_SELECTORS
    } else {
        &[]
    };
    for namespace in ["init", "test"] {
        cluster.dra.templates.push(template(namespace, selectors));
    }
    if shape.at_scale {
        add_shared_claims(&mut cluster, &["init", "test"]);
    }
    let sim_options = SimOptions {
        bind_latency: BindLatency::Fixed(Duration::ZERO),
        ..SimOptions::default()
    };
    let mut sim = Simulation::new(
        cluster,
        vec![default_profile("default-scheduler")],
        sim_options,
    )
    .expect("a synthetic cluster loads");
    create_pods(&mut sim, shape, "init", shape.init_pods, Duration::ZERO);
    sim.run_until(Duration::ZERO)?;
    sim.clear_latencies();
    let bound_before = sim.api.binds;
    create_pods(
        &mut sim,
        shape,
        "test",
        shape.measured_pods,
        Duration::from_secs(1),
    );
    let read = |counter: Option<fn() -> u64>| counter.map(|f| f());
    let (allocations_before, bytes_before) =
        (read(options.allocations), read(options.bytes_allocated));
    let summary = run_measured(&mut sim)?;
    let since = |counter: Option<fn() -> u64>, before: Option<u64>| {
        counter.zip(before).map(|(f, b)| f() - b)
    };
    Ok(Round {
        scheduled: (sim.api.binds - bound_before) as usize,
        pods_per_sec: shape.measured_pods as f64 / summary.wall_s.max(1e-9),
        p50_us: summary.p50_us,
        p99_us: summary.p99_us,
        allocations: since(options.allocations, allocations_before),
        bytes: since(options.bytes_allocated, bytes_before),
    })
}

/// `count` pods of `namespace` arriving `at`; at scale every [`SHARED_EVERY`]th also uses
/// the namespace's shared claim.
fn create_pods(sim: &mut Simulation, shape: Shape, namespace: &str, count: usize, at: Duration) {
    let plain = pod(namespace);
    let sharing = shape.at_scale.then(|| with_shared_claim(&plain));
    for i in 0..count {
        let template = match &sharing {
            Some(sharing) if i % SHARED_EVERY == 0 => sharing,
            _ => &plain,
        };
        let p = template.replica(&format!("test-dra-{i}"));
        sim.schedule(at, SimEvent::CreatePod(Arc::new(p)));
    }
}

/// Devices every node reaches (a slice for all nodes), their class, and in each of
/// `namespaces` a claim for one of them that the namespace's pods share.
fn add_shared_claims(cluster: &mut ClusterObjects, namespaces: &[&str]) {
    let driver = Sym::new(SHARED_DRIVER);
    cluster.dra.device_classes.push(DeviceClass {
        name: Sym::new(SHARED_CLASS),
        selectors: vec![Arc::from(format!("device.driver == \"{SHARED_DRIVER}\""))],
        extended_resource_name: None,
        created: 0,
    });
    cluster.dra.slices.push(Arc::new(ResourceSlice {
        binding_conditions: false,
        name: Sym::new("shared"),
        driver,
        pool: Sym::new("shared"),
        pool_generation: 0,
        pool_slice_count: 1,
        nodes: SliceNodes::All,
        devices: (0..namespaces.len())
            .map(|i| Device {
                binding: None,
                binds_to_node: false,
                name: Sym::new(&format!("shared-{i}")),
                attributes: Vec::new(),
                capacity: Vec::new(),
                taints: Vec::new(),
                consumes_counters: Vec::new(),
                allow_multiple_allocations: false,
            })
            .collect(),
        shared_counters: Vec::new(),
    }));
    for namespace in namespaces {
        cluster.dra.claims.push(shared_claim(namespace));
    }
}

/// The claim pods of `namespace` share: one device of the shared class.
fn shared_claim(namespace: &str) -> ResourceClaim {
    let spec = ClaimSpec {
        requests: vec![DeviceRequest::exactly(
            "req-0",
            Sym::new(SHARED_CLASS),
            Vec::new(),
            AllocationMode::ExactCount(1),
        )],
        constraints: Vec::new(),
    };
    let uid = format!("shared-claim-{namespace}");
    ResourceClaim::unallocated(Sym::new(namespace), SHARED_CLAIM, &uid, spec)
}

/// `pod` with the shared claim besides its template's.
fn with_shared_claim(pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    let mut claims = pod.resource_claims.to_vec();
    claims.push(PodResourceClaim {
        name: Arc::from("shared"),
        source: ClaimSource::Claim(Arc::from(SHARED_CLAIM)),
    });
    pod.resource_claims = claims.into_boxed_slice();
    pod
}

/// `node-with-dra-test-driver.yaml`.
fn node(index: usize) -> Node {
    let name = format!("scheduler-perf-dra-{index}");
    let mut allocatable = Resources::new(4_000, 32 * GIB);
    allocatable.pods = 110;
    Node::new(&name, allocatable).with_labels([("kubernetes.io/hostname", name.as_str())])
}

/// The test driver's slice for one node (`resourceSlice` in `dra_test.go`).
fn slice(index: usize, devices: usize) -> ResourceSlice {
    let node = Sym::new(&format!("scheduler-perf-dra-{index}"));
    let driver = Sym::new(DRIVER);
    let qualified = |id: &str| QualifiedName {
        domain: driver,
        id: Sym::new(id),
    };
    ResourceSlice {
        binding_conditions: false,
        name: node,
        driver,
        pool: node,
        pool_generation: 0,
        pool_slice_count: 1,
        nodes: SliceNodes::Node(node),
        devices: (0..devices)
            .map(|i| Device {
                binding: None,
                binds_to_node: false,
                name: Sym::new(&format!("instance-{i}")),
                attributes: vec![
                    (
                        qualified("model"),
                        AttributeValue::String(Arc::from("A100")),
                    ),
                    (
                        qualified("family"),
                        AttributeValue::String(Arc::from("GPU")),
                    ),
                    (
                        qualified("driverVersion"),
                        AttributeValue::Version(Arc::from("1.2.3")),
                    ),
                    (
                        QualifiedName {
                            domain: Sym::new("dra.example.com"),
                            id: Sym::new("numa"),
                        },
                        AttributeValue::Int(i as i64),
                    ),
                ],
                capacity: vec![DeviceCapacity::new(
                    qualified("memory"),
                    "memory",
                    GIB * 1000,
                )],
                taints: Vec::new(),
                consumes_counters: Vec::new(),
                allow_multiple_allocations: false,
            })
            .collect(),
        shared_counters: Vec::new(),
    }
}

/// `resourceclaimtemplate.yaml`: one request of `test-class`, with `selectors`.
fn template(namespace: &str, selectors: &[&str]) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        namespace: Sym::new(namespace),
        name: Sym::new(TEMPLATE),
        spec: Arc::new(ClaimSpec {
            requests: vec![DeviceRequest::exactly(
                "req-0",
                Sym::new(CLASS),
                selectors.iter().map(|s| Arc::from(*s)).collect(),
                AllocationMode::ExactCount(1),
            )],
            constraints: Vec::new(),
        }),
    }
}

/// `pod-with-claim-template.yaml`: a pause container using the template's claim.
fn pod(namespace: &str) -> Pod {
    let mut pod =
        Pod::new(namespace, "test-dra").with_container(Container::new("pause", None, None));
    pod.resource_claims = Box::new([PodResourceClaim {
        name: Arc::from("resource"),
        source: ClaimSource::Template(Sym::new(TEMPLATE)),
    }]);
    pod
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_fills_up_with_every_pod_on_its_own_device() {
        let options = BenchOptions {
            scale_down: 50,
            ..BenchOptions::default()
        };
        let r = run_dra(&options).unwrap();
        assert_eq!((r.nodes, r.init_pods, r.measured_pods), (10, 50, 50));
        // 10 nodes × 10 devices = 100 devices for 100 pods: every measured pod binds.
        assert_eq!(r.scheduled, r.measured_pods);
        assert!(!r.selectors_and_shared_claim);
    }

    /// At scale the selectors match every device and the shared claim's device reaches
    /// every node: all measured pods bind, half the devices stay free.
    #[test]
    fn at_scale_every_pod_binds_with_selectors_and_a_shared_claim() {
        let options = BenchOptions {
            nodes: Some(30),
            ..BenchOptions::default()
        };
        let r = run_dra(&options).unwrap();
        assert_eq!(
            (r.nodes, r.devices_per_node, r.init_pods, r.measured_pods),
            (30, 8, 60, 60)
        );
        assert_eq!(r.scheduled, 60, "{r:?}");
        assert!(r.selectors_and_shared_claim && r.allocs_per_pod_10x_nodes.is_none());
    }
}
