//! A seeded OLTP workload for the simulated TiDB: inserts, updates (some changing the primary
//! key), deletes over tables covering every column type and handle kind, multi-table and large
//! transactions, a mix of 2PC / async commit / 1PC, and a DDL now and then.
//!
//! Determinism: every choice comes from one [`SimRng`] seeded with [`WorkloadConfig::seed`];
//! no wall clock, no hash-map iteration. With a [`ManualClock`] driving the core (advanced by
//! the workload, [`WorkloadConfig::tick_ms`] per transaction) the same seed gives the same
//! truth log byte for byte.
//!
//! Pacing: [`Workload::step`] runs one transaction; [`Workload::run`] loops and, when
//! [`WorkloadConfig::rate`] is set and no manual clock is used, sleeps to hold that rate.

pub mod gen;
pub mod huge;
pub mod scale;
pub mod schema_gen;

use std::time::{Duration, Instant};

use tibinlog_protocol::value::Value;

use crate::sim::core::{SimCore, StoreOutput};
use crate::sim::tidb::{CommitMode, Ddl, Result, TableMeta, TableRename, Tidb};
use crate::sim::ts::{ManualClock, SimRng};

/// Relative weights of the workload's choices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    pub insert: u32,
    pub update: u32,
    pub delete: u32,
    /// Updates that change the primary key.
    pub pk_update: u32,
    /// Transaction shapes: a few rows of one table / several tables / a large one / a DDL.
    pub single: u32,
    pub multi_table: u32,
    pub large: u32,
    pub ddl: u32,
    /// Commit protocols.
    pub two_pc: u32,
    pub async_commit: u32,
    pub one_pc: u32,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            insert: 50,
            update: 30,
            delete: 15,
            pk_update: 5,
            single: 80,
            multi_table: 17,
            large: 2,
            ddl: 1,
            two_pc: 40,
            async_commit: 30,
            one_pc: 30,
        }
    }
}

/// Workload parameters.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    pub seed: u64,
    /// Transactions to run (setup DDLs not counted).
    pub txns: u64,
    /// Transactions per second; `None` = unthrottled.
    pub rate: Option<f64>,
    pub mix: Mix,
    /// Database the workload creates and uses.
    pub db: String,
    /// Rows of a large transaction.
    pub large_rows: usize,
    /// Manual clock advance per transaction (deterministic mode).
    pub tick_ms: u64,
    /// Give the workload tables their JSON columns. Off for peers that cannot take MySQL's
    /// binary JSON (a MariaDB replica or `mariadb-binlog` stop at the first JSON value).
    pub json_columns: bool,
    /// Also run the DDL that moves rows between tables or partitions without a row event:
    /// `RENAME TABLES` swaps, `TRUNCATE PARTITION`, `EXCHANGE PARTITION` (and the `CREATE
    /// TABLES` that makes exchange pairs). Off keeps the first DDL mix (and its seeds), for
    /// checks that follow a consumer's per-table view, which cannot see such moves.
    pub moving_ddl: bool,
    /// With [`Self::moving_ddl`], leave EXCHANGE PARTITION out: `CREATE TABLES` makes two plain
    /// tables, never an exchange pair (for consumers whose DDL parser rejects EXCHANGE
    /// PARTITION). Off keeps the seeds of runs made before it existed.
    pub no_exchange: bool,
    /// At most this many live rows per table: an insert into a full table is a delete instead.
    /// `None` lets tables grow (and keeps the seeds of runs made before the cap existed).
    pub max_live_rows: Option<usize>,
    /// At most this many workload tables: a DDL that would create one more drops a table the
    /// workload created instead (`DROP TABLE`), so that a long run's tables stay bounded. `None`
    /// lets them grow (and keeps the seeds of runs made before the cap existed).
    pub max_tables: Option<usize>,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            seed: 1,
            txns: 1000,
            rate: None,
            mix: Mix::default(),
            db: "wl".into(),
            large_rows: 1000,
            tick_ms: 1,
            json_columns: true,
            moving_ddl: true,
            no_exchange: false,
            max_live_rows: None,
            max_tables: None,
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Default)]
pub struct StepReport {
    /// Row changes (statements) applied.
    pub row_changes: usize,
    /// The DDL's query text, if the step was a DDL.
    pub ddl: Option<String>,
    /// Commit protocol used (None for a DDL).
    pub mode: Option<CommitMode>,
    /// Core outputs.
    pub outputs: Vec<StoreOutput>,
}

