//! `explain` of a pod in a PodGroup: which group, how many of its members exist, are
//! bound or pending, and what lets the group in (GangScheduling's PreEnqueue and Permit,
//! or scheduler-plugins' Coscheduling for a pod labelled with its group).

use std::sync::Arc;

use gantry_api::decode::ClusterObjects;
use gantry_api::{Gate, GroupPolicy, Pod, Release};
use gantry_cache::{GroupKey, PodGroupStates, Snapshot, Stage};
use gantry_scheduler::{NO_PLACEMENTS, NOT_SUPPORTED_WITH_CONSTRAINTS, placement};
use serde_json::{Value, json};

/// The PodGroups and members as kube-scheduler's cache would hold them for `pod`: the
/// groups of both inputs, the cluster's pods of each group, and the pod itself (pending).
pub fn states(
    cluster: &ClusterObjects,
    pod_file: &ClusterObjects,
    pod: &Arc<Pod>,
) -> PodGroupStates {
    let mut states = PodGroupStates::default();
    for group in cluster.pod_groups.iter().chain(&pod_file.pod_groups) {
        states.set_group(Arc::new(group.clone()));
    }
    let groups = &cluster.coscheduling_groups;
    for group in groups.iter().chain(&pod_file.coscheduling_groups) {
        states.set_coscheduling_group(Arc::new(group.clone()), 0);
    }
    let key = pod.key();
    for member in cluster
        .pods
        .iter()
        .filter(|p| PodGroupStates::is_member(p) && p.key() != key)
    {
        states.add_member(Arc::new(member.clone()));
    }
    states.add_member(pod.clone());
    states
}

/// What the group means for the pod, one line per fact (none for a pod in no group).
pub fn lines(states: &PodGroupStates, pod: &Pod) -> Vec<String> {
    let Some(key) = GroupKey::of(pod) else {
        return coscheduling_lines(states, pod);
    };
    let Some(group) = states.group(key) else {
        return vec![format!(
            "pod group {key} does not exist: the pod is not tried until it is created"
        )];
    };
    let counts = states.counts(key);
    let members = format!(
        "{} member(s): {} bound, {} pending (this pod among them)",
        counts.all(),
        counts.assigned,
        counts.unscheduled + counts.assumed
    );
    match group.policy {
        GroupPolicy::Basic => vec![format!(
            "pod group {key} (basic policy), {members}: its pending members are tried together, and each is placed where it fits"
        )],
        GroupPolicy::Gang { min_count } => {
            let mut lines = vec![format!(
                "pod group {key} (gang, minCount {min_count}), {members}"
            )];
            let all = counts.all();
            if all < min_count as usize {
                lines.push(format!(
                    "{} more member(s) must be created before any is tried",
                    min_count as usize - all
                ));
            } else if counts.assigned >= min_count as usize {
                lines.push("the gang's quorum is bound: this pod is placed where it fits".into());
            } else {
                lines.push(format!(
                    "its pending members are tried together and bound only if {} more fit at once (with the {} bound); the cycle below is this pod's alone",
                    min_count as usize - counts.assigned,
                    counts.assigned
                ));
            }
            lines
        }
    }
}

/// With TopologyAwareWorkloadScheduling, for a member of a group kept to one domain of a
/// node label: the domains its pod-group cycle would try (upstream's placements), or why
/// it has none.
pub fn topology_line(states: &PodGroupStates, pod: &Pod, snapshot: &Snapshot) -> Option<String> {
    let key = GroupKey::of(pod)?;
    let label = states.group(key)?.topology_key()?;
    let mut placed = states.members_at(key, Stage::Assigned);
    placed.extend(states.members_at(key, Stage::Assumed));
    let placements = match placement::generate(snapshot, Some(label), &placed) {
        Err(message) => {
            return Some(format!(
                "its placed members leave no {label} domain: {message}"
            ));
        }
        Ok(placements) if placements.is_empty() => {
            return Some(format!(
                "no node carries {label}: the group has no placement ({NO_PLACEMENTS})"
            ));
        }
        Ok(placements) => placements,
    };
    let domains: Vec<String> = (placements.iter())
        .map(|p| format!("{} ({} node(s))", p.name, p.positions.len()))
        .collect();
    Some(if placed.is_empty() {
        format!(
            "kept to one {label} domain: the group is tried in each of {}; of those that place it, the one placing the most members is kept",
            domains.join(", ")
        )
    } else {
        format!(
            "kept to one {label} domain: its placed members are in {}, the only one tried",
            domains.join(", ")
        )
    })
}

