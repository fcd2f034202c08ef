//! Prepared statements of a session (COM_STMT_PREPARE, EXECUTE, FETCH, RESET, CLOSE and
//! SEND_LONG_DATA) and the binary result sets and cursors they answer with.

use std::sync::Arc;

use tibinlog_protocol::wire::errors::{
    ER_MALFORMED_PACKET, ER_MAX_PREPARED_STMT_COUNT_REACHED, ER_STMT_HAS_NO_OPEN_CURSOR,
    ER_UNKNOWN_STMT_HANDLER,
};
use tibinlog_protocol::wire::response::{encode_eof_into, ColumnSpec, ErrResponse, OkResponse};
use tibinlog_protocol::wire::stmt::Execute;
use tibinlog_protocol::wire::{ColumnFlags, ColumnType, StatusFlags};

use super::super::admin;
use super::super::reply::{QueryReply, Reply};
use super::super::session::ConnInfo;
use super::super::transport::{ConnError, PacketIo};
use super::send::{interrupted, send_err, send_ok, send_replies, send_result_set};

/// Most bytes COM_STMT_SEND_LONG_DATA may collect for one parameter (max_allowed_packet).
const MAX_LONG_DATA: usize = 64 << 20;

/// A prepared statement of a session.
struct Stmt {
    sql: String,
    params: usize,
    /// Parameter types bound by the last execute that sent them.
    types: Vec<(u8, bool)>,
    long_data: Vec<Option<Vec<u8>>>,
    /// The open cursor (CURSOR_TYPE_READ_ONLY), rows fetched by COM_STMT_FETCH.
    cursor: Option<QueryReply>,
}

/// The prepared statements of a session.
#[derive(Default)]
pub(super) struct Statements {
    map: std::collections::HashMap<u32, Stmt>,
    next_id: u32,
}

/// Most prepared statements one session may hold (MySQL's max_prepared_stmt_count is global).
const MAX_STATEMENTS: usize = 16_382;

impl Statements {
    /// Stores a prepared statement and answers COM_STMT_PREPARE.
    pub(super) async fn prepared(
        &mut self,
        io: &mut PacketIo,
        info: &ConnInfo,
        sql: String,
        p: admin::Prepared,
    ) -> Result<(), ConnError> {
        if self.map.len() >= MAX_STATEMENTS {
            return Ok(send_err(
                io,
                ER_MAX_PREPARED_STMT_COUNT_REACHED,
                &format!("Can't create more than max_prepared_stmt_count statements (current value: {MAX_STATEMENTS})"),
            )
            .await?);
        }
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let id = self.next_id;
        let no_eof = tibinlog_protocol::wire::response::deprecate_eof(info.capabilities);
        let mut p_buf = Vec::with_capacity(64);
        tibinlog_protocol::wire::stmt::encode_prepare_ok_into(
            id,
            u16::try_from(p.columns.len()).unwrap_or(u16::MAX),
            u16::try_from(p.params).unwrap_or(u16::MAX),
            &mut p_buf,
        );
        io.queue(&p_buf);
        for defs in [
            (0..p.params)
                .map(|_| ColumnSpec::new("?", ColumnType::MYSQL_TYPE_VAR_STRING, 63, 0))
                .collect::<Vec<_>>(),
            p.columns,
        ] {
            if defs.is_empty() {
                continue;
            }
            for c in &defs {
                p_buf.clear();
                c.encode_into(&mut p_buf);
                io.queue(&p_buf);
            }
            if !no_eof {
                p_buf.clear();
                encode_eof_into(0, StatusFlags::SERVER_STATUS_AUTOCOMMIT, &mut p_buf);
                io.queue(&p_buf);
            }
        }
        io.flush().await?;
        self.map.insert(
            id,
            Stmt {
                sql,
                params: p.params,
                types: Vec::new(),
                long_data: vec![None; p.params],
                cursor: None,
            },
        );
        Ok(())
    }

    /// COM_STMT_EXECUTE's statement text, its parameters bound (`None` when the statement or
    /// its parameters were refused, the client already told why).
    pub(super) async fn bind(
        &mut self,
        io: &mut PacketIo,
        info: &ConnInfo,
        ex: &Execute,
    ) -> Result<Option<String>, ConnError> {
        let Some(stmt) = self.map.get_mut(&ex.stmt_id) else {
            send_err(
                io,
                ER_UNKNOWN_STMT_HANDLER,
                &format!(
                    "Unknown prepared statement handler ({}) given to mysqld_stmt_execute",
                    ex.stmt_id
                ),
            )
            .await?;
            return Ok(None);
        };
        stmt.cursor = None;
        let params = match tibinlog_protocol::wire::stmt::decode_params(
            &ex.params,
            stmt.params,
            &mut stmt.types,
            &stmt.long_data,
        ) {
            Ok(p) => p,
            Err(e) => {
                send_err(io, ER_MALFORMED_PACKET, &e.to_string()).await?;
                return Ok(None);
            }
        };
        stmt.long_data.iter_mut().for_each(|d| *d = None);
        match admin::bind(&stmt.sql, &params) {
            Ok(sql) => Ok(Some(sql)),
            Err(reply) => {
                send_replies(io, info, vec![reply]).await?;
                Ok(None)
            }
        }
    }

