//! DDL text in MySQL dialect: TiDB-only syntax removed from a job's `query` so that binlog
//! clients (Debezium's and Maxwell's ANTLR grammars, Canal's Druid parser, go-mysql, MySQL
//! replicas) can parse and apply it; an unparseable statement stops Debezium and Maxwell
//! (trap 14 of `tests/traps.rs`).
//!
//! A small tokenizer keeps string literals, quoted identifiers and comments intact; only tokens
//! outside them are inspected. Removed, case-insensitively:
//!
//! | TiDB syntax | example |
//! |---|---|
//! | TiDB feature comments | `/*T![clustered_index] CLUSTERED */`, `/*T! SHARD_ROW_ID_BITS=4 */` |
//! | TiDB's old version comment `/*!90000 … */` (MySQL ≥ 9.0 would execute it) | `/*!90000 SHARD_ROW_ID_BITS=4 */` |
//! | `AUTO_RANDOM` column attribute, with its `(n[, m])` | `id BIGINT PRIMARY KEY AUTO_RANDOM(5)` |
//! | `CLUSTERED` / `NONCLUSTERED` after `KEY` or `)` | `PRIMARY KEY (id) NONCLUSTERED` |
//! | table options `SHARD_ROW_ID_BITS`, `PRE_SPLIT_REGIONS`, `AUTO_ID_CACHE`, `AUTO_RANDOM_BASE`, `TTL_ENABLE`, `TTL_JOB_INTERVAL`, `STATS_BUCKETS`, `STATS_TOPN`, `STATS_COLS_CHOICE`, `STATS_SAMPLE_RATE` `[=] value` | `SHARD_ROW_ID_BITS = 4` |
//! | `TTL [=] col + INTERVAL n unit`, `REMOVE TTL` | `TTL = ts + INTERVAL 1 DAY` |
//! | `PLACEMENT POLICY [=] name` | `PLACEMENT POLICY = p1` |
//!
//! Ordinary comments (`/* … */`, `/*! … */` MySQL version comments, `-- …`, `# …`) are kept.
//! After removals, a comma left dangling (before `,`/`)`/the end, after `(`, or right after the
//! table name of `ALTER TABLE name`) is removed. An `ALTER TABLE name` left with nothing to do
//! is reported as `None`: the DDL has no MySQL equivalent and is not written.

/// Kind of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Space,
    Comment,
    /// `/*T! … */` or `/*!90000 … */`.
    TidbComment,
    Str,
    QuotedIdent,
    Word,
    Punct(char),
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    kind: Kind,
    text: &'a str,
}

fn tokenize(s: &str) -> Vec<Token<'_>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let c = b[i];
        let kind = if c.is_ascii_whitespace() {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            Kind::Space
        } else if s[i..].starts_with("/*") {
            let end = s[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2);
            let body = &s[i..end];
            i = end;
            if body.starts_with("/*T!") || body.starts_with("/*!90000") {
                Kind::TidbComment
            } else {
                Kind::Comment
            }
        } else if s[i..].starts_with("-- ") || s[i..].starts_with("--\t") || c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            Kind::Comment
        } else if c == b'\'' || c == b'"' || c == b'`' {
            i += 1;
            while i < b.len() {
                if b[i] == b'\\' && c != b'`' {
                    i += 2;
                } else if b[i] == c {
                    if b.get(i + 1) == Some(&c) {
                        i += 2;
                    } else {
                        i += 1;
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            i = i.min(b.len());
            if c == b'`' {
                Kind::QuotedIdent
            } else {
                Kind::Str
            }
        } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80 {
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80)
            {
                i += 1;
            }
            Kind::Word
        } else {
            // One ASCII punctuation character.
            i += 1;
            Kind::Punct(c as char)
        };
        out.push(Token {
            kind,
            text: &s[start..i],
        });
    }
    out
}

fn is_word(t: &Token<'_>, w: &str) -> bool {
    t.kind == Kind::Word && t.text.eq_ignore_ascii_case(w)
}

