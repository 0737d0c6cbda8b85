//! Extended resources backed by devices (DRAExtendedResource): a class's
//! `extendedResourceName` as the API server keeps or drops it, which class serves which
//! name (upstream's `ExtendedResourceCache`), and the requests and mappings of the claim
//! made for a pod (upstream's `createRequestsAndMappings` tests, carried over row by row).

use std::sync::Arc;

mod common;

use common::decode;
use gantry_api::dra::{AllocationMode, DeviceClass};
use gantry_api::dra_extended::{ExtendedResourceClasses, requests_and_mappings};
use gantry_api::{Pod, Release, Sym};

const CLASS: &str = "{apiVersion: resource.k8s.io/v1, kind: DeviceClass, metadata: {name: gpu},
    spec: {extendedResourceName: example.com/gpu,
           selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}}";

/// Kept from v1.36 (the gate on), dropped by v1.35's API server (the gate off).
#[test]
fn the_extended_resource_name_follows_the_gate() {
    let v136 = decode(CLASS, Release::at(36)).unwrap();
    assert_eq!(
        v136.dra.device_classes[0].extended_resource_name,
        Some(Sym::new("example.com/gpu"))
    );
    assert!(v136.warnings.is_empty(), "{:?}", v136.warnings);
    let v135 = decode(CLASS, Release::at(35)).unwrap();
    assert_eq!(v135.dra.device_classes[0].extended_resource_name, None);
}

/// Upstream's `IsExtendedResourceName`, as the API server's validation applies it.
#[test]
fn a_name_that_is_not_an_extended_resource_is_refused() {
    for name in [
        "gpu",
        "kubernetes.io/gpu",
        "requests.example.com/gpu",
        "example.com/-gpu",
    ] {
        let class = CLASS.replace("example.com/gpu", name);
        let error = decode(&class, Release::at(37)).unwrap_err();
        assert!(
            error.contains("spec.extendedResourceName")
                && error.contains("must be a valid extended resource name"),
            "{name}: {error}"
        );
    }
}

fn class(name: &str, extended: Option<&str>, created: i64) -> Arc<DeviceClass> {
    Arc::new(DeviceClass {
        name: Sym::new(name),
        selectors: Vec::new(),
        extended_resource_name: extended.map(Sym::new),
        created,
    })
}

fn served_by(classes: &ExtendedResourceClasses, resource: &str) -> Option<&'static str> {
    classes
        .class_for(Sym::new(resource))
        .map(|c| c.name.as_str())
}

/// Of two classes naming one resource the newer serves it (same age: the smaller name);
/// every class serves its implicit name, except one that lost that contest when it was
/// added (upstream returns before registering it: a quirk, kept).
#[test]
fn the_newest_class_serves_a_name() {
    let classes = ExtendedResourceClasses::new(&[
        class("a-old", Some("example.com/gpu"), 100),
        class("b-new", Some("example.com/gpu"), 200),
        class("c-plain", None, 50),
    ]);
    assert_eq!(served_by(&classes, "example.com/gpu"), Some("b-new"));
    assert_eq!(
        served_by(&classes, "deviceclass.resource.kubernetes.io/a-old"),
        Some("a-old")
    );
    assert_eq!(
        served_by(&classes, "deviceclass.resource.kubernetes.io/c-plain"),
        Some("c-plain")
    );
    assert_eq!(served_by(&classes, "example.com/other"), None);
    // Added in name order, the older class comes second and loses: its implicit name too.
    let classes = ExtendedResourceClasses::new(&[
        class("a-new", Some("example.com/gpu"), 200),
        class("b-old", Some("example.com/gpu"), 100),
    ]);
    assert_eq!(served_by(&classes, "example.com/gpu"), Some("a-new"));
    assert_eq!(
        served_by(&classes, "deviceclass.resource.kubernetes.io/b-old"),
        None
    );
    let same_age = ExtendedResourceClasses::new(&[
        class("b", Some("example.com/gpu"), 100),
        class("a", Some("example.com/gpu"), 100),
    ]);
    assert_eq!(served_by(&same_age, "example.com/gpu"), Some("a"));
}

