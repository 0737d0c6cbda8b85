//! GPU sharing through the whole scheduling cycle, from manifests as a HAMi cluster holds
//! them: HAMi's node choice, the annotations written on the assumed pod, the card usage
//! the cache then keeps (assume, forget, confirm), the reasons in the FitError, and the
//! per-card explanation.

use std::sync::Arc;

use gantry_api::decode::ClusterObjects;
use gantry_api::{Pod, Sym, gpu};
use gantry_cache::{Cache, ClusterState, Snapshot};
use gantry_framework::ApiObjects;
use gantry_framework::plugins::default_profile;
use gantry_scheduler::explain::{Choice, Outcome, explain};
use gantry_scheduler::{Attempt, Scheduler};
use serde_json::json;

/// A node with HAMi-registered cards of 10 shares, `memory` MiB each.
fn gpu_node(name: &str, cards: usize, memory: i32) -> serde_json::Value {
    let register: Vec<_> = (0..cards)
        .map(|i| json!({"id": format!("{name}-gpu{i}"), "index": i, "count": 10, "devmem": memory,
                        "devcore": 100, "type": "NVIDIA-A100", "numa": 0, "mode": "hami-core", "health": true}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "annotations": {gpu::REGISTER_ANNOTATION: serde_json::to_string(&register).unwrap()}},
           "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": (cards * 10).to_string()}}})
}

/// A node with NVIDIA's own device plugin: whole cards, no HAMi annotation.
fn plain_node(name: &str, cards: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
           "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": cards.to_string()}}})
}

fn manifest(
    name: &str,
    limits: serde_json::Value,
    annotations: serde_json::Value,
) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default", "annotations": annotations},
           "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})
}

/// A pod HAMi placed earlier on `node`'s card `card`, with 5,000 MiB and 50% of it.
fn resident(name: &str, node: &str, card: &str) -> serde_json::Value {
    let mut p = manifest(
        name,
        json!({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 5000, "nvidia.com/gpucores": 50}),
        json!({gpu::ASSIGNED_NODE: node, gpu::DEVICES_ALLOCATED: format!("{card},NVIDIA,5000,50:;")}),
    );
    p["spec"]["nodeName"] = json!(node);
    p
}

fn decode(objects: Vec<serde_json::Value>) -> ClusterObjects {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    ClusterObjects::decode(&list.to_string(), "test").unwrap()
}

fn cache(objects: Vec<serde_json::Value>) -> Arc<Cache> {
    let cache = Arc::new(Cache::new());
    let cluster = decode(objects);
    for node in cluster.nodes {
        cache.add_node(Arc::new(node));
    }
    for p in cluster.pods {
        cache.add_pod(Arc::new(p)).unwrap();
    }
    cache
}

fn one_pod(p: serde_json::Value) -> Arc<Pod> {
    Arc::new(decode(vec![p]).pods.remove(0))
}

fn scheduler(cache: &Arc<Cache>) -> Scheduler {
    let mut s = Scheduler::new(
        cache.clone(),
        vec![default_profile("default-scheduler")],
        ApiObjects::default(),
        7,
    );
    s.now = 1_700_000_000;
    s
}

fn small_share() -> serde_json::Value {
    json!({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024, "nvidia.com/gpucores": 10})
}

/// Shares in use on each card of `node`, in the cache's current state.
fn used(cache: &Cache, node: &str) -> Vec<i64> {
    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot).unwrap();
    let info = snapshot.node(Sym::new(node)).unwrap();
    info.gpus()
        .unwrap()
        .cards()
        .iter()
        .map(|c| c.used)
        .collect()
}

