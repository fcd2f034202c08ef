//! Plans of the column and index DDLs (ADD/DROP/MODIFY COLUMN, ADD/DROP INDEX): each one
//! new TableInfo for the table, plus the index entries an ADD INDEX backfills.

use serde_json::json;

use crate::sim::core::SimCore;
use crate::sim::tidb::catalog::TableMeta;
use crate::sim::tidb::dml::index_entry;
use crate::sim::tidb::error::Result;
use crate::sim::tidb::types::{self, ColumnDef, IndexDef};
use crate::sim::tidb::Tidb;
use crate::tidb::key::{decode_record_key, record_span};
use crate::tidb::schema::{action, mysql, TableInfo};

use super::checks::{lossless_change, refresh_key_flags};
use super::plan::{obj_err, Edit, Plan};

impl Tidb {
    /// Plans ADD COLUMN (appended last).
    pub(super) fn plan_add_column(
        &self,
        db: &str,
        table: &str,
        column: &ColumnDef,
    ) -> Result<Plan> {
        let t = self.table_of(db, table)?;
        let mut info = t.info.clone();
        if info
            .columns
            .iter()
            .any(|c| c.name.l == column.name.to_lowercase())
        {
            return Err(obj_err("column", &column.name, table, "duplicate"));
        }
        info.max_col_id += 1;
        let col = column.build(info.max_col_id, info.columns.len(), true);
        info.columns.push(col);
        Ok(self.alter(
            t,
            info,
            action::ADD_COLUMN,
            db,
            json!({ "column": column.name }),
        ))
    }

    /// Plans DROP COLUMN of a column no index, key or partitioning uses.
    pub(super) fn plan_drop_column(&self, db: &str, table: &str, column: &str) -> Result<Plan> {
        let t = self.table_of(db, table)?;
        let mut info = t.info.clone();
        let l = column.to_lowercase();
        let off = info
            .columns
            .iter()
            .position(|c| c.name.l == l)
            .ok_or_else(|| obj_err("column", column, table, "unknown"))?;
        let indexed = info
            .indices
            .iter()
            .any(|i| i.idx_cols.iter().any(|c| c.offset == off))
            || info.columns[off].field_type.is_pri_key()
            || info
                .partition
                .as_ref()
                .is_some_and(|p| p.expr.trim_matches('`').eq_ignore_ascii_case(column));
        if indexed || info.columns.len() == 1 {
            return Err(obj_err(
                "column",
                column,
                table,
                "is indexed, partitioned on, or the last column",
            ));
        }
        info.columns.remove(off);
        for c in &mut info.columns {
            if c.offset > off {
                c.offset -= 1;
            }
        }
        for ic in info.indices.iter_mut().flat_map(|i| i.idx_cols.iter_mut()) {
            if ic.offset > off {
                ic.offset -= 1;
            }
        }
        Ok(self.alter(
            t,
            info,
            action::DROP_COLUMN,
            db,
            json!({ "column": column }),
        ))
    }

    /// Plans MODIFY COLUMN, when the change needs no reorg.
    pub(super) fn plan_modify_column(
        &self,
        db: &str,
        table: &str,
        column: &ColumnDef,
    ) -> Result<Plan> {
        let t = self.table_of(db, table)?;
        let mut info = t.info.clone();
        let l = column.name.to_lowercase();
        let c = info
            .columns
            .iter_mut()
            .find(|c| c.name.l == l)
            .ok_or_else(|| obj_err("column", &column.name, table, "unknown"))?;
        let mut new = column.build(c.id, c.offset, false);
        if !lossless_change(&c.field_type, &new.field_type)
            || (!c.field_type.is_not_null() && !column.nullable)
        {
            return Err(obj_err(
                "column",
                &column.name,
                table,
                "change needs a reorg (not simulated)",
            ));
        }
        new.origin_default = c.origin_default.clone();
        new.origin_default_bit = c.origin_default_bit.clone();
        new.field_type.flag |= c.field_type.flag & mysql::PRI_KEY_FLAG;
        new.name = c.name.clone();
        *c = new;
        refresh_key_flags(&mut info);
        Ok(self.alter(
            t,
            info,
            action::MODIFY_COLUMN,
            db,
            json!({ "column": column.name }),
        ))
    }

