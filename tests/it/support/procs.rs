//! Processes seen through `/proc` (Linux): liveness, the daemon's own helpers, the
//! per-test mark every process a judge starts inherits, and the guards that kill what
//! a test left behind, also when it fails.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{BIN, NO_HANG, resolve_pids, wait_until, within};

/// The variable that marks every process a test's judge started.
pub const MARK_VAR: &str = "RELIABILITY_MARK";

/// A unique marker for one test.
pub fn new_mark(test: &str) -> String {
    format!("{test}-{}", llm_judge::api::new_tag())
}

/// Field `n` of `/proc/<pid>/stat` counted after the command name (0: the state
/// letter, 1: the parent pid), or `None` when the process is gone.
pub fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 1..)?;
    after.split_whitespace().nth(n).map(str::to_string)
}

/// `/proc/<pid>/stat` state letter, or `None` when the process is gone.
pub fn proc_state(pid: u32) -> Option<char> {
    stat_field(pid, 0)?.chars().next()
}

/// True while the process exists and is not a zombie.
pub fn is_running(pid: u32) -> bool {
    proc_state(pid).is_some_and(|s| s != 'Z' && s != 'X')
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
    let exe = fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    if exe != Path::new(BIN) {
        return None;
    }
    stat_field(pid, 1)?.parse().ok()
}

/// The command line of a process, NUL-separated items joined by spaces.
pub fn cmdline(pid: u32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .trim_end_matches('\0')
                .replace('\0', " ")
        })
        .unwrap_or_default()
}

/// Live (non-zombie) processes, other than this test process, whose environment
/// holds `RELIABILITY_MARK=<mark>`.
pub fn marked(mark: &str) -> Vec<u32> {
    let needle = format!("{MARK_VAR}={mark}\0").into_bytes();
    let me = std::process::id();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_slice()))
        })
        .filter(|&pid| is_running(pid))
        .collect()
}

/// Waits (bounded) until no marked process is left other than those in `except`
/// (running daemons) and their supervisor zygotes; returns those still alive at the
/// deadline with their command lines.
pub fn wait_no_marked(mark: &str, except: &[u32], deadline: Duration) -> Vec<(u32, String)> {
    let excepted = |p: u32| except.contains(&p) || except.iter().any(|&d| is_daemon_helper(p, d));
    let left = || -> Vec<u32> { marked(mark).into_iter().filter(|&p| !excepted(p)).collect() };
    if wait_until(within(deadline), || left().is_empty()) {
        return Vec::new();
    }
    left().into_iter().map(|p| (p, cmdline(p))).collect()
}

/// Waits (bounded) until every pid is gone or a zombie; returns those still running.
pub fn wait_gone(pids: &[u32], deadline: Duration) -> Vec<u32> {
    wait_until(within(deadline), || pids.iter().all(|&p| !is_running(p)));
    pids.iter().copied().filter(|&p| is_running(p)).collect()
}

/// Asserts the file `pids` names one process (an escapee a fake wrote down) and that
/// it is gone within `limit`.
pub fn assert_escapee_gone(pids: &Path, limit: Duration) {
    let escaped = pids_in_file(pids);
    assert_eq!(
        escaped.len(),
        1,
        "{}: the fake recorded its escapee",
        pids.display()
    );
    let left = wait_gone(&escaped, limit);
    assert!(
        left.is_empty(),
        "{}: escapee still running: {:?}",
        pids.display(),
        left.iter().map(|&p| (p, cmdline(p))).collect::<Vec<_>>()
    );
}

/// Host pids of the pids in a text (one or more per line, as `hostpid` writes them),
/// in order; one that is gone gives [`GONE`].
pub fn pids_in(text: &str) -> Vec<u32> {
    resolve_pids(text)
}

/// Pids written to a file (as [`pids_in`]), in order; none when it is missing.
pub fn pids_in_file(path: &Path) -> Vec<u32> {
    pids_in(&fs::read_to_string(path).unwrap_or_default())
}

/// Reads a pid file a runner wrote (bounded wait for it to appear).
pub fn read_pid(file: &Path) -> u32 {
    let mut pid = None;
    let found = wait_until(within(NO_HANG), || {
        pid = pids_in_file(file).first().copied();
        pid.is_some()
    });
    assert!(found, "pid file {} never appeared", file.display());
    pid.expect("pid")
}

/// SIGKILL one pid (best effort).
pub fn unsafe_kill(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: kill(2) with a plain pid and signal has no memory effects.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Sends `sig` to a pid.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a plain pid and signal has no memory effects.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

/// Kills what a test left behind when it ends (panic included): every marked
/// process, and every pid in the listed files whose command line holds `token`
/// (for processes that dropped their environment; the token guards against pid reuse).
pub struct Reaper {
    pub mark: String,
    pub pid_files: Vec<(PathBuf, String)>,
}

impl Reaper {
    pub fn new(mark: &str) -> Self {
        Reaper {
            mark: mark.to_string(),
            pid_files: Vec::new(),
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in marked(&self.mark) {
            unsafe_kill(pid);
        }
        for (file, token) in &self.pid_files {
            for pid in pids_in_file(file) {
                if is_running(pid) && cmdline(pid).contains(token.as_str()) {
                    unsafe_kill(pid);
                }
            }
        }
    }
}

/// SIGKILLs the processes whose pids the files name, on drop, unless disarmed:
/// cleanup for runner processes a failing test might leave behind.
pub struct KillPidsOnDrop {
    pub files: Vec<PathBuf>,
    pub armed: bool,
}

impl KillPidsOnDrop {
    pub fn new(files: &[&Path]) -> Self {
        KillPidsOnDrop {
            files: files.iter().map(|p| p.to_path_buf()).collect(),
            armed: true,
        }
    }
}

impl Drop for KillPidsOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        for file in &self.files {
            for pid in pids_in_file(file).into_iter().filter(|&p| p > 1) {
                if is_running(pid) {
                    unsafe_kill(pid);
                }
            }
        }
    }
}
