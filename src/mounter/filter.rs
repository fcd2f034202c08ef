//! Which tables reach the binlog: TiDB's table-filter syntax (`pingcap/tidb-tools`
//! `pkg/table-filter`, used by TiCDC's `[filter] rules`).
//!
//! * A rule is `schema-pattern.table-pattern`; `!` in front makes it an exclusion.
//! * Patterns are fnmatch wildcards: `*` (any run), `?` (one character), `[a-z]`, `[!a-z]`;
//!   `\` escapes the next character; a part may be quoted whole with `"…"` or `` `…` ``
//!   (a doubled quote inside is one quote).
//! * Blank lines and lines starting with `#` are ignored; surrounding whitespace is trimmed.
//! * **The last rule that matches decides**; a table no rule matches is excluded. So a
//!   blacklist needs `*.*` first: `["*.*", "!app.tmp_*"]`.
//! * Matching is case-insensitive (TiCDC's default `case-sensitive = false`).
//! * Regular-expression rules (`/re/`) and file imports (`@file`) are rejected as unsupported.
//!
//! System schemas (`mysql`, `INFORMATION_SCHEMA`, `PERFORMANCE_SCHEMA`, `METRICS_SCHEMA`, `sys`)
//! never match, whatever the rules say.
//!
//! A schema-level DDL (CREATE/DROP DATABASE) passes [`TableFilter::matches_schema`]: the last rule
//! whose schema pattern matches and that either includes or excludes the *whole* schema
//! (`!db.*`) decides, as tidb-tools' `MatchSchema` does.

use super::error::{MounterError, Result};

/// Schemas that never reach the binlog.
pub const SYSTEM_SCHEMAS: &[&str] = &[
    "mysql",
    "information_schema",
    "performance_schema",
    "metrics_schema",
    "sys",
];

