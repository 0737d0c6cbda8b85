//! `gantry estimate --drain`: can these nodes be removed, their pods moving elsewhere?

use std::io::Write;

use gantry_api::Sym;
use gantry_api::decode::ClusterObjects;
use gantry_whatif::ClusterSnapshot;
use gantry_whatif::drain::{BudgetTracker, DrainResult, simulate_removals};
use serde_json::{Value, json};

use crate::output;

pub fn run(
    nodes: &[String],
    mut snapshot: ClusterSnapshot,
    cluster: &ClusterObjects,
    json: bool,
    release: gantry_api::Release,
) -> anyhow::Result<()> {
    let candidates: Vec<Sym> = nodes.iter().map(|n| Sym::new(n)).collect();
    let mut budgets = BudgetTracker::new(&cluster.pdbs);
    let results = simulate_removals(&mut snapshot, &candidates, &mut budgets)?;
    if json {
        let out = json!({"drain": results.iter().map(result_json).collect::<Vec<_>>()});
        let out = output::with_release(out, release);
        return output::to_stdout(|w| writeln!(w, "{out}"));
    }
    output::to_stdout(|w| {
        writeln!(w, "gantry estimate: decided as Kubernetes {release}")?;
        for r in &results {
            print_result(w, r)?;
        }
        Ok(())
    })
}

fn print_result(w: &mut dyn Write, r: &DrainResult) -> std::io::Result<()> {
    let Some(reason) = r.unremovable else {
        writeln!(w, "{}: removable, {} pods move", r.node, r.moves.len())?;
        for (pod, to) in &r.moves {
            writeln!(w, "  {} -> {to}", pod.key())?;
        }
        return Ok(());
    };
    let detail = match (&r.blocking_pod, &r.no_place) {
        (Some(b), _) => format!(": {} ({})", b.message, b.reason.as_str()),
        (None, Some((pod, why))) => format!(": {} fits nowhere else: {why}", pod.key()),
        (None, None) => String::new(),
    };
    writeln!(w, "{}: not removable, {}{detail}", r.node, reason.as_str())
}

fn result_json(r: &DrainResult) -> Value {
    json!({
        "node": r.node.to_string(),
        "removable": r.unremovable.is_none(),
        "reason": r.unremovable.map(|u| u.as_str()),
        "blocking_pod": r.blocking_pod.as_ref().map(|b| json!({
            "pod": b.pod.key(),
            "reason": b.reason.as_str(),
            "message": b.message,
        })),
        "no_place": r.no_place.as_ref().map(|(pod, why)| json!({"pod": pod.key(), "reason": why})),
        "moves": r.moves.iter().map(|(p, n)| json!({"pod": p.key(), "node": n.to_string()})).collect::<Vec<_>>(),
    })
}
