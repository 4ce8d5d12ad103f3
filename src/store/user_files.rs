//! The user's own files that `hooks install`, `uninstall` and `trust` change: a
//! harness's settings, codex's config.toml, the rules pins, the starter rules. A
//! project's files come from whoever wrote the repository, so no path written here is
//! ever followed through a link (the file, its backup, or a folder between the project
//! and the file): each file is written by temp file and rename, keeping its mode, and a
//! file that is a link, not a plain file, not the user's or read-only is refused.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::store::state_dir::publish_with_mode;

/// Why a file was left as it was; each names the path and the fix.
#[derive(Debug, Error)]
pub enum WriteError {
    #[error(
        "{0} is a symlink; llm-judge never writes through a link (a repository can ship one \
         pointing at your files): remove it, then run this again",
        path.display()
    )]
    Link { path: PathBuf },
    #[error("{0} is not a plain file; move it away, then run this again", path.display())]
    NotAFile { path: PathBuf },
    #[error(
        "{0} belongs to uid {owner}, not to you (uid {me}); llm-judge changes only your own files",
        path.display()
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "{0} is read-only (mode {mode:o}), so it is left as it is; make it writable \
         (`chmod u+w {0}`) if llm-judge may change it",
        path.display()
    )]
    ReadOnly { path: PathBuf, mode: u32 },
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The backup of `path`: `<path>.llm-judge.bak`.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".llm-judge.bak");
    PathBuf::from(name)
}

/// Checks that `path` may be written: no link at it or in a folder between `within`
/// (a project's folder, trusted as the user named it) and it, and, when it exists, a
/// plain writable file of the user's, as is its backup when one is to be written. Its
/// mode when it exists.
pub fn check(path: &Path, within: Option<&Path>, backup: bool) -> Result<Option<u32>, WriteError> {
    if let Some(root) = within {
        let mut folder = path.parent();
        while let Some(dir) = folder.filter(|d| d.starts_with(root) && *d != root) {
            if fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(WriteError::Link { path: dir.into() });
            }
            folder = dir.parent();
        }
    }
    let Some(meta) = plain_file(path)? else {
        return Ok(None);
    };
    if backup {
        plain_file(&backup_path(path))?;
    }
    let mode = meta.mode() & 0o7777;
    // By its mode bits, not access(2): root (CI) may write any file.
    if mode & 0o200 == 0 {
        return Err(WriteError::ReadOnly {
            path: path.into(),
            mode,
        });
    }
    Ok(Some(mode))
}

/// The file's metadata when it is there: a plain file of the user's, else refused.
fn plain_file(path: &Path) -> Result<Option<fs::Metadata>, WriteError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(WriteError::Io {
                what: "look at",
                path: path.into(),
                source,
            });
        }
    };
    if meta.file_type().is_symlink() {
        return Err(WriteError::Link { path: path.into() });
    }
    if !meta.is_file() {
        return Err(WriteError::NotAFile { path: path.into() });
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(WriteError::NotOwned {
            path: path.into(),
            owner: meta.uid(),
            me,
        });
    }
    Ok(Some(meta))
}

/// The backup of a file written with `backup`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backup {
    /// The file's old bytes were saved here now (the first change).
    Made(PathBuf),
    /// A backup from before the first change is there already, and stays: restoring it
    /// gives the file as it was before llm-judge ever touched it.
    Kept(PathBuf),
}

