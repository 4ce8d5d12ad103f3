//! The tag search (Linux `/proc`): every live process of the judge's own user whose
//! environment has an entry `LLM_JUDGE_TAG=<tag>` (or, for the start-up sweep, one
//! starting `LLM_JUDGE_TAG=<prefix>`). Only that user's processes are looked at (a root
//! daemon never touches another user's), only a whole entry counts (a tag inside
//! another variable's value does not), and each process is read on a helper thread
//! within `READ_LIMIT`: a `/proc/<pid>/environ` read that stalls (a process stuck on a
//! FUSE mapping holds its memory lock) is skipped and logged, and never read again in
//! the same search, so it cannot hang start-up or a slot.

use std::collections::HashSet;
use std::sync::mpsc;
use std::time::Duration;

use rustix::process::{Signal, kill_process, kill_process_group};

use super::{is_alive, read_small, stat_field, to_pid};
use crate::process::tag::TAG_VAR;

/// How long one process's `/proc` files may take to read.
const READ_LIMIT: Duration = Duration::from_secs(2);

/// After this many stalled reads a search gives up on the processes left.
const MAX_STALLED: usize = 8;

/// What a search looks for in one environment entry.
enum Needle {
    /// The entry is exactly `LLM_JUDGE_TAG=<tag>`.
    Exact(Vec<u8>),
    /// The entry starts with `LLM_JUDGE_TAG=<prefix>`.
    Prefix(Vec<u8>),
}

impl Needle {
    fn exact(tag: &str) -> Self {
        Needle::Exact(format!("{TAG_VAR}={tag}").into_bytes())
    }

    fn prefix(prefix: &str) -> Self {
        Needle::Prefix(format!("{TAG_VAR}={prefix}").into_bytes())
    }

    /// True when one NUL-separated entry of `environ` matches.
    fn in_environ(&self, environ: &[u8]) -> bool {
        environ.split(|b| *b == 0).any(|entry| match self {
            Needle::Exact(n) => entry == n.as_slice(),
            Needle::Prefix(n) => entry.starts_with(n),
        })
    }
}

/// SIGKILLs every tagged process until none is left; returns how many.
pub fn kill_tagged(tag: &str) -> usize {
    Search::new(Needle::exact(tag)).kill_all()
}

/// SIGKILLs every process of ours whose tag starts with `prefix`, as `kill_tagged` does.
pub fn kill_tagged_prefix(prefix: &str) -> usize {
    Search::new(Needle::prefix(prefix)).kill_all()
}

/// One search: its needle, and the processes whose read stalled (skipped from then on).
struct Search {
    needle: std::sync::Arc<Needle>,
    stalled: HashSet<u32>,
    uid: u32,
}

/// What a pass found.
struct Scan {
    found: Vec<u32>,
    /// A live user process had an empty environment (maybe mid-exec).
    unsure: bool,
}

/// One process as read on a helper thread.
enum Seen {
    /// Gone, another user's, or unreadable.
    Skip,
    /// Ours, with a matching entry.
    Tagged,
    /// Ours, with an empty environment (mid-exec, or a kernel thread).
    Empty,
    /// Ours, without the tag.
    Other,
}

impl Search {
    fn new(needle: Needle) -> Self {
        Search {
            needle: std::sync::Arc::new(needle),
            stalled: HashSet::new(),
            uid: rustix::process::getuid().as_raw(),
        }
    }

    /// The tagged pids. A process caught in the middle of an `exec` shows an empty
    /// environment for a moment, so a pass that met one is repeated a few times (a
    /// process that really has an empty environment only costs those retries; the
    /// tagged pids found are returned anyway).
    fn find(&mut self) -> Vec<u32> {
        let mut scan = self.scan();
        for _ in 0..5 {
            if !scan.unsure {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
            scan = self.scan();
        }
        scan.found
    }

    /// SIGKILLs what it finds until it finds nothing (bounded passes, for forkers).
    /// Returns how many distinct processes were signalled: one that is still dying when
    /// the next pass looks counts once.
    fn kill_all(&mut self) -> usize {
        let mut killed = HashSet::new();
        for _ in 0..50 {
            let pids = self.find();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                if let Some(p) = to_pid(pid) {
                    // Its own group too: a setsid'd process may have children without the tag.
                    let _ = kill_process_group(p, Signal::KILL);
                    let _ = kill_process(p, Signal::KILL);
                    killed.insert(pid);
                }
            }
        }
        killed.len()
    }

