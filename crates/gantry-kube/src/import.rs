//! A live cluster read once, instead of a dump (`simulate`, `explain` and `estimate`
//! with `--kubeconfig`): one list per kind the scheduler reads, in pages as client-go's
//! pager reads them (500 items a page, the next page by its `continue` token; a token
//! that expired mid-list, `410 Gone`, makes one full list instead), pods that finished
//! left out as kube-scheduler's informer leaves them out. Every item is decoded as a
//! dump's are. It only reads (GET): `deploy/gantry-readonly.yaml` grants what it needs.

use std::time::Duration;

use futures::AsyncReadExt;
use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use kube::Client;

use crate::failure::{ApiStatus, Refused, Startup, retrying};
use crate::watch::POD_FIELD_SELECTOR;

/// Items per page: client-go's pager's default, which kube-scheduler's informers use.
pub const PAGE_SIZE: u32 = 500;

/// The most pages one kind may take by default: a server that keeps answering with a
/// `continue` token is left after this many (at 500 a page, 10 million objects).
pub const MAX_PAGES: u32 = 20_000;

/// The most one page may hold (500 pods with their managedFields are a few MiB).
pub const MAX_PAGE_BYTES: u64 = 512 << 20;

/// How a cluster is read.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub page_size: u32,
    pub max_pages: u32,
    /// Each request's timeout and retries.
    pub startup: Startup,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            page_size: PAGE_SIZE,
            max_pages: MAX_PAGES,
            startup: Startup {
                // Three attempts, 1 + 2 s apart: a server that is down is said so soon.
                attempts: 3,
                // A page of 500 pods from a loaded server may take a while.
                timeout: Duration::from_secs(60),
                ..Startup::default()
            },
        }
    }
}

/// One kind the scheduler reads, as listed across all namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedKind {
    /// `/api/v1/pods`, `/apis/resource.k8s.io/v1/resourceslices`.
    pub path: &'static str,
    /// `pods`, `resourceslices.resource.k8s.io`: as RBAC and errors name it.
    pub resource: &'static str,
    /// `Pod`, `ResourceSlice`: the kind of its objects, whatever a server writes in them.
    pub kind: &'static str,
    pub field_selector: Option<&'static str>,
    /// A kind a cluster may not serve (DRA before v1.34, the Workload API, the
    /// Coscheduling CRD): a 404 reads as none, and is noted.
    pub optional: bool,
}

const fn kind(path: &'static str, resource: &'static str, kind: &'static str) -> ListedKind {
    ListedKind {
        path,
        resource,
        kind,
        field_selector: None,
        optional: false,
    }
}

const fn optional(
    path: &'static str,
    resource: &'static str,
    kind_name: &'static str,
) -> ListedKind {
    ListedKind {
        optional: true,
        ..kind(path, resource, kind_name)
    }
}

impl ListedKind {
    /// `v1`, `resource.k8s.io/v1`: the apiVersion its path names.
    pub fn api_version(&self) -> &'static str {
        let path: &'static str = self.path;
        let group_version = (path.strip_prefix("/apis/"))
            .or_else(|| path.strip_prefix("/api/"))
            .unwrap_or(path);
        group_version
            .rsplit_once('/')
            .map_or(group_version, |(version, _)| version)
    }
}

/// Every kind the decoder reads, in the order they are listed.
pub const KINDS: [ListedKind; 21] = [
    kind("/api/v1/namespaces", "namespaces", "Namespace"),
    kind(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "priorityclasses.scheduling.k8s.io",
        "PriorityClass",
    ),
    kind("/api/v1/nodes", "nodes", "Node"),
    ListedKind {
        field_selector: Some(POD_FIELD_SELECTOR),
        ..kind("/api/v1/pods", "pods", "Pod")
    },
    kind("/api/v1/services", "services", "Service"),
    kind(
        "/api/v1/replicationcontrollers",
        "replicationcontrollers",
        "ReplicationController",
    ),
    kind(
        "/apis/apps/v1/replicasets",
        "replicasets.apps",
        "ReplicaSet",
    ),
    kind(
        "/apis/apps/v1/statefulsets",
        "statefulsets.apps",
        "StatefulSet",
    ),
    kind(
        "/api/v1/persistentvolumes",
        "persistentvolumes",
        "PersistentVolume",
    ),
    kind(
        "/api/v1/persistentvolumeclaims",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
    ),
    kind(
        "/apis/storage.k8s.io/v1/storageclasses",
        "storageclasses.storage.k8s.io",
        "StorageClass",
    ),
    kind(
        "/apis/storage.k8s.io/v1/csinodes",
        "csinodes.storage.k8s.io",
        "CSINode",
    ),
    kind(
        "/apis/storage.k8s.io/v1/csidrivers",
        "csidrivers.storage.k8s.io",
        "CSIDriver",
    ),
    kind(
        "/apis/storage.k8s.io/v1/csistoragecapacities",
        "csistoragecapacities.storage.k8s.io",
        "CSIStorageCapacity",
    ),
    kind(
        "/apis/policy/v1/poddisruptionbudgets",
        "poddisruptionbudgets.policy",
        "PodDisruptionBudget",
    ),
    optional(
        "/apis/resource.k8s.io/v1/deviceclasses",
        "deviceclasses.resource.k8s.io",
        "DeviceClass",
    ),
    optional(
        "/apis/resource.k8s.io/v1/resourceslices",
        "resourceslices.resource.k8s.io",
        "ResourceSlice",
    ),
    optional(
        "/apis/resource.k8s.io/v1/resourceclaims",
        "resourceclaims.resource.k8s.io",
        "ResourceClaim",
    ),
    optional(
        "/apis/resource.k8s.io/v1/resourceclaimtemplates",
        "resourceclaimtemplates.resource.k8s.io",
        "ResourceClaimTemplate",
    ),
    optional(
        "/apis/scheduling.k8s.io/v1alpha2/podgroups",
        "podgroups.scheduling.k8s.io",
        "PodGroup",
    ),
    optional(
        "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
        "podgroups.scheduling.x-k8s.io",
        "PodGroup",
    ),
];

