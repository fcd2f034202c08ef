//! Password checks for the two authentication plugins a binlog master offers.
//!
//! The client never sends the password; it proves knowledge of it with a scramble over the
//! server's 20-byte nonce:
//!
//! ```text
//! mysql_native_password   R = SHA1(pwd)   XOR SHA1(nonce ‖ SHA1(SHA1(pwd)))              20 bytes
//! caching_sha2_password   R = SHA256(pwd) XOR SHA256(SHA256(SHA256(pwd)) ‖ nonce)        32 bytes
//! ```
//!
//! The server needs only the double hash `H2` (SHA1(SHA1(pwd)) resp. SHA256(SHA256(pwd))):
//! `R XOR hash(… H2 …)` gives back the single hash `H1`, and `hash(H1) == H2` proves the
//! client knew `H1`. So a configuration may store either the cleartext password or one of
//! the double hashes ([`Credential`]). An empty password is sent as an empty response.
//!
//! In caching_sha2_password's "full authentication" the client sends the cleartext password
//! followed by NUL (only over TLS, or RSA-encrypted; see `auth_exchange`), checked by
//! [`verify_cleartext`].
//!
//! Comparisons of secret-derived bytes are constant-time ([`ct_eq`]).
//! References: MySQL `sql/auth/password.cc` (`check_scramble_sha1`),
//! `sql/auth/sha2_password_common.cc` (`Validate_scramble`), and
//! `blackbeam/rust_mysql_common:src/auth/plugins/{mysql_native_password,caching_sha2_password}.rs`
//! (client side, which our test vectors cross-check).

use sha1::{Digest, Sha1};
use sha2::Sha256;

/// Length of the server nonce (auth-plugin-data part 1 + part 2, without the trailing NUL).
pub const NONCE_LEN: usize = 20;

/// Name of the `mysql_native_password` plugin.
pub const NATIVE_PASSWORD: &str = "mysql_native_password";
/// Name of the `caching_sha2_password` plugin.
pub const CACHING_SHA2_PASSWORD: &str = "caching_sha2_password";
/// Name of the `mysql_clear_password` plugin (never offered; recognised to switch away from it).
pub const CLEAR_PASSWORD: &str = "mysql_clear_password";

/// An authentication plugin the server can verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthMethod {
    /// SHA1 challenge-response, understood by every client.
    NativePassword,
    /// SHA256 challenge-response (MySQL 8 default), with a full-auth fallback.
    CachingSha2Password,
}

impl AuthMethod {
    /// The plugin name sent on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Self::NativePassword => NATIVE_PASSWORD,
            Self::CachingSha2Password => CACHING_SHA2_PASSWORD,
        }
    }

    /// The method with this wire name, if we implement it.
    pub fn from_name(name: &[u8]) -> Option<Self> {
        match name {
            b"mysql_native_password" => Some(Self::NativePassword),
            b"caching_sha2_password" => Some(Self::CachingSha2Password),
            _ => None,
        }
    }
}

/// What the server knows about a user's password.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// The cleartext password: every method works.
    Password(Vec<u8>),
    /// SHA1(SHA1(password)), as in MySQL's `mysql.user.authentication_string` for
    /// mysql_native_password (without the `*` and hex): native scramble and cleartext work.
    NativeHash([u8; 20]),
    /// SHA256(SHA256(password)), the value MySQL keeps in its caching_sha2 cache: the
    /// caching_sha2 fast path and cleartext work.
    Sha2Hash([u8; 32]),
}

impl std::fmt::Debug for Credential {
    // Never print secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Self::Password(_) => "Password",
            Self::NativeHash(_) => "NativeHash",
            Self::Sha2Hash(_) => "Sha2Hash",
        };
        write!(f, "Credential::{kind}(..)")
    }
}

impl Credential {
    /// Parses MySQL's `*`-prefixed 40-hex-digit native hash (`SELECT PASSWORD('x')` format).
    pub fn from_native_hex(s: &str) -> Option<Self> {
        let hex = s.strip_prefix('*').unwrap_or(s);
        decode_hex::<20>(hex).map(Self::NativeHash)
    }

    /// Parses a 64-hex-digit SHA256(SHA256(password)).
    pub fn from_sha2_hex(s: &str) -> Option<Self> {
        decode_hex::<32>(s).map(Self::Sha2Hash)
    }

    /// True if the password is known to be empty (then the client sends an empty response).
    pub fn is_empty_password(&self) -> bool {
        match self {
            Self::Password(p) => p.is_empty(),
            Self::NativeHash(h) => *h == native_double_hash(b""),
            Self::Sha2Hash(h) => *h == sha2_double_hash(b""),
        }
    }

