//! TABLE_MAP_EVENT (19): binds a table id to a table's name, column types and metadata for the
//! rows events of one statement.
//!
//! ```text
//! post-header: | table id 6 (LE) | flags 2 (TM_BIT_LEN_EXACT_F = 1) |
//! body:
//! +----+--------+-----+----+-------+-----+---------+-----------+--------+----------+-------------+---------+
//! |len | schema | NUL |len | table | NUL | n       | n types   | meta   | metadata | NULL bitmap | TLVs    |
//! | 1  |        |     | 1  |       |     | lenenc  | 1 byte ea | lenenc | per type | ceil(n/8)   | to end  |
//! +----+--------+-----+----+-------+-----+---------+-----------+--------+----------+-------------+---------+
//! TLV: | type 1 | length lenenc | value |
//! ```
//! Optional metadata follows `binlog_row_metadata` (`Table_map_log_event::init_metadata_fields`):
//! MINIMAL writes SIGNEDNESS (1), DEFAULT_CHARSET (2) or COLUMN_CHARSET (3), GEOMETRY_TYPE (7);
//! FULL adds COLUMN_NAME (4), ENUM_AND_SET_DEFAULT_CHARSET (10) or _COLUMN_CHARSET (11),
//! SET_STR_VALUE (5), ENUM_STR_VALUE (6), SIMPLE_PRIMARY_KEY (8), COLUMN_VISIBILITY (12), in
//! that order (checked against a MySQL 8.0.28 file). For the charset TLVs the
//! smaller of the two encodings is chosen, DEFAULT (most used collation plus exceptions) on a tie.

use crate::binlog::codec::{lenenc_len, put_lenenc};
use crate::binlog::error::{BinlogError, Result};
use crate::binlog::header::EventType;
use crate::binlog::table::{ColumnDef, TableDef};
use crate::binlog::writer::EventBody;

/// `TM_BIT_LEN_EXACT_F`, the only flag MySQL sets.
pub const TM_BIT_LEN_EXACT_F: u16 = 0x0001;

/// Optional-metadata TLV types.
#[allow(missing_docs)]
pub mod tlv {
    pub const SIGNEDNESS: u8 = 1;
    pub const DEFAULT_CHARSET: u8 = 2;
    pub const COLUMN_CHARSET: u8 = 3;
    pub const COLUMN_NAME: u8 = 4;
    pub const SET_STR_VALUE: u8 = 5;
    pub const ENUM_STR_VALUE: u8 = 6;
    pub const GEOMETRY_TYPE: u8 = 7;
    pub const SIMPLE_PRIMARY_KEY: u8 = 8;
    pub const PRIMARY_KEY_WITH_PREFIX: u8 = 9;
    pub const ENUM_AND_SET_DEFAULT_CHARSET: u8 = 10;
    pub const ENUM_AND_SET_COLUMN_CHARSET: u8 = 11;
    pub const COLUMN_VISIBILITY: u8 = 12;
}

/// `binlog_row_metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowMetadata {
    /// No optional metadata (what MySQL before 8.0.1 writes).
    None,
    /// `MINIMAL`
    Minimal,
    /// `FULL` (names, ENUM/SET members, primary key): what python-mysql-replication needs.
    #[default]
    Full,
}

impl RowMetadata {
    /// The value as `@@binlog_row_metadata` shows it (`NONE` is not a MySQL 8.0 value: it is
    /// what MySQL 5.7 writes).
    pub fn name(self) -> &'static str {
        match self {
            RowMetadata::None => "NONE",
            RowMetadata::Minimal => "MINIMAL",
            RowMetadata::Full => "FULL",
        }
    }

    /// From [`Self::name`], in any case.
    pub fn parse(s: &str) -> Option<Self> {
        [RowMetadata::None, RowMetadata::Minimal, RowMetadata::Full]
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// A TABLE_MAP for `table`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableMap<'a> {
    pub table: &'a TableDef,
    pub metadata: RowMetadata,
}

