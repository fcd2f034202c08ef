//! The RSA key pair of caching_sha2_password's full authentication on plain connections.
//!
//! A client that must send its password (a `$A$…` user not yet in the fast-path cache) and has
//! no TLS asks for the public key (`0x02`), encrypts `password NUL` XORed with the nonce under
//! RSA-OAEP with SHA-1 (what MySQL 8.0.5+ and its clients use), and the server decrypts it here.
//!
//! Like MySQL's `caching_sha2_password_auto_generate_rsa_keys`, a missing key is generated
//! (2048 bits) and written beside the binlog (`private_key.pem`, mode 0600, and
//! `public_key.pem`) so that a client which pinned the public key keeps working after a
//! restart. A configured key may be PKCS#8 (`BEGIN PRIVATE KEY`) or PKCS#1
//! (`BEGIN RSA PRIVATE KEY`, what MySQL and `openssl genrsa` write).

use std::path::Path;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeySize, OaepPrivateDecryptingKey, PrivateDecryptingKey, OAEP_SHA1_MGF1SHA1};
use tibinlog_protocol::wire::auth_exchange::RsaKey;

/// A loaded key pair.
pub struct ServerRsaKey {
    key: OaepPrivateDecryptingKey,
    private: PrivateDecryptingKey,
    public_pem: Vec<u8>,
    size: usize,
}

impl std::fmt::Debug for ServerRsaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerRsaKey({} bits)", self.size * 8)
    }
}

/// Why a key could not be had.
#[derive(Debug, thiserror::Error)]
#[error("RSA key {path}: {message}")]
pub struct RsaKeyError {
    pub path: String,
    pub message: String,
}

