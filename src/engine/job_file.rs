//! The job file itself: read without following links or blocking, tell a file still
//! being written in place, and move what is not a job to `rejected/`.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::core::job::life::FileIdentity;
use crate::core::job::prefix::{PREFIX_BYTES, transcript_in_prefix};
use crate::core::job::{Job, JobError, cut_short, unreadable_job};
use crate::store::state_dir::{self, StateDir, stem_of};

/// Logs what the job says that its producer most likely did not mean, once, when the
/// job is read (so a cached or single-flight answer still leaves a trace): a key that
/// looks like a misspelt job key and a `mode` that is not one. No rule at all is said
/// on the job's "job claimed" line ([`NO_RULE`]).
pub fn log_job_notes(job: &Job) {
    if !job.typos.is_empty() {
        let keys: Vec<String> = job
            .typos
            .iter()
            .map(|t| format!("{:?} looks like a misspelt {:?}", t.key, t.resembles))
            .collect();
        tracing::warn!(
            "unknown job key ignored: {}; fix the key in the job's producer",
            keys.join("; ")
        );
    }
    if let Some(warning) = &job.mode_warning {
        tracing::warn!("{warning}");
    }
}

/// The `rule` field of a "job claimed" line when the job has none.
pub const NO_RULE: &str =
    "none (no hit_if_all_true or hit_if_any_true keys): every answer is a hit";

/// Why a non-job could not be moved out of the inbox.
#[derive(Debug, thiserror::Error)]
pub enum RejectError {
    #[error(transparent)]
    CreateDir(#[from] io::Error),
    #[error("cannot move {} to rejected/", path.display())]
    Move { path: PathBuf, source: io::Error },
}

/// A symlink, FIFO, folder or other non-regular file, or a file of another user
/// (swapped in after the checks): it goes to `rejected/` like any of them.
#[derive(Debug)]
pub struct NotAJob;

/// True when a producer is still writing the job file in place (it broke the publish-
/// by-rename protocol): the file changed since the claim looked at it (identity) or
/// while it was read (size), or it does not parse because it is cut short and was
/// modified less than `settle` ago. Judging such a file gave one verdict per look (a
/// storm) and removed the file under its writer. A job published by rename is whole
/// and unchanged, so this never holds for it, and costs it nothing: `cut_short` parses
/// only a job that failed to parse.
pub fn still_being_written(
    claimed: Option<FileIdentity>,
    bytes: &[u8],
    after: &fs::Metadata,
    unparsed: bool,
    settle: Duration,
) -> bool {
    let changed = claimed != Some(FileIdentity::of(after)) || after.len() != bytes.len() as u64;
    changed || (unparsed && cut_short(bytes) && modified_within(after, settle))
}

/// True when the file's mtime is less than `settle` from now (either side, so a
/// clock a little behind the file system's does not judge it early; a file far in
/// the future is judged, never held forever).
fn modified_within(meta: &fs::Metadata, settle: Duration) -> bool {
    let Ok(mtime) = meta.modified() else {
        return false;
    };
    match SystemTime::now().duration_since(mtime) {
        Ok(age) => age < settle,
        Err(ahead) => ahead.duration() < settle,
    }
}

/// A job file's bytes and its metadata after the read, or the judge error to report.
pub type JobBytes = Result<(Vec<u8>, fs::Metadata), JobError>;

/// Reads a job file without following symlinks or blocking on FIFOs; also returns the
/// file's metadata after the read (to tell whether it changed meanwhile).
pub fn read_job(path: &Path, max_bytes: u64) -> Result<JobBytes, NotAJob> {
    let stem = stem_of(path.file_name().unwrap_or_default());
    let unreadable =
        |e: io::Error| unreadable_job(&stem, &format!("job file could not be read: {e}"));
    let file: File = match state_dir::open_nofollow(path) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(NotAJob),
        Err(e) => return Ok(Err(unreadable(e))),
    };
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => return Ok(Err(unreadable(e))),
    };
    // Checked again on the open file: the claim's check saw the path, which a swap
    // may have pointed elsewhere since.
    if !is_job_file(&meta) {
        return Err(NotAJob);
    }
    Ok(read_bytes(&file, &meta, max_bytes).map_err(|e| match e {
        Some(e) => unreadable(e),
        None => too_large(&file, &stem, max_bytes),
    }))
}

