//! Column types and table definitions as a `CREATE TABLE` statement gives them, turned into the
//! `FieldType` / `ColumnInfo` / `TableInfo` TiDB builds (`BuildTableInfoFromAST`), and rendered
//! back to SQL text for the job's `query`.
//!
//! Defaults follow TiDB: numeric and temporal columns have charset/collation `binary`; string
//! columns `utf8mb4`/`utf8mb4_bin`; binary strings `binary` with the BINARY flag; display widths
//! and fsp as `SHOW CREATE TABLE` reports them.

use tibinlog_protocol::value::Value;

use crate::tidb::schema::{
    mysql, schema_state, CIStr, ColumnInfo, ConstraintInfo, FieldType, FkInfo, IndexColumn,
    IndexInfo, TableInfo,
};
use crate::tidb::text;

use super::error::{Result, TidbError};
pub use super::partition::PartitionDef;

/// Default string charset and collation of the simulated cluster.
pub const CHARSET: &str = "utf8mb4";
/// Default collation (`utf8mb4_bin`, TiDB's default with new collations).
pub const COLLATE: &str = "utf8mb4_bin";

fn numeric(tp: u8, flen: i64, decimal: i32, unsigned: bool) -> FieldType {
    FieldType {
        tp,
        flag: if unsigned { mysql::UNSIGNED_FLAG } else { 0 },
        flen,
        decimal,
        charset: mysql::BINARY_CHARSET.into(),
        collate: mysql::BINARY_CHARSET.into(),
        ..FieldType::default()
    }
}

fn string(tp: u8, flen: i64, binary: bool) -> FieldType {
    let (cs, co) = if binary {
        (mysql::BINARY_CHARSET, mysql::BINARY_CHARSET)
    } else {
        (CHARSET, COLLATE)
    };
    FieldType {
        tp,
        flag: if binary { mysql::BINARY_FLAG } else { 0 },
        flen,
        decimal: 0,
        charset: cs.into(),
        collate: co.into(),
        ..FieldType::default()
    }
}

