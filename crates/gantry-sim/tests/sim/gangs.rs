//! Gangs through a whole simulation, as kube-scheduler v1.36 schedules them with
//! GenericWorkload and GangScheduling on (PodGroup `scheduling.k8s.io/v1alpha2`): the
//! behaviour issue 34 saw against a real v1.36.2, and the all-or-nothing invariant.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_api::{Pod, PodGroup, Release};
use gantry_framework::plugins::default_profile_for;
use gantry_sim::{SimEvent, SimOptions, Simulation};
use proptest::prelude::*;

fn gangs_on() -> Release {
    Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true"),
    )
    .unwrap()
}

fn nodes(cpus: &[u32]) -> ClusterObjects {
    let items: Vec<String> = cpus
        .iter()
        .enumerate()
        .map(|(i, cpu)| {
            format!(
                "- kind: Node\n  metadata: {{name: n{i}}}\n  status: {{allocatable: {{cpu: \"{cpu}\", memory: 64Gi, pods: \"110\"}}}}"
            )
        })
        .collect();
    ClusterObjects::decode(
        &format!("kind: List\nitems:\n{}\n", items.join("\n")),
        "nodes",
    )
    .unwrap()
}

fn member(name: &str, group: Option<&str>, milli_cpu: i64) -> Arc<Pod> {
    let mut pod = Pod::new("default", name).with_requests(milli_cpu, 1 << 30);
    pod.scheduling_group = group.map(gantry_api::Sym::new);
    Arc::new(pod)
}

fn simulation(cluster: ClusterObjects, release: Release) -> Simulation {
    Simulation::new(
        cluster,
        vec![default_profile_for("default-scheduler", release)],
        SimOptions::default(),
    )
    .unwrap()
}

/// `namespace/name` → node, or the reason it is pending.
fn outcome(sim: &Simulation) -> Vec<(String, Result<String, String>)> {
    sim.placements()
        .iter()
        .map(|p| {
            let result = match &p.node {
                Some(node) => Ok(node.to_string()),
                None => Err(p.reason.clone().unwrap_or_default()),
            };
            (p.pod.to_string(), result)
        })
        .collect()
}

const HELD: &str = "waiting for minCount pods from a gang to appear in scheduling queue";
const GROUP_REJECTED: &str = "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more plugins asked to wait and no plugin rejected pod";

/// A PodGroup of minCount 4 with 3 pods: no attempt, no condition; the fourth lets all
/// four in at once, and the group is `PodGroupScheduled=True`.
#[test]
fn a_gang_waits_for_its_quorum_of_members_then_binds_at_once() {
    let mut sim = simulation(nodes(&[8, 8]), gangs_on());
    sim.schedule(
        Duration::ZERO,
        SimEvent::CreatePodGroup(Arc::new(PodGroup::gang("default", "g", 4))),
    );
    for i in 0..3 {
        sim.schedule(
            Duration::ZERO,
            SimEvent::CreatePod(member(&format!("p{i}"), Some("g"), 1000)),
        );
    }
    sim.run_until(Duration::from_secs(10)).unwrap();
    assert!(
        outcome(&sim)
            .iter()
            .all(|(_, r)| r.as_ref().err().map(String::as_str) == Some(HELD)),
        "{:?}",
        outcome(&sim)
    );
    assert!(sim.histories().iter().all(|h| h.attempts == 0));
    assert_eq!(sim.pod_groups()[0].condition, None);
    sim.schedule(
        Duration::from_secs(11),
        SimEvent::CreatePod(member("p3", Some("g"), 1000)),
    );
    let summary = sim.run().unwrap();
    assert!(
        outcome(&sim).iter().all(|(_, r)| r.is_ok()),
        "{:?}",
        outcome(&sim)
    );
    let group = &sim.pod_groups()[0];
    let condition = group.condition.as_ref().unwrap();
    assert_eq!((condition.status, condition.reason), ("True", "Scheduled"));
    assert_eq!(group.scheduled_at, Some(Duration::from_secs(11)));
    assert_eq!(group.time_to_placement(), Some(Duration::from_secs(11)));
    // One pod-group cycle tried all four.
    assert_eq!(group.cycles, 1);
    assert_eq!(summary.attempts, 4);
    assert!(sim.histories().iter().all(|h| h.attempts == 1));
}

