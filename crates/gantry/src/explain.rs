//! `gantry explain`: why a pod would land on a node, or stay pending.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use comfy_table::{ContentArrangement, Table};
use gantry_api::decode::ClusterObjects;
use gantry_api::dra::{
    ClaimSource, DraObjects, ResourceClaim, ResourceClaimStatus, ResourceClaimTemplate,
};
use gantry_api::{Pod, Sym};
use gantry_cache::{Cache, Snapshot};
use gantry_framework::{ApiObjects, Code, Profile, Status};
use gantry_scheduler::explain::{Choice, Explanation, NodeVerdict, Outcome, explain};
use serde_json::{Value, json};

use crate::{load, output};

/// Gives the cache the DRA objects of the cluster (and of the pod's file), and makes the
/// pod's claims from their templates as the claim controller would, where they do not
/// exist yet (named as the pod's status names them, or `<pod>-<entry>`). Returns the pod
/// as the controller leaves it, its status naming those claims, so that DynamicResources'
/// PreEnqueue does not hold it back for want of them.
fn load_dra(cache: &Cache, cluster: &ClusterObjects, with_pod: &DraObjects, pod: &Pod) -> Pod {
    let all = || {
        cluster
            .dra
            .device_classes
            .iter()
            .chain(&with_pod.device_classes)
    };
    for class in all() {
        cache.dra().set_device_class(Arc::new(class.clone()));
    }
    for slice in cluster.dra.slices.iter().chain(&with_pod.slices) {
        cache.set_resource_slice(slice.clone());
    }
    let claims: Vec<&ResourceClaim> = cluster.dra.claims.iter().chain(&with_pod.claims).collect();
    for claim in &claims {
        cache.dra().set_claim(Arc::new((*claim).clone()));
    }
    let templates: Vec<&ResourceClaimTemplate> = cluster
        .dra
        .templates
        .iter()
        .chain(&with_pod.templates)
        .collect();
    let mut named = Vec::new();
    for entry in pod.resource_claims.iter() {
        let ClaimSource::Template(template) = entry.source else {
            continue;
        };
        let name = pod.claim_name(entry);
        let exists = claims
            .iter()
            .any(|c| c.namespace == pod.namespace && c.name == name);
        let template = templates
            .iter()
            .find(|t| t.namespace == pod.namespace && t.name == template);
        if let (false, Some(template)) = (exists, template) {
            cache
                .dra()
                .set_claim(Arc::new(template.claim_for(pod, name.clone())));
        }
        if (exists || template.is_some()) && !pod.has_claim_status(&entry.name) {
            named.push(ResourceClaimStatus {
                name: entry.name.clone(),
                claim: name,
            });
        }
    }
    let mut pod = pod.clone();
    if !named.is_empty() {
        let statuses = pod.claim_statuses.iter().flat_map(|s| s.iter().cloned());
        pod.claim_statuses = Some(statuses.chain(named).collect());
    }
    pod
}

/// Rows per table in the human output; `--json` has every node.
const MAX_ROWS: usize = 50;
/// Tied nodes named in the human output.
const MAX_TIED: usize = 10;

#[derive(Args)]
pub struct ExplainArgs {
    /// Kubernetes YAML/JSON with the nodes and the pods bound to them (pending pods are
    /// ignored).
    #[arg(long, num_args = 1.., required_unless_present = "kubeconfig")]
    cluster: Vec<PathBuf>,
    #[command(flatten)]
    live: crate::live::LiveArgs,
    /// A file holding the one pod to explain.
    #[arg(long)]
    pod: PathBuf,
    /// A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seed for tie-breaking as Kubernetes 1.28 to 1.34, as `gantry simulate --seed`.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print one JSON object with every node.
    #[arg(long)]
    json: bool,
    /// Node manifests: for a pending pod, say whether new nodes like these would take it.
    #[arg(long, num_args = 1..)]
    node_template: Vec<PathBuf>,
    #[command(flatten)]
    release: crate::release_args::ReleaseArgs,
}

