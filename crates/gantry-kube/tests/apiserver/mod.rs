//! An in-process Kubernetes API server for tests: real REST and watch over HTTP on
//! 127.0.0.1, so kube-rs is exercised as against kube-apiserver. It behaves as
//! kube-apiserver does for the calls Gantry makes (list with a resourceVersion; watch
//! streams with bookmarks and `410 Gone` (`Expired`) past the watch cache's window;
//! `pods/binding` with 201, or 409 when the pod is being deleted, already assigned,
//! gated, or its UID differs; updates with resourceVersion optimistic concurrency;
//! merge and strategic-merge patches of conditions; deletion with a UID precondition;
//! resource.k8s.io/v1 claims whose `status` is written only through the status
//! subresource, validated as kube-apiserver validates it), and injects faults: dropped
//! watches, 500s, slow binds, another scheduler binding a pod first, another client
//! writing a claim just before a status write. Simplification: deletions are immediate
//! (no kubelet to finish them, no finalizers to wait for).

#![allow(dead_code)]
// Errors are HTTP responses, returned at once to the client; their size does not matter.
#![allow(clippy::result_large_err)]

pub mod resources;
pub mod serve;
pub mod store;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use resources::{RESOURCE_CLAIMS, Resource, Target};
use store::{Change, EventType, FieldSelector, Store, merge_patch};

/// Faults to inject.
#[derive(Debug, Default)]
pub struct Faults {
    /// Requests whose path and query contain the text fail with 500, this many times.
    pub fail: Vec<(String, u32)>,
    /// Each bind waits this long before it is applied.
    pub bind_delay: Duration,
    /// Binds of these pods (namespace/name) wait this long instead.
    pub slow: HashMap<String, Duration>,
    /// Binds of these pods (namespace/name) are beaten by another scheduler, which binds
    /// them to the given node just before.
    pub steal: HashMap<String, String>,
    /// The next status write of these claims (namespace/name) comes after another
    /// client's write of the claim: this merge patch, applied first.
    pub before_status_write: HashMap<String, Value>,
    /// A deleted pod bound to a node stays, with a `deletionTimestamp`, until
    /// [`TestApiServer::finish_termination`]: kube-apiserver's graceful deletion, with a
    /// kubelet that has not stopped the pod yet.
    pub graceful_pod_deletion: bool,
    /// Writes whose path contains the text wait this long before they are handled, this
    /// many times.
    pub slow_writes: Vec<(String, Duration, u32)>,
    /// Every request is refused with 401, as for a token the server does not know.
    pub unauthorized: bool,
    /// Requests whose path contains one of these (`METHOD text`: of that method) are
    /// refused with 403, as RBAC refuses.
    pub forbid: Vec<String>,
    /// Paths starting with one of these are not served: 404 with kube-apiserver's plain
    /// `404 page not found`, as for an API group an older release does not have.
    pub unserved: Vec<String>,
    /// What `GET /version` answers (`gitVersion`), if anything.
    pub version: Option<String>,
    /// Binds of these pods (namespace/name) are applied, then the connection fails
    /// before the answer is read (`false`), as when an API server dies after writing to
    /// etcd, or the answer is a 500 (`true`), as for a write that timed out yet landed.
    pub lose_bind_answer: Vec<(String, bool)>,
    /// Changes of these pods (namespace/name), their binds included, are applied but kept
    /// from the watches until [`TestApiServer::reveal_hidden`], as a watch closed by a
    /// restart shows them late.
    pub hide_bind: Vec<String>,
    /// The changes so kept.
    pub hidden: Vec<Change>,
    /// A list's continue token is refused as expired (410 `Expired`), as after etcd's
    /// compaction passed the list's revision.
    pub expire_continue_tokens: bool,
    /// Lists name their kind `List` and watch events' objects carry no kind or
    /// apiVersion, as a server in front of the API server might answer.
    pub untyped: bool,
    /// Lists end with this item, which is not an object, and a watch starts with an
    /// ADDED event of it.
    pub garbage_item: Option<Value>,
}

struct Inner {
    store: Mutex<Store>,
    changes: broadcast::Sender<Change>,
    /// Bumped to end every open watch.
    drops: broadcast::Sender<()>,
    faults: Mutex<Faults>,
    bookmark_every: Duration,
    /// Binds applied, in order: (namespace/name, node).
    binds: Mutex<Vec<(String, String)>>,
    /// Every write request, in order: `METHOD path`.
    writes: Mutex<Vec<String>>,
    /// Every request, in order: `METHOD path?query`.
    all: Mutex<Vec<String>>,
    requests: AtomicU64,
    /// Every `User-Agent` seen (`""` for a request without one).
    user_agents: Mutex<std::collections::BTreeSet<String>>,
    connections: Arc<serve::Connections>,
    /// Writes whose path contains the text, counted while in flight: (text, now, peak).
    write_gauges: Mutex<Vec<(String, Arc<InFlight>)>>,
}

impl Inner {
    /// Sends a change to the watches, unless it is of a pod kept from them.
    fn broadcast(&self, change: Change) {
        if change.resource == resources::PODS {
            let mut faults = self.faults.lock();
            let name = change.object["metadata"]["name"].as_str().unwrap_or("");
            if faults
                .hide_bind
                .contains(&format!("{}/{name}", change.namespace))
            {
                faults.hidden.push(change);
                return;
            }
        }
        let _ = self.changes.send(change);
    }
}

