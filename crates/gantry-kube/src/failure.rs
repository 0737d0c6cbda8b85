//! What to tell a person when the API server cannot be used: one line naming the server
//! and what to check (the credentials, the permissions, the certificate, the address),
//! rather than a transport error's bare chain. At start, [`probe`] makes one request
//! with a deadline, retries what may pass (a refused connection, a silence, a 5xx) a
//! bounded number of times, and gives up at once on what will not (401, 403, a
//! certificate not trusted). Once running, [`Outage`] keeps the retries going and says
//! so at most once per interval.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, ListParams};
use kube::discovery::ApiResource;
use kube::{Api, Client};
use parking_lot::Mutex;

/// The start-up check's bounds.
#[derive(Debug, Clone)]
pub struct Startup {
    /// Requests made before giving up on a server that refuses connections or stays silent.
    pub attempts: u32,
    /// How long one request may take.
    pub timeout: Duration,
    /// The wait after the first failure; doubled after each.
    pub backoff: Duration,
}

impl Default for Startup {
    /// Five requests of at most 10 s, 1 + 2 + 4 + 8 s apart: a server that never
    /// answers ends `gantry run` in about a minute.
    fn default() -> Startup {
        Startup {
            attempts: 5,
            timeout: Duration::from_secs(10),
            backoff: Duration::from_secs(1),
        }
    }
}

/// Why a request failed, and whether trying again can help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub message: String,
    pub permanent: bool,
}

/// One line about `error` from `server`.
pub fn describe(server: &str, error: &kube::Error) -> Failure {
    match error {
        kube::Error::Api(status) => {
            return describe_status(server, status.code, &status.reason, &status.message);
        }
        // It was reached: what came back was not a Kubernetes API's JSON.
        kube::Error::FromUtf8(_) | kube::Error::SerdeError(_) => {
            let detail = match error {
                kube::Error::FromUtf8(_) => "not UTF-8 text".to_string(),
                _ => causes(error)
                    .last()
                    .map_or(String::new(), |c| c.to_string()),
            };
            return Failure {
                message: format!(
                    "{server} answered, but not as a Kubernetes API server does ({detail}): check that the address is the API server's"
                ),
                permanent: false,
            };
        }
        _ => {}
    }
    let causes = causes(error);
    for cause in &causes {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return describe_tls(server, tls);
        }
    }
    for cause in &causes {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            let (message, permanent) = match io.kind() {
                ConnectionRefused => (
                    format!(
                        "{server} refused the connection (nothing listens there): check the server address in the kubeconfig and that the API server runs"
                    ),
                    false,
                ),
                TimedOut => (
                    format!(
                        "{server} did not accept a connection in time: check the server address in the kubeconfig and the network to it"
                    ),
                    false,
                ),
                ConnectionReset | ConnectionAborted | UnexpectedEof | BrokenPipe => (
                    format!(
                        "{server} closed the connection ({io}): check that the address is the API server's (https, its port)"
                    ),
                    false,
                ),
                _ => continue,
            };
            return Failure { message, permanent };
        }
    }
    if let Some(dns) = causes.iter().position(|c| c.to_string() == "dns error") {
        let detail = causes
            .get(dns + 1)
            .map_or_else(String::new, |c| format!(" ({c})"));
        return Failure {
            message: format!(
                "cannot resolve the host of {server}{detail}: check the server address in the kubeconfig"
            ),
            permanent: false,
        };
    }
    let mut chain = String::new();
    for cause in &causes {
        // A stream's read error names no cause (kube's `ServiceError` has no source), only
        // its text: a connection closed under a watch is said as that.
        let text = cause.to_string();
        if let Some(closed) = CLOSED_MID_STREAM.iter().find(|t| text.contains(**t)) {
            return Failure {
                message: format!(
                    "{server} closed the connection while Gantry read from it ({closed}): the API server stopped or restarted, or something between dropped the connection"
                ),
                permanent: false,
            };
        }
    }
    for cause in &causes {
        let text = cause.to_string();
        if !chain.ends_with(&text) {
            if !chain.is_empty() {
                chain.push_str(": ");
            }
            chain.push_str(&text);
        }
    }
    Failure {
        message: format!("cannot reach {server}: {chain}"),
        permanent: false,
    }
}

