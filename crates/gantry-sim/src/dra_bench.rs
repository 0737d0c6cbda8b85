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

use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_api::dra::{
    AllocationMode, AttributeValue, ClaimSource, ClaimSpec, Device, DeviceClass, DeviceRequest,
    PodResourceClaim, QualifiedName, ResourceClaimTemplate, ResourceSlice, SliceNodes,
};
use gantry_api::{Container, Node, Pod, Resources, Sym};
use gantry_framework::plugins::default_profile;
use serde::Serialize;

use crate::bench::{BenchOptions, peak_rss_mib};
use crate::{BindLatency, SimError, SimEvent, SimOptions, Simulation};

const DRIVER: &str = "test-driver.cdi.k8s.io";
const CLASS: &str = "test-class";
const TEMPLATE: &str = "test-claim-template";
/// `5000pods_500nodes`: nodes with the driver, devices per node, init and measured pods.
const NODES: usize = 500;
const DEVICES_PER_NODE: usize = 10;
const INIT_PODS: usize = 2_500;
const MEASURED_PODS: usize = 2_500;
const GIB: i64 = 1 << 30;

#[derive(Debug, Clone, Serialize)]
pub struct DraBenchResult {
    pub workload: &'static str,
    pub nodes: usize,
    pub devices_per_node: usize,
    pub init_pods: usize,
    pub measured_pods: usize,
    /// Measured pods bound at the end.
    pub scheduled: usize,
    pub pods_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// Heap allocations and bytes per measured pod (`null` without a counting allocator).
    pub allocs_per_pod: Option<f64>,
    pub bytes_allocated_per_pod: Option<f64>,
    /// The same measured pods on ten times the nodes (and devices): allocations that grew
    /// with the cluster would show here.
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
    let scale = options.scale_down.max(1);
    let (nodes, init_pods, measured_pods) =
        (NODES / scale, INIT_PODS / scale, MEASURED_PODS / scale);
    let main = round(nodes, init_pods, measured_pods, options)?;
    let wide = round(nodes * 10, init_pods, measured_pods, options)?;
    let per_pod = |count: Option<u64>| count.map(|c| c as f64 / measured_pods.max(1) as f64);
    Ok(DraBenchResult {
        workload: "dra",
        nodes,
        devices_per_node: DEVICES_PER_NODE,
        init_pods,
        measured_pods,
        scheduled: main.scheduled,
        pods_per_sec: main.pods_per_sec,
        p50_us: main.p50_us,
        p99_us: main.p99_us,
        allocs_per_pod: per_pod(main.allocations),
        bytes_allocated_per_pod: per_pod(main.bytes),
        allocs_per_pod_10x_nodes: per_pod(wide.allocations),
        peak_rss_mib: peak_rss_mib(),
    })
}

fn round(
    nodes: usize,
    init_pods: usize,
    measured_pods: usize,
    options: &BenchOptions,
) -> Result<Round, SimError> {
    let mut cluster = ClusterObjects::default();
    cluster.nodes = (0..nodes).map(node).collect();
    cluster.dra.device_classes.push(DeviceClass {
        name: Sym::new(CLASS),
        selectors: vec![Arc::from(format!("device.driver == \"{DRIVER}\""))],
    });
    cluster.dra.slices = (0..nodes).map(slice).collect();
    for namespace in ["init", "test"] {
        cluster.dra.templates.push(template(namespace));
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
    let init = pod("init");
    for i in 0..init_pods {
        let p = init.replica(&format!("test-dra-{i}"));
        sim.schedule(Duration::ZERO, SimEvent::CreatePod(Arc::new(p)));
    }
    sim.run_until(Duration::ZERO)?;
    sim.clear_latencies();
    let bound_before = sim.api.binds;
    let measured = pod("test");
    for i in 0..measured_pods {
        let p = measured.replica(&format!("test-dra-{i}"));
        sim.schedule(Duration::from_secs(1), SimEvent::CreatePod(Arc::new(p)));
    }
    let read = |counter: Option<fn() -> u64>| counter.map(|f| f());
    let (allocations_before, bytes_before) =
        (read(options.allocations), read(options.bytes_allocated));
    let summary = sim.run()?;
    let since = |counter: Option<fn() -> u64>, before: Option<u64>| {
        counter.zip(before).map(|(f, b)| f() - b)
    };
    Ok(Round {
        scheduled: (sim.api.binds - bound_before) as usize,
        pods_per_sec: measured_pods as f64 / summary.wall_s.max(1e-9),
        p50_us: summary.p50_us,
        p99_us: summary.p99_us,
        allocations: since(options.allocations, allocations_before),
        bytes: since(options.bytes_allocated, bytes_before),
    })
}

/// `node-with-dra-test-driver.yaml`.
fn node(index: usize) -> Node {
    let name = format!("scheduler-perf-dra-{index}");
    let mut allocatable = Resources::new(4_000, 32 * GIB);
    allocatable.pods = 110;
    Node::new(&name, allocatable).with_labels([("kubernetes.io/hostname", name.as_str())])
}

/// The test driver's slice for one node (`resourceSlice` in `dra_test.go`).
fn slice(index: usize) -> ResourceSlice {
    let node = Sym::new(&format!("scheduler-perf-dra-{index}"));
    let driver = Sym::new(DRIVER);
    let qualified = |id: &str| QualifiedName {
        domain: driver,
        id: Sym::new(id),
    };
    ResourceSlice {
        name: node,
        driver,
        pool: node,
        pool_generation: 0,
        pool_slice_count: 1,
        nodes: SliceNodes::Node(node),
        devices: (0..DEVICES_PER_NODE)
            .map(|i| Device {
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
                capacity: vec![(qualified("memory"), GIB * 1000)],
            })
            .collect(),
    }
}

/// `resourceclaimtemplate.yaml`: one request of `test-class`.
fn template(namespace: &str) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        namespace: Sym::new(namespace),
        name: Sym::new(TEMPLATE),
        spec: Arc::new(ClaimSpec {
            requests: vec![DeviceRequest::exactly(
                "req-0",
                Sym::new(CLASS),
                Vec::new(),
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
    }
}