/// With WorkloadAwarePreemption, for a member of a gang whose quorum is not bound: how the
/// group preempts when its members do not fit together.
pub fn preemption_line(states: &PodGroupStates, pod: &Pod, release: Release) -> Option<String> {
    if !release.enabled(Gate::WorkloadAwarePreemption) {
        return None;
    }
    let key = GroupKey::of(pod)?;
    let group = states.group(key)?;
    let min_count = group.min_count()?;
    if states.counts(key).assigned >= min_count as usize {
        return None;
    }
    Some(match group.topology_key() {
        Some(_) => format!(
            "if its members do not fit together, the group preempts nothing: {NOT_SUPPORTED_WITH_CONSTRAINTS}"
        ),
        None => format!(
            "if its members do not fit together, the group preempts as one (WorkloadAwarePreemption): pods of priority below its {} anywhere in the cluster, the most important spared first; none for this pod alone",
            group.priority()
        ),
    })
}

/// What the pod's Coscheduling group means for it (none for a pod without the label).
fn coscheduling_lines(states: &PodGroupStates, pod: &Pod) -> Vec<String> {
    let Some(key) = GroupKey::labelled(pod) else {
        return Vec::new();
    };
    let Some(group) = states.coscheduling_group(key) else {
        return vec![format!(
            "pod group {key} (Coscheduling) does not exist: Permit refuses the pod (PodGroup not found)"
        )];
    };
    let counts = states.labelled_counts(key);
    let min = group.min_member as usize;
    let mut lines = vec![format!(
        "pod group {key} (Coscheduling, minMember {min}), {} pod(s): {} bound, {} pending (this pod among them)",
        counts.all(),
        counts.assigned,
        counts.unscheduled + counts.assumed
    )];
    lines.push(if counts.all() < min {
        format!(
            "{} more pod(s) must be created before PreFilter lets any through",
            min - counts.all()
        )
    } else if counts.assigned >= min {
        "the group's quorum is bound: this pod binds where it fits".into()
    } else {
        let wait = match group.schedule_timeout_seconds {
            Some(seconds) if seconds != 0 => format!("its scheduleTimeoutSeconds ({seconds} s)"),
            _ => "the plugin's permitWaitingTimeSeconds".into(),
        };
        format!(
            "placed, it waits at Permit until {} more of the group are placed (up to {wait}), then binds with them; the cycle below is this pod's alone",
            min - counts.assigned - 1
        )
    });
    lines
}

/// The same, for `--json`: the group, its policy and the members by stage.
pub fn to_json(states: &PodGroupStates, pod: &Pod) -> Value {
    let Some(key) = GroupKey::of(pod) else {
        return coscheduling_json(states, pod);
    };
    let counts = states.counts(key);
    json!({
        "name": key.to_string(),
        "exists": states.group(key).is_some(),
        "minCount": states.group(key).and_then(|g| g.min_count()),
        "members": counts.all(),
        "bound": counts.assigned,
        "pending": counts.unscheduled + counts.assumed,
        "says": lines(states, pod),
    })
}