pub fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let (release, live) = args.live.read(&args.release)?;
    let config = load::config(args.config.as_deref(), release)?;
    let mut cluster = crate::live::with_files(live, load::manifests(&args.cluster, release)?);
    load::print_notes(&cluster);
    let mut pod_file = load::manifests(std::slice::from_ref(&args.pod), release)?;
    load::print_notes(&pod_file);
    anyhow::ensure!(
        pod_file.pods.len() == 1,
        "{}: expected exactly one Pod, found {}",
        args.pod.display(),
        pod_file.pods.len()
    );
    cluster.admit()?;
    // The pod may be one of the cluster's (explained as if it were not there yet): it
    // shares the cluster's priority classes, not its names.
    pod_file
        .priority_classes
        .extend(cluster.priority_classes.iter().cloned());
    pod_file.resolve_priorities()?;
    let mut pod = pod_file.pods.remove(0);
    let key = pod.key();
    if let Some(node) = pod.node_name.take() {
        crate::output::say(
            crate::output::Say::Note,
            &format!(
                "{key} is bound to {node}; explaining how it would be scheduled now, as if it were not"
            ),
        );
    }
    let pod = Arc::new(pod);
    let profile = config
        .profiles
        .iter()
        .find(|p| p.scheduler_name == pod.scheduler_name)
        .with_context(|| {
            format!(
                "no profile schedules pods with schedulerName {:?}",
                pod.scheduler_name.as_str()
            )
        })?;

    let cache = Cache::new();
    for node in &cluster.nodes {
        cache.add_node(Arc::new(node.clone()));
    }
    // The explained pod itself is left out, should the cluster hold it bound.
    for bound in cluster
        .pods
        .iter()
        .filter(|p| p.node_name.is_some() && p.key() != key)
    {
        cache.add_pod(Arc::new(bound.clone()))?;
    }
    let pod = Arc::new(load_dra(&cache, &cluster, &pod_file.dra, &pod));
    let mut objects = ApiObjects::from_cluster(&cluster);
    objects.ensure_namespace(pod.namespace);
    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot)?;

    // Coscheduling's PreFilter reads the groups from the objects, as it does in a cycle.
    let shared = gantry_cache::SharedPodGroups::default();
    *shared.lock() = crate::explain_gang::states(&cluster, &pod_file, &pod);
    objects.share_pod_groups(shared.clone());
    let explanation = explain(profile, &snapshot, &objects, &pod, args.seed);
    let groups = shared.lock();
    let view = gantry_framework::PreEnqueueView {
        groups: &groups,
        claims: Some(cache.dra()),
    };
    let held_back = held_back(profile, &pod, &view);
    let mut gang = crate::explain_gang::lines(&groups, &pod);
    let topology = crate::explain_gang::topology_line(&groups, &pod, &snapshot);
    gang.extend(topology.clone());
    let preemption = crate::explain_gang::preemption_line(&groups, &pod, profile.release);
    gang.extend(preemption.clone());
    // For a pending pod: what would change that.
    let what_if = match explanation.outcome {
        Outcome::Unschedulable { .. } => Some(crate::counterfactual::compute(
            profile,
            &cluster,
            &pod,
            &args.node_template,
        )?),
        _ => None,
    };
    if args.json {
        let mut json = output::with_release(to_json(&explanation, &pod, args.seed), release);
        json["pre_enqueue"] = held_back
            .iter()
            .map(|(plugin, message)| json!({"plugin": plugin, "message": message}))
            .collect();
        if let Some(c) = &what_if {
            json["counterfactuals"] = crate::counterfactual::to_json(c);
        }
        json["pod_group"] = crate::explain_gang::to_json(&groups, &pod);
        if let Some(says) = json["pod_group"]["says"].as_array_mut() {
            says.extend(topology.into_iter().chain(preemption).map(Value::from));
        }
        output::to_stdout(|out| writeln!(out, "{json}"))
    } else {
        output::to_stdout(|out| {
            writeln!(out, "gantry explain: decided as Kubernetes {release}")?;
            print_human(out, &explanation, &pod, args.seed, &held_back)?;
            for line in &gang {
                writeln!(out, "gang: {line}")?;
            }
            match &what_if {
                Some(c) => crate::counterfactual::print(out, c),
                None => Ok(()),
            }
        })
    }
}