/// Table options of TiDB with one value: `NAME [=] value`.
const TIDB_TABLE_OPTIONS: &[&str] = &[
    "SHARD_ROW_ID_BITS",
    "PRE_SPLIT_REGIONS",
    "AUTO_ID_CACHE",
    "AUTO_RANDOM_BASE",
    "TTL_ENABLE",
    "TTL_JOB_INTERVAL",
    "STATS_BUCKETS",
    "STATS_TOPN",
    "STATS_COLS_CHOICE",
    "STATS_SAMPLE_RATE",
];

struct Rewriter<'a> {
    toks: Vec<Token<'a>>,
    keep: Vec<bool>,
}

impl<'a> Rewriter<'a> {
    /// Index of the next significant token at or after `i`.
    fn sig(&self, mut i: usize) -> Option<usize> {
        while i < self.toks.len() {
            if !matches!(
                self.toks[i].kind,
                Kind::Space | Kind::Comment | Kind::TidbComment
            ) && self.keep[i]
            {
                return Some(i);
            }
            i += 1;
        }
        None
    }
    /// Index of the previous kept significant token before `i`.
    fn prev_sig(&self, i: usize) -> Option<usize> {
        (0..i).rev().find(|&j| {
            self.keep[j]
                && !matches!(
                    self.toks[j].kind,
                    Kind::Space | Kind::Comment | Kind::TidbComment
                )
        })
    }
    /// Drops tokens `from..to` and the whitespace right before them.
    fn drop_range(&mut self, from: usize, to: usize) {
        for k in from..to.min(self.toks.len()) {
            self.keep[k] = false;
        }
        if from > 0 && self.toks[from - 1].kind == Kind::Space {
            self.keep[from - 1] = false;
        }
    }
    fn punct_at(&self, i: Option<usize>, c: char) -> bool {
        i.is_some_and(|i| self.toks[i].kind == Kind::Punct(c))
    }
    /// After `i`, an optional `=` then one value token; returns the end (exclusive).
    fn option_value_end(&self, i: usize) -> usize {
        let mut j = match self.sig(i + 1) {
            Some(j) => j,
            None => return i + 1,
        };
        if self.toks[j].kind == Kind::Punct('=') {
            match self.sig(j + 1) {
                Some(k) => j = k,
                None => return j + 1,
            }
        }
        match self.toks[j].kind {
            Kind::Word | Kind::Str | Kind::QuotedIdent => j + 1,
            _ => i + 1,
        }
    }
    /// `(…)` balanced, starting at `i` (an opening parenthesis); returns the end.
    fn paren_end(&self, i: usize) -> usize {
        let mut depth = 0usize;
        for j in i..self.toks.len() {
            match self.toks[j].kind {
                Kind::Punct('(') => depth += 1,
                Kind::Punct(')') => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return j + 1;
                    }
                }
                _ => {}
            }
        }
        self.toks.len()
    }
    /// `TTL [=] col + INTERVAL value unit` starting at `i`; its end if the shape matches.
    fn ttl_end(&self, i: usize) -> Option<usize> {
        let mut j = self.sig(i + 1)?;
        if self.toks[j].kind == Kind::Punct('=') {
            j = self.sig(j + 1)?;
        }
        if !matches!(self.toks[j].kind, Kind::Word | Kind::QuotedIdent) {
            return None;
        }
        let plus = self.sig(j + 1)?;
        if self.toks[plus].kind != Kind::Punct('+') {
            return None;
        }
        let interval = self.sig(plus + 1)?;
        if !is_word(&self.toks[interval], "INTERVAL") {
            return None;
        }
        let value = self.sig(interval + 1)?;
        let value_end = if self.toks[value].kind == Kind::Punct('(') {
            self.paren_end(value)
        } else {
            value + 1
        };
        let unit = self.sig(value_end)?;
        (self.toks[unit].kind == Kind::Word).then_some(unit + 1)
    }

    fn remove_tidb_syntax(&mut self) {
        let mut i = 0;
        while i < self.toks.len() {
            let t = self.toks[i];
            if !self.keep[i] {
                i += 1;
                continue;
            }
            if t.kind == Kind::TidbComment {
                self.drop_range(i, i + 1);
                i += 1;
                continue;
            }
            if t.kind != Kind::Word {
                i += 1;
                continue;
            }
            let upper = t.text.to_ascii_uppercase();
            let end = match upper.as_str() {
                "AUTO_RANDOM" => {
                    let n = self.sig(i + 1);
                    if self.punct_at(n, '(') {
                        n.map(|n| self.paren_end(n))
                    } else {
                        Some(i + 1)
                    }
                }
                "CLUSTERED" | "NONCLUSTERED" => {
                    let p = self.prev_sig(i);
                    let after_key = p.is_some_and(|p| is_word(&self.toks[p], "KEY"));
                    (after_key || self.punct_at(p, ')')).then_some(i + 1)
                }
                "TTL" => self.ttl_end(i),
                "REMOVE" => self
                    .sig(i + 1)
                    .filter(|&n| is_word(&self.toks[n], "TTL"))
                    .map(|n| n + 1),
                "PLACEMENT" => self
                    .sig(i + 1)
                    .filter(|&n| is_word(&self.toks[n], "POLICY"))
                    .map(|n| self.option_value_end(n)),
                u if TIDB_TABLE_OPTIONS.contains(&u) => Some(self.option_value_end(i)),
                _ => None,
            };
            match end {
                Some(end) => {
                    self.drop_range(i, end);
                    i = end;
                }
                None => i += 1,
            }
        }
    }

    /// Removes commas that removals left dangling.
    fn fix_commas(&mut self) {
        let alter_name_end = self.alter_table_name_end();
        for i in 0..self.toks.len() {
            if !self.keep[i] || self.toks[i].kind != Kind::Punct(',') {
                continue;
            }
            let next = self.sig(i + 1);
            let prev = self.prev_sig(i);
            let dangling = next.is_none()
                || self.punct_at(next, ',')
                || self.punct_at(next, ')')
                || self.punct_at(prev, '(')
                || (prev.is_some() && prev == alter_name_end);
            if dangling {
                self.drop_range(i, i + 1);
            }
        }
    }

    /// For `ALTER TABLE [db.]name …`, the index of the name's last token.
    fn alter_table_name_end(&self) -> Option<usize> {
        let a = self.sig(0)?;
        let t = self.sig(a + 1)?;
        if !is_word(&self.toks[a], "ALTER") || !is_word(&self.toks[t], "TABLE") {
            return None;
        }
        let n = self.sig(t + 1)?;
        let dot = self.sig(n + 1);
        if self.punct_at(dot, '.') {
            dot.and_then(|d| self.sig(d + 1))
        } else {
            Some(n)
        }
    }

    fn output(&self) -> String {
        let mut s = String::new();
        for (t, &k) in self.toks.iter().zip(&self.keep) {
            if k {
                s.push_str(t.text);
            }
        }
        s.trim().to_owned()
    }
}

