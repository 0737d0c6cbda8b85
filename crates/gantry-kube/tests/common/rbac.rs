//! Whether a deploy manifest (`deploy/gantry.yaml`, `deploy/gantry-readonly.yaml`) grants every request a test made: each request
//! the in-process API server saw, read as RBAC reads it (verb, API group, resource with its
//! subresource), against the ClusterRole's rules and, for resources in a namespace, the
//! Role's. A request the deployment would refuse with 403 fails the test that made it.

use serde_json::Value;

/// One rule: API groups, resources (`pods/binding` for a subresource) and verbs, and the
/// namespace of a Role's rule (`None`: cluster-wide).
struct Rule {
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    namespace: Option<String>,
}

/// What RBAC checks of one request.
#[derive(Debug, PartialEq, Eq)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
}

/// `deploy/gantry.yaml`: what `gantry run` is granted.
pub const SCHEDULER: &str = include_str!("../../../../deploy/gantry.yaml");
/// `deploy/gantry-readonly.yaml`: what `--kubeconfig` reads need.
pub const READ_ONLY: &str = include_str!("../../../../deploy/gantry-readonly.yaml");

/// The rules of the ClusterRoles and Roles in `text`, a deploy manifest.
fn rules(text: &str) -> Vec<Rule> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    text.split("\n---")
        .map(|doc| gantry_api::decode::parse_yaml_value(doc).expect("the manifest reads"))
        .filter(|doc| matches!(doc["kind"].as_str(), Some("ClusterRole" | "Role")))
        .flat_map(|doc| {
            let namespace = doc["metadata"]["namespace"].as_str().map(String::from);
            doc["rules"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |rule| Rule {
                    groups: strings(&rule["apiGroups"]),
                    resources: strings(&rule["resources"]),
                    verbs: strings(&rule["verbs"]),
                    namespace: namespace.clone(),
                })
        })
        .collect()
}

/// `METHOD /api/v1/namespaces/ns/pods/p/binding?query` as RBAC sees it; `None` for what
/// is not a resource request (discovery, `/version`).
pub fn access(request: &str) -> Option<Access> {
    let (method, target) = request.split_once(' ')?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", namespace, rest @ ..] if !rest.is_empty() => (Some(*namespace), rest),
        rest => (None, rest),
    };
    let (resource, name, subresource) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub] => (*resource, Some(*name), Some(*sub)),
        _ => return None,
    };
    let watching = query
        .split('&')
        .any(|q| q == "watch=true" || q == "watch=1");
    let verb = match (method, name) {
        ("GET", _) if watching => "watch",
        ("GET", None) => "list",
        ("GET", Some(_)) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", None) => "deletecollection",
        ("DELETE", Some(_)) => "delete",
        _ => return None,
    };
    Some(Access {
        verb: verb.to_string(),
        group: group.to_string(),
        resource: match subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_string(),
        },
        namespace: namespace.map(String::from),
    })
}

/// The requests in `requests` that the roles of `manifest` (a deploy manifest) do not
/// grant, each with what RBAC would have checked. A Role's rules count in its own
/// namespace and in `lease_namespace`, where the test put what the deployment puts in the
/// Role's.
pub fn refused(manifest: &str, requests: &[String], lease_namespace: &str) -> Vec<String> {
    let rules = rules(manifest);
    let allows = |rule: &Rule, access: &Access| {
        let listed = |list: &[String], item: &str| list.iter().any(|i| i == item || i == "*");
        listed(&rule.groups, &access.group)
            && listed(&rule.resources, &access.resource)
            && listed(&rule.verbs, &access.verb)
            && rule.namespace.as_ref().is_none_or(|ns| {
                access.namespace.as_deref() == Some(ns.as_str())
                    || access.namespace.as_deref() == Some(lease_namespace)
            })
    };
    requests
        .iter()
        .filter_map(|r| access(r).map(|a| (r, a)))
        .flat_map(|(r, a)| {
            let binding = server_side_binding_check(&a);
            std::iter::once((r, a)).chain(binding.map(|b| (r, b)))
        })
        .filter(|(_, a)| !rules.iter().any(|rule| allows(rule, a)))
        .map(|(r, a)| format!("{r}: {} {}/{} refused", a.verb, a.group, a.resource))
        .collect()
}

/// The check a v1.36 API server adds on its own (DRAResourceClaimGranularStatusAuthorization):
/// writing a claim's status (its allocation and reservations) also needs the same verb on
/// `resourceclaims/binding`, refused as 422 Invalid rather than 403.
fn server_side_binding_check(access: &Access) -> Option<Access> {
    (access.group == "resource.k8s.io" && access.resource == "resourceclaims/status").then(|| {
        Access {
            verb: access.verb.clone(),
            group: access.group.clone(),
            resource: "resourceclaims/binding".to_string(),
            namespace: access.namespace.clone(),
        }
    })
}
