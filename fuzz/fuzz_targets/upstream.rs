//! What comes from TiKV and TiDB: keys (record, index, meta, region keys), row values (rowcodec
//! v2 and v1) decoded for a real table's schema, TiDB's binary JSON, decimals, datums, and the
//! schema JSON of tables, databases and DDL jobs. The first byte picks the decoder. Never a
//! panic.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tibinlog::tidb::schema::{DBInfo, Job, TableInfo};
use tibinlog::tidb::{codec, decimal, json, key, rowcodec};

fn orders() -> &'static TableInfo {
    static T: OnceLock<TableInfo> = OnceLock::new();
    T.get_or_init(|| {
        TableInfo::from_json(include_bytes!("../../tests/data/table_info_orders.json"))
            .expect("table info")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, b)) = data.split_first() else {
        return;
    };
    match sel % 10 {
        0 => {
            let _ = key::parse_key(b);
            let _ = key::decode_record_key(b);
            let _ = key::table_id_of(b);
        }
        1 => {
            let _ = key::decode_region_key(b);
            let _ = key::parse_meta_key(b);
        }
        2 => {
            let t = orders();
            let handle = key::Handle::Int(7);
            let _ = rowcodec::decode_row(b, t, Some(&handle));
            let _ = rowcodec::decode_row(b, t, None);
        }
        3 => {
            if let Ok(r) = rowcodec::RowSliceV2::parse(b) {
                for (id, v) in r.iter() {
                    let _ = (id, v.map(<[u8]>::len));
                }
                let _ = r.get(1);
            }
            for c in rowcodec::v1::iter(b).take(1024) {
                let _ = c;
            }
        }
        4 => {
            let _ = json::decode(b);
            if let Some((&tc, body)) = b.split_first() {
                let _ = json::decode_value(tc, body);
                let _ = json::binary_len(tc, body);
            }
        }
        5 => {
            if let [p, f, rest @ ..] = b {
                let _ = decimal::decode_bin(rest, *p, *f);
            }
            let _ = decimal::decode_datum_payload(b);
        }
        6 => {
            let _ = codec::decode_datums(b);
            let mut out = Vec::new();
            let _ = codec::decode_bytes(b, &mut out);
            let _ = codec::decode_compact_bytes(b);
        }
        7 => {
            if let Ok(t) = TableInfo::from_json(b) {
                let _ = t.physical_ids();
                let _ = t.pk_handle_column();
                let _ = t.public_columns();
            }
        }
        8 => {
            let _ = DBInfo::from_json(b);
            if let Ok(j) = Job::from_json(b) {
                let _ = j.is_done();
            }
        }
        _ => {
            if let Ok(text) = std::str::from_utf8(b) {
                if let Ok(c) = decimal::canonical(text) {
                    let _ = decimal::precision_and_frac(&c);
                }
            }
        }
    }
});