/// TINYINT/SMALLINT/MEDIUMINT/INT/BIGINT (`tp` = the MySQL type code), optionally UNSIGNED.
pub fn int(tp: u8, unsigned: bool) -> FieldType {
    let flen = match (tp, unsigned) {
        (mysql::TYPE_TINY, false) => 4,
        (mysql::TYPE_TINY, true) => 3,
        (mysql::TYPE_SHORT, false) => 6,
        (mysql::TYPE_SHORT, true) => 5,
        (mysql::TYPE_INT24, false) => 9,
        (mysql::TYPE_INT24, true) => 8,
        (mysql::TYPE_LONG, false) => 11,
        (mysql::TYPE_LONG, true) => 10,
        _ => 20,
    };
    numeric(tp, flen, 0, unsigned)
}
/// FLOAT.
pub fn float() -> FieldType {
    numeric(mysql::TYPE_FLOAT, 12, -1, false)
}
/// DOUBLE.
pub fn double() -> FieldType {
    numeric(mysql::TYPE_DOUBLE, 22, -1, false)
}
/// DECIMAL(precision, scale).
pub fn decimal(precision: u8, scale: u8) -> FieldType {
    numeric(
        mysql::TYPE_NEWDECIMAL,
        i64::from(precision),
        i32::from(scale),
        false,
    )
}
/// CHAR(n).
pub fn char(n: u32) -> FieldType {
    string(mysql::TYPE_STRING, i64::from(n), false)
}
/// VARCHAR(n).
pub fn varchar(n: u32) -> FieldType {
    string(mysql::TYPE_VARCHAR, i64::from(n), false)
}
/// BINARY(n).
pub fn binary(n: u32) -> FieldType {
    string(mysql::TYPE_STRING, i64::from(n), true)
}
/// VARBINARY(n).
pub fn varbinary(n: u32) -> FieldType {
    string(mysql::TYPE_VARCHAR, i64::from(n), true)
}
/// TEXT.
pub fn text() -> FieldType {
    let mut ft = string(mysql::TYPE_BLOB, 65535, false);
    ft.flag |= mysql::BLOB_FLAG;
    ft
}
/// BLOB.
pub fn blob() -> FieldType {
    let mut ft = string(mysql::TYPE_BLOB, 65535, true);
    ft.flag |= mysql::BLOB_FLAG;
    ft
}
/// LONGBLOB.
pub fn longblob() -> FieldType {
    let mut ft = string(mysql::TYPE_LONG_BLOB, 4_294_967_295, true);
    ft.flag |= mysql::BLOB_FLAG;
    ft
}
/// DATE.
pub fn date() -> FieldType {
    numeric(mysql::TYPE_DATE, 10, 0, false)
}
fn with_fsp(tp: u8, base: i64, fsp: u8) -> FieldType {
    let fsp = fsp.min(6);
    let flen = if fsp > 0 {
        base + 1 + i64::from(fsp)
    } else {
        base
    };
    numeric(tp, flen, i32::from(fsp), false)
}
/// DATETIME(fsp).
pub fn datetime(fsp: u8) -> FieldType {
    with_fsp(mysql::TYPE_DATETIME, 19, fsp)
}
/// TIMESTAMP(fsp).
pub fn timestamp(fsp: u8) -> FieldType {
    with_fsp(mysql::TYPE_TIMESTAMP, 19, fsp)
}
/// TIME(fsp).
pub fn time(fsp: u8) -> FieldType {
    with_fsp(mysql::TYPE_DURATION, 10, fsp)
}
/// YEAR (TiDB marks it UNSIGNED ZEROFILL).
pub fn year() -> FieldType {
    let mut ft = numeric(mysql::TYPE_YEAR, 4, 0, true);
    ft.flag |= mysql::ZEROFILL_FLAG;
    ft
}
/// BIT(n).
pub fn bit(n: u8) -> FieldType {
    let mut ft = numeric(mysql::TYPE_BIT, i64::from(n.clamp(1, 64)), 0, true);
    ft.flag = mysql::UNSIGNED_FLAG;
    ft
}
fn members(tp: u8, flag: u32, elems: &[&str]) -> FieldType {
    let mut ft = string(tp, -1, false);
    ft.flag |= flag;
    ft.elems = elems.iter().map(|s| (*s).to_owned()).collect();
    ft.elems_is_binary_lit = vec![false; elems.len()];
    ft.flen = elems.iter().map(|e| e.len() as i64).max().unwrap_or(0);
    ft
}
/// ENUM(...).
pub fn enumeration(elems: &[&str]) -> FieldType {
    members(mysql::TYPE_ENUM, mysql::ENUM_FLAG, elems)
}
/// SET(...).
pub fn set(elems: &[&str]) -> FieldType {
    members(mysql::TYPE_SET, mysql::SET_FLAG, elems)
}
/// JSON.
pub fn json() -> FieldType {
    let mut ft = numeric(mysql::TYPE_JSON, 4_294_967_295, 0, false);
    ft.flag = mysql::BINARY_FLAG;
    ft
}

