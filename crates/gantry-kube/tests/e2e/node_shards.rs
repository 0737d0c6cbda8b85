//! Shards of `gantry run` dividing the nodes (`--shard-by nodes`): each binds onto its own
//! nodes without a node fence, and hands on the pods that fit none of them.

use crate::{apiserver, common};

use apiserver::TestApiServer;
use apiserver::resources::{NODES, PODS};
use common::*;
use gantry_kube::{Divide, RunOptions, Shard, owner};
use serde_json::{Value, json};

const SHARDS: u32 = 2;

async fn start_dividing_nodes(api: &TestApiServer, index: u32) -> Instance {
    launch(RunOptions {
        identity: format!("shard-{index}"),
        shard: Shard {
            index,
            count: SHARDS,
        },
        divide: Divide::Nodes,
        ..options(api.client(), &api.url())
    })
    .await
}

/// The `k`-th node name that `shard` owns.
fn node_owned_by(shard: u32, k: usize) -> String {
    (0..)
        .map(|i| format!("node-{i}"))
        .filter(|name| owner(name, SHARDS) == shard)
        .nth(k)
        .unwrap()
}

/// A pod of `milli_cpu` whose UID starts it at `shard`.
fn pod_starting_at(name: &str, milli_cpu: i64, shard: u32) -> Value {
    let mut p = pod(name, milli_cpu);
    p["metadata"]["uid"] = json!(uid_owned_by(shard, SHARDS, name));
    p
}

fn hops(api: &TestApiServer, name: &str) -> Option<String> {
    api.get(PODS, "default", name)?["metadata"]["annotations"]["gantry.dev/shard-hops"]
        .as_str()
        .map(str::to_string)
}

/// Writes to fences (Leases other than listing and watching them).
fn fence_writes(api: &TestApiServer) -> Vec<String> {
    api.requests_matching("/leases")
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect()
}

/// Pod writes other than bindings and status (the hand-offs).
fn pod_patches(api: &TestApiServer, name: &str) -> usize {
    api.requests_matching(&format!("PATCH /api/v1/namespaces/default/pods/{name}"))
        .into_iter()
        .filter(|r| !r.contains("/status"))
        .count()
}

/// Every pod lands on a node of the shard its UID starts it at, and no bind writes a
/// fence: each shard is the only writer on its nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_bind_onto_their_own_nodes_without_fences() {
    init_tracing();
    let api = TestApiServer::start().await;
    for shard in 0..SHARDS {
        for k in 0..3 {
            api.put(NODES, node(&node_owned_by(shard, k), 4000, "a"));
        }
    }
    let names: Vec<String> = (0..20).map(|i| format!("web-{i}")).collect();
    for name in &names {
        api.put(PODS, pod(name, 100));
    }
    let (a, b) = tokio::join!(start_dividing_nodes(&api, 0), start_dividing_nodes(&api, 1));
    wait_for("every pod bound", WAIT, || api.binds().len() == names.len()).await;
    for name in &names {
        let pod = api.get(PODS, "default", name).unwrap();
        let uid = pod["metadata"]["uid"].as_str().unwrap();
        let node = pod["spec"]["nodeName"].as_str().unwrap();
        assert_eq!(owner(node, SHARDS), owner(uid, SHARDS), "{name} on {node}");
    }
    assert_eq!(fence_writes(&api), Vec::<String>::new());
    assert!(overcommitted_nodes(&api).is_empty());
    assert_eq!(
        a.running.shared.kube.handoffs() + b.running.shared.kube.handoffs(),
        0
    );
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// A pod too big for every node of the shard it starts at is handed on, silently, and
/// bound by the next shard; the roles of deploy/gantry.yaml allow the hand-off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_fits_none_of_its_shards_nodes_is_handed_on() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node(&node_owned_by(0, 0), 1000, "a"));
    let roomy = node_owned_by(1, 0);
    api.put(NODES, node(&roomy, 4000, "a"));
    api.put(PODS, pod_starting_at("big", 2000, 0));
    let (a, b) = tokio::join!(start_dividing_nodes(&api, 0), start_dividing_nodes(&api, 1));
    wait_for("big bound", WAIT, || node_of(&api, "big").is_some()).await;
    assert_eq!(node_of(&api, "big"), Some(roomy));
    assert_eq!(hops(&api, "big").as_deref(), Some("1"));
    assert_eq!(pod_patches(&api, "big"), 1);
    assert!(events_about(&api, "big", "FailedScheduling").is_empty());
    assert_eq!(a.running.shared.kube.handoffs(), 1);
    a.stop().await.unwrap();
    b.stop().await.unwrap();
    assert_deployable(&api);
}