/// The MySQL form of a TiDB DDL statement (see the module doc); `None` when nothing that MySQL
/// would execute is left (`ALTER TABLE t` with all its clauses removed, or an empty text).
pub fn normalize_ddl(query: &str) -> Option<String> {
    let query = query.trim().trim_end_matches(';').trim_end();
    let toks = tokenize(query);
    let keep = vec![true; toks.len()];
    let mut rw = Rewriter { toks, keep };
    rw.remove_tidb_syntax();
    rw.fix_commas();
    let end = rw.alter_table_name_end();
    if end.is_some() && end.and_then(|e| rw.sig(e + 1)).is_none() {
        return None;
    }
    let out = rw.output();
    (!out.is_empty()).then_some(out)
}

/// Splits a multi-statement text (a CREATE TABLES batch job) at `;` outside literals and
/// comments; empty statements are dropped.
pub fn split_statements(query: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut pos = 0;
    for t in tokenize(query) {
        pos += t.text.len();
        if t.kind == Kind::Punct(';') {
            out.push(&query[start..pos - 1]);
            start = pos;
        }
    }
    out.push(&query[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(q: &str) -> Option<String> {
        normalize_ddl(q)
    }

    #[test]
    fn normalization_examples() {
        let cases: &[(&str, Option<&str>)] = &[
            (
                "CREATE TABLE `d`.`t` (`id` bigint(20) NOT NULL, PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */, KEY `i` (`v`))",
                Some("CREATE TABLE `d`.`t` (`id` bigint(20) NOT NULL, PRIMARY KEY (`id`), KEY `i` (`v`))"),
            ),
            (
                "create table t (id bigint primary key auto_random(5, 54), v varchar(10) comment 'auto_random(3) stays')",
                Some("create table t (id bigint primary key, v varchar(10) comment 'auto_random(3) stays')"),
            ),
            (
                "CREATE TABLE t (a INT, PRIMARY KEY (a) NONCLUSTERED) SHARD_ROW_ID_BITS = 4 PRE_SPLIT_REGIONS=2 ENGINE=InnoDB",
                Some("CREATE TABLE t (a INT, PRIMARY KEY (a)) ENGINE=InnoDB"),
            ),
            (
                "CREATE TABLE t (id int, clustered int) /*T! SHARD_ROW_ID_BITS=4 */ /*!90000 PRE_SPLIT_REGIONS=2 */ /*!40101 COMMENT='x' */",
                Some("CREATE TABLE t (id int, clustered int) /*!40101 COMMENT='x' */"),
            ),
            (
                "CREATE TABLE t (created_at TIMESTAMP, ttl int) TTL = `created_at` + INTERVAL 3 MONTH TTL_ENABLE = 'OFF' TTL_JOB_INTERVAL='1h'",
                Some("CREATE TABLE t (created_at TIMESTAMP, ttl int)"),
            ),
            ("ALTER TABLE t REMOVE TTL", None),
            ("ALTER TABLE d.t SHARD_ROW_ID_BITS = 4", None),
            ("ALTER TABLE t TTL_ENABLE='ON'", None),
            (
                "ALTER TABLE t SHARD_ROW_ID_BITS=4, COMMENT 'x'",
                Some("ALTER TABLE t COMMENT 'x'"),
            ),
            (
                "ALTER TABLE t COMMENT = 'a', PLACEMENT POLICY = `p1`;",
                Some("ALTER TABLE t COMMENT = 'a'"),
            ),
            (
                "CREATE DATABASE d PLACEMENT POLICY=p1 DEFAULT CHARSET utf8mb4",
                Some("CREATE DATABASE d DEFAULT CHARSET utf8mb4"),
            ),
            (
                "ALTER TABLE t ADD COLUMN c varchar(10) DEFAULT 'SHARD_ROW_ID_BITS=4, /*T! x */'",
                Some("ALTER TABLE t ADD COLUMN c varchar(10) DEFAULT 'SHARD_ROW_ID_BITS=4, /*T! x */'"),
            ),
            (
                "ALTER TABLE t ADD INDEX i ((lower(v))) -- comment: AUTO_RANDOM",
                Some("ALTER TABLE t ADD INDEX i ((lower(v))) -- comment: AUTO_RANDOM"),
            ),
            ("DROP TABLE `a`, `b`", Some("DROP TABLE `a`, `b`")),
            ("  ", None),
        ];
        for (q, want) in cases {
            assert_eq!(n(q).as_deref(), *want, "{q}");
        }
    }

    #[test]
    fn literals_and_escapes_are_opaque() {
        let q = r#"CREATE TABLE t (a varchar(9) DEFAULT 'it''s \' CLUSTERED', `PRE_SPLIT_REGIONS` int, b int DEFAULT "x""y")"#;
        assert_eq!(n(q).as_deref(), Some(q));
        // An unterminated literal is kept as is, never panics.
        assert_eq!(
            n("CREATE TABLE t (a int DEFAULT 'x").as_deref(),
            Some("CREATE TABLE t (a int DEFAULT 'x")
        );
        assert_eq!(
            n("CREATE TABLE t (a int) /* unterminated").as_deref(),
            Some("CREATE TABLE t (a int) /* unterminated")
        );
    }

    #[test]
    fn split_respects_literals() {
        let q = "CREATE TABLE a (x varchar(3) DEFAULT ';'); CREATE TABLE b (y int) /* ; */;";
        assert_eq!(
            split_statements(q),
            vec![
                "CREATE TABLE a (x varchar(3) DEFAULT ';')",
                "CREATE TABLE b (y int) /* ; */"
            ]
        );
        assert_eq!(split_statements("DROP TABLE t"), vec!["DROP TABLE t"]);
    }
}
