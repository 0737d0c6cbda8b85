//! Workload-aware preemption (v1.36, WorkloadAwarePreemption): which pods a gang that
//! cannot fit evicts. The cases are upstream's `TestPodGroupEvaluator_Preempt_Victims`
//! (`framework/preemption/podgrouppreemption_test.go`) whose rules v1.36.3 shares, with
//! its test filter's "size" as cpu: the preemptor (a gang of one pod, priority 1000) fits
//! once the victims are gone, and the victims are those upstream expects.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_api::{Pod, PodGroup, Release};
use gantry_framework::plugins::default_profile_for;
use gantry_sim::{SimEvent, SimOptions, Simulation};

fn preemption_on() -> Release {
    Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true,WorkloadAwarePreemption=true"),
    )
    .unwrap()
}

/// A node of `cpu` cpus.
fn node(name: &str, cpu: u32) -> String {
    format!(
        "- {{kind: Node, apiVersion: v1, metadata: {{name: {name}}}, status: {{allocatable: {{cpu: \"{cpu}\", memory: 64Gi, pods: \"110\"}}}}}}"
    )
}

/// A running pod of one cpu on `node`, of priority class `class`, in `group` if any,
/// started at `start` (seconds since the epoch) if given.
fn running(name: &str, node: &str, class: &str, group: Option<&str>, start: Option<i64>) -> String {
    let group = group.map_or(String::new(), |g| {
        format!(", schedulingGroup: {{podGroupName: {g}}}")
    });
    let status = start.map_or(String::new(), |s| {
        let time = rfc3339_at(s);
        format!(", status: {{startTime: \"{time}\"}}")
    });
    format!(
        "- {{kind: Pod, apiVersion: v1, metadata: {{name: {name}, namespace: default, labels: {{app: {name}}}}}, spec: {{nodeName: {node}, priorityClassName: {class}, containers: [{{name: c, image: i, resources: {{requests: {{cpu: \"1\"}}}}}}]{group}}}{status}}}"
    )
}

/// `1970-01-01T00:00:SSZ`: the few seconds these cases need.
fn rfc3339_at(seconds: i64) -> String {
    assert!((0..60).contains(&seconds));
    format!("1970-01-01T00:00:{seconds:02}Z")
}

/// A PodGroup of `class`'s priority, preempted whole or pod by pod.
fn group(name: &str, class: &str, whole: bool) -> String {
    let mode = if whole { "PodGroup" } else { "Pod" };
    format!(
        "- {{kind: PodGroup, apiVersion: scheduling.k8s.io/v1alpha2, metadata: {{name: {name}, namespace: default}}, spec: {{schedulingPolicy: {{gang: {{minCount: 1}}}}, priorityClassName: {class}, disruptionMode: {mode}}}}}"
    )
}

const CLASSES: &str =
    "- {kind: PriorityClass, apiVersion: scheduling.k8s.io/v1, metadata: {name: low}, value: 10}
- {kind: PriorityClass, apiVersion: scheduling.k8s.io/v1, metadata: {name: mid}, value: 100}
- {kind: PriorityClass, apiVersion: scheduling.k8s.io/v1, metadata: {name: high}, value: 1000}";

/// The simulation of a one-pod gang of priority 1000 asking `milli_cpu` arriving on
/// `cluster` (with the PriorityClasses and whatever `extra` adds), run to its end.
fn preempting_gang(cluster: &[String], extra: &str, milli_cpu: i64) -> Simulation {
    let release = preemption_on();
    let yaml = format!(
        "kind: List\nitems:\n{}\n{CLASSES}\n{extra}",
        cluster.join("\n")
    );
    let mut objects = ClusterObjects::for_release(release);
    objects.decode_more(&yaml, "cluster").unwrap();
    objects.resolve_priorities().unwrap();
    let mut sim = Simulation::new(
        objects,
        vec![default_profile_for("default-scheduler", release)],
        SimOptions::default(),
    )
    .unwrap();
    let preemptor = PodGroup::gang("default", "preemptor", 1).with_priority(1000);
    sim.schedule(
        Duration::ZERO,
        SimEvent::CreatePodGroup(Arc::new(preemptor)),
    );
    let mut pod = Pod::new("default", "p").with_requests(milli_cpu, 1 << 20);
    pod.scheduling_group = Some(gantry_api::Sym::new("preemptor"));
    pod.priority = 1000;
    sim.schedule(Duration::ZERO, SimEvent::CreatePod(Arc::new(pod)));
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    sim
}

/// The pods evicted once the gang of one cpu arrives, sorted; the gang's pod must be bound.
fn victims(cluster: &[String], extra: &str) -> Vec<String> {
    let sim = preempting_gang(cluster, extra, 1000);
    let placements = sim.placements();
    let p = (placements.iter()).find(|p| p.pod == "default/p").unwrap();
    assert!(p.node.is_some(), "the gang is bound: {:?}", p.reason);
    let mut evicted: Vec<String> = (placements.iter())
        .flat_map(|p| p.evicted.iter().cloned())
        .collect();
    evicted.sort();
    evicted
}

#[test]
fn a_lone_pod_goes_before_a_group_member_of_its_priority() {
    // "Priority: mix of no groups and pod groups".
    let cluster = [
        node("node1", 2),
        group("pg1", "low", false),
        running("p1", "node1", "low", None, None),
        running("p2", "node1", "low", Some("pg1"), None),
    ];
    assert_eq!(victims(&cluster, ""), ["default/p1"]);
}

