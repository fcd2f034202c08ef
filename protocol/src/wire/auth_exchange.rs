//! The server side of authentication, from the client's HandshakeResponse to OK or ERR.
//!
//! A pure state machine: the connection feeds it client payloads and sends what it returns.
//!
//! ```text
//!            ┌─ plugin checkable with credential ── verify ──► Accept | Reject
//!  Start ────┤  (caching_sha2 fast path: Accept carries AuthMoreData 0x01 0x03 before OK)
//!  (client   ├─ caching_sha2, credential lacks SHA256, TLS ──► send 0x01 0x04 ──► AwaitCleartext
//!  response) │                                                      └─ password NUL ─► Accept | Reject
//!            └─ otherwise ── send AuthSwitchRequest(m) ──► AwaitSwitch(m) ── verify ─► Accept | Reject
//! ```
//!
//! # Full authentication
//!
//! caching_sha2's "full authentication" sends the cleartext password: as is over TLS, or on a
//! plain connection XORed with the nonce and RSA-OAEP (SHA-1) encrypted with the server's public
//! key, which the client may first request with `0x02` (answered `0x01` + PEM). The key pair
//! lives outside this crate ([`RsaKey`]). Without TLS and without a key, no full authentication
//! is asked for: a credential that cannot check the fast path (only SHA1(SHA1(pwd)) stored) gets
//! an AuthSwitchRequest to mysql_native_password instead, which every binlog client supports,
//! and is preferred even with a key (Connector/J refuses key retrieval unless
//! `allowPublicKeyRetrieval=true`). A cleartext password on a plain connection is never
//! accepted.
//!
//! Only one auth switch per connection is allowed; a client answering with something
//! unexpected is rejected rather than looped.

use super::{
    auth::{
        sha2_double_hash, verify_caching_sha2, verify_cleartext, verify_native, AuthMethod,
        Credential,
    },
    errors::{ErrorCode, ER_ACCESS_DENIED_ERROR, ER_NOT_SUPPORTED_AUTH_MODE},
    handshake::{
        auth_more_data, auth_switch_request, ClientHandshake, Scramble, FAST_AUTH_SUCCESS,
        PERFORM_FULL_AUTH, REQUEST_PUBLIC_KEY,
    },
    Result, WireError,
};

/// What the connection must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthStep {
    /// Send this payload, then feed the client's next packet to [`AuthExchange::on_client_packet`].
    Send(Vec<u8>),
    /// Authenticated: send `before_ok` (if any), then the OK packet.
    Accept { before_ok: Option<Vec<u8>> },
    /// Send ERR ([`AuthFailure::error_code`]) and close the connection.
    Reject(AuthRejection),
}

/// Why authentication failed, for the ERR packet and the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No such user (reported to the client exactly like a wrong password).
    UnknownUser,
    /// The proof did not match the credential.
    WrongPassword,
    /// The client asked for the RSA public key and the server has none (or asked twice).
    PublicKeyRequested,
    /// The client answered an auth switch with an unusable packet or plugin.
    SwitchFailed,
}

impl AuthFailure {
    /// The MySQL error to send.
    pub fn error_code(self) -> ErrorCode {
        match self {
            Self::SwitchFailed => ER_NOT_SUPPORTED_AUTH_MODE,
            _ => ER_ACCESS_DENIED_ERROR,
        }
    }
}

/// A failed login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthRejection {
    pub reason: AuthFailure,
    /// For the message's "(using password: YES|NO)".
    pub using_password: bool,
}

/// The server's RSA key pair for caching_sha2 full authentication on plain connections.
pub trait RsaKey: Send + Sync + std::fmt::Debug {
    /// The public key in PEM (`-----BEGIN PUBLIC KEY-----`, SubjectPublicKeyInfo).
    fn public_pem(&self) -> &[u8];
    /// The modulus length in bytes (the length of every ciphertext).
    fn size(&self) -> usize;
    /// RSA-OAEP (SHA-1, MGF1-SHA-1) decryption; `None` if the ciphertext is not valid.
    fn decrypt_oaep(&self, ciphertext: &[u8]) -> Option<Vec<u8>>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Start,
    AwaitSwitch(AuthMethod),
    /// Full authentication asked for; `key_sent` once the public key went out.
    AwaitCleartext {
        key_sent: bool,
    },
    Done,
}

