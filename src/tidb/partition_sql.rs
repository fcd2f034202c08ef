//! MySQL 8.0's text of a table's partitioning, as `SHOW CREATE TABLE` ends with it, made from
//! TiDB's `model.PartitionInfo` ([`PartitionInfo`]).
//!
//! MySQL wraps the clause in a versioned comment on a line of its own, `/*!50100 … */` for
//! `RANGE`, `LIST`, `HASH` and `KEY`, `/*!50500 … */` for the `COLUMNS` forms (which it prints
//! with two spaces before `COLUMNS` and the column names unquoted where they need no quotes);
//! each partition ends with ` ENGINE = InnoDB`; a `HASH` or `KEY` table whose partitions carry
//! the default names `p0`…`pN-1` is printed as `PARTITIONS N`. A RANGE bound of `MAXVALUE`
//! is printed bare (`VALUES LESS THAN MAXVALUE`), a `RANGE COLUMNS` one in parentheses. A
//! replica or a dump loader that reads this text creates the same partitioning, so partition
//! DDL that follows in the binlog (TRUNCATE/EXCHANGE PARTITION…) applies to it.

use std::fmt::Write as _;

use super::schema::{PartitionDefinition, PartitionInfo};

/// `model.PartitionType` values.
const RANGE: i64 = 1;
const HASH: i64 = 2;
const LIST: i64 = 3;
const KEY: i64 = 4;

/// The clause that follows the table options (starting with its newline), or `None` for a
/// table that is not partitioned or whose partitioning MySQL has no text for.
pub fn partition_clause(p: &PartitionInfo) -> Option<String> {
    if p.definitions.is_empty() {
        return None;
    }
    let columns = !p.columns.is_empty();
    let method = match (p.partition_type, columns) {
        (RANGE, false) => "RANGE",
        (RANGE, true) => "RANGE  COLUMNS",
        (LIST, false) => "LIST",
        (LIST, true) => "LIST  COLUMNS",
        (HASH, _) => "HASH",
        (KEY, _) => "KEY",
        _ => return None,
    };
    let version = if columns && matches!(p.partition_type, RANGE | LIST) {
        50500
    } else {
        50100
    };
    let mut out = format!("\n/*!{version} PARTITION BY {method}");
    if columns && matches!(p.partition_type, RANGE | LIST) {
        let names: Vec<String> = p.columns.iter().map(|c| ident(&c.o)).collect();
        let _ = write!(out, "({})", names.join(","));
    } else if p.partition_type == KEY && columns {
        let names: Vec<String> = p.columns.iter().map(|c| quoted(&c.o)).collect();
        let _ = write!(out, " ({})", names.join(","));
    } else {
        let _ = write!(out, " ({})", p.expr);
    }
    let defaults = p
        .definitions
        .iter()
        .enumerate()
        .all(|(i, d)| d.name.o == format!("p{i}") && d.comment.is_empty());
    if matches!(p.partition_type, HASH | KEY) && defaults {
        let _ = write!(out, "\nPARTITIONS {} */", p.definitions.len());
        return Some(out);
    }
    out.push('\n');
    for (i, d) in p.definitions.iter().enumerate() {
        out.push_str(if i == 0 { "(" } else { ",\n " });
        let _ = write!(out, "PARTITION {}", ident(&d.name.o));
        values(&mut out, p.partition_type, columns, d);
        if !d.comment.is_empty() {
            let _ = write!(out, " COMMENT = '{}'", d.comment.replace('\'', "''"));
        }
        out.push_str(" ENGINE = InnoDB");
    }
    out.push_str(") */");
    Some(out)
}

/// ` VALUES LESS THAN …` / ` VALUES IN (…)` of one partition (nothing for HASH and KEY).
fn values(out: &mut String, ptype: i64, columns: bool, d: &PartitionDefinition) {
    match ptype {
        RANGE if !columns && d.less_than.len() == 1 && is_maxvalue(&d.less_than[0]) => {
            out.push_str(" VALUES LESS THAN MAXVALUE");
        }
        RANGE => {
            let _ = write!(out, " VALUES LESS THAN ({})", d.less_than.join(","));
        }
        LIST => {
            let tuples = d.in_values.iter().any(|v| v.len() > 1);
            let items: Vec<String> = d
                .in_values
                .iter()
                .map(|v| {
                    if tuples {
                        format!("({})", v.join(","))
                    } else {
                        v.join(",")
                    }
                })
                .collect();
            let _ = write!(out, " VALUES IN ({})", items.join(","));
        }
        _ => {}
    }
}

fn is_maxvalue(v: &str) -> bool {
    v.trim().eq_ignore_ascii_case("MAXVALUE")
}

/// A name as MySQL prints it in the partitioning clause: bare when it is a plain identifier
/// that is no keyword, else quoted with backticks.
fn ident(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let upper = name.to_ascii_uppercase();
    // Quoting a word that MySQL would print bare is harmless to every parser; the list is a
    // superset of MySQL's keywords, so no keyword is ever left bare.
    if plain
        && sqlparser::keywords::ALL_KEYWORDS
            .binary_search(&upper.as_str())
            .is_err()
    {
        name.to_owned()
    } else {
        quoted(name)
    }
}

