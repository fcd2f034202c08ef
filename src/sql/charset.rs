//! Character sets and collations as MySQL 8.0 lists them (`SHOW CHARACTER SET`,
//! `SHOW COLLATION`, `information_schema.CHARACTER_SETS` / `COLLATIONS` /
//! `COLLATION_CHARACTER_SET_APPLICABILITY`), restricted to the character sets TiDB supports, and
//! how each collation compares (case folding, trailing spaces).
//!
//! Ids, names, default flags, pad attributes and maximum lengths are MySQL 8.0's own; TiDB uses
//! the same ids. The result-set collations of the server's own text columns are
//! [`UTF8MB3_GENERAL_CI`] (catalog names, as MySQL's data dictionary answers them) and
//! [`UTF8MB4_0900_AI_CI`] (variables and computed strings: `collation_connection`).

use super::like::CaseRule;

/// `utf8mb3_general_ci`: the collation of catalog text columns in MySQL 8.0's answers.
pub const UTF8MB3_GENERAL_CI: u16 = 33;
/// `utf8mb4_general_ci`.
pub const UTF8MB4_GENERAL_CI: u16 = 45;
/// `utf8mb4_bin`: TiDB's default collation.
pub const UTF8MB4_BIN: u16 = 46;
/// `utf8mb3_tolower_ci`: the collation of MySQL 8.0's case-insensitive catalog names.
pub const UTF8MB3_TOLOWER_CI: u16 = 76;
/// `binary`.
pub const BINARY: u16 = 63;
/// `utf8mb4_0900_ai_ci`: MySQL 8.0's default, the connection collation we announce.
pub const UTF8MB4_0900_AI_CI: u16 = 255;

/// One character set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charset {
    pub name: &'static str,
    pub default_collation: &'static str,
    pub description: &'static str,
    pub maxlen: u8,
}

/// One collation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collation {
    pub id: u16,
    pub name: &'static str,
    pub charset: &'static str,
    pub is_default: bool,
    /// `PAD SPACE` (trailing spaces do not count in comparisons) or `NO PAD`.
    pub pad_space: bool,
    /// Sort length (`Sortlen` of `SHOW COLLATION`).
    pub sortlen: u8,
}

impl Collation {
    /// How `LIKE` and comparisons treat letter case under this collation.
    pub fn case_rule(&self) -> CaseRule {
        if self.name.ends_with("_ci") || self.name.ends_with("_ai_ci") {
            CaseRule::Insensitive
        } else {
            CaseRule::Sensitive
        }
    }
}

/// The character sets TiDB supports, in `SHOW CHARACTER SET` order (by name).
pub const CHARSETS: &[Charset] = &[
    Charset {
        name: "ascii",
        default_collation: "ascii_general_ci",
        description: "US ASCII",
        maxlen: 1,
    },
    Charset {
        name: "binary",
        default_collation: "binary",
        description: "Binary pseudo charset",
        maxlen: 1,
    },
    Charset {
        name: "gb18030",
        default_collation: "gb18030_chinese_ci",
        description: "China National Standard GB18030",
        maxlen: 4,
    },
    Charset {
        name: "gbk",
        default_collation: "gbk_chinese_ci",
        description: "GBK Simplified Chinese",
        maxlen: 2,
    },
    Charset {
        name: "latin1",
        default_collation: "latin1_swedish_ci",
        description: "cp1252 West European",
        maxlen: 1,
    },
    Charset {
        name: "utf8mb3",
        default_collation: "utf8mb3_general_ci",
        description: "UTF-8 Unicode",
        maxlen: 3,
    },
    Charset {
        name: "utf8mb4",
        default_collation: "utf8mb4_0900_ai_ci",
        description: "UTF-8 Unicode",
        maxlen: 4,
    },
];

const fn coll(
    id: u16,
    name: &'static str,
    charset: &'static str,
    is_default: bool,
    pad_space: bool,
    sortlen: u8,
) -> Collation {
    Collation {
        id,
        name,
        charset,
        is_default,
        pad_space,
        sortlen,
    }
}