    /// Whether a scramble made with `method` can be checked against this credential.
    pub fn supports(&self, method: AuthMethod) -> bool {
        matches!(
            (self, method),
            (Self::Password(_), _)
                | (Self::NativeHash(_), AuthMethod::NativePassword)
                | (Self::Sha2Hash(_), AuthMethod::CachingSha2Password)
        )
    }
}

fn decode_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let bytes = s.as_bytes();
    if bytes.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let hi = char::from(pair[0]).to_digit(16)?;
        let lo = char::from(pair[1]).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

/// SHA1(SHA1(password)): what mysql_native_password stores.
pub fn native_double_hash(password: &[u8]) -> [u8; 20] {
    sha1(&sha1(password))
}

/// SHA256(SHA256(password)): what caching_sha2_password's fast path needs.
pub fn sha2_double_hash(password: &[u8]) -> [u8; 32] {
    sha256(&sha256(password))
}

/// Client side of mysql_native_password: the 20-byte response, empty for an empty password.
pub fn scramble_native(nonce: &[u8], password: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let h1 = sha1(password);
    let mask = sha1_concat(nonce, &sha1(&h1));
    xor(&h1, &mask).to_vec()
}

/// Client side of caching_sha2_password's fast path: 32 bytes, empty for an empty password.
pub fn scramble_caching_sha2(nonce: &[u8], password: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let h1 = sha256(password);
    let mask = sha256_concat(&sha256(&h1), nonce);
    xor(&h1, &mask).to_vec()
}

/// Checks a mysql_native_password response against the credential.
/// Returns false for credentials that cannot check this method ([`Credential::supports`]).
pub fn verify_native(credential: &Credential, nonce: &[u8], response: &[u8]) -> bool {
    let stored = match credential {
        Credential::Password(p) if p.is_empty() => return response.is_empty(),
        Credential::Password(p) => native_double_hash(p),
        Credential::NativeHash(h) => *h,
        Credential::Sha2Hash(_) => return false,
    };
    if response.is_empty() {
        return ct_eq(&stored, &native_double_hash(b""));
    }
    let Ok(response) = <[u8; 20]>::try_from(response) else {
        return false;
    };
    let mask = sha1_concat(nonce, &stored);
    let h1 = xor(&response, &mask);
    ct_eq(&sha1(&h1), &stored)
}

/// Checks a caching_sha2_password fast-path response against the credential.
/// Returns false for credentials that cannot check this method ([`Credential::supports`]).
pub fn verify_caching_sha2(credential: &Credential, nonce: &[u8], response: &[u8]) -> bool {
    let stored = match credential {
        Credential::Password(p) if p.is_empty() => return response.is_empty(),
        Credential::Password(p) => sha2_double_hash(p),
        Credential::Sha2Hash(h) => *h,
        Credential::NativeHash(_) => return false,
    };
    if response.is_empty() {
        return ct_eq(&stored, &sha2_double_hash(b""));
    }
    let Ok(response) = <[u8; 32]>::try_from(response) else {
        return false;
    };
    let mask = sha256_concat(&stored, nonce);
    let h1 = xor(&response, &mask);
    ct_eq(&sha256(&h1), &stored)
}

/// Checks a cleartext password (full authentication; the trailing NUL already removed).
pub fn verify_cleartext(credential: &Credential, password: &[u8]) -> bool {
    match credential {
        Credential::Password(p) => {
            // Compare hashes so the time does not depend on where the passwords differ
            // or on their lengths.
            ct_eq(&sha256(p), &sha256(password))
        }
        Credential::NativeHash(h) => ct_eq(&native_double_hash(password), h),
        Credential::Sha2Hash(h) => ct_eq(&sha2_double_hash(password), h),
    }
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // black_box keeps the optimiser from turning the fold into an early-exit comparison.
    std::hint::black_box(diff) == 0
}

fn xor<const N: usize>(a: &[u8; N], b: &[u8; N]) -> [u8; N] {
    let mut out = *a;
    for (o, m) in out.iter_mut().zip(b) {
        *o ^= m;
    }
    out
}

fn sha1(data: &[u8]) -> [u8; 20] {
    Sha1::digest(data).into()
}

fn sha1_concat(a: &[u8], b: &[u8]) -> [u8; 20] {
    let mut h = Sha1::new();
    h.update(a);
    h.update(b);
    h.finalize().into()
}

fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