fn err(path: &Path, message: impl ToString) -> RsaKeyError {
    RsaKeyError {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

impl ServerRsaKey {
    /// Builds the pair from a private key in PEM.
    pub fn from_pem(pem: &[u8]) -> Result<ServerRsaKey, String> {
        use tokio_rustls::rustls::pki_types::{pem::PemObject, PrivateKeyDer};
        let der = PrivateKeyDer::from_pem_slice(pem).map_err(|e| e.to_string())?;
        let pkcs8 = match der {
            PrivateKeyDer::Pkcs8(k) => k.secret_pkcs8_der().to_vec(),
            PrivateKeyDer::Pkcs1(k) => pkcs1_to_pkcs8(k.secret_pkcs1_der()),
            _ => return Err("not an RSA private key".into()),
        };
        let key = PrivateDecryptingKey::from_pkcs8(&pkcs8).map_err(|e| e.to_string())?;
        Self::from_key(key)
    }

    /// A new 2048-bit pair.
    pub fn generate() -> Result<ServerRsaKey, String> {
        let key = PrivateDecryptingKey::generate(KeySize::Rsa2048).map_err(|e| e.to_string())?;
        Self::from_key(key)
    }

    fn from_key(key: PrivateDecryptingKey) -> Result<ServerRsaKey, String> {
        let spki = key.public_key().as_der().map_err(|e| e.to_string())?;
        let public_pem = pem_text("PUBLIC KEY", spki.as_ref()).into_bytes();
        let size = key.key_size_bytes();
        let private = key.clone();
        let key = OaepPrivateDecryptingKey::new(key).map_err(|e| e.to_string())?;
        Ok(ServerRsaKey {
            key,
            private,
            public_pem,
            size,
        })
    }

    /// The private key in PKCS#8 PEM.
    fn private_pem(&self) -> Result<String, String> {
        let der = self.private.as_der().map_err(|e| e.to_string())?;
        Ok(pem_text("PRIVATE KEY", der.as_ref()))
    }

    /// The configured key, or the one kept in `dir` (generated and written there first if
    /// there is none).
    pub fn load_or_create(
        configured: Option<&Path>,
        dir: &Path,
    ) -> Result<ServerRsaKey, RsaKeyError> {
        if let Some(path) = configured {
            let pem = std::fs::read(path).map_err(|e| err(path, e))?;
            return Self::from_pem(&pem).map_err(|e| err(path, e));
        }
        let private = dir.join("private_key.pem");
        match std::fs::read(&private) {
            Ok(pem) => return Self::from_pem(&pem).map_err(|e| err(&private, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(&private, e)),
        }
        let key = Self::generate().map_err(|e| err(&private, e))?;
        let text = key.private_pem().map_err(|e| err(&private, e))?;
        write_private(&private, text.as_bytes()).map_err(|e| err(&private, e))?;
        let public = dir.join("public_key.pem");
        std::fs::write(&public, &key.public_pem).map_err(|e| err(&public, e))?;
        tracing::info!(
            path = %private.display(),
            "generated the RSA key pair for caching_sha2_password full authentication"
        );
        Ok(key)
    }
}

impl RsaKey for ServerRsaKey {
    fn public_pem(&self) -> &[u8] {
        &self.public_pem
    }

    fn size(&self) -> usize {
        self.size
    }

    fn decrypt_oaep(&self, ciphertext: &[u8]) -> Option<Vec<u8>> {
        let mut out = vec![0u8; self.key.min_output_size()];
        let n = self
            .key
            .decrypt(&OAEP_SHA1_MGF1SHA1, ciphertext, &mut out, None)
            .ok()?
            .len();
        out.truncate(n);
        Some(out)
    }
}

/// Writes a secret file readable by its owner only, through a temporary name.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("pem.tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// PEM armour with 64-character lines.
fn pem_text(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Wraps a PKCS#1 RSAPrivateKey in a PKCS#8 PrivateKeyInfo (version 0, rsaEncryption, NULL
/// parameters).
fn pkcs1_to_pkcs8(pkcs1: &[u8]) -> Vec<u8> {
    // AlgorithmIdentifier { 1.2.840.113549.1.1.1, NULL }
    const ALG: [u8; 15] = [
        0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
    ];
    let mut body = vec![0x02, 0x01, 0x00];
    body.extend_from_slice(&ALG);
    body.push(0x04);
    der_len(&mut body, pkcs1.len());
    body.extend_from_slice(pkcs1);
    let mut out = vec![0x30];
    der_len(&mut out, body.len());
    out.extend_from_slice(&body);
    out
}

fn der_len(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
        return;
    }
    let bytes = len.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    out.push(0x80 | (bytes.len() - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use aws_lc_rs::rsa::{OaepPublicEncryptingKey, PublicEncryptingKey};

    fn encrypt(key: &ServerRsaKey, plain: &[u8]) -> Vec<u8> {
        use tokio_rustls::rustls::pki_types::{pem::PemObject, SubjectPublicKeyInfoDer};
        let spki = SubjectPublicKeyInfoDer::from_pem_slice(key.public_pem()).unwrap();
        let public = PublicEncryptingKey::from_der(spki.as_ref()).unwrap();
        let public = OaepPublicEncryptingKey::new(public).unwrap();
        let mut out = vec![0u8; public.ciphertext_size()];
        public
            .encrypt(&OAEP_SHA1_MGF1SHA1, plain, &mut out, None)
            .unwrap()
            .to_vec()
    }

    #[test]
    fn generated_key_is_kept_and_decrypts_what_its_public_key_encrypts() {
        let dir = tempfile::tempdir().unwrap();
        let key = ServerRsaKey::load_or_create(None, dir.path()).unwrap();
        assert_eq!(key.size(), 256);
        assert!(key
            .public_pem()
            .starts_with(b"-----BEGIN PUBLIC KEY-----\n"));
        let c = encrypt(&key, b"secret\0");
        assert_eq!(key.decrypt_oaep(&c).unwrap(), b"secret\0");
        assert!(key.decrypt_oaep(&[1u8; 256]).is_none());
        assert!(key.decrypt_oaep(b"short").is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("private_key.pem"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // The same pair after a restart.
        let again = ServerRsaKey::load_or_create(None, dir.path()).unwrap();
        assert_eq!(again.public_pem(), key.public_pem());
        assert_eq!(again.decrypt_oaep(&c).unwrap(), b"secret\0");
    }

    #[test]
    fn a_pkcs1_key_loads() {
        let key = ServerRsaKey::generate().unwrap();
        let pem = key.private_pem().unwrap();
        use tokio_rustls::rustls::pki_types::{pem::PemObject, PrivatePkcs8KeyDer};
        let pkcs8 = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).unwrap();
        // PrivateKeyInfo: SEQUENCE { INTEGER 0, AlgorithmIdentifier, OCTET STRING pkcs1 };
        // take the OCTET STRING's content back out to get the PKCS#1 form.
        let der = pkcs8.secret_pkcs8_der();
        let at = der.windows(2).position(|w| w == [0x05, 0x00]).unwrap() + 2;
        assert_eq!(der[at], 0x04);
        let (len, hdr) = match der[at + 1] {
            l if l < 0x80 => (usize::from(l), 2),
            0x81 => (usize::from(der[at + 2]), 3),
            _ => (usize::from(der[at + 2]) << 8 | usize::from(der[at + 3]), 4),
        };
        let pkcs1 = &der[at + hdr..at + hdr + len];
        assert_eq!(pkcs1_to_pkcs8(pkcs1), der);
        let pkcs1_pem = pem_text("RSA PRIVATE KEY", pkcs1);
        let loaded = ServerRsaKey::from_pem(pkcs1_pem.as_bytes()).unwrap();
        assert_eq!(loaded.public_pem(), key.public_pem());
        assert!(ServerRsaKey::from_pem(
            b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
        )
        .is_err());
    }
}
