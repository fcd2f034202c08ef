//! Pure checks and fix-ups of table definitions that DDLs share: key flags, lossless column
//! changes, exchange compatibility.

use crate::tidb::schema::{mysql, TableInfo};

/// Recomputes PRI_KEY / UNIQUE_KEY / MULTIPLE_KEY flags from the PK and the indexes.
pub(super) fn refresh_key_flags(t: &mut TableInfo) {
    let key_flags = mysql::PRI_KEY_FLAG | mysql::UNIQUE_KEY_FLAG | mysql::MULTIPLE_KEY_FLAG;
    for c in &mut t.columns {
        let was_pk = c.field_type.flag & mysql::PRI_KEY_FLAG != 0;
        c.field_type.flag &= !key_flags;
        if was_pk && t.pk_is_handle {
            c.field_type.flag |= mysql::PRI_KEY_FLAG;
        }
    }
    for idx in &t.indices {
        let Some(first) = idx.idx_cols.first() else {
            continue;
        };
        if idx.is_primary {
            for ic in &idx.idx_cols {
                if let Some(c) = t.columns.iter_mut().find(|c| c.offset == ic.offset) {
                    c.field_type.flag |= mysql::PRI_KEY_FLAG;
                }
            }
            continue;
        }
        if let Some(c) = t.columns.iter_mut().find(|c| c.offset == first.offset) {
            if idx.is_unique && idx.idx_cols.len() == 1 {
                c.field_type.flag |= mysql::UNIQUE_KEY_FLAG;
            } else if c.field_type.flag & (mysql::PRI_KEY_FLAG | mysql::UNIQUE_KEY_FLAG) == 0 {
                c.field_type.flag |= mysql::MULTIPLE_KEY_FLAG;
            }
        }
    }
}

/// Whether changing a column from `old` to `new` needs no reorg (TiDB's `needChangeColumnData`
/// is false): same family and signedness, not narrower, same charset.
pub(super) fn lossless_change(
    old: &crate::tidb::schema::FieldType,
    new: &crate::tidb::schema::FieldType,
) -> bool {
    let int_rank = |tp| match tp {
        mysql::TYPE_TINY => Some(1),
        mysql::TYPE_SHORT => Some(2),
        mysql::TYPE_INT24 => Some(3),
        mysql::TYPE_LONG => Some(4),
        mysql::TYPE_LONGLONG => Some(5),
        _ => None,
    };
    if let (Some(a), Some(b)) = (int_rank(old.tp), int_rank(new.tp)) {
        return b >= a && old.is_unsigned() == new.is_unsigned();
    }
    let varlen = |tp| matches!(tp, mysql::TYPE_VARCHAR | mysql::TYPE_VAR_STRING);
    let same_family = old.tp == new.tp || (varlen(old.tp) && varlen(new.tp));
    same_family
        && old.charset == new.charset
        && new.flen >= old.flen
        && old.decimal == new.decimal
        && old.elems == new.elems
}

/// TiDB's checks before an exchange (`checkExchangePartition`, `checkTableDefCompatible`):
/// `pt` partitioned and `nt` not; the same handle kind, charset and collation; the same
/// columns in the same order (name, type, id); the same indexes by name (kind, columns, id).
pub fn exchange_compatible(
    pt: &TableInfo,
    nt: &TableInfo,
) -> std::result::Result<(), &'static str> {
    if pt.partition.is_none() {
        return Err("the table is not partitioned");
    }
    if nt.partition.is_some() {
        return Err("the table to exchange with is partitioned");
    }
    let different = "tables have different definitions";
    if pt.pk_is_handle != nt.pk_is_handle
        || pt.is_common_handle != nt.is_common_handle
        || pt.charset != nt.charset
        || pt.collate != nt.collate
        || pt.columns.len() != nt.columns.len()
        || pt.indices.len() != nt.indices.len()
    {
        return Err(different);
    }
    let flags = mysql::UNSIGNED_FLAG
        | mysql::AUTO_INCREMENT_FLAG
        | mysql::NOT_NULL_FLAG
        | mysql::ZEROFILL_FLAG
        | mysql::BINARY_FLAG
        | mysql::PRI_KEY_FLAG;
    let mut pc: Vec<_> = pt.columns.iter().collect();
    let mut nc: Vec<_> = nt.columns.iter().collect();
    pc.sort_by_key(|c| c.offset);
    nc.sort_by_key(|c| c.offset);
    for (a, b) in pc.iter().zip(&nc) {
        let (x, y) = (&a.field_type, &b.field_type);
        let same_type = x.tp == y.tp
            && x.flen == y.flen
            && x.decimal == y.decimal
            && x.charset == y.charset
            && x.collate == y.collate
            && x.elems == y.elems
            && x.flag & flags == y.flag & flags;
        if a.name.l != b.name.l || !same_type || a.state != b.state || a.hidden != b.hidden {
            return Err(different);
        }
        if a.id != b.id {
            return Err("a column's id differs (different history)");
        }
    }
    for a in &pt.indices {
        let b = nt
            .indices
            .iter()
            .find(|b| b.idx_name.l == a.idx_name.l)
            .ok_or(different)?;
        let cols = |i: &crate::tidb::schema::IndexInfo| -> Vec<(String, i64)> {
            i.idx_cols
                .iter()
                .map(|c| (c.name.l.clone(), c.length))
                .collect()
        };
        if a.index_type != b.index_type
            || a.is_unique != b.is_unique
            || a.is_primary != b.is_primary
            || cols(a) != cols(b)
        {
            return Err(different);
        }
        if a.id != b.id {
            return Err("an index's id differs (different history)");
        }
    }
    Ok(())
}
