//! Claims (docs/reference.md, "Guarantees"): `claims/<job file name>`, held with an
//! exclusive `flock` while a job is judged. The lock ends with its holder (crash included),
//! so a claim file that can be locked is free, and its record tells the next holder what
//! the last one left: runner processes to stop, interruptions so far, and whether its
//! verdict was being published.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::core::job_life::{
    ClaimRecord, FileIdentity, IllegalMove, Previous, RunnerRecord, Stage,
};
use crate::store::file_lock::{open_lock_file, try_lock_exclusive};
use crate::store::state_dir::sync_dir;

/// Why a claim could not be taken, saved or let go.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("cannot open claim {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("claim {} keeps being replaced; another judge is churning it", path.display())]
    Churning { path: PathBuf },
    #[error("cannot read claim {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot save claim {}: {source}", path.display())]
    Save { path: PathBuf, source: io::Error },
    #[error("cannot remove claim {}: {source}", path.display())]
    Remove { path: PathBuf, source: io::Error },
    #[error("claim {}: {source}", path.display())]
    Move { path: PathBuf, source: IllegalMove },
    #[error("claim {}: no job is running under it yet", path.display())]
    NotStarted { path: PathBuf },
}

/// A held claim. Dropping it releases the lock but keeps the record.
///
/// The record is written only by `start_running` (this holder judges the job now) and
/// the `core::job_life::Stage` moves after it, each saved as it is made; an illegal
/// move is refused and nothing is saved. `release` ends the claim.
#[derive(Debug)]
pub struct Claim {
    file: File,
    path: PathBuf,
    /// What this holder has recorded; `None` until `start_running`.
    record: Option<ClaimRecord>,
    fsync: bool,
    /// The file's length: only the lock holder writes it, so it is known without a stat.
    len: u64,
}

/// The result of trying to claim a job.
// Built once per job: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Acquired {
    /// Ours now; `previous` is what an earlier holder left, if anything.
    Claimed { claim: Claim, previous: Previous },
    /// Held by a live process (pid when its record names one).
    Busy { holder_pid: Option<u32> },
}

/// Tries to claim `name` in `claims_dir` without blocking.
pub fn acquire(claims_dir: &Path, name: &OsStr, fsync: bool) -> Result<Acquired, ClaimError> {
    let path = claims_dir.join(name);
    // A holder may unlink the file between our open and lock: retry on a stale inode.
    for _ in 0..16 {
        let mut file = match open_lock_file(&path) {
            Ok(file) => file,
            Err(source) => return Err(ClaimError::Open { path, source }),
        };
        if !try_lock_exclusive(&file) {
            let holder_pid = read_record(&mut file).ok().and_then(|r| match r {
                Previous::Record(r) => Some(r.owner_pid),
                _ => None,
            });
            return Ok(Acquired::Busy { holder_pid });
        }
        let held = match (file.metadata(), std::fs::symlink_metadata(&path)) {
            (Ok(a), Ok(b)) if a.ino() == b.ino() && a.dev() == b.dev() => Some(a.len()),
            _ => None,
        };
        let Some(len) = held else {
            continue;
        };
        // An empty file is a fresh claim: nothing to read.
        let previous = if len == 0 {
            Previous::Nothing
        } else {
            match read_record(&mut file) {
                Ok(previous) => previous,
                Err(source) => return Err(ClaimError::Read { path, source }),
            }
        };
        let claim = Claim {
            file,
            path,
            record: None,
            fsync,
            len,
        };
        return Ok(Acquired::Claimed { claim, previous });
    }
    Err(ClaimError::Churning { path })
}

fn read_record(file: &mut File) -> io::Result<Previous> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0))?;
    if file.read_to_string(&mut text).is_err() {
        return Ok(Previous::Torn);
    }
    if text.trim().is_empty() {
        return Ok(Previous::Nothing);
    }
    Ok(serde_json::from_str(&text).map_or(Previous::Torn, Previous::Record))
}

