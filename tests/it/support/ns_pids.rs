//! Pids a fake runner recorded, as the tests see them. A runner has its supervisor's
//! PID namespace and a `/proc` of that namespace (src/process/pid_ns.rs), so the pids
//! it can read are pids inside it. The pid functions of `fakes` therefore write
//! `<pid>@<inode>`, the inode of the runner's `/proc/self/ns/pid`; here that becomes
//! the host pid of the one process in that namespace with that pid, read from the
//! host's `/proc` (the test's).

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;

/// A pid no process can have (above the kernel's `PID_MAX_LIMIT`, 2^22), yet a
/// positive one: what a recorded process that no longer exists resolves to. Never
/// running, and a signal to it reaches nobody.
pub const GONE: u32 = i32::MAX as u32;

/// The host pids of the pids in `text` (whitespace-separated words, each a host pid
/// or `<pid>@<inode>`), in order; a recorded process that is gone gives [`GONE`].
/// Words that are neither are skipped.
pub fn resolve_pids(text: &str) -> Vec<u32> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut by_namespace = None;
    words
        .iter()
        .filter_map(|word| {
            let Some((pid, ns)) = word.split_once('@') else {
                return word.parse().ok();
            };
            let (pid, ns): (u32, u64) = (pid.parse().ok()?, ns.parse().ok()?);
            // A runner that sees the host's /proc (no mount namespace) wrote its host pid.
            if pid_namespace(pid) == Some(ns) {
                return Some(pid);
            }
            let table = by_namespace.get_or_insert_with(namespace_pids);
            Some(table.get(&(ns, pid)).copied().unwrap_or(GONE))
        })
        .collect()
}

/// The inode of `/proc/<pid>/ns/pid`: which PID namespace the process is in.
fn pid_namespace(pid: u32) -> Option<u64> {
    fs::metadata(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|m| m.ino())
}

/// Every process now: (its PID namespace's inode, its pid in there) to its host pid.
fn namespace_pids() -> HashMap<(u64, u32), u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return HashMap::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|host| {
            let ns = pid_namespace(host)?;
            Some(((ns, inner_pid(host)?), host))
        })
        .collect()
}

/// The last `NSpid:` field of `/proc/<pid>/status`: its pid in its own namespace.
fn inner_pid(pid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// Shell functions for fake runners that write pids the tests can resolve; call them
/// with a redirect, never inside `$(...)`, which forks: `hostpid >> $W/pids` (this
/// shell), `outerpid $! >> $W/pids` (a child), `parentpid >> $W/parents`. A `sh -c`
/// line without them writes `$p@$(stat -Lc %i /proc/self/ns/pid)` after
/// `read -r p _ </proc/self/stat`.
///
/// Each writes its line with one `printf`: runners and their children append to the
/// same file at once, and a line written in two parts could be split by another's.
pub const PID_FUNCTIONS: &str = "_pidline() { printf '%s@%s\\n' \"$1\" \"$(stat -Lc %i /proc/self/ns/pid)\"; }\n\
hostpid() { read -r _p _ < /proc/self/stat; _pidline \"$_p\"; }\n\
parentpid() { read -r _ _ _ _pp _ < /proc/self/stat; _pidline \"$_pp\"; }\n\
outerpid() { _pidline \"$1\"; }\n";
