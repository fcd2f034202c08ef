//! Key ranges and access paths from compiled conditions.

use super::*;

fn col(i: usize, ty: SqlType) -> Expr {
    Expr {
        kind: ExprKind::Column(i),
        ty,
    }
}

fn text(s: &str, collation: u16) -> Expr {
    Expr {
        kind: ExprKind::Const(Value::Bytes(s.as_bytes().to_vec())),
        ty: SqlType::varchar(10, collation),
    }
}

fn int(i: i64) -> Expr {
    Expr {
        kind: ExprKind::Const(Value::Int(i)),
        ty: SqlType::bigint(),
    }
}

fn cmp(op: CmpOp, l: Expr, r: Expr, mode: CmpMode) -> Expr {
    Expr {
        kind: ExprKind::Cmp {
            op,
            left: Box::new(l),
            right: Box::new(r),
            mode,
        },
        ty: SqlType::bigint(),
    }
}

fn key(s: &[u8]) -> Vec<u8> {
    let mut k = vec![flag::BYTES];
    encode_bytes(&mut k, s);
    k
}

#[test]
fn or_of_key_comparisons_is_the_union_and_an_unrestricted_branch_drops_it() {
    let k = col(0, SqlType::bigint());
    let m = CmpMode::Int;
    let or = |parts| Expr {
        kind: ExprKind::Or(parts),
        ty: SqlType::bigint(),
    };
    // (k < 5) OR (k = 7) OR (k >= 6 AND k < 9): [min, 4] ∪ [6, 8].
    let e = or(vec![
        cmp(CmpOp::Lt, k.clone(), int(5), m),
        cmp(CmpOp::Eq, k.clone(), int(7), m),
        Expr {
            kind: ExprKind::And(vec![
                cmp(CmpOp::GtEq, k.clone(), int(6), m),
                cmp(CmpOp::Lt, k.clone(), int(9), m),
            ]),
            ty: SqlType::bigint(),
        },
    ]);
    let min = i128::from(i64::MIN);
    assert_eq!(
        int_ranges(std::slice::from_ref(&e), 0, false),
        Some(vec![(min, 4), (6, 8)])
    );
    let other = cmp(CmpOp::Eq, col(1, SqlType::bigint()), int(1), m);
    let e = or(vec![cmp(CmpOp::Lt, k, int(5), m), other]);
    assert_eq!(int_ranges(&[e], 0, false), None);
}

#[test]
fn string_key_ranges_use_the_collations_key_form() {
    let bin = charset::collation_by_name("utf8mb4_bin").expect("bin").id;
    let ci = charset::collation_by_name("utf8mb4_general_ci")
        .expect("ci")
        .id;
    let ty = SqlType::varchar(20, bin);
    let mode = CmpMode::String { collation: bin };
    // PAD SPACE: the trailing spaces of the constant are not part of the key.
    let e = cmp(CmpOp::GtEq, col(0, ty.clone()), text("ab  ", bin), mode);
    let f = cmp(CmpOp::Lt, text("b", bin), col(0, ty.clone()), mode);
    let f = Expr {
        kind: ExprKind::Not(Box::new(f)),
        ty: SqlType::bigint(),
    };
    let g = cmp(CmpOp::LtEq, col(0, ty.clone()), text("b", bin), mode);
    assert_eq!(
        common_ranges(&[e, f, g], &[(0, &ty)]),
        Some(vec![(key(b"ab"), Some(after(key(b"b"))))])
    );
    // A case-insensitive collation's sort key is not the bytes: no range.
    let ci_ty = SqlType::varchar(20, ci);
    let h = cmp(
        CmpOp::Eq,
        col(0, ci_ty.clone()),
        text("x", ci),
        CmpMode::String { collation: ci },
    );
    assert_eq!(common_ranges(&[h], &[(0, &ci_ty)]), None);
    // A number compared with a string column compares as numbers: no range.
    let n = cmp(CmpOp::Gt, col(0, ty.clone()), int(5), CmpMode::Double);
    assert_eq!(common_ranges(&[n], &[(0, &ty)]), None);
}

