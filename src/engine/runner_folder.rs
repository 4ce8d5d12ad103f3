//! The fresh private folder a runner works in when it does not get the job's cwd.
//!
//! Each judge process (the daemon, a `run` or `ask` beside it) makes one folder of its
//! own in the judge's private runner folder, its home, and holds an exclusive `flock`
//! on it for as long as it lives; the runners' folders are made inside it (the daemon's
//! pre-started copies' too: its spawner and pre-start share one `RunnerFolders`). So the
//! start-up sweep tells the folders of a live judge from those a killed judge left: it
//! removes only the homes it can lock (with whatever is in them). A home is made under
//! a hidden staging name and renamed once locked, so the sweep never meets one that is
//! live but not yet locked. A runner's folder is then one `mkdir` and one `rmdir`: the
//! lock, the open and the rename are paid once per process, not once per job.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::core::config::Settings;
use crate::store::file_lock::{open_folder_lock, try_lock_exclusive};
use crate::store::state_dir::StateDir;

/// The name every runner folder and home starts with (the sweep looks at these).
pub const FOLDER_PREFIX: &str = "llm-judge-";

/// A home being made (not yet locked and renamed).
pub const STAGING_PREFIX: &str = ".llm-judge-new-";

/// Makes runners' fresh folders, inside this process's home (one per process and
/// runner-folder parent, made at the first folder).
#[derive(Debug, Default)]
pub struct RunnerFolders {
    home: Mutex<Option<Arc<Home>>>,
}

impl RunnerFolders {
    /// A fresh empty 0700 folder inside the judge's private runner folder (`<state>/tmp/`
    /// or under `$XDG_RUNTIME_DIR`), in this process's home there: never in a folder
    /// others can write, since Claude Code reads `CLAUDE.md` from every parent.
    pub fn fresh(&self, settings: &Settings) -> io::Result<RunnerFolder> {
        let state = StateDir::new(&settings.state_dir);
        let parent = state.runner_tmp(settings.runtime_dir.as_deref());
        // Checked every time, as when each folder was made there: a parent others may
        // write would let them swap our home.
        crate::store::state_dir::private_dir(&parent)?;
        let home = self.home_in(&parent)?;
        match make_in(&home) {
            // The home was removed under us (the runner folders' parent deleted by
            // hand): make another.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.forget(&home);
                make_in(&self.home_in(&parent)?)
            }
            made => made,
        }
    }

    /// This process's home in `parent`, made when there is none yet (or it is in
    /// another parent).
    fn home_in(&self, parent: &Path) -> io::Result<Arc<Home>> {
        let mut home = self.home.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = home.as_ref().filter(|h| h.path.parent() == Some(parent)) {
            return Ok(h.clone());
        }
        let made = Arc::new(Home::make(parent)?);
        *home = Some(made.clone());
        Ok(made)
    }

    /// Drops `home` so the next folder makes a new one.
    fn forget(&self, home: &Arc<Home>) {
        let mut current = self.home.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|h| Arc::ptr_eq(h, home)) {
            *current = None;
        }
    }
}

/// A runner's fresh folder in `home`.
fn make_in(home: &Arc<Home>) -> io::Result<RunnerFolder> {
    Ok(RunnerFolder {
        path: new_folder(&home.path, FOLDER_PREFIX)?,
        _home: home.clone(),
    })
}

/// A new empty 0700 folder in `dir` named `prefix` and a random suffix. An error names
/// `dir` and what to check, and keeps its kind (so a removed home is told apart).
fn new_folder(dir: &Path, prefix: &str) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let made = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(dir);
    made.map(tempfile::TempDir::keep).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot make a runner folder in {}: {e}; it must be a folder the judge's \
                 user owns and can write (remove it to have it made again)",
                dir.display()
            ),
        )
    })
}

/// A process's own folder of runner folders, locked while it lives, removed with its
/// content once the last of its runner folders is gone.
#[derive(Debug)]
struct Home {
    path: PathBuf,
    /// The folder itself, opened and exclusively locked: released (closed) only after
    /// the folder is gone.
    _lock: File,
}

impl Home {
    /// Makes and locks a home in `parent`.
    fn make(parent: &Path) -> io::Result<Home> {
        let staging = new_folder(parent, STAGING_PREFIX)?;
        locked_in_place(parent, &staging).inspect_err(|_| {
            let _ = std::fs::remove_dir(&staging);
        })
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        remove_folder(&self.path);
    }
}