/// SQL text of a column type (`bigint(20) unsigned`, `varchar(64)`, `enum('a','b')`, ...).
pub fn type_sql(ft: &FieldType) -> String {
    use mysql::*;
    let unsigned = if ft.is_unsigned() && ft.tp != TYPE_YEAR && ft.tp != TYPE_BIT {
        " unsigned"
    } else {
        ""
    };
    let list = |e: &[String]| {
        e.iter()
            .map(|s| format!("'{}'", s.replace('\'', "''")))
            .collect::<Vec<_>>()
            .join(",")
    };
    let fsp = |name: &str| {
        if ft.decimal > 0 {
            format!("{name}({})", ft.decimal)
        } else {
            name.to_owned()
        }
    };
    let bin = ft.is_binary_string();
    match ft.tp {
        TYPE_TINY => format!("tinyint({}){unsigned}", ft.flen),
        TYPE_SHORT => format!("smallint({}){unsigned}", ft.flen),
        TYPE_INT24 => format!("mediumint({}){unsigned}", ft.flen),
        TYPE_LONG => format!("int({}){unsigned}", ft.flen),
        TYPE_LONGLONG => format!("bigint({}){unsigned}", ft.flen),
        TYPE_FLOAT => "float".into(),
        TYPE_DOUBLE => "double".into(),
        TYPE_NEWDECIMAL => format!("decimal({},{})", ft.flen, ft.decimal),
        TYPE_STRING if bin => format!("binary({})", ft.flen),
        TYPE_STRING => format!("char({})", ft.flen),
        TYPE_VARCHAR if bin => format!("varbinary({})", ft.flen),
        TYPE_VARCHAR => format!("varchar({})", ft.flen),
        TYPE_BLOB if bin => "blob".into(),
        TYPE_BLOB => "text".into(),
        TYPE_LONG_BLOB if bin => "longblob".into(),
        TYPE_LONG_BLOB => "longtext".into(),
        TYPE_DATE => "date".into(),
        TYPE_DATETIME => fsp("datetime"),
        TYPE_TIMESTAMP => fsp("timestamp"),
        TYPE_DURATION => fsp("time"),
        TYPE_YEAR => "year(4)".into(),
        TYPE_BIT => format!("bit({})", ft.flen),
        TYPE_ENUM => format!("enum({})", list(&ft.elems)),
        TYPE_SET => format!("set({})", list(&ft.elems)),
        TYPE_JSON => "json".into(),
        other => format!("/* type {other} */ blob"),
    }
}

/// Backquotes an identifier.
pub fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A column as `CREATE TABLE` / `ADD COLUMN` declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    pub ft: FieldType,
    pub nullable: bool,
    /// `DEFAULT` value (must be valid for the type); `None` = no DEFAULT clause.
    pub default: Option<Value>,
    /// `GENERATED ALWAYS AS (expr) VIRTUAL|STORED`: the expression as TiDB restores it into
    /// `GeneratedExprString` (`` `a` + `b` ``) and whether it is stored. A virtual column's
    /// value is never written to the row (callers still pass one, which TiDB would compute).
    pub generated: Option<(String, bool)>,
}

impl ColumnDef {
    /// A nullable column without default.
    pub fn new(name: &str, ft: FieldType) -> Self {
        ColumnDef {
            name: name.to_owned(),
            ft,
            nullable: true,
            default: None,
            generated: None,
        }
    }
    /// `GENERATED ALWAYS AS (expr)`, `VIRTUAL` unless `stored`.
    pub fn generated(mut self, expr: &str, stored: bool) -> Self {
        self.generated = Some((expr.to_owned(), stored));
        self
    }
    /// NOT NULL.
    pub fn not_null(mut self) -> Self {
        self.nullable = false;
        self
    }
    /// DEFAULT value.
    pub fn default(mut self, v: Value) -> Self {
        self.default = Some(v);
        self
    }
    /// Column definition SQL.
    pub fn sql(&self) -> String {
        let mut s = format!("{} {}", quote(&self.name), type_sql(&self.ft));
        if let Some((expr, stored)) = &self.generated {
            let kind = if *stored { "STORED" } else { "VIRTUAL" };
            s.push_str(&format!(" GENERATED ALWAYS AS ({expr}) {kind}"));
        }
        if !self.nullable {
            s.push_str(" NOT NULL");
        }
        if let Some(d) = &self.default {
            match text::render(d, &self.ft) {
                None => s.push_str(" DEFAULT NULL"),
                Some(t) => s.push_str(&format!(" DEFAULT '{}'", t.replace('\'', "''"))),
            }
        }
        s
    }
    /// The ColumnInfo TiDB builds (flags from the column itself; key flags are added by
    /// [`TableDef::build`]).
    pub fn build(&self, id: i64, offset: usize, with_origin_default: bool) -> ColumnInfo {
        let mut ft = self.ft.clone();
        if !self.nullable {
            ft.flag |= mysql::NOT_NULL_FLAG;
            if self.default.is_none() {
                ft.flag |= mysql::NO_DEFAULT_VALUE_FLAG;
            }
        }
        let (default, default_bit) = default_json(self.default.as_ref(), &self.ft);
        let (origin_default, origin_default_bit) = if with_origin_default {
            (default.clone(), default_bit.clone())
        } else {
            (serde_json::Value::Null, None)
        };
        ColumnInfo {
            id,
            name: CIStr::new(&self.name),
            offset,
            origin_default,
            origin_default_bit,
            default,
            default_bit,
            field_type: ft,
            state: schema_state::PUBLIC,
            version: 2,
            generated_expr_string: self
                .generated
                .as_ref()
                .map_or_else(String::new, |g| g.0.clone()),
            generated_stored: self.generated.as_ref().is_some_and(|g| g.1),
            ..ColumnInfo::default()
        }
    }
}

