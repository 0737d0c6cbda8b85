//! What the API server does across objects: Priority admission (built-in classes, the
//! global default, a class's preemptionPolicy), one object per name (`generateName`
//! included), pods bound to nodes that exist; and what kube-scheduler never sees
//! (finished pods).

use gantry_api::decode::{ClusterObjects, ObjectError};
use gantry_api::{PodPhase, PreemptionPolicy, Sym};

const NODE: &str = "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n---\n";

fn admitted(text: &str) -> ClusterObjects {
    let mut objects = ClusterObjects::decode(text, "input.yaml").unwrap();
    objects.admit().unwrap();
    objects
}

fn refused(text: &str) -> ObjectError {
    let mut objects = ClusterObjects::decode(text, "input.yaml").unwrap();
    objects.admit().unwrap_err()
}

fn pod(name: &str, spec: &str) -> String {
    format!(
        "kind: Pod\nmetadata: {{name: {name}}}\nspec: {{containers: [{{name: c}}]{spec}}}\n---\n"
    )
}

fn class(name: &str, rest: &str) -> String {
    format!(
        "kind: PriorityClass\napiVersion: scheduling.k8s.io/v1\nmetadata: {{name: {name}}}\n{rest}\n---\n"
    )
}

#[test]
fn built_in_priority_classes_exist_in_every_cluster() {
    // A `kubectl get pods -n kube-system -o yaml` dump names them without defining them;
    // a pod being created with them gets their values.
    let objects = admitted(&format!(
        "{}{}",
        pod("etcd", ", priorityClassName: system-node-critical"),
        pod("dns", ", priorityClassName: system-cluster-critical")
    ));
    let pod = |name: &str| objects.pods.iter().find(|p| &*p.name == name).unwrap();
    assert_eq!(pod("etcd").priority, 2_000_001_000);
    assert_eq!(pod("dns").priority, 2_000_000_000);
    assert_eq!(
        pod("dns").preemption_policy,
        PreemptionPolicy::PreemptLowerPriority
    );
}

#[test]
fn priority_and_policy_come_from_the_class() {
    let objects = admitted(&format!(
        "{}{}{}{}",
        class("batch", "value: 100\npreemptionPolicy: Never"),
        class("normal", "value: 50\nglobalDefault: true"),
        pod("a", ", priorityClassName: batch"),
        pod("b", "")
    ));
    assert_eq!(objects.pods[0].priority, 100);
    assert_eq!(objects.pods[0].preemption_policy, PreemptionPolicy::Never);
    // No class named: the global default's value, and its name, as admission sets it.
    assert_eq!(objects.pods[1].priority, 50);
    assert_eq!(
        objects.pods[1].priority_class_name,
        Some(Sym::new("normal"))
    );
    assert_eq!(
        objects.pods[1].preemption_policy,
        PreemptionPolicy::PreemptLowerPriority
    );
}

#[test]
fn pods_from_a_dump_keep_what_admission_gave_them() {
    // A stored pod carries its priority; its class need not be in the input.
    let objects = admitted(&pod(
        "stored",
        ", priorityClassName: custom, priority: 7, preemptionPolicy: Never",
    ));
    assert_eq!(objects.pods[0].priority, 7);
    assert_eq!(objects.pods[0].preemption_policy, PreemptionPolicy::Never);
}

#[test]
fn admission_refusals_name_the_pod_and_the_field() {
    let cases = [
        (
            pod("a", ", priorityClassName: nope"),
            "Pod default/a",
            "spec.priorityClassName",
            "no PriorityClass with name nope was found",
        ),
        (
            format!(
                "{}{}",
                class("high", "value: 1000"),
                pod("a", ", priorityClassName: high, priority: 5")
            ),
            "Pod default/a",
            "spec.priority",
            "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name",
        ),
        (
            format!(
                "{}{}",
                class("high", "value: 1000\npreemptionPolicy: Never"),
                pod(
                    "a",
                    ", priorityClassName: high, preemptionPolicy: PreemptLowerPriority"
                )
            ),
            "Pod default/a",
            "spec.preemptionPolicy",
            "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name",
        ),
        (
            format!(
                "{}{}",
                class("one", "value: 1\nglobalDefault: true"),
                class("two", "value: 2\nglobalDefault: true")
            ),
            "PriorityClass two",
            "globalDefault",
            "PriorityClass one is already marked as default. Only one default can exist",
        ),
        (
            format!("{}{}", class("one", "value: 1"), class("one", "value: 1")),
            "PriorityClass one",
            "metadata.name",
            "priorityclasses.scheduling.k8s.io \"one\" already exists",
        ),
    ];
    for (text, object, field, message) in cases {
        let error = refused(&text);
        assert_eq!(
            (
                error.object.as_str(),
                error.field.as_str(),
                error.message.as_str()
            ),
            (object, field, message)
        );
    }
}

