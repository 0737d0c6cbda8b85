//! `gantry estimate`: capacity questions answered on forks of the cluster.
//! - scale-up (`--node-template`): how many nodes of each template the pending pods need;
//! - scale-down (`--drain`): can these nodes be removed, their pods moving elsewhere;
//! - gang (`--gang`): do all these pods fit at once, and where.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use gantry_api::decode::ClusterObjects;
use gantry_api::{Pod, Sym};
use gantry_whatif::estimator::{
    Estimate, NodeTemplate, SimilarUnschedulable, equivalence_groups, estimate_with_gangs, waste,
};
use gantry_whatif::{ClusterSnapshot, StoreKind, with_dynamic_resources};
use serde_json::{Value, json};

use crate::estimate_gangs::Pending;
use crate::explain::table;
use crate::{load, output};

#[derive(Args)]
pub struct EstimateArgs {
    /// Kubernetes YAML/JSON: nodes, pods (bound ones run there; unbound ones are pending),
    /// DRA objects, storage objects.
    #[arg(long, num_args = 1.., required_unless_present = "kubeconfig")]
    cluster: Vec<PathBuf>,
    #[command(flatten)]
    live: crate::live::LiveArgs,
    /// More pending pods.
    #[arg(long, num_args = 1..)]
    pods: Vec<PathBuf>,
    /// Node manifests to scale up with, one template per Node (ResourceSlices naming the
    /// node in the same file are its devices).
    #[arg(long, num_args = 1..)]
    node_template: Vec<PathBuf>,
    /// At most this many new nodes per template.
    #[arg(long)]
    max_nodes: Option<usize>,
    /// With --node-template: pack every pending pod onto new nodes, as the autoscaler's
    /// BinpackingEstimator does when called on its own, without first placing the pods
    /// that fit the existing nodes (the autoscaler's filter-out-schedulable step).
    #[arg(long, requires = "node_template")]
    estimator_only: bool,
    /// Nodes to check for removal (space- or comma-separated).
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    drain: Vec<String>,
    /// A file of pods that must fit all at once; or of PodGroups and their members, each
    /// group checked as kube-scheduler v1.36 with GangScheduling decides it.
    #[arg(long)]
    pub(crate) gang: Option<PathBuf>,
    /// A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1); DynamicResources is
    /// added to its profile.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) release: crate::release_args::ReleaseArgs,
}

pub fn run(args: EstimateArgs) -> anyhow::Result<()> {
    let modes = [
        !args.node_template.is_empty(),
        !args.drain.is_empty(),
        args.gang.is_some(),
    ];
    anyhow::ensure!(
        modes.iter().filter(|m| **m).count() == 1,
        "give exactly one of --node-template (scale-up), --drain (scale-down) and --gang"
    );
    let (release, live) = args.live.read(&args.release)?;
    let config = load::config(args.config.as_deref(), release)?;
    let mut cluster = crate::live::with_files(live, load::manifests(&args.cluster, release)?);
    if !args.pods.is_empty() {
        cluster.merge(load::manifests(&args.pods, release)?);
    }
    cluster.resolve_priorities()?;
    load::print_notes(&cluster);
    let profile = config
        .profiles
        .first()
        .cloned()
        .context("the configuration has no profile")?;
    let snapshot =
        ClusterSnapshot::from_objects(StoreKind::Delta, with_dynamic_resources(profile), &cluster)
            .context("loading the cluster")?;
    if !args.node_template.is_empty() {
        scale_up(&args, snapshot, &cluster)
    } else if let Some(gang) = &args.gang {
        crate::estimate_gang::run(&args, snapshot, &cluster, gang)
    } else {
        crate::drain::run(&args.drain, snapshot, &cluster, args.json, release)
    }
}

/// The pending pods: unbound ones, highest priority first (as the autoscaler sorts them).
fn pending(cluster: &ClusterObjects) -> Vec<Arc<Pod>> {
    let mut pods: Vec<Arc<Pod>> = cluster
        .pods
        .iter()
        .filter(|p| p.node_name.is_none())
        .map(|p| Arc::new(p.clone()))
        .collect();
    pods.sort_by_key(|p| std::cmp::Reverse(p.priority));
    pods
}

/// One template per Node in the files, with the ResourceSlices that name it.
pub(crate) fn templates(
    files: &[PathBuf],
    release: gantry_api::Release,
) -> anyhow::Result<Vec<NodeTemplate>> {
    let mut out = Vec::new();
    for file in files {
        let objects = load::manifests(std::slice::from_ref(file), release)?;
        load::note_unread(
            &objects,
            &format!("--node-template {}", file.display()),
            &["Node", "ResourceSlice"],
            "the pods to place go in --cluster or --pods",
        );
        anyhow::ensure!(
            !objects.nodes.is_empty(),
            "{}: no Node in the template file",
            file.display()
        );
        for node in &objects.nodes {
            let slices = objects
                .dra
                .slices
                .iter()
                .filter(|s| s.node_name() == Some(node.name))
                .map(|s| (**s).clone())
                .collect();
            out.push(NodeTemplate {
                node: node.clone(),
                slices,
            });
        }
    }
    Ok(out)
}

