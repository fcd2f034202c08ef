//! Partition routing of the simulated TiDB: which physical table (partition id) a row goes to,
//! for every partitioning kind the simulator creates — `RANGE` and `LIST` over one integer
//! column, `HASH` over one integer column, and `RANGE COLUMNS` / `LIST COLUMNS` over integer
//! and string columns.
//!
//! The plan is built from the `model.PartitionInfo` stored in the table's meta key, so routing
//! reads the same bounds a real TiDB reads: `less_than` and `in_values` as TiDB keeps them
//! (integers as decimal text, strings single-quoted, `MAXVALUE` bare). As TiDB, a row no
//! partition takes is refused ("Table has no partition for value"). String bounds compare as
//! the simulator's `_bin` collations do: bytes, trailing spaces ignored (PAD SPACE).

use tibinlog_protocol::value::Value;

use crate::tidb::schema::{CIStr, ColumnInfo, PartitionDefinition, PartitionInfo, TableInfo};

use super::error::{Result as TidbResult, TidbError};

/// `model.PartitionType` values.
const RANGE: i64 = 1;
const HASH: i64 = 2;
const LIST: i64 = 3;

/// A table's partitioning as declared in `CREATE TABLE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionDef {
    /// `PARTITION BY RANGE (col)`: upper bounds (exclusive), `None` = MAXVALUE.
    Range {
        column: String,
        bounds: Vec<Option<i64>>,
    },
    /// `PARTITION BY HASH (col) PARTITIONS n`.
    Hash { column: String, count: u32 },
    /// `PARTITION BY LIST (col)`: each partition's integer values.
    List {
        column: String,
        values: Vec<Vec<i64>>,
    },
    /// `PARTITION BY RANGE COLUMNS (c, …)`: each partition's bound tuple, every value a
    /// literal as TiDB keeps it (`10`, `'abc'`), `None` = MAXVALUE.
    RangeColumns {
        columns: Vec<String>,
        bounds: Vec<Vec<Option<String>>>,
    },
    /// `PARTITION BY LIST COLUMNS (c, …)`: each partition's value tuples (literals as above).
    ListColumns {
        columns: Vec<String>,
        values: Vec<Vec<Vec<String>>>,
    },
}

fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

impl PartitionDef {
    /// Number of partitions.
    pub fn count(&self) -> usize {
        match self {
            PartitionDef::Range { bounds, .. } => bounds.len(),
            PartitionDef::Hash { count, .. } => *count as usize,
            PartitionDef::List { values, .. } => values.len(),
            PartitionDef::RangeColumns { bounds, .. } => bounds.len(),
            PartitionDef::ListColumns { values, .. } => values.len(),
        }
    }

    /// The partitioning columns.
    pub fn columns(&self) -> Vec<String> {
        match self {
            PartitionDef::Range { column, .. }
            | PartitionDef::Hash { column, .. }
            | PartitionDef::List { column, .. } => vec![column.clone()],
            PartitionDef::RangeColumns { columns, .. }
            | PartitionDef::ListColumns { columns, .. } => columns.clone(),
        }
    }