#[test]
fn duplicate_objects_are_refused_naming_both() {
    let bound_and_pending = format!("{NODE}{}{}", pod("web", ", nodeName: n1"), pod("web", ""));
    let error = refused(&bound_and_pending);
    assert_eq!(
        (error.object.as_str(), error.field.as_str()),
        ("Pod default/web", "metadata.name")
    );
    assert_eq!(
        error.message,
        "pods \"web\" already exists: the input has two pods default/web (one bound to n1, one pending) (both in input.yaml)"
    );

    let error = refused(&format!("{NODE}{NODE}"));
    assert_eq!(
        error.to_string(),
        "Node n1: metadata.name: nodes \"n1\" already exists: the input has two Node objects of that name (both in input.yaml)"
    );
    let mut two_files = ClusterObjects::decode(NODE, "a.yaml").unwrap();
    two_files.decode_more(NODE, "b.yaml").unwrap();
    assert!(
        two_files
            .admit()
            .unwrap_err()
            .message
            .ends_with("two Node objects of that name (in a.yaml and b.yaml)")
    );

    // Across a cluster and the pods added to it.
    let mut cluster =
        ClusterObjects::decode(&format!("{NODE}{}", pod("web", ", nodeName: n1")), "c.yaml")
            .unwrap();
    let mut pending = ClusterObjects::decode(&pod("web", ""), "p.yaml").unwrap();
    let error = cluster.admit_with(&mut pending).unwrap_err();
    assert_eq!(error.object, "Pod default/web");
    assert!(
        error.message.ends_with("(in c.yaml and p.yaml)"),
        "{}",
        error.message
    );
}

#[test]
fn pods_bound_to_unknown_nodes_are_refused() {
    let error = refused(&format!("{NODE}{}", pod("web", ", nodeName: n9")));
    assert_eq!(
        error.to_string(),
        "Pod default/web: spec.nodeName: Invalid value: \"n9\": no Node of that name in the input: a bound pod needs its node"
    );
}

#[test]
fn generate_name_gives_api_server_style_names_deterministically() {
    let text = "kind: Pod\nmetadata: {generateName: pod-}\nspec: {containers: [{name: c}]}\n---\n"
        .repeat(3);
    let names = |text: &str| -> Vec<String> {
        admitted(text)
            .pods
            .iter()
            .map(|p| p.name.to_string())
            .collect()
    };
    let first = names(&text);
    assert_eq!(first, names(&text), "same input, same names");
    assert_eq!(first.len(), 3);
    for name in &first {
        assert_eq!(name.len(), 9);
        assert!(name.starts_with("pod-"));
        assert!(
            name[4..]
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{name}"
        );
    }
    assert!(first[0] != first[1] && first[1] != first[2]);
}

#[test]
fn generated_names_that_clash_are_drawn_again() {
    // The first name the generator gives "pod-" is written out by hand below: the
    // generated pod must step aside, as a client retries after `AlreadyExists`.
    let generated =
        admitted("kind: Pod\nmetadata: {generateName: pod-}\nspec: {containers: [{name: c}]}\n")
            .pods[0]
            .name
            .to_string();
    let text = format!(
        "kind: Pod\nmetadata: {{generateName: pod-}}\nspec: {{containers: [{{name: c}}]}}\n---\n{}",
        pod(&generated, "")
    );
    let objects = admitted(&text);
    let names: Vec<&str> = objects.pods.iter().map(|p| &*p.name).collect();
    let drawn_again: Vec<&&str> = names.iter().filter(|n| **n != generated).collect();
    assert_eq!(names.len(), 2);
    assert!(names.contains(&generated.as_str()), "{names:?}");
    assert_eq!(drawn_again.len(), 1, "{names:?}");
    assert!(drawn_again[0].starts_with("pod-"));

    // A cluster and added pods decoded apart draw the same first names: they still end
    // up distinct.
    let one = "kind: Pod\nmetadata: {generateName: pod-}\nspec: {containers: [{name: c}]}\n";
    let mut cluster = ClusterObjects::decode(one, "c.yaml").unwrap();
    let mut pending = ClusterObjects::decode(one, "p.yaml").unwrap();
    cluster.admit_with(&mut pending).unwrap();
    assert_ne!(cluster.pods[0].name, pending.pods[0].name);
}

