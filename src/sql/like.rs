//! SQL `LIKE` in linear time, without recursion.
//!
//! A pattern is compiled once into segments split at `%` (runs of `%` collapse). A value matches
//! when the first segment matches at its start, the last at its end, and every middle segment
//! occurs, in order, between them; taking the leftmost occurrence of each middle segment is
//! always right (a later one can only leave less room for the rest), so nothing is ever retried.
//! A middle segment is found with the bit-parallel shift-and automaton (`_` is a position that
//! takes any character): each value character costs one pass over `⌈len/64⌉` words, and each
//! character is read by one segment only, so a match costs `O(n · ⌈s/64⌉)` for a value of `n`
//! characters and a longest segment of `s` (linear for segments up to 64 positions), whatever the
//! pattern's shape. The recursive matcher this replaces backtracked exponentially on `%a%a%…b`.
//!
//! Characters are compared per code point (`_` takes one character, not one byte); a
//! case-insensitive collation ([`CaseRule::Insensitive`], the `_ci` collations of MySQL's
//! catalog columns) compares simple lower-case folds. `\` escapes the next character (a final
//! `\` is a literal backslash), as MySQL's default `ESCAPE '\\'`.

use std::collections::HashMap;

/// The longest pattern accepted, in bytes. Longer ones are refused with a clear error rather
/// than compiled (the automaton's tables grow with the pattern).
pub const MAX_LIKE_PATTERN_BYTES: usize = 65_535;

/// How characters compare: as the column's collation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseRule {
    /// `_bin` collations and binary strings.
    Sensitive,
    /// `_ci` collations: simple case folding.
    Insensitive,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LikeError {
    #[error("LIKE pattern of {len} bytes is longer than the {max} bytes allowed")]
    TooLong { len: usize, max: usize },
}

/// One position of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    /// A literal character (folded when the rule is case-insensitive).
    Lit(char),
    /// `_`: any one character.
    One,
}

/// A compiled `LIKE` pattern.
#[derive(Debug, Clone)]
pub struct LikePattern {
    rule: CaseRule,
    /// Segments between `%`s; one segment means the pattern has no `%`.
    segments: Vec<Vec<Tok>>,
    /// A shift-and searcher for each middle segment (`segments[1..len-1]`).
    searchers: Vec<Searcher>,
}

impl LikePattern {
    /// Compiles `pattern` with `escape` (MySQL's default is `Some('\\')`).
    pub fn compile(pattern: &str, escape: Option<char>, rule: CaseRule) -> Result<Self, LikeError> {
        if pattern.len() > MAX_LIKE_PATTERN_BYTES {
            return Err(LikeError::TooLong {
                len: pattern.len(),
                max: MAX_LIKE_PATTERN_BYTES,
            });
        }
        let mut segments = vec![Vec::new()];
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            let tok = if Some(c) == escape {
                // An escape at the very end stands for itself.
                Tok::Lit(fold(chars.next().unwrap_or(c), rule))
            } else if c == '%' {
                if segments.last().is_some_and(|s| !s.is_empty()) || segments.len() == 1 {
                    segments.push(Vec::new());
                }
                continue;
            } else if c == '_' {
                Tok::One
            } else {
                Tok::Lit(fold(c, rule))
            };
            if let Some(seg) = segments.last_mut() {
                seg.push(tok);
            }
        }
        let searchers = if segments.len() > 2 {
            segments[1..segments.len() - 1]
                .iter()
                .map(|s| Searcher::new(s))
                .collect()
        } else {
            Vec::new()
        };
        Ok(Self {
            rule,
            segments,
            searchers,
        })
    }

    /// True if `value` matches. Allocates one folded copy of the value; see [`Self::matches_with`].
    pub fn matches(&self, value: &str) -> bool {
        let mut scratch = LikeScratch::default();
        self.matches_with(value, &mut scratch)
    }

    /// True if `value` matches, reusing `scratch` (for matching many values).
    pub fn matches_with(&self, value: &str, scratch: &mut LikeScratch) -> bool {
        let text = &mut scratch.text;
        text.clear();
        text.extend(value.chars().map(|c| fold(c, self.rule)));
        let text = &scratch.text[..];
        let first = &self.segments[0];
        if self.segments.len() == 1 {
            return text.len() == first.len() && matches_at(first, text);
        }
        let last = &self.segments[self.segments.len() - 1];
        if text.len() < first.len() + last.len()
            || !matches_at(first, &text[..first.len()])
            || !matches_at(last, &text[text.len() - last.len()..])
        {
            return false;
        }
        let mut pos = first.len();
        let end = text.len() - last.len();
        for searcher in &self.searchers {
            match searcher.find(&text[pos..end], &mut scratch.state) {
                Some(after) => pos += after,
                None => return false,
            }
        }
        true
    }
}

