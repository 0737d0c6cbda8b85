//! `gantry explain` as a user runs it: every node's verdicts, the scores, the choice.

mod common;

use common::{gantry, stderr, stdout, write};

const CLUSTER: &str = "testdata/parity/mixed-reasons/cluster.yaml";

fn pod_yaml(name: &str, cpu: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  containers:\n  - name: main\n    image: registry.k8s.io/pause:3.9\n    resources: {{requests: {{cpu: '{cpu}', memory: 100Mi}}}}\n"
    )
}

#[test]
fn the_table_shows_every_node_and_the_chosen_one() {
    let dir = tempfile::tempdir().unwrap();
    let pod = write(dir.path(), "pod.yaml", &pod_yaml("small", "100m"));
    let out = gantry(&["explain", "--cluster", CLUSTER, "--pod", &pod]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for node in ["n1", "n2", "n3", "n4", "n5", "n6"] {
        assert!(
            text.contains(&format!("│ {node} ")),
            "{node} missing:\n{text}"
        );
    }
    for reason in [
        "node(s) had untolerated taint(s)",
        "node(s) were unschedulable",
    ] {
        assert!(text.contains(reason), "{reason} missing:\n{text}");
    }
    assert!(text.contains("NodeResourcesFit ×1"), "{text}");
    // The node `gantry simulate` places this pod on.
    assert!(text.contains("would be placed on: n4"), "{text}");
    assert!(
        text.starts_with("gantry explain: decided as Kubernetes v1.37\n"),
        "{text}"
    );
    // Deciding as v1.28, the taint is named.
    let out = gantry(&[
        "explain",
        "--cluster",
        CLUSTER,
        "--pod",
        &pod,
        "--emulated-version",
        "1.28",
    ]);
    let text = stdout(&out);
    assert!(
        text.starts_with("gantry explain: decided as Kubernetes v1.28\n"),
        "{text}"
    );
    assert!(
        text.contains("node(s) had untolerated taint {dedicated: x}"),
        "{text}"
    );
}

#[test]
fn a_pending_pod_gets_the_schedulers_message() {
    let dir = tempfile::tempdir().unwrap();
    let pod = write(dir.path(), "pod.yaml", &pod_yaml("huge", "16"));
    let out = gantry(&["explain", "--cluster", CLUSTER, "--pod", &pod]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "would not be scheduled: 0/6 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 4 Insufficient cpu. no new claims to deallocate, preemption: 0/6 nodes are available:"
        ),
        "{text}"
    );
}

#[test]
fn json_has_every_node_and_the_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let pod = write(dir.path(), "pod.yaml", &pod_yaml("small", "100m"));
    let out = gantry(&["explain", "--cluster", CLUSTER, "--pod", &pod, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    for key in [
        "pod",
        "scheduler_name",
        "seed",
        "pre_filter",
        "filter_plugins",
        "nodes",
        "feasible_not_scored",
        "scoring",
        "outcome",
    ] {
        assert!(json.get(key).is_some(), "no {key}: {json}");
    }
    assert_eq!(json["nodes"].as_array().unwrap().len(), 6);
    let n2 = &json["nodes"][1];
    assert_eq!(n2["node"], "n2");
    assert_eq!(n2["feasible"], false);
    let taint = n2["filters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["plugin"] == "TaintToleration")
        .unwrap();
    assert_eq!(taint["verdict"], "unresolvable");
    assert_eq!(json["scoring"]["nodes"].as_array().unwrap().len(), 4);
    assert_eq!(json["outcome"]["result"], "scheduled");
    assert_eq!(json["outcome"]["node"], "n4");
}

#[test]
fn a_pod_file_with_two_pods_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let two = format!("{}---\n{}", pod_yaml("a", "1"), pod_yaml("b", "1"));
    let pod = write(dir.path(), "two.yaml", &two);
    let out = gantry(&["explain", "--cluster", CLUSTER, "--pod", &pod]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}: expected exactly one Pod, found 2", pod)),
        "{err}"
    );
}

