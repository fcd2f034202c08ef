//! The statements a check sends, built from a table's shape: the same text runs on both sides,
//! so that the source and the target compute each chunk's checksum in SQL the same way and no
//! row crosses the network unless its chunk differs.
//!
//! Values travel as the text protocol gives them (`None` for NULL) and come back into
//! statements as literals of their column's kind: numbers unquoted (a quoted number would be
//! compared as a double, losing digits of a BIGINT or a DECIMAL), binary strings as `x'…'`,
//! everything else as a quoted string, which MySQL converts to the column's type (temporal
//! values compare as temporal values, strings under the column's collation).

use std::fmt::Write as _;

/// A value as the text protocol gives it; `None` is NULL.
pub type Cell = Option<Vec<u8>>;
/// A row's cells in the order of [`TableShape::columns`], or a key's in the order of its
/// columns.
pub type Row = Vec<Cell>;

/// How a column's values are written back into a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiteralKind {
    /// Integers, DECIMAL, FLOAT, DOUBLE, YEAR: the text as it is.
    Number,
    /// BINARY, VARBINARY, BLOBs, BIT, spatial types: `x'…'`.
    Bytes,
    /// Everything else: a quoted string the server converts to the column's type.
    Text,
}

impl LiteralKind {
    /// The kind of a column of `information_schema.COLUMNS.DATA_TYPE` `data_type`.
    pub fn of(data_type: &str) -> LiteralKind {
        match data_type.to_ascii_lowercase().as_str() {
            "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" | "decimal"
            | "numeric" | "float" | "double" | "real" | "year" => LiteralKind::Number,
            "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" | "bit"
            | "geometry" | "point" | "linestring" | "polygon" | "multipoint"
            | "multilinestring" | "multipolygon" | "geometrycollection" | "geomcollection" => {
                LiteralKind::Bytes
            }
            _ => LiteralKind::Text,
        }
    }
}

/// One column of a checked table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// `COLUMN_TYPE` (`decimal(10,2) unsigned`), for the report.
    pub column_type: String,
    pub kind: LiteralKind,
    /// A generated column: compared, never written by a repair.
    pub generated: bool,
    /// The column's collation, for a string column (`utf8mb4_general_ci`).
    pub collation: Option<String>,
}

/// A table as both sides compare it: the columns they share, in the source's order, and the
/// key that orders and splits its rows (empty when the table has no usable key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    pub db: String,
    pub table: String,
    pub columns: Vec<Column>,
    /// Indexes into `columns` of the key's columns, in key order.
    pub key: Vec<usize>,
}

/// A range of a table's key: rows after `lower` (exclusive) up to `upper` (inclusive); `None`
/// is open on that side.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyRange {
    pub lower: Option<Row>,
    pub upper: Option<Row>,
}

impl KeyRange {
    pub fn all() -> KeyRange {
        KeyRange::default()
    }
}

/// `name` as a quoted identifier.
pub fn ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `text` as a quoted string literal (quotes, backslashes and control bytes escaped).
pub fn text_literal(text: &str) -> String {
    literal(LiteralKind::Text, &Some(text.as_bytes().to_vec()))
}

/// `value` as a literal of `kind` (see the module's header).
pub fn literal(kind: LiteralKind, value: &Cell) -> String {
    let mut out = String::new();
    write_literal(&mut out, kind, value);
    out
}