/// The profile's PreEnqueue rejections of the pod (a scheduling gate, a gang short of its
/// members, a claim not made yet): kube-scheduler does not try such a pod at all, so the
/// cycle explained is the one it would get after.
fn held_back(
    profile: &Profile,
    pod: &Pod,
    cluster: &gantry_framework::PreEnqueueView<'_>,
) -> Vec<(&'static str, String)> {
    profile
        .pre_enqueue
        .iter()
        .filter_map(|plugin| {
            let status = plugin.pre_enqueue(pod, cluster);
            (!status.is_success()).then(|| (plugin.name(), status.message().to_string()))
        })
        .collect()
}

fn print_human(
    out: &mut dyn Write,
    e: &Explanation,
    pod: &Pod,
    seed: u64,
    held_back: &[(&str, String)],
) -> std::io::Result<()> {
    writeln!(
        out,
        "gantry explain: pod {} (schedulerName {}), {} nodes",
        pod.key(),
        pod.scheduler_name,
        e.nodes.len()
    )?;
    for (plugin, message) in held_back {
        writeln!(
            out,
            "PreEnqueue: {plugin}: {message}: the pod is not tried until that changes; below, \
             the cycle it would get then"
        )?;
    }
    print_pre_filter(out, e)?;
    print_filters(out, e)?;
    print_details(out, e)?;
    print_scores(out, e)?;
    writeln!(out)?;
    print_outcome(out, e, seed)?;
    if let Some((_, message)) = held_back.first() {
        writeln!(out, "until then it stays pending: {message}")?;
    }
    Ok(())
}

fn print_pre_filter(out: &mut dyn Write, e: &Explanation) -> std::io::Result<()> {
    let pre = &e.pre_filter;
    match (&pre.failed, &pre.narrowed_to) {
        (Some(status), _) => writeln!(
            out,
            "PreFilter: {} {} the pod for every node: {}",
            status.plugin(),
            if status.is_rejected() {
                "rejected"
            } else {
                "failed"
            },
            status.message()
        )?,
        (None, Some(names)) => writeln!(out, "PreFilter: narrowed the nodes to {}", join(names))?,
        (None, None) => writeln!(out, "PreFilter: all nodes considered")?,
    }
    if !pre.skipped.is_empty() {
        writeln!(
            out,
            "  skipped (nothing to check for this pod): {}",
            pre.skipped.join(", ")
        )?;
    }
    Ok(())
}

/// Nodes × the Filter plugins that rejected somewhere; plugins that passed every node
/// are listed on one line, to keep the table narrow.
fn print_filters(out: &mut dyn Write, e: &Explanation) -> std::io::Result<()> {
    if e.pre_filter.failed.is_some() {
        return Ok(());
    }
    let rejecting: Vec<usize> = (0..e.filter_plugins.len())
        .filter(|&i| {
            e.nodes.iter().any(|n| {
                n.filters
                    .get(i)
                    .is_some_and(|s| !s.is_success() && !s.is_skip())
            })
        })
        .collect();
    let passing: Vec<&str> = (0..e.filter_plugins.len())
        .filter(|i| !rejecting.contains(i))
        .filter(|&i| {
            e.nodes
                .iter()
                .any(|n| n.filters.get(i).is_some_and(Status::is_success))
        })
        .map(|i| e.filter_plugins[i])
        .collect();
    writeln!(out, "\nFilter:")?;
    if !passing.is_empty() {
        writeln!(
            out,
            "  passed on every node checked: {}",
            passing.join(", ")
        )?;
    }
    let mut table = table();
    let mut header = vec!["Node"];
    header.extend(rejecting.iter().map(|&i| e.filter_plugins[i]));
    header.push("Result");
    table.set_header(header);
    for verdict in e.nodes.iter().take(MAX_ROWS) {
        let mut row = vec![verdict.node.to_string()];
        row.extend(rejecting.iter().map(|&i| match verdict.filters.get(i) {
            Some(status) => cell(status),
            None => "—".to_string(),
        }));
        row.push(result(e, verdict).to_string());
        table.add_row(row);
    }
    writeln!(out, "{table}")?;
    if e.nodes.len() > MAX_ROWS {
        let feasible = e.nodes.iter().filter(|n| n.is_feasible()).count();
        let rejections: Vec<String> = rejecting
            .iter()
            .map(|&i| {
                let count = e
                    .nodes
                    .iter()
                    .filter(|n| n.filters.get(i).is_some_and(|s| s.is_rejected()))
                    .count();
                format!("{} on {count}", e.filter_plugins[i])
            })
            .collect();
        writeln!(
            out,
            "  (first {MAX_ROWS} of {} nodes shown; --json has all) {feasible} feasible; rejected by {}",
            e.nodes.len(),
            rejections.join(", ")
        )?;
    }
    Ok(())
}

