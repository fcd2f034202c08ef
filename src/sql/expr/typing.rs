//! Result types: of branches that share one, of arithmetic, of constants, and display widths.

use tibinlog_protocol::value::Value;

use crate::sql::types::{SqlType, TypeKind};

use super::tree::{literal_string_type, ArithOp};

/// Characters a value of `ty` shows at most (for result column lengths).
pub(crate) fn display_chars(ty: &SqlType) -> u32 {
    match &ty.kind {
        TypeKind::Char { chars } | TypeKind::VarChar { chars } => *chars,
        TypeKind::Text { max_bytes } => u32::try_from(*max_bytes).unwrap_or(u32::MAX),
        TypeKind::Int { .. } => 21,
        TypeKind::Decimal { precision, .. } => u32::from(*precision) + 2,
        TypeKind::Float | TypeKind::Double => 22,
        TypeKind::DateTime { .. } | TypeKind::Timestamp { .. } => 26,
        TypeKind::Date => 10,
        TypeKind::Time { .. } => 17,
        TypeKind::Null => 0,
        _ => 255,
    }
}

/// Names of the aggregate functions.
pub fn is_aggregate(upper_name: &str) -> bool {
    matches!(
        upper_name,
        "COUNT"
            | "MIN"
            | "MAX"
            | "SUM"
            | "AVG"
            | "GROUP_CONCAT"
            | "ANY_VALUE"
            | "BIT_OR"
            | "BIT_AND"
            | "BIT_XOR"
    )
}

/// The type results of several branches share (CASE, IF, COALESCE): the first non-NULL
/// type when they agree in kind, else a string.
pub fn union_type(tys: &[&SqlType]) -> SqlType {
    let non_null: Vec<&&SqlType> = tys
        .iter()
        .filter(|t| !matches!(t.kind, TypeKind::Null))
        .collect();
    let nullable = tys
        .iter()
        .any(|t| t.nullable || matches!(t.kind, TypeKind::Null));
    let Some(first) = non_null.first() else {
        return SqlType::null();
    };
    let same = non_null.iter().all(|t| {
        std::mem::discriminant(&t.kind) == std::mem::discriminant(&first.kind)
            && t.unsigned == first.unsigned
    });
    if same {
        let mut t = (**first).clone();
        if let TypeKind::VarChar { chars } = &mut t.kind {
            *chars = non_null
                .iter()
                .map(|t| display_chars(t))
                .max()
                .unwrap_or(*chars);
        }
        return t.nullable(nullable);
    }
    if non_null.iter().all(|t| t.is_integer()) {
        return SqlType::bigint().nullable(nullable);
    }
    if non_null.iter().all(|t| t.is_numeric()) {
        return SqlType::double().nullable(nullable);
    }
    let chars = non_null.iter().map(|t| display_chars(t)).max().unwrap_or(0);
    SqlType::string(chars).nullable(nullable)
}

/// The result type of an arithmetic operator (MySQL: integers stay BIGINT except `/`, any
/// DECIMAL gives DECIMAL, anything else DOUBLE).
pub(super) fn arith_type(op: ArithOp, a: &SqlType, b: &SqlType) -> SqlType {
    let nullable =
        a.nullable || b.nullable || matches!(op, ArithOp::Div | ArithOp::IntDiv | ArithOp::Mod);
    let ty = if op == ArithOp::IntDiv {
        // MySQL: UNSIGNED when either operand is.
        if a.unsigned || b.unsigned {
            SqlType::ubigint()
        } else {
            SqlType::bigint()
        }
    } else if a.is_integer() && b.is_integer() && op != ArithOp::Div {
        // MySQL: an UNSIGNED operand makes the result UNSIGNED, for `-` too (a negative
        // result is then out of range).
        if a.unsigned || b.unsigned {
            SqlType::ubigint()
        } else {
            SqlType::bigint()
        }
    } else if (a.is_integer() || matches!(a.kind, TypeKind::Decimal { .. }))
        && (b.is_integer() || matches!(b.kind, TypeKind::Decimal { .. }))
    {
        SqlType::decimal(65, 4)
    } else {
        SqlType::double()
    };
    ty.nullable(nullable)
}

/// The type of a constant value.
pub(super) fn const_type(v: &Value) -> SqlType {
    match v {
        Value::Null => SqlType::null(),
        Value::Int(_) => SqlType::bigint().not_null(),
        Value::UInt(_) => SqlType::ubigint().not_null(),
        Value::Double(_) | Value::Float(_) => SqlType::double().not_null(),
        Value::Decimal(d) => {
            let (i, f) = d.trim_start_matches('-').split_once('.').unwrap_or((d, ""));
            SqlType::decimal(
                (i.len() + f.len()).clamp(1, 65) as u8,
                f.len().min(30) as u8,
            )
            .not_null()
        }
        Value::Bytes(b) => literal_string_type(b.len()),
        _ => SqlType::null(),
    }
}
