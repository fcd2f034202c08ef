//! Random schemas: a database's worth of `CREATE TABLE` and `CREATE VIEW` statements whose
//! shapes cover what a catalog answer has to print — primary keys of every kind (clustered
//! integer, nonclustered, composite, none), unique, plain, invisible and expression keys,
//! every partitioning kind but KEY (RANGE, LIST, HASH, RANGE COLUMNS, LIST COLUMNS), foreign
//! keys with each referential action, CHECK constraints (enforced or not), defaults, generated
//! columns and views (with integer expressions). Every statement is one MySQL 8.0 accepts, and
//! MariaDB 10.11 too but for expression keys (it has none): a partitioned table has no foreign
//! key and every unique key includes its partitioning columns, as both require. Every choice
//! comes from the caller's [`SimRng`].

use tibinlog_protocol::value::Value;

use crate::sim::tidb::types::{self as ty, ColumnDef, IndexDef, PartitionDef, TableDef};
use crate::sim::tidb::{CheckDef, Ddl, ForeignKeyDef};
use crate::sim::ts::SimRng;
use crate::tidb::schema::mysql;

/// The referenced table every foreign key points at.
pub const PARENT: &str = "parent";

fn pick<'a, T>(rng: &mut SimRng, items: &'a [T]) -> &'a T {
    &items[rng.below(items.len() as u64) as usize]
}

/// A random value column `name` (no JSON: MariaDB has no JSON type of its own).
fn value_column(rng: &mut SimRng, name: &str) -> ColumnDef {
    let ft = match rng.below(10) {
        0 => ty::int(mysql::TYPE_LONG, false),
        1 => ty::int(mysql::TYPE_LONG, true),
        2 => ty::int(mysql::TYPE_SHORT, false),
        3 => ty::decimal(4 + rng.below(12) as u8, rng.below(4) as u8),
        4 => ty::varchar(1 + rng.below(200) as u32),
        5 => ty::char(1 + rng.below(20) as u32),
        6 => ty::datetime(rng.below(7) as u8),
        7 => ty::date(),
        8 => ty::double(),
        _ => ty::text(),
    };
    let text = ft.tp == mysql::TYPE_BLOB;
    let mut c = ColumnDef::new(name, ft);
    if rng.chance(0.3) {
        c = c.not_null();
    }
    let int = matches!(c.ft.tp, mysql::TYPE_LONG | mysql::TYPE_SHORT);
    if int && rng.chance(0.4) {
        c = c.default(Value::Int(rng.below(100) as i64));
    } else if !text && !c.nullable && rng.chance(0.2) && c.ft.tp == mysql::TYPE_VARCHAR {
        c = c.default(Value::Bytes(b"x".to_vec()));
    }
    c
}

/// The table the foreign keys reference: a clustered BIGINT key.
fn parent() -> TableDef {
    TableDef {
        name: PARENT.into(),
        columns: vec![
            ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null(),
            ColumnDef::new("label", ty::varchar(40)),
        ],
        primary_key: vec!["id".into()],
        clustered: true,
        indexes: vec![IndexDef::new("u_label", &["label"], true)],
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    }
}

