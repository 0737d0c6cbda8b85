//! The start state joins the cluster in the trace's order, however each object is read;
//! a deletion is found by its name alone.

use std::io::Cursor;

use serde_json::{Value, json};

use super::{Replay, read};
use crate::SimEvent;
use gantry_api::Release;

fn node(name: &str) -> Value {
    json!({"kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
}

fn pod(name: &str, namespace: Option<&str>, node: Option<&str>) -> Value {
    let mut pod = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "1"}}}]}});
    if let Some(namespace) = namespace {
        pod["metadata"]["namespace"] = json!(namespace);
    }
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// A trace of these records (`at`, `op`, object), ended after the last.
fn replay(records: &[(u64, &str, Value)]) -> Replay {
    let mut text = r#"{"gantryTrace":1,"server":"https://x:6443","serverVersion":"v1.35.4","started":"2026-12-04T05:00:00Z"}"#.to_string();
    for (at, op, object) in records {
        text += &format!("\n{}", json!({"at": at, "op": op, "object": object}));
    }
    let end = records.last().map_or(0, |r| r.0);
    text += &format!(
        "\n{}\n",
        json!({"at": end, "op": "end", "records": records.len()})
    );
    read(Cursor::new(text), "t.jsonl", Release::at(35), &|_| true).unwrap()
}

#[test]
fn the_start_joins_the_cluster_in_the_traces_order() {
    // `b` is read through a value (its managedFields are not what the type takes, and
    // only the value path drops them unread), its neighbours straight from their text.
    let mut b = node("b");
    b["metadata"]["managedFields"] = json!("not a list");
    let namespace = json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "ns"}});
    // A field no release knows: warned about in the start, as a dump's would be.
    let mut c = node("c");
    c["spec"] = json!({"bogus": true});
    let records = [
        (0, "list", node("a")),
        (0, "list", b),
        (0, "list", c),
        (0, "list", namespace),
        (0, "list", node("d")),
        (0, "list", pod("p", Some("ns"), Some("a"))),
        (5, "added", node("e")),
    ];
    let replay = replay(&records);
    let names: Vec<_> = replay
        .cluster
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    assert_eq!(replay.cluster.namespaces.len(), 1);
    let warnings: Vec<String> = (replay.cluster.warnings.iter())
        .map(|w| w.to_string())
        .collect();
    assert_eq!(warnings, ["Node c: unknown field \"spec.bogus\""]);
    assert_eq!(replay.cluster.pods[0].key(), "ns/p");
    assert!(matches!(&replay.events[..], [(_, SimEvent::AddNode(n))] if n.name.as_str() == "e"));
}

#[test]
fn a_deletion_is_found_by_its_name() {
    // Deletions as a watch reports them: the object's last state; here only its name.
    let name_only = |name: &str, namespace: Option<&str>| {
        let mut object = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name}});
        if let Some(namespace) = namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        object
    };
    let mut gone_node = json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "b"}});
    gone_node["status"] = json!("not read");
    let records = [
        (0, "list", node("a")),
        (0, "list", node("b")),
        (0, "list", pod("p", Some("ns"), Some("a"))),
        (0, "list", pod("q", None, Some("a"))),
        (1, "deleted", name_only("p", Some("ns"))),
        // A pod without a namespace is in `default`, deleted or not.
        (2, "deleted", name_only("q", None)),
        (3, "deleted", gone_node),
        // Not known: nothing to delete.
        (4, "deleted", name_only("unknown", Some("ns"))),
    ];
    let replay = replay(&records);
    let events: Vec<String> = (replay.events.iter())
        .map(|(at, event)| match event {
            SimEvent::DeletePod(key) => format!("{} pod {key}", at.as_millis()),
            SimEvent::DeleteNode(name) => format!("{} node {name}", at.as_millis()),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(events, ["1 pod ns/p", "2 pod default/q", "3 node b"]);
}
