//! Supervisors as the init of their own PID namespace (Linux). A runner's tree then
//! cannot name, kill or stop its supervisor, the daemon or any other process: inside
//! the namespace the supervisor is pid 1, which ignores every signal its members send
//! it (SIGKILL and SIGSTOP included), and no pid outside the namespace is reachable.
//! When the supervisor ends, however it ends, the kernel kills everything left inside.
//!
//! Creating a PID namespace needs CAP_SYS_ADMIN; without it (an ordinary user) the
//! supervisor also gets a user namespace that maps only its own uid and gid, so files
//! are accessed exactly as before. Where neither works (macOS, a system that forbids
//! user namespaces) supervisors are plain forks, as before (docs/security.md).
//!
//! Where it may, the supervisor also gets a mount namespace of its own (a slave of the
//! host's: mounts never travel back) with a fresh `/proc` on `/proc`, so the runner's
//! `/proc` shows its own namespace: `/proc/self` is its pid there and `/proc/<pid>`
//! names its own processes (codex's sandbox looks itself up there and stalls when it
//! is missing). Where mounting is not allowed (a nested container), runners see the
//! host's `/proc`, as before, and `doctor` and the daemon's start line say so.

use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::IntoRawFd;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};

use libc::pid_t;

#[cfg(target_os = "linux")]
use crate::support::failpoint;

/// How this process forks supervisors (probed once per process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) enum Isolation {
    /// A new PID namespace; `own_proc`: with a mount namespace and a fresh `/proc`.
    PidNamespace { own_proc: bool },
    /// A new user namespace mapping our own ids, and a PID namespace in it (`own_proc`
    /// as above).
    UserAndPidNamespace { own_proc: bool },
    /// A plain fork.
    Fork,
}

impl Isolation {
    /// How `doctor` and the start line name it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Isolation::PidNamespace { own_proc: true } => "pid namespace, own /proc",
            Isolation::PidNamespace { own_proc: false } => {
                "pid namespace (runners see the host's /proc)"
            }
            Isolation::UserAndPidNamespace { own_proc: true } => {
                "user and pid namespace, own /proc"
            }
            Isolation::UserAndPidNamespace { own_proc: false } => {
                "user and pid namespace (runners see the host's /proc)"
            }
            Isolation::Fork => "none (plain fork: a runner can signal its supervisor)",
        }
    }

    /// True when runners get a `/proc` of their own PID namespace.
    pub(crate) fn own_proc(self) -> bool {
        match self {
            Isolation::PidNamespace { own_proc } | Isolation::UserAndPidNamespace { own_proc } => {
                own_proc
            }
            Isolation::Fork => false,
        }
    }

    /// True when runners are in a PID namespace but see the host's `/proc`: a runner
    /// that looks itself up there (codex's sandbox) does not find itself.
    pub(crate) fn host_proc_in_namespace(self) -> bool {
        self != Isolation::Fork && !self.own_proc()
    }

    /// The `clone` flags for it; 0 for a plain fork.
    #[cfg(target_os = "linux")]
    fn clone_flags(self) -> libc::c_int {
        let (namespaces, own_proc) = match self {
            Isolation::PidNamespace { own_proc } => (libc::CLONE_NEWPID, own_proc),
            Isolation::UserAndPidNamespace { own_proc } => {
                (libc::CLONE_NEWUSER | libc::CLONE_NEWPID, own_proc)
            }
            Isolation::Fork => return 0,
        };
        if own_proc {
            namespaces | libc::CLONE_NEWNS
        } else {
            namespaces
        }
    }
}

/// What a PID namespace without its own `/proc` costs, and how to get one (doctor and
/// the daemon's start warning).
pub(crate) const HOST_PROC_HINT: &str = "mounting a /proc for runners was refused, so a \
     runner that looks itself up in /proc does not find itself (codex's sandbox then waits \
     about 10 s before each command it runs); run llm-judge as root, or as a user outside \
     a container (a container hides parts of its /proc, and the kernel then refuses a new \
     one to a user namespace)";

/// Logs (as a warning) that runners see the host's `/proc`, when they do: the daemon
/// once at start, `run` and `ask` once each.
pub fn warn_if_host_proc() {
    let found = isolation();
    if found.host_proc_in_namespace() {
        tracing::warn!("runner isolation: {}; {HOST_PROC_HINT}", found.describe());
    }
}

/// The isolation supervisors of this process get; the first call probes it.
pub(crate) fn isolation() -> Isolation {
    static ISOLATION: OnceLock<Isolation> = OnceLock::new();
    *ISOLATION.get_or_init(|| {
        let _ = id_maps();
        probe()
    })
}

