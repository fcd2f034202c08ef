//! Accounts: who may log in, with which password hash, and what each may do.
//!
//! A user is a name (any host: `'name'@'%'`), a credential in one of MySQL's stored forms
//! ([`Credential::from_mysql_hash`]) and a set of global privileges, the ones that mean something
//! on a binlog master that cannot be written to:
//!
//! | privilege | allows |
//! |---|---|
//! | `REPLICATION SLAVE` | COM_REGISTER_SLAVE, COM_BINLOG_DUMP(_GTID), `SHOW REPLICAS`, `SHOW BINLOG EVENTS` |
//! | `REPLICATION CLIENT` | `SHOW MASTER STATUS`, `SHOW BINARY LOGS` |
//! | `SELECT` | reading TiDB tables (snapshot reads), seeing them in `SHOW DATABASES`/`TABLES`, information_schema and `SHOW CREATE TABLE` |
//! | `RELOAD` | `FLUSH TABLES WITH READ LOCK` (and other `FLUSH`) |
//! | `LOCK TABLES` | `LOCK TABLES` |
//! | `PROCESS` | other users' sessions in `SHOW PROCESSLIST` |
//! | `SHOW DATABASES` | (accepted for grant lists written for MySQL) |
//! | `BINLOG_ADMIN` | `PURGE BINARY LOGS` |
//! | `CONNECTION_ADMIN` | `KILL` of other users' sessions |
//! | `SUPER` | everything `BINLOG_ADMIN`, `CONNECTION_ADMIN` and `REPLICATION CLIENT` allow |
//! | `ALL [PRIVILEGES]` | all of the above |
//!
//! Denials answer as MySQL 8.0 does: 1227 naming the privileges that would do, 1142 for a table,
//! 1044 for a database, 1095 for another user's thread.
//!
//! caching_sha2_password's fast path needs SHA256(SHA256(password)); a user stored as
//! `$A$005$…` only yields it after a full authentication, so the directory keeps MySQL's cache of
//! those digests ([`Users::remember`]) for the life of the process.

use std::collections::HashMap;
use std::sync::Mutex;

use tibinlog_protocol::wire::auth::Credential;

/// A set of global privileges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Privileges(u32);

/// MySQL's static privileges that mean something here, in the order `SHOW GRANTS` lists them.
const STATIC: [(Privileges, &str); 8] = [
    (Privileges::SELECT, "SELECT"),
    (Privileges::RELOAD, "RELOAD"),
    (Privileges::PROCESS, "PROCESS"),
    (Privileges::SHOW_DATABASES, "SHOW DATABASES"),
    (Privileges::SUPER, "SUPER"),
    (Privileges::LOCK_TABLES, "LOCK TABLES"),
    (Privileges::REPLICATION_SLAVE, "REPLICATION SLAVE"),
    (Privileges::REPLICATION_CLIENT, "REPLICATION CLIENT"),
];

/// MySQL 8's dynamic privileges that mean something here, alphabetically (as `SHOW GRANTS`).
const DYNAMIC: [(Privileges, &str); 2] = [
    (Privileges::BINLOG_ADMIN, "BINLOG_ADMIN"),
    (Privileges::CONNECTION_ADMIN, "CONNECTION_ADMIN"),
];

impl Privileges {
    pub const NONE: Privileges = Privileges(0);
    pub const SELECT: Privileges = Privileges(1);
    pub const RELOAD: Privileges = Privileges(1 << 1);
    pub const PROCESS: Privileges = Privileges(1 << 2);
    pub const SHOW_DATABASES: Privileges = Privileges(1 << 3);
    pub const SUPER: Privileges = Privileges(1 << 4);
    pub const LOCK_TABLES: Privileges = Privileges(1 << 5);
    pub const REPLICATION_SLAVE: Privileges = Privileges(1 << 6);
    pub const REPLICATION_CLIENT: Privileges = Privileges(1 << 7);
    pub const BINLOG_ADMIN: Privileges = Privileges(1 << 8);
    pub const CONNECTION_ADMIN: Privileges = Privileges(1 << 9);
    pub const ALL: Privileges = Privileges((1 << 10) - 1);

