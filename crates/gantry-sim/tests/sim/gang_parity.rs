//! The gang scenarios of `testdata/gang-1.36`: what real kube-scheduler v1.36.3 decided with
//! GenericWorkload and GangScheduling on (see its README), replayed through the simulation
//! step by step with the recorder's gap between steps. Every pod's node and PodScheduled
//! message and every PodGroup's condition must match. Upstream tries a group's
//! never-tried members in Go's map order, so which of several identical members lands where
//! can differ between runs of the real scheduler: members are compared per group, as a
//! multiset of (node, message); pods in no group are compared one by one.

use crate::step_corpus;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile_for;
use gantry_sim::{MAX_FAILED_ATTEMPTS, SimEvent, SimOptions, Simulation};
use serde_json::Value;

/// The wall time the recorder waited after creating each object.
const STEP_GAP: Duration = Duration::from_secs(10);

fn gangs_on() -> Release {
    Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true"),
    )
    .unwrap()
}

/// A pod's outcome as the recording states it: its node, or the message of its
/// `PodScheduled=False` condition, or neither (held by PreEnqueue: no condition).
type Outcome = (Option<String>, Option<String>);

fn check_scenario(dir: &Path) -> Vec<String> {
    check_scenario_as(dir, gangs_on())
}

/// v1.36 with GenericWorkload, GangScheduling and `more` gates on.
fn gangs_and(more: &str) -> Release {
    let gates = format!("GenericWorkload=true,GangScheduling=true,{more}");
    Release::parse(Some("1.36"), Some(&gates)).unwrap()
}

/// The same with TopologyAwareWorkloadScheduling on (`testdata/gang-tas-1.36`).
fn check_topology_scenario(dir: &Path) -> Vec<String> {
    check_scenario_as(dir, gangs_and("TopologyAwareWorkloadScheduling=true"))
}

/// The same with WorkloadAwarePreemption on (`testdata/gang-wap-1.36`).
fn check_preemption_scenario(dir: &Path) -> Vec<String> {
    check_scenario_as(dir, gangs_and("WorkloadAwarePreemption=true"))
}

/// The same with both on (`testdata/gang-wap-tas-1.36`).
fn check_preemption_topology_scenario(dir: &Path) -> Vec<String> {
    let gates = "WorkloadAwarePreemption=true,TopologyAwareWorkloadScheduling=true";
    check_scenario_as(dir, gangs_and(gates))
}

