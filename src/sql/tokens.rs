//! The token reader for the statement forms `sqlparser` leaves generic (`SHOW …`, `PURGE …`,
//! `START TRANSACTION WITH CONSISTENT SNAPSHOT`, …): words, numbers, quoted strings
//! (unquoted, with the quotes remembered) and single punctuation characters, each with its
//! byte offset in the statement; comments and a trailing `;` are skipped.
//! [`statement`](super::statement) classifies every statement with it and
//! [`show`](super::show) rewrites the SHOW forms it reads.

/// A token: its text, whether it was quoted, and its byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tok {
    pub text: String,
    pub quoted: bool,
    pub offset: usize,
}

/// The tokens of one statement.
#[derive(Debug, Clone)]
pub struct Tokens<'a> {
    pub sql: &'a str,
    pub toks: Vec<Tok>,
}

impl<'a> Tokens<'a> {
    /// Splits `raw` into tokens.
    pub fn new(raw: &'a str) -> Self {
        let b = raw.as_bytes();
        let mut toks = Vec::new();
        let mut i = 0;
        let mut push = |offset: usize, text: String, quoted: bool| {
            toks.push(Tok {
                text,
                quoted,
                offset,
            })
        };
        while i < b.len() {
            let c = b[i];
            if c.is_ascii_whitespace() || c == b';' {
                i += 1;
            } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
                i = raw[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            } else if c == b'#' || (c == b'-' && b.get(i + 1) == Some(&b'-')) {
                i = raw[i..].find('\n').map_or(b.len(), |e| i + e + 1);
            } else if c == b'\'' || c == b'"' || c == b'`' {
                let start = i;
                let mut s = String::new();
                i += 1;
                while i < b.len() && b[i] != c {
                    if b[i] == b'\\' && c != b'`' && i + 1 < b.len() {
                        i += 1;
                    }
                    let ch_len = raw[i..].chars().next().map_or(1, char::len_utf8);
                    s.push_str(&raw[i..i + ch_len]);
                    i += ch_len;
                }
                i += 1;
                push(start, s, true);
            } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'@' || c == b'.' || c >= 0x80
            {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || matches!(b[i], b'_' | b'@' | b'.' | b'$')
                        || b[i] >= 0x80)
                {
                    i += 1;
                }
                push(start, raw[start..i].to_string(), false);
            } else {
                push(i, (c as char).to_string(), false);
                i += 1;
            }
        }
        Tokens { sql: raw, toks }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.toks.len()
    }

    /// No token at all (only blanks and comments).
    pub fn is_empty(&self) -> bool {
        self.toks.is_empty()
    }

    /// The text of token `i`.
    pub fn get(&self, i: usize) -> Option<&str> {
        self.toks.get(i).map(|t| t.text.as_str())
    }

    /// Byte offset of token `i` (the end of the text if out of range).
    pub fn offset(&self, i: usize) -> usize {
        self.toks.get(i).map_or(self.sql.len(), |t| t.offset)
    }

    /// True if token `i` is the unquoted keyword `k` (any case).
    pub fn kw(&self, i: usize, k: &str) -> bool {
        self.toks
            .get(i)
            .is_some_and(|t| !t.quoted && t.text.eq_ignore_ascii_case(k))
    }

    /// True if the statement starts with the keywords `kws`.
    pub fn starts_with(&self, kws: &[&str]) -> bool {
        kws.iter().enumerate().all(|(i, k)| self.kw(i, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_skip_comments_and_unquote() {
        let w = Tokens::new("/* c */ SHOW binlog EVENTS IN 'b.000001' FROM 4 LIMIT 1, 2;");
        assert!(w.starts_with(&["SHOW", "BINLOG", "EVENTS"]));
        assert_eq!(w.get(4), Some("b.000001"));
        assert!(!w.kw(4, "b.000001"), "quoted text is not a keyword");
        assert_eq!(w.get(9), Some(","));
        assert_eq!(w.offset(1), 13);
        assert_eq!(w.offset(99), w.sql.len());
        let q = Tokens::new("SELECT 'it\\'s' -- rest\n, `a b`");
        assert_eq!(q.get(1), Some("it's"));
        assert_eq!(q.get(3), Some("a b"));
        assert_eq!(q.len(), 4);
    }
}
