//! The fresh private folder a runner works in when it does not get the job's cwd.

use std::path::{Path, PathBuf};

use crate::core::config::Settings;
use crate::store::state_dir::StateDir;

/// A fresh empty 0700 folder inside the judge's private runner folder (`<state>/tmp/`
/// or under `$XDG_RUNTIME_DIR`): never in a folder others can write, since Claude Code
/// reads `CLAUDE.md` from every parent.
pub fn fresh_runner_folder(settings: &Settings) -> std::io::Result<RunnerFolder> {
    use std::os::unix::fs::PermissionsExt;
    let state = StateDir::new(&settings.state_dir);
    let parent = state.runner_tmp(settings.runtime_dir.as_deref());
    crate::store::state_dir::private_dir(&parent)?;
    let made = tempfile::Builder::new()
        .prefix("llm-judge-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&parent)?;
    Ok(RunnerFolder(made.keep()))
}

/// A runner's folder, removed with its content when dropped. Most runners leave it
/// empty: one `rmdir` then, instead of the open, listing and close of a recursive
/// removal (tempfile's), which runs only when something is left.
pub struct RunnerFolder(PathBuf);

impl RunnerFolder {
    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for RunnerFolder {
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.0).is_err() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty runner folder and one a runner filled (a file, a folder, a symlink to
    /// a file outside) both go; the symlink's target stays.
    #[test]
    fn a_runner_folder_is_removed_empty_or_not() {
        let parent = tempfile::tempdir().unwrap();
        let outside = parent.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let empty = parent.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        drop(RunnerFolder(empty.clone()));
        assert!(!empty.exists());
        let full = parent.path().join("full");
        std::fs::create_dir_all(full.join("sub")).unwrap();
        std::fs::write(full.join("sub/f"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, full.join("link")).unwrap();
        drop(RunnerFolder(full.clone()));
        assert!(!full.exists());
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
    }
}
