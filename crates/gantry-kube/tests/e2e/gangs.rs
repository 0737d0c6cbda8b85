//! `gantry run` with GenericWorkload and GangScheduling (v1.36): PodGroups watched, a
//! gang placed in one pod-group cycle or not at all, and the group's `PodGroupScheduled`
//! condition written, against the in-process API server. The same cases as the
//! recordings of real kube-scheduler v1.36.3 in `testdata/gang-1.36/`.

use crate::{apiserver, common};

use apiserver::TestApiServer;
use apiserver::resources::{DEVICE_CLASSES, NODES, POD_GROUPS, PODS, RESOURCE_CLAIMS};
use common::*;
use gantry_api::Release;
use gantry_framework::config::SchedulerConfig;
use gantry_framework::plugins::default_profile_for;
use gantry_kube::Shard;
use serde_json::{Value, json};

/// v1.36 with the two gates on, as `--feature-gates GenericWorkload=true,GangScheduling=true`.
fn gang_config() -> SchedulerConfig {
    let release = Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true"),
    )
    .expect("the gates are valid at 1.36");
    SchedulerConfig {
        profiles: vec![default_profile_for(SCHEDULER, release)],
        ..SchedulerConfig::for_release(release)
    }
}

fn gang(name: &str, min_count: u32) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    })
}

fn member(name: &str, milli_cpu: i64, group: &str) -> Value {
    let mut pod = pod(name, milli_cpu);
    pod["spec"]["schedulingGroup"] = json!({"podGroupName": group});
    pod
}

fn group_condition(api: &TestApiServer, name: &str) -> Option<Value> {
    let group = api.get(POD_GROUPS, "default", name)?;
    group["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodGroupScheduled")
        .cloned()
}

