//! Crash points for the crash-matrix tests (cargo feature `failpoints`, never in a
//! release build): with `LLM_JUDGE_FAILPOINT=<name>` the process SIGKILLs itself on
//! reaching that point, exactly as a `kill -9` there would.

/// Every crash point, in the order a job (then a drain) reaches them.
#[cfg(feature = "failpoints")]
pub const POINTS: [&str; 8] = [
    "after_claim",
    "runner_started",
    "verdict_temp_written",
    "publishing_recorded",
    "verdict_renamed",
    "job_removed",
    "drain_claimed",
    "drain_printed",
];

/// Dies here if the test asked for it.
#[cfg(feature = "failpoints")]
pub fn crash(name: &str) {
    debug_assert!(POINTS.contains(&name), "unknown failpoint {name}");
    if std::env::var("LLM_JUDGE_FAILPOINT").is_ok_and(|v| v == name) {
        let me = rustix::process::getpid();
        let _ = rustix::process::kill_process(me, rustix::process::Signal::KILL);
    }
}

/// Does nothing: failpoints are compiled out.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn crash(_name: &str) {}