/// One random table `t{n}`.
fn table(rng: &mut SimRng, n: usize) -> TableDef {
    let name = format!("t{n}");
    let mut columns = vec![ColumnDef::new("id", ty::int(mysql::TYPE_LONGLONG, false)).not_null()];
    let values = 1 + rng.below(5) as usize;
    columns.extend((0..values).map(|i| value_column(rng, &format!("c{i}"))));
    let partitioned = rng.chance(0.4);
    let partition = partitioned.then(|| partitioning(rng));
    // The partitioning columns, which every unique key (the primary key too) must include.
    let part_cols: Vec<String> = partition
        .as_ref()
        .map_or_else(Vec::new, PartitionDef::columns);
    if part_cols.iter().any(|c| c == "region") {
        columns.push(ColumnDef::new("region", ty::varchar(8)).not_null());
    }
    let (mut primary_key, clustered) = match rng.below(4) {
        0 => (vec!["id".to_owned()], true),
        1 => (vec!["id".to_owned()], false),
        2 if !partitioned => {
            columns.push(ColumnDef::new("code", ty::varchar(16)).not_null());
            (vec!["code".to_owned(), "id".to_owned()], true)
        }
        _ => (Vec::new(), false),
    };
    if !primary_key.is_empty() {
        with_all(&mut primary_key, &part_cols);
    }
    let mut t = TableDef {
        name: name.clone(),
        columns,
        primary_key,
        clustered,
        indexes: Vec::new(),
        partition: None,
        foreign_keys: Vec::new(),
        checks: Vec::new(),
    };
    let keyable: Vec<String> = t.columns[1..=values]
        .iter()
        .filter(|c| c.ft.tp != mysql::TYPE_BLOB)
        .map(|c| c.name.clone())
        .collect();
    for k in 0..rng.below(3) {
        if keyable.is_empty() {
            break;
        }
        let col = pick(rng, &keyable).clone();
        let unique = rng.chance(0.3);
        let mut cols: Vec<String> = if rng.chance(0.3) {
            vec![col.clone(), "id".into()]
        } else {
            vec![col.clone()]
        };
        // A unique key of a partitioned table must include the partitioning columns.
        if unique {
            with_all(&mut cols, &part_cols);
        }
        if t.indexes.iter().any(|i| i.columns.first() == Some(&col)) {
            continue;
        }
        let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
        let mut index = IndexDef::new(&format!("k{k}_{col}"), &cols, unique);
        // MySQL refuses an invisible key that stands in for a missing primary key: only plain
        // keys are made invisible.
        if !unique && rng.chance(0.3) {
            index = index.invisible();
        }
        t.indexes.push(index);
    }
    expression_index(rng, &mut t, values);
    if partitioned {
        t.partition = partition;
    } else if rng.chance(0.6) {
        let nullable = rng.chance(0.5);
        let mut c = ColumnDef::new("parent_id", ty::int(mysql::TYPE_LONGLONG, false));
        if !nullable {
            c = c.not_null();
        }
        t.columns.push(c);
        // 0 none given, 1 RESTRICT, 2 CASCADE, 3 SET NULL (nullable columns), 4 NO ACTION.
        let mut action = || {
            let a = rng.below(5) as i64;
            if a == 3 && !nullable {
                2
            } else {
                a
            }
        };
        let (on_delete, on_update) = (action(), action());
        t.foreign_keys.push(ForeignKeyDef {
            name: format!("fk_{name}_parent"),
            columns: vec!["parent_id".into()],
            ref_table: PARENT.into(),
            ref_columns: vec!["id".into()],
            on_delete,
            on_update,
        });
    }
    let ints: Vec<String> = t
        .columns
        .iter()
        .filter(|c| matches!(c.ft.tp, mysql::TYPE_LONG | mysql::TYPE_SHORT))
        .map(|c| c.name.clone())
        .collect();
    if !ints.is_empty() && rng.chance(0.5) {
        let col = pick(rng, &ints).clone();
        t.checks.push(CheckDef {
            name: format!("{name}_chk_1"),
            expr: format!("`{col}` >= 0"),
            columns: vec![col],
            enforced: rng.chance(0.7),
        });
    }
    t
}

/// Appends the names of `needed` that `cols` lacks.
fn with_all(cols: &mut Vec<String>, needed: &[String]) {
    for c in needed {
        if !cols.contains(c) {
            cols.push(c.clone());
        }
    }
}

/// A random partitioning of every kind TiDB has except KEY: HASH, RANGE and LIST over `id`,
/// RANGE COLUMNS and LIST COLUMNS over `id`, a `region` string column or both.
fn partitioning(rng: &mut SimRng) -> PartitionDef {
    let n = 1 + rng.below(4) as usize;
    let column = || "id".to_owned();
    let columns = match rng.below(3) {
        0 => vec![column()],
        1 => vec!["region".to_owned()],
        _ => vec![column(), "region".to_owned()],
    };
    // Literal of partition i's value for a column, as TiDB keeps it.
    let lit = |c: &str, i: usize| {
        if c == "region" {
            format!("'{}'", (b'b' + 3 * i as u8) as char)
        } else {
            (1000 * (i + 1)).to_string()
        }
    };
    match rng.below(5) {
        0 => PartitionDef::Hash {
            column: column(),
            count: n as u32,
        },
        1 => {
            let mut bounds: Vec<Option<i64>> = (1..=n as i64).map(|i| Some(i * 1000)).collect();
            if rng.chance(0.5) {
                bounds.push(None);
            }
            PartitionDef::Range {
                column: column(),
                bounds,
            }
        }
        2 => PartitionDef::List {
            column: column(),
            values: (0..n as i64)
                .map(|i| (0..1 + i % 3).map(|k| 10 * i + k).collect())
                .collect(),
        },
        3 => {
            let mut bounds: Vec<Vec<Option<String>>> = (0..n)
                .map(|i| columns.iter().map(|c| Some(lit(c, i))).collect())
                .collect();
            if rng.chance(0.5) {
                bounds.push(vec![None; columns.len()]);
            }
            PartitionDef::RangeColumns { columns, bounds }
        }
        _ => PartitionDef::ListColumns {
            values: (0..n)
                .map(|i| {
                    (0..1 + i % 2)
                        .map(|k| columns.iter().map(|c| lit(c, 2 * i + k)).collect())
                        .collect()
                })
                .collect(),
            columns,
        },
    }
}

