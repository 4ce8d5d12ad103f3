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

use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_llm-judge");
/// A generous "it did not hang" bound: proves nothing hangs, asserts no speed.
pub const NO_HANG: Duration = Duration::from_secs(60);

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

/// True when `pid` is a child of `daemon` running the binary under test: the daemon's
/// supervisor zygote (src/process/zygote.rs), which lives exactly as long as it.
pub fn is_daemon_helper(pid: u32, daemon: u32) -> bool {
    let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.get(stat.rfind(')')? + 1..)?.to_string();
            after.split_whitespace().nth(1)?.parse::<u32>().ok()
        });
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    parent == Some(daemon) && exe.is_some_and(|e| e == std::path::Path::new(BIN))
}

/// `/proc/<pid>/stat` state letter, or `None` when the process is gone (Linux).
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .and_then(|s| s.chars().next())
}

/// True while the process exists and is not a zombie.
pub fn is_running(pid: u32) -> bool {
    proc_state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}
