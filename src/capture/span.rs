//! Span helpers in the **encoded** key domain.
//!
//! PD region boundaries and `cdcpb` request keys are `EncodeBytes(raw)`; row keys from TiKV are
//! raw. Every comparison here is between encoded keys: a row key is encoded first
//! ([`encode_key_into`]). Memcomparable encoding preserves order but not prefixes, so a raw key
//! must never be compared with an encoded one.
//!
//! An empty start key is −∞ and an empty end key is +∞. TiCDC substitutes `FF FF FF FF FF` for an
//! empty end before comparing; no encoded TiDB key (they start with `t` or `m`) reaches that
//! value, so the true +∞ used here orders every key the same way.

use std::cmp::Ordering;

use crate::model::{end_cmp, Span, TableId};
use crate::tidb::codec::{encode_bytes, encoded_bytes_len};
use crate::tidb::key::record_span_encoded;

/// The encoded record span of a table, `[enc(t{id}_r), enc(t{id}_s))`: what a table
/// subscription watches (index keys excluded).
pub fn table_record_span(table: TableId) -> Span {
    let (start, end) = record_span_encoded(table.0);
    Span { start, end }
}

/// Encodes the raw key `raw` into `buf` (cleared first), reusing its allocation.
pub fn encode_key_into(raw: &[u8], buf: &mut Vec<u8>) {
    buf.clear();
    buf.reserve(encoded_bytes_len(raw.len()));
    encode_bytes(buf, raw);
}

/// True if the **raw** row key `raw` belongs to the encoded span; `scratch` holds the encoding.
pub fn contains_raw_key(span: &Span, raw: &[u8], scratch: &mut Vec<u8>) -> bool {
    encode_key_into(raw, scratch);
    span.contains(scratch)
}

/// The overlap of two spans, or `None` if they share no key (TiCDC `spanz.Intersect`). Used to
/// cut a table span down to a region's `[start, end)` before requesting it.
pub fn intersect(a: &Span, b: &Span) -> Option<Span> {
    let start = if a.start >= b.start {
        &a.start
    } else {
        &b.start
    };
    let end = if end_cmp(&a.end, &b.end) == Ordering::Less {
        &a.end
    } else {
        &b.end
    };
    let s = Span {
        start: start.clone(),
        end: end.clone(),
    };
    (!s.is_empty()).then_some(s)
}

/// Cuts `span` at every boundary strictly inside it (region start keys, in any order,
/// duplicates allowed). The pieces are contiguous, ascending, and cover `span` exactly.
pub fn split_at<'a>(span: &Span, boundaries: impl IntoIterator<Item = &'a [u8]>) -> Vec<Span> {
    let mut cuts: Vec<&[u8]> = boundaries
        .into_iter()
        .filter(|b| {
            !b.is_empty() && *b > span.start.as_slice() && end_cmp(b, &span.end) == Ordering::Less
        })
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut start = span.start.clone();
    for cut in cuts {
        out.push(Span {
            start: std::mem::replace(&mut start, cut.to_vec()),
            end: cut.to_vec(),
        });
    }
    out.push(Span {
        start,
        end: span.end.clone(),
    });
    out
}

/// The first part of `span` not covered by `pieces` (spans sorted by start, as PD's
/// `ScanRegions` returns regions), or `None` if they cover it completely. A range request
/// retries when PD's answer has a hole.
pub fn first_gap(span: &Span, pieces: &[Span]) -> Option<Span> {
    // Invariant: the part of `span` below `at` is covered (`at` empty = nothing covered yet).
    let mut at = span.start.clone();
    let reached_end = |at: &[u8]| !span.end.is_empty() && at >= span.end.as_slice();
    for p in pieces {
        if reached_end(&at) {
            return None;
        }
        if p.start > at {
            let end = if end_cmp(&p.start, &span.end) == Ordering::Less {
                p.start.clone()
            } else {
                span.end.clone()
            };
            return Some(Span { start: at, end });
        }
        if p.end.is_empty() {
            return None;
        }
        if p.end > at {
            at = p.end.clone();
        }
    }
    (!reached_end(&at)).then(|| Span {
        start: at,
        end: span.end.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tidb::key::{encode_region_key, record_key, Handle};

    fn s(a: &str, b: &str) -> Span {
        Span::new(a.as_bytes().to_vec(), b.as_bytes().to_vec())
    }

    #[test]
    fn intersect_follows_ticdc() {
        let cases = [
            (s("b", "d"), s("a", "c"), Some(s("b", "c"))),
            (s("b", "d"), s("", ""), Some(s("b", "d"))),
            (s("b", ""), s("a", "c"), Some(s("b", "c"))),
            (s("b", ""), s("c", ""), Some(s("c", ""))),
            (s("b", "d"), s("d", "e"), None),
            (s("b", "d"), s("", "b"), None),
            (s("", ""), s("", ""), Some(s("", ""))),
        ];
        for (a, b, want) in cases {
            assert_eq!(intersect(&a, &b), want, "{a:?} ∩ {b:?}");
            assert_eq!(intersect(&b, &a), want, "{b:?} ∩ {a:?}");
        }
    }

    #[test]
    fn raw_keys_are_compared_encoded() {
        let table = table_record_span(TableId(42));
        let mut buf = Vec::new();
        let row = record_key(42, &Handle::Int(7));
        assert!(contains_raw_key(&table, &row, &mut buf));
        assert_eq!(buf, encode_region_key(&row));
        assert!(!contains_raw_key(
            &table,
            &record_key(43, &Handle::Int(7)),
            &mut buf
        ));
        assert!(!contains_raw_key(
            &table,
            &record_key(41, &Handle::Int(i64::MAX)),
            &mut buf
        ));
        // The raw record prefix compared raw against an encoded bound would be wrong: the
        // encoded start is longer than the raw prefix and sorts after it.
        let raw_prefix = crate::tidb::key::record_prefix(42);
        assert!(!table.contains(&raw_prefix));
        assert!(contains_raw_key(&table, &raw_prefix, &mut buf));
    }

    #[test]
    fn split_and_gaps() {
        let span = s("b", "f");
        let cuts: [&[u8]; 5] = [b"d", b"a", b"c", b"d", b"f"];
        assert_eq!(
            split_at(&span, cuts),
            vec![s("b", "c"), s("c", "d"), s("d", "f")]
        );
        assert_eq!(
            split_at(&s("", ""), [b"m".as_slice()]),
            vec![s("", "m"), s("m", "")]
        );
        assert_eq!(split_at(&span, []), vec![span.clone()]);

        assert_eq!(first_gap(&span, &[s("a", "c"), s("c", "")]), None);
        assert_eq!(
            first_gap(&span, &[s("a", "c"), s("d", "")]),
            Some(s("c", "d"))
        );
        assert_eq!(first_gap(&span, &[s("c", "g")]), Some(s("b", "c")));
        assert_eq!(first_gap(&span, &[s("a", "e")]), Some(s("e", "f")));
        assert_eq!(first_gap(&span, &[]), Some(span.clone()));
        assert_eq!(first_gap(&s("b", ""), &[s("a", "x")]), Some(s("x", "")));
        assert_eq!(first_gap(&s("b", ""), &[s("a", "x"), s("x", "")]), None);
    }
}