/// Sometimes an expression index over a string or integer value column (MySQL 8.0's
/// functional key part; TiDB keys it on a hidden generated column).
fn expression_index(rng: &mut SimRng, t: &mut TableDef, values: usize) {
    if !rng.chance(0.3) {
        return;
    }
    let candidates: Vec<&ColumnDef> = t.columns[1..=values]
        .iter()
        .filter(|c| {
            matches!(
                c.ft.tp,
                mysql::TYPE_VARCHAR | mysql::TYPE_LONG | mysql::TYPE_SHORT
            )
        })
        .collect();
    if candidates.is_empty() {
        return;
    }
    let c = pick(rng, &candidates);
    let (expr, ft) = if c.ft.tp == mysql::TYPE_VARCHAR {
        let f = *pick(rng, &["lower", "upper"]);
        (format!("{f}(`{}`)", c.name), c.ft.clone())
    } else {
        (format!("abs(`{}`)", c.name), c.ft.clone())
    };
    t.indexes
        .push(IndexDef::expression(&format!("e_{}", c.name), &expr, ft));
}

/// `tables` random tables (after the referenced parent) and a view over some of them, all in
/// database `db`: the statements in the order they can run.
pub fn random_schema(rng: &mut SimRng, db: &str, tables: usize) -> Vec<Ddl> {
    let mut out = vec![Ddl::CreateTable {
        db: db.into(),
        table: parent(),
    }];
    let defs: Vec<TableDef> = (0..tables).map(|n| table(rng, n)).collect();
    for (n, t) in defs.iter().enumerate() {
        if !rng.chance(0.5) {
            continue;
        }
        let mut items: Vec<(String, String)> = t
            .columns
            .iter()
            .take(3)
            .map(|c| (format!("`{}`", c.name), c.name.clone()))
            .collect();
        items.extend(int_expressions(rng, t));
        let select = format!(
            "SELECT {} FROM `{db}`.`{}`",
            items
                .iter()
                .map(|(e, c)| format!("{e} AS `{c}`"))
                .collect::<Vec<_>>()
                .join(","),
            t.name
        );
        out.push(Ddl::CreateView {
            db: db.into(),
            name: format!("v{n}"),
            columns: items.into_iter().map(|(_, c)| c).collect(),
            select,
        });
    }
    let views = out.split_off(1);
    out.extend(defs.into_iter().map(|table| Ddl::CreateTable {
        db: db.into(),
        table,
    }));
    out.extend(views);
    out
}

/// Up to two integer expressions over `t`'s INT and SMALLINT columns (or constants), as a
/// view's `(expression, name)` items: their view columns are INT or BIGINT by their display
/// length, which a catalog has to work out as MySQL does.
fn int_expressions(rng: &mut SimRng, t: &TableDef) -> Vec<(String, String)> {
    const FORMS: [&str; 13] = [
        "{c}+1",
        "{c}*2",
        "{c}-{c}",
        "-{c}",
        "{c} DIV 2",
        "ABS({c})",
        "{c}*{c}",
        "{c}+{c}+{c}",
        "1+1",
        "12345678+1",
        "1234567+1",
        "100000000",
        "12*34",
    ];
    let ints: Vec<&ColumnDef> = t
        .columns
        .iter()
        .filter(|c| {
            matches!(c.ft.tp, mysql::TYPE_LONG | mysql::TYPE_SHORT) && c.generated.is_none()
        })
        .collect();
    let mut out = Vec::new();
    for k in 0..rng.below(3) {
        let form = *pick(rng, &FORMS);
        if form.contains("{c}") && ints.is_empty() {
            continue;
        }
        let col = if ints.is_empty() {
            String::new()
        } else {
            format!("`{}`", pick(rng, &ints).name)
        };
        out.push((form.replace("{c}", &col), format!("x{k}")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_build_in_the_simulated_tidb_shape() {
        for seed in 0..50 {
            let mut rng = SimRng::new(seed);
            let ddls = random_schema(&mut rng, "d", 6);
            let mut ids = 100;
            for d in &ddls {
                if let Ddl::CreateTable { table, .. } = d {
                    let parts: Vec<i64> = (0..table.partition_count() as i64)
                        .map(|i| ids + 1 + i)
                        .collect();
                    let info = table
                        .build("d", ids, &parts, 0)
                        .unwrap_or_else(|e| panic!("seed {seed}: {}: {e}", d.sql()));
                    assert_eq!(info.foreign_keys.len(), table.foreign_keys.len());
                    ids += 10;
                }
            }
            assert!(matches!(&ddls[0], Ddl::CreateTable { table, .. } if table.name == PARENT));
        }
    }
}
