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

/// Every manifest runs the image the Containerfile builds for this version, and none asks
/// it for a shell it does not have (`FROM scratch`).
#[test]
fn the_deployed_containers_run_this_versions_image_without_a_shell() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let image = format!("gantry:{}", env!("CARGO_PKG_VERSION"));
    let mut containers = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        for document in &documents {
            let spec = &document["spec"]["template"]["spec"];
            for container in spec["containers"].as_array().into_iter().flatten() {
                if !container["image"].as_str().unwrap().starts_with("gantry:") {
                    continue;
                }
                containers += 1;
                assert_eq!(container["image"], image.as_str(), "{}", path.display());
                assert!(container["command"].is_null(), "{}", path.display());
            }
        }
    }
    assert_eq!(
        containers, 2,
        "gantry.yaml's Deployment and sweep-job.yaml's Job"
    );
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
    let mut child = common::command(&[
        "run",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--metrics-addr",
        "127.0.0.1:0",
    ])
    .env_remove("RUST_LOG")
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    child.kill().ok();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("WARN") && err.contains("refused the connection") && err.contains("retrying"),
        "{err}"
    );
}

/// A kubeconfig naming a local port nothing listens on.
fn unreachable_kubeconfig(dir: &std::path::Path) -> (String, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("http://127.0.0.1:{port}");
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n\
         users: [{{name: u, user: {{token: t}}}}]\n\
         contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n"
    );
    (common::write(dir, "kubeconfig", &text), server)
}

/// A server that refuses connections: a warning per attempt, then one error line naming
/// it and a non-zero exit; logs written to a pipe carry no colour codes, and
/// `--log-format json` writes nothing but JSON objects, the closing error too.
#[test]
fn an_unreachable_server_ends_the_run_and_logs_suit_files() {
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, server) = unreachable_kubeconfig(dir.path());
    // Both at once: each takes the start-up check's 15 s of backoff.
    let run = |format: &str| {
        common::command(&[
            "run",
            "--kubeconfig",
            &kubeconfig,
            "--metrics-addr",
            "127.0.0.1:0",
            "--log-format",
            format,
        ])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs")
    };
    let (text, json) = (run("text"), run("json"));
    let out = text.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(!err.contains('\u{1b}'), "no colour codes in a pipe: {err}");
    let last = err.trim_end().lines().last().unwrap();
    assert!(
        last.starts_with(&format!("error: {server} refused the connection"))
            && last.ends_with("gave up after 5 attempts"),
        "{err}"
    );
    let retries = err.lines().filter(|l| l.contains("retrying in")).count();
    assert_eq!(retries, 4, "{err}");

    let out = json.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    // Every line is a log object: the start line, naming the release, and the closing
    // error too.
    let logged: Vec<serde_json::Value> = err
        .trim_end()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let last = logged.last().unwrap();
    assert_eq!(last["level"], "ERROR", "{err}");
    assert!(
        last["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(&format!("{server} refused the connection"))),
        "{err}"
    );
    assert!(
        logged.iter().any(|l| l["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("deciding as Kubernetes v1.37"))),
        "{err}"
    );
    let warnings: Vec<&serde_json::Value> =
        logged.iter().filter(|l| l["level"] == "WARN").collect();
    assert_eq!(warnings.len(), 4, "{err}");
    let message = warnings[0]["fields"]["message"].as_str().unwrap();
    assert!(message.contains("refused the connection"), "{message}");
}

/// Flags that become segments of request paths are checked at start as the API server
/// checks the names they become: a hostile value is one line naming the flag, and no
/// request reaches the server (a listener counts every connection).
#[test]
fn names_that_reach_request_paths_are_refused_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    let kubeconfig_with = |name: &str, namespace: &str| {
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\n\
             contexts: [{{name: c, context: {{cluster: k, user: u, namespace: '{namespace}'}}}}]\n"
        );
        common::write(dir.path(), name, &text)
    };
    let good = kubeconfig_with("good", "team-a");
    let long_name = "a".repeat(250);
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--lease-namespace",
                "../../../api/v1/namespaces/default/pods/p1",
            ],
            "--lease-namespace",
        ),
        (&["--lease-namespace", "Bad NS!"], "--lease-namespace"),
        (&["--lease-namespace", ""], "--lease-namespace"),
        (&["--lease-namespace", "a.b"], "--lease-namespace"),
        (&["--lease-name", ""], "--lease-name"),
        (&["--lease-name", "../x"], "--lease-name"),
        (&["--lease-name", "a/b"], "--lease-name"),
        (&["--lease-name", "Gantry"], "--lease-name"),
        (
            &[
                "--lease-name",
                &long_name,
                "--shard",
                "1/2",
                "--leader-elect",
            ],
            "--lease-name with --shard",
        ),
    ];
    for (flags, named) in cases {
        let mut argv = vec![
            "run",
            "--kubeconfig",
            &good,
            "--metrics-addr",
            "127.0.0.1:0",
        ];
        argv.extend_from_slice(flags);
        let out = common::gantry_within(&argv, std::time::Duration::from_secs(30));
        assert!(!out.status.success(), "{flags:?}");
        let err = stderr(&out);
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(named),
            "{flags:?}: {err}"
        );
        // The line, and at most clap's pointer to --help.
        assert!(
            err.lines()
                .skip(1)
                .all(|l| l.is_empty() || l.starts_with("For more information")),
            "{flags:?}: {err}"
        );
    }
    // The kubeconfig context's namespace is a default for the same segment.
    let hostile = kubeconfig_with("hostile", "../../x");
    let out = common::gantry_within(
        &[
            "run",
            "--kubeconfig",
            &hostile,
            "--metrics-addr",
            "127.0.0.1:0",
        ],
        std::time::Duration::from_secs(30),
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("the client's namespace \"../../x\"") && err.contains("--lease-namespace"),
        "{err}"
    );
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("a request reached the server: {other:?}"),
    }
}

/// Shards dividing the nodes would split a gang: refused before any request.
#[test]
fn gangs_on_shards_dividing_the_nodes_are_refused_before_any_request() {
    let out = gantry(&[
        "run",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
        "--emulated-version",
        "1.36",
        "--feature-gates",
        "GenericWorkload=true,GangScheduling=true",
        "--shard",
        "0/2",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.starts_with("error: --feature-gates: GangScheduling places a gang in one cycle, which shards dividing the nodes would split"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// Coscheduling's members wait at Permit in one instance's memory: a Coscheduling profile
/// with several instances is refused before any request.
#[test]
fn a_coscheduling_profile_with_shards_is_refused_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: gangs\n  plugins:\n    multiPoint:\n      enabled: [{name: Coscheduling}]\n    queueSort:\n      enabled: [{name: Coscheduling}]\n      disabled: [{name: \"*\"}]\n",
    )
    .unwrap();
    let out = gantry(&[
        "run",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
        "--config",
        config.to_str().unwrap(),
        "--shard",
        "1/2",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.starts_with("error: --shard: profile gangs enables Coscheduling, whose pods wait at Permit in one instance's memory"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
