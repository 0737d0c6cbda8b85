//! Helpers for the end-to-end tests: objects as JSON, instances of `gantry run` against
//! the test API server, and waiting for conditions with a deadline.

#![allow(dead_code)]

pub mod exposition;
pub mod rbac;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gantry_api::decode::ClusterObjects;
use gantry_framework::config::SchedulerConfig;
use gantry_framework::plugins::default_profile;
use gantry_kube::{LeaderElection, RunError, RunOptions, Running, Shard, Startup};
use gantry_sim::{Placement, SimOptions, Simulation};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::apiserver::TestApiServer;
use crate::apiserver::resources::{EVENTS, PODS};

pub const SCHEDULER: &str = "gantry";

pub fn node(name: &str, milli_cpu: i64, zone: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": zone,
        }},
        "status": {
            "capacity": {"cpu": format!("{milli_cpu}m"), "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": format!("{milli_cpu}m"), "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    })
}

/// How long a test waits for what it expects.
pub const WAIT: Duration = Duration::from_secs(20);

/// A UID that `owner` assigns to `shard` of `count`.
pub fn uid_owned_by(shard: u32, count: u32, seed: &str) -> String {
    (0..)
        .map(|k| format!("{seed}-{k}"))
        .find(|uid| gantry_kube::owner(uid, count) == shard)
        .unwrap()
}

pub fn pod(name: &str, milli_cpu: i64) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "schedulerName": SCHEDULER,
            "priority": 0,
            "containers": [{"name": "c", "image": "busybox", "resources": {
                "requests": {"cpu": format!("{milli_cpu}m"), "memory": "64Mi"}}}],
        },
    })
}

/// [`pod`] already bound to `node`.
pub fn bound_pod(name: &str, milli_cpu: i64, node: &str) -> Value {
    let mut pod = pod(name, milli_cpu);
    pod["spec"]["nodeName"] = json!(node);
    pod
}

/// The simulation's placements for these objects (same profile, same seed).
pub fn simulated(nodes: &[Value], pods: &[Value]) -> BTreeMap<String, Placement> {
    simulated_with(nodes, pods, &[])
}

/// [`simulated`] with more objects, each carrying its `kind` and `apiVersion`.
pub fn simulated_with(
    nodes: &[Value],
    pods: &[Value],
    others: &[Value],
) -> BTreeMap<String, Placement> {
    let mut items: Vec<Value> = others.to_vec();
    for node in nodes {
        let mut n = node.clone();
        n["kind"] = json!("Node");
        n["apiVersion"] = json!("v1");
        items.push(n);
    }
    for pod in pods {
        let mut p = pod.clone();
        p["kind"] = json!("Pod");
        p["apiVersion"] = json!("v1");
        items.push(p);
    }
    let text = serde_json::to_string(&json!({"kind": "List", "apiVersion": "v1", "items": items}))
        .unwrap();
    let cluster = ClusterObjects::decode(&text, "test").unwrap();
    let options = SimOptions {
        seed: 7,
        ..SimOptions::default()
    };
    let mut sim = Simulation::new(cluster, config().profiles, options).unwrap();
    sim.run().unwrap();
    sim.placements()
        .iter()
        .map(|p| {
            (
                p.pod.to_string().trim_start_matches("default/").to_string(),
                p.clone(),
            )
        })
        .collect()
}

pub fn config() -> SchedulerConfig {
    SchedulerConfig {
        profiles: vec![default_profile(SCHEDULER)],
        ..SchedulerConfig::default()
    }
}

pub struct Instance {
    stop: Option<oneshot::Sender<()>>,
    pub handle: tokio::task::JoinHandle<Result<(), RunError>>,
    pub running: Running,
    pub identity: String,
}

impl Instance {
    /// Stops gracefully and returns how the run ended.
    pub async fn stop(mut self) -> Result<(), RunError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), self.handle)
            .await
            .expect("an instance stops within 30 s")
            .expect("the run task does not panic")
    }
}

pub async fn start(
    api: &TestApiServer,
    identity: &str,
    shard: Shard,
    leader_election: Option<LeaderElection>,
) -> Instance {
    start_with(api, identity, shard, leader_election, config()).await
}

pub async fn start_with(
    api: &TestApiServer,
    identity: &str,
    shard: Shard,
    leader_election: Option<LeaderElection>,
    config: SchedulerConfig,
) -> Instance {
    let options = RunOptions {
        identity: identity.into(),
        leader_election,
        shard,
        config,
        ..options(api.client(), &api.url())
    };
    launch(options).await
}

/// How the tests run an instance: alone, on the default profile, fences in gantry-system.
pub fn options(client: kube::Client, server: &str) -> RunOptions {
    RunOptions {
        client,
        server: server.into(),
        startup: Startup::default(),
        config: config(),
        identity: "solo".into(),
        leader_election: None,
        metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
        shard: Shard::WHOLE,
        divide: gantry_kube::Divide::Pods,
        seed: 7,
        fence_namespace: "gantry-system".into(),
        fence_idle: gantry_kube::DEFAULT_FENCE_IDLE,
        event_retry: Duration::from_millis(50),
        shadow: None,
    }
}