    /// One pass over `/proc`.
    fn scan(&mut self) -> Scan {
        let mut scan = Scan {
            found: Vec::new(),
            unsure: false,
        };
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return scan;
        };
        let me = std::process::id();
        let pids: Vec<u32> = entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| *pid != me && !self.stalled.contains(pid))
            .collect();
        for (pid, seen) in self.read_all(pids) {
            match seen {
                Seen::Tagged if is_alive(pid) => scan.found.push(pid),
                Seen::Empty if is_alive(pid) && !is_kernel_thread(pid) => scan.unsure = true,
                _ => {}
            }
        }
        scan
    }

    /// Reads each of `pids` on a helper thread, each within `READ_LIMIT`. A read past
    /// it leaves that helper behind (it ends once the read returns), skips the process
    /// for the rest of the search, and a new helper goes on with the others.
    fn read_all(&mut self, pids: Vec<u32>) -> Vec<(u32, Seen)> {
        let mut out = Vec::with_capacity(pids.len());
        let mut rest = pids.as_slice();
        while !rest.is_empty() {
            let (tx, rx) = mpsc::channel();
            let (needle, uid, batch) = (self.needle.clone(), self.uid, rest.to_vec());
            let helper = std::thread::Builder::new()
                .name("llm-judge-proc".into())
                .spawn(move || {
                    for pid in batch {
                        if tx.send((pid, read_one(pid, uid, &needle))).is_err() {
                            return;
                        }
                    }
                });
            if helper.is_err() {
                // No thread to be had: read here, unbounded, rather than not at all.
                let needle = self.needle.clone();
                out.extend(
                    rest.iter()
                        .map(|&pid| (pid, read_one(pid, self.uid, &needle))),
                );
                return out;
            }
            let mut done = 0;
            while done < rest.len() {
                match rx.recv_timeout(READ_LIMIT) {
                    Ok(seen) => {
                        out.push(seen);
                        done += 1;
                    }
                    Err(_) => break,
                }
            }
            if done == rest.len() {
                break;
            }
            let pid = rest[done];
            self.stalled.insert(pid);
            tracing::warn!(
                pid,
                "tag search: reading /proc/{pid}/environ did not finish within {}s (a process \
                 stuck on a hung file system?); skipped",
                READ_LIMIT.as_secs()
            );
            if self.stalled.len() >= MAX_STALLED {
                tracing::warn!(
                    left = rest.len() - done - 1,
                    "tag search: {MAX_STALLED} reads stalled; the processes left are not searched"
                );
                break;
            }
            rest = &rest[done + 1..];
        }
        out
    }
}

/// Whether `pid` is a process of user `uid` and carries the needle.
fn read_one(pid: u32, uid: u32, needle: &Needle) -> Seen {
    if real_uid(pid) != Some(uid) {
        return Seen::Skip;
    }
    let path = format!("/proc/{pid}/environ");
    crate::support::failpoint::hang_on(std::path::Path::new(&path));
    match std::fs::read(&path) {
        Err(_) => Seen::Skip,
        Ok(env) if needle.in_environ(&env) => Seen::Tagged,
        Ok(env) if env.is_empty() => Seen::Empty,
        Ok(_) => Seen::Other,
    }
}

/// The real uid of `pid` (`Uid:` of `/proc/<pid>/status`, its first field).
fn real_uid(pid: u32) -> Option<u32> {
    let status = read_small(&format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Kernel threads have no environment at all; their parent is 0 or kthreadd (2).
fn is_kernel_thread(pid: u32) -> bool {
    let ppid = stat_field(pid, 1).and_then(|p| p.parse::<u32>().ok());
    matches!(ppid, Some(0) | Some(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_entry_matches() {
        let env = b"PATH=/bin\0OTHER=LLM_JUDGE_TAG=prestart-k-x\0LLM_JUDGE_TAGX=prestart-k-y\0";
        assert!(!Needle::prefix("prestart-k-").in_environ(env));
        assert!(!Needle::exact("prestart-k-x").in_environ(env));
        let env = b"PATH=/bin\0LLM_JUDGE_TAG=prestart-k-x\0";
        assert!(Needle::prefix("prestart-k-").in_environ(env));
        assert!(Needle::exact("prestart-k-x").in_environ(env));
        assert!(
            !Needle::exact("prestart-k-").in_environ(env),
            "exact is exact"
        );
        assert!(!Needle::prefix("prestart-j-").in_environ(env));
    }

    #[test]
    fn own_uid_is_read_and_an_unknown_tag_finds_nothing() {
        if cfg!(target_os = "linux") {
            let me = std::process::id();
            assert_eq!(real_uid(me), Some(rustix::process::getuid().as_raw()));
        }
        assert!(
            Search::new(Needle::exact("no-such-tag-4f1c"))
                .find()
                .is_empty()
        );
        assert_eq!(kill_tagged("no-such-tag-4f1c"), 0);
    }
}