/// Requests in flight now, and the most at once.
#[derive(Default)]
pub struct InFlight {
    now: AtomicU64,
    pub peak: AtomicU64,
}

/// One request counted in its gauges until it is answered.
struct Counted(Vec<Arc<InFlight>>);

impl Counted {
    fn start(gauges: Vec<Arc<InFlight>>) -> Counted {
        for gauge in &gauges {
            let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.peak.fetch_max(now, Ordering::SeqCst);
        }
        Counted(gauges)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        for gauge in &self.0 {
            gauge.now.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[derive(Clone)]
pub struct TestApiServer {
    inner: Arc<Inner>,
    pub addr: SocketAddr,
    tls: bool,
}

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}

fn not_found(target: &Target, name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{} {name:?} not found", target.resource.qualified()),
    )
}

/// kube-apiserver's `NewConflict`.
fn conflict(qualified: &str, name: &str, cause: &str) -> Response {
    status(
        StatusCode::CONFLICT,
        "Conflict",
        format!("Operation cannot be fulfilled on {qualified} {name:?}: {cause}"),
    )
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl TestApiServer {
    /// Starts a server; the log keeps the last `log_capacity` changes for resuming watches.
    pub async fn start() -> TestApiServer {
        TestApiServer::with_log(10_000, Duration::from_millis(200)).await
    }

    pub async fn with_log(log_capacity: usize, bookmark_every: Duration) -> TestApiServer {
        TestApiServer::serving(log_capacity, bookmark_every, false).await
    }

    /// Over TLS (a certificate of the test CA, [`serve::CA_PEM`]), offering HTTP/2 and
    /// HTTP/1.1 by ALPN as kube-apiserver does.
    pub async fn start_tls() -> TestApiServer {
        TestApiServer::serving(10_000, Duration::from_millis(200), true).await
    }

    async fn serving(log_capacity: usize, bookmark_every: Duration, tls: bool) -> TestApiServer {
        let (changes, _) = broadcast::channel(65_536);
        let (drops, _) = broadcast::channel(16);
        let inner = Arc::new(Inner {
            store: Mutex::new(Store::new(log_capacity)),
            changes,
            drops,
            faults: Mutex::new(Faults::default()),
            bookmark_every,
            binds: Mutex::new(Vec::new()),
            writes: Mutex::new(Vec::new()),
            all: Mutex::new(Vec::new()),
            requests: AtomicU64::new(0),
            user_agents: Mutex::new(Default::default()),
            connections: Default::default(),
            write_gauges: Mutex::new(Vec::new()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(handle).with_state(inner.clone());
        serve::spawn(listener, app, tls, inner.connections.clone());
        TestApiServer { inner, addr, tls }
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// A client configuration for this server (trusting the test CA over TLS).
    pub fn config(&self) -> kube::Config {
        let mut config = kube::Config::new(self.url().parse().unwrap());
        if self.tls {
            config.root_cert = Some(vec![serve::der(serve::CA_PEM)]);
        }
        config
    }

    /// The client `gantry run` builds, for this server.
    pub fn client(&self) -> kube::Client {
        gantry_kube::build_client(self.config()).unwrap()
    }

    /// Connections accepted so far.
    pub fn connections_accepted(&self) -> u64 {
        self.inner.connections.accepted.load(Ordering::SeqCst)
    }

    /// The most connections open at once so far.
    pub fn peak_connections(&self) -> u64 {
        self.inner.connections.peak.load(Ordering::SeqCst)
    }

    /// Every `User-Agent` requests carried (`""`: none).
    pub fn user_agents(&self) -> Vec<String> {
        self.inner.user_agents.lock().iter().cloned().collect()
    }

    /// Refuses every request with 401 from now on (`false`: accepts them again).
    pub fn refuse_credentials(&self, refuse: bool) {
        self.inner.faults.lock().unauthorized = refuse;
    }

    /// Refuses requests whose path contains `text` with 403, as RBAC does.
    pub fn forbid(&self, text: &str) {
        self.inner.faults.lock().forbid.push(text.to_string());
    }

    /// Lists answer as kind `List` and watch events carry objects without kind or
    /// apiVersion, from now on.
    pub fn untyped(&self) {
        self.inner.faults.lock().untyped = true;
    }

    /// Lists end with `item` (a value that is not an object), and watches start with an
    /// ADDED event of it, from now on.
    pub fn garbage_item(&self, item: Value) {
        self.inner.faults.lock().garbage_item = Some(item);
    }

    /// Refuses every continue token as expired from now on.
    pub fn expire_continue_tokens(&self) {
        self.inner.faults.lock().expire_continue_tokens = true;
    }

    /// Serves no path under `prefix` (`/apis/resource.k8s.io/v1`), as a server of a
    /// release without that API.
    pub fn unserve(&self, prefix: &str) {
        self.inner.faults.lock().unserved.push(prefix.to_string());
    }

    /// Answers `GET /version` with this `gitVersion` (`v1.28.0`).
    pub fn set_version(&self, git_version: &str) {
        self.inner.faults.lock().version = Some(git_version.to_string());
    }

    // ---- direct access, as tests and "other controllers" use it -------------------

    /// Creates (or replaces) an object directly, as another client would.
    pub fn put(&self, resource: Resource, mut object: Value) -> Value {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(if resource.namespaced { "default" } else { "" })
            .to_string();
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        let mut store = self.inner.store.lock();
        let key = (resource, namespace.clone(), name);
        let kind = if store.objects.contains_key(&key) {
            EventType::Modified
        } else {
            EventType::Added
        };
        prepare(
            &mut store,
            resource,
            &namespace,
            &mut object,
            kind == EventType::Added,
        );
        let (stored, change) = store.write(key, object, kind);
        self.inner.broadcast(change);
        stored
    }

    pub fn get(&self, resource: Resource, namespace: &str, name: &str) -> Option<Value> {
        let store = self.inner.store.lock();
        store
            .objects
            .get(&(resource, namespace.to_string(), name.to_string()))
            .cloned()
    }

    pub fn list(&self, resource: Resource) -> Vec<Value> {
        self.inner.store.lock().list(resource, None)
    }

    pub fn delete(&self, resource: Resource, namespace: &str, name: &str) -> bool {
        let mut store = self.inner.store.lock();
        let key = (resource, namespace.to_string(), name.to_string());
        let Some(object) = store.objects.get(&key).cloned() else {
            return false;
        };
        let (_, change) = store.write(key, object, EventType::Deleted);
        self.inner.broadcast(change);
        true
    }

    /// Binds applied so far: (namespace/name, node).
    pub fn binds(&self) -> Vec<(String, String)> {
        self.inner.binds.lock().clone()
    }

    /// Every write request so far, in order: `METHOD path` (e.g.
    /// `PUT /apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c/status`).
    pub fn writes(&self) -> Vec<String> {
        self.inner.writes.lock().clone()
    }

    /// The requests (any method) whose path and query contain `text`.
    pub fn requests_matching(&self, text: &str) -> Vec<String> {
        self.inner
            .all
            .lock()
            .iter()
            .filter(|r| r.contains(text))
            .cloned()
            .collect()
    }

    pub fn requests(&self) -> u64 {
        self.inner.requests.load(Ordering::Relaxed)
    }

    // ---- faults ---------------------------------------------------------------------

    /// Ends every open watch stream (clients resume from their last resourceVersion).
    pub fn drop_watches(&self) {
        let _ = self.inner.drops.send(());
    }

    /// Forgets the change log: watches resuming from before now get 410 Gone.
    pub fn compact(&self) {
        self.inner.store.lock().compact();
    }

    /// The next `times` requests whose path and query contain `text` fail with 500
    /// (`watch=true` blinds every watch).
    pub fn fail_requests(&self, text: &str, times: u32) {
        self.inner
            .faults
            .lock()
            .fail
            .push((text.to_string(), times));
    }

    /// The next status write of claim `namespace/name` comes after another client's
    /// write of it: `patch` (a merge patch) is applied first, so the write carries an
    /// outdated resourceVersion.
    pub fn before_status_write(&self, claim: &str, patch: Value) {
        self.inner
            .faults
            .lock()
            .before_status_write
            .insert(claim.to_string(), patch);
    }

    /// Counts the writes whose path contains `text` while they are in flight (from their
    /// arrival to their answer, injected delays included).
    pub fn gauge_writes(&self, text: &str) -> Arc<InFlight> {
        let gauge = Arc::new(InFlight::default());
        self.inner
            .write_gauges
            .lock()
            .push((text.to_string(), gauge.clone()));
        gauge
    }

    /// The next `times` writes whose path contains `text` wait `delay` first.
    pub fn slow_writes(&self, text: &str, delay: Duration, times: u32) {
        self.inner
            .faults
            .lock()
            .slow_writes
            .push((text.to_string(), delay, times));
    }

    /// Deleted pods bound to a node stay terminating until [`Self::finish_termination`].
    pub fn hold_terminating_pods(&self) {
        self.inner.faults.lock().graceful_pod_deletion = true;
    }

    /// The pods being deleted: `namespace/name`.
    pub fn terminating_pods(&self) -> Vec<String> {
        self.list(resources::PODS)
            .iter()
            .filter(|p| !p["metadata"]["deletionTimestamp"].is_null())
            .map(|p| {
                let m = &p["metadata"];
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap_or(""),
                    m["name"].as_str().unwrap_or("")
                )
            })
            .collect()
    }

    /// The kubelet has stopped every terminating pod: they go.
    pub fn finish_termination(&self) {
        for pod in self.terminating_pods() {
            let (namespace, name) = pod.split_once('/').unwrap();
            self.delete(resources::PODS, namespace, name);
        }
    }

    pub fn clear_failures(&self) {
        self.inner.faults.lock().fail.clear();
    }

    /// Changes of `namespace/name` (its binds included) are applied without the watches
    /// seeing them, until [`Self::reveal_hidden`].
    pub fn hide_bind(&self, pod: &str) {
        self.inner.faults.lock().hide_bind.push(pod.to_string());
    }

    /// The watches see the changes kept from them, and every change from now on.
    pub fn reveal_hidden(&self) {
        let hidden = {
            let mut faults = self.inner.faults.lock();
            faults.hide_bind.clear();
            std::mem::take(&mut faults.hidden)
        };
        for change in hidden {
            self.inner.broadcast(change);
        }
    }

    /// The next bind of `namespace/name` is applied, and its answer lost (or, with
    /// `as_500`, answered with a 500).
    pub fn lose_bind_answer(&self, pod: &str, as_500: bool) {
        self.inner
            .faults
            .lock()
            .lose_bind_answer
            .push((pod.to_string(), as_500));
    }

    /// Binds of `namespace/name` wait `delay` before they are applied.
    pub fn slow_bind(&self, pod: &str, delay: Duration) {
        self.inner.faults.lock().slow.insert(pod.to_string(), delay);
    }

    pub fn set_bind_delay(&self, delay: Duration) {
        self.inner.faults.lock().bind_delay = delay;
    }

    /// The next bind of `namespace/name` loses to another scheduler that binds the pod
    /// to `node` first.
    pub fn steal_bind(&self, pod: &str, node: &str) {
        self.inner
            .faults
            .lock()
            .steal
            .insert(pod.to_string(), node.to_string());
    }
}

/// Server-side defaults on create (uid, timestamps, a pod's Pending phase) and the
/// identity fields every stored object carries.
fn prepare(
    store: &mut Store,
    resource: Resource,
    namespace: &str,
    object: &mut Value,
    created: bool,
) {
    object["kind"] = json!(resource.kind);
    object["apiVersion"] = json!(resource.api_version());
    if resource.namespaced {
        object["metadata"]["namespace"] = json!(namespace);
    }
    if created {
        if object["metadata"]["uid"].as_str().is_none_or(str::is_empty) {
            object["metadata"]["uid"] = json!(store.fresh_uid());
        }
        object["metadata"]["creationTimestamp"] = json!(now());
        if resource == resources::PODS && object["status"]["phase"].is_null() {
            object["status"]["phase"] = json!("Pending");
        }
    }
}

/// Takes a matching 500 fault, if one is armed for this path; refuses the credentials or
/// the permission as kube-apiserver does when told to.
fn injected_failure(inner: &Inner, method: &Method, path: &str) -> Option<Response> {
    let mut faults = inner.faults.lock();
    if faults.unauthorized {
        return Some(status(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "Unauthorized".into(),
        ));
    }
    let forbidden = |f: &String| match f.split_once(' ') {
        // `METHOD path`: that method only.
        Some((verb, text)) => method.as_str() == verb && path.contains(text),
        None => path.contains(f.as_str()),
    };
    if faults.forbid.iter().any(forbidden) {
        let target = resources::parse(path.split('?').next().unwrap_or(path));
        let (resource, group, namespace) = target.map_or(("", "", String::new()), |t| {
            (
                t.resource.plural,
                t.resource.group,
                t.namespace.unwrap_or_default(),
            )
        });
        let verb = match *method {
            Method::GET => "get",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "use",
        };
        return Some(status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!(
                "{resource} is forbidden: User \"system:serviceaccount:gantry-system:gantry-scheduler\" cannot {verb} resource \"{resource}\" in API group \"{group}\" in the namespace \"{namespace}\""
            ),
        ));
    }
    let fault = faults
        .fail
        .iter_mut()
        .find(|(p, times)| *times > 0 && path.contains(p.as_str()))?;
    fault.1 -= 1;
    Some(status(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        "Internal error occurred: injected failure".into(),
    ))
}

/// `GET /version`, and the paths of an API the server does not serve.
fn version_or_unserved(inner: &Inner, path: &str) -> Option<Response> {
    let faults = inner.faults.lock();
    if faults.unserved.iter().any(|p| path.starts_with(p.as_str())) {
        return Some((StatusCode::NOT_FOUND, "404 page not found").into_response());
    }
    let git_version = faults.version.as_deref().filter(|_| path == "/version")?;
    let minor = git_version.split('.').nth(1).unwrap_or("0");
    Some(
        axum::Json(json!({
            "major": "1", "minor": minor, "gitVersion": git_version,
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
            "goVersion": "", "compiler": "gc", "platform": "linux/amd64",
        }))
        .into_response(),
    )
}

/// Takes a matching delay, if one is armed for this write.
fn injected_delay(inner: &Inner, path: &str) -> Option<Duration> {
    let mut faults = inner.faults.lock();
    let (_, delay, times) = faults
        .slow_writes
        .iter_mut()
        .find(|(p, _, times)| *times > 0 && path.contains(p.as_str()))?;
    *times -= 1;
    Some(*delay)
}

async fn handle(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    inner.requests.fetch_add(1, Ordering::Relaxed);
    let method = request.method().clone();
    let uri = request.uri().clone();
    let headers = request.headers().clone();
    let query: HashMap<String, String> = uri
        .query()
        .map(|q| {
            url_decode_pairs(q)
                .into_iter()
                .collect::<HashMap<String, String>>()
        })
        .unwrap_or_default();
    let path_and_query = uri.path_and_query().map_or("", |p| p.as_str()).to_string();
    let mut gauges = Vec::new();
    if method != Method::GET {
        inner.writes.lock().push(format!("{method} {}", uri.path()));
        gauges = (inner.write_gauges.lock().iter())
            .filter(|(text, _)| path_and_query.contains(text.as_str()))
            .map(|(_, gauge)| gauge.clone())
            .collect();
    }
    let _counted = Counted::start(gauges);
    inner.all.lock().push(format!("{method} {path_and_query}"));
    let agent = headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    inner.user_agents.lock().insert(agent.to_string());
    if let Some(failure) = injected_failure(&inner, &method, &path_and_query) {
        return failure;
    }
    if let Some(answer) = version_or_unserved(&inner, uri.path()) {
        return answer;
    }
    if method != Method::GET
        && let Some(delay) = injected_delay(&inner, &path_and_query)
    {
        tokio::time::sleep(delay).await;
    }
    let Some(target) = resources::parse(uri.path()) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!(
                "the server could not find the requested resource ({})",
                uri.path()
            ),
        );
    };
    let body = axum::body::to_bytes(request.into_body(), 16 << 20)
        .await
        .unwrap_or_default();
    match (method, target.name.clone(), target.subresource.as_deref()) {
        (Method::GET, None, None)
            if query.get("watch").is_some_and(|w| w == "true" || w == "1") =>
        {
            watch(inner, target, query)
        }
        (Method::GET, None, None) => list(&inner, &target, &query),
        (Method::GET, Some(name), None) => get(&inner, &target, &name),
        (Method::POST, None, None) => create(&inner, &target, &body),
        (Method::POST, Some(name), Some("binding")) => bind(&inner, &target, &name, &body).await,
        (Method::PUT, Some(name), None) => replace(&inner, &target, &name, &body),
        (Method::PUT, Some(name), Some("status")) if target.resource == RESOURCE_CLAIMS => {
            replace_claim_status(&inner, &target, &name, &body)
        }
        (Method::PATCH, Some(name), None | Some("status")) => {
            patch(&inner, &target, &name, &headers, &body)
        }
        (Method::DELETE, Some(name), None) => delete(&inner, &target, &name, &body),
        (method, _, _) => status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!("{method} is not supported on {}", uri.path()),
        ),
    }
}

fn url_decode_pairs(query: &str) -> Vec<(String, String)> {
    fn decode(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                    match u8::from_str_radix(hex, 16) {
                        Ok(b) => {
                            out.push(b);
                            i += 2;
                        }
                        Err(_) => out.push(b'%'),
                    }
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(pair), String::new()),
        })
        .collect()
}

