//! Signals to process groups, process liveness, and the tag search (`tag_search`): on
//! Linux every process of the judge's user whose environment carries an attempt's tag. The tag search scans all of
//! `/proc`, so it is kept for what a runner's supervisor cannot see: leftovers
//! of a judge that crashed, and a supervisor that was killed.
//!
//! The calls that differ by platform (subreaper, `pipe2`, `close_range`, pidfd,
//! `/proc` children) are in `linux.rs` and `macos.rs`, one of which is re-exported
//! here; `forked.rs` has what a freshly forked helper does to itself.

use rustix::process::{Pid, Signal, kill_process_group};

pub(crate) mod forked;
mod tag_search;
pub use tag_search::{kill_tagged, kill_tagged_prefix};
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::{
    become_subreaper, close_range, open_children, pipe_cloexec, read_children, read_children_of,
    wait_watching,
};
#[cfg(not(target_os = "linux"))]
mod macos;
#[cfg(not(target_os = "linux"))]
pub(crate) use macos::{
    become_subreaper, close_range, pipe_cloexec, read_children, read_children_of, wait_watching,
};

/// The calling thread's last OS error number (0 if none).
pub(crate) fn errno() -> libc::c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Sends `signal` to a process group; a group that is already gone is fine.
pub fn signal_group(pgid: u32, signal: Signal) {
    if let Some(pid) = to_pid(pgid) {
        let _ = kill_process_group(pid, signal);
    }
}

fn to_pid(raw: u32) -> Option<Pid> {
    i32::try_from(raw).ok().and_then(Pid::from_raw)
}

/// Field `n` (0 = the state, field 3 of `man proc`) of `/proc/<pid>/stat` (Linux).
/// Field 2 (comm) may hold spaces and parentheses: fields after the last ')' are plain.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = read_small(&format!("/proc/{pid}/stat"))?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(n).map(str::to_string)
}

/// A short /proc file (up to 4 KiB) in two reads: `read_to_string` stats it and starts
/// at 32 bytes, eight calls for a stat line, once per runner start.
fn read_small(path: &str) -> Option<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut buf = [0u8; 4096];
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    String::from_utf8(buf[..len].to_vec()).ok()
}

/// The pid here of `parent`'s child whose pid in its own (innermost) namespace is
/// `inner`: a supervisor that is the init of a PID namespace reports its runner's pid
/// as seen inside, and the judge signals by the pid it sees (Linux `/proc`).
pub fn outer_pid_of_child(parent: u32, inner: u32) -> Option<u32> {
    let children = read_small(&format!("/proc/{parent}/task/{parent}/children"))?;
    children
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .find(|&child| innermost_pid(child) == Some(inner))
}

/// The last `NSpid:` field of `/proc/<pid>/status`: its pid in its own namespace.
fn innermost_pid(pid: u32) -> Option<u32> {
    let status = read_small(&format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// When a process started, in clock ticks since boot (Linux); guards against pid reuse.
pub fn start_time(pid: u32) -> Option<u64> {
    stat_field(pid, 19)?.parse().ok()
}

/// True when the process exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    if let Some(state) = stat_field(pid, 0) {
        return state != "Z" && state != "X";
    }
    !cfg!(target_os = "linux")
        && to_pid(pid).is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// Kills the group `pgid` if its leader still has the recorded start time; true when
/// the group still had a member to kill (after a reboot it has none).
pub fn kill_recorded_group(pgid: u32, recorded_start: Option<u64>) -> bool {
    let current = start_time(pgid);
    let same = match (recorded_start, current) {
        (Some(a), Some(b)) => a == b,
        // No /proc (macOS) or a leader that is gone: the group may live on without its
        // leader, and a pgid is not reused while any member lives.
        (None, _) | (_, None) => true,
    };
    same && to_pid(pgid).is_some_and(|pid| kill_process_group(pid, Signal::KILL).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_time_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            let t = start_time(std::process::id());
            assert!(t.is_some());
            assert_eq!(t, start_time(std::process::id()));
            assert!(is_alive(std::process::id()));
        }
    }
}
