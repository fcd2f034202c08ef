//! `docker-compose.yml` checked without a Docker engine: `docker-compose config` must accept it,
//! and the resolved configuration must wire the cluster, tibinlog and the replica together
//! (PD address, ports, credentials, the replica's init script), with every file it builds from
//! or mounts present in the repository. tibinlog's command line is parsed and resolved by the
//! server's own configuration code, so a flag that `tibinlog server` does not know fails here.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use common::peer;
use serde_yaml::Value;
use tibinlog::app::config::{resolve, ServerArgs};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// `tibinlog server`'s arguments, as the binary parses them.
#[derive(Debug, Parser)]
struct ServerCli {
    #[command(flatten)]
    args: ServerArgs,
}

/// The resolved configuration, or `None` when docker-compose is not installed (outside CI).
fn compose_config() -> Option<Value> {
    compose_config_of(&["docker-compose.yml"])
}

/// The configuration `files` resolve to, merged in order.
fn compose_config_of(files: &[&str]) -> Option<Value> {
    let Some(bin) = peer::find_tool("docker-compose") else {
        peer::missing("docker-compose");
        return None;
    };
    let mut args: Vec<&str> = Vec::new();
    for f in files {
        args.extend(["-f", f]);
    }
    args.push("config");
    let out = Command::new(bin)
        .current_dir(REPO)
        .args(&args)
        // Variables of the caller's shell must not change what is checked.
        .env_remove("COMPOSE_FILE")
        .env_remove("COMPOSE_PROFILES")
        .env_remove("COMPOSE_PROJECT_NAME")
        .output()
        .expect("run docker-compose");
    assert!(
        out.status.success(),
        "docker-compose config failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_yaml::from_slice(&out.stdout).expect("docker-compose config prints YAML"))
}

fn service<'a>(cfg: &'a Value, name: &str) -> &'a Value {
    let s = &cfg["services"][name];
    assert!(s.is_mapping(), "service {name} is defined");
    s
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .map(|x| x.as_str().expect("a string").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The value of `--name=value` in a command.
fn flag<'a>(cmd: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("{name}=");
    cmd.iter().find_map(|a| a.strip_prefix(&prefix))
}

fn env_of(svc: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    match &svc["environment"] {
        Value::Mapping(m) => {
            for (k, v) in m {
                let v = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    other => panic!("environment value {other:?}"),
                };
                out.insert(k.as_str().expect("key").to_owned(), v);
            }
        }
        Value::Sequence(s) => {
            for kv in s {
                let (k, v) = kv.as_str().expect("K=V").split_once('=').expect("K=V");
                out.insert(k.to_owned(), v.to_owned());
            }
        }
        _ => {}
    }
    out
}

/// A service's bind mounts as (host path, container path); named volumes are left out.
fn bind_mounts(svc: &Value) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for v in svc["volumes"].as_sequence().into_iter().flatten() {
        let (source, target) = match v {
            // docker-compose 1.x: "SOURCE:TARGET[:MODE]".
            Value::String(s) => {
                let mut parts = s.split(':');
                let source = parts.next().expect("source").to_owned();
                let target = parts.next().expect("target").to_owned();
                (source, target)
            }
            // Compose v2: {type, source, target}.
            m => {
                if m["type"].as_str() != Some("bind") {
                    continue;
                }
                (
                    m["source"].as_str().expect("source").to_owned(),
                    m["target"].as_str().expect("target").to_owned(),
                )
            }
        };
        if source.starts_with('/') || source.starts_with('.') {
            out.push((PathBuf::from(source), target));
        }
    }
    out
}

