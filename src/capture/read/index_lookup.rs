//! The second half of an index lookup: from a page of index entries (in index order) to the
//! record keys they point at, and from the rows fetched for those keys (in key order) back to
//! the index's order.

use bytes::Bytes;

use super::scan_merge::Pair;
use crate::tidb::index_value::index_entry_target;
use crate::tidb::key::{encode_record_key, table_id_of};

/// The record key each index entry of `entries` (an index over `columns` columns) points at.
pub fn record_keys(entries: &[Pair], columns: usize) -> Result<Vec<Vec<u8>>, String> {
    let mut keys = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let table = table_id_of(k).ok_or_else(|| format!("not an index key: {k:?}"))?;
        let target = index_entry_target(k, v, columns).map_err(|e| e.to_string())?;
        let mut key = Vec::with_capacity(32);
        encode_record_key(&mut key, target.partition.unwrap_or(table), &target.handle);
        keys.push(key);
    }
    Ok(keys)
}

/// `keys` ascending without repeats, for one batch read.
pub fn sorted_unique(keys: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut s = keys.to_vec();
    s.sort_unstable();
    s.dedup();
    s
}

/// The rows of `keys` in `keys`' order from `fetched` (sorted by key); `Err` names a key
/// without a row (an index entry pointing at nothing: the index and the table disagree).
pub fn in_order(keys: Vec<Vec<u8>>, fetched: &[(Bytes, Bytes)]) -> Result<Vec<Pair>, Vec<u8>> {
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        match fetched.binary_search_by(|(k, _)| k.as_ref().cmp(key.as_slice())) {
            Ok(i) => out.push((fetched[i].0.clone(), fetched[i].1.clone())),
            Err(_) => return Err(key),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tidb::codec::Datum;
    use crate::tidb::key::{index_key, record_key, Handle};

    #[test]
    fn entries_lead_to_their_rows_in_index_order() {
        // A non-unique index of table 7 over one column: (value, handle) in the key.
        let entry = |v: i64, h: i64| -> Pair {
            let k = index_key(7, 1, &[Datum::Int(v), Datum::Int(h)]).expect("key");
            (k.into(), Bytes::from_static(b"0"))
        };
        let entries = vec![entry(1, 30), entry(2, 10), entry(2, 20)];
        let keys = record_keys(&entries, 1).expect("keys");
        let want: Vec<Vec<u8>> = [30, 10, 20]
            .iter()
            .map(|&h| record_key(7, &Handle::Int(h)))
            .collect();
        assert_eq!(keys, want);
        let fetched: Vec<(Bytes, Bytes)> = sorted_unique(&keys)
            .into_iter()
            .map(|k| {
                let v = Bytes::from(k[k.len() - 1..].to_vec());
                (Bytes::from(k), v)
            })
            .collect();
        let rows = in_order(keys.clone(), &fetched).expect("rows");
        let got: Vec<Vec<u8>> = rows.iter().map(|(k, _)| k.to_vec()).collect();
        assert_eq!(got, keys);
        // A row that is not there is named.
        assert_eq!(in_order(keys.clone(), &fetched[1..]), Err(keys[1].clone()));
        // A unique entry keeps its handle in the value; a global one its partition too.
        let k = index_key(7, 2, &[Datum::Int(5)]).expect("key");
        let v = 99i64.to_be_bytes().to_vec();
        let keys = record_keys(&[(k.into(), v.into())], 1).expect("unique");
        assert_eq!(keys, vec![record_key(7, &Handle::Int(99))]);
    }
}
