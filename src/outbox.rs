//! Taking verdicts out exactly once (`drain`, `enqueue --wait`): a verdict is claimed
//! by renaming it to a hidden name that carries the taker's pid and start time,
//! printed, then removed. A claim whose taker died goes back; a claim whose print
//! failed goes back at once. Two takers never get the same verdict (rename is atomic).

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Value, json};

use crate::process_tree::{is_alive, start_time};
use crate::spool::now_unix;

const CLAIM_MARK: &str = ".draining-";

/// A verdict claimed by this process.
pub struct Taken {
    claim: PathBuf,
    original: PathBuf,
    /// The verdict, or an `unchecked` stand-in when the file could not be read.
    pub verdict: Value,
}

impl Taken {
    /// The verdict was delivered: remove it for good.
    pub fn done(self) -> io::Result<()> {
        match fs::symlink_metadata(&self.claim) {
            Ok(meta) if meta.is_dir() => fs::remove_dir_all(&self.claim),
            _ => fs::remove_file(&self.claim),
        }
    }

    /// The verdict could not be delivered: put it back.
    pub fn give_back(self) -> io::Result<()> {
        fs::rename(&self.claim, &self.original)
    }
}

/// The verdict files of one folder, oldest first (mtime, then name), after putting
/// back claims whose takers died.
pub fn pending(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(SystemTime, std::ffi::OsString)> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let text = name.to_string_lossy();
        if text.contains(CLAIM_MARK) {
            if let Some(original) = recover_claim(dir, &name) {
                found.push((mtime(&dir.join(&original)), original));
            }
            continue;
        }
        if text.starts_with('.') || !text.ends_with(".json") {
            continue;
        }
        found.push((mtime(&entry.path()), name));
    }
    found.sort();
    found.into_iter().map(|(_, name)| dir.join(name)).collect()
}

fn mtime(path: &Path) -> SystemTime {
    fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Claims one verdict; `None` when another taker got it first.
pub fn take(path: &Path) -> Option<Taken> {
    let name = path.file_name()?;
    let claim = path.with_file_name(claim_name(name));
    fs::rename(path, &claim).ok()?;
    let verdict = read_verdict(&claim).unwrap_or_else(|e| unreadable(path, name, &e));
    Some(Taken {
        claim,
        original: path.to_path_buf(),
        verdict,
    })
}

fn claim_name(name: &OsStr) -> String {
    let me = std::process::id();
    let started = start_time(me).unwrap_or(0);
    format!(".{}{CLAIM_MARK}{me}-{started}", name.to_string_lossy())
}

/// Puts back a claim whose taker is gone; returns the verdict's name if it did.
fn recover_claim(dir: &Path, claim: &OsStr) -> Option<std::ffi::OsString> {
    let text = claim.to_string_lossy();
    let (original, owner) = text.strip_prefix('.')?.rsplit_once(CLAIM_MARK)?;
    let (pid, started) = owner.split_once('-')?;
    let (pid, started): (u32, u64) = (pid.parse().ok()?, started.parse().ok()?);
    let owner_alive = is_alive(pid) && start_time(pid).unwrap_or(0) == started;
    if owner_alive {
        return None;
    }
    let target = dir.join(original);
    if target.exists() {
        // A newer verdict for the same job replaced this one, as an undrained one would be.
        let _ = fs::remove_file(dir.join(claim));
        return None;
    }
    fs::rename(dir.join(claim), &target).ok()?;
    tracing::info!(verdict = %target.display(), "recovered a verdict claimed by a drain that died");
    Some(original.into())
}

/// Reads a verdict without following symlinks or blocking on FIFOs.
fn read_verdict(path: &Path) -> Result<Value, String> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)
        .map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(|e| e.to_string())?;
    match serde_json::from_str(&text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

fn unreadable(path: &Path, name: &OsStr, error: &str) -> Value {
    let name = name.to_string_lossy();
    json!({
        "id": name.strip_suffix(".json").unwrap_or(&name),
        "hook": null,
        "transcript": null,
        "outcome": "unchecked",
        "on_hit": null,
        "reason": crate::verdict::clip("unreadable verdict file", &format!("{}: {error}", path.display())),
        "runner": null,
        "answer": null,
        "attempts": [],
        "finished_at": now_unix(),
    })
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
        assert_eq!(taken.verdict["id"], "a");
        assert!(
            pending(dir.path()).is_empty(),
            "our own live claim is not recovered"
        );
        taken.give_back().unwrap();
        assert_eq!(pending(dir.path()), vec![v.clone()]);
        take(&v).unwrap().done().unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_dead_takers_claim_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(".b.json.draining-999999999-1"), "{}").unwrap();
        assert_eq!(pending(dir.path()), vec![dir.path().join("b.json")]);
    }

    #[test]
    fn an_unreadable_verdict_becomes_an_unchecked_line() {
        let dir = tempfile::tempdir().unwrap();
        let v = dir.path().join("d.json");
        fs::create_dir(&v).unwrap();
        let taken = take(&v).unwrap();
        assert_eq!(taken.verdict["outcome"], "unchecked");
        assert!(
            taken.verdict["reason"]
                .as_str()
                .unwrap()
                .starts_with("unreadable verdict file")
        );
        taken.done().unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
