//! Finding the real peers (programs, jars) that tests talk to. A missing peer skips the test
//! locally but fails it under CI (`CI=true`), so CI can never pass by silently not testing.

#![allow(dead_code)]

use std::path::PathBuf;

/// True when running under CI (`CI=true`).
pub fn under_ci() -> bool {
    std::env::var("CI").map(|v| v == "true").unwrap_or(false)
}

/// Finds an executable on PATH (or in /usr/bin, /usr/sbin).
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Reports a missing peer: panics under CI, otherwise prints why the test is skipped.
pub fn missing(what: &str) {
    assert!(
        !under_ci(),
        "{what} is missing; scripts/install-deps.sh installs it"
    );
    eprintln!("skipped: {what} is missing (run scripts/install-deps.sh)");
}

/// The directory `scripts/peer-jars.sh install NAME` filled for the Maven peer
/// `tests/peers/NAME/pom.xml` (its `libs/` holds the jars), or `None`, after reporting it
/// missing, when it is not installed.
pub fn maven_peer(name: &str) -> Option<PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/peer-jars.sh"))
        .args(["path", name])
        .output()
        .expect("run scripts/peer-jars.sh");
    assert!(out.status.success(), "scripts/peer-jars.sh path {name}");
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !dir.join(".complete").is_file() {
        missing(&format!(
            "the jars of tests/peers/{name} in {} (scripts/peer-jars.sh install {name})",
            dir.display()
        ));
        return None;
    }
    Some(dir)
}
