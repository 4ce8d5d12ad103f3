//! `flock` on state files, the one way the store locks (claims, `daemon.lock`,
//! `health.lock`, `spend.lock`, runner folders): the lock ends with its holder, crash
//! included. Every lock is tried without waiting: any process of the user can hold
//! these files, so no judge step may wait on one.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::{FlockOperation, flock};

use crate::store::state_dir::NOFOLLOW;

/// Opens a lock file to read and write, creating it `0600`; a symlink in its place
/// is refused (`ELOOP`), never followed.
pub fn open_lock_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(NOFOLLOW)
        .open(path)
}

/// Opens a folder to hold an `flock` on it (a runner folder's owner holds one); a
/// symlink in its place is refused (`ELOOP`), never followed.
pub fn open_folder_lock(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(NOFOLLOW | libc::O_DIRECTORY)
        .open(dir)
}

/// Takes the exclusive lock without waiting; false when another holds it.
pub fn try_lock_exclusive(file: &File) -> bool {
    flock(file, FlockOperation::NonBlockingLockExclusive).is_ok()
}

/// Lets go of a lock taken on `file` (one kept open for the next time).
pub fn unlock(file: &File) {
    let _ = flock(file, FlockOperation::Unlock);
}

/// Takes a shared lock without waiting; false when another holds it exclusively.
pub fn try_lock_shared(file: &File) -> bool {
    flock(file, FlockOperation::NonBlockingLockShared).is_ok()
}