/// DeviceTaintRules in each version a server may serve them in, newest first: with
/// DRADeviceTaintRules on, the first one served is listed.
pub const TAINT_RULE_KINDS: [ListedKind; 3] = [
    optional(
        "/apis/resource.k8s.io/v1/devicetaintrules",
        "devicetaintrules.resource.k8s.io",
        "DeviceTaintRule",
    ),
    optional(
        "/apis/resource.k8s.io/v1beta2/devicetaintrules",
        "devicetaintrules.resource.k8s.io",
        "DeviceTaintRule",
    ),
    optional(
        "/apis/resource.k8s.io/v1alpha3/devicetaintrules",
        "devicetaintrules.resource.k8s.io",
        "DeviceTaintRule",
    ),
];

/// A cluster as read.
#[derive(Debug)]
pub struct Imported {
    pub objects: ClusterObjects,
    /// Each kind with how many objects it listed.
    pub listed: Vec<(&'static str, usize)>,
    /// Optional kinds the server does not serve.
    pub not_served: Vec<&'static str>,
}

/// Reads every kind of `KINDS` (and, with DRADeviceTaintRules on, of `TAINT_RULE_KINDS`)
/// from `server`, decoded as `release`'s API server admits
/// them (the cross-object checks, such as priority admission, are the caller's, as for
/// files). Fails with one line naming the server and the resource.
pub async fn import(
    client: &Client,
    server: &str,
    release: Release,
    options: &ImportOptions,
) -> Result<Imported, String> {
    let mut imported = Imported {
        objects: ClusterObjects::for_release(release),
        listed: Vec::new(),
        not_served: Vec::new(),
    };
    for kind in KINDS {
        match list_kind(client, server, release, kind, options).await {
            Ok((objects, count)) => {
                imported.objects.merge(objects);
                imported.listed.push((kind.resource, count));
            }
            Err(refused) if kind.optional && code(&refused) == Some(404) => {
                imported.not_served.push(kind.resource);
            }
            Err(refused) => return Err(refusal_line(server, kind, refused)),
        }
    }
    if release.enabled(gantry_api::Gate::DRADeviceTaintRules) {
        let mut served = false;
        for kind in TAINT_RULE_KINDS {
            match list_kind(client, server, release, kind, options).await {
                Ok((objects, count)) => {
                    imported.objects.merge(objects);
                    imported.listed.push((kind.resource, count));
                    served = true;
                    break;
                }
                Err(refused) if code(&refused) == Some(404) => continue,
                Err(refused) => return Err(refusal_line(server, kind, refused)),
            }
        }
        if !served {
            imported.not_served.push(TAINT_RULE_KINDS[0].resource);
        }
    }
    Ok(imported)
}

/// Every page of one kind, into objects of its own (thrown away if a full list must
/// replace the pages read).
async fn list_kind(
    client: &Client,
    server: &str,
    release: Release,
    kind: ListedKind,
    options: &ImportOptions,
) -> Result<(ClusterObjects, usize), Refused> {
    let mut objects = ClusterObjects::for_release(release);
    let mut count = 0;
    let paged = each_page(client, server, kind, options, |text, page| {
        let source = format!("{server} {} page {page}", kind.resource);
        let answer = add(&mut objects, text, &source)?;
        count += answer.items;
        Ok(answer.continue_token)
    })
    .await;
    match paged {
        Ok(()) => Ok((objects, count)),
        // client-go's pager: an expired continue token (410) makes one full list.
        Err(refused) if code(&refused) == Some(410) => {
            let mut objects = ClusterObjects::for_release(release);
            let text = get(
                client,
                server,
                &options.startup,
                kind.path,
                &query_full(kind),
            )
            .await?;
            let source = format!("{server} {} (full list)", kind.resource);
            let answer = add(&mut objects, &text, &source)?;
            Ok((objects, answer.items))
        }
        Err(refused) => Err(refused),
    }
}

/// Lists `kind` page by page, handing each page's text and number to `page`, which
/// answers the page's continue token. An expired token comes back as the 410 it is.
pub(crate) async fn each_page(
    client: &Client,
    server: &str,
    kind: ListedKind,
    options: &ImportOptions,
    mut page: impl FnMut(&[u8], u32) -> Result<Option<String>, Refused>,
) -> Result<(), Refused> {
    let mut token: Option<String> = None;
    for number in 1..=options.max_pages {
        let query = query(kind, Some(options.page_size), token.as_deref());
        let text = get(client, server, &options.startup, kind.path, &query).await?;
        match page(&text, number)? {
            Some(next) => token = Some(next),
            None => return Ok(()),
        }
    }
    Err(Refused {
        message: format!(
            "{server} answered {} pages and named a next one: giving up",
            options.max_pages
        ),
        status: None,
    })
}

/// The one line for a list refused: a 403 says which role grants it.
pub(crate) fn refusal_line(server: &str, kind: ListedKind, refused: Refused) -> String {
    match refused.status {
        Some(ApiStatus { code: 403, message }) => format!(
            "{server} forbids listing {} (403 Forbidden: {message}): grant list and watch on it to the kubeconfig's user (deploy/gantry-readonly.yaml grants what reading a cluster needs)",
            kind.resource
        ),
        _ => format!("listing {}: {}", kind.resource, refused.message),
    }
}

pub(crate) fn code(refused: &Refused) -> Option<u16> {
    refused.status.as_ref().map(|s| s.code)
}

fn add(
    objects: &mut ClusterObjects,
    text: &[u8],
    source: &str,
) -> Result<gantry_api::decode::ApiListPage, Refused> {
    objects.add_api_list(text, source).map_err(|e| Refused {
        message: e.to_string(),
        status: None,
    })
}

fn query_full(kind: ListedKind) -> String {
    query(kind, None, None)
}

/// The query string of one page's request.
pub(crate) fn query(kind: ListedKind, limit: Option<u32>, token: Option<&str>) -> String {
    let mut pairs = Vec::new();
    if let Some(limit) = limit {
        pairs.push(format!("limit={limit}"));
    }
    if let Some(token) = token {
        pairs.push(format!("continue={}", percent_encode(token)));
    }
    if let Some(selector) = kind.field_selector {
        pairs.push(format!("fieldSelector={}", percent_encode(selector)));
    }
    pairs.join("&")
}

/// Query-string escaping: everything but RFC 3986's unreserved characters.
pub(crate) fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// One GET, retried as the start-up check retries, its body read up to [`MAX_PAGE_BYTES`].
pub(crate) async fn get(
    client: &Client,
    server: &str,
    startup: &Startup,
    path: &str,
    query: &str,
) -> Result<Vec<u8>, Refused> {
    let uri = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    };
    let text = retrying(server, startup, || async {
        let request = http::Request::get(uri.as_str())
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        let stream = client.request_stream(request).await?;
        let mut body = Vec::new();
        stream
            .take(MAX_PAGE_BYTES + 1)
            .read_to_end(&mut body)
            .await
            .map_err(kube::Error::ReadEvents)?;
        Ok(body)
    })
    .await?;
    if text.len() as u64 > MAX_PAGE_BYTES {
        return Err(Refused {
            message: format!("{server}{uri}: a page larger than {MAX_PAGE_BYTES} bytes"),
            status: None,
        });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continue_token_and_the_pod_selector_are_escaped() {
        let pods = KINDS[3];
        assert_eq!(
            query(pods, Some(500), Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ==/+")),
            "limit=500&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ%3D%3D%2F%2B&fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"
        );
        assert_eq!(query_full(KINDS[2]), "");
    }

    #[test]
    fn every_kind_the_decoder_reads_is_listed_once() {
        let mut resources: Vec<&str> = KINDS.iter().map(|k| k.resource).collect();
        resources.sort_unstable();
        resources.dedup();
        assert_eq!(resources.len(), KINDS.len());
        // The watch reads the same core kinds; besides, the three DRA kinds, both kinds
        // of PodGroup and DeviceTaintRules (listed apart: `TAINT_RULE_KINDS`).
        assert_eq!(
            KINDS.iter().filter(|k| !k.optional).count() + 6,
            crate::watch::Kind::ALL.len()
        );
    }
}