const PERMIT_WAIT: &str = "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more plugins asked to wait and no plugin rejected pod";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_bound_whole_or_held_and_its_pod_group_says_so() {
    init_tracing();
    let api = TestApiServer::start().await;
    for i in 1..=3 {
        api.put(NODES, node(&format!("n{i}"), 4000, "a"));
    }
    // 4 pods of 3 cpu on three nodes of 4: the gang cannot fit whole.
    api.put(POD_GROUPS, gang("trainer", 4));
    for i in 0..4 {
        api.put(PODS, member(&format!("trainer-{i}"), 3000, "trainer"));
    }
    // Fits: bound together.
    api.put(POD_GROUPS, gang("eval", 2));
    for i in 0..2 {
        api.put(PODS, member(&format!("eval-{i}"), 1000, "eval"));
    }
    // Two of its three: not tried until the third exists.
    api.put(POD_GROUPS, gang("short", 3));
    for i in 0..2 {
        api.put(PODS, member(&format!("short-{i}"), 100, "short"));
    }
    // A member of a group that does not exist is held.
    api.put(PODS, member("orphan-0", 100, "missing"));
    let instance = start_with(&api, "solo", Shard::WHOLE, None, gang_config()).await;

    wait_for("eval bound and trainer judged", WAIT, || {
        node_of(&api, "eval-0").is_some()
            && node_of(&api, "eval-1").is_some()
            && group_condition(&api, "trainer").is_some()
    })
    .await;
    let scheduled = group_condition(&api, "eval").expect("eval's condition");
    assert_eq!(scheduled["status"], "True");
    assert_eq!(scheduled["reason"], "Scheduled");
    assert_eq!(scheduled["message"], "");
    // The group has no generation (the API server sets none on a PodGroup): none observed.
    assert_eq!(scheduled.get("observedGeneration"), None);
    let refused = group_condition(&api, "trainer").unwrap();
    assert_eq!(
        (&refused["status"], &refused["reason"], &refused["message"]),
        (
            &json!("False"),
            &json!("Unschedulable"),
            &json!("pod group is unschedulable")
        )
    );
    // No trainer is bound; three waited at Permit, the fourth fitted nowhere.
    for i in 0..4 {
        assert_eq!(node_of(&api, &format!("trainer-{i}")), None);
    }
    wait_for("every trainer's condition", WAIT, || {
        (0..4).all(|i| condition(&api, &format!("trainer-{i}"), "PodScheduled").is_some())
    })
    .await;
    let messages: Vec<String> = (0..4)
        .map(|i| {
            condition(&api, &format!("trainer-{i}"), "PodScheduled").unwrap()["message"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        messages.iter().filter(|m| *m == PERMIT_WAIT).count(),
        3,
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("0/3 nodes are available: ")),
        "{messages:?}"
    );
    // PreEnqueue holds the short gang and the orphan: no condition, no group status.
    for held in ["short-0", "short-1", "orphan-0"] {
        assert_eq!(node_of(&api, held), None);
        assert_eq!(condition(&api, held, "PodScheduled"), None, "{held}");
    }
    assert_eq!(group_condition(&api, "short"), None);

    // The third member arrives: the gang is tried and bound whole.
    api.put(PODS, member("short-2", 100, "short"));
    wait_for("the short gang bound", WAIT, || {
        (0..3).all(|i| node_of(&api, &format!("short-{i}")).is_some())
    })
    .await;
    wait_for("short's condition", WAIT, || {
        group_condition(&api, "short").is_some_and(|c| c["status"] == "True")
    })
    .await;
    // A trainer never bound, and the condition was written once per change.
    for i in 0..4 {
        assert_eq!(node_of(&api, &format!("trainer-{i}")), None);
    }
    let status_writes = |group: &str| {
        api.requests_matching(&format!(
            "PATCH /apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups/{group}/status"
        ))
        .len()
    };
    assert_eq!(status_writes("eval"), 1);
    assert_eq!(status_writes("short"), 1);
    assert_eq!(node_of(&api, "orphan-0"), None);
    instance.stop().await.unwrap();
    assert_deployable(&api);
}

/// Room for the gang appears: its members are retried and bound together, and the
/// group's condition moves from False to True (never back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_gang_is_bound_once_a_node_makes_room() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("n1", 4000, "a"));
    api.put(POD_GROUPS, gang("pair", 2));
    for i in 0..2 {
        api.put(PODS, member(&format!("pair-{i}"), 3000, "pair"));
    }
    let instance = start_with(&api, "solo", Shard::WHOLE, None, gang_config()).await;
    wait_for("pair judged", WAIT, || {
        group_condition(&api, "pair").is_some_and(|c| c["status"] == "False")
    })
    .await;
    assert_eq!(node_of(&api, "pair-0"), None);
    assert_eq!(node_of(&api, "pair-1"), None);
    api.put(NODES, node("n2", 4000, "a"));
    wait_for("pair bound", WAIT, || {
        node_of(&api, "pair-0").is_some() && node_of(&api, "pair-1").is_some()
    })
    .await;
    assert_ne!(node_of(&api, "pair-0"), node_of(&api, "pair-1"));
    wait_for("pair scheduled", WAIT, || {
        group_condition(&api, "pair").is_some_and(|c| c["status"] == "True")
    })
    .await;
    instance.stop().await.unwrap();
    assert_deployable(&api);
}

