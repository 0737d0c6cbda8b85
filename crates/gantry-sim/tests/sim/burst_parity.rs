//! Bursts recorded with real kube-scheduler v1.36.2 and its default configuration
//! (`testdata/burst-1.36`, see its README): 1,000 and 5,000 pods created as fast as the API
//! server took them, on 200 nodes. kube-scheduler decides each in a few milliseconds, but
//! its binds wait for its API client's tokens (50 a second, bursts of 100): the 1,000th
//! pod is bound 18 s after the first arrives, the 5,000th 98 s after. Replayed with the
//! recorded arrival times, Gantry's binds follow the same curve.

use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use gantry_framework::config::ClientRate;
use gantry_framework::plugins::default_profile_for;
use gantry_sim::{SimEvent, SimOptions, Simulation};
use serde_json::Value;

/// One pod of a recording: its name, and when it arrived and was bound (ms after the first
/// arrival, as the recorder's watch saw them).
struct Pod {
    name: String,
    arrived_ms: f64,
    bound_ms: f64,
}

/// A recording: the pods bound, in binding order, and the pods that fit nowhere (their
/// names and arrivals).
struct Recording {
    bound: Vec<Pod>,
    no_fit: Vec<(String, f64)>,
}

fn recorded(file: &str) -> Recording {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/burst-1.36")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut recording = Recording {
        bound: Vec::new(),
        no_fit: Vec::new(),
    };
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let name = v["pod"].as_str().unwrap().to_string();
        let arrived_ms = v["arrived_ms"].as_f64().unwrap();
        match v["bound_ms"].as_f64() {
            Some(bound_ms) => recording.bound.push(Pod {
                name,
                arrived_ms,
                bound_ms,
            }),
            None => recording.no_fit.push((name, arrived_ms)),
        }
    }
    recording
}

/// The recorder's cluster and pods (`record.py`), the pods arriving when they did; the
/// pods bound, in binding order.
fn simulate(run: &Recording, client_rate: Option<ClientRate>) -> Vec<Pod> {
    let release = Release::parse(Some("1.36"), None).unwrap();
    let mut text = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..200 {
        let _ = writeln!(
            text,
            "- {{apiVersion: v1, kind: Node, metadata: {{name: n-{i:03}, labels: {{kubernetes.io/hostname: n-{i:03}, topology.kubernetes.io/zone: z1}}}},
    status: {{allocatable: {{cpu: '32', memory: 128Gi, pods: '110'}}}}}}"
        );
    }
    let mut objects = ClusterObjects::for_release(release);
    objects.decode_more(&text, "cluster.yaml").unwrap();
    let options = SimOptions {
        client_rate,
        ..SimOptions::default()
    };
    let profiles = vec![default_profile_for("default-scheduler", release)];
    let mut sim = Simulation::new(objects, profiles, options).unwrap();
    let fitting = run.bound.iter().map(|p| (&p.name, p.arrived_ms, "100m"));
    let no_fit = run.no_fit.iter().map(|(name, at)| (name, *at, "64"));
    for (name, arrived_ms, cpu) in fitting.chain(no_fit) {
        let text = format!(
            "{{apiVersion: v1, kind: Pod, metadata: {{name: {name}, namespace: default}},
  spec: {{containers: [{{name: c, image: registry.k8s.io/pause:3.10, resources: {{requests: {{cpu: {cpu}, memory: 128Mi}}}}}}]}}}}"
        );
        let mut decoded = ClusterObjects::for_release(release);
        decoded.decode_more(&text, "pod.yaml").unwrap();
        let at = Duration::from_micros((arrived_ms * 1000.0) as u64);
        sim.schedule(at, SimEvent::CreatePod(Arc::new(decoded.pods.remove(0))));
    }
    sim.run().unwrap();
    sim.check_invariants().unwrap();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut bound: Vec<Pod> = (sim.placements().iter().zip(sim.histories()))
        .filter_map(|(p, h)| {
            Some(Pod {
                name: p.pod.name.to_string(),
                arrived_ms: ms(h.arrived),
                bound_ms: ms(h.bound?),
            })
        })
        .collect();
    assert_eq!(
        bound.len(),
        run.bound.len(),
        "the pods that fit are all bound"
    );
    bound.sort_by(|a, b| a.bound_ms.total_cmp(&b.bound_ms));
    bound
}

/// The time-to-bind quantiles (p10, p50, p90, p99, max) of a run, in ms.
fn quantiles(pods: &[Pod]) -> [f64; 5] {
    let mut waits: Vec<f64> = pods.iter().map(|p| p.bound_ms - p.arrived_ms).collect();
    waits.sort_by(f64::total_cmp);
    let at = |q: f64| waits[((waits.len() - 1) as f64 * q) as usize];
    [at(0.1), at(0.5), at(0.9), at(0.99), at(1.0)]
}

/// How far apart the runs' binding curves are: the largest difference, over k, between
/// the times their k-th binds completed.
fn curve_gap(a: &[Pod], b: &[Pod]) -> f64 {
    (a.iter().zip(b))
        .map(|(a, b)| (a.bound_ms - b.bound_ms).abs())
        .fold(0.0, f64::max)
}

