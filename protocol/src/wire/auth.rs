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
//! MySQL 8 stores a caching_sha2_password user as `$A$005$<salt><digest>` (SHA-256-crypt over a
//! 20-byte salt, [`Sha2Crypt`]); that form checks only a cleartext password, so such a user's
//! first login takes full authentication and its success fills the fast path's cache with
//! SHA256(SHA256(pwd)) ([`Credential::Sha2Crypt`]'s `cached`), exactly as MySQL's cache works.
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
    /// MySQL's stored caching_sha2_password string: cleartext works; the fast path works once
    /// `cached` holds SHA256(SHA256(password)) from an earlier full authentication.
    Sha2Crypt {
        stored: std::sync::Arc<Sha2Crypt>,
        cached: Option<[u8; 32]>,
    },
}

impl std::fmt::Debug for Credential {
    // Never print secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Self::Password(_) => "Password",
            Self::NativeHash(_) => "NativeHash",
            Self::Sha2Hash(_) => "Sha2Hash",
            Self::Sha2Crypt { .. } => "Sha2Crypt",
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

    /// Parses a password hash as MySQL shows it: `*` and 40 hex digits
    /// (mysql_native_password), `$A$005$…` (caching_sha2_password), either of them as
    /// `0x…` hex (what `SHOW CREATE USER` prints with `print_identified_with_as_hex`), or 64
    /// hex digits of SHA256(SHA256(password)). The empty string is the empty password.
    pub fn from_mysql_hash(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Ok(Self::Password(Vec::new()));
        }
        if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            let bytes = decode_hex_vec(hex).ok_or("0x… is not an even number of hex digits")?;
            return match std::str::from_utf8(&bytes) {
                Ok(text) if text.starts_with('*') => Self::from_mysql_hash(text),
                _ => Sha2Crypt::parse(&bytes).map(Self::sha2_crypt),
            };
        }
        if s.starts_with('*') {
            return Self::from_native_hex(s)
                .ok_or_else(|| "a native hash is `*` and 40 hex digits".to_owned());
        }
        if s.starts_with("$A$") {
            return Sha2Crypt::parse(s.as_bytes()).map(Self::sha2_crypt);
        }
        Self::from_sha2_hex(s).ok_or_else(|| {
            "not a MySQL password hash (`*` and 40 hex digits, `$A$005$…`, 0x…, or 64 hex digits)"
                .to_owned()
        })
    }

    fn sha2_crypt(stored: Sha2Crypt) -> Self {
        Self::Sha2Crypt {
            stored: std::sync::Arc::new(stored),
            cached: None,
        }
    }

    /// True if the password is known to be empty (then the client sends an empty response).
    pub fn is_empty_password(&self) -> bool {
        match self {
            Self::Password(p) => p.is_empty(),
            Self::NativeHash(h) => *h == native_double_hash(b""),
            Self::Sha2Hash(h) => *h == sha2_double_hash(b""),
            Self::Sha2Crypt { stored, .. } => stored.is_empty_password(),
        }
    }

    /// The plugin MySQL would name for this credential in `mysql.user.plugin`.
    pub fn plugin(&self) -> AuthMethod {
        match self {
            Self::NativeHash(_) => AuthMethod::NativePassword,
            _ => AuthMethod::CachingSha2Password,
        }
    }

    /// Whether a scramble made with `method` can be checked against this credential.
    pub fn supports(&self, method: AuthMethod) -> bool {
        matches!(
            (self, method),
            (Self::Password(_), _)
                | (Self::NativeHash(_), AuthMethod::NativePassword)
                | (Self::Sha2Hash(_), AuthMethod::CachingSha2Password)
                | (
                    Self::Sha2Crypt {
                        cached: Some(_),
                        ..
                    },
                    AuthMethod::CachingSha2Password
                )
        )
    }
}

/// A caching_sha2_password `authentication_string`: `$A$`, the round count in thousands as
/// three hex digits, `$`, a 20-byte salt and the 43-character SHA-256-crypt digest.
///
/// The digest is Drepper's SHA-256-crypt (the `$5$` of glibc's `crypt`) computed over the full
/// 20-byte salt (glibc truncates salts to 16) and printed in crypt's base-64 alphabet.
/// Reference: MySQL `mysys/crypt_genhash_impl.cc`, `sql/auth/sha2_password.cc`.
#[derive(Clone, PartialEq, Eq)]
pub struct Sha2Crypt {
    rounds: u32,
    salt: [u8; SHA2_CRYPT_SALT_LEN],
    digest: [u8; SHA2_CRYPT_DIGEST_LEN],
}