fn parse_json(body: &Bytes) -> Result<Value, Response> {
    serde_json::from_slice(body).map_err(|e| {
        status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("the body is not valid JSON: {e}"),
        )
    })
}

fn selector(query: &HashMap<String, String>) -> Result<FieldSelector, Response> {
    FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str))
        .map_err(|e| status(StatusCode::BAD_REQUEST, "BadRequest", e))
}

/// kube-apiserver's answer to a continue token past etcd's compaction.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A list, in pages when asked (`limit`; `continue` is the next item's index here, an
/// opaque token to clients).
fn list(inner: &Inner, target: &Target, query: &HashMap<String, String>) -> Response {
    let selector = match selector(query) {
        Ok(s) => s,
        Err(response) => return response,
    };
    let start: usize = match query.get("continue").map(|t| t.strip_prefix("page-")) {
        None => 0,
        Some(_) if inner.faults.lock().expire_continue_tokens => {
            return status(StatusCode::GONE, "Expired", CONTINUE_EXPIRED.to_string());
        }
        Some(Some(index)) if index.parse::<usize>().is_ok() => index.parse().unwrap(),
        Some(_) => {
            return status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "continue key is not valid".into(),
            );
        }
    };
    let limit = query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let store = inner.store.lock();
    let selected: Vec<Value> = store
        .list(target.resource, target.namespace.as_deref())
        .into_iter()
        .filter(|o| selector.matches(o))
        .collect();
    let end = start.saturating_add(limit).min(selected.len());
    let next = (end < selected.len()).then(|| format!("page-{end}"));
    let items: Vec<Value> = selected
        .into_iter()
        .skip(start)
        .take(end.saturating_sub(start))
        .map(|mut o| {
            // Items of a typed list carry no kind or apiVersion.
            if let Value::Object(map) = &mut o {
                map.remove("kind");
                map.remove("apiVersion");
            }
            o
        })
        .collect();
    let mut items = items;
    items.extend(inner.faults.lock().garbage_item.clone());
    let list_kind = match inner.faults.lock().untyped {
        true => "List".to_string(),
        false => format!("{}List", target.resource.kind),
    };
    axum::Json(json!({
        "kind": list_kind,
        "apiVersion": target.resource.api_version(),
        "metadata": {"resourceVersion": store.rv.to_string(), "continue": next},
        "items": items,
    }))
    .into_response()
}

