//! `gantry run` with dynamic resource allocation (resource.k8s.io/v1), end to end against
//! the in-process API server: claims made in the test (the resource-claim controller is
//! not part of `gantry run`), allocated by the scheduler and written before the binding.

use crate::{apiserver, common};

use std::collections::BTreeMap;
use std::time::Duration;

use apiserver::TestApiServer;
use apiserver::resources::{
    DEVICE_CLASSES, DEVICE_TAINT_RULES, NODES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES,
};
use common::*;
use gantry_kube::Shard;
use serde_json::{Value, json};

fn claim_of(api: &TestApiServer, name: &str) -> Value {
    api.get(RESOURCE_CLAIMS, "default", name).unwrap()
}

/// The claim's allocation without its `allocationTimestamp`, which v1.36's and v1.37's
/// PreBind stamps on every allocation it writes (asserted to be there).
fn allocation_unstamped(claim: &Value) -> Value {
    let mut allocation = claim["status"]["allocation"].clone();
    let stamp = allocation
        .as_object_mut()
        .and_then(|a| a.remove("allocationTimestamp"));
    assert!(
        stamp.as_ref().is_some_and(Value::is_string),
        "no allocationTimestamp: {claim}"
    );
    allocation
}

fn uid_of(api: &TestApiServer, pod: &str) -> String {
    api.get(PODS, "default", pod).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The position of the first write that starts with `what`.
fn written_at(api: &TestApiServer, what: &str) -> usize {
    let writes = api.writes();
    writes
        .iter()
        .position(|w| w.starts_with(what))
        .unwrap_or_else(|| panic!("no write {what:?} among {writes:#?}"))
}

fn count_writes(api: &TestApiServer, what: &str) -> usize {
    api.writes().iter().filter(|w| *w == what).count()
}

/// Two instances dividing the pods between them.
async fn start_two(api: &TestApiServer) -> (Instance, Instance) {
    tokio::join!(
        start(api, "a", Shard { index: 0, count: 2 }, None),
        start(api, "b", Shard { index: 1, count: 2 }, None),
    )
}

/// How many pods the API holds bound.
fn bound_pods(api: &TestApiServer) -> usize {
    api.list(PODS)
        .iter()
        .filter(|p| p["spec"]["nodeName"].is_string())
        .count()
}

const CLAIMS_PATH: &str = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";

/// The node-local allocation of `device` on `node` for the request `gpu`, as upstream's
/// allocator writes it (without configuration).
fn local_allocation(node: &str, device: &str) -> Value {
    json!({
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_allocated_and_reserved_before_the_binding_and_a_claim_without_a_device_is_reported()
 {
    init_tracing();
    let api = TestApiServer::start().await;
    let nodes = vec![node("node-0", 4000, "a"), node("node-1", 4000, "b")];
    let class = device_class("gpu");
    let gpus = slice("node-1", &["gpu-0"]);
    let mut first_claim = claim("first-gpu", "gpu");
    first_claim["spec"]["devices"]["config"] = json!([{"requests": ["gpu"],
        "opaque": {"driver": DRIVER, "parameters": {"mode": "exclusive"}}}]);
    let second_claim = claim("second-gpu", "gpu");
    let first = pod_with_claim("first", 500, "first-gpu");
    let second = pod_with_claim("second", 500, "second-gpu");
    for n in &nodes {
        api.put(NODES, n.clone());
    }
    api.put(DEVICE_CLASSES, class.clone());
    api.put(RESOURCE_SLICES, gpus.clone());
    api.put(RESOURCE_CLAIMS, first_claim.clone());
    api.put(RESOURCE_CLAIMS, second_claim.clone());
    api.put(PODS, first.clone());
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("first bound", WAIT, || node_of(&api, "first").is_some()).await;
    assert_eq!(node_of(&api, "first").as_deref(), Some("node-1"));

    let written = claim_of(&api, "first-gpu");
    let mut allocation = local_allocation("node-1", "gpu-0");
    allocation["devices"]["config"] = json!([
        {"source": "FromClass", "requests": ["gpu"],
         "opaque": {"driver": DRIVER, "parameters": {"class": "gpu"}}},
        {"source": "FromClaim", "requests": ["gpu"],
         "opaque": {"driver": DRIVER, "parameters": {"mode": "exclusive"}}},
    ]);
    assert_eq!(allocation_unstamped(&written), allocation);
    assert_eq!(
        written["status"]["reservedFor"],
        json!([{"resource": "pods", "name": "first", "uid": uid_of(&api, "first")}])
    );
    assert_eq!(
        written["metadata"]["finalizers"],
        json!(["resource.kubernetes.io/delete-protection"])
    );
    // The finalizer (an update of the claim), then the status, then the binding.
    let finalizer = written_at(&api, &format!("PUT {CLAIMS_PATH}/first-gpu"));
    let status = written_at(&api, &format!("PUT {CLAIMS_PATH}/first-gpu/status"));
    let binding = written_at(&api, "POST /api/v1/namespaces/default/pods/first/binding");
    assert!(
        finalizer < status && status < binding,
        "{:#?}",
        api.writes()
    );

    // The only device is taken: the second pod's claim cannot be allocated anywhere.
    api.put(PODS, second.clone());
    wait_for("second reported", WAIT, || {
        !events_about(&api, "second", "FailedScheduling").is_empty()
    })
    .await;
    let others = [
        dra_object("DeviceClass", &class),
        dra_object("ResourceSlice", &gpus),
        dra_object("ResourceClaim", &first_claim),
        dra_object("ResourceClaim", &second_claim),
    ];
    let expected = &simulated_with(&nodes, &[first, second], &others)["second"];
    assert_eq!(expected.node, None);
    let message = expected.reason.clone().unwrap();
    assert!(message.contains("cannot allocate all claims"), "{message}");
    let event = &events_about(&api, "second", "FailedScheduling")[0];
    assert_eq!(event["note"], json!(message));
    assert!(node_of(&api, "second").is_none());
    assert!(claim_of(&api, "second-gpu")["status"]["allocation"].is_null());
    instance.stop().await.unwrap();
    assert_deployable(&api);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_never_give_one_device_to_two_claims() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(DEVICE_CLASSES, device_class("gpu"));
    for i in 0..2 {
        let name = format!("node-{i}");
        api.put(NODES, node(&name, 8000, ["a", "b"][i]));
        api.put(RESOURCE_SLICES, slice(&name, &["gpu-0", "gpu-1", "gpu-2"]));
    }
    // Eight pods, each with its own claim, split between the instances; six devices.
    // Slow binds keep both instances deciding on caches that lag each other's writes:
    // both choose the same first free device, while the node still has another.
    api.set_bind_delay(Duration::from_millis(150));
    for i in 0..8u32 {
        let name = format!("p-{i}");
        api.put(RESOURCE_CLAIMS, claim(&format!("{name}-gpu"), "gpu"));
        let mut p = pod_with_claim(&name, 100, &format!("{name}-gpu"));
        p["metadata"]["uid"] = json!(uid_owned_by(i % 2, 2, &name));
        api.put(PODS, p);
    }
    let (a, b) = start_two(&api).await;
    wait_for("every device in use", WAIT, || bound_pods(&api) == 6).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(bound_pods(&api), 6);

    let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in api.list(RESOURCE_CLAIMS) {
        for result in c["status"]["allocation"]["devices"]["results"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let device = format!("{}/{}", result["pool"], result["device"]);
            let name = c["metadata"]["name"].as_str().unwrap().to_string();
            holders.entry(device).or_default().push(name);
        }
    }
    for (device, claims) in &holders {
        assert_eq!(claims.len(), 1, "device {device} allocated to {claims:?}");
    }
    // Each bound pod's claim is allocated on its node and reserved for it.
    for p in api.list(PODS) {
        let Some(node) = p["spec"]["nodeName"].as_str() else {
            continue;
        };
        let name = p["metadata"]["name"].as_str().unwrap();
        let c = claim_of(&api, &format!("{name}-gpu"));
        assert_eq!(
            c["status"]["allocation"]["devices"]["results"][0]["pool"],
            node
        );
        assert_eq!(c["status"]["reservedFor"][0]["uid"], p["metadata"]["uid"]);
    }
    assert_eq!(holders.len(), 6, "{holders:?}");
    a.stop().await.unwrap();
    b.stop().await.unwrap();
    assert_deployable(&api);
}

/// Two instances give partitions of one GPU on caches that lag each other's writes: one
/// the whole GPU, the other a half, each free on its own view. The binder's re-check at
/// the node's fence counts the counters every allocated device consumes (another
/// instance's included), so no GPU is given for more memory than it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_never_give_more_of_a_partitioned_gpu_than_it_has() {
    init_tracing();
    let api = TestApiServer::start().await;
    for profile in ["whole", "half"] {
        let mut class = device_class(profile);
        class["spec"]["selectors"] = json!([{"cel": {"expression": format!(
            "device.driver == \"{DRIVER}\" && device.attributes[\"{DRIVER}\"].profile == \"{profile}\""
        )}}]);
        api.put(DEVICE_CLASSES, class);
    }
    let partition = |gpu: u32, name: &str, profile: &str, memory: &str| {
        json!({"name": name, "attributes": {"profile": {"string": profile}},
            "consumesCounters": [{"counterSet": format!("gpu-{gpu}"), "counters": {"memory": {"value": memory}}}]})
    };
    {
        let name = "node-0";
        api.put(NODES, node(name, 8000, "a"));
        let pool = json!({"name": name, "generation": 1, "resourceSliceCount": 2});
        let sets: Vec<Value> = (0..2)
            .map(|gpu| json!({"name": format!("gpu-{gpu}"), "counters": {"memory": {"value": "40Gi"}}}))
            .collect();
        api.put(
            RESOURCE_SLICES,
            json!({
                "metadata": {"name": format!("{name}-counters")},
                "spec": {"driver": DRIVER, "nodeName": name, "pool": pool,
                    "sharedCounters": sets},
            }),
        );
        // Two GPUs: a re-check that allocated the pod's claims afresh would find the
        // other GPU free and let through the partition the binder writes.
        let devices: Vec<Value> = [0, 1]
            .into_iter()
            .flat_map(|gpu| {
                [
                    partition(gpu, &format!("gpu-{gpu}"), "whole", "40Gi"),
                    partition(gpu, &format!("gpu-{gpu}-a"), "half", "20Gi"),
                    partition(gpu, &format!("gpu-{gpu}-b"), "half", "20Gi"),
                ]
            })
            .collect();
        api.put(
            RESOURCE_SLICES,
            json!({
                "metadata": {"name": format!("{name}-gpus")},
                "spec": {"driver": DRIVER, "nodeName": name, "pool": pool, "devices": devices},
            }),
        );
    }
    // Instance a places a pod asking for a whole GPU, instance b two asking for a half:
    // each gives GPU gpu-0, free on its own view; slow binds keep each deciding before it
    // sees the other's claims. Whichever binds second would take more than gpu-0 has.
    api.set_bind_delay(Duration::from_millis(150));
    for (name, profile, instance) in [("p-0", "whole", 0), ("p-1", "half", 1), ("p-2", "half", 1)] {
        api.put(RESOURCE_CLAIMS, claim(&format!("{name}-gpu"), profile));
        let mut p = pod_with_claim(name, 100, &format!("{name}-gpu"));
        p["metadata"]["uid"] = json!(uid_owned_by(instance, 2, name));
        api.put(PODS, p);
    }
    let (a, b) = start_two(&api).await;
    wait_for("the GPUs in use", WAIT, || bound_pods(&api) >= 2).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // The memory each GPU is given, from the claims the API holds.
    let mut given: BTreeMap<String, u32> = BTreeMap::new();
    for c in api.list(RESOURCE_CLAIMS) {
        for result in c["status"]["allocation"]["devices"]["results"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let device = result["device"].as_str().unwrap();
            let (gpu, gib) = match device.split_once("-").unwrap().1.split_once('-') {
                Some((gpu, _half)) => (gpu, 20),
                None => (&device[4..], 40),
            };
            *given
                .entry(format!("{}/gpu-{gpu}", result["pool"].as_str().unwrap()))
                .or_default() += gib;
        }
    }
    for (gpu, gib) in &given {
        assert!(*gib <= 40, "{gpu} is given {gib}Gi of its 40Gi: {given:?}");
    }
    assert!(given.values().sum::<u32>() >= 40, "{given:?}");
    a.stop().await.unwrap();
    b.stop().await.unwrap();
    assert_deployable(&api);
}

/// Two instances give shares of one GPU (DRAConsumableCapacity) on caches that lag each
/// other's writes: 30Gi of 40Gi each, each free on its own view. The binder's re-check
/// adds the shares every claim holds now to the pod's own, so no GPU is given more than
/// it has; the refused pod gets the other GPU, and `gantry run` writes each share's ID
/// and consumed capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_never_share_out_more_of_a_gpu_than_it_has() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(DEVICE_CLASSES, device_class("gpu"));
    api.put(NODES, node("node-0", 8000, "a"));
    let mut gpus = slice("node-0", &["gpu-0", "gpu-1"]);
    for device in gpus["spec"]["devices"].as_array_mut().unwrap() {
        device["allowMultipleAllocations"] = json!(true);
        device["capacity"] = json!({"memory": {"value": "40Gi"}});
    }
    api.put(RESOURCE_SLICES, gpus);
    api.set_bind_delay(Duration::from_millis(150));
    for (name, instance) in [("p-0", 0), ("p-1", 1)] {
        let mut c = claim(&format!("{name}-gpu"), "gpu");
        c["spec"]["devices"]["requests"][0]["exactly"]["capacity"] =
            json!({"requests": {"memory": "30Gi"}});
        api.put(RESOURCE_CLAIMS, c);
        let mut p = pod_with_claim(name, 100, &format!("{name}-gpu"));
        p["metadata"]["uid"] = json!(uid_owned_by(instance, 2, name));
        api.put(PODS, p);
    }
    let (a, b) = start_two(&api).await;
    wait_for("both pods bound", WAIT, || bound_pods(&api) == 2).await;

    let mut given: BTreeMap<String, u64> = BTreeMap::new();
    for c in api.list(RESOURCE_CLAIMS) {
        for result in c["status"]["allocation"]["devices"]["results"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let id = result["shareID"].as_str().expect("a share names its ID");
            assert_eq!(id.len(), 36, "{id}");
            assert_eq!(result["consumedCapacity"], json!({"memory": "30Gi"}));
            *given
                .entry(result["device"].as_str().unwrap().to_string())
                .or_default() += 30;
        }
    }
    assert_eq!(given.values().sum::<u64>(), 60, "{given:?}");
    for (gpu, gib) in &given {
        assert!(*gib <= 40, "{gpu} is given {gib}Gi of its 40Gi: {given:?}");
    }
    a.stop().await.unwrap();
    b.stop().await.unwrap();
    assert_deployable(&api);
}

/// DeviceTaintRules (DRADeviceTaintRules, on in v1.37; served here as v1.36 serves them,
/// resource.k8s.io/v1beta2), followed as they change: a rule tainting gpu-0 sends the
/// first pod's claim to gpu-1; with one without a selector (every device) added and that
/// rule deleted, the second pod waits; with that one deleted too, it gets gpu-0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_taint_rules_taint_the_devices_they_pick() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(DEVICE_CLASSES, device_class("gpu"));
    api.put(NODES, node("node-0", 8000, "a"));
    api.put(RESOURCE_SLICES, slice("node-0", &["gpu-0", "gpu-1"]));
    let rule = |name: &str, device: Option<&str>| {
        let mut rule = json!({"metadata": {"name": name},
            "spec": {"taint": {"key": "example.com/broken", "effect": "NoSchedule"}}});
        if let Some(device) = device {
            rule["spec"]["deviceSelector"] =
                json!({"driver": DRIVER, "pool": "node-0", "device": device});
        }
        rule
    };
    api.put(DEVICE_TAINT_RULES, rule("broken-0", Some("gpu-0")));
    api.put(RESOURCE_CLAIMS, claim("first-gpu", "gpu"));
    api.put(PODS, pod_with_claim("first", 100, "first-gpu"));
    let instance = start(&api, "a", Shard { index: 0, count: 1 }, None).await;
    wait_for("the first pod bound", WAIT, || bound_pods(&api) == 1).await;
    let device = |claim: &str| {
        claim_of(&api, claim)["status"]["allocation"]["devices"]["results"][0]["device"].clone()
    };
    assert_eq!(device("first-gpu"), "gpu-1");

    // broken-all first, then broken-0 deleted: rules and pods come on watches of their
    // own, so whichever the scheduler has seen of the two when the pod comes, gpu-0 is
    // tainted (deleting broken-0 first let the pod in, now and then, between the two).
    // Once broken-0's deletion is seen, the pod is tried again and broken-all holds it.
    api.put(DEVICE_TAINT_RULES, rule("broken-all", None));
    api.delete(DEVICE_TAINT_RULES, "", "broken-0");
    api.put(RESOURCE_CLAIMS, claim("second-gpu", "gpu"));
    api.put(PODS, pod_with_claim("second", 100, "second-gpu"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        bound_pods(&api),
        1,
        "gpu-0 is tainted by broken-all, gpu-1 held"
    );

    api.delete(DEVICE_TAINT_RULES, "", "broken-all");
    wait_for("the second pod bound", WAIT, || bound_pods(&api) == 2).await;
    assert_eq!(device("second-gpu"), "gpu-0");
    instance.stop().await.unwrap();
    assert_deployable(&api);
}

/// Another client writes the claim between the scheduler's read and its status write:
/// the write gets 409, reads the claim again and succeeds on the fresh version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_changed_meanwhile_is_read_again_and_written() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    api.put(DEVICE_CLASSES, device_class("gpu"));
    api.put(RESOURCE_SLICES, slice("node-0", &["gpu-0"]));
    api.put(RESOURCE_CLAIMS, claim("c", "gpu"));
    api.before_status_write(
        "default/c",
        json!({"metadata": {"annotations": {"touched-by": "someone-else"}}}),
    );
    api.put(PODS, pod_with_claim("p", 500, "c"));
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("p bound", WAIT, || node_of(&api, "p").is_some()).await;
    let written = claim_of(&api, "c");
    assert_eq!(
        written["metadata"]["annotations"]["touched-by"],
        "someone-else"
    );
    assert_eq!(
        written["status"]["allocation"]["devices"]["results"][0]["device"],
        "gpu-0"
    );
    assert_eq!(
        written["status"]["reservedFor"][0]["uid"],
        json!(uid_of(&api, "p"))
    );
    assert_eq!(
        count_writes(&api, &format!("PUT {CLAIMS_PATH}/c/status")),
        2,
        "a conflict, then the write: {:#?}",
        api.writes()
    );
    assert_eq!(api.binds().len(), 1);
    instance.stop().await.unwrap();
    assert_deployable(&api);
}

/// Another scheduler allocates the claim between the scheduler's read and its status
/// write: the binding fails with upstream's message and the pod is retried, where the
/// other allocation put the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_allocated_elsewhere_meanwhile_fails_the_binding_and_the_pod_is_retried() {
    init_tracing();
    let api = TestApiServer::start().await;
    // node-1 has the most room: the scheduler picks it first.
    let nodes = vec![node("node-0", 1000, "a"), node("node-1", 4000, "b")];
    let class = device_class("gpu");
    let slices = [slice("node-0", &["gpu-0"]), slice("node-1", &["gpu-0"])];
    let c = claim("c", "gpu");
    let p = pod_with_claim("p", 500, "c");
    let mut others = vec![
        dra_object("DeviceClass", &class),
        dra_object("ResourceClaim", &c),
    ];
    others.extend(slices.iter().map(|s| dra_object("ResourceSlice", s)));
    let expected = &simulated_with(&nodes, std::slice::from_ref(&p), &others)["p"];
    assert_eq!(expected.node.as_deref(), Some("node-1"));
    for n in &nodes {
        api.put(NODES, n.clone());
    }
    api.put(DEVICE_CLASSES, class);
    for s in slices {
        api.put(RESOURCE_SLICES, s);
    }
    api.put(RESOURCE_CLAIMS, c);
    let elsewhere = local_allocation("node-0", "gpu-0");
    api.before_status_write(
        "default/c",
        json!({"status": {"allocation": elsewhere.clone()}}),
    );
    api.put(PODS, p);
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("p bound", WAIT, || node_of(&api, "p").is_some()).await;
    assert_eq!(node_of(&api, "p").as_deref(), Some("node-0"));
    let written = claim_of(&api, "c");
    // Allocated elsewhere, without a stamp: reserved as it is (its allocation is
    // immutable).
    assert_eq!(written["status"]["allocation"], elsewhere);
    assert_eq!(
        written["status"]["reservedFor"][0]["uid"],
        json!(uid_of(&api, "p"))
    );
    wait_for("the failed binding reported", WAIT, || {
        !events_about(&api, "p", "FailedScheduling").is_empty()
    })
    .await;
    assert_eq!(
        events_about(&api, "p", "FailedScheduling")[0]["note"],
        "running PreBind plugin \"DynamicResources\": claim default/c got allocated elsewhere in the meantime"
    );
    assert_eq!(api.binds(), vec![("default/p".into(), "node-0".into())]);
    instance.stop().await.unwrap();
    assert_deployable(&api);
}