/// Container ports published on the host, as (host, container).
fn published_ports(svc: &Value) -> Vec<(u16, u16)> {
    let num = |v: &Value| -> u16 {
        match v {
            Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
        .unwrap_or_else(|| panic!("port {v:?}"))
    };
    svc["ports"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|p| match p {
            Value::String(s) => {
                let (h, c) = s.rsplit_once(':').expect("HOST:CONTAINER");
                (
                    h.parse().expect("host port"),
                    c.parse().expect("container port"),
                )
            }
            m => (num(&m["published"]), num(&m["target"])),
        })
        .collect()
}

/// Asserts that `path` (absolute, from the resolved config) lies inside the repository and exists.
fn assert_repo_file(path: &Path, what: &str) -> PathBuf {
    let repo = Path::new(REPO).canonicalize().expect("repo path");
    let real = path
        .canonicalize()
        .unwrap_or_else(|_| panic!("{what}: {} does not exist", path.display()));
    assert!(
        real.starts_with(&repo),
        "{what}: {} is outside the repository",
        path.display()
    );
    real
}

/// The image's version tag (`pingcap/pd:v8.5.1` → `v8.5.1`).
fn tag<'a>(svc: &'a Value, repo: &str) -> &'a str {
    let image = svc["image"].as_str().expect("image");
    let (name, tag) = image.rsplit_once(':').expect("image has a tag");
    assert_eq!(name, repo, "image of {repo}");
    tag
}