/// Totals of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    pub txns: u64,
    pub row_changes: u64,
    pub ddls: u64,
    pub one_pc: u64,
    pub async_commit: u64,
    pub two_pc: u64,
}

#[derive(Debug)]
struct WlTable {
    name: String,
    /// Primary keys of the live rows.
    live: Vec<Vec<Value>>,
    next_key: i64,
    /// Columns added by DDL, and whether they got an index.
    added: Vec<(String, bool)>,
}

/// The workload generator.
#[derive(Debug)]
pub struct Workload {
    cfg: WorkloadConfig,
    rng: SimRng,
    tables: Vec<WlTable>,
    clock: Option<ManualClock>,
    steps: u64,
    names: u64,
    /// Tables made for EXCHANGE PARTITION: (partitioned, plain) indexes into `tables`.
    pairs: Vec<(usize, usize)>,
    /// How many of `tables` setup created (never dropped).
    initial: usize,
}

/// Exchange pairs the workload makes at most.
const MAX_PAIRS: usize = 2;

/// The physical id a live key's row is in (None: the table is not partitioned).
fn partition_of(meta: &TableMeta, key: &[Value]) -> Option<i64> {
    let cols = meta.partition_cols();
    if cols.is_empty() {
        return None;
    }
    let pos = meta.key_positions()?;
    let values = cols
        .iter()
        .map(|c| pos.iter().position(|p| p == c).and_then(|at| key.get(at)))
        .collect::<Option<Vec<&Value>>>()?;
    meta.route(&values).ok()
}

fn pick(rng: &mut SimRng, weights: &[u32]) -> usize {
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let mut x = rng.below(total.max(1));
    for (i, &w) in weights.iter().enumerate() {
        if x < u64::from(w) {
            return i;
        }
        x -= u64::from(w);
    }
    0
}

enum Op {
    Insert,
    Update,
    Delete,
    PkUpdate,
}

impl Workload {
    /// A workload; `clock` (the core's manual clock) makes it deterministic.
    pub fn new(cfg: WorkloadConfig, clock: Option<ManualClock>) -> Self {
        Workload {
            rng: SimRng::new(cfg.seed),
            cfg,
            tables: Vec::new(),
            clock,
            steps: 0,
            names: 0,
            pairs: Vec::new(),
            initial: 0,
        }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.cfg.seed
    }

    fn tick(&self) {
        if let Some(c) = &self.clock {
            c.advance(self.cfg.tick_ms);
        }
    }

    fn ddl(
        &mut self,
        tidb: &mut Tidb,
        core: &mut SimCore,
        ddl: Ddl,
        rep: &mut StepReport,
    ) -> Result<()> {
        let out = tidb.execute_ddl(core, &ddl)?;
        rep.outputs.extend(out.outputs);
        rep.ddl = Some(ddl.sql());
        Ok(())
    }

    /// Creates the database and the initial tables (as DDL jobs, in the truth log).
    pub fn setup(&mut self, tidb: &mut Tidb, core: &mut SimCore) -> Result<Vec<StoreOutput>> {
        let mut rep = StepReport::default();
        self.tick();
        let db = self.cfg.db.clone();
        self.ddl(
            tidb,
            core,
            Ddl::CreateDatabase { name: db.clone() },
            &mut rep,
        )?;
        for mut t in gen::initial_tables() {
            if !self.cfg.json_columns {
                t.columns
                    .retain(|c| c.ft.tp != crate::tidb::schema::mysql::TYPE_JSON);
            }
            self.tick();
            self.tables.push(WlTable {
                name: t.name.clone(),
                live: Vec::new(),
                next_key: 1,
                added: Vec::new(),
            });
            self.ddl(
                tidb,
                core,
                Ddl::CreateTable {
                    db: db.clone(),
                    table: t,
                },
                &mut rep,
            )?;
        }
        self.initial = self.tables.len();
        Ok(rep.outputs)
    }