    /// `PARTITION BY …` text of `CREATE TABLE`.
    pub fn sql(&self) -> String {
        let cols = |c: &[String]| c.iter().map(|c| quote(c)).collect::<Vec<_>>().join(",");
        let bound = |b: &Option<String>| b.clone().unwrap_or_else(|| "MAXVALUE".into());
        let (head, parts): (String, Vec<String>) = match self {
            PartitionDef::Hash { column, count } => {
                return format!("PARTITION BY HASH ({}) PARTITIONS {count}", quote(column))
            }
            PartitionDef::Range { column, bounds } => (
                format!("RANGE ({})", quote(column)),
                bounds
                    .iter()
                    .map(|b| {
                        let v = b.map_or_else(|| "MAXVALUE".into(), |v| v.to_string());
                        format!("VALUES LESS THAN ({v})")
                    })
                    .collect(),
            ),
            PartitionDef::List { column, values } => (
                format!("LIST ({})", quote(column)),
                values
                    .iter()
                    .map(|v| {
                        let v: Vec<String> = v.iter().map(i64::to_string).collect();
                        format!("VALUES IN ({})", v.join(","))
                    })
                    .collect(),
            ),
            PartitionDef::RangeColumns { columns, bounds } => (
                format!("RANGE COLUMNS({})", cols(columns)),
                bounds
                    .iter()
                    .map(|b| {
                        let v: Vec<String> = b.iter().map(bound).collect();
                        format!("VALUES LESS THAN ({})", v.join(","))
                    })
                    .collect(),
            ),
            PartitionDef::ListColumns { columns, values } => (
                format!("LIST COLUMNS({})", cols(columns)),
                values
                    .iter()
                    .map(|tuples| {
                        let v: Vec<String> = tuples
                            .iter()
                            .map(|t| match t.as_slice() {
                                [one] if columns.len() == 1 => one.clone(),
                                _ => format!("({})", t.join(",")),
                            })
                            .collect();
                        format!("VALUES IN ({})", v.join(","))
                    })
                    .collect(),
            ),
        };
        let defs: Vec<String> = parts
            .iter()
            .enumerate()
            .map(|(i, v)| format!("PARTITION p{i} {v}"))
            .collect();
        format!("PARTITION BY {head} ({})", defs.join(", "))
    }

    /// The `model.PartitionInfo` TiDB stores for this partitioning of `t`, partitions getting
    /// the physical ids `ids`: a one-column kind keeps its column in `expr`, a `COLUMNS` kind
    /// in `columns`; bounds and values as TiDB keeps them (integers as decimal text, strings
    /// single-quoted, MAXVALUE bare).
    pub fn info(&self, ids: &[i64], t: &TableInfo) -> TidbResult<PartitionInfo> {
        let bad = |name: &str, problem| TidbError::Object {
            what: "partitioning",
            name: name.to_owned(),
            table: t.name.o.clone(),
            problem,
        };
        let mut names = Vec::new();
        for c in self.columns() {
            let col = t
                .columns
                .iter()
                .find(|x| x.name.l == c.to_lowercase())
                .ok_or_else(|| bad(&c, "names an unknown column"))?;
            names.push(col.name.clone());
        }
        let n = self.count();
        if n == 0 || ids.len() != n {
            return Err(bad(&names[0].o, "needs at least one partition"));
        }
        let ptype = match self {
            PartitionDef::Range { .. } | PartitionDef::RangeColumns { .. } => RANGE,
            PartitionDef::Hash { .. } => HASH,
            PartitionDef::List { .. } | PartitionDef::ListColumns { .. } => LIST,
        };
        let columns_kind = matches!(
            self,
            PartitionDef::RangeColumns { .. } | PartitionDef::ListColumns { .. }
        );
        let definitions = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let (less_than, in_values) = self.definition_values(i);
                PartitionDefinition {
                    id,
                    name: CIStr::new(&format!("p{i}")),
                    less_than,
                    in_values,
                    ..PartitionDefinition::default()
                }
            })
            .collect();
        Ok(PartitionInfo {
            partition_type: ptype,
            expr: if columns_kind {
                String::new()
            } else {
                quote(&names[0].o)
            },
            columns: if columns_kind { names } else { Vec::new() },
            enable: true,
            definitions,
            num: if ptype == HASH { n as u64 } else { 0 },
            ..PartitionInfo::default()
        })
    }

    /// `less_than` and `in_values` of partition `i`.
    fn definition_values(&self, i: usize) -> (Vec<String>, Vec<Vec<String>>) {
        let max = || "MAXVALUE".to_owned();
        match self {
            PartitionDef::Hash { .. } => (Vec::new(), Vec::new()),
            PartitionDef::Range { bounds, .. } => (
                vec![bounds[i].map_or_else(max, |b| b.to_string())],
                Vec::new(),
            ),
            PartitionDef::RangeColumns { bounds, .. } => (
                bounds[i]
                    .iter()
                    .map(|b| b.clone().unwrap_or_else(max))
                    .collect(),
                Vec::new(),
            ),
            PartitionDef::List { values, .. } => (
                Vec::new(),
                values[i].iter().map(|v| vec![v.to_string()]).collect(),
            ),
            PartitionDef::ListColumns { values, .. } => (Vec::new(), values[i].clone()),
        }
    }
}

