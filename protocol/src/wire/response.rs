//! Server responses: OK, ERR, EOF, column definitions and text result sets.
//!
//! ```text
//! OK       0x00 | affected rows (lenenc) | last insert id (lenenc) | status (2) | warnings (2) | [info (lenenc)]
//! OK-EOF   0xFE | same body  — ends a result set when CLIENT_DEPRECATE_EOF is in force
//! EOF      0xFE | warnings (2) | status (2)                               — classic terminator
//! ERR      0xFF | code (2) | '#' | SQL state (5) | message (rest)
//! ```
//!
//! The info string is length-encoded, as MySQL's `net_send_ok` writes it (mysql_common's
//! `CommonOkPacket` parser notes the same). We never offer CLIENT_SESSION_TRACK, so no session
//! state follows.
//!
//! A text result set (Protocol::Text::Resultset):
//!
//! ```text
//! column count (lenenc) | ColumnDefinition41 × n | [EOF] | row × m | EOF or OK-EOF
//!                                                   └── omitted under CLIENT_DEPRECATE_EOF
//! row = value × n, each a lenenc string, or 0xFB for NULL
//! ```
//!
//! Use the classic EOF framing unless the *negotiated* capabilities (ours ∩ the client's)
//! contain CLIENT_DEPRECATE_EOF: connector-java, Canal and PyMySQL never set it.
//!
//! ERR goes through `mysql_common::packets::ErrPacket`; OK, EOF, rows and column definitions
//! are written by hand (mysql_common has no OK/EOF serialiser, and its `Column` serialiser
//! swaps two fields, see [`ColumnSpec::encode_into`]).

use mysql_common::{
    io::BufMutExt,
    packets::{ErrPacket, ServerError, SqlState},
    proto::MySerialize,
};

use super::{
    errors::ErrorCode, CapabilityFlags, ColumnFlags, ColumnType, Result, StatusFlags, WireError,
};

/// Header byte of an OK packet.
pub const OK_HEADER: u8 = 0x00;
/// Header byte of EOF and of the OK that ends a result set under CLIENT_DEPRECATE_EOF.
pub const EOF_HEADER: u8 = 0xFE;
/// Header byte of an ERR packet.
pub const ERR_HEADER: u8 = 0xFF;
/// A NULL value in a text row.
pub const NULL_VALUE: u8 = 0xFB;

/// Collation id `binary` (63): what numeric columns carry.
pub const COLLATION_BINARY: u16 = 63;
/// Default collation of text columns: `utf8mb4_0900_ai_ci` (clients accept 255 or 33).
pub const COLLATION_TEXT: u16 = 255;

/// An OK packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OkResponse {
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: StatusFlags,
    pub warnings: u16,
    /// Human-readable info (e.g. "Rows matched: 1"); usually empty.
    pub info: String,
}

impl OkResponse {
    /// An OK with no rows, no warnings and the given status.
    pub fn new(status: StatusFlags) -> Self {
        Self {
            affected_rows: 0,
            last_insert_id: 0,
            status,
            warnings: 0,
            info: String::new(),
        }
    }

    /// Appends the OK payload (header 0x00) to `buf`.
    pub fn encode_into(&self, buf: &mut Vec<u8>) {
        self.encode_with_header(OK_HEADER, buf);
    }

    /// Appends this OK with header 0xFE: the result-set terminator under CLIENT_DEPRECATE_EOF.
    pub fn encode_as_eof_into(&self, buf: &mut Vec<u8>) {
        self.encode_with_header(EOF_HEADER, buf);
    }

    fn encode_with_header(&self, header: u8, buf: &mut Vec<u8>) {
        buf.push(header);
        buf.put_lenenc_int(self.affected_rows);
        buf.put_lenenc_int(self.last_insert_id);
        buf.extend_from_slice(&self.status.bits().to_le_bytes());
        buf.extend_from_slice(&self.warnings.to_le_bytes());
        if !self.info.is_empty() {
            buf.put_lenenc_str(self.info.as_bytes());
        }
    }

    /// The payload as a new vector.
    pub fn to_payload(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(7 + self.info.len());
        self.encode_into(&mut buf);
        buf
    }
}

/// Appends a classic EOF packet (`0xFE`, warnings, status) to `buf`.
pub fn encode_eof_into(warnings: u16, status: StatusFlags, buf: &mut Vec<u8>) {
    buf.push(EOF_HEADER);
    buf.extend_from_slice(&warnings.to_le_bytes());
    buf.extend_from_slice(&status.bits().to_le_bytes());
}

/// An ERR packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrResponse {
    pub error: ErrorCode,
    pub message: String,
}

impl ErrResponse {
    /// An ERR with the code's SQL state and the given message.
    pub fn new(error: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error,
            message: message.into(),
        }
    }

    /// Appends the ERR payload to `buf` (always in the CLIENT_PROTOCOL_41 form, with SQL state).
    pub fn encode_into(&self, buf: &mut Vec<u8>) {
        let err = ServerError::new(
            self.error.code,
            Some(SqlState::new(self.error.sql_state)),
            self.message.as_bytes(),
        );
        ErrPacket::Error(err).serialize(buf);
    }

    /// The payload as a new vector.
    pub fn to_payload(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(9 + self.message.len());
        self.encode_into(&mut buf);
        buf
    }
}

