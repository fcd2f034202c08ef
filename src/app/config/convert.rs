//! Settings → [`AppConfig`]: every value checked, with the setting named in the refusal.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use tibinlog_protocol::binlog::Sid;
use tibinlog_protocol::wire::auth::AuthMethod;

use super::{Settings, ENV_PREFIX};
use crate::app::AppConfig;
use crate::model::Ts;
use crate::mounter::TableFilter;
use crate::server::TlsFiles;

/// Checks the settings and turns them into the app's configuration.
pub fn app_config(s: &Settings) -> anyhow::Result<AppConfig> {
    let mut cfg = server(s)?;
    security(s, &mut cfg)?;
    binlog_and_sessions(s, &mut cfg)?;
    capture(s, &mut cfg)?;
    Ok(cfg)
}

/// `[server]`, the filter, the accounts and the authentication plugin.
fn server(s: &Settings) -> anyhow::Result<AppConfig> {
    let pd = s.capture.pd.clone();
    if pd.is_empty() {
        anyhow::bail!(
            "no PD endpoint: give --pd HOST:PORT (or {ENV_PREFIX}PD, or `pd` in [capture] of the config file)"
        );
    }
    let listen: SocketAddr = s
        .server
        .listen
        .parse()
        .with_context(|| format!("listen address {:?} is not HOST:PORT", s.server.listen))?;
    let data_dir = s.server.data_dir.clone().ok_or_else(|| {
        anyhow::anyhow!("no data directory: give --data-dir DIR (or {ENV_PREFIX}DATA_DIR, or `data_dir` in [server] of the config file)")
    })?;
    let mut cfg = AppConfig::new(pd, listen, data_dir);
    if let Some(text) = &s.server.mariadb_listen {
        let addr: SocketAddr = text
            .parse()
            .with_context(|| format!("MariaDB listen address {text:?} is not HOST:PORT"))?;
        cfg.mariadb_listen = Some(addr);
    }
    let status = s.server.status_listen.trim();
    if !(status.is_empty() || status.eq_ignore_ascii_case("off")) {
        let addr: SocketAddr = status.parse().with_context(|| {
            format!("status listen address {status:?} is not HOST:PORT (or \"off\")")
        })?;
        cfg.status_listen = Some(addr);
    }
    cfg.filter_rules = s.filter.rules.clone();
    cfg.filter = if s.filter.rules.is_empty() {
        TableFilter::all()
    } else {
        TableFilter::parse(&s.filter.rules).context("table filter")?
    };
    if s.server.server_id == 0 {
        anyhow::bail!("server id must not be 0 (MySQL refuses replication with server_id 0)");
    }
    cfg.server_id = s.server.server_id;
    if let Some(u) = &s.server.server_uuid {
        let sid = Sid::parse(u.trim()).map_err(|e| anyhow::anyhow!("server uuid {u:?}: {e}"))?;
        cfg.server_uuid = Some(sid);
    }
    if let Some(id) = &s.server.instance_id {
        cfg.instance_id = Some(crate::app::check_instance_id(id.trim())?.to_owned());
    }
    cfg.start_ts = s.capture.start_ts.map(Ts);
    cfg.users = std::sync::Arc::new(super::users_of(s)?);
    cfg.rsa_private_key = s.security.rsa_private_key.clone();
    cfg.auth_plugin = match s.security.default_authentication_plugin.as_str() {
        p if p == AuthMethod::NativePassword.name() => AuthMethod::NativePassword,
        p if p == AuthMethod::CachingSha2Password.name() => AuthMethod::CachingSha2Password,
        other => anyhow::bail!(
            "default authentication plugin {other:?} is not mysql_native_password or caching_sha2_password"
        ),
    };
    Ok(cfg)
}

