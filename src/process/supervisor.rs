//! The supervisor: the process that starts a runner and stays its parent for the
//! attempt. It is a child subreaper (Linux), so every orphan of the runner's tree becomes its
//! child, also one that called `setsid` and cleared its environment. Once the runner
//! ends it SIGKILLs and reaps all of them; when the judge dies (its report pipe
//! breaks) it kills the runner's group first. An attempt's processes therefore never
//! outlive it, whatever else runs at the same time, and nobody scans all of `/proc`.
//!
//! A supervisor runs one attempt at a time. The daemon's come from its zygote and are
//! pooled: each serves attempt after attempt on its socket (`serve`), so an attempt
//! costs no fork, and its sweep leaves it with no child before the next one. `run`
//! and `ask` fork one per attempt from the judge; after that `fork` the child runs
//! only async-signal-safe calls on memory prepared before the fork (the judge is
//! multi-threaded). The runner itself is started with `posix_spawn`, which needs no
//! copy of the supervisor's address space.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::Arc;

use libc::{c_char, c_int, pid_t};

#[cfg(target_os = "linux")]
use crate::process::fd_passing::{recv_with_fds, send_with_fds};

/// A report record: one tag byte, three spare bytes, one native-endian i32.
pub(crate) const RECORD_BYTES: usize = 8;
const SPAWNED: u8 = b'S';
const SPAWNED_IN_NAMESPACE: u8 = b'N';
const SPAWN_FAILED: u8 = b'E';
const EXITED: u8 = b'X';
/// Sweep rounds at most: each round kills the supervisor's current children, whose
/// own children then become its children (a chain of N needs N rounds).
const SWEEP_ROUNDS: usize = 100_000;

/// What the supervisor tells the judge on the report pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    /// The runner started with this pid (also its process group id).
    Spawned(i32),
    /// The runner started with this pid inside the supervisor's PID namespace (the
    /// judge looks up the pid it sees: `os::outer_pid_of_child`).
    SpawnedInNamespace(i32),
    /// `posix_spawn` failed with this errno.
    SpawnFailed(i32),
    /// The runner ended with this raw wait status, and its tree is gone.
    Exited(i32),
}

/// Decodes one report record.
pub(crate) fn decode(record: [u8; RECORD_BYTES]) -> Option<Report> {
    let value = i32::from_ne_bytes([record[4], record[5], record[6], record[7]]);
    match record[0] {
        SPAWNED => Some(Report::Spawned(value)),
        SPAWNED_IN_NAMESPACE => Some(Report::SpawnedInNamespace(value)),
        SPAWN_FAILED => Some(Report::SpawnFailed(value)),
        EXITED => Some(Report::Exited(value)),
        _ => None,
    }
}

fn encode(tag: u8, value: i32) -> [u8; RECORD_BYTES] {
    let v = value.to_ne_bytes();
    [tag, 0, 0, 0, v[0], v[1], v[2], v[3]]
}

/// A runner to start: the resolved program, its argv (argv[0] as given), the whole
/// environment (`KEY=value`), the working folder, and whether stdin is a pipe (else
/// /dev/null).
pub(crate) struct Launch<'a> {
    pub program: &'a Path,
    pub argv: &'a [String],
    pub env: Env,
    pub cwd: &'a Path,
    pub stdin_piped: bool,
}

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

/// A runner's environment as `KEY=value` strings: the part every runner of this
/// process shares, and the attempt's own.
#[derive(Debug, Clone)]
pub(crate) struct Env {
    /// The daemon's inherited variables, read once per process.
    pub shared: Arc<[CString]>,
    /// The attempt's variables; after `Command::decode`, the whole environment.
    pub own: Vec<CString>,
}

impl Env {
    /// Every variable, shared ones first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &CString> {
        self.shared.iter().chain(&self.own)
    }
}

/// The runner's command as C strings, ready for a fork (here or in the zygote).
pub(crate) struct Command {
    pub program: CString,
    pub argv: Vec<CString>,
    pub env: Env,
    pub cwd: CString,
}

impl Command {
    /// As NUL-terminated strings: program, cwd, argc, argv..., env...
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn encode(&self) -> Vec<u8> {
        let argc = CString::new(self.argv.len().to_string()).unwrap_or_default();
        let parts = [&self.program, &self.cwd, &argc]
            .into_iter()
            .chain(&self.argv)
            .chain(self.env.iter());
        let mut out = Vec::new();
        for part in parts {
            out.extend_from_slice(part.as_bytes_with_nul());
        }
        out
    }

