//! One job file's run, from its claim to its end (`llm-judge run`, the daemon's worker
//! slots, a hook judging without a daemon). A `JobRun` is built once per job and holds
//! what travels with it: the settings snapshot, the state folder, the services, the
//! stop signal, the events sink. Its steps follow the job, each in its own module:
//! claim and take over (`claim`), read (`read`), decide (`decide`: cache, an identical
//! job, the runners), publish and finish (`publish`). Each step goes on with a value or
//! leaves with a `Left`: how the job ended, or the error it failed on.

// A bad job is rare: its error costs a copy of a few hundred bytes, not worth a Box.
#![allow(clippy::result_large_err)]

mod claim;
mod decide;
mod publish;
mod read;
mod source;

pub use source::JobSource;

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::core::config::Settings;
use crate::core::history::{JudgedBy, Record, VerdictRecord};
use crate::core::job::{Job, JobError, Mode};
use crate::core::verdict::{Outcome, Verdict, error_verdict};
use crate::engine::attempts::Services;
use crate::engine::events::{JobEvent, JobEvents, StopSignal};
use crate::engine::job_file::{NO_RULE, RejectError, log_job_notes};
use crate::store::claim::{Acquired, ClaimError, Held, Running};
use crate::store::log_line::job_span;
use crate::store::state_dir::{self, StateDir, now_unix};
use crate::support::error::Chained;

pub use decide::Stopped;

/// After this many interrupted tries a job gets an `unchecked` verdict.
pub const MAX_INTERRUPTIONS: u32 = 3;

/// How a job file's run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum JobEnd {
    /// A verdict was published and the job removed.
    Judged {
        outcome: Outcome,
        attempts: Vec<crate::core::verdict::Attempt>,
    },
    /// Another process holds the claim.
    Busy { holder_pid: Option<u32> },
    /// The file was gone before it could be read.
    Gone,
    /// Not a job (not a regular file, or not the judge's user's): moved to `rejected/`.
    Rejected,
    /// Not a job, outside `jobs/` (`JobSource::UsersFile`): left where it is.
    /// `why` says what it is (a folder, a FIFO, another user's file).
    NotAJob { why: String },
    /// A file outside `jobs/` that is not a valid job: left where it is, no verdict.
    /// `why` is the judge error its verdict would have had.
    Refused { why: String },
    /// An earlier holder had already published the verdict; only cleanup was left.
    AlreadyPublished,
    /// Shutdown stopped it; the job stays queued (not counted as an interruption).
    Stopped,
    /// Something failed; the job stays queued and the error is logged.
    Failed(JobFailed),
    /// Still being written in place (see `JobRun::settle`): left in `jobs/`,
    /// unjudged, for a look after the settle time.
    Unsettled,
}

/// Why a job was left queued after an error (`JobEnd::Failed`).
#[derive(Debug, Clone, thiserror::Error)]
pub enum JobFailed {
    /// A step failed on a file or the claim (logged where it failed).
    #[error(transparent)]
    Run(Arc<RunError>),
    /// The task judging it ended without a result (a panic, or dropped).
    #[error("worker stopped unexpectedly")]
    WorkerStopped,
}

impl PartialEq for JobFailed {
    /// The same failure: one error (not two alike), or both a stopped worker.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (JobFailed::Run(a), JobFailed::Run(b)) => Arc::ptr_eq(a, b),
            (JobFailed::WorkerStopped, JobFailed::WorkerStopped) => true,
            _ => false,
        }
    }
}