#[test]
fn compose_file_is_valid_and_wired() {
    let Some(cfg) = compose_config() else { return };

    // The TiDB cluster: one version of the 8.5 line for PD, TiKV and TiDB.
    let (pd, tikv, tidb) = (
        service(&cfg, "pd"),
        service(&cfg, "tikv"),
        service(&cfg, "tidb"),
    );
    let version = tag(pd, "pingcap/pd");
    assert!(
        version.starts_with("v8.5.") && version[5..].bytes().all(|b| b.is_ascii_digit()),
        "a released 8.5 version, not {version}"
    );
    assert_eq!(tag(tikv, "pingcap/tikv"), version);
    assert_eq!(tag(tidb, "pingcap/tidb"), version);

    let pd_cmd = strings(&pd["command"]);
    let pd_url = flag(&pd_cmd, "--advertise-client-urls").expect("PD advertises its client URL");
    let pd_addr = pd_url.strip_prefix("http://").expect("http URL");
    let pd_name = flag(&pd_cmd, "--name").expect("PD name");
    assert!(
        flag(&pd_cmd, "--initial-cluster")
            .expect("initial cluster")
            .split(',')
            .any(|m| m.starts_with(&format!("{pd_name}="))),
        "PD is a member of its initial cluster"
    );
    assert_eq!(
        pd_addr.split(':').next(),
        Some("pd"),
        "PD is advertised under its service name"
    );
    let tikv_cmd = strings(&tikv["command"]);
    assert_eq!(flag(&tikv_cmd, "--pd"), Some(pd_addr), "TiKV joins PD");
    let tikv_advertised = flag(&tikv_cmd, "--advertise-addr").expect("TiKV advertise address");
    assert!(
        tikv_advertised.starts_with("tikv:"),
        "TiKV is advertised under its service name (tibinlog connects to what PD reports): {tikv_advertised}"
    );
    let nofile = &tikv["ulimits"]["nofile"];
    let soft = nofile["soft"]
        .as_u64()
        .or_else(|| nofile.as_u64())
        .expect("nofile");
    assert!(soft >= 82_920, "TiKV needs 82920 open files, has {soft}");
    let tidb_cmd = strings(&tidb["command"]);
    assert_eq!(flag(&tidb_cmd, "--store"), Some("tikv"));
    assert_eq!(flag(&tidb_cmd, "--path"), Some(pd_addr), "TiDB uses PD");
    for (host, container) in published_ports(tidb) {
        assert_eq!(host, container);
    }
    for (source, target) in bind_mounts(pd) {
        assert_repo_file(&source, "PD configuration");
        let cfg_flag = flag(&pd_cmd, "--config").expect("PD reads its mounted config");
        assert_eq!(cfg_flag, target);
    }

    // tibinlog: built from this repository, pointed at PD, arguments accepted by the server.
    let tb = service(&cfg, "tibinlog");
    let context = PathBuf::from(tb["build"]["context"].as_str().expect("build context"));
    let context = assert_repo_file(&context, "tibinlog build context");
    let dockerfile = context.join(tb["build"]["dockerfile"].as_str().unwrap_or("Dockerfile"));
    let dockerfile_text = std::fs::read_to_string(&dockerfile)
        .unwrap_or_else(|e| panic!("{}: {e}", dockerfile.display()));
    assert!(
        dockerfile_text
            .lines()
            .any(|l| l.trim() == r#"ENTRYPOINT ["tibinlog", "server"]"#),
        "the image runs `tibinlog server`"
    );
    let tb_cmd = strings(&tb["command"]);
    let parsed = ServerCli::try_parse_from(std::iter::once("server".to_owned()).chain(tb_cmd))
        .unwrap_or_else(|e| panic!("tibinlog server rejects the compose command: {e}"));
    let app = resolve(parsed.args, &|_| None).expect("the command resolves to a configuration");
    assert_eq!(app.pd_addrs, [pd_addr], "tibinlog is pointed at PD");
    assert!(app.listen.ip().is_unspecified(), "listens on every address");
    let tb_port = app.listen.port();
    for (_, container) in published_ports(tb) {
        assert_eq!(
            container, tb_port,
            "the published port is the one tibinlog listens on"
        );
    }
    let data_dir = app.data_dir.to_str().expect("utf-8").to_owned();
    assert!(
        tb["volumes"].as_sequence().into_iter().flatten().any(|v| v
            .as_str()
            .map_or(v["target"].as_str() == Some(&data_dir), |s| {
                s.split(':').nth(1) == Some(&data_dir)
            })),
        "the data dir {data_dir} is a volume: {:?}",
        tb["volumes"]
    );

    // The replica: MySQL 8.0, GTIDs on, attached to tibinlog by the init script.
    let replica = service(&cfg, "replica");
    assert_eq!(replica["image"].as_str(), Some("mysql:8.0"));
    let rcmd = strings(&replica["command"]);
    let replica_id: u32 = flag(&rcmd, "--server-id")
        .expect("replica server id")
        .parse()
        .expect("numeric server id");
    assert_ne!(replica_id, 0);
    assert_ne!(replica_id, app.server_id, "server ids differ");
    assert_eq!(flag(&rcmd, "--gtid-mode"), Some("ON"));
    assert_eq!(flag(&rcmd, "--enforce-gtid-consistency"), Some("ON"));
    assert!(flag(&rcmd, "--relay-log").is_some(), "relay log named");
    let env = env_of(replica);
    assert_eq!(
        env.get("TIBINLOG_HOST").map(String::as_str),
        Some("tibinlog")
    );
    assert_eq!(env.get("TIBINLOG_PORT"), Some(&tb_port.to_string()));
    let user = env.get("TIBINLOG_USER").expect("replication user");
    assert_eq!(
        app.users.get(user).map(|u| u.credential.clone()),
        env.get("TIBINLOG_PASSWORD")
            .map(|p| tibinlog_protocol::wire::auth::Credential::Password(p.as_bytes().to_vec())),
        "the replica logs in with tibinlog's user and password"
    );
    let init: Vec<_> = bind_mounts(replica)
        .into_iter()
        .filter(|(_, target)| target.starts_with("/docker-entrypoint-initdb.d/"))
        .collect();
    assert_eq!(init.len(), 1, "one init script mounted: {init:?}");
    let script = assert_repo_file(&init[0].0, "replica init script");
    let text = std::fs::read_to_string(&script).expect("read the init script");
    for needle in [
        "CHANGE REPLICATION SOURCE TO",
        "SOURCE_HOST=",
        "SOURCE_PORT=",
        "SOURCE_USER=",
        "SOURCE_PASSWORD=",
        "SOURCE_AUTO_POSITION=1",
        "GET_SOURCE_PUBLIC_KEY=1",
        "START REPLICA;",
        "TIBINLOG_HOST",
        "TIBINLOG_PORT",
        "TIBINLOG_USER",
        "TIBINLOG_PASSWORD",
    ] {
        assert!(text.contains(needle), "the init script has {needle}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&script)
            .expect("stat")
            .permissions()
            .mode();
        assert!(
            mode & 0o111 != 0,
            "the init script is executable (the image runs it rather than sourcing it)"
        );
    }
    let syntax = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .expect("run bash -n");
    assert!(
        syntax.status.success(),
        "init script syntax: {}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    assert!(
        replica["depends_on"].get("tibinlog").is_some()
            || strings(&replica["depends_on"]).contains(&"tibinlog".to_owned()),
        "the replica starts after tibinlog"
    );

    // Every bind mount of every service exists in the repository; host ports never collide.
    let mut host_ports = BTreeMap::new();
    for (name, svc) in cfg["services"].as_mapping().expect("services") {
        let name = name.as_str().expect("service name");
        for (source, _) in bind_mounts(svc) {
            assert_repo_file(&source, &format!("{name} mount"));
        }
        if let Some(ctx) = svc["build"]["context"].as_str() {
            let ctx = assert_repo_file(Path::new(ctx), &format!("{name} build context"));
            let df = svc["build"]["dockerfile"].as_str().unwrap_or("Dockerfile");
            assert!(ctx.join(df).is_file(), "{name}: {df} exists");
        }
        for (host, _) in published_ports(svc) {
            if let Some(other) = host_ports.insert(host, name.to_owned()) {
                assert!(
                    svc["profiles"].is_sequence()
                        || cfg["services"][&other]["profiles"].is_sequence(),
                    "host port {host} published by {other} and {name}"
                );
            }
        }
    }
}

/// A named volume mounted by `svc`: its container path.
fn volume_target(svc: &Value, volume: &str) -> Option<String> {
    svc["volumes"].as_sequence()?.iter().find_map(|v| match v {
        Value::String(s) => {
            let mut parts = s.split(':');
            (parts.next() == Some(volume)).then(|| parts.next().unwrap_or("").to_owned())
        }
        m => (m["type"].as_str() == Some("volume") && m["source"].as_str() == Some(volume))
            .then(|| m["target"].as_str().unwrap_or("").to_owned()),
    })
}

/// The TLS option (`-f docker-compose.yml -f docker-compose.tls.yml`): a one-shot service makes
/// the certificates, PD serves https with them, TiKV and TiDB read them from their mounted
/// configuration files, and tibinlog's own configuration code accepts its command with TLS to
/// the cluster (https PD URL, CA, client pair) and on its listener, every file where the
/// certificate service writes it.
#[test]
fn compose_tls_option_is_valid_and_wired() {
    let Some(cfg) = compose_config_of(&["docker-compose.yml", "docker-compose.tls.yml"]) else {
        return;
    };
    let certs = service(&cfg, "certs");
    let certs_cmd = strings(&certs["command"]);
    assert_eq!(
        strings(&certs["entrypoint"]),
        ["tibinlog", "certs"],
        "the certificates come from `tibinlog certs`"
    );
    let out = flag(&certs_cmd, "--out").expect("--out");
    assert_eq!(volume_target(certs, "certs").as_deref(), Some(out));
    let names: Vec<&str> = flag(&certs_cmd, "--server-names")
        .expect("server names")
        .split(',')
        .collect();
    for host in ["pd", "tikv", "tidb", "tibinlog"] {
        assert!(names.contains(&host), "the server certificate names {host}");
    }
    // `tibinlog certs` accepts the command and writes the files the services read.
    let made = tempfile::tempdir().expect("tempdir");
    let bin = env!("CARGO_BIN_EXE_tibinlog");
    let mut args: Vec<String> = certs_cmd
        .iter()
        .filter(|a| !a.starts_with("--out="))
        .cloned()
        .collect();
    args.insert(0, "certs".into());
    args.push(format!("--out={}", made.path().display()));
    let status = Command::new(bin)
        .args(&args)
        .output()
        .expect("run tibinlog certs");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let in_volume = |p: &str| -> PathBuf {
        let rel = p
            .strip_prefix(&format!("{out}/"))
            .unwrap_or_else(|| panic!("{p} is not in the certificate volume {out}"));
        let local = made.path().join(rel);
        assert!(local.is_file(), "`tibinlog certs` makes {rel}");
        local
    };

    let pd = service(&cfg, "pd");
    let pd_cmd = strings(&pd["command"]);
    for f in ["--client-urls", "--advertise-client-urls", "--peer-urls"] {
        assert!(
            flag(&pd_cmd, f).expect(f).starts_with("https://"),
            "PD {f} is https"
        );
    }
    for f in ["--cacert", "--cert", "--key"] {
        in_volume(flag(&pd_cmd, f).expect(f));
    }
    assert_eq!(volume_target(pd, "certs").as_deref(), Some(out));
    assert_eq!(
        pd["depends_on"]["certs"]["condition"].as_str(),
        Some("service_completed_successfully"),
        "PD starts once the certificates exist"
    );
    let pd_url = flag(&pd_cmd, "--advertise-client-urls").expect("PD URL");

    for (name, keys) in [
        ("tikv", ["ca-path", "cert-path", "key-path"]),
        (
            "tidb",
            ["cluster-ssl-ca", "cluster-ssl-cert", "cluster-ssl-key"],
        ),
    ] {
        let svc = service(&cfg, name);
        let cmd = strings(&svc["command"]);
        let target = flag(&cmd, "--config").unwrap_or_else(|| panic!("{name} reads a config"));
        let (source, _) = bind_mounts(svc)
            .into_iter()
            .find(|(_, t)| t == target)
            .unwrap_or_else(|| panic!("{name}'s config is mounted"));
        let text = std::fs::read_to_string(assert_repo_file(&source, name)).expect("read");
        let toml: toml::Table = text.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
        let sec = toml["security"].as_table().expect("[security]");
        for k in keys {
            in_volume(sec[k].as_str().unwrap_or_else(|| panic!("{name} {k}")));
        }
        assert_eq!(volume_target(svc, "certs").as_deref(), Some(out));
    }
    assert_eq!(
        flag(&strings(&service(&cfg, "tikv")["command"]), "--pd"),
        Some(pd_url),
        "TiKV dials PD over https"
    );

    let tb = service(&cfg, "tibinlog");
    let parsed = ServerCli::try_parse_from(
        std::iter::once("server".to_owned()).chain(strings(&tb["command"])),
    )
    .unwrap_or_else(|e| panic!("tibinlog server rejects the TLS command: {e}"));
    let app = resolve(parsed.args, &|_| None).expect("the TLS command resolves");
    assert_eq!(app.pd_addrs, [pd_url], "tibinlog dials PD's https URL");
    let cluster = app.cluster_tls.expect("TLS to the cluster");
    let listener = app.tls.expect("TLS on the listener");
    let client = tibinlog::security::ClusterTls::from_files(&tibinlog::security::ClusterTlsFiles {
        ca: in_volume(cluster.ca.to_str().expect("utf-8")),
        cert: in_volume(cluster.cert.to_str().expect("utf-8")),
        key: in_volume(cluster.key.to_str().expect("utf-8")),
    })
    .expect("the client pair loads");
    assert_eq!(client.common_name(), Some("tibinlog"));
    in_volume(listener.cert.to_str().expect("utf-8"));
    in_volume(listener.key.to_str().expect("utf-8"));
}

#[test]
fn docker_build_context_keeps_the_sources() {
    // Cargo needs these to build the binary; `.dockerignore` must not drop them.
    let ignore = std::fs::read_to_string(Path::new(REPO).join(".dockerignore"))
        .expect(".dockerignore exists");
    let ignored: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.trim_start_matches('/').trim_end_matches('/'))
        .collect();
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "src",
        "proto",
        "protocol",
        "benches",
    ] {
        assert!(
            Path::new(REPO).join(needed).exists(),
            "{needed} is in the repository"
        );
        assert!(
            !ignored.contains(&needed),
            ".dockerignore drops {needed}, which the build needs"
        );
    }
    assert!(
        ignored.contains(&"target"),
        "the build output stays out of the context"
    );
    // The builder stage has what RocksDB's build needs; the image runs the release binary.
    let dockerfile =
        std::fs::read_to_string(Path::new(REPO).join("Dockerfile")).expect("Dockerfile exists");
    for needle in [
        "libclang-dev",
        "g++",
        "cargo build --release --locked",
        "COPY --from=build",
    ] {
        assert!(dockerfile.contains(needle), "the Dockerfile has {needle}");
    }
    let froms: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(
        froms.len(),
        2,
        "a build stage and a runtime stage: {froms:?}"
    );
}