fn key(target: &Target, name: &str) -> store::Key {
    (
        target.resource,
        target.namespace.clone().unwrap_or_default(),
        name.to_string(),
    )
}

fn get(inner: &Inner, target: &Target, name: &str) -> Response {
    match inner.store.lock().objects.get(&key(target, name)) {
        Some(object) => axum::Json(object.clone()).into_response(),
        None => not_found(target, name),
    }
}

fn create(inner: &Inner, target: &Target, body: &Bytes) -> Response {
    let mut object = match parse_json(body) {
        Ok(o) => o,
        Err(response) => return response,
    };
    let Some(name) = object["metadata"]["name"].as_str().map(str::to_string) else {
        return status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            "metadata.name: Required value".into(),
        );
    };
    let namespace = target.namespace.clone().unwrap_or_default();
    let mut store = inner.store.lock();
    let key = key(target, &name);
    if store.objects.contains_key(&key) {
        return status(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("{} {name:?} already exists", target.resource.qualified()),
        );
    }
    prepare(&mut store, target.resource, &namespace, &mut object, true);
    let (stored, change) = store.write(key, object, EventType::Added);
    inner.broadcast(change);
    (StatusCode::CREATED, axum::Json(stored)).into_response()
}

/// Update with optimistic concurrency: a resourceVersion in the body must be current.
fn replace(inner: &Inner, target: &Target, name: &str, body: &Bytes) -> Response {
    let mut object = match parse_json(body) {
        Ok(o) => o,
        Err(response) => return response,
    };
    let namespace = target.namespace.clone().unwrap_or_default();
    let mut store = inner.store.lock();
    let key = key(target, name);
    let Some(current) = store.objects.get(&key).cloned() else {
        return not_found(target, name);
    };
    let sent = object["metadata"]["resourceVersion"].as_str().unwrap_or("");
    if !sent.is_empty() && sent != current["metadata"]["resourceVersion"] {
        return conflict(
            &target.resource.qualified(),
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        );
    }
    object["metadata"]["uid"] = current["metadata"]["uid"].clone();
    object["metadata"]["creationTimestamp"] = current["metadata"]["creationTimestamp"].clone();
    if target.resource == RESOURCE_CLAIMS {
        // The claim strategy: status only through the subresource, spec immutable.
        if object["spec"] != current["spec"] {
            return invalid(target, name, "spec: Invalid value: field is immutable");
        }
        object["status"] = current["status"].clone();
    }
    prepare(&mut store, target.resource, &namespace, &mut object, false);
    let (stored, change) = store.write(key, object, EventType::Modified);
    inner.broadcast(change);
    axum::Json(stored).into_response()
}