/// Reusable buffers for [`LikePattern::matches_with`].
#[derive(Debug, Default)]
pub struct LikeScratch {
    text: Vec<char>,
    state: Vec<u64>,
}

fn fold(c: char, rule: CaseRule) -> char {
    match rule {
        CaseRule::Sensitive => c,
        CaseRule::Insensitive if c.is_ascii() => c.to_ascii_lowercase(),
        CaseRule::Insensitive => {
            let mut l = c.to_lowercase();
            match (l.next(), l.next()) {
                (Some(one), None) => one,
                _ => c,
            }
        }
    }
}

/// `seg` matches `text` position by position (same length).
fn matches_at(seg: &[Tok], text: &[char]) -> bool {
    seg.iter().zip(text).all(|(t, c)| match t {
        Tok::One => true,
        Tok::Lit(l) => l == c,
    })
}

/// Shift-and automaton for one segment: bit `i` of the state is set when the segment's first
/// `i + 1` positions match the text just read.
#[derive(Debug, Clone)]
struct Searcher {
    len: usize,
    words: usize,
    /// Positions that take any character (`_`).
    any: Vec<u64>,
    /// Characters with many positions: a full mask each.
    dense: HashMap<char, Vec<u64>>,
    /// Characters with few positions: their positions (at most [`SPARSE_MAX`]).
    sparse: HashMap<char, Vec<u32>>,
}

/// A character with more positions than this in one segment gets a full mask; so at most
/// `len / SPARSE_MAX` characters have one, and the masks take `O(len² / 4096)` bytes at most.
const SPARSE_MAX: usize = 64;

impl Searcher {
    fn new(seg: &[Tok]) -> Self {
        let len = seg.len();
        let words = len.div_ceil(64).max(1);
        let mut any = vec![0u64; words];
        let mut positions: HashMap<char, Vec<u32>> = HashMap::new();
        for (i, t) in seg.iter().enumerate() {
            match t {
                Tok::One => any[i / 64] |= 1 << (i % 64),
                Tok::Lit(c) => positions.entry(*c).or_default().push(i as u32),
            }
        }
        let mut dense = HashMap::new();
        let mut sparse = HashMap::new();
        for (c, ps) in positions {
            if words <= 4 || ps.len() > SPARSE_MAX {
                let mut m = vec![0u64; words];
                for p in &ps {
                    m[*p as usize / 64] |= 1 << (p % 64);
                }
                dense.insert(c, m);
            } else {
                sparse.insert(c, ps);
            }
        }
        Self {
            len,
            words,
            any,
            dense,
            sparse,
        }
    }