/// `default`/`default_bit` JSON members for a default value: text for most types, base64 of the
/// big-endian bytes for BIT (TiDB keeps BIT defaults as binary literals).
fn default_json(v: Option<&Value>, ft: &FieldType) -> (serde_json::Value, Option<String>) {
    match v {
        None | Some(Value::Null) => (serde_json::Value::Null, None),
        Some(Value::Bit(b)) if ft.tp == mysql::TYPE_BIT => {
            let n = ((ft.flen.max(1) + 7) / 8) as usize;
            let bytes = &b.to_be_bytes()[8 - n.min(8)..];
            let t = base64(bytes);
            (serde_json::Value::String(t.clone()), Some(t))
        }
        Some(v) => (
            text::render(v, ft).map_or(serde_json::Value::Null, serde_json::Value::String),
            None,
        ),
    }
}

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// A secondary index as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDef {
    pub name: String,
    pub columns: Vec<String>,
    pub unique: bool,
    /// `INVISIBLE`: kept up to date, never chosen by the optimizer.
    pub invisible: bool,
    /// An expression index (`KEY k ((expr))`, `columns` empty): the expression as TiDB
    /// restores it and the type TiDB infers for it, which its hidden column gets.
    pub expression: Option<(String, FieldType)>,
}

impl IndexDef {
    /// An index on `columns`.
    pub fn new(name: &str, columns: &[&str], unique: bool) -> Self {
        IndexDef {
            name: name.to_owned(),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            unique,
            invisible: false,
            expression: None,
        }
    }

    /// An index on the expression `expr` (as TiDB restores it, `` lower(`name`) ``) whose
    /// value has type `ft`.
    pub fn expression(name: &str, expr: &str, ft: FieldType) -> Self {
        IndexDef {
            expression: Some((expr.to_owned(), ft)),
            ..IndexDef::new(name, &[], false)
        }
    }

    /// The same index, `INVISIBLE`.
    pub fn invisible(mut self) -> Self {
        self.invisible = true;
        self
    }

    fn sql(&self) -> String {
        let mut cols: Vec<String> = self.columns.iter().map(|c| quote(c)).collect();
        if let Some((expr, _)) = &self.expression {
            cols = vec![format!("({expr})")];
        }
        format!(
            "{}KEY {}({}){}",
            if self.unique { "UNIQUE " } else { "" },
            quote(&self.name),
            cols.join(","),
            if self.invisible { " INVISIBLE" } else { "" }
        )
    }
}

/// A `FOREIGN KEY` clause (TiDB stores it; the simulator does not enforce it, as TiDB with
/// `foreign_key_checks` off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignKeyDef {
    pub name: String,
    pub columns: Vec<String>,
    pub ref_table: String,
    pub ref_columns: Vec<String>,
    /// `ReferOptionType` codes (0 none given, 1 RESTRICT, 2 CASCADE, 3 SET NULL, 4 NO ACTION).
    pub on_delete: i64,
    pub on_update: i64,
}

