//! Plans of the DDLs that create or drop whole objects: databases and tables (CREATE, DROP,
//! TRUNCATE TABLE).

use serde_json::json;

use crate::sim::tidb::error::{Result, TidbError};
use crate::sim::tidb::types::TableDef;
use crate::sim::tidb::{db_info, Tidb, MYSQL_DB};
use crate::tidb::schema::{action, schema_state};

use super::plan::{Edit, Plan};

impl Tidb {
    /// Plans CREATE DATABASE.
    pub(super) fn plan_create_database(&self, name: &str, ids: &[i64]) -> Result<Plan> {
        let cat = &self.catalog;
        if cat.db(name).is_some() {
            return Err(TidbError::Database {
                name: name.to_owned(),
                problem: "exists",
            });
        }
        let info = db_info(ids[0], name);
        let mut p = Plan::new(action::CREATE_SCHEMA, ids[0], name);
        p.raw_args = json!({ "db_id": ids[0] });
        p.edits.push(Edit::PutDb(info.clone()));
        p.db_info = Some(info);
        Ok(p)
    }

    /// Plans DROP DATABASE.
    pub(super) fn plan_drop_database(&self, name: &str) -> Result<Plan> {
        let db = self.db_entry(name)?;
        if db.info.db_name.l == MYSQL_DB {
            return Err(TidbError::Database {
                name: name.to_owned(),
                problem: "is a system database",
            });
        }
        let mut info = db.info.clone();
        info.state = schema_state::NONE;
        let mut p = Plan::new(action::DROP_SCHEMA, db.info.id, name);
        p.raw_args = json!({ "fk_check": false });
        p.edits.push(Edit::DropDb(db.info.id));
        p.db_info = Some(info);
        Ok(p)
    }

    /// Plans CREATE TABLE.
    pub(super) fn plan_create_table(
        &self,
        db: &str,
        table: &TableDef,
        ids: &[i64],
    ) -> Result<Plan> {
        let cat = &self.catalog;
        let d = self.db_entry(db)?;
        if cat.table(db, &table.name).is_some() {
            return Err(TidbError::Table {
                db: db.to_owned(),
                table: table.name.clone(),
                problem: "exists",
            });
        }
        let info = table.build(db, ids[0], &ids[1..], 0)?;
        let mut p = Plan::new(action::CREATE_TABLE, d.info.id, db).table(&info);
        p.raw_args = json!({ "table_id": info.id, "fk_check": false });
        p.edits
            .push(Edit::PutTable(d.info.id, Box::new(info.clone())));
        p.table_info = Some(info);
        Ok(p)
    }

    /// Plans a batch create (`ActionCreateTables`).
    pub(super) fn plan_create_tables(
        &self,
        db: &str,
        tables: &[TableDef],
        ids: &[i64],
    ) -> Result<Plan> {
        let cat = &self.catalog;
        let d = self.db_entry(db)?;
        let mut p = Plan::new(action::CREATE_TABLES, d.info.id, db);
        let mut ids = ids;
        let mut names = std::collections::HashSet::new();
        for table in tables {
            if cat.table(db, &table.name).is_some() || !names.insert(table.name.to_lowercase()) {
                return Err(TidbError::Table {
                    db: db.to_owned(),
                    table: table.name.clone(),
                    problem: "exists",
                });
            }
            let n = 1 + table.partition_count();
            let info = table.build(db, ids[0], &ids[1..n], 0)?;
            ids = &ids[n..];
            p.edits
                .push(Edit::PutTable(d.info.id, Box::new(info.clone())));
            p.multiple_table_infos.push(info);
        }
        p.raw_args = json!({ "fk_check": false });
        Ok(p)
    }

    /// Plans DROP TABLE.
    pub(super) fn plan_drop_table(&self, db: &str, table: &str) -> Result<Plan> {
        let t = self.table_of(db, table)?;
        let mut info = t.info.clone();
        info.state = schema_state::NONE;
        let mut p = Plan::new(action::DROP_TABLE, t.db_id, db).table(&info);
        p.raw_args = json!({ "old_partition_ids": info.physical_ids() });
        p.edits.push(Edit::DropTable(t.db_id, info.id));
        p.table_info = Some(info);
        Ok(p)
    }

    /// Plans TRUNCATE TABLE: new ids for the table and its partitions.
    pub(super) fn plan_truncate_table(&self, db: &str, table: &str, ids: &[i64]) -> Result<Plan> {
        let t = self.table_of(db, table)?;
        let mut info = t.info.clone();
        info.id = ids[0];
        if let Some(part) = info.partition.as_mut() {
            for (d, &id) in part.definitions.iter_mut().zip(&ids[1..]) {
                d.id = id;
            }
        }
        let mut p = Plan::new(action::TRUNCATE_TABLE, t.db_id, db).table(&t.info);
        p.raw_args = json!({ "new_table_id": ids[0], "new_partition_ids": &ids[1..] });
        p.edits.push(Edit::DropTable(t.db_id, t.info.id));
        p.edits
            .push(Edit::PutTable(t.db_id, Box::new(info.clone())));
        p.table_info = Some(info);
        Ok(p)
    }
}
