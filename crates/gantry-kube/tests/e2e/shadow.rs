//! `gantry run --shadow` against the in-process API server: beside a running scheduler
//! it decides every pod that scheduler places, writes nothing, agrees where it would have
//! decided the same, and says why where it would not (a node it scored lower, a node its
//! Filter plugins refuse, a pod it finds unschedulable).

use crate::{apiserver, common};

use std::io::Write;
use std::sync::Arc;

use apiserver::TestApiServer;
use apiserver::resources::{NODES, PODS};
use common::*;
use gantry_api::Release;
use gantry_framework::config::SchedulerConfig;
use gantry_framework::plugins::default_profile_for;
use gantry_kube::{RunOptions, Shard};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// The disagreements file, in memory.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A pod another scheduler (the test, by hand) places.
const MANUAL: &str = "manual";

fn bound_count(api: &TestApiServer) -> usize {
    api.list(PODS)
        .iter()
        .filter(|p| p["spec"]["nodeName"].is_string())
        .count()
}

/// The count of one line of the shadow's /metrics, 0 before it is written.
fn metric(instance: &Instance, line: &str) -> u64 {
    let text = instance.running.shared.scheduler_metrics();
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_agrees_where_it_would_decide_the_same_and_says_why_not() {
    init_tracing();
    let api = TestApiServer::start().await;
    // Sizes far apart, so that no two nodes tie on a score.
    for (i, cpu) in [4000, 16000, 64000].into_iter().enumerate() {
        api.put(NODES, node(&format!("n{i}"), cpu, "a"));
    }
    let real = start(&api, "real", Shard::WHOLE, None).await;
    // The running scheduler's bindings land late enough for the shadow to have decided.
    api.set_bind_delay(std::time::Duration::from_millis(200));
    let lines = Lines::default();
    let release = Release::default();
    let shadow = launch(RunOptions {
        identity: "shadow".into(),
        config: SchedulerConfig {
            profiles: vec![
                default_profile_for(SCHEDULER, release),
                default_profile_for(MANUAL, release),
            ],
            ..SchedulerConfig::default()
        },
        shadow: Some(Some(Box::new(lines.clone()))),
        ..options(api.client(), &api.url())
    })
    .await;

    // Eight pods the running scheduler places, one at a time: the shadow decides each
    // as it does.
    for i in 0..8 {
        api.put(PODS, pod(&format!("p{i}"), 500 + 200 * i));
        let bound = 1 + i as usize;
        wait_for("the running scheduler's binding", WAIT, || {
            bound_count(&api) == bound
        })
        .await;
    }
    let agree = "gantry_shadow_decisions_total{result=\"agree\"}";
    wait_for("the shadow's comparisons", WAIT, || {
        metric(&shadow, agree) == 8
    })
    .await;

    // Placed by hand: first on n1, which fits but scores lower than the empty n0; then on
    // n0, too small for it in the shadow's view; then a pod that fits no node.
    let scheduled = "scheduler_schedule_attempts_total{profile=\"manual\",result=\"scheduled\"}";
    let unschedulable =
        "scheduler_schedule_attempts_total{profile=\"manual\",result=\"unschedulable\"}";
    // Created pending; the object to put back to bind it (the stored one: its UID).
    let by_hand = |name: &str, cpu: i64, node: &str| {
        let mut p = pod(name, cpu);
        p["spec"]["schedulerName"] = json!(MANUAL);
        let mut stored = api.put(PODS, p);
        stored["spec"]["nodeName"] = json!(node);
        stored
    };
    let fits = by_hand("fits-but-scored-lower", 100, "n1");
    wait_for("the shadow's decision", WAIT, || {
        metric(&shadow, scheduled) == 1
    })
    .await;
    api.put(PODS, fits);
    let too_big = by_hand("too-big-for-n0", 5000, "n0");
    wait_for("the shadow's decision", WAIT, || {
        metric(&shadow, scheduled) == 2
    })
    .await;
    api.put(PODS, too_big);
    let nowhere = by_hand("fits-nowhere", 100_000, "n2");
    wait_for("the shadow's decision", WAIT, || {
        metric(&shadow, unschedulable) >= 1
    })
    .await;
    api.put(PODS, nowhere);
    let disagree = "gantry_shadow_decisions_total{result=\"disagree\"}";
    wait_for("the shadow's disagreements", WAIT, || {
        metric(&shadow, disagree) == 3
    })
    .await;

    let text = String::from_utf8(lines.0.lock().clone()).unwrap();
    let found: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary: Vec<(&str, &str, &str)> = found
        .iter()
        .map(|d| {
            (
                d["pod"].as_str().unwrap(),
                d["bound_to"].as_str().unwrap(),
                d["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("default/fits-but-scored-lower", "n1", "Score"),
            ("default/too-big-for-n0", "n0", "NodeResourcesFit"),
            (
                "default/fits-nowhere",
                "n2",
                "unschedulable: NodeResourcesFit"
            ),
        ],
        "{text}"
    );
    // 100m: the empty n0 would be 2.5% used, n1 (holding p7's 1.9 cpu) 12.5%.
    assert_eq!(found[0]["gantry"], "n0", "{text}");
    assert!(
        (found[0]["message"].as_str().unwrap()).starts_with("scored lower: "),
        "{text}"
    );
    assert!(
        found[1]["gantry"].is_string() && found[1]["gantry"] != "n0",
        "{text}"
    );
    assert!(found[2]["gantry"].is_null(), "{text}");
    assert!(
        found[1]["message"]
            .as_str()
            .unwrap()
            .contains("Insufficient cpu"),
        "{text}"
    );
    let metrics = shadow.running.shared.scheduler_metrics();
    assert!(
        metrics.contains("gantry_shadow_disagreements_total{reason=\"Score\"} 1"),
        "{metrics}"
    );
    assert_eq!(exposition::check(&metrics), Vec::<String>::new());

    // The shadow wrote nothing: the server saw the running scheduler's eight bindings
    // and their `Scheduled` events, no event or condition about the pods placed by hand.
    let writes = api.writes();
    let bindings = writes.iter().filter(|w| w.ends_with("/binding")).count();
    let events = writes.iter().filter(|w| w.contains("/events")).count();
    assert_eq!((bindings, events, writes.len()), (8, 8, 16), "{writes:#?}");
    shadow.stop().await.unwrap();
    real.stop().await.unwrap();
}

/// Alone (the test places the pods), a shadow asks only what deploy/gantry-readonly.yaml
/// grants: lists and watches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_needs_only_the_read_only_role() {
    let api = TestApiServer::start().await;
    api.put(NODES, node("n0", 4000, "a"));
    let shadow = launch(RunOptions {
        identity: "shadow".into(),
        shadow: Some(None),
        ..options(api.client(), &api.url())
    })
    .await;
    let stored = api.put(PODS, pod("p", 500));
    let scheduled = "scheduler_schedule_attempts_total{profile=\"gantry\",result=\"scheduled\"}";
    wait_for("the shadow's decision", WAIT, || {
        metric(&shadow, scheduled) == 1
    })
    .await;
    let mut bound = stored;
    bound["spec"]["nodeName"] = json!("n0");
    api.put(PODS, bound);
    let agree = "gantry_shadow_decisions_total{result=\"agree\"}";
    wait_for("the shadow's comparison", WAIT, || {
        metric(&shadow, agree) == 1
    })
    .await;
    shadow.stop().await.unwrap();
    assert_eq!(api.writes(), Vec::<String>::new());
    let refused = common::rbac::refused(common::rbac::READ_ONLY, &api.requests_matching(""), "");
    assert_eq!(refused, Vec::<String>::new());
}

/// Two nodes alike: the shadow takes the first (v1.35 on: the score heap's order), and a
/// pod bound on the other is a tie, not a lower score.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_says_when_the_other_scheduler_broke_a_tie_the_other_way() {
    let api = TestApiServer::start().await;
    api.put(NODES, node("n0", 4000, "a"));
    api.put(NODES, node("n1", 4000, "a"));
    let lines = Lines::default();
    let shadow = launch(RunOptions {
        identity: "shadow".into(),
        shadow: Some(Some(Box::new(lines.clone()))),
        ..options(api.client(), &api.url())
    })
    .await;
    let stored = api.put(PODS, pod("p", 500));
    let scheduled = "scheduler_schedule_attempts_total{profile=\"gantry\",result=\"scheduled\"}";
    wait_for("the shadow's decision", WAIT, || {
        metric(&shadow, scheduled) == 1
    })
    .await;
    let mut bound = stored;
    bound["spec"]["nodeName"] = json!("n1");
    api.put(PODS, bound);
    let disagree = "gantry_shadow_decisions_total{result=\"disagree\"}";
    wait_for("the shadow's comparison", WAIT, || {
        metric(&shadow, disagree) == 1
    })
    .await;
    let text = String::from_utf8(lines.0.lock().clone()).unwrap();
    let found: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(found["gantry"], "n0", "{text}");
    assert_eq!(found["reason"], "tie", "{text}");
    assert!(
        (found["message"].as_str().unwrap()).starts_with("tied: 2 nodes scored "),
        "{text}"
    );
    let metrics = shadow.running.shared.scheduler_metrics();
    assert!(
        metrics.contains("gantry_shadow_disagreements_total{reason=\"tie\"} 1"),
        "{metrics}"
    );
    shadow.stop().await.unwrap();
}
