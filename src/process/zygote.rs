//! The zygote: a small single-threaded helper the daemon forks once, before its async
//! runtime starts, to fork supervisors. A fork of the multi-threaded judge
//! write-protects all of its pages and shoots down the TLB of every CPU its threads
//! ran on (about a third of the judge's CPU per job: bench/results/HISTORY.md, runs b
//! and c); a fork of this helper copies a few page tables.
//!
//! On request the zygote forks a pooled supervisor (`supervisor::serve`) and passes
//! the daemon its end of a socket pair (`SCM_RIGHTS`); `pool.rs` keeps them. The
//! zygote dies with the daemon (`PR_SET_PDEATHSIG`, and EOF on its socket), auto-reaps
//! its supervisors (`SIGCHLD` ignored), and holds no other descriptor: not the
//! daemon's lock, not judge.log; a supervisor exits at EOF on its socket. Linux only,
//! like the pool (`pool_stub.rs` elsewhere): it relies on `PR_SET_PDEATHSIG`,
//! `MSG_CMSG_CLOEXEC` and `close_range`.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitOptions, getppid, kill_process, waitpid};

use crate::process::error::ProcessError;
use crate::process::fd_passing::{recv_with_fds, send_with_fds};
use crate::process::os::forked::{close_fds_except, ignore_stop_signals, set_handler};
use crate::process::supervisor::{self, Lease};

/// How long the daemon waits on the zygote for one request and its reply, or on a
/// supervisor to take a request; past it the zygote is killed and the daemon forks
/// supervisors itself.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// The one request the zygote serves: fork a pooled supervisor.
const NEW_SUPERVISOR: u8 = b'N';

/// The daemon's end of the zygote's socket, and the zygote's pid.
pub(super) struct Zygote {
    sock: UnixStream,
    pid: libc::pid_t,
}

impl Zygote {
    /// Forks the zygote. Call once, from the daemon's main thread while it is the
    /// only thread (before the runtime).
    pub(super) fn start() -> Result<Zygote, ProcessError> {
        if thread_count() != Some(1) {
            return Err(ProcessError::NotSingleThreaded);
        }
        // Probed here, once: the zygote inherits the answer the daemon logs.
        let _ = crate::process::pid_ns::isolation();
        let (ours, theirs) = UnixStream::pair().map_err(ProcessError::SocketPair)?;
        // SAFETY: the process is single-threaded here (checked above), so the child
        // may run ordinary code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(ProcessError::Fork(io::Error::last_os_error()));
        }
        if pid == 0 {
            drop(ours);
            serve(theirs);
        }
        drop(theirs);
        if let Err(source) = bound(&ours) {
            kill_and_reap(pid);
            return Err(ProcessError::SocketTimeouts { pid, source });
        }
        Ok(Zygote { sock: ours, pid })
    }

    /// The zygote's pid.
    pub(super) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// One request for a new supervisor and its reply. The error: the zygote failed.
    pub(super) fn ask(&self) -> io::Result<Answer> {
        ask(&self.sock)
    }

    /// SIGKILLs and reaps the zygote: one that stopped answering is never left behind.
    pub(super) fn kill(self) {
        kill_and_reap(self.pid);
    }
}

/// Bounds a socket's reads and writes to `ANSWER_WAIT`.
pub(super) fn bound(sock: &UnixStream) -> io::Result<()> {
    sock.set_read_timeout(Some(ANSWER_WAIT))?;
    sock.set_write_timeout(Some(ANSWER_WAIT))
}

/// SIGKILLs and reaps the zygote (our child): it is never left behind.
fn kill_and_reap(pid: libc::pid_t) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = kill_process(pid, Signal::KILL);
        let _ = waitpid(Some(pid), WaitOptions::empty());
    }
}

/// The zygote's answer to one request.
#[derive(Debug)]
pub(super) enum Answer {
    /// A new supervisor.
    Lease(Lease),
    /// Its fork failed (the errno).
    ForkFailed(io::Error),
    /// It sent the new socket, but ours had no descriptor left to take it (the
    /// supervisor exits when its socket closes).
    NoRoom,
}

/// One request and its reply. The error: the zygote failed.
fn ask(mut sock: &UnixStream) -> io::Result<Answer> {
    sock.write_all(&[NEW_SUPERVISOR])?;
    let mut reply = [0u8; 4];
    let fds = recv_with_fds(sock, &mut reply)?.ok_or(io::ErrorKind::UnexpectedEof)?;
    let pid = i32::from_ne_bytes(reply);
    if pid <= 0 {
        return Ok(Answer::ForkFailed(io::Error::from_raw_os_error(-pid)));
    }
    // The zygote sends one socket with every pid.
    let Ok([fd]) = <[OwnedFd; 1]>::try_from(fds) else {
        return Ok(Answer::NoRoom);
    };
    Ok(Answer::Lease(Lease {
        pid,
        sock: UnixStream::from(fd),
    }))
}