/// The finer verdicts some plugins give (GPUShare: the node's score, then each card).
/// How a plugin's part-by-part table is headed.
struct DetailWords {
    intro: &'static str,
    part: &'static str,
    state: &'static str,
    fits: &'static str,
}

impl DetailWords {
    fn of(plugin: &str) -> DetailWords {
        if plugin == gantry_framework::plugins::dynamic_resources::NAME {
            DetailWords {
                intro: "device by device, for each request of the claims to allocate (★ picked for the pod)",
                part: "Device",
                state: "Claim and request",
                fits: "usable",
            }
        } else if plugin == gantry_framework::plugins::volume_binding::NAME {
            DetailWords {
                intro: "storage class by storage class, the share of storage the pod's claims would take (StorageCapacityScoring; the node's score is the classes' mean)",
                part: "Storage class",
                state: "Requested of capacity",
                fits: "scored",
            }
        } else {
            DetailWords {
                intro: "part by part (verdict for the pod's first container that asks; ★ given to the pod)",
                part: "Part",
                state: "In use",
                fits: "fits",
            }
        }
    }
}

fn print_details(out: &mut dyn Write, e: &Explanation) -> std::io::Result<()> {
    let with_details: Vec<&NodeVerdict> =
        e.nodes.iter().filter(|n| !n.details.is_empty()).collect();
    let plugins: Vec<&str> = with_details
        .iter()
        .flat_map(|n| n.details.iter().map(|(p, _)| *p))
        .fold(Vec::new(), |mut seen, p| {
            if !seen.contains(&p) {
                seen.push(p);
            }
            seen
        });
    for plugin in plugins {
        let words = DetailWords::of(plugin);
        writeln!(out, "\n{plugin}, {}:", words.intro)?;
        let mut table = table();
        table.set_header(vec!["Node", words.part, words.state, "Verdict", "Score"]);
        for verdict in with_details.iter().take(MAX_ROWS) {
            let Some((_, rows)) = verdict.details.iter().find(|(p, _)| *p == plugin) else {
                continue;
            };
            for (i, d) in rows.iter().enumerate() {
                table.add_row(vec![
                    if i == 0 {
                        verdict.node.to_string()
                    } else {
                        String::new()
                    },
                    format!("{}{}", d.item, if d.chosen { " ★" } else { "" }),
                    d.state.clone(),
                    d.reason.clone().unwrap_or_else(|| words.fits.to_string()),
                    d.score.map_or(String::new(), |s| format!("{s:.3}")),
                ]);
            }
        }
        writeln!(out, "{table}")?;
        if with_details.len() > MAX_ROWS {
            writeln!(
                out,
                "  (first {MAX_ROWS} of {} nodes shown; --json has all)",
                with_details.len()
            )?;
        }
    }
    if let Some((plugin, kept)) = &e.chosen_by {
        let mut list = join(kept.iter().take(MAX_TIED));
        if kept.len() > MAX_TIED {
            list += &format!(" and {} more", kept.len() - MAX_TIED);
        }
        writeln!(out, "  {plugin} chose among the feasible nodes: {list}")?;
    }
    Ok(())
}