    /// True if every privilege of `other` is held.
    pub fn contains(self, other: Privileges) -> bool {
        self.0 & other.0 == other.0
    }

    /// True if at least one privilege of `any` is held.
    pub fn any(self, any: Privileges) -> bool {
        self.0 & any.0 != 0
    }

    /// Parses privilege names as a grant list writes them (`REPLICATION SLAVE`,
    /// `replication_slave`, `REPLICATION REPLICA`, `ALL PRIVILEGES`; case and the space or
    /// underscore do not matter).
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Privileges, String> {
        let mut out = Privileges::NONE;
        for name in names {
            let norm = name
                .as_ref()
                .split(|c: char| c.is_whitespace() || c == '_')
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
                .to_ascii_uppercase();
            let p = match norm.as_str() {
                "ALL" | "ALL PRIVILEGES" => Privileges::ALL,
                "REPLICATION REPLICA" => Privileges::REPLICATION_SLAVE,
                "USAGE" => Privileges::NONE,
                other => STATIC
                    .iter()
                    .chain(DYNAMIC.iter())
                    .find(|(_, n)| n.replace('_', " ") == other)
                    .map(|(p, _)| *p)
                    .ok_or_else(|| {
                        format!(
                            "`{}` is not a privilege of this server (it has {}, ALL)",
                            name.as_ref(),
                            STATIC
                                .iter()
                                .chain(DYNAMIC.iter())
                                .map(|(_, n)| *n)
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })?,
            };
            out = out | p;
        }
        Ok(out)
    }

    /// The rows `SHOW GRANTS` prints for `user` (MySQL 8.0's form; `ALL PRIVILEGES` when all
    /// are held, `USAGE` when none is).
    pub fn grant_rows(self, user: &str) -> Vec<String> {
        let to = format!("TO `{}`@`%`", user.replace('`', "``"));
        if self == Privileges::ALL {
            return vec![format!("GRANT ALL PRIVILEGES ON *.* {to}")];
        }
        let statics: Vec<&str> = STATIC
            .iter()
            .filter(|(p, _)| self.contains(*p))
            .map(|(_, n)| *n)
            .collect();
        let mut rows = vec![if statics.is_empty() {
            format!("GRANT USAGE ON *.* {to}")
        } else {
            format!("GRANT {} ON *.* {to}", statics.join(", "))
        }];
        let dynamics: Vec<&str> = DYNAMIC
            .iter()
            .filter(|(p, _)| self.contains(*p))
            .map(|(_, n)| *n)
            .collect();
        if !dynamics.is_empty() {
            rows.push(format!("GRANT {} ON *.* {to}", dynamics.join(",")));
        }
        rows
    }

    /// The names held, for logs and the status API.
    pub fn names(self) -> Vec<&'static str> {
        STATIC
            .iter()
            .chain(DYNAMIC.iter())
            .filter(|(p, _)| self.contains(*p))
            .map(|(_, n)| *n)
            .collect()
    }
}

impl std::ops::BitOr for Privileges {
    type Output = Privileges;
    fn bitor(self, rhs: Privileges) -> Privileges {
        Privileges(self.0 | rhs.0)
    }
}

/// One account.
#[derive(Debug, Clone)]
pub struct User {
    pub name: String,
    pub credential: Credential,
    pub privileges: Privileges,
}

/// The accounts of a server and the caching_sha2 fast-path cache.
#[derive(Debug, Default)]
pub struct Users {
    by_name: HashMap<String, User>,
    /// SHA256(SHA256(password)) learned by full authentication, for `$A$…` users.
    fast_cache: Mutex<HashMap<String, [u8; 32]>>,
}

impl Users {
    /// A directory of these accounts; a later account of the same name replaces an earlier one.
    pub fn new(users: impl IntoIterator<Item = User>) -> Users {
        Users {
            by_name: users.into_iter().map(|u| (u.name.clone(), u)).collect(),
            fast_cache: Mutex::default(),
        }
    }