/// The collations of [`CHARSETS`], by id.
pub const COLLATIONS: &[Collation] = &[
    coll(8, "latin1_swedish_ci", "latin1", true, true, 1),
    coll(11, "ascii_general_ci", "ascii", true, true, 1),
    coll(28, "gbk_chinese_ci", "gbk", true, true, 1),
    coll(33, "utf8mb3_general_ci", "utf8mb3", true, true, 1),
    coll(45, "utf8mb4_general_ci", "utf8mb4", false, true, 1),
    coll(46, "utf8mb4_bin", "utf8mb4", false, true, 1),
    coll(47, "latin1_bin", "latin1", false, true, 1),
    coll(48, "latin1_general_ci", "latin1", false, true, 1),
    coll(63, "binary", "binary", true, false, 1),
    coll(65, "ascii_bin", "ascii", false, true, 1),
    coll(76, "utf8mb3_tolower_ci", "utf8mb3", false, true, 1),
    coll(83, "utf8mb3_bin", "utf8mb3", false, true, 1),
    coll(87, "gbk_bin", "gbk", false, true, 1),
    coll(192, "utf8mb3_unicode_ci", "utf8mb3", false, true, 8),
    coll(224, "utf8mb4_unicode_ci", "utf8mb4", false, true, 8),
    coll(246, "utf8mb4_unicode_520_ci", "utf8mb4", false, true, 8),
    coll(248, "gb18030_chinese_ci", "gb18030", true, true, 2),
    coll(249, "gb18030_bin", "gb18030", false, true, 1),
    coll(255, "utf8mb4_0900_ai_ci", "utf8mb4", true, false, 0),
    coll(278, "utf8mb4_0900_as_cs", "utf8mb4", false, false, 0),
    coll(309, "utf8mb4_0900_bin", "utf8mb4", false, false, 1),
];

/// The collation with id `id`.
pub fn collation(id: u16) -> Option<&'static Collation> {
    COLLATIONS.iter().find(|c| c.id == id)
}

/// The collation named `name` (case-insensitive; `utf8_` is `utf8mb3_`).
pub fn collation_by_name(name: &str) -> Option<&'static Collation> {
    let lower = name.to_ascii_lowercase();
    let name = match lower.strip_prefix("utf8_") {
        Some(rest) => format!("utf8mb3_{rest}"),
        None => lower,
    };
    COLLATIONS.iter().find(|c| c.name == name)
}

/// The character set named `name` (`utf8` is `utf8mb3`).
pub fn charset(name: &str) -> Option<&'static Charset> {
    let lower = name.to_ascii_lowercase();
    let name = if lower == "utf8" { "utf8mb3" } else { &lower };
    CHARSETS.iter().find(|c| c.name == name)
}

/// Bytes per character at most under collation `id` (4 for an unknown one).
pub fn maxlen(id: u16) -> u32 {
    collation(id)
        .and_then(|c| charset(c.charset))
        .map_or(4, |c| u32::from(c.maxlen))
}

/// Compares two strings under collation `id`: simple case folding for `_ci` collations,
/// trailing spaces ignored for `PAD SPACE` ones, code points (bytes for binary) otherwise.
pub fn compare(id: u16, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let c = collation(id);
    let pad = c.is_some_and(|c| c.pad_space);
    let (a, b) = if pad {
        (trim_spaces(a), trim_spaces(b))
    } else {
        (a, b)
    };
    match c.map(Collation::case_rule) {
        Some(CaseRule::Insensitive) => match (std::str::from_utf8(a), std::str::from_utf8(b)) {
            (Ok(a), Ok(b)) => a.chars().map(fold).cmp(b.chars().map(fold)),
            _ => a.cmp(b),
        },
        _ => a.cmp(b),
    }
}

fn trim_spaces(s: &[u8]) -> &[u8] {
    let end = s.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    &s[..end]
}

/// Simple case folding (to lower case when that is one character).
pub fn fold(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    let mut l = c.to_lowercase();
    match (l.next(), l.next()) {
        (Some(one), None) => one,
        _ => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    #[test]
    fn every_charset_has_its_default_collation_and_ids_are_unique() {
        for cs in CHARSETS {
            let d = collation_by_name(cs.default_collation).expect("default collation listed");
            assert!(d.is_default && d.charset == cs.name, "{}", cs.name);
        }
        let mut ids: Vec<u16> = COLLATIONS.iter().map(|c| c.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), COLLATIONS.len());
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "sorted by id");
        assert_eq!(
            collation_by_name("utf8_general_ci").map(|c| c.id),
            Some(UTF8MB3_GENERAL_CI)
        );
        assert_eq!(maxlen(UTF8MB4_BIN), 4);
        assert_eq!(maxlen(UTF8MB3_GENERAL_CI), 3);
    }

    #[test]
    fn comparisons_follow_case_and_pad_rules() {
        assert_eq!(compare(UTF8MB4_BIN, b"a ", b"a"), Ordering::Equal);
        assert_eq!(compare(UTF8MB4_BIN, b"A", b"a"), Ordering::Less);
        assert_eq!(compare(UTF8MB4_GENERAL_CI, b"A", b"a"), Ordering::Equal);
        assert_eq!(compare(UTF8MB4_0900_AI_CI, b"a ", b"a"), Ordering::Greater);
        assert_eq!(
            compare(UTF8MB4_0900_AI_CI, "Été".as_bytes(), "été".as_bytes()),
            Ordering::Equal
        );
        assert_eq!(compare(BINARY, b"a ", b"a"), Ordering::Greater);
    }
}