/// The zygote's life: one request at a time until the daemon is gone.
fn serve(mut sock: UnixStream) -> ! {
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
    // Orphaned already (the daemon died before the line above): nothing to serve.
    if getppid().is_some_and(|p| p.is_init()) {
        // SAFETY: leaving the single-threaded child.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: plain syscalls in a single-threaded child that never returns.
    unsafe {
        close_fds_except(&mut [sock.as_raw_fd()]);
        // Nothing of the daemon's stdio: a test or a terminal waiting for its EOF
        // must not wait for the zygote.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for target in 0..3 {
                libc::dup2(null, target);
            }
            if null > 2 {
                libc::close(null);
            }
        }
        ignore_stop_signals();
        // Supervisors are reaped by the kernel; each resets SIGCHLD for its runner.
        set_handler(libc::SIGCHLD, libc::SIG_IGN);
    }
    loop {
        let mut request = [0u8; 1];
        // EOF: the daemon closed its end. An error: nothing left to serve.
        if !matches!(sock.read(&mut request), Ok(1)) || request[0] != NEW_SUPERVISOR {
            // SAFETY: leaving the single-threaded child.
            unsafe { libc::_exit(0) };
        }
        let sent = match fork_pooled() {
            Ok((pid, theirs)) => send_with_fds(&sock, &pid.to_ne_bytes(), &[theirs.as_raw_fd()]),
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                send_with_fds(&sock, &(-errno).to_ne_bytes(), &[])
            }
        };
        if sent.is_err() {
            // SAFETY: leaving the single-threaded child.
            unsafe { libc::_exit(0) };
        }
    }
}

/// Forks a pooled supervisor; its pid and the daemon's end of its socket (closed here
/// once sent).
fn fork_pooled() -> io::Result<(libc::pid_t, OwnedFd)> {
    let (daemon_end, supervisor_end) = UnixStream::pair()?;
    // SAFETY: the zygote is single-threaded, so the child may run ordinary code.
    let pid = unsafe { crate::process::pid_ns::fork()? };
    if pid == 0 {
        // Only its own socket: not the daemon's end of it (else it never sees EOF),
        // not the zygote's.
        drop(daemon_end);
        // SAFETY: single-threaded child.
        unsafe {
            close_fds_except(&mut [
                supervisor_end.as_raw_fd(),
                crate::process::pid_ns::host_children_fd(),
            ])
        };
        supervisor::serve(supervisor_end);
    }
    drop(supervisor_end);
    Ok((pid, daemon_end.into()))
}

/// Threads of this process (`Threads:` of /proc/self/status).
fn thread_count() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Threads:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ask` against a stand-in zygote that answers one request with `reply` and
    /// `fds` (no answer at all when `reply` is empty).
    fn ask_stand_in(reply: Vec<u8>, fds: Vec<OwnedFd>) -> io::Result<Answer> {
        let (ours, theirs) = UnixStream::pair().unwrap();
        bound(&ours).unwrap();
        let zygote = std::thread::spawn(move || {
            let mut request = [0u8; 1];
            (&theirs).read_exact(&mut request).unwrap();
            assert_eq!(request[0], NEW_SUPERVISOR);
            if !reply.is_empty() {
                let raw: Vec<std::os::fd::RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
                send_with_fds(&theirs, &reply, &raw).unwrap();
            }
        });
        let answer = ask(&ours);
        zygote.join().unwrap();
        answer
    }

    #[test]
    fn only_a_zygote_that_stops_answering_is_blamed() {
        let (socket, _peer) = UnixStream::pair().unwrap();
        let pid = 4242i32.to_ne_bytes().to_vec();
        let lease = ask_stand_in(pid.clone(), vec![socket.into()]);
        assert!(matches!(lease, Ok(Answer::Lease(Lease { pid: 4242, .. }))));
        // Our side had no descriptor for the socket: the zygote stays, the attempt
        // forks its supervisor itself.
        assert!(matches!(ask_stand_in(pid, vec![]), Ok(Answer::NoRoom)));
        // Its fork failed: that errno, the zygote stays.
        let eagain = (-libc::EAGAIN).to_ne_bytes().to_vec();
        match ask_stand_in(eagain, vec![]) {
            Ok(Answer::ForkFailed(e)) => assert_eq!(e.raw_os_error(), Some(libc::EAGAIN)),
            other => panic!("{other:?}"),
        }
        // No answer (it closed its end): the zygote failed.
        assert!(ask_stand_in(vec![], vec![]).is_err());
    }
}