fn sha256_concat(a: &[u8], b: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(a);
    h.update(b);
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vectors from mysql_common's own scramble tests
    // (blackbeam/rust_mysql_common:src/auth/plugins/mysql_native_password.rs and
    // caching_sha2_password.rs, `should_compute_scrambled_password`).
    const NONCE: [u8; 20] = [
        0x4e, 0x52, 0x33, 0x48, 0x50, 0x3a, 0x71, 0x49, 0x59, 0x61, 0x5f, 0x39, 0x3d, 0x64, 0x62,
        0x3f, 0x53, 0x64, 0x7b, 0x60,
    ];
    const PASSWORD: [u8; 8] = [0x47, 0x21, 0x69, 0x64, 0x65, 0x72, 0x32, 0x37];
    const NATIVE: [u8; 20] = [
        0x09, 0xcf, 0xf8, 0x85, 0x5e, 0x9e, 0x70, 0x53, 0x40, 0xff, 0x22, 0x70, 0xd8, 0xfb, 0x9f,
        0xad, 0xba, 0x90, 0x6b, 0x70,
    ];
    const SHA2: [u8; 32] = [
        0x4f, 0x97, 0xbb, 0xfd, 0x20, 0x24, 0x01, 0xc4, 0x2a, 0x69, 0xde, 0xaa, 0xe5, 0x3b, 0xda,
        0x07, 0x7e, 0xd7, 0x57, 0x85, 0x63, 0xc1, 0xa8, 0x0e, 0xb8, 0x16, 0xc8, 0x21, 0x19, 0xb6,
        0x8d, 0x2e,
    ];

    #[test]
    fn published_vectors() {
        assert_eq!(scramble_native(&NONCE, &PASSWORD), NATIVE);
        assert_eq!(scramble_caching_sha2(&NONCE, &PASSWORD), SHA2);
    }

    #[test]
    fn native_verifies_from_password_and_from_hash() {
        let pw = Credential::Password(PASSWORD.to_vec());
        let hash = Credential::NativeHash(native_double_hash(&PASSWORD));
        for c in [&pw, &hash] {
            assert!(verify_native(c, &NONCE, &NATIVE));
            let mut bad = NATIVE;
            bad[0] ^= 1;
            assert!(!verify_native(c, &NONCE, &bad));
            assert!(!verify_native(c, &NONCE, &NATIVE[..19]));
            assert!(!verify_native(c, &NONCE, &[]));
            assert!(!verify_native(c, &[0u8; 20], &NATIVE));
        }
        assert!(!verify_native(
            &Credential::Sha2Hash(sha2_double_hash(&PASSWORD)),
            &NONCE,
            &NATIVE
        ));
    }

    #[test]
    fn caching_sha2_verifies_from_password_and_from_hash() {
        let pw = Credential::Password(PASSWORD.to_vec());
        let hash = Credential::Sha2Hash(sha2_double_hash(&PASSWORD));
        for c in [&pw, &hash] {
            assert!(verify_caching_sha2(c, &NONCE, &SHA2));
            let wrong = scramble_caching_sha2(&NONCE, b"G!ider28");
            assert!(!verify_caching_sha2(c, &NONCE, &wrong));
            assert!(!verify_caching_sha2(c, &NONCE, &SHA2[..31]));
            assert!(!verify_caching_sha2(c, &NONCE, &[]));
        }
        assert!(!verify_caching_sha2(
            &Credential::NativeHash(native_double_hash(&PASSWORD)),
            &NONCE,
            &SHA2
        ));
    }

    #[test]
    fn empty_password_is_an_empty_response() {
        for c in [
            Credential::Password(Vec::new()),
            Credential::NativeHash(native_double_hash(b"")),
        ] {
            assert!(c.is_empty_password());
            assert!(verify_native(&c, &NONCE, &[]));
            assert!(!verify_native(&c, &NONCE, &NATIVE));
        }
        let c = Credential::Sha2Hash(sha2_double_hash(b""));
        assert!(verify_caching_sha2(&c, &NONCE, &[]));
        assert!(scramble_native(&NONCE, b"").is_empty());
    }

    #[test]
    fn cleartext_against_every_credential_form() {
        for c in [
            Credential::Password(b"secret".to_vec()),
            Credential::NativeHash(native_double_hash(b"secret")),
            Credential::Sha2Hash(sha2_double_hash(b"secret")),
        ] {
            assert!(verify_cleartext(&c, b"secret"));
            assert!(!verify_cleartext(&c, b"secreT"));
            assert!(!verify_cleartext(&c, b""));
        }
    }

    #[test]
    fn hex_forms() {
        // SELECT PASSWORD('password') in MySQL 5.7 (widely published value).
        let c = Credential::from_native_hex("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19");
        assert_eq!(
            c,
            Some(Credential::NativeHash(native_double_hash(b"password")))
        );
        assert_eq!(Credential::from_native_hex("*zz"), None);
        let hex: String = sha2_double_hash(b"pw")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            Credential::from_sha2_hex(&hex),
            Some(Credential::Sha2Hash(sha2_double_hash(b"pw")))
        );
        assert_eq!(format!("{c:?}"), "Some(Credential::NativeHash(..))");
    }

    #[test]
    fn ct_eq_basics() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
        assert!(ct_eq(b"", b""));
    }
}