    /// One user with a cleartext password and every privilege (the `[security]` pair, tests).
    pub fn single(name: &str, password: &str) -> Users {
        Users::new([User {
            name: name.to_owned(),
            credential: Credential::Password(password.as_bytes().to_vec()),
            privileges: Privileges::ALL,
        }])
    }

    /// The account named `name`.
    pub fn get(&self, name: &str) -> Option<&User> {
        self.by_name.get(name)
    }

    /// What an authentication of `name` checks against: the stored credential with the
    /// fast-path digest filled in once it is known.
    pub fn credential(&self, name: &str) -> Option<Credential> {
        let user = self.by_name.get(name)?;
        Some(match &user.credential {
            Credential::Sha2Crypt { stored, .. } => Credential::Sha2Crypt {
                stored: stored.clone(),
                cached: self.cache().get(name).copied(),
            },
            other => other.clone(),
        })
    }

    /// Keeps the digest a full authentication of `name` proved (only `$A$…` users need it).
    pub fn remember(&self, name: &str, digest: [u8; 32]) {
        if matches!(
            self.by_name.get(name).map(|u| &u.credential),
            Some(Credential::Sha2Crypt { .. })
        ) {
            self.cache().insert(name.to_owned(), digest);
        }
    }

    /// The privileges of `name` (none for an unknown name).
    pub fn privileges(&self, name: &str) -> Privileges {
        self.by_name
            .get(name)
            .map_or(Privileges::NONE, |u| u.privileges)
    }

