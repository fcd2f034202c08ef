//! The columns expressions see: the rows of FROM, and the rows after grouping.

use std::cell::RefCell;

use sqlparser::ast;

use crate::sql::agg::AggCall;
use crate::sql::error::{Result, SqlError};
use crate::sql::expr::{Expr, Scope};
use crate::sql::types::SqlType;

/// One column visible to expressions.
#[derive(Debug, Clone)]
pub(super) struct ScopeCol {
    /// Alias or name of the table it comes from.
    pub(super) table: Option<String>,
    pub(super) db: Option<String>,
    pub(super) name: String,
    pub(super) ty: SqlType,
    /// `(schema, table alias, table, column)` for result column definitions.
    pub(super) origin: Option<(String, String, String, String)>,
    /// The label a bare reference to it gets (information_schema: its defined name).
    pub(super) label: Option<String>,
}

/// The columns of the rows flowing out of FROM (and WHERE).
pub(super) struct RowScope {
    pub(super) cols: Vec<ScopeCol>,
    pub(super) clause: &'static str,
}

impl RowScope {
    pub(super) fn find(&self, qual: &[String], name: &str) -> Result<Option<usize>> {
        let mut hit = None;
        for (i, c) in self.cols.iter().enumerate() {
            if !c.name.eq_ignore_ascii_case(name) {
                continue;
            }
            let ok = match qual {
                [] => true,
                [t] => c.table.as_deref() == Some(t.as_str()),
                [d, t] => {
                    c.table.as_deref() == Some(t.as_str()) && c.db.as_deref() == Some(d.as_str())
                }
                _ => false,
            };
            if ok {
                if hit.is_some() {
                    return Err(SqlError::ambiguous_column(name, self.clause));
                }
                hit = Some(i);
            }
        }
        Ok(hit)
    }
}

impl Scope for RowScope {
    fn column(&self, qual: &[String], name: &str) -> Result<Option<(usize, SqlType)>> {
        Ok(self.find(qual, name)?.map(|i| (i, self.cols[i].ty.clone())))
    }
    fn clause(&self) -> &str {
        self.clause
    }
}

/// Expressions after GROUP BY: group keys and aggregates by their text, other columns through
/// an implicit ANY_VALUE (MySQL without ONLY_FULL_GROUP_BY).
pub(super) struct AggScope<'a> {
    pub(super) input: &'a RowScope,
    /// Text of each GROUP BY expression → output index.
    pub(super) keys: Vec<(String, SqlType)>,
    /// Output index of an input column used as a key.
    pub(super) key_columns: Vec<(usize, usize)>,
    /// Aggregates by text; output index = keys.len() + position.
    pub(super) aggs: RefCell<Vec<(String, AggCall)>>,
    pub(super) clause: &'static str,
}

impl AggScope<'_> {
    fn agg_index(&self, text: &str) -> Option<(usize, SqlType)> {
        self.aggs
            .borrow()
            .iter()
            .position(|(t, _)| t == text)
            .map(|i| (self.keys.len() + i, self.aggs.borrow()[i].1.ty.clone()))
    }
}

impl Scope for AggScope<'_> {
    fn column(&self, qual: &[String], name: &str) -> Result<Option<(usize, SqlType)>> {
        let Some(i) = self.input.find(qual, name)? else {
            return Ok(None);
        };
        if let Some((_, out)) = self.key_columns.iter().find(|(inp, _)| *inp == i) {
            return Ok(Some((*out, self.input.cols[i].ty.clone())));
        }
        let text = format!("ANY_VALUE(#{i})");
        if let Some(hit) = self.agg_index(&text) {
            return Ok(Some(hit));
        }
        let ty = self.input.cols[i].ty.clone();
        let call = AggCall::new("ANY_VALUE", Some(Expr::column(i, ty.clone())), false)?;
        self.aggs.borrow_mut().push((text, call));
        Ok(Some((self.keys.len() + self.aggs.borrow().len() - 1, ty)))
    }

    fn computed(&self, e: &ast::Expr) -> Option<(usize, SqlType)> {
        let text = e.to_string();
        if let Some(i) = self.keys.iter().position(|(t, _)| *t == text) {
            return Some((i, self.keys[i].1.clone()));
        }
        self.agg_index(&text)
    }

    fn clause(&self) -> &str {
        self.clause
    }
}
