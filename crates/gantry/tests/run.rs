//! `gantry run`'s command line: the errors a person meets before any cluster is reached.

mod common;

use std::process::Output;

use common::{assert_stderr_contains, stderr};

/// The binary with no `KUBECONFIG` from the environment.
fn gantry(args: &[&str]) -> Output {
    common::command(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("the binary runs")
}

#[test]
fn a_missing_kubeconfig_is_one_clear_line() {
    let out = gantry(&["run", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.starts_with("error: --kubeconfig /nonexistent/kubeconfig"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn scheduler_name_cannot_rename_several_profiles_and_shards_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("two.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: a\n- schedulerName: b\n",
    )
    .unwrap();
    let out = gantry(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--scheduler-name",
        "x",
    ]);
    assert!(!out.status.success());
    assert_stderr_contains(&out, "the configuration has 2 profiles");

    let out = gantry(&["run", "--shard", "3/3"]);
    assert!(!out.status.success());
    assert_stderr_contains(&out, "--shard");
}

/// The deploy manifests carry a configuration Gantry accepts, naming the scheduler the
/// example pod asks for.
#[test]
fn the_deployed_configuration_loads() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let text = std::fs::read_to_string(root.join("gantry.yaml")).unwrap();
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    let config_map = documents
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("a ConfigMap");
    let config_text = config_map["data"]["config.yaml"].as_str().unwrap();
    let config =
        gantry_framework::config::SchedulerConfig::parse(config_text, "deploy/gantry.yaml")
            .unwrap();
    assert_eq!(config.profiles.len(), 1);
    assert_eq!(
        config.profiles[0].scheduler_name.as_str(),
        "gantry-scheduler"
    );
    let example = std::fs::read_to_string(root.join("pod-example.yaml")).unwrap();
    assert!(example.contains("schedulerName: gantry-scheduler"));
}

/// Without RUST_LOG, warnings reach the user: an API server that cannot be reached is
/// said, not retried in silence (as objects `run` cannot decode are said, at the same level).
#[test]
fn warnings_are_printed_at_the_default_log_level() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let mut child = common::command(&["run", "--kubeconfig", kubeconfig.to_str().unwrap()])
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    child.kill().ok();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("WARN") && err.contains("watch failed; retrying"),
        "{err}"
    );
}
