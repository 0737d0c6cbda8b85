//! What used to hang or panic: every run ends, every error is one line, a closed or full
//! stdout is handled as Unix tools do, and numeric flags have limits.

mod common;

use std::fs::File;
use std::process::Stdio;
use std::time::Duration;

use common::{command, gantry_within, stderr, stdout, wait_within, write};

/// Long enough for a debug build on a busy machine; the loops this catches never end.
const LIMIT: Duration = Duration::from_secs(120);

const CLUSTER: &str = "testdata/parity/mixed-reasons/cluster.yaml";

fn one_node_and(pods: &str) -> String {
    format!(
        "kind: Node\nmetadata: {{name: n1}}\nstatus: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '10'}}}}\n{pods}"
    )
}

fn pod(name: &str, spec: &str) -> String {
    format!(
        "---\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec: {{{spec}containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]}}\n"
    )
}

/// The error is one line on stderr, not a panic.
fn assert_one_line_error(out: &std::process::Output, wants: &[&str]) {
    let err = stderr(out);
    assert!(!out.status.success(), "succeeded: {}", stdout(out));
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for want in wants {
        assert!(err.contains(want), "{want:?} missing: {err}");
    }
}

#[test]
fn gated_and_other_schedulers_pods_are_written_and_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(
        dir.path(),
        "cluster.yaml",
        &one_node_and(&format!(
            "{}{}{}",
            pod("gated", "schedulingGates: [{name: example.com/later}], "),
            pod("theirs", "schedulerName: x, "),
            pod("ours", "")
        )),
    );
    let placements = dir.path().join("p.jsonl");
    let out = gantry_within(
        &[
            "simulate",
            "--cluster",
            &cluster,
            "--json",
            "--placements",
            placements.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(placements).unwrap(),
        concat!(
            r#"{"pod":"default/gated","node":null,"reason":"gated"}"#,
            "\n",
            r#"{"pod":"default/ours","node":"n1"}"#,
            "\n",
            r#"{"pod":"default/theirs","node":null,"reason":"schedulerName \"x\" matches no profile"}"#,
            "\n"
        )
    );
    let summary: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(
        (
            &summary["gated"],
            &summary["other_scheduler"],
            &summary["attempts"]
        ),
        (&1.into(), &1.into(), &1.into())
    );
}