impl ForeignKeyDef {
    fn sql(&self) -> String {
        let list = |cols: &[String]| cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(",");
        let mut s = format!(
            "CONSTRAINT {} FOREIGN KEY ({}) REFERENCES {} ({})",
            quote(&self.name),
            list(&self.columns),
            quote(&self.ref_table),
            list(&self.ref_columns)
        );
        for (words, code) in [("ON DELETE", self.on_delete), ("ON UPDATE", self.on_update)] {
            if let Some(o) = crate::tidb::schema::FkInfo::refer_option(code) {
                s.push_str(&format!(" {words} {o}"));
            }
        }
        s
    }
}

/// A `CHECK` constraint: `expr` as TiDB restores it (e.g. `` `a`>0 ``).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckDef {
    pub name: String,
    pub expr: String,
    pub columns: Vec<String>,
    pub enforced: bool,
}

/// A `CREATE TABLE` statement.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDef {
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// PRIMARY KEY columns (empty = none: rows get `_tidb_rowid` handles).
    pub primary_key: Vec<String>,
    /// `CLUSTERED` primary key: a single integer PK becomes the int handle
    /// (`pk_is_handle`), anything else a common handle. NONCLUSTERED keeps `_tidb_rowid`.
    pub clustered: bool,
    pub indexes: Vec<IndexDef>,
    pub partition: Option<PartitionDef>,
    pub foreign_keys: Vec<ForeignKeyDef>,
    pub checks: Vec<CheckDef>,
}

impl TableDef {
    /// `CREATE TABLE` text, fully qualified.
    pub fn sql(&self, db: &str) -> String {
        let mut parts: Vec<String> = self.columns.iter().map(ColumnDef::sql).collect();
        if !self.primary_key.is_empty() {
            let cols: Vec<String> = self.primary_key.iter().map(|c| quote(c)).collect();
            parts.push(format!(
                "PRIMARY KEY ({}) /*T![clustered_index] {}CLUSTERED */",
                cols.join(","),
                if self.clustered { "" } else { "NON" }
            ));
        }
        parts.extend(self.indexes.iter().map(IndexDef::sql));
        parts.extend(self.foreign_keys.iter().map(ForeignKeyDef::sql));
        parts.extend(self.checks.iter().map(|c| {
            format!(
                "CONSTRAINT {} CHECK ({}){}",
                quote(&c.name),
                c.expr,
                if c.enforced { "" } else { " NOT ENFORCED" }
            )
        }));
        let mut s = format!(
            "CREATE TABLE {}.{} ({})",
            quote(db),
            quote(&self.name),
            parts.join(", ")
        );
        if let Some(p) = &self.partition {
            s.push(' ');
            s.push_str(&p.sql());
        }
        s
    }

    /// Number of physical partitions (0 = not partitioned).
    pub fn partition_count(&self) -> usize {
        self.partition.as_ref().map_or(0, PartitionDef::count)
    }

