//! End-to-end simulations on small clusters: what assume is worth, reproducibility,
//! preemption through the queue, node churn, and the invariants at the end of every run.

use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile;
use gantry_sim::scenario::Scenario;
use gantry_sim::{SimEvent, SimOptions, Simulation, Summary};

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
    let summary = sim.run();
    (summary, sim)
}

#[test]
fn without_assume_slow_binds_overcommit_nodes_and_with_it_never() {
    // 10 nodes x 2 cpu hold 60 x 300m pods only 6 to a node (1800m). Binds take 200 ms
    // while pods arrive every millisecond.
    let slow = |assume| SimOptions {
        assume,
        bind_latency: Duration::from_millis(200),
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

#[test]
fn preemption_through_the_queue_evicts_and_binds() {
    let text = r#"
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
    let (summary, sim) = simulate(text, SimOptions::default());
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
            "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
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
    let summary = sim.run();
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
