//! Shards of `gantry run` deciding at the same moment on the same view of the cluster.

use crate::{apiserver, common};

use std::collections::BTreeSet;
use std::time::Duration;

use apiserver::TestApiServer;
use apiserver::resources::{LEASES, NODES, PODS};
use common::*;
use gantry_kube::{RunOptions, Shard};
use serde_json::json;

/// The fence watch lists, then never watches: what others do to the fences after the
/// list stays unknown to the instance.
fn blind_the_fence_watch(api: &TestApiServer) {
    api.fail_requests(
        "watch=true&timeoutSeconds=290&labelSelector=gantry.dev%2Ffence",
        1_000_000,
    );
}

/// Waits until the instance has listed the fences (the test API server answers a list
/// as it receives it).
async fn fences_listed(api: &TestApiServer) {
    wait_for("the fences listed", WAIT, || {
        !api.requests_matching("labelSelector=gantry.dev%2Ffence&limit")
            .is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// A node's fence as another binder created it, naming no pod.
fn fence_of(node: &str) -> serde_json::Value {
    json!({"metadata": {"name": format!("gantry-bind-{node}"), "namespace": "gantry-system",
        "labels": {"gantry.dev/fence": "bind"}}})
}

/// A 100m pod that shard `shard` of 2 owns.
fn owned_pod(name: &str, shard: u32) -> serde_json::Value {
    let mut p = pod(name, 100);
    p["metadata"]["uid"] = json!(uid_owned_by(shard, 2, name));
    p
}

/// Two shards start together on identical empty nodes, each owning a few pods. Before
/// either sees the other's binds, both break ties among equal nodes: with one random
/// stream they would choose the same nodes in the same order and pile two pods on each
/// (against a real API server: 4 pods on a node where one instance put 2). Each shard's
/// stream is its own, so their choices differ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_do_not_break_ties_alike() {
    init_tracing();
    let api = TestApiServer::start().await;
    for i in 0..40 {
        api.put(NODES, node(&format!("node-{i:02}"), 4000, "a"));
    }
    const PER_SHARD: usize = 6;
    for shard in 0..2 {
        for i in 0..PER_SHARD {
            api.put(PODS, owned_pod(&format!("s{shard}-{i}"), shard));
        }
    }
    // Binds take a while, so that neither shard sees the other's pods when it decides.
    api.set_bind_delay(Duration::from_millis(2000));
    let (a, b) = tokio::join!(
        start(&api, "a", Shard { index: 0, count: 2 }, None),
        start(&api, "b", Shard { index: 1, count: 2 }, None),
    );
    wait_for("every pod bound", WAIT, || {
        api.binds().len() == 2 * PER_SHARD
    })
    .await;
    let nodes_of = |shard: u32| -> BTreeSet<String> {
        (0..PER_SHARD)
            .filter_map(|i| node_of(&api, &format!("s{shard}-{i}")))
            .collect()
    };
    let (first, second) = (nodes_of(0), nodes_of(1));
    assert_eq!((first.len(), second.len()), (PER_SHARD, PER_SHARD));
    let shared = first.intersection(&second).count();
    // With independent choices of 6 nodes out of 40, about one is shared; alike, all 6.
    assert!(
        shared < PER_SHARD / 2,
        "{shared} of {PER_SHARD} nodes chosen by both shards: {first:?} {second:?}"
    );
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// A fence another binder created after this instance's watch listed the fences, and that
/// the watch has not delivered (here: the fence watch is blind): the create finds it there
/// (409), and the next attempt reads it instead of creating it again, then moves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_created_unseen_is_read_after_the_create_fails() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    // The fences are listed (none), then never watched.
    blind_the_fence_watch(&api);
    let instance = start(&api, "a", Shard { index: 0, count: 2 }, None).await;
    fences_listed(&api).await;
    api.put(LEASES, fence_of("node-0"));
    api.put(PODS, owned_pod("web", 0));
    wait_for("the pod bound", WAIT, || node_of(&api, "web").is_some()).await;
    let writes: Vec<String> = api
        .requests_matching("/namespaces/gantry-system/leases")
        .into_iter()
        .filter(|r| {
            !r.contains("watch=")
                && !r.starts_with(
                    "GET /apis/coordination.k8s.io/v1/namespaces/gantry-system/leases?",
                )
        })
        .collect();
    assert_eq!(
        writes
            .iter()
            .map(|r| r.split(' ').next().unwrap())
            .collect::<Vec<_>>(),
        ["POST", "GET", "PUT"],
        "{writes:?}"
    );
    assert_eq!(instance.running.shared.kube.conflicts(), 0);
    instance.stop().await.unwrap();
}

/// Fences are garbage once unmoved: the instance that moved one last deletes it after
/// `fence_idle` (conditioned on the version it saw); another instance's waits five times
/// as long, for an instance that may be gone; a node's next bind creates its fence again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmoved_fences_are_deleted() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    api.put(NODES, node("node-1", 4000, "a"));
    // node-1's fence was moved by an instance not running here.
    let mut elsewhere = fence_of("node-1");
    elsewhere["spec"] = json!({"holderIdentity": "elsewhere"});
    api.put(LEASES, elsewhere);
    let idle = Duration::from_millis(300);
    let instance = launch(RunOptions {
        identity: "a".into(),
        shard: Shard { index: 0, count: 2 },
        fence_idle: idle,
        ..options(api.client(), &api.url())
    })
    .await;
    let fence = |node: &str| api.get(LEASES, "gantry-system", &format!("gantry-bind-{node}"));
    let mut web = owned_pod("web", 0);
    web["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-0"]}]}]}}});
    api.put(PODS, web);
    wait_for("web bound", WAIT, || node_of(&api, "web").is_some()).await;
    assert!(fence("node-0").is_some(), "the bind moved node-0's fence");
    wait_for("this instance's unmoved fence deleted", WAIT, || {
        fence("node-0").is_none()
    })
    .await;
    // The other instance's fence outlives this instance's by far, then goes too.
    assert!(
        fence("node-1").is_some(),
        "another instance's fence waits longer"
    );
    wait_for("another instance's unmoved fence deleted", WAIT, || {
        fence("node-1").is_none()
    })
    .await;
    // The node's next bind creates its fence again.
    api.put(PODS, owned_pod("next", 0));
    wait_for("next bound", WAIT, || node_of(&api, "next").is_some()).await;
    assert_eq!(instance.running.shared.kube.conflicts(), 0);
    instance.stop().await.unwrap();
}

