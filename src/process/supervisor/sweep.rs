//! The end of an attempt inside the supervisor: wait for the runner, then kill and
//! reap everything its tree left behind (our children as subreaper, or, as a PID
//! namespace's init, every process in the namespace). Async-signal-safe throughout.

use std::ptr;

use libc::{c_int, pid_t};

use crate::process::os::{self, errno};
use crate::process::pid_ns::is_namespace_init;

/// Sweep rounds at most: each round kills the supervisor's current children, whose
/// own children then become its children (a chain of N needs N rounds).
const SWEEP_ROUNDS: usize = 100_000;

/// Blocks until the runner has exited, leaving it a zombie (its pid and group id
/// stay reserved during the sweep). Kills its group if the judge dies meanwhile
/// (where the system can watch for that: `os::wait_watching`).
pub(super) fn wait_for_exit(pid: pid_t, report: c_int) {
    os::wait_watching(pid, report);
    // SAFETY: a zeroed siginfo_t is a valid buffer for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain system call on our own child, writing into `info`.
    while unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    } < 0
        && errno() == libc::EINTR
    {}
}

/// Kills and reaps what the runner left, then reaps the runner: whether none was left
/// (false when our children could not be listed, or a namespace would not empty),
/// and the runner's wait status.
pub(super) fn sweep_and_reap(runner: pid_t) -> (bool, c_int) {
    if is_namespace_init() {
        return sweep_namespace(runner);
    }
    let swept = sweep(runner);
    (swept, reap_child(runner))
}

/// Waits for our child `pid`; its raw wait status.
fn reap_child(pid: pid_t) -> c_int {
    let mut status = 0;
    // SAFETY: plain system call on our own child, writing into `status`.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 && errno() == libc::EINTR {}
    status
}

/// SIGKILLs and reaps every child but the runner's zombie, round after round, until
/// none is left: a killed child's own children become ours for the next round. False
/// when our children cannot be listed: then only the runner's group was stopped.
fn sweep(runner: pid_t) -> bool {
    kill(-runner);
    let mut buf = [0u8; 4096];
    for _ in 0..SWEEP_ROUNDS {
        let mut pids = [0 as pid_t; 512];
        let Some(len) = os::read_children(&mut buf) else {
            return false;
        };
        let n = parse_pids(&buf[..len], len == buf.len(), &mut pids, runner);
        if n == 0 {
            break;
        }
        for &child in &pids[..n] {
            // Its own group too: a `setsid` child may lead one.
            kill(-child);
            kill(child);
        }
        for &child in &pids[..n] {
            reap_child(child);
        }
    }
    true
}

/// The sweep of a supervisor that is the init of its PID namespace: reaps what is
/// dead, and while anything in the namespace still lives, SIGKILLs every process in
/// it (`kill(-1)` spares only us) and looks again; a process forked while a kill went
/// out is caught by the next one. Every process of the namespace descends from us, so
/// once we have no child at all (`ECHILD`) it is empty: a runner that left nothing
/// behind is reaped without any `kill(-1)`, which visits every process of the machine.
/// Returns whether it ended with none left, and the runner's wait status.
fn sweep_namespace(runner: pid_t) -> (bool, c_int) {
    let mut runner_status = 0;
    // Checked again here: outside a namespace, kill(-1) would reach the whole user.
    if !is_namespace_init() {
        return (false, runner_status);
    }
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    for _ in 0..SWEEP_ROUNDS {
        let mut status = 0;
        // SAFETY: plain system call, writing into `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid == runner {
            runner_status = status;
        } else if pid == 0 {
            // Only here, as the namespace's init, is -1 "every process but us" of ours.
            kill(-1);
            // SAFETY: plain system call on a valid timespec.
            unsafe { libc::nanosleep(&pause, ptr::null_mut()) };
        } else if pid < 0 && errno() == libc::ECHILD {
            return (true, runner_status);
        }
    }
    (false, runner_status)
}

/// SIGKILL to `pid` (a group when negative); one that is gone is fine.
fn kill(pid: pid_t) {
    // SAFETY: plain system call; callers pass our children, their groups, or -1 only
    // as a namespace's init.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Parses space-separated pids; a cut-off last one (`truncated`) is left for the next round.
pub(super) fn parse_pids(text: &[u8], truncated: bool, pids: &mut [pid_t], skip: pid_t) -> usize {
    let mut count = 0;
    let mut value: pid_t = 0;
    let mut digits = false;
    for (i, &b) in text.iter().enumerate() {
        if b.is_ascii_digit() {
            value = value
                .saturating_mul(10)
                .saturating_add(pid_t::from(b - b'0'));
            digits = true;
            let last = i + 1 == text.len();
            if !last || truncated {
                continue;
            }
        }
        if digits && value != skip && count < pids.len() {
            pids[count] = value;
            count += 1;
        }
        value = 0;
        digits = false;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_parse_skipping_the_runner_and_a_cut_off_tail() {
        let mut pids = [0; 8];
        let n = parse_pids(b"12 7 345 ", false, &mut pids, 7);
        assert_eq!(&pids[..n], &[12, 345]);
        let n = parse_pids(b"12 34", true, &mut pids, 0);
        assert_eq!(&pids[..n], &[12], "34 may be cut off");
        let n = parse_pids(b"12 34", false, &mut pids, 0);
        assert_eq!(&pids[..n], &[12, 34]);
        assert_eq!(parse_pids(b"", false, &mut pids, 0), 0);
    }
}
