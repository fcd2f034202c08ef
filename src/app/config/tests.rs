//! Tests of the configuration: precedence, parsing, refusals, the generated docs table.

use std::time::Duration;

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

fn temp_file(name: &str, text: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("tibinlog-config-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("c.toml");
    std::fs::write(&file, text).expect("write");
    (dir, file)
}

#[test]
fn flags_beat_env_beat_file_beat_defaults() {
    let (dir, file) = temp_file(
        "layers",
        "[server]\nlisten = \"127.0.0.1:4000\"\ndata_dir = \"/f\"\nserver_id = 3\n\n\
         [capture]\npd = \"f1:2379,f2:2379\"\n\n[security]\nuser = \"fu\"\n\n\
         [binlog]\nmax_binlog_size = 8192\nbinlog_expire_logs_seconds = 600\n",
    );
    let env = |k: &str| match k {
        "TIBINLOG_SERVER_ID" => Some("5".to_owned()),
        "TIBINLOG_DATA_DIR" => Some("/e".to_owned()),
        "TIBINLOG_MARIADB_LISTEN" => Some("127.0.0.1:3307".to_owned()),
        "TIBINLOG_SORTER_MEMORY_QUOTA_BYTES" => Some("1_048_576".to_owned()),
        _ => None,
    };
    let mut args = ServerArgs::default()
        .with("data-dir", "/c")
        .with("gc-ttl-seconds", "3600")
        .with("binlog-row-metadata", "minimal");
    args.config = Some(file);
    let cfg = resolve(args, &env).expect("resolve");
    assert_eq!(
        cfg.row_metadata,
        tibinlog_protocol::binlog::RowMetadata::Minimal
    );
    assert_eq!(cfg.pd_addrs, ["f1:2379", "f2:2379"]);
    assert_eq!(cfg.listen.port(), 4000);
    assert_eq!(cfg.mariadb_listen.map(|a| a.port()), Some(3307));
    assert_eq!(cfg.data_dir, PathBuf::from("/c"));
    assert_eq!(cfg.server_id, 5);
    assert_eq!(cfg.max_binlog_size, 8192);
    assert_eq!(cfg.expire_logs_seconds, 600);
    assert_eq!(cfg.gc_ttl, Duration::from_secs(3600));
    assert_eq!(cfg.sorter_memory_quota_bytes, 1 << 20);
    assert_eq!(cfg.users.names(), ["fu"]);
    assert_eq!(cfg.server_uuid, None);
    // Untouched settings keep their defaults.
    assert_eq!(cfg.net_write_timeout, Duration::from_secs(60));
    assert_eq!(cfg.default_heartbeat, Some(Duration::from_secs(30)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn users_come_with_hashes_and_privileges() {
    use crate::server::users::Privileges;
    use tibinlog_protocol::wire::auth::{verify_cleartext, Credential};
    let text = "[server]\ndata_dir = \"/d\"\n\n[capture]\npd = \"p:2379\"\n\n\
         [security]\nuser = \"admin\"\npassword_hash = \"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19\"\n\n\
         [[users]]\nname = \"repl\"\n\
         password_hash = '$A$005$abcdefghij0123456789jg.2i2CR4LF61xx5lqQ4TXEgnuGCxVdpZL7ZyxF6Bl/'\n\
         privileges = [\"REPLICATION SLAVE\", \"replication_client\"]\n\n\
         [[users]]\nname = \"reader\"\npassword = \"r\"\nprivileges = \"SELECT, SHOW DATABASES\"\n";
    let (dir, file) = temp_file("users", text);
    let settings = settings_of(&file);
    let cfg = app_config(&settings).expect("config");
    assert_eq!(cfg.users.names(), ["admin", "reader", "repl"]);
    let admin = cfg.users.get("admin").expect("admin");
    assert_eq!(admin.privileges, Privileges::ALL);
    assert!(verify_cleartext(&admin.credential, b"password"));
    let repl = cfg.users.get("repl").expect("repl");
    assert!(matches!(repl.credential, Credential::Sha2Crypt { .. }));
    assert_eq!(
        repl.privileges,
        Privileges::REPLICATION_SLAVE | Privileges::REPLICATION_CLIENT
    );
    assert_eq!(
        cfg.users.privileges("reader"),
        Privileges::SELECT | Privileges::SHOW_DATABASES
    );
    // The printed configuration lists the accounts without the cleartext password.
    let shown = render(&settings);
    assert!(
        shown.contains("[[users]]") && shown.contains("name = \"repl\""),
        "{shown}"
    );
    assert!(!shown.contains("password = \"r\""), "{shown}");

    // No implicit passwordless administrator beside listed accounts.
    let text = "[server]\ndata_dir = \"/d\"\n\n[capture]\npd = \"p:2379\"\n\n\
                [[users]]\nname = \"repl\"\npassword = \"x\"\n";
    std::fs::write(&file, text).expect("write");
    let cfg = app_config(&settings_of(&file)).expect("config");
    assert_eq!(cfg.users.names(), ["repl"]);
    assert_eq!(cfg.users.privileges("repl"), Privileges::NONE);

    let bad = |users: &str| {
        let text =
            format!("[server]\ndata_dir = \"/d\"\n[capture]\npd = \"p:2379\"\n[[users]]\n{users}");
        std::fs::write(&file, text).expect("write");
        format!("{:#}", app_config(&settings_of(&file)).expect_err(users))
    };
    assert!(
        bad("name = \"a\"\nprivileges = [\"INSERT\"]\n").contains("`INSERT` is not a privilege")
    );
    assert!(bad("name = \"a\"\npassword_hash = \"*00\"\n").contains("password_hash"));
    assert!(bad("name = \"a\"\npassword = \"x\"\npassword_hash = \"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19\"\n").contains("not both"));
    assert!(bad("name = \"\"\n").contains("name must not be empty"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn settings_of(file: &Path) -> Settings {
    let args = ServerArgs {
        config: Some(file.to_owned()),
        ..ServerArgs::default()
    };
    settings(&args, &no_env).expect("settings")
}

#[test]
fn files_refuse_unknown_keys_and_misplaced_ones() {
    let err = |text: &str| format!("{:#}", parse_file(text, "c.toml").expect_err(text));
    let e = err("[server]\nlistne = \"x\"\n");
    assert!(e.contains("listne"), "{e}");
    let e = err("[nowhere]\nx = 1\n");
    assert!(e.contains("nowhere"), "{e}");
    // The flat layout of earlier versions names the section a key moved to.
    let e = err("pd = \"a:1\"\n");
    assert!(e.contains("[capture]"), "{e}");
    let e = err("filter = [\"a.*\"]\n");
    assert!(e.contains("[filter]") && e.contains("rules"), "{e}");
    // Wrong types and syntax errors name the key or the line.
    let e = err("[server]\nserver_id = \"one\"\n");
    assert!(e.contains("server_id") || e.contains("integer"), "{e}");
    let e = err("[server]\nserver_id = 99999999999\n");
    assert!(e.contains("99999999999") || e.contains("u32"), "{e}");
    let e = err("[server]\nlisten = \"x\n");
    assert!(e.contains("line 2"), "{e}");
    // Lists come as arrays or one comma-separated string.
    let t = parse_file("[capture]\npd = [\"a:1\", 'b:2']\n", "c").expect("array");
    let s = Settings::deserialize(toml::Value::Table(t)).expect("settings");
    assert_eq!(s.capture.pd, ["a:1", "b:2"]);
}

#[test]
fn flags_and_variables_are_checked_where_they_come_from() {
    let env = |k: &str| (k == "TIBINLOG_SERVER_ID").then(|| "x".to_owned());
    let e = format!(
        "{:#}",
        settings(&ServerArgs::default(), &env).expect_err("env")
    );
    assert!(e.contains("TIBINLOG_SERVER_ID"), "{e}");
    let e = format!(
        "{:#}",
        settings(&ServerArgs::default().with("server-id", "-1"), &no_env).expect_err("flag")
    );
    assert!(e.contains("--server-id"), "{e}");
}

#[test]
fn every_setting_is_one_knob_and_printed() {
    // The typed sections and the knob table name the same keys.
    let full = Settings {
        server: ServerSection {
            mariadb_listen: Some("a".into()),
            data_dir: Some("/d".into()),
            server_uuid: Some("u".into()),
            instance_id: Some("i".into()),
            ..ServerSection::default()
        },
        capture: CaptureSection {
            start_ts: Some(1),
            ..CaptureSection::default()
        },
        security: SecuritySection {
            tls_cert: Some("c".into()),
            tls_key: Some("k".into()),
            tls_ca: Some("a".into()),
            ca_path: Some("a".into()),
            cert_path: Some("c".into()),
            key_path: Some("k".into()),
            password_hash: Some("h".into()),
            rsa_private_key: Some("r".into()),
            ..SecuritySection::default()
        },
        ha: HaSection {
            prefix: Some("/p".into()),
            advertise: Some("a".into()),
            user: Some("repl".into()),
            password: Some("pw".into()),
            ..HaSection::default()
        },
        ..Settings::default()
    };
    let table = toml::Table::try_from(&full).expect("serialize");
    let mut keys: Vec<String> = table
        .iter()
        .filter(|(s, _)| *s != "users")
        .flat_map(|(s, t)| {
            t.as_table()
                .expect("section")
                .keys()
                .map(move |k| format!("{s}.{k}"))
        })
        .collect();
    keys.sort();
    let mut knobs: Vec<String> = KNOBS.iter().map(Knob::path).collect();
    knobs.sort();
    assert_eq!(keys, knobs);
    let mut flags: Vec<&str> = KNOBS.iter().map(|k| k.flag).collect();
    flags.sort_unstable();
    flags.dedup();
    assert_eq!(flags.len(), KNOBS.len(), "flags are unique");
    // Every knob can be set through its flag, its variable, and the file.
    for k in KNOBS {
        let text = match k.kind {
            Integer => "7",
            Bool => "on",
            _ => "v",
        };
        let v = typed(k, text, "t").expect("typed");
        check_one(k, &v, "t").unwrap_or_else(|e| panic!("{}: {e:#}", k.path()));
    }
    // What --print-config prints is a file that reads back as the same settings.
    let mut s = full.clone();
    s.security.password = String::new();
    s.ha.password = None;
    let printed = render(&s);
    let back = Settings::deserialize(toml::Value::Table(
        parse_file(&printed, "printed").expect("parse printed"),
    ))
    .expect("settings");
    assert_eq!(back, s);
    for k in KNOBS {
        assert!(
            printed.contains(&k.env()),
            "{} in the printed help",
            k.env()
        );
    }
    s.security.password = "secret".into();
    s.ha.password = Some("also secret".into());
    assert!(!render(&s).contains("secret"));
}

/// The settings table of docs/configuration.md, one row per knob under its section's row.
fn settings_table() -> String {
    let mut out = String::from("| key | flag | variable | meaning |\n|---|---|---|---|\n");
    let mut section = "";
    for k in KNOBS {
        if k.section != section {
            section = k.section;
            out.push_str(&format!("| **[{section}]** | | | |\n"));
        }
        out.push_str(&format!(
            "| `{}` | `--{}` | `{}` | {} |\n",
            k.key,
            k.flag,
            k.env(),
            k.help.replace('|', "\\|")
        ));
    }
    out
}

#[test]
fn docs_configuration_lists_every_setting() {
    const BEGIN: &str = concat!(
        "<!-- settings table: generated from KNOBS in src/app/config/knobs.rs by the test ",
        "app::config::tests::docs_configuration_lists_every_setting; ",
        "run it with TIBINLOG_BLESS=1 to rewrite -->\n"
    );
    const END: &str = "<!-- end of the generated settings table -->";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
    let doc = std::fs::read_to_string(path).expect("docs/configuration.md");
    let start = doc
        .find(BEGIN)
        .expect("docs/configuration.md has the table's begin marker")
        + BEGIN.len();
    let end = start
        + doc[start..]
            .find(END)
            .expect("docs/configuration.md has the table's end marker");
    let table = settings_table();
    if std::env::var("TIBINLOG_BLESS").as_deref() == Ok("1") {
        if doc[start..end] != table {
            let blessed = format!("{}{table}{}", &doc[..start], &doc[end..]);
            std::fs::write(path, blessed).expect("rewrite docs/configuration.md");
        }
        return;
    }
    assert_eq!(
        doc[start..end],
        table,
        "docs/configuration.md's settings table is not what KNOBS gives; \
         rerun this test with TIBINLOG_BLESS=1 to rewrite it"
    );
}

#[test]
fn bad_values_are_a_clear_error() {
    let base = || {
        ServerArgs::default()
            .with("pd", "p:1")
            .with("data-dir", "/d")
    };
    let err = |a: ServerArgs| format!("{:#}", resolve(a, &no_env).expect_err("must fail"));
    assert!(err(ServerArgs::default()).contains("PD"));
    assert!(err(base().with("mariadb-listen", "nope")).contains("MariaDB listen address"));
    assert!(err(base().with("listen", "nope")).contains("listen"));
    assert!(err(base().with("server-uuid", "x")).contains("uuid"));
    assert!(err(base().with("tls-cert", "c")).contains("TLS"));
    assert!(err(base().with("filter", "a.b.c")).contains("filter"));
    assert!(err(base().with("server-id", "0")).contains("server id"));
    assert!(err(base().with("default-authentication-plugin", "x")).contains("plugin"));
    assert!(err(base().with("sorter-memory-quota-bytes", "0")).contains("[sorter]"));
    assert!(err(base().with("binlog-row-metadata", "ALL")).contains("binlog_row_metadata"));
    let cfg = resolve(base(), &no_env).expect("defaults");
    assert_eq!(cfg.listen.to_string(), DEFAULT_LISTEN);
    assert_eq!(
        cfg.users.get("root").map(|u| u.credential.clone()),
        Some(tibinlog_protocol::wire::auth::Credential::Password(
            Vec::new()
        ))
    );
    assert_eq!(cfg.auth_plugin, AuthMethod::CachingSha2Password);
    let cfg = resolve(
        base()
            .with("filter", "a.*")
            .with("filter", "!a.tmp")
            .with("default-heartbeat-seconds", "0"),
        &no_env,
    )
    .expect("repeated list flag");
    assert_eq!(cfg.filter_rules, ["a.*", "!a.tmp"]);
    assert_eq!(cfg.default_heartbeat, None);
}
