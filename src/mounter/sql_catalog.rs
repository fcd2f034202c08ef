//! The SQL catalog ([`CatalogSnapshot`]) of one catalog version: TiDB's `TableInfo` of each
//! included table in MySQL's terms (column types and defaults as `SHOW COLUMNS` prints them,
//! indexes with the primary key TiDB keeps implicit for integer handles, partitions), and the
//! row layout snapshot reads decode with.

use std::sync::Arc;

use tibinlog_protocol::value::Value;

use crate::mounter::coltype::visible_columns;
use crate::mounter::{Catalog, MountedTable};
use crate::sql::catalog::{
    CatalogSnapshot, CheckMeta, ColumnMeta, ForeignKeyMeta, HandleKind, IndexMeta, PartitionMeta,
    RowDecoder, StoredIndex, TableKind, TableMeta,
};
use crate::sql::charset;
use crate::sql::types::SqlType;
use crate::sql::views::view_columns;
use crate::tidb::key::record_key_handle;
use crate::tidb::schema::{mysql, schema_state, ColumnInfo as TidbColumn, FkInfo, TableInfo};
use crate::tidb::show_create::create_table;
use crate::tidb::show_create::create_view;
use mysql_common::constants::ColumnFlags;

use crate::tidb::show_create::{column_key, column_type, default_text, is_string_type};

/// The catalog snapshot of `catalog`: its base tables, then its views, each typed against the
/// tables and the views created before it (a view reads only objects older than itself).
pub fn snapshot(catalog: &Catalog) -> CatalogSnapshot {
    let (mut views, tables): (Vec<_>, Vec<_>) = catalog.iter().partition(|t| t.info.view.is_some());
    views.sort_by_key(|v| v.info.id);
    let tables: Vec<Arc<TableMeta>> = tables
        .into_iter()
        .map(|t| Arc::new(table_meta(t)))
        .collect();
    let mut known = CatalogSnapshot::from_tables(tables, Vec::new());
    for v in views {
        // Lookups find tables by name; the order is restored once, at the end.
        let meta = Arc::new(view_meta(&known, v));
        known.tables.push(meta);
    }
    CatalogSnapshot::from_tables(known.tables, known.databases)
}

/// The SQL view of a TiDB view. Its columns are typed by planning its SELECT against `known`
/// (TiDB keeps only their names); a SELECT the engine cannot plan leaves them as
/// `longtext`, the widest type a view column can take.
fn view_meta(known: &CatalogSnapshot, t: &MountedTable) -> TableMeta {
    let info = &t.info;
    let view = info.view.clone().unwrap_or_default();
    let names: Vec<String> = if view.view_cols.is_empty() {
        visible_columns(info)
            .iter()
            .map(|c| c.name.o.clone())
            .collect()
    } else {
        view.view_cols.iter().map(|c| c.o.clone()).collect()
    };
    let columns = match view_columns(known, t.schema(), &view.view_select, &names) {
        Ok(cols) if cols.len() == names.len() => cols,
        _ => {
            let text = SqlType::longtext(charset::UTF8MB4_BIN);
            let cols = names.iter().map(|n| (n.clone(), text.clone()));
            cols.map(|(n, ty)| fallback_column(&n, ty)).collect()
        }
    };
    let definer = view
        .view_definer
        .as_ref()
        .map(|d| format!("{}@{}", d.username, d.hostname))
        .unwrap_or_default();
    TableMeta {
        db: t.schema().to_owned(),
        name: t.name().to_owned(),
        id: info.id,
        kind: TableKind::View {
            definition: view.view_select.clone(),
            // TiDB records CASCADED for a view without WITH CHECK OPTION and never checks it;
            // MySQL shows such a view as NONE.
            check_option: "NONE".into(),
            updatable: false,
            definer,
            security: view.security().to_owned(),
        },
        columns,
        indexes: Vec::new(),
        foreign_keys: Vec::new(),
        checks: Vec::new(),
        partitions: Vec::new(),
        handle: HandleKind::RowId,
        // TiDB answers a view's character_set_client and collation_connection with the
        // character set and collation its TableInfo records.
        charset: non_empty(&info.charset, "utf8mb4"),
        collation: non_empty(&info.collate, "utf8mb4_bin"),
        comment: String::new(),
        auto_increment: None,
        create_time: None,
        create_options: String::new(),
        create_sql: create_view(info).unwrap_or_default(),
        rows: None,
    }
}

