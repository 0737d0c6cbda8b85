//! End-to-end simulations on small clusters: what assume is worth, reproducibility,
//! preemption through the queue, node churn, the invariants at the end of every run, and
//! that every run ends (other schedulers' and gated pods, erroring pods, failing binds,
//! the hard guard).

use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_api::{Node, Pod, Resources};
use gantry_cache::NodeInfo;
use gantry_framework::plugins::default_profile;
use gantry_framework::{CycleState, FilterPlugin, Plugin, Status};
use gantry_sim::scenario::Scenario;
use gantry_sim::{
    BindLatency, MAX_FAILED_ATTEMPTS, PodStatus, SimError, SimEvent, SimOptions, Simulation,
    Summary,
};

const BURST: &str = r#"
nodeGroups:
- name: pool
  count: 10
  zones: [a, b]
  allocatable: {cpu: "2", memory: 8Gi, pods: "110"}
workloads:
- name: web
  count: 60
  arrival: {start: 0s, rate: 1000/s}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, resources: {requests: {cpu: 300m, memory: 256Mi}}}]}
"#;

fn simulate(text: &str, options: SimOptions) -> (Summary, Simulation) {
    let scenario = Scenario::parse(text, "test.yaml").unwrap();
    let mut sim = Simulation::new(
        scenario.cluster.clone(),
        vec![default_profile("default-scheduler")],
        options,
    )
    .unwrap();
    scenario.schedule_into(&mut sim);
    let summary = sim.run().unwrap();
    (summary, sim)
}

#[test]
fn without_assume_slow_binds_overcommit_nodes_and_with_it_never() {
    // 10 nodes x 2 cpu hold 60 x 300m pods only 6 to a node (1800m). Binds take 200 ms
    // while pods arrive every millisecond.
    let slow = |assume| SimOptions {
        assume,
        bind_latency: BindLatency::Fixed(Duration::from_millis(200)),
        ..SimOptions::default()
    };
    let (with, sim) = simulate(BURST, slow(true));
    sim.check_invariants().unwrap();
    assert_eq!(with.scheduled, 60);
    assert_eq!(with.overcommitted_nodes, 0);

    let (without, sim) = simulate(BURST, slow(false));
    assert!(without.overcommitted_nodes > 0, "{without:?}");
    assert!(
        sim.check_invariants().is_err(),
        "the invariant check catches it"
    );

    // A binder that re-checks capacity refuses the excess instead: bind failures and retries.
    let (checked, sim) = simulate(
        BURST,
        SimOptions {
            capacity_check: true,
            ..slow(false)
        },
    );
    assert_eq!(checked.overcommitted_nodes, 0);
    assert!(
        checked.bind_failures > 0 && checked.retries > 0,
        "{checked:?}"
    );
    assert_eq!(checked.scheduled, 60, "retried pods still land");
    sim.check_invariants().unwrap();
}

#[test]
fn same_seed_same_placements() {
    let run = |seed| {
        let (_, sim) = simulate(
            BURST,
            SimOptions {
                seed,
                ..SimOptions::default()
            },
        );
        sim.placements().to_vec()
    };
    assert_eq!(run(7), run(7));
}

/// Four pods of 1 cpu fill two nodes of 2 cpu; at 5 s a pod of priority 1000 asks for
/// 1.5 cpu, and only preemption makes room.
const PREEMPTION: &str = r#"
priorityClasses: [{name: high, value: 1000}]
nodeGroups:
- {name: pool, count: 2, allocatable: {cpu: "2", memory: 8Gi, pods: "110"}}
workloads:
- name: low
  count: 4
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
- name: high
  count: 1
  arrival: {start: 5s}
  template: {spec: {priorityClassName: high, containers: [{name: c, resources: {requests: {cpu: "1500m"}}}]}}
"#;

#[test]
fn preemption_through_the_queue_evicts_and_binds() {
    let (summary, sim) = simulate(PREEMPTION, SimOptions::default());
    sim.check_invariants().unwrap();
    let high = sim
        .placements()
        .iter()
        .find(|p| p.pod == "default/high-0")
        .unwrap();
    assert!(high.node.is_some(), "{high:?}");
    assert_eq!(
        high.evicted.len(),
        2,
        "both 1-cpu pods on the chosen node go"
    );
    assert_eq!(summary.preempted, 2);
}

