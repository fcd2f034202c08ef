//! `SHOW` statements and `DESCRIBE` as queries over information_schema, as MySQL itself answers
//! them: each form becomes a `SELECT` with MySQL's column labels, so `LIKE` and `WHERE` are the
//! engine's (applied to the first column, respectively to the labelled result columns).
//!
//! Forms: `SHOW [FULL] TABLES`, `SHOW [FULL] {COLUMNS|FIELDS}`, `SHOW {INDEX|INDEXES|KEYS}`,
//! `SHOW TABLE STATUS`, `SHOW {DATABASES|SCHEMAS}`, `SHOW {CHARACTER SET|CHARSET}`,
//! `SHOW COLLATION`, `SHOW [STORAGE] ENGINES`, `SHOW TRIGGERS`, `SHOW EVENTS`,
//! `SHOW {PROCEDURE|FUNCTION} STATUS`, `SHOW [FULL] PROCESSLIST`, `SHOW [GLOBAL|SESSION]
//! {VARIABLES|STATUS}` (over `performance_schema`), and `{DESC|DESCRIBE|EXPLAIN} table
//! [column]`. [`form`] tells the form from the statement's tokens, [`query`] writes its SELECT;
//! `WHERE` keeps the client's text.

use super::catalog::CatalogSnapshot;
use super::error::{Result, SqlError};
use super::infoschema;
use tibinlog_protocol::wire::errors::ER_NO_DB_ERROR;

pub use super::tokens::{Tok, Tokens};

/// A SQL string literal.
pub fn quote_str(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// A quoted identifier.
pub fn quote_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// A SHOW/DESCRIBE form this module answers, and where its arguments start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShowForm {
    /// `{DESC|DESCRIBE|EXPLAIN} table [column]`.
    Describe,
    /// `SHOW [GLOBAL|SESSION] {VARIABLES|STATUS}`.
    Variables {
        at: usize,
        status: bool,
        global: bool,
    },
    Tables {
        at: usize,
        full: bool,
    },
    Columns {
        at: usize,
        full: bool,
    },
    Index {
        at: usize,
    },
    TableStatus {
        at: usize,
    },
    Databases {
        at: usize,
    },
    Charsets {
        at: usize,
    },
    Collation {
        at: usize,
    },
    Engines,
    Triggers {
        at: usize,
    },
    Events {
        at: usize,
    },
    Routines {
        at: usize,
    },
    Processlist {
        full: bool,
    },
}

impl ShowForm {
    /// A form that lists or describes one table's columns or keys (it needs SELECT on it).
    pub fn is_table_level(self) -> bool {
        matches!(self, ShowForm::Columns { .. } | ShowForm::Index { .. })
    }
}