/// A binding that fails after the claim was written takes the pod out of the claim's
/// `reservedFor` (the allocation stays); the retry reserves the same device again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_binding_unreserves_the_claim_and_the_retry_keeps_its_allocation() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    api.put(DEVICE_CLASSES, device_class("gpu"));
    api.put(RESOURCE_SLICES, slice("node-0", &["gpu-0", "gpu-1"]));
    api.put(RESOURCE_CLAIMS, claim("c", "gpu"));
    api.fail_requests("/binding", 1);
    api.put(PODS, pod_with_claim("p", 500, "c"));
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("p bound", WAIT, || node_of(&api, "p").is_some()).await;
    let status = format!("PUT {CLAIMS_PATH}/c/status");
    let unreserve = format!("PATCH {CLAIMS_PATH}/c/status");
    let binding = "POST /api/v1/namespaces/default/pods/p/binding";
    let writes: Vec<String> = api
        .writes()
        .into_iter()
        .filter(|w| *w == status || *w == unreserve || w == binding)
        .collect();
    assert_eq!(
        writes,
        vec![
            status.clone(),
            binding.into(),
            unreserve,
            status,
            binding.into()
        ]
    );
    let written = claim_of(&api, "c");
    assert_eq!(
        written["status"]["reservedFor"],
        json!([{"resource": "pods", "name": "p", "uid": uid_of(&api, "p")}])
    );
    let device = &written["status"]["allocation"]["devices"]["results"][0]["device"];
    assert!(device == "gpu-0" || device == "gpu-1", "{written}");
    instance.stop().await.unwrap();
    assert_deployable(&api);
}

