//! `gantry run` end to end against the in-process API server: kube-rs lists, watches and
//! writes over real HTTP, and the outcomes are read back from the server.

mod apiserver;
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use apiserver::TestApiServer;
use apiserver::resources::{NODES, PODS, REPLICA_SETS};
use common::*;
use gantry_kube::Shard;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_bound_where_the_simulation_puts_them() {
    init_tracing();
    let api = TestApiServer::start().await;
    let nodes: Vec<Value> = (0..6)
        .map(|i| {
            node(
                &format!("node-{i}"),
                1000 + 500 * i,
                ["a", "b", "c"][i as usize % 3],
            )
        })
        .collect();
    let pods: Vec<Value> = (0..20)
        .map(|i| pod(&format!("web-{i:02}"), 100 + 37 * (i % 7)))
        .collect();
    for n in &nodes {
        api.put(NODES, n.clone());
    }
    for p in &pods {
        api.put(PODS, p.clone());
    }
    let expected: BTreeMap<String, Option<String>> = simulated(&nodes, &pods)
        .into_iter()
        .map(|(pod, placement)| (pod, placement.node))
        .collect();
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("every pod bound", WAIT, || {
        (0..20).all(|i| node_of(&api, &format!("web-{i:02}")).is_some())
    })
    .await;
    let actual: BTreeMap<String, Option<String>> = (0..20)
        .map(|i| {
            let name = format!("web-{i:02}");
            let node = node_of(&api, &name);
            (name, node)
        })
        .collect();
    assert_eq!(actual, expected);
    assert_eq!(api.binds().len(), 20, "one bind per pod");
    // kube-scheduler's Scheduled event for each.
    wait_for("Scheduled events", WAIT, || {
        (0..20).all(|i| !events_about(&api, &format!("web-{i:02}"), "Scheduled").is_empty())
    })
    .await;
    let scheduled = events_about(&api, "web-00", "Scheduled");
    assert_eq!(scheduled.len(), 1);
    assert_eq!(
        scheduled[0]["note"],
        json!(format!(
            "Successfully assigned default/web-00 to {}",
            actual["web-00"].as_ref().unwrap()
        ))
    );
    assert_eq!(scheduled[0]["action"], "Binding");
    assert_eq!(scheduled[0]["reportingController"], SCHEDULER);
    instance.stop().await.unwrap();
}