/// Writes `text` to `path` (checked as [`check`] does) by temp file and rename: an
/// existing file keeps its mode and, with `backup`, its old bytes go to
/// [`backup_path`] first, written the same way, unless a backup is there already; a
/// new file gets `new_mode`. Returns what became of the backup.
pub fn write(
    path: &Path,
    text: &str,
    within: Option<&Path>,
    backup: bool,
    new_mode: u32,
) -> Result<Option<Backup>, WriteError> {
    let mode = check(path, within, backup)?;
    let io = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| WriteError::Io { what, path, source }
    };
    let mut kept = None;
    if let (Some(mode), true) = (mode, backup) {
        let copy = backup_path(path);
        // `check` vouched for it: a plain file of the user's, or none.
        if plain_file(&copy)?.is_some() {
            kept = Some(Backup::Kept(copy));
        } else {
            let old = crate::store::state_dir::read_nofollow(path).map_err(io("read", path))?;
            publish_with_mode(&copy, &old, mode).map_err(io("back up to", &copy))?;
            kept = Some(Backup::Made(copy));
        }
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(io("make the folder", dir))?;
    }
    publish_with_mode(path, text.as_bytes(), mode.unwrap_or(new_mode))
        .map_err(io("write", path))?;
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    #[test]
    fn a_link_at_the_file_its_backup_or_a_folder_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let precious = root.join("bashrc");
        fs::write(&precious, "mine\n").unwrap();
        fs::set_permissions(&precious, fs::Permissions::from_mode(0o600)).unwrap();
        let project = root.join("p");
        fs::create_dir_all(project.join(".claude")).unwrap();
        let settings = project.join(".claude/settings.json");
        fs::write(&settings, "{}").unwrap();
        // The backup path a repository ships as a link.
        symlink(&precious, backup_path(&settings)).unwrap();
        let e = write(&settings, "{\"x\":1}", Some(&project), true, 0o644).unwrap_err();
        assert!(matches!(e, WriteError::Link { .. }), "{e}");
        assert_eq!(fs::read_to_string(&precious).unwrap(), "mine\n");
        assert_eq!(
            fs::read_to_string(&settings).unwrap(),
            "{}",
            "nothing written"
        );
        // The settings file itself a link.
        fs::remove_file(backup_path(&settings)).unwrap();
        fs::remove_file(&settings).unwrap();
        symlink(&precious, &settings).unwrap();
        assert!(matches!(
            write(&settings, "{}", Some(&project), true, 0o644),
            Err(WriteError::Link { .. })
        ));
        // A folder between the project and the file.
        let other = root.join("elsewhere");
        fs::create_dir(&other).unwrap();
        symlink(&other, project.join(".cursor")).unwrap();
        let cursor = project.join(".cursor/hooks.json");
        assert!(matches!(
            write(&cursor, "{}", Some(&project), true, 0o644),
            Err(WriteError::Link { .. })
        ));
        assert!(fs::read_dir(&other).unwrap().next().is_none());
        let mode = fs::metadata(&precious).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_write_keeps_the_mode_and_backs_up_the_old_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        let kept = write(&file, "new", None, true, 0o644).unwrap();
        assert_eq!(kept, Some(Backup::Made(backup_path(&file))));
        assert_eq!(fs::read_to_string(backup_path(&file)).unwrap(), "old");
        assert_eq!(fs::read_to_string(&file).unwrap(), "new");
        // A later change keeps the backup of the file as it was before the first.
        let again = write(&file, "newer", None, true, 0o644).unwrap();
        assert_eq!(again, Some(Backup::Kept(backup_path(&file))));
        assert_eq!(fs::read_to_string(backup_path(&file)).unwrap(), "old");
        for path in [&file, &backup_path(&file)] {
            let mode = fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
        let fresh = dir.path().join("sub/new.toml");
        assert_eq!(write(&fresh, "x", None, true, 0o600).unwrap(), None);
        let mode = fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_read_only_file_or_a_folder_in_its_place_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        fs::write(&file, "mine").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o444)).unwrap();
        let e = write(&file, "new", None, true, 0o644).unwrap_err();
        assert!(e.to_string().contains("read-only (mode 444)"), "{e}");
        assert_eq!(fs::read_to_string(&file).unwrap(), "mine");
        let folder = dir.path().join("hooks.json");
        fs::create_dir(&folder).unwrap();
        assert!(matches!(
            write(&folder, "{}", None, true, 0o644),
            Err(WriteError::NotAFile { .. })
        ));
    }
}