/// One login attempt. Create it with [`AuthExchange::new`], then call
/// [`AuthExchange::on_handshake_response`] once and [`AuthExchange::on_client_packet`] for
/// every further client packet while the step is [`AuthStep::Send`].
#[derive(Debug)]
pub struct AuthExchange {
    state: State,
    nonce: Scramble,
    credential: Option<Credential>,
    tls: bool,
    /// The plugin the greeting announced; preferred target of an auth switch.
    greeting_method: AuthMethod,
    rsa: Option<std::sync::Arc<dyn RsaKey>>,
    /// SHA256(SHA256(password)) after a successful full authentication.
    learned: Option<[u8; 32]>,
}

impl AuthExchange {
    /// `credential` is `None` for an unknown user; `tls` says whether the socket is encrypted.
    pub fn new(
        nonce: Scramble,
        greeting_method: AuthMethod,
        credential: Option<Credential>,
        tls: bool,
    ) -> Self {
        Self {
            state: State::Start,
            nonce,
            credential,
            tls,
            greeting_method,
            rsa: None,
            learned: None,
        }
    }

    /// Lets full authentication on plain connections use this key pair.
    pub fn with_rsa_key(mut self, key: Option<std::sync::Arc<dyn RsaKey>>) -> Self {
        self.rsa = key;
        self
    }

    /// After a successful full authentication: SHA256(SHA256(password)), for the fast-path
    /// cache of a user stored as `$A$…` ([`Credential::Sha2Crypt`]).
    pub fn learned_fast_digest(&self) -> Option<[u8; 32]> {
        self.learned
    }

    fn can_full_auth(&self) -> bool {
        self.tls || self.rsa.is_some()
    }

    fn full_auth(&mut self) -> AuthStep {
        self.state = State::AwaitCleartext { key_sent: false };
        AuthStep::Send(auth_more_data(&[PERFORM_FULL_AUTH]))
    }

    /// Handles the client's HandshakeResponse41.
    pub fn on_handshake_response(&mut self, hello: &ClientHandshake) -> Result<AuthStep> {
        if self.state != State::Start {
            return Err(WireError::malformed(
                "auth exchange",
                "handshake response after the exchange started",
            ));
        }
        let response = &hello.auth_response;
        let Some(credential) = &self.credential else {
            return Ok(self.reject(AuthFailure::UnknownUser, response));
        };
        let native = credential.supports(AuthMethod::NativePassword);
        match hello.auth_method() {
            // A client that names another plugin than the greeting's and sends nothing has no
            // data for it (MariaDB's client library, whose default is mysql_native_password,
            // does this) and waits for that plugin's nonce: send it as an auth switch.
            Some(method)
                if hello.auth_plugin.is_some()
                    && method != self.greeting_method
                    && response.is_empty()
                    && credential.supports(method) =>
            {
                self.state = State::AwaitSwitch(method);
                Ok(AuthStep::Send(auth_switch_request(method, &self.nonce)))
            }
            Some(method) if credential.supports(method) => {
                Ok(self.verify_scramble(method, response))
            }
            // Over TLS full authentication costs one round trip; on plain TCP it needs the key
            // and is only worth it when native cannot check the credential.
            Some(AuthMethod::CachingSha2Password)
                if self.tls || (self.rsa.is_some() && !native) =>
            {
                Ok(self.full_auth())
            }
            current => {
                let target = if credential.supports(self.greeting_method) {
                    self.greeting_method
                } else if native {
                    AuthMethod::NativePassword
                } else {
                    AuthMethod::CachingSha2Password
                };
                if current == Some(target) {
                    // The client already answered with the only usable plugin.
                    return Ok(self.reject(AuthFailure::WrongPassword, response));
                }
                self.state = State::AwaitSwitch(target);
                Ok(AuthStep::Send(auth_switch_request(target, &self.nonce)))
            }
        }
    }

