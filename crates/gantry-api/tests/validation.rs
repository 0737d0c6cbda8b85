//! Manifests kube-apiserver refuses are refused, with its messages (upstream
//! `pkg/apis/core/validation/validation.go`, apimachinery's `util/validation` and
//! `field.Error`), naming the object and the field. One row per rule.

use gantry_api::decode::{ClusterObjects, DecodeError};

/// A pod `shop/web` whose spec is `spec`, and a node.
fn pod(metadata: &str, spec: &str) -> String {
    format!("kind: Pod\nmetadata: {{{metadata}}}\nspec: {spec}\n")
}

fn refused(text: &str) -> (String, String, String) {
    match ClusterObjects::decode(text, "input.yaml") {
        Err(DecodeError::Object { error, .. }) => (error.object, error.field, error.message),
        other => panic!("expected an object error for\n{text}\ngot {other:?}"),
    }
}

const C: &str = "{name: c, image: nginx}";

#[test]
fn apiserver_validation_rules() {
    let rows: Vec<(&str, String, &str, &str, &str)> = vec![
        (
            "invalid label key",
            pod("name: web, namespace: shop, labels: {'bad key': x}", &format!("{{containers: [{C}]}}")),
            "Pod shop/web",
            "metadata.labels",
            "Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            "label key with two slashes",
            pod("name: web, namespace: shop, labels: {a/b/c: x}", &format!("{{containers: [{C}]}}")),
            "Pod shop/web",
            "metadata.labels",
            "Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        ),
        (
            "invalid label value",
            pod("name: web, namespace: shop, labels: {app: -web}", &format!("{{containers: [{C}]}}")),
            "Pod shop/web",
            "metadata.labels",
            "Invalid value: \"-web\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        (
            "label value too long",
            pod(&format!("name: web, labels: {{app: {}}}", "a".repeat(64)), &format!("{{containers: [{C}]}}")),
            "Pod default/web",
            "metadata.labels",
            "must be no more than 63 characters",
        ),
        (
            "pod name not a DNS subdomain",
            pod("name: Web_1", &format!("{{containers: [{C}]}}")),
            "Pod default/Web_1",
            "metadata.name",
            "Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        (
            "namespace not a DNS label",
            pod("name: web, namespace: my.shop", &format!("{{containers: [{C}]}}")),
            "Pod my.shop/web",
            "metadata.namespace",
            "Invalid value: \"my.shop\": must not contain dots",
        ),
        (
            "node name not a DNS subdomain",
            "kind: Node\nmetadata: {name: Node_1}\n".to_string(),
            "Node Node_1",
            "metadata.name",
            "Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain",
        ),
        (
            "service name not a DNS-1035 label",
            "kind: Service\nmetadata: {name: 1web}\nspec: {selector: {app: web}}\n".to_string(),
            "Service 1web",
            "metadata.name",
            "Invalid value: \"1web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
        ),
        (
            "no containers",
            pod("name: web", "{containers: []}"),
            "Pod default/web",
            "spec.containers",
            "Required value",
        ),
        (
            "empty nodeSelectorTerms",
            pod("name: web", &format!("{{containers: [{C}], affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: []}}}}}}}}")),
            "Pod default/web",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
            "Required value: must have at least one node selector term",
        ),
        (
            "pod anti-affinity term's selector operator",
            pod("name: web", &format!("{{containers: [{C}], affinity: {{podAntiAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 100, podAffinityTerm: {{topologyKey: zone, labelSelector: {{matchExpressions: [{{key: app, operator: Near}}]}}}}}}]}}}}}}")),
            "Pod default/web",
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchExpressions[0].operator",
            "must be In, NotIn, Exists or DoesNotExist, not \"Near\"",
        ),
        (
            "preferred node affinity weight",
            pod("name: web", &format!("{{containers: [{C}], affinity: {{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 0, preference: {{matchExpressions: [{{key: a, operator: Exists}}]}}}}]}}}}}}")),
            "Pod default/web",
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
            "must be in the range 1-100, not 0",
        ),
        (
            "request above limit",
            pod("name: web", "{containers: [{name: c, resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]}"),
            "Pod default/web",
            "spec.containers[0].resources.requests",
            "Invalid value: \"2\": must be less than or equal to cpu limit of 1",
        ),
        (
            "extended resource request unlike its limit",
            pod("name: web", "{containers: [{name: c, resources: {requests: {example.com/gpu: '1'}, limits: {example.com/gpu: '2'}}}]}"),
            "Pod default/web",
            "spec.containers[0].resources.requests",
            "Invalid value: \"1\": must be equal to example.com/gpu limit of 2",
        ),
        (
            "extended resource request without a limit",
            pod("name: web", "{containers: [{name: c, resources: {requests: {example.com/gpu: '1'}}}]}"),
            "Pod default/web",
            "spec.containers[0].resources.limits",
            "Required value: Limit must be set for non overcommitable resources",
        ),
        (
            "hugepages request unlike its limit",
            pod("name: web", "{containers: [{name: c, resources: {requests: {hugepages-2Mi: 2Mi, memory: 1Gi}, limits: {hugepages-2Mi: 4Mi, memory: 1Gi}}}]}"),
            "Pod default/web",
            "spec.containers[0].resources.requests",
            "Invalid value: \"2Mi\": must be equal to hugepages-2Mi limit of 4Mi",
        ),
        (
            "fractional extended resource",
            pod("name: web", "{containers: [{name: c, resources: {limits: {nvidia.com/gpu: 500m}}}]}"),
            "Pod default/web",
            "spec.containers[0].resources.limits.nvidia.com/gpu",
            "Invalid value: \"500m\": must be an integer",
        ),
        (
            "fractional extended resource on a node",
            "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {example.com/fpga: '1.5'}}\n".to_string(),
            "Node n1",
            "status.allocatable.example.com/fpga",
            "Invalid value: \"1.5\": must be an integer",
        ),
        (
            "unknown resource name",
            pod("name: web", "{containers: [{name: c, resources: {requests: {gpu: '1'}}}]}"),
            "Pod default/web",
            "spec.containers[0].resources.requests.gpu",
            "Invalid value: \"gpu\": must be a standard resource for containers",
        ),
        (
            "negative request",
            pod("name: web", "{containers: [{name: c, resources: {requests: {memory: -1Gi}}}]}"),
            "Pod default/web",
            "spec.containers[0].resources.requests.memory",
            "Invalid value: \"-1Gi\": must be greater than or equal to 0",
        ),
        (
            "container port out of range",
            pod("name: web", "{containers: [{name: c, ports: [{containerPort: 70000}]}]}"),
            "Pod default/web",
            "spec.containers[0].ports[0].containerPort",
            "Invalid value: 70000: must be between 1 and 65535, inclusive",
        ),
        (
            "container port zero",
            pod("name: web", "{containers: [{name: c, ports: [{containerPort: 0}]}]}"),
            "Pod default/web",
            "spec.containers[0].ports[0].containerPort",
            "Required value",
        ),
        (
            "host port out of range",
            pod("name: web", "{containers: [{name: c, ports: [{containerPort: 80, hostPort: -1}]}]}"),
            "Pod default/web",
            "spec.containers[0].ports[0].hostPort",
            "Invalid value: -1: must be between 1 and 65535, inclusive",
        ),
        (
            "bad protocol",
            pod("name: web", "{containers: [{name: c, ports: [{containerPort: 80, protocol: tcp}]}]}"),
            "Pod default/web",
            "spec.containers[0].ports[0].protocol",
            "Unsupported value: \"tcp\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        ),
        (
            "bad port name",
            pod("name: web", "{containers: [{name: c, ports: [{containerPort: 80, name: HTTP}]}]}"),
            "Pod default/web",
            "spec.containers[0].ports[0].name",
            "Invalid value: \"HTTP\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
        ),
        (
            "duplicate port name",
            pod("name: web", "{containers: [{name: c, ports: [{containerPort: 80, name: http}, {containerPort: 81, name: http}]}]}"),
            "Pod default/web",
            "spec.containers[0].ports[1].name",
            "Duplicate value: \"http\"",
        ),
        (
            "bad phase",
            format!("{}status: {{phase: Done}}\n", pod("name: web", &format!("{{containers: [{C}]}}"))),
            "Pod default/web",
            "status.phase",
            "Unsupported value: \"Done\": supported values: \"Failed\", \"Pending\", \"Running\", \"Succeeded\", \"Unknown\"",
        ),
        (
            "bad preemption policy",
            pod("name: web", &format!("{{containers: [{C}], preemptionPolicy: Sometimes}}")),
            "Pod default/web",
            "spec.preemptionPolicy",
            "Unsupported value: \"Sometimes\": supported values: \"Never\", \"PreemptLowerPriority\"",
        ),
        (
            "invalid nodeSelector label",
            pod("name: web", &format!("{{containers: [{C}], nodeSelector: {{'disk type': ssd}}}}")),
            "Pod default/web",
            "spec.nodeSelector",
            "Invalid value: \"disk type\"",
        ),
        (
            "bad taint effect",
            "kind: Node\nmetadata: {name: n1}\nspec: {taints: [{key: a, effect: Sometimes}]}\n".to_string(),
            "Node n1",
            "spec.taints[0].effect",
            "Unsupported value: \"Sometimes\": supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\"",
        ),
        (
            "PriorityClass above the user maximum",
            "kind: PriorityClass\napiVersion: scheduling.k8s.io/v1\nmetadata: {name: huge}\nvalue: 1000000001\n".to_string(),
            "PriorityClass huge",
            "value",
            "Forbidden: maximum allowed value of a user defined priority is 1000000000",
        ),
        (
            "system- PriorityClass with another value",
            "kind: PriorityClass\napiVersion: scheduling.k8s.io/v1\nmetadata: {name: system-node-critical}\nvalue: 10\n".to_string(),
            "PriorityClass system-node-critical",
            "metadata.name",
            "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000",
        ),
        (
            "empty container name",
            pod("name: web", "{containers: [{name: '', image: nginx}]}"),
            "Pod default/web",
            "spec.containers[0].name",
            "Required value",
        ),
        (
            "a container name used twice, across init and regular containers",
            pod("name: web", &format!("{{initContainers: [{C}], containers: [{C}]}}")),
            "Pod default/web",
            "spec.containers[0].name",
            "Duplicate value: \"c\"",
        ),
        (
            "a volume name used twice",
            pod("name: web", &format!("{{containers: [{C}], volumes: [{{name: v, emptyDir: {{}}}}, {{name: v, emptyDir: {{}}}}]}}")),
            "Pod default/web",
            "spec.volumes[1].name",
            "Duplicate value: \"v\"",
        ),
        (
            "a scheduling gate named twice",
            pod("name: web", &format!("{{containers: [{C}], schedulingGates: [{{name: g}}, {{name: g}}]}}")),
            "Pod default/web",
            "spec.schedulingGates[1]",
            "Duplicate value: \"g\"",
        ),
        (
            "scheduling gates on a pod that names its node",
            pod("name: web", &format!("{{nodeName: n1, containers: [{C}], schedulingGates: [{{name: g}}]}}")),
            "Pod default/web",
            "spec.nodeName",
            "Forbidden: cannot be set until all schedulingGates have been cleared",
        ),
        (
            "a host port used twice",
            pod("name: web", "{containers: [{name: a, ports: [{containerPort: 80, hostPort: 8080}]}, {name: b, ports: [{containerPort: 81, hostPort: 8080}]}]}"),
            "Pod default/web",
            "spec.containers[1].ports[0].hostPort",
            "Duplicate value: \"TCP//8080\"",
        ),
        (
            "tolerationSeconds on a NoSchedule toleration",
            pod("name: web", &format!("{{containers: [{C}], tolerations: [{{key: k, operator: Exists, effect: NoSchedule, tolerationSeconds: 30}}]}}")),
            "Pod default/web",
            "spec.tolerations[0].effect",
            "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
        ),
        (
            "an Exists toleration with a value",
            pod("name: web", &format!("{{containers: [{C}], tolerations: [{{key: k, operator: Exists, value: v}}]}}")),
            "Pod default/web",
            "spec.tolerations[0].operator",
            "value must be empty when `operator` is 'Exists'",
        ),
        (
            "a taint twice by key and effect",
            "kind: Node\nmetadata: {name: n1}\nspec: {taints: [{key: k, value: a, effect: NoSchedule}, {key: k, value: b, effect: NoSchedule}]}\n".to_string(),
            "Node n1",
            "spec.taints[1]",
            "Duplicate value: \"k:NoSchedule\": taints must be unique by key and effect pair",
        ),
        (
            "a spread constraint repeated by topology key and whenUnsatisfiable",
            pod("name: web", &format!("{{containers: [{C}], topologySpreadConstraints: [{{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}}, {{maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}}]}}")),
            "Pod default/web",
            "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}",
            "Duplicate value: \"{zone, DoNotSchedule}\"",
        ),
        (
            "an unknown restart policy",
            pod("name: web", &format!("{{restartPolicy: Sometimes, containers: [{C}]}}")),
            "Pod default/web",
            "spec.restartPolicy",
            "Unsupported value: \"Sometimes\"",
        ),
        (
            "two controller owner references",
            pod(
                "name: web, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: a, uid: u1, controller: true}, {apiVersion: apps/v1, kind: ReplicaSet, name: b, uid: u2, controller: true}]",
                &format!("{{containers: [{C}]}}"),
            ),
            "Pod default/web",
            "metadata.ownerReferences",
            "Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/a and ReplicaSet/b",
        ),
        (
            "a Service selector key that is not a label key",
            "kind: Service\nmetadata: {name: s}\nspec: {selector: {'bad key!': x}}\n".to_string(),
            "Service s",
            "spec.selector",
            "Invalid value: \"bad key!\"",
        ),
        (
            "a disruption budget with both fields",
            "kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: b}\nspec: {minAvailable: 1, maxUnavailable: 1}\n".to_string(),
            "PodDisruptionBudget b",
            "spec",
            "minAvailable and maxUnavailable cannot be both set",
        ),
        (
            "a disruption budget above 100%",
            "kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: b}\nspec: {minAvailable: 150%}\n".to_string(),
            "PodDisruptionBudget b",
            "spec.minAvailable",
            "Invalid value: \"150%\": must not be greater than 100%",
        ),
        (
            "a negative disruption budget",
            "kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: b}\nspec: {maxUnavailable: -1}\n".to_string(),
            "PodDisruptionBudget b",
            "spec.maxUnavailable",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "a quantity with a leading space",
            pod("name: web", "{containers: [{name: c, resources: {requests: {cpu: ' 1'}}}]}"),
            "Pod default/web",
            "spec.containers[0].resources.requests.cpu",
            "\" 1\"",
        ),
        (
            "unknown system- PriorityClass",
            "kind: PriorityClass\napiVersion: scheduling.k8s.io/v1\nmetadata: {name: system-mine}\nvalue: 10\n".to_string(),
            "PriorityClass system-mine",
            "metadata.name",
            "error: system-mine is not a known system priority class",
        ),
        // ValidateReplicaSetSpec, ValidateStatefulSetSpec, ValidateReplicationControllerSpec.
        (
            "ReplicaSet selector not matching its template",
            "kind: ReplicaSet\napiVersion: apps/v1\nmetadata: {name: web}\nspec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: api, tier: a}}, spec: {containers: [{name: c}]}}}\n".to_string(),
            "ReplicaSet web",
            "spec.template.metadata.labels",
            "Invalid value: map[string]string{\"app\":\"api\", \"tier\":\"a\"}: `selector` does not match template `labels`",
        ),
        (
            "ReplicaSet with an empty selector",
            "kind: ReplicaSet\napiVersion: apps/v1\nmetadata: {name: web}\nspec: {selector: {}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c}]}}}\n".to_string(),
            "ReplicaSet web",
            "spec.selector",
            "empty selector is invalid for deployment",
        ),
        (
            "StatefulSet selector not matching its template",
            "kind: StatefulSet\napiVersion: apps/v1\nmetadata: {name: db}\nspec: {selector: {matchExpressions: [{key: app, operator: In, values: [db]}]}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c}]}}}\n".to_string(),
            "StatefulSet db",
            "spec.template.metadata.labels",
            "`selector` does not match template `labels`",
        ),
        (
            "ReplicationController selector not matching its template",
            "kind: ReplicationController\napiVersion: v1\nmetadata: {name: rc}\nspec: {selector: {app: web}, template: {metadata: {labels: {app: api}}, spec: {containers: [{name: c}]}}}\n".to_string(),
            "ReplicationController rc",
            "spec.template.metadata.labels",
            "`selector` does not match template `labels`",
        ),
        (
            "ReplicationController with neither selector nor template labels",
            "kind: ReplicationController\napiVersion: v1\nmetadata: {name: rc}\nspec: {template: {spec: {containers: [{name: c}]}}}\n".to_string(),
            "ReplicationController rc",
            "spec.selector",
            "Required value",
        ),
        // ValidateMatchLabelKeysAndMismatchLabelKeys, on the selector as merged at create.
        (
            "spread matchLabelKeys also in matchLabels (pod has the label)",
            pod("name: web, labels: {app: web}", &format!("{{containers: [{C}], topologySpreadConstraints: [{{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: web}}}}, matchLabelKeys: [app]}}]}}")),
            "Pod default/web",
            "spec.topologySpreadConstraints[0].matchLabelKeys[0]",
            "Invalid value: \"app\": exists in both matchLabelKeys and labelSelector",
        ),
        (
            "spread matchLabelKeys also in matchExpressions (pod has the label)",
            pod("name: web, labels: {app: web}", &format!("{{containers: [{C}], topologySpreadConstraints: [{{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchExpressions: [{{key: app, operator: Exists}}]}}, matchLabelKeys: [tier, app]}}]}}")),
            "Pod default/web",
            "spec.topologySpreadConstraints[0].matchLabelKeys[1]",
            "exists in both matchLabelKeys and labelSelector",
        ),
        (
            "spread matchLabelKeys without a selector",
            pod("name: web, labels: {app: web}", &format!("{{containers: [{C}], topologySpreadConstraints: [{{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [app]}}]}}")),
            "Pod default/web",
            "spec.topologySpreadConstraints[0].matchLabelKeys",
            "must not be specified when labelSelector is not set",
        ),
        (
            "affinity matchLabelKeys also in the selector",
            pod("name: web, labels: {app: web}", &format!("{{containers: [{C}], affinity: {{podAntiAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{{topologyKey: zone, labelSelector: {{matchLabels: {{app: web}}}}, matchLabelKeys: [app]}}]}}}}}}")),
            "Pod default/web",
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys[0]",
            "exists in both matchLabelKeys and labelSelector",
        ),
        (
            "affinity key in both matchLabelKeys and mismatchLabelKeys",
            pod("name: web, labels: {app: web}", &format!("{{containers: [{C}], affinity: {{podAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{{topologyKey: zone, labelSelector: {{matchLabels: {{tier: a}}}}, matchLabelKeys: [app], mismatchLabelKeys: [app]}}]}}}}}}")),
            "Pod default/web",
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys[0]",
            "Invalid value: \"app\": exists in both matchLabelKeys and mismatchLabelKeys",
        ),
    ];
    for (rule, text, object, field, message) in &rows {
        let (o, f, m) = refused(text);
        assert_eq!((o.as_str(), f.as_str()), (*object, *field), "{rule}");
        assert!(
            m.contains(message),
            "{rule}: {m:?} does not contain {message:?}"
        );
    }
}

#[test]
fn valid_objects_pass() {
    let text = pod(
        "name: web-1.a, namespace: shop, labels: {app.kubernetes.io/name: web, tier: '', example.com/Key_1: V.a-1}",
        "{containers: [{name: c, ports: [{containerPort: 80, hostPort: 8080, name: http, protocol: UDP}], resources: {requests: {cpu: 500m, nvidia.com/gpu: '1', hugepages-2Mi: 2Mi}, limits: {cpu: '1', nvidia.com/gpu: '1', hugepages-2Mi: 2Mi}}}], nodeSelector: {kubernetes.io/os: linux}}",
    );
    let objects = ClusterObjects::decode(&text, "ok.yaml").unwrap();
    assert_eq!(objects.pods.len(), 1);
}

/// Whether a key in both matchLabelKeys and the selector is refused depends on the merge:
/// from v1.34 the API server merges the keys first, so a key the pod has no label for adds
/// nothing and passes; before, any such key is refused.
#[test]
fn spread_label_keys_follow_the_selector_merge() {
    let spread = |labels: &str| {
        pod(
            &format!("name: web, labels: {{{labels}}}"),
            &format!(
                "{{containers: [{C}], topologySpreadConstraints: [{{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: web}}}}, matchLabelKeys: [app]}}]}}"
            ),
        )
    };
    let decode = |text: &str, minor: u8| {
        let mut objects = ClusterObjects::for_release(gantry_api::Release::at(minor));
        objects
            .decode_more(text, "input.yaml")
            .map(|_| objects.pods.len())
    };
    assert_eq!(
        decode(&spread("tier: a"), 35).unwrap(),
        1,
        "merged: nothing to clash with"
    );
    assert!(
        decode(&spread("tier: a"), 33).is_err(),
        "legacy: the key alone clashes"
    );
    assert!(decode(&spread("app: web"), 35).is_err());
    assert!(decode(&spread("app: web"), 33).is_err());
}

/// Defaulting: a ReplicationController without a selector selects its template's labels
/// (`SetDefaults_ReplicationController`), which its pods' default spread then uses.
#[test]
fn a_replication_controller_selects_its_template_labels_by_default() {
    let text = "kind: ReplicationController\napiVersion: v1\nmetadata: {name: rc, namespace: shop}\nspec: {template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c}]}}}\n";
    let objects = ClusterObjects::decode(text, "rc.yaml").unwrap();
    let selector = objects.controllers[0].selector.as_ref().unwrap();
    let labels = |pairs: &[(&str, &str)]| {
        gantry_api::Labels::new(
            pairs
                .iter()
                .map(|(k, v)| (gantry_api::Sym::new(k), gantry_api::Sym::new(v))),
        )
    };
    assert!(selector.matches(&labels(&[("app", "web")])));
    assert!(!selector.matches(&labels(&[("app", "api")])));
}

/// A container's own `restartPolicy`, release by release (`validateInitContainers`,
/// `validateContainers` and `dropDisabledFields` of each): v1.28 drops an init container's
/// (SidecarContainers off); v1.29 to v1.33 take `Always` alone and forbid a regular
/// container's; v1.34 drops all but an init container's `Always` (ContainerRestartRules
/// off); from v1.35 every container takes `Always`, `Never` or `OnFailure`.
#[test]
fn container_restart_policies_follow_the_release() {
    let with = |init: &str, regular: &str| {
        pod(
            "name: web",
            &format!("{{initContainers: [{{name: i{init}}}], containers: [{{name: c{regular}}}]}}"),
        )
    };
    let decode = |text: &str, minor: u8| {
        let mut objects = ClusterObjects::for_release(gantry_api::Release::at(minor));
        match objects.decode_more(text, "input.yaml") {
            Ok(()) => Ok(objects.pods[0].init_containers[0].restartable),
            Err(DecodeError::Object { error, .. }) => {
                Err(format!("{}: {}", error.field, error.message))
            }
            Err(other) => panic!("{other:?}"),
        }
    };
    let init_always = "Unsupported value: \"Sometimes\": supported values: \"Always\"";
    let any_of_three =
        "Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\", \"OnFailure\"";
    let forbidden =
        "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers";
    let sometimes = with(", restartPolicy: Sometimes", "");
    let sidecar = with(", restartPolicy: Always", "");
    let on_failure = with(", restartPolicy: OnFailure", "");
    let regular = with("", ", restartPolicy: Always");
    let regular_sometimes = with("", ", restartPolicy: Sometimes");
    assert_eq!(
        decode(&sometimes, 28),
        Ok(false),
        "dropped with the sidecar gate off"
    );
    assert_eq!(decode(&sidecar, 28), Ok(false));
    assert_eq!(decode(&regular, 28).unwrap_err(), forbidden);
    for minor in [29, 33] {
        let err = decode(&sometimes, minor).unwrap_err();
        assert_eq!(
            err,
            format!("spec.initContainers[0].restartPolicy: {init_always}")
        );
        assert!(decode(&on_failure, minor).is_err());
        assert_eq!(decode(&sidecar, minor), Ok(true));
        assert_eq!(decode(&regular, minor).unwrap_err(), forbidden);
    }
    assert_eq!(
        decode(&sometimes, 34),
        Ok(false),
        "dropped with ContainerRestartRules off"
    );
    assert_eq!(decode(&sidecar, 34), Ok(true));
    assert_eq!(decode(&regular, 34), Ok(false));
    for minor in [35, 36] {
        let err = decode(&sometimes, minor).unwrap_err();
        assert_eq!(
            err,
            format!("spec.initContainers[0].restartPolicy: {any_of_three}")
        );
        assert_eq!(decode(&on_failure, minor), Ok(false), "not a sidecar");
        assert_eq!(decode(&sidecar, minor), Ok(true));
        assert_eq!(decode(&regular, minor), Ok(false));
        let err = decode(&regular_sometimes, minor).unwrap_err();
        assert_eq!(
            err,
            format!("spec.containers[0].restartPolicy: {any_of_three}")
        );
    }
}