fn print_scores(out: &mut dyn Write, e: &Explanation) -> std::io::Result<()> {
    let Some(scoring) = &e.scoring else {
        return Ok(());
    };
    writeln!(
        out,
        "\nScore (cells: raw → normalised; total = Σ normalised × weight):"
    )?;
    let skipped: Vec<&str> = scoring
        .plugins
        .iter()
        .filter(|p| p.skipped)
        .map(|p| p.plugin)
        .collect();
    if !skipped.is_empty() {
        writeln!(
            out,
            "  skipped (nothing to score for this pod): {}",
            skipped.join(", ")
        )?;
    }
    let plugins: Vec<_> = scoring.plugins.iter().filter(|p| !p.skipped).collect();
    let mut table = table();
    let mut header = vec!["Node".to_string()];
    header.extend(
        plugins
            .iter()
            .map(|p| format!("{} ×{}", p.plugin, p.weight)),
    );
    header.push("Total".to_string());
    table.set_header(header);
    let mut order: Vec<usize> = (0..scoring.nodes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(scoring.totals[i]));
    for &i in order.iter().take(MAX_ROWS) {
        let mut row = vec![scoring.nodes[i].to_string()];
        row.extend(
            plugins
                .iter()
                .map(|p| format!("{} → {}", p.raw[i], p.normalized[i])),
        );
        row.push(scoring.totals[i].to_string());
        table.add_row(row);
    }
    writeln!(out, "{table}")?;
    if order.len() > MAX_ROWS {
        writeln!(
            out,
            "  (top {MAX_ROWS} of {} scored nodes shown; --json has all)",
            order.len()
        )?;
    }
    if !e.feasible_not_scored.is_empty() {
        writeln!(
            out,
            "  {} more feasible nodes were not scored: the scheduler stops searching once it has enough (percentageOfNodesToScore)",
            e.feasible_not_scored.len()
        )?;
    }
    Ok(())
}

fn print_outcome(out: &mut dyn Write, e: &Explanation, seed: u64) -> std::io::Result<()> {
    match &e.outcome {
        Outcome::Scheduled { node, how, tied } => {
            let why = match how {
                Choice::NominatedNode => "its nominated node, which still fits".to_string(),
                Choice::OnlyFeasibleNode => "the only feasible node, so not scored".to_string(),
                Choice::ChosenByPlugin => format!(
                    "chosen by {} among the feasible nodes, so not scored",
                    e.chosen_by.as_ref().map_or("a plugin", |(p, _)| p)
                ),
                Choice::HighestScore if tied.len() > 1 => {
                    let others: Vec<&Sym> = tied.iter().filter(|n| *n != node).collect();
                    let mut list = join(others.iter().copied().take(MAX_TIED));
                    if others.len() > MAX_TIED {
                        list += &format!(" and {} more", others.len() - MAX_TIED);
                    }
                    format!("tied with {list} at the highest total; seed {seed} broke the tie")
                }
                Choice::HighestScore => "the highest total".to_string(),
            };
            writeln!(out, "would be placed on: {node} ({why})")?;
        }
        Outcome::Unschedulable { message, nominated } => {
            writeln!(out, "would not be scheduled: {message}")?;
            if let Some((node, victims)) = nominated {
                writeln!(
                    out,
                    "preemption would nominate {node} for it, evicting {}",
                    victims.join(", ")
                )?;
            }
        }
        Outcome::Error(message) => writeln!(out, "scheduling would fail: {message}")?,
    }
    Ok(())
}

pub(crate) fn table() -> Table {
    let mut table = Table::new();
    table
        .load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    table
}

/// ✓, the rejection's reasons, or the error.
fn cell(status: &Status) -> String {
    match status.code() {
        Code::Success => "✓".to_string(),
        Code::Skip => "skipped".to_string(),
        Code::Error => format!("error: {}", status.message()),
        _ => status.message(),
    }
}