#[test]
fn pods_wait_for_capacity_and_land_when_nodes_arrive() {
    let text = r#"
nodeGroups:
- {name: pool, count: 1, allocatable: {cpu: "1", memory: 8Gi, pods: "110"}}
workloads:
- name: w
  count: 3
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: 800m}}}]}}
events:
- {at: 30s, addNodes: {group: pool, count: 2}}
"#;
    let (summary, sim) = simulate(text, SimOptions::default());
    sim.check_invariants().unwrap();
    assert_eq!(summary.scheduled, 3);
    assert!(summary.virtual_s >= 30.0);
    assert!(
        summary.retries >= 2,
        "two pods waited as unschedulable: {summary:?}"
    );
}

#[test]
fn a_pod_that_never_fits_is_reported_with_its_reason() {
    let text = r#"
nodeGroups:
- {name: pool, count: 3, allocatable: {cpu: "1", memory: 8Gi, pods: "110"}}
workloads:
- name: big
  count: 1
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: "4"}}}]}}
"#;
    let (summary, sim) = simulate(text, SimOptions::default());
    sim.check_invariants().unwrap();
    assert_eq!(summary.unschedulable, 1);
    assert_eq!(
        sim.placements()[0].reason.as_deref(),
        Some(
            "0/3 nodes are available: 3 Insufficient cpu. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        )
    );
}

#[test]
fn deleting_a_node_reschedules_nothing_but_frees_nothing_either() {
    let text = r#"
nodeGroups:
- {name: pool, count: 2, allocatable: {cpu: "1", memory: 8Gi, pods: "110"}}
workloads:
- name: w
  count: 2
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: 600m}}}]}}
- name: late
  count: 1
  arrival: {start: 20s}
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: 600m}}}]}}
events:
- {at: 10s, drainNodes: {group: pool, count: 1}}
"#;
    // The drained node's pod is re-created and lands nowhere (the other node is full), and
    // the late pod neither: both stay pending with reasons.
    let (summary, sim) = simulate(text, SimOptions::default());
    sim.check_invariants().unwrap();
    assert_eq!(summary.pods_total, 4);
    assert_eq!(summary.unschedulable, 2, "{:?}", sim.placements());
}

#[test]
fn bound_cluster_pods_are_loaded_and_pending_ones_scheduled() {
    let cluster = ClusterObjects::decode(
        "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '1', memory: 1Gi, pods: '10'}}\n---\nkind: Pod\nmetadata: {name: bound}\nspec: {nodeName: n1, containers: [{name: c, resources: {requests: {cpu: 700m}}}]}\n---\nkind: Pod\nmetadata: {name: pending}\nspec: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}\n",
        "c.yaml",
    )
    .unwrap();
    let mut sim = Simulation::new(
        cluster,
        vec![default_profile("default-scheduler")],
        SimOptions::default(),
    )
    .unwrap();
    sim.schedule(
        Duration::from_secs(1),
        SimEvent::DeletePod("default/bound".into()),
    );
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    assert_eq!(
        summary.scheduled, 1,
        "the pending pod fits once the bound one is deleted"
    );
}

#[test]
fn pods_unschedulable_for_five_minutes_are_retried_even_without_a_helpful_event() {
    // The only event (a pod added elsewhere) cannot help a pod rejected for cpu, but it
    // comes ten minutes later: the five-minute flush retries the pod then.
    let text = r#"
nodeGroups:
- {name: pool, count: 1, allocatable: {cpu: "1", memory: 8Gi, pods: "110"}}
workloads:
- name: big
  count: 1
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: "2"}}}]}}
- name: small
  count: 1
  arrival: {start: 10m}
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}}
"#;
    let (summary, _) = simulate(text, SimOptions::default());
    assert_eq!(
        summary.attempts, 3,
        "big tried at 0 s and again after the flush; small once: {summary:?}"
    );
}

fn cluster(text: &str) -> ClusterObjects {
    ClusterObjects::decode(text, "cluster.yaml").unwrap()
}

const ONE_NODE: &str = "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}\n";

fn pod(name: &str, cpu: &str, extra: &str) -> String {
    format!(
        "---\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {{{extra}containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}\n"
    )
}

fn run(cluster: ClusterObjects, options: SimOptions) -> (Summary, Simulation) {
    let mut sim =
        Simulation::new(cluster, vec![default_profile("default-scheduler")], options).unwrap();
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    (summary, sim)
}

