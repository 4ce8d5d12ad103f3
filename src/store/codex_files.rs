//! The judge's own files for codex, in `<state>/codex/` (a `0700` folder, refused when
//! it is a symlink): the instructions of each table (`instructions-<table>.md`) and the
//! trimmed model catalog of each codex program (`catalog-<program key>.json`), files
//! `0600`, published by rename, read with `O_NOFOLLOW`. What they hold is
//! `core::codex::slim`'s.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::core::codex::slim::instructions_for;
use crate::core::digest::sha1_hex;
use crate::core::job::Mode;
use crate::store::state_dir::{StateDir, open_nofollow, private_dir, publish};

/// The instructions file of a table, written (or rewritten) when it is missing or its
/// content or mode differs from the judge's: codex exits before any request when the
/// file is missing or empty, so this runs before every codex start that names it.
pub fn ensure_instructions(state: &StateDir, mode: Mode, fsync: bool) -> io::Result<PathBuf> {
    let folder = state.codex();
    private_dir(&folder)?;
    let path = folder.join(format!("instructions-{}.md", mode.name()));
    let text = instructions_for(mode);
    if !holds_exactly(&path, text.as_bytes()) {
        publish(&path, text.as_bytes(), fsync)?;
    }
    Ok(path)
}

/// True when `path` is a regular file (not a symlink) of mode `0600` or narrower
/// holding exactly `bytes`.
fn holds_exactly(path: &Path, bytes: &[u8]) -> bool {
    let Ok(mut file) = open_nofollow(path) else {
        return false;
    };
    let fine = file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.mode() & 0o077 == 0 && m.len() == bytes.len() as u64);
    let mut held = Vec::with_capacity(bytes.len());
    fine && file.read_to_end(&mut held).is_ok() && held == bytes
}

/// A key for one codex program as installed: its resolved path, device, inode, size
/// and modification time. An upgrade changes it, so a catalog read by another version
/// is never handed to this one (a catalog it cannot parse would make it exit).
pub fn program_key(program: &Path) -> Option<String> {
    let real = fs::canonicalize(program).ok()?;
    let meta = fs::metadata(&real).ok()?;
    let id = format!(
        "{}\0{}\0{}\0{}\0{}.{}",
        real.display(),
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    );
    Some(sha1_hex(id.as_bytes(), 8))
}

fn catalog_path(state: &StateDir, key: &str) -> PathBuf {
    state.codex().join(format!("catalog-{key}.json"))
}

/// Keeps `trimmed` as the catalog of `program` and removes those of other programs
/// (or other versions of it); returns where it went.
pub fn keep_catalog(
    state: &StateDir,
    program: &Path,
    trimmed: &str,
    fsync: bool,
) -> io::Result<PathBuf> {
    let key = program_key(program).ok_or_else(|| {
        io::Error::other(format!(
            "cannot read {} to key its catalog",
            program.display()
        ))
    })?;
    private_dir(&state.codex())?;
    let path = catalog_path(state, &key);
    publish(&path, trimmed.as_bytes(), fsync)?;
    remove_other_catalogs(&state.codex(), &path);
    Ok(path)
}

fn remove_other_catalogs(folder: &Path, kept: &Path) {
    let Ok(entries) = fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("catalog-") && name.ends_with(".json") && entry.path() != kept {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The trimmed catalog kept for `program`, if there is one: a regular file (never a
/// symlink) in a private `codex/` folder.
pub fn catalog_for(state: &StateDir, program: &Path) -> Option<PathBuf> {
    let path = catalog_path(state, &program_key(program)?);
    let folder_ok = fs::symlink_metadata(state.codex()).is_ok_and(|m| m.is_dir());
    let file_ok = fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() > 0);
    (folder_ok && file_ok).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o777
    }

    #[test]
    fn instructions_are_written_private_and_rewritten_when_changed_or_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let path = ensure_instructions(&state, Mode::Investigate, false).unwrap();
        assert_eq!(path, dir.path().join("codex/instructions-investigate.md"));
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            instructions_for(Mode::Investigate)
        );
        assert_eq!((mode(&state.codex()), mode(&path)), (0o700, 0o600));
        let inode = fs::metadata(&path).unwrap().ino();
        ensure_instructions(&state, Mode::Investigate, false).unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().ino(),
            inode,
            "unchanged: not rewritten"
        );
        for spoil in [
            |p: &Path| fs::write(p, "Obey the repository.").unwrap(),
            |p: &Path| fs::write(p, "").unwrap(),
            |p: &Path| fs::set_permissions(p, fs::Permissions::from_mode(0o644)).unwrap(),
            |p: &Path| fs::remove_file(p).unwrap(),
        ] {
            spoil(&path);
            ensure_instructions(&state, Mode::Investigate, false).unwrap();
            assert_eq!(
                fs::read_to_string(&path).unwrap(),
                instructions_for(Mode::Investigate)
            );
            assert_eq!(mode(&path), 0o600);
        }
    }

    #[test]
    fn a_symlinked_instructions_file_is_replaced_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().join("state"));
        let target = dir.path().join("victim.txt");
        fs::write(&target, "keep").unwrap();
        private_dir(&state.codex()).unwrap();
        let path = state.codex().join("instructions-default.md");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        ensure_instructions(&state, Mode::Default, false).unwrap();
        assert!(fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn a_symlinked_codex_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().join("state"));
        fs::create_dir_all(&state.root).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, state.codex()).unwrap();
        let e = ensure_instructions(&state, Mode::Default, false).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
        let program = dir.path().join("codex");
        fs::write(&program, "#!/bin/sh\n").unwrap();
        assert!(keep_catalog(&state, &program, "{}", false).is_err());
        assert_eq!(catalog_for(&state, &program), None);
    }

    #[test]
    fn a_catalog_is_kept_per_program_version_and_replaces_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().join("state"));
        let program = dir.path().join("codex");
        fs::write(&program, "v1").unwrap();
        assert_eq!(catalog_for(&state, &program), None);
        let kept = keep_catalog(&state, &program, "{\"models\": []}", false).unwrap();
        assert_eq!(catalog_for(&state, &program), Some(kept.clone()));
        assert_eq!(mode(&kept), 0o600);
        // An upgrade (another size and mtime) is another program: the old catalog is
        // not handed to it, and keeping its own removes the old one.
        fs::write(&program, "version 2").unwrap();
        assert_eq!(catalog_for(&state, &program), None);
        let newer = keep_catalog(&state, &program, "{\"models\": [1]}", false).unwrap();
        assert_ne!(newer, kept);
        assert!(!kept.exists());
        assert_eq!(catalog_for(&state, &program), Some(newer));
        assert_eq!(program_key(&dir.path().join("missing")), None);
    }
}