/// What a read error's text says when the connection was closed under it (rustls, hyper).
const CLOSED_MID_STREAM: [&str; 3] = [
    "peer closed connection without sending TLS close_notify",
    "connection closed before message completed",
    "error reading a body from connection: connection reset",
];

/// `error` and its causes, outermost first. `io::Error::source` skips the error an
/// `io::Error` wraps (a TLS error inside one, inside another): those are looked into too.
fn causes<'a>(error: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut causes = Vec::new();
    let mut next = vec![error];
    while let Some(current) = next.pop() {
        if causes.len() == 32 {
            break;
        }
        causes.push(current);
        if let Some(source) = current.source() {
            next.push(source);
        }
        if let Some(inner) = current
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            next.push(inner);
        }
    }
    causes
}

fn describe_status(server: &str, code: u16, reason: &str, message: &str) -> Failure {
    let (message, permanent) = match code {
        401 => (
            format!(
                "{server} refused the credentials (401 Unauthorized): check the token or client certificate of the kubeconfig's user (in a pod: its ServiceAccount token)"
            ),
            true,
        ),
        403 => (
            format!(
                "{server} forbids it (403 Forbidden): {message}: grant it to Gantry's user (deploy/gantry.yaml lists the rules Gantry needs)"
            ),
            true,
        ),
        _ => (
            format!("{server} answered {code} {reason}: {message}"),
            !(code == 429 || code >= 500),
        ),
    };
    Failure { message, permanent }
}

fn describe_tls(server: &str, error: &rustls::Error) -> Failure {
    use rustls::CertificateError::*;
    let problem = match error {
        rustls::Error::InvalidCertificate(certificate) => match certificate {
            UnknownIssuer => "its certificate is signed by an unknown authority".to_string(),
            NotValidForName | NotValidForNameContext { .. } => {
                "its certificate is not valid for this host name".to_string()
            }
            Expired | ExpiredContext { .. } => "its certificate has expired".to_string(),
            NotValidYet | NotValidYetContext { .. } => {
                "its certificate is not valid yet (check the clock)".to_string()
            }
            other => format!("its certificate is not accepted ({other:?})"),
        },
        other => format!("the TLS handshake failed ({other})"),
    };
    Failure {
        message: format!(
            "{server}: {problem}: check certificate-authority-data (or certificate-authority) of the kubeconfig's cluster, and the server address"
        ),
        permanent: true,
    }
}

/// The one line for a 403 on Gantry's own Leases (`what`: the leader lease, the bind
/// fences), which no retry mends.
pub fn lease_forbidden(what: &str, namespace: &str, message: &str) -> String {
    format!(
        "Gantry may not {what} in namespace {namespace} (403 Forbidden: {message}): grant get, list, watch, create, update and delete on coordination.k8s.io leases there (deploy/gantry.yaml's Role does, in gantry-system), or pass --lease-namespace"
    )
}

/// Checks, before anything starts, that `server` answers, accepts the credentials and
/// lets Gantry list pods; retries what may pass, within `startup`'s bounds.
pub async fn probe(client: &Client, server: &str, startup: &Startup) -> Result<(), String> {
    let pods: Api<Pod> = Api::all(client.clone());
    let params = ListParams::default().limit(1);
    retrying(server, startup, || pods.list_metadata(&params))
        .await
        .map(drop)
        .map_err(|refused| refused.message)
}

/// Why [`retrying`] gave up: the line to print, and the API's status when the server
/// answered with one (a caller may take a 404 for "not served").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub message: String,
    pub status: Option<ApiStatus>,
}

/// A status the API server answered: its code and its own message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiStatus {
    pub code: u16,
    pub message: String,
}