    /// Answers COM_STMT_EXECUTE with the last of `replies`: a cursor's column definitions
    /// (the cursor kept for COM_STMT_FETCH) when the client asked for one, else the reply.
    pub(super) async fn executed(
        &mut self,
        io: &mut PacketIo,
        info: &ConnInfo,
        ex: &Execute,
        mut replies: Vec<Reply>,
    ) -> Result<(), ConnError> {
        let cursor = ex.flags & tibinlog_protocol::wire::stmt::CURSOR_TYPE_READ_ONLY != 0;
        match replies.pop() {
            Some(Reply::Query(q)) if cursor => {
                send_cursor_header(io, info, &q.columns).await?;
                if let Some(stmt) = self.map.get_mut(&ex.stmt_id) {
                    stmt.cursor = Some(q);
                }
            }
            Some(reply) => send_binary_reply(io, info, reply).await?,
            None => send_ok(io).await?,
        }
        Ok(())
    }

    /// COM_STMT_FETCH: up to `rows` rows of the statement's open cursor.
    pub(super) async fn fetch_cursor(
        &mut self,
        io: &mut PacketIo,
        info: &ConnInfo,
        stmt_id: u32,
        rows: u32,
    ) -> Result<(), ConnError> {
        let Some(q) = self.map.get_mut(&stmt_id).and_then(|s| s.cursor.take()) else {
            send_err(
                io,
                ER_STMT_HAS_NO_OPEN_CURSOR,
                &format!("The statement ({stmt_id}) has no open cursor."),
            )
            .await?;
            return Ok(());
        };
        let deprecate_eof = tibinlog_protocol::wire::response::deprecate_eof(info.capabilities);
        if let Some(q) = fetch(io, q, rows, deprecate_eof, info.interrupt.clone()).await? {
            if let Some(stmt) = self.map.get_mut(&stmt_id) {
                stmt.cursor = Some(q);
            }
        }
        Ok(())
    }

    /// COM_STMT_CLOSE: forgets the statement (no answer).
    pub(super) fn close(&mut self, id: u32) {
        self.map.remove(&id);
    }

    /// COM_STMT_RESET: closes the statement's cursor and drops its long data.
    pub(super) async fn reset(&mut self, io: &mut PacketIo, id: u32) -> Result<(), ConnError> {
        match self.map.get_mut(&id) {
            Some(stmt) => {
                stmt.cursor = None;
                stmt.long_data.iter_mut().for_each(|d| *d = None);
                send_ok(io).await?;
            }
            None => {
                send_err(
                    io,
                    ER_UNKNOWN_STMT_HANDLER,
                    &format!(
                        "Unknown prepared statement handler ({id}) given to mysqld_stmt_reset"
                    ),
                )
                .await?;
            }
        }
        Ok(())
    }

    /// COM_STMT_SEND_LONG_DATA: appends `data` to parameter `param` (no answer; past
    /// [`MAX_LONG_DATA`] bytes the rest is dropped).
    pub(super) fn append_long_data(&mut self, stmt_id: u32, param: u16, data: &[u8]) {
        if let Some(slot) = self
            .map
            .get_mut(&stmt_id)
            .and_then(|s| s.long_data.get_mut(usize::from(param)))
        {
            let total = slot.as_ref().map_or(0, Vec::len) + data.len();
            if total <= MAX_LONG_DATA {
                slot.get_or_insert_with(Vec::new).extend_from_slice(data);
            }
        }
    }
}

/// Column definitions of a cursor's result set, ending with SERVER_STATUS_CURSOR_EXISTS.
async fn send_cursor_header(
    io: &mut PacketIo,
    info: &ConnInfo,
    columns: &[ColumnSpec],
) -> Result<(), ConnError> {
    let mut p = Vec::with_capacity(256);
    tibinlog_protocol::wire::response::encode_column_count_into(columns.len(), &mut p);
    io.queue(&p);
    for c in columns {
        p.clear();
        c.encode_into(&mut p);
        io.queue(&p);
    }
    p.clear();
    let status = StatusFlags::SERVER_STATUS_AUTOCOMMIT | StatusFlags::SERVER_STATUS_CURSOR_EXISTS;
    if tibinlog_protocol::wire::response::deprecate_eof(info.capabilities) {
        OkResponse::new(status).encode_as_eof_into(&mut p);
    } else {
        encode_eof_into(0, status, &mut p);
    }
    io.queue(&p);
    io.flush().await?;
    Ok(())
}

