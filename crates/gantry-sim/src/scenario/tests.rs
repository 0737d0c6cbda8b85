//! Scenario parsing tests: the example expanded, bad files naming their field, durations
//! and rates.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::{Pod, Sym};

use crate::SimEvent;

use super::*;

const EXAMPLE: &str = r#"
name: example
priorityClasses: [{name: high, value: 1000}]
nodeGroups:
- name: general
  count: 4
  zones: [zone-a, zone-b]
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
  labels: {pool: general}
- name: gpu
  count: 1
  allocatable: {cpu: "8", memory: 64Gi, pods: "110", nvidia.com/gpu: "4"}
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
workloads:
- name: web
  count: 6
  arrival: {start: 1s, rate: 2/s}
  template:
    metadata: {labels: {app: web}}
    spec:
      priorityClassName: high
      containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
events:
- {at: 10s, addNodes: {group: general, count: 2}}
- {at: 20s, drainNodes: {group: gpu, count: 1}}
- {at: 30s, scale: {workload: web, count: 3}}
- {at: 40s, deletePods: {workload: web, count: 2}}
"#;

#[test]
fn example_scenario_expands_into_nodes_and_timed_events() {
    let s = Scenario::parse(EXAMPLE, "example.yaml").unwrap();
    assert_eq!(s.name, "example");
    assert_eq!(s.cluster.nodes.len(), 5);
    let gpu = &s.cluster.nodes[4];
    assert_eq!(gpu.taints.len(), 1);
    assert_eq!(gpu.allocatable.scalar(Sym::new("nvidia.com/gpu")), 4);
    assert_eq!(
        s.cluster.nodes[1]
            .labels
            .get_str("topology.kubernetes.io/zone"),
        Some(Sym::new("zone-b"))
    );
    let creates: Vec<(Duration, &Arc<Pod>)> = s
        .events
        .iter()
        .filter_map(|(t, e)| match e {
            SimEvent::CreatePod(p) => Some((*t, p)),
            _ => None,
        })
        .collect();
    assert_eq!(creates.len(), 9);
    assert_eq!(creates[0].0, Duration::from_secs(1));
    assert_eq!(
        creates[1].0,
        Duration::from_millis(1500),
        "2/s is one pod every 500ms"
    );
    assert_eq!(creates[0].1.priority, 1000, "priority class resolved");
    assert_eq!(creates[0].1.requests().milli_cpu, 500);
    assert!(
        creates.iter().all(|(_, p)| p.shares_template(creates[0].1)),
        "a workload's pods share one template, the scaled-up ones too"
    );
    assert_eq!(
        (&*creates[8].1.name, &*creates[8].1.uid),
        ("web-8", "default/web-8")
    );
    let kinds: Vec<&str> = s
        .events
        .iter()
        .map(|(_, e)| match e {
            SimEvent::AddNode(_) => "add",
            SimEvent::UpdateNode(_) => "update-node",
            SimEvent::DrainNode { .. } => "drain",
            SimEvent::DeletePod(_) => "delete-pod",
            SimEvent::CreatePod(_) => "create",
            SimEvent::DeleteNode(_) => "delete-node",
            SimEvent::CreatePodGroup(_) => "create-pod-group",
            SimEvent::CreateCoschedulingGroup(_) => "create-coscheduling-group",
            SimEvent::PlacedElsewhere(_) => "placed-elsewhere",
            _ => "dra",
        })
        .filter(|k| *k != "create")
        .collect();
    assert_eq!(kinds, ["add", "add", "drain", "delete-pod", "delete-pod"]);
}