    /// Plans ADD INDEX, with the index entries of the existing rows to backfill.
    pub(super) fn plan_add_index(
        &self,
        core: &mut SimCore,
        db: &str,
        table: &str,
        index: &IndexDef,
    ) -> Result<Plan> {
        let t = self.table_of(db, table)?;
        let mut info = t.info.clone();
        if info
            .indices
            .iter()
            .any(|i| i.idx_name.l == index.name.to_lowercase())
        {
            return Err(obj_err("index", &index.name, table, "duplicate"));
        }
        if index.expression.is_some() {
            return Err(obj_err(
                "index",
                &index.name,
                table,
                "an expression index is only made by CREATE TABLE in the simulator",
            ));
        }
        let mut cols = Vec::new();
        for name in &index.columns {
            let c = info
                .columns
                .iter()
                .find(|c| c.name.l == name.to_lowercase())
                .ok_or_else(|| obj_err("column", name, table, "unknown"))?;
            if c.field_type.tp == mysql::TYPE_JSON || c.field_type.flag & mysql::BLOB_FLAG != 0 {
                return Err(obj_err(
                    "index",
                    &index.name,
                    table,
                    "JSON/BLOB column needs a prefix",
                ));
            }
            cols.push(c);
        }
        let mut idx = types::index_info(
            info.max_idx_id + 1,
            &index.name,
            &info.name.o,
            &cols,
            index.unique,
            false,
        );
        idx.is_invisible = index.invisible;
        info.max_idx_id += 1;
        info.indices.push(idx);
        refresh_key_flags(&mut info);
        let new_meta = TableMeta::new(t.db_id, &t.db_name, info.clone());
        let backfill = self.backfill(core, &new_meta, info.max_idx_id)?;
        let mut p = self.alter(
            t,
            info,
            action::ADD_INDEX,
            db,
            json!({ "index_name": index.name, "unique": index.unique }),
        );
        p.reorg = true;
        p.backfill = backfill;
        Ok(p)
    }

    /// Plans DROP INDEX.
    pub(super) fn plan_drop_index(&self, db: &str, table: &str, index: &str) -> Result<Plan> {
        let t = self.table_of(db, table)?;
        let mut info = t.info.clone();
        let l = index.to_lowercase();
        let pos = info
            .indices
            .iter()
            .position(|i| i.idx_name.l == l && !i.is_primary)
            .ok_or_else(|| obj_err("index", index, table, "unknown"))?;
        info.indices.remove(pos);
        refresh_key_flags(&mut info);
        Ok(self.alter(
            t,
            info,
            action::DROP_INDEX,
            db,
            json!({ "index_name": index }),
        ))
    }

    /// A plan that replaces the table of `t` by `info` (one PutTable edit).
    pub(super) fn alter(
        &self,
        t: TableMeta,
        info: TableInfo,
        act: u8,
        db: &str,
        args: serde_json::Value,
    ) -> Plan {
        let mut p = Plan::new(act, t.db_id, db).table(&info);
        p.raw_args = args;
        p.edits
            .push(Edit::PutTable(t.db_id, Box::new(info.clone())));
        p.table_info = Some(info);
        p
    }

    /// Index entries of every existing row for the index `index_id` of `t`.
    pub(super) fn backfill(
        &self,
        core: &mut SimCore,
        t: &TableMeta,
        index_id: i64,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some(idx) = t.indexes.iter().find(|i| i.id == index_id) else {
            return Ok(Vec::new());
        };
        let ts = core.ts();
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut row = Vec::new();
        for pid in t.info.physical_ids() {
            let (start, end) = record_span(pid);
            for pair in core.mvcc.scan(&start, &end, 0, ts, false, &[])? {
                let r = pair.result?;
                let (_, handle) = decode_record_key(&pair.key)?;
                t.codec.decode_into(&r.value, Some(&handle), &mut row)?;
                out.push(index_entry(t, idx, pid, &handle, &row)?);
            }
        }
        out.sort();
        if idx.unique && out.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(obj_err(
                "index",
                "",
                t.name(),
                "duplicate entry for the unique index",
            ));
        }
        Ok(out)
    }
}
