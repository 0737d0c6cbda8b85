//! `JsonObject` (a pod or node read straight from its JSON text, as a
//! trace is replayed) against `add_object` (through a `Value`, as every input is read):
//! on real objects they must agree, and where the direct read does not apply it says so.

use gantry_api::Release;
use gantry_api::decode::{ClusterObjects, JsonObject, UnknownFields, parse_yaml_value};
use serde_json::{Value, json};

const KUBECTL_DUMP: &str = include_str!("fixtures/kubectl-get-nodes-pods.yaml");

/// Every pod and node of the kubectl dump, the recorded trace and the parity scenarios.
fn real_pods_and_nodes() -> Vec<Value> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata");
    let mut values = Vec::new();
    let dump = parse_yaml_value(KUBECTL_DUMP).unwrap();
    values.extend(dump["items"].as_array().unwrap().iter().cloned());
    let trace = std::fs::read_to_string(format!("{root}/traces/small.jsonl")).unwrap();
    for line in trace.lines().skip(1) {
        let record: Value = serde_json::from_str(line).unwrap();
        values.extend(record.get("object").cloned());
    }
    let mut scenarios: Vec<_> = std::fs::read_dir(format!("{root}/parity-1.35"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    scenarios.sort();
    for dir in scenarios {
        for file in ["cluster.yaml", "pods.yaml"] {
            let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
                continue;
            };
            for document in text.split("\n---") {
                if let Ok(value) = parse_yaml_value(document) {
                    values.push(value);
                }
            }
        }
    }
    values.retain(|v| matches!(v["kind"].as_str(), Some("Pod" | "Node")));
    values
}

fn read_both(
    value: &Value,
    release: Release,
) -> (
    Result<ClusterObjects, String>,
    Option<Result<ClusterObjects, String>>,
) {
    let kind = value["kind"].as_str().unwrap();
    let mut through_value = ClusterObjects::for_release(release);
    let through_value = (through_value.add_object(value.clone(), "here"))
        .map(|()| through_value)
        .map_err(|e| e.to_string());
    let mut direct = ClusterObjects::for_release(release);
    let text = value.to_string();
    let direct = match JsonObject::read(kind, &text, release, UnknownFields::Warn) {
        Ok(Some(object)) => {
            direct.add_read(object);
            Some(Ok(direct))
        }
        Ok(None) => None,
        Err(e) => Some(Err(e.to_string())),
    };
    (through_value, direct)
}

#[test]
fn real_pods_and_nodes_read_the_same_from_their_text() {
    let values = real_pods_and_nodes();
    assert!(values.len() > 300, "{} objects", values.len());
    for release in [Release::at(28), Release::at(37)] {
        for value in &values {
            let (through_value, direct) = read_both(value, release);
            let direct = direct.unwrap_or_else(|| panic!("not read directly: {value}"));
            match (through_value, direct) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.pods, b.pods, "{value}");
                    assert_eq!(a.nodes, b.nodes, "{value}");
                    assert_eq!(a.finished_pods, b.finished_pods, "{value}");
                    assert_eq!(a.warnings, b.warnings, "{value}");
                }
                (Err(a), Err(b)) => assert_eq!(a, b, "{value}"),
                (a, b) => panic!(
                    "{value}: through a value {:?}, directly {:?}",
                    a.is_ok(),
                    b.is_ok()
                ),
            }
        }
    }
}

#[test]
fn the_direct_read_says_where_it_does_not_apply() {
    let pod = |extra: Value| {
        let mut pod = json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "1"}}}]}});
        json_patch(&mut pod, extra);
        pod
    };
    // A quantity written as a number reads the same either way.
    let number = pod(json!({"spec": {"containers": [{"name": "c", "image": "i",
        "resources": {"requests": {"cpu": 2}}}]}}));
    let (through_value, direct) = read_both(&number, Release::at(37));
    let (through_value, direct) = (through_value.unwrap(), direct.unwrap().unwrap());
    assert_eq!(through_value.pods, direct.pods);
    assert_eq!(direct.pods[0].requests().milli_cpu, 2000);
    // A field the type does not know is warned about either way, by its path.
    let unknown = pod(json!({"spec": {"nodeSelecter": {"a": "b"},
        "containers": [{"name": "c", "image": "i", "resourcez": {}}]}}));
    let (through_value, direct) = read_both(&unknown, Release::at(37));
    let (through_value, direct) = (through_value.unwrap(), direct.unwrap().unwrap());
    assert_eq!(direct.warnings.len(), 2, "{:?}", direct.warnings);
    assert_eq!(through_value.warnings, direct.warnings);
    assert_eq!(direct.warnings[0].object, "Pod ns/p");
    // Unless told not to note them.
    let text = unknown.to_string();
    let quiet = JsonObject::read("Pod", &text, Release::at(37), UnknownFields::Ignore);
    let mut quietly = ClusterObjects::for_release(Release::at(37));
    quietly.add_read(quiet.unwrap().unwrap());
    assert!(quietly.warnings.is_empty());
    assert_eq!(quietly.pods, direct.pods);
    let cases = [
        // No name: the name generator's work.
        pod(json!({"metadata": {"name": null, "generateName": "p-"}})),
        json!({"kind": "Service", "apiVersion": "v1", "metadata": {"name": "s"}}),
    ];
    for value in cases {
        let (through_value, direct) = read_both(&value, Release::at(37));
        assert!(direct.is_none(), "{value}");
        assert!(through_value.is_ok(), "{value}");
    }
    // A pod that finished only leaves: it is not validated.
    let finished = pod(json!({"metadata": {"labels": {"bad label": "x"}},
        "status": {"phase": "Succeeded"}}));
    let (through_value, direct) = read_both(&finished, Release::at(37));
    assert!(through_value.is_err());
    let direct = direct.unwrap().unwrap();
    assert_eq!(direct.finished_pods, vec!["ns/p".to_string()]);
    // One that runs is.
    let running = pod(json!({"metadata": {"labels": {"bad label": "x"}}}));
    let (through_value, direct) = read_both(&running, Release::at(37));
    assert_eq!(through_value.err(), direct.unwrap().err());
}

/// Merges `patch` into `value` (objects key by key; anything else replaces).
fn json_patch(value: &mut Value, patch: Value) {
    match (value, patch) {
        (Value::Object(value), Value::Object(patch)) => {
            for (key, patch) in patch {
                json_patch(value.entry(key).or_insert(Value::Null), patch);
            }
        }
        (value, patch) => *value = patch,
    }
}
