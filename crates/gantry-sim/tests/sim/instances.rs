//! Several scheduler instances sharing one simulated cluster (`SimOptions::schedulers`):
//! each decides on its own, possibly stale, view; the binder's re-check and the API's
//! capacity check turn outdated decisions into conflicts, never into over-committed nodes;
//! runs are reproducible and always end.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_api::{Node, Pod, Resources};
use gantry_framework::plugins::default_profile;
use gantry_scheduler::shard::owner;
use gantry_sim::scenario::Scenario;
use gantry_sim::{BindLatency, PodStatus, SimEvent, SimOptions, Simulation, Summary};

const GIB: i64 = 1 << 30;

/// A node with `cpus` cores, ample memory and pod slots.
fn node(name: &str, cpus: i64) -> Node {
    let mut allocatable = Resources::new(cpus * 1000, 64 * GIB);
    allocatable.pods = 110;
    Node::new(name, allocatable).with_labels([("kubernetes.io/hostname", name)])
}

/// A one-cpu pod whose uid the hash gives to instance `instance` of `count`.
fn pod_owned_by(prefix: &str, instance: u32, count: u32) -> Pod {
    (0..)
        .map(|i| Pod::new("default", &format!("{prefix}-{i}")).with_requests(1000, GIB))
        .find(|pod| owner(&pod.uid, count) == instance)
        .expect("some name hashes to every instance")
}

fn options(schedulers: u32, event_latency_ms: u64, bind_latency_ms: u64) -> SimOptions {
    SimOptions {
        schedulers,
        event_latency: Duration::from_millis(event_latency_ms),
        bind_latency: BindLatency::Fixed(Duration::from_millis(bind_latency_ms)),
        ..SimOptions::default()
    }
}

fn simulation(nodes: Vec<Node>, options: SimOptions) -> Simulation {
    let mut cluster = ClusterObjects::default();
    cluster.nodes = nodes;
    Simulation::new(cluster, vec![default_profile("default-scheduler")], options).unwrap()
}

/// Conflicts, those the binder's re-check caught, binds the API refused, over-commits
/// prevented, over-committed nodes, and pods scheduled.
fn outcome(s: &Summary) -> (u64, u64, u64, u64, usize, usize) {
    (
        s.conflicts,
        s.binder_conflicts,
        s.bind_failures,
        s.overcommits_prevented,
        s.overcommitted_nodes,
        s.scheduled,
    )
}

fn create(sim: &mut Simulation, at_ms: u64, pod: Pod) {
    sim.schedule(
        Duration::from_millis(at_ms),
        SimEvent::CreatePod(Arc::new(pod)),
    );
}

#[test]
fn the_binders_recheck_refuses_a_placement_another_instances_bind_outdated() {
    // One slot. Instance 0 decides `first` at 10 ms (its bind lands at 60 ms, and the
    // watch shows it at 70 ms). Instance 1 sees `second` at 55 ms and, not knowing of
    // `first`, decides the same node; by its bind at 105 ms its cache knows better.
    let mut sim = simulation(vec![node("n1", 1)], options(2, 10, 50));
    create(&mut sim, 0, pod_owned_by("first", 0, 2));
    create(&mut sim, 45, pod_owned_by("second", 1, 2));
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    assert_eq!(
        outcome(&summary),
        (1, 1, 0, 1, 0, 1),
        "refused before it reached the API: {summary:?}"
    );
    assert_eq!(
        summary.conflicts_by_plugin,
        [("NodeResourcesFit".to_string(), 1)].into()
    );
    let second = &sim.placements()[1];
    assert_eq!(second.node, None);
    // Retried after its backoff, on an up-to-date view: it fits nowhere now.
    let reason = second.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("0/1 nodes are available: 1 Insufficient cpu."),
        "{reason}"
    );
}

#[test]
fn the_api_refuses_an_overcommit_that_both_stale_views_allowed() {
    // Both instances decide at 10 ms on the one slot; both binds land at 60 ms, before
    // either watch shows the other's: only the API can refuse the second. A node added at
    // 2 s gives the refused pod a place after its backoff.
    let mut sim = simulation(vec![node("n1", 1)], options(2, 10, 50));
    create(&mut sim, 0, pod_owned_by("first", 0, 2));
    create(&mut sim, 0, pod_owned_by("second", 1, 2));
    sim.schedule(
        Duration::from_secs(2),
        SimEvent::AddNode(Arc::new(node("n2", 1))),
    );
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    // The refused pod lands on the new node.
    assert_eq!(outcome(&summary), (1, 0, 1, 1, 0, 2), "{summary:?}");
    // The API's admission: the Filter plugins on the bound state, NodeResourcesFit first.
    assert_eq!(
        summary.conflicts_by_plugin,
        [("NodeResourcesFit".to_string(), 1)].into()
    );
    let nodes: Vec<_> = sim.placements().iter().map(|p| p.node.as_deref()).collect();
    assert!(nodes.contains(&Some("n1")) && nodes.contains(&Some("n2")));
}