#[test]
fn binds_that_always_fail_end_the_run_counted() {
    let scenario = common::repo_root().join("crates/gantry/tests/small-scenario.yaml");
    let out = gantry_within(
        &[
            "simulate",
            "--scenario",
            scenario.to_str().unwrap(),
            "--bind-failure-rate",
            "1",
            "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(summary["gave_up"], 60, "{summary}");
    assert_eq!(summary["scheduled"], 0, "{summary}");
}

#[test]
fn scenarios_that_overflow_or_repeat_a_name_are_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let workload = |name: &str, arrival: &str| {
        format!(
            "- {{name: {name}, count: 2, arrival: {arrival}, template: {{spec: {{containers: [{{name: c}}]}}}}}}\n"
        )
    };
    let cases = [
        (
            format!(
                "workloads:\n{}",
                workload("w", "{start: 99999999999999999999h}")
            ),
            vec!["workloads[0].arrival.start", "99999999999999999999h"],
        ),
        (
            format!(
                "workloads:\n{}",
                workload("w", "{rate: 0.0000000000000000001/h}")
            ),
            vec!["workloads[0].arrival.rate", "too slow"],
        ),
        (
            format!(
                "workloads:\n{}{}",
                workload("web", "{start: 0s}"),
                workload("web", "{start: 1s}")
            ),
            vec!["workloads[1].name", "workloads[0]", "\"web\""],
        ),
        (
            "nodeGroups:\n- {name: pool, count: 1, allocatable: {cpu: '1'}}\n- {name: pool, count: 2, allocatable: {cpu: '1'}}\n".to_string(),
            vec!["nodeGroups[1].name", "nodeGroups[0]", "\"pool\""],
        ),
    ];
    for (text, wants) in cases {
        let scenario = write(dir.path(), "s.yaml", &text);
        let out = gantry_within(&["simulate", "--scenario", &scenario], LIMIT);
        assert_one_line_error(&out, &wants);
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_program_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let pod_file = write(dir.path(), "pod.yaml", &pod("p", ""));
    let runs: [&[&str]; 3] = [
        &["explain", "--cluster", CLUSTER, "--pod", &pod_file],
        &[
            "explain",
            "--cluster",
            CLUSTER,
            "--pod",
            &pod_file,
            "--json",
        ],
        &[
            "simulate",
            "--cluster",
            CLUSTER,
            "--pods",
            "testdata/parity/mixed-reasons/pods.yaml",
            "--placements",
            "/dev/stdout",
        ],
    ];
    for args in runs {
        let mut child = command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader closes its end before the first line, as `| head -0` would.
        drop(child.stdout.take());
        let out = wait_within(child, LIMIT, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}

/// `gantry simulate >&-` ended 0 having written nothing: Rust's runtime reopens a closed
/// stdout on /dev/null. A shell's `> /dev/null` is a choice and still succeeds.
#[test]
fn a_closed_stdout_is_one_clear_error() {
    let gantry = env!("CARGO_BIN_EXE_gantry");
    for (redirect, fails) in [(">&-", true), ("> /dev/null", false)] {
        let script = format!("exec \"$0\" simulate --cluster {CLUSTER} {redirect}");
        let child = std::process::Command::new("sh")
            .args(["-c", &script, gantry])
            .current_dir(common::repo_root())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_within(child, LIMIT, &["simulate", redirect]);
        if fails {
            assert_one_line_error(
                &out,
                &["cannot write to stdout: it was closed when Gantry started"],
            );
        } else {
            assert!(out.status.success(), "{redirect}: {}", stderr(&out));
        }
    }
}

#[test]
fn a_full_stdout_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let pod_file = write(dir.path(), "pod.yaml", &pod("p", ""));
    let runs: [&[&str]; 3] = [
        &["explain", "--cluster", CLUSTER, "--pod", &pod_file],
        &["simulate", "--cluster", CLUSTER, "--json"],
        &["bench", "snapshot", "--nodes", "10", "--repetitions", "1"],
    ];
    for args in runs {
        let full = File::options().write(true).open("/dev/full").unwrap();
        let child = command(args)
            .stdout(full)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_within(child, LIMIT, args);
        assert_one_line_error(&out, &["cannot write to stdout", "No space left on device"]);
    }
}

#[test]
fn numeric_flags_have_limits() {
    let cases: [(&[&str], &str); 15] = [
        (
            &["bench", "snapshot", "--pods-per-node", "100000000"],
            "--pods-per-node",
        ),
        (&["bench", "snapshot", "--nodes", "0"], "--nodes"),
        (&["bench", "snapshot", "--nodes", "1000000000"], "--nodes"),
        (
            &["bench", "snapshot", "--repetitions", "0"],
            "--repetitions",
        ),
        (&["bench", "snapshot", "--changed", "99999999"], "--changed"),
        (&["bench", "basic", "--scale-down", "0"], "--scale-down"),
        (
            &["bench", "basic", "--percentage-of-nodes-to-score", "101"],
            "--percentage-of-nodes-to-score",
        ),
        (
            &["simulate", "--bind-latency-ms", "99999999999"],
            "--bind-latency-ms",
        ),
        (
            &["simulate", "--bind-failure-rate", "1.5"],
            "--bind-failure-rate",
        ),
        (
            &["simulate", "--bind-failure-rate", "NaN"],
            "--bind-failure-rate",
        ),
        (&["simulate", "--schedulers", "0"], "--schedulers"),
        (&["simulate", "--schedulers", "65"], "--schedulers"),
        (
            &["simulate", "--event-latency-ms", "99999999999"],
            "--event-latency-ms",
        ),
        // 100,000 threads took 169 s to start before the sweep failed.
        (
            &["sweep", "--out", "x", "--merge", "x", "--jobs", "100000"],
            "--jobs",
        ),
        (
            &["sweep", "--out", "x", "--merge", "x", "--jobs", "0"],
            "--jobs",
        ),
    ];
    for (args, flag) in cases {
        let out = gantry_within(args, LIMIT);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // Within their own ranges, the flags may still ask for too much together.
    let out = gantry_within(
        &[
            "bench",
            "snapshot",
            "--nodes",
            "100000",
            "--pods-per-node",
            "1000",
        ],
        LIMIT,
    );
    assert_one_line_error(&out, &["100000000 pods", "2000000"]);
}

/// One hostile input: the files it needs, the command line (`{dir}` stands for the folder
/// the files are written to), the exit code, the first line of stderr (`{dir}` likewise;
/// empty when nothing is written there) and, for a run that succeeds, what stdout says.
struct Hostile {
    name: &'static str,
    files: Vec<(&'static str, String)>,
    args: &'static [&'static str],
    code: i32,
    first_stderr_line: &'static str,
    stdout_has: &'static str,
}

/// A node of 4 cpu and 8Gi, and these documents after it.
fn node_and(documents: &[String]) -> String {
    let mut text = one_node_and("");
    for document in documents {
        text.push_str("---\n");
        text.push_str(document);
    }
    text
}

fn bound(name: &str, requests: &str) -> String {
    format!(
        "kind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec: {{nodeName: n1, containers: [{{name: c, resources: {{requests: {{{requests}}}}}}}]}}\n"
    )
}

fn pending(name: &str, containers: &str) -> String {
    format!(
        "kind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec: {{containers: [{containers}]}}\n"
    )
}

/// A node with one HAMi-registered card of 8000 MiB, and these documents after it.
fn gpu_node_and(documents: &[String]) -> String {
    let mut text = String::from(
        "kind: Node\nmetadata:\n  name: g1\n  annotations:\n    hami.io/node-nvidia-register: '[{\"id\":\"GPU-0\",\"index\":0,\"count\":10,\"devmem\":8000,\"devcore\":100,\"type\":\"NVIDIA-L4\",\"numa\":0,\"mode\":\"hami-core\",\"health\":true}]'\nstatus: {allocatable: {cpu: '16', memory: 64Gi, pods: '110', nvidia.com/gpu: '10'}}\n",
    );
    for document in documents {
        text.push_str("---\n");
        text.push_str(document);
    }
    text
}

fn holding_the_card(name: &str, memory_mib: &str) -> String {
    format!(
        "kind: Pod\nmetadata: {{name: {name}, namespace: default, annotations: {{hami.io/vgpu-node: g1, hami.io/vgpu-devices-allocated: 'GPU-0,NVIDIA,{memory_mib},0:;'}}}}\nspec: {{nodeName: g1, containers: [{{name: c, resources: {{limits: {{nvidia.com/gpu: '1', nvidia.com/gpumem: '{memory_mib}', nvidia.com/gpucores: '0'}}}}}}]}}\n"
    )
}

/// testdata/whatif/dra-cluster.yaml's nodes, class and slice, a claim with one selector,
/// and a pending pod using the claim.
fn dra_claim(expression: &str) -> String {
    let cluster =
        std::fs::read_to_string(common::repo_root().join("testdata/whatif/dra-cluster.yaml"))
            .unwrap();
    let end = cluster
        .find("---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate")
        .unwrap();
    format!(
        "{}---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: c, namespace: default}}\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        deviceClassName: gpu.example.com\n        selectors:\n        - cel: {{expression: '{expression}'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: default}}\nspec:\n  containers: [{{name: c}}]\n  resourceClaims: [{{name: gpu, resourceClaimName: c}}]\n",
        &cluster[..end]
    )
}

fn list(n: usize) -> String {
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(","))
}

fn hostile_inputs() -> Vec<Hostile> {
    let big_cpu = "cpu: '4611686018427387'";
    let ten = list(10);
    let sixty = list(60);
    let estimate: &'static [&'static str] = &[
        "estimate",
        "--cluster",
        "{dir}/cluster.yaml",
        "--node-template",
        "testdata/whatif/gpu-template.yaml",
        "--json",
    ];
    vec![
        Hostile {
            // Three pods of 2^62 millicores: an int64 sum wraps negative and the node
            // looked free; saturated, it is full.
            name: "cpu requests summing past int64",
            files: vec![(
                "cluster.yaml",
                node_and(&[
                    bound("a", big_cpu),
                    bound("b", big_cpu),
                    bound("c", big_cpu),
                    pending("new", "{name: c, resources: {requests: {cpu: '1'}}}"),
                ]),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml", "--placements", "/dev/stdout"],
            code: 0,
            first_stderr_line: "",
            stdout_has: r#"{"pod":"default/new","node":null,"reason":"0/1 nodes are available: 1 Insufficient cpu."#,
        },
        Hostile {
            name: "memory requests summing past int64",
            files: vec![(
                "cluster.yaml",
                node_and(
                    &(0..1200)
                        .map(|i| bound(&format!("m{i}"), "memory: 8000Ti"))
                        .chain([pending("new", "{name: c, resources: {requests: {memory: 1Gi}}}")])
                        .collect::<Vec<_>>(),
                )
                .replace("pods: '10'", "pods: '2000'"),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml", "--json"],
            code: 0,
            first_stderr_line: "",
            stdout_has: r#""scheduled":0"#,
        },
        Hostile {
            name: "one pod's requests summing past int64",
            files: vec![(
                "cluster.yaml",
                node_and(&[pending(
                    "p",
                    "{name: a, resources: {requests: {cpu: '4611686018427387'}}}, {name: b, resources: {requests: {cpu: '4611686018427387'}}}, {name: c, resources: {requests: {cpu: '4611686018427387'}}}",
                )]),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: Pod default/p: spec.containers[*].resources.requests.cpu: the pod's cpu requests (containers, init containers, overhead) add up to more than 9223372036854775807m, the most a scheduler's int64 sum holds",
            stdout_has: "",
        },
        Hostile {
            // HAMi sums card usage in int32: twice 2147483647 MiB wrapped to an empty card.
            name: "card memory used summing past int32",
            files: vec![(
                "cluster.yaml",
                gpu_node_and(&[
                    holding_the_card("a", "2147483647"),
                    holding_the_card("b", "2147483647"),
                    pending(
                        "new",
                        "{name: c, resources: {limits: {nvidia.com/gpu: '1', nvidia.com/gpumem: '1000', nvidia.com/gpucores: '10'}}}",
                    ),
                ]),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml", "--placements", "/dev/stdout"],
            code: 0,
            first_stderr_line: "",
            stdout_has: r#"{"pod":"default/new","node":null,"reason":"0/1 nodes are available: 1 1/1 CardInsufficientMemory."#,
        },
        Hostile {
            name: "nvidia.com/gpumem beyond int32",
            files: vec![(
                "cluster.yaml",
                gpu_node_and(&[pending(
                    "huge",
                    "{name: c, resources: {limits: {nvidia.com/gpu: '1', nvidia.com/gpumem: '2147483648'}}}",
                )]),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml", "--placements", "/dev/stdout"],
            code: 0,
            first_stderr_line: "",
            stdout_has: r#"{"pod":"default/huge","node":null,"reason":"0/1 nodes are available: invalid nvidia.com/gpumem value 2147483648 in container c: must be an integer between 0 and 2147483647."#,
        },
        Hostile {
            name: "podInitialBackoffSeconds near i64::MAX and a failed bind",
            files: vec![
                ("cluster.yaml", node_and(&[pending("p", "{name: c, resources: {requests: {cpu: '1'}}}")])),
                (
                    "config.yaml",
                    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npodInitialBackoffSeconds: 9223372036854775807\npodMaxBackoffSeconds: 9223372036854775807\n".to_string(),
                ),
            ],
            args: &[
                "simulate", "--cluster", "{dir}/cluster.yaml", "--config", "{dir}/config.yaml",
                "--bind-failure-rate", "1", "--placements", "/dev/stdout",
            ],
            code: 0,
            first_stderr_line: "",
            stdout_has: r#"{"pod":"default/p","node":null,"reason":"given up after 10 failed attempts"#,
        },
        Hostile {
            name: "bench clustersnapshot on one node",
            files: vec![],
            args: &["bench", "clustersnapshot", "--nodes", "1", "--pods-per-node", "1", "--changed", "1"],
            code: 0,
            first_stderr_line: "",
            stdout_has: "delta store, 1 nodes x 1 pods",
        },
        Hostile {
            name: "bench clustersnapshot without pods",
            files: vec![],
            args: &["bench", "clustersnapshot", "--nodes", "1", "--pods-per-node", "0", "--changed", "0"],
            code: 0,
            first_stderr_line: "",
            stdout_has: "delta store, 1 nodes x 0 pods",
        },
        Hostile {
            name: "bench clustersnapshot with more pods than the nodes hold",
            files: vec![],
            args: &["bench", "clustersnapshot", "--nodes", "100", "--pods-per-node", "1000"],
            code: 0,
            first_stderr_line: "",
            stdout_has: "(no node had room)",
        },
        Hostile {
            name: "a CEL selector of 10,000 terms (over 10 KiB)",
            files: vec![("cluster.yaml", dra_claim(&format!("{} == 1", vec!["1"; 10_000].join(" + "))))],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: ResourceClaim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: Too long: may not be more than 10240 bytes",
            stdout_has: "",
        },
        Hostile {
            name: "a CEL selector of 3,000 terms",
            files: vec![("cluster.yaml", dra_claim(&format!("{} == 1", vec!["1"; 3000].join("+"))))],
            args: estimate,
            code: 1,
            first_stderr_line: "error: pod default/p: claim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: compilation failed: max recursion depth exceeded",
            stdout_has: "",
        },
        Hostile {
            name: "a CEL syntax error past column 65,535",
            files: vec![("cluster.yaml", dra_claim(&format!("1 == {})", " ".repeat(70_000))))],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: ResourceClaim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: Too long: may not be more than 10240 bytes",
            stdout_has: "",
        },
        Hostile {
            name: "a CEL syntax error at column 9,006",
            files: vec![("cluster.yaml", dra_claim(&format!("1 == {})", " ".repeat(9000))))],
            args: estimate,
            code: 1,
            first_stderr_line: "error: pod default/p: claim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: compilation failed: ERROR: <input>:1:9006: Syntax error: mismatched input ')' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
            stdout_has: "",
        },
        Hostile {
            name: "100,000 nested parentheses in CEL",
            files: vec![("cluster.yaml", dra_claim(&format!("{}true{}", "(".repeat(100_000), ")".repeat(100_000))))],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: ResourceClaim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: Too long: may not be more than 10240 bytes",
            stdout_has: "",
        },
        Hostile {
            name: "3,000 nested parentheses in CEL",
            files: vec![("cluster.yaml", dra_claim(&format!("{}true{}", "(".repeat(3000), ")".repeat(3000))))],
            args: estimate,
            code: 1,
            first_stderr_line: "error: pod default/p: claim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: compilation failed: expression recursion limit exceeded: 96",
            stdout_has: "",
        },
        Hostile {
            name: "nested CEL all() running for minutes",
            files: vec![(
                "cluster.yaml",
                dra_claim(&format!(
                    "{ten}.all(x, {ten}.all(y, {ten}.all(z, {ten}.all(z2, {ten}.all(z3, {ten}.all(z4, {ten}.all(z5, x + y + z + z2 + z3 + z4 + z5 < 100)))))))"
                )),
            )],
            args: estimate,
            code: 1,
            first_stderr_line: "error: pod default/p: claim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit",
            stdout_has: "",
        },
        Hostile {
            name: "nested CEL map() growing to gigabytes",
            files: vec![(
                "cluster.yaml",
                dra_claim(&format!(
                    "{sixty}.map(x, {sixty}.map(y, {sixty}.map(z, {sixty}.map(w, {sixty})))).size() > 0"
                )),
            )],
            args: estimate,
            code: 1,
            first_stderr_line: "error: pod default/p: claim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit",
            stdout_has: "",
        },
        Hostile {
            name: "a flag the workload does not read",
            files: vec![],
            args: &["bench", "basic", "--nodes", "5"],
            code: 1,
            first_stderr_line: "error: --nodes does not apply to bench basic: only snapshot, scale, dra, multi, gpu-share, clustersnapshot read it",
            stdout_has: "",
        },
        Hostile {
            // 64 caches of 100,000 nodes ran out of memory at 5.8 GB.
            name: "bench multi past the nodes it may cache",
            files: vec![],
            args: &["bench", "multi", "--schedulers", "64", "--nodes", "20000"],
            code: 1,
            first_stderr_line: "error: --schedulers 64 × --nodes 20000 is 1280000 cached nodes, over the 1000000 bench multi may hold (each instance caches every node)",
            stdout_has: "",
        },
        Hostile {
            name: "bench dra past its largest cluster",
            files: vec![],
            args: &["bench", "dra", "--nodes", "10001"],
            code: 1,
            first_stderr_line: "error: --nodes: bench dra takes 1 to 10000 nodes, not 10001",
            stdout_has: "",
        },
        Hostile {
            name: "bench dra at scale, scaled down",
            files: vec![],
            args: &["bench", "dra", "--nodes", "100", "--scale-down", "2"],
            code: 1,
            first_stderr_line: "error: --scale-down does not apply to bench dra --nodes: give fewer nodes",
            stdout_has: "",
        },
        Hostile {
            name: "bench scale without nodes",
            files: vec![],
            args: &["bench", "scale", "--nodes", "0"],
            code: 2,
            first_stderr_line: "error: invalid value '0' for '--nodes <NODES>': 0 is not in 1..=100000",
            stdout_has: "",
        },
        Hostile {
            // It wrote nothing, silently.
            name: "a trace asked of a workload that replays none",
            files: vec![],
            args: &["bench", "basic", "--write-trace", "{dir}/t.gz"],
            code: 1,
            first_stderr_line: "error: --write-trace does not apply to bench basic: only replay, replay-affinity read it",
            stdout_has: "",
        },
        Hostile {
            name: "bench basic with several schedulers",
            files: vec![],
            args: &["bench", "basic", "--schedulers", "8"],
            code: 1,
            first_stderr_line: "error: --schedulers does not apply to bench basic: only multi read it",
            stdout_has: "",
        },
        Hostile {
            name: "a bind failure rate of -0",
            files: vec![("cluster.yaml", node_and(&[pending("p", "{name: c}")]))],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml", "--bind-failure-rate", "-0", "--json"],
            code: 0,
            first_stderr_line: "",
            stdout_has: r#""scheduled":1"#,
        },
        Hostile {
            name: "a shard of 2^32 instances",
            files: vec![],
            args: &["run", "--shard", "0/4294967296"],
            code: 2,
            first_stderr_line: "error: invalid value '0/4294967296' for '--shard <SHARD>': \"0/4294967296\": the number of instances must be 1 to 1024, not 4294967296",
            stdout_has: "",
        },
        Hostile {
            // serde_json keeps the last of two keys; kube-apiserver's strict decoding refuses.
            name: "JSON with a key twice",
            files: vec![(
                "cluster.json",
                r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"n1"},"status":{"allocatable":{"cpu":"4","cpu":"400"}}}]}"#.to_string(),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.json"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.json: not valid YAML or JSON: document 1 items[0]: duplicate field \"cpu\" at line 1 column 87",
            stdout_has: "",
        },
        Hostile {
            name: "JSON documents separated as YAML documents are",
            files: vec![(
                "cluster.json",
                "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"status\":{\"allocatable\":{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"10\"}}}\n---\n{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}\n".to_string(),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.json", "--json"],
            code: 0,
            first_stderr_line: "",
            stdout_has: r#""scheduled":1"#,
        },
        Hostile {
            name: "a Latin-1 byte in a manifest",
            files: vec![("cluster.latin1.yaml", one_node_and("# café\n"))],
            args: &["simulate", "--cluster", "{dir}/cluster.latin1.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.latin1.yaml: not valid YAML or JSON: the byte at offset 96 is not UTF-8 text (YAML and JSON are UTF-8; was the file saved as Latin-1?)",
            stdout_has: "",
        },
        Hostile {
            name: "a configuration with a key twice",
            files: vec![(
                "config.json",
                r#"{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"KubeSchedulerConfiguration","kind":"KubeSchedulerConfiguration"}"#.to_string(),
            )],
            args: &["simulate", "--config", "{dir}/config.json"],
            code: 1,
            first_stderr_line: "error: {dir}/config.json: duplicate field \"kind\" at line 1, column 84",
            stdout_has: "",
        },
        Hostile {
            name: "a configuration of two documents",
            files: vec![(
                "config.yaml",
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n---\napiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n".to_string(),
            )],
            args: &["simulate", "--config", "{dir}/config.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/config.yaml: a second YAML document at line 4, column 1: this file holds one",
            stdout_has: "",
        },
        Hostile {
            name: "a scenario nested past the parser's depth",
            files: vec![("scenario.yaml", format!("nodeGroups: {}{}\n", "[".repeat(70), "]".repeat(70)))],
            args: &["simulate", "--scenario", "{dir}/scenario.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/scenario.yaml: nested more than 64 levels deep at line 1, column 76",
            stdout_has: "",
        },
        Hostile {
            name: "a kubeconfig with a key twice",
            files: vec![("kubeconfig", "apiVersion: v1\nkind: Config\nclusters: []\nclusters: []\n".to_string())],
            args: &["run", "--kubeconfig", "{dir}/kubeconfig"],
            code: 1,
            first_stderr_line: "error: --kubeconfig {dir}/kubeconfig: duplicate field \"clusters\" at line 4, column 1",
            stdout_has: "",
        },
        Hostile {
            // kube's message already ends with its cause, which the chain printed twice more.
            name: "a kubeconfig whose certificate is not base64",
            files: vec![(
                "kubeconfig",
                "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9', certificate-authority-data: '!!!'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n".to_string(),
            )],
            args: &["run", "--kubeconfig", "{dir}/kubeconfig"],
            code: 1,
            first_stderr_line: "error: --kubeconfig {dir}/kubeconfig: failed to load certificate authority: failed to decode base64 data: Invalid symbol 33, offset 0.",
            stdout_has: "",
        },
        Hostile {
            name: "a drain of every node",
            files: vec![(
                "cluster.yaml",
                format!(
                    "{}---\n{}",
                    one_node_and(&format!(
                        "---\n{}",
                        bound("a", "cpu: '1'").replace(
                            "namespace: default}",
                            "namespace: default, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: u1, controller: true}]}"
                        )
                    )),
                    one_node_and("").replace("name: n1", "name: n2")
                ),
            )],
            args: &["estimate", "--cluster", "{dir}/cluster.yaml", "--drain", "n1,n2"],
            code: 0,
            first_stderr_line: "",
            stdout_has: "n1: not removable, NoPlaceToMovePods: default/a fits nowhere else: 0/2 nodes are available: 2 being drained.",
        },
        Hostile {
            name: "one node in two files",
            files: vec![("a.yaml", one_node_and("")), ("b.yaml", one_node_and(""))],
            args: &["simulate", "--cluster", "{dir}/a.yaml", "--cluster", "{dir}/b.yaml"],
            code: 1,
            first_stderr_line: "error: Node n1: metadata.name: nodes \"n1\" already exists: the input has two Node objects of that name (in {dir}/a.yaml and {dir}/b.yaml)",
            stdout_has: "",
        },
        Hostile {
            name: "a Node in a --pods file",
            files: vec![
                ("cluster.yaml", one_node_and("")),
                ("pods.yaml", node_and(&[pending("p", "{name: c}")]).replace("name: n1", "name: n2")),
            ],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml", "--pods", "{dir}/pods.yaml"],
            code: 0,
            first_stderr_line: "warning: --pods: not read: 1 Node (only Pod, PodGroup, PriorityClass, DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate are read from it; put the cluster's other objects in --cluster)",
            stdout_has: "1 scheduled",
        },
        Hostile {
            name: "a Pod in a --node-template file",
            files: vec![
                ("cluster.yaml", node_and(&[pending("p", "{name: c, resources: {requests: {cpu: '8'}}}")])),
                ("template.yaml", node_and(&[pending("q", "{name: c}")]).replace("cpu: '4'", "cpu: '16'")),
            ],
            args: &["estimate", "--cluster", "{dir}/cluster.yaml", "--node-template", "{dir}/template.yaml"],
            code: 0,
            first_stderr_line: "warning: --node-template {dir}/template.yaml: not read: 1 Pod (only Node, ResourceSlice are read from it; the pods to place go in --cluster or --pods)",
            stdout_has: "",
        },
        Hostile {
            name: "explain of a pod held back by a scheduling gate",
            files: vec![
                ("cluster.yaml", one_node_and("")),
                ("pod.yaml", pod("gated", "schedulingGates: [{name: example.com/later}], ")),
            ],
            args: &["explain", "--cluster", "{dir}/cluster.yaml", "--pod", "{dir}/pod.yaml"],
            code: 0,
            first_stderr_line: "",
            stdout_has: "until then it stays pending: waiting for scheduling gates: [example.com/later]",
        },
        Hostile {
            name: "a scenario deleting more nodes than its group has",
            files: vec![(
                "scenario.yaml",
                "nodeGroups:\n- {name: pool, count: 2, allocatable: {cpu: '4', memory: 8Gi, pods: '10'}}\nevents:\n- {at: 1s, deleteNodes: {group: pool, count: 3}}\n".to_string(),
            )],
            args: &["simulate", "--scenario", "{dir}/scenario.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/scenario.yaml: events[0].deleteNodes.count: 3 nodes asked for, but group pool has 2 by then",
            stdout_has: "",
        },
        Hostile {
            name: "a ReplicaSet whose selector does not match its template",
            files: vec![(
                "cluster.yaml",
                node_and(&["apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web, namespace: default}\nspec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: api}}, spec: {containers: [{name: c}]}}}\n".to_string()]),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: ReplicaSet default/web: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"api\"}: `selector` does not match template `labels`",
            stdout_has: "",
        },
        Hostile {
            name: "a matchLabelKeys key also in the selector",
            files: vec![(
                "cluster.yaml",
                node_and(&["kind: Pod\nmetadata: {name: p, namespace: default, labels: {app: web}}\nspec: {containers: [{name: c}], topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [app]}]}\n".to_string()]),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: Pod default/p: spec.topologySpreadConstraints[0].matchLabelKeys[0]: Invalid value: \"app\": exists in both matchLabelKeys and labelSelector",
            stdout_has: "",
        },
        Hostile {
            name: "memory of 1Ei, which int64 holds",
            files: vec![(
                "cluster.yaml",
                node_and(&[pending("p", "{name: c, resources: {requests: {memory: 1Ei}}}")])
                    .replace("memory: 8Gi", "memory: 1Ei"),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml", "--json"],
            code: 0,
            first_stderr_line: "",
            stdout_has: r#""scheduled":1"#,
        },
        Hostile {
            // Sums saturate at i64::MAX; a total exactly there did not overflow and was
            // refused as if it had.
            name: "a pod's memory request of exactly int64's largest",
            files: vec![(
                "cluster.yaml",
                node_and(&[pending("p", "{name: c, resources: {requests: {memory: '9223372036854775807'}}}")])
                    .replace("memory: 8Gi", "memory: '9223372036854775807'"),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml", "--json"],
            code: 0,
            first_stderr_line: "",
            stdout_has: r#""scheduled":1"#,
        },
        Hostile {
            name: "memory of one byte past int64's largest",
            files: vec![(
                "cluster.yaml",
                one_node_and("").replace("memory: 8Gi", "memory: '9223372036854775808'"),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: Node n1: status.allocatable.memory: quantity \"9223372036854775808\" is too large: at most 9223372036854775807, counted in whole units in an int64",
            stdout_has: "",
        },
        Hostile {
            name: "an init container's restartPolicy Sometimes",
            files: vec![(
                "cluster.yaml",
                node_and(&["kind: Pod\nmetadata: {name: p, namespace: default}\nspec: {initContainers: [{name: i, restartPolicy: Sometimes}], containers: [{name: c}]}\n".to_string()]),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml", "--emulated-version", "1.36"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: Pod default/p: spec.initContainers[0].restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\", \"OnFailure\"",
            stdout_has: "",
        },
        Hostile {
            name: "a pod with two claims of one name",
            files: vec![(
                "cluster.yaml",
                node_and(&["kind: Pod\nmetadata: {name: p, namespace: default}\nspec: {resourceClaims: [{name: a, resourceClaimTemplateName: t}, {name: a, resourceClaimTemplateName: t}], containers: [{name: c}]}\n".to_string()]),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: Pod default/p: spec.resourceClaims[1].name: Duplicate value: \"a\"",
            stdout_has: "",
        },
        Hostile {
            name: "a container naming a claim the pod does not have",
            files: vec![(
                "cluster.yaml",
                node_and(&["kind: Pod\nmetadata: {name: p, namespace: default}\nspec: {resourceClaims: [{name: a, resourceClaimTemplateName: t}], containers: [{name: c, resources: {claims: [{name: gpu}]}}]}\n".to_string()]),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: Pod default/p: spec.containers[0].resources.claims[0]: Not found: \"gpu\": must be one of the names in pod.spec.resourceClaims: a",
            stdout_has: "",
        },
        Hostile {
            name: "a device whose version attribute is not a semantic version",
            files: vec![(
                "cluster.yaml",
                node_and(&["apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: d0, attributes: {driverVersion: {version: 1.2.x}}}]}\n".to_string()]),
            )],
            args: &["simulate", "--cluster", "{dir}/cluster.yaml"],
            code: 1,
            first_stderr_line: "error: {dir}/cluster.yaml: ResourceSlice s: spec.devices[0].attributes.driverVersion.version: Invalid value: \"1.2.x\": must be a string compatible with semver.org spec 2.0.0",
            stdout_has: "",
        },
        Hostile {
            name: "a release number only too large",
            files: vec![],
            args: &["simulate", "--emulated-version", "1.4294967296"],
            code: 1,
            first_stderr_line: "error: --emulated-version: Gantry decides as Kubernetes 1.28 to 1.37, not 1.4294967296",
            stdout_has: "",
        },
        Hostile {
            name: "a shard of 2^64 instances",
            files: vec![],
            args: &["run", "--shard", "0/18446744073709551616"],
            code: 2,
            first_stderr_line: "error: invalid value '0/18446744073709551616' for '--shard <SHARD>': \"0/18446744073709551616\": the number of instances must be 1 to 1024, not 18446744073709551616",
            stdout_has: "",
        },
    ]
}

const NODE_HEADER: &str = "sn,cpu_milli,memory_mib,gpu,model\n";
const POD_HEADER: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";

fn tiny_pods() -> String {
    std::fs::read_to_string(common::repo_root().join("testdata/openb/tiny_pods.csv")).unwrap()
}

/// A result file of `gantry sweep` (allocation.csv when `allocation`) holding the rows of
/// these experiments (`workload,policy,tune,seed`), their columns empty.
fn result_file(allocation: bool, experiments: &[&str]) -> String {
    let columns: Vec<String> = (0..=130).map(|c| c.to_string()).collect();
    let total = if allocation { ",total_gpus" } else { "" };
    let mut text = format!(
        "workload,sc_policy,tune,seed{total},{}\n",
        columns.join(",")
    );
    for e in experiments {
        let total = if allocation { ",14" } else { "" };
        text.push_str(&format!("{e}{total}{}\n", ",".repeat(131)));
    }
    text
}

/// A part to merge whose three files hold these experiments each.
fn part(dir: &'static str, [a, f, r]: [&[&str]; 3]) -> Vec<(&'static str, String)> {
    let path = |file: &str| &*format!("{dir}/{file}").leak();
    vec![
        (path("allocation.csv"), result_file(true, a)),
        (path("analysis_frag_discrete.csv"), result_file(false, f)),
        (
            path("analysis_frag_ratio_discrete.csv"),
            result_file(false, r),
        ),
    ]
}

/// What `gantry sweep` once ran forever on, ran out of memory on, or wrote empty or
/// partial files for and exited 0 (issue 33).
fn hostile_sweeps() -> Vec<Hostile> {
    let one = "p0,1000,100,1,500\n";
    let t = "tiny_pods,06-FGD,1.3";
    vec![
        Hostile {
            // Both named `trace`: one's results stood in for the other's.
            name: "two pod traces of one file name in two folders",
            files: vec![
                ("x/trace.csv", tiny_pods()),
                ("y/trace.csv", tiny_pods().replace("tiny-pod", "other-pod")),
            ],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "{dir}/x/trace.csv",
                "{dir}/y/trace.csv",
                "--seeds",
                "1",
                "--policy",
                "FGD",
                "--out",
                "{dir}/out",
            ],
            code: 0,
            first_stderr_line: "",
            stdout_has: "gantry sweep: 2 experiments in",
        },
        Hostile {
            name: "one pod trace given twice",
            files: vec![("x/trace.csv", tiny_pods())],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "{dir}/x/trace.csv",
                "{dir}/x/../x/trace.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: --pods {dir}/x/../x/trace.csv: the same file as {dir}/x/trace.csv, given before",
            stdout_has: "",
        },
        Hostile {
            name: "a workload name the result CSVs cannot hold",
            files: vec![("a,b.csv", tiny_pods())],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "{dir}/a,b.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/a,b.csv: the workload name \"a,b\" holds a comma, a quote or a line break, which the result CSVs cannot hold: rename the file",
            stdout_has: "",
        },
        Hostile {
            // Copies of tasks without GPUs never reach 1.3 × the GPUs: it ran until 8 GiB.
            name: "a pod trace where no task asks for a GPU",
            files: vec![(
                "p.csv",
                format!("{POD_HEADER}p0,1000,100,0,0\np1,1000,100,1,0\n"),
            )],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "{dir}/p.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/p.csv: no task asks for a GPU (`num_gpu` and `gpu_milli` above 0): the curves are over arrived GPU workload",
            stdout_has: "",
        },
        Hostile {
            name: "a node trace without GPUs",
            files: vec![
                ("n.csv", format!("{NODE_HEADER}a,64000,262144,0,\n")),
                ("p.csv", format!("{POD_HEADER}{one}")),
            ],
            args: &[
                "sweep",
                "--nodes",
                "{dir}/n.csv",
                "--pods",
                "{dir}/p.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/n.csv: no node has a GPU (column `gpu`): the curves are of GPU allocation",
            stdout_has: "",
        },
        Hostile {
            // num_gpu × gpu_milli wrapped negative, and the tuning never ended.
            name: "num_gpu of i64::MAX",
            files: vec![(
                "p.csv",
                format!("{POD_HEADER}{one}p1,1000,100,9223372036854775807,1000\n"),
            )],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "{dir}/p.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/p.csv:3: field `num_gpu`: too large (out of range: 9223372036854775807 cards of 1000 milli-GPU are more than 9223372036854775807 milli-GPU)",
            stdout_has: "",
        },
        Hostile {
            // 1.4 million copies per experiment, on every thread at once.
            name: "--inflation 100 with tasks of 1 milli-GPU",
            files: vec![("p.csv", format!("{POD_HEADER}p0,1000,100,1,1\n"))],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "{dir}/p.csv",
                "--inflation",
                "100",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/p.csv: --inflation 100: reaching 100 × 14 GPUs takes some 1400000 tasks (the trace's 1 ask for 1 milli-GPU), more than the 1000000 an experiment may place",
            stdout_has: "",
        },
        Hostile {
            name: "a cpu request of 2^63 in a trace",
            files: vec![(
                "p.csv",
                format!("{POD_HEADER}{one}p1,9223372036854775808,100,1,500\n"),
            )],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "{dir}/p.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/p.csv:3: field `cpu_milli`: too large (out of range: at most 9223372036854775807), found \"9223372036854775808\"",
            stdout_has: "",
        },
        Hostile {
            // Read whole: /dev/zero reached 4 GB.
            name: "/dev/zero as a pod trace",
            files: vec![],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "/dev/zero",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: /dev/zero: binary data (a NUL byte at offset 0), not a CSV pod trace",
            stdout_has: "",
        },
        Hostile {
            name: "/dev/zero as published curves",
            files: vec![],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "testdata/openb/tiny_pods.csv",
                "--compare",
                "/dev/zero",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: --compare: /dev/zero: binary data (a NUL byte at offset 0), not a CSV curve file",
            stdout_has: "",
        },
        Hostile {
            name: "an empty node trace",
            files: vec![
                ("n.csv", String::new()),
                ("p.csv", format!("{POD_HEADER}{one}")),
            ],
            args: &[
                "sweep",
                "--nodes",
                "{dir}/n.csv",
                "--pods",
                "{dir}/p.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/n.csv:1: empty file, expected a header line",
            stdout_has: "",
        },
        Hostile {
            name: "a node trace of a header alone",
            files: vec![
                ("n.csv", NODE_HEADER.to_string()),
                ("p.csv", format!("{POD_HEADER}{one}")),
            ],
            args: &[
                "sweep",
                "--nodes",
                "{dir}/n.csv",
                "--pods",
                "{dir}/p.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/n.csv: no nodes after the header line",
            stdout_has: "",
        },
        Hostile {
            name: "a pod trace of a header alone",
            files: vec![("p.csv", POD_HEADER.to_string())],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "{dir}/p.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/p.csv: no tasks after the header line",
            stdout_has: "",
        },
        Hostile {
            name: "two nodes of one name",
            files: vec![
                (
                    "n.csv",
                    format!(
                        "{NODE_HEADER}a,64000,262144,2,T4\nb,64000,262144,2,T4\na,32000,131072,1,T4\n"
                    ),
                ),
                ("p.csv", format!("{POD_HEADER}{one}")),
            ],
            args: &[
                "sweep",
                "--nodes",
                "{dir}/n.csv",
                "--pods",
                "{dir}/p.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/n.csv:4: field `sn`: node \"a\" is also on line 2: names must be unique",
            stdout_has: "",
        },
        Hostile {
            name: "two tasks of one name",
            files: vec![("p.csv", format!("{POD_HEADER}{one}{one}"))],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "{dir}/p.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: {dir}/p.csv:3: field `name`: task \"p0\" is also on line 2: names must be unique",
            stdout_has: "",
        },
        Hostile {
            // deviation.csv came out empty and the sweep exited 0.
            name: "--compare with no curve of a workload swept",
            files: vec![(
                "published.csv",
                result_file(true, &["openb_pod_list_default,06-FGD,1.3,42"]),
            )],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "testdata/openb/tiny_pods.csv",
                "--compare",
                "{dir}/published.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: --compare {dir}/published.csv: none of its curves is of a workload and policy swept here (its workloads: openb_pod_list_default; swept: tiny_pods)",
            stdout_has: "",
        },
        Hostile {
            name: "--compare of a header alone",
            files: vec![("published.csv", result_file(true, &[]))],
            args: &[
                "sweep",
                "--nodes",
                "testdata/openb/tiny_nodes.csv",
                "--pods",
                "testdata/openb/tiny_pods.csv",
                "--compare",
                "{dir}/published.csv",
                "--out",
                "{dir}/out",
            ],
            code: 1,
            first_stderr_line: "error: --compare {dir}/published.csv: no curve in it (rows of `workload,sc_policy,tune,seed,total_gpus,0,...,130` after a header line)",
            stdout_has: "",
        },
        Hostile {
            name: "a --merge part whose three files hold other experiments",
            files: part(
                "p",
                [
                    &[&format!("{t},1"), &format!("{t},2")],
                    &[&format!("{t},1")],
                    &[&format!("{t},1"), &format!("{t},2")],
                ],
            ),
            args: &["sweep", "--merge", "{dir}/p", "--out", "{dir}/out"],
            code: 1,
            first_stderr_line: "error: {dir}/p/allocation.csv:3: experiment tiny_pods 06-FGD 1.3 2 is not in {dir}/p/analysis_frag_discrete.csv: a part's three files hold the same experiments",
            stdout_has: "",
        },
        Hostile {
            name: "--merge of parts without experiments",
            files: part("p", [&[], &[], &[]]),
            args: &["sweep", "--merge", "{dir}/p", "--out", "{dir}/out"],
            code: 1,
            first_stderr_line: "error: --merge: the parts hold no experiment",
            stdout_has: "",
        },
    ]
}

#[test]
fn a_fifo_nobody_writes_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pods.csv");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap();
    let out_dir = dir.path().join("out");
    let started = std::time::Instant::now();
    let out = gantry_within(
        &[
            "sweep",
            "--nodes",
            "testdata/openb/tiny_nodes.csv",
            "--pods",
            fifo,
            "--out",
            out_dir.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_one_line_error(
        &out,
        &[&format!(
            "error: cannot read {fifo}: a named pipe (FIFO) that no writer opened within 5 s"
        )],
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    // Manifests and configurations alike (`--cluster` blocked forever).
    for flag in ["--cluster", "--config"] {
        let started = std::time::Instant::now();
        let out = gantry_within(&["simulate", flag, fifo], LIMIT);
        assert_one_line_error(
            &out,
            &[&format!(
                "error: cannot read {fifo}: a named pipe (FIFO) that no writer opened within 5 s"
            )],
        );
        assert!(started.elapsed() < Duration::from_secs(60), "{flag}");
    }
    // A FIFO with a writer is read as it streams in.
    let writer = {
        let fifo = fifo.to_string();
        std::thread::spawn(move || std::fs::write(fifo, tiny_pods()).unwrap())
    };
    let out = gantry_within(
        &[
            "sweep",
            "--nodes",
            "testdata/openb/tiny_nodes.csv",
            "--pods",
            fifo,
            "--seeds",
            "1",
            "--policy",
            "FGD",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        LIMIT,
    );
    if !out.status.success() {
        // Let the writer, still waiting for a reader, end.
        std::io::Read::read_to_end(&mut File::open(fifo).unwrap(), &mut Vec::new()).unwrap();
    }
    writer.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("gantry sweep: 1 experiments"));
}

#[test]
fn a_trace_past_its_limit_is_refused_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.csv");
    let mut text = tiny_pods().into_bytes();
    text.resize((64 << 20) + 1, b'\n');
    std::fs::write(&path, text).unwrap();
    let out = gantry_within(
        &[
            "sweep",
            "--nodes",
            "testdata/openb/tiny_nodes.csv",
            "--pods",
            path.to_str().unwrap(),
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_one_line_error(
        &out,
        &[&format!(
            "error: {}: larger than 67108864 bytes, more than a pod trace holds",
            path.display()
        )],
    );
}

#[test]
fn a_bad_job_completion_index_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    for (index, want) in [
        (
            "x",
            "JOB_COMPLETION_INDEX=\"x\" is not an index from 0 to 2",
        ),
        (
            "3",
            "JOB_COMPLETION_INDEX=\"3\" is not an index from 0 to 2",
        ),
    ] {
        let child = command(&[
            "sweep",
            "--nodes",
            "testdata/openb/tiny_nodes.csv",
            "--pods",
            "testdata/openb/tiny_pods.csv",
            "--shard",
            "-/3",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .env("JOB_COMPLETION_INDEX", index)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let out = wait_within(child, LIMIT, &["sweep", "--shard", "-/3"]);
        assert_one_line_error(&out, &["--shard \"-/3\"", want]);
    }
}

#[test]
fn hostile_inputs_end_as_the_table_says() {
    run_table(hostile_inputs());
}

#[test]
fn hostile_sweeps_end_as_the_table_says() {
    run_table(hostile_sweeps());
}

/// Runs each case, then fails listing every case that did not end as its row says.
fn run_table(cases: Vec<Hostile>) {
    let mut failures = Vec::new();
    for case in cases {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().to_str().unwrap();
        for (file, text) in &case.files {
            if let Some(parent) = dir.path().join(file).parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            if file.contains(".latin1.") {
                // Saved as Latin-1: one byte per character, not UTF-8.
                let bytes: Vec<u8> = text.chars().map(|c| c as u8).collect();
                std::fs::write(dir.path().join(file), bytes).unwrap();
            } else {
                write(dir.path(), file, text);
            }
        }
        let args: Vec<String> = case.args.iter().map(|a| a.replace("{dir}", at)).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = gantry_within(&args, LIMIT);
        let err = stderr(&out);
        let first = err.lines().next().unwrap_or("");
        let expected = case.first_stderr_line.replace("{dir}", at);
        if out.status.code() != Some(case.code)
            || first != expected
            || err.contains("panicked")
            || !stdout(&out).contains(case.stdout_has)
        {
            failures.push(format!(
                "{}: exit {:?} (want {}), first stderr line {first:?} (want {expected:?}), stdout {:?} (want it to contain {:?})",
                case.name,
                out.status.code(),
                case.code,
                stdout(&out).chars().take(600).collect::<String>(),
                case.stdout_has
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