/// Why a job was left queued: the path or claim it failed on is in the variant.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{} has no file name", path.display())]
    NoFileName { path: PathBuf },
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error("cannot stat {}", path.display())]
    Stat { path: PathBuf, source: io::Error },
    #[error("cannot remove job file {}", path.display())]
    RemoveJob { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Reject(#[from] RejectError),
    #[error("cannot rename {} into place", temp.display())]
    Rename { temp: PathBuf, source: io::Error },
    /// A state-folder write; `store::state_dir`'s errors name their file.
    #[error(transparent)]
    StateDir(#[from] io::Error),
}

/// How a step left the job when it did not go on: ended (the claim is let go, or
/// queued again for `Stopped`), or failed (the job stays queued, the error logged).
enum Left {
    Ended(JobEnd),
    Failed(RunError),
}

impl<E: Into<RunError>> From<E> for Left {
    fn from(e: E) -> Self {
        Left::Failed(e.into())
    }
}

impl From<Stopped> for Left {
    fn from(Stopped: Stopped) -> Self {
        Left::Ended(JobEnd::Stopped)
    }
}

/// A step goes on with a `T` or leaves the job.
type Step<T> = Result<T, Left>;

/// One job file's run: what travels with the job, built once (by a worker slot, `run`,
/// a hook), then `judge_file`.
pub struct JobRun<'a> {
    pub settings: &'a Settings,
    pub state: &'a StateDir,
    /// Health, cache, limits, single flight, the spawner, the spend ledger.
    pub services: &'a Services,
    /// The daemon's shutdown (`Stop` past the grace, `StopNow` after); `None`: never
    /// stopped (`run`; a hook stops it at its deadline with one of its own).
    pub stop: Option<StopSignal>,
    /// Gets `JobEvent::Publishing` once the runners are done, so the worker slot
    /// serves the next job while this one's fsyncs complete.
    pub events: Option<Box<dyn JobEvents>>,
    /// The daemon's `job_settle_seconds`: a job file that changed while it was read,
    /// or is cut short and was modified less than this long ago, is a producer still
    /// writing it in place; it is not judged (`JobEnd::Unsettled`). `run` judges
    /// what it finds.
    pub settle: Option<Duration>,
    /// Where the file came from: `jobs/`, or the user's own file (`run PATH`), judged
    /// when it is a valid job and left where it is whatever it holds.
    pub source: JobSource,
    /// Who judges, as the verdict history records it.
    pub judged_by: JudgedBy,
}

impl<'a> JobRun<'a> {
    /// A run with no stop signal, no events, no settle time, for a file in `jobs/`.
    pub fn new(settings: &'a Settings, state: &'a StateDir, services: &'a Services) -> Self {
        JobRun {
            settings,
            state,
            services,
            stop: None,
            events: None,
            settle: None,
            source: JobSource::Inbox,
            judged_by: JudgedBy::Run,
        }
    }

    /// Judges the job file at `path` (normally `jobs/<name>`).
    pub async fn judge_file(self, path: &Path) -> JobEnd {
        let failed = match self.drive(path).await {
            Ok(end) => return end,
            Err(e) => e,
        };
        tracing::error!(file = %path.display(), "job left queued after an error: {failed}", failed = failed.chain());
        JobEnd::Failed(JobFailed::Run(Arc::new(failed)))
    }

    /// Claim, take over, run, judge, publish, remove, let go.
    async fn drive(mut self, path: &Path) -> Result<JobEnd, RunError> {
        let name = path.file_name().ok_or_else(|| RunError::NoFileName {
            path: path.to_path_buf(),
        })?;
        state_dir::create_dir(&self.state.claims())?;
        let (claim, previous) = match self.claim(name).await? {
            Acquired::Busy { holder_pid } => return Ok(JobEnd::Busy { holder_pid }),
            Acquired::Claimed { claim, previous } => (claim, previous),
        };
        // Before the claim says running, an ending leaves the earlier record as it was.
        let (interruptions, identity) = match self.take_over(path, name, &previous) {
            Ok(next) => next,
            Err(Left::Ended(end)) => {
                claim.release()?;
                return Ok(end);
            }
            Err(Left::Failed(e)) => return Err(e),
        };
        // A record it could not write (disk full) goes with the claim: never a crash later.
        let mut claim = claim.start_running(interruptions, identity)?;
        crate::support::failpoint::crash("after_claim");
        let started = Instant::now();
        // The spawner hears that the job is over on every path, exactly once.
        let over = JobOver::new(self.services, &claim.record().tag);
        let (verdict, mode) = match self.judge(path, name, &mut claim).await {
            Ok(judged) => judged,
            Err(left) => {
                drop(over);
                return end_running(Held::Running(claim), left);
            }
        };
        self.publishing_event(&verdict).await;
        let (publishing, durable) = match self.publish(claim, name, &verdict) {
            Ok(published) => published,
            Err((claim, e)) => {
                drop(over);
                return end_running(claim, Left::Failed(e));
            }
        };
        self.record(&verdict, mode, started.elapsed());
        // The verdict is out: the copy of a runner started ahead of jobs that this job
        // took is replaced now, and runners still exiting after their final event are
        // waited for while the claim still covers them.
        let tag = publishing.record().tag.clone();
        drop(over);
        if let Some(exiting) = &self.services.exiting {
            exiting.settle(&tag).await;
        }
        // A verdict whose folder could not be synced keeps its job and `publishing` claim
        // (the lock goes with the handle): a later look syncs the folder, removes them.
        if durable {
            self.remove_and_release(path, publishing)?;
        }
        log_finished(&verdict, started.elapsed());
        Ok(JobEnd::Judged {
            outcome: verdict.outcome,
            attempts: verdict.attempts,
        })
    }

    /// Puts the published `verdict` on record (docs/history.md): one append, never an
    /// error that reaches the job.
    fn record(&self, verdict: &Verdict, mode: Option<Mode>, took: Duration) {
        let history = &self.settings.config.history;
        if !history.enabled {
            return;
        }
        let record = VerdictRecord::of(
            crate::support::random::unique_id(),
            verdict,
            self.judged_by,
            mode.map(Mode::name),
            took.as_millis() as u64,
        );
        crate::store::history::record(self.state, true, &[Record::Verdict(record)]);
    }

    /// Reads and decides a running job: its verdict and the job's mode (`None` for a
    /// job that could not be read), or how it left.
    async fn judge(
        &mut self,
        path: &Path,
        name: &OsStr,
        claim: &mut Running,
    ) -> Step<(Verdict, Option<Mode>)> {
        let record = claim.record();
        let (interruptions, identity) = (record.interruptions, record.job);
        let parsed = self.read(path, name, identity)?;
        if let (Err(error), true) = (&parsed, self.source.is_users()) {
            // Not the judge's file: a verdict would remove it, and it may be anything.
            let why = &error.problem;
            tracing::warn!(file = %path.display(), "not a valid job ({why}): left where it is");
            return Err(Left::Ended(JobEnd::Refused {
                why: why.to_string(),
            }));
        }
        if let Ok(job) = &parsed {
            claim.name_job(&job.id, &job.hook)?;
        }
        // One line, not two, for a job without a rule (docs/reference.md, "Job files"): a
        // `None` field is left out of the line.
        let rule = parsed
            .as_ref()
            .ok()
            .filter(|job| job.has_no_rule())
            .map(|_| NO_RULE);
        tracing::info!(file = %path.display(), interruptions, rule, "job claimed");
        let span = match &parsed {
            Ok(job) => job_span(&job.id),
            Err(_) => tracing::Span::none(),
        };
        if let Ok(job) = &parsed {
            span.in_scope(|| log_job_notes(job));
        }
        let mode = parsed.as_ref().ok().map(|job| job.mode);
        let verdict = match parsed {
            Err(error) => {
                tracing::warn!(id = %error.id, file = %path.display(), reason = ?error.reason(), "bad job");
                Ok(error_verdict(&error, now_unix()))
            }
            Ok(job) if interruptions >= MAX_INTERRUPTIONS => {
                let error = as_error(
                    &job,
                    format!(
                        "job was interrupted {interruptions} times while being judged \
                         (the judge crashed or was killed each time); not retried"
                    ),
                );
                span.in_scope(|| tracing::error!("{}", error.reason()));
                Ok(error_verdict(&error, now_unix()))
            }
            Ok(job) => match self.decide(&job, claim).instrument(span.clone()).await {
                Ok(verdict) => Ok(verdict),
                Err(Stopped) => {
                    span.in_scope(|| tracing::info!("job stopped by shutdown; left queued"));
                    Err(Stopped.into())
                }
            },
        };
        verdict.map(|verdict| (verdict, mode))
    }

    /// Tells the events sink the verdict is about to be published.
    async fn publishing_event(&self, verdict: &Verdict) {
        if let Some(events) = &self.events {
            // Before the rename, so `status` never lags a verdict someone already read.
            events.send(JobEvent::Publishing {
                outcome: verdict.outcome,
                attempts: &verdict.attempts,
            });
            // The slot's next job claims and starts its runner first; this publish then
            // runs while that runner does.
            tokio::task::yield_now().await;
        }
    }
}

/// The `job finished` line: at WARN when no runner answered (someone should look), with
/// the rule the job asked about.
fn log_finished(verdict: &Verdict, took: Duration) {
    let (id, outcome) = (&verdict.id, verdict.outcome.name());
    let runner = verdict.runner.as_deref().unwrap_or("-");
    let duration_ms = took.as_millis() as u64;
    let rule = verdict.rule_id.as_deref();
    match verdict.outcome {
        Outcome::Unchecked => {
            tracing::warn!(%id, %outcome, %runner, duration_ms, rule, "job finished")
        }
        _ => tracing::info!(%id, %outcome, %runner, duration_ms, rule, "job finished"),
    }
}

/// Tells the spawner the job is over (a taken pre-started copy is replaced) when it
/// goes out of scope: after the publish, or on any earlier way out.
struct JobOver<'a> {
    services: &'a Services,
    tag: String,
}