/// Locks the staging folder, then renames it to its runner-folder name (never over an
/// existing one).
fn locked_in_place(parent: &Path, staging: &Path) -> io::Result<Home> {
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
                return Ok(Home {
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

/// A runner's folder, removed with its content when dropped (then its home, when it
/// was the home's last folder and the home is no longer this process's).
#[derive(Debug)]
pub struct RunnerFolder {
    path: PathBuf,
    _home: Arc<Home>,
}

impl RunnerFolder {
    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunnerFolder {
    fn drop(&mut self) {
        remove_folder(&self.path);
    }
}

/// Removes `dir`. Most runners leave their folder empty: one `rmdir` then, instead of
/// the open, listing and close of a recursive removal, which runs only when something
/// is left.
fn remove_folder(dir: &Path) {
    if std::fs::remove_dir(dir).is_err() {
        let _ = std::fs::remove_dir_all(dir);
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

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// An empty runner folder and one a runner filled (a file, a folder, a symlink to
    /// a file outside) both go; the symlink's target stays.
    #[test]
    fn a_runner_folder_is_removed_empty_or_not() {
        let state = tempfile::tempdir().unwrap();
        let settings = Settings::for_tests(state.path().to_path_buf(), "x");
        let outside = state.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let folders = RunnerFolders::default();
        let empty = folders.fresh(&settings).unwrap();
        let empty_path = empty.path().to_path_buf();
        drop(empty);
        assert!(!empty_path.exists());
        let full = folders.fresh(&settings).unwrap();
        std::fs::create_dir_all(full.path().join("sub")).unwrap();
        std::fs::write(full.path().join("sub/f"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, full.path().join("link")).unwrap();
        let full_path = full.path().to_path_buf();
        drop(full);
        assert!(!full_path.exists());
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
    }

    /// A process's folders share one home, locked while it lives (so not abandoned),
    /// in the runner folders' parent; a leftover of the same kind (made by hand) is
    /// abandoned, a symlink never followed. The home goes with the last folder once
    /// the process lets go of it.
    #[test]
    fn folders_share_a_locked_home_that_goes_with_them() {
        let state = tempfile::tempdir().unwrap();
        let settings = Settings::for_tests(state.path().to_path_buf(), "x");
        let folders = RunnerFolders::default();
        let (a, b) = (
            folders.fresh(&settings).unwrap(),
            folders.fresh(&settings).unwrap(),
        );
        let home = a.path().parent().unwrap().to_path_buf();
        assert_eq!(b.path().parent(), Some(home.as_path()), "one home");
        assert_ne!(a.path(), b.path());
        for dir in [&home, &a.path().to_path_buf()] {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.starts_with(FOLDER_PREFIX), "{name}");
        }
        assert!(is_abandoned(&home).is_none(), "a live home is owned");
        let parent = home.parent().unwrap().to_path_buf();
        let leftover = parent.join(format!("{FOLDER_PREFIX}left"));
        std::fs::create_dir(&leftover).unwrap();
        assert!(is_abandoned(&leftover).is_some());
        let link = parent.join(format!("{FOLDER_PREFIX}link"));
        std::os::unix::fs::symlink(&leftover, &link).unwrap();
        assert!(is_abandoned(&link).is_none(), "a symlink is never followed");
        drop(folders);
        drop(a);
        assert!(home.exists(), "kept while a folder in it lives");
        drop(b);
        assert_eq!(
            names(&parent),
            [
                format!("{FOLDER_PREFIX}left"),
                format!("{FOLDER_PREFIX}link")
            ]
        );
    }

    /// A home that is no folder any more is an error naming it.
    #[test]
    fn a_home_that_is_a_file_is_named_in_the_error() {
        let state = tempfile::tempdir().unwrap();
        let settings = Settings::for_tests(state.path().to_path_buf(), "x");
        let folders = RunnerFolders::default();
        let home = folders
            .fresh(&settings)
            .unwrap()
            .path()
            .parent()
            .unwrap()
            .to_path_buf();
        std::fs::remove_dir_all(&home).unwrap();
        std::fs::write(&home, b"not a folder").unwrap();
        let e = folders.fresh(&settings).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "cannot make a runner folder in {}",
                home.display()
            )),
            "{e}"
        );
    }

    /// A home removed by hand is made again.
    #[test]
    fn a_removed_home_is_made_again() {
        let state = tempfile::tempdir().unwrap();
        let settings = Settings::for_tests(state.path().to_path_buf(), "x");
        let folders = RunnerFolders::default();
        let first = folders.fresh(&settings).unwrap();
        let home = first.path().parent().unwrap().to_path_buf();
        drop(first);
        std::fs::remove_dir_all(&home).unwrap();
        let again = folders.fresh(&settings).unwrap();
        assert!(again.path().is_dir());
        assert_ne!(again.path().parent(), Some(home.as_path()));
    }
}