/// upstream's test pods (`st.MakePod().Res(...)`, `InitReq`, `SidecarReq`): regular
/// containers `con<i>`, init containers `init-con<i>`, sidecars `sidecar-con<i>`, each
/// asking only for the resources listed (X is upstream's `example.com/gpu`).
fn pod(containers: &[(&str, &[(&str, i64)])]) -> Pod {
    let mut init = String::new();
    let mut regular = String::new();
    for (name, requests) in containers {
        let requests: Vec<String> = (requests.iter())
            .map(|(r, n)| format!("{r}: \"{n}\""))
            .collect();
        let sidecar = if name.starts_with("sidecar") {
            ", restartPolicy: Always"
        } else {
            ""
        };
        let line = format!(
            "    - {{name: {name}, image: i{sidecar}, resources: {{limits: {{{}}}}}}}\n",
            requests.join(", ")
        );
        if name.starts_with("con") {
            regular.push_str(&line);
        } else {
            init.push_str(&line);
        }
    }
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: default, uid: u}}\nspec:\n  initContainers:\n{init}  containers:\n{regular}"
    );
    let objects = decode(&yaml, Release::at(36)).unwrap();
    objects.pods.into_iter().next().unwrap()
}

const X: &str = "example.com/gpu";
const X1: &str = "example.com/gpu1";
const XINIT: &str = "example.com/gpuinit";
const IMPLICIT_INIT: &str = "deviceclass.resource.kubernetes.io/classInit";

/// The requests and sorted mappings (by request, then container) for `pod`, with the
/// classes of `mapping` (resource, class); the classes serve the pod's requests.
fn decide(pod: &Pod, mapping: &[(&str, &str)]) -> (Vec<(String, String, u32)>, Vec<String>) {
    let classes: Vec<Arc<DeviceClass>> = (mapping.iter())
        .filter(|(resource, _)| !resource.starts_with("deviceclass."))
        .map(|(resource, class_name)| class(class_name, Some(resource), 0))
        .collect();
    let classes = ExtendedResourceClasses::new(&classes);
    let served = classes.requested_by(pod);
    let (requests, mappings) = requests_and_mappings(pod, &served);
    let requests = (requests.iter())
        .map(|r| {
            let exact = r.exact().unwrap();
            let AllocationMode::ExactCount(count) = exact.mode else {
                panic!()
            };
            (r.name.to_string(), exact.device_class.to_string(), count)
        })
        .collect();
    let mut mappings: Vec<(String, String, String)> = (mappings.iter())
        .map(|m| {
            (
                m.request.to_string(),
                m.container.to_string(),
                m.resource.to_string(),
            )
        })
        .collect();
    mappings.sort();
    let mappings = mappings
        .into_iter()
        .map(|(r, c, res)| format!("{c} {res} {r}"))
        .collect();
    (requests, mappings)
}

fn req(name: &str, class: &str, count: u32) -> (String, String, u32) {
    (name.to_string(), class.to_string(), count)
}

