//! TLS with the cluster (PD and TiKV clients presenting a client certificate, as TiCDC does with
//! `--ca`, `--cert`, `--key`) and the certificate facts the listeners check.
//!
//! A certificate problem does not heal by retrying: a server certificate from another CA, one
//! that expired or names another host, or a peer that refuses our certificate (expired, wrong
//! CA, a common name its `cert-allowed-cn` does not list). [`refusal`] recognises these in any
//! error chain so the callers stop with one error naming the endpoint instead of reconnecting
//! forever.

use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};
use tonic::{Code, Status};

/// A TLS setup that cannot work (unreadable or malformed files, a key that does not match).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what}: {message}")]
pub struct TlsSetupError {
    /// The file or setting at fault.
    pub what: String,
    pub message: String,
}

fn setup_err(what: impl Into<String>, message: impl ToString) -> TlsSetupError {
    TlsSetupError {
        what: what.into(),
        message: message.to_string(),
    }
}

/// Where the cluster's certificates come from (TiCDC's `--ca`, `--cert`, `--key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterTlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// TLS towards PD and TiKV: the CA that signs their certificates and our client identity.
#[derive(Clone)]
pub struct ClusterTls {
    client: ClientTlsConfig,
    /// The same configuration for [`ClusterTls::probe`].
    rustls: Arc<rustls::ClientConfig>,
    /// The client certificate's subject common name (what a peer's `cert-allowed-cn` checks).
    common_name: Option<String>,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTls")
            .field("common_name", &self.common_name)
            .finish_non_exhaustive()
    }
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>, TlsSetupError> {
    std::fs::read(path).map_err(|e| setup_err(format!("{what} {}", path.display()), e))
}

/// Every certificate of a PEM bundle (at least one).
pub fn pem_certificates(
    what: &str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| setup_err(what, e))?;
    if certs.is_empty() {
        return Err(setup_err(what, "no PEM certificate in it"));
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub fn pem_key(what: &str, pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsSetupError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| setup_err(what, e))
}

/// A root store of every certificate in `pem`.
pub fn root_store(what: &str, pem: &[u8]) -> Result<rustls::RootCertStore, TlsSetupError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in pem_certificates(what, pem)? {
        roots.add(c).map_err(|e| setup_err(what, e))?;
    }
    Ok(roots)
}