    fn new_key(&mut self, t: usize, meta: &TableMeta) -> Vec<Value> {
        let wt = &mut self.tables[t];
        wt.next_key += 1 + self.rng.below(3) as i64;
        let k = wt.next_key;
        let pos = meta.key_positions().unwrap_or_default();
        pos.iter()
            .map(|&p| {
                let ft = &meta.types[p];
                if ft.is_string_kind() {
                    Value::Bytes(format!("k{k:08}").into_bytes())
                } else if ft.is_unsigned() {
                    Value::UInt(k as u64)
                } else if pos.len() > 1 {
                    Value::Int(k % 97)
                } else {
                    Value::Int(k)
                }
            })
            .collect()
    }

    fn row(&mut self, meta: &TableMeta, key: &[Value]) -> Vec<Value> {
        let pos = meta.key_positions().unwrap_or_default();
        let mut row = Vec::with_capacity(meta.types.len());
        for (i, ft) in meta.types.iter().enumerate() {
            match pos.iter().position(|&p| p == i) {
                Some(k) => row.push(key[k].clone()),
                None => row.push(gen::value(&mut self.rng, ft, !ft.is_not_null())),
            }
        }
        row
    }

    fn dml(
        &mut self,
        txn: &mut crate::sim::tidb::Txn<'_>,
        tidb_meta: &TableMeta,
        t: usize,
        op: Op,
    ) -> Result<()> {
        let db = self.cfg.db.clone();
        let name = self.tables[t].name.clone();
        let live = self.tables[t].live.len() as u64;
        let full = self
            .cfg
            .max_live_rows
            .is_some_and(|cap| live as usize >= cap);
        let op = match op {
            _ if live == 0 => Op::Insert,
            Op::Insert if full => Op::Delete,
            op => op,
        };
        match op {
            Op::Insert => {
                let key = self.new_key(t, tidb_meta);
                let row = self.row(tidb_meta, &key);
                txn.insert(&db, &name, &row)?;
                self.tables[t].live.push(key);
            }
            Op::Update => {
                let i = self.rng.below(live) as usize;
                let key = self.tables[t].live[i].clone();
                let row = self.row(tidb_meta, &key);
                txn.update(&db, &name, &key, &row)?;
            }
            Op::PkUpdate => {
                let i = self.rng.below(live) as usize;
                let key = self.tables[t].live[i].clone();
                let new_key = self.new_key(t, tidb_meta);
                let row = self.row(tidb_meta, &new_key);
                txn.update(&db, &name, &key, &row)?;
                self.tables[t].live[i] = new_key;
            }
            Op::Delete => {
                let i = self.rng.below(live) as usize;
                let key = self.tables[t].live.swap_remove(i);
                txn.delete(&db, &name, &key)?;
            }
        }
        Ok(())
    }