fn non_empty(s: &str, default: &str) -> String {
    if s.is_empty() { default } else { s }.to_owned()
}

fn fallback_column(name: &str, ty: SqlType) -> ColumnMeta {
    ColumnMeta {
        name: name.to_owned(),
        column_type: "longtext".into(),
        data_type: "longtext".into(),
        default: None,
        extra: String::new(),
        comment: String::new(),
        key: String::new(),
        charset: Some("utf8mb4".into()),
        collation: Some("utf8mb4_bin".into()),
        generated: None,
        char_max_len: Some(4_294_967_295),
        char_octet_len: Some(4_294_967_295),
        numeric_precision: None,
        numeric_scale: None,
        datetime_precision: None,
        ty,
    }
}

/// `DATA_TYPE`: the type name without length or attributes.
fn data_type(column_type: &str) -> String {
    column_type
        .split(['(', ' '])
        .next()
        .unwrap_or(column_type)
        .to_owned()
}

fn column_meta(c: &TidbColumn, ty: SqlType, table_collate: &str) -> ColumnMeta {
    let ft = &c.field_type;
    let ct = column_type(ft);
    let string = is_string_type(ft);
    let collation = string.then(|| {
        if ft.collate.is_empty() {
            table_collate.to_owned()
        } else {
            ft.collate.clone()
        }
    });
    let charset_name = collation.as_ref().map(|coll| {
        charset::collation_by_name(coll)
            .map(|c| c.charset.to_owned())
            .unwrap_or_else(|| ft.charset.clone())
    });
    let maxlen = u64::from(crate::mounter::coltype::charset_max_bytes(&ft.charset));
    let flen = (ft.flen >= 0).then_some(ft.flen as u64);
    let (char_max_len, char_octet_len) = match ft.tp {
        mysql::TYPE_VARCHAR | mysql::TYPE_VAR_STRING | mysql::TYPE_STRING => {
            (flen, flen.map(|f| f * maxlen))
        }
        // MySQL counts TEXT lengths in bytes in both columns, whatever the character set.
        mysql::TYPE_TINY_BLOB => (Some(255), Some(255)),
        mysql::TYPE_BLOB => (Some(65_535), Some(65_535)),
        mysql::TYPE_MEDIUM_BLOB => (Some(16_777_215), Some(16_777_215)),
        mysql::TYPE_LONG_BLOB | mysql::TYPE_JSON => (Some(4_294_967_295), Some(4_294_967_295)),
        mysql::TYPE_ENUM | mysql::TYPE_SET => {
            let n = if ft.tp == mysql::TYPE_SET {
                ft.elems
                    .iter()
                    .map(|e| e.chars().count() as u64 + 1)
                    .sum::<u64>()
                    .saturating_sub(1)
            } else {
                ft.elems
                    .iter()
                    .map(|e| e.chars().count() as u64)
                    .max()
                    .unwrap_or(0)
            };
            (Some(n), Some(n * maxlen))
        }
        _ => (None, None),
    };
    let (numeric_precision, numeric_scale) = match ft.tp {
        mysql::TYPE_TINY => (Some(3), Some(0)),
        mysql::TYPE_SHORT => (Some(5), Some(0)),
        mysql::TYPE_INT24 => (Some(7), Some(0)),
        mysql::TYPE_LONG => (Some(10), Some(0)),
        mysql::TYPE_LONGLONG => (Some(if ft.is_unsigned() { 20 } else { 19 }), Some(0)),
        mysql::TYPE_FLOAT => (
            Some(12),
            (ft.decimal >= 0 && ft.decimal < 31).then_some(ft.decimal as u64),
        ),
        mysql::TYPE_DOUBLE => (
            Some(22),
            (ft.decimal >= 0 && ft.decimal < 31).then_some(ft.decimal as u64),
        ),
        mysql::TYPE_NEWDECIMAL | mysql::TYPE_DECIMAL => {
            (Some(flen.unwrap_or(10)), Some(ft.decimal.max(0) as u64))
        }
        mysql::TYPE_BIT => (flen.or(Some(1)), None),
        _ => (None, None),
    };
    let datetime_precision = match ft.tp {
        mysql::TYPE_DATETIME | mysql::TYPE_TIMESTAMP | mysql::TYPE_DURATION => {
            Some(u64::from(ft.fsp()))
        }
        _ => None,
    };
    let has = |f: u32| ft.flag & f != 0;
    let mut extra = Vec::new();
    if has(mysql::AUTO_INCREMENT_FLAG) {
        extra.push("auto_increment".to_owned());
    }
    if c.default_is_expr && matches!(ft.tp, mysql::TYPE_DATETIME | mysql::TYPE_TIMESTAMP) {
        extra.push("DEFAULT_GENERATED".to_owned());
    }
    if has(mysql::ON_UPDATE_NOW_FLAG) {
        extra.push(format!(
            "on update CURRENT_TIMESTAMP{}",
            if ft.fsp() > 0 {
                format!("({})", ft.fsp())
            } else {
                String::new()
            }
        ));
    }
    let generated = (!c.generated_expr_string.is_empty())
        .then(|| (c.generated_expr_string.clone(), c.generated_stored));
    if let Some((_, stored)) = &generated {
        extra.push(if *stored {
            "STORED GENERATED".to_owned()
        } else {
            "VIRTUAL GENERATED".to_owned()
        });
    }
    let key = column_key(ft).to_owned();
    let mut ty = ty;
    let mut flags = ColumnFlags::empty();
    match key.as_str() {
        "PRI" => flags |= ColumnFlags::PRI_KEY_FLAG,
        "UNI" => flags |= ColumnFlags::UNIQUE_KEY_FLAG,
        "MUL" => flags |= ColumnFlags::MULTIPLE_KEY_FLAG,
        _ => {}
    }
    if has(mysql::AUTO_INCREMENT_FLAG) {
        flags |= ColumnFlags::AUTO_INCREMENT_FLAG;
    }
    if has(mysql::ZEROFILL_FLAG) {
        flags |= ColumnFlags::ZEROFILL_FLAG;
    }
    ty.key_flags = flags;
    ColumnMeta {
        name: c.name.o.clone(),
        ty,
        data_type: data_type(&ct),
        column_type: ct,
        default: default_text(c),
        extra: extra.join(" "),
        comment: c.comment.clone(),
        key,
        charset: charset_name,
        collation,
        generated,
        char_max_len,
        char_octet_len,
        numeric_precision,
        numeric_scale,
        datetime_precision,
    }
}

