//! Reading the user's files: Kubernetes manifests and scheduler configuration.

use std::path::{Path, PathBuf};

use anyhow::Context;
use gantry_api::decode::ClusterObjects;
use gantry_framework::config::SchedulerConfig;

/// Decodes every file into one set of objects (priority classes resolved across all).
pub fn manifests(files: &[PathBuf]) -> anyhow::Result<ClusterObjects> {
    let mut objects = ClusterObjects::default();
    for file in files {
        let text = read(file)?;
        objects.decode_more(&text, &file.display().to_string())?;
    }
    Ok(objects)
}

pub fn config(file: Option<&Path>) -> anyhow::Result<SchedulerConfig> {
    match file {
        None => Ok(SchedulerConfig::default()),
        Some(file) => Ok(SchedulerConfig::parse(
            &read(file)?,
            &file.display().to_string(),
        )?),
    }
}

pub fn read(file: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))
}

/// Says on stderr which objects were read but are not used, grouped by kind.
pub fn warn_ignored(objects: &ClusterObjects) {
    if objects.ignored.is_empty() {
        return;
    }
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    for label in &objects.ignored {
        let kind = label.split_whitespace().next().unwrap_or("?");
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some(entry) => entry.1 += 1,
            None => kinds.push((kind, 1)),
        }
    }
    let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    eprintln!(
        "note: ignored objects the scheduler does not read: {}",
        list.join(", ")
    );
}

/// The live scheduler does not track DRA allocations yet: rather than place pods while
/// ignoring their claims, commands that run it refuse them, naming the pod and field.
pub fn refuse_claims(objects: &ClusterObjects, command: &str) -> anyhow::Result<()> {
    if let Some(pod) = objects.pods.iter().find(|p| !p.resource_claims.is_empty()) {
        anyhow::bail!(
            "Pod {}: spec.resourceClaims: dynamic resource allocation is not supported by `gantry {command}` yet; `gantry estimate` simulates it",
            pod.key()
        );
    }
    Ok(())
}