impl Claim {
    /// What this holder has recorded (`None` before `start_running`).
    pub fn record(&self) -> Option<&ClaimRecord> {
        self.record.as_ref()
    }

    /// This holder judges the job now: `Running`, with a fresh tag for its runners'
    /// environment and the job file's identity. Nothing else of an earlier record stays.
    pub fn start_running(
        &mut self,
        interruptions: u32,
        job: FileIdentity,
    ) -> Result<&ClaimRecord, ClaimError> {
        self.record = Some(ClaimRecord {
            stage: Stage::Running { runner: None },
            interruptions,
            owner_pid: std::process::id(),
            tag: new_tag(),
            job: Some(job),
            claimed_at: crate::store::state_dir::now_unix(),
            ..Default::default()
        });
        self.save()?;
        self.running()
    }

    fn running(&self) -> Result<&ClaimRecord, ClaimError> {
        self.record.as_ref().ok_or_else(|| ClaimError::NotStarted {
            path: self.path.clone(),
        })
    }

    /// Names the parsed job (for `status`).
    pub fn name_job(&mut self, id: &str, hook: &serde_json::Value) -> Result<(), ClaimError> {
        let path = self.path.clone();
        let record = self
            .record
            .as_mut()
            .ok_or(ClaimError::NotStarted { path })?;
        record.id = id.to_string();
        record.hook = hook.clone();
        self.save()
    }

    /// A runner started in process group `pgid` (whose leader started at `start_time`).
    pub fn runner_started(
        &mut self,
        name: &str,
        pgid: u32,
        start_time: Option<u64>,
    ) -> Result<(), ClaimError> {
        let runner = RunnerRecord {
            name: name.to_string(),
            pgid,
            start_time,
        };
        self.make(|stage| stage.runner_started(runner))?;
        self.save()
    }

    /// Given back unjudged (shutdown, or an error before publishing): `Queued`, which
    /// the next holder does not count as an interruption.
    pub fn requeue(&mut self) -> Result<(), ClaimError> {
        self.make(Stage::requeue)?;
        self.save()
    }

    /// The verdict's temp file is durable and about to be renamed to `target`:
    /// `Publishing`, saved durably, so a later holder can finish or skip the rename.
    pub fn publishing(&mut self, temp: PathBuf, target: PathBuf) -> Result<(), ClaimError> {
        self.make(|stage| stage.publishing(temp, target))?;
        self.save_durable()
    }

    /// Makes one `Stage` move, or refuses it and changes nothing.
    fn make(
        &mut self,
        step: impl FnOnce(&Stage) -> Result<Stage, IllegalMove>,
    ) -> Result<(), ClaimError> {
        let path = self.path.clone();
        let record = self
            .record
            .as_mut()
            .ok_or_else(|| ClaimError::NotStarted { path: path.clone() })?;
        record.stage = step(&record.stage).map_err(|source| ClaimError::Move { path, source })?;
        Ok(())
    }

    /// Writes the record in place. Not synced: it only has to survive a process crash.
    /// A shorter record is padded with spaces (valid trailing JSON white space) rather
    /// than truncated, so a crash mid-save never leaves a torn-looking tail.
    fn save(&mut self) -> Result<(), ClaimError> {
        use std::os::unix::fs::FileExt;
        let saved = (|| {
            let mut bytes = serde_json::to_vec(&self.record).map_err(io::Error::other)?;
            let old = usize::try_from(self.len).unwrap_or(usize::MAX);
            if bytes.len() < old {
                bytes.resize(old, b' ');
            }
            // Before the write: a failed one may still have grown the file this far.
            self.len = self.len.max(bytes.len() as u64);
            self.file.write_all_at(&bytes, 0)
        })();
        saved.map_err(|source| self.save_error(source))
    }

    fn save_error(&self, source: io::Error) -> ClaimError {
        ClaimError::Save {
            path: self.path.clone(),
            source,
        }
    }