/// Each recording replayed with its own arrivals, against the spread of the real runs (the
/// largest gap between the binding curves of two recordings of the burst): Gantry's curve
/// and time-to-bind quantiles within 1.25 times that of the recording's, its last bind
/// within half a second of the recorded one, and pods bound in the order they arrived but
/// for the shuffles of upstream's binding goroutines (none more than 25 places from where
/// the recording bound it). Gantry's cycles take no virtual time, so its first binds, the
/// client's burst, come up to a few hundred ms before a real scheduler's; from then on
/// the client's rate decides both.
fn check(files: &[&str], pods: usize, last_bound_s: f64) {
    let runs: Vec<Recording> = files.iter().map(|f| recorded(f)).collect();
    let spread = (runs.iter().enumerate())
        .flat_map(|(i, a)| (runs[i + 1..].iter()).map(move |b| curve_gap(&a.bound, &b.bound)))
        .fold(0.0, f64::max);
    let tolerance = 1.25 * spread;
    for (file, run) in files.iter().zip(&runs) {
        let real = &run.bound;
        assert_eq!(real.len(), pods, "{file}");
        let got = simulate(run, Some(ClientRate::DEFAULT));
        let gap = curve_gap(&got, real);
        assert!(
            gap <= tolerance,
            "{file}: the binding curves part by {gap:.0} ms (real runs by {spread:.0} ms)"
        );
        let (want, have) = (quantiles(real), quantiles(&got));
        for (w, h) in want.iter().zip(&have) {
            assert!(
                (w - h).abs() <= tolerance,
                "{file}: {have:?} against {want:?}"
            );
        }
        let last = got.last().unwrap().bound_ms / 1000.0;
        assert!(
            (last - last_bound_s).abs() < 0.5,
            "{file}: last bound at {last} s"
        );
        let place = |name: &str| real.iter().position(|p| p.name == name).unwrap();
        let moved = (got.iter().enumerate())
            .map(|(k, p)| place(&p.name).abs_diff(k))
            .max()
            .unwrap();
        assert!(moved <= 25, "{file}: a pod bound {moved} places away");
        eprintln!(
            "{file}: curves {gap:.0} ms apart (real runs {spread:.0}), quantiles {have:.0?} against {want:.0?}, {moved} places at most"
        );
    }
}

#[test]
fn a_burst_of_1000_pods_binds_at_the_default_client_rate_as_v1_36_does() {
    check(
        &["1000-a.jsonl", "1000-b.jsonl", "1000-c.jsonl"],
        1000,
        18.0,
    );
}

#[test]
fn a_burst_of_5000_pods_binds_at_the_default_client_rate_as_v1_36_does() {
    check(&["5000-a.jsonl", "5000-b.jsonl"], 5000, 98.0);
}

/// Without the client's rate limit the burst is bound as fast as it arrives: the model is
/// what the recordings test, not the arrivals.
#[test]
fn without_the_client_rate_limit_the_burst_binds_as_it_arrives() {
    let run = recorded("1000-a.jsonl");
    let got = simulate(&run, None);
    assert!(curve_gap(&got, &run.bound) > 10_000.0);
    let last_arrival = run.bound.iter().map(|p| p.arrived_ms).fold(0.0, f64::max);
    assert!(got.last().unwrap().bound_ms < last_arrival + 1000.0);
}

/// 300 pods that fit nowhere, created first, then 300 that fit (`mixed-*.jsonl`). v1.36's
/// scheduling loop writes each failure's status patch itself, waiting for its client's
/// token and the call, so the patches take 300 of the tokens the binds need: the first pod
/// that fits is bound only after about 6 s, then 50 a second. Gantry's binds follow at the
/// recorded rate (the 50th to the 300th bind within 5% of the recorded time) and end
/// within 2.5 s of the recorded last bind: a real loop, on this machine with the API
/// server busy taking the pods, spent some 30 ms a patch where Gantry's calls take 5 ms
/// (its latency model's median), so the real bucket filled up and wasted tokens Gantry's
/// used. Without the client modelled the last bind comes 8.6 s early.
#[test]
fn failures_take_the_loops_tokens_before_the_binds_as_v1_36_does() {
    for file in ["mixed-a.jsonl", "mixed-b.jsonl"] {
        let run = recorded(file);
        assert_eq!((run.bound.len(), run.no_fit.len()), (300, 300), "{file}");
        let real = &run.bound;
        let got = simulate(&run, Some(ClientRate::DEFAULT));
        let span = |pods: &[Pod]| pods[299].bound_ms - pods[50].bound_ms;
        let (want, have) = (span(real), span(&got));
        assert!(
            (have - want).abs() <= 0.05 * want,
            "{file}: binds 50 to 299 over {have:.0} ms, recorded {want:.0} ms"
        );
        let late = real[299].bound_ms - got[299].bound_ms;
        assert!(
            (0.0..=2500.0).contains(&late),
            "{file}: last bind at {:.0} ms, recorded {:.0} ms",
            got[299].bound_ms,
            real[299].bound_ms
        );
        let unmodelled = simulate(&run, None);
        assert!(
            real[299].bound_ms - unmodelled[299].bound_ms > 8000.0,
            "{file}"
        );
    }
}
