//! `--kubeconfig` for simulate, explain and estimate: the cluster read from an API server
//! (a small one in this test, answering lists as kube-apiserver does) decides as the same
//! objects read from a dump, as the server's release when none is named.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::stderr;
use serde_json::{Value, json};

fn node(name: &str, cpu: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
           "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                      "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}})
}

fn pod(name: &str, cpu: &str, node: Option<&str>) -> Value {
    let mut pod = json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
           "spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": cpu}}}]}});
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// The cluster: three nodes, one nearly full; two pods running, three pending.
fn cluster() -> (Vec<Value>, Vec<Value>) {
    let nodes = vec![node("a", "4"), node("b", "4"), node("c", "2")];
    let pods = vec![
        pod("running-1", "3500m", Some("a")),
        pod("running-2", "1", Some("b")),
        pod("web-1", "2", None),
        pod("web-2", "2", None),
        pod("web-3", "1500m", None),
    ];
    (nodes, pods)
}

/// An API server on 127.0.0.1 answering `/version`, and every list with one page (items
/// without kind, as kube-apiserver sends them); the PodGroup and DRA APIs are not served.
/// Every request line is kept.
fn serve(nodes: Vec<Value>, pods: Vec<Value>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
            log.lock().unwrap().push(line.trim_end().to_string());
            let path = target.split('?').next().unwrap();
            let list = |kind: &str, items: &[Value]| {
                json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
                       "items": items.iter().map(|i| {
                           let mut i = i.clone();
                           i["metadata"]["resourceVersion"] = json!("7");
                           i
                       }).collect::<Vec<_>>()})
            };
            let (status, body) = match path {
                "/version" => (
                    "200 OK",
                    json!({"major": "1", "minor": "35", "gitVersion": "v1.35.4"}),
                ),
                "/api/v1/nodes" => ("200 OK", list("NodeList", &nodes)),
                "/api/v1/pods" => ("200 OK", list("PodList", &pods)),
                p if p.contains("podgroups") || p.starts_with("/apis/resource.k8s.io/") => (
                    "404 Not Found",
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "message": "the server could not find the requested resource",
                           "reason": "NotFound", "code": 404}),
                ),
                p => {
                    let plural = p.rsplit('/').next().unwrap();
                    let kind = match plural {
                        "namespaces" => "NamespaceList",
                        "priorityclasses" => "PriorityClassList",
                        "services" => "ServiceList",
                        "replicationcontrollers" => "ReplicationControllerList",
                        "replicasets" => "ReplicaSetList",
                        "statefulsets" => "StatefulSetList",
                        "persistentvolumes" => "PersistentVolumeList",
                        "persistentvolumeclaims" => "PersistentVolumeClaimList",
                        "storageclasses" => "StorageClassList",
                        "csinodes" => "CSINodeList",
                        "csidrivers" => "CSIDriverList",
                        "csistoragecapacities" => "CSIStorageCapacityList",
                        _ => "PodDisruptionBudgetList",
                    };
                    ("200 OK", list(kind, &[]))
                }
            };
            let body = body.to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, seen)
}

