//! `/metrics` (Prometheus text format 0.0.4: the scheduler's metrics under kube-scheduler's names, then
//! the backend's counters), `/healthz` (the process serves), `/readyz` (every watch has
//! listed its resource once, so decisions rest on a complete cache).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::Shared;

async fn metrics(State(shared): State<Arc<Shared>>) -> ([(&'static str, &'static str); 1], String) {
    // Prometheus text 0.0.4, as declared (no OpenMetrics `# EOF`).
    let mut text = shared.scheduler_metrics();
    text.push_str(&shared.kube.render());
    (
        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
        text,
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(shared): State<Arc<Shared>>) -> (StatusCode, &'static str) {
    if shared.is_synced() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches are not synced yet")
    }
}

/// Binds the address (so a port in use is an error at start) and serves until `stop`.
pub async fn serve(
    addr: SocketAddr,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(shared);
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        if let Err(error) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(%error, "metrics server failed");
        }
    });
    Ok((bound, server))
}
