//! `gantry record` against the in-process API server while `gantry run` schedules a
//! churning workload: the trace holds the state at the start and every change, with no
//! gap across a watch that could not resume, and replayed through the simulation it
//! reproduces the bindings the running scheduler made.

use crate::{apiserver, common};

use std::time::Duration;

use apiserver::TestApiServer;
use apiserver::resources::{DEVICE_TAINT_RULES, NODES, PODS};
use common::*;
use gantry_api::Release;
use gantry_api::trace::{Op, TraceReader, TraceRecord};
use gantry_kube::{RecordOptions, Shard};
use gantry_sim::replay::{self, Divergence};
use gantry_sim::{SimOptions, Simulation};
use serde_json::json;
use tokio::sync::oneshot;

fn read(trace: Vec<u8>) -> Vec<TraceRecord> {
    let (header, mut reader) = TraceReader::open(std::io::Cursor::new(trace)).unwrap();
    assert!(header.server.starts_with("http://127.0.0.1:"));
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().unwrap() {
        records.push(record);
    }
    records
}

fn bound_count(api: &TestApiServer) -> usize {
    api.list(PODS)
        .iter()
        .filter(|p| p["spec"]["nodeName"].is_string())
        .count()
}

/// Distinct node sizes, so that the default profile's scores never tie.
fn nodes(api: &TestApiServer) {
    for (i, cpu) in [4000, 6000, 9000].into_iter().enumerate() {
        api.put(NODES, node(&format!("n{i}"), cpu, "a"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_churn_replays_to_the_same_bindings() {
    init_tracing();
    let api = TestApiServer::start().await;
    nodes(&api);
    api.put(PODS, bound_pod("running", 1000, "n0"));
    // Served as v1beta2 only: recorded once, from the first version served.
    api.put(
        DEVICE_TAINT_RULES,
        json!({"metadata": {"name": "broken"},
               "spec": {"taint": {"key": "example.com/broken", "effect": "NoSchedule"}}}),
    );
    let instance = start(&api, "solo", Shard::WHOLE, None).await;

    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let client = api.client();
    let server = api.url();
    let recorder = tokio::spawn(async move {
        let options = RecordOptions {
            progress_every: Duration::from_secs(3600),
            max_backoff: Duration::from_millis(200),
            ..RecordOptions::default()
        };
        let stop = async {
            let _ = stop_rx.await;
        };
        gantry_kube::record(
            &client,
            &server,
            Some("v1.35.4".into()),
            Vec::new(),
            &options,
            stop,
            &mut |_| {},
        )
        .await
    });
    // The recorder has listed and watches pods and nodes.
    wait_for("the recorder's watches", WAIT, || {
        ["GET /api/v1/pods?watch=1", "GET /api/v1/nodes?watch=1"]
            .iter()
            .all(|watch| !api.requests_matching(watch).is_empty())
    })
    .await;

    // A first wave, bound by the running scheduler.
    for i in 0..6 {
        api.put(PODS, pod(&format!("wave1-{i}"), 700 + 100 * i));
        let bound = 2 + i as usize;
        wait_for("the first wave bound", WAIT, || bound_count(&api) == bound).await;
    }
    api.delete(PODS, "default", "wave1-2");

    // The recorder's watches go blind, and the server forgets where they were: what
    // happens meanwhile must reach the trace through a relist.
    api.fail_requests("watch=1", 10_000);
    api.drop_watches();
    api.put(NODES, node("n3", 12000, "a"));
    api.delete(PODS, "default", "wave1-4");
    api.put(PODS, pod("while-blind", 1500));
    wait_for("the blind pod bound", WAIT, || bound_count(&api) == 6).await;
    api.compact();
    api.clear_failures();

    // A second wave once the recorder is back (it retries every 200 ms here).
    wait_for("the recorder's relists", WAIT, || {
        ["GET /api/v1/pods?limit=", "GET /api/v1/nodes?limit="]
            .iter()
            .all(|list| api.requests_matching(list).len() >= 2)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // One at a time: a burst's order in the scheduler's queue and in the trace may
    // differ, and with it the placements (a divergence the replay would report).
    for i in 0..6 {
        api.put(PODS, pod(&format!("wave2-{i}"), 1200 + 150 * i));
        let bound = 7 + i as usize;
        wait_for("the second wave bound", WAIT, || bound_count(&api) == bound).await;
    }
    // The last binding's event reaches the recorder.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = stop_tx.send(());
    let (trace, recorded) = recorder.await.unwrap().unwrap();
    instance.stop().await.unwrap();

    assert!(recorded.relists >= 1, "{recorded:?}");
    assert!(recorded.from_relists >= 3, "{recorded:?}");
    // The recorder only read.
    let refused = common::rbac::refused(
        common::rbac::READ_ONLY,
        &api.requests_matching("watch=1"),
        "",
    );
    assert_eq!(refused, Vec::<String>::new());

    let records = read(trace.clone());
    let listed: Vec<&TraceRecord> = records.iter().filter(|r| r.op == Op::List).collect();
    assert_eq!(listed.iter().filter(|r| r.kind() == "Node").count(), 3);
    assert_eq!(listed.iter().filter(|r| r.kind() == "Pod").count(), 1);
    assert_eq!(
        listed
            .iter()
            .filter(|r| r.kind() == "DeviceTaintRule")
            .count(),
        1
    );
    let change_of = |op: Op, kind: &str, name: &str| {
        records.iter().any(|r| {
            r.op == op && r.kind() == kind && r.object.as_ref().unwrap()["metadata"]["name"] == name
        })
    };
    // Seen by the watches, and through the relist after they went blind.
    assert!(change_of(Op::Deleted, "Pod", "wave1-2"));
    assert!(change_of(Op::Added, "Node", "n3"));
    assert!(change_of(Op::Deleted, "Pod", "wave1-4"));
    assert!(change_of(Op::Added, "Pod", "while-blind"));
    // No environment or managed fields in a trace.
    let text = String::from_utf8(trace.clone()).unwrap();
    assert!(!text.contains("managedFields"));

    // Replayed through the simulation, the running scheduler's bindings come back.
    let replay = replay::read(
        std::io::Cursor::new(trace),
        "trace",
        Release::at(35),
        &|name| name == SCHEDULER,
    )
    .unwrap();
    let mut cluster = replay.cluster;
    cluster.admit().unwrap();
    let options = SimOptions {
        seed: 7,
        ..SimOptions::default()
    };
    let mut sim = Simulation::new(cluster, config().profiles, options).unwrap();
    sim.expect_bindings(&replay.recorded);
    for (at, event) in replay.events {
        sim.schedule(at, event);
    }
    sim.run().unwrap();
    let divergence = Divergence::of(
        &replay.recorded,
        sim.placements(),
        sim.recorded_nodes_judged(),
    );

    assert_eq!(divergence.recorded, 12, "{divergence:?}");
    assert_eq!(divergence.reproduced(), 1.0, "{divergence:?}");
}

type Recording = tokio::task::JoinHandle<Result<(Vec<u8>, gantry_kube::Recorded), String>>;

/// Records `api` in a task, until the sender is sent to (or dropped).
fn spawn_recorder(api: &TestApiServer, options: RecordOptions) -> (oneshot::Sender<()>, Recording) {
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (client, server) = (api.client(), api.url());
    let recorder = tokio::spawn(async move {
        let stop = async {
            let _ = stop_rx.await;
        };
        gantry_kube::record(
            &client,
            &server,
            None,
            Vec::new(),
            &options,
            stop,
            &mut |_| {},
        )
        .await
    });
    (stop_tx, recorder)
}

/// A pod with an environment value and a command line, which the trace must not hold.
fn pod_with_secrets(name: &str) -> serde_json::Value {
    let mut pod = pod(name, 500);
    let container = &mut pod["spec"]["containers"][0];
    container["env"] = json!([{"name": "TOKEN", "value": "do-not-record-me"}]);
    container["command"] = json!(["serve", "--password=do-not-record-me"]);
    pod
}

/// A server whose lists are kind `List` and whose watch events' objects carry no kind:
/// the trace still names every object by the kind listed or watched, and a pod's
/// environment and command line are redacted from both the list and the watch (they
/// were written as they came when the recorder trusted the server's kind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_redacted_as_the_kind_listed_whatever_the_server_calls_them() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.untyped();
    nodes(&api);
    api.put(PODS, pod_with_secrets("listed"));
    let (stop_tx, recorder) = spawn_recorder(&api, RecordOptions::default());
    wait_for("the recorder's pod watch", WAIT, || {
        !api.requests_matching("GET /api/v1/pods?watch=1").is_empty()
    })
    .await;
    api.put(PODS, pod_with_secrets("watched"));
    wait_for("the watched pod recorded", WAIT, || {
        api.requests_matching("GET /api/v1/pods?watch=1").len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = stop_tx.send(());
    let (trace, recorded) = recorder.await.unwrap().unwrap();
    assert_eq!(recorded.changes, 1, "{recorded:?}");
    let text = String::from_utf8(trace.clone()).unwrap();
    assert!(!text.contains("do-not-record-me"), "{text}");
    let records = read(trace);
    let pods: Vec<(Op, &str, &str)> = (records.iter())
        .filter(|r| r.kind() != "Node" && r.op != Op::End)
        .map(|r| {
            let version = r.object.as_ref().and_then(|o| o["apiVersion"].as_str());
            (r.op, r.kind(), version.unwrap_or_default())
        })
        .collect();
    assert_eq!(pods, [(Op::List, "Pod", "v1"), (Op::Added, "Pod", "v1")]);
}

/// A list item that is not an object ends the recording with one line naming the kind
/// and the item, rather than a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_item_that_is_not_an_object_is_refused_by_name() {
    init_tracing();
    let api = TestApiServer::start().await;
    nodes(&api);
    api.garbage_item(json!("not an object"));
    let options = RecordOptions::default();
    let stop = std::future::pending();
    let recorded = gantry_kube::record(
        &api.client(),
        &api.url(),
        None,
        Vec::new(),
        &options,
        stop,
        &mut |_| {},
    )
    .await;
    let message = recorded.expect_err("the recording is refused");
    assert!(
        message.contains("whose items[0] is not an object"),
        "{message}"
    );
}

/// A watch whose event carries an object that is not an object fails, is retried, and
/// once it has failed for `max_outage` the recording ends with one line naming the
/// kind and the event (no panic, no gap written over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_event_that_is_not_an_object_ends_the_recording_after_the_outage_limit() {
    init_tracing();
    let api = TestApiServer::start().await;
    nodes(&api);
    let options = RecordOptions {
        max_backoff: Duration::from_millis(100),
        max_outage: Duration::from_millis(500),
        ..RecordOptions::default()
    };
    let (_stop, recorder) = spawn_recorder(&api, options);
    // The last kind listed is watched: every list is done.
    wait_for("the recorder's last watch", WAIT, || {
        !api.requests_matching("devicetaintrules?watch=1").is_empty()
    })
    .await;
    api.garbage_item(json!(7));
    api.drop_watches();
    let ended = tokio::time::timeout(WAIT, recorder).await;
    let message = ended
        .expect("the recording ends")
        .unwrap()
        .expect_err("the recording fails");
    assert!(
        message.contains(
            "kept failing for 0.5 s: it sent a Added event whose object is not an object"
        ),
        "{message}"
    );
}