    /// Handles a client packet after an [`AuthStep::Send`].
    pub fn on_client_packet(&mut self, payload: &[u8]) -> Result<AuthStep> {
        match self.state.clone() {
            State::AwaitSwitch(method) => Ok(self.verify_scramble(method, payload)),
            State::AwaitCleartext { key_sent } => {
                if payload == [REQUEST_PUBLIC_KEY] {
                    return match (&self.rsa, key_sent) {
                        (Some(key), false) => {
                            let reply = auth_more_data(key.public_pem());
                            self.state = State::AwaitCleartext { key_sent: true };
                            Ok(AuthStep::Send(reply))
                        }
                        _ => Ok(self.reject(AuthFailure::PublicKeyRequested, payload)),
                    };
                }
                let password = if self.tls {
                    payload.strip_suffix(&[0]).unwrap_or(payload).to_vec()
                } else {
                    // Never a cleartext password in clear: only what the key pair decrypts.
                    let decrypted = self
                        .rsa
                        .as_ref()
                        .filter(|k| payload.len() == k.size())
                        .and_then(|k| k.decrypt_oaep(payload));
                    let Some(mut bytes) = decrypted else {
                        return Ok(self.reject(AuthFailure::WrongPassword, payload));
                    };
                    let nonce = self.nonce.as_bytes();
                    for (i, b) in bytes.iter_mut().enumerate() {
                        *b ^= nonce[i % nonce.len()];
                    }
                    if bytes.last() == Some(&0) {
                        bytes.pop();
                    }
                    bytes
                };
                let ok = self
                    .credential
                    .as_ref()
                    .is_some_and(|c| verify_cleartext(c, &password));
                if ok {
                    self.learned = Some(sha2_double_hash(&password));
                }
                Ok(self.finish(ok, None, &password))
            }
            State::Start | State::Done => Err(WireError::malformed(
                "auth exchange",
                "client packet outside the authentication dialogue",
            )),
        }
    }

    fn verify_scramble(&mut self, method: AuthMethod, response: &[u8]) -> AuthStep {
        // Connector/J answers for an empty password with one NUL byte; MySQL's plugins take
        // that as the empty response (no scramble is one byte long).
        let response = if response == [0] { &[][..] } else { response };
        let Some(credential) = &self.credential else {
            return self.reject(AuthFailure::UnknownUser, response);
        };
        let nonce = self.nonce.as_bytes();
        match method {
            AuthMethod::NativePassword => {
                let ok = verify_native(credential, nonce, response);
                self.finish(ok, None, response)
            }
            AuthMethod::CachingSha2Password => {
                if !credential.supports(method) && !response.is_empty() {
                    // MySQL's cache miss: ask for the password itself.
                    if self.can_full_auth() {
                        return self.full_auth();
                    }
                    return self.reject(AuthFailure::WrongPassword, response);
                }
                let ok = verify_caching_sha2(credential, nonce, response);
                // MySQL answers a successful non-empty fast path with 0x01 0x03 before OK;
                // for the empty password it sends OK straight away.
                let before_ok =
                    (!response.is_empty()).then(|| auth_more_data(&[FAST_AUTH_SUCCESS]));
                self.finish(ok, before_ok, response)
            }
        }
    }

    fn finish(&mut self, ok: bool, before_ok: Option<Vec<u8>>, response: &[u8]) -> AuthStep {
        if ok {
            self.state = State::Done;
            AuthStep::Accept { before_ok }
        } else {
            self.reject(AuthFailure::WrongPassword, response)
        }
    }

