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

use std::io;
use std::sync::OnceLock;

use libc::pid_t;

/// How this process forks supervisors (probed once per process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) enum Isolation {
    /// A new PID namespace.
    PidNamespace,
    /// A new user namespace mapping our own ids, and a PID namespace in it.
    UserAndPidNamespace,
    /// A plain fork.
    Fork,
}

impl Isolation {
    /// How `doctor` and the start line name it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Isolation::PidNamespace => "pid namespace",
            Isolation::UserAndPidNamespace => "user and pid namespace",
            Isolation::Fork => "none (plain fork: a runner can signal its supervisor)",
        }
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

#[cfg(target_os = "linux")]
unsafe fn fork_as(isolation: Isolation) -> io::Result<pid_t> {
    let flags = match isolation {
        Isolation::PidNamespace => libc::CLONE_NEWPID,
        Isolation::UserAndPidNamespace => libc::CLONE_NEWUSER | libc::CLONE_NEWPID,
        Isolation::Fork => 0,
    };
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
    // SAFETY: in the child, which may only make async-signal-safe calls: these are.
    if pid == 0 && isolation == Isolation::UserAndPidNamespace && !unsafe { map_own_ids() } {
        // Unmapped, it would run as the overflow user: never start a runner so.
        // SAFETY: leaving the child without running anything of the parent's.
        unsafe { libc::_exit(126) };
    }
    Ok(pid)
}

#[cfg(not(target_os = "linux"))]
unsafe fn fork_as(_isolation: Isolation) -> io::Result<pid_t> {
    // SAFETY: the caller keeps fork's rules.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// The first isolation whose child starts and reports back, else `Fork`.
#[cfg(target_os = "linux")]
fn probe() -> Isolation {
    [Isolation::PidNamespace, Isolation::UserAndPidNamespace]
        .into_iter()
        .find(|&isolation| works(isolation))
        .unwrap_or(Isolation::Fork)
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Isolation {
    Isolation::Fork
}

/// Forks one child isolated so; true when it got as far as writing a byte back (its
/// id maps written). Read through a pipe: the zygote ignores SIGCHLD, so no status.
#[cfg(target_os = "linux")]
fn works(isolation: Isolation) -> bool {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return false;
    }
    let [read_end, write_end] = fds;
    // SAFETY: the child only writes a byte and exits.
    let child = unsafe { fork_as(isolation) };
    if let Ok(0) = child {
        // SAFETY: async-signal-safe calls in the child.
        unsafe {
            libc::write(write_end, b"1".as_ptr().cast(), 1);
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