    /// The command `encode` made, or `None` for anything else.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn decode(body: &[u8]) -> Option<Command> {
        let mut parts = body
            .split_inclusive(|b| *b == 0)
            .map(|p| CString::from_vec_with_nul(p.to_vec()).ok());
        let program = parts.next()??;
        let cwd = parts.next()??;
        let argc: usize = parts.next()??.to_str().ok()?.parse().ok()?;
        let mut argv: Vec<CString> = parts.collect::<Option<_>>()?;
        if argv.len() < argc {
            return None;
        }
        let own = argv.split_off(argc);
        Some(Command {
            program,
            argv,
            env: Env {
                shared: Arc::default(),
                own,
            },
            cwd,
        })
    }

    fn of(launch: Launch<'_>) -> io::Result<Self> {
        let argv = launch
            .argv
            .iter()
            .map(|a| c_string(OsStr::new(a)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Command {
            program: c_string(launch.program.as_os_str())?,
            argv,
            env: launch.env,
            cwd: c_string(launch.cwd.as_os_str())?,
        })
    }
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

/// A pooled supervisor lent to one attempt. Give it back (`zygote::give_back`) only
/// once its report pipe closed after `Exited` or `SpawnFailed`: its tree is gone and
/// it waits for the next request. Dropped instead, its socket closes and it exits
/// once its attempt is over.
#[derive(Debug)]
pub(crate) struct Lease {
    pub pid: pid_t,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub sock: std::os::unix::net::UnixStream,
}

/// What the daemon's pool (or its zygote) made of a request for a supervisor.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) enum Forked {
    /// A pooled supervisor took the attempt.
    Pooled(Lease),
    /// It could not (an errno from its fork).
    Failed(io::Error),
    /// Fork it here. `tried`: the request may have reached a supervisor that holds the
    /// pipes sent, so use fresh ones (that one stops once our ends close).
    Here { tried: bool },
}

/// Another process that can supervise the attempt.
pub(crate) type Forker = fn(&Command, SupervisorFds) -> Forked;

/// An attempt's command and pipes, ready for a supervisor.
pub(crate) struct Prepared {
    /// Boxed: a `Prepared` travels back by value when no pooled supervisor takes it.
    command: Box<Command>,
    pipes: Pipes,
}

/// Builds the command and pipes for the runner described by `launch`.
pub(crate) fn prepare(launch: Launch<'_>) -> io::Result<Prepared> {
    let stdin_piped = launch.stdin_piped;
    let command = Box::new(Command::of(launch)?);
    Ok(Prepared {
        command,
        pipes: Pipes::new(stdin_piped)?,
    })
}

impl Prepared {
    /// Offers the attempt to `forker`'s pooled supervisors; gives it back (on fresh
    /// pipes if a request may have reached one) when none took it.
    pub(crate) fn offer(self, forker: Forker) -> Result<io::Result<Started>, Prepared> {
        match forker(&self.command, self.pipes.fds()) {
            Forked::Pooled(lease) => Ok(Ok(self.pipes.started(lease.pid, Some(lease)))),
            Forked::Failed(e) => Ok(Err(e)),
            Forked::Here { tried: false } => Err(self),
            Forked::Here { tried: true } => match Pipes::new(self.pipes.stdin_w.is_some()) {
                Ok(pipes) => Err(Prepared { pipes, ..self }),
                Err(e) => Ok(Err(e)),
            },
        }
    }

    /// Starts a supervisor for the attempt: a pooled one from `forker` when it can,
    /// else one forked here.
    pub(crate) fn start(self, forker: Forker) -> io::Result<Started> {
        match self.offer(forker) {
            Ok(started) => started,
            Err(this) => {
                let pid = fork_supervisor(&this.command, this.pipes.fds())?;
                Ok(this.pipes.started(pid, None))
            }
        }
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
            let (r, w) = pipe()?;
            (r, Some(w))
        } else {
            (dev_null()?, None)
        };
        Ok(Pipes {
            stdin_w,
            stdin_src,
            out: pipe()?,
            err: pipe()?,
            report: pipe()?,
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
pub(crate) fn fork_supervisor(command: &Command, fds: SupervisorFds) -> io::Result<pid_t> {
    let child = Child::new(command, fds)?;
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
/// or its report pipe closed: it exits right after). A supervisor the zygote forked
/// is not our child: the zygote reaps it, and this returns at once.
pub(crate) fn reap(supervisor: i32) {
    let mut status = 0;
    // SAFETY: plain syscall on our own child.
    while unsafe { libc::waitpid(supervisor, &mut status, 0) } < 0
        && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
}

fn c_string(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} holds a NUL byte", s.to_string_lossy()),
        )
    })
}