/// kube-apiserver's 422 for an invalid object.
fn invalid(target: &Target, name: &str, cause: &str) -> Response {
    status(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        format!(
            "{}.{} {name:?} is invalid: {cause}",
            target.resource.kind, target.resource.group
        ),
    )
}

/// `ValidateResourceClaimStatusUpdate`, for the rules a scheduler's writes meet: an
/// allocation is set once (then only cleared), is not added while the claim is being
/// deleted, and `reservedFor` needs one and names each consumer once.
fn claim_status_error(old: &Value, new: &Value) -> Option<String> {
    let (was, now) = (&old["status"]["allocation"], &new["status"]["allocation"]);
    if !was.is_null() && !now.is_null() && was != now {
        return Some("status.allocation: Invalid value: field is immutable".into());
    }
    if was.is_null() && !now.is_null() && !old["metadata"]["deletionTimestamp"].is_null() {
        return Some(
            "status.allocation: Forbidden: new allocation cannot be added while the claim is being deleted"
                .into(),
        );
    }
    let reserved = new["status"]["reservedFor"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if !reserved.is_empty() && now.is_null() {
        return Some(
            "status.reservedFor: Forbidden: may not be specified when `allocated` is not set"
                .into(),
        );
    }
    for (i, consumer) in reserved.iter().enumerate() {
        if reserved[..i].iter().any(|c| c["uid"] == consumer["uid"]) {
            return Some(format!("status.reservedFor[{i}].uid: Duplicate value"));
        }
    }
    None
}

/// `PUT .../resourceclaims/{name}/status`: only the status changes (the rest is kept as
/// stored), with the resourceVersion in the body as a precondition.
fn replace_claim_status(inner: &Inner, target: &Target, name: &str, body: &Bytes) -> Response {
    let sent = match parse_json(body) {
        Ok(o) => o,
        Err(response) => return response,
    };
    let namespace = target.namespace.clone().unwrap_or_default();
    let mut store = inner.store.lock();
    let key = key(target, name);
    let interference = inner
        .faults
        .lock()
        .before_status_write
        .remove(&format!("{namespace}/{name}"));
    if let Some(patch) = interference
        && let Some(mut other) = store.objects.get(&key).cloned()
    {
        merge_patch(&mut other, &patch, false);
        let (_, change) = store.write(key.clone(), other, EventType::Modified);
        inner.broadcast(change);
    }
    let Some(current) = store.objects.get(&key).cloned() else {
        return not_found(target, name);
    };
    let rv = sent["metadata"]["resourceVersion"].as_str().unwrap_or("");
    if !rv.is_empty() && rv != current["metadata"]["resourceVersion"] {
        return conflict(
            &target.resource.qualified(),
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        );
    }
    let mut object = current.clone();
    object["status"] = sent["status"].clone();
    if let Some(cause) = claim_status_error(&current, &object) {
        return invalid(target, name, &cause);
    }
    let (stored, change) = store.write(key, object, EventType::Modified);
    inner.broadcast(change);
    axum::Json(stored).into_response()
}

fn patch(
    inner: &Inner,
    target: &Target,
    name: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let patch = match parse_json(body) {
        Ok(o) => o,
        Err(response) => return response,
    };
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let strategic = content_type.starts_with("application/strategic-merge-patch+json");
    if !strategic && !content_type.starts_with("application/merge-patch+json") {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format ({content_type})"),
        );
    }
    let namespace = target.namespace.clone().unwrap_or_default();
    let mut store = inner.store.lock();
    let key = key(target, name);
    let Some(mut object) = store.objects.get(&key).cloned() else {
        return not_found(target, name);
    };
    if let Some(uid) = patch["metadata"]["uid"].as_str()
        && object["metadata"]["uid"] != uid
    {
        let cause = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            object["metadata"]["uid"].as_str().unwrap_or("")
        );
        return conflict(&target.resource.qualified(), name, &cause);
    }
    // A resourceVersion in the patch is a precondition, as kube-apiserver takes it.
    if let Some(version) = patch["metadata"]["resourceVersion"].as_str()
        && object["metadata"]["resourceVersion"] != version
    {
        return conflict(
            &target.resource.qualified(),
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        );
    }
    let current = object.clone();
    merge_patch(&mut object, &patch, strategic);
    if target.resource == RESOURCE_CLAIMS {
        // The status subresource changes only the status; the claim itself, all but it.
        if target.subresource.is_some() {
            let status = object["status"].clone();
            object = current.clone();
            object["status"] = status;
            if let Some(cause) = claim_status_error(&current, &object) {
                return invalid(target, name, &cause);
            }
        } else {
            object["status"] = current["status"].clone();
        }
    }
    prepare(&mut store, target.resource, &namespace, &mut object, false);
    let (stored, change) = store.write(key, object, EventType::Modified);
    inner.broadcast(change);
    axum::Json(stored).into_response()
}

