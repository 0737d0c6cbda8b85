//! A corpus of scenarios recorded step by step from the real scheduler (`testdata/<name>`:
//! a directory per scenario with its `steps.yaml`): each is checked, and every mismatch of
//! every scenario is reported at once; and the common case decided whole: the pods of
//! `steps.yaml` created 2 s apart, each pod's node or message compared with the recording.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile_for;
use gantry_sim::{SimEvent, SimOptions, Simulation};
use serde_json::Value;

/// A pod, its node, and its message while it waits.
pub type Outcome = (String, Option<String>, Option<String>);

fn scenario(corpus: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(corpus)
        .join(name)
}

fn read(corpus: &str, name: &str, file: &str) -> String {
    let path = scenario(corpus, name).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Each pod's node or message, as Gantry decides `testdata/<corpus>/<name>` as `release`:
/// `cluster.yaml`, then the pods of `steps.yaml` created 2 s apart, as they were recorded.
pub fn decide_steps(corpus: &str, name: &str, release: Release) -> Vec<Outcome> {
    let decode = |file: &str| {
        let mut objects = ClusterObjects::for_release(release);
        objects
            .decode_more(&read(corpus, name, file), file)
            .unwrap();
        objects.resolve_priorities().unwrap();
        objects
    };
    let cluster = decode("cluster.yaml");
    let steps = decode("steps.yaml");
    let profiles = vec![default_profile_for("default-scheduler", release)];
    let mut sim = Simulation::new(cluster, profiles, SimOptions::default()).unwrap();
    for (i, pod) in steps.pods.into_iter().enumerate() {
        let at = Duration::from_secs(2 * i as u64);
        sim.schedule(at, SimEvent::CreatePod(Arc::new(pod)));
    }
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    (sim.placements().iter())
        .map(|p| {
            let node = p.node.as_deref().map(str::to_string);
            (p.pod.to_string(), node, p.reason.clone())
        })
        .collect()
}

/// The recorded outcomes of `testdata/<corpus>/<name>/<file>` (`pod`, `node`, `reason`).
pub fn recorded(corpus: &str, name: &str, file: &str) -> Vec<Outcome> {
    read(corpus, name, file)
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let text = |key: &str| v[key].as_str().map(str::to_string);
            (text("pod").unwrap(), text("node"), text("reason"))
        })
        .collect()
}

/// Runs `check` on each scenario of `testdata/<corpus>` (at least `minimum` of them) and
/// fails listing every problem it returns, prefixed with the scenario's name.
pub fn check_every_scenario(corpus: &str, minimum: usize, check: impl Fn(&Path) -> Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(corpus);
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("steps.yaml").exists())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= minimum,
        "scenarios missing from {}",
        root.display()
    );
    let failures: Vec<String> = dirs
        .iter()
        .flat_map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().to_string();
            check(dir).into_iter().map(move |p| format!("{name}: {p}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