/// True for a system schema (case-insensitive).
pub fn is_system_schema(schema: &str) -> bool {
    SYSTEM_SCHEMAS
        .iter()
        .any(|s| s.eq_ignore_ascii_case(schema))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Lit(char),
    Star,
    One,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern(Vec<Tok>);

impl Pattern {
    fn matches(&self, s: &str) -> bool {
        let chars: Vec<char> = s.chars().flat_map(char::to_lowercase).collect();
        match_from(&self.0, &chars)
    }
    fn matches_everything(&self) -> bool {
        self.0.iter().all(|t| *t == Tok::Star) && !self.0.is_empty()
    }
}

/// Wildcard matching without recursion: on a mismatch, the last `*` seen takes one more
/// character and matching resumes after it. Earlier stars never need to be revisited (the last
/// one can absorb whatever they would), so the cost is at most `|p| · |s|` steps, whatever the
/// pattern's shape.
fn match_from(p: &[Tok], s: &[char]) -> bool {
    let (mut pi, mut si) = (0, 0);
    // After the last `*`: the pattern index following it and the text index it resumes from.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        let c = s[si];
        let step = match p.get(pi) {
            Some(Tok::Star) => {
                star = Some((pi + 1, si));
                pi += 1;
                continue;
            }
            Some(Tok::Lit(l)) => *l == c,
            Some(Tok::One) => true,
            Some(Tok::Class { negated, ranges }) => {
                ranges.iter().any(|&(a, b)| a <= c && c <= b) != *negated
            }
            None => false,
        };
        if step {
            pi += 1;
            si += 1;
        } else if let Some((after, from)) = star {
            pi = after;
            si = from + 1;
            star = Some((after, from + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|t| *t == Tok::Star)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    include: bool,
    schema: Pattern,
    table: Pattern,
}

/// A parsed list of table-filter rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFilter {
    rules: Vec<Rule>,
}

impl Default for TableFilter {
    /// `*.*`: every non-system table.
    fn default() -> Self {
        Self::all()
    }
}

impl TableFilter {
    /// `*.*`.
    pub fn all() -> Self {
        TableFilter {
            rules: vec![Rule {
                include: true,
                schema: Pattern(vec![Tok::Star]),
                table: Pattern(vec![Tok::Star]),
            }],
        }
    }

    /// Parses rules in order (see the module doc).
    pub fn parse<S: AsRef<str>>(rules: &[S]) -> Result<Self> {
        let mut out = Vec::new();
        for r in rules {
            let line = r.as_ref().trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            out.push(parse_rule(line).map_err(|reason| MounterError::FilterRule {
                rule: line.to_owned(),
                reason,
            })?);
        }
        Ok(TableFilter { rules: out })
    }

    /// Whether rows and DDL of `schema.table` go into the binlog.
    pub fn matches(&self, schema: &str, table: &str) -> bool {
        if is_system_schema(schema) {
            return false;
        }
        self.rules
            .iter()
            .rev()
            .find(|r| r.schema.matches(schema) && r.table.matches(table))
            .is_some_and(|r| r.include)
    }

    /// Whether schema-level DDL of `schema` goes into the binlog.
    pub fn matches_schema(&self, schema: &str) -> bool {
        if is_system_schema(schema) {
            return false;
        }
        self.rules
            .iter()
            .rev()
            .find(|r| r.schema.matches(schema) && (r.include || r.table.matches_everything()))
            .is_some_and(|r| r.include)
    }
}

fn parse_rule(line: &str) -> std::result::Result<Rule, &'static str> {
    let (include, body) = match line.strip_prefix('!') {
        Some(rest) => (false, rest),
        None => (true, line),
    };
    if body.starts_with('@') {
        return Err("file imports are not supported");
    }
    let chars: Vec<char> = body.chars().collect();
    let mut pos = 0;
    let schema = parse_part(&chars, &mut pos)?;
    if chars.get(pos) != Some(&'.') {
        return Err("expected `schema.table`");
    }
    pos += 1;
    let table = parse_part(&chars, &mut pos)?;
    if pos != chars.len() {
        return Err("unexpected characters after the table pattern");
    }
    Ok(Rule {
        include,
        schema,
        table,
    })
}

fn lower(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

fn parse_part(s: &[char], pos: &mut usize) -> std::result::Result<Pattern, &'static str> {
    let mut toks = Vec::new();
    match s.get(*pos) {
        Some('/') => return Err("regular expressions are not supported"),
        Some(&q @ ('"' | '`')) => {
            *pos += 1;
            loop {
                match s.get(*pos) {
                    None => return Err("unterminated quoted identifier"),
                    Some(&c) if c == q => {
                        if s.get(*pos + 1) == Some(&q) {
                            toks.push(Tok::Lit(q));
                            *pos += 2;
                        } else {
                            *pos += 1;
                            break;
                        }
                    }
                    Some(&c) => {
                        toks.push(Tok::Lit(lower(c)));
                        *pos += 1;
                    }
                }
            }
            return Ok(Pattern(toks));
        }
        _ => {}
    }
    while let Some(&c) = s.get(*pos) {
        match c {
            '.' => break,
            '*' => toks.push(Tok::Star),
            '?' => toks.push(Tok::One),
            '\\' => {
                *pos += 1;
                match s.get(*pos) {
                    None => return Err("`\\` at the end of the rule"),
                    Some(e) if e.is_ascii_alphanumeric() => {
                        return Err("`\\` before an alphanumeric character")
                    }
                    Some(&e) => toks.push(Tok::Lit(lower(e))),
                }
            }
            '[' => {
                *pos += 1;
                let negated = s.get(*pos) == Some(&'!');
                if negated {
                    *pos += 1;
                }
                let mut ranges = Vec::new();
                loop {
                    match s.get(*pos) {
                        None => return Err("unterminated `[` class"),
                        Some(']') if !ranges.is_empty() => break,
                        Some(&a) => {
                            let a = lower(a);
                            if s.get(*pos + 1) == Some(&'-')
                                && s.get(*pos + 2).is_some_and(|&b| b != ']')
                            {
                                let b = lower(s[*pos + 2]);
                                ranges.push((a, b));
                                *pos += 3;
                            } else {
                                ranges.push((a, a));
                                *pos += 1;
                            }
                        }
                    }
                }
                toks.push(Tok::Class { negated, ranges });
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' || !c.is_ascii() => {
                toks.push(Tok::Lit(lower(c)))
            }
            _ => return Err("reserved character in a plain name"),
        }
        *pos += 1;
    }
    if toks.is_empty() {
        return Err("empty pattern");
    }
    Ok(Pattern(toks))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn last_matching_rule_wins() {
        // The precedence example of tidb-tools' table-filter README.
        let f = TableFilter::parse(&["employees.*", "!*.dep*", "*.departments"]).unwrap();
        assert!(!f.matches("irrelevant", "table"));
        assert!(f.matches("employees", "employees"));
        assert!(!f.matches("employees", "dept_emp"));
        assert!(f.matches("employees", "departments"));
        assert!(f.matches("else", "departments"));
    }

    #[test]
    fn blacklist_needs_star_first_and_system_schemas_never_match() {
        let only_neg = TableFilter::parse(&["!app.tmp_*"]).unwrap();
        assert!(!only_neg.matches("app", "users"));
        let f = TableFilter::parse(&["*.*", "!app.tmp_*", "# comment", "  "]).unwrap();
        assert!(f.matches("app", "users"));
        assert!(f.matches("APP", "Users"), "case-insensitive");
        assert!(!f.matches("app", "tmp_1"));
        assert!(!f.matches("mysql", "user"));
        assert!(!f.matches("INFORMATION_SCHEMA", "tables"));
        assert!(!TableFilter::all().matches("sys", "x"));
        assert!(TableFilter::all().matches("test", "t"));
    }

    #[test]
    fn wildcards_classes_escapes_quotes() {
        let f = TableFilter::parse(&["db[0-9].tbl?", "x.[!a-c]*", r"a\.b.c", "\"q.s\".`t``u`"])
            .unwrap();
        assert!(f.matches("db1", "tbl9"));
        assert!(!f.matches("dbx", "tbl9"));
        assert!(!f.matches("db1", "tbl10"));
        assert!(f.matches("x", "dog"));
        assert!(!f.matches("x", "cat"));
        assert!(f.matches("a.b", "c"));
        assert!(f.matches("q.s", "t`u"));
    }

    #[test]
    fn schema_matching_and_bad_rules() {
        let f = TableFilter::parse(&["*.*", "!tmp.*", "!app.secret"]).unwrap();
        assert!(
            f.matches_schema("app"),
            "a partial exclusion keeps the schema"
        );
        assert!(!f.matches_schema("tmp"));
        assert!(!f.matches_schema("mysql"));
        let g = TableFilter::parse(&["app.users"]).unwrap();
        assert!(g.matches_schema("app"));
        assert!(!g.matches_schema("other"));
        for bad in ["app", "/re/.t", "@file", "a.b.c", "a b.c", r"a\n.b", "[a.b"] {
            assert!(TableFilter::parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn stars_never_backtrack_exponentially() {
        // `*a*a*…*b` against `aaaa…`: exponential for a recursive matcher.
        let rule = format!("x.{}b", "*a".repeat(30));
        let f = TableFilter::parse(&[rule.as_str()]).unwrap();
        assert!(!f.matches("x", &"a".repeat(64)));
        assert!(f.matches("x", &format!("{}b", "a".repeat(63))));
        let g = TableFilter::parse(&["x.a*b*c", "y.*?x"]).unwrap();
        assert!(g.matches("x", "abbbc"));
        assert!(g.matches("x", "a-b-c-b-c"));
        assert!(!g.matches("x", "a-c-b"));
        assert!(g.matches("y", "xx"));
        assert!(!g.matches("y", "x"));
    }
}