/// A claim allocated on a node the pod does not fit is freed by DynamicResources'
/// PostFilter (its status written without the allocation) and allocated again where the
/// pod fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_allocated_where_its_pod_cannot_fit_is_deallocated_and_allocated_again() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 1000, "a"));
    api.put(NODES, node("node-1", 4000, "b"));
    api.put(DEVICE_CLASSES, device_class("gpu"));
    api.put(RESOURCE_SLICES, slice("node-0", &["gpu-0"]));
    api.put(RESOURCE_SLICES, slice("node-1", &["gpu-0"]));
    let mut c = claim("c", "gpu");
    c["status"] = json!({"allocation": local_allocation("node-0", "gpu-0")});
    api.put(RESOURCE_CLAIMS, c);
    api.put(PODS, pod_with_claim("p", 2000, "c"));
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("p bound", WAIT, || node_of(&api, "p").is_some()).await;
    assert_eq!(node_of(&api, "p").as_deref(), Some("node-1"));
    let written = claim_of(&api, "c");
    assert_eq!(
        written["status"]["allocation"]["devices"]["results"][0]["pool"],
        "node-1"
    );
    assert_eq!(
        count_writes(&api, &format!("PUT {CLAIMS_PATH}/c/status")),
        2,
        "the deallocation, then the allocation: {:#?}",
        api.writes()
    );
    wait_for("the first attempt reported", WAIT, || {
        !events_about(&api, "p", "FailedScheduling").is_empty()
    })
    .await;
    let reported = events_about(&api, "p", "FailedScheduling");
    assert!(
        reported[0]["note"]
            .as_str()
            .unwrap()
            .contains("deallocation of ResourceClaim completed"),
        "{reported:?}"
    );
    instance.stop().await.unwrap();
    assert_deployable(&api);
}