/// One bound or list value of a `COLUMNS` partitioning, parsed from TiDB's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    Int(i128),
    Str(Vec<u8>),
    Null,
}

impl Literal {
    /// A value as TiDB stores it in `less_than`/`in_values` (`None` for `MAXVALUE` or a text
    /// that is none of the kinds above).
    fn parse(text: &str) -> Option<Literal> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("NULL") {
            return Some(Literal::Null);
        }
        if let Some(inner) = t.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
            return Some(Literal::Str(
                inner.replace("''", "'").replace("\\'", "'").into_bytes(),
            ));
        }
        t.parse::<i128>().ok().map(Literal::Int)
    }

    /// `value` compared with this literal (`None`: the kinds cannot be compared here).
    fn cmp_value(&self, value: &Value) -> Option<std::cmp::Ordering> {
        match (value, self) {
            (Value::Int(v), Literal::Int(b)) => Some(i128::from(*v).cmp(b)),
            (Value::UInt(v), Literal::Int(b)) => Some(i128::from(*v).cmp(b)),
            (Value::Bytes(v), Literal::Str(b)) => Some(trim(v).cmp(trim(b))),
            _ => None,
        }
    }

    fn equals(&self, value: &Value) -> bool {
        match (value, self) {
            (Value::Null, Literal::Null) => true,
            _ => self.cmp_value(value) == Some(std::cmp::Ordering::Equal),
        }
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
    &b[..end]
}

/// How rows of a partitioned table are routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionPlan {
    /// `RANGE (col)`: `(upper bound exclusive or None = MAXVALUE, physical id)`.
    Range {
        col: usize,
        parts: Vec<(Option<i64>, i64)>,
    },
    /// `HASH (col)`: physical ids by `abs(value) % n`.
    Hash { col: usize, parts: Vec<i64> },
    /// `LIST (col)`: each partition's values (`None` = NULL) and its physical id.
    List {
        col: usize,
        parts: Vec<(Vec<Option<i64>>, i64)>,
    },
    /// `RANGE COLUMNS (cols…)`: each partition's upper bound tuple (`None` = MAXVALUE).
    RangeColumns {
        cols: Vec<usize>,
        parts: Vec<(Vec<Option<Literal>>, i64)>,
    },
    /// `LIST COLUMNS (cols…)`: each partition's value tuples.
    ListColumns {
        cols: Vec<usize>,
        parts: Vec<(Vec<Vec<Literal>>, i64)>,
    },
}

impl PartitionPlan {
    /// The plan of `p` over the row whose columns are `cols` (row order); `None` when the
    /// partitioning names a column the row lacks or a bound it cannot read.
    pub fn new(p: &PartitionInfo, cols: &[&ColumnInfo]) -> Option<PartitionPlan> {
        let pos = |name: &str| {
            let name = name.trim_matches('`').to_lowercase();
            cols.iter().position(|c| c.name.l == name)
        };
        let defs = &p.definitions;
        if !p.columns.is_empty() {
            let cols: Vec<usize> = p.columns.iter().map(|c| pos(&c.l)).collect::<Option<_>>()?;
            return Some(match p.partition_type {
                RANGE => PartitionPlan::RangeColumns {
                    cols,
                    parts: defs
                        .iter()
                        .map(|d| {
                            (
                                d.less_than.iter().map(|s| Literal::parse(s)).collect(),
                                d.id,
                            )
                        })
                        .collect(),
                },
                LIST => PartitionPlan::ListColumns {
                    cols,
                    parts: defs
                        .iter()
                        .map(|d| {
                            let tuples = d
                                .in_values
                                .iter()
                                .map(|t| t.iter().map(|s| Literal::parse(s)).collect())
                                .collect::<Option<Vec<Vec<Literal>>>>()?;
                            Some((tuples, d.id))
                        })
                        .collect::<Option<_>>()?,
                },
                _ => return None,
            });
        }
        let col = pos(&p.expr)?;
        Some(match p.partition_type {
            HASH => PartitionPlan::Hash {
                col,
                parts: defs.iter().map(|d| d.id).collect(),
            },
            RANGE => PartitionPlan::Range {
                col,
                parts: defs
                    .iter()
                    .map(|d| (d.less_than.first().and_then(|s| s.parse().ok()), d.id))
                    .collect(),
            },
            LIST => PartitionPlan::List {
                col,
                parts: defs
                    .iter()
                    .map(|d| {
                        let values = d
                            .in_values
                            .iter()
                            .flatten()
                            .map(|s| match Literal::parse(s)? {
                                Literal::Null => Some(None),
                                Literal::Int(i) => i64::try_from(i).ok().map(Some),
                                Literal::Str(_) => None,
                            })
                            .collect::<Option<_>>()?;
                        Some((values, d.id))
                    })
                    .collect::<Option<_>>()?,
            },
            _ => return None,
        })
    }

