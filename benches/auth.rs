//! What a login costs: the server-side checks alone, and whole logins (connect, authenticate,
//! COM_QUIT) by mysql_async per authentication path.
//!
//!   cargo bench --bench auth                 (AUTH_LOGINS=200 logins per path)
//!
//! Paths: mysql_native_password against a `*…` hash; caching_sha2_password's fast path (the
//! SHA256 scramble); its full authentication on a plain connection (each login a different
//! `$A$005$…` account, so none is in the fast-path cache: the client fetches the RSA public key,
//! sends the password RSA-OAEP encrypted, the server decrypts it and runs SHA-256-crypt).

use std::sync::Arc;
use std::time::Instant;

use tibinlog::server::rsa_key::ServerRsaKey;
use tibinlog::server::testing::MemSource;
use tibinlog::server::users::{hash_password, Privileges, User, Users};
use tibinlog::server::{EmptySchema, Server, ServerConfig};
use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::wire::auth::{
    scramble_caching_sha2, scramble_native, sha2_double_hash, verify_caching_sha2, verify_native,
    AuthMethod, Credential, Sha2Crypt,
};
use tibinlog_protocol::wire::auth_exchange::RsaKey;
use tokio_util::sync::CancellationToken;

#[path = "common/util.rs"]
mod util;
use util::{env_num, mysql_opts};

/// Runs `f` `n` times; prints and returns the mean in microseconds.
fn time_each(what: &str, n: usize, mut f: impl FnMut()) -> f64 {
    let began = Instant::now();
    for _ in 0..n {
        f();
    }
    let us = began.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!("{what:<58} {us:>10.1} µs");
    us
}

fn checks() {
    let nonce = [0x41u8; 20];
    let pw = b"a-password";
    let native =
        Credential::from_mysql_hash(&hash_password(AuthMethod::NativePassword, pw).expect("hash"))
            .expect("parse");
    let native_resp = scramble_native(&nonce, pw);
    time_each("verify mysql_native_password scramble", 20_000, || {
        assert!(verify_native(&native, &nonce, &native_resp));
    });
    let fast = Credential::Sha2Hash(sha2_double_hash(pw));
    let fast_resp = scramble_caching_sha2(&nonce, pw);
    time_each("verify caching_sha2 fast-path scramble", 20_000, || {
        assert!(verify_caching_sha2(&fast, &nonce, &fast_resp));
    });
    let stored = Sha2Crypt::new(pw, *b"0123456789abcdefghij", 5000);
    time_each("verify $A$005$ (SHA-256-crypt, 5000 rounds)", 200, || {
        assert!(stored.verify(pw));
    });
    let keygen = time_each("generate a 2048-bit RSA key", 3, || {
        ServerRsaKey::generate().expect("key");
    });
    let _ = keygen;
    let key = ServerRsaKey::generate().expect("key");
    let cipher = encrypt(&key, b"a-password\0");
    time_each("RSA-OAEP decrypt (2048 bits)", 500, || {
        assert!(key.decrypt_oaep(&cipher).is_some());
    });
}

fn encrypt(key: &ServerRsaKey, plain: &[u8]) -> Vec<u8> {
    use aws_lc_rs::rsa::{OaepPublicEncryptingKey, PublicEncryptingKey, OAEP_SHA1_MGF1SHA1};
    use tokio_rustls::rustls::pki_types::{pem::PemObject, SubjectPublicKeyInfoDer};
    let spki = SubjectPublicKeyInfoDer::from_pem_slice(key.public_pem()).expect("pem");
    let public =
        OaepPublicEncryptingKey::new(PublicEncryptingKey::from_der(spki.as_ref()).expect("der"))
            .expect("oaep");
    let mut out = vec![0u8; public.ciphertext_size()];
    public
        .encrypt(&OAEP_SHA1_MGF1SHA1, plain, &mut out, None)
        .expect("encrypt")
        .to_vec()
}

async fn logins(n: usize) {
    let mut users = vec![
        User {
            name: "native".into(),
            credential: Credential::from_mysql_hash(
                &hash_password(AuthMethod::NativePassword, b"pw").expect("hash"),
            )
            .expect("parse"),
            privileges: Privileges::NONE,
        },
        User {
            name: "fast".into(),
            credential: Credential::Password(b"pw".to_vec()),
            privileges: Privileges::NONE,
        },
    ];
    for i in 0..n {
        users.push(User {
            name: format!("full{i}"),
            credential: Credential::from_mysql_hash(
                &hash_password(AuthMethod::CachingSha2Password, b"pw").expect("hash"),
            )
            .expect("parse"),
            privileges: Privileges::NONE,
        });
    }
    let sid = Sid::parse("3e11fa47-71ca-11e1-9e33-c80aa9429562").expect("uuid");
    let cfg = ServerConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        users: Arc::new(Users::new(users)),
        rsa_key: Some(Arc::new(ServerRsaKey::generate().expect("key"))),
        server_id: 1,
        server_uuid: sid,
        mariadb: false,
        tls: None,
        auth_plugin: AuthMethod::CachingSha2Password,
        default_heartbeat: None,
        snapshot: None,
        max_binlog_size: 1 << 30,
        expire_logs_seconds: 0,
        net_write_timeout: tibinlog::server::session::NET_WRITE_TIMEOUT,
        limits: tibinlog::server::Limits::default(),
        capture: None,
        metrics: Default::default(),
    };
    let source = MemSource::new(1, sid, true);
    let server = Server::bind(cfg, Arc::new(source), Arc::new(EmptySchema))
        .await
        .expect("bind");
    let port = server.local_addr().port();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(server.run(cancel.clone()));
    let opts = |user: &str| -> mysql_async::Opts {
        mysql_async::OptsBuilder::from_opts(mysql_opts(port, user))
            .pass(Some("pw"))
            .into()
    };
    let mut results = Vec::new();
    for (what, user) in [
        ("mysql_native_password (switched from caching_sha2)", None),
        ("caching_sha2_password fast path", Some("fast")),
        (
            "caching_sha2_password full auth, RSA on plain TCP",
            Some("full"),
        ),
    ] {
        let began = Instant::now();
        for i in 0..n {
            let name = match user {
                None => "native".to_owned(),
                Some("full") => format!("full{i}"),
                Some(u) => u.to_owned(),
            };
            let conn = mysql_async::Conn::new(opts(&name)).await.expect("login");
            conn.disconnect().await.expect("quit");
        }
        let per = began.elapsed().as_secs_f64() / n as f64;
        println!(
            "login: {what:<52} {:>7.2} ms  {:>7.0} logins/s",
            per * 1e3,
            1.0 / per
        );
        results.push(per);
    }
    println!(
        "full authentication costs {:.1}× a fast-path login",
        results[2] / results[1]
    );
    cancel.cancel();
    let _ = run.await;
}

fn main() {
    checks();
    let n = env_num("AUTH_LOGINS", 200);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(logins(n));
}