    fn random_ddl(&mut self, tidb: &Tidb) -> Ddl {
        let db = self.cfg.db.clone();
        let t = self.rng.below(self.tables.len() as u64) as usize;
        let table = self.tables[t].name.clone();
        self.names += 1;
        let n = self.names;
        let kinds = if self.cfg.moving_ddl { 9 } else { 6 };
        match self.rng.below(kinds) {
            0 if self.full() => self
                .drop_table(db)
                .unwrap_or_else(|db| self.add_column(t, db, table, n)),
            0 => {
                let name = format!("t_extra{n}");
                self.tables.push(WlTable {
                    name: name.clone(),
                    live: Vec::new(),
                    next_key: 1,
                    added: Vec::new(),
                });
                Ddl::CreateTable {
                    db,
                    table: gen::extra_table(&name),
                }
            }
            1 => {
                self.tables[t].live.clear();
                Ddl::TruncateTable { db, table }
            }
            2 => {
                if let Some(i) = self.tables[t]
                    .added
                    .iter()
                    .position(|(_, indexed)| !indexed)
                {
                    let (col, _) = self.tables[t].added.remove(i);
                    return Ddl::DropColumn {
                        db,
                        table,
                        column: col,
                    };
                }
                self.add_column(t, db, table, n)
            }
            3 => {
                if let Some(i) = self.tables[t]
                    .added
                    .iter()
                    .position(|(_, indexed)| !indexed)
                {
                    self.tables[t].added[i].1 = true;
                    let col = self.tables[t].added[i].0.clone();
                    return Ddl::AddIndex {
                        db,
                        table,
                        index: gen_index(&format!("i_{col}"), &col),
                    };
                }
                self.add_column(t, db, table, n)
            }
            4 => {
                // widen a VARCHAR column if there is one
                let meta = tidb.table(&db, &table);
                let col = meta.and_then(|m| {
                    m.types.iter().zip(&m.names).find(|(ft, _)| {
                        ft.tp == crate::tidb::schema::mysql::TYPE_VARCHAR
                            && !ft.is_binary_string()
                            && !ft.is_pri_key()
                    })
                });
                match col {
                    Some((ft, name)) => {
                        let mut wider = ft.clone();
                        wider.flen += 8;
                        wider.flag &= !crate::tidb::schema::mysql::MULTIPLE_KEY_FLAG;
                        let mut c = crate::sim::tidb::ColumnDef::new(name, wider);
                        c.nullable = !ft.is_not_null();
                        if c.nullable {
                            c.default = meta.and_then(|m| {
                                m.info
                                    .columns
                                    .iter()
                                    .find(|ci| &ci.name.o == name)
                                    .and_then(|ci| {
                                        ci.default
                                            .as_str()
                                            .map(|s| Value::Bytes(s.as_bytes().to_vec()))
                                    })
                            });
                        }
                        Ddl::ModifyColumn {
                            db,
                            table,
                            column: c,
                        }
                    }
                    None => self.add_column(t, db, table, n),
                }
            }
            6 => self.create_tables(db, n),
            7 => {
                // Swap two tables' names through a temporary one (one RENAME TABLE).
                let u = (t + 1 + self.rng.below(self.tables.len() as u64 - 1) as usize)
                    % self.tables.len();
                let other = self.tables[u].name.clone();
                let tmp = format!("t_tmp{n}");
                let r = |from: &str, to: &str| TableRename {
                    db: db.clone(),
                    table: from.to_owned(),
                    new_db: db.clone(),
                    new_table: to.to_owned(),
                };
                let renames = vec![r(&table, &tmp), r(&other, &table), r(&tmp, &other)];
                self.tables[t].name = other;
                self.tables[u].name = table;
                Ddl::RenameTables { renames }
            }
            _ => self.partition_ddl(tidb, db, n),
        }
    }

    /// `CREATE TABLES`: two plain tables, or an exchange pair while there are fewer than
    /// [`MAX_PAIRS`] (a range-partitioned table and a plain one of the same definition).
    fn create_tables(&mut self, db: String, n: u64) -> Ddl {
        let db = if self.full() {
            match self.drop_table(db) {
                Ok(drop) => return drop,
                Err(db) => db,
            }
        } else {
            db
        };
        let tables = if !self.cfg.no_exchange && self.pairs.len() < MAX_PAIRS {
            let (pt, nt) = gen::exchange_pair(&format!("t_xp{n}"), &format!("t_xn{n}"));
            self.pairs.push((self.tables.len(), self.tables.len() + 1));
            vec![pt, nt]
        } else {
            vec![
                gen::extra_table(&format!("t_batch{n}a")),
                gen::extra_table(&format!("t_batch{n}b")),
            ]
        };
        for def in &tables {
            self.tables.push(WlTable {
                name: def.name.clone(),
                live: Vec::new(),
                next_key: 1,
                added: Vec::new(),
            });
        }
        Ddl::CreateTables { db, tables }
    }

