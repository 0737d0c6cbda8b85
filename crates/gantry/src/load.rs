//! Reading the user's files: Kubernetes manifests and scheduler configuration, and the
//! notes about them a person should see (on stderr).

use std::path::{Path, PathBuf};

use anyhow::Context;
use gantry_api::Release;
use gantry_api::decode::{ClusterObjects, InputLimits};
use gantry_framework::config::SchedulerConfig;

use crate::output::{self, Say};

/// Warnings printed one per line before the rest are counted.
const MAX_WARNINGS_SHOWN: usize = 20;

/// Decodes every file into one set of objects, as `release`'s API server admits them,
/// streaming each file as it is read (a dump larger than
/// [`gantry_api::decode::DEFAULT_MAX_INPUT_BYTES`] is refused).
pub fn manifests(files: &[PathBuf], release: Release) -> anyhow::Result<ClusterObjects> {
    let mut objects = ClusterObjects::for_release(release);
    for file in files {
        let reader = open(file).with_context(|| format!("cannot read {}", file.display()))?;
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
    let text = read_text(file, MAX_CONFIG_BYTES, "KubeSchedulerConfiguration")?;
    let config = SchedulerConfig::parse_for(&text, &file.display().to_string(), release)?;
    for warning in &config.warnings {
        output::say(Say::Warning, &warning.to_string());
    }
    Ok(config)
}

/// The most a configuration file may hold (kube-scheduler's are a few KiB).
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;
/// The most a scenario file may hold (its workloads are templates, not pods).
pub const MAX_SCENARIO_BYTES: u64 = 64 << 20;
/// The most a kubeconfig may hold (inline certificates included).
pub const MAX_KUBECONFIG_BYTES: u64 = 16 << 20;

/// A small text file, read up to `limit` bytes: a larger one (`/dev/zero`) is refused
/// once the limit is passed, binary data at its first NUL byte, and invalid UTF-8 with
/// its offset, each as one line naming the file.
pub fn read_text(file: &Path, limit: u64, what: &str) -> anyhow::Result<String> {
    read_limited(file, limit, what, "YAML or JSON")
}

/// How long a named pipe (FIFO) may wait for a writer before it is refused: opening one
/// blocks until a writer comes, which for a FIFO nobody writes is forever.
pub const FIFO_WRITER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// [`read_text`] for text of any `format` ("CSV"): binary data is refused as not a
/// `format` `what`. A named pipe is read as it streams in, once a writer has opened it
/// within [`FIFO_WRITER_WAIT`].
pub fn read_limited(file: &Path, limit: u64, what: &str, format: &str) -> anyhow::Result<String> {
    use std::io::Read;
    let name = file.display();
    let opened = open(file).with_context(|| format!("cannot read {name}"))?;
    let mut bytes = Vec::new();
    let mut reader = opened.take(limit + 1);
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let n = reader
            .read(&mut chunk)
            .with_context(|| format!("cannot read {name}"))?;
        if n == 0 {
            break;
        }
        if let Some(i) = chunk[..n].iter().position(|&b| b == 0) {
            anyhow::bail!(
                "{name}: binary data (a NUL byte at offset {}), not a {format} {what}",
                bytes.len() + i
            );
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    anyhow::ensure!(
        bytes.len() as u64 <= limit,
        "{name}: larger than {limit} bytes, more than a {what} holds"
    );
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{name}: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Opens `file` for reading; a FIFO on a thread of its own, given up (the thread left
/// blocked) when no writer has come within [`FIFO_WRITER_WAIT`].
pub fn open(file: &Path) -> std::io::Result<std::fs::File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if std::fs::metadata(file)?.file_type().is_fifo() {
            let (send, receive) = std::sync::mpsc::channel();
            let path = file.to_path_buf();
            std::thread::spawn(move || send.send(std::fs::File::open(path)));
            return receive.recv_timeout(FIFO_WRITER_WAIT).unwrap_or_else(|_| {
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "a named pipe (FIFO) that no writer opened within {} s",
                        FIFO_WRITER_WAIT.as_secs()
                    ),
                ))
            });
        }
    }
    std::fs::File::open(file)
}

/// Says on stderr what the input holds that the scheduler reads past: fields it does not
/// know (as `kubectl` warns about them), objects of kinds it does not read (grouped by
/// kind), and finished pods (which hold nothing).
pub fn print_notes(objects: &ClusterObjects) {
    for warning in objects.warnings.iter().take(MAX_WARNINGS_SHOWN) {
        output::say(Say::Warning, &warning.to_string());
    }
    if objects.warnings.len() > MAX_WARNINGS_SHOWN {
        output::say(
            Say::Warning,
            &format!(
                "... and {} more",
                objects.warnings.len() - MAX_WARNINGS_SHOWN
            ),
        );
    }
    if !objects.finished_pods.is_empty() {
        output::say(
            Say::Note,
            &format!(
                "{} finished pods (Succeeded or Failed) hold no resources and are not scheduled",
                objects.finished_pods.len()
            ),
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
    output::say(
        Say::Note,
        &format!(
            "ignored objects the scheduler does not read: {}",
            list.join(", ")
        ),
    );
}

/// How many objects of each kind the scheduler reads `objects` holds.
fn kind_counts(objects: &ClusterObjects) -> [(&'static str, usize); 17] {
    let dra = &objects.dra;
    [
        ("Node", objects.nodes.len()),
        ("Pod", objects.pods.len()),
        ("Namespace", objects.namespaces.len()),
        ("PriorityClass", objects.priority_classes.len()),
        ("Service", objects.services.len()),
        ("controller", objects.controllers.len()),
        ("PersistentVolume", objects.pvs.len()),
        ("PersistentVolumeClaim", objects.pvcs.len()),
        ("StorageClass", objects.storage_classes.len()),
        ("CSINode", objects.csi_nodes.len()),
        ("CSIDriver", objects.csi_drivers.len()),
        ("CSIStorageCapacity", objects.storage_capacities.len()),
        ("PodDisruptionBudget", objects.pdbs.len()),
        ("DeviceClass", dra.device_classes.len()),
        ("ResourceSlice", dra.slices.len()),
        ("ResourceClaim", dra.claims.len()),
        ("ResourceClaimTemplate", dra.templates.len()),
    ]
}

/// Says on stderr which objects a flag's files hold that it does not read (`reads` are
/// the kinds it does), rather than dropping them without a word.
pub fn note_unread(objects: &ClusterObjects, flag: &str, reads: &[&str], advice: &str) {
    let unread: Vec<String> = kind_counts(objects)
        .into_iter()
        .filter(|(kind, n)| *n > 0 && !reads.contains(kind))
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    if !unread.is_empty() {
        output::say(
            Say::Warning,
            &format!(
                "{flag}: not read: {} (only {} are read from it; {advice})",
                unread.join(", "),
                reads.join(", ")
            ),
        );
    }
}