/// resource.k8s.io/v1 is listed only when a profile runs DynamicResources: a cluster that
/// does not serve it (here: every request to it fails) holds back scheduling with it, and
/// only with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_k8s_io_is_read_only_when_a_profile_runs_dynamic_resources() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    api.fail_requests("/apis/resource.k8s.io/", 1_000_000);
    api.put(PODS, pod("web", 100));
    let with_dra = start(&api, "with-dra", Shard::WHOLE, None).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!with_dra.running.shared.is_synced());
    assert_eq!(node_of(&api, "web"), None);
    with_dra.stop().await.unwrap();

    // v1.33's default profile has no DynamicResources (its gate is off there).
    let release = gantry_api::Release::at(33);
    let config = gantry_framework::config::SchedulerConfig {
        profiles: vec![gantry_framework::plugins::default_profile_for(
            SCHEDULER, release,
        )],
        ..gantry_framework::config::SchedulerConfig::for_release(release)
    };
    let without = start_with(&api, "without-dra", Shard::WHOLE, None, config).await;
    wait_for("the pod bound", WAIT, || node_of(&api, "web").is_some()).await;
    assert!(without.running.shared.is_synced());
    without.stop().await.unwrap();
}

/// A pod asking for `example.com/gpu`, which a device class serves (DRAExtendedResource,
/// on from v1.36), on a node whose allocatable lacks it: the scheduler creates the pod's
/// claim (owned by the pod, annotated, one request for the container), writes its
/// allocation and reservation, names it in the pod's status, then binds; when the binding
/// fails the claim is deleted, and the retry makes it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extended_resource_backed_by_devices_gets_a_claim_made_for_the_pod() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    let mut class = device_class("gpu");
    class["spec"]["extendedResourceName"] = json!("example.com/gpu");
    api.put(DEVICE_CLASSES, class);
    api.put(RESOURCE_SLICES, slice("node-0", &["gpu-0", "gpu-1"]));
    let mut p = pod("p", 500);
    p["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = json!("2");
    p["spec"]["containers"][0]["resources"]["limits"] = json!({"example.com/gpu": "2"});
    api.fail_requests("/binding", 1);
    api.put(PODS, p);
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("p bound", WAIT, || node_of(&api, "p").is_some()).await;

    let claims = api.list(RESOURCE_CLAIMS);
    assert_eq!(claims.len(), 1, "{claims:#?}");
    let claim = &claims[0];
    let name = claim["metadata"]["name"].as_str().unwrap();
    assert!(
        name.starts_with("p-extended-resources-") && name.len() == 26,
        "{name}"
    );
    assert_eq!(
        claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"],
        "true"
    );
    let owner = &claim["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["uid"], &owner["controller"]),
        (&json!("Pod"), &json!(uid_of(&api, "p")), &json!(true))
    );
    assert_eq!(
        claim["spec"]["devices"]["requests"],
        json!([{"name": "container-0-request-1", "exactly": {
            "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}])
    );
    let results = &claim["status"]["allocation"]["devices"]["results"];
    assert_eq!(results.as_array().map(Vec::len), Some(2), "{claim}");
    assert_eq!(
        claim["status"]["reservedFor"],
        json!([{"resource": "pods", "name": "p", "uid": uid_of(&api, "p")}])
    );
    let status = &api.get(PODS, "default", "p").unwrap()["status"];
    assert_eq!(
        status["extendedResourceClaimStatus"],
        json!({"resourceClaimName": name, "requestMappings": [
            {"containerName": "c", "resourceName": "example.com/gpu",
             "requestName": "container-0-request-1"}]})
    );
    // The first attempt's claim was created, written, and deleted when the binding failed.
    let path = format!("{CLAIMS_PATH}/{name}");
    let writes: Vec<String> = (api.writes().into_iter())
        .filter(|w| w.contains(CLAIMS_PATH) || w.contains("/binding"))
        .collect();
    let binding = "POST /api/v1/namespaces/default/pods/p/binding".to_string();
    let status_write = format!("PUT {path}/status");
    let attempt = [
        format!("POST {CLAIMS_PATH}"),
        format!("PUT {path}"),
        status_write.clone(),
        binding.clone(),
    ];
    let mut expected: Vec<String> = attempt.to_vec();
    expected.extend([format!("PUT {path}"), format!("DELETE {path}")]);
    expected.extend(attempt);
    assert_eq!(writes, expected);
    instance.stop().await.unwrap();
    // Making and deleting the claim is granted as v1.36's system:kube-scheduler grants it.
    assert_deployable(&api);
}

/// A pod made from a claim template, before the resourceclaim controller has made its
/// claim and named it in the pod's status: DynamicResources' PreEnqueue holds it back, no
/// attempt and no event (a real v1.36.2 kube-scheduler writes none; Gantry wrote
/// `could not find ResourceClaim`). The claim made, then named in the pod's status (the
/// controller's order), the pod is bound with it, still without a `FailedScheduling`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_is_not_tried_before_the_controller_has_made_its_claim() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    api.put(DEVICE_CLASSES, device_class("gpu"));
    api.put(RESOURCE_SLICES, slice("node-0", &["gpu-0"]));
    let mut p = pod("p", 500);
    p["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": "gpu"}]);
    p["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
    api.put(PODS, p);
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    // An idle cache sees the pod well within this; an attempt would write an event.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(node_of(&api, "p").is_none());
    assert_eq!(
        events_about(&api, "p", "FailedScheduling"),
        Vec::<Value>::new()
    );

    let mut made = claim("p-gpu-x7k2p", "gpu");
    made["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod",
        "name": "p", "uid": uid_of(&api, "p"), "controller": true}]);
    api.put(RESOURCE_CLAIMS, made);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        node_of(&api, "p").is_none(),
        "tried before its status names the claim"
    );
    let mut named = api.get(PODS, "default", "p").unwrap();
    named["status"]["resourceClaimStatuses"] =
        json!([{"name": "gpu", "resourceClaimName": "p-gpu-x7k2p"}]);
    api.put(PODS, named);
    wait_for("p bound", WAIT, || node_of(&api, "p").is_some()).await;
    let claim = claim_of(&api, "p-gpu-x7k2p");
    assert_eq!(
        allocation_unstamped(&claim)["devices"]["results"],
        local_allocation("node-0", "gpu-0")["devices"]["results"]
    );
    assert_eq!(
        events_about(&api, "p", "FailedScheduling"),
        Vec::<Value>::new()
    );
    instance.stop().await.unwrap();
}