/// True in a supervisor that is the init of its own namespace: only there may it
/// signal "every process" (`kill(-1)`), which outside a namespace means the machine.
pub(crate) fn is_namespace_init() -> bool {
    rustix::process::getpid().is_init()
}

/// In a supervisor in a PID namespace: its `children` file in the host's `/proc`,
/// opened before any `/proc` of its own was mounted over it; -1 when none.
static HOST_CHILDREN: AtomicI32 = AtomicI32::new(-1);

/// The descriptor of the supervisor's `children` file in the host's `/proc` (it numbers
/// the runner as the judge does, whatever `/proc` the supervisor has now, so the judge
/// need not map the pid through `/proc` itself); -1 when there is none (not in a PID
/// namespace, or the open failed). Kept through a supervisor's descriptor cleanup.
/// Async-signal-safe.
pub(crate) fn host_children_fd() -> RawFd {
    HOST_CHILDREN.load(Ordering::Relaxed)
}

/// Forks like `fork(2)`, the child isolated as `isolation()` says; 0 in the child.
/// The probe (and the id maps the child writes) is settled in the parent first.
///
/// # Safety
/// As `fork`: in a multi-threaded process the child may only make async-signal-safe
/// calls.
pub(crate) unsafe fn fork() -> io::Result<pid_t> {
    // SAFETY: the caller keeps fork's rules; `isolation()` ran first, in the parent.
    unsafe { fork_as(isolation()) }
}

/// `fork` with `isolation`'s namespace flags; 0 in the child.
///
/// # Safety
/// As `fork`; and `isolation()` must have run in the parent first (its id maps are
/// read by the child without locks).
#[cfg(target_os = "linux")]
unsafe fn fork_as(isolation: Isolation) -> io::Result<pid_t> {
    let flags = isolation.clone_flags();
    // SAFETY: the caller keeps fork's rules. A raw clone without CLONE_VM is a fork
    // that can take namespace flags; the child makes only raw system calls.
    let pid = unsafe {
        if flags == 0 {
            libc::fork()
        } else {
            let flags = libc::c_long::from(flags | libc::SIGCHLD);
            libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) as pid_t
        }
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid != 0 {
        return Ok(pid);
    }
    let user_ns = matches!(isolation, Isolation::UserAndPidNamespace { .. });
    // SAFETY: in the child, which may only make async-signal-safe calls: these are.
    if user_ns && !unsafe { map_own_ids() } {
        // Unmapped, it would run as the overflow user: never start a runner so.
        // SAFETY: leaving the child without running anything of the parent's.
        unsafe { libc::_exit(126) };
    }
    if flags != 0 {
        // While `/proc` is still the host's: the one view of our children that numbers
        // them as the judge does.
        if let Ok(fd) = crate::process::os::open_children() {
            HOST_CHILDREN.store(fd.into_raw_fd(), Ordering::Relaxed);
        }
    }
    if flags & libc::CLONE_NEWNS != 0 {
        // The probe made sure this works; should it fail now, the runner sees the
        // host's /proc, as without a mount namespace, rather than losing the job.
        // SAFETY: in the child, in its own mount namespace: raw system calls only.
        unsafe { mount_own_proc() };
    }
    Ok(0)
}

/// In a fresh mount namespace: makes every mount a slave of the host's (so nothing
/// mounted here reaches the host), then mounts a `/proc` of this PID namespace on
/// `/proc`. The proc mount is not tried when the first fails (it could propagate to
/// the host). Async-signal-safe: raw system calls on literals.
///
/// # Safety
/// Only in a forked child in fresh mount and PID namespaces (`fork_as`): in the
/// host's namespaces it would remount the host's `/proc`.
#[cfg(target_os = "linux")]
unsafe fn mount_own_proc() {
    let none = std::ptr::null();
    // SAFETY: valid C string literals or null where mount(2) allows it; no data.
    unsafe {
        let slave = libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_SLAVE | libc::MS_REC,
            std::ptr::null(),
        );
        if slave == 0 {
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            );
        }
    }
}

/// True when `/proc/self` names this process as its own PID namespace sees it, i.e. the
/// `/proc` in front of it is this namespace's. Async-signal-safe.
#[cfg(target_os = "linux")]
fn sees_own_proc() -> bool {
    let mut link = [0u8; 16];
    // SAFETY: a C string literal and a buffer of the length passed.
    let n = unsafe { libc::readlink(c"/proc/self".as_ptr(), link.as_mut_ptr().cast(), link.len()) };
    let me = rustix::process::getpid().as_raw_nonzero().get();
    usize::try_from(n).is_ok_and(|n| parse_pid(&link[..n]) == Some(me))
}

