//! The macOS side of `linux.rs`: no child subreaper, no `pipe2`, no `close_range`, no
//! pidfd, no `/proc`. The supervisor does what it can (docs/security.md: process
//! handling on macOS is best effort).

use std::io;
use std::os::fd::{OwnedFd, RawFd};

use libc::{c_int, pid_t};
use rustix::io::{FdFlags, fcntl_setfd};
use rustix::pipe::pipe;

/// No subreaper on macOS: the sweep sees only the runner's group.
pub(crate) fn become_subreaper() {}

/// A pipe, then `FD_CLOEXEC` on both ends: a supervisor another thread forks in
/// between may inherit them (no `pipe2` here).
pub(crate) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read_end, write_end) = pipe()?;
    fcntl_setfd(&read_end, FdFlags::CLOEXEC)?;
    fcntl_setfd(&write_end, FdFlags::CLOEXEC)?;
    Ok((read_end, write_end))
}

/// No `close_range`: the caller closes one by one.
///
/// # Safety
/// None needed here (nothing is closed); kept `unsafe` to match `linux.rs`.
pub(crate) unsafe fn close_range(_first: c_int, _last: c_int) -> bool {
    false
}

/// No pidfd: the caller waits for the child itself, without watching `report`.
pub(crate) fn wait_watching(_pid: pid_t, _report: RawFd) {}

/// No `/proc`: our children cannot be listed.
pub(crate) fn read_children(_buf: &mut [u8]) -> Option<usize> {
    None
}

/// No `/proc`: our children cannot be listed.
pub(crate) fn read_children_of(_fd: RawFd, _buf: &mut [u8]) -> Option<usize> {
    None
}
