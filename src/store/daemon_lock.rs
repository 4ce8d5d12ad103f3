//! One daemon per state folder: an exclusive `flock` on `daemon.lock`, which
//! holds the holder's pid so a second daemon can name it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::store::file_lock::{open_lock_file, try_lock_exclusive, try_lock_shared};

/// Held for the daemon's life; the kernel releases it when the process ends.
#[derive(Debug)]
pub struct DaemonLock {
    _file: File,
}

/// Why the daemon lock was not taken; each names the lock file.
#[derive(Debug, Error)]
pub enum LockError {
    /// A live daemon (or one that just died, within the wait) holds it.
    #[error(
        "another llm-judge daemon ({}) already serves this state folder (lock {}); \
         stop it first or use another --state-dir",
        holder_name(*pid),
        path.display()
    )]
    Held { path: PathBuf, pid: Option<u32> },
    /// The lock file cannot be opened (or is a symlink).
    #[error(
        "cannot open lock file {}: {cause} (a symlink is never followed: remove it)",
        path.display()
    )]
    Open {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// Our pid cannot be written into it.
    #[error("cannot write lock file {}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn holder_name(pid: Option<u32>) -> String {
    pid.map_or("unknown pid".to_string(), |p| format!("pid {p}"))
}

/// How long a lock whose recorded holder is dead may stay held: a runner forked by a
/// daemon that was just killed keeps the daemon's open files until it execs.
const DEAD_HOLDER_WAIT: Duration = Duration::from_secs(3);

/// Takes the lock or says which pid holds it.
pub fn acquire(path: &Path) -> Result<DaemonLock, LockError> {
    let mut file = open(path)?;
    let deadline = Instant::now() + DEAD_HOLDER_WAIT;
    while !try_lock_exclusive(&file) {
        let pid = holder_pid(&mut file);
        if pid.is_some_and(crate::process::os::is_alive) || Instant::now() >= deadline {
            return Err(LockError::Held {
                path: path.to_path_buf(),
                pid,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = format!("{}\n", std::process::id());
    let written = file
        .set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(pid.as_bytes()));
    written.map_err(|source| LockError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(DaemonLock { _file: file })
}

/// The pid of the daemon holding the lock, or `None` when no daemon holds it.
pub fn holder(path: &Path) -> Option<u32> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(crate::store::state_dir::NOFOLLOW)
        .open(path)
        .ok()?;
    if try_lock_shared(&file) {
        return None;
    }
    holder_pid(&mut file)
}

fn open(path: &Path) -> Result<File, LockError> {
    open_lock_file(path).map_err(|cause| LockError::Open {
        path: path.to_path_buf(),
        cause,
    })
}

fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_names_the_first_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.lock");
        assert_eq!(holder(&path), None);
        let lock = acquire(&path).unwrap();
        let e = acquire(&path).unwrap_err().to_string();
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        assert_eq!(holder(&path), Some(std::process::id()));
        drop(lock);
        assert_eq!(holder(&path), None);
        acquire(&path).unwrap();
    }
}
