//! The Linux calls of the process layer: child subreaper, pipes with `pipe2`,
//! `close_range`, waiting on a pidfd, and a process's children from `/proc`.
//! `macos.rs` has the same functions, doing what macOS allows.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use libc::{c_int, pid_t};
use rustix::fs::{Mode, OFlags, open};
use rustix::io::{Errno, pread};
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{
    DumpableBehavior, Pid, PidfdFlags, Signal, getpid, kill_process_group, pidfd_open,
    set_child_subreaper, set_dumpable_behavior,
};

use super::errno;

/// Makes this process a child subreaper (every orphan of its tree becomes its child)
/// and not dumpable (a runner of the same user cannot write its memory through
/// `/proc/<pid>/mem`). Raw system calls only: fine after a fork.
pub(crate) fn become_subreaper() {
    // Best effort, as before: a kernel that refuses leaves the sweep less to see.
    let _ = set_child_subreaper(Some(getpid()));
    let _ = set_dumpable_behavior(DumpableBehavior::NotDumpable);
}

/// A pipe whose two ends are close-on-exec from the start.
pub(crate) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(pipe_with(PipeFlags::CLOEXEC)?)
}

/// Closes descriptors `first..=last` with one call; false when the kernel has no
/// `close_range` (before 5.9). Async-signal-safe.
///
/// # Safety
/// The descriptors in the range must not be used (or owned) by anything afterwards.
pub(crate) unsafe fn close_range(first: c_int, last: c_int) -> bool {
    // SAFETY: a plain system call; the caller gives up the range.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0) };
    rc == 0
}

/// Blocks until `pid` (our child) exits, SIGKILLing its group if the reader of
/// `report` goes away first (the judge died). Returns at once when no pidfd can be
/// had; the caller then waits for the child without that watch. Async-signal-safe.
pub(crate) fn wait_watching(pid: pid_t, report: RawFd) {
    let Some(runner) = Pid::from_raw(pid) else {
        return;
    };
    let Ok(pidfd) = pidfd_open(runner, PidfdFlags::empty()) else {
        return;
    };
    let mut fds = [
        libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        // A pipe's write end reports POLLERR once its reader is gone.
        libc::pollfd {
            fd: report,
            events: 0,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: fds is an array of two initialised pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 && errno() != libc::EINTR {
            break;
        }
        if fds[0].revents != 0 {
            break;
        }
        if fds[1].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            let _ = kill_process_group(runner, Signal::KILL);
            fds[1].fd = -1;
        }
    }
}

/// Fills `buf` from `/proc/thread-self/children` (our children, space-separated; the
/// supervisor has one thread) and returns the bytes read; `None` without that file (no
/// `/proc`, a kernel without `CONFIG_PROC_CHILDREN`). Async-signal-safe: raw system
/// calls on a borrowed path, no allocation.
pub(crate) fn read_children(buf: &mut [u8]) -> Option<usize> {
    let file = open_children().ok()?;
    read_children_of(file.as_raw_fd(), buf)
}

/// Opens `/proc/thread-self/children` (close-on-exec). Async-signal-safe.
pub(crate) fn open_children() -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::CLOEXEC;
    open(c"/proc/thread-self/children", flags, Mode::empty())
}

/// Fills `buf` from an open `children` file, read from its start: the kernel lists
/// the children anew for every read at offset 0, so one descriptor serves many
/// attempts (and keeps the `/proc` it was opened in, even once another is mounted
/// over it). Async-signal-safe: positional reads, no allocation.
pub(crate) fn read_children_of(fd: RawFd, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: the caller's descriptor, borrowed for these reads only.
    let file = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let mut len = 0;
    while len < buf.len() {
        let want = buf.len() - len;
        match pread(file, &mut buf[len..], len as u64) {
            Err(Errno::INTR) => continue,
            Ok(0) | Err(_) => break,
            Ok(n) => {
                len += n;
                // A seq_file read gives all it has that fits: a short one is the end.
                if n < want {
                    break;
                }
            }
        }
    }
    Some(len)
}