/// 4 pods of 3 cpu on 3 nodes of 4 cpu: none bound; the three that fitted are rejected
/// with the group, the fourth with its own fit error; the PodGroup is
/// `PodGroupScheduled=False`, `pod group is unschedulable`. Without the gates three bind.
#[test]
fn a_gang_that_cannot_fit_whole_holds_nothing() {
    let run = |release: Release| {
        let mut sim = simulation(nodes(&[4, 4, 4]), release);
        sim.schedule(
            Duration::ZERO,
            SimEvent::CreatePodGroup(Arc::new(PodGroup::gang("default", "g", 4))),
        );
        for i in 0..4 {
            sim.schedule(
                Duration::ZERO,
                SimEvent::CreatePod(member(&format!("p{i}"), Some("g"), 3000)),
            );
        }
        sim.run().unwrap();
        sim
    };
    let sim = run(gangs_on());
    let results = outcome(&sim);
    let rejected = results
        .iter()
        .filter(|(_, r)| r.as_ref().err().map(String::as_str) == Some(GROUP_REJECTED))
        .count();
    assert_eq!(rejected, 3, "{results:?}");
    assert!(results.iter().all(|(_, r)| r.is_err()));
    assert!(results.iter().any(|(_, r)| {
        r.as_ref()
            .err()
            .is_some_and(|m| m.starts_with("0/3 nodes are available: 3 Insufficient cpu."))
    }));
    let condition = sim.pod_groups()[0].condition.clone().unwrap();
    assert_eq!(
        (
            condition.status,
            condition.reason,
            condition.message.as_str()
        ),
        ("False", "Unschedulable", "pod group is unschedulable")
    );
    // Nothing is held on the nodes.
    assert_eq!(sim.api.totals().requested_milli_cpu, 0);

    let ungated = run(Release::parse(Some("1.36"), None).unwrap());
    let bound = outcome(&ungated).iter().filter(|(_, r)| r.is_ok()).count();
    assert_eq!(bound, 3);
}

