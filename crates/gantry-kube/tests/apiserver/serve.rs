//! How the test API server serves: over plain HTTP or over TLS (with kube-apiserver's
//! ALPN offer, `h2` and `http/1.1`), HTTP/1.1 or HTTP/2 as the client negotiates,
//! counting the connections it accepts and how many are open at once. The TLS side uses
//! the certificates beside this file (a test CA, a server certificate for 127.0.0.1 and
//! localhost signed by it, and another CA that did not sign it).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub const CA_PEM: &str = include_str!("tls/ca.pem");
pub const OTHER_CA_PEM: &str = include_str!("tls/other-ca.pem");
const SERVER_PEM: &str = include_str!("tls/server.pem");
const SERVER_KEY: &str = include_str!("tls/server.key");

/// Connections accepted so far, open now, and the most open at once.
#[derive(Default)]
pub struct Connections {
    pub accepted: AtomicU64,
    pub open: AtomicU64,
    pub peak: AtomicU64,
}

impl Connections {
    fn opened(&self) {
        self.accepted.fetch_add(1, Ordering::SeqCst);
        let open = self.open.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(open, Ordering::SeqCst);
    }

    fn closed(&self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The DER of a PEM certificate (for a kube `Config`'s `root_cert`).
pub fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("a test certificate")
        .to_vec()
}

fn acceptor() -> TlsAcceptor {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = vec![CertificateDer::from_pem_slice(SERVER_PEM.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY.as_bytes()).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    TlsAcceptor::from(Arc::new(config))
}

/// Serves `app` on `listener` until the test ends, over TLS when `tls`.
pub fn spawn(listener: TcpListener, app: Router, tls: bool, connections: Arc<Connections>) {
    let acceptor = tls.then(acceptor);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            connections.opened();
            let app = app.clone();
            let acceptor = acceptor.clone();
            let connections = connections.clone();
            tokio::spawn(async move {
                let service = TowerToHyperService::new(app);
                let builder = auto::Builder::new(TokioExecutor::new());
                match acceptor {
                    Some(acceptor) => {
                        // A client that refuses the certificate ends the handshake.
                        if let Ok(stream) = acceptor.accept(stream).await {
                            let _ = builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                    None => {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                }
                connections.closed();
            });
        }
    });
}
