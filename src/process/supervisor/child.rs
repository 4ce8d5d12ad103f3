//! The supervisor's side of one attempt: start the runner, report it, wait for its
//! end, sweep its tree, report the end. Prepared before a fork (or, in a pooled
//! supervisor, before the attempt); only async-signal-safe calls run after it.

use std::io;
use std::os::fd::RawFd;

use super::posix_spawn::Spawn;
use super::report::Report;
use super::sweep::{parse_pids, sweep_and_reap, wait_for_exit};
use super::{Command, SupervisorFds};
use crate::process::os::become_subreaper;
use crate::process::os::forked::{close_fds_except, settle_signals};
use crate::process::pid_ns::{host_children_fd, is_namespace_init};

/// Everything a supervisor needs for one attempt.
pub(super) struct Child<'a> {
    spawn: Spawn<'a>,
    report: RawFd,
    /// The runner's stdin source, stdout and stderr write ends.
    runner_fds: [RawFd; 3],
}

impl<'a> Child<'a> {
    /// Prepares the attempt of `command` on `fds`.
    pub(super) fn new(command: &'a Command, fds: SupervisorFds) -> io::Result<Self> {
        Ok(Child {
            spawn: Spawn::new(command, fds)?,
            report: fds.report,
            runner_fds: [fds.stdin, fds.stdout, fds.stderr],
        })
    }

    /// A forked supervisor's whole life. Only async-signal-safe calls from here on.
    ///
    /// # Safety
    /// Call only in a freshly forked child: it takes over the process's signals and
    /// closes every descriptor but the attempt's.
    pub(super) unsafe fn run(&self) -> ! {
        // SAFETY: a fresh child, as the caller guarantees.
        unsafe {
            become_supervisor();
            self.close_inherited_fds();
        }
        let _ = self.attempt();
        // SAFETY: leaving the child without running anything of the parent's.
        unsafe { libc::_exit(0) }
    }

    /// One attempt. Closes the runner's descriptors, not the report's. False when the
    /// sweep could not list our children (an escapee may be left as our child).
    /// Async-signal-safe.
    pub(super) fn attempt(&self) -> bool {
        let spawned = self.spawn.spawn();
        // From now on only the runner's tree holds its pipes.
        for fd in self.runner_fds {
            // SAFETY: the runner's descriptors are the attempt's, closed only here.
            unsafe { libc::close(fd) };
        }
        let pid = match spawned {
            Ok(pid) => pid,
            Err(errno) => {
                Report::SpawnFailed(errno).send(self.report);
                return true;
            }
        };
        let spawned = if is_namespace_init() {
            match only_child() {
                Some(outer) => Report::Spawned(outer),
                None => Report::SpawnedInNamespace(pid),
            }
        } else {
            Report::Spawned(pid)
        };
        spawned.send(self.report);
        wait_for_exit(pid, self.report);
        let (swept, status) = sweep_and_reap(pid);
        Report::Exited(status).send(self.report);
        swept
    }

    /// Closes every descriptor but ours: the judge's locks and claims must not stay
    /// held by a supervisor that outlives a crashed judge.
    ///
    /// # Safety
    /// Only in the forked supervisor, before it starts threads: every descriptor not
    /// kept is closed under whatever owns it (an `OwnedFd` or `File` of the parent's
    /// must never be used or dropped afterwards).
    unsafe fn close_inherited_fds(&self) {
        let mut keep = [
            self.report,
            self.runner_fds[0],
            self.runner_fds[1],
            self.runner_fds[2],
            host_children_fd(),
        ];
        // SAFETY: a fresh child: nothing else uses the other descriptors.
        unsafe { close_fds_except(&mut keep) };
    }
}

/// The pid of our one child as the host's `/proc` numbers it (the judge's view), read
/// right after the runner's spawn, when the runner is our only child (the last
/// attempt's sweep left none), through the host's `children` file kept from before any
/// `/proc` of our own was mounted (`pid_ns::host_children_fd`): so the judge need not
/// look it up in `/proc` itself (`SpawnedInNamespace`, three reads of `/proc` per
/// attempt). `None` without that file, or when it lists none or more than one (the
/// runner already ended, and its orphans are ours too): the judge then maps the inner
/// pid. Async-signal-safe.
fn only_child() -> Option<libc::pid_t> {
    let fd = host_children_fd();
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 64];
    let len = crate::process::os::read_children_of(fd, &mut buf)?;
    let mut pids = [0; 2];
    match parse_pids(&buf[..len], len == buf.len(), &mut pids, 0) {
        1 if len < buf.len() => Some(pids[0]),
        _ => None,
    }
}

/// Signals settled and a child subreaper: every orphan of a runner's tree becomes ours,
/// and it is not dumpable (`os::become_subreaper`).
///
/// # Safety
/// Changes process-wide signal state: only in a single-threaded (forked) supervisor.
pub(super) unsafe fn become_supervisor() {
    // SAFETY: as the caller guarantees.
    unsafe { settle_signals() };
    become_subreaper();
}
