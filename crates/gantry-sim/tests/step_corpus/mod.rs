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
    outcomes(&run_steps(corpus, name, release))
}

/// [`decide_steps`] and the claims allocated at the end, in the recorder's
/// `claims.jsonl` form (share IDs only as whether there is one).
pub fn decide_steps_and_claims(
    corpus: &str,
    name: &str,
    release: Release,
) -> (Vec<Outcome>, Vec<String>) {
    let sim = run_steps(corpus, name, release);
    (outcomes(&sim), claim_lines(&sim, corpus, name, release))
}

/// The claims `sim` has allocated now, in the recorder's `claims.jsonl` form.
pub fn claim_lines(sim: &Simulation, corpus: &str, name: &str, release: Release) -> Vec<String> {
    let (cluster, steps) = (
        decode(corpus, name, "cluster.yaml", release),
        decode(corpus, name, "steps.yaml", release),
    );
    let classes: Vec<_> = cluster
        .dra
        .device_classes
        .iter()
        .cloned()
        .map(Arc::new)
        .collect();
    let classes = gantry_api::dra_extended::ExtendedResourceClasses::new(&classes);
    let mut claims = sim.cache().dra().claims();
    claims.sort_by_key(|c| (c.namespace.as_str().to_string(), c.name.to_string()));
    (claims.iter())
        .filter_map(|c| {
            let allocation = c.allocation.as_ref()?;
            let devices: Vec<Value> = (allocation.devices.iter())
                .map(|d| {
                    let amounts = d.share.iter().flat_map(|s| s.consumed.iter());
                    let mut consumed: Vec<(String, String)> = amounts
                        .map(|(k, v)| {
                            let text = gantry_api::QuantityFormat::BinarySI.canonical(*v);
                            (k.as_str().to_string(), text)
                        })
                        .collect();
                    consumed.sort();
                    let mut device = serde_json::json!({
                        "request": &*d.request, "pool": d.device.pool.as_str(),
                        "device": d.device.device.as_str(), "shared": d.share.is_some(),
                        "consumed": consumed,
                    });
                    if let Some(binding) = &d.binding {
                        let names = |list: &[gantry_api::Sym]| -> Vec<&str> {
                            list.iter().map(|c| c.as_str()).collect()
                        };
                        let status = (c.device_status().iter())
                            .filter(|s| s.device == d.device)
                            .flat_map(|s| &s.true_conditions)
                            .map(
                                |c| serde_json::json!({"type": c.kind.as_str(), "status": "True"}),
                            );
                        device["bindingConditions"] = names(&binding.conditions).into();
                        device["bindingFailureConditions"] =
                            names(&binding.failure_conditions).into();
                        device["conditions"] = status.collect::<Vec<_>>().into();
                    }
                    device
                })
                .collect();
            if c.extended_resource {
                let pod = (steps.pods.iter())
                    .find(|p| Some(&*p.uid) == c.owner_pod.as_deref())
                    .expect("the claim's owner is a pod of steps.yaml");
                return Some(extended_claim_line(c, pod, &classes, devices));
            }
            // The recorder names a template's claim `<pod>-<claim>`; Gantry, as the
            // API server's generateName does, adds five random characters.
            let name = match c.name.rsplit_once('-') {
                Some((stem, suffix)) if c.owner_pod.is_some() && suffix.len() == 5 => stem,
                _ => &*c.name,
            };
            let claim = format!("{}/{name}", c.namespace);
            let mut line = serde_json::json!({"claim": claim, "devices": devices});
            if allocation.has_binding_conditions() {
                // Where the allocation may be used, as the recorder writes it.
                let terms = allocation.node_selector.iter().flat_map(|s| &s.terms);
                let nodes: Vec<String> = terms
                    .flat_map(|t| t.match_fields.iter().chain(&t.match_expressions))
                    .map(|r| {
                        let values: Vec<&str> = r.values.iter().map(|v| v.as_str()).collect();
                        format!("{} {:?} {}", r.key, r.op, values.join(","))
                    })
                    .collect();
                line["nodeSelector"] = nodes.into();
                line["stamped"] = c.allocated_at().is_some().into();
            }
            Some(line.to_string())
        })
        .collect()
}