    /// Row positions of the partitioning columns, in the partitioning's order.
    pub fn columns(&self) -> Vec<usize> {
        match self {
            PartitionPlan::Range { col, .. }
            | PartitionPlan::Hash { col, .. }
            | PartitionPlan::List { col, .. } => vec![*col],
            PartitionPlan::RangeColumns { cols, .. } | PartitionPlan::ListColumns { cols, .. } => {
                cols.clone()
            }
        }
    }

    /// Every partition's physical id, in definition order.
    pub fn ids(&self) -> Vec<i64> {
        match self {
            PartitionPlan::Range { parts, .. } => parts.iter().map(|p| p.1).collect(),
            PartitionPlan::Hash { parts, .. } => parts.clone(),
            PartitionPlan::List { parts, .. } => parts.iter().map(|p| p.1).collect(),
            PartitionPlan::RangeColumns { parts, .. } => parts.iter().map(|p| p.1).collect(),
            PartitionPlan::ListColumns { parts, .. } => parts.iter().map(|p| p.1).collect(),
        }
    }

    /// The physical id of a row whose partitioning columns hold `values` (in
    /// [`columns`](Self::columns) order).
    pub fn route(&self, values: &[&Value]) -> Result<i64, &'static str> {
        const NO_PARTITION: &str = "Table has no partition for value";
        let int = |v: &Value| match v {
            Value::Int(i) => Some(*i),
            Value::UInt(u) => Some(*u as i64),
            _ => None,
        };
        let first = values.first().copied().unwrap_or(&Value::Null);
        match self {
            PartitionPlan::Hash { parts, .. } => {
                // TiDB hashes NULL as 0.
                let x = if matches!(first, Value::Null) {
                    0
                } else {
                    int(first).ok_or("partition column must be an integer")?
                };
                Ok(parts[(x.unsigned_abs() % parts.len() as u64) as usize])
            }
            PartitionPlan::Range { parts, .. } => {
                // NULL sorts below every value: the first partition takes it.
                let x = if matches!(first, Value::Null) {
                    i64::MIN
                } else {
                    int(first).ok_or("partition column must be an integer")?
                };
                parts
                    .iter()
                    .find(|(b, _)| b.is_none_or(|b| x < b))
                    .map(|&(_, id)| id)
                    .ok_or(NO_PARTITION)
            }
            PartitionPlan::List { parts, .. } => {
                let x = match first {
                    Value::Null => None,
                    v => Some(int(v).ok_or("partition column must be an integer")?),
                };
                parts
                    .iter()
                    .find(|(vals, _)| vals.contains(&x))
                    .map(|&(_, id)| id)
                    .ok_or(NO_PARTITION)
            }
            PartitionPlan::RangeColumns { parts, .. } => {
                for (bound, id) in parts {
                    if tuple_below(values, bound)? {
                        return Ok(*id);
                    }
                }
                Err(NO_PARTITION)
            }
            PartitionPlan::ListColumns { parts, .. } => parts
                .iter()
                .find(|(tuples, _)| {
                    tuples.iter().any(|t| {
                        t.len() == values.len() && t.iter().zip(values).all(|(l, v)| l.equals(v))
                    })
                })
                .map(|&(_, id)| id)
                .ok_or(NO_PARTITION),
        }
    }
}

