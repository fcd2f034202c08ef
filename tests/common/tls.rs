//! Certificates for tests: a CA with a server and a client certificate written to a temporary
//! directory, and more certificates on demand (expired, another name, another CA).

#![allow(dead_code)]

use std::path::PathBuf;

use tibinlog::security::{ClusterTls, ClusterTlsFiles};
use tibinlog::sim::pki::{CertSpec, Issued, Pki};
use tibinlog::sim::server::tls::SimTls;

/// Common name of [`TestPki::client`].
pub const CLIENT_CN: &str = "tibinlog";

/// A CA and the certificates a test hands out, as files.
pub struct TestPki {
    pub dir: tempfile::TempDir,
    pub ca: Pki,
    pub server: Issued,
    pub client: Issued,
}

impl TestPki {
    /// A new CA with a loopback server certificate and a client certificate named
    /// [`CLIENT_CN`].
    pub fn new() -> TestPki {
        // Each CA its own name: a certificate of one then names an issuer the other is not.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ca = Pki::new(&format!("test CA {n}")).expect("CA");
        let server = ca.issue(&CertSpec::server("tidb-server")).expect("server");
        let client = ca.issue(&CertSpec::client(CLIENT_CN)).expect("client");
        TestPki {
            dir: tempfile::tempdir().expect("tempdir"),
            ca,
            server,
            client,
        }
    }

    /// Writes `text` as `name` in the directory.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("write PEM");
        p
    }

    /// A certificate of this CA.
    pub fn issue(&self, spec: &CertSpec) -> Issued {
        self.ca.issue(spec).expect("issue")
    }

    /// The files of a client identity trusting this CA.
    pub fn client_files(&self, client: &Issued) -> ClusterTlsFiles {
        let n = self.dir.path().read_dir().map_or(0, |d| d.count());
        ClusterTlsFiles {
            ca: self.file(&format!("ca-{n}.pem"), self.ca.ca_pem()),
            cert: self.file(&format!("client-{n}.pem"), &client.cert_pem),
            key: self.file(&format!("client-key-{n}.pem"), &client.key_pem),
        }
    }

    /// TLS towards a cluster of this CA with the standard client certificate.
    pub fn cluster_tls(&self) -> ClusterTls {
        client_tls(self.ca.ca_pem(), &self.client)
    }

    /// The simulated servers' TLS with this CA and its server certificate.
    pub fn sim_tls(&self) -> SimTls {
        sim_tls(self.ca.ca_pem(), &self.server)
    }
}

/// TLS trusting `ca_pem` and presenting `client`.
pub fn client_tls(ca_pem: &str, client: &Issued) -> ClusterTls {
    ClusterTls::from_pem(
        ca_pem.as_bytes(),
        client.cert_pem.as_bytes(),
        client.key_pem.as_bytes(),
    )
    .expect("client TLS")
}

/// Simulated servers presenting `server` and trusting client certificates of `ca_pem`.
pub fn sim_tls(ca_pem: &str, server: &Issued) -> SimTls {
    SimTls {
        ca_pem: ca_pem.as_bytes().to_vec(),
        cert_pem: server.cert_pem.as_bytes().to_vec(),
        key_pem: server.key_pem.as_bytes().to_vec(),
        ..SimTls::default()
    }
}