fn delete(inner: &Inner, target: &Target, name: &str, body: &Bytes) -> Response {
    let options: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let mut store = inner.store.lock();
    let key = key(target, name);
    let Some(current) = store.objects.get(&key).cloned() else {
        return not_found(target, name);
    };
    if let Some(uid) = options["preconditions"]["uid"].as_str()
        && current["metadata"]["uid"] != uid
    {
        let cause = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            current["metadata"]["uid"].as_str().unwrap_or("")
        );
        return conflict(&target.resource.qualified(), name, &cause);
    }
    if let Some(version) = options["preconditions"]["resourceVersion"].as_str()
        && current["metadata"]["resourceVersion"] != version
    {
        let cause = format!(
            "Precondition failed: ResourceVersion in precondition: {version}, ResourceVersion in object meta: {}",
            current["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("")
        );
        return conflict(&target.resource.qualified(), name, &cause);
    }
    let graceful = inner.faults.lock().graceful_pod_deletion;
    if graceful && target.resource == resources::PODS && current["spec"]["nodeName"].is_string() {
        let mut terminating = current;
        if terminating["metadata"]["deletionTimestamp"].is_null() {
            terminating["metadata"]["deletionTimestamp"] = json!(now());
            terminating["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        }
        let (stored, change) = store.write(key, terminating, EventType::Modified);
        inner.broadcast(change);
        return axum::Json(stored).into_response();
    }
    let (stored, change) = store.write(key, current, EventType::Deleted);
    inner.broadcast(change);
    axum::Json(stored).into_response()
}

/// `BindingREST.Create` and `setPodHostAndAnnotations`, as kube-apiserver has them.
async fn bind(inner: &Arc<Inner>, target: &Target, name: &str, body: &Bytes) -> Response {
    let binding = match parse_json(body) {
        Ok(o) => o,
        Err(response) => return response,
    };
    if binding["metadata"]["name"].as_str() != Some(name) {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "name in URL does not match name in Binding object".into(),
        );
    }
    let Some(node) = binding["target"]["name"].as_str().filter(|n| !n.is_empty()) else {
        return status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            "target.name: Required value".into(),
        );
    };
    let pod_key = key(target, name);
    let full_name = format!("{}/{name}", pod_key.1);
    let (delay, stolen_by) = {
        let mut faults = inner.faults.lock();
        let delay = faults
            .slow
            .get(&full_name)
            .copied()
            .unwrap_or(faults.bind_delay);
        (delay, faults.steal.remove(&full_name))
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut store = inner.store.lock();
    if let Some(other_node) = stolen_by
        && let Some(mut pod) = store.objects.get(&pod_key).cloned()
    {
        pod["spec"]["nodeName"] = json!(other_node);
        let (_, change) = store.write(pod_key.clone(), pod, EventType::Modified);
        inner.broadcast(change);
        inner.binds.lock().push((full_name.clone(), other_node));
    }
    let Some(mut pod) = store.objects.get(&pod_key).cloned() else {
        return not_found(target, name);
    };
    let refuse = |cause: String| conflict("pods/binding", name, &cause);
    if let Some(uid) = binding["metadata"]["uid"]
        .as_str()
        .filter(|u| !u.is_empty())
    {
        let actual = pod["metadata"]["uid"].as_str().unwrap_or("").to_string();
        if uid != actual {
            return conflict(
                "pods",
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            );
        }
    }
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        return refuse(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    if let Some(assigned) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return refuse(format!(
            "pod {name} is already assigned to node {assigned:?}"
        ));
    }
    if pod["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|g| !g.is_empty())
    {
        return refuse(format!("pod {name} has non-empty .spec.schedulingGates"));
    }
    pod["spec"]["nodeName"] = json!(node);
    if let Some(annotations) = binding["metadata"]["annotations"].as_object() {
        for (k, v) in annotations {
            pod["metadata"]["annotations"][k] = v.clone();
        }
    }
    let scheduled = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}});
    merge_patch(&mut pod, &scheduled, true);
    let (_, change) = store.write(pod_key, pod, EventType::Modified);
    inner.broadcast(change);
    inner
        .binds
        .lock()
        .push((full_name.clone(), node.to_string()));
    let lost = {
        let mut faults = inner.faults.lock();
        let lost = faults
            .lose_bind_answer
            .iter()
            .position(|(p, _)| *p == full_name);
        lost.map(|i| faults.lose_bind_answer.remove(i).1)
    };
    match lost {
        Some(true) => {
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "Internal error occurred: context deadline exceeded".into(),
            );
        }
        Some(false) => {
            let broken = futures::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other("connection reset"))
            });
            return Response::new(Body::from_stream(broken));
        }
        None => {}
    }
    (
        StatusCode::CREATED,
        axum::Json(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})),
    )
        .into_response()
}

