//! The fresh private folder a runner works in when it does not get the job's cwd. Its
//! maker holds an exclusive `flock` on it for as long as it exists, so the start-up
//! sweep tells a folder a live judge (the daemon, a `run` or `ask` beside it) still
//! uses from one a killed judge left: it removes only those it can lock. A folder is
//! made under a hidden staging name and renamed once locked, so the sweep never meets
//! one that is live but not yet locked.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::core::config::Settings;
use crate::store::file_lock::{open_folder_lock, try_lock_exclusive};
use crate::store::state_dir::StateDir;

/// The name every runner folder starts with (the sweep looks at these).
pub const FOLDER_PREFIX: &str = "llm-judge-";

/// A folder being made (not yet locked and renamed).
pub const STAGING_PREFIX: &str = ".llm-judge-new-";

/// A fresh empty 0700 folder inside the judge's private runner folder (`<state>/tmp/`
/// or under `$XDG_RUNTIME_DIR`): never in a folder others can write, since Claude Code
/// reads `CLAUDE.md` from every parent.
pub fn fresh_runner_folder(settings: &Settings) -> io::Result<RunnerFolder> {
    use std::os::unix::fs::PermissionsExt;
    let state = StateDir::new(&settings.state_dir);
    let parent = state.runner_tmp(settings.runtime_dir.as_deref());
    crate::store::state_dir::private_dir(&parent)?;
    let staging = tempfile::Builder::new()
        .prefix(STAGING_PREFIX)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&parent)?
        .keep();
    locked_in_place(&parent, &staging).inspect_err(|_| {
        let _ = std::fs::remove_dir(&staging);
    })
}

/// Locks the staging folder, then renames it to its runner-folder name (never over an
/// existing one).
fn locked_in_place(parent: &Path, staging: &Path) -> io::Result<RunnerFolder> {
    let lock = open_folder_lock(staging)?;
    if !try_lock_exclusive(&lock) {
        return Err(io::Error::other(format!(
            "{} is locked by another process",
            staging.display()
        )));
    }
    let name = staging.file_name().unwrap_or_default().to_string_lossy();
    let suffix = name.strip_prefix(STAGING_PREFIX).unwrap_or(&name);
    for n in 0..8 {
        let target = parent.join(match n {
            0 => format!("{FOLDER_PREFIX}{suffix}"),
            n => format!("{FOLDER_PREFIX}{suffix}{n}"),
        });
        match rename_no_replace(staging, &target) {
            Ok(()) => {
                return Ok(RunnerFolder {
                    path: target,
                    _lock: lock,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "no free runner-folder name for {}",
        staging.display()
    )))
}

/// `rename` that fails with `AlreadyExists` rather than replace an empty folder.
fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        // A file system or kernel without the flag: look, then rename.
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            if to.symlink_metadata().is_ok() {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            std::fs::rename(from, to)
        }
        other => other.map_err(io::Error::from),
    }
}

/// A runner's folder, locked while it lives, removed with its content when dropped.
/// Most runners leave it empty: one `rmdir` then, instead of the open, listing and
/// close of a recursive removal (tempfile's), which runs only when something is left.
pub struct RunnerFolder {
    path: PathBuf,
    /// The folder itself, opened and exclusively locked: released (closed) only after
    /// the folder is gone.
    _lock: File,
}

impl RunnerFolder {
    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunnerFolder {
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.path).is_err() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// `dir`'s lock, taken, when nobody held it (its maker is gone): the folder may be
/// removed while it is held. `None` when a live judge owns it, and for a symlink or
/// anything else that cannot be opened as a folder (left alone).
pub fn is_abandoned(dir: &Path) -> Option<File> {
    let lock = open_folder_lock(dir).ok()?;
    try_lock_exclusive(&lock).then_some(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(path: &Path) -> RunnerFolder {
        RunnerFolder {
            path: path.to_path_buf(),
            _lock: open_folder_lock(path).unwrap(),
        }
    }

    /// An empty runner folder and one a runner filled (a file, a folder, a symlink to
    /// a file outside) both go; the symlink's target stays.
    #[test]
    fn a_runner_folder_is_removed_empty_or_not() {
        let parent = tempfile::tempdir().unwrap();
        let outside = parent.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let empty = parent.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        drop(owned(&empty));
        assert!(!empty.exists());
        let full = parent.path().join("full");
        std::fs::create_dir_all(full.join("sub")).unwrap();
        std::fs::write(full.join("sub/f"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, full.join("link")).unwrap();
        drop(owned(&full));
        assert!(!full.exists());
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
    }

    /// A live folder is locked, so not abandoned; once dropped, a leftover folder of
    /// the same kind (made by hand) is.
    #[test]
    fn a_live_folder_is_owned_and_a_leftover_is_abandoned() {
        let state = tempfile::tempdir().unwrap();
        let settings = Settings::for_tests(state.path().to_path_buf(), "x");
        let live = fresh_runner_folder(&settings).unwrap();
        let name = live
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with(FOLDER_PREFIX), "{name}");
        assert!(
            is_abandoned(live.path()).is_none(),
            "a live folder is owned"
        );
        let leftover = live.path().with_file_name(format!("{FOLDER_PREFIX}left"));
        std::fs::create_dir(&leftover).unwrap();
        assert!(is_abandoned(&leftover).is_some());
        let link = live.path().with_file_name(format!("{FOLDER_PREFIX}link"));
        std::os::unix::fs::symlink(&leftover, &link).unwrap();
        assert!(is_abandoned(&link).is_none(), "a symlink is never followed");
        let parent = live.path().parent().unwrap().to_path_buf();
        drop(live);
        let mut names: Vec<String> = std::fs::read_dir(&parent)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                format!("{FOLDER_PREFIX}left"),
                format!("{FOLDER_PREFIX}link")
            ]
        );
    }
}