fn null_terminated<'a>(items: impl Iterator<Item = &'a CString>) -> Vec<*mut c_char> {
    items
        .map(|c| c.as_ptr().cast_mut())
        .chain(std::iter::once(ptr::null_mut()))
        .collect()
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds has room for two descriptors.
    #[cfg(target_os = "linux")]
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // No pipe2 on macOS: FD_CLOEXEC right after, so a supervisor another thread forks
    // in between may inherit these two (macOS process handling is best effort:
    // docs/security.md).
    #[cfg(not(target_os = "linux"))]
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        for fd in fds {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn dev_null() -> io::Result<OwnedFd> {
    Ok(std::fs::File::open("/dev/null")?.into())
}

/// `posix_spawn_file_actions_t` set up for the runner: stdio and working folder.
struct FileActions(libc::posix_spawn_file_actions_t);

impl FileActions {
    fn new(stdin: RawFd, stdout: RawFd, stderr: RawFd, cwd: &CString) -> io::Result<Self> {
        // SAFETY: zeroed is a valid starting value for init, which sets it up.
        let mut fa = FileActions(unsafe { std::mem::zeroed() });
        check(unsafe { libc::posix_spawn_file_actions_init(&mut fa.0) })?;
        for (fd, target) in [(stdin, 0), (stdout, 1), (stderr, 2)] {
            // SAFETY: fa is initialised; the fds live until after the fork.
            check(unsafe { libc::posix_spawn_file_actions_adddup2(&mut fa.0, fd, target) })?;
        }
        // SAFETY: cwd is a valid C string that outlives the spawn.
        check(unsafe { libc::posix_spawn_file_actions_addchdir_np(&mut fa.0, cwd.as_ptr()) })?;
        Ok(fa)
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in new.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

/// `posix_spawnattr_t` for the runner: its own process group, default signals, no mask.
struct SpawnAttr(libc::posix_spawnattr_t);

impl SpawnAttr {
    fn new() -> io::Result<Self> {
        // SAFETY: zeroed is a valid starting value for init.
        let mut attr = SpawnAttr(unsafe { std::mem::zeroed() });
        check(unsafe { libc::posix_spawnattr_init(&mut attr.0) })?;
        // SAFETY: sigset_t values are set up by sigemptyset before use.
        let mut defaults: libc::sigset_t = unsafe { std::mem::zeroed() };
        let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
        unsafe {
            libc::sigemptyset(&mut defaults);
            libc::sigemptyset(&mut mask);
            // The supervisor ignores some signals; ignored dispositions survive exec.
            for sig in 1..32 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::sigaddset(&mut defaults, sig);
                }
            }
        }
        let flags = libc::POSIX_SPAWN_SETPGROUP
            | libc::POSIX_SPAWN_SETSIGDEF
            | libc::POSIX_SPAWN_SETSIGMASK;
        // SAFETY: attr is initialised; the sets are valid.
        unsafe {
            check(libc::posix_spawnattr_setflags(
                &mut attr.0,
                flags as libc::c_short,
            ))?;
            check(libc::posix_spawnattr_setpgroup(&mut attr.0, 0))?;
            check(libc::posix_spawnattr_setsigdefault(&mut attr.0, &defaults))?;
            check(libc::posix_spawnattr_setsigmask(&mut attr.0, &mask))?;
        }
        Ok(attr)
    }
}

impl Drop for SpawnAttr {
    fn drop(&mut self) {
        // SAFETY: initialised in new.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

fn check(rc: c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Everything a supervisor needs for one attempt, prepared before a fork (or, in a
/// pooled supervisor, before the attempt).
struct Child<'a> {
    program: &'a CString,
    argv: Vec<*mut c_char>,
    env: Vec<*mut c_char>,
    actions: FileActions,
    attr: SpawnAttr,
    report: RawFd,
    /// The runner's stdin source, stdout and stderr write ends.
    runner_fds: [RawFd; 3],
}

impl<'a> Child<'a> {
    fn new(command: &'a Command, fds: SupervisorFds) -> io::Result<Self> {
        Ok(Child {
            program: &command.program,
            argv: null_terminated(command.argv.iter()),
            env: null_terminated(command.env.iter()),
            actions: FileActions::new(fds.stdin, fds.stdout, fds.stderr, &command.cwd)?,
            attr: SpawnAttr::new()?,
            report: fds.report,
            runner_fds: [fds.stdin, fds.stdout, fds.stderr],
        })
    }

    /// A forked supervisor's whole life. Only async-signal-safe calls from here on.
    unsafe fn run(&self) -> ! {
        unsafe {
            become_supervisor();
            self.close_inherited_fds();
            let _ = self.attempt();
            libc::_exit(0)
        }
    }

    /// One attempt: start the runner, report it, wait for its end, sweep its tree,
    /// report the end. Closes the runner's descriptors, not the report's. False when
    /// the sweep could not list our children (an escapee may be left as our child).
    /// Async-signal-safe.
    unsafe fn attempt(&self) -> bool {
        unsafe {
            let mut pid: pid_t = 0;
            let rc = libc::posix_spawn(
                &mut pid,
                self.program.as_ptr(),
                &self.actions.0,
                &self.attr.0,
                self.argv.as_ptr(),
                self.env.as_ptr(),
            );
            // From now on only the runner's tree holds its pipes.
            for fd in self.runner_fds {
                libc::close(fd);
            }
            if rc != 0 {
                send(self.report, SPAWN_FAILED, rc);
                return true;
            }
            let in_namespace = crate::process::pid_ns::is_namespace_init();
            let tag = if in_namespace {
                SPAWNED_IN_NAMESPACE
            } else {
                SPAWNED
            };
            send(self.report, tag, pid);
            wait_for_exit(pid, self.report);
            let (swept, status) = if in_namespace {
                sweep_namespace(pid)
            } else {
                let swept = sweep(pid);
                let mut status = 0;
                while libc::waitpid(pid, &mut status, 0) < 0 && errno() == libc::EINTR {}
                (swept, status)
            };
            send(self.report, EXITED, status);
            swept
        }
    }

    /// Closes every descriptor but ours: the judge's locks and claims must not stay
    /// held by a supervisor that outlives a crashed judge.
    unsafe fn close_inherited_fds(&self) {
        let mut keep = [
            self.report,
            self.runner_fds[0],
            self.runner_fds[1],
            self.runner_fds[2],
        ];
        unsafe { close_fds_except(&mut keep) };
    }
}

/// Signals settled and a child subreaper: every orphan of a runner's tree becomes ours.
/// Not dumpable: a runner of the same user cannot write our memory through
/// `/proc/<pid>/mem` (a runner's exec makes it dumpable again).
unsafe fn become_supervisor() {
    unsafe {
        settle_signals();
        #[cfg(target_os = "linux")]
        {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
    }
}

/// Requests larger than this are refused (the prompt goes on stdin past 128 KiB).
#[cfg(target_os = "linux")]
const MAX_REQUEST: usize = 64 << 20;

/// One attempt's request to a pooled supervisor: the command's length, then the
/// command, sent as one message (one wake-up of the supervisor).
#[cfg(target_os = "linux")]
pub(crate) fn request(command: &Command) -> Vec<u8> {
    let body = command.encode();
    let mut message = Vec::with_capacity(8 + body.len());
    message.extend_from_slice(&(body.len() as u64).to_ne_bytes());
    message.extend_from_slice(&body);
    message
}

/// Sends a `request` to a pooled supervisor with the descriptors in `SupervisorFds`
/// order. An error says whether any of it reached the supervisor.
#[cfg(target_os = "linux")]
pub(crate) fn send_request(
    sock: &std::os::unix::net::UnixStream,
    request: &[u8],
    fds: SupervisorFds,
) -> Result<(), (bool, io::Error)> {
    let descriptors = [fds.stdin, fds.stdout, fds.stderr, fds.report];
    send_with_fds(sock, request, &descriptors)
}

/// A pooled supervisor's life: one attempt per request on `sock`, until the daemon
/// closes it (or dies). Forked from the single-threaded zygote, so ordinary code is
/// fine here; each sweep leaves it with no child before the next request.
#[cfg(target_os = "linux")]
pub(crate) fn serve(sock: std::os::unix::net::UnixStream) -> ! {
    // SAFETY: plain calls in a single-threaded process.
    unsafe { become_supervisor() };
    loop {
        // One that cannot list its children serves no more: what its sweep could not
        // see must not become a later attempt's.
        let more = match receive_request(&sock) {
            Ok(Some((command, fds))) => serve_one(command.as_ref(), fds),
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
#[cfg(target_os = "linux")]
fn serve_one(command: Option<&Command>, fds: [OwnedFd; 4]) -> bool {
    let raw = fds.map(std::os::fd::IntoRawFd::into_raw_fd);
    let fds = SupervisorFds {
        stdin: raw[0],
        stdout: raw[1],
        stderr: raw[2],
        report: raw[3],
    };
    let child = command
        .ok_or(libc::EINVAL)
        .and_then(|c| Child::new(c, fds).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO)));
    // SAFETY: the descriptors are ours (taken above) and closed exactly once.
    unsafe {
        let swept = match child {
            Ok(child) => child.attempt(),
            Err(errno) => {
                for fd in [fds.stdin, fds.stdout, fds.stderr] {
                    libc::close(fd);
                }
                send(fds.report, SPAWN_FAILED, errno);
                true
            }
        };
        libc::close(fds.report);
        swept
    }
}

/// One request: the command (`None` if it does not decode) and its four descriptors;
/// `None` at EOF.
#[cfg(target_os = "linux")]
#[allow(clippy::type_complexity)]
fn receive_request(
    mut sock: &std::os::unix::net::UnixStream,
) -> io::Result<Option<(Option<Command>, [OwnedFd; 4])>> {
    use std::io::Read;
    let mut header = [0u8; 8];
    let Some(fds) = recv_with_fds(sock, &mut header)? else {
        return Ok(None);
    };
    let len = u64::from_ne_bytes(header) as usize;
    let fds: [OwnedFd; 4] = fds
        .try_into()
        .map_err(|_| io::Error::other("a supervisor request needs four descriptors"))?;
    if len > MAX_REQUEST {
        return Err(io::Error::other("supervisor request too large"));
    }
    let mut body = vec![0u8; len];
    sock.read_exact(&mut body)?;
    Ok(Some((Command::decode(&body), fds)))
}

/// Closes every descriptor from 3 up but those in `keep` (async-signal-safe).
pub(crate) unsafe fn close_fds_except(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut from: c_int = 3;
    for &fd in keep.iter() {
        if fd > from {
            unsafe { close_range(from, fd - 1) };
        }
        from = from.max(fd + 1);
    }
    unsafe { close_range(from, c_int::MAX) };
}

unsafe fn close_range(first: c_int, last: c_int) {
    #[cfg(target_os = "linux")]
    unsafe {
        let rc = libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            last as libc::c_uint,
            0,
        );
        if rc == 0 {
            return;
        }
    }
    // No close_range (Linux before 5.9, macOS): one by one up to the descriptor limit.
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
unsafe fn settle_signals() {
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
        unsafe { set_handler(sig, libc::SIG_IGN) };
    }
}

pub(crate) unsafe fn set_handler(sig: c_int, handler: libc::sighandler_t) {
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(sig, &action, ptr::null_mut());
    }
}

unsafe fn send(fd: RawFd, tag: u8, value: i32) {
    let record = encode(tag, value);
    // A judge that is gone cannot read it: nothing to do about a failed write.
    unsafe { libc::write(fd, record.as_ptr().cast(), RECORD_BYTES) };
}

pub(crate) fn errno() -> c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Blocks until the runner has exited, leaving it a zombie (its pid and group id
/// stay reserved during the sweep). Kills its group if the judge dies meanwhile.
unsafe fn wait_for_exit(pid: pid_t, report: RawFd) {
    unsafe {
        #[cfg(target_os = "linux")]
        {
            let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as c_int;
            if pidfd >= 0 {
                let mut fds = [
                    libc::pollfd {
                        fd: pidfd,
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
                    let n = libc::poll(fds.as_mut_ptr(), 2, -1);
                    if n < 0 && errno() != libc::EINTR {
                        break;
                    }
                    if fds[0].revents != 0 {
                        break;
                    }
                    if fds[1].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                        libc::kill(-pid, libc::SIGKILL);
                        fds[1].fd = -1;
                    }
                }
                libc::close(pidfd);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = report;
        let mut info: libc::siginfo_t = std::mem::zeroed();
        while libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        ) < 0
            && errno() == libc::EINTR
        {}
    }
}

/// SIGKILLs and reaps every child but the runner's zombie, round after round, until
/// none is left: a killed child's own children become ours for the next round. False
/// when our children cannot be listed: then only the runner's group was stopped.
unsafe fn sweep(runner: pid_t) -> bool {
    unsafe {
        libc::kill(-runner, libc::SIGKILL);
        let mut buf = [0u8; 4096];
        for _ in 0..SWEEP_ROUNDS {
            let mut pids = [0 as pid_t; 512];
            let Some(n) = read_children(&mut buf, &mut pids, runner) else {
                return false;
            };
            if n == 0 {
                break;
            }
            for &child in &pids[..n] {
                // Its own group too: a `setsid` child may lead one.
                libc::kill(-child, libc::SIGKILL);
                libc::kill(child, libc::SIGKILL);
            }
            for &child in &pids[..n] {
                let mut status = 0;
                while libc::waitpid(child, &mut status, 0) < 0 && errno() == libc::EINTR {}
            }
        }
        true
    }
}

/// The sweep of a supervisor that is the init of its PID namespace: SIGKILL to every
/// process in it (`kill(-1)` spares only us), reaping until none is left; a process
/// forked while a round's kill went out is caught by the next round. Returns whether
/// it ended with none left, and the runner's wait status.
unsafe fn sweep_namespace(runner: pid_t) -> (bool, c_int) {
    let mut runner_status = 0;
    unsafe {
        if !crate::process::pid_ns::is_namespace_init() {
            return (false, runner_status);
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        for _ in 0..SWEEP_ROUNDS {
            libc::kill(-1, libc::SIGKILL);
            let mut status = 0;
            let pid = libc::waitpid(-1, &mut status, libc::WNOHANG);
            if pid == runner {
                runner_status = status;
            } else if pid == 0 {
                libc::nanosleep(&pause, ptr::null_mut());
            } else if pid < 0 && errno() == libc::ECHILD {
                return (true, runner_status);
            }
        }
        (false, runner_status)
    }
}

/// Our children but `skip`, from `/proc/thread-self/children` (the supervisor has one
/// thread); `None` without that file (no `/proc`, not Linux, a kernel without
/// `CONFIG_PROC_CHILDREN`).
unsafe fn read_children(buf: &mut [u8], pids: &mut [pid_t], skip: pid_t) -> Option<usize> {
    unsafe {
        let fd = libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let mut len = 0;
        while len < buf.len() {
            let n = libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len);
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                break;
            }
            len += n as usize;
        }
        libc::close(fd);
        Some(parse_pids(&buf[..len], len == buf.len(), pids, skip))
    }
}

/// Parses space-separated pids; a cut-off last one (`truncated`) is left for the next round.
fn parse_pids(text: &[u8], truncated: bool, pids: &mut [pid_t], skip: pid_t) -> usize {
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
    fn records_round_trip() {
        for report in [
            Report::Spawned(4242),
            Report::SpawnedInNamespace(2),
            Report::SpawnFailed(libc::ENOENT),
            Report::Exited(-1),
        ] {
            let (tag, value) = match report {
                Report::Spawned(v) => (SPAWNED, v),
                Report::SpawnedInNamespace(v) => (SPAWNED_IN_NAMESPACE, v),
                Report::SpawnFailed(v) => (SPAWN_FAILED, v),
                Report::Exited(v) => (EXITED, v),
            };
            assert_eq!(decode(encode(tag, value)), Some(report));
        }
        assert_eq!(decode([b'?'; RECORD_BYTES]), None);
    }

    #[test]
    fn a_command_round_trips() {
        let c = |s: &str| CString::new(s).unwrap();
        let command = Command {
            program: c("/bin/sh"),
            argv: vec![c("sh"), c("-c"), c("")],
            env: Env {
                shared: Arc::from([c("A=1")]),
                own: vec![c("B=")],
            },
            cwd: c("/tmp"),
        };
        let back = Command::decode(&command.encode()).unwrap();
        assert_eq!(back.program, command.program);
        assert_eq!(back.argv, command.argv);
        assert!(back.env.iter().eq(command.env.iter()));
        assert_eq!(back.cwd, command.cwd);
        assert!(Command::decode(b"/bin/sh\0/tmp\0").is_none(), "no argc");
        assert!(
            Command::decode(b"/bin/sh\0/tmp\x005\0a\0").is_none(),
            "argc past the end"
        );
    }

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