/// A pod with a claim: per device, whether it is usable, taken (and by which claim), or
/// which selector refused it; the device Filter picked is marked.
#[test]
fn a_claims_devices_are_explained_one_by_one() {
    let out = gantry(&[
        "explain",
        "--cluster",
        "testdata/dra/explain-cluster.yaml",
        "--pod",
        "testdata/dra/explain-pod.yaml",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let node = &json["nodes"][0];
    assert_eq!(node["node"], "n1");
    let parts = &node["details"][0]["parts"];
    assert_eq!(node["details"][0]["plugin"], "DynamicResources");
    let verdict = |device: &str| {
        parts
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["part"] == format!("gpu.example.com/n1/{device}"))
            .unwrap_or_else(|| panic!("{device} missing: {parts}"))
            .clone()
    };
    assert_eq!(
        verdict("gpu-0")["reason"],
        "allocated to claim default/held"
    );
    assert_eq!(verdict("gpu-1")["reason"], serde_json::Value::Null);
    assert_eq!(verdict("gpu-1")["given"], true);
    assert_eq!(
        verdict("gpu-2")["reason"],
        "the request's selector #0 does not match"
    );
    assert!(
        verdict("gpu-1")["in_use"]
            .as_str()
            .unwrap()
            .contains("claim default/infer-gpu, request gpu (1 of class gpu)")
    );
}

/// A node where a claim to allocate would get a device but another, allocated claim of
/// the pod cannot be used: Filter refuses the node, so no device is marked given there.
#[test]
fn no_device_is_given_on_a_node_filter_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/dra/explain-cluster.yaml"
    ))
    .unwrap();
    let cluster = write(
        dir.path(),
        "cluster.yaml",
        &format!(
            "{base}---\n\
             apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n\
             metadata: {{name: elsewhere, namespace: default}}\n\
             spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu}}}}]}}}}\n\
             status:\n  allocation:\n    devices:\n      results: [{{request: gpu, driver: gpu.example.com, pool: n2, device: gpu-0}}]\n\
             \x20   nodeSelector:\n      nodeSelectorTerms: [{{matchFields: [{{key: metadata.name, operator: In, values: [n2]}}]}}]\n"
        ),
    );
    let pod = write(
        dir.path(),
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: both, namespace: default}\n\
         spec: {containers: [{name: c}], resourceClaims: [{name: there, resourceClaimName: elsewhere}, {name: here, resourceClaimTemplateName: one-a100}]}\n",
    );
    let out = gantry(&["explain", "--cluster", &cluster, "--pod", &pod, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let node = &json["nodes"][0];
    assert_eq!(node["node"], "n1");
    let text = node.to_string();
    assert!(text.contains("not available on the node"), "{text}");
    let parts = node["details"][0]["parts"].as_array().unwrap();
    // gpu-1 is free and matches: the first path would take it, but the node is refused.
    let gpu1 = parts
        .iter()
        .find(|p| p["part"] == "gpu.example.com/n1/gpu-1")
        .unwrap_or_else(|| panic!("gpu-1 missing: {text}"));
    assert_eq!(gpu1["reason"], serde_json::Value::Null, "{text}");
    assert_eq!(gpu1["given"], false, "{text}");
}

/// Two free devices for two requests, but of different models: the claim's
/// `matchAttribute` constraint is named as what fails, not the devices.
#[test]
fn a_constraint_that_fails_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let pod = write(
        dir.path(),
        "pod.yaml",
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n\
         metadata: {name: pair, namespace: default}\n\
         spec: {spec: {devices: {requests: [{name: a, exactly: {deviceClassName: gpu}}, {name: b, exactly: {deviceClassName: gpu}}],\n\
         constraints: [{matchAttribute: gpu.example.com/model}]}}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: twins, namespace: default}\n\
         spec: {containers: [{name: c}], resourceClaims: [{name: gpus, resourceClaimTemplateName: pair}]}\n",
    );
    let out = gantry(&[
        "explain",
        "--cluster",
        "testdata/dra/explain-cluster.yaml",
        "--pod",
        &pod,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let parts = json["nodes"][0]["details"][0]["parts"]
        .as_array()
        .unwrap()
        .clone();
    let claim = parts
        .iter()
        .find(|p| p["part"] == "claim default/twins-gpus")
        .unwrap_or_else(|| panic!("no claim line: {parts:?}"));
    assert!(
        claim["reason"]
            .as_str()
            .unwrap()
            .contains("no choice of them keeps the constraints"),
        "{claim}"
    );
    assert!(
        json["outcome"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot allocate all claims"),
        "{json}"
    );
}

/// A Coscheduling member: the cycle explained is refused at PreFilter while its group lacks
/// pods (the plugin reads the groups of both inputs, as it does in `simulate`), and the
/// `gang:` lines say how far the group is.
#[test]
fn a_coscheduling_member_is_explained_with_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let label = "labels: {scheduling.x-k8s.io/pod-group: g}";
    let member = |name: &str| {
        pod_yaml(name, "1").replace(
            "namespace: default}",
            &format!("namespace: default, {label}}}"),
        )
    };
    let group = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: default}\nspec: {minMember: 3}\n";
    let siblings = write(
        dir.path(),
        "siblings.yaml",
        &format!("{group}---\n{}", member("g-1")),
    );
    let pod = write(dir.path(), "pod.yaml", &member("g-0"));
    let example = "testdata/examples/coscheduling";
    let out = gantry(&[
        "explain",
        "--cluster",
        &format!("{example}/cluster.yaml"),
        &siblings,
        "--pod",
        &pod,
        "--config",
        &format!("{example}/config.yaml"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("pre-filter pod g-0 cannot find enough sibling pods, current pods number: 2, minMember of group: 3"),
        "{text}"
    );
    assert!(
        text.contains("gang: pod group default/g (Coscheduling, minMember 3), 2 pod(s): 0 bound, 2 pending (this pod among them)\ngang: 1 more pod(s) must be created before PreFilter lets any through\n"),
        "{text}"
    );
}

/// With WorkloadAwarePreemption (v1.36) a gang member's own cycle does not preempt
/// (`testdata/gang-wap-1.36/evicts-for-gang`, as recorded) and explain says how its group
/// would.
#[test]
fn a_gang_member_is_told_how_its_group_preempts() {
    let dir = tempfile::tempdir().unwrap();
    let member = |name: &str| {
        pod_yaml(name, "3").replace(
            "spec:\n",
            "spec:\n  priorityClassName: high\n  schedulingGroup: {podGroupName: g}\n",
        )
    };
    let bound = |name: &str, node: &str| {
        pod_yaml(name, "3").replace("spec:\n", &format!("spec:\n  nodeName: {node}\n"))
    };
    let group = "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {name: g, namespace: default}\nspec: {schedulingPolicy: {gang: {minCount: 2}}, priorityClassName: high}\n";
    let others = write(
        dir.path(),
        "others.yaml",
        &format!(
            "{group}---\n{}---\n{}---\n{}",
            member("g-1"),
            bound("low-1", "n1"),
            bound("low-2", "n2")
        ),
    );
    let pod = write(dir.path(), "pod.yaml", &member("g-0"));
    let out = gantry(&[
        "explain",
        "--cluster",
        "testdata/gang-wap-1.36/evicts-for-gang/cluster.yaml",
        &others,
        "--pod",
        &pod,
        "--emulated-version",
        "1.36",
        "--feature-gates",
        "GenericWorkload=true,GangScheduling=true,WorkloadAwarePreemption=true",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("preemption: not eligible due to workload aware preemption enabled"),
        "{text}"
    );
    assert!(
        text.contains("gang: if its members do not fit together, the group preempts as one (WorkloadAwarePreemption): pods of priority below its 1000 anywhere in the cluster"),
        "{text}"
    );
}

/// A pod whose claim for its extended resources an earlier attempt left behind
/// (`testdata/dra-1.36/extended-stale`): explain says what real v1.36.3 said of its first
/// attempt, word for word (the recorded event).
#[test]
fn a_claim_left_behind_is_explained_as_upstream_says() {
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/dra-1.36/extended-stale"
    );
    let steps = std::fs::read_to_string(format!("{scenario}/steps.yaml")).unwrap();
    let (_, item) = steps.split_once("- apiVersion: v1\n").unwrap();
    let pod: String = std::iter::once("apiVersion: v1".to_string())
        .chain(item.lines().map(|l| l.get(2..).unwrap_or("").to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    let dir = tempfile::tempdir().unwrap();
    let pod = write(dir.path(), "pod.yaml", &pod);
    let cluster = format!("{scenario}/cluster.yaml");
    let out = gantry(&["explain", "--cluster", &cluster, "--pod", &pod]);
    assert!(out.status.success(), "{}", stderr(&out));
    let events = std::fs::read_to_string(format!("{scenario}/events.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    let said = first["note"].as_str().unwrap();
    assert!(
        said.contains("cannot schedule extended resource claim"),
        "{said}"
    );
    let text = stdout(&out);
    assert!(
        text.contains(&format!("would not be scheduled: {said}\n")),
        "{text}"
    );
}

/// A claim whose driver failed its binding (DRADeviceBindingConditions): every node
/// refuses the pod with upstream's `resourceclaim not available on the node`, and explain
/// says why: the failure the driver reported on the claim.
#[test]
fn a_claim_whose_binding_failed_is_explained_with_the_drivers_words() {
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/dra-1.36/binding-failure/cluster.yaml"
    );
    let claim = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
status:
  allocation:
    allocationTimestamp: "2026-12-05T00:00:00Z"
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: a-fabric, device: fabric-0,
                 bindingConditions: [example.com/attached], bindingFailureConditions: [example.com/attach-failed]}]
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [n1]}]}]
  devices:
  - driver: gpu.example.com
    pool: a-fabric
    device: fabric-0
    conditions: [{type: example.com/attach-failed, status: "True", reason: LinkDown, message: fabric port 3 is down, lastTransitionTime: "2026-12-05T00:00:05Z"}]
"#;
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n  resourceClaims: [{name: gpu, resourceClaimName: c}]\n";
    let dir = tempfile::tempdir().unwrap();
    let claim = write(dir.path(), "claim.yaml", claim);
    let pod = write(dir.path(), "pod.yaml", pod);
    let out = gantry(&[
        "explain",
        "--cluster",
        scenario,
        "--cluster",
        &claim,
        "--pod",
        &pod,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let node = &json["nodes"][0];
    let dra = (node["filters"].as_array().unwrap().iter())
        .find(|f| f["plugin"] == "DynamicResources")
        .unwrap();
    assert_eq!(
        dra["reasons"],
        serde_json::json!(["resourceclaim not available on the node"]),
        "{node}"
    );
    let parts = node["details"][0]["parts"].as_array().unwrap();
    let part = (parts.iter())
        .find(|p| p["part"] == "claim default/c")
        .unwrap_or_else(|| panic!("no part for the claim: {node}"));
    assert_eq!(
        part["reason"],
        "its binding failed: device binding failed: claim=c, reason=LinkDown, message=\"fabric port 3 is down\""
    );
}
