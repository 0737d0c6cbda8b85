//! `gantry simulate --trace FILE`: a trace `gantry record` wrote, replayed through the
//! scheduler on the virtual clock, and the simulation's placements compared with the
//! bindings the cluster made.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use gantry_api::Release;
use gantry_api::trace::TraceReader;
use gantry_framework::config::SchedulerConfig;
use gantry_sim::replay::{Divergence, Replay};
use serde_json::json;

use crate::release_args::ReleaseArgs;

/// Pods named per kind of difference in the text output (`--json` has them all).
const MAX_NAMED: usize = 10;

/// The release to decide as, and why: `--emulated-version`'s, else the recorded server's.
pub fn release(args: &ReleaseArgs, path: &Path) -> anyhow::Result<(Release, String)> {
    if args.names_a_release() {
        return Ok((args.release()?, "--emulated-version".to_string()));
    }
    let name = path.display().to_string();
    let file = crate::load::open(path).with_context(|| format!("cannot read {name}"))?;
    let (header, _) = TraceReader::open(file).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let recorded = format!("the trace of {}", header.server);
    let info = match &header.server_version {
        Some(version) => Ok(version_info(version)),
        None => Err("it names no server version".to_string()),
    };
    crate::live::release_of_server(args, &recorded, info.as_ref().map_err(Clone::clone))
}

/// `v1.35.4` as `/version` says it.
fn version_info(git_version: &str) -> k8s_openapi::apimachinery::pkg::version::Info {
    let mut parts = git_version.trim_start_matches('v').split('.');
    k8s_openapi::apimachinery::pkg::version::Info {
        major: parts.next().unwrap_or_default().to_string(),
        minor: parts.next().unwrap_or_default().to_string(),
        git_version: git_version.to_string(),
        ..Default::default()
    }
}

/// Reads the trace, for the profiles of `config`.
pub fn read(path: &Path, release: Release, config: &SchedulerConfig) -> anyhow::Result<Replay> {
    let name = path.display().to_string();
    let file = crate::load::open(path).with_context(|| format!("cannot read {name}"))?;
    let names: Vec<String> = (config.profiles.iter())
        .map(|p| p.scheduler_name.to_string())
        .collect();
    let simulated = |scheduler: &str| names.iter().any(|n| n == scheduler);
    gantry_sim::replay::read(file, &name, release, &simulated).map_err(anyhow::Error::msg)
}

/// The comparison as JSON, under `replay` in `--json`.
pub fn to_json(divergence: &Divergence, replay_end_ms: u128) -> serde_json::Value {
    let mut value = serde_json::to_value(divergence).expect("plain data");
    value["reproduced"] = json!((divergence.reproduced() * 1e4).round() / 1e4);
    value["trace_ms"] = json!(replay_end_ms as u64);
    value
}

/// The comparison in words: the share reproduced first, then the pods that differ.
pub fn print(out: &mut dyn Write, d: &Divergence) -> std::io::Result<()> {
    writeln!(
        out,
        "  replay: {:.1}% of the {} bindings recorded reproduced ({} on the same node, {} on another, {} left pending); {} pods bound only in the simulation",
        d.reproduced() * 100.0,
        d.recorded,
        d.same_node,
        d.other_node.len(),
        d.pending.len(),
        d.bound_only_in_simulation.len()
    )?;
    if !d.other_node_by_cause.is_empty() {
        let causes: Vec<String> = (d.other_node_by_cause.iter())
            .map(|(cause, n)| format!("{cause} {n}"))
            .collect();
        writeln!(
            out,
            "    on another node, by how the simulation judged the recorded node: {}",
            causes.join(", ")
        )?;
    }
    for (pod, recorded, simulated, why) in d.other_node.iter().take(MAX_NAMED) {
        writeln!(
            out,
            "    {pod}: recorded on {recorded}, simulated on {simulated}; {recorded} {why}"
        )?;
    }
    for (pod, recorded, reason) in d.pending.iter().take(MAX_NAMED) {
        writeln!(
            out,
            "    {pod}: recorded on {recorded}, pending here: {reason}"
        )?;
    }
    let more =
        d.other_node.len().saturating_sub(MAX_NAMED) + d.pending.len().saturating_sub(MAX_NAMED);
    if more > 0 {
        writeln!(out, "    ({more} more; see --json)")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_version_reads_as_the_servers_version() {
        let info = version_info("v1.35.4");
        assert_eq!((info.major.as_str(), info.minor.as_str()), ("1", "35"));
        let info = version_info("v1.28.15-gke.1200");
        assert_eq!(info.minor, "28");
    }
}