/// The judge error of a job file over `max_job_bytes`, in the folder of the transcript
/// its first bytes name (where `drain` finds it); without one, the `""` folder.
fn too_large(file: &File, stem: &str, max_bytes: u64) -> JobError {
    use std::os::unix::fs::FileExt;
    let mut prefix = vec![0u8; PREFIX_BYTES];
    let mut len = 0;
    // Positional reads: from the start, whatever the first read left behind.
    while len < prefix.len() {
        match file.read_at(&mut prefix[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let transcript = transcript_in_prefix(&prefix[..len]);
    let problem = format!("job file is larger than max_job_bytes ({max_bytes} bytes)");
    let problem = match &transcript {
        Some(_) => problem,
        None => format!(
            "{problem}; no \"transcript\" in its first {} KiB, so its verdict is in the \
             folder of the empty transcript",
            PREFIX_BYTES / 1024
        ),
    };
    JobError {
        transcript: transcript.unwrap_or_default(),
        ..unreadable_job(stem, &problem)
    }
}

/// At most `max_bytes` of `file`, and its metadata after the read; `Err(None)` when
/// it is larger.
fn read_bytes(
    mut file: &File,
    meta: &fs::Metadata,
    max_bytes: u64,
) -> Result<(Vec<u8>, fs::Metadata), Option<io::Error>> {
    if meta.len() > max_bytes {
        return Err(None);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.by_ref()
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(None);
    }
    Ok((bytes, file.metadata()?))
}

/// True when `meta` is a job's: a regular file the judge's own user owns (the one
/// check; what is not a job is rejected, never opened as one).
pub fn is_job_file(meta: &fs::Metadata) -> bool {
    meta.file_type().is_file() && owned_by_me(meta)
}

/// True when the judge's own user owns the file. Another user's file in `jobs/` got
/// there through a write grant the start-up check did not see (an ACL or a mode set
/// later): it is not a job (docs/reference.md, "State folder": others must not plant jobs).
pub fn owned_by_me(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.uid() == rustix::process::geteuid().as_raw()
}

/// Moves a non-job (non-regular, or another user's) out of the inbox without opening
/// or following it.
pub fn reject(
    state: &StateDir,
    path: &Path,
    name: &OsStr,
    meta: &fs::Metadata,
) -> Result<(), RejectError> {
    let dir = state.rejected();
    state_dir::create_dir(&dir)?;
    let mut target = dir.join(name);
    let mut n = 1;
    while fs::symlink_metadata(&target).is_ok() {
        let mut alt = name.to_os_string();
        alt.push(format!(".{n}"));
        target = dir.join(alt);
        n += 1;
    }
    fs::rename(path, &target).map_err(|source| RejectError::Move {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.file_type().is_file() && !owned_by_me(meta) {
        use std::os::unix::fs::MetadataExt;
        tracing::warn!(
            file = %path.display(), moved_to = %target.display(),
            "owned by uid {}, not by the judge's user (uid {}): not a job, moved to rejected/",
            meta.uid(), rustix::process::geteuid().as_raw()
        );
    } else {
        tracing::warn!(
            file = %path.display(), kind = file_kind(meta), moved_to = %target.display(),
            "not a regular file: not a job, moved to rejected/"
        );
    }
    Ok(())
}

/// What a file that is not a job is, for a message: "a folder", "a FIFO", "owned by
/// uid 0, not by the judge's user (uid 1000)".
pub fn not_a_job_why(meta: &fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    if meta.file_type().is_file() {
        return format!(
            "owned by uid {}, not by the judge's user (uid {})",
            meta.uid(),
            rustix::process::geteuid().as_raw()
        );
    }
    format!("a {}, not a regular file", file_kind(meta))
}

/// The kind of a file that is not a regular one, for a message ("folder", "FIFO").
pub fn file_kind(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "folder"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job file swapped for a symlink or FIFO after the daemon's type check is
    /// never opened through: it reads as "not a job" (rejected/), not as unreadable.
    #[test]
    fn a_file_swapped_for_a_symlink_or_fifo_reads_as_not_a_job() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("secret");
        std::fs::write(&target, b"{\"prompt\": \"p\"}").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(read_job(&link, 1 << 20), Err(NotAJob)));
        let fifo = dir.path().join("fifo.json");
        let c_fifo = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
        assert!(matches!(read_job(&fifo, 1 << 20), Err(NotAJob)));
        let folder = dir.path().join("dir.json");
        std::fs::create_dir(&folder).unwrap();
        assert!(matches!(read_job(&folder, 1 << 20), Err(NotAJob)));
        assert!(
            matches!(read_job(&target, 1 << 20), Ok(Ok((bytes, _))) if bytes.starts_with(b"{"))
        );
    }

    /// A regular job file of another user (swapped in after the daemon's ownership
    /// check) reads as "not a job" too. Needs root to give a file away (CI runs as root).
    #[test]
    fn another_users_file_reads_as_not_a_job() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("planted.json");
        std::fs::write(&job, b"{\"prompt\": \"p\"}").unwrap();
        let me = rustix::process::geteuid().as_raw();
        let other = if me == 65534 { 65533 } else { 65534 };
        if std::os::unix::fs::chown(&job, Some(other), None).is_err() {
            eprintln!("note: cannot give a file to uid {other} (not root); nothing to check");
            return;
        }
        assert!(matches!(read_job(&job, 1 << 20), Err(NotAJob)));
    }
}
