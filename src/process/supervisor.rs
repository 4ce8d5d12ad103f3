//! The per-attempt supervisor: a process forked from the judge for each runner start.
//! It is a child subreaper (Linux), so every orphan of the runner's tree becomes its
//! child, also one that called `setsid` and cleared its environment. Once the runner
//! ends it SIGKILLs and reaps all of them; when the judge dies (its report pipe
//! breaks) it kills the runner's group first. An attempt's processes therefore never
//! outlive it, whatever else runs at the same time, and nobody scans all of `/proc`.
//!
//! After `fork` the child runs only async-signal-safe calls on memory prepared before
//! the fork (the judge is multi-threaded). The runner itself is started with
//! `posix_spawn`, which needs no copy of the supervisor's address space.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use libc::{c_char, c_int, pid_t};

/// A report record: one tag byte, three spare bytes, one native-endian i32.
pub(crate) const RECORD_BYTES: usize = 8;
const SPAWNED: u8 = b'S';
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
/// environment, the working folder, and whether stdin is a pipe (else /dev/null).
pub(crate) struct Launch<'a> {
    pub program: &'a Path,
    pub argv: &'a [String],
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    pub cwd: &'a Path,
    pub stdin_piped: bool,
}

/// A started supervisor and the judge's ends of its pipes.
pub(crate) struct Started {
    pub supervisor: i32,
    /// Forked by this process, so ours to reap; the zygote's are reaped by the kernel
    /// and their pid must not be waited for (it may be reused).
    pub ours: bool,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub report: OwnedFd,
}

/// The runner's command as C strings, ready for a fork (here or in the zygote).
pub(crate) struct Command {
    pub program: CString,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
    pub cwd: CString,
}

impl Command {
    fn of(launch: &Launch<'_>) -> io::Result<Self> {
        let argv = launch
            .argv
            .iter()
            .map(|a| c_string(OsStr::new(a)))
            .collect::<io::Result<Vec<_>>>()?;
        let env = launch
            .env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.clone();
                kv.push("=");
                kv.push(v);
                c_string(&kv)
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Command {
            program: c_string(launch.program.as_os_str())?,
            argv,
            env,
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

/// What another process (the daemon's zygote) made of a request to fork a supervisor.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) enum Forked {
    /// It forked one: its pid.
    Pid(pid_t),
    /// It could not (an errno from its fork).
    Failed(io::Error),
    /// Fork it here. `tried`: the request may have reached a supervisor that holds the
    /// pipes sent, so use fresh ones (that one stops once our ends close).
    Here { tried: bool },
}

/// Another process that can fork the supervisor.
pub(crate) type Forker = fn(&Command, SupervisorFds) -> Forked;

/// Starts a supervisor for the runner described by `launch`: forked by `forker` when
/// it can, else forked here.
pub(crate) fn start(launch: &Launch<'_>, forker: Forker) -> io::Result<Started> {
    let command = Command::of(launch)?;
    let pipes = Pipes::new(launch.stdin_piped)?;
    let pipes = match forker(&command, pipes.fds()) {
        Forked::Pid(pid) => return Ok(pipes.started(pid, false)),
        Forked::Failed(e) => return Err(e),
        Forked::Here { tried: false } => pipes,
        Forked::Here { tried: true } => {
            drop(pipes);
            Pipes::new(launch.stdin_piped)?
        }
    };
    let pid = fork_supervisor(&command, pipes.fds())?;
    Ok(pipes.started(pid, true))
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
    fn started(self, supervisor: pid_t, ours: bool) -> Started {
        Started {
            supervisor,
            ours,
            stdin: self.stdin_w,
            stdout: self.out.0,
            stderr: self.err.0,
            report: self.report.0,
        }
    }
}

/// Forks a supervisor for `command` with `fds`, from this process.
pub(crate) fn fork_supervisor(command: &Command, fds: SupervisorFds) -> io::Result<pid_t> {
    let argv_ptrs = null_terminated(&command.argv);
    let env_ptrs = null_terminated(&command.env);
    let actions = FileActions::new(fds.stdin, fds.stdout, fds.stderr, &command.cwd)?;
    let attr = SpawnAttr::new()?;
    let child = Child {
        program: &command.program,
        argv: &argv_ptrs,
        env: &env_ptrs,
        actions: &actions,
        attr: &attr,
        report: fds.report,
        runner_fds: [fds.stdin, fds.stdout, fds.stderr],
    };
    // SAFETY: fork, possibly in a multi-threaded process; the child only runs
    // `Child::run`, which makes async-signal-safe calls on memory prepared above and
    // never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
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

fn null_terminated(items: &[CString]) -> Vec<*mut c_char> {
    items
        .iter()
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

/// Everything the forked child needs, prepared before the fork.
struct Child<'a> {
    program: &'a CString,
    argv: &'a [*mut c_char],
    env: &'a [*mut c_char],
    actions: &'a FileActions,
    attr: &'a SpawnAttr,
    report: RawFd,
    /// The runner's stdin source, stdout and stderr write ends.
    runner_fds: [RawFd; 3],
}

impl Child<'_> {
    /// The supervisor's whole life. Only async-signal-safe calls from here on.
    unsafe fn run(&self) -> ! {
        unsafe {
            settle_signals();
            #[cfg(target_os = "linux")]
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            self.close_inherited_fds();
            let mut pid: pid_t = 0;
            let rc = libc::posix_spawn(
                &mut pid,
                self.program.as_ptr(),
                &self.actions.0,
                &self.attr.0,
                self.argv.as_ptr(),
                self.env.as_ptr(),
            );
            if rc != 0 {
                send(self.report, SPAWN_FAILED, rc);
                libc::_exit(0);
            }
            // From now on only the runner's tree holds its pipes.
            for fd in self.runner_fds {
                libc::close(fd);
            }
            send(self.report, SPAWNED, pid);
            wait_for_exit(pid, self.report);
            sweep(pid);
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0 && errno() == libc::EINTR {}
            send(self.report, EXITED, status);
            libc::_exit(0)
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
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            last as libc::c_uint,
            0,
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (first, last);
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
/// SIGHUP, SIGQUIT) and SIGPIPE: the supervisor and the zygote stop on their own terms.
pub(crate) unsafe fn ignore_stop_signals() {
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
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
/// none is left: a killed child's own children become ours for the next round.
unsafe fn sweep(runner: pid_t) {
    unsafe {
        libc::kill(-runner, libc::SIGKILL);
        let mut buf = [0u8; 4096];
        for _ in 0..SWEEP_ROUNDS {
            let mut pids = [0 as pid_t; 512];
            let n = read_children(&mut buf, &mut pids, runner);
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
    }
}

/// Our children but `skip`, from `/proc/thread-self/children` (the supervisor has one
/// thread). Without that file (no `/proc`, not Linux) only the process group is stopped.
unsafe fn read_children(buf: &mut [u8], pids: &mut [pid_t], skip: pid_t) -> usize {
    unsafe {
        let fd = libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return 0;
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
        parse_pids(&buf[..len], len == buf.len(), pids, skip)
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
            Report::SpawnFailed(libc::ENOENT),
            Report::Exited(-1),
        ] {
            let (tag, value) = match report {
                Report::Spawned(v) => (SPAWNED, v),
                Report::SpawnFailed(v) => (SPAWN_FAILED, v),
                Report::Exited(v) => (EXITED, v),
            };
            assert_eq!(decode(encode(tag, value)), Some(report));
        }
        assert_eq!(decode([b'?'; RECORD_BYTES]), None);
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
