//! Row values: format detection, per-type interpretation by the column's `FieldType`, handle
//! columns, and defaults for columns missing from a row.
//!
//! The hot path is [`RowCodec::decode_into`]: it fills a caller-owned `Vec<Value>` in the
//! table's column order, reusing the `Vec` and, for string and decimal cells, the existing
//! `String`/`Vec<u8>` buffers of the previous row, so decoding a row of fixed-size columns does
//! not allocate. Everything that depends only on the schema (kinds, handle positions, default
//! values) is computed once in [`RowCodec::new`].
//!
//! # Columns
//!
//! The output holds the table's **public, non-hidden** columns ordered by `offset` (what a
//! replica's `SHOW CREATE TABLE` lists), see [`RowCodec::columns`]. Column cells come from, in
//! order of preference:
//!
//! 1. the int handle of the row key for the `pk_is_handle` column (never stored in values);
//! 2. the row value (v2: `0x80` first byte; anything else: v1 datum pairs);
//! 3. for a clustered common-handle PK column missing from the value, the key's datum
//!    (a collation sort key for `_ci` strings: only a last resort);
//! 4. `origin_default` (converted to the column type; TIMESTAMP defaults are taken as UTC),
//!    else NULL for nullable columns, else the type's zero value (ENUM: first member).
//!
//! Virtual generated columns are never stored, so they come out as (4); evaluating the
//! expression is the caller's business.
//!
//! # Types
//!
//! | column type | `Value` |
//! |---|---|
//! | TINYINT..BIGINT | `Int`, or `UInt` when UNSIGNED |
//! | FLOAT / DOUBLE | `Float` (the stored f64 narrowed) / `Double` |
//! | DECIMAL | `Decimal` text with exactly the column's scale (rounded half-up if stored differently) |
//! | CHAR..LONGBLOB, VECTOR | `Bytes` |
//! | DATE / DATETIME / TIMESTAMP | `Date` / `DateTime` / `Timestamp` (seconds since epoch, UTC) |
//! | TIME | `Time` |  YEAR | `Year` |  ENUM | `Enum` |  SET | `Set` |  BIT | `Bit` |  JSON | `Json` |

pub mod v1;
pub mod v2;

use tibinlog_protocol::value::{Date, DateTime, Time, Value};

use super::codec::{float_to_comparable, Datum, DatumRef};
use super::error::{Error, Result};
use super::key::Handle;
use super::schema::{mysql, ColumnInfo, FieldType, TableInfo};
use super::{decimal, json, time};

pub use v2::{Column, RowSliceV2};

/// How a column's cells are interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    UInt,
    Year,
    Float,
    Double,
    Decimal,
    Bytes,
    Date,
    DateTime,
    Timestamp,
    Duration,
    Enum,
    Set,
    Bit,
    Json,
    Null,
    Unsupported,
}

fn kind_of(ft: &FieldType) -> Kind {
    use mysql::*;
    match ft.tp {
        TYPE_TINY | TYPE_SHORT | TYPE_INT24 | TYPE_LONG | TYPE_LONGLONG => {
            if ft.is_unsigned() {
                Kind::UInt
            } else {
                Kind::Int
            }
        }
        TYPE_YEAR => Kind::Year,
        TYPE_FLOAT => Kind::Float,
        TYPE_DOUBLE => Kind::Double,
        TYPE_NEWDECIMAL | TYPE_DECIMAL => Kind::Decimal,
        TYPE_VARCHAR
        | TYPE_VAR_STRING
        | TYPE_STRING
        | TYPE_TINY_BLOB
        | TYPE_MEDIUM_BLOB
        | TYPE_LONG_BLOB
        | TYPE_BLOB
        | TYPE_GEOMETRY
        | TYPE_TIDB_VECTOR_FLOAT32 => Kind::Bytes,
        TYPE_DATE | TYPE_NEWDATE => Kind::Date,
        TYPE_DATETIME => Kind::DateTime,
        TYPE_TIMESTAMP => Kind::Timestamp,
        TYPE_DURATION => Kind::Duration,
        TYPE_ENUM => Kind::Enum,
        TYPE_SET => Kind::Set,
        TYPE_BIT => Kind::Bit,
        TYPE_JSON => Kind::Json,
        TYPE_NULL => Kind::Null,
        _ => Kind::Unsupported,
    }
}