/// `values < bound` as a RANGE COLUMNS tuple comparison (MAXVALUE above everything, NULL
/// below everything).
fn tuple_below(values: &[&Value], bound: &[Option<Literal>]) -> Result<bool, &'static str> {
    use std::cmp::Ordering;
    for (v, b) in values.iter().zip(bound) {
        let ord = match (v, b) {
            (_, None) => Ordering::Less,
            (Value::Null, Some(_)) => Ordering::Less,
            (v, Some(b)) => b
                .cmp_value(v)
                .ok_or("a RANGE COLUMNS value of a type the simulator does not compare")?,
        };
        match ord {
            Ordering::Less => return Ok(true),
            Ordering::Greater => return Ok(false),
            Ordering::Equal => {}
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str) -> ColumnInfo {
        ColumnInfo {
            name: CIStr::new(name),
            ..ColumnInfo::default()
        }
    }

    fn def(id: i64, less_than: &[&str], in_values: &[&[&str]]) -> PartitionDefinition {
        PartitionDefinition {
            id,
            name: CIStr::new(&format!("p{id}")),
            less_than: less_than.iter().map(|s| (*s).to_owned()).collect(),
            in_values: in_values
                .iter()
                .map(|t| t.iter().map(|s| (*s).to_owned()).collect())
                .collect(),
            ..PartitionDefinition::default()
        }
    }

    fn bytes(s: &str) -> Value {
        Value::Bytes(s.as_bytes().to_vec())
    }

    #[test]
    fn range_columns_compare_tuples_left_to_right() {
        let (a, b) = (col("a"), col("b"));
        let p = PartitionInfo {
            partition_type: RANGE,
            columns: vec![CIStr::new("a"), CIStr::new("b")],
            definitions: vec![
                def(1, &["10", "'m'"], &[]),
                def(2, &["20", "MAXVALUE"], &[]),
            ],
            ..PartitionInfo::default()
        };
        let plan = PartitionPlan::new(&p, &[&a, &b]).expect("a plan");
        let route = |x: i64, s: &str| plan.route(&[&Value::Int(x), &bytes(s)]);
        assert_eq!(route(5, "z"), Ok(1));
        assert_eq!(route(10, "a"), Ok(1));
        assert_eq!(
            route(10, "m"),
            Ok(2),
            "equal tuples are not below the bound"
        );
        assert_eq!(
            route(10, "m  "),
            Ok(2),
            "PAD SPACE: trailing spaces ignored"
        );
        assert_eq!(route(19, "zzz"), Ok(2));
        assert_eq!(route(20, ""), Ok(2), "below MAXVALUE in the second column");
        assert_eq!(route(21, ""), Err("Table has no partition for value"));
    }

    #[test]
    fn list_and_list_columns_route_by_membership() {
        let a = col("a");
        let list = PartitionInfo {
            partition_type: LIST,
            expr: "`a`".into(),
            definitions: vec![def(7, &[], &[&["1"], &["3"]]), def(8, &[], &[&["NULL"]])],
            ..PartitionInfo::default()
        };
        let plan = PartitionPlan::new(&list, &[&a]).expect("a plan");
        assert_eq!(plan.route(&[&Value::Int(3)]), Ok(7));
        assert_eq!(plan.route(&[&Value::Null]), Ok(8));
        assert!(plan.route(&[&Value::Int(2)]).is_err());
        let lc = PartitionInfo {
            partition_type: LIST,
            columns: vec![CIStr::new("a")],
            definitions: vec![def(5, &[], &[&["'x'"], &["'it''s'"]])],
            ..PartitionInfo::default()
        };
        let plan = PartitionPlan::new(&lc, &[&a]).expect("a plan");
        assert_eq!(plan.route(&[&bytes("it's")]), Ok(5));
        assert!(plan.route(&[&bytes("y")]).is_err());
        assert_eq!(plan.ids(), vec![5]);
    }
}