/// A decimal pid from bytes, without allocating.
#[cfg(target_os = "linux")]
fn parse_pid(digits: &[u8]) -> Option<pid_t> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0 as pid_t, |pid, &b| {
        let digit = pid_t::from(b.checked_sub(b'0').filter(|d| *d < 10)?);
        pid.checked_mul(10)?.checked_add(digit)
    })
}

/// Plain `fork`: no namespaces here.
///
/// # Safety
/// As `fork`: in a multi-threaded process the child may only make async-signal-safe
/// calls.
#[cfg(not(target_os = "linux"))]
unsafe fn fork_as(_isolation: Isolation) -> io::Result<pid_t> {
    // SAFETY: the caller keeps fork's rules.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// The first isolation whose child starts and reports back, else `Fork`. Each kind
/// is tried with its own `/proc` first: a mount that is refused never moves a daemon
/// that may create a PID namespace into a user namespace.
#[cfg(target_os = "linux")]
fn probe() -> Isolation {
    [
        Isolation::PidNamespace { own_proc: true },
        Isolation::PidNamespace { own_proc: false },
        Isolation::UserAndPidNamespace { own_proc: true },
        Isolation::UserAndPidNamespace { own_proc: false },
    ]
    .into_iter()
    .filter(|isolation| !(isolation.own_proc() && failpoint::proc_mount_refused()))
    .find(|&isolation| works(isolation))
    .unwrap_or(Isolation::Fork)
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Isolation {
    Isolation::Fork
}

/// Forks one child isolated so; true when it got as far as writing a byte back (its
/// id maps written, and, for `own_proc`, its `/proc` its own). Read through a pipe:
/// the zygote ignores SIGCHLD, so no status.
#[cfg(target_os = "linux")]
fn works(isolation: Isolation) -> bool {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return false;
    }
    let [read_end, write_end] = fds;
    // SAFETY: the child only checks its /proc, writes a byte and exits.
    let child = unsafe { fork_as(isolation) };
    if let Ok(0) = child {
        // SAFETY: async-signal-safe calls in the child.
        unsafe {
            if !isolation.own_proc() || sees_own_proc() {
                libc::write(write_end, b"1".as_ptr().cast(), 1);
            }
            libc::_exit(0);
        }
    }
    let mut byte = 0u8;
    // SAFETY: our own descriptors, closed once; waitpid on our own child.
    unsafe {
        libc::close(write_end);
        let got = libc::read(read_end, (&raw mut byte).cast(), 1) == 1;
        libc::close(read_end);
        if let Ok(pid) = child {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
        got && child.is_ok()
    }
}

/// `/proc/self/uid_map` and `gid_map` lines for our own ids, formatted before any
/// fork (the child may not allocate).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct IdMaps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

static ID_MAPS: OnceLock<IdMaps> = OnceLock::new();

fn id_maps() -> &'static IdMaps {
    ID_MAPS.get_or_init(|| {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        IdMaps {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        }
    })
}

/// In a fresh user namespace: map our own uid and gid to themselves (so the runner
/// is the same user inside). Async-signal-safe (`OnceLock::get` is an atomic load;
/// `isolation()` filled it before any fork); false if a write failed.
///
/// # Safety
/// Only in a forked child that is in a fresh user namespace (`fork_as`), where its
/// only calls must be async-signal-safe.
#[cfg(target_os = "linux")]
unsafe fn map_own_ids() -> bool {
    let Some(maps) = ID_MAPS.get() else {
        return false;
    };
    // SAFETY: write_file only makes raw system calls on C string literals.
    unsafe {
        write_file(c"/proc/self/uid_map", &maps.uid_map)
            && write_file(c"/proc/self/setgroups", b"deny")
            && write_file(c"/proc/self/gid_map", &maps.gid_map)
    }
}

/// Writes `bytes` to `path` with raw `open`/`write`/`close` (async-signal-safe).
///
/// # Safety
/// Safe to call in a forked child of a multi-threaded process: it allocates nothing
/// and takes no lock.
#[cfg(target_os = "linux")]
unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> bool {
    // SAFETY: a valid C string and byte slice; the descriptor is ours, closed once.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        n == bytes.len() as isize
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn pids_parse_from_link_bytes() {
        assert_eq!(parse_pid(b"1"), Some(1));
        assert_eq!(parse_pid(b"40213"), Some(40213));
        for bad in [&b""[..], b"self", b"12a", b"99999999999"] {
            assert_eq!(parse_pid(bad), None, "{bad:?}");
        }
    }
}