/// Where a column's value comes from when the row value lacks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HandleSource {
    None,
    /// The int handle of the key.
    Int,
    /// Position in the common handle's datum tuple.
    Common(usize),
}

#[derive(Debug, Clone)]
struct ColPlan {
    id: i64,
    tp: u8,
    kind: Kind,
    /// Column scale for DECIMAL (-1 = keep the stored one); fsp for time types.
    decimal: i32,
    /// Precision for DECIMAL encoding (flen, <= 0 = the value's own).
    flen: i64,
    handle: HandleSource,
    /// Virtual generated column: never written to row values.
    virtual_generated: bool,
    /// Value for rows that lack the column (precomputed; the error only surfaces when used).
    missing: std::result::Result<Value, Error>,
}

/// A decoded cell before interpretation by column type.
#[derive(Debug, Clone, Copy)]
enum Raw<'a> {
    Null,
    Int(i64),
    Uint(u64),
    Float(f64),
    Bytes(&'a [u8]),
    Decimal {
        precision: u8,
        frac: u8,
        bin: &'a [u8],
    },
    Json(&'a [u8]),
}

/// Schema-derived decoder/encoder of one table's row values.
#[derive(Debug, Clone)]
pub struct RowCodec {
    cols: Vec<ColPlan>,
    ids: Vec<i64>,
}

impl RowCodec {
    /// Prepares the per-column plans of `table`.
    pub fn new(table: &TableInfo) -> Self {
        let public: Vec<&ColumnInfo> = table
            .public_columns()
            .into_iter()
            .filter(|c| !c.hidden)
            .collect();
        let pk_handle_id = table.pk_handle_column().map(|c| c.id);
        let common_pk: Vec<i64> = if table.is_common_handle {
            table
                .primary_index()
                .map(|idx| {
                    idx.idx_cols
                        .iter()
                        .filter_map(|ic| table.columns.get(ic.offset).map(|c| c.id))
                        .collect()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let cols: Vec<ColPlan> = public
            .iter()
            .map(|c| {
                let kind = kind_of(&c.field_type);
                let handle = if Some(c.id) == pk_handle_id {
                    HandleSource::Int
                } else if let Some(pos) = common_pk.iter().position(|&id| id == c.id) {
                    HandleSource::Common(pos)
                } else {
                    HandleSource::None
                };
                ColPlan {
                    id: c.id,
                    tp: c.field_type.tp,
                    kind,
                    decimal: c.field_type.decimal,
                    flen: c.field_type.flen,
                    handle,
                    virtual_generated: c.is_virtual_generated(),
                    missing: missing_value(c, kind),
                }
            })
            .collect();
        let ids = cols.iter().map(|c| c.id).collect();
        RowCodec { cols, ids }
    }

    /// Column ids of the output, in output order.
    pub fn columns(&self) -> &[i64] {
        &self.ids
    }

    /// Decodes a row value (v2 or v1) into `out`, one cell per [`columns`](Self::columns)
    /// entry. `handle` is the handle from the row key (needed for `pk_is_handle` tables).
    /// An empty value (a delete) is an error: decode the old value instead.
    pub fn decode_into(
        &self,
        row: &[u8],
        handle: Option<&Handle>,
        out: &mut Vec<Value>,
    ) -> Result<()> {
        self.decode_columns(row, handle, None, out)
    }

    /// [`decode_into`](Self::decode_into) of the columns `wanted` marks (`None`: all); the
    /// others are left NULL without being read.
    pub fn decode_columns(
        &self,
        row: &[u8],
        handle: Option<&Handle>,
        wanted: Option<&[bool]>,
        out: &mut Vec<Value>,
    ) -> Result<()> {
        if row.is_empty() {
            return Err(Error::Truncated {
                what: "row value",
                need: 1,
                have: 0,
            });
        }
        if out.len() != self.cols.len() {
            out.resize(self.cols.len(), Value::Null);
        }
        let mut common: Option<Vec<DatumRef<'_>>> = None;
        if row[0] == v2::CODEC_VER {
            let r = RowSliceV2::parse(row)?;
            for (i, (plan, slot)) in self.cols.iter().zip(out.iter_mut()).enumerate() {
                if skipped(wanted, i) {
                    *slot = Value::Null;
                    continue;
                }
                let col = r.get(plan.id);
                if plan.handle == HandleSource::Int && handle.is_some() {
                    int_handle(plan, handle, slot)?;
                    continue;
                }
                match col {
                    Column::Value(b) => raw_to_value(plan, payload_to_raw(plan, b)?, slot)?,
                    Column::Null => *slot = Value::Null,
                    Column::Absent => fill_absent(plan, handle, &mut common, slot)?,
                }
            }
        } else {
            let pairs: Vec<(i64, DatumRef<'_>)> = v1::iter(row).collect::<Result<_>>()?;
            for (i, (plan, slot)) in self.cols.iter().zip(out.iter_mut()).enumerate() {
                if skipped(wanted, i) {
                    *slot = Value::Null;
                    continue;
                }
                if plan.handle == HandleSource::Int && handle.is_some() {
                    int_handle(plan, handle, slot)?;
                    continue;
                }
                match pairs.iter().find(|(id, _)| *id == plan.id) {
                    Some((_, d)) => raw_to_value(plan, datum_to_raw(d), slot)?,
                    None => fill_absent(plan, handle, &mut common, slot)?,
                }
            }
        }
        Ok(())
    }

    /// Encodes `values` (one per [`columns`](Self::columns) entry) as a v2 row, appending to
    /// `out`. The int-handle column and virtual generated columns are not written.
    pub fn encode_v2(&self, values: &[Value], out: &mut Vec<u8>) -> Result<()> {
        self.check_len(values)?;
        let mut payloads: Vec<Vec<u8>> = Vec::with_capacity(values.len());
        let mut ids = Vec::with_capacity(values.len());
        for (plan, v) in self.cols.iter().zip(values) {
            if plan.handle == HandleSource::Int || plan.virtual_generated {
                continue;
            }
            let mut p = Vec::new();
            let not_null = value_to_payload(plan, v, &mut p)?;
            ids.push((plan.id, not_null));
            payloads.push(p);
        }
        let cols: Vec<(i64, Option<&[u8]>)> = ids
            .iter()
            .zip(&payloads)
            .map(|(&(id, nn), p)| (id, nn.then_some(&p[..])))
            .collect();
        v2::encode(&cols, out)
    }

    /// Encodes `values` as a v1 (old format) row, appending to `out`.
    pub fn encode_v1(&self, values: &[Value], out: &mut Vec<u8>) -> Result<()> {
        self.check_len(values)?;
        let mut cols = Vec::with_capacity(values.len());
        for (plan, v) in self.cols.iter().zip(values) {
            if plan.handle == HandleSource::Int || plan.virtual_generated {
                continue;
            }
            cols.push((plan.id, value_to_datum(plan, v)?));
        }
        v1::encode(&cols, out)
    }

    fn check_len(&self, values: &[Value]) -> Result<()> {
        if values.len() != self.cols.len() {
            return Err(Error::ColumnCount {
                expected: self.cols.len(),
                got: values.len(),
            });
        }
        Ok(())
    }
}

/// Decodes one row value of `table` (convenience; prefer a reused [`RowCodec`]).
pub fn decode_row(row: &[u8], table: &TableInfo, handle: Option<&Handle>) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    RowCodec::new(table).decode_into(row, handle, &mut out)?;
    Ok(out)
}

/// Encodes values (in [`RowCodec::columns`] order) of `table` as a v2 row.
pub fn encode_row_v2(table: &TableInfo, values: &[Value]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    RowCodec::new(table).encode_v2(values, &mut out)?;
    Ok(out)
}

/// Whether column `i` is left out of a decode of the `wanted` columns.
fn skipped(wanted: Option<&[bool]>, i: usize) -> bool {
    wanted.is_some_and(|w| !w.get(i).copied().unwrap_or(true))
}

fn int_handle(plan: &ColPlan, handle: Option<&Handle>, slot: &mut Value) -> Result<()> {
    match handle {
        Some(Handle::Int(h)) => raw_to_value(plan, Raw::Int(*h), slot),
        _ => Err(Error::MissingHandle { column_id: plan.id }),
    }
}

fn fill_absent<'h>(
    plan: &ColPlan,
    handle: Option<&'h Handle>,
    common: &mut Option<Vec<DatumRef<'h>>>,
    slot: &mut Value,
) -> Result<()> {
    match (plan.handle, handle) {
        (HandleSource::Int, _) => return Err(Error::MissingHandle { column_id: plan.id }),
        (HandleSource::Common(pos), Some(h @ Handle::Common(_))) => {
            if common.is_none() {
                *common = Some(h.common_datums()?);
            }
            if let Some(d) = common.as_ref().and_then(|c| c.get(pos)) {
                return raw_to_value(plan, datum_to_raw(d), slot);
            }
        }
        _ => {}
    }
    match &plan.missing {
        Ok(v) => {
            slot.clone_from(v);
            Ok(())
        }
        Err(e) => Err(e.clone()),
    }
}

fn corrupted(detail: &'static str) -> Error {
    Error::Corrupted {
        what: "row value",
        detail,
    }
}

/// Interprets a v2 payload by column kind.
#[inline]
fn payload_to_raw<'a>(plan: &ColPlan, b: &'a [u8]) -> Result<Raw<'a>> {
    Ok(match plan.kind {
        Kind::Int | Kind::Year | Kind::Duration => Raw::Int(v2::decode_int_payload(b)?),
        Kind::UInt
        | Kind::Date
        | Kind::DateTime
        | Kind::Timestamp
        | Kind::Enum
        | Kind::Set
        | Kind::Bit => Raw::Uint(v2::decode_uint_payload(b)?),
        Kind::Float | Kind::Double => {
            let a: [u8; 8] = b
                .try_into()
                .map_err(|_| corrupted("float payload not 8 bytes"))?;
            Raw::Float(super::codec::comparable_to_float(u64::from_be_bytes(a)))
        }
        Kind::Decimal => match b {
            [precision, frac, bin @ ..] => Raw::Decimal {
                precision: *precision,
                frac: *frac,
                bin,
            },
            _ => return Err(corrupted("decimal payload shorter than 2 bytes")),
        },
        Kind::Bytes => Raw::Bytes(b),
        Kind::Json => Raw::Json(b),
        Kind::Null => Raw::Null,
        Kind::Unsupported => {
            return Err(Error::UnsupportedType {
                column_id: plan.id,
                tp: plan.tp,
            })
        }
    })
}

fn datum_to_raw<'a>(d: &'a DatumRef<'_>) -> Raw<'a> {
    match d {
        DatumRef::Null | DatumRef::Max => Raw::Null,
        DatumRef::Int(i) | DatumRef::Duration(i) => Raw::Int(*i),
        DatumRef::Uint(u) => Raw::Uint(*u),
        DatumRef::Float(f) => Raw::Float(*f),
        DatumRef::Bytes(b) => Raw::Bytes(b),
        DatumRef::VectorFloat32(b) => Raw::Bytes(b),
        DatumRef::Decimal {
            precision,
            frac,
            bin,
        } => Raw::Decimal {
            precision: *precision,
            frac: *frac,
            bin,
        },
        DatumRef::Json(j) => Raw::Json(j),
    }
}

#[inline]
fn set_bytes(slot: &mut Value, b: &[u8]) {
    if let Value::Bytes(v) = slot {
        v.clear();
        v.extend_from_slice(b);
    } else {
        *slot = Value::Bytes(b.to_vec());
    }
}

fn raw_kind(r: &Raw<'_>) -> &'static str {
    match r {
        Raw::Null => "null",
        Raw::Int(_) => "int",
        Raw::Uint(_) => "uint",
        Raw::Float(_) => "float",
        Raw::Bytes(_) => "bytes",
        Raw::Decimal { .. } => "decimal",
        Raw::Json(_) => "json",
    }
}

/// Interprets a raw cell as the column's `Value`, writing into `slot`.
#[inline]
fn raw_to_value(plan: &ColPlan, raw: Raw<'_>, slot: &mut Value) -> Result<()> {
    let mismatch = || Error::TypeMismatch {
        column_id: plan.id,
        tp: plan.tp,
        found: raw_kind(&raw),
    };
    let as_u64 = || match raw {
        Raw::Int(i) => Some(i as u64),
        Raw::Uint(u) => Some(u),
        _ => None,
    };
    if let Raw::Null = raw {
        *slot = Value::Null;
        return Ok(());
    }
    *slot = match plan.kind {
        Kind::Int => Value::Int(as_u64().ok_or_else(mismatch)? as i64),
        Kind::UInt => Value::UInt(as_u64().ok_or_else(mismatch)?),
        Kind::Year => Value::Year(
            u16::try_from(as_u64().ok_or_else(mismatch)? as i64).map_err(|_| mismatch())?,
        ),
        Kind::Float => match raw {
            Raw::Float(f) => Value::Float(f as f32),
            _ => return Err(mismatch()),
        },
        Kind::Double => match raw {
            Raw::Float(f) => Value::Double(f),
            _ => return Err(mismatch()),
        },
        Kind::Decimal => {
            let (precision, frac, bin) = match raw {
                Raw::Decimal {
                    precision,
                    frac,
                    bin,
                } => (precision, frac, bin),
                // Very old TiDB (tablecodec.flatten before the binary decimal) stored
                // decimals in v1 rows as their text.
                Raw::Bytes(b) => {
                    let t = std::str::from_utf8(b).map_err(|_| mismatch())?;
                    *slot = Value::Decimal(if plan.decimal >= 0 {
                        decimal::rescale(t, plan.decimal.clamp(0, 30) as u8)?
                    } else {
                        decimal::canonical(t)?
                    });
                    return Ok(());
                }
                _ => return Err(mismatch()),
            };
            if !matches!(slot, Value::Decimal(_)) {
                *slot = Value::Decimal(String::new());
            }
            if let Value::Decimal(s) = slot {
                decimal::decode_bin_into(bin, precision, frac, s)?;
                if plan.decimal >= 0 && i32::from(frac) != plan.decimal {
                    *s = decimal::rescale(s, plan.decimal.clamp(0, 30) as u8)?;
                }
            }
            return Ok(());
        }
        Kind::Bytes => match raw {
            Raw::Bytes(b) => {
                set_bytes(slot, b);
                return Ok(());
            }
            _ => return Err(mismatch()),
        },
        Kind::Date => Value::Date(time::unpack_datetime(as_u64().ok_or_else(mismatch)?)?.date),
        Kind::DateTime => Value::DateTime(time::unpack_datetime(as_u64().ok_or_else(mismatch)?)?),
        Kind::Timestamp => {
            let dt = time::unpack_datetime(as_u64().ok_or_else(mismatch)?)?;
            let (seconds, micros) = time::datetime_to_timestamp(&dt)?;
            Value::Timestamp { seconds, micros }
        }
        Kind::Duration => Value::Time(time::duration_from_nanos(
            as_u64().ok_or_else(mismatch)? as i64
        )?),
        Kind::Enum => {
            Value::Enum(u16::try_from(as_u64().ok_or_else(mismatch)?).map_err(|_| mismatch())?)
        }
        Kind::Set => Value::Set(as_u64().ok_or_else(mismatch)?),
        Kind::Bit => Value::Bit(as_u64().ok_or_else(mismatch)?),
        Kind::Json => match raw {
            Raw::Json(b) => Value::Json(json::decode(b)?),
            _ => return Err(mismatch()),
        },
        Kind::Null => Value::Null,
        Kind::Unsupported => {
            return Err(Error::UnsupportedType {
                column_id: plan.id,
                tp: plan.tp,
            })
        }
    };
    Ok(())
}

// ---------------------------------------------------------------- defaults

fn zero_value(col: &ColumnInfo, kind: Kind) -> Value {
    match kind {
        Kind::Int => Value::Int(0),
        Kind::UInt => Value::UInt(0),
        Kind::Year => Value::Year(0),
        Kind::Float => Value::Float(0.0),
        Kind::Double => Value::Double(0.0),
        Kind::Decimal => Value::Decimal(
            decimal::rescale("0", col.field_type.decimal.clamp(0, 30) as u8)
                .unwrap_or_else(|_| "0".to_owned()),
        ),
        Kind::Bytes => Value::Bytes(Vec::new()),
        Kind::Date => Value::Date(Date::default()),
        Kind::DateTime => Value::DateTime(DateTime::default()),
        Kind::Timestamp => Value::Timestamp {
            seconds: 0,
            micros: 0,
        },
        Kind::Duration => Value::Time(Time::default()),
        Kind::Enum => Value::Enum(u16::from(!col.field_type.elems.is_empty())),
        Kind::Set => Value::Set(0),
        Kind::Bit => Value::Bit(0),
        Kind::Json => Value::Json(tibinlog_protocol::value::Json::Null),
        Kind::Null | Kind::Unsupported => Value::Null,
    }
}

fn be_uint(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x))
}

