//! The Kubernetes client `gantry run` talks through. kube's own builder speaks HTTP/1.1
//! only, so every request in flight holds a connection of its own: during a backlog an
//! instance held hundreds (kube-scheduler, through client-go, holds one or two). This
//! client offers HTTP/2 by ALPN, so that watches and writes share one connection, pinged
//! when idle as client-go pings it (30 s, then 15 s to answer); names itself
//! `gantry/<version>` in `User-Agent` (the API server's default field manager); logs
//! nothing per request (its callers say what failed, once); and when the kubeconfig skips
//! certificate verification, says so once per process, not once per connection.
//!
//! The rest is kube's stack, as `kube::Client::try_from` builds it: the server's base
//! URI, retries of 429/503/504, the credentials, the extra headers.

use std::sync::{Arc, Once};
use std::time::Duration;

use http::HeaderValue;
use http::header::USER_AGENT as USER_AGENT_HEADER;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use kube::client::retry::RetryPolicy;
use kube::{Client, Config};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

/// What Gantry calls itself in `User-Agent` (kube-apiserver takes the part before `/` as
/// the field manager of what it writes).
pub const USER_AGENT: &str = concat!("gantry/", env!("CARGO_PKG_VERSION"));

/// client-go's HTTP/2 health check: a ping after this long without reads...
const PING_AFTER: Duration = Duration::from_secs(30);
/// ...answered within this, or the connection is closed (and requests fail over to a new one).
const PING_TIMEOUT: Duration = Duration::from_secs(15);

static SKIPPED_VERIFICATION: Once = Once::new();

/// A client for `config`'s server.
pub fn build(mut config: Config) -> Result<Client, kube::Error> {
    if let Some(proxy) = &config.proxy_url {
        return Err(kube::Error::ProxyProtocolUnsupported {
            proxy_url: Box::new(proxy.clone()),
        });
    }
    config
        .headers
        .push((USER_AGENT_HEADER, HeaderValue::from_static(USER_AGENT)));
    let mut tls = config.rustls_client_config()?;
    if config.accept_invalid_certs {
        let server = config.cluster_url.to_string();
        SKIPPED_VERIFICATION.call_once(|| {
            tracing::warn!(
                %server,
                "the kubeconfig skips verifying the API server's certificate (insecure-skip-tls-verify): anyone on the path can impersonate it"
            );
        });
        tls.dangerous()
            .set_certificate_verifier(Arc::new(SkipVerification::new()));
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(config.connect_timeout);
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = ServerName::try_from(name.clone()).map_err(|e| {
            kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
        })?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = https.enable_http1().enable_http2().wrap_connector(http);
    let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(PING_AFTER)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .build(https);
    let retry = config
        .default_retry
        .then(|| RetryLayer::new(RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(hyper);
    Ok(Client::new(service, config.default_namespace))
}

/// `insecure-skip-tls-verify`, as Go's `InsecureSkipVerify`: any certificate is taken,
/// but the handshake's signatures are still checked against it. Silent: [`build`] warns
/// once.
#[derive(Debug)]
struct SkipVerification {
    algorithms: WebPkiSupportedAlgorithms,
}

impl SkipVerification {
    fn new() -> SkipVerification {
        let provider: CryptoProvider = rustls::crypto::ring::default_provider();
        SkipVerification {
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

impl ServerCertVerifier for SkipVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
