//! Statement text → sqlparser statements (MySQL dialect), with a bound on how deep the trees can
//! get.
//!
//! sqlparser bounds nesting (parentheses, function arguments, unary operators, subqueries) with
//! its recursion limit, but it builds a chain of left-associative operators (`a OR b OR c …`,
//! `1+1+1…`) in a loop: the tree is as deep as the chain is long, and walking or even dropping
//! it recurses once per operator. A client's statement of a few hundred kilobytes would then
//! overflow the thread's stack. So the tokens are counted first: a statement with more than
//! [`MAX_OPERATORS`] operators is refused before any tree is built. Lists (`IN (1, 2, …)`,
//! select lists) are flat and not limited.

use sqlparser::ast::Statement;
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Tokenizer};

/// Most operators one statement text may hold. A left-deep chain of this many operators is
/// parsed, printed, measured (its span) and dropped by sqlparser within half of a 2 MiB thread
/// stack; the server's own compiler keeps chains flat ([`super::expr::MAX_DEPTH`]).
pub const MAX_OPERATORS: usize = 1_000;

/// Why a text did not become statements.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseFailure {
    /// Not valid SQL (MySQL answers 1064).
    #[error("{0}")]
    Syntax(ParserError),
    /// More operators than [`MAX_OPERATORS`].
    #[error("the statement has {operators} operators, more than the {max} allowed")]
    TooComplex { operators: usize, max: usize },
}

/// Parses one COM_QUERY text into statements.
pub fn parse(sql: &str) -> Result<Vec<Statement>, ParseFailure> {
    let dialect = MySqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|e| ParseFailure::Syntax(ParserError::TokenizerError(e.to_string())))?;
    let operators = tokens.iter().filter(|t| is_operator(&t.token)).count();
    if operators > MAX_OPERATORS {
        return Err(ParseFailure::TooComplex {
            operators,
            max: MAX_OPERATORS,
        });
    }
    Parser::new(&dialect)
        .with_tokens_with_locations(tokens)
        .parse_statements()
        .map_err(ParseFailure::Syntax)
}

/// `major * 10000 + minor * 100 + patch` of a server version text (`8.0.36-…` → 80036); a
/// MariaDB greeting's `5.5.5-` prefix is skipped.
pub fn version_id(version: &str) -> u32 {
    let v = version.strip_prefix("5.5.5-").unwrap_or(version);
    let mut parts = v
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b, c) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    a * 10_000 + b * 100 + c
}

/// Executable comments, as the server of `version` (a [`version_id`]) runs them: the text of
/// `/*! … */` is part of the statement, that of `/*!NNNNN … */` when the version is at least
/// NNNNN, and that of MariaDB's `/*M!NNNNN … */` only on a MariaDB server. Comments whose
/// version is higher are dropped. Quoted text is left alone. Tools send these everywhere
/// (`START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */`, `/*!40101 SET NAMES … */`).
pub fn expand_executable_comments(
    sql: &str,
    version: u32,
    mariadb: bool,
) -> std::borrow::Cow<'_, str> {
    if !sql.contains("/*!") && !sql.contains("/*M!") {
        return std::borrow::Cow::Borrowed(sql);
    }
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' && q != b'`' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = sql[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e);
                let (marker, maria_only) = match (b.get(i + 2), b.get(i + 3)) {
                    (Some(b'!'), _) => (i + 3, false),
                    (Some(b'M'), Some(b'!')) => (i + 4, true),
                    _ => {
                        i = (end + 2).min(b.len());
                        continue;
                    }
                };
                let digits = sql[marker..end]
                    .bytes()
                    .take(6)
                    .take_while(u8::is_ascii_digit)
                    .count();
                let wanted: u32 = sql[marker..marker + digits].parse().unwrap_or(0);
                let runs = (!maria_only || mariadb) && version >= wanted;
                out.push_str(&sql[copied..i]);
                out.push(' ');
                if runs {
                    out.push_str(&sql[marker + digits..end]);
                    out.push(' ');
                }
                i = (end + 2).min(b.len());
                copied = i;
            }
            b'#' => i = sql[i..].find('\n').map_or(b.len(), |e| i + e + 1),
            b'-' if b.get(i + 1) == Some(&b'-')
                && b.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) =>
            {
                i = sql[i..].find('\n').map_or(b.len(), |e| i + e + 1)
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied.min(sql.len())..]);
    std::borrow::Cow::Owned(out)
}

/// Splits a COM_QUERY text at the `;` that end statements (not those inside quotes, quoted
/// identifiers or comments). Pieces with nothing but blanks and comments are left out.
pub fn split_statements(sql: &str) -> Vec<&str> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    let mut content = false;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                content = true;
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' && q != b'`' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                // `/*! … */` and `/*+ … */` are executable comments: they count as content.
                if matches!(b.get(i + 2), Some(b'!') | Some(b'+')) {
                    content = true;
                }
                i = sql[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            }
            b'#' => i = sql[i..].find('\n').map_or(b.len(), |e| i + e + 1),
            b'-' if b.get(i + 1) == Some(&b'-')
                && b.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) =>
            {
                i = sql[i..].find('\n').map_or(b.len(), |e| i + e + 1)
            }
            b';' => {
                if content {
                    out.push(&sql[start..i]);
                }
                i += 1;
                start = i;
                content = false;
            }
            c => {
                if !c.is_ascii_whitespace() {
                    content = true;
                }
                i += 1;
            }
        }
    }
    if content {
        out.push(&sql[start..]);
    }
    out
}

