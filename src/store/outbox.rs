//! Taking verdicts out exactly once (`drain`, `enqueue --wait`): a verdict is claimed
//! by moving it into the taker's own hidden folder `.draining-<pid>-<start time>/`
//! (same name, so long names still fit), printed, then removed. A claim whose taker
//! died goes back; a claim whose print failed goes back at once. Two takers never
//! get the same verdict (rename is atomic).

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use thiserror::Error;

use crate::core::verdict::Verdict;
use crate::process::os::{is_alive, start_time};
use crate::store::state_dir::{now_unix, oldest_first};
use crate::support::error::Chained;

const CLAIM_DIR: &str = ".draining-";
/// Far above any verdict the judge writes; a planted file is not read past it.
const MAX_VERDICT_BYTES: u64 = 16 << 20;

/// A verdict claimed by this process.
pub struct Taken {
    claim: PathBuf,
    original: PathBuf,
    /// The verdict, or an `unchecked` stand-in when the file could not be read as one.
    pub verdict: Verdict,
    /// The file's JSON as one line, as `drain` prints it (every key it holds).
    pub line: String,
}

impl Taken {
    /// The verdict was delivered: remove it for good.
    pub fn done(self) -> io::Result<()> {
        let removed = match fs::symlink_metadata(&self.claim) {
            Ok(meta) if meta.is_dir() => fs::remove_dir_all(&self.claim),
            _ => fs::remove_file(&self.claim),
        };
        forget_claim_dir(&self.claim);
        removed
    }

    /// The verdict could not be delivered: put it back.
    pub fn give_back(self) -> io::Result<()> {
        let back = fs::rename(&self.claim, &self.original);
        forget_claim_dir(&self.claim);
        back
    }
}

/// Removes this taker's claim folder once it is empty.
fn forget_claim_dir(claim: &Path) {
    if let Some(dir) = claim.parent() {
        let _ = fs::remove_dir(dir);
    }
}

/// The verdict files of one folder, oldest first (mtime, then name), after putting
/// back claims whose takers died. A symlink in place of the folder is refused, never
/// followed (docs/reference.md, "State folder"); a missing folder has none.
pub fn pending(dir: &Path) -> io::Result<Vec<PathBuf>> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
        Ok(meta) if !meta.is_dir() => return Err(crate::store::state_dir::refused_folder(dir)),
        Ok(_) => {}
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    // Claims of takers that died go back first, so the listing below has them.
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(CLAIM_DIR) {
            recover_claims(dir, &name);
        }
    }
    let is_verdict = |name: &OsStr| {
        let text = name.to_string_lossy();
        !text.starts_with('.') && text.ends_with(".json")
    };
    let Ok(names) = oldest_first(dir, is_verdict) else {
        return Ok(Vec::new());
    };
    Ok(names.into_iter().map(|name| dir.join(name)).collect())
}

/// Claims one verdict; `None` when it is not there or another taker got it first.
pub fn take(path: &Path) -> Option<Taken> {
    let name = path.file_name()?;
    // Looking writes nothing: a claim folder made and removed for a verdict that is not
    // there yet would wake every watch on the folder, the waiter's own too.
    fs::symlink_metadata(path).ok()?;
    let dir = path.parent()?.join(claim_dir_name());
    crate::store::state_dir::private_dir(&dir).ok()?;
    let claim = dir.join(name);
    if fs::rename(path, &claim).is_err() {
        forget_claim_dir(&claim);
        return None;
    }
    let (verdict, line) = match read_verdict(&claim) {
        Ok(value) => typed(path, name, value),
        Err(e) => unreadable(path, name, &e),
    };
    Some(Taken {
        claim,
        original: path.to_path_buf(),
        verdict,
        line,
    })
}

fn claim_dir_name() -> String {
    let me = std::process::id();
    format!("{CLAIM_DIR}{me}-{}", start_time(me).unwrap_or(0))
}

/// Puts the claims of a taker that is gone back into `dir`.
fn recover_claims(dir: &Path, claim_dir: &OsStr) {
    let owner = claim_dir.to_string_lossy();
    let Some((pid, started)) = owner
        .strip_prefix(CLAIM_DIR)
        .and_then(|o| o.split_once('-'))
    else {
        return;
    };
    let (Ok(pid), Ok(started)) = (pid.parse::<u32>(), started.parse::<u64>()) else {
        return;
    };
    if is_alive(pid) && start_time(pid).unwrap_or(0) == started {
        return;
    }
    let folder = dir.join(claim_dir);
    if !fs::symlink_metadata(&folder).is_ok_and(|m| m.is_dir()) {
        tracing::warn!(folder = %folder.display(), "a drain claim folder that is a symlink or file: left alone, never followed");
        return;
    }
    for entry in fs::read_dir(&folder).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let target = dir.join(&name);
        if target.exists() {
            // A newer verdict for the same job replaced it, as an undrained one would be.
            let _ = fs::remove_file(entry.path());
        } else if fs::rename(entry.path(), &target).is_ok() {
            tracing::info!(verdict = %target.display(), "recovered a verdict claimed by a drain that died");
        }
    }
    let _ = fs::remove_dir(&folder);
}

