//! The `posix_spawn` wrapper: the runner's argv and environment as C pointer arrays,
//! its stdio (file actions), its own process group with default signals (attributes),
//! and its working folder (a `chdir` of the supervisor around the spawn). Everything is
//! prepared before a fork; `Spawn::spawn` itself is async-signal-safe.
//!
//! The working folder is not a file action: `posix_spawn_file_actions_addchdir_np`
//! needs glibc 2.29, and the Linux packages run on glibc 2.28 (RHEL 8; docs/install.md,
//! `scripts/check-glibc-floor.sh`). The supervisor is single-threaded (forked from the
//! judge, or a pooled one forked from the single-threaded zygote), so changing its own
//! folder for the spawn is what the file action did in the spawned child: the runner
//! starts in `cwd`, a relative program is found from there, and a folder that cannot be
//! entered fails the spawn with `chdir`'s errno. `chdir` is async-signal-safe.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::ptr;

use libc::{c_char, c_int, pid_t};

use super::{Command, SupervisorFds};

/// One runner, ready to `posix_spawn`; borrows the command's strings.
pub(super) struct Spawn<'a> {
    program: &'a CString,
    cwd: &'a CString,
    argv: Vec<*mut c_char>,
    env: Vec<*mut c_char>,
    actions: FileActions,
    attr: SpawnAttr,
}

impl<'a> Spawn<'a> {
    /// Prepares `command` with the runner's stdio from `fds`.
    pub(super) fn new(command: &'a Command, fds: SupervisorFds) -> io::Result<Self> {
        Ok(Spawn {
            program: &command.program,
            cwd: &command.cwd,
            argv: null_terminated(command.argv.iter()),
            env: null_terminated(command.env.iter()),
            actions: FileActions::new(fds.stdin, fds.stdout, fds.stderr)?,
            attr: SpawnAttr::new()?,
        })
    }

    /// Starts the runner: its pid, or `posix_spawn`'s error number. Async-signal-safe.
    pub(super) fn spawn(&self) -> Result<pid_t, c_int> {
        // SAFETY: a valid C string; this process is single-threaded (module comment),
        // so no other thread sees its folder change.
        if unsafe { libc::chdir(self.cwd.as_ptr()) } != 0 {
            return Err(errno());
        }
        let mut pid: pid_t = 0;
        // SAFETY: every pointer comes from this value: the program string, the
        // initialised actions and attributes, and NULL-terminated arrays of pointers
        // into the command's strings, which outlive `self`.
        let rc = unsafe {
            libc::posix_spawn(
                &mut pid,
                self.program.as_ptr(),
                &self.actions.0,
                &self.attr.0,
                self.argv.as_ptr(),
                self.env.as_ptr(),
            )
        };
        // Back to the root: a pooled supervisor keeps no job's folder busy between
        // attempts (every runner's `cwd` is absolute: `Command::of`). A failure changes
        // nothing for the runner, which has its own folder already.
        // SAFETY: a valid C string.
        unsafe { libc::chdir(c"/".as_ptr()) };
        if rc == 0 { Ok(pid) } else { Err(rc) }
    }
}

fn null_terminated<'a>(items: impl Iterator<Item = &'a CString>) -> Vec<*mut c_char> {
    items
        .map(|c| c.as_ptr().cast_mut())
        .chain(std::iter::once(ptr::null_mut()))
        .collect()
}

/// This thread's `errno`. Async-signal-safe.
fn errno() -> c_int {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// `posix_spawn_file_actions_t` set up for the runner: its stdio.
struct FileActions(libc::posix_spawn_file_actions_t);

impl FileActions {
    fn new(stdin: RawFd, stdout: RawFd, stderr: RawFd) -> io::Result<Self> {
        // SAFETY: zeroed is a valid starting value for init, which sets it up.
        let mut raw: libc::posix_spawn_file_actions_t = unsafe { std::mem::zeroed() };
        // SAFETY: raw is ours to initialise; it is destroyed (by Drop) only once this
        // succeeded.
        check(unsafe { libc::posix_spawn_file_actions_init(&mut raw) })?;
        let mut fa = FileActions(raw);
        for (fd, target) in [(stdin, 0), (stdout, 1), (stderr, 2)] {
            // SAFETY: fa is initialised; the fds live until after the spawn.
            check(unsafe { libc::posix_spawn_file_actions_adddup2(&mut fa.0, fd, target) })?;
        }
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
        let mut raw: libc::posix_spawnattr_t = unsafe { std::mem::zeroed() };
        // SAFETY: raw is ours to initialise; Drop destroys it only once this succeeded.
        check(unsafe { libc::posix_spawnattr_init(&mut raw) })?;
        let mut attr = SpawnAttr(raw);
        let (defaults, mask) = signal_sets();
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

/// The signals the runner gets back at their default (every one the supervisor may
/// ignore: ignored dispositions survive exec), and an empty mask.
fn signal_sets() -> (libc::sigset_t, libc::sigset_t) {
    // SAFETY: sigset_t values are set up by sigemptyset before use.
    unsafe {
        let mut defaults: libc::sigset_t = std::mem::zeroed();
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut defaults);
        libc::sigemptyset(&mut mask);
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::sigaddset(&mut defaults, sig);
            }
        }
        (defaults, mask)
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