/// `Test_createRequestsAndMappings_requests` and `_mappings`, row by row.
#[test]
fn requests_and_mappings_follow_upstreams_tables() {
    let pod1 = pod(&[("con0", &[(X, 1), (X1, 2)])]);
    let one = [(X, "class")];
    let two = [(X, "class"), (X1, "class1")];
    let init = [(X, "class"), (XINIT, "classInit")];
    // "one resource match" (and "one resource match, one resource not match").
    assert_eq!(
        decide(&pod1, &one).0,
        vec![req("container-0-request-0", "class", 1)]
    );
    // "two resources match"; mappings "one container, two requests".
    let (requests, mappings) = decide(&pod1, &two);
    assert_eq!(
        requests,
        vec![
            req("container-0-request-0", "class", 1),
            req("container-0-request-1", "class1", 2)
        ]
    );
    assert_eq!(
        mappings,
        [
            format!("con0 {X} container-0-request-0"),
            format!("con0 {X1} container-0-request-1")
        ]
    );
    // "two containers match"; mappings "two containers, two requests".
    let pod2 = pod(&[("con0", &[(X, 1)]), ("con1", &[(X1, 2)])]);
    let (requests, mappings) = decide(&pod2, &two);
    assert_eq!(
        requests,
        vec![
            req("container-0-request-0", "class", 1),
            req("container-1-request-0", "class1", 2)
        ]
    );
    assert_eq!(
        mappings,
        [
            format!("con0 {X} container-0-request-0"),
            format!("con1 {X1} container-1-request-0")
        ]
    );
    // "one init container, one regular container".
    let pod_init = pod(&[("init-con0", &[(XINIT, 2)]), ("con0", &[(X, 1)])]);
    let (requests, mappings) = decide(&pod_init, &init);
    assert_eq!(
        requests,
        vec![
            req("container-0-request-0", "classInit", 2),
            req("container-1-request-0", "class", 1)
        ]
    );
    assert_eq!(
        mappings,
        [
            format!("init-con0 {XINIT} container-0-request-0"),
            format!("con0 {X} container-1-request-0")
        ]
    );
    // "two init containers, one regular container": the init containers share the larger.
    let pod_init2 = pod(&[
        ("init-con0", &[(XINIT, 1)]),
        ("init-con1", &[(XINIT, 2)]),
        ("con0", &[(X, 1)]),
    ]);
    let (requests, mappings) = decide(&pod_init2, &init);
    assert_eq!(
        requests,
        vec![
            req("container-1-request-0", "classInit", 2),
            req("container-2-request-0", "class", 1)
        ]
    );
    assert_eq!(
        mappings,
        [
            format!("init-con0 {XINIT} container-1-request-0"),
            format!("init-con1 {XINIT} container-1-request-0"),
            format!("con0 {X} container-2-request-0"),
        ]
    );
    // "three init containers, one sidecar, one regular container": the first init
    // container reuses the sidecar's request.
    let pod_init3 = pod(&[
        ("init-con0", &[(XINIT, 1)]),
        ("sidecar-con1", &[(XINIT, 1)]),
        ("init-con2", &[(XINIT, 2)]),
        ("con0", &[(X, 1)]),
    ]);
    let (requests, mappings) = decide(&pod_init3, &init);
    assert_eq!(
        requests,
        vec![
            req("container-1-request-0", "classInit", 1),
            req("container-2-request-0", "classInit", 2),
            req("container-3-request-0", "class", 1),
        ]
    );
    assert_eq!(
        mappings,
        [
            format!("init-con0 {XINIT} container-1-request-0"),
            format!("sidecar-con1 {XINIT} container-1-request-0"),
            format!("init-con2 {XINIT} container-2-request-0"),
            format!("con0 {X} container-3-request-0"),
        ]
    );
    // "one container, one explicit and one implicit request": the implicit name sorts
    // first among the container's requests.
    let implicit = [
        (X, "class"),
        (XINIT, "classInit"),
        (IMPLICIT_INIT, "classInit"),
    ];
    // (The API requires a regular container: one asking for none of them.)
    let pod_implicit = pod(&[
        ("init-con0", &[(XINIT, 1), (IMPLICIT_INIT, 2)]),
        ("con0", &[]),
    ]);
    let (_, mappings) = decide(&pod_implicit, &implicit);
    assert_eq!(
        mappings,
        [
            format!("init-con0 {IMPLICIT_INIT} container-0-request-0"),
            format!("init-con0 {XINIT} container-0-request-1"),
        ]
    );
    // "three containers (two are init container), both explicit and implicit resources".
    let pod_init_implicit = pod(&[
        ("init-con0", &[(XINIT, 1)]),
        ("init-con1", &[(IMPLICIT_INIT, 2)]),
        ("con0", &[(X, 1)]),
    ]);
    let (_, mappings) = decide(&pod_init_implicit, &implicit);
    assert_eq!(
        mappings,
        [
            format!("init-con0 {XINIT} container-0-request-0"),
            format!("init-con1 {IMPLICIT_INIT} container-1-request-0"),
            format!("con0 {X} container-2-request-0"),
        ]
    );
}