fn kubeconfig(dir: &Path, server: &str) -> String {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\n\
             contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// The same objects as a dump.
fn dump(dir: &Path, nodes: &[Value], pods: &[Value]) -> String {
    let with_kind = |kind: &str, items: &[Value]| -> Vec<Value> {
        items
            .iter()
            .map(|i| {
                let mut i = i.clone();
                i["kind"] = json!(kind);
                i["apiVersion"] = json!("v1");
                i
            })
            .collect()
    };
    let mut items = with_kind("Node", nodes);
    items.extend(with_kind("Pod", pods));
    let path = dir.join("dump.json");
    std::fs::write(
        &path,
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn simulate_reads_a_live_cluster_as_its_dump_and_decides_as_its_release() {
    let (nodes, pods) = cluster();
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = serve(nodes.clone(), pods.clone());
    let kubeconfig = kubeconfig(dir.path(), &url);
    let dump = dump(dir.path(), &nodes, &pods);
    let live_out = dir.path().join("live.jsonl");
    let dump_out = dir.path().join("dump.jsonl");
    let live = common::gantry(&[
        "simulate",
        "--kubeconfig",
        &kubeconfig,
        "--placements",
        live_out.to_str().unwrap(),
        "--json",
    ]);
    assert!(live.status.success(), "{}", stderr(&live));
    let note = stderr(&live);
    assert!(
        note.contains(&format!("read {url} in ")) && note.contains(": 3 nodes, 5 pods"),
        "{note}"
    );
    assert!(
        note.contains("resourceclaimtemplates.resource.k8s.io, podgroups.scheduling.k8s.io, podgroups.scheduling.x-k8s.io; deciding"),
        "{note}"
    );
    assert!(
        note.contains("deciding as v1.35 (the API server's release (v1.35.4))"),
        "{note}"
    );
    let summary: Value = serde_json::from_slice(&live.stdout).unwrap();
    assert_eq!(summary["kubernetes_release"], "v1.35", "{summary}");
    // Only reads.
    let requests = seen.lock().unwrap().clone();
    assert!(
        requests.iter().all(|r| r.starts_with("GET ")),
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("GET /api/v1/pods?limit=500&fieldSelector=")),
        "{requests:?}"
    );

    let from_dump = common::gantry(&[
        "simulate",
        "--cluster",
        &dump,
        "--emulated-version",
        "1.35",
        "--placements",
        dump_out.to_str().unwrap(),
        "--json",
    ]);
    assert!(from_dump.status.success(), "{}", stderr(&from_dump));
    let placements = std::fs::read_to_string(&live_out).unwrap();
    assert_eq!(placements, std::fs::read_to_string(&dump_out).unwrap());
    // Two of the three pending pods fit (2 cpu on c, and 1.5 or 2 on b): not a blank run.
    assert_eq!(placements.lines().count(), 3, "{placements}");
    assert_eq!(
        placements.matches("\"node\":\"c\"").count(),
        1,
        "{placements}"
    );
    // One read decodes as one release: comparing with another needs a dump.
    let other = common::gantry(&[
        "simulate",
        "--kubeconfig",
        &kubeconfig,
        "--compare-emulated-version",
        "1.34",
    ]);
    assert!(!other.status.success());
    assert!(
        stderr(&other).contains("error: --compare-emulated-version and --compare-feature-gates need a dump, a scenario or a trace, not --kubeconfig"),
        "{}",
        stderr(&other)
    );
}

#[test]
fn explain_and_estimate_read_a_live_cluster_too() {
    let (nodes, pods) = cluster();
    let dir = tempfile::tempdir().unwrap();
    let (url, _) = serve(nodes, pods);
    let kubeconfig = kubeconfig(dir.path(), &url);
    let pod_file = dir.path().join("pod.json");
    let mut big = pod("big", "3", None);
    big["kind"] = json!("Pod");
    big["apiVersion"] = json!("v1");
    std::fs::write(&pod_file, big.to_string()).unwrap();
    let explain = common::gantry(&[
        "explain",
        "--kubeconfig",
        &kubeconfig,
        "--pod",
        pod_file.to_str().unwrap(),
        "--emulated-version",
        "1.34",
    ]);
    assert!(explain.status.success(), "{}", stderr(&explain));
    let text = String::from_utf8_lossy(&explain.stdout);
    // 3 cpu fits only b (4 - 1 running); a holds 3.5, c has 2.
    assert!(text.contains("Kubernetes v1.34"), "{text}");
    assert!(text.contains("NodeResourcesFit"), "{text}");
    assert!(
        stderr(&explain).contains("deciding as v1.34 (--emulated-version)"),
        "{}",
        stderr(&explain)
    );

    let estimate = common::gantry(&["estimate", "--kubeconfig", &kubeconfig, "--drain", "c"]);
    assert!(estimate.status.success(), "{}", stderr(&estimate));
    let text = String::from_utf8_lossy(&estimate.stdout);
    assert!(text.contains("decided as Kubernetes v1.35"), "{text}");
}

#[test]
fn an_unreachable_server_is_one_line_after_a_few_seconds() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: bound, then closed.
    let url = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let kubeconfig = kubeconfig(dir.path(), &url);
    let out = common::gantry_within(
        &[
            "simulate",
            "--kubeconfig",
            &kubeconfig,
            "--emulated-version",
            "1.35",
        ],
        std::time::Duration::from_secs(30),
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    // The retries are said as they happen; the error is the last line, and one.
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!(
            "error: listing namespaces: {url} refused the connection"
        )),
        "{err}"
    );
    assert!(last.ends_with("gave up after 3 attempts"), "{err}");
    assert_eq!(err.matches("error:").count(), 1, "{err}");
    assert_eq!(err.matches("retrying in").count(), 2, "{err}");
}
