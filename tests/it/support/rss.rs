//! A judge's peak memory, measured through a forking intermediary (GNU time).
//!
//! Why not `wait4` on the judge from the test process: std starts a child with
//! `posix_spawn` (a vfork), so the child execs from this process's memory, and Linux
//! folds that memory's high-water mark into the child's `ru_maxrss`. This test binary
//! runs every integration test and can itself pass any bound set for the judge. GNU
//! time forks from its own small process, execs the command, and reports what its
//! `wait4` says: the judge's peak and that of the descendants it waited for.

use std::fs;
use std::path::Path;
use std::process::Command;

use super::with_env_of;

/// GNU time (Debian package `time`).
const GNU_TIME: &str = "/usr/bin/time";

/// `cmd` (program, arguments, environment and folder) run under GNU time, which
/// writes the peak RSS in KiB to `report`. `cmd` must spell its environment out in
/// full, as every world command does.
pub fn under_gnu_time(cmd: &Command, report: &Path) -> Command {
    assert!(
        Path::new(GNU_TIME).exists(),
        "{GNU_TIME} measures a judge's peak RSS: install GNU time (apt-get install time)"
    );
    let mut timed = with_env_of(cmd, GNU_TIME);
    timed
        .arg("--format=%M")
        .arg("--output")
        .arg(report)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        timed.current_dir(dir);
    }
    timed
}

/// The peak RSS (KiB) GNU time wrote to `report` (its last line; a line before it
/// tells a non-zero exit).
pub fn peak_rss_kib(report: &Path) -> i64 {
    let text = fs::read_to_string(report)
        .unwrap_or_else(|e| panic!("GNU time's report {}: {e}", report.display()));
    let last = text.lines().rev().find(|l| !l.trim().is_empty());
    last.and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak RSS in GNU time's report: {text:?}"))
}
