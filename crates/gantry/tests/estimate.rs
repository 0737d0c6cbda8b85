//! `gantry estimate` and the what-if parts of `gantry explain` and `gantry bench`, as a
//! user runs them on the files in testdata/whatif.

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::gantry;

use serde_json::Value;

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn data(file: &str) -> String {
    PathBuf::from("testdata/whatif")
        .join(file)
        .display()
        .to_string()
}

#[test]
fn scale_up_picks_the_template_with_the_devices() {
    let out = gantry(&[
        "estimate",
        "--cluster",
        &data("dra-cluster.yaml"),
        "--pods",
        &data("gpu-pods.yaml"),
        "--node-template",
        &data("gpu-template.yaml"),
        &data("cpu-template.yaml"),
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["pending_pods"], 3);
    assert_eq!(v["fit_existing_nodes"], 2, "gpu-1 has two GPUs");
    let templates = v["templates"].as_array().unwrap();
    assert_eq!(templates[0]["template"], "gpu-node");
    assert_eq!(templates[0]["nodes_needed"], 1);
    assert_eq!(templates[0]["pods_scheduled"], 1);
    assert_eq!(templates[1]["template"], "cpu-node");
    assert_eq!(templates[1]["nodes_needed"], 0);
    assert_eq!(templates[1]["pods_unschedulable"], 1);
    let reason = templates[1]["unschedulable"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("cannot allocate all claims"), "{reason}");
    assert_eq!(v["best"], "gpu-node");
    assert!(v["wall_ms"].as_f64().unwrap() >= 0.0);

    let human = gantry(&[
        "estimate",
        "--cluster",
        &data("dra-cluster.yaml"),
        "--pods",
        &data("gpu-pods.yaml"),
        "--node-template",
        &data("gpu-template.yaml"),
    ]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("best: gpu-node"), "{text}");
}

#[test]
fn drain_reports_moves_and_blocking_pods() {
    let out = gantry(&[
        "estimate",
        "--cluster",
        &data("drain-cluster.yaml"),
        "--drain",
        "small-1",
        "small-2",
        "nope",
        "--json",
    ]);
    let v = json(&out);
    let drain = v["drain"].as_array().unwrap();
    assert_eq!(drain[0]["node"], "small-1");
    assert_eq!(drain[0]["removable"], true);
    assert_eq!(drain[0]["reason"], Value::Null);
    let moves: Vec<String> = drain[0]["moves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{} {}",
                m["pod"].as_str().unwrap(),
                m["node"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        moves,
        ["shop/web-a big-1", "shop/web-b big-1"],
        "the DaemonSet pod stays"
    );
    assert_eq!(drain[1]["removable"], false);
    assert_eq!(drain[1]["reason"], "BlockedByPod");
    assert_eq!(drain[1]["blocking_pod"]["pod"], "shop/scratch");
    assert_eq!(drain[1]["blocking_pod"]["reason"], "NotReplicated");
    assert_eq!(drain[2]["reason"], "NoNodeInfo");
}

#[test]
fn drain_honours_disruption_budgets() {
    let out = gantry(&[
        "estimate",
        "--cluster",
        &data("drain-cluster.yaml"),
        &data("drain-pdb.yaml"),
        "--drain",
        "small-1",
        "--json",
    ]);
    let v = json(&out);
    let r = &v["drain"][0];
    assert_eq!(
        r["removable"], false,
        "two web pods, one disruption allowed"
    );
    assert_eq!(r["blocking_pod"]["reason"], "NotEnoughPdb");
    assert_eq!(r["blocking_pod"]["pod"], "shop/web-b");
}

#[test]
fn a_gang_fits_all_at_once_or_not_at_all() {
    let out = gantry(&[
        "estimate",
        "--cluster",
        &data("dra-cluster.yaml"),
        "--gang",
        &data("gpu-pods.yaml"),
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["gang"]["fits"], false, "three GPU pods, two GPUs");
    assert_eq!(v["gang"]["failed_pod"], "default/train-2");
    assert_eq!(v["gang"]["placed_before_failure"], 2);
}

/// PodGroups in the gang file: each group checked as v1.36's pod-group cycle admits it.
/// Three nodes of 4 cpu: `trainer` (4 × 3 cpu, minCount 4) fits 3 and is not admitted,
/// `eval` (2 × 1 cpu) is, `short` has 2 of its minCount 3.
#[test]
fn pod_groups_are_admitted_as_the_pod_group_cycle_admits_them() {
    let args = [
        "estimate",
        "--cluster",
        "testdata/examples/gangs/cluster.yaml",
        "--gang",
        "testdata/examples/gangs/pods.yaml",
        "--json",
        "--emulated-version",
        "1.36",
        "--feature-gates",
        "GenericWorkload=true,GangScheduling=true",
    ];
    let v = json(&gantry(&args));
    let groups = v["pod_groups"].as_array().unwrap();
    let summary: Vec<(String, bool, usize, usize)> = groups
        .iter()
        .map(|g| {
            (
                g["podGroup"].as_str().unwrap().to_string(),
                g["admitted"].as_bool().unwrap(),
                g["placements"].as_array().unwrap().len(),
                g["left_out"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("default/trainer".to_string(), false, 3, 1),
            ("default/eval".to_string(), true, 2, 0),
            ("default/short".to_string(), false, 2, 0),
        ]
    );
    assert_eq!(
        groups[0]["left_out"][0]["reason"],
        "0/3 nodes are available: 3 Insufficient cpu."
    );
    // Without the gates the API server drops the members' group: said, not guessed.
    let out = gantry(&args[..8]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Pod default/trainer-0: spec.schedulingGroup: not set")
            && err.contains("--feature-gates GenericWorkload=true,GangScheduling=true"),
        "{err}"
    );
}

#[test]
fn one_mode_at_a_time() {
    let out = gantry(&["estimate", "--cluster", &data("drain-cluster.yaml")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exactly one of --node-template"), "{err}");
}

#[test]
fn explain_says_what_would_let_a_pending_pod_in() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: huge, namespace: shop}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: \"9\"}}}]\n",
    )
    .unwrap();
    let template = dir.path().join("template.yaml");
    std::fs::write(
        &template,
        "apiVersion: v1\nkind: Node\nmetadata: {name: wide}\nstatus: {allocatable: {cpu: \"16\", memory: 64Gi, pods: \"110\"}}\n",
    )
    .unwrap();
    let cluster = data("drain-cluster.yaml");
    let args = |json: bool| {
        let mut a = vec![
            "explain".to_string(),
            "--cluster".into(),
            cluster.clone(),
            "--pod".into(),
            pod.display().to_string(),
            "--node-template".into(),
            template.display().to_string(),
        ];
        if json {
            a.push("--json".into());
        }
        a
    };
    let text = gantry(&args(false).iter().map(String::as_str).collect::<Vec<_>>());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("What would let it in:"), "{text}");
    assert!(
        text.contains("fits small-2 if its cpu request were ≤ 1900m"),
        "{text}"
    );
    assert!(
        text.contains("fits big-1 if its cpu request were ≤ 8000m"),
        "{text}"
    );
    assert!(
        text.contains("1 new node(s) of template wide would take it"),
        "{text}"
    );
    let v = json(&gantry(
        &args(true).iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    assert_eq!(v["counterfactuals"]["templates"][0]["new_nodes"], 1);
}

#[test]
fn bench_clustersnapshot_reports_both_stores() {
    let out = gantry(&[
        "bench",
        "clustersnapshot",
        "--nodes",
        "40",
        "--pods-per-node",
        "3",
        "--changed",
        "5",
        "--repetitions",
        "3",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["store"], "basic");
    assert_eq!(lines[1]["store"], "delta");
    for line in &lines {
        assert_eq!(
            line["allocs_per_get"], 0.0,
            "reading a NodeInfo allocates nothing"
        );
        assert_eq!(line["allocs_per_list"], 0.0);
        for key in ["fork_ns", "revert_ns", "commit_ns", "schedule_anywhere_ns"] {
            assert!(line[key].as_u64().is_some(), "{key}");
        }
    }
}

#[test]
fn simulate_places_pods_with_claims_on_the_devices_there_are() {
    let dir = tempfile::tempdir().unwrap();
    let placements = dir.path().join("placements.jsonl");
    let out = gantry(&[
        "simulate",
        "--cluster",
        &data("dra-cluster.yaml"),
        "--pods",
        &data("gpu-pods.yaml"),
        "--placements",
        placements.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = std::fs::read_to_string(&placements)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Two GPUs in the cluster, both on one node: two pods get one each, the third waits.
    let bound: Vec<&Value> = lines.iter().filter(|l| !l["node"].is_null()).collect();
    assert_eq!(bound.len(), 2, "{lines:?}");
    assert!(
        bound.iter().all(|l| l["node"] == bound[0]["node"]),
        "{lines:?}"
    );
    let pending = lines.iter().find(|l| l["node"].is_null()).unwrap();
    let reason = pending["reason"].as_str().unwrap();
    assert!(reason.contains("cannot allocate all claims"), "{reason}");
}

/// `--drain` takes commas as well as spaces (a list written `n1,n2` is two nodes, not
/// one unknown node reported as NoNodeInfo).
#[test]
fn drain_takes_a_comma_separated_list() {
    let cluster = "testdata/parity/mixed-reasons/cluster.yaml";
    let out = gantry(&["estimate", "--cluster", cluster, "--drain", "n1,n2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("n1: removable") && text.contains("n2: removable"),
        "{text}"
    );
    assert!(!text.contains("NoNodeInfo"), "{text}");
}

/// A fork places a pod as the live cycle does, cards included (GPUShare writes the cards
/// it gives): three pods of 16,000 MiB need a 24 GiB card each, whether `simulate`
/// places them, `estimate` sizes for them or `--gang` asks if they fit at once.
#[test]
fn forks_count_the_cards_a_placed_pod_holds() {
    let simulated = json(&gantry(&[
        "simulate",
        "--cluster",
        &data("hami-node.yaml"),
        "--pods",
        &data("hami-pods.yaml"),
        "--json",
    ]));
    assert_eq!(simulated["scheduled"], 1);
    let estimate = json(&gantry(&[
        "estimate",
        "--cluster",
        &data("hami-node.yaml"),
        "--pods",
        &data("hami-pods.yaml"),
        "--node-template",
        &data("hami-template.yaml"),
        "--json",
    ]));
    assert_eq!(estimate["fit_existing_nodes"], 1, "{estimate}");
    assert_eq!(estimate["templates"][0]["nodes_needed"], 2, "{estimate}");
    // The estimator on its own, as the autoscaler's tests call it: every pod on new nodes.
    let estimator_only = json(&gantry(&[
        "estimate",
        "--cluster",
        &data("hami-node.yaml"),
        "--pods",
        &data("hami-pods.yaml"),
        "--node-template",
        &data("hami-template.yaml"),
        "--estimator-only",
        "--json",
    ]));
    assert_eq!(estimator_only["fit_existing_nodes"], 0, "{estimator_only}");
    assert_eq!(
        estimator_only["templates"][0]["nodes_needed"], 3,
        "{estimator_only}"
    );
    let gang = json(&gantry(&[
        "estimate",
        "--cluster",
        &data("hami-node.yaml"),
        "--gang",
        &data("hami-pods.yaml"),
        "--json",
    ]));
    assert_eq!(gang["gang"]["fits"], false, "{gang}");
    assert_eq!(gang["gang"]["placed_before_failure"], 1, "{gang}");
}

/// As the autoscaler's filter-out-schedulable pass (`SimilarPodsScheduling`): once a pod of
/// a controller fits no existing node, its like pods are not tried again, even where the
/// pods placed meanwhile would now let one in. Here `web-2` would fit beside `db-1`, placed
/// after `web-1` was refused for want of a `db` pod, but is counted as not fitting.
#[test]
fn like_pods_of_a_controller_that_fits_nowhere_are_not_tried_again() {
    let dir = tempfile::tempdir().unwrap();
    let owner = |rs: &str, uid: &str| {
        format!(
            "ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: {rs}, uid: {uid}, controller: true}}]"
        )
    };
    let web = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, labels: {{app: web}}, {}}}\n\
             spec:\n  containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]\n  affinity:\n    podAffinity:\n      \
             requiredDuringSchedulingIgnoredDuringExecution:\n      - labelSelector: {{matchLabels: {{app: db}}}}\n        \
             topologyKey: kubernetes.io/hostname\n",
            owner("web", "web-uid")
        )
    };
    let db = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: db-1, namespace: default, labels: {{app: db}}, {}}}\n\
         spec: {{containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]}}\n",
        owner("db", "db-uid")
    );
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(
        &cluster,
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: n1, labels: {{kubernetes.io/hostname: n1}}}}\n\
             status: {{allocatable: {{cpu: \"4\", memory: 8Gi, pods: \"110\"}}}}\n---\n{}---\n{db}---\n{}",
            web("web-1"),
            web("web-2")
        ),
    )
    .unwrap();
    let out = gantry(&[
        "estimate",
        "--cluster",
        cluster.to_str().unwrap(),
        "--node-template",
        &data("cpu-template.yaml"),
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["pending_pods"], 3, "{v}");
    assert_eq!(v["fit_existing_nodes"], 1, "only db-1: {v}");
}

/// A Coscheduling gang (minMember 3) of 3-cpu pods is not split between the existing nodes
/// (room for two) and new ones: it is placed all or nothing, here all three on new nodes
/// of the template; the pod of no gang still takes an existing node.
#[test]
fn scale_up_places_a_gang_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let node = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}\nstatus: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}}}\n"
        )
    };
    let pod = |name: &str, cpu: &str, group: Option<&str>| {
        let labels = group.map_or(String::new(), |g| {
            format!(", labels: {{scheduling.x-k8s.io/pod-group: {g}}}")
        });
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default{labels}}}\nspec: {{containers: [{{name: c, image: i, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}\n"
        )
    };
    let group = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: train, namespace: default}\nspec: {minMember: 3}\n";
    let cluster = [
        node("n1"),
        node("n2"),
        group.to_string(),
        pod("lone", "1", None),
        pod("w1", "3", Some("train")),
        pod("w2", "3", Some("train")),
        pod("w3", "3", Some("train")),
    ]
    .join("---\n");
    let cluster_file = dir.path().join("cluster.yaml");
    std::fs::write(&cluster_file, cluster).unwrap();
    let template_file = dir.path().join("template.yaml");
    std::fs::write(&template_file, node("big")).unwrap();
    let v = json(&gantry(&[
        "estimate",
        "--cluster",
        cluster_file.to_str().unwrap(),
        "--node-template",
        template_file.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["pending_pods"], 4);
    assert_eq!(
        v["fit_existing_nodes"], 1,
        "the lone pod; the gang does not split"
    );
    let template = &v["templates"][0];
    assert_eq!(template["nodes_needed"], 3, "{template}");
    assert_eq!(template["pods_scheduled"], 3);
    assert_eq!(template["pods_unschedulable"], 0);
}

/// Pods of no controller are skipped as like one that fitted nowhere only while nothing
/// was placed since: web-2, like web-1, fits once db is placed beside where it would go.
#[test]
fn a_pod_like_one_that_fitted_nowhere_is_tried_again_after_a_placement() {
    let out = gantry(&[
        "estimate",
        "--cluster",
        &data("dra-cluster.yaml"),
        "--pods",
        &data("affinity-pods.yaml"),
        "--node-template",
        &data("cpu-template.yaml"),
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["pending_pods"], 3);
    assert_eq!(v["fit_existing_nodes"], 2, "db, then web-2 beside it: {v}");
    let template = &v["templates"][0];
    assert_eq!(
        template["pods_unschedulable"], 1,
        "web-1: no db pod on a new node"
    );
}