/// The SQL view of one table version.
pub fn table_meta(t: &Arc<MountedTable>) -> TableMeta {
    let info = &t.info;
    let visible = visible_columns(info);
    let collate = if info.collate.is_empty() {
        "utf8mb4_bin".to_owned()
    } else {
        info.collate.clone()
    };
    let mut columns: Vec<ColumnMeta> = visible
        .iter()
        .zip(&t.def.columns)
        .map(|(c, def)| column_meta(c, SqlType::from_column(def), &collate))
        .collect();
    let mut indexes = Vec::new();
    let handle = match info.pk_handle_column() {
        Some(pk) => {
            indexes.push(IndexMeta {
                name: "PRIMARY".into(),
                stored: None,
                primary: true,
                unique: true,
                columns: vec![(pk.name.o.clone(), None)],
                expressions: Vec::new(),
                comment: String::new(),
                visible: true,
            });
            let column = visible.iter().position(|c| c.id == pk.id).unwrap_or(0);
            HandleKind::IntPk {
                column,
                unsigned: pk.field_type.is_unsigned(),
            }
        }
        None if info.is_common_handle => HandleKind::Common,
        None => HandleKind::RowId,
    };
    let mut ordered: Vec<&crate::tidb::schema::IndexInfo> = info
        .indices
        .iter()
        .filter(|i| i.state == schema_state::PUBLIC)
        .collect();
    // PRIMARY first, then unique keys, then the others, each in definition order (MySQL's).
    ordered.sort_by_key(|i| (!i.is_primary, !i.is_unique, i.id));
    for ix in ordered {
        indexes.push(IndexMeta {
            name: if ix.is_primary {
                "PRIMARY".into()
            } else {
                ix.idx_name.o.clone()
            },
            stored: (!ix.mv_index).then_some(StoredIndex {
                id: ix.id,
                global: ix.is_global,
            }),
            primary: ix.is_primary,
            unique: ix.is_unique || ix.is_primary,
            columns: ix
                .idx_cols
                .iter()
                .map(|c| (c.name.o.clone(), (c.length > 0).then_some(c.length as u64)))
                .collect(),
            expressions: key_expressions(info, ix),
            comment: ix.comment.clone(),
            visible: !ix.is_invisible,
        });
    }
    let partitions = match &info.partition {
        Some(p) if !p.definitions.is_empty() => {
            let method = match p.partition_type {
                1 if !p.columns.is_empty() => "RANGE COLUMNS",
                1 => "RANGE",
                2 => "HASH",
                3 if !p.columns.is_empty() => "LIST COLUMNS",
                3 => "LIST",
                4 => "KEY",
                _ => "",
            };
            let expression = if p.columns.is_empty() {
                p.expr.clone()
            } else {
                p.columns
                    .iter()
                    .map(|c| format!("`{}`", c.o))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            p.definitions
                .iter()
                .map(|d| PartitionMeta {
                    name: d.name.o.clone(),
                    id: d.id,
                    method: method.to_owned(),
                    expression: expression.clone(),
                    description: if !d.less_than.is_empty() {
                        Some(d.less_than.join(","))
                    } else if !d.in_values.is_empty() {
                        Some(list_description(&d.in_values))
                    } else {
                        None
                    },
                    comment: d.comment.clone(),
                })
                .collect()
        }
        _ => Vec::new(),
    };
    implicit_primary_key(&mut columns, &indexes);
    let charset_name = if info.charset.is_empty() {
        "utf8mb4".to_owned()
    } else {
        info.charset.clone()
    };
    TableMeta {
        db: t.schema().to_owned(),
        name: t.name().to_owned(),
        id: info.id,
        kind: TableKind::BaseTable,
        columns,
        indexes,
        foreign_keys: foreign_keys(t.schema(), info),
        checks: checks(info),
        create_time: create_time(info),
        create_options: if partitions.is_empty() {
            String::new()
        } else {
            "partitioned".into()
        },
        partitions,
        handle,
        charset: charset_name,
        collation: collate,
        comment: info.comment.clone(),
        auto_increment: None,
        create_sql: create_table_sql(t),
        rows: Some(Arc::new(MountedRows(t.clone()))),
    }
}

/// A table without a primary key whose first UNIQUE key has only NOT NULL whole columns: MySQL
/// takes that key as the primary key and shows its columns as `PRI` (`COLUMN_KEY`).
fn implicit_primary_key(columns: &mut [ColumnMeta], indexes: &[IndexMeta]) {
    if indexes.iter().any(|i| i.primary) {
        return;
    }
    let not_null = |name: &str| {
        columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(name) && !c.ty.nullable)
    };
    let Some(key) = indexes.iter().find(|i| {
        i.unique
            && i.columns
                .iter()
                .all(|(c, prefix)| prefix.is_none() && not_null(c))
    }) else {
        return;
    };
    for c in columns.iter_mut() {
        if key
            .columns
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(&c.name))
        {
            c.key = "PRI".into();
        }
    }
}