/// Salt length of MySQL's caching_sha2_password hashes.
pub const SHA2_CRYPT_SALT_LEN: usize = 20;
/// Length of the encoded SHA-256-crypt digest.
pub const SHA2_CRYPT_DIGEST_LEN: usize = 43;
/// MySQL's default (and our generator's) round count: `005` thousand.
pub const SHA2_CRYPT_DEFAULT_ROUNDS: u32 = 5000;
/// The largest round count the format holds (`FFF` thousand), far slower than any login wants.
const SHA2_CRYPT_MAX_ROUNDS: u32 = 0xfff * 1000;

impl std::fmt::Debug for Sha2Crypt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sha2Crypt {{ rounds: {}, .. }}", self.rounds)
    }
}

impl Sha2Crypt {
    /// Parses the stored string (bytes, since the salt may hold any byte but NUL and `$`).
    pub fn parse(s: &[u8]) -> Result<Sha2Crypt, String> {
        let want = 7 + SHA2_CRYPT_SALT_LEN + SHA2_CRYPT_DIGEST_LEN;
        if s.len() != want || !s.starts_with(b"$A$") || s[6] != b'$' {
            return Err(format!(
                "a caching_sha2_password hash is `$A$` + 3 hex digits + `$` + 20 bytes of salt \
                 + 43 characters ({want} bytes), this has {}",
                s.len()
            ));
        }
        let thousands = std::str::from_utf8(&s[3..6])
            .ok()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .filter(|t| *t > 0)
            .ok_or("the round count (3 hex digits after `$A$`) is not valid")?;
        let mut salt = [0u8; SHA2_CRYPT_SALT_LEN];
        salt.copy_from_slice(&s[7..7 + SHA2_CRYPT_SALT_LEN]);
        let mut digest = [0u8; SHA2_CRYPT_DIGEST_LEN];
        digest.copy_from_slice(&s[7 + SHA2_CRYPT_SALT_LEN..]);
        if !digest.iter().all(|b| CRYPT_B64.contains(b)) {
            return Err("the digest holds characters outside crypt's base-64 alphabet".into());
        }
        Ok(Sha2Crypt {
            rounds: thousands * 1000,
            salt,
            digest,
        })
    }

    /// Hashes `password` with `salt` (any bytes but NUL and `$`) and `rounds` (a multiple of
    /// 1000, at most 4,095,000).
    pub fn new(password: &[u8], salt: [u8; SHA2_CRYPT_SALT_LEN], rounds: u32) -> Sha2Crypt {
        let rounds = (rounds / 1000).clamp(1, SHA2_CRYPT_MAX_ROUNDS / 1000) * 1000;
        Sha2Crypt {
            rounds,
            salt,
            digest: sha256_crypt(password, &salt, rounds),
        }
    }

    /// The stored string, as `mysql.user.authentication_string` holds it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!("$A${:03X}$", self.rounds / 1000).into_bytes();
        out.extend_from_slice(&self.salt);
        out.extend_from_slice(&self.digest);
        out
    }

    /// Whether `password` is the one hashed here. A password longer than
    /// [`SHA2_CRYPT_MAX_PASSWORD_LEN`] is refused before hashing, as MySQL refuses it: the
    /// hash's cost grows with the length times the rounds, so an unbounded one would let any
    /// client spend the server's CPU.
    pub fn verify(&self, password: &[u8]) -> bool {
        if password.len() > SHA2_CRYPT_MAX_PASSWORD_LEN {
            return false;
        }
        ct_eq(
            &sha256_crypt(password, &self.salt, self.rounds),
            &self.digest,
        )
    }

    fn is_empty_password(&self) -> bool {
        self.verify(b"")
    }
}

/// The longest password caching_sha2_password hashes (MySQL's limit for the stored form).
pub const SHA2_CRYPT_MAX_PASSWORD_LEN: usize = 256;

