//! Crash points for the crash-matrix tests (cargo feature `failpoints`, never in a
//! release build): with `LLM_JUDGE_FAILPOINT=<name>` the process SIGKILLs itself on
//! reaching that point, exactly as a `kill -9` there would. Also a hung path, a
//! refused `/proc` mount and a judge that maps no pid, for the tests of those.

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

/// Blocks for an hour when `path` is `LLM_JUDGE_HANG_PATH`: a file-system call on a hung
/// mount (a FUSE folder whose `stat` never returns), for the tests.
#[cfg(feature = "failpoints")]
pub fn hang_on(path: &std::path::Path) {
    if std::env::var_os("LLM_JUDGE_HANG_PATH").is_some_and(|p| p == path.as_os_str()) {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// True when `LLM_JUDGE_REFUSE_PROC_MOUNT` is set: supervisors are then isolated as
/// where mounting a `/proc` for runners is refused (a container), for the tests.
#[cfg(all(feature = "failpoints", target_os = "linux"))]
pub fn proc_mount_refused() -> bool {
    std::env::var_os("LLM_JUDGE_REFUSE_PROC_MOUNT").is_some()
}

/// False: failpoints are compiled out.
#[cfg(all(not(feature = "failpoints"), target_os = "linux"))]
#[inline(always)]
pub fn proc_mount_refused() -> bool {
    false
}

/// True when `LLM_JUDGE_NO_PID_LOOKUP` is set: the judge then never maps a runner's
/// pid through `/proc` itself, so a test sees the pid its supervisor reported.
#[cfg(feature = "failpoints")]
pub fn pid_lookup_off() -> bool {
    std::env::var_os("LLM_JUDGE_NO_PID_LOOKUP").is_some()
}

/// False: failpoints are compiled out.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn pid_lookup_off() -> bool {
    false
}

/// Does nothing: failpoints are compiled out.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hang_on(_path: &std::path::Path) {}

/// Does nothing: failpoints are compiled out.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn crash(_name: &str) {}