/// The form of a SHOW/DESCRIBE statement; `None` if the tokens are not one of the forms this
/// module answers.
pub fn form(t: &Tokens<'_>) -> Option<ShowForm> {
    let first = t.toks.first()?;
    if first.quoted {
        return None;
    }
    let w0 = first.text.to_ascii_uppercase();
    if matches!(w0.as_str(), "DESC" | "DESCRIBE" | "EXPLAIN") {
        // EXPLAIN SELECT … is a query plan request, not DESCRIBE.
        if t.kw(1, "SELECT") || t.kw(1, "FORMAT") || t.kw(1, "ANALYZE") || t.toks.len() < 2 {
            return None;
        }
        return Some(ShowForm::Describe);
    }
    if w0 != "SHOW" {
        return None;
    }
    let mut i = 1;
    let full = t.kw(i, "FULL");
    if full {
        i += 1;
    }
    let word = |i: usize| {
        t.toks
            .get(i)
            .filter(|x| !x.quoted)
            .map(|x| x.text.to_ascii_uppercase())
            .unwrap_or_default()
    };
    if !full {
        if let Some(global) = [("GLOBAL", true), ("SESSION", false), ("LOCAL", false)]
            .iter()
            .find(|(k, _)| t.kw(i, k))
            .map(|(_, g)| *g)
        {
            let status = match word(i + 1).as_str() {
                "VARIABLES" => false,
                "STATUS" => true,
                _ => return None,
            };
            return Some(ShowForm::Variables {
                at: i + 2,
                status,
                global,
            });
        }
    }
    let at = i + 1;
    Some(match word(i).as_str() {
        "VARIABLES" if !full => ShowForm::Variables {
            at,
            status: false,
            global: false,
        },
        "STATUS" if !full => ShowForm::Variables {
            at,
            status: true,
            global: false,
        },
        "TABLES" => ShowForm::Tables { at, full },
        "COLUMNS" | "FIELDS" => ShowForm::Columns { at, full },
        "INDEX" | "INDEXES" | "KEYS" if !full => ShowForm::Index { at },
        "TABLE" if t.kw(i + 1, "STATUS") && !full => ShowForm::TableStatus { at: i + 2 },
        "DATABASES" | "SCHEMAS" if !full => ShowForm::Databases { at },
        "CHARACTER" if t.kw(i + 1, "SET") && !full => ShowForm::Charsets { at: i + 2 },
        "CHARSET" if !full => ShowForm::Charsets { at },
        "COLLATION" if !full => ShowForm::Collation { at },
        "ENGINES" if !full => ShowForm::Engines,
        "STORAGE" if t.kw(i + 1, "ENGINES") && !full => ShowForm::Engines,
        "TRIGGERS" if !full => ShowForm::Triggers { at },
        "EVENTS" if !full => ShowForm::Events { at },
        "PROCEDURE" | "FUNCTION" if t.kw(i + 1, "STATUS") && !full => {
            ShowForm::Routines { at: i + 2 }
        }
        "PROCESSLIST" => ShowForm::Processlist { full },
        _ => return None,
    })
}

/// The query of form `f` of the statement `t`.
pub fn query(
    f: ShowForm,
    t: &Tokens<'_>,
    catalog: &CatalogSnapshot,
    current_db: Option<&str>,
) -> Result<String> {
    match f {
        ShowForm::Describe => describe(t, catalog, current_db),
        ShowForm::Variables { at, status, global } => variables(t, at, status, global),
        ShowForm::Tables { at, full } => tables(t, at, full, catalog, current_db),
        ShowForm::Columns { at, full } => columns(t, at, full, catalog, current_db),
        ShowForm::Index { at } => index(t, at, catalog, current_db),
        ShowForm::TableStatus { at } => table_status(t, at, catalog, current_db),
        ShowForm::Databases { at } => filtered(
            t,
            at,
            "SELECT SCHEMA_NAME AS `Database` FROM information_schema.SCHEMATA ORDER BY SCHEMA_NAME"
                .into(),
            "Database",
        ),
        ShowForm::Charsets { at } => charsets(t, at),
        ShowForm::Collation { at } => filtered(
            t,
            at,
            "SELECT COLLATION_NAME AS `Collation`, CHARACTER_SET_NAME AS `Charset`, ID AS `Id`, \
             IS_DEFAULT AS `Default`, IS_COMPILED AS `Compiled`, SORTLEN AS `Sortlen`, \
             PAD_ATTRIBUTE AS `Pad_attribute` FROM information_schema.COLLATIONS \
             ORDER BY COLLATION_NAME"
                .into(),
            "Collation",
        ),
        ShowForm::Engines => Ok(engines()),
        ShowForm::Triggers { at } => triggers(t, at, catalog, current_db),
        ShowForm::Events { at } => events(t, at, catalog, current_db),
        ShowForm::Routines { at } => routines(t, at),
        ShowForm::Processlist { full } => Ok(format!(
            "SELECT ID AS `Id`, USER AS `User`, HOST AS `Host`, DB AS `db`, COMMAND AS \
             `Command`, TIME AS `Time`, STATE AS `State`, {} AS `Info` \
             FROM information_schema.PROCESSLIST ORDER BY ID",
            if full { "INFO" } else { "LEFT(INFO, 100)" }
        )),
    }
}