/// crypt's base-64 alphabet.
const CRYPT_B64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// SHA-256-crypt (Drepper, "Unix crypt using SHA-256 and SHA-512", steps 1–22) without its
/// salt truncation, encoded as 43 base-64 characters.
fn sha256_crypt(password: &[u8], salt: &[u8], rounds: u32) -> [u8; SHA2_CRYPT_DIGEST_LEN] {
    let plen = password.len();
    // B = SHA256(P S P)
    let b = {
        let mut h = Sha256::new();
        h.update(password);
        h.update(salt);
        h.update(password);
        h.finalize()
    };
    // A = SHA256(P S, B for each 32 bytes of P, then B or P per bit of len(P))
    let mut a = Sha256::new();
    a.update(password);
    a.update(salt);
    let mut left = plen;
    while left > 32 {
        a.update(b);
        left -= 32;
    }
    a.update(&b[..left]);
    let mut bits = plen;
    while bits > 0 {
        if bits & 1 == 1 {
            a.update(b);
        } else {
            a.update(password);
        }
        bits >>= 1;
    }
    let mut acc: [u8; 32] = a.finalize().into();
    // P' = SHA256(P repeated len(P) times), stretched to len(P)
    let dp = {
        let mut h = Sha256::new();
        for _ in 0..plen {
            h.update(password);
        }
        h.finalize()
    };
    let p_seq: Vec<u8> = dp.iter().copied().cycle().take(plen).collect();
    // S' = SHA256(S repeated 16 + A[0] times), stretched to len(S)
    let ds = {
        let mut h = Sha256::new();
        for _ in 0..16 + usize::from(acc[0]) {
            h.update(salt);
        }
        h.finalize()
    };
    let s_seq: Vec<u8> = ds.iter().copied().cycle().take(salt.len()).collect();
    for i in 0..rounds {
        let mut h = Sha256::new();
        if i % 2 == 1 {
            h.update(&p_seq);
        } else {
            h.update(acc);
        }
        if i % 3 != 0 {
            h.update(&s_seq);
        }
        if i % 7 != 0 {
            h.update(&p_seq);
        }
        if i % 2 == 1 {
            h.update(acc);
        } else {
            h.update(&p_seq);
        }
        acc = h.finalize().into();
    }
    // The byte order of the encoding, three bytes per four characters, then two bytes.
    const ORDER: [(usize, usize, usize); 10] = [
        (0, 10, 20),
        (21, 1, 11),
        (12, 22, 2),
        (3, 13, 23),
        (24, 4, 14),
        (15, 25, 5),
        (6, 16, 26),
        (27, 7, 17),
        (18, 28, 8),
        (9, 19, 29),
    ];
    let mut out = [0u8; SHA2_CRYPT_DIGEST_LEN];
    let mut n = 0;
    let mut emit = |w: u32, chars: usize| {
        let mut w = w;
        for _ in 0..chars {
            out[n] = CRYPT_B64[(w & 0x3f) as usize];
            n += 1;
            w >>= 6;
        }
    };
    for (x, y, z) in ORDER {
        let w = u32::from(acc[x]) << 16 | u32::from(acc[y]) << 8 | u32::from(acc[z]);
        emit(w, 4);
    }
    emit(u32::from(acc[31]) << 8 | u32::from(acc[30]), 3);
    out
}

