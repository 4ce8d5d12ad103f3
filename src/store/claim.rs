//! Claims (SPEC section 6): `claims/<job file name>`, held with an exclusive `flock`
//! while a job is judged. The lock ends with its holder (crash included), so a claim
//! file that can be locked is free, and its record tells the next holder what the
//! last one left: runner processes to stop, interruptions so far, and whether its
//! verdict was being published.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::file_lock::{open_lock_file, try_lock_exclusive};
use crate::store::state_dir::sync_dir;

/// Where a claimed job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClaimState {
    /// Being judged. Found by a later holder, it means the judge was interrupted.
    #[default]
    Running,
    /// Given back on shutdown: judge again, not counted as an interruption.
    Queued,
    /// The verdict's temp file is durable and is being renamed into place.
    Publishing,
}

/// Which job file a record belongs to (a later file of the same name is another job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    pub mtime_ns: i128,
}

impl FileIdentity {
    /// The identity of a file from its metadata.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// A runner process group started for the claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerRecord {
    pub name: String,
    pub pgid: u32,
    /// The leader's start time (Linux clock ticks), so a reused pid is never killed.
    pub start_time: Option<u64>,
}

/// The record inside a claim file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ClaimRecord {
    pub state: ClaimState,
    /// Times a judge stopped (crash, kill) while this job was running.
    pub interruptions: u32,
    /// The process holding the claim.
    pub owner_pid: u32,
    /// In every runner's environment as `LLM_JUDGE_TAG`.
    pub tag: String,
    pub job: Option<FileIdentity>,
    /// Job id and hook, for `status`.
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub hook: serde_json::Value,
    /// Unix seconds when this holder claimed the job.
    #[serde(default)]
    pub claimed_at: f64,
    pub runner: Option<RunnerRecord>,
    #[serde(default, with = "path_bytes")]
    pub verdict_temp: Option<PathBuf>,
    #[serde(default, with = "path_bytes")]
    pub verdict_path: Option<PathBuf>,
}

/// Paths as text when they are UTF-8, else as their bytes (job names may be any bytes).
mod path_bytes {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match path {
            None => s.serialize_none(),
            Some(p) => match p.to_str() {
                Some(text) => s.serialize_some(text),
                None => s.serialize_some(p.as_os_str().as_bytes()),
            },
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Text(String),
        Bytes(Vec<u8>),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Ok(Option::<Repr>::deserialize(d)?.map(|r| match r {
            Repr::Text(t) => PathBuf::from(t),
            Repr::Bytes(b) => PathBuf::from(OsString::from_vec(b)),
        }))
    }
}

/// A held claim. Dropping it releases the lock but keeps the record.
///
/// The record changes only through the transitions below, each saved as it is made:
/// `start_running` (fresh claim or `Queued` → `Running`), `name_job` and
/// `runner_started` (while `Running`), `requeue` (`Running` → `Queued`) and
/// `publishing` (`Running` → `Publishing`, durable). `release` ends the claim.
#[derive(Debug)]
pub struct Claim {
    file: File,
    path: PathBuf,
    /// What this holder has recorded.
    record: ClaimRecord,
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

/// What an earlier holder left in the claim file.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Previous {
    /// No record: a fresh claim.
    Nothing,
    /// A readable record.
    Record(ClaimRecord),
    /// A record cut short by a crash mid-write.
    Torn,
}

