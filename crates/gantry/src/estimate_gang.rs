//! `gantry estimate --gang FILE`: do these pods fit at once? Without PodGroups in the file,
//! all its pods are one gang, all or nothing. With PodGroups (GenericWorkload and
//! GangScheduling on, v1.36), each group is checked on its own fork of the cluster as the
//! pod-group cycle decides it: a gang is admitted when `minCount` members (counting those
//! already bound) fit at once; a basic group's members are placed where each fits.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use gantry_api::decode::ClusterObjects;
use gantry_api::{GroupPolicy, Pod, PodGroup};
use gantry_whatif::ClusterSnapshot;
use gantry_whatif::gang::{GangOutcome, GroupCheck, check_gang, check_pod_group};
use serde_json::{Value, json};

use crate::estimate::EstimateArgs;
use crate::{load, output};

pub fn run(
    args: &EstimateArgs,
    mut snapshot: ClusterSnapshot,
    cluster: &ClusterObjects,
    file: &Path,
) -> anyhow::Result<()> {
    let release = cluster.release;
    let mut objects = load::manifests(&[file.to_path_buf()], release)?;
    // The cluster's PriorityClasses resolve the file's pods too.
    for class in &cluster.priority_classes {
        if !objects
            .priority_classes
            .iter()
            .any(|c| c.name == class.name)
        {
            objects.priority_classes.push(class.clone());
        }
    }
    objects.resolve_priorities()?;
    anyhow::ensure!(
        !objects.pods.is_empty(),
        "{}: no Pod in the gang file",
        file.display()
    );
    let pods: Vec<Arc<Pod>> = objects
        .pods
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.node_name = None;
            Arc::new(p)
        })
        .collect();
    if objects.pod_groups.is_empty() && pods.iter().all(|p| p.scheduling_group.is_none()) {
        return whole_file(args, &mut snapshot, &pods, release);
    }
    let groups = groups_of(cluster, &objects, &pods, file)?;
    let mut checks = Vec::with_capacity(groups.len());
    for (group, members) in &groups {
        let bound = cluster
            .pods
            .iter()
            .filter(|p| p.node_name.is_some() && is_member(p, group))
            .count();
        let needed = match group.policy {
            GroupPolicy::Gang { min_count } => (min_count as usize).saturating_sub(bound),
            GroupPolicy::Basic => 0,
        };
        let check = check_pod_group(&mut snapshot, members, needed)?;
        checks.push((group, members.len(), bound, check));
    }
    if args.json {
        let out = json!({"pod_groups": checks.iter().map(|(g, n, b, c)| group_json(g, *n, *b, c)).collect::<Vec<_>>()});
        let out = output::with_release(out, release);
        return output::to_stdout(|w| writeln!(w, "{out}"));
    }
    output::to_stdout(|w| {
        writeln!(w, "gantry estimate: decided as Kubernetes {release}")?;
        for (group, pending, bound, check) in &checks {
            print_group(w, group, *pending, *bound, check)?;
        }
        Ok(())
    })
}

fn is_member(pod: &Pod, group: &PodGroup) -> bool {
    pod.namespace == group.namespace && pod.scheduling_group == Some(group.name)
}

/// Each PodGroup of the gang file with its pending members there, in file order. The
/// groups come from the file or the cluster; a member naming neither's, or a pod in no
/// group beside groups, is an error naming it.
fn groups_of(
    cluster: &ClusterObjects,
    objects: &ClusterObjects,
    pods: &[Arc<Pod>],
    file: &Path,
) -> anyhow::Result<Vec<(PodGroup, Vec<Arc<Pod>>)>> {
    let mut groups: Vec<(PodGroup, Vec<Arc<Pod>>)> = objects
        .pod_groups
        .iter()
        .map(|g| (g.clone(), Vec::new()))
        .collect();
    for pod in pods {
        let Some(name) = pod.scheduling_group else {
            anyhow::bail!(
                "{}: Pod {}: spec.schedulingGroup: not set, but the file holds PodGroups: give a gang of plain pods or PodGroups with their members, not both{}",
                file.display(),
                pod.key(),
                gates_hint(objects)
            );
        };
        if let Some((_, members)) = groups.iter_mut().find(|(g, _)| is_member(pod, g)) {
            members.push(pod.clone());
            continue;
        }
        let Some(group) = cluster.pod_groups.iter().find(|g| is_member(pod, g)) else {
            anyhow::bail!(
                "{}: Pod {}: spec.schedulingGroup.podGroupName: PodGroup {}/{name} is in neither the gang file nor --cluster",
                file.display(),
                pod.key(),
                pod.namespace
            );
        };
        groups.push((group.clone(), vec![pod.clone()]));
    }
    Ok(groups)
}