impl<'a> TableMap<'a> {
    /// A TABLE_MAP with FULL optional metadata.
    pub fn new(table: &'a TableDef) -> Self {
        Self {
            table,
            metadata: RowMetadata::Full,
        }
    }
}

fn put_name(buf: &mut Vec<u8>, name: &str) -> Result<()> {
    let n = u8::try_from(name.len()).map_err(|_| BinlogError::TableDef {
        reason: "name longer than 255 bytes",
    })?;
    buf.push(n);
    buf.extend_from_slice(name.as_bytes());
    buf.push(0);
    Ok(())
}

/// Appends one TLV.
fn put_tlv(buf: &mut Vec<u8>, t: u8, value: &[u8]) {
    buf.push(t);
    put_lenenc(buf, value.len() as u64);
    buf.extend_from_slice(value);
}

/// Appends a bitmap over `bits`, most significant bit first.
fn put_msb_bitmap(out: &mut Vec<u8>, bits: impl Iterator<Item = bool>) {
    let mut byte = 0u8;
    let mut n = 0;
    for b in bits {
        if b {
            byte |= 0x80 >> n;
        }
        n += 1;
        if n == 8 {
            out.push(byte);
            byte = 0;
            n = 0;
        }
    }
    if n > 0 {
        out.push(byte);
    }
}

/// DEFAULT_CHARSET-style or COLUMN_CHARSET-style value for the columns selected by `pick`,
/// whichever is smaller. Returns None when no column is selected.
fn charset_tlv(
    cols: &[ColumnDef],
    pick: fn(&ColumnDef) -> bool,
    default_t: u8,
    column_t: u8,
) -> Option<(u8, Vec<u8>)> {
    let ids: Vec<u16> = cols
        .iter()
        .filter(|c| pick(c))
        .map(ColumnDef::collation_id)
        .collect();
    if ids.is_empty() {
        return None;
    }
    let mut counts: Vec<(u16, usize)> = Vec::new();
    for &id in &ids {
        match counts.iter_mut().find(|(c, _)| *c == id) {
            Some(e) => e.1 += 1,
            None => counts.push((id, 1)),
        }
    }
    // Most used; ties go to the smallest id, as iterating MySQL's std::map in key order does.
    counts.sort_unstable();
    let mut default = counts[0];
    for &c in &counts[1..] {
        if c.1 > default.1 {
            default = c;
        }
    }
    let default_id = default.0;
    let default_size = lenenc_len(u64::from(default_id))
        + ids
            .iter()
            .enumerate()
            .filter(|(_, &id)| id != default_id)
            .map(|(i, &id)| lenenc_len(i as u64) + lenenc_len(u64::from(id)))
            .sum::<usize>();
    let column_size: usize = ids.iter().map(|&id| lenenc_len(u64::from(id))).sum();
    let mut v = Vec::new();
    if default_size <= column_size {
        put_lenenc(&mut v, u64::from(default_id));
        for (i, &id) in ids.iter().enumerate() {
            if id != default_id {
                put_lenenc(&mut v, i as u64);
                put_lenenc(&mut v, u64::from(id));
            }
        }
        Some((default_t, v))
    } else {
        for &id in &ids {
            put_lenenc(&mut v, u64::from(id));
        }
        Some((column_t, v))
    }
}

fn put_str_values(buf: &mut Vec<u8>, t: u8, lists: &[&Vec<Vec<u8>>]) {
    if lists.is_empty() {
        return;
    }
    let mut v = Vec::new();
    for members in lists {
        put_lenenc(&mut v, members.len() as u64);
        for m in members.iter() {
            put_lenenc(&mut v, m.len() as u64);
            v.extend_from_slice(m);
        }
    }
    put_tlv(buf, t, &v);
}