#[test]
fn another_schedulers_pod_is_never_queued_and_says_so() {
    let text = format!("{ONE_NODE}{}", pod("theirs", "1", "schedulerName: x, "));
    let (summary, sim) = run(cluster(&text), SimOptions::default());
    assert_eq!((summary.other_scheduler, summary.attempts), (1, 0));
    assert_eq!(
        sim.placements()[0].reason.as_deref(),
        Some(r#"schedulerName "x" matches no profile"#)
    );
    assert_eq!(sim.histories()[0].status, PodStatus::OtherScheduler);
}

#[test]
fn gated_pods_are_written_never_tried_and_hold_nothing() {
    // The gated pod asks for the whole node; the pod after it still fits.
    let text = format!(
        "{ONE_NODE}{}{}",
        pod(
            "gated",
            "2",
            "schedulingGates: [{name: example.com/wait}], "
        ),
        pod("after", "2", "")
    );
    for sequential in [false, true] {
        let options = SimOptions {
            sequential,
            ..SimOptions::default()
        };
        let (summary, sim) = run(cluster(&text), options);
        assert_eq!(
            (summary.gated, summary.scheduled, summary.attempts),
            (1, 1, 1),
            "sequential: {sequential}"
        );
        let lines: Vec<String> = sim
            .placements()
            .iter()
            .map(|p| serde_json::to_string(p).unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                r#"{"pod":"default/gated","node":null,"reason":"gated"}"#,
                r#"{"pod":"default/after","node":"n1"}"#,
            ]
        );
    }
}

/// A Filter plugin that fails with an error on every node, as a broken plugin would.
struct Broken;

impl Plugin for Broken {
    fn name(&self) -> &'static str {
        "Broken"
    }
}

impl FilterPlugin for Broken {
    fn filter(&self, _: &CycleState, _: &Pod, _: &NodeInfo) -> Status {
        Status::error("broken on purpose")
    }
}

#[test]
fn a_pod_whose_attempts_keep_erroring_is_given_up() {
    let mut broken = default_profile("broken-scheduler");
    broken.filter.push(Arc::new(Broken));
    let text = format!(
        "{ONE_NODE}{}{}",
        pod("unlucky", "1", "schedulerName: broken-scheduler, "),
        pod("fine", "1", "")
    );
    let mut sim = Simulation::new(
        cluster(&text),
        vec![default_profile("default-scheduler"), broken],
        SimOptions::default(),
    )
    .unwrap();
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    assert_eq!((summary.gave_up, summary.scheduled), (1, 1));
    let unlucky = sim.histories()[0];
    assert_eq!(unlucky.status, PodStatus::GivenUp);
    assert_eq!(
        (unlucky.attempts, unlucky.failures),
        (MAX_FAILED_ATTEMPTS, MAX_FAILED_ATTEMPTS)
    );
    assert_eq!(
        sim.placements()[0].reason.as_deref(),
        Some(
            r#"given up after 10 failed attempts; the last: running "Broken" filter plugin: broken on purpose"#
        )
    );
    // Backoff doubles from 1 s to 10 s between the attempts, each ending after the whole
    // second it ends in (v1.33 on): attempts at 0, 2, 5, 10, 19, 30, 41, 52, 63 and 74 s.
    assert_eq!(summary.virtual_s, 74.0);
}

#[test]
fn binds_that_always_fail_end_the_run_with_every_pod_given_up() {
    let options = SimOptions {
        bind_failure_rate: 1.0,
        ..SimOptions::default()
    };
    let (summary, sim) = simulate(BURST, options);
    sim.check_invariants().unwrap();
    assert_eq!((summary.gave_up, summary.scheduled), (60, 0));
    assert_eq!(summary.bind_failures, 60 * u64::from(MAX_FAILED_ATTEMPTS));
    assert!(
        sim.placements()[0]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("given up after 10 failed attempts; the last: binding rejected:"),
        "{:?}",
        sim.placements()[0]
    );
}