/// One column of a result set, in the terms of ColumnDefinition41.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    pub schema: String,
    pub table: String,
    pub org_table: String,
    /// The label clients address the column by (exact spelling matters: several read by label).
    pub name: String,
    pub org_name: String,
    pub charset: u16,
    /// Maximum display length.
    pub length: u32,
    pub column_type: ColumnType,
    pub flags: ColumnFlags,
    pub decimals: u8,
}

impl ColumnSpec {
    /// A text column (VAR_STRING, [`COLLATION_TEXT`]).
    pub fn text(name: impl Into<String>) -> Self {
        Self::new(
            name,
            ColumnType::MYSQL_TYPE_VAR_STRING,
            COLLATION_TEXT,
            1024,
        )
    }

    /// An unsigned 64-bit integer column (positions, sizes, server ids).
    pub fn unsigned(name: impl Into<String>) -> Self {
        let mut c = Self::new(name, ColumnType::MYSQL_TYPE_LONGLONG, COLLATION_BINARY, 20);
        c.flags = ColumnFlags::UNSIGNED_FLAG | ColumnFlags::NUM_FLAG;
        c
    }

    /// A signed 64-bit integer column.
    pub fn signed(name: impl Into<String>) -> Self {
        let mut c = Self::new(name, ColumnType::MYSQL_TYPE_LONGLONG, COLLATION_BINARY, 21);
        c.flags = ColumnFlags::NUM_FLAG;
        c
    }

    /// A column of any type; names other than `name` empty, no flags, no decimals.
    pub fn new(
        name: impl Into<String>,
        column_type: ColumnType,
        charset: u16,
        length: u32,
    ) -> Self {
        Self {
            schema: String::new(),
            table: String::new(),
            org_table: String::new(),
            name: name.into(),
            org_name: String::new(),
            charset,
            length,
            column_type,
            flags: ColumnFlags::empty(),
            decimals: 0,
        }
    }

    /// Sets the collation (e.g. 45 or 33 for a MariaDB-flavoured session).
    pub fn with_charset(mut self, charset: u16) -> Self {
        self.charset = charset;
        self
    }

    /// Sets schema and table (and their `org_` twins), as columns of a real table carry.
    pub fn with_table(mut self, schema: impl Into<String>, table: impl Into<String>) -> Self {
        self.schema = schema.into();
        self.table = table.into();
        self.org_table = self.table.clone();
        self.org_name = self.name.clone();
        self
    }

    /// Marks the column NOT NULL.
    pub fn not_null(mut self) -> Self {
        self.flags |= ColumnFlags::NOT_NULL_FLAG;
        self
    }

    /// Appends the ColumnDefinition41 payload to `buf`.
    ///
    /// ```text
    /// "def" | schema | table | org_table | name | org_name   (lenenc strings)
    /// 0x0c | charset (2) | length (4) | type (1) | flags (2) | decimals (1) | 0x00 0x00
    /// ```
    ///
    /// Hand-written: `mysql_common::packets::Column::serialize` (0.38.2) writes the length
    /// before the charset, the reverse of MySQL's layout and of its own parser.
    pub fn encode_into(&self, buf: &mut Vec<u8>) {
        buf.put_lenenc_str(b"def");
        for s in [
            &self.schema,
            &self.table,
            &self.org_table,
            &self.name,
            &self.org_name,
        ] {
            buf.put_lenenc_str(s.as_bytes());
        }
        buf.push(0x0c);
        buf.extend_from_slice(&self.charset.to_le_bytes());
        buf.extend_from_slice(&self.length.to_le_bytes());
        buf.push(self.column_type as u8);
        buf.extend_from_slice(&self.flags.bits().to_le_bytes());
        buf.push(self.decimals);
        buf.extend_from_slice(&[0, 0]);
    }
}

/// Appends the column-count packet payload of a result set.
pub fn encode_column_count_into(n: usize, buf: &mut Vec<u8>) {
    buf.put_lenenc_int(n as u64);
}

/// Appends `bytes` as a length-encoded string (a text-protocol cell).
pub fn put_lenenc_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.put_lenenc_str(bytes);
}

/// Appends one text-protocol row to `buf`: each value a lenenc string, NULL as 0xFB.
pub fn encode_text_row_into<V: AsRef<[u8]>>(
    values: impl IntoIterator<Item = Option<V>>,
    buf: &mut Vec<u8>,
) -> usize {
    let mut n = 0;
    for v in values {
        match v {
            Some(v) => buf.put_lenenc_str(v.as_ref()),
            None => buf.push(NULL_VALUE),
        }
        n += 1;
    }
    n
}

/// Whether result sets end with OK-EOF instead of EOF, given the negotiated capabilities.
pub fn deprecate_eof(negotiated: CapabilityFlags) -> bool {
    negotiated.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF)
}