#[test]
fn an_equality_on_a_key_column_narrows_the_next_one_under_it() {
    let bin = charset::collation_by_name("utf8mb4_bin").expect("bin").id;
    let (a_ty, b_ty) = (SqlType::varchar(20, bin), SqlType::bigint());
    let mode = CmpMode::String { collation: bin };
    let a = || col(0, a_ty.clone());
    let b = || col(1, b_ty.clone());
    let node = |kind| Expr {
        kind,
        ty: SqlType::bigint(),
    };
    // (a, b) < ('m', 7): a < 'm' OR (a = 'm' AND b < 7).
    let e = node(ExprKind::Or(vec![
        cmp(CmpOp::Lt, a(), text("m", bin), mode),
        node(ExprKind::And(vec![
            cmp(CmpOp::Eq, a(), text("m", bin), mode),
            cmp(CmpOp::Lt, b(), int(7), CmpMode::Int),
        ])),
    ]));
    let m = key(b"m");
    let under = |b: Vec<u8>| [m.as_slice(), &b].concat();
    let cols = [(0, &a_ty), (1, &b_ty)];
    let min = i128::from(i64::MIN);
    assert_eq!(
        common_ranges(&[e], &cols),
        Some(vec![
            (Vec::new(), Some(m.clone())),
            (
                under(int_key(min, false)),
                Some(under(after(int_key(6, false))))
            ),
        ])
    );
    // a = 'm' AND b >= 3 as two conjuncts: from (m, 3) to the end of 'm'.
    let eq = cmp(CmpOp::Eq, a(), text("m", bin), mode);
    let ge = cmp(CmpOp::GtEq, b(), int(3), CmpMode::Int);
    assert_eq!(
        common_ranges(&[eq.clone(), ge], &cols),
        Some(vec![(
            under(int_key(3, false)),
            Some(under(after(int_key(i64::MAX.into(), false))))
        )])
    );
    // Only the first column's equality: all of 'm'.
    assert_eq!(
        common_ranges(&[eq], &cols),
        Some(vec![(m.clone(), Some(after(m)))])
    );
}

#[test]
fn spans_intersect_and_join() {
    let s = |a: &[u8], b: Option<&[u8]>| (a.to_vec(), b.map(<[u8]>::to_vec));
    let a = vec![s(b"a", Some(b"c")), s(b"e", None)];
    let b = vec![s(b"b", Some(b"f"))];
    assert_eq!(
        intersect_spans(&a, &b),
        vec![s(b"b", Some(b"c")), s(b"e", Some(b"f"))]
    );
    assert_eq!(
        union_spans(vec![
            s(b"e", None),
            s(b"a", Some(b"c")),
            s(b"c", Some(b"d"))
        ]),
        vec![s(b"a", Some(b"d")), s(b"e", None)]
    );
    assert_eq!(
        intersect_spans(&[s(b"a", Some(b"b"))], &[s(b"b", None)]),
        vec![]
    );
}

#[test]
fn integer_key_columns_of_a_common_handle_are_ranged_by_their_key_form() {
    let ty = SqlType::int();
    let e = cmp(CmpOp::Gt, col(0, ty.clone()), int(-3), CmpMode::Int);
    assert_eq!(
        common_ranges(&[e], &[(0, &ty)]),
        Some(vec![(
            int_key(-2, false),
            Some(after(int_key(i64::MAX.into(), false)))
        )])
    );
    assert!(int_key(-2, false) < int_key(5, false));
    assert!(int_key(5, true) < int_key(1 << 63, true));
}

#[test]
fn a_scan_serves_a_prefix_of_its_key_in_one_direction() {
    let key = ["a".to_owned(), "b".to_owned()];
    let w = |v: &[(&str, bool)]| -> Vec<(String, bool)> {
        v.iter().map(|(n, d)| ((*n).to_owned(), *d)).collect()
    };
    assert_eq!(scan_direction(&key, &w(&[("A", false)])), Some(false));
    assert_eq!(
        scan_direction(&key, &w(&[("a", true), ("b", true)])),
        Some(true)
    );
    assert_eq!(scan_direction(&key, &w(&[("a", false), ("b", true)])), None);
    assert_eq!(scan_direction(&key, &w(&[("b", false)])), None);
    assert_eq!(scan_direction(&key, &w(&[])), None);
    assert_eq!(
        scan_direction(&key, &w(&[("a", false), ("b", false), ("c", false)])),
        None
    );
}
