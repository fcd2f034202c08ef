//! Plans of RENAME TABLE: one table (`ActionRenameTable`) or several in one job
//! (`ActionRenameTables`); a rename across databases also moves the row id allocator.

use serde_json::json;

use crate::sim::tidb::error::{Result, TidbError};
use crate::sim::tidb::Tidb;
use crate::tidb::schema::{action, CIStr, TableInfo};

use super::plan::{Edit, Plan};
use super::statement::TableRename;

impl Tidb {
    /// Plans RENAME TABLE of one table.
    pub(super) fn plan_rename_table(
        &self,
        db: &str,
        table: &str,
        new_db: &str,
        new_table: &str,
    ) -> Result<Plan> {
        let cat = &self.catalog;
        let t = self.table_of(db, table)?;
        let nd = self.db_entry(new_db)?;
        if cat.table(new_db, new_table).is_some() {
            return Err(TidbError::Table {
                db: new_db.to_owned(),
                table: new_table.to_owned(),
                problem: "exists",
            });
        }
        let mut info = t.info.clone();
        info.name = CIStr::new(new_table);
        for idx in &mut info.indices {
            idx.tbl_name = CIStr::new(new_table);
        }
        let mut p = Plan::new(action::RENAME_TABLE, nd.info.id, new_db).table(&info);
        p.old_schema_id = t.db_id;
        p.raw_args = json!({ "old_schema_id": t.db_id, "new_table_name": CIStr::new(new_table) });
        if nd.info.id != t.db_id {
            p.edits.push(Edit::DropTable(t.db_id, info.id));
            p.edits.push(Edit::MoveRowId {
                table: info.id,
                from: t.db_id,
                to: nd.info.id,
            });
        }
        p.edits
            .push(Edit::PutTable(nd.info.id, Box::new(info.clone())));
        p.table_info = Some(info);
        Ok(p)
    }

    /// Plans RENAME TABLE of several tables, applied in order.
    pub(super) fn plan_rename_tables(&self, renames: &[TableRename]) -> Result<Plan> {
        let cat = &self.catalog;
        let first = renames.first().ok_or(TidbError::Table {
            db: String::new(),
            table: String::new(),
            problem: "RENAME TABLE without tables",
        })?;
        let first_db = self.db_entry(&first.new_db)?;
        let mut p = Plan::new(action::RENAME_TABLES, first_db.info.id, &first.new_db);
        // Tables as the renames so far left them: (db, lower-case name) → (db id, info).
        let mut moved: Vec<(String, String, i64, TableInfo)> = Vec::new();
        let mut gone: Vec<(String, String)> = Vec::new();
        let key = |db: &str, t: &str| (db.to_lowercase(), t.to_lowercase());
        let mut args = Vec::new();
        for r in renames {
            let from = key(&r.db, &r.table);
            let (db_id, mut info) = match moved
                .iter()
                .position(|m| (m.0.clone(), m.1.clone()) == from)
            {
                Some(i) => {
                    let m = moved.remove(i);
                    (m.2, m.3)
                }
                None if !gone.contains(&from) => {
                    let t = self.table_of(&r.db, &r.table)?;
                    (t.db_id, t.info.clone())
                }
                None => {
                    return Err(TidbError::Table {
                        db: r.db.clone(),
                        table: r.table.clone(),
                        problem: "does not exist",
                    })
                }
            };
            gone.push(from);
            let to = key(&r.new_db, &r.new_table);
            let taken = moved.iter().any(|m| (m.0.clone(), m.1.clone()) == to)
                || (!gone.contains(&to) && cat.table(&r.new_db, &r.new_table).is_some());
            if taken {
                return Err(TidbError::Table {
                    db: r.new_db.clone(),
                    table: r.new_table.clone(),
                    problem: "exists",
                });
            }
            gone.retain(|g| *g != to);
            let nd = self.db_entry(&r.new_db)?;
            let old_name = info.name.clone();
            info.name = CIStr::new(&r.new_table);
            for idx in &mut info.indices {
                idx.tbl_name = CIStr::new(&r.new_table);
            }
            args.push(json!({
                "old_schema_id": db_id,
                "old_schema_name": CIStr::new(&r.db),
                "old_table_name": old_name,
                "new_schema_id": nd.info.id,
                "new_table_name": CIStr::new(&r.new_table),
                "table_id": info.id,
            }));
            if nd.info.id != db_id {
                p.edits.push(Edit::DropTable(db_id, info.id));
                p.edits.push(Edit::MoveRowId {
                    table: info.id,
                    from: db_id,
                    to: nd.info.id,
                });
            }
            p.edits
                .push(Edit::PutTable(nd.info.id, Box::new(info.clone())));
            p.multiple_table_infos.push(info.clone());
            moved.push((to.0, to.1, nd.info.id, info));
        }
        p.raw_args = json!({ "rename_table_infos": args });
        Ok(p)
    }
}