    /// Writes the record and makes it survive power loss.
    fn save_durable(&mut self) -> Result<(), ClaimError> {
        self.save()?;
        if self.fsync {
            self.file.sync_data().map_err(|e| self.save_error(e))?;
            sync_dir(self.path.parent().unwrap_or(Path::new(".")))
                .map_err(|e| self.save_error(e))?;
        }
        Ok(())
    }

    /// Removes the claim file while still holding it, then lets go.
    pub fn release(self) -> Result<(), ClaimError> {
        std::fs::remove_file(&self.path).map_err(|source| ClaimError::Remove {
            path: self.path.clone(),
            source,
        })
    }

    /// The claim file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A tag unique to this claim holder.
pub fn new_tag() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claimed(dir: &Path) -> (Claim, Previous) {
        match acquire(dir, OsStr::new("j.json"), false).unwrap() {
            Acquired::Claimed { claim, previous } => (claim, previous),
            Acquired::Busy { .. } => panic!("busy"),
        }
    }

    fn identity() -> FileIdentity {
        FileIdentity {
            dev: 1,
            ino: 2,
            mtime_ns: 3,
        }
    }

    fn running(dir: &Path) -> Claim {
        let (mut claim, _) = claimed(dir);
        claim.start_running(0, identity()).unwrap();
        claim
    }

    #[test]
    fn a_held_claim_is_busy_and_names_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let (mut claim, previous) = claimed(dir.path());
        assert_eq!(previous, Previous::Nothing);
        claim.start_running(0, identity()).unwrap();
        let me = std::process::id();
        match acquire(dir.path(), OsStr::new("j.json"), false).unwrap() {
            Acquired::Busy { holder_pid } => assert_eq!(holder_pid, Some(me)),
            Acquired::Claimed { .. } => panic!("claimed twice"),
        }
        drop(claim);
        let (_claim, previous) = claimed(dir.path());
        match previous {
            Previous::Record(r) => assert_eq!(r.owner_pid, me),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_released_claim_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut claim = running(dir.path());
        claim.publishing("/t".into(), "/v".into()).unwrap();
        claim.release().unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let (_claim, previous) = claimed(dir.path());
        assert_eq!(previous, Previous::Nothing);
    }

    /// Each move is saved as it is made, and an illegal one saves nothing.
    #[test]
    fn moves_are_saved_and_illegal_ones_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (mut fresh, _) = claimed(dir.path());
        assert!(matches!(
            fresh.requeue(),
            Err(ClaimError::NotStarted { .. })
        ));
        drop(fresh);
        let mut claim = running(dir.path());
        claim.runner_started("codex", 42, Some(7)).unwrap();
        claim.publishing("/t".into(), "/v".into()).unwrap();
        let refused = claim.runner_started("claude", 43, None);
        assert!(
            matches!(refused, Err(ClaimError::Move { .. })),
            "{refused:?}"
        );
        drop(claim);
        let (_claim, previous) = claimed(dir.path());
        match previous {
            Previous::Record(r) => assert_eq!(r.stage.name(), "publishing"),
            other => panic!("{other:?}"),
        }
    }

    /// The length the holder tracks instead of a stat per save: a shorter record
    /// after a longer one is padded to the longer one's length, never left with its tail.
    #[test]
    fn a_shorter_record_overwrites_a_longer_one_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut claim = running(dir.path());
        claim
            .name_job("x", &serde_json::Value::String("x".repeat(500)))
            .unwrap();
        let long = std::fs::metadata(claim.path()).unwrap().len();
        claim.name_job("x", &serde_json::Value::Null).unwrap();
        assert_eq!(std::fs::metadata(claim.path()).unwrap().len(), long);
        drop(claim);
        let (_claim, previous) = claimed(dir.path());
        match previous {
            Previous::Record(r) => assert_eq!(r.hook, serde_json::Value::Null),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_torn_record_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("j.json"), b"{\"state\":\"run").unwrap();
        let (_claim, previous) = claimed(dir.path());
        assert_eq!(previous, Previous::Torn);
    }
}