#[test]
fn binpack_takes_the_busier_node_and_spread_the_emptier() {
    let cache = cache(vec![
        gpu_node("busy", 2, 16000),
        gpu_node("idle", 2, 16000),
        resident("r0", "busy", "busy-gpu0"),
    ]);
    let mut s = scheduler(&cache);
    let submitted = one_pod(manifest("a", small_share(), json!({})));
    let Attempt::Scheduled { pod, node, .. } = s.schedule_one(&submitted) else {
        panic!("not scheduled")
    };
    assert!(
        pod.shares_template(&submitted),
        "the annotations are the assumed pod's own: its spec is not copied"
    );
    assert_eq!(submitted.annotation(gpu::DEVICES_ALLOCATED), None);
    assert_eq!(
        node,
        Sym::new("busy"),
        "HAMi's default node policy is binpack"
    );
    // Spread within the node: the idle card, walked first.
    assert_eq!(
        pod.annotation(gpu::DEVICES_ALLOCATED),
        Some("busy-gpu1,NVIDIA,1024,10:;")
    );
    assert_eq!(
        pod.annotation(gpu::DEVICES_TO_ALLOCATE),
        pod.annotation(gpu::DEVICES_ALLOCATED)
    );
    assert_eq!(pod.annotation(gpu::ASSIGNED_NODE), Some("busy"));
    assert_eq!(pod.annotation(gpu::BIND_PHASE), Some("allocating"));
    assert_eq!(pod.annotation(gpu::BIND_TIME), Some("1700000000"));
    assert_eq!(pod.annotation(gpu::ASSIGNED_TIME), Some("1700000000"));
    assert_eq!(
        used(&cache, "busy"),
        [1, 1],
        "the assumed pod holds its card"
    );

    let spread = pod_with_policy("b", gpu::NODE_SCHEDULER_POLICY, "spread");
    let Attempt::Scheduled { node, .. } = s.schedule_one(&spread) else {
        panic!("not scheduled")
    };
    assert_eq!(node, Sym::new("idle"));
    let binpack_cards = pod_with_policy("c", gpu::GPU_SCHEDULER_POLICY, "binpack");
    let Attempt::Scheduled { pod, .. } = s.schedule_one(&binpack_cards) else {
        panic!("not scheduled")
    };
    assert_eq!(
        pod.annotation(gpu::DEVICES_ALLOCATED),
        Some("busy-gpu0,NVIDIA,1024,10:;"),
        "binpack within the node: the busiest card that fits"
    );
}

fn pod_with_policy(name: &str, key: &str, value: &str) -> Arc<Pod> {
    one_pod(manifest(name, small_share(), json!({ key: value })))
}

#[test]
fn forget_and_confirm_keep_the_card_usage_right() {
    let cache = cache(vec![gpu_node("n", 1, 16000)]);
    let mut s = scheduler(&cache);
    let Attempt::Scheduled { pod, .. } =
        s.schedule_one(&one_pod(manifest("a", small_share(), json!({}))))
    else {
        panic!("not scheduled")
    };
    assert_eq!(used(&cache, "n"), [1]);
    cache.forget_pod(&pod).unwrap();
    assert_eq!(used(&cache, "n"), [0]);
    cache.assume_pod(pod.clone()).unwrap();
    cache.add_pod(pod.clone()).unwrap();
    assert_eq!(used(&cache, "n"), [1], "confirmed once, counted once");
    cache.remove_pod(&pod).unwrap();
    assert_eq!(used(&cache, "n"), [0]);
}

#[test]
fn a_pod_that_fits_no_card_gets_hamis_reasons_counted_per_node() {
    let cache = cache(vec![
        gpu_node("g1", 2, 8000),
        gpu_node("g2", 2, 8000),
        plain_node("plain", 8),
    ]);
    let mut s = scheduler(&cache);
    let big = one_pod(manifest(
        "big",
        json!({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 9000}),
        json!({}),
    ));
    let Attempt::Unschedulable { fit_error, .. } = s.schedule_one(&big) else {
        panic!("scheduled")
    };
    let message = fit_error.to_string();
    assert!(
        message.starts_with(
            "0/3 nodes are available: 1 node unregistered, 2 2/2 CardInsufficientMemory."
        ),
        "{message}"
    );
}

#[test]
fn whole_cards_on_nodes_without_hami_are_left_to_nvidia_gpu_counting() {
    let cache = cache(vec![plain_node("plain", 2)]);
    let mut s = scheduler(&cache);
    let whole = one_pod(manifest("train", json!({"nvidia.com/gpu": 2}), json!({})));
    let Attempt::Scheduled { pod, node, .. } = s.schedule_one(&whole) else {
        panic!("not scheduled")
    };
    assert_eq!(node, Sym::new("plain"));
    assert_eq!(pod.annotation(gpu::DEVICES_ALLOCATED), None);
    let Attempt::Unschedulable { fit_error, .. } = s.schedule_one(&one_pod(manifest(
        "more",
        json!({"nvidia.com/gpu": 1}),
        json!({}),
    ))) else {
        panic!("scheduled")
    };
    assert!(
        fit_error
            .to_string()
            .contains("Insufficient nvidia.com/gpu"),
        "{fit_error}"
    );
}

