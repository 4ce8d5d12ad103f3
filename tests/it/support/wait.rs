//! Bounded waits: the one poll loop every test waits with, and its deadlines.

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// A generous "it did not hang" bound: proves nothing hangs, asserts no speed.
pub const NO_HANG: Duration = Duration::from_secs(60);

/// A deadline `d` from now.
pub fn within(d: Duration) -> Instant {
    Instant::now() + d
}

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

/// Polls `cond` until it holds or `limit` passes (then panics naming `what`).
pub fn wait_for(what: &str, limit: Duration, cond: impl FnMut() -> bool) {
    let held = wait_until(within(limit), cond);
    assert!(held, "timed out waiting for: {what}");
}

/// Waits for `child` until `limit` passes; past it, kills and reaps it and returns
/// `None`. No test leaves a process running or waits without a deadline.
pub fn wait_child(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let mut status = None;
    wait_until(within(limit), || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}