#[test]
fn the_api_refuses_a_host_port_both_stale_views_allowed_and_names_the_plugin() {
    // Room for both by cpu, one host port: both instances decide at 10 ms on views that
    // do not show the other's pod, and both binds land at 60 ms. The API admits the first
    // and refuses the second with NodePorts; retried on an up-to-date view, it fits
    // nowhere.
    let mut sim = simulation(vec![node("n1", 4)], options(2, 10, 50));
    let with_port = |pod: Pod| {
        let mut pod = pod;
        pod.containers[0].host_ports.push(gantry_api::HostPort {
            ip: gantry_api::HostPort::any_ip(),
            protocol: gantry_api::Protocol::Tcp,
            port: 8080,
        });
        pod
    };
    create(&mut sim, 0, with_port(pod_owned_by("first", 0, 2)));
    create(&mut sim, 0, with_port(pod_owned_by("second", 1, 2)));
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    assert_eq!(outcome(&summary), (1, 0, 1, 0, 0, 1), "{summary:?}");
    assert_eq!(
        summary.conflicts_by_plugin,
        [("NodePorts".to_string(), 1)].into()
    );
    let pending = sim.placements().iter().find(|p| p.node.is_none()).unwrap();
    let reason = pending.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("0/1 nodes are available: 1 node(s) didn't have free ports"),
        "{reason}"
    );
}

#[test]
fn one_instance_has_no_conflicts_and_the_api_keeps_its_capacity_check_off() {
    // The same race with one instance: it assumes its first decision, so the second pod
    // never goes to the full node.
    let mut sim = simulation(vec![node("n1", 1)], options(1, 10, 50));
    create(&mut sim, 0, pod_owned_by("first", 0, 1));
    create(&mut sim, 0, pod_owned_by("second", 0, 1));
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    assert_eq!((summary.schedulers, summary.conflicts), (1, 0));
    assert_eq!(summary.scheduled, 1);
    assert!(!sim.api.capacity_check);
    assert!(!sim.api.admission_enabled());
}

const TIGHT: &str = r#"
nodeGroups:
- name: pool
  count: 20
  zones: [a, b]
  allocatable: {cpu: "2", memory: 8Gi, pods: "110"}
workloads:
- name: web
  count: 150
  arrival: {start: 0s, rate: 300/s}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, resources: {requests: {cpu: 300m, memory: 256Mi}}}]}
events:
- {at: 300ms, deletePods: {workload: web, count: 5}}
- {at: 400ms, drainNodes: {group: pool, count: 2}}
- {at: 1s, addNodes: {group: pool, count: 2}}
"#;

fn run_tight(options: SimOptions) -> (Summary, Simulation) {
    run_scenario(TIGHT, options)
}

/// Runs a scenario; the invariants hold at the end.
fn run_scenario(text: &str, options: SimOptions) -> (Summary, Simulation) {
    let scenario = Scenario::parse(text, "test.yaml").unwrap();
    let mut sim = Simulation::new(
        scenario.cluster.clone(),
        vec![default_profile("default-scheduler")],
        options,
    )
    .unwrap();
    scenario.schedule_into(&mut sim);
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    (summary, sim)
}

#[test]
fn stale_instances_conflict_but_never_overcommit() {
    // 20 nodes of 6 slots hold 120 of the 150 pods: the last slots are raced for.
    let mut conflicts = 0;
    for (schedulers, latency_ms) in [(2, 0), (2, 10), (4, 100), (4, 1000)] {
        let (summary, _) = run_tight(SimOptions {
            schedulers,
            event_latency: Duration::from_millis(latency_ms),
            seed: 3,
            ..SimOptions::default()
        });
        assert_eq!(summary.overcommitted_nodes, 0, "{summary:?}");
        assert_eq!(summary.schedulers, schedulers);
        assert!(summary.conflicts >= summary.binder_conflicts);
        assert!(summary.overcommits_prevented <= summary.conflicts);
        conflicts += summary.conflicts;
    }
    assert!(conflicts > 0, "the instances never raced");
}

#[test]
fn same_seed_same_bytes_for_any_number_of_instances_and_latency() {
    for (schedulers, latency_ms) in [(1, 0), (1, 100), (2, 0), (2, 10), (4, 100)] {
        let options = || SimOptions {
            schedulers,
            event_latency: Duration::from_millis(latency_ms),
            seed: 11,
            ..SimOptions::default()
        };
        let (a, sim_a) = run_tight(options());
        let (b, sim_b) = run_tight(options());
        let bytes = |sim: &Simulation| serde_json::to_string(sim.placements()).unwrap();
        assert_eq!(
            bytes(&sim_a),
            bytes(&sim_b),
            "{schedulers} instances, {latency_ms} ms"
        );
        let counts = |s: &Summary| {
            (
                s.scheduled,
                s.attempts,
                s.conflicts,
                s.binder_conflicts,
                s.overcommits_prevented,
                s.virtual_s,
            )
        };
        assert_eq!(counts(&a), counts(&b));
    }
}