/// A node's slice whose one device the driver must attach first (DRADeviceBindingConditions):
/// its conditions and `bindsToNode`.
fn attachable_slice(node: &str) -> Value {
    let mut s = slice(node, &["gpu-0"]);
    s["spec"]["devices"][0]["bindingConditions"] = json!(["example.com/attached"]);
    s["spec"]["devices"][0]["bindingFailureConditions"] = json!(["example.com/attach-failed"]);
    s["spec"]["devices"][0]["bindsToNode"] = json!(true);
    s
}

/// The driver's answer on the claim's `status.devices`: condition `kind` True.
fn driver_sets(api: &TestApiServer, claim: &str, node: &str, kind: &str) {
    let mut c = claim_of(api, claim);
    c["status"]["devices"] = json!([{"driver": DRIVER, "pool": node, "device": "gpu-0",
        "conditions": [{"type": kind, "status": "True", "reason": "Driver", "message": "it said so",
                        "lastTransitionTime": "2026-12-05T00:00:00Z"}]}]);
    api.put(RESOURCE_CLAIMS, c);
}

/// Binding conditions: `gantry run` writes the claim (stamped, its result carrying the
/// device's conditions) and says `BindingConditionsPending` as kube-scheduler v1.36 does,
/// binds the pod only once the driver (the test) sets the condition True, and fails the
/// binding with upstream's words when the driver sets the failure condition instead; the
/// retry frees the claim (`deallocation of ResourceClaim completed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_with_binding_conditions_is_bound_once_its_driver_says_so() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    api.put(NODES, node("node-1", 4000, "b"));
    api.put(DEVICE_CLASSES, device_class("gpu"));
    api.put(RESOURCE_SLICES, attachable_slice("node-0"));
    api.put(RESOURCE_SLICES, attachable_slice("node-1"));
    api.put(RESOURCE_CLAIMS, claim("ready-gpu", "gpu"));
    api.put(PODS, pod_with_claim("ready", 500, "ready-gpu"));
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("ready-gpu written", WAIT, || {
        claim_of(&api, "ready-gpu")["status"]["reservedFor"].is_array()
    })
    .await;
    let written = claim_of(&api, "ready-gpu");
    let node = written["status"]["allocation"]["devices"]["results"][0]["pool"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        written["status"]["allocation"]["devices"]["results"][0]["bindingConditions"],
        json!(["example.com/attached"])
    );
    allocation_unstamped(&written);
    wait_for("BindingConditionsPending", WAIT, || {
        !events_about(&api, "ready", "BindingConditionsPending").is_empty()
    })
    .await;
    assert_eq!(
        events_about(&api, "ready", "BindingConditionsPending")[0]["note"],
        json!(format!(
            "waiting for binding conditions for device on node {node}"
        ))
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        node_of(&api, "ready"),
        None,
        "bound before its driver said so"
    );
    driver_sets(&api, "ready-gpu", &node, "example.com/attached");
    wait_for("ready bound", WAIT, || node_of(&api, "ready").is_some()).await;
    assert_eq!(node_of(&api, "ready"), Some(node.clone()));

    // A driver that fails the binding.
    api.put(RESOURCE_CLAIMS, claim("broken-gpu", "gpu"));
    api.put(PODS, pod_with_claim("broken", 500, "broken-gpu"));
    wait_for("broken-gpu written", WAIT, || {
        claim_of(&api, "broken-gpu")["status"]["reservedFor"].is_array()
    })
    .await;
    let other =
        claim_of(&api, "broken-gpu")["status"]["allocation"]["devices"]["results"][0]["pool"]
            .as_str()
            .unwrap()
            .to_string();
    driver_sets(&api, "broken-gpu", &other, "example.com/attach-failed");
    let failed = "running PreBind plugin \"DynamicResources\": device binding failed: claim=broken-gpu, reason=Driver, message=\"it said so\"";
    wait_for("broken failed", WAIT, || {
        (events_about(&api, "broken", "FailedScheduling").iter())
            .any(|e| e["note"] == json!(failed))
    })
    .await;
    wait_for("broken-gpu freed", WAIT, || {
        (events_about(&api, "broken", "FailedScheduling").iter()).any(|e| {
            e["note"]
                .as_str()
                .is_some_and(|n| n.contains("deallocation of ResourceClaim completed"))
        })
    })
    .await;
    assert_eq!(node_of(&api, "broken"), None);
    instance.stop().await.unwrap();
    assert_deployable(&api);
}

