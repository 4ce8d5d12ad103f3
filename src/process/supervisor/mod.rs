//! The supervisor: the process that starts a runner and stays its parent for the
//! attempt. It is a child subreaper (Linux), so every orphan of the runner's tree becomes its
//! child, also one that called `setsid` and cleared its environment. Once the runner
//! ends it SIGKILLs and reaps all of them; when the judge dies (its report pipe
//! breaks) it kills the runner's group first. An attempt's processes therefore never
//! outlive it, whatever else runs at the same time, and nobody scans all of `/proc`.
//!
//! A supervisor runs one attempt at a time. The daemon's come from its zygote and are
//! pooled (`process::pool`): each serves attempt after attempt on its socket (`serve`), so an attempt
//! costs no fork, and its sweep leaves it with no child before the next one. `run`
//! and `ask` fork one per attempt from the judge; after that `fork` the child runs
//! only async-signal-safe calls on memory prepared before the fork (the judge is
//! multi-threaded). The runner itself is started with `posix_spawn`, which needs no
//! copy of the supervisor's address space.

//!
//! The files, by job: `command` (the runner's command as C strings), `report` (the
//! report pipe's records), `posix_spawn` (the runner's file actions and attributes),
//! `child` (one attempt inside the supervisor), `sweep` (waiting and reaping the
//! runner's tree), and, for the pool (Linux), `codec` (a command over the socket) and
//! `serve` (a pooled supervisor's loop). This file starts a supervisor for an attempt.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use libc::pid_t;

use crate::process::error::ProcessError;
use crate::process::os::pipe_cloexec;

mod child;
#[cfg(target_os = "linux")]
pub(crate) mod codec;
mod command;
// Only the pool (Linux) makes a lease; elsewhere `Started` just never holds one.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
mod lease;
mod posix_spawn;
mod report;
#[cfg(target_os = "linux")]
mod serve;
mod sweep;

pub(crate) use command::{Command, Env, Launch};
pub(crate) use lease::Lease;
pub(crate) use report::{RECORD_BYTES, Report};
#[cfg(target_os = "linux")]
pub(crate) use serve::serve;

/// A started supervisor and the judge's ends of its pipes.
pub(crate) struct Started {
    pub supervisor: i32,
    /// A pooled supervisor's lease; without one the supervisor was forked by this
    /// process, so it is ours to reap (the zygote's are reaped by the kernel and their
    /// pid must not be waited for: it may be reused).
    pub lease: Option<Lease>,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub report: OwnedFd,
}

/// The descriptors a supervisor gets: the runner's stdin source, stdout and stderr
/// write ends, and the report pipe's write end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SupervisorFds {
    pub stdin: RawFd,
    pub stdout: RawFd,
    pub stderr: RawFd,
    pub report: RawFd,
}

/// An attempt's command and pipes, ready for a supervisor.
pub(crate) struct Prepared {
    /// Boxed: a `Prepared` travels back by value when no pooled supervisor takes it.
    command: Box<Command>,
    pipes: Pipes,
}

/// Builds the command and pipes for the runner described by `launch`.
pub(crate) fn prepare(launch: Launch<'_>) -> Result<Prepared, ProcessError> {
    let stdin_piped = launch.stdin_piped;
    let command = Box::new(Command::of(launch)?);
    Ok(Prepared {
        command,
        pipes: Pipes::new(stdin_piped)?,
    })
}

impl Prepared {
    /// Forks the attempt's supervisor from this process.
    pub(crate) fn fork_here(self) -> io::Result<Started> {
        let pid = fork_supervisor(&self.command, self.pipes.fds())?;
        Ok(self.pipes.started(pid, None))
    }
}

/// The pipes of one attempt: the judge's ends and the supervisor's.
struct Pipes {
    stdin_w: Option<OwnedFd>,
    stdin_src: OwnedFd,
    out: (OwnedFd, OwnedFd),
    err: (OwnedFd, OwnedFd),
    report: (OwnedFd, OwnedFd),
}

impl Pipes {
    fn new(stdin_piped: bool) -> io::Result<Self> {
        let (stdin_src, stdin_w) = if stdin_piped {
            let (r, w) = pipe_cloexec()?;
            (r, Some(w))
        } else {
            (std::fs::File::open("/dev/null")?.into(), None)
        };
        Ok(Pipes {
            stdin_w,
            stdin_src,
            out: pipe_cloexec()?,
            err: pipe_cloexec()?,
            report: pipe_cloexec()?,
        })
    }

    fn fds(&self) -> SupervisorFds {
        SupervisorFds {
            stdin: self.stdin_src.as_raw_fd(),
            stdout: self.out.1.as_raw_fd(),
            stderr: self.err.1.as_raw_fd(),
            report: self.report.1.as_raw_fd(),
        }
    }

    /// The judge's ends; ours of the supervisor's close here (only its tree holds them).
    /// Without a lease the supervisor was forked here.
    fn started(self, supervisor: pid_t, lease: Option<Lease>) -> Started {
        Started {
            supervisor,
            lease,
            stdin: self.stdin_w,
            stdout: self.out.0,
            stderr: self.err.0,
            report: self.report.0,
        }
    }
}

/// Forks a supervisor for `command` with `fds`, from this process.
fn fork_supervisor(command: &Command, fds: SupervisorFds) -> io::Result<pid_t> {
    let child = child::Child::new(command, fds)?;
    // SAFETY: fork, possibly in a multi-threaded process; the child only runs
    // `Child::run`, which makes async-signal-safe calls on memory prepared above and
    // never returns.
    let pid = unsafe { crate::process::pid_ns::fork()? };
    if pid == 0 {
        // SAFETY: see above; this is the forked child.
        unsafe { child.run() }
    }
    Ok(pid)
}

/// Waits for the supervisor to exit and reaps it (call once it reported `Exited`
/// or its report pipe closed: it exits right after). Only for a supervisor this
/// process forked: the zygote's are not our children.
pub(crate) fn reap(supervisor: i32) {
    let Some(pid) = rustix::process::Pid::from_raw(supervisor) else {
        return;
    };
    let options = rustix::process::WaitOptions::empty();
    while let Err(rustix::io::Errno::INTR) = rustix::process::waitpid(Some(pid), options) {}
}