/// `[{FROM|IN} db]` at `i`: the database and the next index.
fn from_db(t: &Tokens<'_>, i: usize) -> (Option<String>, usize) {
    if (t.kw(i, "FROM") || t.kw(i, "IN")) && i + 1 < t.toks.len() {
        (Some(t.toks[i + 1].text.to_owned()), i + 2)
    } else {
        (None, i)
    }
}

/// A table name at `i` (`t`, `db.t`, `` `db`.`t` ``): (db, table, next index).
fn table_name(t: &Tokens<'_>, i: usize) -> Option<(Option<String>, String, usize)> {
    let a = t.toks.get(i)?;
    if t.toks
        .get(i + 1)
        .is_some_and(|x| !x.quoted && x.text == ".")
    {
        let b = t.toks.get(i + 2)?;
        return Some((Some(a.text.to_owned()), b.text.to_owned(), i + 3));
    }
    if !a.quoted {
        if let Some((d, n)) = a.text.as_str().split_once('.') {
            return Some((Some(d.to_owned()), n.to_owned(), i + 1));
        }
    }
    Some((None, a.text.to_owned(), i + 1))
}

/// `[LIKE 'p' | WHERE expr]` at `i` applied to `base` (whose first column is `first`).
fn filtered(t: &Tokens<'_>, i: usize, base: String, first: &str) -> Result<String> {
    if i >= t.toks.len() {
        return Ok(base);
    }
    if t.kw(i, "LIKE") {
        let p = t
            .toks
            .get(i + 1)
            .filter(|x| x.quoted)
            .ok_or_else(|| parse_error(t, i))?;
        if i + 2 != t.toks.len() {
            return Err(parse_error(t, i + 2));
        }
        return Ok(format!(
            "SELECT * FROM ({base}) AS `show` WHERE {} LIKE {}",
            quote_ident(first),
            quote_str(&p.text)
        ));
    }
    if t.kw(i, "WHERE") {
        let start = t.toks.get(i + 1).map_or(t.sql.len(), |x| x.offset);
        let expr = t.sql[start..].trim().trim_end_matches(';');
        return Ok(format!("SELECT * FROM ({base}) AS `show` WHERE {expr}"));
    }
    Err(parse_error(t, i))
}

fn parse_error(t: &Tokens<'_>, i: usize) -> SqlError {
    let at = t.toks.get(i).map_or(t.sql.len(), |x| x.offset);
    let near: String = t.sql[at..].chars().take(80).collect();
    SqlError::new(
        tibinlog_protocol::wire::errors::ER_PARSE_ERROR,
        format!(
            "You have an error in your SQL syntax; check the manual that corresponds to your \
             MySQL server version for the right syntax to use near '{near}' at line 1"
        ),
    )
}

fn need_db(db: Option<String>, current: Option<&str>) -> Result<String> {
    db.or_else(|| current.map(str::to_owned))
        .ok_or_else(|| SqlError::new(ER_NO_DB_ERROR, "No database selected"))
}

fn check_db(catalog: &CatalogSnapshot, db: &str) -> Result<()> {
    if infoschema::is_schema(db) || catalog.database(db).is_some() {
        Ok(())
    } else {
        Err(SqlError::unknown_database(db))
    }
}

fn check_table(catalog: &CatalogSnapshot, db: &str, table: &str) -> Result<()> {
    check_db(catalog, db)?;
    let known = if infoschema::is_schema(db) {
        infoschema::table(db, table).is_some()
    } else {
        catalog.table(db, table).is_some()
    };
    if known {
        Ok(())
    } else {
        Err(SqlError::no_such_table(db, table))
    }
}

