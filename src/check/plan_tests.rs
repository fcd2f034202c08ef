//! Event scripts for [`ChunkCheck`]: two in-memory sides answer its questions as a server
//! would (rows in key order, sums as XORs of row digests).

use std::collections::BTreeMap;

use super::*;
use crate::check::sql::Column;

fn shape(key: Vec<usize>) -> TableShape {
    let col = |name: &str, data_type: &str, collation: Option<&str>| Column {
        name: name.into(),
        column_type: data_type.into(),
        kind: LiteralKind::of(data_type),
        generated: false,
        collation: collation.map(str::to_owned),
    };
    TableShape {
        db: "d".into(),
        table: "t".into(),
        columns: vec![
            col("id", "bigint", None),
            col("v", "varchar", Some("utf8mb4_general_ci")),
        ],
        key,
    }
}

fn cell(s: impl ToString) -> Cell {
    Some(s.to_string().into_bytes())
}

fn row(id: u64, v: &str) -> Row {
    vec![cell(format!("{id:08}")), cell(v)]
}

/// One side: rows by key (ids are zero-padded, so byte order is key order).
type SideRows = BTreeMap<Row, Row>;

fn in_range(r: &KeyRange, key: &Row) -> bool {
    r.lower.as_ref().is_none_or(|l| key > l) && r.upper.as_ref().is_none_or(|u| key <= u)
}

