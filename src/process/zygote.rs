//! The zygote: a small single-threaded helper the daemon forks once, before its async
//! runtime starts, to fork supervisors. A fork of the multi-threaded judge
//! write-protects all of its pages and shoots down the TLB of every CPU its threads
//! ran on (about a third of the judge's CPU per job: bench/results/HISTORY.md, runs b
//! and c); a fork of this helper copies a few page tables.
//!
//! Its supervisors are pooled: each serves attempt after attempt
//! (`supervisor::serve`), so an attempt costs the daemon no fork at all. On request the
//! zygote forks one and passes the daemon its end of a socket pair (`SCM_RIGHTS`); the
//! daemon sends each attempt's command and pipes straight to an idle supervisor and
//! keeps it idle again once the attempt's report pipe closed. The zygote dies with the
//! daemon (`PR_SET_PDEATHSIG`, and EOF on its socket), auto-reaps its supervisors
//! (`SIGCHLD` ignored), and holds no other descriptor: not the daemon's lock, not
//! judge.log; a supervisor exits at EOF on its socket. Without a zygote (`run`, `ask`,
//! macOS, or one that died) supervisors are forked from the judge per attempt, and the
//! pooled ones already made keep serving. Linux only (`zygote_stub.rs` elsewhere): it
//! relies on `PR_SET_PDEATHSIG`, `MSG_CMSG_CLOEXEC` and `close_range`.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::process::fd_passing::{recv_with_fds, send_with_fds};
use crate::process::supervisor::{
    self, Command, Forked, Lease, SupervisorFds, close_fds_except, ignore_stop_signals, set_handler,
};

/// How long the daemon waits on the zygote for one request and its reply, or on a
/// supervisor to take a request; past it the zygote is killed and the daemon forks
/// supervisors itself.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// Idle pooled supervisors kept at most (the daemon needs one per running attempt).
const MAX_IDLE: usize = 64;

/// The one request the zygote serves: fork a pooled supervisor.
const NEW_SUPERVISOR: u8 = b'N';

/// The daemon's end of the zygote's socket, and the zygote's pid.
struct Helper {
    sock: UnixStream,
    pid: libc::pid_t,
}

/// The zygote; `None` once it is gone.
static ZYGOTE: OnceLock<Mutex<Option<Helper>>> = OnceLock::new();

/// Pooled supervisors waiting for their next attempt.
static IDLE: Mutex<Vec<Lease>> = Mutex::new(Vec::new());

/// Forks the zygote. Call once, from the daemon's main thread while it is the only
/// thread (before the runtime); on failure the daemon forks supervisors itself.
pub fn start() -> Result<(), String> {
    if thread_count() != Some(1) {
        return Err("the daemon already runs several threads".into());
    }
    let (ours, theirs) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
    // SAFETY: the process is single-threaded here (checked above), so the child may
    // run ordinary code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(ours);
        serve(theirs);
    }
    drop(theirs);
    if let Err(e) = bound(&ours) {
        kill_and_reap(pid);
        return Err(format!("socket timeouts: {e}"));
    }
    let _ = ZYGOTE.set(Mutex::new(Some(Helper { sock: ours, pid })));
    Ok(())
}

fn bound(sock: &UnixStream) -> io::Result<()> {
    sock.set_read_timeout(Some(ANSWER_WAIT))?;
    sock.set_write_timeout(Some(ANSWER_WAIT))
}

/// Requests up to this size go to an idle supervisor from an async worker: an idle one
/// reads at once, so the write never waits (unless it was stopped from outside).
const INLINE_REQUEST: usize = 64 << 10;

/// Hands the attempt to an idle pooled supervisor without blocking; `Here` when none
/// takes it (or the request is large): then call `supervise` off the async workers.
pub(crate) fn supervise_idle(command: &Command, fds: SupervisorFds) -> Forked {
    // Nothing idle: `supervise` encodes the request, not this one too.
    if lock_idle().is_empty() {
        return Forked::Here { tried: false };
    }
    let request = supervisor::request(command);
    if request.len() > INLINE_REQUEST {
        return Forked::Here { tried: false };
    }
    hand_over(&request, fds, false)
}

