//! The answers a connection sends: OK and ERR, the replies to a query (result sets streamed
//! from the blocking pool as the rows are produced) and to COM_FIELD_LIST.

use tibinlog_protocol::wire::errors::ErrorCode;
use tibinlog_protocol::wire::response::{
    encode_eof_into, text_result_set, ColumnSpec, ErrResponse, OkResponse,
};
use tibinlog_protocol::wire::StatusFlags;

use super::super::reply::{QueryReply, Reply};
use super::super::session::ConnInfo;
use super::super::transport::{ConnError, PacketIo};

/// Sends an ERR packet.
pub(super) async fn send_err(io: &mut PacketIo, code: ErrorCode, msg: &str) -> std::io::Result<()> {
    io.send(&ErrResponse::new(code, msg).to_payload()).await
}

/// Sends an OK packet.
pub(super) async fn send_ok(io: &mut PacketIo) -> std::io::Result<()> {
    io.send(&OkResponse::new(StatusFlags::SERVER_STATUS_AUTOCOMMIT).to_payload())
        .await
}

/// Sends the answers to one COM_QUERY: every reply but the last carries
/// SERVER_MORE_RESULTS_EXISTS. An ERR ends the batch (MySQL stops at the first error).
pub(super) async fn send_replies(
    io: &mut PacketIo,
    info: &ConnInfo,
    replies: Vec<Reply>,
) -> Result<(), ConnError> {
    let n = replies.len();
    for (i, reply) in replies.into_iter().enumerate() {
        let mut status = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        if i + 1 < n {
            status |= StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        }
        match reply {
            Reply::Ok { affected, warnings } => {
                let mut ok = OkResponse::new(status);
                ok.affected_rows = affected;
                ok.warnings = u16::try_from(warnings.len()).unwrap_or(u16::MAX);
                io.queue(&ok.to_payload());
            }
            Reply::Err(e) => {
                io.queue(&e.to_payload());
                break;
            }
            Reply::Query(q) => {
                if !send_query(io, info, q, status).await? {
                    break;
                }
            }
            Reply::Rows { columns, rows } => {
                match text_result_set(&columns, rows, info.capabilities, status) {
                    Ok(payloads) => payloads.iter().for_each(|p| io.queue(p)),
                    Err(e) => {
                        let err = ErrResponse::new(
                            tibinlog_protocol::wire::errors::ER_UNKNOWN_ERROR,
                            e.to_string(),
                        );
                        io.queue(&err.to_payload());
                        break;
                    }
                }
            }
        }
    }
    io.flush().await?;
    Ok(())
}

/// One text-protocol row.
fn encode_text_row(
    row: &[tibinlog_protocol::value::Value],
    types: &[crate::sql::types::SqlType],
    payload: &mut Vec<u8>,
    cell: &mut Vec<u8>,
) {
    for (v, ty) in row.iter().zip(types) {
        cell.clear();
        if crate::sql::text::write_text(v, ty, cell) {
            tibinlog_protocol::wire::response::put_lenenc_bytes(payload, cell);
        } else {
            payload.push(0xFB);
        }
    }
}

/// COM_FIELD_LIST: the table's column definitions, then EOF (no rows).
pub(super) async fn send_field_list(
    io: &mut PacketIo,
    info: &ConnInfo,
    replies: Vec<Reply>,
) -> Result<(), ConnError> {
    let mut p = Vec::new();
    match replies.into_iter().next() {
        Some(Reply::Query(mut q)) => {
            let mut row = Vec::new();
            while let Ok(true) = q.op.next(&mut row) {
                let name = row
                    .first()
                    .map(|v| crate::sql::text::to_text(v, &q.types[0]).unwrap_or_default())
                    .unwrap_or_default();
                let spec = ColumnSpec::text(name);
                p.clear();
                spec.encode_into(&mut p);
                p.push(0xFB);
                io.queue(&p);
            }
            p.clear();
            encode_eof_into(0, StatusFlags::SERVER_STATUS_AUTOCOMMIT, &mut p);
            io.queue(&p);
            io.flush().await?;
            Ok(())
        }
        Some(other) => send_replies(io, info, vec![other]).await,
        None => send_ok(io).await.map_err(Into::into),
    }
}

/// Bytes of framed rows a query hands over at once.
const QUERY_CHUNK: usize = 64 << 10;

/// Chunks in flight between the query and the socket (the back-pressure bound).
const QUERY_CHUNKS_IN_FLIGHT: usize = 4;

