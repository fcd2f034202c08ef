//! Small helpers of the benchmarks that run servers (`serve`, `select`, `huge_txn`, `regions`,
//! `capture`).
#![allow(dead_code)]

/// `name` from the environment, parsed, or `default`.
pub fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number")),
        Err(_) => default,
    }
}

/// Bytes as MiB.
pub fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A free loopback port (the listener is closed before MariaDB binds it).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Connection options for `user` (empty password) on the loopback `port`.
pub fn mysql_opts(port: u16, user: &str) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(""))
        .prefer_socket(false)
        .into()
}

/// `VmRSS` and `VmHWM` (peak) of process `pid` (`"self"` for this one), in bytes; 0 if unknown.
pub fn rss(pid: &str) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The `/api/v1/status` document of the server whose status API listens on loopback `port`.
pub fn status(port: u16) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    s.write_all(b"GET /api/v1/status HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let (_, json) = body.split_once("\r\n\r\n")?;
    serde_json::from_str(json).ok()
}