    /// Builds the TableInfo with table id `id` and partition ids `part_ids`.
    pub fn build(&self, db: &str, id: i64, part_ids: &[i64], update_ts: u64) -> Result<TableInfo> {
        let obj = |what, name: &str, problem| TidbError::Object {
            what,
            name: name.to_owned(),
            table: self.name.clone(),
            problem,
        };
        let mut columns: Vec<ColumnInfo> = Vec::with_capacity(self.columns.len());
        for (i, c) in self.columns.iter().enumerate() {
            if columns.iter().any(|o| o.name.l == c.name.to_lowercase()) {
                return Err(obj("column", &c.name, "duplicate"));
            }
            columns.push(c.build(i as i64 + 1, i, false));
        }
        let offset_of = |columns: &[ColumnInfo], name: &str| {
            columns
                .iter()
                .position(|c| c.name.l == name.to_lowercase())
                .ok_or_else(|| obj("column", name, "unknown"))
        };
        let mut t = TableInfo {
            id,
            name: CIStr::new(&self.name),
            charset: CHARSET.into(),
            collate: COLLATE.into(),
            state: schema_state::PUBLIC,
            common_handle_version: 0,
            max_col_id: columns.len() as i64,
            update_timestamp: update_ts,
            version: 5,
            ..TableInfo::default()
        };
        let mut pk_offsets = Vec::new();
        for name in &self.primary_key {
            pk_offsets.push(offset_of(&columns, name)?);
        }
        let int_pk = pk_offsets.len() == 1 && {
            let tp = columns[pk_offsets[0]].field_type.tp;
            matches!(
                tp,
                mysql::TYPE_TINY
                    | mysql::TYPE_SHORT
                    | mysql::TYPE_INT24
                    | mysql::TYPE_LONG
                    | mysql::TYPE_LONGLONG
            )
        };
        for &o in &pk_offsets {
            columns[o].field_type.flag |= mysql::PRI_KEY_FLAG | mysql::NOT_NULL_FLAG;
        }
        let mut indices = Vec::new();
        if !pk_offsets.is_empty() {
            if int_pk && self.clustered {
                t.pk_is_handle = true;
            } else {
                t.is_common_handle = self.clustered;
                t.common_handle_version = u16::from(self.clustered);
                let cols = pk_offsets.iter().map(|&o| &columns[o]).collect::<Vec<_>>();
                indices.push(index_info(1, "PRIMARY", &self.name, &cols, true, true));
            }
        }
        for def in &self.indexes {
            if indices
                .iter()
                .any(|i: &IndexInfo| i.idx_name.l == def.name.to_lowercase())
            {
                return Err(obj("index", &def.name, "duplicate"));
            }
            let mut offs = Vec::new();
            if let Some((expr, ft)) = &def.expression {
                // TiDB keys an expression on a hidden virtual column named after the index.
                let offset = columns.len();
                let mut c = ColumnDef::new(&format!("_V$_{}_0", def.name), ft.clone())
                    .generated(expr, false)
                    .build(offset as i64 + 1, offset, false);
                c.hidden = true;
                columns.push(c);
                offs.push(offset);
            }
            for c in &def.columns {
                let o = offset_of(&columns, c)?;
                if columns[o].field_type.tp == mysql::TYPE_JSON {
                    return Err(obj("index", &def.name, "JSON column cannot be indexed"));
                }
                offs.push(o);
            }
            let first = &mut columns[offs[0]].field_type.flag;
            if def.unique && offs.len() == 1 {
                *first |= mysql::UNIQUE_KEY_FLAG;
            } else if *first & (mysql::PRI_KEY_FLAG | mysql::UNIQUE_KEY_FLAG) == 0 {
                *first |= mysql::MULTIPLE_KEY_FLAG;
            }
            let cols = offs.iter().map(|&o| &columns[o]).collect::<Vec<_>>();
            let id = indices.len() as i64 + 1;
            let mut info = index_info(id, &def.name, &self.name, &cols, def.unique, false);
            info.is_invisible = def.invisible;
            indices.push(info);
        }
        // A foreign key needs an index that starts with its columns; TiDB (as MySQL) adds one
        // named after the key where the table has none.
        for f in &self.foreign_keys {
            let covered = indices.iter().any(|i| {
                i.idx_cols.len() >= f.columns.len()
                    && i.idx_cols
                        .iter()
                        .zip(&f.columns)
                        .all(|(a, b)| a.name.l == b.to_lowercase())
            }) || (t.pk_is_handle
                && f.columns.len() == 1
                && f.columns[0].eq_ignore_ascii_case(&self.primary_key[0]));
            if !covered {
                let mut offs = Vec::new();
                for c in &f.columns {
                    offs.push(offset_of(&columns, c)?);
                }
                let first = &mut columns[offs[0]].field_type.flag;
                if *first & (mysql::PRI_KEY_FLAG | mysql::UNIQUE_KEY_FLAG) == 0 {
                    *first |= mysql::MULTIPLE_KEY_FLAG;
                }
                let cols = offs.iter().map(|&o| &columns[o]).collect::<Vec<_>>();
                let id = indices.len() as i64 + 1;
                indices.push(index_info(id, &f.name, &self.name, &cols, false, false));
            }
        }
        t.max_idx_id = indices.len() as i64;
        t.max_col_id = columns.len() as i64;
        t.foreign_keys = self.foreign_key_infos(db)?;
        t.constraints = self.check_infos(&columns)?;
        t.columns = columns;
        t.indices = indices;
        if let Some(p) = &self.partition {
            t.partition = Some(p.info(part_ids, &t)?);
        }
        Ok(t)
    }
}

