//! The one test support module of the integration tests: the binary under test, the
//! one bounded wait, the one liveness check, and the harnesses built on them:
//! `common` (a world with fake programs, for the core and security tests), `world`
//! (the daemon and command tests' world), `reliability` (process marks and guards on
//! top of `world`) and `pinned` (the shipped runner argv).
//!
//! A test binary takes what it uses: `mod support; use support::world;`.
#![allow(dead_code)]

pub mod common;
pub mod pinned;
pub mod reliability;
pub mod world;

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_llm-judge");
/// A generous "it did not hang" bound: proves nothing hangs, asserts no speed.
pub const NO_HANG: Duration = Duration::from_secs(60);

/// Shell functions for fake runners. A runner runs in its supervisor's PID namespace,
/// where `$$`, `$!` and `$PPID` are pids inside it; these print the pids the tests see
/// (read from `/proc/self/stat` and `NSpid`, in the shell itself: no fork). Call them
/// with a redirect, never inside `$(...)`, which forks: `hostpid >> $W/pids`,
/// `outerpid $! >> $W/pids`, `parentpid >> $W/parents`.
pub const PID_FUNCTIONS: &str = "hostpid() { read -r _p _ < /proc/self/stat; echo \"$_p\"; }\n\
parentpid() { read -r _ _ _ _pp _ < /proc/self/stat; echo \"$_pp\"; }\n\
outerpid() { read -r _me _ < /proc/self/stat; for _c in $(cat /proc/$_me/task/$_me/children 2>/dev/null); do \
while read -r _k _a _b; do [ \"$_k\" = NSpid: ] && [ \"${_b:-$_a}\" = \"$1\" ] && echo \"$_c\"; done 2>/dev/null < /proc/$_c/status; done; }\n";

/// The same as `hostpid`, for a `sh -c '...'` line that has no functions: sets `$p`.
pub const READ_HOST_PID: &str = "read -r p _ </proc/self/stat";

/// Polls `cond` every 15 ms until it holds (true) or `deadline` passes (false).
pub fn wait_until(deadline: Instant, mut cond: impl FnMut() -> bool) -> bool {
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(15));
    }
}

/// Waits for `child` until `limit` passes; past it, kills and reaps it and returns
/// `None`. No test leaves a process running or waits without a deadline.
pub fn wait_child(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let mut status = None;
    wait_until(Instant::now() + limit, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// Field `n` of `/proc/<pid>/stat` counted after the command name (0: the state
/// letter, 1: the parent pid), or `None` when the process is gone (Linux).
pub fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 1..)?;
    after.split_whitespace().nth(n).map(str::to_string)
}

/// True when `pid` is a child of `daemon` running the binary under test: the daemon's
/// supervisor zygote (src/process/zygote.rs), which lives exactly as long as it.
pub fn is_daemon_zygote(pid: u32, daemon: u32) -> bool {
    parent_if_ours(pid) == Some(daemon)
}

/// True for the daemon's zygote and the pooled supervisors it forked (children of the
/// zygote running the binary under test), which live as long as the daemon.
pub fn is_daemon_helper(pid: u32, daemon: u32) -> bool {
    parent_if_ours(pid).is_some_and(|parent| parent == daemon || is_daemon_zygote(parent, daemon))
}

/// The parent of `pid` when `pid` runs the binary under test.
fn parent_if_ours(pid: u32) -> Option<u32> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    if exe != std::path::Path::new(BIN) {
        return None;
    }
    stat_field(pid, 1)?.parse().ok()
}

/// `/proc/<pid>/stat` state letter, or `None` when the process is gone (Linux).
pub fn proc_state(pid: u32) -> Option<char> {
    stat_field(pid, 0)?.chars().next()
}

/// True while the process exists and is not a zombie.
pub fn is_running(pid: u32) -> bool {
    proc_state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}