/// COM_STMT_FETCH: up to `rows` binary rows of the cursor, then EOF or its OK form (with
/// SERVER_STATUS_LAST_ROW_SENT when the rows are exhausted). The cursor, if rows remain.
async fn fetch(
    io: &mut PacketIo,
    q: QueryReply,
    rows: u32,
    deprecate_eof: bool,
    interrupt: Arc<std::sync::atomic::AtomicBool>,
) -> Result<Option<QueryReply>, ConnError> {
    let codec = io.codec.clone();
    let task = tokio::task::spawn_blocking(move || {
        let mut q = q;
        let mut codec = codec;
        let mut out = Vec::new();
        let mut row = Vec::new();
        let (mut payload, mut cell) = (Vec::new(), Vec::new());
        let mut sent = 0u32;
        let mut done = false;
        let mut err = None;
        while sent < rows.max(1) {
            if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
                err = Some(interrupted());
                break;
            }
            match q.op.next(&mut row) {
                Ok(true) => {
                    payload.clear();
                    crate::sql::binary::write_binary_row(&row, &q.types, &mut payload, &mut cell);
                    codec.encode(&payload, &mut out);
                    sent += 1;
                }
                Ok(false) => {
                    done = true;
                    break;
                }
                Err(e) => {
                    err = Some(ErrResponse::new(e.code, e.message));
                    break;
                }
            }
        }
        (q, codec, out, done, err)
    });
    let (q, codec, out, done, err) = task
        .await
        .map_err(|e| ConnError::Internal(format!("fetch task failed: {e}")))?;
    io.queue_framed(&out);
    io.codec = codec;
    let mut p = Vec::new();
    if let Some(e) = err {
        e.encode_into(&mut p);
        io.queue(&p);
        io.flush().await?;
        return Ok(None);
    }
    let mut status =
        StatusFlags::SERVER_STATUS_AUTOCOMMIT | StatusFlags::SERVER_STATUS_CURSOR_EXISTS;
    if done {
        status |= StatusFlags::SERVER_STATUS_LAST_ROW_SENT;
    }
    // As after any rows: an OK packet with the 0xFE header when the client asked for
    // CLIENT_DEPRECATE_EOF (Connector/J takes a 5-byte EOF there for a row), else an EOF.
    if deprecate_eof {
        OkResponse::new(status).encode_as_eof_into(&mut p);
    } else {
        encode_eof_into(0, status, &mut p);
    }
    io.queue(&p);
    io.flush().await?;
    Ok((!done).then_some(q))
}

/// The answer to COM_STMT_EXECUTE without a cursor: a binary result set, OK or ERR.
async fn send_binary_reply(
    io: &mut PacketIo,
    info: &ConnInfo,
    reply: Reply,
) -> Result<(), ConnError> {
    let status = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
    match reply {
        Reply::Query(q) => {
            send_result_set(io, info, q, status, true).await?;
            io.flush().await?;
            Ok(())
        }
        Reply::Rows { columns, rows } => {
            // Static answers (SHOW MASTER STATUS …): text cells typed as their columns say.
            let types: Vec<crate::sql::types::SqlType> = columns
                .iter()
                .map(|c| match c.column_type {
                    ColumnType::MYSQL_TYPE_LONGLONG => {
                        let t = crate::sql::types::SqlType::bigint();
                        if c.flags.contains(ColumnFlags::UNSIGNED_FLAG) {
                            t.unsigned()
                        } else {
                            t
                        }
                    }
                    _ => crate::sql::types::SqlType::string(1024),
                })
                .collect();
            let values: Vec<Vec<tibinlog_protocol::value::Value>> = rows
                .into_iter()
                .map(|r| {
                    r.into_iter()
                        .zip(&types)
                        .map(|(v, t)| match v {
                            None => tibinlog_protocol::value::Value::Null,
                            Some(s) if t.is_integer() && t.unsigned => s
                                .parse()
                                .map(tibinlog_protocol::value::Value::UInt)
                                .unwrap_or(tibinlog_protocol::value::Value::Bytes(s.into_bytes())),
                            Some(s) if t.is_integer() => s
                                .parse()
                                .map(tibinlog_protocol::value::Value::Int)
                                .unwrap_or(tibinlog_protocol::value::Value::Bytes(s.into_bytes())),
                            Some(s) => tibinlog_protocol::value::Value::Bytes(s.into_bytes()),
                        })
                        .collect()
                })
                .collect();
            let q = QueryReply {
                columns,
                types,
                op: Box::new(crate::sql::exec::Values::new(values)),
            };
            send_result_set(io, info, q, status, true).await?;
            io.flush().await?;
            Ok(())
        }
        other => send_replies(io, info, vec![other]).await,
    }
}