#[test]
fn scheduler_perf_templates_load() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/scheduler-perf-templates"
    );
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 14);
    let mut all = ClusterObjects::default();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        all.decode_more(&text, &name)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    all.admit().unwrap();
    assert_eq!(all.nodes.len(), 2);
    assert_eq!(all.pods.len(), files.len() - 2);
    assert!(
        all.nodes
            .iter()
            .any(|n| n.name.as_str().starts_with("scheduler-perf-"))
    );
    let high = all.pods.iter().find(|p| p.priority == 10).unwrap();
    assert!(high.name.starts_with("pod-"));
    // Upstream's Go decoder reads `NodeAffinityPolicy` case-insensitively; the API
    // server's field validation (and Gantry) warns about it as kubectl would.
    let warned: Vec<String> = all.warnings.iter().map(|w| w.message.clone()).collect();
    assert_eq!(
        warned,
        [
            "unknown field \"spec.topologySpreadConstraints[0].NodeAffinityPolicy\"",
            "unknown field \"spec.topologySpreadConstraints[0].NodeTaintsPolicy\""
        ]
    );
}

#[test]
fn unknown_fields_are_warnings_naming_object_and_path() {
    let objects = admitted(
        "kind: Pod\nmetadata: {name: web, namespace: shop, labelz: {a: b}}\nspec:\n  nodeSelecter: {disk: ssd}\n  containers:\n  - name: c\n    containerz: 1\n    resources: {requestz: {cpu: 1}}\n",
    );
    let warnings: Vec<String> = objects.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(
        warnings,
        [
            "Pod shop/web: unknown field \"metadata.labelz\"",
            "Pod shop/web: unknown field \"spec.containers[0].containerz\"",
            "Pod shop/web: unknown field \"spec.containers[0].resources.requestz\"",
            "Pod shop/web: unknown field \"spec.nodeSelecter\"",
        ]
    );
}

#[test]
fn finished_pods_are_not_what_the_scheduler_sees() {
    let text = format!(
        "{NODE}{}kind: Pod\nmetadata: {{name: done}}\nspec: {{nodeName: n1, containers: [{{name: c, resources: {{requests: {{cpu: '4'}}}}}}]}}\nstatus: {{phase: Succeeded}}\n---\nkind: Pod\nmetadata: {{name: failed-pending}}\nspec: {{containers: [{{name: c}}]}}\nstatus: {{phase: Failed}}\n",
        pod("running", ", nodeName: n1")
    );
    let objects = admitted(&text);
    assert_eq!(objects.pods.len(), 1);
    assert_eq!(&*objects.pods[0].name, "running");
    assert_eq!(objects.pods[0].phase, PodPhase::Pending);
    assert_eq!(
        objects.finished_pods,
        ["default/done", "default/failed-pending"]
    );
    // A finished pod still owns its name.
    let error = refused(&format!("{text}---\n{}", pod("done", "")));
    assert!(
        error.message.contains("(one pending, one finished)"),
        "{error}"
    );
}

/// A second PodGroup of the same namespace and name is refused as its create would be,
/// not left to replace the first (whose `minCount` the members were written for).
#[test]
fn a_second_pod_group_of_a_name_is_refused() {
    let group = |min: u32| {
        format!(
            "---\napiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {{name: g, namespace: ml}}\nspec: {{schedulingPolicy: {{gang: {{minCount: {min}}}}}}}\n"
        )
    };
    let mut objects = ClusterObjects::decode(&group(2), "a.yaml").unwrap();
    let other_namespace = group(1).replace("namespace: ml", "namespace: web");
    objects.decode_more(&other_namespace, "a.yaml").unwrap();
    assert!(
        objects.admit().is_ok(),
        "the same name in another namespace"
    );
    objects.decode_more(&group(1), "b.yaml").unwrap();
    assert_eq!(
        objects.admit().unwrap_err().to_string(),
        "PodGroup ml/g: metadata.name: podgroups.scheduling.k8s.io \"g\" already exists: the input has two PodGroups ml/g"
    );
}