fn result(e: &Explanation, verdict: &NodeVerdict) -> &'static str {
    if verdict.pre_filtered_out {
        "ruled out at PreFilter"
    } else if !verdict.is_feasible() {
        "infeasible"
    } else if e.feasible_not_scored.contains(&verdict.node) {
        "feasible, not scored"
    } else {
        "feasible"
    }
}

fn join<'a>(names: impl IntoIterator<Item = &'a Sym>) -> String {
    names
        .into_iter()
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn to_json(e: &Explanation, pod: &Pod, seed: u64) -> Value {
    let names = |nodes: &[Sym]| nodes.iter().map(|n| n.as_str()).collect::<Vec<_>>();
    let nodes: Vec<Value> = e
        .nodes
        .iter()
        .map(|n| {
            json!({
                "node": n.node.as_str(),
                "pre_filtered_out": n.pre_filtered_out,
                "feasible": n.is_feasible(),
                "filters": n.filters.iter().map(status_json).collect::<Vec<_>>(),
                "details": n.details.iter().map(|(plugin, rows)| json!({
                    "plugin": plugin,
                    "parts": rows.iter().map(|d| json!({
                        "part": d.item,
                        "in_use": d.state,
                        "fits": d.reason.is_none(),
                        "reason": d.reason,
                        "score": d.score,
                        "given": d.chosen,
                    })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let scoring = e.scoring.as_ref().map(|s| {
        let scored: Vec<Value> = s
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let scores: Vec<Value> = s
                    .plugins
                    .iter()
                    .filter(|p| !p.skipped)
                    .map(|p| {
                        json!({
                            "plugin": p.plugin,
                            "raw": p.raw[i],
                            "normalized": p.normalized[i],
                            "weighted": p.normalized[i] * p.weight,
                        })
                    })
                    .collect();
                json!({"node": node.as_str(), "scores": scores, "total": s.totals[i]})
            })
            .collect();
        let plugins: Vec<Value> = s
            .plugins
            .iter()
            .map(|p| json!({"plugin": p.plugin, "weight": p.weight, "skipped": p.skipped}))
            .collect();
        json!({"plugins": plugins, "nodes": scored})
    });
    let outcome = match &e.outcome {
        Outcome::Scheduled { node, how, tied } => json!({
            "result": "scheduled",
            "node": node.as_str(),
            "how": match how {
                Choice::NominatedNode => "nominated-node",
                Choice::OnlyFeasibleNode => "only-feasible-node",
                Choice::ChosenByPlugin => "chosen-by-plugin",
                Choice::HighestScore => "highest-score",
            },
            "tied": names(tied),
        }),
        Outcome::Unschedulable { message, nominated } => json!({
            "result": "unschedulable",
            "message": message,
            "nominated_node": nominated.as_ref().map(|(n, _)| n.as_str()),
            "victims": nominated.as_ref().map(|(_, v)| v.clone()).unwrap_or_default(),
        }),
        Outcome::Error(message) => json!({"result": "error", "message": message}),
    };
    json!({
        "pod": pod.key(),
        "scheduler_name": pod.scheduler_name.as_str(),
        "seed": seed,
        "pre_filter": {
            "skipped": e.pre_filter.skipped,
            "narrowed_to": e.pre_filter.narrowed_to.as_deref().map(names),
            "failed": e.pre_filter.failed.as_ref().map(status_json),
        },
        "filter_plugins": e.filter_plugins,
        "nodes": nodes,
        "feasible_not_scored": names(&e.feasible_not_scored),
        "chosen_by": e.chosen_by.as_ref().map(|(plugin, kept)| json!({"plugin": plugin, "nodes": names(kept)})),
        "scoring": scoring,
        "outcome": outcome,
    })
}

fn status_json(status: &Status) -> Value {
    let verdict = match status.code() {
        Code::Success => "passed",
        Code::Skip => "skipped",
        Code::Unschedulable => "unschedulable",
        Code::UnschedulableAndUnresolvable => "unresolvable",
        Code::Error | Code::Wait => "error",
    };
    json!({
        "plugin": status.plugin(),
        "verdict": verdict,
        "reasons": status.reasons().collect::<Vec<_>>(),
    })
}
