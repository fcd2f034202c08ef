//! COM_QUERY through the SQL front: any statement text (several, separated by `;`, in one
//! session) against a server over an in-memory binlog with a few transactions. Never a panic;
//! every statement gets a reply.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use tibinlog::server::admin;
use tibinlog::server::session::{ConnInfo, Session};
use tibinlog::server::testing::MemSource;
use tibinlog::server::{EmptySchema, Server, ServerConfig, Shared};
use tibinlog_protocol::wire::auth::AuthMethod;
use tibinlog_protocol::wire::handshake::server_capabilities;

struct Fixture {
    _rt: tokio::runtime::Runtime,
    shared: Arc<Shared>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let sid = tibinlog_protocol::binlog::Sid([9; 16]);
        let source = MemSource::new(1, sid, true);
        for t in 0..5 {
            source.append_insert(&[(t, "a"), (t + 100, "b")]);
        }
        let cfg = ServerConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            users: Arc::new(tibinlog::server::users::Users::single("root", "")),
            rsa_key: None,
            mariadb: false,
            server_id: 1,
            server_uuid: sid,
            tls: None,
            auth_plugin: AuthMethod::NativePassword,
            default_heartbeat: None,
            snapshot: None,
            max_binlog_size: 1 << 20,
            expire_logs_seconds: 0,
            net_write_timeout: std::time::Duration::from_secs(1),
            capture: None,
            limits: Default::default(),
            metrics: Default::default(),
        };
        let server = rt
            .block_on(Server::bind(cfg, Arc::new(source), Arc::new(EmptySchema)))
            .expect("bind");
        Fixture {
            shared: server.shared(),
            _rt: rt,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let f = fixture();
    let info = ConnInfo {
        id: 1,
        user: "root".into(),
        host: "127.0.0.1".into(),
        privileges: tibinlog::server::users::Privileges::ALL,
        capabilities: server_capabilities(false),
        database: None,
        mariadb_client: false,
        cancel: Default::default(),
        interrupt: Default::default(),
        tls: None,
        activity: Arc::new(tibinlog::server::activity::Activity::new(
            "127.0.0.1:1".into(),
        )),
    };
    let mut session = Session::default();
    for sql in text.split(";\n") {
        let replies = admin::execute(&f.shared, &info, &mut session, sql);
        assert!(!replies.is_empty(), "no reply to {sql:?}");
    }
});
