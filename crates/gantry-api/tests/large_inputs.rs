//! Production-sized dumps load (past the YAML parser's default budget of 250,000 nodes
//! and 1,024 documents), while hostile input still fails fast: alias bombs, binary data,
//! endless streams.

use std::io::Read;
use std::time::{Duration, Instant};

use gantry_api::decode::{ClusterObjects, DecodeError, InputLimits};

/// A pod as `kubectl get -o yaml` prints it, managedFields included (about 100 nodes of
/// YAML each).
fn pod_item(i: usize) -> String {
    format!(
        r#"- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2024-05-03T08:00:00Z"
    labels: {{app: web, pod-template-hash: 7d9c6b5f4}}
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      fieldsV1:
        f:metadata:
          f:labels:
            .: {{}}
            f:app: {{}}
        f:spec:
          f:containers:
            k:{{"name":"web"}}:
              .: {{}}
              f:image: {{}}
              f:name: {{}}
      manager: kube-controller-manager
      operation: Update
      time: "2024-05-03T08:00:00Z"
    name: web-{i}
    namespace: shop
    uid: 00000000-0000-0000-0000-{i:012}
  spec:
    containers:
    - image: nginx:1.25
      name: web
      ports: [{{containerPort: 80, protocol: TCP}}]
      resources:
        requests: {{cpu: 100m, memory: 128Mi}}
    - image: envoy:1.30
      name: proxy
      resources:
        requests: {{cpu: 50m, memory: 64Mi}}
    tolerations:
    - {{effect: NoExecute, key: node.kubernetes.io/not-ready, operator: Exists, tolerationSeconds: 300}}
    - {{effect: NoExecute, key: node.kubernetes.io/unreachable, operator: Exists, tolerationSeconds: 300}}
  status:
    phase: Pending
"#
    )
}

#[test]
fn a_list_past_the_default_node_budget_loads() {
    // 3,000 items of ~100 YAML nodes each: 300,000 nodes, beyond the parser's default
    // budget of 250,000 that broke real dumps of ~1,200 pods.
    let mut text = String::from("apiVersion: v1\nitems:\n");
    for i in 0..3000 {
        text.push_str(&pod_item(i));
    }
    text.push_str("kind: List\nmetadata: {resourceVersion: \"\"}\n");
    let objects = ClusterObjects::decode(&text, "dump.yaml").unwrap();
    assert_eq!(objects.pods.len(), 3000);
    assert_eq!(&*objects.pods[2999].name, "web-2999");
    assert_eq!(objects.pods[0].requests().milli_cpu, 150);
    assert!(
        objects.warnings.is_empty(),
        "{:?}",
        objects.warnings.first()
    );
}

#[test]
fn more_documents_than_the_default_budget_load() {
    let text = (0..1500)
        .map(|i| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: ns-{i}}}\n"))
        .collect::<Vec<_>>()
        .join("---\n");
    let objects = ClusterObjects::decode(&text, "many.yaml").unwrap();
    assert_eq!(objects.namespaces.len(), 1500);
}

#[test]
fn json_lists_stream_too() {
    let items: Vec<String> = (0..200)
        .map(|i| {
            format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"ns-{i}"}}}}"#)
        })
        .collect();
    let text = format!(
        r#"{{"apiVersion":"v1","items":[{}],"kind":"List","metadata":{{"resourceVersion":""}}}}{{"kind":"Namespace","metadata":{{"name":"after"}}}}"#,
        items.join(",")
    );
    let objects = ClusterObjects::decode(&text, "dump.json").unwrap();
    assert_eq!(objects.namespaces.len(), 201);
    // An item's error names it; items of a document that turns out not to be a list are
    // taken back.
    let bad = r#"{"items":[{"kind":"Namespace","metadata":{"name":"ok"}},{"kind":"Namespace","metadata":{"name":"Not_OK"}}],"kind":"List"}"#;
    match ClusterObjects::decode(bad, "bad.json").unwrap_err() {
        DecodeError::Object { error, .. } => assert_eq!(
            (error.object.as_str(), error.field.as_str()),
            ("Namespace Not_OK", "metadata.name")
        ),
        other => panic!("{other}"),
    }
    let widget = r#"{"items":[{"kind":"Namespace","metadata":{"name":"x"}}],"kind":"Widget","metadata":{"name":"w"}}"#;
    let objects = ClusterObjects::decode(widget, "w.json").unwrap();
    assert!(objects.namespaces.is_empty());
    assert_eq!(objects.ignored, ["Widget w"]);
    // A syntax error names the source.
    let error = ClusterObjects::decode(r#"{"kind": "Pod", "metadata": "#, "cut.json").unwrap_err();
    assert!(
        matches!(error, DecodeError::Syntax { ref source_name, .. } if source_name == "cut.json")
    );
}

