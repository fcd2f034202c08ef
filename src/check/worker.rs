//! The workers of a check: the walk of each table's key on the source that cuts it into
//! chunks, and the workers that check a chunk each (a [`ChunkCheck`] driven over one
//! connection to each side) and, with `--apply`, repair it in one transaction.

use std::sync::Arc;

use mysql_async::prelude::Queryable as _;
use tokio::sync::{mpsc, Mutex};

use super::plan::{Ask, ChunkCheck, RowDiff, Side, Sum};
use super::report::RowReport;
use super::sql::{KeyRange, Row, TableShape};
use super::CheckError;

/// A differing range with at most this many rows on each side is read row by row.
const ROWS_THRESHOLD: u64 = 512;

/// A table to walk: its index in the report, its shape, and whether the target lacks it
/// (then only its repair is built: the target side reads as empty).
#[derive(Clone)]
pub struct Walk {
    pub table: usize,
    pub shape: Arc<TableShape>,
    pub absent: bool,
}

/// A chunk for a worker.
pub struct Job {
    pub walk: Walk,
    pub range: KeyRange,
}

pub enum Msg {
    Chunk {
        table: usize,
        rows: (u64, u64),
        diffs: Vec<RowReport>,
        differences: u64,
        repair: Vec<String>,
        applied: u64,
        unlisted: bool,
    },
    /// Every chunk of the table was handed out.
    Produced { table: usize, chunks: u64 },
}

pub type Results = mpsc::UnboundedSender<Result<Msg, CheckError>>;

/// Walks each table's key on the source and hands out its chunks in key order.
pub async fn produce(
    mut src: mysql_async::Conn,
    walks: Vec<Walk>,
    chunk_rows: u64,
    jobs: mpsc::Sender<Job>,
    results: Results,
) {
    for walk in walks {
        let (table, shape) = (walk.table, walk.shape.clone());
        let mut chunks = 0;
        let mut lower: Option<Row> = None;
        loop {
            let upper = if shape.key.is_empty() {
                None
            } else {
                let range = KeyRange {
                    lower: lower.clone(),
                    upper: None,
                };
                let sql = shape.key_at_query(&range, chunk_rows - 1);
                match first_row(&mut src, &sql).await {
                    Ok(key) => key,
                    Err(e) => {
                        let _ = results.send(Err(CheckError::source(&sql, e)));
                        return;
                    }
                }
            };
            let range = KeyRange {
                lower: lower.take(),
                upper: upper.clone(),
            };
            chunks += 1;
            let job = Job {
                walk: walk.clone(),
                range,
            };
            if jobs.send(job).await.is_err() {
                return;
            }
            match upper {
                Some(k) => lower = Some(k),
                None => break,
            }
        }
        let _ = results.send(Ok(Msg::Produced { table, chunks }));
    }
}

fn cells(row: mysql_async::Row) -> Row {
    row.unwrap()
        .into_iter()
        .map(|v| match v {
            mysql_async::Value::NULL => None,
            mysql_async::Value::Bytes(b) => Some(b),
            other => Some(other.as_sql(true).into_bytes()),
        })
        .collect()
}

async fn first_row(
    conn: &mut mysql_async::Conn,
    sql: &str,
) -> Result<Option<Row>, mysql_async::Error> {
    let row: Option<mysql_async::Row> = conn.query_first(sql).await?;
    Ok(row.map(cells))
}

async fn all_rows(conn: &mut mysql_async::Conn, sql: &str) -> Result<Vec<Row>, mysql_async::Error> {
    let rows: Vec<mysql_async::Row> = conn.query(sql).await?;
    Ok(rows.into_iter().map(cells).collect())
}

async fn sum(conn: &mut mysql_async::Conn, sql: &str) -> Result<Sum, mysql_async::Error> {
    let row: Option<(u64, Option<u64>)> = conn.query_first(sql).await?;
    let (count, xor) = row.unwrap_or_default();
    Ok(Sum {
        count,
        xor: xor.unwrap_or(0),
    })
}

/// A worker: one connection to each side.
pub struct Worker {
    pub src: mysql_async::Conn,
    pub tgt: mysql_async::Conn,
    pub repair: bool,
    pub apply: bool,
    pub max_listed: usize,
}

