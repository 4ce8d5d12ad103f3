//! A run's first steps: claim the job file (`claims/<name>`, a non-blocking `flock`),
//! then take over from an earlier holder: stop what it left running, finish its
//! publish, count its interruption, and check that the file is a job at all.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{JobEnd, JobRun, Left, RunError, Step};
use crate::core::job::life::{FileIdentity, Previous};
use crate::engine::job_file::is_job_file;
use crate::engine::recovery::{finish_previous_publish, recover};
use crate::store::claim::{self, Acquired, ClaimError};

/// How long a claim whose recorded holder is dead may stay locked before the job is
/// left for the next look (a runner forked by a judge just killed keeps its files
/// until it execs).
const DEAD_HOLDER_WAIT: Duration = Duration::from_secs(3);

impl JobRun<'_> {
    /// Claims the job, waiting briefly while the holder the claim names is dead.
    pub(super) async fn claim(&self, name: &OsStr) -> Result<Acquired, ClaimError> {
        let deadline = Instant::now() + DEAD_HOLDER_WAIT;
        let fsync = self.settings.config.fsync;
        loop {
            match claim::acquire(&self.state.claims(), name, fsync)? {
                Acquired::Busy {
                    holder_pid: Some(pid),
                } if !crate::process::os::is_alive(pid) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                other => return Ok(other),
            }
        }
    }

    /// What the earlier holder left, and whether the file is a job at all: the
    /// interruptions so far and the file's identity, or how the job ended here.
    pub(super) fn take_over(
        &self,
        path: &Path,
        name: &OsStr,
        previous: &Previous,
    ) -> Step<(u32, FileIdentity)> {
        let fsync = self.settings.config.fsync;
        let meta = match fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                finish_previous_publish(previous, fsync)?;
                return Err(Left::Ended(JobEnd::Gone));
            }
            Err(source) => {
                let path = path.to_path_buf();
                return Err(RunError::Stat { path, source }.into());
            }
        };
        let identity = FileIdentity::of(&meta);
        let Some(interruptions) = recover(previous, identity, path, fsync)?.interruptions() else {
            // Published before a crash: the job file goes (a file of the user's stays).
            self.source.remove_judged(path, None, fsync)?;
            return Err(Left::Ended(JobEnd::AlreadyPublished));
        };
        if !is_job_file(&meta) {
            return Err(self.source.not_a_job(self.state, path, name, &meta)?);
        }
        Ok((interruptions, identity))
    }
}
