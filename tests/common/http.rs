//! A minimal HTTP/1.1 client for the status listener (GET only, `Connection: close`).

#![allow(dead_code)]

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A response: status code, `Content-Type`, body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

/// `GET path` on `addr`.
pub async fn get(addr: SocketAddr, path: &str) -> Response {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the status listener");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("send request");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.expect("read response");
    let text = String::from_utf8(raw).expect("utf-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("header end");
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let mut content_type = String::new();
    let mut chunked = false;
    for l in lines {
        let (k, v) = l.split_once(':').expect("header line");
        if k.eq_ignore_ascii_case("content-type") {
            content_type = v.trim().to_owned();
        }
        if k.eq_ignore_ascii_case("transfer-encoding") && v.trim() == "chunked" {
            chunked = true;
        }
    }
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Response {
        status,
        content_type,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").expect("chunk size");
        let n = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
        if n == 0 {
            return out;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
}

/// `GET path` as JSON (status 200 asserted).
pub async fn get_json(addr: SocketAddr, path: &str) -> serde_json::Value {
    let r = get(addr, path).await;
    assert_eq!(r.status, 200, "GET {path}: {}", r.body);
    assert!(
        r.content_type.starts_with("application/json"),
        "GET {path}: content type {}",
        r.content_type
    );
    serde_json::from_str(&r.body).expect("JSON body")
}

/// The samples of a Prometheus text exposition: `name{labels}` → value.
pub fn samples(text: &str) -> std::collections::BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}
