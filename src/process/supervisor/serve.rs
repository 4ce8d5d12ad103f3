//! A pooled supervisor's life: one attempt per request on its socket, until the
//! daemon closes it (or dies). Forked from the single-threaded zygote, so ordinary
//! code is fine here; each sweep leaves it with no child before the next request.
//! Linux only, like the pool.

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use super::child::{Child, become_supervisor};
use super::codec::{Received, receive_request};
use super::report::Report;
use super::{Command, SupervisorFds};

/// Serves requests on `sock` until it closes; never returns.
pub(crate) fn serve(sock: UnixStream) -> ! {
    // SAFETY: a single-threaded process forked from the zygote.
    unsafe { become_supervisor() };
    loop {
        // One that cannot list its children serves no more: what its sweep could not
        // see must not become a later attempt's.
        let more = match receive_request(&sock) {
            Ok(Some(Received { command, fds })) => serve_one(command.as_ref(), fds),
            Ok(None) | Err(_) => false,
        };
        if !more {
            // SAFETY: leaving the single-threaded process.
            unsafe { libc::_exit(0) };
        }
    }
}

/// One request: its attempt, or `SpawnFailed` when it cannot be set up. Every
/// descriptor it came with is closed when this returns. False when the attempt's
/// sweep could not list our children.
fn serve_one(command: Option<&Command>, fds: [OwnedFd; 4]) -> bool {
    let [stdin, stdout, stderr, report] = fds;
    let fds = SupervisorFds {
        stdin: stdin.as_raw_fd(),
        stdout: stdout.as_raw_fd(),
        stderr: stderr.as_raw_fd(),
        report: report.as_raw_fd(),
    };
    let child = command
        .ok_or(libc::EINVAL)
        .and_then(|c| Child::new(c, fds).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO)));
    match child {
        Ok(child) => {
            // The attempt closes the runner's three; the report's closes below.
            let _runner_fds = [stdin, stdout, stderr].map(IntoRawFd::into_raw_fd);
            let swept = child.attempt();
            drop(report);
            swept
        }
        Err(errno) => {
            drop((stdin, stdout, stderr));
            Report::SpawnFailed(errno).send(fds.report);
            drop(report);
            true
        }
    }
}
