//! The login: a handshake response (or SSLRequest) and the packets of the auth exchange that
//! follow, against a user with a password, one with its native hash, one with its SHA2 hash, one
//! stored as MySQL's `$A$005$…` (with and without its fast-path digest cached) and an unknown
//! one, over plain and TLS sockets, with and without an RSA key for full authentication (a
//! stand-in whose "ciphertext" is the nonce-XORed password, so the password stays visible to
//! the check). Never a panic; never accepted without the password.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

use tibinlog_protocol::wire::auth::{AuthMethod, Credential, Sha2Crypt};
use tibinlog_protocol::wire::auth_exchange::{AuthExchange, AuthStep, RsaKey};
use tibinlog_protocol::wire::handshake::{decode_client_hello, ClientHello, Scramble};

const NONCE: [u8; 20] = [7; 20];

/// The RSA stand-in: 32-byte "ciphertexts", decrypted by XOR with the nonce so that the exchange's
/// own XOR gives back the bytes the client sent.
#[derive(Debug)]
struct XorKey;

impl RsaKey for XorKey {
    fn public_pem(&self) -> &[u8] {
        b"-----BEGIN PUBLIC KEY-----\nX\n-----END PUBLIC KEY-----\n"
    }
    fn size(&self) -> usize {
        32
    }
    fn decrypt_oaep(&self, c: &[u8]) -> Option<Vec<u8>> {
        let end = c.iter().position(|b| *b == 0).map_or(c.len(), |i| i + 1);
        Some(
            c[..end]
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ NONCE[i % 20])
                .collect(),
        )
    }
}

fn stored() -> Arc<Sha2Crypt> {
    static STORED: OnceLock<Arc<Sha2Crypt>> = OnceLock::new();
    STORED
        .get_or_init(|| Arc::new(Sha2Crypt::new(b"s3cret pw", *b"fuzzsaltfuzzsaltfuzz", 5000)))
        .clone()
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    // Packets separated by 0xFF 0xFE (the first is the handshake response).
    let mut packets = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < rest.len() {
        if rest[i] == 0xFF && rest[i + 1] == 0xFE {
            packets.push(&rest[start..i]);
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
    packets.push(&rest[start..]);
    let Ok(ClientHello::Response(hello)) = decode_client_hello(packets[0]) else {
        return;
    };
    let password = b"s3cret pw";
    let credential = match sel % 6 {
        0 => Some(Credential::Password(password.to_vec())),
        1 => Some(Credential::NativeHash(
            tibinlog_protocol::wire::auth::native_double_hash(password),
        )),
        2 => Some(Credential::Sha2Hash(
            tibinlog_protocol::wire::auth::sha2_double_hash(password),
        )),
        3 => Some(Credential::Sha2Crypt {
            stored: stored(),
            cached: None,
        }),
        4 => Some(Credential::Sha2Crypt {
            stored: stored(),
            cached: Some(tibinlog_protocol::wire::auth::sha2_double_hash(password)),
        }),
        _ => None,
    };
    let method = if sel & 0x40 == 0 {
        AuthMethod::NativePassword
    } else {
        AuthMethod::CachingSha2Password
    };
    let tls = sel & 0x80 != 0;
    let key: Option<Arc<dyn RsaKey>> = (sel & 0x20 != 0).then(|| Arc::new(XorKey) as _);
    let nonce = Scramble::from_random(NONCE);
    let mut ex = AuthExchange::new(nonce, method, credential.clone(), tls).with_rsa_key(key);
    let Ok(mut step) = ex.on_handshake_response(&hello) else {
        return;
    };
    for p in &packets[1..] {
        match step {
            AuthStep::Send(_) => match ex.on_client_packet(p) {
                Ok(s) => step = s,
                Err(_) => return,
            },
            _ => break,
        }
    }
    if let AuthStep::Accept { .. } = step {
        // Acceptance needs the password: random bytes cannot be a valid scramble of it
        // (the fuzzer could only find one by breaking SHA-1/SHA-256), and an unknown user
        // is never accepted.
        assert!(credential.is_some(), "unknown user accepted");
        let sent_password = packets
            .iter()
            .any(|p| p.windows(password.len()).any(|w| w == password));
        assert!(sent_password, "accepted without the password");
    }
});