/// A pod naming a PodGroup that does not exist is held, and scheduled once it is created;
/// without the gates the API server drops `schedulingGroup` and the pod binds at once.
#[test]
fn a_pod_of_a_missing_group_waits_for_it() {
    let mut sim = simulation(nodes(&[4]), gangs_on());
    sim.schedule(
        Duration::ZERO,
        SimEvent::CreatePod(member("o", Some("later"), 1000)),
    );
    sim.run_until(Duration::from_secs(5)).unwrap();
    assert_eq!(
        outcome(&sim)[0].1,
        Err(r#"waiting for pods's pod group "later" to appear in scheduling queue"#.into())
    );
    sim.schedule(
        Duration::from_secs(6),
        SimEvent::CreatePodGroup(Arc::new(PodGroup::gang("default", "later", 1))),
    );
    sim.run().unwrap();
    assert_eq!(outcome(&sim)[0].1, Ok("n0".into()));
    // Created at 6 s and placed at once: the report's time to placement counts from then.
    let group = &sim.pod_groups()[0];
    assert_eq!(group.created_at, Duration::from_secs(6));
    assert_eq!(group.time_to_placement(), Some(Duration::ZERO));

    let pod = r#"
kind: Pod
metadata: {name: o, namespace: default}
spec:
  schedulingGroup: {podGroupName: later}
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"#;
    let off = Release::parse(Some("1.36"), None).unwrap();
    let mut decoded = ClusterObjects::for_release(off);
    decoded.decode_more(pod, "pod.yaml").unwrap();
    assert_eq!(decoded.pods[0].scheduling_group, None);
    let mut decoded = ClusterObjects::for_release(gangs_on());
    decoded.decode_more(pod, "pod.yaml").unwrap();
    assert_eq!(decoded.pods[0].scheduling_group.unwrap().as_str(), "later");
}

/// A gang of minCount 3 with 5 members and room for 4: the group is scheduled, 4 bind,
/// the fifth keeps its own fit error.
#[test]
fn members_past_the_quorum_that_do_not_fit_stay_pending_alone() {
    let mut sim = simulation(nodes(&[2, 2]), gangs_on());
    sim.schedule(
        Duration::ZERO,
        SimEvent::CreatePodGroup(Arc::new(PodGroup::gang("default", "g", 3))),
    );
    for i in 0..5 {
        sim.schedule(
            Duration::ZERO,
            SimEvent::CreatePod(member(&format!("p{i}"), Some("g"), 1000)),
        );
    }
    sim.run().unwrap();
    let results = outcome(&sim);
    assert_eq!(results.iter().filter(|(_, r)| r.is_ok()).count(), 4);
    let pending: Vec<_> = results
        .iter()
        .filter_map(|(_, r)| r.as_ref().err())
        .collect();
    assert_eq!(pending.len(), 1);
    assert!(
        pending[0].starts_with("0/2 nodes are available: 2 Insufficient cpu."),
        "{pending:?}"
    );
    let condition = sim.pod_groups()[0].condition.clone().unwrap();
    assert_eq!(condition.status, "True");
}

/// Gangs `(size, minCount, cpu)` created one member every `spacing`, a single pod after
/// each gang where `singles` has one, on nodes of `node_cpus`: every pod's outcome.
fn run_gangs(
    options: &SimOptions,
    spacing: Duration,
    node_cpus: &[u32],
    gangs: &[(usize, u32, i64)],
    singles: &[i64],
) -> Vec<(String, Result<String, String>)> {
    let mut sim = Simulation::new(
        nodes(node_cpus),
        vec![default_profile_for("default-scheduler", gangs_on())],
        options.clone(),
    )
    .unwrap();
    let mut at = Duration::ZERO;
    for (g, &(size, min, cpu)) in gangs.iter().enumerate() {
        let min = min.min(size as u32);
        let name = format!("g{g}");
        sim.schedule(
            at,
            SimEvent::CreatePodGroup(Arc::new(PodGroup::gang("default", &name, min))),
        );
        for m in 0..size {
            at += spacing;
            let pod = member(&format!("{name}-{m}"), Some(&name), cpu * 1000);
            sim.schedule(at, SimEvent::CreatePod(pod));
        }
        if let Some(cpu) = singles.get(g) {
            let pod = member(&format!("single-{g}"), None, cpu * 1000);
            sim.schedule(at, SimEvent::CreatePod(pod));
        }
    }
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    outcome(&sim)
}

/// Fails unless every gang has no member bound or at least its minCount bound.
fn all_or_nothing(
    gangs: &[(usize, u32, i64)],
    results: &[(String, Result<String, String>)],
) -> Result<(), TestCaseError> {
    for (g, &(size, min, _)) in gangs.iter().enumerate() {
        let min = min.min(size as u32) as usize;
        let prefix = format!("default/g{g}-");
        let bound = (results.iter())
            .filter(|(p, r)| p.starts_with(&prefix) && r.is_ok())
            .count();
        prop_assert!(
            bound == 0 || bound >= min,
            "gang g{g}: {bound} of {size} bound, minCount {min}: {results:?}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// All or nothing: at the end, a gang has no member bound or at least minCount bound;
    /// and the same input and seed give the same placements.
    #[test]
    fn a_gang_binds_its_quorum_or_nothing(
        node_cpus in prop::collection::vec(1u32..8, 1..6),
        gangs in prop::collection::vec((1usize..6, 1u32..6, 1i64..4), 1..5),
        singles in prop::collection::vec(1i64..4, 0..6),
    ) {
        let options = SimOptions::default();
        let second = Duration::from_secs(1);
        let results = run_gangs(&options, second, &node_cpus, &gangs, &singles);
        all_or_nothing(&gangs, &results)?;
        prop_assert_eq!(results, run_gangs(&options, second, &node_cpus, &gangs, &singles));
    }

    /// The same with 2 to 8 instances dividing the pods, each seeing the others' binds a
    /// watch latency of up to 100 ms late and pods arriving up to 50 ms apart: a gang is
    /// one instance's whole, so no gang is ever left partly bound, whatever the races
    /// between instances over the nodes; and with a node roomy enough for every pod, every
    /// gang is bound whole (a gang divided between instances would never be).
    #[test]
    fn instances_sharing_the_cluster_bind_a_gang_whole_or_not_at_all(
        schedulers in 2u32..=8,
        latency_ms in 0u64..=100,
        spacing_ms in 0u64..=50,
        node_cpus in prop::collection::vec(1u32..8, 1..6),
        gangs in prop::collection::vec((1usize..6, 1u32..6, 1i64..4), 1..8),
        singles in prop::collection::vec(1i64..4, 0..8),
    ) {
        let options = SimOptions {
            schedulers,
            event_latency: Duration::from_millis(latency_ms),
            ..SimOptions::default()
        };
        let spacing = Duration::from_millis(spacing_ms);
        let results = run_gangs(&options, spacing, &node_cpus, &gangs, &singles);
        all_or_nothing(&gangs, &results)?;
        prop_assert_eq!(&results, &run_gangs(&options, spacing, &node_cpus, &gangs, &singles));

        let mut roomy = node_cpus.clone();
        roomy.push(1000);
        let results = run_gangs(&options, spacing, &roomy, &gangs, &singles);
        let unbound: Vec<_> = results.iter().filter(|(_, r)| r.is_err()).collect();
        prop_assert!(unbound.is_empty(), "{} instances: {unbound:?}", schedulers);
    }
}

/// TopologyAwareWorkloadScheduling on, and no node carries the group's topology key: the
/// generator makes no placement, and every member fails with RunPlacementGeneratePlugins'
/// status (`no feasible placements found`), as the group's condition says too.
#[test]
fn a_topology_key_no_node_carries_leaves_the_gang_without_a_placement() {
    let release = Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"),
    )
    .unwrap();
    let mut sim = simulation(nodes(&[8, 8]), release);
    let group = PodGroup::gang("default", "g", 2).in_one_domain_of("example.com/rack");
    sim.schedule(Duration::ZERO, SimEvent::CreatePodGroup(Arc::new(group)));
    for i in 0..2 {
        sim.schedule(
            Duration::from_secs(1),
            SimEvent::CreatePod(member(&format!("p{i}"), Some("g"), 1000)),
        );
    }
    sim.run().unwrap();
    let results = outcome(&sim);
    assert_eq!(
        results,
        vec![
            (
                "default/p0".into(),
                Err("no feasible placements found".into())
            ),
            (
                "default/p1".into(),
                Err("no feasible placements found".into())
            ),
        ]
    );
    let condition = sim.pod_groups()[0].condition.clone().unwrap();
    assert_eq!(
        (condition.status, condition.message.as_str()),
        ("False", "no feasible placements found")
    );
}

/// A pod of 3 cpu and priority `priority`, in `group` if given.
fn prioritised(name: &str, group: Option<&str>, priority: i32) -> Arc<Pod> {
    let mut pod = Pod::clone(&member(name, group, 3000));
    pod.priority = priority;
    Arc::new(pod)
}

/// Nodes of 4 cpu, the first ones holding `blockers` (3 cpu, of these priorities), then at 1 s a
/// gang of `minCount: 2` whose members (3 cpu, priority 1000) fit only by preemption. The
/// API's changes reach the scheduler 50 ms late: the first group cycle runs at 1.05 s, and
/// its victims are deleted in the background after it (SchedulerAsyncPreemption), so its
/// outcome can be seen at 1.05 s.
fn gang_over_blockers(cpus: &[u32], blockers: [i32; 2]) -> Simulation {
    let options = SimOptions {
        event_latency: Duration::from_millis(50),
        ..SimOptions::default()
    };
    let release = gangs_on();
    let profile = default_profile_for("default-scheduler", release);
    let mut sim = Simulation::new(nodes(cpus), vec![profile], options).unwrap();
    for (i, priority) in blockers.into_iter().enumerate() {
        let blocker = prioritised(&format!("blocker-{i}"), None, priority);
        sim.schedule(Duration::ZERO, SimEvent::CreatePod(blocker));
    }
    let group = Arc::new(PodGroup::gang("default", "g", 2));
    sim.schedule(Duration::from_secs(1), SimEvent::CreatePodGroup(group));
    for i in 0..2 {
        let pod = prioritised(&format!("g-{i}"), Some("g"), 1000);
        sim.schedule(Duration::from_secs(1), SimEvent::CreatePod(pod));
    }
    sim
}

/// The pods each pod's preemption evicted.
fn evicted(sim: &Simulation) -> Vec<String> {
    let mut evicted: Vec<String> = (sim.placements().iter())
        .flat_map(|p| p.evicted.iter().cloned())
        .collect();
    evicted.sort();
    evicted
}

/// Upstream's `podGroupSchedulingDefaultAlgorithm` (v1.36.3): a member that fits only by
/// preemption is assumed on the node it nominated, so the next member preempts on the
/// other node; the group would then be scheduled, but waits for the preemptions (its
/// condition says so, each member fails with its fit error, its victims not deleted yet),
/// and binds once the victims are gone (`testdata/gang-1.36/preempts-for-members`,
/// recorded).
#[test]
fn a_gang_whose_members_preempt_waits_for_the_preemptions_then_binds() {
    let mut sim = gang_over_blockers(&[4, 4], [0, 0]);
    sim.run_until(Duration::from_millis(1_050)).unwrap();
    let condition = sim.pod_groups()[0].condition.clone().unwrap();
    assert_eq!(
        (
            condition.status,
            condition.reason,
            condition.message.as_str()
        ),
        (
            "False",
            "Unschedulable",
            "pod group is unschedulable, pod group is waiting for preemption to complete"
        )
    );
    let fit_error = Err("0/2 nodes are available: 2 Insufficient cpu.".to_string());
    let members: Vec<_> = outcome(&sim).into_iter().skip(2).collect();
    assert_eq!(
        members,
        [
            ("default/g-0".to_string(), fit_error.clone()),
            ("default/g-1".to_string(), fit_error)
        ]
    );
    assert!(evicted(&sim).is_empty());
    sim.run().unwrap();
    assert_eq!(evicted(&sim), ["default/blocker-0", "default/blocker-1"]);
    let bound: Vec<_> = outcome(&sim).into_iter().skip(2).map(|(_, r)| r).collect();
    assert!(
        bound.contains(&Ok("n0".to_string())) && bound.contains(&Ok("n1".to_string())),
        "{bound:?}"
    );
    let group = &sim.pod_groups()[0];
    assert_eq!(group.condition.as_ref().unwrap().status, "True");
    assert!(group.cycles >= 2, "{}", group.cycles);
}

/// When only one member can preempt its way in (the other node's pod outranks the gang),
/// the group fails: the member that preempted is rejected with its Permit message and no
/// nomination, its victim is deleted all the same (upstream's preemption has already
/// started), and it is held back until then. The other member, tried at once without it,
/// preempts the same victim and is held back too; both keep the Permit message, and
/// neither comes back (`testdata/gang-1.36/preemption-cannot-complete-gang`, recorded).
#[test]
fn a_gang_only_one_member_can_preempt_into_is_held_back_whole() {
    let mut sim = gang_over_blockers(&[4, 4], [0, 2000]);
    sim.run_until(Duration::from_millis(1_050)).unwrap();
    assert_eq!(sim.pod_groups()[0].cycles, 2);
    assert!(evicted(&sim).is_empty());
    sim.run().unwrap();
    let condition = sim.pod_groups()[0].condition.clone().unwrap();
    assert_eq!(
        (condition.status, condition.message.as_str()),
        ("False", "pod group is unschedulable")
    );
    let reasons: Vec<String> = (outcome(&sim).into_iter().skip(2))
        .map(|(_, r)| r.unwrap_err())
        .collect();
    assert_eq!(reasons, [GROUP_REJECTED, GROUP_REJECTED]);
    assert_eq!(evicted(&sim), ["default/blocker-0"]);
    assert_eq!(sim.pod_groups()[0].cycles, 2);
}

/// A member that fits without preemption, in a group waiting for another's, fails with the
/// group's status (upstream nominates it to the node it fitted), and binds there after.
#[test]
fn a_member_that_fits_waits_with_its_group_for_another_s_preemption() {
    let mut sim = gang_over_blockers(&[4, 4, 4], [0, 0]);
    sim.run_until(Duration::from_millis(1_050)).unwrap();
    let members: Vec<_> = outcome(&sim).into_iter().skip(2).collect();
    assert_eq!(
        members,
        [
            (
                "default/g-0".to_string(),
                Err(
                    "pod group is unschedulable, pod group is waiting for preemption to complete"
                        .to_string()
                )
            ),
            (
                "default/g-1".to_string(),
                Err("0/3 nodes are available: 3 Insufficient cpu.".to_string())
            )
        ]
    );
    assert!(evicted(&sim).is_empty());
    sim.run().unwrap();
    assert_eq!(evicted(&sim).len(), 1);
    assert_eq!(
        outcome(&sim)[2],
        ("default/g-0".to_string(), Ok("n2".to_string()))
    );
    assert!(outcome(&sim)[3].1.is_ok(), "{:?}", outcome(&sim));
}