fn scale_up(
    args: &EstimateArgs,
    mut snapshot: ClusterSnapshot,
    cluster: &ClusterObjects,
) -> anyhow::Result<()> {
    // The release decided as: the one named, else (with --kubeconfig) the server's.
    let release = cluster.release;
    let templates = templates(&args.node_template, release)?;
    let start = Instant::now();
    let pending = pending(cluster);
    // Pods that fit the existing nodes need no new node; they stay placed while the
    // templates are tried, as the autoscaler filters them out first.
    snapshot.fork();
    let mut fits_existing = Vec::new();
    let mut remaining = Vec::new();
    let mut pending_gangs = Vec::new();
    // A pod like one of the same controller that fitted nowhere is not tried again.
    let mut similar = SimilarUnschedulable::default();
    for unit in crate::estimate_gangs::in_order(&pending, cluster) {
        match unit {
            Pending::Single(pod) => {
                if args.estimator_only || similar.is_similar_unschedulable(&pod) {
                    remaining.push(pod);
                    continue;
                }
                match snapshot.place_anywhere(&pod, &gantry_whatif::Destinations::ANY)? {
                    Some(node) => {
                        similar.placed();
                        fits_existing.push((pod, node));
                    }
                    None => {
                        similar.set_unschedulable(&pod);
                        remaining.push(pod);
                    }
                }
            }
            // A gang stays where its members fit only if enough of them do; else all of it
            // waits for new nodes.
            Pending::Gang(gang) if args.estimator_only => pending_gangs.push(gang),
            Pending::Gang(gang) => {
                similar.placed();
                match crate::estimate_gangs::place_on_existing(&mut snapshot, &gang)? {
                    Some(kept) => {
                        fits_existing.extend(kept.placed);
                        remaining.extend(kept.rest);
                    }
                    None => pending_gangs.push(gang),
                }
            }
        }
    }
    let groups = equivalence_groups(&remaining);
    let mut results: Vec<(&NodeTemplate, Estimate, f64)> = Vec::new();
    for template in &templates {
        let result = estimate_with_gangs(
            &mut snapshot,
            &groups,
            &pending_gangs,
            template,
            args.max_nodes,
        )?;
        let wasted = waste(&result, template);
        results.push((template, result, wasted));
    }
    snapshot.revert().expect("forked above");
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    // The template that places the most pods, then (the autoscaler's least-waste
    // expander) the one that leaves the least cpu and memory unused.
    let best = results
        .iter()
        .filter(|(_, r, _)| r.nodes_needed > 0)
        .min_by(|a, b| {
            b.1.scheduled
                .len()
                .cmp(&a.1.scheduled.len())
                .then(a.2.total_cmp(&b.2))
                .then(a.0.node.name.as_str().cmp(b.0.node.name.as_str()))
        })
        .map(|(t, _, _)| t.node.name);
    if args.json {
        let out = json!({
            "pending_pods": pending.len(),
            "fit_existing_nodes": fits_existing.len(),
            "templates": results.iter().map(|(t, r, w)| template_json(t.node.name, r, *w)).collect::<Vec<_>>(),
            "best": best.map(|b| b.to_string()),
            "wall_ms": (wall_ms * 1000.0).round() / 1000.0,
        });
        let out = output::with_release(out, release);
        return output::to_stdout(|w| writeln!(w, "{out}"));
    }
    let num_nodes = snapshot.cluster().num_nodes();
    output::to_stdout(|w| {
        writeln!(w, "gantry estimate: decided as Kubernetes {release}")?;
        print_scale_up(
            w,
            &pending,
            fits_existing.len(),
            num_nodes,
            &results,
            best,
            wall_ms,
        )
    })
}

fn print_scale_up(
    w: &mut dyn Write,
    pending: &[Arc<Pod>],
    fits_existing: usize,
    num_nodes: usize,
    results: &[(&NodeTemplate, Estimate, f64)],
    best: Option<Sym>,
    wall_ms: f64,
) -> std::io::Result<()> {
    writeln!(
        w,
        "gantry estimate: {} pending pods, {} fit the existing {} nodes",
        pending.len(),
        fits_existing,
        num_nodes
    )?;
    let mut table = table();
    table.set_header([
        "Template",
        "New nodes",
        "Pods placed",
        "Pods left",
        "Unused cpu+memory",
    ]);
    for (template, result, wasted) in results {
        table.add_row([
            template.node.name.to_string(),
            result.nodes_needed.to_string(),
            result.scheduled.len().to_string(),
            result.unschedulable.len().to_string(),
            format!("{wasted:.2}"),
        ]);
    }
    writeln!(w, "{table}")?;
    for (template, result, _) in results {
        for unplaced in result.unschedulable.iter().take(5) {
            writeln!(
                w,
                "  {}: {} does not fit: {}",
                template.node.name,
                unplaced.pod.key(),
                unplaced.reason
            )?;
        }
        if result.unschedulable.len() > 5 {
            writeln!(
                w,
                "  {}: ... and {} more",
                template.node.name,
                result.unschedulable.len() - 5
            )?;
        }
    }
    match best {
        Some(best) => writeln!(w, "best: {best}")?,
        None => writeln!(w, "best: none (no template helps)")?,
    }
    writeln!(w, "({wall_ms:.1} ms)")
}

fn template_json(name: Sym, r: &Estimate, wasted: f64) -> Value {
    json!({
        "template": name.to_string(),
        "nodes_needed": r.nodes_needed,
        "pods_scheduled": r.scheduled.len(),
        "pods_unschedulable": r.unschedulable.len(),
        "unschedulable": r.unschedulable.iter().map(|u| json!({"pod": u.pod.key(), "reason": u.reason})).collect::<Vec<_>>(),
        "waste": (wasted * 1000.0).round() / 1000.0,
    })
}
