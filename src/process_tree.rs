//! Finding and stopping every process a runner started: its process group, and on
//! Linux every process whose environment carries the job's tag (which survives
//! `setsid` and re-parenting, also after a daemon crash).

use std::collections::BTreeSet;
use std::sync::Mutex;

use rustix::process::{Pid, Signal, kill_process, kill_process_group};

/// The environment variable that tags every process started for one claim.
pub const TAG_VAR: &str = "LLM_JUDGE_TAG";

/// Sends `signal` to a process group; a group that is already gone is fine.
pub fn signal_group(pgid: u32, signal: Signal) {
    if let Some(pid) = to_pid(pgid) {
        let _ = kill_process_group(pid, signal);
    }
}

fn to_pid(raw: u32) -> Option<Pid> {
    i32::try_from(raw).ok().and_then(Pid::from_raw)
}

/// When a process started, in clock ticks since boot (Linux); guards against pid reuse.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2 (comm) may hold spaces and parentheses: fields after the last ')' are plain.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// True when the process exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        return stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X");
    }
    !cfg!(target_os = "linux")
        && to_pid(pid).is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// Kills the group `pgid` if its leader still has the recorded start time.
pub fn kill_recorded_group(pgid: u32, recorded_start: Option<u64>) -> bool {
    let current = start_time(pgid);
    let same = match (recorded_start, current) {
        (Some(a), Some(b)) => a == b,
        // No /proc (macOS) or a leader that is gone: the group may live on without its
        // leader, and a pgid is not reused while any member lives.
        (None, _) | (_, None) => true,
    };
    if same {
        signal_group(pgid, Signal::KILL);
    }
    same
}

/// Pids of live processes whose environment holds `LLM_JUDGE_TAG=<tag>`. A process
/// caught in the middle of an `exec` shows an empty environment for a moment, so a
/// pass that met one is repeated a few times (a process that really has an empty
/// environment only costs those retries; the tagged pids found are returned anyway).
pub fn tagged_processes(tag: &str) -> Vec<u32> {
    let mut scan = scan_tagged(tag);
    for _ in 0..5 {
        if !scan.unsure {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        scan = scan_tagged(tag);
    }
    scan.found
}

struct Scan {
    found: Vec<u32>,
    /// A live user process had an empty environment (maybe mid-exec).
    unsure: bool,
}

fn scan_tagged(tag: &str) -> Scan {
    let mut scan = Scan {
        found: Vec::new(),
        unsure: false,
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return scan;
    };
    let needle = format!("{TAG_VAR}={tag}\0").into_bytes();
    let me = std::process::id();
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        if pid == me {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.windows(needle.len()).any(|w| w == needle.as_slice()) {
            if is_alive(pid) {
                scan.found.push(pid);
            }
        } else if env.is_empty() && is_alive(pid) && !is_kernel_thread(pid) {
            scan.unsure = true;
        }
    }
    scan
}

/// Kernel threads have no environment at all; their parent is 0 or kthreadd (2).
fn is_kernel_thread(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        matches!(ppid, Some(0) | Some(2))
    })
}

/// SIGKILLs every tagged process until none is left (bounded passes, for forkers).
/// Returns how many were signalled.
pub fn kill_tagged(tag: &str) -> usize {
    let mut killed = 0;
    for _ in 0..50 {
        let pids = tagged_processes(tag);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            if let Some(p) = to_pid(pid) {
                // Its own group too: a setsid'd process may have children without the tag.
                let _ = kill_process_group(p, Signal::KILL);
                let _ = kill_process(p, Signal::KILL);
                killed += 1;
            }
        }
    }
    killed
}

/// Makes this process the reaper of its runners' orphans (Linux): a descendant that
/// escapes and clears its environment (no tag) still becomes our child, so the
/// orphan sweep finds it.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        tracing::warn!(
            "cannot become a child subreaper ({e}); untagged escaped processes may survive"
        );
    }
}

/// Runner pids this process waits for (tokio reaps them: the sweep must not).
static RUNNERS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
/// Tags of attempts running now, so the sweep leaves their processes alone.
static ACTIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Held across spawn + registration and during a sweep, so a runner that exits at
/// once is never reaped by the sweep before it is registered.
pub static SPAWN_LOCK: Mutex<()> = Mutex::new(());

/// An attempt in progress: its tag is active while this lives.
pub struct ActiveAttempt {
    tag: String,
}

impl ActiveAttempt {
    /// Marks `tag` active.
    pub fn start(tag: &str) -> Self {
        lock(&ACTIVE).push(tag.to_string());
        ActiveAttempt {
            tag: tag.to_string(),
        }
    }
}

impl Drop for ActiveAttempt {
    fn drop(&mut self) {
        let mut active = lock(&ACTIVE);
        if let Some(i) = active.iter().position(|t| t == &self.tag) {
            active.swap_remove(i);
        }
    }
}

/// A runner pid registered while tokio waits for it.
pub struct RegisteredRunner(u32);

impl RegisteredRunner {
    /// Registers `pid`; call with `SPAWN_LOCK` held, right after the spawn.
    pub fn new(pid: u32) -> Self {
        lock(&RUNNERS).insert(pid);
        RegisteredRunner(pid)
    }
}

impl Drop for RegisteredRunner {
    fn drop(&mut self) {
        lock(&RUNNERS).remove(&self.0);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stops and reaps orphans re-parented to us (we are their subreaper): those tagged
/// `own_tag` or an inactive tag, and untagged ones when no other attempt runs (an
/// untagged orphan cannot be told apart: it waits until then). Bounded passes.
pub fn sweep_orphans(own_tag: &str) {
    let _spawning = lock(&SPAWN_LOCK);
    for _ in 0..20 {
        let mut killed = false;
        for child in own_children() {
            if lock(&RUNNERS).contains(&child) {
                continue;
            }
            if !is_alive(child) {
                reap(child);
                continue;
            }
            let active = lock(&ACTIVE).clone();
            let others_active = active.iter().any(|t| t != own_tag);
            let stop = match tag_of(child) {
                Some(tag) => tag == own_tag || !active.contains(&tag),
                None => !others_active,
            };
            if stop && let Some(p) = to_pid(child) {
                let _ = kill_process_group(p, Signal::KILL);
                let _ = kill_process(p, Signal::KILL);
                killed = true;
            }
        }
        if !killed {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn reap(pid: u32) {
    if let Some(p) = to_pid(pid) {
        let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
    }
}

/// Our direct children, from every thread's `children` list (Linux).
fn own_children() -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The `LLM_JUDGE_TAG` value in a process's environment, if any.
fn tag_of(pid: u32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{TAG_VAR}=");
    env.split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
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

    #[test]
    fn unknown_tag_finds_nothing() {
        assert!(tagged_processes("no-such-tag-4f1c").is_empty());
        assert_eq!(kill_tagged("no-such-tag-4f1c"), 0);
    }
}