/// The table's foreign keys in name order; the referenced database defaults to the table's.
fn foreign_keys(schema: &str, info: &TableInfo) -> Vec<ForeignKeyMeta> {
    let rule = |code| FkInfo::refer_option(code).unwrap_or("NO ACTION").to_owned();
    let mut out: Vec<ForeignKeyMeta> = info
        .foreign_keys
        .iter()
        .filter(|f| f.state == schema_state::PUBLIC)
        .map(|f| ForeignKeyMeta {
            name: f.fk_name.o.clone(),
            columns: f.cols.iter().map(|c| c.o.clone()).collect(),
            ref_db: if f.ref_schema.o.is_empty() {
                schema.to_owned()
            } else {
                f.ref_schema.o.clone()
            },
            ref_table: f.ref_table.o.clone(),
            ref_columns: f.ref_cols.iter().map(|c| c.o.clone()).collect(),
            on_update: rule(f.on_update),
            on_delete: rule(f.on_delete),
        })
        .collect();
    out.sort_by_key(|f| f.name.to_lowercase());
    out
}

/// The table's CHECK constraints in name order, their clauses as MySQL 8.0 shows them
/// (parenthesized).
fn checks(info: &TableInfo) -> Vec<CheckMeta> {
    let mut out: Vec<CheckMeta> = info
        .constraints
        .iter()
        .filter(|c| c.state == schema_state::PUBLIC)
        .map(|c| CheckMeta {
            name: c.constraint_name.o.clone(),
            clause: format!("({})", c.expr_string),
            enforced: c.enforced,
        })
        .collect();
    out.sort_by_key(|c| c.name.to_lowercase());
    out
}