#[test]
fn bad_scenarios_name_the_field() {
    let cases = [
        (
            "nodeGroups: [{name: a, count: x, allocatable: {}}]",
            "nodeGroups[0].count",
        ),
        (
            "nodeGroups: [{name: a, count: 1, allocatable: {cpu: lots}}]",
            "nodeGroups[0].allocatable.cpu",
        ),
        (
            "nodeGroups: [{name: a, count: 1, allocatable: {}, taints: [{key: k, effect: Never}]}]",
            "nodeGroups[0].taints[0].effect",
        ),
        (
            "workloads: [{name: w, count: 1, arrival: {rate: fast}, template: {spec: {containers: [{name: c}]}}}]",
            "workloads[0].arrival.rate",
        ),
        (
            "workloads: [{name: w, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: 1x}}}]}}}]",
            "workloads[0].template.spec.containers[0].resources.requests.cpu",
        ),
        (
            "workloads: [{name: w, count: 1, template: {spec: {priorityClassName: nope, containers: [{name: c}]}}}]",
            "workloads[0].template.spec.priorityClassName",
        ),
        (
            "events: [{at: soon, addNodes: {group: a, count: 1}}]",
            "events[0].at",
        ),
        (
            "workloads: [{name: w, count: 2, arrival: {times: [1s]}, template: {spec: {containers: [{name: c}]}}}]",
            "workloads[0].arrival.times",
        ),
        (
            "workloads: [{name: w, count: 1, arrival: {times: [later]}, template: {spec: {containers: [{name: c}]}}}]",
            "workloads[0].arrival.times[0]",
        ),
        (
            "events: [{at: 1s, addNodes: {group: missing, count: 1}}]",
            "events[0].addNodes.group",
        ),
        ("events: [{at: 1s}]", "events[0]"),
        (
            "workloads: [{name: w, count: 1, arrival: {start: 99999999999999999999h}, template: {spec: {containers: []}}}]",
            "workloads[0].arrival.start",
        ),
        (
            "workloads: [{name: w, count: 1, arrival: {rate: 0.0000000000000000001/h}, template: {spec: {containers: []}}}]",
            "workloads[0].arrival.rate",
        ),
        (
            "workloads: [{name: w, count: 3, arrival: {start: 87599h, rate: 1/h}, template: {spec: {containers: []}}}]",
            "workloads[0].arrival",
        ),
        (
            "events: [{at: 99999999h, addNodes: {group: a, count: 1}}]",
            "events[0].at",
        ),
        (
            "nodeGroups: [{name: a, count: 100000000000, allocatable: {}}]",
            "nodeGroups[0].count",
        ),
        (
            "workloads: [{name: w, count: 2000001, template: {spec: {containers: []}}}]",
            "workloads[0].count",
        ),
        (
            "nodeGroups: [{name: a, count: 1, allocatable: {}}]\nevents: [{at: 1s, addNodes: {group: a, count: 999999999}}]",
            "events[0].addNodes.count",
        ),
        ("nodegroups: []", "nodegroups"),
        ("nodeGroups: [\n", ""),
    ];
    for (text, field) in cases {
        let e = Scenario::parse(text, "bad.yaml").unwrap_err();
        assert!(e.field == field, "{text}: got {e}");
    }
}

#[test]
fn a_second_group_workload_or_class_of_one_name_names_both() {
    let cases = [
        (
            "nodeGroups: [{name: a, count: 1, allocatable: {}}, {name: b, count: 1, allocatable: {}}, {name: a, count: 1, allocatable: {}}]",
            "nodeGroups[2].name",
            "\"a\" is also the name of nodeGroups[0]",
        ),
        (
            "workloads: [{name: w, count: 1, template: {}}, {name: w, count: 1, template: {}}]",
            "workloads[1].name",
            "\"w\" is also the name of workloads[0]",
        ),
        (
            "priorityClasses: [{name: p, value: 1}, {name: p, value: 2}]",
            "priorityClasses[1].name",
            "\"p\" is also the name of priorityClasses[0]",
        ),
    ];
    for (text, field, message) in cases {
        let e = Scenario::parse(text, "dup.yaml").unwrap_err();
        assert_eq!((e.field.as_str(), e.message.as_str()), (field, message));
    }
}

#[test]
fn the_timeline_reads_as_a_person_would_say_it() {
    let s = Scenario::parse(EXAMPLE, "example.yaml").unwrap();
    let marks: Vec<(u64, &str)> = s
        .timeline
        .iter()
        .map(|m| (m.at.as_secs(), m.what.as_str()))
        .collect();
    assert_eq!(
        marks,
        [
            (10, "add 2 general nodes"),
            (20, "drain 1 gpu nodes"),
            (30, "add 3 web pods"),
            (40, "delete 2 web pods"),
        ]
    );
}

#[test]
fn explicit_arrival_times() {
    let s = Scenario::parse(
            "workloads: [{name: w, count: 2, arrival: {times: [5s, 1m]}, template: {spec: {containers: [{name: c}]}}}]",
            "t.yaml",
        )
        .unwrap();
    let times: Vec<Duration> = s.events.iter().map(|(t, _)| *t).collect();
    assert_eq!(times, [Duration::from_secs(5), Duration::from_secs(60)]);
}

#[test]
fn durations_and_rates() {
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
    assert!(parse_duration("-1s").is_err());
    assert!(parse_duration("1d").is_err());
    assert_eq!(parse_rate("10/s").unwrap(), Duration::from_millis(100));
    assert_eq!(parse_rate("30/m").unwrap(), Duration::from_secs(2));
    assert!(parse_rate("0/s").is_err());
    assert!(parse_rate("5/d").is_err());
}
