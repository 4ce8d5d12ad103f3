//! Where a job file came from, and what that allows: a file of the inbox (`jobs/`) is
//! the judge's to remove once judged and to move to `rejected/` when it is no job; a
//! file anywhere else (`llm-judge run PATH`) is the user's own, judged when it is a
//! valid job and left where it is whatever it holds.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::Path;

use super::{JobEnd, Left, RunError};
use crate::core::job::life::FileIdentity;
use crate::engine::job_file::{not_a_job_why, reject};
use crate::store::state_dir::{self, StateDir};

/// Where a job file came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobSource {
    /// The state folder's `jobs/`.
    Inbox,
    /// Outside `jobs/` (`run PATH`): never removed, never moved.
    UsersFile,
}

impl JobSource {
    /// True for a file of the user's own, outside `jobs/`.
    pub fn is_users(self) -> bool {
        self == JobSource::UsersFile
    }

    /// How a file that is not a job ends: moved to `rejected/` from `jobs/`, left where
    /// it is anywhere else.
    pub(super) fn not_a_job(
        self,
        state: &StateDir,
        path: &Path,
        name: &OsStr,
        meta: &fs::Metadata,
    ) -> Result<Left, RunError> {
        if self.is_users() {
            let why = not_a_job_why(meta);
            tracing::warn!(file = %path.display(), "not a job ({why}): left where it is");
            return Ok(Left::Ended(JobEnd::NotAJob { why }));
        }
        reject(state, path, name, meta)?;
        Ok(Left::Ended(JobEnd::Rejected))
    }

    /// How a file that went away between the checks and the read ends.
    pub(super) fn vanished(self) -> JobEnd {
        match self {
            JobSource::Inbox => JobEnd::Rejected,
            JobSource::UsersFile => JobEnd::Gone,
        }
    }

    /// Removes the judged job file `path` (a newer file of the same name, enqueued
    /// again meanwhile, is another job and stays; a file of the user's is never
    /// removed), durably with `fsync`: before its claim goes, or a power cut could bring
    /// the job back without it, to be judged again.
    pub(super) fn remove_judged(
        self,
        path: &Path,
        judged: Option<FileIdentity>,
        fsync: bool,
    ) -> Result<(), RunError> {
        if self.is_users() {
            return Ok(());
        }
        let now = fs::symlink_metadata(path)
            .ok()
            .map(|m| FileIdentity::of(&m));
        if now.is_some() && judged.is_some() && now != judged {
            tracing::info!(file = %path.display(), "a newer job of the same name arrived meanwhile; it stays queued");
            return Ok(());
        }
        remove_job(path, fsync)
    }
}

/// Removes a job file (one already gone is fine), durably with `fsync`.
fn remove_job(path: &Path, fsync: bool) -> Result<(), RunError> {
    let removed = match fs::remove_file(path) {
        Ok(()) => true,
        Err(source) if source.kind() == io::ErrorKind::NotFound => false,
        Err(source) => {
            return Err(RunError::RemoveJob {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    if removed && fsync {
        let dir = path.parent().unwrap_or(Path::new("."));
        crate::support::runtime::blocking(|| state_dir::sync_dir(dir))?;
    }
    Ok(())
}