/// The ReplicaSet watch feeds the default topology spread: a pod its ReplicaSet controls
/// goes where its siblings are fewest, as in the simulation of the same objects, and not
/// where the resource scores alone would put it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_spreads_its_pods_as_in_the_simulation() {
    init_tracing();
    let api = TestApiServer::start().await;
    let nodes = vec![node("big", 16000, "a"), node("small", 2000, "a")];
    let owned = |name: &str, node: Option<&str>| {
        let mut p = pod(name, 100);
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
            "kind": "ReplicaSet", "name": "web", "uid": "rs-web", "controller": true}]);
        if let Some(node) = node {
            p["spec"]["nodeName"] = json!(node);
        }
        p
    };
    let siblings: Vec<Value> = (0..3)
        .map(|i| owned(&format!("web-{i}"), Some("big")))
        .collect();
    let pending = owned("web-new", None);
    let replica_set = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}}});
    let pods: Vec<Value> = siblings.iter().chain([&pending]).cloned().collect();
    let spread = simulated_with(&nodes, &pods, std::slice::from_ref(&replica_set));
    let unspread = simulated(&nodes, &pods);
    assert_eq!(spread["web-new"].node.as_deref(), Some("small"));
    assert_eq!(unspread["web-new"].node.as_deref(), Some("big"));

    for n in &nodes {
        api.put(NODES, n.clone());
    }
    api.put(REPLICA_SETS, replica_set);
    for p in &pods {
        api.put(PODS, p.clone());
    }
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("web-new bound", WAIT, || node_of(&api, "web-new").is_some()).await;
    assert_eq!(node_of(&api, "web-new").as_deref(), Some("small"));
    instance.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_cannot_fit_gets_failed_scheduling_with_the_exact_message() {
    init_tracing();
    let api = TestApiServer::start().await;
    let nodes = vec![node("node-0", 1000, "a"), node("node-1", 2000, "b")];
    let pods = vec![pod("huge", 4000)];
    for n in &nodes {
        api.put(NODES, n.clone());
    }
    api.put(PODS, pods[0].clone());
    // A pod of another scheduler is not Gantry's to schedule, nor to report on.
    let mut foreign = pod("foreign", 100);
    foreign["spec"]["schedulerName"] = json!("default-scheduler");
    api.put(PODS, foreign);
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("a FailedScheduling event", WAIT, || {
        !events_about(&api, "huge", "FailedScheduling").is_empty()
    })
    .await;
    let message = "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.";
    // The simulation's reason is kube-scheduler's message; the API shows the same text.
    let expected = &simulated(&nodes, &pods)["huge"];
    assert_eq!(expected.node, None);
    assert_eq!(expected.reason.as_deref(), Some(message));
    let event = &events_about(&api, "huge", "FailedScheduling")[0];
    assert_eq!(event["note"], message);
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["action"], "Scheduling");
    wait_for("the PodScheduled condition", WAIT, || {
        condition(&api, "huge", "PodScheduled").is_some()
    })
    .await;
    let cond = condition(&api, "huge", "PodScheduled").unwrap();
    assert_eq!(cond["status"], "False");
    assert_eq!(cond["reason"], "Unschedulable");
    assert_eq!(cond["message"], message);
    assert!(node_of(&api, "huge").is_none());
    assert!(node_of(&api, "foreign").is_none());
    assert!(events_about(&api, "foreign", "FailedScheduling").is_empty());
    instance.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_after_a_blind_spell_loses_nothing_not_even_assumed_pods() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 2000, "a"));
    api.put(PODS, pod("big-1", 1500));
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("big-1 bound", WAIT, || node_of(&api, "big-1").is_some()).await;
    // A bind that is still in flight when the watches go blind and relist: slow enough
    // that the blind spell below ends before it does, even on a loaded machine.
    api.slow_bind("default/slow", Duration::from_secs(8));
    api.put(PODS, pod("slow", 300));
    wait_for("slow's bind in flight", WAIT, || {
        events_about(&api, "slow", "Scheduled").is_empty() && api.requests() > 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        node_of(&api, "slow").is_none(),
        "the bind is still in flight"
    );
    let relists_before = instance.running.shared.kube.relists_of("pods");
    // Blind: every watch fails, and the change log is compacted meanwhile.
    api.fail_requests("watch=true", 10_000);
    api.drop_watches();
    api.delete(PODS, "default", "big-1");
    api.put(PODS, pod("big-2", 1500));
    api.put(PODS, pod("filler", 500));
    api.compact();
    api.clear_failures();
    wait_for("big-2 bound", WAIT, || node_of(&api, "big-2").is_some()).await;
    wait_for("slow bound", WAIT, || node_of(&api, "slow").is_some()).await;
    wait_for("filler reported unschedulable", WAIT, || {
        !events_about(&api, "filler", "FailedScheduling").is_empty()
    })
    .await;
    assert!(
        instance.running.shared.kube.relists_of("pods") > relists_before,
        "the pods were listed again after 410 Gone"
    );
    // big-1's deletion was seen (big-2 fits only in its room) and the assumed `slow`
    // was kept (else `filler` would have been placed on a full node).
    assert_eq!(node_of(&api, "filler"), None);
    assert!(overcommitted_nodes(&api).is_empty());
    instance.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_and_lost_binds_are_retried_or_given_up_as_the_api_says() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    api.put(NODES, node("node-1", 4000, "b"));
    // Two binds fail with 500: those pods go back to the queue and bind later.
    api.fail_requests("/binding", 2);
    // Another scheduler binds `raced` first: Gantry's bind gets 409 and gives the pod up.
    api.steal_bind("default/raced", "node-1");
    for i in 0..6 {
        api.put(PODS, pod(&format!("p-{i}"), 500));
    }
    api.put(PODS, pod("raced", 500));
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("every pod bound", WAIT, || {
        (0..6).all(|i| node_of(&api, &format!("p-{i}")).is_some())
            && node_of(&api, "raced").is_some()
    })
    .await;
    assert_eq!(node_of(&api, "raced").as_deref(), Some("node-1"));
    let binds = api.binds();
    assert_eq!(binds.len(), 7, "each pod bound once: {binds:?}");
    let text = instance.running.shared.kube.render();
    assert!(
        text.contains("gantry_binds_total{result=\"failed\"} 3"),
        "{text}"
    );
    // The refused bind is reported as kube-scheduler reports binding failures.
    wait_for("the binding failure reported", WAIT, || {
        events_about(&api, "raced", "FailedScheduling")
            .iter()
            .any(|e| {
                e["note"]
                    .as_str()
                    .unwrap_or("")
                    .contains("is already assigned to node")
            })
            || node_of(&api, "raced").is_some()
    })
    .await;
    assert!(overcommitted_nodes(&api).is_empty());
    instance.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_nominates_the_node_and_deletes_the_victim_through_the_api() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 1000, "a"));
    let mut low = pod("low", 700);
    low["spec"]["nodeName"] = json!("node-0");
    api.put(PODS, low);
    let mut high = pod("high", 800);
    high["spec"]["priority"] = json!(1000);
    api.put(PODS, high);
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("high bound", WAIT, || node_of(&api, "high").is_some()).await;
    assert_eq!(node_of(&api, "high").as_deref(), Some("node-0"));
    assert!(
        api.get(PODS, "default", "low").is_none(),
        "the victim was deleted"
    );
    let pod = api.get(PODS, "default", "high").unwrap();
    assert_eq!(pod["status"]["nominatedNodeName"], "node-0");
    wait_for("the Preempted event", WAIT, || {
        !events_about(&api, "low", "Preempted").is_empty()
    })
    .await;
    let preempted = &events_about(&api, "low", "Preempted")[0];
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        preempted["note"],
        json!(format!("Preempted by pod {uid} on node node-0"))
    );
    assert!(overcommitted_nodes(&api).is_empty());
    instance.stop().await.unwrap();
}