/// A pod that fits nowhere goes round once, is reported by the last shard of the round
/// (with the nodes it left to the other shard counted), and stays there; a change in the
/// cluster that still does not make room sends it round once more, not for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_fits_nowhere_goes_round_once_per_retry() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node(&node_owned_by(0, 0), 1000, "a"));
    let last = node_owned_by(1, 0);
    api.put(NODES, node(&last, 1000, "a"));
    api.put(PODS, pod_starting_at("huge", 2000, 0));
    let (a, b) = tokio::join!(start_dividing_nodes(&api, 0), start_dividing_nodes(&api, 1));
    // The event and the condition are two writes in flight at once: wait for both.
    wait_for("huge reported", WAIT, || {
        !events_about(&api, "huge", "FailedScheduling").is_empty()
            && condition(&api, "huge", "PodScheduled").is_some()
    })
    .await;
    let reported = condition(&api, "huge", "PodScheduled").unwrap();
    assert_eq!(
        reported["message"],
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) belong to another shard. \
         no new claims to deallocate, preemption: 0/2 nodes are available: \
         2 Preemption is not helpful for scheduling."
    );
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(hops(&api, "huge").as_deref(), Some("1"));
    assert_eq!(pod_patches(&api, "huge"), 1);
    // A node that still cannot hold it: the last shard retries, fails, and hands it on
    // to a new round, which ends at the same shard again.
    api.put(NODES, node(&node_owned_by(1, 1), 1500, "a"));
    wait_for("a second round", WAIT, || {
        hops(&api, "huge").as_deref() == Some("3")
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(hops(&api, "huge").as_deref(), Some("3"));
    assert_eq!(pod_patches(&api, "huge"), 3);
    assert_eq!(node_of(&api, "huge"), None);
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// A low-priority pod already bound to `node`.
fn low_on(name: &str, milli_cpu: i64, node: &str) -> Value {
    let mut low = pod(name, milli_cpu);
    low["spec"]["nodeName"] = json!(node);
    low
}

fn high_starting_at(name: &str, milli_cpu: i64, shard: u32) -> Value {
    let mut high = pod_starting_at(name, milli_cpu, shard);
    high["spec"]["priority"] = json!(1000);
    high
}

/// A shard that hands a pod on does not preempt for it, not even in its own memory: the
/// next shard's nodes may hold it as they are (one kube-scheduler preempts only when no
/// node fits), and a nomination would keep room from the shard's other pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_handing_a_pod_on_preempts_nobody() {
    init_tracing();
    let api = TestApiServer::start().await;
    let full = node_owned_by(0, 0);
    api.put(NODES, node(&full, 1500, "a"));
    api.put(PODS, low_on("low", 1000, &full));
    let roomy = node_owned_by(1, 0);
    api.put(NODES, node(&roomy, 4000, "a"));
    api.slow_bind("default/high", std::time::Duration::from_secs(3));
    api.put(PODS, high_starting_at("high", 1000, 0));
    let (a, b) = tokio::join!(start_dividing_nodes(&api, 0), start_dividing_nodes(&api, 1));
    wait_for("high handed on", WAIT, || hops(&api, "high").is_some()).await;
    // While high's bind is on the wire, the 500m left beside low are free for others.
    api.put(PODS, pod_starting_at("small", 400, 0));
    wait_for("small bound", WAIT, || node_of(&api, "small").is_some()).await;
    assert_eq!(node_of(&api, "small"), Some(full.clone()));
    assert_eq!(node_of(&api, "high"), None, "high's bind was to take 3 s");
    wait_for("high bound", WAIT, || node_of(&api, "high").is_some()).await;
    assert_eq!(node_of(&api, "high"), Some(roomy));
    assert_eq!(node_of(&api, "low"), Some(full), "low was preempted");
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// The last shard of a round preempts on its own nodes, and keeps the pod while its
/// victim terminates (rather than sending it round again), then binds it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_shard_of_the_round_preempts_and_keeps_the_pod() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.hold_terminating_pods();
    let first = node_owned_by(0, 0);
    api.put(NODES, node(&first, 1000, "a"));
    api.put(PODS, low_on("low-0", 1000, &first));
    let last = node_owned_by(1, 0);
    api.put(NODES, node(&last, 1000, "a"));
    api.put(PODS, low_on("low-1", 1000, &last));
    api.put(PODS, high_starting_at("high", 1000, 0));
    let (a, b) = tokio::join!(start_dividing_nodes(&api, 0), start_dividing_nodes(&api, 1));
    wait_for("a victim terminating", WAIT, || {
        !api.terminating_pods().is_empty()
    })
    .await;
    assert_eq!(api.terminating_pods(), ["default/low-1"]);
    // The victim still terminating, a change in the cluster retries the pod in vain.
    api.put(NODES, node(&node_owned_by(0, 1), 500, "a"));
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(hops(&api, "high").as_deref(), Some("1"));
    assert_eq!(api.terminating_pods(), ["default/low-1"]);
    api.finish_termination();
    wait_for("high bound", WAIT, || node_of(&api, "high").is_some()).await;
    assert_eq!(node_of(&api, "high"), Some(last));
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// A pod nominated to another shard's node (by an earlier preemption there) is placed on
/// this shard's nodes only: the nominated node is tried first only when it is its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nomination_to_another_shards_node_is_not_followed() {
    init_tracing();
    let api = TestApiServer::start().await;
    let own = node_owned_by(0, 0);
    api.put(NODES, node(&own, 4000, "a"));
    let others = node_owned_by(1, 0);
    api.put(NODES, node(&others, 4000, "a"));
    let mut web = pod_starting_at("web", 100, 0);
    web["status"] = json!({"nominatedNodeName": others});
    api.put(PODS, web);
    let a = start_dividing_nodes(&api, 0).await;
    wait_for("web bound", WAIT, || node_of(&api, "web").is_some()).await;
    assert_eq!(node_of(&api, "web"), Some(own));
    a.stop().await.unwrap();
}

/// A pod labelled `app` asking, per kind: one host port, required anti-affinity over the
/// zone, or DoNotSchedule spread over the zone with skew 1.
fn constrained(name: &str, app: &str) -> Value {
    let mut p = pod(name, 100);
    p["metadata"]["labels"] = json!({ "app": app });
    let selector = json!({"matchLabels": {"app": app}});
    match app {
        "port" => {
            p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}])
        }
        "alone" => {
            p["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector, "topologyKey": "topology.kubernetes.io/zone"}]}})
        }
        _ => {
            p["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector}])
        }
    }
    p
}

