//! A small SQL tokenizer for the statements `sqlparser` does not parse (see [`super::admin`]).

/// Tokens of a statement for the fallbacks: words, numbers, quoted strings (unquoted), and
/// single punctuation characters; comments and a trailing `;` are skipped.
#[derive(Debug)]
pub(super) struct Words<'a> {
    raw: &'a str,
    toks: Vec<(usize, String, bool)>,
}

impl<'a> Words<'a> {
    pub(super) fn new(raw: &'a str) -> Self {
        let b = raw.as_bytes();
        let mut toks = Vec::new();
        let mut i = 0;
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
                toks.push((start, s, true));
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
                toks.push((start, raw[start..i].to_string(), false));
            } else {
                toks.push((i, (c as char).to_string(), false));
                i += 1;
            }
        }
        Self { raw, toks }
    }

    pub(super) fn len(&self) -> usize {
        self.toks.len()
    }

    pub(super) fn raw(&self) -> &'a str {
        self.raw
    }

    pub(super) fn get(&self, i: usize) -> Option<&str> {
        self.toks.get(i).map(|t| t.1.as_str())
    }

    /// Byte offset of token `i` (end of text if out of range).
    pub(super) fn offset(&self, i: usize) -> usize {
        self.toks.get(i).map_or(self.raw.len(), |t| t.0)
    }

    /// True if token `i` is the unquoted keyword `kw` (any case).
    pub(super) fn is_kw(&self, i: usize, kw: &str) -> bool {
        self.toks
            .get(i)
            .is_some_and(|t| !t.2 && t.1.eq_ignore_ascii_case(kw))
    }

    /// The tokens for [`crate::sql::show`].
    pub(super) fn tokens(&self) -> crate::sql::show::Tokens<'a>
    where
        Self: 'a,
    {
        crate::sql::show::Tokens {
            sql: self.raw,
            toks: self
                .toks
                .iter()
                .map(|(offset, text, quoted)| crate::sql::show::Tok {
                    text: text.clone(),
                    quoted: *quoted,
                    offset: *offset,
                })
                .collect(),
        }
    }

    pub(super) fn starts_with(&self, kws: &[&str]) -> bool {
        kws.iter().enumerate().all(|(i, k)| self.is_kw(i, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_skip_comments_and_unquote() {
        let w = Words::new("/* c */ SHOW binlog EVENTS IN 'b.000001' FROM 4 LIMIT 1, 2;");
        assert!(w.starts_with(&["SHOW", "BINLOG", "EVENTS"]));
        assert_eq!(w.get(4), Some("b.000001"));
        assert!(!w.is_kw(4, "b.000001"), "quoted text is not a keyword");
        assert_eq!(w.get(9), Some(","));
    }
}
