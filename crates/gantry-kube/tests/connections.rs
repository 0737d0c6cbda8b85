//! How `gantry run` uses its connection to the API server: during a backlog, over TLS as
//! against kube-apiserver, every watch and every write share one HTTP/2 connection (as
//! client-go's do), each request names Gantry in `User-Agent`, and a kubeconfig that
//! skips certificate verification is warned about once per process.

mod apiserver;
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use apiserver::TestApiServer;
use apiserver::resources::{EVENTS, NODES, PODS};
use common::*;
use gantry_kube::Shard;
use tracing_subscriber::layer::SubscriberExt;

const PODS_IN_BACKLOG: usize = 300;

/// Binds a backlog through `api`: the most connections open at once.
async fn bind_backlog(api: &TestApiServer) -> u64 {
    api.set_bind_delay(Duration::from_millis(20));
    for i in 0..10 {
        api.put(NODES, node(&format!("node-{i}"), 64_000, "a"));
    }
    for i in 0..PODS_IN_BACKLOG {
        api.put(PODS, pod(&format!("web-{i:03}"), 100));
    }
    let instance = start(api, "solo", Shard::WHOLE, None).await;
    wait_for("the backlog bound", Duration::from_secs(60), || {
        api.binds().len() == PODS_IN_BACKLOG
    })
    .await;
    // Its events and conditions too.
    wait_for("the Scheduled events", Duration::from_secs(60), || {
        api.list(EVENTS).len() == PODS_IN_BACKLOG
    })
    .await;
    instance.stop().await.unwrap();
    let peak = api.peak_connections();
    eprintln!(
        "{}: {} connections accepted, at most {peak} open at once",
        api.url(),
        api.connections_accepted()
    );
    peak
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_is_bound_over_one_connection_naming_gantry() {
    let api = TestApiServer::start_tls().await;
    let peak = bind_backlog(&api).await;
    assert!(
        peak <= 2,
        "{peak} connections open at once for {PODS_IN_BACKLOG} binds and every watch"
    );
    assert_eq!(api.user_agents(), vec![gantry_kube::USER_AGENT.to_string()]);
    assert!(gantry_kube::USER_AGENT.starts_with("gantry/"));
}

/// Counts the warnings whose message mentions certificate verification.
struct CountWarnings(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountWarnings {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        if *event.metadata().level() != tracing::Level::WARN {
            return;
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        let text = message.0.to_lowercase();
        if text.contains("cert") && (text.contains("bypass") || text.contains("verif")) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Several connections (here: several clients, as a restarted watch's reconnections
/// make) to a server whose certificate is not verified: one warning for the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_certificate_verification_is_warned_about_once() {
    let warnings = Arc::new(AtomicUsize::new(0));
    let subscriber = tracing_subscriber::registry().with(CountWarnings(warnings.clone()));
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let api = TestApiServer::start_tls().await;
    for _ in 0..3 {
        let mut config = api.config();
        config.root_cert = None;
        config.accept_invalid_certs = true;
        let client = gantry_kube::build_client(config).unwrap();
        let version = client.apiserver_version().await;
        // The test server has no /version: a 404 still means the handshake passed.
        assert!(
            matches!(&version, Err(kube::Error::Api(s)) if s.code == 404),
            "{version:?}"
        );
    }
    assert_eq!(api.connections_accepted(), 3);
    assert_eq!(warnings.load(Ordering::SeqCst), 1);
}

/// Pod condition writes (and the other writes besides binds and events) take one of
/// `MAX_WRITES_IN_FLIGHT` slots: with every `PodScheduled=False` patch held 100 ms, the
/// 200 unschedulable pods' patches never have more than 16 in flight at once, and do have
/// several.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn condition_writes_in_flight_are_bounded() {
    let api = TestApiServer::start().await;
    api.put(NODES, node("node-0", 1000, "a"));
    let names: Vec<String> = (0..200).map(|i| format!("big-{i:03}")).collect();
    for name in &names {
        api.put(PODS, pod(name, 4000));
    }
    api.slow_writes("/status", Duration::from_millis(100), 10_000);
    let in_flight = api.gauge_writes("/status");
    let instance = start(&api, "solo", Shard::WHOLE, None).await;
    wait_for(
        "every pod's PodScheduled condition",
        Duration::from_secs(60),
        || {
            names
                .iter()
                .all(|name| condition(&api, name, "PodScheduled").is_some())
        },
    )
    .await;
    instance.stop().await.unwrap();
    let peak = in_flight.peak.load(Ordering::SeqCst);
    assert!(
        (2..=gantry_kube::MAX_WRITES_IN_FLIGHT as u64).contains(&peak),
        "at most {peak} condition writes in flight at once"
    );
}