fn quoted(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tidb::schema::CIStr;

    fn def(name: &str, less_than: &[&str], in_values: &[&[&str]]) -> PartitionDefinition {
        PartitionDefinition {
            name: CIStr::new(name),
            less_than: less_than.iter().map(|s| (*s).to_owned()).collect(),
            in_values: in_values
                .iter()
                .map(|v| v.iter().map(|s| (*s).to_owned()).collect())
                .collect(),
            ..PartitionDefinition::default()
        }
    }

    fn info(
        ptype: i64,
        expr: &str,
        columns: &[&str],
        defs: Vec<PartitionDefinition>,
    ) -> PartitionInfo {
        PartitionInfo {
            partition_type: ptype,
            expr: expr.to_owned(),
            columns: columns.iter().map(|c| CIStr::new(c)).collect(),
            enable: true,
            num: defs.len() as u64,
            definitions: defs,
            ..PartitionInfo::default()
        }
    }

    #[test]
    fn range_prints_as_mysql_8_with_a_bare_maxvalue() {
        let p = info(
            RANGE,
            "`id`",
            &[],
            vec![def("p0", &["100"], &[]), def("p1", &["MAXVALUE"], &[])],
        );
        assert_eq!(
            partition_clause(&p).expect("a clause"),
            "\n/*!50100 PARTITION BY RANGE (`id`)\n\
             (PARTITION p0 VALUES LESS THAN (100) ENGINE = InnoDB,\n \
             PARTITION p1 VALUES LESS THAN MAXVALUE ENGINE = InnoDB) */"
        );
    }

    #[test]
    fn range_columns_uses_the_5_5_comment_two_spaces_and_parenthesised_maxvalue() {
        let p = info(
            RANGE,
            "",
            &["a", "status"],
            vec![
                def("p0", &["5", "12"], &[]),
                def("status", &["MAXVALUE", "MAXVALUE"], &[]),
            ],
        );
        assert_eq!(
            partition_clause(&p).expect("a clause"),
            "\n/*!50500 PARTITION BY RANGE  COLUMNS(a,`status`)\n\
             (PARTITION p0 VALUES LESS THAN (5,12) ENGINE = InnoDB,\n \
             PARTITION `status` VALUES LESS THAN (MAXVALUE,MAXVALUE) ENGINE = InnoDB) */"
        );
    }

    #[test]
    fn hash_and_key_with_default_names_print_a_count() {
        let defs = || (0..4).map(|i| def(&format!("p{i}"), &[], &[])).collect();
        assert_eq!(
            partition_clause(&info(HASH, "`id`", &[], defs())).expect("a clause"),
            "\n/*!50100 PARTITION BY HASH (`id`)\nPARTITIONS 4 */"
        );
        assert_eq!(
            partition_clause(&info(KEY, "", &["k"], defs())).expect("a clause"),
            "\n/*!50100 PARTITION BY KEY (`k`)\nPARTITIONS 4 */"
        );
        // Named partitions are listed.
        let named = vec![def("a", &[], &[]), def("b", &[], &[])];
        assert_eq!(
            partition_clause(&info(HASH, "`id`", &[], named)).expect("a clause"),
            "\n/*!50100 PARTITION BY HASH (`id`)\n\
             (PARTITION a ENGINE = InnoDB,\n PARTITION b ENGINE = InnoDB) */"
        );
    }

    #[test]
    fn list_and_list_columns_print_their_values() {
        let p = info(
            LIST,
            "`r`",
            &[],
            vec![
                def("p0", &[], &[&["1"], &["2"]]),
                def("p1", &[], &[&["NULL"]]),
            ],
        );
        assert_eq!(
            partition_clause(&p).expect("a clause"),
            "\n/*!50100 PARTITION BY LIST (`r`)\n\
             (PARTITION p0 VALUES IN (1,2) ENGINE = InnoDB,\n \
             PARTITION p1 VALUES IN (NULL) ENGINE = InnoDB) */"
        );
        let p = info(
            LIST,
            "",
            &["a", "b"],
            vec![def("p0", &[], &[&["0", "0"], &["'x'", "1"]])],
        );
        assert_eq!(
            partition_clause(&p).expect("a clause"),
            "\n/*!50500 PARTITION BY LIST  COLUMNS(a,b)\n\
             (PARTITION p0 VALUES IN ((0,0),('x',1)) ENGINE = InnoDB) */"
        );
    }

    #[test]
    fn comments_are_quoted_and_unknown_methods_print_nothing() {
        let mut d = def("p0", &["10"], &[]);
        d.comment = "it's".into();
        let p = info(RANGE, "`id`", &[], vec![d]);
        assert!(partition_clause(&p)
            .expect("a clause")
            .contains("PARTITION p0 VALUES LESS THAN (10) COMMENT = 'it''s' ENGINE = InnoDB"));
        assert_eq!(
            partition_clause(&info(5, "", &[], vec![def("p0", &[], &[])])),
            None
        );
        assert_eq!(
            partition_clause(&info(RANGE, "`id`", &[], Vec::new())),
            None
        );
    }
}
