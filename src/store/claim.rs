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

use crate::core::job::life::{
    ClaimRecord, FileIdentity, IllegalMove, Previous, RunnerRecord, Stage,
};
use crate::process::tag::new_tag;
use crate::store::file_lock::{open_lock_file, try_lock_exclusive};
use crate::store::state_dir::sync_dir;

/// Why a claim could not be taken, saved or let go.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("cannot open claim {}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("claim {} keeps being replaced; another judge is churning it", path.display())]
    Churning { path: PathBuf },
    #[error("cannot read claim {}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot save claim {}", path.display())]
    Save { path: PathBuf, source: io::Error },
    #[error("cannot remove claim {}", path.display())]
    Remove { path: PathBuf, source: io::Error },
    #[error("claim {}", path.display())]
    Move { path: PathBuf, source: IllegalMove },
}

/// A held claim under which this holder has recorded nothing yet: what an earlier
/// holder left is still in the file. Dropping it releases the lock. `start_running`
/// turns it into a `Running` claim; `release` ends it.
///
/// The claim's states are types: `Claim` → `Running` → `Publishing`, and `requeue` and
/// `release` consume the claim, so a sequence the life does not allow (a runner
/// recorded after a requeue, a publish after a release) does not compile.
#[derive(Debug)]
pub struct Claim {
    file: ClaimFile,
}

/// A held claim under which this holder judges the job: its record always exists and
/// says `running`. Each move is saved as it is made. Dropping it releases the lock but
/// keeps the record (it then reads as an interruption); `Held::requeue` gives the job
/// back, `publishing` moves on.
#[derive(Debug)]
pub struct Running {
    file: ClaimFile,
    record: ClaimRecord,
}

/// A held claim whose verdict's temp file is durable and being renamed into place; its
/// record says `publishing` (durably). `release` ends it once the job file is removed;
/// `Held::requeue` gives the job back when the rename failed.
#[derive(Debug)]
pub struct Publishing {
    file: ClaimFile,
    record: ClaimRecord,
}

/// A claim that may be given back: running, or publishing when the rename failed.
#[derive(Debug)]
pub enum Held {
    Running(Running),
    Publishing(Publishing),
}

impl Held {
    /// Given back unjudged (`Queued`, which the next holder does not count as an
    /// interruption): shutdown, an error before publishing, or a failed rename (its
    /// temp file is gone, nothing to finish).
    pub fn requeue(self) -> Result<(), ClaimError> {
        let (mut file, mut record) = match self {
            Held::Running(r) => (r.file, r.record),
            Held::Publishing(p) => (p.file, p.record),
        };
        make(&mut record, &file, Stage::requeue)?;
        save(&mut file, &record)
    }
}

/// The locked claim file.
#[derive(Debug)]
struct ClaimFile {
    file: File,
    path: PathBuf,
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
            file: ClaimFile {
                file,
                path,
                fsync,
                len,
            },
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
    /// This holder judges the job now: `Running`, with a fresh tag for its runners'
    /// environment and the job file's identity. Nothing else of an earlier record
    /// stays. A record that could not be written is removed with the claim, so it
    /// never reads as a crash.
    pub fn start_running(
        self,
        interruptions: u32,
        job: FileIdentity,
    ) -> Result<Running, ClaimError> {
        let mut running = Running {
            file: self.file,
            record: ClaimRecord {
                stage: Stage::Running { runner: None },
                interruptions,
                owner_pid: std::process::id(),
                tag: new_tag(),
                job: Some(job),
                claimed_at: crate::store::state_dir::now_unix(),
                ..Default::default()
            },
        };
        match save(&mut running.file, &running.record) {
            Ok(()) => Ok(running),
            Err(e) => {
                let _ = running.file.remove();
                Err(e)
            }
        }
    }

    /// Removes the claim file while still holding it, then lets go.
    pub fn release(self) -> Result<(), ClaimError> {
        self.file.remove()
    }
}

impl Running {
    /// What this holder has recorded.
    pub fn record(&self) -> &ClaimRecord {
        &self.record
    }

    /// Names the parsed job (for `status`).
    pub fn name_job(&mut self, id: &str, hook: &serde_json::Value) -> Result<(), ClaimError> {
        self.record.id = id.to_string();
        self.record.hook = hook.clone();
        save(&mut self.file, &self.record)
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
        make(&mut self.record, &self.file, |stage| {
            stage.runner_started(runner)
        })?;
        save(&mut self.file, &self.record)
    }

    /// The verdict's temp file is durable and about to be renamed to `target`:
    /// `Publishing`, saved durably, so a later holder can finish or skip the rename. On
    /// an error the claim comes back as it was, still running (a rare path: not boxed).
    #[allow(clippy::result_large_err)]
    pub fn publishing(
        mut self,
        temp: PathBuf,
        target: PathBuf,
    ) -> Result<Publishing, (Running, ClaimError)> {
        let before = self.record.stage.clone();
        let moved = make(&mut self.record, &self.file, |stage| {
            stage.publishing(temp, target)
        })
        .and_then(|()| save(&mut self.file, &self.record))
        .and_then(|()| self.file.sync());
        match moved {
            Ok(()) => Ok(Publishing {
                file: self.file,
                record: self.record,
            }),
            Err(e) => {
                self.record.stage = before;
                Err((self, e))
            }
        }
    }

