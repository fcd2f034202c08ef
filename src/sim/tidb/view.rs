//! Views in the simulated TiDB: `CREATE VIEW` and `DROP VIEW` as TiDB's DDL jobs write them.
//! A view is a TableInfo with `view` set and no rows; TiDB keeps its columns by name only.

use serde_json::json;

use crate::tidb::schema::{action, schema_state, CIStr, TableInfo, UserIdentity, ViewInfo};

use super::ddl::{obj_err, Ddl, Edit, Plan};
use super::error::{Result, TidbError};
use super::Tidb;

impl Tidb {
    /// The plan of a view statement (`ids[0]` is a new view's id).
    pub(super) fn plan_view(&self, ddl: &Ddl, ids: &[i64]) -> Result<Plan> {
        let cat = &self.catalog;
        Ok(match ddl {
            Ddl::CreateView {
                db,
                name,
                columns,
                select,
            } => {
                let d = self.db_entry(db)?;
                if cat.table(db, name).is_some() {
                    return Err(TidbError::Table {
                        db: db.clone(),
                        table: name.clone(),
                        problem: "exists",
                    });
                }
                let info = view_info(ids[0], name, columns, select)?;
                let mut p = Plan::new(action::CREATE_VIEW, d.info.id, db).table(&info);
                p.raw_args = json!({ "table_id": info.id, "or_replace": false });
                p.edits
                    .push(Edit::PutTable(d.info.id, Box::new(info.clone())));
                p.table_info = Some(info);
                p
            }
            Ddl::DropView { db, name } => {
                let t = self.catalog.table_or_err(db, name)?;
                if t.info.view.is_none() {
                    return Err(TidbError::Table {
                        db: db.clone(),
                        table: name.clone(),
                        problem: "is not a view",
                    });
                }
                let mut info = t.info.clone();
                info.state = schema_state::NONE;
                let mut p = Plan::new(action::DROP_VIEW, t.db_id, db).table(&info);
                p.raw_args = json!({ "old_view_ids": [info.id] });
                p.edits.push(Edit::DropTable(t.db_id, info.id));
                p.table_info = Some(info);
                p
            }
            other => {
                return Err(obj_err(
                    "statement",
                    &other.sql(),
                    "",
                    "is not a view statement",
                ))
            }
        })
    }
}

/// The TableInfo of a view as TiDB writes it: the view's definition, its columns by name
/// only, defined by `root`@`%` with SQL SECURITY DEFINER.
fn view_info(id: i64, name: &str, columns: &[String], select: &str) -> Result<TableInfo> {
    if columns.is_empty() {
        return Err(obj_err("view", name, name, "has no columns"));
    }
    let cols = columns
        .iter()
        .enumerate()
        .map(|(i, c)| crate::tidb::schema::ColumnInfo {
            id: i as i64,
            name: CIStr::new(c),
            offset: i,
            state: schema_state::PUBLIC,
            version: 2,
            ..Default::default()
        })
        .collect();
    Ok(TableInfo {
        id,
        name: CIStr::new(name),
        charset: "utf8mb4".into(),
        collate: "utf8mb4_bin".into(),
        columns: cols,
        state: schema_state::PUBLIC,
        version: 5,
        view: Some(ViewInfo {
            view_algorithm: 0,
            view_definer: Some(UserIdentity {
                username: "root".into(),
                hostname: "%".into(),
            }),
            view_security: 0,
            view_select: select.to_owned(),
            view_checkoption: 1,
            view_cols: columns.iter().map(|c| CIStr::new(c)).collect(),
        }),
        ..TableInfo::default()
    })
}