/// Shards dividing the nodes still serialise what reaches across nodes: with every bind
/// slow, both shards decide on the same empty zones at once, yet no zone holds two pods of
/// an anti-affine set, the spread's zones differ by at most one, and no node has the host
/// port twice (checked on the bound state, not with Gantry's plugins).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constraints_across_nodes_hold_when_shards_divide_the_nodes() {
    init_tracing();
    let api = TestApiServer::start().await;
    let zones = ["a", "b", "c"];
    for shard in 0..SHARDS {
        for k in 0..6 {
            api.put(NODES, node(&node_owned_by(shard, k), 8000, zones[k % 3]));
        }
    }
    api.set_bind_delay(std::time::Duration::from_millis(300));
    let apps = [("port", 16), ("alone", 6), ("spread", 12)];
    for (app, count) in apps {
        for i in 0..count {
            api.put(PODS, constrained(&format!("{app}-{i}"), app));
        }
    }
    let (a, b) = tokio::join!(start_dividing_nodes(&api, 0), start_dividing_nodes(&api, 1));
    // 12 nodes hold 12 port pods, 3 zones 3 anti-affine ones; everything else fits.
    wait_for("every pod that can be bound bound", WAIT, || {
        api.binds().len() == 12 + 3 + 12
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let zone_of = |node: &str| {
        api.get(NODES, "", node).unwrap()["metadata"]["labels"]["topology.kubernetes.io/zone"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let placed = |app: &str, count: usize| -> Vec<String> {
        (0..count)
            .filter_map(|i| node_of(&api, &format!("{app}-{i}")))
            .collect()
    };
    let ports = placed("port", 16);
    let mut distinct = ports.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!((ports.len(), distinct.len()), (12, 12), "{ports:?}");
    let mut alone: Vec<String> = placed("alone", 6).iter().map(|n| zone_of(n)).collect();
    alone.sort();
    assert_eq!(alone, ["a", "b", "c"]);
    let spread = placed("spread", 12);
    let per_zone: Vec<usize> = zones
        .iter()
        .map(|z| spread.iter().filter(|n| zone_of(n) == *z).count())
        .collect();
    assert_eq!(spread.len(), 12);
    assert!(
        per_zone.iter().max().unwrap() - per_zone.iter().min().unwrap() <= 1,
        "{per_zone:?}"
    );
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// A shard dividing the nodes that sees another instance move a node fence (an instance
/// dividing the pods, which may bind onto its nodes unseen) stops with one line saying
/// so; a fence left from before, which its first list shows, is no such sign.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_dividing_the_nodes_stops_beside_one_dividing_the_pods() {
    init_tracing();
    let api = TestApiServer::start().await;
    let fence = |node: &str| {
        json!({"metadata": {"name": format!("gantry-bind-{node}"), "namespace": "gantry-system",
            "labels": {"gantry.dev/fence": "bind"}}, "spec": {"holderIdentity": "elsewhere"}})
    };
    api.put(NODES, node("node-0", 4000, "a"));
    api.put(apiserver::resources::LEASES, fence("node-0"));
    let a = start_dividing_nodes(&api, 0).await;
    api.put(PODS, pod_starting_at("web", 100, 0));
    wait_for("web bound", WAIT, || node_of(&api, "web").is_some()).await;
    assert!(
        !a.handle.is_finished(),
        "a fence left from before stopped it"
    );
    api.put(apiserver::resources::LEASES, fence("node-0"));
    let ended = tokio::time::timeout(WAIT, a.handle)
        .await
        .expect("it stops");
    let message = ended.unwrap().unwrap_err().to_string();
    assert!(
        message.contains("\"elsewhere\" moved the bind fence gantry-system/gantry-bind-node-0")
            && message.contains("give every shard the same --shard-by"),
        "{message}"
    );
}
