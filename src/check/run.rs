//! The async shell of a check: connects to both sides, aligns them ([`super::align`]), reads
//! both catalogs at that point, walks each table's key on the source for chunk boundaries and
//! hands the chunks to workers, each with a connection to each side, that drive a
//! [`ChunkCheck`] and (with `--apply`) repair their chunk in one transaction.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable as _;
use tokio::sync::{mpsc, Mutex};

use super::align::{self, At, Point, Position};
use super::metrics::CheckMetrics;
use super::report::{Report, TableReport};
use super::shape::{self, Filter};
use super::sql::{text_literal, TableShape};
use super::worker::{produce, Job, Msg, Walk, Worker};
use super::{CheckArgs, CheckError};

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the check waits for the source's newest snapshot point to pass a replica's
/// position.
const POINT_TIMEOUT: Duration = Duration::from_secs(60);
/// Progress lines on stderr at most this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Where one side is and how to log in.
#[derive(Debug, Clone)]
struct Endpoint {
    side: &'static str,
    host: String,
    port: u16,
    user: String,
    password: String,
}

impl Endpoint {
    fn new(side: &'static str, addr: &str, user: &str, password: &str) -> Result<Self, CheckError> {
        let bad = || CheckError::Setup(format!("--{side} {addr:?}: expected HOST:PORT"));
        let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Ok(Endpoint {
            side,
            host: host.to_owned(),
            port: port.parse().map_err(|_| bad())?,
            user: user.to_owned(),
            password: password.to_owned(),
        })
    }

    fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    fn err(&self, sql: &str, e: impl std::fmt::Display) -> CheckError {
        if self.side == "source" {
            CheckError::source(sql, e)
        } else {
            CheckError::target(sql, e)
        }
    }

    /// A connection with the session both sides render values in: utf8mb4 and UTC.
    async fn connect(&self) -> Result<mysql_async::Conn, CheckError> {
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port)
            .user(Some(self.user.clone()))
            .pass(Some(self.password.clone()))
            .prefer_socket(false);
        let failed = |error: String| CheckError::Connect {
            side: self.side,
            addr: self.addr(),
            error,
        };
        let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, mysql_async::Conn::new(opts))
            .await
            .map_err(|_| failed(format!("no answer within {CONNECT_TIMEOUT:?}")))?
            .map_err(|e| failed(e.to_string()))?;
        for sql in ["SET NAMES utf8mb4", "SET time_zone = '+00:00'"] {
            conn.query_drop(sql).await.map_err(|e| self.err(sql, e))?;
        }
        Ok(conn)
    }

    /// A target connection; one that repairs writes as a dump loads (no foreign-key checks,
    /// a 0 kept in an AUTO_INCREMENT column) and, on a replica, outside its binlog, so that
    /// the repair does not become transactions of the replica's own.
    async fn connect_for_repair(
        &self,
        apply: bool,
        replica: bool,
    ) -> Result<mysql_async::Conn, CheckError> {
        let mut conn = self.connect().await?;
        if apply {
            let mut setup = vec![
                "SET SESSION foreign_key_checks = 0",
                "SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO'",
            ];
            if replica {
                setup.push("SET SESSION sql_log_bin = 0");
            }
            for sql in setup {
                conn.query_drop(sql).await.map_err(|e| self.err(sql, e))?;
            }
        }
        Ok(conn)
    }

    /// A connection that reads at `ts` (the source's side).
    async fn connect_at(&self, ts: u64) -> Result<mysql_async::Conn, CheckError> {
        let mut conn = self.connect().await?;
        let sql = format!("SET @@tidb_snapshot = {ts}");
        conn.query_drop(&sql).await.map_err(|e| self.err(&sql, e))?;
        Ok(conn)
    }
}