#[test]
fn an_alias_bomb_still_fails_fast() {
    // Billion laughs: each level references the previous one ten times.
    let mut text = String::from(
        "kind: ConfigMap\nmetadata: {name: bomb}\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for level in 1..10 {
        let prev = level - 1;
        text.push_str(&format!(
            "a{level}: &a{level} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    let start = Instant::now();
    let error = ClusterObjects::decode(&text, "bomb.yaml").unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(
        matches!(error, DecodeError::Syntax { .. }),
        "refused by the parser's budget: {error}"
    );
}

/// Few aliases of one big anchor: a thousand copies of a megabyte would be a gigabyte,
/// so the anchor's size is what is refused, at once, in words (not the parser's internals).
#[test]
fn aliases_of_a_large_anchor_are_refused_by_the_bytes_they_would_make() {
    let mut text = format!(
        "kind: ConfigMap\nmetadata: {{name: bomb}}\ndata:\n  a: &s {}\n  list:\n",
        "x".repeat(1 << 20)
    );
    for _ in 0..900 {
        text.push_str("  - *s\n");
    }
    let start = Instant::now();
    let error = ClusterObjects::decode(&text, "wide.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(error.contains("64 KiB of content per anchor"), "{error}");
    assert!(error.contains("at line 4"), "{error}");
    assert!(!error.contains("budget breached"), "{error}");
}

#[test]
fn binary_data_fails_at_once_with_a_clear_line() {
    // `--cluster /dev/zero`: an endless stream of NUL bytes.
    let start = Instant::now();
    let mut objects = ClusterObjects::default();
    let error = objects
        .read(std::io::repeat(0), "/dev/zero", &InputLimits::default())
        .unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(
        error.to_string(),
        "/dev/zero: not valid YAML or JSON: a NUL byte at offset 0: this is binary data, not YAML or JSON text"
    );
}

#[test]
fn input_beyond_the_limit_is_refused() {
    // An endless stream of valid text stops at the limit.
    let endless = std::io::repeat(b'#').take(u64::MAX);
    let mut objects = ClusterObjects::default();
    let limits = InputLimits { max_bytes: 1 << 20 };
    let error = objects.read(endless, "endless.yaml", &limits).unwrap_err();
    assert_eq!(
        error.to_string(),
        "endless.yaml: input larger than 1048576 bytes (the limit for one file; a bigger dump needs a higher limit)"
    );
    // Exactly at the limit is fine.
    let text = "kind: Namespace\nmetadata: {name: a}\n";
    let limits = InputLimits {
        max_bytes: text.len() as u64,
    };
    objects.read(text.as_bytes(), "a.yaml", &limits).unwrap();
    assert_eq!(objects.namespaces.len(), 1);
}

#[test]
fn a_list_stops_at_its_first_bad_item() {
    // The item's error names it; the items after it are never converted.
    let mut text = String::from("apiVersion: v1\nitems:\n");
    text.push_str(&pod_item(0));
    text.push_str(&pod_item(1).replace("cpu: 100m", "cpu: lots"));
    text.push_str(&pod_item(2));
    text.push_str("kind: List\n");
    match ClusterObjects::decode(&text, "dump.yaml").unwrap_err() {
        DecodeError::Object { error, .. } => {
            assert_eq!(error.object, "Pod shop/web-1");
            assert_eq!(error.field, "spec.containers[0].resources.requests.cpu");
        }
        other => panic!("{other}"),
    }
    // A document whose `items` turn out not to make it a list is that kind's object.
    let objects = ClusterObjects::decode(
        "items: [{kind: Namespace, metadata: {name: x}}]\nkind: Widget\nmetadata: {name: w}\n",
        "w.yaml",
    )
    .unwrap();
    assert!(objects.namespaces.is_empty());
    assert_eq!(objects.ignored, ["Widget w"]);
}
