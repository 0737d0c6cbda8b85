//! `gantry run` against a server it cannot use: refused credentials, missing permissions,
//! an untrusted certificate, an unknown host, nothing listening, a server that never
//! answers, and Leases it may not write. Each ends the run with one line naming the
//! server and what to check, after a bounded number of attempts, rather than retrying
//! in silence.

use crate::{apiserver, common};

use std::time::{Duration, Instant};

use apiserver::TestApiServer;
use apiserver::resources::{NODES, PODS};
use apiserver::serve::{OTHER_CA_PEM, der};
use common::*;
use gantry_kube::{LeaderElection, RunError, RunOptions, Shard, Startup};

/// Small bounds, so that a server that never answers ends the test quickly.
fn quick() -> Startup {
    Startup {
        attempts: 3,
        timeout: Duration::from_millis(300),
        backoff: Duration::from_millis(50),
    }
}

async fn failure_of(options: RunOptions) -> String {
    match run_to_end(options, Duration::from_secs(20)).await {
        Err(RunError::Server(message)) => message,
        other => panic!("expected the server to be refused, got {other:?}"),
    }
}

fn assert_one_line(message: &str, parts: &[&str]) {
    assert!(!message.contains('\n'), "one line: {message}");
    for part in parts {
        assert!(message.contains(part), "{message:?} should say {part:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_end_the_run_at_once() {
    let api = TestApiServer::start().await;
    api.refuse_credentials(true);
    let started = Instant::now();
    let message = failure_of(options(api.client(), &api.url())).await;
    assert_one_line(
        &message,
        &[
            &api.url(),
            "refused the credentials (401 Unauthorized)",
            "token",
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no retries of a 401"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_permission_is_named() {
    let api = TestApiServer::start().await;
    api.forbid("/api/v1/pods");
    let message = failure_of(options(api.client(), &api.url())).await;
    assert_one_line(
        &message,
        &[&api.url(), "403 Forbidden", "cannot get resource \"pods\""],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_named_and_not_retried() {
    let api = TestApiServer::start_tls().await;
    let mut config = api.config();
    config.root_cert = Some(vec![der(OTHER_CA_PEM)]);
    let client = gantry_kube::build_client(config).unwrap();
    let message = failure_of(options(client, &api.url())).await;
    assert_one_line(
        &message,
        &[
            &api.url(),
            "signed by an unknown authority",
            "certificate-authority-data",
        ],
    );
    assert_eq!(
        api.connections_accepted(),
        1,
        "a certificate is not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_ends_after_bounded_retries() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let server = format!("http://127.0.0.1:{port}");
    let client = gantry_kube::build_client(kube::Config::new(server.parse().unwrap())).unwrap();
    let message = failure_of(RunOptions {
        startup: quick(),
        ..options(client, &server)
    })
    .await;
    assert_one_line(
        &message,
        &[
            &server,
            "refused the connection",
            "gave up after 3 attempts",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_ends_the_run() {
    // Accepts connections and reads nothing, answers nothing.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let client = gantry_kube::build_client(kube::Config::new(server.parse().unwrap())).unwrap();
    let started = Instant::now();
    let message = failure_of(RunOptions {
        startup: quick(),
        ..options(client, &server)
    })
    .await;
    assert_one_line(
        &message,
        &[
            &server,
            "did not answer within 0.3 s",
            "gave up after 3 attempts",
        ],
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_host_is_named() {
    let server = "https://gantry-test.invalid:6443";
    let client = gantry_kube::build_client(kube::Config::new(server.parse().unwrap())).unwrap();
    let message = failure_of(RunOptions {
        startup: quick(),
        ..options(client, server)
    })
    .await;
    assert_one_line(&message, &["cannot resolve the host of", server]);
}

/// A leader lease in a namespace Gantry may not write: the run ends with one line naming
/// the namespace, instead of a replica that is ready and never schedules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_leader_lease_ends_the_run() {
    let api = TestApiServer::start().await;
    api.forbid("/namespaces/kube-system/leases");
    let message = failure_of(RunOptions {
        leader_election: Some(LeaderElection::new("kube-system", "gantry")),
        ..options(api.client(), &api.url())
    })
    .await;
    assert_one_line(
        &message,
        &[
            "may not write the leader lease gantry in namespace kube-system",
            "403 Forbidden",
            "--lease-namespace",
        ],
    );
}

/// Bind fences in a namespace Gantry may not write: the 403 is not a conflict (nothing is
/// counted as one), the pod is not bound, and the run ends with one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_bind_fence_is_not_a_conflict_and_ends_the_run() {
    let api = TestApiServer::start().await;
    // Listed and watched, not written.
    api.forbid("POST /namespaces/gantry-system/leases");
    api.forbid("PUT /namespaces/gantry-system/leases");
    api.put(NODES, node("node-0", 4000, "a"));
    // Shard 0 of 2 uses the fences; this pod's UID is its.
    let shard = Shard::parse("0/2").unwrap();
    let divide = gantry_kube::Divide::Pods;
    let uid = (0..)
        .map(|i| format!("uid-{i}"))
        .find(|uid| shard.owns(uid))
        .unwrap();
    let mut web = pod("web-0", 100);
    web["metadata"]["uid"] = serde_json::json!(uid);
    api.put(PODS, web);
    let instance = launch(RunOptions {
        shard,
        divide,
        ..options(api.client(), &api.url())
    })
    .await;
    let kube = instance.running.shared.kube.clone();
    let end = tokio::time::timeout(Duration::from_secs(20), instance.handle)
        .await
        .expect("the run ends by itself")
        .expect("the run task does not panic");
    let Err(RunError::Server(message)) = end else {
        panic!("expected the fence's 403 to end the run, got {end:?}");
    };
    assert_one_line(
        &message,
        &[
            "may not write the bind fences in namespace gantry-system",
            "403 Forbidden",
        ],
    );
    assert_eq!(kube.conflicts(), 0, "a 403 is not a conflict");
    assert!(node_of(&api, "web-0").is_none());
}

/// A server of a release without resource.k8s.io/v1 (here v1.28), asked by a profile that
/// runs DynamicResources (on by default): the run ends at once, saying which release to
/// decide as, rather than waiting in silence for a watch that can never start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_the_dra_api_ends_the_run_naming_its_release() {
    let api = TestApiServer::start().await;
    api.unserve("/apis/resource.k8s.io/v1");
    api.set_version("v1.28.0");
    let started = Instant::now();
    let message = failure_of(options(api.client(), &api.url())).await;
    assert_one_line(
        &message,
        &[
            &api.url(),
            "does not serve resource.k8s.io/v1 deviceclasses",
            "it runs Kubernetes v1.28.0",
            "deciding as Kubernetes v1.37",
            "--emulated-version 1.28",
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no retries of a 404"
    );
}

/// Missing permissions on the DRA kinds end the run at once too, naming the resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_dra_kind_ends_the_run() {
    let api = TestApiServer::start().await;
    api.forbid("/apis/resource.k8s.io/v1/resourceclaims");
    let message = failure_of(options(api.client(), &api.url())).await;
    assert_one_line(&message, &[&api.url(), "403 Forbidden", "resourceclaims"]);
}

/// Bind fences Gantry may not even list: the run ends at start, with one line, even when
/// shards divide the nodes and no pod yet needs a fence (it would fail at the first pod
/// with a constraint across nodes, much later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_that_may_not_be_listed_end_the_run_at_start() {
    let api = TestApiServer::start().await;
    api.forbid("/namespaces/gantry-system/leases");
    let message = failure_of(RunOptions {
        shard: Shard::parse("1/2").unwrap(),
        divide: gantry_kube::Divide::Nodes,
        ..options(api.client(), &api.url())
    })
    .await;
    assert_one_line(
        &message,
        &[
            "may not list the bind fences in namespace gantry-system",
            "403 Forbidden",
        ],
    );
}

/// A Coscheduling profile: the PodGroup CRD must be served, and one instance schedules
/// (its members wait at Permit in that instance's memory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coscheduling_needs_its_crd_and_one_instance() {
    let api = TestApiServer::start().await;
    let release = gantry_api::Release::parse(Some("1.35"), None).unwrap();
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: {SCHEDULER}\n  plugins:\n    multiPoint: {{enabled: [{{name: Coscheduling}}]}}\n    queueSort: {{enabled: [{{name: Coscheduling}}], disabled: [{{name: \"*\"}}]}}\n"
    );
    let config = || {
        gantry_framework::config::SchedulerConfig::parse_for(&text, "config.yaml", release).unwrap()
    };
    let shared = failure_of(RunOptions {
        config: config(),
        shard: Shard { index: 0, count: 2 },
        startup: quick(),
        ..options(api.client(), &api.url())
    })
    .await;
    assert_one_line(&shared, &["Coscheduling is scheduled by one instance"]);
    api.unserve("/apis/scheduling.x-k8s.io/v1alpha1");
    let missing = failure_of(RunOptions {
        config: config(),
        startup: quick(),
        ..options(api.client(), &api.url())
    })
    .await;
    assert_one_line(
        &missing,
        &[
            "does not serve scheduling.x-k8s.io/v1alpha1 podgroups",
            "install scheduler-plugins' PodGroup CRD",
        ],
    );
}
