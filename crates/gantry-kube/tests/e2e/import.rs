//! Reading a live cluster once (`--kubeconfig` for simulate, explain and estimate),
//! against the in-process API server: in pages, read-only, and decoded exactly as a dump
//! of the same objects is.

use crate::{apiserver, common};

use std::time::Duration;

use apiserver::TestApiServer;
use apiserver::resources::{
    self, DEVICE_CLASSES, DEVICE_TAINT_RULES, NODES, PODS, PRIORITY_CLASSES,
    RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, RESOURCE_SLICES, Resource,
};
use common::*;
use gantry_api::Release;
use gantry_api::decode::{ClusterObjects, InputLimits};
use gantry_kube::{ImportOptions, Imported, Startup};
use serde_json::{Value, json};

/// Two items a page, so that five nodes take three.
fn options() -> ImportOptions {
    ImportOptions {
        page_size: 2,
        startup: Startup {
            attempts: 2,
            timeout: Duration::from_secs(5),
            backoff: Duration::from_millis(10),
        },
        ..ImportOptions::default()
    }
}

async fn import(api: &TestApiServer, options: &ImportOptions) -> Result<Imported, String> {
    gantry_kube::import(&api.client(), &api.url(), Release::default(), options).await
}

/// Five nodes, pods bound, pending and finished, a priority class, and DRA objects.
fn populate(api: &TestApiServer) {
    for i in 0..5 {
        api.put(NODES, node(&format!("n{i}"), 4000, "a"));
    }
    for i in 0..3 {
        let mut bound = pod(&format!("bound-{i}"), 500);
        bound["spec"]["nodeName"] = json!(format!("n{i}"));
        api.put(PODS, bound);
    }
    api.put(PODS, pod("pending", 500));
    let mut done = pod("done", 500);
    done["spec"]["nodeName"] = json!("n0");
    done["status"] = json!({"phase": "Succeeded"});
    api.put(PODS, done);
    api.put(
        PRIORITY_CLASSES,
        json!({"metadata": {"name": "high"}, "value": 1000}),
    );
    api.put(DEVICE_CLASSES, device_class("gpu"));
    api.put(RESOURCE_SLICES, slice("n0", &["g0", "g1"]));
    api.put(
        DEVICE_TAINT_RULES,
        json!({"metadata": {"name": "g1-broken"},
               "spec": {"deviceSelector": {"device": "g1"},
                        "taint": {"key": "example.com/broken", "effect": "NoSchedule"}}}),
    );
    api.put(RESOURCE_CLAIMS, claim("shared", "gpu"));
    api.put(
        RESOURCE_CLAIM_TEMPLATES,
        json!({"metadata": {"name": "one-gpu", "namespace": "default"},
               "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                   "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}}}}),
    );
}

/// What the server holds, as one dump (`kind: List`, every item with its kind).
fn dump_of(api: &TestApiServer) -> ClusterObjects {
    let items: Vec<Value> = resources::ALL
        .iter()
        .flat_map(|resource: &Resource| {
            api.list(*resource).into_iter().map(move |mut item| {
                item["kind"] = json!(resource.kind);
                item["apiVersion"] = json!(resource.api_version());
                item
            })
        })
        .collect();
    let text = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    let mut objects = ClusterObjects::for_release(Release::default());
    objects
        .read(text.as_bytes(), "dump", &InputLimits::default())
        .unwrap();
    objects
}