/// The schema as information_schema rows name it.
fn schema_key(db: &str) -> String {
    if infoschema::is_schema(db) {
        infoschema::INFORMATION_SCHEMA.to_owned()
    } else {
        db.to_owned()
    }
}

fn tables(
    t: &Tokens<'_>,
    i: usize,
    full: bool,
    catalog: &CatalogSnapshot,
    current: Option<&str>,
) -> Result<String> {
    let (db, i) = from_db(t, i);
    let db = need_db(db, current)?;
    check_db(catalog, &db)?;
    let label = format!("Tables_in_{}", schema_key(&db));
    // MySQL labels a LIKE form's column with the pattern: `Tables_in_db (p%)`.
    let label = match (t.kw(i, "LIKE"), t.toks.get(i + 1)) {
        (true, Some(p)) => format!("{label} ({})", p.text),
        _ => label,
    };
    let mut base = format!("SELECT TABLE_NAME AS {}", quote_ident(&label));
    if full {
        base.push_str(", TABLE_TYPE AS `Table_type`");
    }
    base.push_str(&format!(
        " FROM information_schema.TABLES WHERE TABLE_SCHEMA = {} ORDER BY TABLE_NAME",
        quote_str(&schema_key(&db))
    ));
    filtered(t, i, base, &label)
}

fn columns(
    t: &Tokens<'_>,
    i: usize,
    full: bool,
    catalog: &CatalogSnapshot,
    current: Option<&str>,
) -> Result<String> {
    if !(t.kw(i, "FROM") || t.kw(i, "IN")) {
        return Err(parse_error(t, i));
    }
    let (db1, table, i) = table_name(t, i + 1).ok_or_else(|| parse_error(t, i + 1))?;
    let (db2, i) = from_db(t, i);
    let db = need_db(db2.or(db1), current)?;
    check_table(catalog, &db, &table)?;
    filtered(t, i, columns_query(&db, &table, full), "Field")
}

fn columns_query(db: &str, table: &str, full: bool) -> String {
    let cols = if full {
        "COLUMN_NAME AS `Field`, COLUMN_TYPE AS `Type`, COLLATION_NAME AS `Collation`, \
         IS_NULLABLE AS `Null`, COLUMN_KEY AS `Key`, COLUMN_DEFAULT AS `Default`, EXTRA AS \
         `Extra`, PRIVILEGES AS `Privileges`, COLUMN_COMMENT AS `Comment`"
    } else {
        "COLUMN_NAME AS `Field`, COLUMN_TYPE AS `Type`, IS_NULLABLE AS `Null`, COLUMN_KEY AS \
         `Key`, COLUMN_DEFAULT AS `Default`, EXTRA AS `Extra`"
    };
    format!(
        "SELECT {cols} FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {} AND TABLE_NAME = \
         {} ORDER BY ORDINAL_POSITION",
        quote_str(&schema_key(db)),
        quote_str(table)
    )
}

fn describe(t: &Tokens<'_>, catalog: &CatalogSnapshot, current: Option<&str>) -> Result<String> {
    let (db, table, i) = table_name(t, 1).ok_or_else(|| parse_error(t, 1))?;
    let db = need_db(db, current)?;
    check_table(catalog, &db, &table)?;
    let base = columns_query(&db, &table, false);
    match t.toks.get(i) {
        None => Ok(base),
        Some(col) if i + 1 == t.toks.len() => Ok(format!(
            "SELECT * FROM ({base}) AS `show` WHERE `Field` LIKE {}",
            quote_str(&col.text)
        )),
        Some(_) => Err(parse_error(t, i + 1)),
    }
}

