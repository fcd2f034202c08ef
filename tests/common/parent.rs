//! Child processes that do not outlive the test or benchmark that started them (shared with
//! the benchmarks).

use std::path::Path;

use tokio::process::Command;

/// A command for `program` that gets SIGKILL when the thread that spawns it goes away: with
/// the test process, even one killed by the OOM killer or a signal, which `kill_on_drop`
/// cannot see. util-linux's `setpriv` sets the parent-death signal and execs the program (same
/// pid); without it the command is the plain one. Tests spawn from runtime threads that live as
/// long as the test.
pub fn command(program: &Path) -> Command {
    const SETPRIV: &str = "/usr/bin/setpriv";
    if Path::new(SETPRIV).exists() {
        let mut cmd = Command::new(SETPRIV);
        cmd.args(["--pdeathsig", "KILL", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

/// A `tibinlog` child as tests and benchmarks run it: [`command`] with `args`, `RUST_LOG=info`
/// without colours, stdout piped (its JSON lines), stderr into `log`, killed on drop.
pub fn tibinlog_command(program: &Path, args: &[String], log: std::fs::File) -> Command {
    use std::process::Stdio;
    let mut cmd = command(program);
    cmd.args(args)
        .env(
            "RUST_LOG",
            std::env::var("TIBINLOG_CHILD_LOG").unwrap_or_else(|_| "info".to_owned()),
        )
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true);
    cmd
}
