//! `tibinlog inspect`: offline decoders for the bytes one meets while debugging a cluster or a
//! binlog — TiKV keys, TiDB row values, binlog files. Each prints JSON or `mysqlbinlog`-style text
//! and fails with a message naming what is wrong, never a panic.

pub mod binlog;
pub mod key;
pub mod row;
pub mod rows;

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context as _;

/// One `inspect` invocation, as parsed from the command line.
#[derive(Debug, Clone)]
pub enum Request {
    /// Print a binlog file.
    Binlog { file: PathBuf },
    /// Decode a key given in hex; `encoded` = region (memcomparable) form.
    Key { hex: String, encoded: bool },
    /// Decode a row value given in hex with a TableInfo JSON file.
    Row {
        table_info: PathBuf,
        hex: String,
        handle: row::HandleArg,
    },
}

/// Runs one request, writing to standard output.
pub fn run(req: Request) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match req {
        Request::Binlog { file } => {
            let f = std::fs::File::open(&file)
                .with_context(|| format!("cannot open {}", file.display()))?;
            binlog::dump(std::io::BufReader::new(f), &mut out)
                .with_context(|| format!("reading {}", file.display()))?;
        }
        Request::Key { hex, encoded } => {
            let j = key::describe(&hex, encoded)?;
            writeln!(out, "{j}")?;
        }
        Request::Row {
            table_info,
            hex,
            handle,
        } => {
            let info = std::fs::read(&table_info)
                .with_context(|| format!("cannot read {}", table_info.display()))?;
            let text = row::describe(&info, &hex, &handle)?;
            writeln!(out, "{text}")?;
        }
    }
    out.flush()?;
    Ok(())
}