/// The watch event a change is for a watcher with this selector: field-selector
/// transitions turn an update into ADDED (enters) or DELETED (leaves), as the watch
/// cache reports them.
fn event_for(change: &Change, selector: &FieldSelector) -> Option<&'static str> {
    let now = change.kind != EventType::Deleted && selector.matches(&change.object);
    let before = match change.kind {
        EventType::Added => false,
        EventType::Deleted => selector.matches(&change.object),
        EventType::Modified => change
            .previous
            .as_ref()
            .is_some_and(|p| selector.matches(p)),
    };
    match (before, now) {
        (false, true) => Some("ADDED"),
        (true, true) => Some("MODIFIED"),
        (true, false) => Some("DELETED"),
        (false, false) => None,
    }
}

fn line(kind: &str, object: &Value) -> Bytes {
    untyped_line(kind, object, false)
}

/// A watch event's line; `untyped`, its object without kind or apiVersion.
fn untyped_line(kind: &str, object: &Value, untyped: bool) -> Bytes {
    let mut object = object.clone();
    if let (true, Value::Object(map)) = (untyped, &mut object) {
        map.remove("kind");
        map.remove("apiVersion");
    }
    let mut text = serde_json::to_string(&json!({"type": kind, "object": object})).unwrap();
    text.push('\n');
    Bytes::from(text)
}

