//! `SHOW CREATE TABLE` and `SHOW CREATE VIEW` text of a TiDB table, in MySQL 8.0's words, made
//! from its `model.TableInfo` ([`TableInfo`]).
//!
//! MySQL 8.0 prints integer types without display widths, columns in ordinal order, then the
//! primary key, unique and other keys, then foreign keys and CHECK constraints (each group by
//! name), then the table options and the partitioning ([`partition_clause`]). Index options
//! MySQL 8.0 has its own syntax for come as its version comments (`/*!80000 INVISIBLE */`,
//! `/*!80016 NOT ENFORCED */`). What only TiDB has (clustered keys, AUTO_RANDOM, placement,
//! TTL, shard bits) is left out, even as TiDB's `/*T![…] */` comments: the consumers that parse
//! this text (Debezium's and Maxwell's grammars, Canal's parser) must meet MySQL only, as in
//! the binlog's DDL (`mounter/ddl_sql.rs`).

use std::fmt::Write as _;

use super::partition_sql::partition_clause;
use super::schema::{mysql, schema_state, ColumnInfo as TidbColumn, FieldType, FkInfo, TableInfo};

pub fn has(ft: &FieldType, flag: u32) -> bool {
    ft.flag & flag != 0
}

fn is_binary_charset(ft: &FieldType) -> bool {
    ft.charset.eq_ignore_ascii_case("binary")
}

pub fn quote_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

