//! `gantry run` with scheduler-plugins' Coscheduling, against the in-process API server:
//! scenarios of `testdata/coscheduling-1.35` (real kube-scheduler v1.35.4 with the real
//! plugin, recorded ten times each) stepped through in real time with the recorder's 2 s
//! between steps. Members wait at Permit between cycles, holding their room, until the
//! quorum is placed, their wait runs out, or a sibling's failure rejects them. Each pod's
//! node, or the message of its `PodScheduled=False` condition, must be one the real
//! scheduler gave that pod in some run, and the nodes bound those of some run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::{apiserver, common};

use apiserver::TestApiServer;
use apiserver::resources::{COSCHEDULING_POD_GROUPS, NODES, PODS};
use common::*;
use gantry_api::Release;
use gantry_framework::config::SchedulerConfig;
use gantry_kube::{RunOptions, Shard};
use gantry_sim::step_outcomes::{self, Outcome};
use serde_json::Value;

/// The wall time the recorder waited after creating each object.
const STEP_GAP: Duration = Duration::from_secs(2);

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/coscheduling-1.35")
        .join(name)
}

fn read(dir: &std::path::Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
}

fn items(text: &str) -> Vec<Value> {
    let list = gantry_api::decode::parse_yaml_value(text).expect("a List reads");
    list["items"].as_array().expect("items").clone()
}

/// Steps through the scenario and returns what does not match its recording.
async fn replay(name: &str) -> Vec<String> {
    init_tracing();
    let dir = scenario(name);
    let release = Release::parse(Some("1.35"), None).unwrap();
    let config =
        SchedulerConfig::parse_for(&read(&dir, "config.yaml"), "config.yaml", release).unwrap();
    let api = TestApiServer::start().await;
    for node in items(&read(&dir, "cluster.yaml")) {
        api.put(NODES, node);
    }
    let instance = launch(RunOptions {
        config,
        shard: Shard::WHOLE,
        ..options(api.client(), &api.url())
    })
    .await;
    let mut pods = Vec::new();
    for (i, mut item) in items(&read(&dir, "steps.yaml")).into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(STEP_GAP).await;
        }
        if item["kind"] == "PodGroup" {
            api.put(COSCHEDULING_POD_GROUPS, item);
            continue;
        }
        // The recorder's API server defaulted these.
        item["spec"]["schedulerName"] = "default-scheduler".into();
        item["spec"]["priority"] = 0.into();
        pods.push(item["metadata"]["name"].as_str().unwrap().to_string());
        api.put(PODS, item);
    }
    let settle: u64 = read(&dir, "settle.txt").trim().parse().unwrap();
    tokio::time::sleep(Duration::from_secs(settle)).await;
    let got: BTreeMap<String, Outcome> = pods
        .iter()
        .map(|pod| {
            let message = condition(&api, pod, "PodScheduled")
                .filter(|c| c["status"] == "False")
                .and_then(|c| c["message"].as_str().map(str::to_string));
            (format!("default/{pod}"), (node_of(&api, pod), message))
        })
        .collect();
    instance.stop().await.expect("the instance stops cleanly");
    // deploy/gantry.yaml grants what it did (the PodGroup CRD's list and watch).
    assert_deployable(&api);

    let recorded: Value = serde_json::from_str(&read(&dir, "outcomes.json")).unwrap();
    step_outcomes::problems(&recorded, &got)
}

/// The first two members are refused at PreFilter; the third waits at Permit, activates
/// them, and the three bind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_fits_is_held_at_permit_until_its_quorum_and_bound() {
    assert_eq!(replay("fits").await, Vec::<String>::new());
}

/// Two members wait; the first's wait runs out (`rejected due to timeout after waiting
/// 4s at plugin Coscheduling`) and its Unreserve rejects the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_member_times_out_and_its_siblings_are_rejected() {
    assert_eq!(replay("times-out").await, Vec::<String>::new());
}

/// Room for two of three: the member that fits nowhere rejects the waiting ones at
/// PostFilter, and no member binds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_cannot_fit_holds_nothing() {
    assert_eq!(replay("does-not-fit").await, Vec::<String>::new());
}

fn member(name: &str, milli_cpu: i64) -> Value {
    let mut pod = pod(name, milli_cpu);
    pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "g".into();
    pod
}

/// A member deleted while it waits at Permit is rejected and forgotten: the room it held
/// goes to the next pod, and its Unreserve rejects its waiting sibling (as upstream's
/// delete handler rejects the waiting pod, whose binding cycle then unreserves it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_deleted_while_it_waits_frees_its_room() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("n1", 4000, "a"));
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: {SCHEDULER}\n  plugins:\n    multiPoint: {{enabled: [{{name: Coscheduling}}]}}\n    queueSort: {{enabled: [{{name: Coscheduling}}], disabled: [{{name: \"*\"}}]}}\n  pluginConfig:\n  - {{name: Coscheduling, args: {{podGroupRejectPercentage: 70}}}}\n"
    );
    let release = Release::parse(Some("1.35"), None).unwrap();
    let config = SchedulerConfig::parse_for(&text, "config.yaml", release).unwrap();
    // Three members: two fit and wait for the third, which fits nowhere (the rejection
    // percentage keeps PostFilter from rejecting the two).
    api.put(
        COSCHEDULING_POD_GROUPS,
        serde_json::json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 60},
        }),
    );
    api.put(PODS, member("g-0", 2000));
    api.put(PODS, member("g-1", 2000));
    api.put(PODS, member("g-2", 8000));
    let instance = launch(RunOptions {
        config,
        ..options(api.client(), &api.url())
    })
    .await;
    wait_for("g-2 judged", WAIT, || {
        condition(&api, "g-2", "PodScheduled").is_some()
    })
    .await;
    // The two waiting members hold the node: another pod does not fit.
    api.put(PODS, pod("other", 2000));
    wait_for("other judged", WAIT, || {
        condition(&api, "other", "PodScheduled").is_some()
    })
    .await;
    assert_eq!(node_of(&api, "other"), None);
    api.delete(PODS, "default", "g-0");
    wait_for("other bound in g-0's room", WAIT, || {
        node_of(&api, "other").is_some()
    })
    .await;
    assert_eq!(node_of(&api, "g-1"), None);
    wait_for("g-1 rejected", WAIT, || {
        condition(&api, "g-1", "PodScheduled")
            .is_some_and(|c| c["message"] == "0/1 nodes are available: 1 rejection in Unreserve.")
    })
    .await;
    instance.stop().await.expect("the instance stops cleanly");
    assert_deployable(&api);
}