/// Starts an instance with these options.
pub async fn launch(options: RunOptions) -> Instance {
    let identity = options.identity.clone();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (started_tx, started_rx) = oneshot::channel();
    let handle = tokio::spawn(gantry_kube::run(
        options,
        async move {
            let _ = stop_rx.await;
        },
        Some(started_tx),
    ));
    let running = started_rx.await.expect("the instance starts");
    Instance {
        stop: Some(stop_tx),
        handle,
        running,
        identity,
    }
}

/// Runs an instance that is expected to end by itself (within `within`): how it ended.
pub async fn run_to_end(options: RunOptions, within: Duration) -> Result<(), RunError> {
    let run = gantry_kube::run(options, std::future::pending(), None);
    tokio::time::timeout(within, run)
        .await
        .unwrap_or_else(|_| panic!("gantry run did not end within {within:?}"))
}

/// Polls `condition` every 20 ms until it holds; panics with `what` after `timeout`.
pub async fn wait_for(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn node_of(api: &TestApiServer, name: &str) -> Option<String> {
    api.get(PODS, "default", name)?["spec"]["nodeName"]
        .as_str()
        .map(str::to_string)
}

/// The events about a pod with this reason.
pub fn events_about(api: &TestApiServer, pod: &str, reason: &str) -> Vec<Value> {
    api.list(EVENTS)
        .into_iter()
        .filter(|e| e["regarding"]["name"] == pod && e["reason"] == reason)
        .collect()
}

pub fn condition(api: &TestApiServer, pod: &str, kind: &str) -> Option<Value> {
    let pod = api.get(PODS, "default", pod)?;
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

/// Requested milli-cpu per node over the pods bound there, against allocatable.
pub fn overcommitted_nodes(api: &TestApiServer) -> Vec<String> {
    use crate::apiserver::resources::NODES;
    let mut used = BTreeMap::<String, i64>::new();
    for pod in api.list(PODS) {
        if let Some(node) = pod["spec"]["nodeName"].as_str() {
            let cpu = pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
                .as_str()
                .unwrap_or("0m");
            *used.entry(node.to_string()).or_default() +=
                cpu.trim_end_matches('m').parse::<i64>().unwrap();
        }
    }
    api.list(NODES)
        .into_iter()
        .filter_map(|n| {
            let name = n["metadata"]["name"].as_str()?.to_string();
            let cap: i64 = n["status"]["allocatable"]["cpu"]
                .as_str()?
                .trim_end_matches('m')
                .parse()
                .ok()?;
            (used.get(&name).copied().unwrap_or(0) > cap).then_some(name)
        })
        .collect()
}

// ---- dynamic resource allocation -------------------------------------------------

/// The driver of the test devices.
pub const DRIVER: &str = "gpu.example.com";
pub const DRA_API: &str = "resource.k8s.io/v1";

/// A device class for the driver's devices, with a configuration allocations carry.
pub fn device_class(name: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}],
            "config": [{"opaque": {"driver": DRIVER, "parameters": {"class": name}}}],
        },
    })
}

/// The node's slice: one pool named after the node, with these devices.
pub fn slice(node: &str, devices: &[&str]) -> Value {
    let devices: Vec<Value> = devices.iter().map(|d| json!({"name": d})).collect();
    json!({
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    })
}

/// A claim for one device of `class` (request `gpu`).
pub fn claim(name: &str, class: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": class, "allocationMode": "ExactCount", "count": 1}}]}},
    })
}

/// A pod that uses the claim `claim` (its entry `gpu`).
pub fn pod_with_claim(name: &str, milli_cpu: i64, claim: &str) -> Value {
    let mut p = pod(name, milli_cpu);
    p["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": claim}]);
    p["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
    p
}

/// The object with its `kind` and the resource.k8s.io `apiVersion`, for the simulation.
pub fn dra_object(kind: &str, object: &Value) -> Value {
    let mut o = object.clone();
    o["kind"] = json!(kind);
    o["apiVersion"] = json!(DRA_API);
    o
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// `GET path` from an instance's metrics server: (the response head, the body).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.to_string(), body.to_string())
}

/// Fails, listing them, if the deployment's roles (`deploy/gantry.yaml`) would refuse any
/// request the test's instances made to `api` (leases and fences in `gantry-system`).
pub fn assert_deployable(api: &TestApiServer) {
    let refused = rbac::refused(rbac::SCHEDULER, &api.requests_matching(""), "gantry-system");
    assert!(
        refused.is_empty(),
        "deploy/gantry.yaml does not grant:\n{}",
        refused.join("\n")
    );
}