/// A fence moved since this instance saw it (its watch is blind here) is not deleted:
/// the delete is conditioned on the version seen, and the API refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_moved_since_it_was_seen_is_not_deleted() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    let mut fence = fence_of("node-0");
    fence["spec"] = json!({"holderIdentity": "elsewhere"});
    api.put(LEASES, fence.clone());
    blind_the_fence_watch(&api);
    let instance = launch(RunOptions {
        identity: "a".into(),
        shard: Shard { index: 0, count: 2 },
        fence_idle: Duration::from_millis(100),
        ..options(api.client(), &api.url())
    })
    .await;
    fences_listed(&api).await;
    // Another binder moves it; this instance never hears of it.
    let mut moved = fence;
    moved["spec"]["holderIdentity"] = json!("elsewhere-again");
    api.put(LEASES, moved);
    let deletes = || {
        api.requests_matching("DELETE /apis/coordination.k8s.io/v1/namespaces/gantry-system/leases/gantry-bind-node-0")
    };
    wait_for("a delete tried", WAIT, || !deletes().is_empty()).await;
    assert!(
        api.get(LEASES, "gantry-system", "gantry-bind-node-0")
            .is_some(),
        "the moved fence stays"
    );
    instance.stop().await.unwrap();
}

/// A fence another instance deleted as garbage while this one still knew it (its watch is
/// blind here): the update finds it gone (404), and the next attempt reads it and creates
/// it, without failing the bind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_deleted_unseen_is_created_again() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    api.put(LEASES, fence_of("node-0"));
    blind_the_fence_watch(&api);
    let instance = start(&api, "a", Shard { index: 0, count: 2 }, None).await;
    fences_listed(&api).await;
    assert!(api.delete(LEASES, "gantry-system", "gantry-bind-node-0"));
    api.put(PODS, owned_pod("web", 0));
    wait_for("the pod bound", WAIT, || node_of(&api, "web").is_some()).await;
    let requests: Vec<String> = api
        .requests_matching("/namespaces/gantry-system/leases")
        .into_iter()
        .filter(|r| !r.contains("labelSelector="))
        .map(|r| r.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(requests, ["PUT", "GET", "POST"]);
    assert_eq!(api.binds().len(), 1, "bound at the first try");
    instance.stop().await.unwrap();
}

/// A shard stopping deletes the fences it moved last, once a waiter would pass them anyway,
/// rather than leaving them for a minute to other instances (or for ever, if none runs);
/// another instance's fence stays for that instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_shard_deletes_the_fences_it_moved() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 4000, "a"));
    let mut elsewhere = fence_of("node-1");
    elsewhere["spec"] = json!({"holderIdentity": "elsewhere"});
    api.put(LEASES, elsewhere);
    let instance = start(&api, "a", Shard { index: 0, count: 2 }, None).await;
    fences_listed(&api).await;
    api.put(PODS, owned_pod("web", 0));
    wait_for("web bound", WAIT, || node_of(&api, "web").is_some()).await;
    let fence = || api.get(LEASES, "gantry-system", "gantry-bind-node-0");
    assert!(fence().is_some(), "the bind moved node-0's fence");
    instance.stop().await.unwrap();
    assert!(fence().is_none(), "the fence outlived the instance");
    assert!(
        api.get(LEASES, "gantry-system", "gantry-bind-node-1")
            .is_some()
    );
}