impl TableMap<'_> {
    fn put_optional_metadata(&self, buf: &mut Vec<u8>) {
        use crate::binlog::table::ColumnKind as K;
        let cols = &self.table.columns;
        if self.metadata == RowMetadata::None {
            return;
        }
        if cols.iter().any(|c| c.kind.is_numeric()) {
            let mut v = Vec::new();
            put_msb_bitmap(
                &mut v,
                cols.iter()
                    .filter(|c| c.kind.is_numeric())
                    .map(|c| c.unsigned),
            );
            put_tlv(buf, tlv::SIGNEDNESS, &v);
        }
        if let Some((t, v)) = charset_tlv(
            cols,
            |c| c.kind.is_character(),
            tlv::DEFAULT_CHARSET,
            tlv::COLUMN_CHARSET,
        ) {
            put_tlv(buf, t, &v);
        }
        let geo: Vec<u8> = cols
            .iter()
            .filter_map(|c| match c.kind {
                K::Geometry { geometry_type } => Some(geometry_type),
                _ => None,
            })
            .collect();
        if !geo.is_empty() {
            let mut v = Vec::new();
            for g in geo {
                put_lenenc(&mut v, u64::from(g));
            }
            put_tlv(buf, tlv::GEOMETRY_TYPE, &v);
        }
        if self.metadata != RowMetadata::Full {
            return;
        }
        let mut v = Vec::new();
        for c in cols {
            put_lenenc(&mut v, c.name.len() as u64);
            v.extend_from_slice(c.name.as_bytes());
        }
        put_tlv(buf, tlv::COLUMN_NAME, &v);
        if let Some((t, v)) = charset_tlv(
            cols,
            |c| c.kind.is_enum_or_set(),
            tlv::ENUM_AND_SET_DEFAULT_CHARSET,
            tlv::ENUM_AND_SET_COLUMN_CHARSET,
        ) {
            put_tlv(buf, t, &v);
        }
        let sets: Vec<&Vec<Vec<u8>>> = cols
            .iter()
            .filter_map(|c| match &c.kind {
                K::Set { members, .. } => Some(members),
                _ => None,
            })
            .collect();
        put_str_values(buf, tlv::SET_STR_VALUE, &sets);
        let enums: Vec<&Vec<Vec<u8>>> = cols
            .iter()
            .filter_map(|c| match &c.kind {
                K::Enum { members, .. } => Some(members),
                _ => None,
            })
            .collect();
        put_str_values(buf, tlv::ENUM_STR_VALUE, &enums);
        if !self.table.primary_key.is_empty() {
            let mut v = Vec::new();
            for &i in &self.table.primary_key {
                put_lenenc(&mut v, u64::from(i));
            }
            put_tlv(buf, tlv::SIMPLE_PRIMARY_KEY, &v);
        }
        // 8.0.23+: every column is visible (invisible columns are not replicated from TiDB).
        let mut v = Vec::new();
        put_msb_bitmap(&mut v, cols.iter().map(|_| true));
        put_tlv(buf, tlv::COLUMN_VISIBILITY, &v);
    }
}

impl EventBody for TableMap<'_> {
    fn event_type(&self) -> EventType {
        EventType::TABLE_MAP
    }

    fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        let t = self.table;
        t.validate()?;
        buf.extend_from_slice(&t.table_id.to_le_bytes()[..6]);
        buf.extend_from_slice(&TM_BIT_LEN_EXACT_F.to_le_bytes());
        put_name(buf, &t.schema)?;
        put_name(buf, &t.table)?;
        put_lenenc(buf, t.columns.len() as u64);
        for c in &t.columns {
            buf.push(c.kind.binlog_type());
        }
        // The metadata block is preceded by its lenenc length.
        let mut meta = Vec::with_capacity(t.columns.len() * 2);
        for c in &t.columns {
            c.kind.put_metadata(&mut meta);
        }
        put_lenenc(buf, meta.len() as u64);
        buf.extend_from_slice(&meta);
        let at = buf.len();
        buf.resize(at + t.bitmap_len(), 0);
        for (i, c) in t.columns.iter().enumerate() {
            if c.nullable {
                buf[at + i / 8] |= 1 << (i % 8);
            }
        }
        self.put_optional_metadata(buf);
        Ok(())
    }
}
