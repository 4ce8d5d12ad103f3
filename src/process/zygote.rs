//! The zygote: a small single-threaded helper the daemon forks once, before its async
//! runtime starts, to fork each attempt's supervisor. A fork of the multi-threaded
//! judge write-protects all of its pages and shoots down the TLB of every CPU its
//! threads ran on, once per attempt (about a third of the judge's CPU per job,
//! docs/performance.md); a fork of this helper copies a few page tables.
//!
//! The daemon creates the pipes and sends the supervisor's ends with the command over
//! a Unix socket (`SCM_RIGHTS`); the zygote forks the supervisor and replies with its
//! pid. The zygote dies with the daemon (`PR_SET_PDEATHSIG`, and EOF on the socket),
//! auto-reaps its supervisors (`SIGCHLD` ignored), and holds no other descriptor: not
//! the daemon's lock, not judge.log. Without a zygote (`run`, `ask`, macOS, or one that
//! died) supervisors are forked from the judge as before. Linux only (`zygote_stub.rs`
//! elsewhere): it relies on `PR_SET_PDEATHSIG`, `MSG_CMSG_CLOEXEC` and `close_range`.

use std::ffi::CString;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use libc::c_int;

use crate::process::supervisor::{
    Command, Forked, SupervisorFds, close_fds_except, errno, fork_supervisor as fork_here,
    ignore_stop_signals, set_handler,
};

/// The descriptors sent with each request, in `SupervisorFds` order.
const FDS: usize = 4;
/// Requests larger than this are refused (the prompt goes on stdin past 128 KiB).
const MAX_REQUEST: usize = 64 << 20;

/// How long the daemon waits on the zygote for one request and its reply; past it the
/// zygote is killed and the daemon forks supervisors itself.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// The daemon's end of the zygote's socket, and the zygote's pid.
struct Helper {
    sock: UnixStream,
    pid: libc::pid_t,
}

/// The zygote; `None` once it is gone.
static ZYGOTE: OnceLock<Mutex<Option<Helper>>> = OnceLock::new();

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
    let bounded = ours
        .set_read_timeout(Some(ANSWER_WAIT))
        .and_then(|()| ours.set_write_timeout(Some(ANSWER_WAIT)));
    if let Err(e) = bounded {
        kill_and_reap(pid);
        return Err(format!("socket timeouts: {e}"));
    }
    let _ = ZYGOTE.set(Mutex::new(Some(Helper { sock: ours, pid })));
    Ok(())
}

/// Asks the zygote to fork a supervisor; `Here` when there is no zygote. A zygote
/// that stopped answering is killed and dropped for good, with a log line.
pub(crate) fn fork_supervisor(command: &Command, fds: SupervisorFds) -> Forked {
    let here = Forked::Here { tried: false };
    let Some(slot) = ZYGOTE.get() else {
        return here;
    };
    let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
    let Some(helper) = guard.as_ref() else {
        return here;
    };
    let (sent, e) = match ask(&helper.sock, command, fds) {
        Ok(pid) if pid > 0 => return Forked::Pid(pid),
        Ok(errno) => return Forked::Failed(io::Error::from_raw_os_error(-errno)),
        Err(failure) => failure,
    };
    tracing::warn!(
        zygote = helper.pid,
        "the supervisor zygote stopped answering ({e}); forking supervisors from the daemon from now on"
    );
    kill_and_reap(helper.pid);
    *guard = None;
    // Once the request went out, a supervisor may already run with these pipes: fork
    // here with fresh ones (that one stops when its report pipe's reader goes).
    Forked::Here { tried: sent }
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

/// One request and its reply (the supervisor's pid, or minus an errno). An error says
/// whether any of the request reached the zygote.
fn ask(
    mut sock: &UnixStream,
    command: &Command,
    fds: SupervisorFds,
) -> Result<i32, (bool, io::Error)> {
    let body = encode(command);
    let header = (body.len() as u64).to_ne_bytes();
    let descriptors = [fds.stdin, fds.stdout, fds.stderr, fds.report];
    send_with_fds(sock, &header, descriptors).map_err(|e| (false, e))?;
    sock.write_all(&body).map_err(|e| (true, e))?;
    let mut reply = [0u8; 4];
    sock.read_exact(&mut reply).map_err(|e| (true, e))?;
    Ok(i32::from_ne_bytes(reply))
}

/// The command as NUL-terminated strings: program, cwd, argc, argv..., env...
fn encode(command: &Command) -> Vec<u8> {
    let argc = CString::new(command.argv.len().to_string()).unwrap_or_default();
    let parts = [&command.program, &command.cwd, &argc]
        .into_iter()
        .chain(&command.argv)
        .chain(&command.env);
    let mut out = Vec::new();
    for part in parts {
        out.extend_from_slice(part.as_bytes_with_nul());
    }
    out
}

fn decode(body: &[u8]) -> Option<Command> {
    let mut parts = body
        .split_inclusive(|b| *b == 0)
        .map(|p| CString::from_vec_with_nul(p.to_vec()).ok());
    let program = parts.next()??;
    let cwd = parts.next()??;
    let argc: usize = parts.next()??.to_str().ok()?.parse().ok()?;
    let rest: Vec<CString> = parts.collect::<Option<_>>()?;
    if rest.len() < argc {
        return None;
    }
    let (argv, env) = rest.split_at(argc);
    Some(Command {
        program,
        argv: argv.to_vec(),
        env: env.to_vec(),
        cwd,
    })
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
        let reply = match receive(&sock) {
            Ok(Some((command, fds))) => {
                let supervisor = SupervisorFds {
                    stdin: fds[0].as_raw_fd(),
                    stdout: fds[1].as_raw_fd(),
                    stderr: fds[2].as_raw_fd(),
                    report: fds[3].as_raw_fd(),
                };
                match command {
                    Some(command) => fork_here(&command, supervisor)
                        .unwrap_or_else(|e| -e.raw_os_error().unwrap_or(libc::EIO)),
                    None => -libc::EINVAL,
                }
                // `fds` closes here: only the supervisor keeps them.
            }
            // EOF: the daemon closed its end. An error: nothing left to serve.
            Ok(None) | Err(_) => unsafe { libc::_exit(0) },
        };
        if sock.write_all(&reply.to_ne_bytes()).is_err() {
            // SAFETY: leaving the single-threaded child.
            unsafe { libc::_exit(0) };
        }
    }
}