pub fn quote_str(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

fn elems(ft: &FieldType) -> String {
    ft.elems
        .iter()
        .map(|e| quote_str(e))
        .collect::<Vec<_>>()
        .join(",")
}

/// The column type as MySQL 8.0 prints it, e.g. `bigint unsigned`, `varchar(64)`.
pub fn column_type(ft: &FieldType) -> String {
    let len = |default: i64| if ft.flen >= 0 { ft.flen } else { default };
    let fsp = || {
        if ft.decimal > 0 {
            format!("({})", ft.decimal)
        } else {
            String::new()
        }
    };
    let mut s = match ft.tp {
        mysql::TYPE_TINY => "tinyint".to_owned(),
        mysql::TYPE_SHORT => "smallint".to_owned(),
        mysql::TYPE_INT24 => "mediumint".to_owned(),
        mysql::TYPE_LONG => "int".to_owned(),
        mysql::TYPE_LONGLONG => "bigint".to_owned(),
        mysql::TYPE_FLOAT => "float".to_owned(),
        mysql::TYPE_DOUBLE => "double".to_owned(),
        mysql::TYPE_NEWDECIMAL | mysql::TYPE_DECIMAL => {
            format!("decimal({},{})", len(10), ft.decimal.max(0))
        }
        mysql::TYPE_DATE | mysql::TYPE_NEWDATE => "date".to_owned(),
        mysql::TYPE_DATETIME => format!("datetime{}", fsp()),
        mysql::TYPE_TIMESTAMP => format!("timestamp{}", fsp()),
        mysql::TYPE_DURATION => format!("time{}", fsp()),
        mysql::TYPE_YEAR => "year".to_owned(),
        mysql::TYPE_VARCHAR | mysql::TYPE_VAR_STRING => {
            let base = if is_binary_charset(ft) {
                "varbinary"
            } else {
                "varchar"
            };
            format!("{base}({})", len(255))
        }
        mysql::TYPE_STRING => {
            let base = if is_binary_charset(ft) {
                "binary"
            } else {
                "char"
            };
            format!("{base}({})", len(1))
        }
        mysql::TYPE_TINY_BLOB
        | mysql::TYPE_BLOB
        | mysql::TYPE_MEDIUM_BLOB
        | mysql::TYPE_LONG_BLOB => {
            let size = match ft.tp {
                mysql::TYPE_TINY_BLOB => "tiny",
                mysql::TYPE_MEDIUM_BLOB => "medium",
                mysql::TYPE_LONG_BLOB => "long",
                _ => "",
            };
            let kind = if is_binary_charset(ft) {
                "blob"
            } else {
                "text"
            };
            format!("{size}{kind}")
        }
        mysql::TYPE_JSON => "json".to_owned(),
        mysql::TYPE_BIT => format!("bit({})", len(1)),
        mysql::TYPE_ENUM => format!("enum({})", elems(ft)),
        mysql::TYPE_SET => format!("set({})", elems(ft)),
        mysql::TYPE_GEOMETRY => "geometry".to_owned(),
        mysql::TYPE_TIDB_VECTOR_FLOAT32 => "vector".to_owned(),
        other => format!("unknown({other})"),
    };
    let numeric = matches!(
        ft.tp,
        mysql::TYPE_TINY
            | mysql::TYPE_SHORT
            | mysql::TYPE_INT24
            | mysql::TYPE_LONG
            | mysql::TYPE_LONGLONG
            | mysql::TYPE_FLOAT
            | mysql::TYPE_DOUBLE
            | mysql::TYPE_NEWDECIMAL
            | mysql::TYPE_DECIMAL
    );
    if numeric && has(ft, mysql::UNSIGNED_FLAG) {
        s.push_str(" unsigned");
    }
    if numeric && has(ft, mysql::ZEROFILL_FLAG) {
        s.push_str(" zerofill");
    }
    s
}

pub fn is_string_type(ft: &FieldType) -> bool {
    matches!(
        ft.tp,
        mysql::TYPE_VARCHAR
            | mysql::TYPE_VAR_STRING
            | mysql::TYPE_STRING
            | mysql::TYPE_TINY_BLOB
            | mysql::TYPE_BLOB
            | mysql::TYPE_MEDIUM_BLOB
            | mysql::TYPE_LONG_BLOB
            | mysql::TYPE_ENUM
            | mysql::TYPE_SET
    ) && !is_binary_charset(ft)
}

/// The column's default as text, `None` for no default or NULL.
pub fn default_text(c: &TidbColumn) -> Option<String> {
    match &c.default {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// `COLUMN_KEY` of a column: `PRI`, `UNI`, `MUL` or empty.
pub fn column_key(ft: &FieldType) -> &'static str {
    if has(ft, mysql::PRI_KEY_FLAG) {
        "PRI"
    } else if has(ft, mysql::UNIQUE_KEY_FLAG) {
        "UNI"
    } else if has(ft, mysql::MULTIPLE_KEY_FLAG) {
        "MUL"
    } else {
        ""
    }
}

/// The visible columns of a table (public and not hidden), in ordinal order.
pub fn visible_columns(info: &TableInfo) -> Vec<&TidbColumn> {
    info.public_columns()
        .into_iter()
        .filter(|c| !c.hidden)
        .collect()
}

/// `SHOW CREATE TABLE` text of table `info` of database `schema`.
pub fn create_table(schema: &str, info: &TableInfo) -> String {
    let mut lines: Vec<String> = visible_columns(info)
        .into_iter()
        .map(|c| column_line(info, c))
        .collect();
    if let Some(pk) = info.pk_handle_column() {
        lines.push(format!("  PRIMARY KEY ({})", quote_ident(&pk.name.o)));
    }
    let mut indexes: Vec<_> = info
        .indices
        .iter()
        .filter(|i| i.state == schema_state::PUBLIC)
        .collect();
    indexes.sort_by_key(|i| (!i.is_primary, !i.is_unique, i.id));
    for idx in indexes {
        let parts = idx
            .idx_cols
            .iter()
            .map(|c| index_part(info, &c.name.l, &c.name.o, c.length))
            .collect::<Vec<_>>()
            .join(",");
        let mut l = if idx.is_primary {
            format!("  PRIMARY KEY ({parts})")
        } else if idx.is_unique {
            format!("  UNIQUE KEY {} ({parts})", quote_ident(&idx.idx_name.o))
        } else {
            format!("  KEY {} ({parts})", quote_ident(&idx.idx_name.o))
        };
        if !idx.comment.is_empty() {
            let _ = write!(l, " COMMENT {}", quote_str(&idx.comment));
        }
        if idx.is_invisible {
            l.push_str(" /*!80000 INVISIBLE */");
        }
        lines.push(l);
    }
    let mut fks: Vec<&FkInfo> = info
        .foreign_keys
        .iter()
        .filter(|f| f.state == schema_state::PUBLIC)
        .collect();
    fks.sort_by(|a, b| a.fk_name.l.cmp(&b.fk_name.l));
    lines.extend(fks.into_iter().map(|f| foreign_key_line(schema, f)));
    let mut checks: Vec<_> = info
        .constraints
        .iter()
        .filter(|c| c.state == schema_state::PUBLIC)
        .collect();
    checks.sort_by(|a, b| a.constraint_name.l.cmp(&b.constraint_name.l));
    for c in checks {
        let mut l = format!(
            "  CONSTRAINT {} CHECK (({}))",
            quote_ident(&c.constraint_name.o),
            c.expr_string
        );
        if !c.enforced {
            l.push_str(" /*!80016 NOT ENFORCED */");
        }
        lines.push(l);
    }
    let mut sql = format!(
        "CREATE TABLE {} (\n{}\n) ENGINE=InnoDB",
        quote_ident(&info.name.o),
        lines.join(",\n")
    );
    if !info.charset.is_empty() {
        let _ = write!(sql, " DEFAULT CHARSET={}", info.charset);
    }
    if !info.collate.is_empty() {
        let _ = write!(sql, " COLLATE={}", info.collate);
    }
    if !info.comment.is_empty() {
        let _ = write!(sql, " COMMENT={}", quote_str(&info.comment));
    }
    if let Some(clause) = info.partition.as_ref().and_then(partition_clause) {
        sql.push_str(&clause);
    }
    sql
}

/// The expression of an expression index as MySQL 8.0 prints it (in `SHOW CREATE TABLE` and
/// `information_schema.STATISTICS.EXPRESSION`) from TiDB's restored text: a function call as
/// it is (`` lower(`c`) ``), anything else in parentheses (`` (`p` + 1) ``), as MySQL prints
/// an operator.
pub fn key_expression(expr: &str) -> String {
    let t = expr.trim();
    let name_end = t
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(t.len());
    let call = name_end > 0 && t[name_end..].starts_with('(') && {
        // The parenthesis after the name must close at the end.
        let mut depth = 0i32;
        let mut quote: Option<char> = None;
        let mut closed_at = None;
        for (i, c) in t[name_end..].char_indices() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"' | '`') => quote = Some(c),
                (None, '(') => depth += 1,
                (None, ')') => {
                    depth -= 1;
                    if depth == 0 {
                        closed_at = Some(name_end + i);
                        break;
                    }
                }
                _ => {}
            }
        }
        closed_at == Some(t.len() - 1)
    };
    if call {
        t.to_owned()
    } else {
        format!("({t})")
    }
}