    /// Account names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.by_name.keys().cloned().collect();
        v.sort();
        v
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, [u8; 32]>> {
        self.fast_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A stored password hash for `password` in the form MySQL keeps for `plugin`: `*` and 40 hex
/// digits, or `$A$005$` with a fresh 20-character salt (printable, without `$`, quotes or
/// backslash, so that it pastes into TOML as is).
pub fn hash_password(
    plugin: tibinlog_protocol::wire::auth::AuthMethod,
    password: &[u8],
) -> Result<String, String> {
    use tibinlog_protocol::wire::auth::{
        native_double_hash, AuthMethod, Sha2Crypt, SHA2_CRYPT_DEFAULT_ROUNDS, SHA2_CRYPT_SALT_LEN,
    };
    match plugin {
        AuthMethod::NativePassword => Ok(format!(
            "*{}",
            native_double_hash(password)
                .iter()
                .map(|b| format!("{b:02X}"))
                .collect::<String>()
        )),
        AuthMethod::CachingSha2Password => {
            const SALT_CHARS: &[u8] =
                b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789./+-_";
            let mut random = [0u8; SHA2_CRYPT_SALT_LEN];
            aws_lc_rs::rand::fill(&mut random).map_err(|_| "no random bytes for the salt")?;
            let salt = random.map(|r| SALT_CHARS[usize::from(r) % SALT_CHARS.len()]);
            let hashed = Sha2Crypt::new(password, salt, SHA2_CRYPT_DEFAULT_ROUNDS).to_bytes();
            String::from_utf8(hashed).map_err(|e| e.to_string())
        }
    }
}

/// MySQL's 1044 text when an account may not use database `db` (no SELECT privilege).
pub fn db_access_denied(
    privileges: Privileges,
    user: &str,
    host: &str,
    db: &str,
) -> Option<String> {
    (!privileges.contains(Privileges::SELECT) && !crate::sql::infoschema::is_schema(db))
        .then(|| format!("Access denied for user '{user}'@'{host}' to database '{db}'"))
}

/// MySQL's 1227 text: "Access denied; you need (at least one of) the X privilege(s) for this
/// operation".
pub fn need_message(what: &str) -> String {
    format!("Access denied; you need (at least one of) the {what} privilege(s) for this operation")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tibinlog_protocol::wire::auth::{sha2_double_hash, Sha2Crypt};

    #[test]
    fn names_parse_in_mysql_spellings() {
        let p = Privileges::parse(&[
            "replication slave",
            "REPLICATION_CLIENT",
            "Select",
            "binlog_admin",
        ])
        .unwrap();
        assert!(p.contains(Privileges::REPLICATION_SLAVE | Privileges::SELECT));
        assert!(p.contains(Privileges::REPLICATION_CLIENT | Privileges::BINLOG_ADMIN));
        assert!(!p.any(Privileges::SUPER | Privileges::CONNECTION_ADMIN));
        assert_eq!(
            Privileges::parse(&["REPLICATION REPLICA"]).unwrap(),
            Privileges::REPLICATION_SLAVE
        );
        assert_eq!(
            Privileges::parse(&["all privileges"]).unwrap(),
            Privileges::ALL
        );
        let err = Privileges::parse(&["INSERT"]).unwrap_err();
        assert!(err.contains("`INSERT` is not a privilege"), "{err}");
    }

    #[test]
    fn grants_print_like_mysql_8() {
        let p = Privileges::parse(&[
            "REPLICATION CLIENT",
            "SELECT",
            "REPLICATION SLAVE",
            "CONNECTION_ADMIN",
            "BINLOG_ADMIN",
        ])
        .unwrap();
        assert_eq!(
            p.grant_rows("repl"),
            vec![
                "GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `repl`@`%`",
                "GRANT BINLOG_ADMIN,CONNECTION_ADMIN ON *.* TO `repl`@`%`",
            ]
        );
        assert_eq!(
            Privileges::NONE.grant_rows("a`b"),
            vec!["GRANT USAGE ON *.* TO `a``b`@`%`"]
        );
        assert_eq!(
            Privileges::ALL.grant_rows("root"),
            vec!["GRANT ALL PRIVILEGES ON *.* TO `root`@`%`"]
        );
    }

    #[test]
    fn made_hashes_verify() {
        use tibinlog_protocol::wire::auth::{verify_cleartext, AuthMethod};
        for plugin in [AuthMethod::NativePassword, AuthMethod::CachingSha2Password] {
            let h = hash_password(plugin, b"s3cret").unwrap();
            let c = Credential::from_mysql_hash(&h).unwrap();
            assert_eq!(c.plugin(), plugin, "{h}");
            assert!(verify_cleartext(&c, b"s3cret") && !verify_cleartext(&c, b"s3cre"));
            assert!(!h.contains(['\'', '"', '\\']));
        }
        let a = hash_password(AuthMethod::CachingSha2Password, b"x").unwrap();
        let b = hash_password(AuthMethod::CachingSha2Password, b"x").unwrap();
        assert_ne!(a, b, "a fresh salt each time");
    }

    #[test]
    fn the_fast_path_cache_fills_for_stored_sha2_users_only() {
        let stored = Sha2Crypt::new(b"pw", *b"01234567890123456789", 5000);
        let users = Users::new([
            User {
                name: "s".into(),
                credential: Credential::Sha2Crypt {
                    stored: std::sync::Arc::new(stored),
                    cached: None,
                },
                privileges: Privileges::REPLICATION_SLAVE,
            },
            User {
                name: "n".into(),
                credential: Credential::from_mysql_hash(
                    "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19",
                )
                .unwrap(),
                privileges: Privileges::NONE,
            },
        ]);
        let before = users.credential("s").unwrap();
        assert!(matches!(before, Credential::Sha2Crypt { cached: None, .. }));
        users.remember("s", sha2_double_hash(b"pw"));
        users.remember("n", sha2_double_hash(b"pw"));
        assert!(matches!(
            users.credential("s"),
            Some(Credential::Sha2Crypt {
                cached: Some(_),
                ..
            })
        ));
        assert!(matches!(
            users.credential("n"),
            Some(Credential::NativeHash(_))
        ));
        assert!(users.credential("nobody").is_none());
        assert_eq!(users.privileges("nobody"), Privileges::NONE);
        assert_eq!(users.names(), vec!["n", "s"]);
    }
}
