//! A run's read: the claimed job file, read without following links or blocking,
//! parsed; or a file that turned out not to be a job, or one still being written in
//! place.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use super::{JobEnd, JobRun, Left, Step};
use crate::core::job::life::FileIdentity;
use crate::core::job::{Job, JobError, parse_job};
use crate::engine::job_file::{NotAJob, read_job, still_being_written};
use crate::store::state_dir::stem_of;

impl JobRun<'_> {
    /// The parsed job, or the judge error its verdict reports; or how it ended (not a
    /// job, still being written in place).
    pub(super) fn read(
        &self,
        path: &Path,
        name: &OsStr,
        claimed: Option<FileIdentity>,
    ) -> Step<Result<Job, JobError>> {
        let stem = stem_of(name);
        let (bytes, after) = match read_job(path, self.settings.config.max_job_bytes) {
            Err(NotAJob) => {
                // Swapped for a symlink, FIFO, folder or another user's file after the
                // checks (the re-check that guards that swap): not a job.
                return Err(match fs::symlink_metadata(path) {
                    Ok(meta) => self.source.not_a_job(self.state, path, name, &meta)?,
                    Err(_) => Left::Ended(self.source.vanished()),
                });
            }
            Ok(Err(unreadable)) => return Ok(Err(unreadable)),
            Ok(Ok(read)) => read,
        };
        let parsed = parse_job(&bytes, &stem, self.settings.config.timeouts());
        if let Some(settle) = self.settle
            && still_being_written(claimed, &bytes, &after, parsed.is_err(), settle)
        {
            return Err(Left::Ended(JobEnd::Unsettled));
        }
        Ok(parsed)
    }
}