    /// Whether the workload has as many tables as it may.
    fn full(&self) -> bool {
        self.cfg
            .max_tables
            .is_some_and(|cap| self.tables.len() >= cap)
    }

    /// `DROP TABLE` of a table the workload created (not one of setup's, not an exchange
    /// pair's), or `Err(db)` when there is none.
    fn drop_table(&mut self, db: String) -> std::result::Result<Ddl, String> {
        let droppable: Vec<usize> = (self.initial..self.tables.len())
            .filter(|i| !self.pairs.iter().any(|&(p, q)| p == *i || q == *i))
            .collect();
        if droppable.is_empty() {
            return Err(db);
        }
        let i = droppable[self.rng.below(droppable.len() as u64) as usize];
        let gone = self.tables.remove(i);
        for (p, q) in &mut self.pairs {
            *p -= usize::from(*p > i);
            *q -= usize::from(*q > i);
        }
        Ok(Ddl::DropTable {
            db,
            table: gone.name,
        })
    }

    /// EXCHANGE PARTITION of a pair whose definitions still match and whose plain table's
    /// rows all belong to one partition; otherwise TRUNCATE PARTITION of a partitioned table.
    fn partition_ddl(&mut self, tidb: &Tidb, db: String, n: u64) -> Ddl {
        if !self.pairs.is_empty() && self.rng.chance(0.5) {
            let (p, q) = self.pairs[self.rng.below(self.pairs.len() as u64) as usize];
            let pt = tidb.table(&db, &self.tables[p].name).cloned();
            let nt = tidb.table(&db, &self.tables[q].name).cloned();
            if let (Some(pt), Some(nt)) = (pt, nt) {
                let parts = pt.info.physical_ids();
                let mut homes = self.tables[q].live.iter().map(|k| partition_of(&pt, k));
                let home = match homes.next() {
                    None => Some(parts[self.rng.below(parts.len() as u64) as usize]),
                    Some(first) => first.filter(|_| homes.all(|h| h == first)),
                };
                let name = home.and_then(|id| {
                    pt.info
                        .partition
                        .as_ref()?
                        .definitions
                        .iter()
                        .find(|d| d.id == id)
                        .map(|d| d.name.o.clone())
                });
                if let Some((home, partition)) = home.zip(name) {
                    if crate::sim::tidb::exchange_compatible(&pt.info, &nt.info).is_ok() {
                        let (mut moved, kept): (Vec<_>, Vec<_>) =
                            std::mem::take(&mut self.tables[p].live)
                                .into_iter()
                                .partition(|k| partition_of(&pt, k) == Some(home));
                        std::mem::swap(&mut moved, &mut self.tables[q].live);
                        self.tables[p].live = kept;
                        self.tables[p].live.extend(moved);
                        let next = self.tables[p].next_key.max(self.tables[q].next_key);
                        self.tables[p].next_key = next;
                        self.tables[q].next_key = next;
                        return Ddl::ExchangePartition {
                            table: self.tables[p].name.clone(),
                            partition,
                            nt_db: db.clone(),
                            nt_table: self.tables[q].name.clone(),
                            db,
                        };
                    }
                }
            }
        }
        let partitioned: Vec<(usize, std::sync::Arc<TableMeta>)> = (0..self.tables.len())
            .filter_map(|i| {
                tidb.table(&db, &self.tables[i].name)
                    .filter(|m| m.info.partition.is_some())
                    .map(|m| (i, m.clone()))
            })
            .collect();
        if partitioned.is_empty() {
            return self.create_tables(db, n);
        }
        let (t, meta) = &partitioned[self.rng.below(partitioned.len() as u64) as usize];
        let defs = &meta
            .info
            .partition
            .as_ref()
            .expect("partitioned")
            .definitions;
        let first = self.rng.below(defs.len() as u64) as usize;
        let mut chosen = vec![first];
        if defs.len() > 2 && self.rng.chance(0.3) {
            chosen.push((first + 1) % defs.len());
        }
        let ids: Vec<i64> = chosen.iter().map(|&i| defs[i].id).collect();
        self.tables[*t]
            .live
            .retain(|k| partition_of(meta, k).is_none_or(|id| !ids.contains(&id)));
        Ddl::TruncatePartition {
            db,
            table: self.tables[*t].name.clone(),
            partitions: chosen.iter().map(|&i| defs[i].name.o.clone()).collect(),
        }
    }