fn index(
    t: &Tokens<'_>,
    i: usize,
    catalog: &CatalogSnapshot,
    current: Option<&str>,
) -> Result<String> {
    if !(t.kw(i, "FROM") || t.kw(i, "IN")) {
        return Err(parse_error(t, i));
    }
    let (db1, table, i) = table_name(t, i + 1).ok_or_else(|| parse_error(t, i + 1))?;
    let (db2, i) = from_db(t, i);
    let db = need_db(db2.or(db1), current)?;
    check_table(catalog, &db, &table)?;
    let base = format!(
        "SELECT TABLE_NAME AS `Table`, NON_UNIQUE AS `Non_unique`, INDEX_NAME AS `Key_name`, \
         SEQ_IN_INDEX AS `Seq_in_index`, COLUMN_NAME AS `Column_name`, COLLATION AS \
         `Collation`, CARDINALITY AS `Cardinality`, SUB_PART AS `Sub_part`, PACKED AS `Packed`, \
         NULLABLE AS `Null`, INDEX_TYPE AS `Index_type`, COMMENT AS `Comment`, INDEX_COMMENT AS \
         `Index_comment`, IS_VISIBLE AS `Visible`, EXPRESSION AS `Expression` FROM \
         information_schema.STATISTICS WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {}",
        quote_str(&schema_key(&db)),
        quote_str(&table)
    );
    if i < t.toks.len() && !t.kw(i, "WHERE") {
        return Err(parse_error(t, i));
    }
    filtered(t, i, base, "Table")
}

fn table_status(
    t: &Tokens<'_>,
    i: usize,
    catalog: &CatalogSnapshot,
    current: Option<&str>,
) -> Result<String> {
    let (db, i) = from_db(t, i);
    let db = need_db(db, current)?;
    check_db(catalog, &db)?;
    let base = format!(
        "SELECT TABLE_NAME AS `Name`, ENGINE AS `Engine`, VERSION AS `Version`, ROW_FORMAT AS \
         `Row_format`, TABLE_ROWS AS `Rows`, AVG_ROW_LENGTH AS `Avg_row_length`, DATA_LENGTH AS \
         `Data_length`, MAX_DATA_LENGTH AS `Max_data_length`, INDEX_LENGTH AS `Index_length`, \
         DATA_FREE AS `Data_free`, AUTO_INCREMENT AS `Auto_increment`, CREATE_TIME AS \
         `Create_time`, UPDATE_TIME AS `Update_time`, CHECK_TIME AS `Check_time`, \
         TABLE_COLLATION AS `Collation`, CHECKSUM AS `Checksum`, CREATE_OPTIONS AS \
         `Create_options`, TABLE_COMMENT AS `Comment` FROM information_schema.TABLES WHERE \
         TABLE_SCHEMA = {} ORDER BY TABLE_NAME",
        quote_str(&schema_key(&db))
    );
    filtered(t, i, base, "Name")
}

fn charsets(t: &Tokens<'_>, i: usize) -> Result<String> {
    filtered(
        t,
        i,
        "SELECT CHARACTER_SET_NAME AS `Charset`, DESCRIPTION AS `Description`, \
         DEFAULT_COLLATE_NAME AS `Default collation`, MAXLEN AS `Maxlen` FROM \
         information_schema.CHARACTER_SETS ORDER BY CHARACTER_SET_NAME"
            .into(),
        "Charset",
    )
}

/// `SHOW [GLOBAL|SESSION] {VARIABLES|STATUS}`: the performance_schema table MySQL 8.0 reads.
fn variables(t: &Tokens<'_>, i: usize, status: bool, global: bool) -> Result<String> {
    let table = match (status, global) {
        (false, true) => "global_variables",
        (false, false) => "session_variables",
        (true, true) => "global_status",
        (true, false) => "session_status",
    };
    filtered(
        t,
        i,
        format!(
            "SELECT VARIABLE_NAME AS `Variable_name`, VARIABLE_VALUE AS `Value` \
             FROM performance_schema.{table} ORDER BY VARIABLE_NAME"
        ),
        "Variable_name",
    )
}

fn engines() -> String {
    "SELECT ENGINE AS `Engine`, SUPPORT AS `Support`, COMMENT AS `Comment`, TRANSACTIONS AS \
     `Transactions`, XA AS `XA`, SAVEPOINTS AS `Savepoints` FROM information_schema.ENGINES"
        .into()
}

