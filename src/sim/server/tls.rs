//! TLS of the simulated PD and TiKV, as a TLS-enabled TiDB deployment runs them: every
//! connection must present a client certificate signed by the cluster CA (mutual TLS), the
//! ALPN protocol is `h2`, and each side has its own `cert-allowed-cn`:
//!
//! * PD (etcd's `AllowedCN` on its listener) checks the common name inside the handshake: a
//!   client whose name is not listed sees the handshake fail with an alert.
//! * TiKV checks it on every call (its gRPC server checker): the call fails with
//!   `UNAUTHENTICATED` "Common name check fail, reason: …, cert_allowed_cn: …".

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls;
use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::pki_types::{CertificateDer, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Status};

use crate::security::{self, TlsSetupError};

/// How long a client may take over its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Certificates of the simulated servers (one pair serves PD and every store, as deployments
/// often do) and each side's `cert-allowed-cn`.
#[derive(Debug, Clone, Default)]
pub struct SimTls {
    pub ca_pem: Vec<u8>,
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    /// PD's `cert-allowed-cn` (empty: any name signed by the CA).
    pub pd_allowed_cn: Vec<String>,
    /// TiKV's `cert-allowed-cn`.
    pub tikv_allowed_cn: Vec<String>,
}

/// A client-certificate verifier that also requires a listed common name, inside the handshake.
#[derive(Debug)]
struct AllowedCn {
    inner: Arc<dyn ClientCertVerifier>,
    allowed: Vec<String>,
}

impl ClientCertVerifier for AllowedCn {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let ok = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        if security::cn_allowed(&self.allowed, security::common_name(end_entity).as_deref()) {
            Ok(ok)
        } else {
            // etcd answers a name it does not allow with a bad_certificate alert.
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

impl SimTls {
    /// Reads the server pair and the CA from PEM files.
    pub fn from_files(
        files: &security::ClusterTlsFiles,
        pd_allowed_cn: Vec<String>,
        tikv_allowed_cn: Vec<String>,
    ) -> Result<SimTls, TlsSetupError> {
        let read = |what: &str, p: &std::path::Path| {
            std::fs::read(p).map_err(|e| TlsSetupError {
                what: format!("{what} {}", p.display()),
                message: e.to_string(),
            })
        };
        Ok(SimTls {
            ca_pem: read("CA file", &files.ca)?,
            cert_pem: read("certificate file", &files.cert)?,
            key_pem: read("key file", &files.key)?,
            pd_allowed_cn,
            tikv_allowed_cn,
        })
    }

    /// The acceptor of a PD member (common names checked in the handshake) or a store.
    pub fn acceptor(&self, pd: bool) -> Result<TlsAcceptor, TlsSetupError> {
        let roots = Arc::new(security::root_store("CA", &self.ca_pem)?);
        let chain = security::pem_certificates("certificate", &self.cert_pem)?;
        let key = security::pem_key("key", &self.key_pem)?;
        let err = |what: &str, e: &dyn std::fmt::Display| TlsSetupError {
            what: what.into(),
            message: e.to_string(),
        };
        let webpki = WebPkiClientVerifier::builder_with_provider(roots, security::provider())
            .build()
            .map_err(|e| err("client verifier", &e))?;
        let verifier: Arc<dyn ClientCertVerifier> = if pd && !self.pd_allowed_cn.is_empty() {
            Arc::new(AllowedCn {
                inner: webpki,
                allowed: self.pd_allowed_cn.clone(),
            })
        } else {
            webpki
        };
        let mut config = rustls::ServerConfig::builder_with_provider(security::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| err("TLS versions", &e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| err("certificate and key", &e))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// The connections of `listener` after their TLS handshake, and the accept loop that feeds
/// them until `cancel` fires (run it beside the server: the listener closes when it ends).
/// Handshakes run concurrently; a failed one is logged and dropped.
pub fn incoming(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    cancel: CancellationToken,
) -> (
    ReceiverStream<std::io::Result<TlsStream<TcpStream>>>,
    impl std::future::Future<Output = ()> + Send,
) {
    let (tx, rx) = mpsc::channel(64);
    let accept = async move {
        loop {
            let (tcp, peer) = tokio::select! {
                _ = cancel.cancelled() => return,
                r = listener.accept() => match r {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::debug!(error = %e, "simulated server accept failed");
                        continue;
                    }
                },
            };
            let _ = tcp.set_nodelay(true);
            let (acceptor, tx, cancel) = (acceptor.clone(), tx.clone(), cancel.clone());
            tokio::spawn(async move {
                let hs = tokio::select! {
                    _ = cancel.cancelled() => return,
                    r = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)) => r,
                };
                match hs {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => tracing::info!(%peer, error = %e, "TLS handshake refused"),
                    Err(_) => tracing::info!(%peer, "TLS handshake timed out"),
                }
            });
        }
    };
    (ReceiverStream::new(rx), accept)
}

/// TiKV's per-call common-name check: `Ok` when `allowed` is empty or lists the name of the
/// client certificate of `req`'s connection.
pub fn check_tikv_cn(allowed: &[String], req: &Request<()>) -> Result<(), Status> {
    if allowed.is_empty() {
        return Ok(());
    }
    let cn = req
        .peer_certs()
        .and_then(|certs| certs.first().and_then(|c| security::common_name(c)));
    if security::cn_allowed(allowed, cn.as_deref()) {
        return Ok(());
    }
    let reason = match cn {
        Some(cn) => format!("{cn} not in the allowed list"),
        None => "no client certificate".to_string(),
    };
    Err(Status::unauthenticated(format!(
        "Common name check fail, reason: {reason}, cert_allowed_cn: {allowed:?}"
    )))
}