/// Builds a whole text result set as payloads (not yet framed).
///
/// `negotiated` is ours ∩ the client's capabilities; `status` goes into the EOF/OK packets
/// (add SERVER_MORE_RESULTS_EXISTS for every result set but the last of a multi-statement).
/// Fails with [`WireError::RowWidth`] if a row has a different number of values than columns.
pub fn text_result_set<R, V>(
    columns: &[ColumnSpec],
    rows: impl IntoIterator<Item = R>,
    negotiated: CapabilityFlags,
    status: StatusFlags,
) -> Result<Vec<Vec<u8>>>
where
    R: IntoIterator<Item = Option<V>>,
    V: AsRef<[u8]>,
{
    let no_eof = deprecate_eof(negotiated);
    let mut out = Vec::with_capacity(columns.len() + 4);
    let mut count = Vec::with_capacity(9);
    count.put_lenenc_int(columns.len() as u64);
    out.push(count);
    for c in columns {
        let mut p = Vec::with_capacity(32 + c.name.len());
        c.encode_into(&mut p);
        out.push(p);
    }
    if !no_eof {
        let mut p = Vec::with_capacity(5);
        encode_eof_into(0, status, &mut p);
        out.push(p);
    }
    for row in rows {
        let mut p = Vec::new();
        let n = encode_text_row_into(row, &mut p);
        if n != columns.len() {
            return Err(WireError::RowWidth {
                columns: columns.len(),
                values: n,
            });
        }
        out.push(p);
    }
    let mut end = Vec::with_capacity(7);
    if no_eof {
        OkResponse::new(status).encode_as_eof_into(&mut end);
    } else {
        encode_eof_into(0, status, &mut end);
    }
    out.push(end);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_bytes() {
        let ok = OkResponse::new(StatusFlags::SERVER_STATUS_AUTOCOMMIT).to_payload();
        assert_eq!(ok, [0, 0, 0, 2, 0, 0, 0]);
        let mut eof = Vec::new();
        OkResponse::new(StatusFlags::SERVER_STATUS_AUTOCOMMIT).encode_as_eof_into(&mut eof);
        assert_eq!(eof, [0xfe, 0, 0, 2, 0, 0, 0]);
    }

    #[test]
    fn err_bytes() {
        let e = ErrResponse::new(crate::wire::errors::ER_UNKNOWN_COM_ERROR, "Unknown command");
        let mut want = vec![0xff, 0x17, 0x04, b'#'];
        want.extend_from_slice(b"08S01Unknown command");
        assert_eq!(e.to_payload(), want);
    }

    #[test]
    fn column_definition_golden_bytes() {
        let mut buf = Vec::new();
        ColumnSpec::unsigned("Position")
            .not_null()
            .encode_into(&mut buf);
        let mut want = vec![3, b'd', b'e', b'f', 0, 0, 0, 8];
        want.extend_from_slice(b"Position");
        want.push(0); // org_name
        want.push(0x0c);
        want.extend_from_slice(&[63, 0]); // charset binary, before the length
        want.extend_from_slice(&[20, 0, 0, 0]); // length
        want.push(8); // MYSQL_TYPE_LONGLONG
        want.extend_from_slice(&(1u16 | 32 | 32768).to_le_bytes()); // NOT_NULL|UNSIGNED|NUM
        want.extend_from_slice(&[0, 0, 0]); // decimals, filler
        assert_eq!(buf, want);
    }

    #[test]
    fn row_nulls_and_long_values() {
        let long = vec![b'x'; 300];
        let mut buf = Vec::new();
        let n = encode_text_row_into([Some(&b"ab"[..]), None, Some(&long[..])], &mut buf);
        assert_eq!(n, 3);
        assert_eq!(&buf[..4], &[2, b'a', b'b', 0xfb]);
        assert_eq!(&buf[4..7], &[0xfc, 0x2c, 0x01]);
        assert_eq!(buf.len(), 7 + 300);
    }

    #[test]
    fn result_set_framing_depends_on_deprecate_eof() -> Result<()> {
        let cols = [ColumnSpec::text("Variable_name"), ColumnSpec::text("Value")];
        let rows = vec![vec![Some("binlog_format"), Some("ROW")]];
        let st = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        let classic = text_result_set(&cols, rows.clone(), CapabilityFlags::empty(), st)?;
        assert_eq!(classic.len(), 1 + 2 + 1 + 1 + 1);
        assert_eq!(classic[3], [0xfe, 0, 0, 2, 0]);
        assert_eq!(classic[5], [0xfe, 0, 0, 2, 0]);
        let modern = text_result_set(&cols, rows, CapabilityFlags::CLIENT_DEPRECATE_EOF, st)?;
        assert_eq!(modern.len(), 1 + 2 + 1 + 1);
        assert_eq!(modern[4], [0xfe, 0, 0, 2, 0, 0, 0]);
        Ok(())
    }

    #[test]
    fn row_width_is_checked() {
        let cols = [ColumnSpec::text("a")];
        let r = text_result_set(
            &cols,
            [[Some("x"), Some("y")]],
            CapabilityFlags::empty(),
            StatusFlags::empty(),
        );
        assert!(matches!(
            r,
            Err(WireError::RowWidth {
                columns: 1,
                values: 2
            })
        ));
    }
}