/// The value of a column for rows written before it existed.
fn missing_value(col: &ColumnInfo, kind: Kind) -> Result<Value> {
    let bad = |v: &dyn std::fmt::Display| Error::BadDefault {
        column: col.name.o.clone(),
        value: v.to_string(),
    };
    if kind == Kind::Bit {
        if let Some(b64) = &col.origin_default_bit {
            // `origin_default_bit` is the default's bytes as Go's JSON writes `[]byte`:
            // standard base64 with padding.
            let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64)
                .map_err(|_| bad(b64))?;
            return Ok(Value::Bit(be_uint(&bytes)));
        }
    }
    let text = match &col.origin_default {
        serde_json::Value::Null => {
            return Ok(if col.field_type.is_not_null() {
                zero_value(col, kind)
            } else {
                Value::Null
            })
        }
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Bool(b) => u8::from(*b).to_string(),
        other => other.to_string(),
    };
    let t = text.as_str();
    Ok(match kind {
        Kind::Int => Value::Int(
            t.trim()
                .parse::<i64>()
                .or_else(|_| t.trim().parse::<f64>().map(|f| f.round() as i64))
                .map_err(|_| bad(&t))?,
        ),
        Kind::UInt => Value::UInt(
            t.trim()
                .parse::<u64>()
                .or_else(|_| t.trim().parse::<f64>().map(|f| f.round() as u64))
                .map_err(|_| bad(&t))?,
        ),
        Kind::Year => Value::Year(t.trim().parse::<u16>().map_err(|_| bad(&t))?),
        Kind::Float => Value::Float(t.trim().parse::<f32>().map_err(|_| bad(&t))?),
        Kind::Double => Value::Double(t.trim().parse::<f64>().map_err(|_| bad(&t))?),
        Kind::Decimal => Value::Decimal(if col.field_type.decimal >= 0 {
            decimal::rescale(t, col.field_type.decimal.clamp(0, 30) as u8)?
        } else {
            decimal::canonical(t)?
        }),
        Kind::Bytes => Value::Bytes(t.as_bytes().to_vec()),
        Kind::Date => Value::Date(time::parse_datetime(t)?.date),
        Kind::DateTime => Value::DateTime(time::parse_datetime(t)?),
        Kind::Timestamp => {
            let (seconds, micros) = time::datetime_to_timestamp(&time::parse_datetime(t)?)?;
            Value::Timestamp { seconds, micros }
        }
        Kind::Duration => Value::Time(time::parse_duration(t)?),
        Kind::Enum => {
            let elems = &col.field_type.elems;
            match elems.iter().position(|e| e.eq_ignore_ascii_case(t)) {
                Some(i) => Value::Enum(u16::try_from(i + 1).map_err(|_| bad(&t))?),
                None if t.is_empty() => Value::Enum(0),
                None => Value::Enum(t.parse().map_err(|_| bad(&t))?),
            }
        }
        Kind::Set => {
            let elems = &col.field_type.elems;
            let mut mask = 0u64;
            for name in t.split(',').filter(|n| !n.is_empty()) {
                let i = elems
                    .iter()
                    .position(|e| e.eq_ignore_ascii_case(name))
                    .ok_or_else(|| bad(&t))?;
                mask |= 1u64.checked_shl(i as u32).ok_or_else(|| bad(&t))?;
            }
            Value::Set(mask)
        }
        Kind::Bit => Value::Bit(be_uint(t.as_bytes())),
        Kind::Json => Value::Json(json::from_serde(
            &serde_json::from_str(t).map_err(|_| bad(&t))?,
        )),
        Kind::Null => Value::Null,
        Kind::Unsupported => {
            return Err(Error::UnsupportedType {
                column_id: col.id,
                tp: col.field_type.tp,
            })
        }
    })
}