/// Tokens that can join two operands into a deeper tree: every symbol but the separators, and
/// the operator keywords.
fn is_operator(t: &Token) -> bool {
    match t {
        Token::Word(w) => matches!(
            w.keyword,
            Keyword::AND
                | Keyword::OR
                | Keyword::XOR
                | Keyword::NOT
                | Keyword::LIKE
                | Keyword::ILIKE
                | Keyword::IS
                | Keyword::IN
                | Keyword::BETWEEN
                | Keyword::REGEXP
                | Keyword::RLIKE
                | Keyword::DIV
                | Keyword::MOD
                | Keyword::COLLATE
                | Keyword::ESCAPE
                | Keyword::SIMILAR
                | Keyword::MEMBER
                | Keyword::OVERLAPS
        ),
        Token::EOF
        | Token::Number(..)
        | Token::Char(_)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::TripleSingleQuotedString(_)
        | Token::TripleDoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::TripleSingleQuotedByteStringLiteral(_)
        | Token::TripleDoubleQuotedByteStringLiteral(_)
        | Token::SingleQuotedRawStringLiteral(_)
        | Token::DoubleQuotedRawStringLiteral(_)
        | Token::TripleSingleQuotedRawStringLiteral(_)
        | Token::TripleDoubleQuotedRawStringLiteral(_)
        | Token::NationalStringLiteral(_)
        | Token::QuoteDelimitedStringLiteral(_)
        | Token::NationalQuoteDelimitedStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::Placeholder(_)
        | Token::Comma
        | Token::Whitespace(_)
        | Token::LParen
        | Token::RParen
        | Token::LBrace
        | Token::RBrace
        | Token::Period
        | Token::SemiColon => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_chains_are_refused_before_parsing_and_lists_are_not() {
        let chain = format!("SELECT 1{}", "+1".repeat(MAX_OPERATORS));
        assert!(parse(&chain).is_ok());
        let over = format!("SELECT 1{}", "+1".repeat(MAX_OPERATORS + 1));
        assert!(matches!(
            parse(&over),
            Err(ParseFailure::TooComplex { operators, .. }) if operators == MAX_OPERATORS + 1
        ));
        let ors = vec!["a = 1"; MAX_OPERATORS].join(" OR ");
        assert!(matches!(
            parse(&format!("SELECT * FROM t WHERE {ors}")),
            Err(ParseFailure::TooComplex { .. })
        ));
        let list = (0..100_000).map(|i| i.to_string()).collect::<Vec<_>>();
        let stmts = parse(&format!(
            "SELECT * FROM t WHERE id IN ({})",
            list.join(", ")
        ))
        .expect("a long IN list parses");
        assert_eq!(stmts.len(), 1);
        assert!(matches!(parse("SELEC 1"), Err(ParseFailure::Syntax(_))));
        assert!(matches!(
            parse("SELECT 'unterminated"),
            Err(ParseFailure::Syntax(_))
        ));
    }

    #[test]
    fn statements_split_at_their_own_semicolons() {
        assert_eq!(
            split_statements("show create table a; show create table `b;c`;  "),
            vec!["show create table a", " show create table `b;c`"]
        );
        assert_eq!(
            split_statements("SELECT ';', \"x;\" /* ; */ -- ;\n; # ;\n"),
            vec!["SELECT ';', \"x;\" /* ; */ -- ;\n"]
        );
        assert_eq!(split_statements("SELECT 'a\\';b'"), vec!["SELECT 'a\\';b'"]);
        assert_eq!(
            split_statements("/* only a comment */;;"),
            Vec::<&str>::new()
        );
        assert_eq!(
            split_statements("/*!40100 SET @@SQL_MODE='' */"),
            vec!["/*!40100 SET @@SQL_MODE='' */"]
        );
    }

    #[test]
    fn the_deepest_allowed_chain_is_parsed_walked_and_dropped_on_a_small_stack() {
        // Half the default 2 MiB thread stack, in this (unoptimised) build: a left-deep tree
        // as deep as the limit allows (`*` counts as one).
        let sql = format!(
            "SELECT * FROM t WHERE a = 1{}",
            " OR 1".repeat(MAX_OPERATORS - 2)
        );
        let t = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || {
                use sqlparser::ast::Spanned;
                let stmts = parse(&sql).expect("parses");
                let text = stmts[0].to_string();
                let span = stmts[0].span();
                drop(stmts);
                text.len() + span.end.column as usize
            })
            .expect("spawn");
        assert!(t.join().expect("no stack overflow") > 0);
    }

    #[test]
    fn executable_comments_run_by_version_and_flavour() {
        let x = |sql, v, m| {
            expand_executable_comments(sql, v, m)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            x(
                "START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */",
                80036,
                false
            ),
            "START TRANSACTION WITH CONSISTENT SNAPSHOT"
        );
        assert_eq!(x("SELECT 1 /*!90000 + 1 */", 80036, false), "SELECT 1");
        assert_eq!(x("SELECT 1 /*! + 1*/", 80036, false), "SELECT 1 + 1");
        assert_eq!(x("SELECT 1 /*M!100500 + 1 */", 101100, false), "SELECT 1");
        assert_eq!(
            x("SELECT 1 /*M!100500 + 1 */", 101100, true),
            "SELECT 1 + 1"
        );
        assert_eq!(
            x("SELECT '/*!40100 x */' /* c */", 80036, false),
            "SELECT '/*!40100 x */' /* c */"
        );
        assert_eq!(x("SELECT 1 /*!40101", 80036, false), "SELECT 1");
        assert_eq!(
            x("/*!40101 SET NAMES utf8mb4 */;SELECT 2", 80036, false),
            "SET NAMES utf8mb4 ;SELECT 2"
        );
        assert_eq!(version_id("8.0.36-tibinlog-0.1.0"), 80036);
        assert_eq!(version_id("5.5.5-10.11.99-MariaDB-tibinlog"), 101199);
    }
}