fn check_scenario_as(dir: &Path, release: Release) -> Vec<String> {
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(f).display()))
    };
    let mut cluster = ClusterObjects::for_release(release);
    cluster
        .decode_more(&read("cluster.yaml"), "cluster.yaml")
        .unwrap();
    cluster.resolve_priorities().unwrap();
    let steps: Value = serde_saphyr::from_str(&read("steps.yaml")).unwrap();
    let mut sim = Simulation::new(
        cluster.clone(),
        vec![default_profile_for("default-scheduler", release)],
        // Not sequential: a held member never concludes, and the steps are timed instead.
        SimOptions {
            seed: 42,
            ..SimOptions::default()
        },
    )
    .unwrap();
    // Which group each pod names, for the comparison.
    let mut group_of: BTreeMap<String, String> = BTreeMap::new();
    for (i, item) in steps["items"].as_array().unwrap().iter().enumerate() {
        let mut objects = ClusterObjects::for_release(release);
        objects
            .decode_more(&item.to_string(), &format!("steps.yaml item {i}"))
            .unwrap();
        objects.priority_classes = cluster.priority_classes.clone();
        objects.resolve_priorities().unwrap();
        let at = STEP_GAP * i as u32;
        for group in objects.pod_groups {
            sim.schedule(at, SimEvent::CreatePodGroup(Arc::new(group)));
        }
        for pod in objects.pods {
            if let Some(group) = pod.scheduling_group {
                group_of.insert(pod.key(), format!("{}/{group}", pod.namespace));
            }
            sim.schedule(at, SimEvent::CreatePod(Arc::new(pod)));
        }
    }
    sim.run().unwrap();
    sim.check_invariants().unwrap();

    let mut want: BTreeMap<String, Vec<Outcome>> = BTreeMap::new();
    let mut want_groups = BTreeMap::new();
    for line in read("expected.jsonl").lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if let Some(pod) = v["pod"].as_str() {
            let key = group_of
                .get(pod)
                .cloned()
                .unwrap_or_else(|| pod.to_string());
            let outcome = (
                v["node"].as_str().map(str::to_string),
                v["reason"].as_str().map(str::to_string),
            );
            want.entry(key).or_default().push(outcome);
        } else {
            let group = v["podGroup"].as_str().unwrap().to_string();
            let conditions = v["conditions"].as_array().unwrap();
            let condition = conditions.first().map(|c| {
                (
                    c["status"].as_str().unwrap().to_string(),
                    c["reason"].as_str().unwrap().to_string(),
                    c["message"].as_str().unwrap().to_string(),
                )
            });
            want_groups.insert(group, condition);
        }
    }
    let mut got: BTreeMap<String, Vec<Outcome>> = BTreeMap::new();
    let as_recorded = recorder_wording(&sim);
    // Pods a preemption evicted are gone from the API: the recorder says "deleted".
    let evicted: Vec<String> = (sim.placements().iter())
        .flat_map(|p| p.evicted.iter().cloned())
        .collect();
    for placement in sim.placements() {
        let pod = placement.pod.to_string();
        let outcome = if evicted.contains(&pod) {
            (None, Some("deleted".to_string()))
        } else {
            let node = placement.node.as_deref().map(str::to_string);
            // A pod held by PreEnqueue has no condition upstream; Gantry gives the reason.
            let reason = (placement.reason.as_deref())
                .filter(|r| node.is_none() && !r.ends_with("to appear in scheduling queue"))
                .map(&as_recorded);
            (node, reason)
        };
        let key = group_of.get(&pod).cloned().unwrap_or(pod);
        got.entry(key).or_default().push(outcome);
    }
    let mut problems = Vec::new();
    for outcomes in want.values_mut().chain(got.values_mut()) {
        outcomes.sort();
    }
    for (key, wanted) in &want {
        let found = got.get(key).cloned().unwrap_or_default();
        if &found != wanted {
            problems.push(format!("{key}: expected {wanted:?}\n  got {found:?}"));
        }
    }
    let got_groups: BTreeMap<String, Option<(String, String, String)>> = sim
        .pod_groups()
        .into_iter()
        .map(|g| {
            let condition = g.condition.map(|c| {
                (
                    c.status.to_string(),
                    c.reason.to_string(),
                    as_recorded(&c.message),
                )
            });
            (g.group, condition)
        })
        .collect();
    for (group, wanted) in &want_groups {
        let found = got_groups.get(group).cloned().flatten();
        if &found != wanted {
            problems.push(format!(
                "pod group {group}: expected {wanted:?}, got {found:?}"
            ));
        }
    }
    problems
}

/// A message of `sim` as the recorder would have read it: a template's claim named
/// `<pod>-<claim>` (the recorder's stand-in for the claim controller; Gantry adds
/// generateName's five characters, as the controller does), and a pod Gantry gave up on
/// after [`MAX_FAILED_ATTEMPTS`] errors (a simulation ends; upstream retries for ever, and
/// the recorder read its last failure).
fn recorder_wording(sim: &Simulation) -> impl Fn(&str) -> String {
    let renames: Vec<(String, String)> = (sim.cache().dra().claims().into_iter())
        .filter(|c| c.owner_pod.is_some())
        .filter_map(|c| {
            let (stem, suffix) = c.name.rsplit_once('-')?;
            let name = |n: &str| format!("claim {}/{n}:", c.namespace);
            (suffix.len() == 5).then(|| (name(&c.name), name(stem)))
        })
        .collect();
    let given_up = format!("given up after {MAX_FAILED_ATTEMPTS} failed attempts; the last: ");
    move |message: &str| {
        let mut message = message
            .strip_prefix(&given_up)
            .unwrap_or(message)
            .to_string();
        for (gantry, recorder) in &renames {
            message = message.replace(gantry, recorder);
        }
        message
    }
}

#[test]
fn the_v1_36_gang_recordings_match() {
    step_corpus::check_every_scenario("gang-1.36", 11, check_scenario);
}

#[test]
fn the_v1_36_topology_aware_gang_recordings_match() {
    step_corpus::check_every_scenario("gang-tas-1.36", 5, check_topology_scenario);
}

#[test]
fn the_v1_36_workload_aware_preemption_recordings_match() {
    step_corpus::check_every_scenario("gang-wap-1.36", 5, check_preemption_scenario);
}

#[test]
fn the_v1_36_workload_aware_preemption_recordings_with_topology_match() {
    step_corpus::check_every_scenario("gang-wap-tas-1.36", 3, check_preemption_topology_scenario);
}