impl Worker {
    pub async fn run(&mut self, jobs: Arc<Mutex<mpsc::Receiver<Job>>>, results: Results) {
        loop {
            let job = jobs.lock().await.recv().await;
            let Some(job) = job else { return };
            let msg = self.chunk(&job).await;
            let failed = msg.is_err();
            if results.send(msg).is_err() || failed {
                return;
            }
        }
    }

    async fn chunk(&mut self, job: &Job) -> Result<Msg, CheckError> {
        let shape = &*job.walk.shape;
        let absent = job.walk.absent;
        let mut c = ChunkCheck::new(shape, job.range.clone(), ROWS_THRESHOLD);
        while let Some(ask) = c.next_ask() {
            match ask {
                Ask::Sums(r) => {
                    let sql = shape.checksum_query(&r);
                    let (a, b) = tokio::join!(sum(&mut self.src, &sql), async {
                        match absent {
                            true => Ok(Sum::default()),
                            false => sum(&mut self.tgt, &sql).await,
                        }
                    });
                    let a = a.map_err(|e| CheckError::source(&sql, e))?;
                    let b = b.map_err(|e| CheckError::target(&sql, e))?;
                    c.on_sums(a, b)?;
                }
                Ask::KeyAt {
                    range,
                    side,
                    offset,
                } => {
                    let sql = shape.key_at_query(&range, offset);
                    let key = match side {
                        Side::Source => first_row(&mut self.src, &sql)
                            .await
                            .map_err(|e| CheckError::source(&sql, e))?,
                        Side::Target => first_row(&mut self.tgt, &sql)
                            .await
                            .map_err(|e| CheckError::target(&sql, e))?,
                    };
                    c.on_key(key)?;
                }
                Ask::Rows(r) => {
                    let sql = shape.rows_query(&r);
                    let (a, b) = tokio::join!(all_rows(&mut self.src, &sql), async {
                        match absent {
                            true => Ok(Vec::new()),
                            false => all_rows(&mut self.tgt, &sql).await,
                        }
                    });
                    let a = a.map_err(|e| CheckError::source(&sql, e))?;
                    let b = b.map_err(|e| CheckError::target(&sql, e))?;
                    c.on_rows(shape, a, b)?;
                }
            }
        }
        let repair = if self.repair {
            repair_statements(shape, &c.diffs)
        } else {
            Vec::new()
        };
        let applied = if self.apply && !repair.is_empty() {
            self.apply_repair(&repair).await?
        } else {
            0
        };
        let rows = c.rows.unwrap_or_default();
        // The rows of a table the target lacks are its repair, not differences to list.
        let listed = if absent { 0 } else { self.max_listed };
        Ok(Msg::Chunk {
            table: job.walk.table,
            rows,
            differences: if absent { 0 } else { c.diffs.len() as u64 },
            diffs: c
                .diffs
                .iter()
                .take(listed)
                .map(|d| RowReport::new(shape, d))
                .collect(),
            repair,
            applied,
            unlisted: c.unlisted,
        })
    }

    /// Runs one chunk's repair in one transaction on the target.
    async fn apply_repair(&mut self, statements: &[String]) -> Result<u64, CheckError> {
        let mut tx = self
            .tgt
            .start_transaction(mysql_async::TxOpts::default())
            .await
            .map_err(|e| CheckError::target("START TRANSACTION", e))?;
        for s in statements {
            tx.query_drop(s)
                .await
                .map_err(|e| CheckError::target(s, e))?;
        }
        tx.commit()
            .await
            .map_err(|e| CheckError::target("COMMIT", e))?;
        Ok(statements.len() as u64)
    }
}

/// The statements that make the target's rows of a chunk the source's: extra rows deleted
/// first, then missing and changed rows written whole.
pub fn repair_statements(shape: &TableShape, diffs: &[RowDiff]) -> Vec<String> {
    let mut out = Vec::with_capacity(diffs.len());
    for d in diffs {
        if let RowDiff::Extra { target } = d {
            out.push(shape.delete_statement(target));
        }
    }
    for d in diffs {
        match d {
            RowDiff::Missing { source } | RowDiff::Changed { source, .. } => {
                out.push(shape.replace_statement(source))
            }
            RowDiff::Extra { .. } => {}
        }
    }
    out
}