    /// The claim file's path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Removes the claim file while still holding it, then lets go (a job that ended
    /// without a verdict of its own: refused, or not a job after all).
    pub fn release(self) -> Result<(), ClaimError> {
        self.file.remove()
    }
}

impl Publishing {
    /// What this holder has recorded.
    pub fn record(&self) -> &ClaimRecord {
        &self.record
    }

    /// Removes the claim file while still holding it, then lets go.
    pub fn release(self) -> Result<(), ClaimError> {
        self.file.remove()
    }
}

/// Makes one `Stage` move, or refuses it and changes nothing.
fn make(
    record: &mut ClaimRecord,
    file: &ClaimFile,
    step: impl FnOnce(&Stage) -> Result<Stage, IllegalMove>,
) -> Result<(), ClaimError> {
    record.stage = step(&record.stage).map_err(|source| ClaimError::Move {
        path: file.path.clone(),
        source,
    })?;
    Ok(())
}

/// Writes the record in place (`ClaimFile::write`).
fn save(file: &mut ClaimFile, record: &ClaimRecord) -> Result<(), ClaimError> {
    let bytes = serde_json::to_vec(record)
        .map_err(io::Error::other)
        .map_err(|e| file.save_error(e))?;
    file.write(bytes)
}

impl ClaimFile {
    /// Writes `bytes` in place. Not synced: it only has to survive a process crash. A
    /// shorter record is padded with spaces (valid trailing JSON white space) rather
    /// than truncated, so a crash mid-save never leaves a torn-looking tail.
    fn write(&mut self, mut bytes: Vec<u8>) -> Result<(), ClaimError> {
        use std::os::unix::fs::FileExt;
        let old = usize::try_from(self.len).unwrap_or(usize::MAX);
        if bytes.len() < old {
            bytes.resize(old, b' ');
        }
        // Before the write: a failed one may still have grown the file this far.
        self.len = self.len.max(bytes.len() as u64);
        self.file
            .write_all_at(&bytes, 0)
            .map_err(|e| self.save_error(e))
    }

    /// Makes what was written survive power loss (with `fsync` on).
    fn sync(&self) -> Result<(), ClaimError> {
        if self.fsync {
            self.file.sync_data().map_err(|e| self.save_error(e))?;
            sync_dir(self.path.parent().unwrap_or(Path::new(".")))
                .map_err(|e| self.save_error(e))?;
        }
        Ok(())
    }

    fn save_error(&self, source: io::Error) -> ClaimError {
        ClaimError::Save {
            path: self.path.clone(),
            source,
        }
    }

    /// Removes the claim file while still holding it; the lock goes with `self`.
    fn remove(self) -> Result<(), ClaimError> {
        std::fs::remove_file(&self.path).map_err(|source| ClaimError::Remove {
            path: self.path.clone(),
            source,
        })
    }
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

    fn running(dir: &Path) -> Running {
        let (claim, _) = claimed(dir);
        claim.start_running(0, identity()).unwrap()
    }

    #[test]
    fn a_held_claim_is_busy_and_names_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let (claim, previous) = claimed(dir.path());
        assert_eq!(previous, Previous::Nothing);
        let claim = claim.start_running(0, identity()).unwrap();
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
        let claim = running(dir.path());
        let claim = claim.publishing("/t".into(), "/v".into()).unwrap();
        claim.release().unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let (_claim, previous) = claimed(dir.path());
        assert_eq!(previous, Previous::Nothing);
    }

    /// Each move is saved as it is made (an illegal one no longer compiles: a
    /// `Publishing` claim has no `runner_started`).
    #[test]
    fn moves_are_saved_as_they_are_made() {
        let dir = tempfile::tempdir().unwrap();
        let mut claim = running(dir.path());
        claim.runner_started("codex", 42, Some(7)).unwrap();
        let claim = claim.publishing("/t".into(), "/v".into()).unwrap();
        assert_eq!(claim.record().stage.name(), "publishing");
        drop(claim);
        let (claim, previous) = claimed(dir.path());
        match previous {
            Previous::Record(r) => {
                assert_eq!(r.stage.name(), "publishing");
                assert_eq!(r.stage.runner().map(|r| r.pgid), Some(42));
            }
            other => panic!("{other:?}"),
        }
        // A publishing claim whose rename failed goes back to the queue.
        let claim = claim.start_running(0, identity()).unwrap();
        let claim = claim.publishing("/t".into(), "/v".into()).unwrap();
        Held::Publishing(claim).requeue().unwrap();
        let (_claim, previous) = claimed(dir.path());
        match previous {
            Previous::Record(r) => assert_eq!(r.stage.name(), "queued"),
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

    /// A claim error says what it is about; its cause is its source, shown by the chain.
    #[test]
    fn an_error_names_the_claim_and_keeps_its_cause_as_source() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-folder");
        let e = acquire(&missing, OsStr::new("j.json"), false).unwrap_err();
        let path = missing.join("j.json");
        assert_eq!(
            e.to_string(),
            format!("cannot open claim {}", path.display())
        );
        let cause = std::io::Error::from(std::io::ErrorKind::NotFound).kind();
        assert!(matches!(&e, ClaimError::Open { source, .. } if source.kind() == cause));
        let shown = crate::support::error::chain(&e);
        assert!(
            shown.starts_with(&format!("cannot open claim {}: ", path.display()))
                && shown.len() > e.to_string().len() + 2,
            "{shown}"
        );
    }
}