impl<'a> JobOver<'a> {
    fn new(services: &'a Services, tag: &str) -> Self {
        JobOver {
            services,
            tag: tag.to_string(),
        }
    }
}

impl Drop for JobOver<'_> {
    fn drop(&mut self) {
        self.services.spawner.job_ended(&self.tag);
    }
}

/// A job that left while running or publishing: stopped or failed, it is queued again
/// (not an interruption); otherwise the claim is let go.
fn end_running(claim: Held, left: Left) -> Result<JobEnd, RunError> {
    match left {
        Left::Ended(JobEnd::Stopped) => {
            claim.requeue()?;
            Ok(JobEnd::Stopped)
        }
        Left::Ended(end) => {
            match claim {
                Held::Running(c) => c.release()?,
                Held::Publishing(c) => c.release()?,
            }
            Ok(end)
        }
        Left::Failed(e) => {
            // Not judged (a full disk, say): queued again, not counted as an interruption.
            let _ = claim.requeue();
            Err(e)
        }
    }
}

/// The judge error of a valid `job` that cannot be judged for `why`.
pub(super) fn as_error(job: &Job, why: String) -> JobError {
    JobError {
        problem: crate::core::job::JobProblem::Judge(why),
        id: job.id.clone(),
        transcript: job.transcript.clone(),
        hook: job.hook.clone(),
        on_hit: job.on_hit.clone(),
        rule_id: job.rule_id.clone(),
    }
}

#[cfg(test)]
mod tests;
