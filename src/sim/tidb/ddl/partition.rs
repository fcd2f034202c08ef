//! Plans of the partition DDLs: TRUNCATE PARTITION and EXCHANGE PARTITION (with validation).

use serde_json::json;

use crate::sim::core::SimCore;
use crate::sim::tidb::error::Result;
use crate::sim::tidb::Tidb;
use crate::tidb::key::{decode_record_key, record_span};
use crate::tidb::schema::action;

use super::checks::exchange_compatible;
use super::plan::{obj_err, Edit, Plan};

impl Tidb {
    /// Plans TRUNCATE PARTITION: new ids for the named partitions.
    pub(super) fn plan_truncate_partition(
        &self,
        db: &str,
        table: &str,
        partitions: &[String],
        ids: &[i64],
    ) -> Result<Plan> {
        let t = self.table_of(db, table)?;
        let mut info = t.info.clone();
        let part = info
            .partition
            .as_mut()
            .ok_or_else(|| obj_err("partitioning", "", table, "the table is not partitioned"))?;
        let (mut old_ids, mut new_ids) = (Vec::new(), Vec::new());
        for (name, &id) in partitions.iter().zip(ids) {
            let d = part
                .definitions
                .iter_mut()
                .find(|d| d.name.l == name.to_lowercase())
                .ok_or_else(|| obj_err("partition", name, table, "unknown"))?;
            if old_ids.contains(&d.id) || new_ids.contains(&d.id) {
                return Err(obj_err("partition", name, table, "named twice"));
            }
            old_ids.push(d.id);
            d.id = id;
            new_ids.push(id);
        }
        Ok(self.alter(
            t,
            info,
            action::TRUNCATE_TABLE_PARTITION,
            db,
            json!({ "old_partition_ids": old_ids, "new_partition_ids": new_ids }),
        ))
    }

    /// Plans EXCHANGE PARTITION, after checking the definitions and every row of the plain table.
    pub(super) fn plan_exchange_partition(
        &self,
        core: &mut SimCore,
        db: &str,
        table: &str,
        partition: &str,
        nt_db: &str,
        nt_table: &str,
    ) -> Result<Plan> {
        let pt = self.table_of(db, table)?;
        let nt = self.table_of(nt_db, nt_table)?;
        exchange_compatible(&pt.info, &nt.info)
            .map_err(|problem| obj_err("table", nt_table, table, problem))?;
        let mut pt_info = pt.info.clone();
        let def = pt_info
            .partition
            .as_mut()
            .and_then(|p| {
                p.definitions
                    .iter_mut()
                    .find(|d| d.name.l == partition.to_lowercase())
            })
            .ok_or_else(|| obj_err("partition", partition, table, "unknown"))?;
        let part_id = def.id;
        def.id = nt.info.id;
        // WITH VALIDATION: every row of the plain table must belong to the partition.
        let ts = core.ts();
        let (start, end) = record_span(nt.info.id);
        let mut row = Vec::new();
        for pair in core.mvcc.scan(&start, &end, 0, ts, false, &[])? {
            let r = pair.result?;
            let (_, handle) = decode_record_key(&pair.key)?;
            nt.codec.decode_into(&r.value, Some(&handle), &mut row)?;
            if pt.route_row(&row)? != part_id {
                return Err(obj_err(
                    "partition",
                    partition,
                    table,
                    "found a row that does not match the partition",
                ));
            }
        }
        let mut nt_info = nt.info.clone();
        nt_info.id = part_id;
        let mut p = Plan::new(action::EXCHANGE_TABLE_PARTITION, nt.db_id, nt_db).table(&nt.info);
        p.raw_args = json!({
            "partition_id": part_id,
            "pt_schema_id": pt.db_id,
            "pt_table_id": pt.info.id,
            "partition_name": partition.to_lowercase(),
            "with_validation": true,
        });
        p.edits.push(Edit::DropTable(nt.db_id, nt.info.id));
        p.edits.push(Edit::PutTable(nt.db_id, Box::new(nt_info)));
        p.edits
            .push(Edit::PutTable(pt.db_id, Box::new(pt_info.clone())));
        p.edits.push(Edit::ExchangeRowIds {
            pt: (pt.db_id, pt.info.id),
            nt_old: (nt.db_id, nt.info.id),
            nt_new: (nt.db_id, part_id),
        });
        p.table_info = Some(pt_info);
        Ok(p)
    }
}