fn filter(args: &CheckArgs) -> Result<Filter, CheckError> {
    let tables = args
        .tables
        .iter()
        .map(|t| {
            t.split_once('.')
                .map(|(d, n)| (d.to_owned(), n.to_owned()))
                .ok_or_else(|| CheckError::Setup(format!("--tables {t:?}: expected db.table")))
        })
        .collect::<Result<_, _>>()?;
    Ok(Filter {
        databases: args.databases.clone(),
        tables,
    })
}

/// Where a running check shows how far it is: progress lines, and its metrics.
pub struct Watch<'a> {
    pub progress: &'a mut dyn Write,
    pub metrics: CheckMetrics,
    started: Instant,
}

impl<'a> Watch<'a> {
    pub fn new(progress: &'a mut dyn Write, metrics: CheckMetrics) -> Self {
        Watch {
            progress,
            metrics,
            started: Instant::now(),
        }
    }
}

/// Runs a check (see the module's header), showing its progress on `watch`. Cancelling
/// `stop` ends it with an error, after letting a held replica go on.
pub async fn check(
    args: &CheckArgs,
    watch: Watch<'_>,
    stop: &tokio_util::sync::CancellationToken,
) -> Result<Report, CheckError> {
    let filter = filter(args)?;
    let at = args
        .at
        .as_deref()
        .map(At::parse)
        .transpose()
        .map_err(CheckError::Setup)?;
    let source = Endpoint::new(
        "source",
        &args.source,
        &args.source_user,
        &args.source_password,
    )?;
    let target = Endpoint::new(
        "target",
        &args.target,
        &args.target_user,
        &args.target_password,
    )?;
    let mut src = source.connect().await?;
    let mut tgt = target.connect().await?;
    let sql = "SELECT @@server_uuid, @@server_id";
    let (uuid, server_id): (String, u64) = src
        .query_first(sql)
        .await
        .map_err(|e| source.err(sql, e))?
        .ok_or_else(|| source.err(sql, "no row"))?;
    let id = align::SourceId {
        uuid: uuid.clone(),
        server_id,
        host: source.host.clone(),
        port: source.port,
    };
    let replica = align::replica_of(&align::status_rows(&mut tgt).await?, &id);
    let sides = Sides {
        source,
        target,
        replica: replica.is_some(),
    };
    match (replica, at) {
        (Some(_), Some(_)) => Err(CheckError::Setup(
            "the target replicates from the source, so the check runs it to a position of its \
             own choosing; --at is for a target that does not replicate"
                .into(),
        )),
        (None, None) => Err(CheckError::Setup(format!(
            "the target does not replicate from the source (no replication channel from server \
             uuid {uuid}, server id {server_id} in its SHOW REPLICA STATUS): give the position \
             it reflects with --at FILE:POS"
        ))),
        (None, Some(at)) => {
            let point = point_at(&mut src, &sides.source, at).await?;
            tokio::select! {
                r = check_at(args, &sides, point, &filter, watch) => r,
                () = stop.cancelled() => Err(CheckError::Setup("interrupted".into())),
            }
        }
        (Some(state), None) => {
            let (hold, stopped) = align::stop_applier(&mut tgt, &state, &id).await?;
            let checked = async {
                let point = newest_point(&mut src, &sides.source, &stopped.executed).await?;
                if point.position != stopped.executed {
                    align::run_to(&mut tgt, &hold, &point.position, &id).await?;
                }
                check_at(args, &sides, point, &filter, watch).await
            };
            let checked = tokio::select! {
                r = checked => r,
                () = stop.cancelled() => Err(CheckError::Setup("interrupted".into())),
            };
            let released = align::release(&mut tgt, &hold).await;
            let report = checked?;
            released?;
            Ok(report)
        }
    }
}