// ---------------------------------------------------------------- encoding

fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "float",
        Value::Double(_) => "double",
        Value::Decimal(_) => "decimal",
        Value::Bytes(_) => "bytes",
        Value::Date(_) => "date",
        Value::DateTime(_) => "datetime",
        Value::Timestamp { .. } => "timestamp",
        Value::Time(_) => "time",
        Value::Year(_) => "year",
        Value::Enum(_) => "enum",
        Value::Set(_) => "set",
        Value::Bit(_) => "bit",
        Value::Json(_) => "json",
    }
}

/// Converts a `Value` to the datum TiDB would store (flattened as `tablecodec.flatten` does).
fn value_to_datum(plan: &ColPlan, v: &Value) -> Result<Datum> {
    let mismatch = || Error::ValueMismatch {
        column_id: plan.id,
        tp: plan.tp,
        found: value_kind(v),
    };
    Ok(match (plan.kind, v) {
        (_, Value::Null) => Datum::Null,
        (Kind::Int, Value::Int(i)) => Datum::Int(*i),
        (Kind::Int, Value::UInt(u)) => Datum::Int(*u as i64),
        (Kind::UInt, Value::UInt(u)) => Datum::Uint(*u),
        (Kind::UInt, Value::Int(i)) => Datum::Uint(*i as u64),
        (Kind::Year, Value::Year(y)) => Datum::Int(i64::from(*y)),
        (Kind::Year, Value::Int(i)) => Datum::Int(*i),
        (Kind::Float, Value::Float(f)) => Datum::Float(f64::from(*f)),
        (Kind::Double, Value::Double(f)) => Datum::Float(*f),
        (Kind::Double, Value::Float(f)) => Datum::Float(f64::from(*f)),
        (Kind::Decimal, Value::Decimal(t)) => {
            let (p, f) = if plan.flen > 0 && plan.decimal >= 0 {
                (plan.flen.min(65) as u8, plan.decimal.clamp(0, 30) as u8)
            } else {
                decimal::precision_and_frac(t)?
            };
            Datum::Decimal {
                text: t.clone(),
                precision: p,
                frac: f,
            }
        }
        (Kind::Bytes, Value::Bytes(b)) => Datum::Bytes(b.clone()),
        (Kind::Date, Value::Date(d)) => Datum::Uint(time::pack_date(d)),
        (Kind::DateTime, Value::DateTime(dt)) => Datum::Uint(time::pack_datetime(dt)),
        (Kind::Timestamp, Value::Timestamp { seconds, micros }) => Datum::Uint(
            time::pack_datetime(&time::timestamp_to_datetime(*seconds, *micros)),
        ),
        (Kind::Duration, Value::Time(t)) => Datum::Int(time::duration_to_nanos(t)),
        (Kind::Enum, Value::Enum(e)) => Datum::Uint(u64::from(*e)),
        (Kind::Set, Value::Set(s)) => Datum::Uint(*s),
        (Kind::Bit, Value::Bit(b)) => Datum::Uint(*b),
        (Kind::Json, Value::Json(j)) => {
            let mut b = Vec::new();
            json::encode(&mut b, j)?;
            Datum::Json(b)
        }
        _ => return Err(mismatch()),
    })
}

/// Appends the v2 payload of `v`; returns false for NULL (no payload).
fn value_to_payload(plan: &ColPlan, v: &Value, buf: &mut Vec<u8>) -> Result<bool> {
    match value_to_datum(plan, v)? {
        Datum::Null => return Ok(false),
        Datum::Int(i) => v2::encode_int_payload(buf, i),
        Datum::Uint(u) => v2::encode_uint_payload(buf, u),
        Datum::Float(f) => buf.extend_from_slice(&float_to_comparable(f).to_be_bytes()),
        Datum::Decimal {
            text,
            precision,
            frac,
        } => decimal::encode_datum_payload(buf, &text, precision, frac)?,
        Datum::Bytes(b) => buf.extend_from_slice(&b),
        Datum::Json(j) => buf.extend_from_slice(&j),
        Datum::Duration(ns) => v2::encode_int_payload(buf, ns),
        Datum::MinNotNull | Datum::Max => return Ok(false),
    }
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