#[test]
fn gpu_memory_and_cores_are_not_node_resources() {
    // No node has allocatable nvidia.com/gpumem: NodeResourcesFit must not ask for it.
    let cache = cache(vec![gpu_node("g", 1, 16000)]);
    let mut s = scheduler(&cache);
    let shared =
        json!({"nvidia.com/gpumem": 2000, "nvidia.com/gpucores": 30, "nvidia.com/priority": 1});
    let Attempt::Scheduled { pod, .. } = s.schedule_one(&one_pod(manifest("a", shared, json!({}))))
    else {
        panic!("not scheduled")
    };
    // No count named: HAMi's webhook gives one card.
    assert_eq!(
        pod.annotation(gpu::DEVICES_ALLOCATED),
        Some("g-gpu0,NVIDIA,2000,30:;")
    );
}

#[test]
fn whole_card_requests_are_exclusive() {
    let cache = cache(vec![gpu_node("g", 2, 16000), resident("r", "g", "g-gpu0")]);
    let mut s = scheduler(&cache);
    let Attempt::Scheduled { pod, .. } = s.schedule_one(&one_pod(manifest(
        "whole",
        json!({"nvidia.com/gpu": 1}),
        json!({}),
    ))) else {
        panic!("not scheduled")
    };
    assert_eq!(
        pod.annotation(gpu::DEVICES_ALLOCATED),
        Some("g-gpu1,NVIDIA,16000,100:;"),
        "all of an idle card's memory and compute"
    );
    let exclusive =
        json!({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 100});
    let Attempt::Unschedulable { fit_error, .. } =
        s.schedule_one(&one_pod(manifest("again", exclusive, json!({}))))
    else {
        panic!("scheduled")
    };
    assert!(
        fit_error
            .to_string()
            .contains("1 1/2 CardInsufficientCore, 1/2 CardInsufficientMemory."),
        "{fit_error}"
    );
}

#[test]
fn an_invalid_scoring_weight_annotation_keeps_the_pod_pending() {
    let cache = cache(vec![gpu_node("g", 1, 16000)]);
    let mut s = scheduler(&cache);
    let bad = one_pod(manifest(
        "w",
        small_share(),
        json!({gpu::DEVICE_SCORING_WEIGHTS: "slot=2"}),
    ));
    let Attempt::Unschedulable { fit_error, .. } = s.schedule_one(&bad) else {
        panic!("scheduled")
    };
    assert!(
        fit_error
            .to_string()
            .contains("invalid hami.io/device-scoring-weights annotation"),
        "{fit_error}"
    );
}

#[test]
fn explain_shows_every_card_and_the_node_hami_chose() {
    let cache = cache(vec![
        gpu_node("a", 2, 8000),
        gpu_node("b", 2, 8000),
        resident("r", "a", "a-gpu0"),
    ]);
    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot).unwrap();
    let p = one_pod(manifest(
        "x",
        json!({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000, "nvidia.com/gpucores": 60}),
        json!({}),
    ));
    let e = explain(
        &default_profile("default-scheduler"),
        &snapshot,
        &ApiObjects::default(),
        &p,
        0,
    );
    let Outcome::Scheduled { node, how, .. } = &e.outcome else {
        panic!("{:?}", e.outcome)
    };
    assert_eq!((*node, *how), (Sym::new("a"), Choice::ChosenByPlugin));
    assert_eq!(e.chosen_by, Some(("GPUShare", vec![Sym::new("a")])));
    let a = e.nodes.iter().find(|n| n.node == *"a").unwrap();
    let (plugin, rows) = &a.details[0];
    assert_eq!(*plugin, "GPUShare");
    assert_eq!(rows.len(), 3, "the node, then each card");
    assert_eq!(rows[1].reason.as_deref(), Some("CardInsufficientMemory"));
    assert!(
        rows[1]
            .state
            .starts_with("1/10 shares, 5000/8000 MiB, 50/100 cores"),
        "{}",
        rows[1].state
    );
    assert_eq!((rows[2].reason.as_deref(), rows[2].chosen), (None, true));
    assert_eq!(
        rows[2].score,
        Some(12.0),
        "10 × (1/10 + 60/100 + 4000/8000)"
    );
    assert!(rows[0].score.unwrap() > 0.0);
}
