//! Certificates for a simulated cluster and its clients: one CA; server certificates for
//! `127.0.0.1`, `::1` and `localhost`; client certificates with a chosen common name, valid or
//! already expired. Tests, `tibinlog certs` and the compose file's TLS option use them.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Why certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("certificate generation: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A certificate and its private key, in PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// What to put in a certificate.
#[derive(Debug, Clone)]
pub struct CertSpec {
    pub common_name: String,
    /// DNS names and IP addresses (SAN).
    pub names: Vec<String>,
    /// Valid for servers (TLS server auth) as well as clients.
    pub server: bool,
    /// Validity ended in 2001.
    pub expired: bool,
}

impl CertSpec {
    /// A server certificate for loopback (also usable as a client certificate, as a TiKV's is).
    pub fn server(common_name: &str) -> CertSpec {
        CertSpec {
            common_name: common_name.into(),
            names: vec!["127.0.0.1".into(), "::1".into(), "localhost".into()],
            server: true,
            expired: false,
        }
    }

    /// A client certificate.
    pub fn client(common_name: &str) -> CertSpec {
        CertSpec {
            common_name: common_name.into(),
            names: Vec::new(),
            server: false,
            expired: false,
        }
    }

    /// The same certificate, expired.
    pub fn expired(mut self) -> CertSpec {
        self.expired = true;
        self
    }
}

/// A certificate authority.
pub struct Pki {
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").finish_non_exhaustive()
    }
}

impl Pki {
    /// A new CA whose subject common name is `name`.
    pub fn new(name: &str) -> Result<Pki, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key)?;
        Ok(Pki {
            ca_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A certificate signed by this CA.
    pub fn issue(&self, spec: &CertSpec) -> Result<Issued, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(spec.names.clone())?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, spec.common_name.as_str());
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if spec.server {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if spec.expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        } else {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2120, 1, 1);
        }
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The files [`write_set`] makes.
#[derive(Debug, Clone)]
pub struct PkiFiles {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

fn write(path: &Path, text: &str) -> Result<(), PkiError> {
    std::fs::write(path, text).map_err(|source| PkiError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a CA (`ca.pem`), a server pair (`server.pem`, `server-key.pem`, common name
/// `server_cn`, valid for `server_names`, or loopback when empty) and a client pair
/// (`client.pem`, `client-key.pem`, common name `client_cn`) into `dir`.
pub fn write_set(
    dir: &Path,
    server_cn: &str,
    server_names: &[String],
    client_cn: &str,
) -> Result<PkiFiles, PkiError> {
    std::fs::create_dir_all(dir).map_err(|source| PkiError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    // A name of its own: two sets' CAs must not look like one issuer to a verifier.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let pki = Pki::new(&format!("tibinlog test CA {stamp:x}"))?;
    let mut spec = CertSpec::server(server_cn);
    if !server_names.is_empty() {
        spec.names = server_names.to_vec();
    }
    let server = pki.issue(&spec)?;
    let client = pki.issue(&CertSpec::client(client_cn))?;
    let files = PkiFiles {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server-key.pem"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client-key.pem"),
    };
    write(&files.ca, pki.ca_pem())?;
    write(&files.server_cert, &server.cert_pem)?;
    write(&files.server_key, &server.key_pem)?;
    write(&files.client_cert, &client.cert_pem)?;
    write(&files.client_key, &client.key_pem)?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_carry_their_names_and_validity() {
        let pki = Pki::new("ca").expect("ca");
        let c = pki.issue(&CertSpec::client("tibinlog")).expect("client");
        let der = crate::security::pem_certificates("c", c.cert_pem.as_bytes()).expect("pem");
        assert_eq!(
            crate::security::common_name(&der[0]).as_deref(),
            Some("tibinlog")
        );
        assert!(
            crate::security::expires_in(&der[0]).expect("validity") > std::time::Duration::ZERO
        );
        let old = pki
            .issue(&CertSpec::client("old").expired())
            .expect("expired");
        let der = crate::security::pem_certificates("c", old.cert_pem.as_bytes()).expect("pem");
        assert_eq!(
            crate::security::expires_in(&der[0]),
            Some(std::time::Duration::ZERO)
        );
        crate::security::ClusterTls::from_pem(
            pki.ca_pem().as_bytes(),
            c.cert_pem.as_bytes(),
            c.key_pem.as_bytes(),
        )
        .expect("a client identity rustls accepts");
    }
}
