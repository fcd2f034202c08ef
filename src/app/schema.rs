//! Catalog answers ([`SchemaProvider`]) at the binlog's durable end.
//!
//! Every DDL the changefeed yields carries the catalog after it (the included base tables at
//! its commit ts). The binlog writer records that catalog in [`SchemaHistory`] at the position
//! right after the DDL's event; answers use the newest version at or before the durable end, so
//! they never show a table change whose event a client cannot read yet. Statements are rendered
//! from TiDB's `TableInfo` in MySQL 8.0's style (no integer display widths).

use std::collections::{BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use crate::binlog_store::{BinlogFiles, BinlogPos, TxnOrder};
use crate::mounter::coltype::visible_columns;
use crate::mounter::{Catalog, MountedTable};
use crate::server::{BinlogPosition, ColumnInfo, SchemaProvider};
use crate::sql::catalog::CatalogSnapshot;
use crate::tidb::partition_sql::partition_clause;
use crate::tidb::schema::{mysql, schema_state, ColumnInfo as TidbColumn, FieldType};

/// One catalog version: valid from binlog position `from` on.
#[derive(Debug, Clone)]
struct Version {
    from: BinlogPos,
    /// `(commit_ts, start_ts, part)` of the DDL that made it (`None` for the starting catalog).
    ddl: Option<TxnOrder>,
    catalog: Catalog,
}

/// Catalog versions by the binlog position they hold from, oldest first. Versions that the
/// snapshot point (where reads stand) has passed are dropped, except the newest of them.
#[derive(Debug)]
pub struct SchemaHistory {
    versions: Mutex<VecDeque<Version>>,
}

impl SchemaHistory {
    /// A history whose only version, `start`, holds from the beginning of the binlog.
    pub fn new(start: Catalog) -> Self {
        SchemaHistory {
            versions: Mutex::new(VecDeque::from([Version {
                from: BinlogPos::default(),
                ddl: None,
                catalog: start,
            }])),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Version>> {
        self.versions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The catalog at binlog end `end`: the newest version starting at or before it.
    pub fn at(&self, end: BinlogPos) -> Catalog {
        let v = self.lock();
        let i = v.partition_point(|x| x.from <= end).saturating_sub(1);
        v[i].catalog.clone()
    }

    /// The DDL `(commit_ts, start_ts, part)` whose event ends at `from` changes the catalog to
    /// `catalog`; `oldest` is the oldest position a reader can still ask for (versions before
    /// the one that holds there are dropped).
    pub fn push(&self, from: BinlogPos, ddl: TxnOrder, catalog: Catalog, oldest: BinlogPos) {
        let mut v = self.lock();
        let visible = v.partition_point(|x| x.from <= oldest);
        v.drain(..visible.saturating_sub(1));
        v.push_back(Version {
            from,
            ddl: Some(ddl),
            catalog,
        });
    }

    /// The catalog capture starts from, when it starts after the history was made (an HA
    /// standby that takes over): it holds from the beginning unless a DDL already moved it.
    pub fn start_from(&self, catalog: Catalog) {
        let mut v = self.lock();
        if v.len() == 1 && v[0].ddl.is_none() {
            v[0].catalog = catalog;
        }
    }

    /// A DDL already in the binlog was read again (the capture restarted behind the binlog's
    /// end): if this history does not know it, its catalog holds from now on.
    pub fn replayed(&self, ddl: TxnOrder, catalog: Catalog) {
        let mut v = self.lock();
        if v.iter().any(|x| x.ddl == Some(ddl)) {
            return;
        }
        // Everything it does not know is durable already (written before this process).
        v.clear();
        v.push_back(Version {
            from: BinlogPos::default(),
            ddl: Some(ddl),
            catalog,
        });
    }
}

/// [`SchemaProvider`] at the durable end of the binlog.
#[derive(Debug, Clone)]
pub struct SchemaView {
    history: Arc<SchemaHistory>,
    files: BinlogFiles,
    /// The SQL catalog of the last version asked for (versions change only at DDL).
    cache: Arc<Mutex<Option<CachedCatalog>>>,
}

/// A schema version and the SQL catalog built from it.
type CachedCatalog = (Catalog, Arc<CatalogSnapshot>);

impl SchemaView {
    pub fn new(history: Arc<SchemaHistory>, files: BinlogFiles) -> Self {
        SchemaView {
            history,
            files,
            cache: Arc::default(),
        }
    }

    fn fixed(&self) -> FixedCatalog {
        FixedCatalog::new(self.history.at(self.files.end_pos()))
    }

    fn snapshot_of(&self, catalog: Catalog) -> Arc<CatalogSnapshot> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((c, snap)) = cache.as_ref() {
            if Arc::ptr_eq(c, &catalog) {
                return snap.clone();
            }
        }
        let snap = Arc::new(super::catalog::snapshot(&catalog));
        *cache = Some((catalog, snap.clone()));
        snap
    }
}

impl SchemaProvider for SchemaView {
    fn at(&self, end: &BinlogPosition) -> Arc<dyn SchemaProvider> {
        let pos = self
            .files
            .parse_position(&end.file, end.pos)
            .unwrap_or_else(|| self.files.end_pos());
        let catalog = self.history.at(pos);
        let snap = self.snapshot_of(catalog.clone());
        Arc::new(FixedCatalog {
            catalog,
            snapshot: Arc::new(OnceLock::from(snap)),
        })
    }
    fn catalog(&self) -> Arc<CatalogSnapshot> {
        self.snapshot_of(self.history.at(self.files.end_pos()))
    }
    fn databases(&self) -> Vec<String> {
        self.fixed().databases()
    }
    fn tables(&self, db: &str) -> Option<Vec<String>> {
        self.fixed().tables(db)
    }
    fn create_table(&self, db: &str, table: &str) -> Option<String> {
        self.fixed().create_table(db, table)
    }
    fn columns(&self, db: &str, table: &str) -> Option<Vec<ColumnInfo>> {
        self.fixed().columns(db, table)
    }
}

/// [`SchemaProvider`] over one catalog version.
#[derive(Debug, Clone)]
pub struct FixedCatalog {
    catalog: Catalog,
    snapshot: Arc<OnceLock<Arc<CatalogSnapshot>>>,
}

impl FixedCatalog {
    pub fn new(catalog: Catalog) -> Self {
        FixedCatalog {
            catalog,
            snapshot: Arc::default(),
        }
    }

    fn table(&self, db: &str, table: &str) -> Option<Arc<MountedTable>> {
        self.catalog
            .iter()
            .find(|t| t.schema().eq_ignore_ascii_case(db) && t.name().eq_ignore_ascii_case(table))
            .cloned()
    }
}

impl SchemaProvider for FixedCatalog {
    fn at(&self, _end: &BinlogPosition) -> Arc<dyn SchemaProvider> {
        Arc::new(self.clone())
    }

    fn catalog(&self) -> Arc<CatalogSnapshot> {
        self.snapshot
            .get_or_init(|| Arc::new(super::catalog::snapshot(&self.catalog)))
            .clone()
    }

    fn databases(&self) -> Vec<String> {
        let set: BTreeSet<String> = self.catalog.iter().map(|t| t.schema().to_owned()).collect();
        set.into_iter().collect()
    }

    fn tables(&self, db: &str) -> Option<Vec<String>> {
        let mut names: Vec<String> = self
            .catalog
            .iter()
            .filter(|t| t.schema().eq_ignore_ascii_case(db))
            .map(|t| t.name().to_owned())
            .collect();
        if names.is_empty() {
            return None;
        }
        names.sort();
        Some(names)
    }

    fn create_table(&self, db: &str, table: &str) -> Option<String> {
        self.table(db, table).map(|t| create_table_sql(&t))
    }

    fn columns(&self, db: &str, table: &str) -> Option<Vec<ColumnInfo>> {
        let t = self.table(db, table)?;
        Some(
            visible_columns(&t.info)
                .into_iter()
                .map(|c| column_info(c, &t.info.collate))
                .collect(),
        )
    }
}

fn has(ft: &FieldType, flag: u32) -> bool {
    ft.flag & flag != 0
}

fn is_binary_charset(ft: &FieldType) -> bool {
    ft.charset.eq_ignore_ascii_case("binary")
}

fn quote_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

fn quote_str(s: &str) -> String {
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

pub(crate) fn is_string_type(ft: &FieldType) -> bool {
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
pub(crate) fn default_text(c: &TidbColumn) -> Option<String> {
    match &c.default {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// `COLUMN_KEY` of a column: `PRI`, `UNI`, `MUL` or empty.
pub(crate) fn column_key(ft: &FieldType) -> &'static str {
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

fn column_info(c: &TidbColumn, table_collate: &str) -> ColumnInfo {
    let ft = &c.field_type;
    let key = column_key(ft);
    let collation = is_string_type(ft).then(|| {
        if ft.collate.is_empty() {
            table_collate.to_owned()
        } else {
            ft.collate.clone()
        }
    });
    ColumnInfo {
        field: c.name.o.clone(),
        column_type: column_type(ft),
        collation,
        nullable: !has(ft, mysql::NOT_NULL_FLAG),
        key: key.to_owned(),
        default: default_text(c),
        extra: if has(ft, mysql::AUTO_INCREMENT_FLAG) {
            "auto_increment".to_owned()
        } else {
            String::new()
        },
        comment: c.comment.clone(),
    }
}

/// `SHOW CREATE TABLE` text for a table version.
pub fn create_table_sql(t: &MountedTable) -> String {
    let info = &t.info;
    let cols = visible_columns(info);
    let mut lines: Vec<String> = Vec::new();
    for c in &cols {
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
            if !c.comment.is_empty() {
                let _ = write!(l, " COMMENT {}", quote_str(&c.comment));
            }
            lines.push(l);
            continue;
        }
        if not_null {
            l.push_str(" NOT NULL");
        }
        if has(ft, mysql::AUTO_INCREMENT_FLAG) {
            l.push_str(" AUTO_INCREMENT");
        } else if let Some(d) = default_text(c) {
            let numeric_default = c.default.is_number();
            if numeric_default {
                let _ = write!(l, " DEFAULT {d}");
            } else {
                let _ = write!(l, " DEFAULT {}", quote_str(&d));
            }
        } else if !not_null {
            l.push_str(" DEFAULT NULL");
        }
        if !c.comment.is_empty() {
            let _ = write!(l, " COMMENT {}", quote_str(&c.comment));
        }
        lines.push(l);
    }
    if let Some(pk) = info
        .columns
        .iter()
        .find(|c| info.pk_is_handle && has(&c.field_type, mysql::PRI_KEY_FLAG))
    {
        lines.push(format!("  PRIMARY KEY ({})", quote_ident(&pk.name.o)));
    }
    for idx in info
        .indices
        .iter()
        .filter(|i| i.state == schema_state::PUBLIC)
    {
        let cols = idx
            .idx_cols
            .iter()
            .map(|c| {
                if c.length > 0 {
                    format!("{}({})", quote_ident(&c.name.o), c.length)
                } else {
                    quote_ident(&c.name.o)
                }
            })
            .collect::<Vec<_>>()
            .join(",");
        let head = if idx.is_primary {
            "PRIMARY KEY".to_owned()
        } else if idx.is_unique {
            format!("UNIQUE KEY {}", quote_ident(&idx.idx_name.o))
        } else {
            format!("KEY {}", quote_ident(&idx.idx_name.o))
        };
        lines.push(format!("  {head} ({cols})"));
    }
    let mut sql = format!(
        "CREATE TABLE {} (\n{}\n) ENGINE=InnoDB",
        quote_ident(t.name()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Ts;

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

    #[test]
    fn history_answers_the_version_of_each_binlog_end() {
        let cat = || -> Catalog { Arc::new(Vec::new()) };
        let (c0, c1, c2, c3) = (cat(), cat(), cat(), cat());
        let pos = |f, o| BinlogPos::new(f, o);
        let key = |n: u64| (Ts(n), Ts(n - 1), 0);
        let h = SchemaHistory::new(c0.clone());
        assert!(Arc::ptr_eq(&h.at(pos(1, 4)), &c0));
        // A DDL ending at (1, 500), not yet durable (durable end (1, 300)).
        h.push(pos(1, 500), key(10), c1.clone(), pos(1, 300));
        assert!(Arc::ptr_eq(&h.at(pos(1, 300)), &c0));
        assert!(Arc::ptr_eq(&h.at(pos(1, 499)), &c0));
        assert!(Arc::ptr_eq(&h.at(pos(1, 500)), &c1));
        assert!(Arc::ptr_eq(&h.at(pos(2, 4)), &c1));
        // The next one in file 2; the durable end passed the first: c0 is dropped, c1 kept.
        h.push(pos(2, 900), key(20), c2.clone(), pos(2, 120));
        assert_eq!(h.lock().len(), 2);
        assert!(Arc::ptr_eq(&h.at(pos(2, 120)), &c1));
        assert!(Arc::ptr_eq(&h.at(pos(2, 900)), &c2));
        // Read again after a capture restart: known, nothing changes.
        h.replayed(key(10), c3.clone());
        assert!(Arc::ptr_eq(&h.at(pos(2, 120)), &c1));
        // Unknown (written before this process started): holds at once.
        h.replayed(key(5), c3.clone());
        assert!(Arc::ptr_eq(&h.at(pos(1, 4)), &c3));
        assert!(Arc::ptr_eq(&h.at(pos(9, 4)), &c3));
    }
}