/// Makes `request` until it succeeds, fails in a way no retry mends (401, 403, 404, a
/// certificate not trusted), or `startup`'s attempts are spent, each within its timeout;
/// waits `startup.backoff`, doubled each time, between attempts.
pub async fn retrying<T, F>(
    server: &str,
    startup: &Startup,
    mut request: impl FnMut() -> F,
) -> Result<T, Refused>
where
    F: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut backoff = startup.backoff;
    let attempts = startup.attempts.max(1);
    let mut attempt = 1;
    loop {
        let (failure, status) = match tokio::time::timeout(startup.timeout, request()).await {
            Ok(Ok(answer)) => return Ok(answer),
            Ok(Err(error)) => {
                let status = match &error {
                    kube::Error::Api(status) => Some(ApiStatus {
                        code: status.code,
                        message: status.message.clone(),
                    }),
                    _ => None,
                };
                (describe(server, &error), status)
            }
            Err(_) => (
                Failure {
                    message: format!(
                        "{server} did not answer within {} s: check that the address is the API server's and the network to it",
                        startup.timeout.as_secs_f64()
                    ),
                    permanent: false,
                },
                None,
            ),
        };
        if failure.permanent {
            return Err(Refused {
                message: failure.message,
                status,
            });
        }
        if attempt == attempts {
            return Err(Refused {
                message: format!("{}; gave up after {attempts} attempts", failure.message),
                status,
            });
        }
        tracing::warn!(
            "{}; retrying in {} s",
            failure.message,
            backoff.as_secs_f64()
        );
        tokio::time::sleep(backoff).await;
        backoff *= 2;
        attempt += 1;
    }
}

/// Checks, before anything starts and when a profile runs DynamicResources, that
/// `server` serves the resource.k8s.io/v1 kinds it reads and lets Gantry list them. A
/// server of a release before v1.34 (or with the API turned off) answers 404: its
/// watches would retry for ever and every pod of the profile stay pending in silence,
/// so the run ends at once with one line saying which release to decide as. Other
/// failures are left to the watches, which retry and report them.
pub async fn probe_dra(
    client: &Client,
    server: &str,
    release: gantry_api::Release,
    startup: &Startup,
) -> Result<(), String> {
    for kind in crate::watch::Kind::DRA {
        let resource = crate::dra::api_resource(kind);
        match refusal(client, server, &resource, startup).await {
            Some((404, _)) => {
                let (running, hint) = server_release(client, startup).await;
                return Err(format!(
                    "{server} does not serve {}/{} {}{running}, which the DynamicResources plugin reads when deciding as Kubernetes {release}: pass --emulated-version with the server's release{hint}, or leave DynamicResources out of the profile",
                    crate::dra::GROUP,
                    crate::dra::VERSION,
                    kind.name(),
                ));
            }
            Some((403, line)) => return Err(line),
            _ => {}
        }
    }
    Ok(())
}

/// The newest resource.k8s.io version in which the server serves DeviceTaintRules
/// (`None`: none of them; a 403 there reads as not served, and the watch is left out).
pub async fn served_taint_rules(
    client: &Client,
    server: &str,
    startup: &Startup,
) -> Option<&'static str> {
    for version in crate::dra::TAINT_RULE_VERSIONS {
        let resource = crate::dra::taint_rule_resource(version);
        if refusal(client, server, &resource, startup).await.is_none() {
            return Some(version);
        }
    }
    None
}

/// The same check for PodGroups, when GenericWorkload is on: a server that does not
/// serve `scheduling.k8s.io/v1alpha2` (the API group off, or another release) would
/// leave every gang's members pending in silence.
pub async fn probe_pod_groups(
    client: &Client,
    server: &str,
    release: gantry_api::Release,
    startup: &Startup,
) -> Result<(), String> {
    let resource = crate::pod_groups::api_resource();
    match refusal(client, server, &resource, startup).await {
        Some((404, _)) => {
            let (running, _) = server_release(client, startup).await;
            Err(format!(
                "{server} does not serve {}/{} podgroups{running}, which GenericWorkload reads when deciding as Kubernetes {release}: start kube-apiserver with --runtime-config={}/{}=true --feature-gates=GenericWorkload=true, or turn the gate off",
                crate::pod_groups::GROUP,
                crate::pod_groups::VERSION,
                crate::pod_groups::GROUP,
                crate::pod_groups::VERSION,
            ))
        }
        Some((403, line)) => Err(line),
        _ => Ok(()),
    }
}