fn write_literal(out: &mut String, kind: LiteralKind, value: &Cell) {
    let Some(v) = value else {
        out.push_str("NULL");
        return;
    };
    let number = kind == LiteralKind::Number
        && !v.is_empty()
        && v.iter().all(|b| b.is_ascii_digit() || b"+-.eE".contains(b))
        && v.iter().any(u8::is_ascii_digit);
    if number {
        out.push_str(std::str::from_utf8(v).unwrap_or("0"));
        return;
    }
    match (kind, std::str::from_utf8(v)) {
        (LiteralKind::Text | LiteralKind::Number, Ok(s)) => {
            out.push('\'');
            for c in s.chars() {
                match c {
                    '\'' => out.push_str("''"),
                    '\\' => out.push_str("\\\\"),
                    '\0' => out.push_str("\\0"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\x1a' => out.push_str("\\Z"),
                    c => out.push(c),
                }
            }
            out.push('\'');
        }
        _ if v.is_empty() => out.push_str("''"),
        _ => {
            out.push_str("x'");
            for b in v {
                let _ = write!(out, "{b:02x}");
            }
            out.push('\'');
        }
    }
}

impl TableShape {
    /// `` `db`.`table` ``.
    pub fn name(&self) -> String {
        format!("{}.{}", ident(&self.db), ident(&self.table))
    }

    fn key_list(&self) -> String {
        self.list(&self.key)
    }

    fn list(&self, cols: &[usize]) -> String {
        cols.iter()
            .map(|&i| ident(&self.columns[i].name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn all_columns(&self) -> Vec<usize> {
        (0..self.columns.len()).collect()
    }

    /// `key > lower` (`above`) or `key <= upper` over the key's columns, as the expanded
    /// disjunction `(a > x) OR (a = x AND b > y)` every MySQL-protocol server plans as ranges.
    fn bound(&self, values: &Row, above: bool) -> String {
        let mut ors = Vec::with_capacity(self.key.len());
        for last in 0..self.key.len() {
            let mut ands = Vec::with_capacity(last + 1);
            for (j, &c) in self.key[..=last].iter().enumerate() {
                let col = &self.columns[c];
                let op = match (j == last, above, last + 1 == self.key.len()) {
                    (false, _, _) => "=",
                    (true, true, _) => ">",
                    (true, false, false) => "<",
                    (true, false, true) => "<=",
                };
                ands.push(format!(
                    "{} {op} {}",
                    ident(&col.name),
                    literal(col.kind, &values[j])
                ));
            }
            ors.push(format!("({})", ands.join(" AND ")));
        }
        format!("({})", ors.join(" OR "))
    }

    /// The WHERE condition of `range` (`TRUE` for the whole table).
    pub fn range_where(&self, range: &KeyRange) -> String {
        let mut parts = Vec::new();
        if let Some(lower) = &range.lower {
            parts.push(self.bound(lower, true));
        }
        if let Some(upper) = &range.upper {
            parts.push(self.bound(upper, false));
        }
        if parts.is_empty() {
            "TRUE".to_owned()
        } else {
            parts.join(" AND ")
        }
    }

    /// The count and order-independent checksum of the rows of `range`: each row's MD5 over
    /// every column's text and NULL flags (so NULL, '' and 0 differ), read as two 64-bit
    /// halves XORed, the rows' values XORed. The same statement on both sides.
    pub fn checksum_query(&self, range: &KeyRange) -> String {
        let cols = self.list(&self.all_columns());
        let nulls = self
            .columns
            .iter()
            .map(|c| format!("ISNULL({})", ident(&c.name)))
            .collect::<Vec<_>>()
            .join(", ");
        let row = format!("MD5(CONCAT_WS(',', {cols}, CONCAT({nulls})))");
        format!(
            "SELECT COUNT(*), BIT_XOR(CAST(CONV(SUBSTRING({row}, 1, 16), 16, 10) AS UNSIGNED) \
             ^ CAST(CONV(SUBSTRING({row}, 17, 16), 16, 10) AS UNSIGNED)) FROM {} WHERE {}",
            self.name(),
            self.range_where(range)
        )
    }

    /// The key of the row `offset` rows into `range` in key order (the chunk boundaries and
    /// the midpoint of a bisection).
    pub fn key_at_query(&self, range: &KeyRange, offset: u64) -> String {
        let keys = self.key_list();
        format!(
            "SELECT {keys} FROM {} WHERE {} ORDER BY {keys} LIMIT 1 OFFSET {offset}",
            self.name(),
            self.range_where(range)
        )
    }

    /// Every column of the rows of `range`, in key order (all columns' order for a table
    /// without a key), each as the text the checksum hashes (`CONCAT(c)`): a result set's
    /// text can be another (MariaDB sends a FLOAT with six significant digits, where its
    /// string conversion, like MySQL's, gives the shortest text that reads back the same).
    pub fn rows_query(&self, range: &KeyRange) -> String {
        let order = if self.key.is_empty() {
            self.list(&self.all_columns())
        } else {
            self.key_list()
        };
        let texts = self
            .columns
            .iter()
            .map(|c| format!("CONCAT({})", ident(&c.name)))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "SELECT {texts} FROM {} WHERE {} ORDER BY {order}",
            self.name(),
            self.range_where(range)
        )
    }

    /// The key cells of `row` (a row of [`Self::rows_query`]).
    pub fn key_of(&self, row: &Row) -> Row {
        self.key.iter().map(|&i| row[i].clone()).collect()
    }

    /// `REPLACE INTO` writing `row` (every stored column) on the target.
    pub fn replace_statement(&self, row: &Row) -> String {
        let cols: Vec<usize> = (0..self.columns.len())
            .filter(|&i| !self.columns[i].generated)
            .collect();
        let mut values = String::new();
        for (n, &i) in cols.iter().enumerate() {
            if n > 0 {
                values.push_str(", ");
            }
            write_literal(&mut values, self.columns[i].kind, &row[i]);
        }
        format!(
            "REPLACE INTO {} ({}) VALUES ({values})",
            self.name(),
            self.list(&cols)
        )
    }

    /// `DELETE` of the one row with `row`'s key (every column's value for a table without a
    /// key: NULL compared with `<=>`).
    pub fn delete_statement(&self, row: &Row) -> String {
        let cols = if self.key.is_empty() {
            self.all_columns()
        } else {
            self.key.clone()
        };
        let conds = cols
            .iter()
            .map(|&i| {
                let c = &self.columns[i];
                format!("{} <=> {}", ident(&c.name), literal(c.kind, &row[i]))
            })
            .collect::<Vec<_>>()
            .join(" AND ");
        format!("DELETE FROM {} WHERE {conds} LIMIT 1", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, data_type: &str) -> Column {
        Column {
            name: name.into(),
            column_type: data_type.into(),
            kind: LiteralKind::of(data_type),
            generated: false,
            collation: None,
        }
    }

    fn shape(key: Vec<usize>) -> TableShape {
        TableShape {
            db: "d".into(),
            table: "t`x".into(),
            columns: vec![col("a", "bigint"), col("b", "varchar"), col("c", "blob")],
            key,
        }
    }

    fn cell(s: &str) -> Cell {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn literals_keep_numbers_exact_and_escape_text_and_bytes() {
        assert_eq!(
            literal(LiteralKind::Number, &cell("18446744073709551615")),
            "18446744073709551615"
        );
        assert_eq!(literal(LiteralKind::Number, &cell("-1.50")), "-1.50");
        assert_eq!(literal(LiteralKind::Number, &cell("1e10")), "1e10");
        // Not a number's text: quoted, never pasted.
        assert_eq!(
            literal(LiteralKind::Number, &cell("1) OR (1")),
            "'1) OR (1'"
        );
        assert_eq!(literal(LiteralKind::Number, &cell("e")), "'e'");
        assert_eq!(literal(LiteralKind::Text, &None), "NULL");
        assert_eq!(
            literal(LiteralKind::Text, &cell("it's a\\b\n\0")),
            "'it''s a\\\\b\\n\\0'"
        );
        assert_eq!(
            literal(LiteralKind::Bytes, &Some(vec![0, 0xff, b'\''])),
            "x'00ff27'"
        );
        assert_eq!(literal(LiteralKind::Bytes, &Some(vec![])), "''");
        // Text that is not UTF-8 goes as bytes.
        assert_eq!(literal(LiteralKind::Text, &Some(vec![0xc3])), "x'c3'");
        assert_eq!(ident("a`b"), "`a``b`");
        assert_eq!(text_literal("x\\' OR 1 -- "), "'x\\\\'' OR 1 -- '");
    }

    #[test]
    fn ranges_expand_a_composite_key() {
        let s = shape(vec![0, 1]);
        let r = KeyRange {
            lower: Some(vec![cell("1"), cell("x")]),
            upper: Some(vec![cell("9"), cell("y")]),
        };
        assert_eq!(
            s.range_where(&r),
            "((`a` > 1) OR (`a` = 1 AND `b` > 'x')) AND ((`a` < 9) OR (`a` = 9 AND `b` <= 'y'))"
        );
        assert_eq!(s.range_where(&KeyRange::all()), "TRUE");
        let one = shape(vec![0]);
        let r = KeyRange {
            lower: None,
            upper: Some(vec![cell("5")]),
        };
        assert_eq!(one.range_where(&r), "((`a` <= 5))");
        assert_eq!(
            one.key_at_query(&r, 99),
            "SELECT `a` FROM `d`.`t``x` WHERE ((`a` <= 5)) ORDER BY `a` LIMIT 1 OFFSET 99"
        );
    }

    #[test]
    fn checksum_covers_every_column_and_its_null_flag() {
        let q = shape(vec![0]).checksum_query(&KeyRange::all());
        assert!(
            q.contains(
                "MD5(CONCAT_WS(',', `a`, `b`, `c`, CONCAT(ISNULL(`a`), ISNULL(`b`), ISNULL(`c`))))"
            ),
            "{q}"
        );
        assert!(q.starts_with("SELECT COUNT(*), BIT_XOR("), "{q}");
        assert!(q.ends_with("FROM `d`.`t``x` WHERE TRUE"), "{q}");
    }

    #[test]
    fn repairs_write_stored_columns_and_delete_by_key() {
        let mut s = shape(vec![0]);
        s.columns[2].generated = true;
        let row = vec![cell("7"), None, cell("zz")];
        assert_eq!(
            s.replace_statement(&row),
            "REPLACE INTO `d`.`t``x` (`a`, `b`) VALUES (7, NULL)"
        );
        assert_eq!(
            s.delete_statement(&row),
            "DELETE FROM `d`.`t``x` WHERE `a` <=> 7 LIMIT 1"
        );
        let keyless = shape(vec![]);
        assert_eq!(
            keyless.delete_statement(&row),
            "DELETE FROM `d`.`t``x` WHERE `a` <=> 7 AND `b` <=> NULL AND `c` <=> x'7a7a' LIMIT 1"
        );
        assert_eq!(
            keyless.rows_query(&KeyRange::all()),
            "SELECT CONCAT(`a`), CONCAT(`b`), CONCAT(`c`) FROM `d`.`t``x` WHERE TRUE ORDER BY `a`, `b`, `c`"
        );
    }
}