fn election() -> gantry_kube::LeaderElection {
    gantry_kube::LeaderElection {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..gantry_kube::LeaderElection::new("gantry-system", "gantry")
    }
}

/// Scheduled events by the instance that wrote them.
fn scheduled_by(api: &TestApiServer, identity: &str) -> usize {
    let instance = format!("{SCHEDULER}-{identity}");
    api.list(apiserver::resources::EVENTS)
        .iter()
        .filter(|e| e["reason"] == "Scheduled" && e["reportingInstance"] == instance)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_leader_elect_instances_never_both_schedule() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 8000, "a"));
    // Both campaign at once: one creates the lease, the other loses the race.
    let (a, b) = tokio::join!(
        start(&api, "a", Shard::WHOLE, Some(election())),
        start(&api, "b", Shard::WHOLE, Some(election())),
    );
    let leads = |i: &Instance| i.running.shared.kube.is_leader();
    wait_for("a leader", WAIT, || leads(&a) || leads(&b)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(leads(&a) != leads(&b), "exactly one leads");
    let (leader, follower) = if leads(&a) { (a, b) } else { (b, a) };
    for i in 0..10 {
        api.put(PODS, pod(&format!("first-{i}"), 100));
    }
    wait_for("the leader's Scheduled events", WAIT, || {
        scheduled_by(&api, &leader.identity) == 10
    })
    .await;
    assert_eq!(
        scheduled_by(&api, &follower.identity),
        0,
        "a follower schedules nothing"
    );
    let lease = api
        .get(apiserver::resources::LEASES, "gantry-system", "gantry")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], json!(leader.identity));

    // The leader stops (SIGTERM): it releases the lease and the follower takes over.
    let leader_identity = leader.identity.clone();
    leader.stop().await.unwrap();
    wait_for("the follower leads", WAIT, || leads(&follower)).await;
    for i in 0..10 {
        api.put(PODS, pod(&format!("second-{i}"), 100));
    }
    wait_for("the new leader's Scheduled events", WAIT, || {
        scheduled_by(&api, &follower.identity) == 10
    })
    .await;
    assert_eq!(scheduled_by(&api, &leader_identity), 10);
    let lease = api
        .get(apiserver::resources::LEASES, "gantry-system", "gantry")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], json!(follower.identity));
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    assert_eq!(api.binds().len(), 20);
    follower.stop().await.unwrap();
}