/// The same check for scheduler-plugins' PodGroups, when a profile enables Coscheduling:
/// without the CRD every gang's members would fail with `PodGroup not found`.
pub async fn probe_coscheduling_groups(
    client: &Client,
    server: &str,
    startup: &Startup,
) -> Result<(), String> {
    let resource = crate::coscheduling_groups::api_resource();
    match refusal(client, server, &resource, startup).await {
        Some((404, _)) => Err(format!(
            "{server} does not serve {}/{} podgroups, which Coscheduling reads: install scheduler-plugins' PodGroup CRD (manifests/crds/scheduling.x-k8s.io_podgroups.yaml), or leave Coscheduling out of the profile",
            crate::coscheduling_groups::GROUP,
            crate::coscheduling_groups::VERSION,
        )),
        Some((403, line)) => Err(line),
        _ => Ok(()),
    }
}

/// How the server refuses to list `resource` (one item), if it does: the code, and the
/// line a 403 is reported with.
async fn refusal(
    client: &Client,
    server: &str,
    resource: &ApiResource,
    startup: &Startup,
) -> Option<(u16, String)> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let params = ListParams::default().limit(1);
    match tokio::time::timeout(startup.timeout, api.list_metadata(&params)).await {
        Ok(Err(kube::Error::Api(status))) => {
            let line = describe_status(server, status.code, &status.reason, &status.message);
            Some((status.code, line.message))
        }
        _ => None,
    }
}

/// The server's release, as ` (it runs Kubernetes v1.x.y)`, and the flag that decides as
/// it, as ` (--emulated-version 1.x)`; empty where it does not say.
async fn server_release(client: &Client, startup: &Startup) -> (String, String) {
    let info = tokio::time::timeout(startup.timeout, client.apiserver_version())
        .await
        .ok()
        .and_then(Result::ok);
    let running = info.as_ref().map_or_else(String::new, |info| {
        format!(" (it runs Kubernetes {})", info.git_version)
    });
    // `minor` may carry a suffix (`28+` on some providers).
    let hint = info
        .map(|info| {
            info.minor
                .trim_end_matches(|c: char| !c.is_ascii_digit())
                .to_owned()
        })
        .filter(|minor| !minor.is_empty())
        .map_or_else(String::new, |minor| {
            format!(" (--emulated-version 1.{minor})")
        });
    (running, hint)
}

/// Binds that fail again and again for one pod (a PreBind write the server refuses every
/// time, say): each failure is logged at INFO as it happens, and the pod's 2nd, 4th, 8th,
/// ... failure also at WARN with its reason, so that a pod that never binds is said at
/// the default level without a line per retry.
#[derive(Default)]
pub struct RepeatedBindFailures {
    counts: HashMap<Arc<str>, u32>,
}

impl RepeatedBindFailures {
    /// Counts a failed bind of the pod; returns how many it has had when that is worth a
    /// warning.
    pub fn failed(&mut self, uid: &Arc<str>) -> Option<u32> {
        let count = self.counts.entry(uid.clone()).or_default();
        *count += 1;
        (*count >= 2 && count.is_power_of_two()).then_some(*count)
    }

    /// The pod was bound, or is gone: its count starts again.
    pub fn forget(&mut self, uid: &str) {
        self.counts.remove(uid);
    }
}

/// A running instance's failures to use the API server (watches and writes all retry
/// with backoff): reported at most once per `every`, with how many were not.
pub struct Outage {
    server: String,
    every: Duration,
    last: Mutex<Option<Instant>>,
    unreported: AtomicU64,
}

impl Outage {
    pub fn new(server: &str, every: Duration) -> Outage {
        Outage {
            server: server.into(),
            every,
            last: Mutex::new(None),
            unreported: AtomicU64::new(0),
        }
    }