/// A gang whose first member (priority 2000, kept to n1) fits only by preempting `low`,
/// and whose second member's claim (40 devices) makes the allocator fail with an error on
/// n2 (n1 still holds `low` in the cycle's view): the group fails with that error, and
/// the preemption begun in its cycle goes on, `low` deleted
/// (`testdata/gang-1.36/group-error-keeps-preemption`, recorded with v1.36.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_failing_with_an_error_still_deletes_the_victims_it_chose() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.put(NODES, node("n1", 4000, "a"));
    api.put(NODES, node("n2", 4000, "a"));
    api.put(PODS, bound_pod("low", 3000, "n1"));
    api.put(
        DEVICE_CLASSES,
        json!({"metadata": {"name": "gpu.example.com"}, "spec": {"selectors": [
            {"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
    );
    let twenty = |name: &str| {
        json!({"name": name, "exactly": {
            "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 20}})
    };
    api.put(
        RESOURCE_CLAIMS,
        json!({"metadata": {"name": "forty", "namespace": "default"},
            "spec": {"devices": {"requests": [twenty("a"), twenty("b")]}}}),
    );
    api.put(POD_GROUPS, gang("g", 2));
    let mut first = member("g-0", 3000, "g");
    first["spec"]["priority"] = json!(2000);
    first["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "n1"});
    api.put(PODS, first);
    let mut second = member("g-1", 100, "g");
    second["spec"]["priority"] = json!(1000);
    second["spec"]["resourceClaims"] = json!([{"name": "gpus", "resourceClaimName": "forty"}]);
    second["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpus"}]);
    api.put(PODS, second);
    let instance = start_with(&api, "solo", Shard::WHOLE, None, gang_config()).await;
    wait_for("the group's error", WAIT, || {
        group_condition(&api, "g").is_some_and(|c| c["reason"] == "SchedulerError")
    })
    .await;
    let condition = group_condition(&api, "g").unwrap();
    assert_eq!(
        condition["message"],
        "failed to schedule other pod from a pod group: running \"DynamicResources\" filter plugin: claim default/forty: number of requested devices 40 exceeds the claim limit of 32"
    );
    wait_for("low deleted", WAIT, || {
        api.get(PODS, "default", "low").is_none()
    })
    .await;
    assert_eq!((node_of(&api, "g-0"), node_of(&api, "g-1")), (None, None));
    instance.stop().await.unwrap();
    assert_deployable(&api);
}

/// A server that does not serve the Workload API is refused at start, in one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_pod_groups_is_refused_at_start() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.unserve("/apis/scheduling.k8s.io/v1alpha2");
    let options = gantry_kube::RunOptions {
        config: gang_config(),
        ..options(api.client(), &api.url())
    };
    let error = run_to_end(options, WAIT).await.unwrap_err().to_string();
    assert!(
        error.contains("does not serve scheduling.k8s.io/v1alpha2 podgroups")
            && error.contains("--runtime-config=scheduling.k8s.io/v1alpha2=true"),
        "{error}"
    );
    assert_eq!(error.lines().count(), 1, "{error}");
}

/// Two instances dividing the pods: each gang is one instance's, all of it (its members
/// are bound by the same instance), so that no gang's Reserve is split between two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_dividing_the_pods_never_split_a_gang() {
    init_tracing();
    let api = TestApiServer::start().await;
    for i in 1..=4 {
        api.put(NODES, node(&format!("n{i}"), 4000, "a"));
    }
    let groups = ["g0", "g1", "g2", "g3", "g4", "g5"];
    for group in groups {
        api.put(POD_GROUPS, gang(group, 3));
        for i in 0..3 {
            api.put(PODS, member(&format!("{group}-{i}"), 400, group));
        }
    }
    let (a, b) = tokio::join!(
        start_with(&api, "a", Shard { index: 0, count: 2 }, None, gang_config()),
        start_with(&api, "b", Shard { index: 1, count: 2 }, None, gang_config()),
    );
    // Events are written after the bindings, asynchronously: wait for both.
    wait_for("every member bound, with its Scheduled event", WAIT, || {
        groups.iter().all(|g| {
            (0..3).all(|i| {
                let pod = format!("{g}-{i}");
                node_of(&api, &pod).is_some() && !events_about(&api, &pod, "Scheduled").is_empty()
            })
        })
    })
    .await;
    let bound_by = |pod: &str| {
        let events = events_about(&api, pod, "Scheduled");
        assert_eq!(events.len(), 1, "{pod}: {events:?}");
        events[0]["reportingInstance"].as_str().unwrap().to_string()
    };
    let mut instances = Vec::new();
    for group in groups {
        let by: Vec<String> = (0..3).map(|i| bound_by(&format!("{group}-{i}"))).collect();
        assert!(by.iter().all(|b| *b == by[0]), "{group} split: {by:?}");
        instances.push(by[0].clone());
    }
    instances.sort();
    instances.dedup();
    // The groups' names hash to both instances: the test divides something.
    assert_eq!(instances.len(), 2, "{instances:?}");
    a.stop().await.unwrap();
    b.stop().await.unwrap();
    assert_deployable(&api);
}

/// Two instances racing for too little room (binds slowed so that they overlap): a
/// gang's members are bound together or not at all, whatever the other instance bound
/// meanwhile, and no node is over-committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_instances_never_leave_a_gang_partly_bound() {
    init_tracing();
    let api = TestApiServer::start().await;
    api.set_bind_delay(std::time::Duration::from_millis(40));
    for i in 1..=4 {
        api.put(NODES, node(&format!("n{i}"), 4000, "a"));
    }
    let groups: Vec<String> = (0..8).map(|g| format!("g{g}")).collect();
    for group in &groups {
        api.put(POD_GROUPS, gang(group, 3));
        for i in 0..3 {
            api.put(PODS, member(&format!("{group}-{i}"), 1000, group));
        }
    }
    for i in 0..8 {
        api.put(PODS, pod(&format!("single-{i}"), 1000));
    }
    let (a, b) = tokio::join!(
        start_with(&api, "a", Shard { index: 0, count: 2 }, None, gang_config()),
        start_with(&api, "b", Shard { index: 1, count: 2 }, None, gang_config()),
    );
    // 16 cpu for 32 pods of 1: wait until nothing has moved for 2 s.
    let mut seen = (0, std::time::Instant::now());
    wait_for("the binds to settle", WAIT, || {
        let binds = api.binds().len();
        if binds != seen.0 {
            seen = (binds, std::time::Instant::now());
        }
        seen.1.elapsed() > std::time::Duration::from_secs(2)
    })
    .await;
    let partly: Vec<String> = (groups.iter())
        .map(|group| {
            let bound = (0..3)
                .filter(|i| node_of(&api, &format!("{group}-{i}")).is_some())
                .count();
            format!("{group}: {bound} of 3")
        })
        .filter(|line| !line.ends_with(": 0 of 3") && !line.ends_with(": 3 of 3"))
        .collect();
    assert_eq!(partly, Vec::<String>::new(), "gangs partly bound");
    // Every cpu is taken (a gang left out leaves room to a single pod, not to nothing).
    assert_eq!(api.binds().len(), 16, "{:?}", api.binds());
    assert_eq!(overcommitted_nodes(&api), Vec::<String>::new());
    a.stop().await.unwrap();
    b.stop().await.unwrap();
    assert_deployable(&api);
}

/// Workload-aware preemption (v1.36, WorkloadAwarePreemption), as the recording
/// `testdata/gang-wap-1.36/spares-what-it-can` of real kube-scheduler v1.36.3 has it: a gang
/// of two (priority 1000) of which one member fits, beside `low-a` (priority 0) and `low-b`
/// (priority 100), preempts as one pod group: `low-b` is spared, `low-a` gets the `podgroup`
/// wording and an event naming the PodGroup's uid on node `cluster`, and the gang is bound
/// once it is gone. (One victim: with two, the API's answer to the last deletion can reach
/// the loop before the watch shows the first gone, and a second cycle on that stale view
/// preempts again and is then held with nothing left to move it, upstream's race too.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_preempts_as_one_pod_group_and_is_bound_once_its_victim_is_gone() {
    init_tracing();
    let api = TestApiServer::start().await;
    for i in 1..=3 {
        api.put(NODES, node(&format!("n{i}"), 4000, "a"));
    }
    api.put(PODS, bound_pod("low-a", 3000, "n1"));
    let mut low_b = bound_pod("low-b", 3000, "n2");
    low_b["spec"]["priority"] = json!(100);
    api.put(PODS, low_b);
    let mut group = gang("g", 2);
    // As Priority admission leaves it (the API server here runs no admission).
    group["spec"]["priorityClassName"] = json!("high");
    group["spec"]["priority"] = json!(1000);
    api.put(POD_GROUPS, group);
    for i in 0..2 {
        let mut pod = member(&format!("g-{i}"), 3000, "g");
        pod["spec"]["priority"] = json!(1000);
        api.put(PODS, pod);
    }
    let release = Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true,WorkloadAwarePreemption=true"),
    )
    .unwrap();
    let config = SchedulerConfig {
        profiles: vec![default_profile_for(SCHEDULER, release)],
        ..SchedulerConfig::for_release(release)
    };
    let instance = start_with(&api, "solo", Shard::WHOLE, None, config).await;
    wait_for("the gang bound", WAIT, || {
        node_of(&api, "g-0").is_some() && node_of(&api, "g-1").is_some()
    })
    .await;
    assert!(
        api.get(PODS, "default", "low-a").is_none(),
        "low-a was deleted"
    );
    assert_eq!(
        node_of(&api, "low-b").as_deref(),
        Some("n2"),
        "low-b was spared"
    );
    wait_for("the Preempted event", WAIT, || {
        !events_about(&api, "low-a", "Preempted").is_empty()
    })
    .await;
    let uid = api.get(POD_GROUPS, "default", "g").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let preempted = &events_about(&api, "low-a", "Preempted")[0];
    assert_eq!(
        preempted["note"],
        json!(format!("Preempted by podgroup {uid} on node cluster"))
    );
    assert_eq!(preempted["related"]["kind"], "PodGroup");
    wait_for("the group scheduled", WAIT, || {
        group_condition(&api, "g").is_some_and(|c| c["status"] == "True")
    })
    .await;
    assert!(overcommitted_nodes(&api).is_empty());
    instance.stop().await.unwrap();
}