    fn add_column(&mut self, t: usize, db: String, table: String, n: u64) -> Ddl {
        let name = format!("c_added{n}");
        self.tables[t].added.push((name.clone(), false));
        Ddl::AddColumn {
            db,
            table,
            column: gen::added_column(&mut self.rng, &name),
        }
    }

    /// Runs one transaction (or DDL).
    pub fn step(&mut self, tidb: &mut Tidb, core: &mut SimCore) -> Result<StepReport> {
        self.steps += 1;
        self.tick();
        let mut rep = StepReport::default();
        let m = self.cfg.mix.clone();
        let shape = pick(&mut self.rng, &[m.single, m.multi_table, m.large, m.ddl]);
        if shape == 3 {
            let ddl = self.random_ddl(tidb);
            self.ddl(tidb, core, ddl, &mut rep)?;
            return Ok(rep);
        }
        let mode = [
            CommitMode::TwoPc,
            CommitMode::AsyncCommit,
            CommitMode::OnePc,
        ][pick(&mut self.rng, &[m.two_pc, m.async_commit, m.one_pc])];
        let n_tables = match shape {
            1 => 2 + self.rng.below(2) as usize,
            _ => 1,
        };
        let metas: Vec<(usize, std::sync::Arc<TableMeta>)> = (0..n_tables)
            .filter_map(|_| {
                let t = self.rng.below(self.tables.len() as u64) as usize;
                tidb.table(&self.cfg.db, &self.tables[t].name)
                    .map(|m| (t, m.clone()))
            })
            .collect();
        let mut txn = tidb.begin(core);
        for (t, meta) in &metas {
            let ops = if shape == 2 {
                self.cfg.large_rows
            } else {
                1 + self.rng.below(4) as usize
            };
            for _ in 0..ops {
                let op = if shape == 2 {
                    Op::Insert
                } else {
                    match pick(&mut self.rng, &[m.insert, m.update, m.delete, m.pk_update]) {
                        0 => Op::Insert,
                        1 => Op::Update,
                        2 => Op::Delete,
                        _ => Op::PkUpdate,
                    }
                };
                self.dml(&mut txn, meta, *t, op)?;
                rep.row_changes += 1;
            }
        }
        let done = txn.commit_with(mode)?;
        rep.mode = done.mode;
        rep.outputs = done.outputs;
        Ok(rep)
    }

    /// Runs [`WorkloadConfig::txns`] steps, handing each step's outputs to `on_output`.
    pub fn run(
        &mut self,
        tidb: &mut Tidb,
        core: &mut SimCore,
        mut on_output: impl FnMut(Vec<StoreOutput>),
    ) -> Result<RunStats> {
        tracing::info!(
            seed = self.cfg.seed,
            txns = self.cfg.txns,
            "workload starts"
        );
        let mut stats = RunStats::default();
        let started = Instant::now();
        for i in 0..self.cfg.txns {
            if let (Some(rate), None) = (self.cfg.rate, &self.clock) {
                let due = started + Duration::from_secs_f64(i as f64 / rate.max(1e-9));
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            let rep = self.step(tidb, core)?;
            stats.txns += 1;
            stats.row_changes += rep.row_changes as u64;
            match rep.mode {
                Some(CommitMode::OnePc) => stats.one_pc += 1,
                Some(CommitMode::AsyncCommit) => stats.async_commit += 1,
                Some(CommitMode::TwoPc) => stats.two_pc += 1,
                None => {}
            }
            stats.ddls += u64::from(rep.ddl.is_some());
            on_output(rep.outputs);
        }
        Ok(stats)
    }
}

fn gen_index(name: &str, col: &str) -> crate::sim::tidb::IndexDef {
    crate::sim::tidb::IndexDef::new(name, &[col], false)
}

#[cfg(test)]
mod tests;
