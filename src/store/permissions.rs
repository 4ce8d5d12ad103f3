//! Start-up checks of who may write the state folder (SPEC section 6).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Refuses a folder owned by another user or writable by others; returns a warning
/// for a group-writable one.
pub fn check_private(dir: &Path) -> Result<Option<String>, String> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("cannot stat {}: {e}", dir.display()))?;
    if !meta.is_dir() {
        // Checking a link's target would vouch for a folder anyone could swap in.
        return Err(format!(
            "{} is a symlink or not a folder; the judge never follows links inside its \
             state folder: replace it with a real folder (`rm {} && mkdir -m 700 {}`)",
            dir.display(),
            dir.display(),
            dir.display()
        ));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "{} is owned by uid {}, not by you (uid {me}); another user could plant jobs: \
             fix with `chown {me} {}` or use another --state-dir",
            dir.display(),
            meta.uid(),
            dir.display()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Err(format!(
            "{} is writable by others (mode {mode:o}); anyone could plant jobs: fix with `chmod o-w {}`",
            dir.display(),
            dir.display()
        ));
    }
    if mode & 0o020 != 0 {
        return Ok(Some(format!(
            "{} is group-writable (mode {mode:o}); fine with a private group, else `chmod g-w {}`",
            dir.display(),
            dir.display()
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn modes() {
        let dir = tempfile::tempdir().unwrap();
        let set = |mode| {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap()
        };
        set(0o700);
        assert_eq!(check_private(dir.path()).unwrap(), None);
        set(0o770);
        assert!(
            check_private(dir.path())
                .unwrap()
                .unwrap()
                .contains("chmod g-w")
        );
        set(0o777);
        assert!(check_private(dir.path()).unwrap_err().contains("chmod o-w"));
        set(0o700);
        let link = dir.path().join("jobs");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(check_private(&link).unwrap_err().contains("symlink"));
    }
}