#[test]
fn of_two_members_preempted_pod_by_pod_the_later_started_goes() {
    // "Priority: StartTime of pods from same group with disruption mode single".
    let cluster = [
        node("node1", 2),
        group("pg1", "low", false),
        running("p1", "node1", "low", Some("pg1"), Some(1)),
        running("p2", "node1", "low", Some("pg1"), Some(0)),
    ];
    assert_eq!(victims(&cluster, ""), ["default/p1"]);
}

#[test]
fn a_group_preempted_whole_is_evicted_whole() {
    // "Pod group with disruption mode group not reprieved": one node would do.
    let cluster = [
        node("node1", 1),
        node("node2", 1),
        group("pg1", "low", true),
        running("p1", "node1", "low", Some("pg1"), None),
        running("p2", "node2", "low", Some("pg1"), None),
    ];
    assert_eq!(victims(&cluster, ""), ["default/p1", "default/p2"]);
}

#[test]
fn a_pod_a_budget_protects_is_spared_first() {
    // "PDB: Mixed groups": the budget allows no disruption of `victim-pdb`.
    let cluster = [
        node("node1", 2),
        group("pg1", "low", false),
        running("victim-pdb", "node1", "low", Some("pg1"), None),
        running("victim-no-pdb", "node1", "low", Some("pg1"), None),
    ];
    let budget = "- {kind: PodDisruptionBudget, apiVersion: policy/v1, metadata: {name: b, namespace: default}, spec: {selector: {matchLabels: {app: victim-pdb}}}, status: {disruptionsAllowed: 0}}";
    assert_eq!(victims(&cluster, budget), ["default/victim-no-pdb"]);
    // Without it they are equal, and one goes (which, upstream leaves to its map's order).
    assert_eq!(victims(&cluster, "").len(), 1);
}

#[test]
fn a_higher_priority_unit_is_spared_before_a_lower_one() {
    let cluster = [
        node("node1", 1),
        node("node2", 1),
        running("a", "node1", "mid", None, None),
        running("b", "node2", "low", None, None),
    ];
    assert_eq!(victims(&cluster, ""), ["default/b"]);
}

/// Without the lower-priority pods the gang still does not fit: the trial's own status
/// joins the group's (`pod group is unschedulable, pod group is unschedulable`), and
/// nothing is evicted.
#[test]
fn a_gang_that_fits_not_even_without_its_victims_evicts_nothing() {
    let cluster = [node("node1", 1), running("a", "node1", "low", None, None)];
    let sim = preempting_gang(&cluster, "", 2000);
    let group = (sim.pod_groups().into_iter())
        .find(|g| g.group == "default/preemptor")
        .unwrap();
    assert_eq!(
        group.condition.unwrap().message.to_string(),
        "pod group is unschedulable, pod group is unschedulable"
    );
    assert!(sim.placements().iter().all(|p| p.evicted.is_empty()));
}

/// A member created while its group's victims are deleted in the background (50 ms an API
/// call) is held back with the others: upstream's PreEnqueue asks
/// `IsPodGroupRunningPreemption` of its PodGroup. It is tried only with its group once the
/// victims are gone, and nothing is preempted a second time.
#[test]
fn a_member_created_during_its_groups_preemption_waits_for_it() {
    let ms = Duration::from_millis;
    let release = preemption_on();
    let cluster = [
        node("node1", 1),
        node("node2", 1),
        running("v1", "node1", "low", None, None),
        running("v2", "node2", "low", None, None),
    ];
    let yaml = format!("kind: List\nitems:\n{}\n{CLASSES}", cluster.join("\n"));
    let mut objects = ClusterObjects::for_release(release);
    objects.decode_more(&yaml, "cluster").unwrap();
    objects.resolve_priorities().unwrap();
    let options = SimOptions {
        bind_latency: gantry_sim::BindLatency::Fixed(ms(50)),
        ..SimOptions::default()
    };
    let profile = default_profile_for("default-scheduler", release);
    let mut sim = Simulation::new(objects, vec![profile], options).unwrap();
    let gang = PodGroup::gang("default", "g", 2).with_priority(1000);
    sim.schedule(Duration::ZERO, SimEvent::CreatePodGroup(Arc::new(gang)));
    for (name, at) in [("g-0", ms(0)), ("g-1", ms(0)), ("g-2", ms(30))] {
        let mut pod = Pod::new("default", name).with_requests(1000, 1 << 20);
        pod.scheduling_group = Some(gantry_api::Sym::new("g"));
        pod.priority = 1000;
        sim.schedule(at, SimEvent::CreatePod(Arc::new(pod)));
    }
    sim.run_until(ms(150)).unwrap();
    let evicted: usize = (sim.placements().iter()).map(|p| p.evicted.len()).sum();
    assert!(evicted < 2, "the victims are still being deleted");
    let late = (sim.placements().iter()).position(|p| p.pod == "default/g-2");
    assert_eq!(
        sim.histories()[late.unwrap()].attempts,
        0,
        "g-2 is held back"
    );
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    let evicted: usize = (sim.placements().iter()).map(|p| p.evicted.len()).sum();
    assert_eq!(evicted, 2);
    // Two of the three fit once the victims are gone (which two is the group cycle's
    // order: members never tried first, as upstream's).
    let bound = (sim.placements().iter())
        .filter(|p| p.node.is_some())
        .count();
    assert_eq!(bound, 2, "{:?}", sim.placements());
}