/// The crypto provider of every TLS config here.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl ClusterTls {
    /// Reads and checks the three PEM files.
    pub fn from_files(files: &ClusterTlsFiles) -> Result<ClusterTls, TlsSetupError> {
        let ca = read("CA file", &files.ca)?;
        let cert = read("certificate file", &files.cert)?;
        let key = read("key file", &files.key)?;
        Self::from_pem(&ca, &cert, &key).map_err(|e| TlsSetupError {
            what: format!(
                "{} (--ca {}, --cert {}, --key {})",
                e.what,
                files.ca.display(),
                files.cert.display(),
                files.key.display()
            ),
            message: e.message,
        })
    }

    /// Checks the PEM texts: a CA, a certificate chain and its key that rustls accepts.
    pub fn from_pem(ca: &[u8], cert: &[u8], key: &[u8]) -> Result<ClusterTls, TlsSetupError> {
        let roots = root_store("CA", ca)?;
        let chain = pem_certificates("certificate", cert)?;
        let private = pem_key("key", key)?;
        let common_name = common_name(&chain[0]);
        if let Some(left) = expires_in(&chain[0]) {
            if left.is_zero() {
                tracing::warn!(
                    common_name = common_name.as_deref().unwrap_or(""),
                    "the client certificate for PD and TiKV has expired: they will refuse it"
                );
            }
        }
        // What tonic's connector builds, built here too so that a bad pair fails at start.
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| setup_err("TLS versions", e))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, private)
            .map_err(|e| setup_err("certificate and key", e))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        let client = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(ca))
            .identity(Identity::from_pem(cert, key));
        Ok(ClusterTls {
            client,
            rustls: Arc::new(config),
            common_name,
        })
    }

    /// The tonic client configuration, with a handshake limit.
    pub fn client_config(&self, handshake_timeout: Duration) -> ClientTlsConfig {
        self.client.clone().timeout(handshake_timeout)
    }

    /// The same identity for an HTTP/1.1 connection (PD's HTTP API).
    pub fn http1_connector(&self) -> tokio_rustls::TlsConnector {
        let mut config = (*self.rustls).clone();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }

    /// The client certificate's common name.
    pub fn common_name(&self) -> Option<&str> {
        self.common_name.as_deref()
    }

    /// Finds out whether the server at `host_port` refuses this TLS, before gRPC uses it.
    ///
    /// A TLS 1.3 server checks the client certificate after the client has finished its part
    /// of the handshake, so a refused certificate (expired, another CA, a common name outside
    /// `cert-allowed-cn` checked in the handshake) shows only when the client next reads; a
    /// gRPC client writes first and sees a broken pipe, which looks like a network fault. The
    /// probe sends the HTTP/2 client preface and reads the server's first bytes, which are its
    /// SETTINGS or the alert. `Err` carries a refusal; anything else (unreachable, slow) is
    /// left for the real connection to report.
    pub async fn probe(&self, host_port: &str, limit: Duration) -> Result<(), String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let host = match host_port.rsplit_once(':') {
            Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
            None => host_port,
        };
        let Ok(name) = rustls::pki_types::ServerName::try_from(host.to_string()) else {
            return Ok(());
        };
        let attempt = async {
            let tcp = tokio::net::TcpStream::connect(host_port).await.ok()?;
            let connector = tokio_rustls::TlsConnector::from(self.rustls.clone());
            let mut tls = match connector.connect(name, tcp).await {
                Ok(t) => t,
                Err(e) => return Some(refusal(&e)),
            };
            // The client preface and an empty SETTINGS frame.
            let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
            if let Err(e) = tls.write_all(&hello).await {
                return Some(refusal(&e));
            }
            let _ = tls.flush().await;
            let mut first = [0u8; 9];
            match tls.read(&mut first).await {
                Ok(_) => Some(None),
                Err(e) => Some(refusal(&e)),
            }
        };
        match tokio::time::timeout(limit, attempt).await {
            Ok(Some(Some(why))) => Err(why),
            _ => Ok(()),
        }
    }
}

/// The subject common name of a DER certificate.
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_string)
}

/// How long a DER certificate stays valid (zero when it has expired).
pub fn expires_in(der: &[u8]) -> Option<Duration> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let left = cert.validity().time_to_expiration();
    Some(left.map_or(Duration::ZERO, |d| d.unsigned_abs()))
}

/// `true` when `common_name` is allowed by a `cert-allowed-cn` list (an empty list allows all).
pub fn cn_allowed(allowed: &[String], common_name: Option<&str>) -> bool {
    allowed.is_empty() || common_name.is_some_and(|cn| allowed.iter().any(|a| a == cn))
}

fn describe(e: &rustls::Error) -> Option<String> {
    use rustls::AlertDescription as A;
    match e {
        rustls::Error::InvalidCertificate(c) => {
            use rustls::CertificateError as C;
            let hint = match c {
                C::UnknownIssuer => " (not signed by the CA given with --ca)",
                #[allow(deprecated)]
                C::BadSignature => {
                    " (its signature does not verify with the CA given with --ca: another CA of \
                     the same name?)"
                }
                _ => "",
            };
            Some(format!("the server's certificate is refused: {c}{hint}"))
        }
        rustls::Error::AlertReceived(
            a @ (A::BadCertificate
            | A::UnsupportedCertificate
            | A::CertificateRevoked
            | A::CertificateExpired
            | A::CertificateUnknown
            | A::UnknownCA
            | A::AccessDenied
            | A::CertificateRequired
            | A::HandshakeFailure),
        ) => Some(format!(
            "the server refused the TLS handshake (alert {a:?}): is our client certificate \
             expired, from another CA, or not in its cert-allowed-cn?"
        )),
        rustls::Error::InvalidMessage(m) => Some(format!(
            "the server does not speak TLS ({m:?}): is it serving plain gRPC?"
        )),
        rustls::Error::NoApplicationProtocol => {
            Some("the server offered no HTTP/2 over TLS (ALPN)".into())
        }
        _ => None,
    }
}