/// `CREATE_TIME` in Unix seconds: TiDB shows a table's last schema change (`update_timestamp`,
/// a TSO whose physical part is milliseconds) there; `None` when it has none.
fn create_time(info: &TableInfo) -> Option<u64> {
    (info.update_timestamp > 0).then_some((info.update_timestamp >> 18) / 1000)
}

/// The expression of each key part of `ix` keyed on a hidden generated column (TiDB's form of
/// an expression index); empty when the index has none.
fn key_expressions(info: &TableInfo, ix: &crate::tidb::schema::IndexInfo) -> Vec<Option<String>> {
    let exprs: Vec<Option<String>> = ix
        .idx_cols
        .iter()
        .map(|c| {
            info.columns
                .iter()
                .find(|x| x.hidden && x.name.l == c.name.l && !x.generated_expr_string.is_empty())
                .map(|x| crate::tidb::show_create::key_expression(&x.generated_expr_string))
        })
        .collect();
    if exprs.iter().all(Option::is_none) {
        Vec::new()
    } else {
        exprs
    }
}

/// `PARTITION_DESCRIPTION` of a LIST partition as MySQL 8.0 shows it: the values joined by
/// commas, each tuple of a several-column `LIST COLUMNS` in parentheses.
fn list_description(values: &[Vec<String>]) -> String {
    values
        .iter()
        .map(|v| match v.as_slice() {
            [one] => one.clone(),
            many => format!("({})", many.join(",")),
        })
        .collect::<Vec<_>>()
        .join(",")
}
/// `SHOW CREATE TABLE` text for a table version.
pub fn create_table_sql(t: &MountedTable) -> String {
    create_table(t.schema(), &t.info)
}

/// Row decoding with a mounted table version.
#[derive(Debug)]
pub struct MountedRows(pub Arc<MountedTable>);

impl RowDecoder for MountedRows {
    fn physical_ids(&self) -> Vec<i64> {
        self.0.info.physical_ids()
    }

    fn decode(
        &self,
        key: &[u8],
        value: &[u8],
        wanted: Option<&[bool]>,
        out: &mut Vec<Value>,
    ) -> std::result::Result<(), String> {
        // The handle's datums are decoded only if the row value lacks a key column.
        let (_, handle) = record_key_handle(key).map_err(|e| e.to_string())?;
        self.0
            .decode_row_columns(value, Some(&handle), wanted, out)
            .map_err(|e| e.to_string())
    }

    fn refused(&self) -> Option<String> {
        let t = &self.0;
        t.uncomputable.as_ref().map(|u| {
            format!(
                "virtual generated column {}.{}.{} cannot be computed ({} in `{}`)",
                t.def.schema, t.def.table, u.column, u.reason, u.expression
            )
        })
    }
}