fn digest(row: &Row) -> u64 {
    // FNV-1a over the cells and their NULL flags: a stand-in for the MD5 of the SQL.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for c in row {
        for b in c.as_deref().unwrap_or(b"\xff\xfeNULL") {
            h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
        h = (h ^ 0x2c).wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn sum(side: &SideRows, r: &KeyRange) -> Sum {
    side.iter()
        .filter(|(k, _)| in_range(r, k))
        .fold(Sum::default(), |s, (_, row)| Sum {
            count: s.count + 1,
            xor: s.xor ^ digest(row),
        })
}

#[derive(Default, Debug)]
struct Reads {
    sums: usize,
    keys: usize,
    rows: usize,
}

/// Runs a check of `range` over both sides to the end.
fn run(shape: &TableShape, src: &SideRows, tgt: &SideRows, threshold: u64) -> (ChunkCheck, Reads) {
    let mut c = ChunkCheck::new(shape, KeyRange::all(), threshold);
    let mut reads = Reads::default();
    while let Some(ask) = c.next_ask() {
        match ask {
            Ask::Sums(r) => {
                reads.sums += 1;
                c.on_sums(sum(src, &r), sum(tgt, &r))
                    .expect("an answer that fits");
            }
            Ask::KeyAt {
                range,
                side,
                offset,
            } => {
                reads.keys += 1;
                let rows = if side == Side::Source { src } else { tgt };
                let key = rows
                    .keys()
                    .filter(|k| in_range(&range, k))
                    .nth(offset as usize)
                    .cloned();
                c.on_key(key).expect("an answer that fits");
            }
            Ask::Rows(r) => {
                let pick = |s: &SideRows| -> Vec<Row> {
                    s.iter()
                        .filter(|(k, _)| in_range(&r, k))
                        .map(|(_, v)| v.clone())
                        .collect()
                };
                let (a, b) = (pick(src), pick(tgt));
                reads.rows += a.len() + b.len();
                c.on_rows(shape, a, b).expect("an answer that fits");
            }
        }
    }
    (c, reads)
}

fn side(rows: impl IntoIterator<Item = Row>) -> SideRows {
    rows.into_iter().map(|r| (vec![r[0].clone()], r)).collect()
}

#[test]
fn equal_sides_cost_one_sum_read() {
    let s = shape(vec![0]);
    let a = side((0..10_000).map(|i| row(i, "x")));
    let (c, reads) = run(&s, &a, &a.clone(), 16);
    assert!(c.diffs.is_empty());
    assert_eq!(c.rows, Some((10_000, 10_000)));
    assert_eq!((reads.sums, reads.keys, reads.rows), (1, 0, 0));
}

#[test]
fn bisection_reads_only_the_rows_around_each_difference() {
    let s = shape(vec![0]);
    let src = side((0..10_000).map(|i| row(i, "x")));
    let mut tgt = src.clone();
    tgt.remove(&vec![cell(format!("{:08}", 17))]); // missing on the target
    let extra = row(20_000, "new");
    tgt.insert(vec![extra[0].clone()], extra.clone()); // extra on the target
    let changed = row(7_777, "changed");
    tgt.insert(vec![changed[0].clone()], changed.clone());
    let (c, reads) = run(&s, &src, &tgt, 16);
    assert_eq!(
        c.diffs,
        vec![
            RowDiff::Missing {
                source: row(17, "x")
            },
            RowDiff::Changed {
                source: row(7_777, "x"),
                target: changed,
                columns: vec![1]
            },
            RowDiff::Extra { target: extra },
        ]
    );
    // Three differences: each costs a bisection path (about log2(10000/16) levels) and one
    // small read per side, never the whole table.
    assert!(reads.rows <= 3 * 2 * 16 + 8, "{reads:?}");
    assert!(reads.sums <= 3 * 12 + 1, "{reads:?}");
}

#[test]
fn a_side_with_many_more_rows_is_split_on_that_side() {
    let s = shape(vec![0]);
    let src = side((0..10).map(|i| row(i, "x")));
    let tgt = side((0..5_000).map(|i| row(i, "x")));
    let (c, reads) = run(&s, &src, &tgt, 64);
    assert_eq!(c.diffs.len(), 4_990);
    assert!(c.diffs.iter().all(|d| matches!(d, RowDiff::Extra { .. })));
    assert!(reads.keys > 0, "{reads:?}");
    assert_eq!(reads.rows, 10 + 5_000, "every row read once: {reads:?}");
}

#[test]
fn case_and_trailing_spaces_compare_as_the_collation_does() {
    let s = shape(vec![0]);
    let src = side([row(1, "Abc"), row(2, "x")]);
    let tgt = side([row(1, "aBC  "), row(2, "y")]);
    let (c, _) = run(&s, &src, &tgt, 16);
    // The sums differ (the texts do), but only row 2 differs under utf8mb4_general_ci.
    assert_eq!(
        c.diffs,
        vec![RowDiff::Changed {
            source: row(2, "x"),
            target: row(2, "y"),
            columns: vec![1]
        }]
    );
}

#[test]
fn a_keyless_table_is_compared_as_multisets() {
    let s = shape(vec![]);
    let src = vec![row(1, "a"), row(1, "a"), row(2, "b")];
    let tgt = vec![row(1, "a"), row(2, "b"), row(3, "c")];
    let mut out = Vec::new();
    diff_rows(&s, src, tgt, &mut out);
    assert_eq!(
        out,
        vec![
            RowDiff::Missing {
                source: row(1, "a")
            },
            RowDiff::Extra {
                target: row(3, "c")
            }
        ]
    );
}

#[test]
fn answers_that_fit_no_question_are_errors() {
    let s = shape(vec![0]);
    let mut c = ChunkCheck::new(&s, KeyRange::all(), 4);
    assert!(c.on_key(None).is_err());
    assert!(matches!(c.next_ask(), Some(Ask::Sums(_))));
    assert!(c.on_rows(&s, vec![], vec![]).is_err());
}

#[test]
fn a_middle_key_at_the_end_reads_the_range_whole() {
    let s = shape(vec![0]);
    let mut c = ChunkCheck::new(&s, KeyRange::all(), 1);
    assert!(c.next_ask().is_some());
    c.on_sums(Sum { count: 4, xor: 1 }, Sum { count: 4, xor: 2 })
        .expect("an answer that fits");
    let Some(Ask::KeyAt { offset, side, .. }) = c.next_ask() else {
        panic!("a split");
    };
    assert_eq!((offset, side), (1, Side::Source));
    c.on_key(None).expect("an answer that fits");
    assert!(matches!(c.next_ask(), Some(Ask::Rows(_))));
}
