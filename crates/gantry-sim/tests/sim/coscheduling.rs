//! scheduler-plugins' Coscheduling in the simulation: gangs held at Permit on the virtual
//! clock, let through together, rejected together, timed out, deleted while waiting; and
//! what the simulation refuses.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use gantry_framework::Profile;
use gantry_framework::config::SchedulerConfig;
use gantry_sim::{BindLatency, SimEvent, SimOptions, Simulation, Summary};

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/examples/coscheduling"
);

fn read(file: &str) -> String {
    std::fs::read_to_string(format!("{EXAMPLE}/{file}")).unwrap()
}

fn coscheduling(args: &str) -> Vec<Profile> {
    let config = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    multiPoint:\n      enabled: [{{name: Coscheduling}}]\n    queueSort:\n      enabled: [{{name: Coscheduling}}]\n      disabled: [{{name: \"*\"}}]\n  pluginConfig:\n  - name: Coscheduling\n    args: {args}\n"
    );
    SchedulerConfig::parse(&config, "config.yaml")
        .unwrap()
        .profiles
}

fn objects(text: &str) -> ClusterObjects {
    let mut objects = ClusterObjects::for_release(Release::default());
    objects.decode_more(text, "test").unwrap();
    objects
}

/// `pods` (with their PodGroups) created at 0 on the example's three nodes (10, 7, 6 cpu);
/// `deletions` at their times. Returns each pod's node or reason, and the summary.
fn run(
    profiles: Vec<Profile>,
    pods: &str,
    deletions: &[(u64, &str)],
    options: SimOptions,
) -> Result<(BTreeMap<String, String>, Summary), String> {
    let mut sim = Simulation::new(objects(&read("cluster.yaml")), profiles, options)?;
    let pods = objects(pods);
    for group in pods.coscheduling_groups {
        sim.schedule(
            Duration::ZERO,
            SimEvent::CreateCoschedulingGroup(Arc::new(group)),
        );
    }
    for pod in pods.pods {
        sim.schedule(Duration::ZERO, SimEvent::CreatePod(Arc::new(pod)));
    }
    for &(at, pod) in deletions {
        sim.schedule(Duration::from_secs(at), SimEvent::DeletePod(pod.into()));
    }
    let summary = sim.run().map_err(|e| e.to_string())?;
    sim.check_invariants().unwrap();
    let outcomes = sim
        .placements()
        .iter()
        .map(|p| {
            let outcome = match &p.node {
                Some(node) => node.to_string(),
                None => p.reason.clone().unwrap_or_default(),
            };
            (p.pod.to_string(), outcome)
        })
        .collect();
    Ok((outcomes, summary))
}

fn instant_binds() -> SimOptions {
    SimOptions {
        bind_latency: BindLatency::Fixed(Duration::ZERO),
        ..SimOptions::default()
    }
}

const POD: &str = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "NAME", "namespace": "default", "labels": {"scheduling.x-k8s.io/pod-group": "g"}}, "spec": {SPEC"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "CPU", "memory": "1Gi"}}}]}}"#;

fn gang(min_member: u32, timeout: i32, pods: &[(&str, &str, &str)]) -> String {
    let mut items = vec![format!(
        r#"{{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {{"name": "g", "namespace": "default"}}, "spec": {{"minMember": {min_member}, "scheduleTimeoutSeconds": {timeout}}}}}"#
    )];
    for (name, cpu, spec) in pods {
        items.push(
            POD.replace("NAME", name)
                .replace("CPU", cpu)
                .replace("SPEC", spec),
        );
    }
    format!(
        "{{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{}]}}",
        items.join(", ")
    )
}

/// The guide's example: with Coscheduling the trainers (which cannot all fit) hold nothing
/// and `eval` binds; without it three trainers bind and `eval` does not.
#[test]
fn a_gang_that_cannot_fit_holds_nothing() {
    let config = SchedulerConfig::parse(&read("config.yaml"), "config.yaml").unwrap();
    let (with, summary) = run(config.profiles, &read("pods.yaml"), &[], instant_binds()).unwrap();
    assert_eq!(with["default/eval-0"], "n1");
    assert_eq!(with["default/eval-1"], "n2");
    assert_eq!(with["default/web"], "n3");
    for i in 0..4 {
        assert!(
            with[&format!("default/trainer-{i}")].starts_with("0/"),
            "{with:?}"
        );
    }
    // The trainers' waits were cut short by PostFilter: their timeouts moved no clock.
    assert!(summary.virtual_s < 5.0, "{}", summary.virtual_s);
    let defaults = vec![gantry_framework::plugins::default_profile_for(
        "default-scheduler",
        Release::default(),
    )];
    let (without, _) = run(defaults, &read("pods.yaml"), &[], instant_binds()).unwrap();
    let bound = |o: &BTreeMap<String, String>, prefix: &str| {
        o.iter()
            .filter(|(pod, out)| pod.starts_with(prefix) && out.starts_with('n'))
            .count()
    };
    assert_eq!(
        (
            bound(&without, "default/trainer"),
            bound(&without, "default/eval")
        ),
        (3, 0)
    );
}

/// Two members wait; the third fits nowhere but is within the reject percentage, so the
/// waiters' `scheduleTimeoutSeconds` (`timeout`) runs out on the virtual clock. The
/// rejection names the wait as Go prints it (`said`); the first waiter's Unreserve rejects
/// the other unless its own wait has ended already (`both_time_out`).
fn a_wait_runs_out(timeout: i32, said: &str, virtual_s: f64, both_time_out: bool) {
    let pods = gang(
        3,
        timeout,
        &[
            ("g-0", "1", r#""nodeSelector": {"disk": "ssd"}, "#),
            ("g-1", "1", ""),
            ("g-2", "1", ""),
        ],
    );
    let (outcomes, summary) = run(
        coscheduling("{podGroupRejectPercentage: 70}"),
        &pods,
        &[],
        instant_binds(),
    )
    .unwrap();
    let timed_out = format!(
        "0/1 nodes are available: 1 rejected due to timeout after waiting {said} at plugin Coscheduling."
    );
    let unreserved = "0/1 nodes are available: 1 rejection in Unreserve.";
    let mut waited = vec![
        outcomes["default/g-1"].as_str(),
        outcomes["default/g-2"].as_str(),
    ];
    waited.sort();
    let other = if both_time_out {
        &timed_out
    } else {
        unreserved
    };
    assert_eq!(waited, [timed_out.as_str(), other]);
    assert!(outcomes["default/g-0"].contains("didn't match Pod's node affinity/selector"));
    assert_eq!(summary.virtual_s, virtual_s);
    assert_eq!(summary.scheduled, 0);
}

#[test]
fn waits_run_out_on_the_virtual_clock() {
    a_wait_runs_out(7, "7s", 7.0, false);
}

/// A negative `scheduleTimeoutSeconds` (the CRD takes it): each wait ends as it starts
/// (upstream's timer fires at once), and the rejection names the negative duration as Go
/// prints it.
#[test]
fn a_negative_timeout_ends_the_wait_at_once_and_says_so() {
    a_wait_runs_out(-5, "-5s", 0.0, true);
}

/// A member deleted while it waits is withdrawn (its room freed); the other waiting member
/// is rejected by its Unreserve, and the run ends.
#[test]
fn a_member_deleted_while_waiting_is_withdrawn() {
    let pods = gang(
        3,
        30,
        &[
            ("g-0", "1", r#""nodeSelector": {"disk": "ssd"}, "#),
            ("g-1", "1", ""),
            ("g-2", "1", ""),
        ],
    );
    let (outcomes, summary) = run(
        coscheduling("{podGroupRejectPercentage: 70}"),
        &pods,
        &[(2, "default/g-1")],
        instant_binds(),
    )
    .unwrap();
    assert_eq!(outcomes["default/g-1"], "deleted before it was scheduled");
    assert_eq!(
        outcomes["default/g-2"],
        "0/1 nodes are available: 1 rejection in Unreserve."
    );
    assert_eq!(summary.virtual_s, 2.0);
}

/// Waiting at Permit needs the whole gang in one instance, and pods submitted together.
#[test]
fn several_instances_and_sequential_runs_are_refused() {
    let pods = gang(1, 1, &[("g-0", "1", "")]);
    let many = SimOptions {
        schedulers: 2,
        ..SimOptions::default()
    };
    let err = run(coscheduling("{}"), &pods, &[], many).unwrap_err();
    assert!(
        err.starts_with("schedulers: Coscheduling is modelled for one scheduler instance, not 2"),
        "{err}"
    );
    let sequential = SimOptions {
        sequential: true,
        ..SimOptions::default()
    };
    let err = run(coscheduling("{}"), &pods, &[], sequential).unwrap_err();
    assert!(
        err.starts_with("sequential: Coscheduling holds a gang's pods at Permit"),
        "{err}"
    );
}

/// PodGroups that exist before the run are older than any pod of it, in the order of their
/// creation timestamps: the older group is tried first, whatever the names say.
#[test]
fn groups_read_at_the_start_are_ordered_by_their_creation() {
    let group = |name: &str, day: u32| {
        format!(
            r#"{{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {{"name": "{name}", "namespace": "default", "creationTimestamp": "2026-12-0{day}T00:00:00Z"}}, "spec": {{"minMember": 3}}}}"#
        )
    };
    let mut cluster = objects(&read("cluster.yaml"));
    let groups = format!(
        "{{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{}, {}]}}",
        group("a-young", 2),
        group("b-old", 1)
    );
    cluster.decode_more(&groups, "groups").unwrap();
    let mut sim = Simulation::new(cluster, coscheduling("{}"), instant_binds()).unwrap();
    for owner in ["a-young", "b-old"] {
        for i in 0..3 {
            let pod = POD
                .replace("NAME", &format!("{owner}-{i}"))
                .replace("\"g\"", &format!("\"{owner}\""))
                .replace("CPU", "6")
                .replace("SPEC", "");
            let pod = objects(&pod).pods.remove(0);
            sim.schedule(Duration::ZERO, SimEvent::CreatePod(Arc::new(pod)));
        }
    }
    sim.run().unwrap();
    let bound: Vec<String> = sim
        .placements()
        .iter()
        .filter(|p| p.node.is_some())
        .map(|p| p.pod.to_string())
        .collect();
    assert_eq!(
        bound,
        ["default/b-old-0", "default/b-old-1", "default/b-old-2"]
    );
}