fn decode_hex_vec(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    if bytes.len() % 2 != 0 {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| {
            let hi = char::from(pair[0]).to_digit(16)?;
            let lo = char::from(pair[1]).to_digit(16)?;
            Some((hi * 16 + lo) as u8)
        })
        .collect()
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
        Credential::Sha2Hash(_) | Credential::Sha2Crypt { .. } => return false,
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
        Credential::Sha2Crypt {
            cached: Some(h), ..
        } => *h,
        Credential::NativeHash(_) | Credential::Sha2Crypt { cached: None, .. } => return false,
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
        Credential::Sha2Crypt { stored, .. } => stored.verify(password),
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

    fn unhex(s: &str) -> Vec<u8> {
        decode_hex_vec(s).unwrap_or_default()
    }

    #[test]
    fn sha256_crypt_matches_drepper_vectors() {
        // From the SHA-crypt specification's test vectors (salts of at most 16 bytes, where
        // glibc's truncation does not apply).
        type Vector = (&'static [u8], &'static [u8], u32, &'static [u8]);
        let cases: [Vector; 3] = [
            (
                b"Hello world!",
                b"saltstring",
                5000,
                b"5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5",
            ),
            (
                b"Hello world!",
                b"saltstringsaltst",
                10000,
                b"3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA",
            ),
            (
                b"a very much longer text to encrypt.  This one even stretches over morethan one line.",
                b"anotherlongsalts",
                1400,
                b"Rx.j8H.h8HjEDGomFU8bDkXm3XIUnzyxf12oP84Bnq1",
            ),
        ];
        for (pw, salt, rounds, want) in cases {
            assert_eq!(&sha256_crypt(pw, salt, rounds)[..], want);
        }
    }

    #[test]
    fn mysql_caching_sha2_hashes() -> Result<(), String> {
        // authentication_string values of MySQL 8 users, as hex (TiDB's parser/auth tests use
        // the first; the second is another published one).
        let foobar = unhex(
            "24412430303524031A69251C34295C4B35167C7F1E5A7B63091349503974624D34504B5A42467935\
             4856336868686F52485A736E4A733368786E427575516C73446469496537",
        );
        let stored = Sha2Crypt::parse(&foobar)?;
        assert!(stored.verify(b"foobar"));
        assert!(!stored.verify(b"not_foobar"));
        assert_eq!(stored.to_bytes(), foobar);
        let other = unhex(
            "244124303035245e3e122f765160382d0b1e4d416f3f6752557c3c4d726e5a68756f4a547547682e\
             536c504e6e76484a7854646b5452486d636e45464d61377a634147714144",
        );
        assert!(Sha2Crypt::parse(&other)?.verify(b"123456"));

        // The same through the configuration forms.
        let hexed: String = foobar.iter().map(|b| format!("{b:02X}")).collect();
        let c = Credential::from_mysql_hash(&format!("0x{hexed}"))?;
        assert!(verify_cleartext(&c, b"foobar"));
        assert!(
            !c.supports(AuthMethod::CachingSha2Password),
            "not before it is cached"
        );
        assert!(!c.supports(AuthMethod::NativePassword));
        assert!(Credential::from_mysql_hash("$A$005$short").is_err());
        assert!(
            Credential::from_mysql_hash("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19")
                .is_ok_and(|c| verify_cleartext(&c, b"password"))
        );
        assert!(Credential::from_mysql_hash(
            "0x2A32343730433043303644454534324644313631384242393930303541444341324543394431453139"
        )
        .is_ok_and(|c| verify_cleartext(&c, b"password")));
        assert!(Credential::from_mysql_hash("secret").is_err());
        Ok(())
    }

    #[test]
    fn generated_sha2_crypt_round_trips_and_caches() -> Result<(), String> {
        let made = Sha2Crypt::new(b"pw", *b"abcdefghij0123456789", SHA2_CRYPT_DEFAULT_ROUNDS);
        let text = made.to_bytes();
        assert!(text.starts_with(b"$A$005$abcdefghij0123456789"));
        let parsed = Sha2Crypt::parse(&text)?;
        assert!(parsed.verify(b"pw") && !parsed.verify(b"pW"));
        let cached = Credential::Sha2Crypt {
            stored: std::sync::Arc::new(parsed),
            cached: Some(sha2_double_hash(b"pw")),
        };
        assert!(cached.supports(AuthMethod::CachingSha2Password));
        let nonce = [7u8; 20];
        assert!(verify_caching_sha2(
            &cached,
            &nonce,
            &scramble_caching_sha2(&nonce, b"pw")
        ));
        Ok(())
    }

    #[test]
    fn an_overlong_password_is_refused_without_hashing() {
        let salt = *b"abcdefghij0123456789";
        let longest = vec![b'x'; SHA2_CRYPT_MAX_PASSWORD_LEN];
        let made = Sha2Crypt::new(&longest, salt, SHA2_CRYPT_DEFAULT_ROUNDS);
        assert!(made.verify(&longest));
        let over = vec![b'x'; SHA2_CRYPT_MAX_PASSWORD_LEN + 1];
        let made = Sha2Crypt::new(&over, salt, SHA2_CRYPT_DEFAULT_ROUNDS);
        assert!(!made.verify(&over));
        let credential = Credential::Sha2Crypt {
            stored: std::sync::Arc::new(made),
            cached: None,
        };
        assert!(!verify_cleartext(&credential, &over));
    }

    #[test]
    fn ct_eq_basics() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
        assert!(ct_eq(b"", b""));
    }
}