/// The recorder's line for the claim made for `pod`'s extended resources: its requests,
/// which container uses which (worked out again from the pod and the classes that its
/// requests name, and checked to give the claim's requests), and its devices.
fn extended_claim_line(
    claim: &gantry_api::dra::ResourceClaim,
    pod: &gantry_api::Pod,
    classes: &gantry_api::dra_extended::ExtendedResourceClasses,
    devices: Vec<Value>,
) -> String {
    let exact = |r: &gantry_api::dra::DeviceRequest| r.exact().cloned().expect("exactly");
    let requests: Vec<Value> = (claim.spec.requests.iter())
        .map(|r| {
            let gantry_api::dra::AllocationMode::ExactCount(count) = exact(r).mode else {
                panic!("an extended-resource request asks for a count");
            };
            serde_json::json!({"name": &*r.name, "class": exact(r).device_class.as_str(), "count": count})
        })
        .collect();
    let served: Vec<_> = (classes.requested_by(pod).into_iter())
        .filter(|e| {
            claim
                .spec
                .requests
                .iter()
                .any(|r| exact(r).device_class == e.class)
        })
        .collect();
    let (again, mappings) = gantry_api::dra_extended::requests_and_mappings(pod, &served);
    assert_eq!(again, claim.spec.requests, "{}", claim.name);
    let mappings: Vec<Value> = (mappings.iter())
        .map(|m| serde_json::json!({"container": &*m.container, "resource": m.resource.as_str(), "request": &*m.request}))
        .collect();
    let owner = format!("{}/{}", pod.namespace, pod.name);
    serde_json::json!({"extendedResourcesOf": owner, "requests": requests, "mappings": mappings, "devices": devices}).to_string()
}

/// The recorded lines of `testdata/<corpus>/<name>/<file>`, as JSON values written
/// compactly (to compare with [`decide_steps_and_claims`]).
pub fn recorded_lines(corpus: &str, name: &str, file: &str) -> Vec<String> {
    (read(corpus, name, file).lines())
        .map(|line| serde_json::from_str::<Value>(line).unwrap().to_string())
        .collect()
}

/// `testdata/<corpus>/<name>/<file>` decoded as `release` reads it.
fn decode(corpus: &str, name: &str, file: &str, release: Release) -> ClusterObjects {
    let mut objects = ClusterObjects::for_release(release);
    objects
        .decode_more(&read(corpus, name, file), file)
        .unwrap();
    objects.resolve_priorities().unwrap();
    objects
}

/// The simulation of `testdata/<corpus>/<name>` as [`decide_steps`] runs it, after the run.
pub fn run_steps(corpus: &str, name: &str, release: Release) -> Simulation {
    let mut sim = start_steps(corpus, name, release, SimOptions::default());
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    sim
}

/// The simulation of `testdata/<corpus>/<name>` with `options`, its pods scheduled as
/// [`run_steps`] schedules them, not yet run.
pub fn start_steps(corpus: &str, name: &str, release: Release, options: SimOptions) -> Simulation {
    let cluster = decode(corpus, name, "cluster.yaml", release);
    let steps = decode(corpus, name, "steps.yaml", release);
    // A scenario recorded with a configuration (the recorder's `-config`) has it beside.
    let profiles = match scenario(corpus, name).join("config.yaml").exists() {
        true => {
            let text = read(corpus, name, "config.yaml");
            (gantry_framework::config::SchedulerConfig::parse_for(&text, "config.yaml", release))
                .unwrap()
                .profiles
        }
        false => vec![default_profile_for("default-scheduler", release)],
    };
    let mut sim = Simulation::new(cluster, profiles, options).unwrap();
    for (i, pod) in steps.pods.into_iter().enumerate() {
        let at = Duration::from_secs(2 * i as u64);
        sim.schedule(at, SimEvent::CreatePod(Arc::new(pod)));
    }
    sim
}

fn outcomes(sim: &Simulation) -> Vec<Outcome> {
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