/// Instances sharing the cluster hold their node fences while they bind, which the others
/// pass after a few seconds: waiting for binding conditions there would let another
/// instance bind onto the node unseen, so the pod is refused, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_sharing_the_cluster_refuse_to_wait_for_binding_conditions() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    api.put(DEVICE_CLASSES, device_class("gpu"));
    api.put(RESOURCE_SLICES, attachable_slice("node-0"));
    api.put(RESOURCE_CLAIMS, claim("p-gpu", "gpu"));
    let mut p = pod_with_claim("p", 500, "p-gpu");
    p["metadata"]["uid"] = json!(uid_owned_by(0, 2, "p"));
    api.put(PODS, p);
    let (a, b) = start_two(&api).await;
    let refused = "running PreBind plugin \"DynamicResources\": waiting for binding conditions is not supported with several instances sharing the cluster";
    wait_for("p refused", WAIT, || {
        (events_about(&api, "p", "FailedScheduling").iter()).any(|e| e["note"] == json!(refused))
    })
    .await;
    assert_eq!(node_of(&api, "p"), None);
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// Binds waiting for their drivers give their slot up, as kube-scheduler's binding
/// goroutines hold nothing while they wait: with as many of them as there are binds in
/// flight, a pod without claims is still bound at once (held slots would keep it until the
/// waits time out, ten minutes later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_waiting_for_their_drivers_hold_no_slot() {
    init_tracing();
    let waiting = gantry_kube::MAX_BINDS_IN_FLIGHT;
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 64_000, "a"));
    api.put(DEVICE_CLASSES, device_class("gpu"));
    let names: Vec<String> = (0..waiting).map(|i| format!("gpu-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut gpus = slice("node-0", &names);
    for device in gpus["spec"]["devices"].as_array_mut().unwrap() {
        device["bindingConditions"] = json!(["example.com/attached"]);
        device["bindingFailureConditions"] = json!(["example.com/attach-failed"]);
    }
    api.put(RESOURCE_SLICES, gpus);
    for i in 0..waiting {
        api.put(RESOURCE_CLAIMS, claim(&format!("w-{i}-gpu"), "gpu"));
        api.put(
            PODS,
            pod_with_claim(&format!("w-{i}"), 10, &format!("w-{i}-gpu")),
        );
    }
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("every claim written", WAIT, || {
        (0..waiting)
            .all(|i| claim_of(&api, &format!("w-{i}-gpu"))["status"]["reservedFor"].is_array())
    })
    .await;
    api.put(PODS, pod("plain", 10));
    wait_for("plain bound", WAIT, || node_of(&api, "plain").is_some()).await;
    let bound = (0..waiting).filter(|i| node_of(&api, &format!("w-{i}")).is_some());
    assert_eq!(bound.count(), 0, "bound before their drivers said so");
    instance.stop().await.unwrap();
    assert_deployable(&api);
}