    fn reject(&mut self, reason: AuthFailure, response: &[u8]) -> AuthStep {
        self.state = State::Done;
        AuthStep::Reject(AuthRejection {
            reason,
            using_password: !response.is_empty(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        auth::{native_double_hash, scramble_caching_sha2, scramble_native},
        CapabilityFlags,
    };

    fn hello(plugin: Option<&str>, response: Vec<u8>) -> ClientHandshake {
        ClientHandshake {
            capabilities: CapabilityFlags::CLIENT_PROTOCOL_41,
            max_packet_size: 0,
            collation: 45,
            user: "repl".into(),
            auth_response: response,
            database: None,
            auth_plugin: plugin.map(Into::into),
            connect_attrs: Vec::new(),
        }
    }

    fn nonce() -> Scramble {
        Scramble::from_random(*b"0123456789abcdefghij")
    }

    fn exchange(cred: Option<Credential>, tls: bool) -> AuthExchange {
        AuthExchange::new(nonce(), AuthMethod::CachingSha2Password, cred, tls)
    }

    #[test]
    fn caching_sha2_fast_path() -> Result<()> {
        let n = nonce();
        let resp = scramble_caching_sha2(n.as_bytes(), b"pw");
        let mut ex = exchange(Some(Credential::Password(b"pw".to_vec())), false);
        let step = ex.on_handshake_response(&hello(Some("caching_sha2_password"), resp))?;
        assert_eq!(
            step,
            AuthStep::Accept {
                before_ok: Some(vec![0x01, 0x03])
            }
        );
        assert!(
            ex.on_client_packet(b"late").is_err(),
            "no transitions after Done"
        );
        Ok(())
    }

    #[test]
    fn native_and_wrong_password() -> Result<()> {
        let n = nonce();
        let cred = Credential::NativeHash(native_double_hash(b"pw"));
        let mut ex = AuthExchange::new(n, AuthMethod::NativePassword, Some(cred.clone()), false);
        let ok = ex.on_handshake_response(&hello(
            Some("mysql_native_password"),
            scramble_native(n.as_bytes(), b"pw"),
        ))?;
        assert_eq!(ok, AuthStep::Accept { before_ok: None });

        let mut ex = AuthExchange::new(n, AuthMethod::NativePassword, Some(cred), false);
        let bad = ex.on_handshake_response(&hello(None, scramble_native(n.as_bytes(), b"nope")))?;
        assert_eq!(
            bad,
            AuthStep::Reject(AuthRejection {
                reason: AuthFailure::WrongPassword,
                using_password: true
            })
        );
        Ok(())
    }

    #[test]
    fn unknown_user_is_rejected_like_a_bad_password() -> Result<()> {
        let mut ex = exchange(None, false);
        let step = ex.on_handshake_response(&hello(None, Vec::new()))?;
        let AuthStep::Reject(r) = step else {
            return Err(WireError::malformed("test", "expected reject"));
        };
        assert_eq!(r.reason.error_code(), ER_ACCESS_DENIED_ERROR);
        assert!(!r.using_password);
        Ok(())
    }

    #[test]
    fn native_hash_on_plain_tcp_switches_to_native() -> Result<()> {
        let n = nonce();
        let cred = Credential::NativeHash(native_double_hash(b"pw"));
        let mut ex = exchange(Some(cred), false);
        let step = ex.on_handshake_response(&hello(
            Some("caching_sha2_password"),
            scramble_caching_sha2(n.as_bytes(), b"pw"),
        ))?;
        assert_eq!(
            step,
            AuthStep::Send(auth_switch_request(AuthMethod::NativePassword, &n))
        );
        let step = ex.on_client_packet(&scramble_native(n.as_bytes(), b"pw"))?;
        assert_eq!(step, AuthStep::Accept { before_ok: None });
        Ok(())
    }

    #[test]
    fn full_auth_over_tls_with_cleartext() -> Result<()> {
        let n = nonce();
        let cred = Credential::NativeHash(native_double_hash(b"pw"));
        let mut ex = exchange(Some(cred.clone()), true);
        let step = ex.on_handshake_response(&hello(
            Some("caching_sha2_password"),
            scramble_caching_sha2(n.as_bytes(), b"pw"),
        ))?;
        assert_eq!(step, AuthStep::Send(vec![0x01, 0x04]));
        assert_eq!(
            ex.on_client_packet(b"pw\0")?,
            AuthStep::Accept { before_ok: None }
        );

        let mut ex = exchange(Some(cred.clone()), true);
        ex.on_handshake_response(&hello(Some("caching_sha2_password"), vec![1; 32]))?;
        assert!(matches!(
            ex.on_client_packet(b"bad\0")?,
            AuthStep::Reject(_)
        ));

        let mut ex = exchange(Some(cred), true);
        ex.on_handshake_response(&hello(Some("caching_sha2_password"), vec![1; 32]))?;
        let step = ex.on_client_packet(&[REQUEST_PUBLIC_KEY])?;
        assert!(matches!(
            step,
            AuthStep::Reject(AuthRejection {
                reason: AuthFailure::PublicKeyRequested,
                ..
            })
        ));
        Ok(())
    }

    #[test]
    fn unknown_plugin_switches_to_greeting_method() -> Result<()> {
        let n = nonce();
        let cred = Credential::Sha2Hash(sha2_double_hash(b"pw"));
        let mut ex = exchange(Some(cred), false);
        let step =
            ex.on_handshake_response(&hello(Some("mysql_clear_password"), b"pw".to_vec()))?;
        assert_eq!(
            step,
            AuthStep::Send(auth_switch_request(AuthMethod::CachingSha2Password, &n))
        );
        let step = ex.on_client_packet(&scramble_caching_sha2(n.as_bytes(), b"pw"))?;
        assert_eq!(
            step,
            AuthStep::Accept {
                before_ok: Some(vec![1, 3])
            }
        );
        Ok(())
    }

    /// A stand-in key pair: "ciphertext" is the plaintext padded with 0xFF to 32 bytes (the
    /// real RSA is the server's and is tested there against real clients).
    #[derive(Debug)]
    struct PadKey;

    impl RsaKey for PadKey {
        fn public_pem(&self) -> &[u8] {
            b"-----BEGIN PUBLIC KEY-----\nPAD\n-----END PUBLIC KEY-----\n"
        }
        fn size(&self) -> usize {
            32
        }
        fn decrypt_oaep(&self, c: &[u8]) -> Option<Vec<u8>> {
            let end = c.iter().position(|b| *b == 0xff).unwrap_or(c.len());
            Some(c[..end].to_vec())
        }
    }

    fn pad_encrypt(n: &Scramble, password: &[u8]) -> Vec<u8> {
        let mut v: Vec<u8> = password.iter().copied().chain([0]).collect();
        for (i, b) in v.iter_mut().enumerate() {
            *b ^= n.as_bytes()[i % 20];
        }
        v.resize(32, 0xff);
        v
    }

    fn sha2_crypt_user(password: &[u8]) -> Credential {
        let stored = crate::wire::auth::Sha2Crypt::new(password, *b"saltsaltsaltsaltsalt", 5000);
        Credential::Sha2Crypt {
            stored: std::sync::Arc::new(stored),
            cached: None,
        }
    }

    #[test]
    fn stored_sha2_hash_takes_full_auth_with_the_public_key() -> Result<()> {
        let n = nonce();
        let key: std::sync::Arc<dyn RsaKey> = std::sync::Arc::new(PadKey);
        let mut ex = exchange(Some(sha2_crypt_user(b"pw")), false).with_rsa_key(Some(key.clone()));
        let step = ex.on_handshake_response(&hello(
            Some("caching_sha2_password"),
            scramble_caching_sha2(n.as_bytes(), b"pw"),
        ))?;
        assert_eq!(
            step,
            AuthStep::Send(vec![0x01, 0x04]),
            "cache miss: full auth"
        );
        let step = ex.on_client_packet(&[REQUEST_PUBLIC_KEY])?;
        assert_eq!(step, AuthStep::Send(auth_more_data(key.public_pem())));
        assert_eq!(
            ex.on_client_packet(&pad_encrypt(&n, b"pw"))?,
            AuthStep::Accept { before_ok: None }
        );
        assert_eq!(ex.learned_fast_digest(), Some(sha2_double_hash(b"pw")));

        // A wrong password, a second key request, a cleartext password in clear.
        let mut ex = exchange(Some(sha2_crypt_user(b"pw")), false).with_rsa_key(Some(key.clone()));
        ex.on_handshake_response(&hello(Some("caching_sha2_password"), vec![9; 32]))?;
        assert!(matches!(
            ex.on_client_packet(&pad_encrypt(&n, b"pW"))?,
            AuthStep::Reject(_)
        ));
        assert_eq!(ex.learned_fast_digest(), None);
        let mut ex = exchange(Some(sha2_crypt_user(b"pw")), false).with_rsa_key(Some(key.clone()));
        ex.on_handshake_response(&hello(Some("caching_sha2_password"), vec![9; 32]))?;
        ex.on_client_packet(&[REQUEST_PUBLIC_KEY])?;
        assert!(matches!(
            ex.on_client_packet(&[REQUEST_PUBLIC_KEY])?,
            AuthStep::Reject(AuthRejection {
                reason: AuthFailure::PublicKeyRequested,
                ..
            })
        ));
        let mut ex = exchange(Some(sha2_crypt_user(b"pw")), false).with_rsa_key(Some(key.clone()));
        ex.on_handshake_response(&hello(Some("caching_sha2_password"), vec![9; 32]))?;
        assert!(matches!(ex.on_client_packet(b"pw\0")?, AuthStep::Reject(_)));

        // A native client is switched to caching_sha2, then taken to full auth.
        let mut ex = exchange(Some(sha2_crypt_user(b"pw")), false).with_rsa_key(Some(key));
        let step = ex.on_handshake_response(&hello(
            Some("mysql_native_password"),
            scramble_native(n.as_bytes(), b"pw"),
        ))?;
        assert_eq!(
            step,
            AuthStep::Send(auth_switch_request(AuthMethod::CachingSha2Password, &n))
        );
        let step = ex.on_client_packet(&scramble_caching_sha2(n.as_bytes(), b"pw"))?;
        assert_eq!(step, AuthStep::Send(vec![0x01, 0x04]));
        Ok(())
    }

    #[test]
    fn stored_sha2_hash_without_key_or_tls_is_refused_and_cached_takes_fast_path() -> Result<()> {
        let n = nonce();
        let mut ex = exchange(Some(sha2_crypt_user(b"pw")), false);
        let step = ex.on_handshake_response(&hello(
            Some("caching_sha2_password"),
            scramble_caching_sha2(n.as_bytes(), b"pw"),
        ))?;
        assert!(matches!(step, AuthStep::Reject(_)));

        let Credential::Sha2Crypt { stored, .. } = sha2_crypt_user(b"pw") else {
            return Err(WireError::malformed("test", "not a Sha2Crypt"));
        };
        let cached = Credential::Sha2Crypt {
            stored,
            cached: Some(sha2_double_hash(b"pw")),
        };
        let mut ex = exchange(Some(cached), false);
        let step = ex.on_handshake_response(&hello(
            Some("caching_sha2_password"),
            scramble_caching_sha2(n.as_bytes(), b"pw"),
        ))?;
        assert_eq!(
            step,
            AuthStep::Accept {
                before_ok: Some(vec![1, 3])
            }
        );
        Ok(())
    }

    #[test]
    fn an_empty_answer_for_another_plugin_gets_that_plugins_nonce() -> Result<()> {
        // MariaDB's client: greeting caching_sha2, answer mysql_native_password with no data.
        let n = nonce();
        for password in [&b""[..], b"pw"] {
            let mut ex = exchange(Some(Credential::Password(password.to_vec())), false);
            let step =
                ex.on_handshake_response(&hello(Some("mysql_native_password"), Vec::new()))?;
            assert_eq!(
                step,
                AuthStep::Send(auth_switch_request(AuthMethod::NativePassword, &n))
            );
            let step = ex.on_client_packet(&scramble_native(n.as_bytes(), password))?;
            assert_eq!(step, AuthStep::Accept { before_ok: None });
        }
        // A client without CLIENT_PLUGIN_AUTH (no plugin name) cannot take a switch.
        let mut ex = exchange(Some(Credential::Password(Vec::new())), false);
        let step = ex.on_handshake_response(&hello(None, Vec::new()))?;
        assert_eq!(step, AuthStep::Accept { before_ok: None });
        Ok(())
    }

    #[test]
    fn a_single_nul_is_the_empty_password() -> Result<()> {
        for plugin in ["caching_sha2_password", "mysql_native_password"] {
            let mut ex = exchange(Some(Credential::Password(Vec::new())), false);
            let step = ex.on_handshake_response(&hello(Some(plugin), vec![0]))?;
            assert_eq!(step, AuthStep::Accept { before_ok: None }, "{plugin}");
            let mut ex = exchange(Some(Credential::Password(b"pw".to_vec())), false);
            let step = ex.on_handshake_response(&hello(Some(plugin), vec![0]))?;
            assert_eq!(
                step,
                AuthStep::Reject(AuthRejection {
                    reason: AuthFailure::WrongPassword,
                    using_password: false
                }),
                "{plugin}"
            );
        }
        Ok(())
    }

    #[test]
    fn empty_password_fast_path_has_no_preamble() -> Result<()> {
        let mut ex = exchange(Some(Credential::Password(Vec::new())), false);
        let step = ex.on_handshake_response(&hello(Some("caching_sha2_password"), Vec::new()))?;
        assert_eq!(step, AuthStep::Accept { before_ok: None });
        Ok(())
    }
}
