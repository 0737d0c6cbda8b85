//! Real clusters' files through the command line: a recording made with real
//! kube-scheduler (cilium's HostPort test), a class that forbids preemption, unknown
//! fields, and input that is not a manifest at all.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{assert_stderr_contains, gantry, repo_root, stderr, stdout, write};

fn placements(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const HOSTPORT: &str = "testdata/cilium-hostport";

/// Real kube-scheduler bound `hostport-2` to the node where `hostport-1`, asking for the
/// same hostPort, had Succeeded: a finished pod holds no port.
#[test]
fn a_succeeded_pods_host_port_is_free_as_kube_scheduler_found() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("placements.jsonl");
    let out = gantry(&[
        "simulate",
        "--cluster",
        &format!("{HOSTPORT}/init.yaml"),
        &format!("{HOSTPORT}/hostport-1-succeeded.yaml"),
        "--pods",
        &format!("{HOSTPORT}/hostport-2.yaml"),
        "--placements",
        out_file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_stderr_contains(
        &out,
        "note: 1 finished pods (Succeeded or Failed) hold no resources",
    );
    // Where real kube-scheduler put it (state2.yaml records the binding).
    let root = repo_root();
    let recorded = std::fs::read_to_string(root.join(HOSTPORT).join("state2.yaml")).unwrap();
    assert!(
        recorded.contains("name: hostport-2")
            && recorded.contains("nodeName: hostport-control-plane")
    );
    let placed = placements(&out_file);
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0]["pod"], "test/hostport-2");
    assert_eq!(placed[0]["node"], "hostport-control-plane");

    let out = gantry(&[
        "explain",
        "--cluster",
        &format!("{HOSTPORT}/init.yaml"),
        &format!("{HOSTPORT}/hostport-1-succeeded.yaml"),
        "--pod",
        &format!("{HOSTPORT}/hostport-2.yaml"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("would be placed on: hostport-control-plane"),
        "{text}"
    );
    assert!(!text.contains("free ports"), "{text}");
}

/// The recorded state with both pods (one Succeeded, one Running on the same port) loads.
#[test]
fn the_recorded_state_with_both_pods_loads() {
    let out = gantry(&[
        "simulate",
        "--cluster",
        &format!("{HOSTPORT}/init.yaml"),
        &format!("{HOSTPORT}/state2.yaml"),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(summary["overcommitted_nodes"], 0);
}

const CLUSTER: &str = "\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: '2', memory: 4Gi, pods: '110'}}
---
apiVersion: v1
kind: Pod
metadata: {name: low, namespace: default}
spec:
  nodeName: n1
  priority: 0
  containers: [{name: c, resources: {requests: {cpu: '2'}}}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-no-preempt}
value: 1000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
";

fn urgent_pod(class: &str, priority: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: urgent}}\nspec:\n  priorityClassName: {class}\n{priority}  containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]\n"
    )
}

/// A pod whose class says `preemptionPolicy: Never` does not preempt, whether it carries
/// its priority (as a stored pod does) or not; the same pod with a class that allows it
/// does.
#[test]
fn a_class_with_preemption_policy_never_does_not_preempt() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(dir.path(), "cluster.yaml", CLUSTER);
    let cases = [
        ("high-no-preempt", "", false),
        ("high-no-preempt", "  priority: 1000\n", false),
        ("high", "", true),
        ("high", "  priority: 1000\n", true),
    ];
    for (class, priority, evicts) in cases {
        let pod = write(dir.path(), "pod.yaml", &urgent_pod(class, priority));
        let out_file = dir.path().join("placements.jsonl");
        let out = gantry(&[
            "simulate",
            "--cluster",
            &cluster,
            "--pods",
            &pod,
            "--placements",
            out_file.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let placed = placements(&out_file);
        let urgent = placed
            .iter()
            .find(|p| p["pod"] == "default/urgent")
            .unwrap();
        if evicts {
            assert_eq!(urgent["node"], "n1", "{urgent}");
            assert_eq!(urgent["evicted"], serde_json::json!(["default/low"]));
        } else {
            assert!(urgent["node"].is_null(), "{urgent}");
            assert!(urgent.get("evicted").is_none(), "{urgent}");
        }
    }
}

#[test]
fn unknown_fields_are_warned_about_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(
        dir.path(),
        "cluster.yaml",
        "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '2', memory: 4Gi, pods: '110'}}\n",
    );
    let pod = write(
        dir.path(),
        "pod.yaml",
        "kind: Pod\nmetadata: {name: typo}\nspec:\n  nodeSelecter: {disk: ssd}\n  containers: [{name: c, containerz: 1}]\n",
    );
    let out = gantry(&["simulate", "--cluster", &cluster, "--pods", &pod, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning: Pod default/typo: unknown field \"spec.nodeSelecter\""),
        "{err}"
    );
    assert!(
        err.contains("warning: Pod default/typo: unknown field \"spec.containers[0].containerz\""),
        "{err}"
    );
}