/// `to_json` of a pod labelled with a Coscheduling group.
fn coscheduling_json(states: &PodGroupStates, pod: &Pod) -> Value {
    let Some(key) = GroupKey::labelled(pod) else {
        return Value::Null;
    };
    let counts = states.labelled_counts(key);
    json!({
        "name": key.to_string(),
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "exists": states.coscheduling_group(key).is_some(),
        "minMember": states.coscheduling_group(key).map(|g| g.min_member),
        "members": counts.all(),
        "bound": counts.assigned,
        "pending": counts.unscheduled + counts.assumed,
        "says": coscheduling_lines(states, pod),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::{PodGroup, Sym};

    fn member(name: &str, bound: bool) -> Arc<Pod> {
        let mut pod = Pod::new("ml", name);
        pod.scheduling_group = Some(Sym::new("g"));
        if bound {
            pod.node_name = Some(Sym::new("n1"));
        }
        Arc::new(pod)
    }

    fn states(group: Option<PodGroup>, members: &[Arc<Pod>]) -> PodGroupStates {
        let mut states = PodGroupStates::default();
        if let Some(group) = group {
            states.set_group(Arc::new(group));
        }
        for m in members {
            states.add_member(m.clone());
        }
        states
    }

    /// The domains a topology-constrained group would try, as the placements upstream's
    /// TopologyPlacementGenerator makes.
    #[test]
    fn a_topology_constrained_group_says_which_domains_it_would_try() {
        let cache = gantry_cache::Cache::new();
        for (name, rack) in [("n1", "a"), ("n2", "a"), ("n3", "b"), ("n4", "")] {
            let node = gantry_api::Node::new(name, gantry_api::Resources::default());
            let labels: Vec<(&str, &str)> = [("example.com/rack", rack)]
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .collect();
            cache.add_node(Arc::new(node.with_labels(labels)));
        }
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        let gang = |key: &str| Some(PodGroup::gang("ml", "g", 2).in_one_domain_of(key));
        let pod = member("p0", false);
        let said =
            |group, members: &[Arc<Pod>]| topology_line(&states(group, members), &pod, &snapshot);
        assert_eq!(
            said(
                Some(PodGroup::gang("ml", "g", 2)),
                std::slice::from_ref(&pod)
            ),
            None
        );
        assert_eq!(
            said(gang("example.com/rack"), std::slice::from_ref(&pod)).unwrap(),
            "kept to one example.com/rack domain: the group is tried in each of a (2 node(s)), b (1 node(s)); of those that place it, the one placing the most members is kept"
        );
        // A member bound on n1 (rack a) keeps the group there.
        assert_eq!(
            said(gang("example.com/rack"), &[pod.clone(), member("p1", true)]).unwrap(),
            "kept to one example.com/rack domain: its placed members are in a (2 node(s)), the only one tried"
        );
        assert_eq!(
            said(gang("example.com/row"), std::slice::from_ref(&pod)).unwrap(),
            "no node carries example.com/row: the group has no placement (no feasible placements found)"
        );
    }

    /// One line per case of GangScheduling's PreEnqueue and Permit.
    #[test]
    fn each_state_of_a_group_is_said() {
        let pod = member("p0", false);
        let gang = || Some(PodGroup::gang("ml", "g", 3));
        let cases: Vec<(PodGroupStates, Vec<&str>)> = vec![
            (
                states(None, std::slice::from_ref(&pod)),
                vec!["pod group ml/g does not exist: the pod is not tried until it is created"],
            ),
            (
                states(gang(), &[pod.clone(), member("p1", false)]),
                vec![
                    "pod group ml/g (gang, minCount 3), 2 member(s): 0 bound, 2 pending (this pod among them)",
                    "1 more member(s) must be created before any is tried",
                ],
            ),
            (
                states(
                    gang(),
                    &[pod.clone(), member("p1", true), member("p2", false)],
                ),
                vec![
                    "pod group ml/g (gang, minCount 3), 3 member(s): 1 bound, 2 pending (this pod among them)",
                    "its pending members are tried together and bound only if 2 more fit at once (with the 1 bound); the cycle below is this pod's alone",
                ],
            ),
            (
                states(
                    gang(),
                    &[
                        pod.clone(),
                        member("p1", true),
                        member("p2", true),
                        member("p3", true),
                    ],
                ),
                vec![
                    "pod group ml/g (gang, minCount 3), 4 member(s): 3 bound, 1 pending (this pod among them)",
                    "the gang's quorum is bound: this pod is placed where it fits",
                ],
            ),
        ];
        for (states, want) in cases {
            assert_eq!(lines(&states, &pod), want);
        }
        let basic = PodGroup {
            policy: GroupPolicy::Basic,
            ..PodGroup::gang("ml", "g", 1)
        };
        let said = lines(&states(Some(basic), std::slice::from_ref(&pod)), &pod);
        assert_eq!(
            said,
            [
                "pod group ml/g (basic policy), 1 member(s): 0 bound, 1 pending (this pod among them): its pending members are tried together, and each is placed where it fits"
            ]
        );
        let alone = Arc::new(Pod::new("ml", "single"));
        assert!(lines(&states(gang(), &[]), &alone).is_empty());
        // With WorkloadAwarePreemption, how a gang not yet bound preempts.
        let wap = Release::parse(
            Some("1.36"),
            Some("GenericWorkload=true,GangScheduling=true,WorkloadAwarePreemption=true"),
        )
        .unwrap();
        let high = || Some(PodGroup::gang("ml", "g", 3).with_priority(1000));
        let pending = states(high(), std::slice::from_ref(&pod));
        assert_eq!(
            preemption_line(&pending, &pod, wap).as_deref(),
            Some(
                "if its members do not fit together, the group preempts as one (WorkloadAwarePreemption): pods of priority below its 1000 anywhere in the cluster, the most important spared first; none for this pod alone"
            )
        );
        assert_eq!(preemption_line(&pending, &pod, Release::default()), None);
        let bound = [
            pod.clone(),
            member("p1", true),
            member("p2", true),
            member("p3", true),
        ];
        assert_eq!(preemption_line(&states(high(), &bound), &pod, wap), None);
        assert_eq!(to_json(&states(gang(), &[]), &alone), Value::Null);
    }

    /// One line per case of Coscheduling's PreFilter and Permit.
    #[test]
    fn each_state_of_a_coscheduling_group_is_said() {
        use gantry_api::coscheduling::{CoschedulingGroup, POD_GROUP_LABEL};
        let labelled = |name: &str, bound: bool| {
            let mut pod = Pod::new("ml", name).with_labels([(POD_GROUP_LABEL, "g")]);
            if bound {
                pod.node_name = Some(Sym::new("n1"));
            }
            Arc::new(pod)
        };
        let pod = labelled("p0", false);
        let states = |group: Option<CoschedulingGroup>, members: &[Arc<Pod>]| {
            let mut states = PodGroupStates::default();
            if let Some(group) = group {
                states.set_coscheduling_group(Arc::new(group), 0);
            }
            for m in members {
                states.add_member(m.clone());
            }
            states
        };
        let group = || Some(CoschedulingGroup::new("ml", "g", 3));
        let cases: Vec<(PodGroupStates, Vec<&str>)> = vec![
            (
                states(None, std::slice::from_ref(&pod)),
                vec![
                    "pod group ml/g (Coscheduling) does not exist: Permit refuses the pod (PodGroup not found)",
                ],
            ),
            (
                states(group(), &[pod.clone(), labelled("p1", false)]),
                vec![
                    "pod group ml/g (Coscheduling, minMember 3), 2 pod(s): 0 bound, 2 pending (this pod among them)",
                    "1 more pod(s) must be created before PreFilter lets any through",
                ],
            ),
            (
                states(
                    group(),
                    &[pod.clone(), labelled("p1", true), labelled("p2", false)],
                ),
                vec![
                    "pod group ml/g (Coscheduling, minMember 3), 3 pod(s): 1 bound, 2 pending (this pod among them)",
                    "placed, it waits at Permit until 1 more of the group are placed (up to the plugin's permitWaitingTimeSeconds), then binds with them; the cycle below is this pod's alone",
                ],
            ),
            (
                states(
                    group(),
                    &[
                        pod.clone(),
                        labelled("p1", true),
                        labelled("p2", true),
                        labelled("p3", true),
                    ],
                ),
                vec![
                    "pod group ml/g (Coscheduling, minMember 3), 4 pod(s): 3 bound, 1 pending (this pod among them)",
                    "the group's quorum is bound: this pod binds where it fits",
                ],
            ),
        ];
        for (states, want) in cases {
            assert_eq!(lines(&states, &pod), want);
        }
        let json = to_json(&states(group(), std::slice::from_ref(&pod)), &pod);
        assert_eq!(json["minMember"], 3);
        assert_eq!(json["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
    }
}