#[test]
fn a_pod_deleted_while_its_bind_is_in_flight_is_not_bound() {
    for (schedulers, latency_ms) in [(1, 0), (2, 100)] {
        let mut sim = simulation(vec![node("n1", 4)], options(schedulers, latency_ms, 200));
        let pod = pod_owned_by("doomed", 0, schedulers);
        let key = pod.key();
        create(&mut sim, 0, pod);
        sim.schedule(Duration::from_millis(150), SimEvent::DeletePod(key));
        let summary = sim.run().unwrap();
        sim.check_invariants().unwrap();
        assert_eq!(summary.scheduled, 0);
        assert_eq!(summary.attempts, 1, "a deleted pod is not retried");
        assert_eq!(sim.histories()[0].status, PodStatus::Pending);
        assert_eq!(
            sim.placements()[0].reason.as_deref(),
            Some("deleted before it was scheduled")
        );
    }
}

#[test]
fn sequential_mode_and_instance_counts_out_of_range_are_refused() {
    let refused = |options: SimOptions| {
        Simulation::new(
            ClusterObjects::default(),
            vec![default_profile("default-scheduler")],
            options,
        )
        .err()
        .unwrap()
    };
    let sequential = SimOptions {
        sequential: true,
        schedulers: 2,
        ..SimOptions::default()
    };
    assert!(refused(sequential).contains("one scheduler instance"));
    for schedulers in [0, 65] {
        let options = SimOptions {
            schedulers,
            ..SimOptions::default()
        };
        assert!(refused(options).contains("1 to 64"));
    }
}

#[test]
fn every_pod_is_tried_by_its_owner_alone() {
    // Room for every pod: each one is decided once, by one instance, and bound.
    let nodes = (0..10).map(|i| node(&format!("n{i}"), 32)).collect();
    let mut sim = simulation(nodes, options(4, 10, 5));
    for i in 0..100 {
        let pod = Pod::new("default", &format!("p{i}")).with_requests(100, GIB);
        create(&mut sim, i, pod);
    }
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    assert_eq!((summary.scheduled, summary.attempts), (100, 100));
    assert_eq!((summary.conflicts, summary.bind_failures), (0, 0));
}

/// 2 nodes × 2 cards of 10 shares and 16 GiB; inference pods take 4 GiB and 25% of a
/// card, so 16 fit.
const GPU_POOL: &str = r#"
nodeGroups:
- name: gpu
  count: 2
  allocatable: {cpu: "64", memory: 256Gi, pods: "110"}
  gpus: {count: 2, memory: 16Gi, type: NVIDIA-L4, split: 10}
workloads:
- name: serve
  count: 24
  arrival: {start: 0s, rate: 200/s}
  template:
    spec:
      containers: [{name: s, resources: {limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "4096", nvidia.com/gpucores: "25"}}}]
"#;

#[test]
fn stale_instances_never_share_a_gpu_card_beyond_what_it_has() {
    // The API's check covers the cards written on a pod, as the fenced re-check of
    // `gantry run` does: no card ends up holding more than it has.
    let (summary, _) = run_scenario(GPU_POOL, options(4, 100, 20));
    assert_eq!(summary.scheduled, 16, "{summary:?}");
    assert!(summary.conflicts > summary.binder_conflicts, "{summary:?}");
}

/// Issue 18: a nomination is every instance's to honour. Instance 0's critical pod
/// preempts the only node's low-priority pod; a small pod instance 1 owns arrives once the
/// nomination has reached instance 1's watch. It must leave the freed room to the
/// preemptor (kube-scheduler's nominator counts it), not take it and be preempted in turn.
#[test]
fn another_instances_nomination_keeps_the_room_it_freed() {
    let mut cluster = ClusterObjects::default();
    cluster.nodes = vec![node("n1", 1)];
    cluster.pods = vec![
        Pod::new("default", "low")
            .with_requests(700, GIB)
            .on_node("n1"),
    ];
    let profiles = vec![default_profile("default-scheduler")];
    let mut sim = Simulation::new(cluster, profiles, options(2, 10, 50)).unwrap();
    let owned_by = |instance: u32, prefix: &str, milli_cpu: i64, priority: i32| {
        (0..)
            .map(|i| {
                Pod::new("default", &format!("{prefix}-{i}"))
                    .with_requests(milli_cpu, GIB)
                    .with_priority(priority)
            })
            .find(|pod| owner(&pod.uid, 2) == instance)
            .unwrap()
    };
    create(&mut sim, 100, owned_by(0, "critical", 800, 1000));
    create(&mut sim, 300, owned_by(1, "small", 300, 0));
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    let node_of = |prefix: &str| {
        sim.placements()
            .iter()
            .find(|p| p.pod.name.starts_with(prefix))
            .and_then(|p| p.node)
    };
    assert_eq!(node_of("critical").as_deref(), Some("n1"));
    assert_eq!(node_of("small"), None, "the room was the preemptor's");
    assert_eq!(summary.preempted, 1, "nobody preempted twice");
}