/// A UID that `owner` assigns to `shard` of `count`.
fn uid_owned_by(shard: u32, count: u32, seed: &str) -> String {
    (0..)
        .map(|k| format!("{seed}-{k}"))
        .find(|uid| gantry_kube::owner(uid, count) == shard)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_in_flight_elsewhere_is_seen_at_the_fence_and_never_overcommits() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 1000, "a"));
    // Each instance owns one of the pods; only one fits. One bind is slow, so the other
    // instance decides before any watch event can tell it about the first.
    let mut first = pod("first", 700);
    first["metadata"]["uid"] = json!(uid_owned_by(0, 2, "first"));
    let mut second = pod("second", 700);
    second["metadata"]["uid"] = json!(uid_owned_by(1, 2, "second"));
    api.slow_bind("default/first", Duration::from_millis(800));
    api.put(PODS, first);
    api.put(PODS, second);
    let (a, b) = tokio::join!(
        start(&api, "a", Shard { index: 0, count: 2 }, None),
        start(&api, "b", Shard { index: 1, count: 2 }, None),
    );
    wait_for("one pod bound and the other refused", WAIT, || {
        let conflicts = a.running.shared.kube.conflicts() + b.running.shared.kube.conflicts();
        api.binds().len() == 1 && conflicts >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(api.binds().len(), 1, "{:?}", api.binds());
    assert!(overcommitted_nodes(&api).is_empty());
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimistic_instances_never_double_bind_nor_overcommit() {
    init_tracing();
    let api = TestApiServer::start().await;
    for i in 0..4 {
        api.put(NODES, node(&format!("node-{i}"), 2000, ["a", "b"][i % 2]));
    }
    // Room for 6 pods per node, 24 in all; 40 arrive.
    for i in 0..40 {
        api.put(PODS, pod(&format!("p-{i:02}"), 300));
    }
    let count = 3;
    let mut instances = Vec::new();
    for index in 0..count {
        instances.push(start(&api, &format!("i{index}"), Shard { index, count }, None).await);
    }
    let bound = |api: &TestApiServer| {
        api.list(PODS)
            .iter()
            .filter(|p| p["spec"]["nodeName"].is_string())
            .count()
    };
    wait_for("every slot filled", WAIT, || bound(&api) == 24).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(bound(&api), 24);
    let binds = api.binds();
    let mut pods: Vec<&String> = binds.iter().map(|(p, _)| p).collect();
    pods.sort();
    pods.dedup();
    assert_eq!(pods.len(), binds.len(), "no pod bound twice: {binds:?}");
    assert!(
        overcommitted_nodes(&api).is_empty(),
        "{:?}",
        overcommitted_nodes(&api)
    );
    for instance in instances {
        instance.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_spares_the_pod_a_disruption_budget_protects() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 1000, "a"));
    api.put(NODES, node("node-1", 1000, "b"));
    // Without the budget, node-0 would win: its victim has the lower priority.
    for (name, node_name, app, priority) in
        [("low-a", "node-0", "a", 0), ("low-b", "node-1", "b", 1)]
    {
        let mut low = pod(name, 700);
        low["metadata"]["labels"] = json!({"app": app});
        low["spec"]["priority"] = json!(priority);
        low["spec"]["nodeName"] = json!(node_name);
        api.put(PODS, low);
    }
    api.put(
        apiserver::resources::PDBS,
        json!({
            "metadata": {"name": "keep-a", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                       "expectedPods": 1, "observedGeneration": 1},
        }),
    );
    let mut high = pod("high", 800);
    high["spec"]["priority"] = json!(1000);
    api.put(PODS, high);
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("high bound", WAIT, || node_of(&api, "high").is_some()).await;
    assert_eq!(node_of(&api, "high").as_deref(), Some("node-1"));
    assert!(
        api.get(PODS, "default", "low-a").is_some(),
        "the protected pod stays"
    );
    assert!(api.get(PODS, "default", "low-b").is_none());
    instance.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_gpu_pod_is_bound_with_the_cards_hami_would_write() {
    init_tracing();
    let api = TestApiServer::start().await;
    let register = r#"[{"id":"GPU-a","index":0,"count":10,"devmem":16000,"devcore":100,"type":"NVIDIA-A10","numa":0,"mode":"hami-core","health":true},{"id":"GPU-b","index":1,"count":10,"devmem":16000,"devcore":100,"type":"NVIDIA-A10","numa":0,"mode":"hami-core","health":true}]"#;
    let mut gpu_node = node("gpu-0", 4000, "a");
    gpu_node["metadata"]["annotations"] = json!({ "hami.io/node-nvidia-register": register });
    gpu_node["status"]["allocatable"]["nvidia.com/gpu"] = json!("20");
    gpu_node["status"]["capacity"]["nvidia.com/gpu"] = json!("20");
    let mut share = pod("share", 100);
    share["spec"]["containers"][0]["resources"]["limits"] =
        json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"});
    let nodes = vec![node("plain-0", 4000, "a"), gpu_node];
    for n in &nodes {
        api.put(NODES, n.clone());
    }
    api.put(PODS, share.clone());
    let expected = &simulated(&nodes, std::slice::from_ref(&share))["share"];
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for("the GPU pod bound", WAIT, || {
        node_of(&api, "share").is_some()
    })
    .await;
    assert_eq!(node_of(&api, "share").as_deref(), Some("gpu-0"));
    let annotations = api.get(PODS, "default", "share").unwrap()["metadata"]["annotations"].clone();
    // Written through the binding, as the simulation writes them.
    for key in [
        "hami.io/vgpu-node",
        "hami.io/vgpu-devices-allocated",
        "hami.io/vgpu-devices-to-allocate",
        "hami.io/bind-phase",
    ] {
        assert_eq!(
            annotations[key].as_str(),
            expected.annotations.get(key).map(String::as_str),
            "{key}"
        );
    }
    let cards = annotations["hami.io/vgpu-devices-allocated"]
        .as_str()
        .unwrap();
    assert!(cards.ends_with(",NVIDIA,3000,30:;"), "{cards}");
    let bind_time: i64 = annotations["hami.io/bind-time"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        bind_time > 1_700_000_000,
        "the wall clock, not the simulation's"
    );
    instance.stop().await.unwrap();
}

/// `/metrics` read whole by a strict reader of the format it declares (Prometheus text
/// 0.0.4), once the scheduler's counters and histograms and the backend's have samples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_valid_prometheus_text() {
    // The reader refuses what `/metrics` used to serve: a counter typed apart from its
    // samples' name, as OpenMetrics writes it.
    let openmetrics = "# HELP gantry_binds Binds.\n# TYPE gantry_binds counter\ngantry_binds_total{result=\"bound\"} 1\n# EOF\n";
    assert!(!exposition::check(openmetrics).is_empty());

    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 1000, "a"));
    for i in 0..3 {
        api.put(PODS, pod(&format!("web-{i}"), 100));
    }
    api.put(PODS, pod("too-big", 5000));
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    let addr = instance.running.metrics_addr.unwrap();
    let mut body = String::new();
    let mut head = String::new();
    let deadline = std::time::Instant::now() + WAIT;
    while !(body.contains("gantry_binds_total{result=\"bound\"} 3")
        && body.contains("result=\"unschedulable\"} 1"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "metrics never showed the binds: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        (head, body) = http_get(addr, "/metrics").await;
    }
    assert!(
        head.to_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let problems = exposition::check(&body);
    assert!(problems.is_empty(), "{}\n\n{body}", problems.join("\n"));
    assert!(
        !body.contains("# EOF"),
        "OpenMetrics' terminator in Prometheus text"
    );
    instance.stop().await.unwrap();
}
