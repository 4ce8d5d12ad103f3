//! What a freshly forked helper (a supervisor, the zygote) does to itself: drop the
//! descriptors it inherited and settle its signals. Async-signal-safe throughout, so
//! a fork of the multi-threaded judge may call these.

use std::os::fd::RawFd;
use std::ptr;

use libc::c_int;

/// Closes every descriptor from 3 up but those in `keep` (async-signal-safe).
///
/// # Safety
/// Nothing may use (or own) the closed descriptors afterwards: call it in a fresh child.
pub(crate) unsafe fn close_fds_except(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut from: c_int = 3;
    for &fd in keep.iter() {
        if fd > from {
            // SAFETY: the caller gives up every descriptor but `keep`.
            unsafe { close_range(from, fd - 1) };
        }
        from = from.max(fd + 1);
    }
    // SAFETY: as above.
    unsafe { close_range(from, c_int::MAX) };
}

/// `close_range`, or one by one up to the descriptor limit where the system has none.
///
/// # Safety
/// The caller gives up every descriptor in `first..=last`: nothing that owns one may
/// use or close it afterwards (a forked child that never returns to such owners).
unsafe fn close_range(first: c_int, last: c_int) {
    // SAFETY: the caller gives up the range.
    if unsafe { super::close_range(first, last) } {
        return;
    }
    // SAFETY: getrlimit writes into a zeroed rlimit we own; closing the range is the
    // caller's to allow.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            c_int::try_from(limit.rlim_cur.min(1 << 16)).unwrap_or(1 << 16)
        } else {
            1 << 16
        };
        let mut fd = first;
        while fd <= last && fd < max {
            libc::close(fd);
            fd += 1;
        }
    }
}

/// Ignores the signals a terminal or the judge's group may get (the supervisor stops
/// only by SIGKILL or when its work is done) and unblocks everything.
///
/// # Safety
/// Changes process-wide signal state: only in a single-threaded (forked) helper.
pub(crate) unsafe fn settle_signals() {
    // SAFETY: a zeroed sigset_t is valid for sigemptyset; the rest as the caller allows.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, ptr::null_mut());
        ignore_stop_signals();
        for sig in [libc::SIGCHLD, libc::SIGALRM, libc::SIGUSR1, libc::SIGUSR2] {
            set_handler(sig, libc::SIG_DFL);
        }
    }
}

/// Ignores what a terminal or the judge's process group may send (SIGINT, SIGTERM,
/// SIGHUP, SIGQUIT, the terminal stops) and SIGPIPE: the supervisor and the zygote stop
/// on their own terms.
///
/// # Safety
/// As `settle_signals`.
pub(crate) unsafe fn ignore_stop_signals() {
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
        libc::SIGPIPE,
    ] {
        // SAFETY: as the caller allows.
        unsafe { set_handler(sig, libc::SIG_IGN) };
    }
}

/// Sets `sig`'s disposition to `handler` (`SIG_IGN` or `SIG_DFL`), no flags, no mask.
///
/// # Safety
/// As `settle_signals`; `handler` must be `SIG_IGN`, `SIG_DFL` or a valid handler.
pub(crate) unsafe fn set_handler(sig: c_int, handler: libc::sighandler_t) {
    // SAFETY: a zeroed sigaction is valid once its handler and mask are set.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(sig, &action, ptr::null_mut());
    }
}