#[test]
fn binary_input_fails_at_once_with_one_line() {
    let start = Instant::now();
    let out = gantry(&["simulate", "--cluster", "/dev/zero"]);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        "error: /dev/zero: not valid YAML or JSON: a NUL byte at offset 0: this is binary data, not YAML or JSON text"
    );
}

/// Configurations, scenarios and kubeconfigs are small: binary data is refused at its
/// first byte, a file past the limit once the limit is passed, and bytes that are not
/// UTF-8 with their offset, never read until memory runs out.
#[test]
fn small_files_are_read_within_a_limit() {
    let dir = tempfile::tempdir().unwrap();
    for (args, line) in [
        (
            &["simulate", "--config", "/dev/zero"][..],
            "error: /dev/zero: binary data (a NUL byte at offset 0), not a YAML or JSON KubeSchedulerConfiguration",
        ),
        (
            &["simulate", "--scenario", "/dev/zero"][..],
            "error: /dev/zero: binary data (a NUL byte at offset 0), not a YAML or JSON scenario",
        ),
        (
            &["run", "--kubeconfig", "/dev/zero"][..],
            "error: --kubeconfig /dev/zero: /dev/zero: binary data (a NUL byte at offset 0), not a YAML or JSON kubeconfig",
        ),
    ] {
        let start = Instant::now();
        let out = gantry(args);
        assert!(start.elapsed() < Duration::from_secs(10), "{args:?}");
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(stderr(&out).trim(), line, "{args:?}");
    }
    let latin1 = dir.path().join("latin1.yaml");
    std::fs::write(&latin1, b"apiVersion: v1\nkind: caf\xe9\n").unwrap();
    let out = gantry(&["simulate", "--scenario", latin1.to_str().unwrap()]);
    assert!(
        stderr(&out).contains("latin1.yaml: not UTF-8 text (invalid byte at offset 24)"),
        "{}",
        stderr(&out)
    );
    // Past the limit: a configuration of 4 MiB and one byte (spaces and a newline, which
    // would otherwise parse as an empty document).
    let big = dir.path().join("big.yaml");
    std::fs::write(&big, vec![b' '; (4 << 20) + 1]).unwrap();
    let out = gantry(&["simulate", "--config", big.to_str().unwrap()]);
    assert!(
        stderr(&out).contains(
            "big.yaml: larger than 4194304 bytes, more than a KubeSchedulerConfiguration holds"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn duplicate_pods_are_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(dir.path(), "cluster.yaml", CLUSTER);
    let pod = write(
        dir.path(),
        "pod.yaml",
        "kind: Pod\nmetadata: {name: low}\nspec: {containers: [{name: c}]}\n",
    );
    let out = gantry(&["simulate", "--cluster", &cluster, "--pods", &pod]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "error: Pod default/low: metadata.name: pods \"low\" already exists: the input has two pods default/low (one bound to n1, one pending) (in {cluster} and {pod})"
        )
    );
}

#[test]
fn a_v1beta3_configuration_is_read_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "scheduler.yaml",
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
    );
    let cluster = write(dir.path(), "cluster.yaml", CLUSTER);
    let simulate = |version: &str| {
        gantry(&[
            "simulate",
            "--cluster",
            &cluster,
            "--config",
            &config,
            "--json",
            "--emulated-version",
            version,
        ])
    };
    let out = simulate("1.28");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_stderr_contains(
        &out,
        "apiVersion: KubeSchedulerConfiguration v1beta3 is deprecated in v1.26, will be removed in v1.29",
    );
    let out = simulate("1.29");
    assert!(!out.status.success());
    assert_stderr_contains(
        &out,
        "apiVersion: kubescheduler.config.k8s.io/v1beta3 was removed in v1.29, so kube-scheduler v1.29 does not read it",
    );
}
