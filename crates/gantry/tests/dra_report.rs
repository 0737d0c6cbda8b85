//! DRA in `gantry simulate`'s report: devices in use per node group in summary.json and
//! on the page, and the pending pods the DynamicResources plugin held back.

mod common;

use common::{gantry, stderr, stdout};
use serde_json::{Value, json};

const SCENARIO: &str = "testdata/dra/scenario.yaml";

/// Runs the DRA scenario with a report; returns summary.json, placements.jsonl and
/// index.html.
fn report(seed: &str) -> (Value, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = gantry(&[
        "simulate",
        "--scenario",
        SCENARIO,
        "--seed",
        seed,
        "--report",
        dir.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    (
        serde_json::from_str(&read("summary.json")).unwrap(),
        read("placements.jsonl"),
        read("index.html"),
    )
}

#[test]
fn the_report_counts_devices_per_group_and_shows_why_claims_wait() {
    let (summary, placements, html) = report("0");
    // Only the gpu group has devices: all four are taken, by four of the six train pods.
    assert_eq!(
        summary["devices"],
        json!([{"group": "gpu", "driver": "gpu.example.com", "in_use": 4, "total": 4}])
    );
    assert_eq!(summary["scheduled"], 8);
    let pending: Vec<Value> = placements
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|p| p["node"].is_null())
        .collect();
    assert_eq!(pending.len(), 2);
    for p in &pending {
        assert!(p["pod"].as_str().unwrap().starts_with("default/train-"));
        let reason = p["reason"].as_str().unwrap();
        assert!(reason.contains("cannot allocate all claims"), "{reason}");
    }
    let section = &html[html
        .find("<section id=\"devices\">")
        .expect("a devices section")..];
    let section = &section[..section.find("</section>").unwrap()];
    for needle in [
        "<td>gpu</td><td>gpu.example.com</td><td>4</td><td>4</td>",
        "Pending pods the DynamicResources plugin held back",
        "cannot allocate all claims",
    ] {
        assert!(section.contains(needle), "{needle:?} not in\n{section}");
    }
    assert!(html.contains("<a href=\"#devices\">Devices</a>"));
}

#[test]
fn devices_are_counted_per_group_and_driver_in_use_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.yaml");
    std::fs::write(
        &scenario,
        r#"
deviceClasses:
- {name: cx, driver: x.example.com}
- {name: cy, driver: y.example.com}
nodeGroups:
- {name: a, count: 2, allocatable: {cpu: "8", pods: "110"}, devices: [{driver: x.example.com, count: 2}]}
- name: b
  count: 1
  allocatable: {cpu: "8", pods: "110"}
  devices: [{driver: y.example.com, count: 3}, {driver: z.example.com, count: 1}]
workloads:
- {name: wx, count: 3, claims: [{name: dev, deviceClass: cx}], template: {spec: {containers: [{name: c}]}}}
- {name: wy, count: 1, claims: [{name: dev, deviceClass: cy}], template: {spec: {containers: [{name: c}]}}}
"#,
    )
    .unwrap();
    let report = dir.path().join("report");
    let out = gantry(&[
        "simulate",
        "--scenario",
        scenario.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["scheduled"], 4);
    assert_eq!(
        summary["devices"],
        json!([
            {"group": "a", "driver": "x.example.com", "in_use": 3, "total": 4},
            {"group": "b", "driver": "y.example.com", "in_use": 1, "total": 3},
            {"group": "b", "driver": "z.example.com", "in_use": 0, "total": 1},
        ])
    );
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("No pod is pending for its claims."));
}

#[test]
fn the_same_seed_writes_the_same_report_figures() {
    let (summary, placements, _) = report("3");
    let (again, placements_again, _) = report("3");
    assert_eq!(placements, placements_again);
    assert_eq!(summary["devices"], again["devices"]);
}

#[test]
fn a_cluster_without_devices_has_no_devices_section() {
    let (summary, dir) = report_summary(&["--scenario", "crates/gantry/tests/small-scenario.yaml"]);
    assert!(summary.get("devices").is_none(), "{summary}");
    let html = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
    assert!(!html.contains("id=\"devices\""));
}

#[test]
fn a_bad_claim_is_one_line_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.yaml");
    std::fs::write(
        &scenario,
        "deviceClasses: [{name: gpu, driver: gpu.example.com}]\nworkloads: [{name: w, count: 1, claims: [{name: gpu, deviceClass: tpu}], template: {spec: {containers: [{name: c}]}}}]\n",
    )
    .unwrap();
    let out = gantry(&["simulate", "--scenario", scenario.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "workloads[0].claims[0].deviceClass: no device class \"tpu\" in deviceClasses"
        ),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A GPU that claims share (DRAConsumableCapacity) is in use once, whatever its shares:
/// in `testdata/dra-1.36/shared` every node's GPU holds one to three shares.
#[test]
fn a_shared_device_counts_as_in_use() {
    let (summary, _dir) = report_summary(&[
        "--cluster",
        "testdata/dra-1.36/shared/cluster.yaml",
        "--pods",
        "testdata/dra-1.36/shared/steps.yaml",
    ]);
    let rows: Vec<Value> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| json!({"group": n, "driver": "gpu.example.com", "in_use": 1, "total": 1}))
        .collect();
    assert_eq!(summary["devices"], json!(rows));
}

/// `simulate` of `inputs` with a report: its summary.json, and the report's directory.
fn report_summary(inputs: &[&str]) -> (Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["simulate"];
    args.extend_from_slice(inputs);
    args.extend_from_slice(&["--report", dir.path().to_str().unwrap()]);
    let out = gantry(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = std::fs::read_to_string(dir.path().join("summary.json")).unwrap();
    (serde_json::from_str(&summary).unwrap(), dir)
}
