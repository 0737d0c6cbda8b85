//! GPU sharing from the command line: explaining a pod on a HAMi cluster card by card,
//! simulating a scenario's shared pool, and the gpu-share benchmark.

mod common;

use common::{assert_stderr_contains, assert_stdout_contains, gantry, stderr, stdout};

const CLUSTER: &str = "testdata/gpu/cluster.yaml";
const POD: &str = "testdata/gpu/pod.yaml";

#[test]
fn explain_shows_every_card_and_the_node_hami_picks() {
    let out = gantry(&["explain", "--cluster", CLUSTER, "--pod", POD]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // gpu-a's card 0 holds 12,000 of 24,576 MiB: 16,000 more do not fit; its card 1 does,
    // and binpack prefers gpu-a, busier than gpu-b (whose card 1 is cordoned).
    for line in [
        "GPU-a0 (NVIDIA-L4, numa 0)",
        "1/10 shares, 12000/24576 MiB, 40/100 cores",
        "CardInsufficientMemory",
        "GPU-a1 (NVIDIA-L4, numa 0) ★",
        "CardCordoned",
        "would be placed on: gpu-a (chosen by GPUShare among the feasible nodes, so not scored)",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    let out = gantry(&["explain", "--cluster", CLUSTER, "--pod", POD, "--json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["outcome"]["how"], "chosen-by-plugin");
    assert_eq!(json["chosen_by"]["plugin"], "GPUShare");
    let parts = &json["nodes"][0]["details"][0]["parts"];
    assert_eq!(parts[2]["part"], "GPU-a1 (NVIDIA-L4, numa 0)");
    assert_eq!(parts[2]["given"], true);
}

#[test]
fn simulate_a_shared_pool_writes_the_cards_on_each_placement() {
    let dir = tempfile::tempdir().unwrap();
    let placements = dir.path().join("placements.jsonl");
    let report = dir.path().join("report");
    let out = gantry(&[
        "simulate",
        "--scenario",
        "testdata/gpu/scenario.yaml",
        "--json",
        "--placements",
        placements.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(summary["scheduled"], 7);
    assert_eq!(summary["gpu_pods"], 7);
    assert_eq!(summary["shared_cards"], 2);
    let lines = std::fs::read_to_string(&placements).unwrap();
    let train: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    let node = train["node"].as_str().unwrap();
    assert_eq!(
        train["annotations"]["hami.io/vgpu-devices-allocated"],
        format!("GPU-{node}-1,NVIDIA,16384,100:GPU-{node}-0,NVIDIA,16384,100:;")
    );
    assert!(report.join("gpu-utilisation.svg").exists());
    let human = gantry(&["simulate", "--scenario", "testdata/gpu/scenario.yaml"]);
    assert_stdout_contains(
        &human,
        "GPU sharing (HAMi): 7 pods hold cards, 2 cards are shared",
    );
}

#[test]
fn the_gpu_share_benchmark_reports_its_keys() {
    let out = gantry(&["bench", "gpu-share", "--nodes", "16", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    for key in [
        "workload",
        "nodes",
        "measured_pods",
        "pods_per_sec",
        "p50_us",
        "p99_us",
        "bytes_allocated_per_pod",
        "allocs_per_pod",
        "peak_rss_mib",
    ] {
        assert!(r.get(key).is_some_and(|v| !v.is_null()), "{key} in {r}");
    }
    assert_eq!(
        (r["workload"].as_str(), r["nodes"].as_u64()),
        (Some("gpu-share"), Some(16))
    );
    assert_eq!(r["scheduled"], 500);
    assert_eq!(r["kubernetes_release"], "v1.37");
    let sentence = gantry(&["bench", "gpu-share", "--nodes", "16"]);
    assert!(
        stdout(&sentence)
            .trim_end()
            .ends_with("as Kubernetes v1.37"),
        "{}",
        stdout(&sentence)
    );
    let bad = gantry(&["bench", "gpu-share", "--nodes", "30000"]);
    assert!(!bad.status.success());
    assert_stderr_contains(&bad, "--nodes must be 1 to 20000");
}