/// Tries to claim `name` in `claims_dir` without blocking.
pub fn acquire(claims_dir: &Path, name: &OsStr, fsync: bool) -> io::Result<Acquired> {
    let path = claims_dir.join(name);
    // A holder may unlink the file between our open and lock: retry on a stale inode.
    for _ in 0..16 {
        let mut file = open_lock_file(&path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open claim {}: {e}", path.display()),
            )
        })?;
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
            read_record(&mut file)?
        };
        let claim = Claim {
            file,
            path,
            record: ClaimRecord::default(),
            fsync,
            len,
        };
        return Ok(Acquired::Claimed { claim, previous });
    }
    Err(io::Error::other(format!(
        "claim {} keeps being replaced; another judge is churning it",
        path.display()
    )))
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
    /// What this holder has recorded.
    pub fn record(&self) -> &ClaimRecord {
        &self.record
    }

    /// This holder judges the job now: `Running`, with a fresh tag for its runners'
    /// environment and the job file's identity. Nothing else of an earlier record stays.
    pub fn start_running(&mut self, interruptions: u32, job: FileIdentity) -> io::Result<()> {
        self.record = ClaimRecord {
            state: ClaimState::Running,
            interruptions,
            owner_pid: std::process::id(),
            tag: new_tag(),
            job: Some(job),
            claimed_at: crate::store::state_dir::now_unix(),
            ..Default::default()
        };
        self.save()
    }

    /// Names the parsed job (for `status`).
    pub fn name_job(&mut self, id: &str, hook: &serde_json::Value) -> io::Result<()> {
        self.record.id = id.to_string();
        self.record.hook = hook.clone();
        self.save()
    }

    /// A runner started in process group `pgid` (whose leader started at `start_time`).
    pub fn runner_started(
        &mut self,
        name: &str,
        pgid: u32,
        start_time: Option<u64>,
    ) -> io::Result<()> {
        self.record.runner = Some(RunnerRecord {
            name: name.to_string(),
            pgid,
            start_time,
        });
        self.save()
    }

    /// Given back unjudged (shutdown, or an error before publishing): `Queued`, which
    /// the next holder does not count as an interruption.
    pub fn requeue(&mut self) -> io::Result<()> {
        self.record.state = ClaimState::Queued;
        self.record.runner = None;
        self.save()
    }

    /// The verdict's temp file is durable and about to be renamed to `target`:
    /// `Publishing`, saved durably, so a later holder can finish or skip the rename.
    pub fn publishing(&mut self, temp: PathBuf, target: PathBuf) -> io::Result<()> {
        self.record.state = ClaimState::Publishing;
        self.record.verdict_temp = Some(temp);
        self.record.verdict_path = Some(target);
        self.save_durable()
    }

    /// Writes the record in place. Not synced: it only has to survive a process crash.
    /// A shorter record is padded with spaces (valid trailing JSON white space) rather
    /// than truncated, so a crash mid-save never leaves a torn-looking tail.
    fn save(&mut self) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut bytes = serde_json::to_vec(&self.record).map_err(io::Error::other)?;
        let old = usize::try_from(self.len).unwrap_or(usize::MAX);
        if bytes.len() < old {
            bytes.resize(old, b' ');
        }
        // Before the write: a failed one may still have grown the file this far.
        self.len = self.len.max(bytes.len() as u64);
        self.file.write_all_at(&bytes, 0)
    }

    /// Writes the record and makes it survive power loss.
    fn save_durable(&mut self) -> io::Result<()> {
        self.save()?;
        if self.fsync {
            self.file.sync_data()?;
            sync_dir(self.path.parent().unwrap_or(Path::new(".")))?;
        }
        Ok(())
    }

    /// Removes the claim file while still holding it, then lets go.
    pub fn release(self) -> io::Result<()> {
        std::fs::remove_file(&self.path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot remove claim {}: {e}", self.path.display()),
            )
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

    #[test]
    fn a_held_claim_is_busy_and_names_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let (mut claim, previous) = claimed(dir.path());
        assert_eq!(previous, Previous::Nothing);
        claim.record.owner_pid = 4242;
        claim.save().unwrap();
        match acquire(dir.path(), OsStr::new("j.json"), false).unwrap() {
            Acquired::Busy { holder_pid } => assert_eq!(holder_pid, Some(4242)),
            Acquired::Claimed { .. } => panic!("claimed twice"),
        }
        drop(claim);
        let (_claim, previous) = claimed(dir.path());
        match previous {
            Previous::Record(r) => assert_eq!(r.owner_pid, 4242),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_released_claim_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut claim, _) = claimed(dir.path());
        claim.record.interruptions = 2;
        claim.save_durable().unwrap();
        claim.release().unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let (_claim, previous) = claimed(dir.path());
        assert_eq!(previous, Previous::Nothing);
    }

    #[test]
    fn non_utf8_paths_survive_the_record() {
        use std::os::unix::ffi::OsStrExt;
        let record = ClaimRecord {
            verdict_temp: Some(PathBuf::from(std::ffi::OsStr::from_bytes(b"/v/\xff.json"))),
            verdict_path: Some(PathBuf::from("/v/ok.json")),
            ..Default::default()
        };
        let text = serde_json::to_string(&record).unwrap();
        let back: ClaimRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, record);
    }

    /// The length the holder tracks instead of a stat per save: a shorter record
    /// after a longer one is padded to the longer one's length, never left with its tail.
    #[test]
    fn a_shorter_record_overwrites_a_longer_one_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (mut claim, _) = claimed(dir.path());
        claim.record.hook = serde_json::Value::String("x".repeat(500));
        claim.save().unwrap();
        let long = std::fs::metadata(claim.path()).unwrap().len();
        claim.record.hook = serde_json::Value::Null;
        claim.save().unwrap();
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