impl TableDef {
    fn obj(&self, what: &'static str, name: &str, problem: &'static str) -> TidbError {
        TidbError::Object {
            what,
            name: name.to_owned(),
            table: self.name.clone(),
            problem,
        }
    }

    /// The foreign keys as TiDB stores them (`FKVersion1`, referenced database `db`).
    fn foreign_key_infos(&self, db: &str) -> Result<Vec<FkInfo>> {
        let ci = |v: &[String]| v.iter().map(|c| CIStr::new(c)).collect::<Vec<_>>();
        let mut out: Vec<FkInfo> = Vec::new();
        for (i, f) in self.foreign_keys.iter().enumerate() {
            if f.columns.is_empty() || f.columns.len() != f.ref_columns.len() {
                return Err(self.obj("foreign key", &f.name, "column counts differ"));
            }
            if out.iter().any(|o| o.fk_name.l == f.name.to_lowercase()) {
                return Err(self.obj("foreign key", &f.name, "duplicate"));
            }
            out.push(FkInfo {
                id: i as i64 + 1,
                fk_name: CIStr::new(&f.name),
                ref_schema: CIStr::new(db),
                ref_table: CIStr::new(&f.ref_table),
                ref_cols: ci(&f.ref_columns),
                cols: ci(&f.columns),
                on_delete: f.on_delete,
                on_update: f.on_update,
                state: schema_state::PUBLIC,
                version: 1,
            });
        }
        Ok(out)
    }

    /// The CHECK constraints as TiDB stores them; each names columns of the table.
    fn check_infos(&self, columns: &[ColumnInfo]) -> Result<Vec<ConstraintInfo>> {
        let mut out: Vec<ConstraintInfo> = Vec::new();
        for (i, c) in self.checks.iter().enumerate() {
            for col in &c.columns {
                if !columns.iter().any(|x| x.name.l == col.to_lowercase()) {
                    return Err(self.obj("check constraint", &c.name, "names an unknown column"));
                }
            }
            if out
                .iter()
                .any(|o| o.constraint_name.l == c.name.to_lowercase())
            {
                return Err(self.obj("check constraint", &c.name, "duplicate"));
            }
            out.push(ConstraintInfo {
                id: i as i64 + 1,
                constraint_name: CIStr::new(&c.name),
                tbl_name: CIStr::new(&self.name),
                constraint_cols: c.columns.iter().map(|x| CIStr::new(x)).collect(),
                enforced: c.enforced,
                in_column: false,
                expr_string: c.expr.clone(),
                state: schema_state::PUBLIC,
            });
        }
        Ok(out)
    }
}

/// An IndexInfo over `cols` (whole-column parts).
pub fn index_info(
    id: i64,
    name: &str,
    table: &str,
    cols: &[&ColumnInfo],
    unique: bool,
    primary: bool,
) -> IndexInfo {
    IndexInfo {
        id,
        idx_name: CIStr::new(name),
        tbl_name: CIStr::new(table),
        idx_cols: cols
            .iter()
            .map(|c| IndexColumn {
                name: c.name.clone(),
                offset: c.offset,
                length: -1,
            })
            .collect(),
        state: schema_state::PUBLIC,
        index_type: 1, // BTREE
        is_unique: unique,
        is_primary: primary,
        ..IndexInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0xff, 0x01]), "/wE=");
    }

    #[test]
    fn type_sql_texts() {
        assert_eq!(
            type_sql(&int(mysql::TYPE_LONGLONG, true)),
            "bigint(20) unsigned"
        );
        assert_eq!(type_sql(&decimal(10, 2)), "decimal(10,2)");
        assert_eq!(type_sql(&datetime(3)), "datetime(3)");
        assert_eq!(type_sql(&enumeration(&["a", "b'c"])), "enum('a','b''c')");
        assert_eq!(type_sql(&varbinary(8)), "varbinary(8)");
    }
}
