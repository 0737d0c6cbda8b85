//! Reading the user's files: Kubernetes manifests and scheduler configuration, and the
//! notes about them a person should see (on stderr).

use std::path::{Path, PathBuf};

use anyhow::Context;
use gantry_api::Release;
use gantry_api::decode::{ClusterObjects, InputLimits};
use gantry_framework::config::SchedulerConfig;

/// Warnings printed one per line before the rest are counted.
const MAX_WARNINGS_SHOWN: usize = 20;

/// Decodes every file into one set of objects, as `release`'s API server admits them,
/// streaming each file as it is read (a dump larger than
/// [`gantry_api::decode::DEFAULT_MAX_INPUT_BYTES`] is refused).
pub fn manifests(files: &[PathBuf], release: Release) -> anyhow::Result<ClusterObjects> {
    let mut objects = ClusterObjects::for_release(release);
    for file in files {
        let reader =
            std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
        objects.read(reader, &file.display().to_string(), &InputLimits::default())?;
    }
    Ok(objects)
}

/// The KubeSchedulerConfiguration in `file` (kube-scheduler's defaults without one), as
/// `release`'s kube-scheduler reads it.
pub fn config(file: Option<&Path>, release: Release) -> anyhow::Result<SchedulerConfig> {
    let Some(file) = file else {
        return Ok(SchedulerConfig::for_release(release));
    };
    let config = SchedulerConfig::parse_for(&read(file)?, &file.display().to_string(), release)?;
    for warning in &config.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(config)
}

pub fn read(file: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))
}

/// Says on stderr what the input holds that the scheduler reads past: fields it does not
/// know (as `kubectl` warns about them), objects of kinds it does not read (grouped by
/// kind), and finished pods (which hold nothing).
pub fn print_notes(objects: &ClusterObjects) {
    for warning in objects.warnings.iter().take(MAX_WARNINGS_SHOWN) {
        eprintln!("warning: {warning}");
    }
    if objects.warnings.len() > MAX_WARNINGS_SHOWN {
        eprintln!(
            "warning: ... and {} more",
            objects.warnings.len() - MAX_WARNINGS_SHOWN
        );
    }
    if !objects.finished_pods.is_empty() {
        eprintln!(
            "note: {} finished pods (Succeeded or Failed) hold no resources and are not scheduled",
            objects.finished_pods.len()
        );
    }
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
