//! Shards of `gantry run` deciding at the same moment on the same view of the cluster.

mod apiserver;
mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use apiserver::TestApiServer;
use apiserver::resources::{LEASES, NODES, PODS};
use common::*;
use gantry_kube::Shard;
use serde_json::json;

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
            let name = format!("s{shard}-{i}");
            let mut p = pod(&name, 100);
            p["metadata"]["uid"] = json!(uid_owned_by(shard, 2, &name));
            api.put(PODS, p);
        }
    }
    // Binds take a while, so that neither shard sees the other's pods when it decides.
    api.set_bind_delay(Duration::from_millis(1000));
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
    api.fail_requests(
        "watch=true&timeoutSeconds=290&labelSelector=gantry.dev%2Ffence",
        1_000_000,
    );
    let instance = start(&api, "a", Shard { index: 0, count: 2 }, None).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    api.put(
        LEASES,
        json!({"metadata": {"name": "gantry-bind-node-0", "namespace": "gantry-system",
            "labels": {"gantry.dev/fence": "bind"}}}),
    );
    let mut p = pod("web", 100);
    p["metadata"]["uid"] = json!(uid_owned_by(0, 2, "web"));
    api.put(PODS, p);
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