#[test]
fn the_guard_stops_a_run_that_takes_more_steps_than_allowed() {
    let scenario = Scenario::parse(BURST, "test.yaml").unwrap();
    let new = |step_limit| {
        let mut sim = Simulation::new(
            scenario.cluster.clone(),
            vec![default_profile("default-scheduler")],
            SimOptions {
                step_limit,
                ..SimOptions::default()
            },
        )
        .unwrap();
        scenario.schedule_into(&mut sim);
        sim
    };
    match new(Some(30)).run() {
        Err(SimError::StepLimit { steps, limit, .. }) => assert_eq!((steps, limit), (30, 30)),
        other => panic!("the guard did not trip: {other:?}"),
    }
    // The limit derived from the input leaves a real run alone.
    assert_eq!(new(None).run().unwrap().scheduled, 60);
}

#[test]
fn a_second_pod_or_node_of_one_name_is_an_error() {
    let text = format!("{ONE_NODE}{}", pod("twin", "1", ""));
    let mut sim = Simulation::new(
        cluster(&text),
        vec![default_profile("default-scheduler")],
        SimOptions::default(),
    )
    .unwrap();
    let twin = Arc::new(Pod::new("default", "twin"));
    sim.schedule(Duration::from_secs(1), SimEvent::CreatePod(twin));
    assert_eq!(
        sim.run().unwrap_err().to_string(),
        "pod default/twin is created twice: two pods with one namespace and name"
    );

    let mut sim = Simulation::new(
        cluster(ONE_NODE),
        vec![default_profile("default-scheduler")],
        SimOptions::default(),
    )
    .unwrap();
    let node = Arc::new(Node::new("n1", Resources::new(1000, 1 << 30)));
    sim.schedule(Duration::from_secs(1), SimEvent::AddNode(node));
    assert_eq!(sim.run().unwrap_err(), SimError::DuplicateNode("n1".into()));
}

#[test]
fn binds_take_a_few_milliseconds_by_default() {
    let (_, sim) = simulate(BURST, SimOptions::default());
    let mut to_bind: Vec<Duration> = sim
        .histories()
        .iter()
        .map(|h| h.bound.unwrap() - h.arrived)
        .collect();
    to_bind.sort_unstable();
    assert!(to_bind[0] > Duration::ZERO, "{to_bind:?}");
    assert!(to_bind[30] < Duration::from_millis(30), "{to_bind:?}");
}

/// SchedulerAsyncPreemption (on from v1.33): the victims are deleted after the attempt,
/// each with a status patch and a delete (one API call's latency each, 10 ms here), all but
/// the last in parallel and then the last, while DefaultPreemption's PreEnqueue holds the
/// preemptor back; it is tried again once the last is gone, and bound a bind later. With
/// the gate off (or before v1.33) the attempt deletes them itself.
#[test]
fn a_preemptor_waits_for_its_victims_deleted_in_the_background() {
    let ms = Duration::from_millis;
    // Two victims in the background: 20 ms for the first, 20 ms more for the last, then a
    // 10 ms bind. v1.32 waits out the preemptor's 1 s backoff (no SchedulerPopFromBackoffQ).
    for (emulated, gates, in_background, bound_at) in [
        ("1.37", None, true, ms(5_050)),
        (
            "1.37",
            Some("SchedulerAsyncPreemption=false"),
            false,
            ms(5_010),
        ),
        ("1.33", None, true, ms(5_050)),
        ("1.32", None, false, ms(6_010)),
    ] {
        let release = gantry_api::Release::parse(Some(emulated), gates).unwrap();
        let scenario = Scenario::parse(PREEMPTION, "test.yaml").unwrap();
        let options = SimOptions {
            bind_latency: BindLatency::Fixed(ms(10)),
            ..SimOptions::default()
        };
        let profile = gantry_framework::plugins::default_profile_for("default-scheduler", release);
        let mut sim = Simulation::new(scenario.cluster.clone(), vec![profile], options).unwrap();
        scenario.schedule_into(&mut sim);
        sim.run_until(ms(5_000)).unwrap();
        let high = (sim.placements().iter())
            .position(|p| p.pod == "default/high-0")
            .unwrap();
        let evicted_at_once = if in_background { 0 } else { 2 };
        let evicted = sim.placements()[high].evicted.len();
        assert_eq!(evicted, evicted_at_once, "{emulated} {gates:?}");
        sim.run().unwrap();
        sim.check_invariants().unwrap();
        assert_eq!(
            sim.placements()[high].evicted.len(),
            2,
            "{emulated} {gates:?}"
        );
        let history = sim.histories()[high];
        assert_eq!(
            (history.bound, history.attempts),
            (Some(bound_at), 2),
            "{emulated} {gates:?}"
        );
    }
}