/// One request: the command (`None` if it does not decode) and its descriptors.
#[allow(clippy::type_complexity)]
fn receive(mut sock: &UnixStream) -> io::Result<Option<(Option<Command>, Vec<OwnedFd>)>> {
    let mut header = [0u8; 8];
    let Some(fds) = recv_with_fds(sock, &mut header)? else {
        return Ok(None);
    };
    let len = u64::from_ne_bytes(header) as usize;
    if len > MAX_REQUEST || fds.len() != FDS {
        return Err(io::Error::other("bad zygote request"));
    }
    let mut body = vec![0u8; len];
    sock.read_exact(&mut body)?;
    Ok(Some((decode(&body), fds)))
}

/// A control-message buffer, aligned for `cmsghdr` (room for `FDS` descriptors).
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

fn send_with_fds(mut sock: &UnixStream, bytes: &[u8], fds: [RawFd; FDS]) -> io::Result<()> {
    let mut control = ControlBuffer([0u8; 64]);
    let payload = std::mem::size_of_val(&fds) as u32;
    // SAFETY: msghdr and cmsghdr are plain C structs; the control buffer has room for
    // one header with FDS descriptors (CMSG_SPACE checked below).
    unsafe {
        let space = libc::CMSG_SPACE(payload) as usize;
        if space > control.0.len() {
            return Err(io::Error::other("control buffer too small"));
        }
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr().cast_mut().cast(),
            iov_len: bytes.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast(), FDS);
        loop {
            let n = libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
            if n == bytes.len() as isize {
                return Ok(());
            }
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            // The header is 8 bytes: a short send of it is not expected; finish it.
            return sock.write_all(&bytes[n as usize..]);
        }
    }
}

/// Reads exactly `buf.len()` bytes and the descriptors sent with them (close-on-exec);
/// `None` on EOF before any byte.
fn recv_with_fds(mut sock: &UnixStream, buf: &mut [u8]) -> io::Result<Option<Vec<OwnedFd>>> {
    let mut control = ControlBuffer([0u8; 64]);
    let mut fds = Vec::new();
    // SAFETY: as in send_with_fds; every descriptor the kernel passed is taken into an
    // OwnedFd exactly once.
    let n = unsafe {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len() as _;
        let n = loop {
            let n = libc::recvmsg(
                sock.as_raw_fd(),
                &mut msg,
                libc::MSG_CMSG_CLOEXEC | libc::MSG_WAITALL,
            );
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            break n;
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<c_int>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(*data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        n as usize
    };
    if n == 0 {
        return Ok(None);
    }
    if n < buf.len() {
        sock.read_exact(&mut buf[n..])?;
    }
    Ok(Some(fds))
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

    #[test]
    fn a_command_round_trips() {
        let c = |s: &str| CString::new(s).unwrap();
        let command = Command {
            program: c("/bin/sh"),
            argv: vec![c("sh"), c("-c"), c("")],
            env: vec![c("A=1"), c("B=")],
            cwd: c("/tmp"),
        };
        let back = decode(&encode(&command)).unwrap();
        assert_eq!(back.program, command.program);
        assert_eq!(back.argv, command.argv);
        assert_eq!(back.env, command.env);
        assert_eq!(back.cwd, command.cwd);
        assert!(decode(b"/bin/sh\0/tmp\0").is_none(), "no argc");
        assert!(
            decode(b"/bin/sh\0/tmp\x005\0a\0").is_none(),
            "argc past the end"
        );
    }
}