/// TLS of the MySQL listeners and to PD/TiKV.
fn security(s: &Settings, cfg: &mut AppConfig) -> anyhow::Result<()> {
    let sec = &s.security;
    match (&sec.tls_cert, &sec.tls_key) {
        (Some(cert), Some(key)) => {
            cfg.tls = Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: sec.tls_ca.clone(),
                allowed_cn: sec.cert_allowed_cn.clone(),
                require_secure_transport: sec.require_secure_transport,
            })
        }
        (None, None) => {
            if sec.require_secure_transport
                || sec.tls_ca.is_some()
                || !sec.cert_allowed_cn.is_empty()
            {
                anyhow::bail!("require_secure_transport, tls_ca and cert_allowed_cn need TLS: give --tls-cert and --tls-key");
            }
        }
        _ => anyhow::bail!("TLS needs both a certificate (--tls-cert) and a key (--tls-key)"),
    }
    if !sec.cert_allowed_cn.is_empty() && sec.tls_ca.is_none() {
        anyhow::bail!(
            "cert_allowed_cn checks client certificates: give the CA that signs them with --tls-ca"
        );
    }
    cfg.cluster_tls = match (&sec.ca_path, &sec.cert_path, &sec.key_path) {
        (None, None, None) => None,
        (Some(ca), Some(cert), Some(key)) => Some(crate::security::ClusterTlsFiles {
            ca: ca.clone(),
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => anyhow::bail!("TLS to PD and TiKV needs all of --ca, --cert and --key"),
    };
    Ok(())
}

/// `[binlog]` and the session limits of `[server]`.
fn binlog_and_sessions(s: &Settings, cfg: &mut AppConfig) -> anyhow::Result<()> {
    let size = s.binlog.max_binlog_size;
    if !(4096..=u64::from(u32::MAX)).contains(&size) {
        anyhow::bail!("max binlog size {size} must be between 4096 bytes and 4 GiB");
    }
    cfg.max_binlog_size = size;
    cfg.expire_logs_seconds = s.binlog.binlog_expire_logs_seconds;
    let meta = &s.binlog.binlog_row_metadata;
    cfg.row_metadata = tibinlog_protocol::binlog::RowMetadata::parse(meta).ok_or_else(|| {
        anyhow::anyhow!("binlog_row_metadata {meta:?} is not FULL, MINIMAL or NONE")
    })?;
    cfg.progress_interval = Duration::from_secs(s.server.progress_interval_seconds.max(1));
    cfg.default_heartbeat = match s.server.default_heartbeat_seconds {
        0 => None,
        n => Some(Duration::from_secs(n)),
    };
    if s.server.net_write_timeout_seconds == 0 {
        anyhow::bail!("net_write_timeout_seconds must be at least 1");
    }
    cfg.net_write_timeout = Duration::from_secs(s.server.net_write_timeout_seconds);
    for (key, v) in [
        ("max_connections", u64::from(s.server.max_connections)),
        ("connect_timeout_seconds", s.server.connect_timeout_seconds),
        ("wait_timeout_seconds", s.server.wait_timeout_seconds),
    ] {
        if v == 0 {
            anyhow::bail!("{key} must be at least 1");
        }
    }
    cfg.limits = crate::server::Limits {
        max_connections: s.server.max_connections,
        connect_timeout: Duration::from_secs(s.server.connect_timeout_seconds),
        wait_timeout: Duration::from_secs(s.server.wait_timeout_seconds),
    };
    Ok(())
}

/// `[capture]`, `[ha]` and `[sorter]`.
fn capture(s: &Settings, cfg: &mut AppConfig) -> anyhow::Result<()> {
    if s.capture.gc_ttl_seconds == 0 {
        anyhow::bail!("gc_ttl_seconds must be at least 1");
    }
    cfg.gc_ttl = Duration::from_secs(s.capture.gc_ttl_seconds);
    if s.capture.incremental_scan_limit == 0 {
        anyhow::bail!("incremental_scan_limit must be at least 1");
    }
    cfg.incremental_scan_limit = s.capture.incremental_scan_limit;
    cfg.pending_txn_bytes = s.capture.pending_txn_bytes;
    cfg.prewrite_memory_bytes = s.capture.prewrite_memory_bytes;
    cfg.exit_on_capture_stop = s.capture.exit_on_capture_stop;
    if s.ha.enabled {
        if s.ha.lease_ttl_seconds == 0 {
            anyhow::bail!("[ha] lease_ttl_seconds must be at least 1");
        }
        if let Some(p) = &s.ha.prefix {
            if !p.starts_with('/') || p.ends_with('/') {
                anyhow::bail!("[ha] prefix {p:?}: give a key like /tibinlog/group-1 (leading '/', no trailing '/')");
            }
        }
        cfg.ha = Some(crate::app::HaConfig {
            etcd: s.ha.etcd.clone(),
            prefix: s.ha.prefix.clone(),
            lease_ttl: Duration::from_secs(s.ha.lease_ttl_seconds),
            advertise: s.ha.advertise.clone(),
            user: s.ha.user.clone().unwrap_or_else(|| s.security.user.clone()),
            password: s
                .ha
                .password
                .clone()
                .unwrap_or_else(|| s.security.password.clone()),
        });
    }
    cfg.sorter_memory_quota_bytes = s.sorter.memory_quota_bytes;
    cfg.sorter_block_cache_bytes = s.sorter.block_cache_bytes;
    cfg.max_chunk_bytes = Some(s.sorter.max_chunk_bytes);
    // The sorter's own range checks, with its words, before anything starts.
    let mut sorter = crate::sorter::Config::new(cfg.data_dir.join("sorter"));
    sorter.memory_quota_bytes = cfg.sorter_memory_quota_bytes;
    sorter.block_cache_bytes = cfg.sorter_block_cache_bytes;
    sorter.max_chunk_bytes = s.sorter.max_chunk_bytes;
    sorter
        .validate()
        .map_err(|e| anyhow::anyhow!("[sorter]: {e}"))?;
    Ok(())
}
