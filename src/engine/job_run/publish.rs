//! A run's publish: the verdict written under a temp name and made durable, the claim
//! moved to `publishing` (naming that temp file), the rename into the transcript's
//! verdict folder; then the judged job file removed.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::Path;

use super::{JobRun, RunError};
use crate::core::verdict::Verdict;
use crate::store::claim::{Held, Publishing, Running};
use crate::store::state_dir;

impl JobRun<'_> {
    /// Publishes `verdict` under `claim` (after `publishing_event`), off the runtime's
    /// thread when it fsyncs; the claim, publishing, and whether the verdict is durable
    /// (its folder synced), or the claim back (running or publishing) with the error.
    pub(super) fn publish(
        &self,
        claim: Running,
        name: &OsStr,
        verdict: &Verdict,
    ) -> Result<(Publishing, bool), (Held, RunError)> {
        let fsync = self.settings.config.fsync;
        // fsyncs block: let the runtime move other tasks off this thread meanwhile, so
        // the fsyncs of jobs finishing together overlap (and the journal commits them
        // together). Without fsyncs the publish is a few small writes and a rename, the
        // same kind of work as the claim's: handing the worker thread off
        // (block_in_place) would cost more than it saves.
        let publish_now = || publish(self.state, claim, name, verdict, fsync);
        let published = if fsync {
            crate::support::runtime::blocking(publish_now)
        } else {
            publish_now()
        };
        if let (Err(_), Some(events)) = (&published, &self.events) {
            events.send(crate::engine::events::JobEvent::PublishFailed {
                outcome: verdict.outcome,
            });
        }
        published
    }
}

fn publish(
    state: &state_dir::StateDir,
    claim: Running,
    name: &OsStr,
    verdict: &Verdict,
    fsync: bool,
) -> Result<(Publishing, bool), (Held, RunError)> {
    let dir = state.verdict_dir(&verdict.transcript);
    let file_name = state_dir::verdict_name(name);
    let target = dir.join(&file_name);
    let bytes = serde_json::to_vec(verdict).map_err(io::Error::other);
    let temp = bytes.and_then(|mut bytes| {
        bytes.push(b'\n');
        state_dir::write_temp(&dir, &file_name, &bytes, fsync)
    });
    // The temp file's name is made durable before the claim names it: a claim that
    // says `publishing` with no temp file left means "renamed, maybe drained since".
    let temp = temp.and_then(|temp| {
        if fsync {
            state_dir::sync_dir(&dir)?;
        }
        Ok(temp)
    });
    let temp = match temp {
        Ok(temp) => temp,
        Err(e) => return Err((Held::Running(claim), e.into())),
    };
    crate::support::failpoint::crash("verdict_temp_written");
    // Until the claim names it, dropping `temp` (an error here) removes it.
    let claim = match claim.publishing(temp.path.clone(), target.clone()) {
        Ok(claim) => claim,
        Err((claim, e)) => return Err((Held::Running(claim), e.into())),
    };
    let temp = temp.keep();
    crate::support::failpoint::crash("publishing_recorded");
    if let Err(source) = fs::rename(&temp, &target) {
        let _ = fs::remove_file(&temp);
        return Err((Held::Publishing(claim), RunError::Rename { temp, source }));
    }
    crate::support::failpoint::crash("verdict_renamed");
    // Published now, whatever happens next: a failed folder sync must not requeue it.
    // Nor may the job and its claim go before the rename is durable: they stay, and a
    // later look (`recovery`: "already published") syncs the folder and removes them.
    let durable = !fsync
        || state_dir::sync_dir(&dir)
            .inspect_err(|e| {
                tracing::error!(
                    "verdict published but not synced to disk: {e}; its job stays until it is"
                );
            })
            .is_ok();
    tracing::debug!(verdict = %target.display(), "verdict published");
    Ok((claim, durable))
}

impl JobRun<'_> {
    /// After a durable publish: the judged job file removed (a file outside jobs/, `run
    /// PATH`, is the user's own: never), then the claim let go.
    pub(super) fn remove_and_release(
        &self,
        path: &Path,
        publishing: Publishing,
    ) -> Result<(), RunError> {
        let fsync = self.settings.config.fsync;
        self.source
            .remove_judged(path, publishing.record().job, fsync)?;
        crate::support::failpoint::crash("job_removed");
        publishing.release()?;
        Ok(())
    }
}