/// Hands the attempt to a pooled supervisor: an idle one, else a new one from the
/// zygote; `Here` when neither can take it. May block (the zygote's reply, bounded).
pub(crate) fn supervise(command: &Command, fds: SupervisorFds) -> Forked {
    hand_over(&supervisor::request(command), fds, true)
}

/// Sends the attempt to an idle supervisor, or to a new one when `new` allows. A
/// supervisor that is gone (its socket refuses the request) is dropped and the next
/// one tried.
fn hand_over(request: &[u8], fds: SupervisorFds, new: bool) -> Forked {
    // Every idle one may be dead (killed from outside): try each once, then a new one.
    let tries = lock_idle().len() + usize::from(new);
    for _ in 0..tries {
        let next = match take_idle() {
            Some(lease) => Some(Ok(lease)),
            None if new => new_supervisor(),
            None => None,
        };
        let lease = match next {
            Some(Ok(lease)) => lease,
            Some(Err(e)) => return Forked::Failed(e),
            None => return Forked::Here { tried: false },
        };
        match supervisor::send_request(&lease.sock, request, fds) {
            Ok(()) => {
                // The request just woke the supervisor: let it start the runner now.
                // When this thread is back the spawn report is waiting and the
                // runner's exec is through, so the report and the runner's start time
                // are read in the same turn instead of after two more sleeps
                // (bench/results/HISTORY.md, run i).
                std::thread::yield_now();
                return Forked::Pooled(lease);
            }
            Err((false, _)) => continue,
            Err((true, e)) => {
                tracing::warn!(
                    supervisor = lease.pid,
                    "a pooled supervisor did not take a whole request ({e}); starting the attempt again on fresh pipes"
                );
                return Forked::Here { tried: true };
            }
        }
    }
    Forked::Here { tried: false }
}

/// Takes back a supervisor whose attempt is over (see `Lease`).
pub(crate) fn give_back(lease: Lease) {
    let mut idle = lock_idle();
    if idle.len() < MAX_IDLE {
        idle.push(lease);
    }
}

fn lock_idle() -> std::sync::MutexGuard<'static, Vec<Lease>> {
    IDLE.lock().unwrap_or_else(|e| e.into_inner())
}

fn take_idle() -> Option<Lease> {
    lock_idle().pop()
}

/// A new pooled supervisor from the zygote, or the errno of its fork; `None` when the
/// zygote cannot give one (there is none, or the daemon had no descriptor left for
/// the new socket): the attempt's supervisor is then forked here, which needs none. A
/// zygote that stopped answering is killed and dropped for good, with a log line.
fn new_supervisor() -> Option<io::Result<Lease>> {
    let slot = ZYGOTE.get()?;
    let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
    let helper = guard.as_ref()?;
    let e = match ask(&helper.sock) {
        // Dropping a lease whose socket cannot be bounded closes it: that one exits.
        Ok(Answer::Lease(lease)) => return Some(bound(&lease.sock).map(|()| lease)),
        Ok(Answer::ForkFailed(e)) => return Some(Err(e)),
        Ok(Answer::NoRoom) => {
            tracing::warn!(
                "no descriptor left for a new supervisor's socket: this attempt's supervisor is \
                 forked by the daemon; raise the daemon's open-file limit (LimitNOFILE=)"
            );
            return None;
        }
        Err(e) => e,
    };
    tracing::warn!(
        zygote = helper.pid,
        "the supervisor zygote stopped answering ({e}); forking supervisors from the daemon from now on"
    );
    kill_and_reap(helper.pid);
    *guard = None;
    None
}

/// SIGKILLs and reaps the zygote (our child): it is never left behind.
fn kill_and_reap(pid: libc::pid_t) {
    // SAFETY: plain syscalls on our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
}

/// The zygote's answer to one request.
#[derive(Debug)]
enum Answer {
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
    // SAFETY: plain syscalls in a single-threaded child that never returns.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() == 1 {
            libc::_exit(0);
        }
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
        unsafe { close_fds_except(&mut [supervisor_end.as_raw_fd()]) };
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