    /// Records a failure of `what` (`watch pods`, `bind`); logs it if nothing was
    /// logged for `every`. Returns whether it logged.
    pub fn failed(&self, what: &str, error: &kube::Error) -> bool {
        {
            let mut last = self.last.lock();
            if last.is_some_and(|at| at.elapsed() < self.every) {
                self.unreported.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            *last = Some(Instant::now());
        }
        let others = self.unreported.swap(0, Ordering::Relaxed);
        let failure = describe(&self.server, error);
        tracing::warn!(
            "{what}: {}; retrying with backoff ({others} other failures since the last report, reported at most every {} s)",
            failure.message,
            self.every.as_secs()
        );
        true
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bind_failing_again_and_again_is_warned_at_2_4_8_and_after_forgetting_anew() {
        let mut failures = RepeatedBindFailures::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        let warned: Vec<Option<u32>> = (0..9).map(|_| failures.failed(&a)).collect();
        assert_eq!(
            warned,
            [
                None,
                Some(2),
                None,
                Some(4),
                None,
                None,
                None,
                Some(8),
                None
            ]
        );
        assert_eq!(failures.failed(&b), None, "counted per pod");
        failures.forget("a");
        assert_eq!(failures.failed(&a), None);
        assert_eq!(failures.failed(&a), Some(2));
    }

    use super::*;

    fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn credentials_and_permissions_are_named_and_not_retried() {
        let server = "https://10.0.0.1:6443";
        let unauthorized = describe(server, &api_error(401, "Unauthorized", "Unauthorized"));
        assert!(unauthorized.permanent);
        assert!(
            unauthorized
                .message
                .starts_with("https://10.0.0.1:6443 refused the credentials (401 Unauthorized)"),
            "{}",
            unauthorized.message
        );
        let forbidden = describe(
            server,
            &api_error(
                403,
                "Forbidden",
                "pods is forbidden: User \"x\" cannot list",
            ),
        );
        assert!(forbidden.permanent);
        assert!(
            forbidden
                .message
                .contains("403 Forbidden): pods is forbidden")
        );
        let busy = describe(server, &api_error(503, "ServiceUnavailable", "try later"));
        assert!(!busy.permanent, "a 503 may pass");
    }

    /// A server that answers, but not with Kubernetes JSON (an HTML page, binary data), was
    /// reached: it is not said as unreachable, nor as kube's `UTF-8 Error`.
    #[test]
    fn an_answer_that_is_not_kubernetes_json_says_it_was_reached() {
        let server = "https://10.0.0.1:6443";
        let html = serde_json::from_str::<serde_json::Value>("<html>").unwrap_err();
        let failure = describe(server, &kube::Error::SerdeError(html));
        assert!(
            failure.message.starts_with(
                "https://10.0.0.1:6443 answered, but not as a Kubernetes API server does (expected value at line 1 column 1)"
            ),
            "{}",
            failure.message
        );
        let binary = String::from_utf8(vec![0xff, 0xfe]).unwrap_err();
        let failure = describe(server, &kube::Error::FromUtf8(binary));
        assert!(
            failure
                .message
                .contains("answered, but not as a Kubernetes API server does (not UTF-8 text)"),
            "{}",
            failure.message
        );
    }

    /// A watch whose API server was killed, as kube reports it (measured against a real
    /// API server: the text, its causes unreachable behind kube's `ServiceError`), over
    /// TLS, over plain HTTP (hyper's words), and reset.
    #[test]
    fn a_watch_cut_by_a_stopping_server_is_one_short_line() {
        #[derive(Debug)]
        struct BodyError(&'static str);
        impl std::fmt::Display for BodyError {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "error reading a body from connection: {}", self.0)
            }
        }
        impl StdError for BodyError {}
        for (text, said) in [
            (
                "peer closed connection without sending TLS close_notify: https://docs.rs/rustls/latest/rustls/manual/_03_howto/index.html#unexpected-eof",
                "peer closed connection without sending TLS close_notify",
            ),
            (
                "connection closed before message completed",
                "connection closed before message completed",
            ),
            (
                "connection reset",
                "error reading a body from connection: connection reset",
            ),
        ] {
            let error = kube::Error::ReadEvents(std::io::Error::other(kube::Error::Service(
                Box::new(BodyError(text)),
            )));
            let failure = describe("https://127.0.0.1:6443", &error);
            assert_eq!(
                failure.message,
                format!(
                    "https://127.0.0.1:6443 closed the connection while Gantry read from it ({said}): the API server stopped or restarted, or something between dropped the connection"
                )
            );
            assert!(!failure.permanent);
        }
    }

    #[test]
    fn an_outage_is_reported_at_most_once_per_interval() {
        let outage = Outage::new("https://10.0.0.1:6443", Duration::from_millis(200));
        let error = api_error(500, "InternalError", "boom");
        let logged = (0..100)
            .filter(|_| outage.failed("watch pods", &error))
            .count();
        assert_eq!(logged, 1, "a burst of failures makes one line");
        std::thread::sleep(Duration::from_millis(250));
        assert!(
            outage.failed("watch pods", &error),
            "the next interval reports again"
        );
        assert!(!outage.failed("watch pods", &error));
    }
}