fn triggers(
    t: &Tokens<'_>,
    i: usize,
    catalog: &CatalogSnapshot,
    current: Option<&str>,
) -> Result<String> {
    let (db, i) = from_db(t, i);
    let db = need_db(db, current)?;
    check_db(catalog, &db)?;
    // LIKE applies to the table a trigger is on.
    let base = format!(
        "SELECT TRIGGER_NAME AS `Trigger`, EVENT_MANIPULATION AS `Event`, EVENT_OBJECT_TABLE AS \
         `Table`, ACTION_STATEMENT AS `Statement`, ACTION_TIMING AS `Timing`, CREATED AS \
         `Created`, SQL_MODE AS `sql_mode`, DEFINER AS `Definer`, CHARACTER_SET_CLIENT AS \
         `character_set_client`, COLLATION_CONNECTION AS `collation_connection`, \
         DATABASE_COLLATION AS `Database Collation` FROM information_schema.TRIGGERS WHERE \
         TRIGGER_SCHEMA = {}",
        quote_str(&schema_key(&db))
    );
    filtered(t, i, base, "Table")
}

fn events(
    t: &Tokens<'_>,
    i: usize,
    catalog: &CatalogSnapshot,
    current: Option<&str>,
) -> Result<String> {
    let (db, i) = from_db(t, i);
    let db = need_db(db, current)?;
    check_db(catalog, &db)?;
    let base = format!(
        "SELECT EVENT_SCHEMA AS `Db`, EVENT_NAME AS `Name`, DEFINER AS `Definer`, TIME_ZONE AS \
         `Time zone`, EVENT_TYPE AS `Type`, EXECUTE_AT AS `Execute at`, INTERVAL_VALUE AS \
         `Interval value`, INTERVAL_FIELD AS `Interval field`, STARTS AS `Starts`, ENDS AS \
         `Ends`, STATUS AS `Status`, ORIGINATOR AS `Originator`, CHARACTER_SET_CLIENT AS \
         `character_set_client`, COLLATION_CONNECTION AS `collation_connection`, \
         DATABASE_COLLATION AS `Database Collation` FROM information_schema.EVENTS WHERE \
         EVENT_SCHEMA = {}",
        quote_str(&schema_key(&db))
    );
    filtered(t, i, base, "Name")
}

fn routines(t: &Tokens<'_>, i: usize) -> Result<String> {
    let kind = if t.kw(1, "PROCEDURE") {
        "PROCEDURE"
    } else {
        "FUNCTION"
    };
    let base = format!(
        "SELECT ROUTINE_SCHEMA AS `Db`, ROUTINE_NAME AS `Name`, ROUTINE_TYPE AS `Type`, DEFINER \
         AS `Definer`, LAST_ALTERED AS `Modified`, CREATED AS `Created`, SECURITY_TYPE AS \
         `Security_type`, ROUTINE_COMMENT AS `Comment`, CHARACTER_SET_CLIENT AS \
         `character_set_client`, COLLATION_CONNECTION AS `collation_connection`, \
         DATABASE_COLLATION AS `Database Collation` FROM information_schema.ROUTINES WHERE \
         ROUTINE_TYPE = '{kind}'"
    );
    filtered(t, i, base, "Name")
}

/// `SHOW CREATE DATABASE` text, as MySQL 8.0 prints it.
pub fn create_database(name: &str, charset: &str, collation: &str, if_not_exists: bool) -> String {
    format!(
        "CREATE DATABASE {}{} /*!40100 DEFAULT CHARACTER SET {charset} COLLATE {collation} */ \
         /*!80016 DEFAULT ENCRYPTION='N' */",
        if if_not_exists {
            "/*!32312 IF NOT EXISTS*/ "
        } else {
            ""
        },
        quote_ident(name)
    )
}