/// Why a connection was refused for good by a certificate check, if that is what `e` (or an
/// error it wraps) says; `None` for everything a retry may cure.
pub fn refusal(e: &(dyn StdError + 'static)) -> Option<String> {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(r) = c.downcast_ref::<rustls::Error>() {
            return describe(r);
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if let Some(r) = io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                return describe(r);
            }
        }
        cur = c.source();
    }
    None
}

/// A peer refused us for good (a certificate or its common name). Anywhere in an error chain
/// it means: stop, a retry meets the same refusal.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// True when `e` or an error it wraps is a [`Refused`].
pub fn is_refused(e: &(dyn StdError + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if c.is::<Refused>() {
            return true;
        }
        cur = c.source();
    }
    false
}

/// Rewrites a status that carries a certificate refusal into `UNAUTHENTICATED` naming
/// `endpoint`; other statuses pass unchanged. TiKV's own `cert-allowed-cn` check already
/// answers `UNAUTHENTICATED`.
pub fn classify(status: Status, endpoint: &str) -> Status {
    if status.code() == Code::Unauthenticated {
        if status.message().contains(endpoint) {
            return status;
        }
        return Status::unauthenticated(format!("{endpoint}: {}", status.message()));
    }
    match refusal(&status) {
        Some(why) => Status::unauthenticated(format!("TLS to {endpoint}: {why}")),
        None => status,
    }
}

/// True when a status says the peer refused us for good (a certificate or its common name).
pub fn is_refusal(status: &Status) -> bool {
    status.code() == Code::Unauthenticated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_found_through_io_errors_and_sources() {
        let bad = rustls::Error::InvalidCertificate(rustls::CertificateError::Expired);
        let why = refusal(&bad).expect("direct");
        assert!(why.to_lowercase().contains("expired"), "{why}");
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, bad);
        let why = refusal(&io).expect("inside an io error");
        assert!(why.contains("refused"), "{why}");
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::BadCertificate);
        let wrapped = anyhow::Error::new(std::io::Error::other(alert)).context("connect");
        assert!(refusal(wrapped.as_ref()).is_some());
        let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed");
        assert!(refusal(&eof).is_none());
        let timeout = rustls::Error::AlertReceived(rustls::AlertDescription::CloseNotify);
        assert!(refusal(&timeout).is_none());
    }

    #[test]
    fn statuses_become_unauthenticated_naming_the_endpoint() {
        let s = classify(Status::unavailable("connection refused"), "127.0.0.1:1");
        assert_eq!(s.code(), Code::Unavailable);
        let s = classify(
            Status::unauthenticated("Common name check fail, reason: x"),
            "127.0.0.1:2",
        );
        assert!(is_refusal(&s));
        assert!(s.message().starts_with("127.0.0.1:2: Common name"), "{s}");
    }

    #[test]
    fn allowed_common_names() {
        assert!(cn_allowed(&[], None));
        let list = vec!["tibinlog".to_string()];
        assert!(cn_allowed(&list, Some("tibinlog")));
        assert!(!cn_allowed(&list, Some("other")));
        assert!(!cn_allowed(&list, None));
    }

    #[test]
    fn bad_files_are_named() {
        let e = ClusterTls::from_pem(b"not pem", b"", b"").expect_err("no CA");
        assert_eq!(e.what, "CA");
        let files = ClusterTlsFiles {
            ca: "/nonexistent/ca.pem".into(),
            cert: "c".into(),
            key: "k".into(),
        };
        let e = ClusterTls::from_files(&files).expect_err("missing");
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }
}