fn watch(inner: Arc<Inner>, target: Target, query: HashMap<String, String>) -> Response {
    let selector = match selector(&query) {
        Ok(s) => s,
        Err(response) => return response,
    };
    let bookmarks = query
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(Duration::from_secs(1800), Duration::from_secs);
    let from = query.get("resourceVersion").cloned().unwrap_or_default();
    let (untyped, garbage) = {
        let faults = inner.faults.lock();
        (faults.untyped, faults.garbage_item.clone())
    };
    let line = move |kind: &str, object: &Value| untyped_line(kind, object, untyped);
    let (tx, mut rx) = mpsc::channel::<Bytes>(1024);
    let mut changes = inner.changes.subscribe();
    let mut drops = inner.drops.subscribe();
    // What the watch starts with, read under the same lock as the subscription point.
    let (initial, mut last_rv, expired) = {
        let store = inner.store.lock();
        let relevant = |c: &Change| {
            c.resource == target.resource
                && target.namespace.as_ref().is_none_or(|n| *n == c.namespace)
        };
        match from.parse::<u64>() {
            Ok(rv) if rv != 0 => {
                if rv + 1 < store.oldest {
                    let message = format!("too old resource version: {rv} ({})", store.oldest - 1);
                    (Vec::new(), store.rv, Some(message))
                } else {
                    let events = store
                        .log
                        .iter()
                        .filter(|c| c.rv > rv && relevant(c))
                        .filter_map(|c| event_for(c, &selector).map(|k| line(k, &c.object)))
                        .collect();
                    (events, store.rv, None)
                }
            }
            // "" or "0": the current state, then changes.
            _ => {
                let events = store
                    .list(target.resource, target.namespace.as_deref())
                    .into_iter()
                    .filter(|o| selector.matches(o))
                    .map(|o| line("ADDED", &o))
                    .collect();
                (events, store.rv, None)
            }
        }
    };
    let resource = target.resource;
    let bookmark_every = inner.bookmark_every;
    tokio::spawn(async move {
        if let Some(message) = expired {
            let error = json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": message, "reason": "Expired", "code": 410,
            });
            let _ = tx.send(line("ERROR", &error)).await;
            return;
        }
        let garbage = garbage.map(|item| line("ADDED", &item));
        for event in garbage.into_iter().chain(initial) {
            if tx.send(event).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(bookmark_every);
        ticker.tick().await;
        loop {
            // Biased, the drop first: a stream told to end before a change was made never
            // delivers that change (an unbiased select picks at random among the ready
            // branches, and a client would see changes made during its "blind spell").
            let out = tokio::select! {
                biased;
                _ = drops.recv() => return,
                _ = &mut deadline => return,
                _ = ticker.tick(), if bookmarks => {
                    let mark = json!({
                        "kind": resource.kind,
                        "apiVersion": resource.api_version(),
                        "metadata": {"resourceVersion": last_rv.to_string()},
                    });
                    line("BOOKMARK", &mark)
                }
                change = changes.recv() => match change {
                    Ok(change) => {
                        if change.rv <= last_rv {
                            continue;
                        }
                        last_rv = change.rv;
                        let relevant = change.resource == resource
                            && target.namespace.as_ref().is_none_or(|n| *n == change.namespace);
                        match relevant.then(|| event_for(&change, &selector)).flatten() {
                            Some(kind) => line(kind, &change.object),
                            None => continue,
                        }
                    }
                    // A watcher that falls behind is closed, as the watch cache does.
                    Err(_) => return,
                },
            };
            if tx.send(out).await.is_err() {
                return;
            }
        }
    });
    let stream = futures::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|item| item.map(Ok::<Bytes, Infallible>))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap()
}