#[tokio::test]
async fn a_cluster_read_live_is_the_cluster_its_dump_holds() {
    let api = TestApiServer::start().await;
    populate(&api);
    // A cluster without scheduler-plugins' PodGroup CRD.
    api.unserve("/apis/scheduling.x-k8s.io/v1alpha1");
    let imported = import(&api, &options()).await.unwrap();
    let live = &imported.objects;
    let dump = dump_of(&api);
    assert_eq!(format!("{:?}", live.nodes), format!("{:?}", dump.nodes));
    // The finished pod is left out by the list's field selector, as kube-scheduler's
    // informer leaves it out; the dump reads it and sets it aside.
    assert_eq!(format!("{:?}", live.pods), format!("{:?}", dump.pods));
    assert_eq!(live.pods.len(), 4);
    assert!(live.finished_pods.is_empty());
    assert_eq!(dump.finished_pods, ["default/done"]);
    assert_eq!(format!("{:?}", live.dra), format!("{:?}", dump.dra));
    assert_eq!(live.dra.templates.len(), 1);
    // The rule (v1beta2, the version served here; v1 was asked first) taints g1.
    let taints: Vec<String> = (live.dra.slices[0].devices.iter())
        .map(|d| {
            d.taints
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    assert_eq!(taints, ["", "example.com/broken:NoSchedule"]);
    assert_eq!(
        format!("{:?}", live.priority_classes),
        format!("{:?}", dump.priority_classes)
    );
    assert_eq!(live.warnings, dump.warnings);
    // Listed in pages of two: five nodes, three requests.
    let node_lists = api.requests_matching("GET /api/v1/nodes?");
    assert_eq!(node_lists.len(), 3, "{node_lists:?}");
    assert!(node_lists[1].contains("continue=page-2"), "{node_lists:?}");
    let listed: Vec<(&str, usize)> = (imported.listed.iter().copied())
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(
        listed,
        [
            ("priorityclasses.scheduling.k8s.io", 1),
            ("nodes", 5),
            ("pods", 4),
            ("deviceclasses.resource.k8s.io", 1),
            ("resourceslices.resource.k8s.io", 1),
            ("resourceclaims.resource.k8s.io", 1),
            ("resourceclaimtemplates.resource.k8s.io", 1),
            ("devicetaintrules.resource.k8s.io", 1),
        ]
    );
    // scheduler-plugins' PodGroup CRD is not installed here: read as none, and said.
    assert_eq!(imported.not_served, ["podgroups.scheduling.x-k8s.io"]);
}

/// Reading writes nothing, and deploy/gantry-readonly.yaml grants every request made.
#[tokio::test]
async fn reading_only_reads_and_the_read_only_role_grants_it() {
    let api = TestApiServer::start().await;
    populate(&api);
    import(&api, &options()).await.unwrap();
    assert_eq!(api.writes(), Vec::<String>::new());
    let requests = api.requests_matching("");
    assert!(
        requests.iter().all(|r| r.starts_with("GET ")),
        "{requests:?}"
    );
    assert_eq!(
        common::rbac::refused(common::rbac::READ_ONLY, &requests, ""),
        Vec::<String>::new()
    );
    // The role is the one that counts: gantry run's role does not grant these lists.
    assert!(!common::rbac::refused(common::rbac::SCHEDULER, &requests, "").is_empty());
}

/// client-go's pager: a continue token that expired mid-list makes one full list, and
/// nothing is read twice.
#[tokio::test]
async fn an_expired_continue_token_makes_one_full_list() {
    let api = TestApiServer::start().await;
    populate(&api);
    api.expire_continue_tokens();
    let imported = import(&api, &options()).await.unwrap();
    assert_eq!(imported.objects.nodes.len(), 5);
    assert_eq!(imported.objects.pods.len(), 4);
    let requests = api.requests_matching("GET /api/v1/nodes");
    assert_eq!(
        requests,
        [
            "GET /api/v1/nodes?limit=2",
            "GET /api/v1/nodes?limit=2&continue=page-2",
            "GET /api/v1/nodes",
        ]
    );
}

#[tokio::test]
async fn a_cluster_without_dra_is_read_without_it() {
    let api = TestApiServer::start().await;
    api.put(NODES, node("n0", 4000, "a"));
    api.unserve("/apis/resource.k8s.io/v1");
    let imported = import(&api, &options()).await.unwrap();
    assert_eq!(imported.objects.nodes.len(), 1);
    assert_eq!(
        imported.not_served[..4],
        [
            "deviceclasses.resource.k8s.io",
            "resourceslices.resource.k8s.io",
            "resourceclaims.resource.k8s.io",
            "resourceclaimtemplates.resource.k8s.io",
        ]
    );
}

#[tokio::test]
async fn a_refused_list_is_one_line_naming_the_resource_and_the_role() {
    let api = TestApiServer::start().await;
    api.forbid("/api/v1/pods");
    let error = import(&api, &options()).await.unwrap_err();
    let expected = format!("{} forbids listing pods (403 Forbidden: ", api.url());
    assert!(error.starts_with(&expected), "{error}");
    assert!(error.contains("deploy/gantry-readonly.yaml"), "{error}");
    assert_eq!(error.lines().count(), 1, "{error}");
    // A kind every cluster serves is not optional: a 404 for it is an error.
    let api = TestApiServer::start().await;
    api.unserve("/apis/policy/v1");
    let error = import(&api, &options()).await.unwrap_err();
    assert!(
        error.starts_with("listing poddisruptionbudgets.policy: "),
        "{error}"
    );
}

/// A failing server is retried within the bounds, then given up on, naming the resource.
#[tokio::test]
async fn server_errors_are_retried_a_bounded_number_of_times() {
    let api = TestApiServer::start().await;
    api.put(NODES, node("n0", 4000, "a"));
    api.fail_requests("/api/v1/nodes", 1);
    let imported = import(&api, &options()).await.unwrap();
    assert_eq!(imported.objects.nodes.len(), 1);
    api.fail_requests("/api/v1/nodes", 5);
    let error = import(&api, &options()).await.unwrap_err();
    assert!(error.starts_with("listing nodes: "), "{error}");
    assert!(error.ends_with("gave up after 2 attempts"), "{error}");
}

/// A server that keeps naming a next page is left after the most pages allowed.
#[tokio::test]
async fn a_list_that_never_ends_is_left() {
    let api = TestApiServer::start().await;
    for i in 0..5 {
        api.put(NODES, node(&format!("n{i}"), 4000, "a"));
    }
    let options = ImportOptions {
        max_pages: 2,
        ..options()
    };
    let error = import(&api, &options).await.unwrap_err();
    assert_eq!(
        error,
        format!(
            "listing nodes: {} answered 2 pages and named a next one: giving up",
            api.url()
        )
    );
}

/// An object the API server would not have stored is refused as in a dump, naming the
/// page it came in.
#[tokio::test]
async fn an_invalid_object_names_the_page_and_the_field() {
    let api = TestApiServer::start().await;
    api.put(NODES, node("n0", 4000, "a"));
    let mut bad = node("n1", 4000, "a");
    bad["status"]["allocatable"]["cpu"] = json!("four");
    api.put(NODES, bad);
    let error = import(&api, &options()).await.unwrap_err();
    let expected = format!(
        "listing nodes: {} nodes page 1: Node n1: status.allocatable.cpu",
        api.url()
    );
    assert!(error.starts_with(&expected), "{error}");
}