/// Why a verdict file could not be taken as a verdict (its text goes in the stand-in).
#[derive(Debug, Error)]
enum VerdictError {
    /// Not readable (a symlink, FIFO or I/O error).
    #[error(transparent)]
    Read(#[from] std::io::Error),
    /// Valid JSON, but not an object.
    #[error("not a JSON object")]
    NotObject,
    /// Another user's file: never delivered as the judge's word.
    #[error("owned by uid {0}, not by this user; not delivered")]
    Foreign(u32),
    /// Not JSON.
    #[error("not valid JSON")]
    NotJson(#[from] serde_json::Error),
    /// A JSON object without a verdict's keys.
    #[error("not a verdict: {0}")]
    NotVerdict(serde_json::Error),
}

/// Reads a verdict without following symlinks or blocking on FIFOs.
fn read_verdict(path: &Path) -> Result<Value, VerdictError> {
    use std::os::unix::fs::MetadataExt;
    let (bytes, meta) = crate::store::state_dir::read_nofollow_with_meta(path, MAX_VERDICT_BYTES)?;
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(VerdictError::Foreign(meta.uid()));
    }
    let text = String::from_utf8_lossy(&bytes);
    match serde_json::from_str(&text)? {
        v @ Value::Object(_) => Ok(v),
        _ => Err(VerdictError::NotObject),
    }
}

/// The verdict in `value` as the type it was written as, and its line; a JSON object
/// of another shape is delivered as an `unchecked` stand-in, and printed as it is.
fn typed(path: &Path, name: &OsStr, value: Value) -> (Verdict, String) {
    let line = value.to_string();
    match serde_json::from_value::<Verdict>(value) {
        Ok(verdict) => (verdict, line),
        Err(e) => (unreadable(path, name, &VerdictError::NotVerdict(e)).0, line),
    }
}

/// The `unchecked` stand-in for a verdict file that cannot be read, and its line.
fn unreadable(path: &Path, name: &OsStr, error: &VerdictError) -> (Verdict, String) {
    let name = name.to_string_lossy();
    let id = name.strip_suffix(".json").unwrap_or(&name);
    let reason = crate::core::verdict::clip(
        "unreadable verdict file",
        &format!("{}: {}", path.display(), error.chain()),
    );
    let now = now_unix();
    // The line keeps the file format's nulls for what is not known.
    let line = json!({
        "id": id, "hook": null, "transcript": null, "outcome": "unchecked", "on_hit": null,
        "reason": reason, "runner": null, "answer": null, "attempts": [], "finished_at": now,
    });
    (Verdict::unreadable(id, reason, now), line.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_claims_once_and_give_back_restores() {
        let dir = tempfile::tempdir().unwrap();
        let v = dir.path().join("a.json");
        fs::write(&v, r#"{"id":"a"}"#).unwrap();
        let taken = take(&v).unwrap();
        assert!(
            take(&v).is_none(),
            "a claimed verdict cannot be taken twice"
        );
        assert_eq!(taken.line, r#"{"id":"a"}"#, "printed as it is");
        assert_eq!(
            taken.verdict.outcome.name(),
            "unchecked",
            "not a whole verdict"
        );
        assert!(
            pending(dir.path()).unwrap().is_empty(),
            "our own live claim is not recovered"
        );
        taken.give_back().unwrap();
        assert_eq!(pending(dir.path()).unwrap(), vec![v.clone()]);
        take(&v).unwrap().done().unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_dead_takers_claim_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(".draining-999999999-1")).unwrap();
        fs::write(dir.path().join(".draining-999999999-1/b.json"), "{}").unwrap();
        assert_eq!(
            pending(dir.path()).unwrap(),
            vec![dir.path().join("b.json")]
        );
        assert!(!dir.path().join(".draining-999999999-1").exists());
    }

    #[test]
    fn an_unreadable_verdict_becomes_an_unchecked_line() {
        let dir = tempfile::tempdir().unwrap();
        let v = dir.path().join("d.json");
        fs::create_dir(&v).unwrap();
        let taken = take(&v).unwrap();
        assert_eq!(taken.verdict.outcome.name(), "unchecked");
        assert!(taken.verdict.reason.starts_with("unreadable verdict file"));
        assert!(taken.line.contains("\"transcript\":null"), "{}", taken.line);
        taken.done().unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_symlinked_verdict_folder_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("precious.json"), b"{}").unwrap();
        let link = dir.path().join("0123456789abcdef");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(pending(&link).unwrap_err().to_string().contains("symlink"));
        let claims = dir.path().join("v");
        fs::create_dir(&claims).unwrap();
        std::os::unix::fs::symlink(&target, claims.join(".draining-999999999-1")).unwrap();
        assert!(pending(&claims).unwrap().is_empty());
        assert!(target.join("precious.json").exists());
    }
}
