//! `<state>/tag.key`: a random value of this state folder, made once, that the tags of
//! its pre-started runners carry (`LLM_JUDGE_TAG=prestart-<key>-…`). The start-up
//! sweep stops every process of the daemon's user whose tag starts with it; a key
//! derived from the state path could be computed by anyone and planted in another
//! process's environment. The file is `0600` in the `0700` state folder, made by
//! hard-linking a written temp file into place (so two starters agree on one key), and
//! read with `O_NOFOLLOW`.

use std::io;
use std::path::Path;

use crate::store::state_dir::{StateDir, read_nofollow, write_temp};

/// Hex digits of a key (128 random bits).
const KEY_HEX: usize = 32;

/// The state folder's key, made on first use.
pub fn load_or_create(state: &StateDir) -> io::Result<String> {
    load_or_create_at(&state.root, &state.tag_key())
}

/// The key in `path` (a file of the state folder `root`), made on first use.
pub fn load_or_create_at(root: &Path, path: &Path) -> io::Result<String> {
    match read_key(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => create(root, path)?,
        other => return other,
    }
    read_key(path)
}

/// The key in `path`; an error names the file and how to fix it.
pub fn read_key(path: &Path) -> io::Result<String> {
    let bytes = read_nofollow(path)?;
    let key = String::from_utf8(bytes).unwrap_or_default();
    let key = key.trim_end();
    if key.len() != KEY_HEX || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} does not hold {KEY_HEX} hex digits; remove it (a new one is made)",
                path.display()
            ),
        ));
    }
    Ok(key.to_string())
}

/// Writes a fresh key into place unless one is there already (then that one stays).
fn create(root: &Path, path: &Path) -> io::Result<()> {
    let key = crate::support::random::random_hex()?;
    let name = path.file_name().unwrap_or_default();
    let temp = write_temp(root, name, format!("{key}\n").as_bytes(), true)?;
    // link(2) never replaces and never follows a symlink at the target.
    match std::fs::hard_link(&temp.path, path) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(io::Error::new(
            e.kind(),
            format!("cannot create {}: {e}", path.display()),
        )),
        _ => Ok(()),
    }
    // `temp` is removed when dropped.
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_key_is_made_once_private_and_random() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let key = load_or_create(&state).unwrap();
        assert_eq!(key.len(), KEY_HEX);
        assert_eq!(load_or_create(&state).unwrap(), key, "made once");
        let mode = std::fs::metadata(state.tag_key())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(load_or_create(&StateDir::new(other.path())).unwrap(), key);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers, ["tag.key"], "no temp file left");
    }

    #[test]
    fn a_symlinked_or_broken_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "0123456789abcdef0123456789abcdef\n").unwrap();
        std::os::unix::fs::symlink(&target, state.tag_key()).unwrap();
        assert!(load_or_create(&state).is_err(), "a symlink is not followed");
        std::fs::remove_file(state.tag_key()).unwrap();
        std::fs::write(state.tag_key(), "short\n").unwrap();
        let e = load_or_create(&state).unwrap_err().to_string();
        assert!(e.contains("tag.key") && e.contains("remove it"), "{e}");
    }
}