/// One key part: a column with its prefix length, or the expression of an expression index
/// (TiDB keys those on a hidden generated column).
fn index_part(info: &TableInfo, lower: &str, name: &str, length: i64) -> String {
    if let Some(hidden) = info
        .columns
        .iter()
        .find(|c| c.hidden && c.name.l == lower && !c.generated_expr_string.is_empty())
    {
        return format!("({})", key_expression(&hidden.generated_expr_string));
    }
    if length > 0 {
        format!("{}({length})", quote_ident(name))
    } else {
        quote_ident(name)
    }
}

/// A foreign key; the referenced table is qualified when it is in another database.
fn foreign_key_line(schema: &str, fk: &FkInfo) -> String {
    let names = |cols: &[super::schema::CIStr]| {
        cols.iter()
            .map(|c| quote_ident(&c.o))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut l = format!(
        "  CONSTRAINT {} FOREIGN KEY ({}) REFERENCES ",
        quote_ident(&fk.fk_name.o),
        names(&fk.cols)
    );
    if !fk.ref_schema.o.is_empty() && !fk.ref_schema.o.eq_ignore_ascii_case(schema) {
        let _ = write!(l, "{}.", quote_ident(&fk.ref_schema.o));
    }
    let _ = write!(
        l,
        "{} ({})",
        quote_ident(&fk.ref_table.o),
        names(&fk.ref_cols)
    );
    if let Some(o) = FkInfo::refer_option(fk.on_delete) {
        let _ = write!(l, " ON DELETE {o}");
    }
    if let Some(o) = FkInfo::refer_option(fk.on_update) {
        let _ = write!(l, " ON UPDATE {o}");
    }
    l
}

fn column_line(info: &TableInfo, c: &TidbColumn) -> String {
    let ft = &c.field_type;
    let mut l = format!("  {} {}", quote_ident(&c.name.o), column_type(ft));
    if is_string_type(ft) && !ft.collate.is_empty() && ft.collate != info.collate {
        let _ = write!(l, " COLLATE {}", ft.collate);
    }
    let not_null = has(ft, mysql::NOT_NULL_FLAG);
    if !c.generated_expr_string.is_empty() {
        // As MySQL prints it: the expression, then NULL-ness; no DEFAULT.
        let kind = if c.generated_stored {
            "STORED"
        } else {
            "VIRTUAL"
        };
        let _ = write!(
            l,
            " GENERATED ALWAYS AS ({}) {kind}",
            c.generated_expr_string
        );
        if not_null {
            l.push_str(" NOT NULL");
        }
    } else {
        if not_null {
            l.push_str(" NOT NULL");
        }
        if has(ft, mysql::AUTO_INCREMENT_FLAG) {
            l.push_str(" AUTO_INCREMENT");
        } else if let Some(d) = default_text(c) {
            if c.default.is_number() {
                let _ = write!(l, " DEFAULT {d}");
            } else {
                let _ = write!(l, " DEFAULT {}", quote_str(&d));
            }
        } else if !not_null {
            l.push_str(" DEFAULT NULL");
        }
    }
    if !c.comment.is_empty() {
        let _ = write!(l, " COMMENT {}", quote_str(&c.comment));
    }
    l
}

/// `SHOW CREATE VIEW` text of view `info` (`None` for a table that is not a view), as MySQL
/// 8.0 prints it; the column list is the one TiDB keeps for every view.
pub fn create_view(info: &TableInfo) -> Option<String> {
    let v = info.view.as_ref()?;
    let mut sql = format!("CREATE ALGORITHM={} ", v.algorithm());
    if let Some(d) = &v.view_definer {
        let _ = write!(
            sql,
            "DEFINER={}@{} ",
            quote_ident(&d.username),
            quote_ident(&d.hostname)
        );
    }
    let _ = write!(
        sql,
        "SQL SECURITY {} VIEW {}",
        v.security(),
        quote_ident(&info.name.o)
    );
    if !v.view_cols.is_empty() {
        let cols: Vec<String> = v.view_cols.iter().map(|c| quote_ident(&c.o)).collect();
        let _ = write!(sql, " ({})", cols.join(", "));
    }
    let _ = write!(sql, " AS {}", v.view_select);
    Some(sql)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ft(tp: u8, flag: u32, flen: i64, charset: &str) -> FieldType {
        FieldType {
            tp,
            flag,
            flen,
            decimal: -1,
            charset: charset.into(),
            ..FieldType::default()
        }
    }

    #[test]
    fn column_types_print_like_mysql_8() {
        assert_eq!(
            column_type(&ft(
                mysql::TYPE_LONGLONG,
                mysql::UNSIGNED_FLAG,
                20,
                "binary"
            )),
            "bigint unsigned"
        );
        assert_eq!(
            column_type(&ft(mysql::TYPE_VARCHAR, 0, 64, "utf8mb4")),
            "varchar(64)"
        );
        assert_eq!(
            column_type(&ft(mysql::TYPE_VARCHAR, 0, 16, "binary")),
            "varbinary(16)"
        );
        assert_eq!(column_type(&ft(mysql::TYPE_BLOB, 0, -1, "utf8mb4")), "text");
        assert_eq!(
            column_type(&ft(mysql::TYPE_LONG_BLOB, 0, -1, "binary")),
            "longblob"
        );
        let mut d = ft(mysql::TYPE_NEWDECIMAL, 0, 12, "binary");
        d.decimal = 2;
        assert_eq!(column_type(&d), "decimal(12,2)");
        let mut e = ft(mysql::TYPE_ENUM, 0, -1, "utf8mb4");
        e.elems = vec!["a".into(), "it's".into()];
        assert_eq!(column_type(&e), "enum('a','it''s')");
    }

    /// A TableInfo in TiDB's JSON: an AUTO_RANDOM key (TiDB-only: not printed), an invisible
    /// index, an expression index on a hidden column, a foreign key to another database and a
    /// NOT ENFORCED check.
    const CHILD: &str = r#"{"id":90,"name":{"O":"child","L":"child"},"charset":"utf8mb4",
      "collate":"utf8mb4_bin","pk_is_handle":true,"auto_random_bits":5,
      "cols":[
        {"id":1,"name":{"O":"id","L":"id"},"offset":0,"state":5,
         "type":{"Tp":8,"Flag":4099,"Flen":20,"Decimal":0,"Charset":"binary","Collate":"binary"}},
        {"id":2,"name":{"O":"p","L":"p"},"offset":1,"state":5,
         "type":{"Tp":3,"Flag":8,"Flen":11,"Decimal":0,"Charset":"binary","Collate":"binary"}},
        {"id":3,"name":{"O":"_V$_e_0","L":"_v$_e_0"},"offset":2,"state":5,"hidden":true,
         "generated_expr_string":"`p` + 1",
         "type":{"Tp":8,"Flag":0,"Flen":20,"Decimal":0,"Charset":"binary","Collate":"binary"}}],
      "index_info":[
        {"id":1,"idx_name":{"O":"k_p","L":"k_p"},"idx_cols":[{"name":{"O":"p","L":"p"},"offset":1,"length":-1}],
         "state":5,"is_invisible":true},
        {"id":2,"idx_name":{"O":"e","L":"e"},"idx_cols":[{"name":{"O":"_V$_e_0","L":"_v$_e_0"},"offset":2,"length":-1}],
         "state":5}],
      "fk_info":[{"id":1,"fk_name":{"O":"fk_p","L":"fk_p"},"ref_schema":{"O":"other","L":"other"},
        "ref_table":{"O":"parent","L":"parent"},"ref_cols":[{"O":"id","L":"id"}],
        "cols":[{"O":"p","L":"p"}],"on_delete":2,"on_update":0,"state":5,"version":1}],
      "constraint_info":[{"id":1,"constraint_name":{"O":"child_chk_1","L":"child_chk_1"},
        "tbl_name":{"O":"child","L":"child"},"constraint_cols":[{"O":"p","L":"p"}],
        "enforced":false,"expr_string":"`p` > 0","state":5}],
      "view":null,"partition":null}"#;

    #[test]
    fn create_table_prints_keys_and_constraints_as_mysql_8() {
        let info = TableInfo::from_json(CHILD.as_bytes()).expect("table info");
        assert_eq!(
            create_table("test", &info),
            "CREATE TABLE `child` (\n  \
             `id` bigint NOT NULL,\n  \
             `p` int DEFAULT NULL,\n  \
             PRIMARY KEY (`id`),\n  \
             KEY `k_p` (`p`) /*!80000 INVISIBLE */,\n  \
             KEY `e` (((`p` + 1))),\n  \
             CONSTRAINT `fk_p` FOREIGN KEY (`p`) REFERENCES `other`.`parent` (`id`) ON DELETE CASCADE,\n  \
             CONSTRAINT `child_chk_1` CHECK ((`p` > 0)) /*!80016 NOT ENFORCED */\n\
             ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
        );
        // The referenced table of the same database is not qualified.
        assert!(create_table("other", &info).contains("REFERENCES `parent` (`id`)"));
    }

    #[test]
    fn create_view_prints_definer_security_and_columns() {
        let json = r#"{"id":7,"name":{"O":"v","L":"v"},"cols":[],"view":{"view_algorithm":0,
          "view_definer":{"Username":"root","Hostname":"%","CurrentUser":false},
          "view_security":0,"view_select":"SELECT `a` AS `a` FROM `test`.`t`",
          "view_checkoption":1,"view_cols":[{"O":"a","L":"a"}]}}"#;
        let info = TableInfo::from_json(json.as_bytes()).expect("view info");
        assert_eq!(
            create_view(&info).as_deref(),
            Some(
                "CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`%` SQL SECURITY DEFINER VIEW `v` (`a`) \
                 AS SELECT `a` AS `a` FROM `test`.`t`"
            )
        );
        assert_eq!(create_view(&TableInfo::default()), None);
    }

    #[test]
    fn key_expressions_print_as_mysql_prints_them() {
        assert_eq!(key_expression("lower(`c`)"), "lower(`c`)");
        assert_eq!(key_expression("`p` + 1"), "(`p` + 1)");
        assert_eq!(
            key_expression("abs(`a`) + abs(`b`)"),
            "(abs(`a`) + abs(`b`))"
        );
        assert_eq!(
            key_expression("concat(`a`, _utf8mb4')')"),
            "concat(`a`, _utf8mb4')')"
        );
        assert_eq!(
            key_expression("json_extract(`j`, _utf8mb4'$.a')"),
            "json_extract(`j`, _utf8mb4'$.a')"
        );
    }
}
