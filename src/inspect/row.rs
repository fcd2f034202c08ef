//! `tibinlog inspect row --table-info FILE [--handle N | --key HEX] HEX`: a TiDB row value (row
//! format v1 or v2) decoded with the table's TableInfo JSON, printed as one JSON object
//! `{column: value}` in column order, each value the text MySQL's `SELECT` shows, or `null`.
//!
//! When the table's integer primary key is the row handle, that column is not in the value but
//! in the key: give `--key` (the record key) or `--handle`; without either it prints `null`.

use std::fmt::Write as _;

use crate::tidb::key::{decode_record_key, Handle};
use crate::tidb::rowcodec::RowCodec;
use crate::tidb::schema::TableInfo;
use crate::tidb::text::render;

/// Why a row could not be shown (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum InspectRowError {
    #[error("not hex")]
    Hex(#[from] hex::FromHexError),
    #[error("table info: {0}")]
    TableInfo(crate::tidb::Error),
    #[error("key: {0}")]
    Key(crate::tidb::Error),
    #[error("row value: {0}")]
    Row(crate::tidb::Error),
}

/// Where the row's handle comes from.
#[derive(Debug, Clone, Default)]
pub enum HandleArg {
    #[default]
    None,
    Int(i64),
    /// A record key in hex.
    Key(String),
}

/// Decodes `hex_row` with the TableInfo JSON `table_info` and returns the JSON text to print.
pub fn describe(
    table_info: &[u8],
    hex_row: &str,
    handle: &HandleArg,
) -> Result<String, InspectRowError> {
    let table = TableInfo::from_json(table_info).map_err(InspectRowError::TableInfo)?;
    let row = hex::decode(hex_row.trim())?;
    let handle = match handle {
        HandleArg::None => None,
        HandleArg::Int(h) => Some(Handle::Int(*h)),
        HandleArg::Key(k) => {
            let raw = hex::decode(k.trim())?;
            Some(decode_record_key(&raw).map_err(InspectRowError::Key)?.1)
        }
    };
    let codec = RowCodec::new(&table);
    let pk_handle = table.pk_handle_column().map(|c| c.id);
    // Without a handle the int-handle column cannot be known: decode with a placeholder and
    // show that column as null rather than refusing the whole row.
    let (used, unknown_handle) = match (&handle, pk_handle) {
        (None, Some(_)) => (Some(Handle::Int(0)), true),
        (h, _) => (h.clone(), false),
    };
    let mut values = Vec::new();
    codec
        .decode_into(&row, used.as_ref(), &mut values)
        .map_err(InspectRowError::Row)?;
    let cols = table.public_columns();
    let mut out = String::from("{");
    let mut first = true;
    for (id, value) in codec.columns().iter().zip(&values) {
        let Some(col) = cols.iter().find(|c| c.id == *id) else {
            continue;
        };
        if !first {
            out.push_str(", ");
        }
        first = false;
        let shown = if unknown_handle && Some(*id) == pk_handle {
            None
        } else {
            render(value, &col.field_type)
        };
        let _ = write!(
            out,
            "{}: {}",
            serde_json::Value::String(col.name.o.clone()),
            match shown {
                Some(s) => serde_json::Value::String(s),
                None => serde_json::Value::Null,
            }
        );
    }
    out.push('}');
    Ok(out)
}