/// Why members may have lost their group: the API server drops `spec.schedulingGroup`
/// while GenericWorkload is off.
fn gates_hint(objects: &ClusterObjects) -> &'static str {
    if objects.release.enabled(gantry_api::Gate::GenericWorkload) {
        ""
    } else {
        " (with GenericWorkload off the API server drops spec.schedulingGroup: --emulated-version 1.36 --feature-gates GenericWorkload=true,GangScheduling=true)"
    }
}

fn group_json(group: &PodGroup, pending: usize, bound: usize, check: &GroupCheck) -> Value {
    json!({
        "podGroup": group.key(),
        "minCount": group.min_count(),
        "pending": pending,
        "bound": bound,
        "admitted": check.admitted,
        "placements": check.placements.iter().map(|(p, n)| json!({"pod": p.key(), "node": n.to_string()})).collect::<Vec<_>>(),
        "left_out": check.left_out.iter().map(|(p, r)| json!({"pod": p.key(), "reason": r})).collect::<Vec<_>>(),
    })
}

fn print_group(
    w: &mut dyn Write,
    group: &PodGroup,
    pending: usize,
    bound: usize,
    check: &GroupCheck,
) -> std::io::Result<()> {
    let policy = match group.min_count() {
        Some(min) => format!("gang, minCount {min}"),
        None => "basic".to_string(),
    };
    let verdict = match (group.min_count(), check.admitted) {
        (None, _) => "each member placed where it fits",
        (Some(_), true) => "admitted: these would be bound together",
        (Some(_), false) => "not admitted: none would be bound",
    };
    writeln!(
        w,
        "pod group {} ({policy}): {pending} pending, {bound} bound; {} fit at once: {verdict}",
        group.key(),
        check.placements.len()
    )?;
    for (pod, node) in &check.placements {
        writeln!(w, "  {} -> {node}", pod.key())?;
    }
    for (pod, reason) in &check.left_out {
        writeln!(w, "  {}: {reason}", pod.key())?;
    }
    Ok(())
}

/// All the file's pods as one gang, all or nothing.
fn whole_file(
    args: &EstimateArgs,
    snapshot: &mut ClusterSnapshot,
    pods: &[Arc<Pod>],
    release: gantry_api::Release,
) -> anyhow::Result<()> {
    let outcome = check_gang(snapshot, pods)?;
    if args.json {
        let out = match &outcome {
            GangOutcome::Fits(placements) => json!({"gang": {
                "pods": pods.len(),
                "fits": true,
                "placements": placements.iter().map(|(p, n)| json!({"pod": p.key(), "node": n.to_string()})).collect::<Vec<_>>(),
            }}),
            GangOutcome::DoesNotFit {
                pod,
                reason,
                placed,
            } => json!({"gang": {
                "pods": pods.len(),
                "fits": false,
                "failed_pod": pod.key(),
                "reason": reason,
                "placed_before_failure": placed,
            }}),
        };
        let out = output::with_release(out, release);
        return output::to_stdout(|w| writeln!(w, "{out}"));
    }
    output::to_stdout(|w| {
        writeln!(w, "gantry estimate: decided as Kubernetes {release}")?;
        print_gang(w, pods, &outcome)
    })
}

fn print_gang(w: &mut dyn Write, pods: &[Arc<Pod>], outcome: &GangOutcome) -> std::io::Result<()> {
    match outcome {
        GangOutcome::Fits(placements) => {
            writeln!(w, "gang of {} pods fits:", pods.len())?;
            for (pod, node) in placements {
                writeln!(w, "  {} -> {node}", pod.key())?;
            }
            Ok(())
        }
        GangOutcome::DoesNotFit {
            pod,
            reason,
            placed,
        } => writeln!(
            w,
            "gang of {} pods does not fit: {} found no node after {placed} were placed: {reason}",
            pods.len(),
            pod.key()
        ),
    }
}