/// Streams a query's result set: the column definitions, then rows as the operator produces
/// them on the blocking pool, framed there and handed over in chunks through a bounded channel
/// (a client that reads slowly holds the query back; one that goes away stops it), then the
/// end packet, or an ERR if the query fails midway. False when it ended with an ERR.
async fn send_query(
    io: &mut PacketIo,
    info: &ConnInfo,
    q: QueryReply,
    status: StatusFlags,
) -> Result<bool, ConnError> {
    send_result_set(io, info, q, status, false).await
}

/// MySQL's answer to a statement stopped by `KILL QUERY`.
pub(super) fn interrupted() -> ErrResponse {
    ErrResponse::new(
        tibinlog_protocol::wire::errors::ER_QUERY_INTERRUPTED,
        "Query execution was interrupted",
    )
}

/// [`send_query`] in the text (`binary = false`) or binary row format.
pub(super) async fn send_result_set(
    io: &mut PacketIo,
    info: &ConnInfo,
    q: QueryReply,
    status: StatusFlags,
    binary: bool,
) -> Result<bool, ConnError> {
    use tibinlog_protocol::wire::response::encode_column_count_into;
    let no_eof = tibinlog_protocol::wire::response::deprecate_eof(info.capabilities);
    let mut p = Vec::with_capacity(256);
    encode_column_count_into(q.columns.len(), &mut p);
    io.queue(&p);
    for c in &q.columns {
        p.clear();
        c.encode_into(&mut p);
        io.queue(&p);
    }
    if !no_eof {
        p.clear();
        encode_eof_into(0, status, &mut p);
        io.queue(&p);
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(QUERY_CHUNKS_IN_FLIGHT);
    let codec = io.codec.clone();
    let types = q.types;
    let mut op = q.op;
    let interrupt = info.interrupt.clone();
    let producer = tokio::task::spawn_blocking(move || {
        let mut codec = codec;
        let mut row = Vec::new();
        let mut payload = Vec::with_capacity(1024);
        let mut cell = Vec::with_capacity(256);
        let mut chunk = Vec::with_capacity(QUERY_CHUNK + 1024);
        let result = loop {
            if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
                break Err(interrupted());
            }
            match op.next(&mut row) {
                Ok(true) => {
                    payload.clear();
                    if binary {
                        crate::sql::binary::write_binary_row(&row, &types, &mut payload, &mut cell);
                    } else {
                        encode_text_row(&row, &types, &mut payload, &mut cell);
                    }
                    codec.encode(&payload, &mut chunk);
                    if chunk.len() >= QUERY_CHUNK {
                        let full =
                            std::mem::replace(&mut chunk, Vec::with_capacity(QUERY_CHUNK + 1024));
                        if tx.blocking_send(full).is_err() {
                            break Ok(());
                        }
                    }
                }
                Ok(false) => break Ok(()),
                Err(e) => break Err(ErrResponse::new(e.code, e.message)),
            }
        };
        if !chunk.is_empty() {
            let _ = tx.blocking_send(chunk);
        }
        (codec, result)
    });
    // The rows go out while they are produced; a client that stops reading for the session's
    // net_write_timeout, or a KILL of the connection, ends the statement (the producer stops
    // at its next send) and the connection.
    let mut write_failed = None;
    loop {
        let chunk = tokio::select! {
            c = rx.recv() => c,
            _ = info.cancel.cancelled() => {
                write_failed = Some(ConnError::Closed);
                break;
            }
        };
        let Some(chunk) = chunk else { break };
        io.queue_framed(&chunk);
        if io.pending() >= QUERY_CHUNK {
            let flushed = tokio::select! {
                r = io.flush_timed() => r,
                _ = info.cancel.cancelled() => {
                    write_failed = Some(ConnError::Closed);
                    break;
                }
            };
            if let Err(e) = flushed {
                write_failed = Some(e.into());
                break;
            }
        }
    }
    drop(rx);
    let (codec, result) = producer
        .await
        .map_err(|e| ConnError::Internal(format!("query task failed: {e}")))?;
    if let Some(e) = write_failed {
        return Err(e);
    }
    io.codec = codec;
    p.clear();
    let ok = match result {
        Ok(()) => {
            if no_eof {
                OkResponse::new(status).encode_as_eof_into(&mut p);
            } else {
                encode_eof_into(0, status, &mut p);
            }
            true
        }
        Err(e) => {
            e.encode_into(&mut p);
            false
        }
    };
    io.queue(&p);
    Ok(ok)
}
