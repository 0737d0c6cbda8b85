//! The counterfactual part of `gantry explain` for a pending pod: what single change would
//! let it onto each node, where preemption would make room, and whether new nodes of a
//! template (`--node-template`) would take it.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use gantry_api::Pod;
use gantry_api::decode::ClusterObjects;
use gantry_framework::Profile;
use gantry_whatif::counterfactual::{Counterfactuals, counterfactuals};
use gantry_whatif::{ClusterSnapshot, StoreKind, with_dynamic_resources};
use serde_json::{Value, json};

/// Rows of per-node counterfactuals in the human output; `--json` has all.
const MAX_ROWS: usize = 50;

pub fn compute(
    profile: &Profile,
    cluster: &ClusterObjects,
    pod: &Arc<Pod>,
    template_files: &[PathBuf],
) -> anyhow::Result<Counterfactuals> {
    let templates = crate::estimate::templates(template_files, profile.release)?;
    // The explained pod is pending: should the cluster hold it bound, leave it out.
    let without_pod;
    let cluster = if cluster.pods.iter().any(|p| p.key() == pod.key()) {
        let mut copy = cluster.clone();
        copy.pods.retain(|p| p.key() != pod.key());
        without_pod = copy;
        &without_pod
    } else {
        cluster
    };
    let mut snapshot = ClusterSnapshot::from_objects(
        StoreKind::Delta,
        with_dynamic_resources(profile.clone()),
        cluster,
    )?;
    Ok(counterfactuals(&mut snapshot, pod, &templates)?)
}

pub fn print(out: &mut dyn Write, c: &Counterfactuals) -> std::io::Result<()> {
    writeln!(out, "\nWhat would let it in:")?;
    let mut any = false;
    for n in c.nodes.iter().take(MAX_ROWS) {
        let mut said = Vec::new();
        if let Some(change) = &n.change {
            said.push(change.clone());
        }
        if let Some(victims) = &n.preempting {
            let names: Vec<String> = victims.iter().map(|p| p.key()).collect();
            said.push(format!(
                "fits {} after preempting {}",
                n.node,
                names.join(", ")
            ));
        }
        if !said.is_empty() {
            any = true;
            writeln!(out, "  {}", said.join("; "))?;
        }
    }
    if c.nodes.len() > MAX_ROWS {
        writeln!(
            out,
            "  (first {MAX_ROWS} of {} nodes looked at; --json has all)",
            c.nodes.len()
        )?;
    }
    if !any {
        writeln!(
            out,
            "  no single change to the pod, and no preemption, makes it fit an existing node"
        )?;
    }
    for t in &c.templates {
        match &t.nodes {
            Ok(n) => writeln!(
                out,
                "  {n} new node(s) of template {} would take it",
                t.template
            )?,
            Err(why) => writeln!(
                out,
                "  a new node of template {} would not take it: {why}",
                t.template
            )?,
        }
    }
    Ok(())
}

pub fn to_json(c: &Counterfactuals) -> Value {
    json!({
        "nodes": c.nodes.iter().map(|n| json!({
            "node": n.node.to_string(),
            "rejected_by": n.rejected_by,
            "change": n.change,
            "preempting": n.preempting.as_ref().map(|v| v.iter().map(|p| p.key()).collect::<Vec<_>>()),
        })).collect::<Vec<_>>(),
        "templates": c.templates.iter().map(|t| json!({
            "template": t.template.to_string(),
            "new_nodes": t.nodes.as_ref().ok(),
            "reason": t.nodes.as_ref().err(),
        })).collect::<Vec<_>>(),
    })
}