    /// The end (exclusive) of the leftmost occurrence of the segment in `text`.
    fn find(&self, text: &[char], d: &mut Vec<u64>) -> Option<usize> {
        if self.len == 0 {
            return Some(0);
        }
        d.clear();
        d.resize(self.words, 0);
        let top = (self.len - 1) / 64;
        let top_bit = 1u64 << ((self.len - 1) % 64);
        let mut kept = [0u32; SPARSE_MAX];
        for (i, c) in text.iter().enumerate() {
            // d = (d << 1) | 1
            let mut carry = 1u64;
            for w in d.iter_mut() {
                let next = *w >> 63;
                *w = (*w << 1) | carry;
                carry = next;
            }
            if let Some(mask) = self.dense.get(c) {
                for ((w, a), m) in d.iter_mut().zip(&self.any).zip(mask) {
                    *w &= a | m;
                }
            } else if let Some(ps) = self.sparse.get(c) {
                let mut n = 0;
                for p in ps {
                    if d[*p as usize / 64] & (1 << (p % 64)) != 0 {
                        kept[n] = *p;
                        n += 1;
                    }
                }
                for (w, a) in d.iter_mut().zip(&self.any) {
                    *w &= a;
                }
                for p in &kept[..n] {
                    d[*p as usize / 64] |= 1 << (p % 64);
                }
            } else {
                for (w, a) in d.iter_mut().zip(&self.any) {
                    *w &= a;
                }
            }
            if d[top] & top_bit != 0 {
                return Some(i + 1);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ci(p: &str, v: &str) -> bool {
        LikePattern::compile(p, Some('\\'), CaseRule::Insensitive)
            .expect("compiles")
            .matches(v)
    }

    fn cs(p: &str, v: &str) -> bool {
        LikePattern::compile(p, Some('\\'), CaseRule::Sensitive)
            .expect("compiles")
            .matches(v)
    }

    /// The definition, by dynamic programming: the reference the fast matcher is checked against.
    fn reference(p: &str, v: &str) -> bool {
        let mut toks = Vec::new(); // None = %, Some(None) = _, Some(Some(c)) = literal
        let mut it = p.chars();
        while let Some(c) = it.next() {
            toks.push(match c {
                '\\' => Some(Some(it.next().unwrap_or('\\'))),
                '%' => None,
                '_' => Some(None),
                c => Some(Some(c)),
            });
        }
        let v: Vec<char> = v.chars().collect();
        // m[j]: the first i tokens match the first j characters.
        let mut m = vec![false; v.len() + 1];
        m[0] = true;
        for t in &toks {
            let mut next = vec![false; v.len() + 1];
            for j in 0..=v.len() {
                next[j] = match t {
                    None => m[j] || (j > 0 && next[j - 1]),
                    Some(None) => j > 0 && m[j - 1],
                    Some(Some(c)) => j > 0 && m[j - 1] && v[j - 1] == *c,
                };
            }
            m = next;
        }
        m[v.len()]
    }

    #[test]
    fn wildcards_case_and_escapes() {
        assert!(ci("BINLOG_CHECKSUM", "binlog_checksum"));
        assert!(!cs("BINLOG_CHECKSUM", "binlog_checksum"));
        assert!(ci("binlog%", "binlog_format"));
        assert!(ci("server_i_", "server_id"));
        assert!(!ci("rds\\_%", "rdsx"));
        assert!(ci("rds\\_%", "rds_x"));
        assert!(!ci("server", "server_id"));
        assert!(ci("%", ""));
        assert!(ci("", ""));
        assert!(!ci("", "a"));
        assert!(!ci("_", ""));
        assert!(ci("a\\", "a\\"));
        assert!(ci("100\\%", "100%"));
        assert!(!ci("100\\%", "1000"));
        assert!(ci("%gtid%mode%", "GTID_MODE"));
        assert!(ci("%ab%ab%", "abab"));
        assert!(!ci("%ab%ab%", "aba"));
        assert!(ci("a%b%c", "a-b-b-c"));
        assert!(!ci("a%b%c", "acb"));
        assert!(ci("É%", "été"));
        assert!(ci("_é_", "aÉb"));
        let custom = LikePattern::compile("a|%%", Some('|'), CaseRule::Sensitive).expect("ok");
        assert!(custom.matches("a%xyz"));
        assert!(!custom.matches("abc"));
        let none = LikePattern::compile("a\\%", None, CaseRule::Sensitive).expect("ok");
        assert!(none.matches("a\\xyz"));
    }

    #[test]
    fn agrees_with_the_definition_on_every_small_case() {
        let alphabet = ['a', 'b', '%', '_'];
        let values = [
            "", "a", "b", "ab", "ba", "aab", "abab", "bbaa", "aaaab", "abbab",
        ];
        let mut patterns = vec![String::new()];
        for _ in 0..5 {
            let mut longer = Vec::new();
            for p in &patterns {
                for c in alphabet {
                    longer.push(format!("{p}{c}"));
                }
            }
            patterns.extend(longer);
            patterns.sort();
            patterns.dedup();
        }
        for p in &patterns {
            for v in values {
                assert_eq!(cs(p, v), reference(p, v), "pattern {p:?} value {v:?}");
            }
        }
    }

    #[test]
    fn long_segments_use_every_mask_kind() {
        // A segment of 300 positions: several words, dense ('a', many positions) and sparse
        // ('b', 'c', few positions) masks, and `_`.
        let seg: String = (0..300)
            .map(|i| match i % 50 {
                7 => 'b',
                21 => '_',
                33 => 'c',
                _ => 'a',
            })
            .collect();
        let pattern = format!("x%{seg}%y");
        let hit = format!(
            "x{}{}{}aay",
            "a".repeat(500),
            "ab".repeat(40),
            seg.replace('_', "z")
        );
        assert!(cs(&pattern, &hit));
        assert_eq!(cs(&pattern, &hit), reference(&pattern, &hit));
        let miss = hit.replacen('c', "a", 1);
        assert!(!cs(&pattern, &miss));
        assert_eq!(cs(&pattern, &miss), reference(&pattern, &miss));
    }

    #[test]
    fn pathological_patterns_are_fast_and_long_ones_refused() {
        let value = "a".repeat(10_000);
        let pattern = format!("{}b", "%a".repeat(25));
        assert!(!ci(&pattern, &value));
        assert!(ci(&"%".repeat(MAX_LIKE_PATTERN_BYTES), &value));
        let long = "%".repeat(1 << 20);
        assert_eq!(
            LikePattern::compile(&long, Some('\\'), CaseRule::Insensitive).map(|_| ()),
            Err(LikeError::TooLong {
                len: 1 << 20,
                max: MAX_LIKE_PATTERN_BYTES
            })
        );
    }
}