/// The source's newest snapshot point at or after `after` (a replica's applier position):
/// `SHOW MASTER STATUS` and the timestamp that position lines up with.
async fn newest_point(
    src: &mut mysql_async::Conn,
    source: &Endpoint,
    after: &Position,
) -> Result<Point, CheckError> {
    let deadline = Instant::now() + POINT_TIMEOUT;
    loop {
        let sql = "SHOW MASTER STATUS";
        let row: mysql_async::Row = src
            .query_first(sql)
            .await
            .map_err(|e| source.err(sql, e))?
            .ok_or_else(|| source.err(sql, "no row: the source writes no binlog"))?;
        let file: String = row.get(0).unwrap_or_default();
        let pos: u64 = row.get(1).unwrap_or_default();
        let gtids: Option<String> = row.get(4);
        let p = Position { file, pos };
        let ahead = p.key() < after.key();
        // A binlog with no snapshot point yet (nothing durable written) has no timestamp.
        let ts = match ahead {
            true => None,
            false => ts_for(src, source, &p).await?,
        };
        if let Some(ts) = ts {
            return Ok(Point {
                position: p,
                ts,
                gtids,
                how: "replica held at the position by START SLAVE UNTIL".into(),
            });
        }
        if Instant::now() > deadline {
            return Err(CheckError::Setup(match ahead {
                true => format!(
                    "the target has applied up to {after}, past the source's newest readable \
                     position {p}, for {POINT_TIMEOUT:?}: is it a replica of this source?"
                ),
                false => format!(
                    "the source has had no TiDB timestamp for its newest position {p} for \
                     {POINT_TIMEOUT:?}: is its capture running?"
                ),
            }));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn ts_for(
    src: &mut mysql_async::Conn,
    source: &Endpoint,
    p: &Position,
) -> Result<Option<u64>, CheckError> {
    let sql = format!(
        "SELECT TIBINLOG_TS_FOR_POS({}, {})",
        text_literal(&p.file),
        p.pos
    );
    let ts: Option<Option<u64>> = src
        .query_first(&sql)
        .await
        .map_err(|e| source.err(&sql, e))?;
    Ok(ts.flatten())
}

/// The point `--at` names.
async fn point_at(
    src: &mut mysql_async::Conn,
    source: &Endpoint,
    at: At,
) -> Result<Point, CheckError> {
    let (position, ts) = match at {
        At::Position(p) => {
            let ts = ts_for(src, source, &p).await?.ok_or_else(|| {
                CheckError::Setup(format!(
                    "--at {p}: the source has no TiDB timestamp for that position (it must be \
                     the end of a transaction in a binlog file the source still has)"
                ))
            })?;
            (p, ts)
        }
        At::Gtids(set) => {
            let sql = format!("SELECT TIBINLOG_POS_FOR_GTIDS({})", text_literal(&set));
            let text: Option<String> = src
                .query_first(&sql)
                .await
                .map_err(|e| CheckError::Setup(format!("--at {set}: {e}")))?;
            let p = text
                .as_deref()
                .and_then(Position::parse)
                .ok_or_else(|| source.err(&sql, "no position"))?;
            let ts = ts_for(src, source, &p).await?.ok_or_else(|| {
                CheckError::Setup(format!(
                    "--at {set}: the source has no TiDB timestamp for {p}, where that set ends"
                ))
            })?;
            (p, ts)
        }
        At::Ts(ts) => {
            let sql = format!("SELECT TIBINLOG_POS_FOR_TS({ts})");
            let text: Option<String> = src
                .query_first(&sql)
                .await
                .map_err(|e| source.err(&sql, e))?;
            let p = text
                .as_deref()
                .and_then(Position::parse)
                .ok_or_else(|| source.err(&sql, "no position"))?;
            (p, ts)
        }
    };
    Ok(Point {
        position,
        ts,
        gtids: None,
        how: "--at".into(),
    })
}

/// The two sides of a check.
struct Sides {
    source: Endpoint,
    target: Endpoint,
    /// The target replicates from the source (a repair is kept out of its binlog).
    replica: bool,
}

async fn check_at(
    args: &CheckArgs,
    sides: &Sides,
    point: Point,
    filter: &Filter,
    watch: Watch<'_>,
) -> Result<Report, CheckError> {
    let Watch {
        progress,
        metrics,
        started,
    } = watch;
    metrics.aligned.set(1);
    let mut src = sides.source.connect_at(point.ts).await?;
    let mut tgt = sides.target.connect().await?;
    let source_catalog = shape::read_catalog(&mut src, filter, "source").await?;
    let target_catalog = shape::read_catalog(&mut tgt, filter, "target").await?;
    drop(tgt);
    let plans = shape::plan(&source_catalog, &target_catalog, filter);
    let mut tables: Vec<TableReport> = plans
        .iter()
        .map(|p| TableReport {
            table: format!("{}.{}", p.db, p.table),
            shape: p.notes.clone(),
            ..TableReport::default()
        })
        .collect();
    let mut walks = Vec::new();
    let mut created = 0;
    for (table, p) in plans.into_iter().enumerate() {
        let Some(shape) = p.shape else { continue };
        if p.absent_on_target {
            // Without a repair a missing table is a note, not every row missing.
            if !args.repair {
                continue;
            }
            let create = create_on_target(&mut src, sides, &shape, args.apply).await?;
            tables[table].repair.push(create);
            tables[table].repair_statements += 1;
            created += u64::from(args.apply);
        }
        walks.push(Walk {
            table,
            shape: Arc::new(shape),
            absent: p.absent_on_target,
        });
    }
    let threads = (args.threads as usize).max(1);
    let (jobs_tx, jobs_rx) = mpsc::channel::<Job>(threads * 2);
    let jobs_rx = Arc::new(Mutex::new(jobs_rx));
    let (results_tx, mut results) = mpsc::unbounded_channel();
    let mut tasks = tokio::task::JoinSet::new();
    let walked: Vec<usize> = walks.iter().map(|w| w.table).collect();
    let workers = if walks.is_empty() { 0 } else { threads };
    tasks.spawn(produce(
        src,
        walks,
        args.chunk_rows,
        jobs_tx,
        results_tx.clone(),
    ));
    for _ in 0..workers {
        let worker = Worker {
            src: sides.source.connect_at(point.ts).await?,
            tgt: sides
                .target
                .connect_for_repair(args.apply, sides.replica)
                .await?,
            repair: args.repair,
            apply: args.apply,
            max_listed: args.max_listed,
        };
        let (rx, tx) = (jobs_rx.clone(), results_tx.clone());
        tasks.spawn(async move {
            let mut worker = worker;
            worker.run(rx, tx).await;
        });
    }
    drop(results_tx);
    let mut agg = Aggregate::new(tables.len(), metrics.clone());
    for (i, p) in agg.produced.iter_mut().enumerate() {
        // Tables reported by their shape alone have no chunks.
        if !walked.contains(&i) {
            *p = Some(0);
        }
    }
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    tick.tick().await;
    loop {
        tokio::select! {
            msg = results.recv() => match msg {
                Some(Ok(m)) => {
                    agg.add(&mut tables, m, args.max_listed);
                    metrics.tables_done.set(agg.tables_done() as i64);
                }
                Some(Err(e)) => {
                    tasks.abort_all();
                    return Err(e);
                }
                None => break,
            },
            _ = tick.tick() => agg.progress(progress, started),
        }
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| CheckError::Setup(format!("a check task failed: {e}")))?;
    }
    metrics.tables_done.set(agg.tables_done() as i64);
    metrics.repaired.inc_by(created);
    let differences = tables.iter().map(|t| t.differences).sum();
    Ok(Report {
        point,
        equal: tables.iter().all(TableReport::equal),
        chunks: tables.iter().map(|t| t.chunks).sum(),
        rows_source: tables.iter().map(|t| t.rows_source).sum(),
        rows_target: tables.iter().map(|t| t.rows_target).sum(),
        differences,
        repaired: agg.applied + created,
        seconds: started.elapsed().as_secs_f64(),
        tables,
    })
}

/// Progress over the chunks' results.
struct Aggregate {
    produced: Vec<Option<u64>>,
    done: Vec<u64>,
    rows: u64,
    applied: u64,
    metrics: CheckMetrics,
}

impl Aggregate {
    fn new(tables: usize, metrics: CheckMetrics) -> Self {
        metrics.tables.set(tables as i64);
        Aggregate {
            produced: vec![None; tables],
            done: vec![0; tables],
            rows: 0,
            applied: 0,
            metrics,
        }
    }

    fn tables_done(&self) -> usize {
        self.produced
            .iter()
            .zip(&self.done)
            .filter(|(p, d)| **p == Some(**d))
            .count()
    }

    fn add(&mut self, tables: &mut [TableReport], m: Msg, max_listed: usize) {
        self.count(&m);
        match m {
            Msg::Produced { table, chunks } => self.produced[table] = Some(chunks),
            Msg::Chunk {
                table,
                rows,
                diffs,
                differences,
                repair,
                applied,
                unlisted,
            } => {
                let t = &mut tables[table];
                self.done[table] += 1;
                self.rows += rows.0;
                self.applied += applied;
                t.chunks += 1;
                t.rows_source += rows.0;
                t.rows_target += rows.1;
                t.differences += differences;
                let room = max_listed.saturating_sub(t.rows.len());
                t.rows.extend(diffs.into_iter().take(room));
                let room = max_listed.saturating_sub(t.repair.len());
                t.repair_statements += repair.len() as u64;
                t.repair.extend(repair.into_iter().take(room));
                if unlisted {
                    t.shape.push(format!(
                        "rows differ ({} on the source, {} on the target) but a table without \
                         a usable key this large is not compared row by row",
                        rows.0, rows.1
                    ));
                }
            }
        }
    }

    /// The metrics of one result.
    fn count(&self, m: &Msg) {
        if let Msg::Chunk {
            rows,
            differences,
            applied,
            ..
        } = m
        {
            let metrics = &self.metrics;
            metrics.chunks.inc();
            metrics.rows_source.inc_by(rows.0);
            metrics.rows_target.inc_by(rows.1);
            metrics.differences.inc_by(*differences);
            metrics.repaired.inc_by(*applied);
        }
    }

    fn progress(&self, out: &mut dyn Write, started: Instant) {
        let tables_done = self.tables_done();
        let secs = started.elapsed().as_secs_f64().max(0.001);
        let _ = writeln!(
            out,
            "check: {tables_done}/{} tables, {} chunks, {} rows, {:.0} rows/s",
            self.produced.len(),
            self.done.iter().sum::<u64>(),
            self.rows,
            self.rows as f64 / secs
        );
    }
}

/// The source's `CREATE TABLE` of a table the target lacks, qualified with its database; run
/// on the target when `apply`.
async fn create_on_target(
    src: &mut mysql_async::Conn,
    sides: &Sides,
    shape: &TableShape,
    apply: bool,
) -> Result<String, CheckError> {
    let sql = format!("SHOW CREATE TABLE {}", shape.name());
    let row: Option<(String, String)> = src
        .query_first(&sql)
        .await
        .map_err(|e| sides.source.err(&sql, e))?;
    let (_, create) = row.ok_or_else(|| sides.source.err(&sql, "no row"))?;
    let unqualified = format!("CREATE TABLE {}", super::sql::ident(&shape.table));
    let create = match create.strip_prefix(&unqualified) {
        Some(rest) => format!("CREATE TABLE {}{rest}", shape.name()),
        None => create,
    };
    if apply {
        let mut tgt = sides.target.connect_for_repair(true, sides.replica).await?;
        tgt.query_drop(&create)
            .await
            .map_err(|e| sides.target.err(&create, e))?;
    }
    Ok(create)
}
