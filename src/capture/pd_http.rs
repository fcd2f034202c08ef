//! PD's HTTP API, the one call this project makes of it: the region statistics of a key range
//! (`GET /pd/api/v1/stats/region`), which is how TiDB sizes a table from PD.
//!
//! PD serves the API on its client URLs, beside gRPC: plain HTTP/1.1, or over TLS with the same
//! client certificate gRPC uses. Range keys travel in region form (memcomparable-encoded raw
//! keys), query-escaped byte by byte.

use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use percent_encoding::{percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::Deserialize;

use crate::security::ClusterTls;
use crate::tidb::key::encode_region_key;

/// Largest response body read (a `stats/region` answer is well under a kilobyte per store).
const MAX_BODY: usize = 1 << 20;

/// What PD sums over the regions overlapping a range (the fields this project reads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct RangeStats {
    /// Regions overlapping the range.
    #[serde(default)]
    pub count: u64,
    /// Of them, regions of at most 1 MiB.
    #[serde(default)]
    pub empty_count: u64,
    /// Approximate size, MiB (a non-empty region below 1 MiB counts as 1).
    #[serde(default)]
    pub storage_size: u64,
    /// Approximate keys: TiKV's write-column-family entries, every version until GC.
    #[serde(default)]
    pub storage_keys: u64,
}

/// Characters a query value keeps unescaped: the unreserved ones of RFC 3986.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The path and query asking the statistics of the raw key range `[start, end)` (an empty key
/// is no bound).
pub fn stats_region_path(start: &[u8], end: &[u8]) -> String {
    let region_key = |k: &[u8]| {
        if k.is_empty() {
            Vec::new()
        } else {
            encode_region_key(k)
        }
    };
    let (start, end) = (region_key(start), region_key(end));
    format!(
        "/pd/api/v1/stats/region?start_key={}&end_key={}",
        percent_encode(&start, QUERY_VALUE),
        percent_encode(&end, QUERY_VALUE)
    )
}

/// Parses a `stats/region` answer.
pub fn parse_stats(body: &[u8]) -> Result<RangeStats, String> {
    serde_json::from_slice(body).map_err(|e| format!("PD's region statistics: {e}"))
}

/// `host:port` of a PD address (`host:port` or a URL).
fn authority(addr: &str) -> &str {
    let rest = addr.split_once("://").map_or(addr, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest)
}

/// `GET path` on the PD member at `addr`; the body of a 200 answer. TLS is used when `tls` is
/// given (every PD URL is then `https`).
pub async fn get(
    addr: &str,
    path: &str,
    tls: Option<&ClusterTls>,
    limit: Duration,
) -> Result<Bytes, String> {
    let host_port = authority(addr);
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect(host_port)
            .await
            .map_err(|e| format!("connect {host_port}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        match tls {
            None => exchange(TokioIo::new(tcp), host_port, path).await,
            Some(tls) => {
                let host = host_port
                    .rsplit_once(':')
                    .map_or(host_port, |(h, _)| h)
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| format!("server name {host}: {e}"))?;
                let stream = tls
                    .http1_connector()
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS to {host_port}: {e}"))?;
                exchange(TokioIo::new(stream), host_port, path).await
            }
        }
    };
    tokio::time::timeout(limit, attempt)
        .await
        .map_err(|_| format!("GET {path} on {host_port} timed out"))?
}

/// One request on a fresh HTTP/1.1 connection.
async fn exchange<IO>(io: IO, host: &str, path: &str) -> Result<Bytes, String>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(io)
        .await
        .map_err(|e| format!("HTTP to {host}: {e}"))?;
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, host)
        .body(Empty::new())
        .map_err(|e| format!("request {path}: {e}"))?;
    let response = async {
        let resp = sender
            .send_request(request)
            .await
            .map_err(|e| format!("GET {path} on {host}: {e}"))?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("GET {path} on {host}: {e}"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!(
                "GET {path} on {host}: {status}: {}",
                String::from_utf8_lossy(&body).trim()
            ));
        }
        Ok(body)
    };
    tokio::pin!(response, conn);
    tokio::select! {
        r = &mut response => r,
        c = &mut conn => {
            c.map_err(|e| format!("HTTP to {host}: {e}"))?;
            response.await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_travel_encoded_and_escaped() {
        // `t` + the table id 5 with its sign bit flipped + `_r`, then EncodeBytes' groups.
        let (start, end) = crate::tidb::key::record_span(5);
        let path = stats_region_path(&start, &end);
        assert_eq!(
            path,
            "/pd/api/v1/stats/region?\
             start_key=t%80%00%00%00%00%00%00%FF%05_r%00%00%00%00%00%FA\
             &end_key=t%80%00%00%00%00%00%00%FF%05_s%00%00%00%00%00%FA"
        );
        assert_eq!(
            stats_region_path(b"", b""),
            "/pd/api/v1/stats/region?start_key=&end_key="
        );
    }

    #[test]
    fn answers_parse_and_bad_ones_say_why() {
        let body = br#"{"count":3,"empty_count":1,"storage_size":97,"storage_keys":120000,
            "store_leader_count":{"1":3},"user_storage_size":90}"#;
        assert_eq!(
            parse_stats(body).expect("parse"),
            RangeStats {
                count: 3,
                empty_count: 1,
                storage_size: 97,
                storage_keys: 120_000
            }
        );
        assert!(parse_stats(b"<html>").is_err());
        assert!(parse_stats(br#"{"count":-1}"#).is_err());
    }

    #[test]
    fn addresses_name_their_authority() {
        assert_eq!(authority("http://10.0.0.1:2379"), "10.0.0.1:2379");
        assert_eq!(authority("https://pd:2379/"), "pd:2379");
        assert_eq!(authority("pd:2379"), "pd:2379");
    }
}
