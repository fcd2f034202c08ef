//! The columns a SELECT over one table can read, found from its text: a column is read when
//! its name appears anywhere in the statement (select list, WHERE, GROUP BY, HAVING, ORDER BY,
//! subqueries), and every column is read when a wildcard does (`*`, `t.*`, or a `*` that may
//! be one). The set is a superset of what the plan evaluates — a name in a string literal or
//! an alias only costs a decode — so a scan can leave the other columns undecoded.

use std::collections::HashSet;

use super::tokens::Tokens;

/// The column names a statement's text mentions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refs {
    /// A wildcard (or a `*` that may be one) appears: every column is read.
    all: bool,
    /// Every word and quoted token, lower-cased.
    names: HashSet<String>,
}

impl Refs {
    /// The names mentioned by `texts` (a statement's parts).
    pub fn of(texts: &[&str]) -> Refs {
        let mut refs = Refs::default();
        for text in texts {
            let toks = Tokens::new(text).toks;
            for (i, t) in toks.iter().enumerate() {
                if !t.quoted && t.text == "*" {
                    // `COUNT(*)` reads no column; any other `*` may be a wildcard.
                    let inside = i > 0
                        && toks[i - 1].text == "("
                        && !toks[i - 1].quoted
                        && toks.get(i + 1).is_some_and(|n| n.text == ")" && !n.quoted);
                    refs.all |= !inside;
                } else if t.quoted {
                    refs.names.insert(t.text.to_lowercase());
                } else {
                    // `t.c` reads as one word.
                    for part in t.text.split('.') {
                        refs.names.insert(part.to_lowercase());
                    }
                }
            }
        }
        refs
    }

    /// Which of `columns` (a table's column names, in order) are read; `None`: all of them.
    pub fn mask<'a>(&self, columns: impl IntoIterator<Item = &'a str>) -> Option<Vec<bool>> {
        if self.all {
            return None;
        }
        let mask: Vec<bool> = columns
            .into_iter()
            .map(|c| self.names.contains(&c.to_lowercase()))
            .collect();
        (!mask.iter().all(|&m| m)).then_some(mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(sql: &str) -> Option<Vec<bool>> {
        Refs::of(&[sql]).mask(["code", "n", "s"])
    }

    #[test]
    fn named_columns_are_read_and_the_others_not() {
        assert_eq!(
            mask("SELECT `code` FROM t WHERE `code` >= 'x'"),
            Some(vec![true, false, false])
        );
        assert_eq!(
            mask("SELECT COUNT(*) FROM t WHERE N > 3"),
            Some(vec![false, true, false]),
            "names are case-insensitive; COUNT(*) reads no column"
        );
        assert_eq!(mask("SELECT 1 FROM t"), Some(vec![false, false, false]));
        assert_eq!(
            mask("SELECT t.`code` FROM t WHERE db.t.s = 'x'"),
            Some(vec![true, false, true]),
            "qualified and quoted names"
        );
        assert_eq!(
            mask("SELECT code FROM t WHERE s = 'n'"),
            None,
            "a string that spells a name reads it (a superset is safe)"
        );
        assert_eq!(
            mask("SELECT code FROM t ORDER BY s /* n */"),
            Some(vec![true, false, true]),
            "a comment names nothing"
        );
    }

    #[test]
    fn a_wildcard_or_a_name_everywhere_reads_every_column() {
        assert_eq!(mask("SELECT * FROM t"), None);
        assert_eq!(mask("SELECT t.* FROM t"), None);
        assert_eq!(
            mask("SELECT n * 2 FROM t"),
            None,
            "a * that may be a wildcard"
        );
        assert_eq!(mask("SELECT code, n, s FROM t"), None, "every column named");
        assert_eq!(
            mask("SELECT code FROM t WHERE x IN (SELECT s FROM u WHERE u.k = T.n)"),
            None,
            "names in subqueries count, qualified ones too"
        );
    }
}
