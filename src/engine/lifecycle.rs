//! One job file from claim to removal: claim it, recover what an interrupted
//! holder left, read and parse it, judge it, publish the verdict durably, remove
//! the job, release the claim. Used by `llm-judge run` and by the daemon.

// A bad job is rare: its error costs a copy of a few hundred bytes, not worth a Box.
#![allow(clippy::result_large_err)]

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::config::Settings;
use crate::core::job::life::{FileIdentity, Previous};
use crate::core::job::{Job, JobError, parse_job};
use crate::core::verdict::{Outcome, Verdict, error_verdict, verdict_for};
use crate::engine::attempts::{CacheSlot, Services};
use crate::engine::events::{JobEvent, JobEvents, StopSignal};
use crate::engine::flight::{self, Flight, FlightResult};
use crate::engine::job_cwd::{CwdChoice, job_cwd};
use crate::engine::job_file::{
    NO_RULE, NotAJob, RejectError, log_job_notes, not_a_job_why, owned_by_me, read_job, reject,
    still_being_written,
};
use crate::engine::recovery::{finish_previous_publish, recover};
use crate::process::os::start_time;
use crate::store::claim::{self, Acquired, Claim, ClaimError, Started};
use crate::store::state_dir::{self, StateDir, now_unix, stem_of};

/// After this many interrupted tries a job gets an `unchecked` verdict.
pub const MAX_INTERRUPTIONS: u32 = 3;

/// What became of a job file.
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
    /// Not a job, outside `jobs/` (`WorkerLink::outside_jobs`): left where it is.
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
    /// Still being written in place (see `WorkerLink::settle`): left in `jobs/`,
    /// unjudged, for a look after the settle time.
    Unsettled,
}

/// Why a job was left queued after an error (`JobEnd::Failed`).
#[derive(Debug, Clone, thiserror::Error)]
pub enum JobFailed {
    /// A step failed on a file or the claim (logged where it failed).
    #[error(transparent)]
    Lifecycle(Arc<LifecycleError>),
    /// The task judging it ended without a result (a panic, or dropped).
    #[error("worker stopped unexpectedly")]
    WorkerStopped,
}

impl PartialEq for JobFailed {
    /// The same failure: one error (not two alike), or both a stopped worker.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (JobFailed::Lifecycle(a), JobFailed::Lifecycle(b)) => Arc::ptr_eq(a, b),
            (JobFailed::WorkerStopped, JobFailed::WorkerStopped) => true,
            _ => false,
        }
    }
}

/// Why a job was left queued: the path or claim it failed on is in the variant.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
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

/// Stops a job early (daemon shutdown): its runners are stopped and the job queued.
pub type Cancel = StopSignal;

/// How a daemon worker steers a job and hears from it; `run` uses the default.
#[derive(Default)]
pub struct WorkerLink {
    /// The daemon's `Control`: `Stop` on shutdown past the grace, `StopNow` after.
    pub cancel: Option<Cancel>,
    /// Gets `JobEvent::Publishing` once the runners are done, so the worker slot
    /// serves the next job while this one's fsyncs complete.
    pub events: Option<Box<dyn JobEvents>>,
    /// The daemon's `job_settle_seconds`: a job file that changed while it was read,
    /// or is cut short and was modified less than this long ago, is a producer still
    /// writing it in place; it is not judged (`JobEnd::Unsettled`). `run` judges
    /// what it finds.
    pub settle: Option<Duration>,
    /// The file is not in the state folder's `jobs/` (`run PATH`): it is judged when it
    /// is a valid job, and left where it is whatever it holds (`JobEnd::NotAJob`,
    /// `JobEnd::Refused`): never removed, never moved to `rejected/`.
    pub outside_jobs: bool,
}

/// How a step of the driver left the job when it did not go on: ended (the claim is
/// let go, or queued for `Stopped`) or failed (the job stays queued, the error logged).
enum Exit {
    Ended(JobEnd),
    Failed(LifecycleError),
}

impl<E: Into<LifecycleError>> From<E> for Exit {
    fn from(e: E) -> Self {
        Exit::Failed(e.into())
    }
}

/// The driver's steps go on with a `T` or leave the job through an `Exit`.
type Step<T> = Result<T, Exit>;

/// Judges the job file at `path` (normally `jobs/<name>`).
pub async fn handle(
    settings: &Settings,
    state: &StateDir,
    path: &Path,
    services: &Services,
    mut link: WorkerLink,
) -> JobEnd {
    let failed = match handle_claimed(settings, state, path, services, &mut link).await {
        Ok(handled) => return handled,
        Err(e) => e,
    };
    tracing::error!(file = %path.display(), "job left queued after an error: {failed}", failed = crate::support::error::Chain(&failed));
    JobEnd::Failed(JobFailed::Lifecycle(Arc::new(failed)))
}

/// The driver: claim, take over, check, run, judge and publish, remove, let go.
async fn handle_claimed(
    settings: &Settings,
    state: &StateDir,
    path: &Path,
    services: &Services,
    link: &mut WorkerLink,
) -> Result<JobEnd, LifecycleError> {
    let name = path.file_name().ok_or_else(|| LifecycleError::NoFileName {
        path: path.to_path_buf(),
    })?;
    let fsync = settings.config.fsync;
    state_dir::create_dir(&state.claims())?;
    let (claim, previous) = match acquire_claim(state, name, fsync).await? {
        Acquired::Busy { holder_pid } => return Ok(JobEnd::Busy { holder_pid }),
        Acquired::Claimed { claim, previous } => (claim, previous),
    };
    // Before the claim says running, an error leaves the earlier record as it was.
    let taken = take_over(state, path, name, &previous, fsync, link.outside_jobs);
    let (interruptions, identity) = match taken {
        Ok(next) => next,
        Err(exit) => return end_unstarted(claim, exit),
    };
    // A record it could not write (disk full) goes with the claim: never a crash later.
    let mut claim = claim.start_running(interruptions, identity)?;
    crate::support::failpoint::crash("after_claim");
    let started = Instant::now();
    let verdict = match judge_claimed(settings, state, path, name, &mut claim, services, link).await
    {
        Ok(verdict) => verdict,
        Err(exit) => {
            services.spawner.job_ended(&claim.record().tag);
            return end_started(claim, exit);
        }
    };
    // A file outside jobs/ (`run PATH`) is the user's own: judged, never removed.
    if !link.outside_jobs {
        remove_judged_job(path, claim.record().job)?;
    }
    crate::support::failpoint::crash("job_removed");
    claim.release()?;
    tracing::info!(
        id = %verdict.id, outcome = %verdict.outcome.name(), runner = %verdict.runner.as_deref().unwrap_or("-"),
        duration_ms = started.elapsed().as_millis() as u64, "job finished"
    );
    Ok(JobEnd::Judged {
        outcome: verdict.outcome,
        attempts: verdict.attempts,
    })
}

/// A job that ended before this holder started it: let the claim go.
fn end_unstarted(claim: Claim, exit: Exit) -> Result<JobEnd, LifecycleError> {
    match exit {
        Exit::Ended(handled) => {
            claim.release()?;
            Ok(handled)
        }
        Exit::Failed(e) => Err(e),
    }
}

/// A job that ended while running: stopped or failed, it is queued again (not an
/// interruption); otherwise the claim is let go.
fn end_started(mut claim: Started, exit: Exit) -> Result<JobEnd, LifecycleError> {
    match exit {
        Exit::Ended(JobEnd::Stopped) => {
            claim.requeue()?;
            Ok(JobEnd::Stopped)
        }
        Exit::Ended(handled) => {
            claim.release()?;
            Ok(handled)
        }
        Exit::Failed(e) => {
            // Not judged (a full disk, say): queued again, not counted as an interruption.
            let _ = claim.requeue();
            Err(e)
        }
    }
}

/// What the earlier holder left, and whether the file is a job at all: the
/// interruptions so far and the file's identity, or how the job ended here.
fn take_over(
    state: &StateDir,
    path: &Path,
    name: &OsStr,
    previous: &Previous,
    fsync: bool,
    outside_jobs: bool,
) -> Step<(u32, FileIdentity)> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            finish_previous_publish(previous, fsync)?;
            return Err(Exit::Ended(JobEnd::Gone));
        }
        Err(source) => {
            let path = path.to_path_buf();
            return Err(LifecycleError::Stat { path, source }.into());
        }
    };
    let identity = FileIdentity::of(&meta);
    let Some(interruptions) = recover(previous, identity, path, fsync)?.interruptions() else {
        // A file outside jobs/ is the user's own: never removed.
        if !outside_jobs {
            remove_job(path)?;
        }
        return Err(Exit::Ended(JobEnd::AlreadyPublished));
    };
    if !meta.file_type().is_file() || !owned_by_me(&meta) {
        return Err(not_a_job(state, path, name, &meta, outside_jobs)?);
    }
    Ok((interruptions, identity))
}

/// How a file that is not a job ends: moved to `rejected/` from `jobs/`, left where
/// it is anywhere else.
fn not_a_job(
    state: &StateDir,
    path: &Path,
    name: &OsStr,
    meta: &fs::Metadata,
    outside_jobs: bool,
) -> Result<Exit, LifecycleError> {
    if outside_jobs {
        let why = not_a_job_why(meta);
        tracing::warn!(file = %path.display(), "not a job ({why}): left where it is");
        return Ok(Exit::Ended(JobEnd::NotAJob { why }));
    }
    reject(state, path, name, meta)?;
    Ok(Exit::Ended(JobEnd::Rejected))
}

/// Claims a job. A claim whose recorded holder is dead can stay locked for a moment
/// (a runner forked by a judge that was just killed keeps its files until it
/// execs): wait for it, briefly, instead of leaving the job for the next rescan.
async fn acquire_claim(
    state: &StateDir,
    name: &OsStr,
    fsync: bool,
) -> Result<Acquired, ClaimError> {
    let deadline = Instant::now() + std::time::Duration::from_secs(3);
    loop {
        let acquired = claim::acquire(&state.claims(), name, fsync)?;
        match acquired {
            Acquired::Busy {
                holder_pid: Some(pid),
            } if !crate::process::os::is_alive(pid) && Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            other => return Ok(other),
        }
    }
}

/// Reads and parses the claimed job: the parsed job, or the judge error its verdict
/// reports; or how it ended (not a job, still being written in place).
fn read_claimed(
    settings: &Settings,
    state: &StateDir,
    path: &Path,
    name: &OsStr,
    claimed: Option<FileIdentity>,
    link: &WorkerLink,
) -> Step<Result<Job, JobError>> {
    let stem = stem_of(name);
    let (bytes, after) = match read_job(path, settings.config.max_job_bytes) {
        Err(NotAJob) => {
            // Swapped for a symlink, FIFO, folder or another user's file after the
            // checks: not a job.
            return Err(match fs::symlink_metadata(path) {
                Ok(meta) => not_a_job(state, path, name, &meta, link.outside_jobs)?,
                Err(_) if link.outside_jobs => Exit::Ended(JobEnd::Gone),
                Err(_) => Exit::Ended(JobEnd::Rejected),
            });
        }
        Ok(Err(unreadable)) => return Ok(Err(unreadable)),
        Ok(Ok(read)) => read,
    };
    let parsed = parse_job(&bytes, &stem, settings.config.timeouts());
    if let Some(settle) = link.settle
        && still_being_written(claimed, &bytes, &after, parsed.is_err(), settle)
    {
        return Err(Exit::Ended(JobEnd::Unsettled));
    }
    Ok(parsed)
}

/// Reads, judges and publishes a claimed job (running, under `claim`).
async fn judge_claimed(
    settings: &Settings,
    state: &StateDir,
    path: &Path,
    name: &OsStr,
    claim: &mut Started,
    services: &Services,
    link: &mut WorkerLink,
) -> Step<Verdict> {
    let record = claim.record();
    let (interruptions, tag, identity) = (record.interruptions, record.tag.clone(), record.job);
    let parsed = read_claimed(settings, state, path, name, identity, link)?;
    if let (Err(error), true) = (&parsed, link.outside_jobs) {
        // Not the judge's file: a verdict would remove it, and it may be anything.
        let why = error
            .reason
            .strip_prefix("judge error: ")
            .unwrap_or(&error.reason);
        tracing::warn!(file = %path.display(), "not a valid job ({why}): left where it is");
        return Err(Exit::Ended(JobEnd::Refused {
            why: why.to_string(),
        }));
    }
    if let Ok(job) = &parsed {
        claim.name_job(&job.id, &job.hook)?;
    }
    // One line, not two, for a job without a rule (docs/reference.md, "Job files"): a
    // `None` field is left out of the line.
    let no_rule = parsed.as_ref().ok().filter(|job| job.has_no_rule());
    let rule = no_rule.map(|_| NO_RULE);
    tracing::info!(file = %path.display(), interruptions, rule, "job claimed");
    if let Ok(job) = &parsed {
        log_job_notes(job);
    }
    let verdict = match parsed {
        Err(error) => {
            tracing::warn!(id = %error.id, file = %path.display(), reason = ?error.reason, "bad job");
            error_verdict(&error, now_unix())
        }
        Ok(job) if interruptions >= MAX_INTERRUPTIONS => {
            let reason = format!(
                "judge error: job was interrupted {interruptions} times while being judged \
                 (the judge crashed or was killed each time); not retried"
            );
            tracing::error!(id = %job.id, "{reason}");
            error_verdict(&as_error(&job, reason), now_unix())
        }
        Ok(job) => {
            let cwd = job_cwd(settings, &job).await;
            let cancel = link.cancel.take();
            let decided = decide(settings, &job, &cwd, &tag, claim, cancel, services).await;
            decided.ok_or_else(|| {
                tracing::info!(id = %job.id, "job stopped by shutdown; left queued");
                Exit::Ended(JobEnd::Stopped)
            })?
        }
    };
    let outcome = verdict.outcome;
    if let Some(events) = &link.events {
        // Before the rename, so `status` never lags a verdict someone already read.
        events.send(JobEvent::Publishing {
            outcome,
            attempts: &verdict.attempts,
        });
        // The slot's next job claims and starts its runner first; this publish then
        // runs while that runner does.
        tokio::task::yield_now().await;
    }
    let fsync = settings.config.fsync;
    let published = publish_blocking(state, claim, path, name, &verdict, fsync);
    if let (Err(_), Some(events)) = (&published, &link.events) {
        events.send(JobEvent::PublishFailed { outcome });
    }
    published?;
    // The verdict is out: the copy of a runner started ahead of jobs that this job
    // took is replaced now, and runners still exiting after their final event are
    // waited for while the claim still covers them.
    services.spawner.job_ended(&tag);
    if let Some(exiting) = &services.exiting {
        exiting.settle(&tag).await;
    }
    Ok(verdict)
}

/// Publishes the verdict, off the runtime's thread when it fsyncs.
fn publish_blocking(
    state: &StateDir,
    claim: &mut Started,
    path: &Path,
    name: &OsStr,
    verdict: &Verdict,
    fsync: bool,
) -> Result<(), LifecycleError> {
    // fsyncs block: let the runtime move other tasks off this thread meanwhile, so the
    // fsyncs of jobs finishing together overlap (and the journal commits them together).
    // Without fsyncs the publish is a few small writes and a rename, the same kind of
    // work as the claim's: handing the worker thread off (block_in_place) would cost
    // more than it saves (a state folder on a slow network filesystem stalls a worker).
    let mut publish_now = || publish(state, claim, path, name, verdict, fsync);
    if fsync {
        crate::support::runtime::blocking(publish_now)
    } else {
        publish_now()
    }
}

/// The verdict of a parsed job: from the cache, from an identical job running now,
/// or from the runners. `None` when shutdown stopped it.
async fn decide(
    settings: &Settings,
    job: &Job,
    cwd: &CwdChoice,
    tag: &str,
    claim: &mut Started,
    cancel: Option<Cancel>,
    services: &Services,
) -> Option<Verdict> {
    if let Some(why) = &settings.runner_error {
        // catstack's wording (its tests and users grep judge.log for it), then the cause.
        tracing::error!(id = %job.id, "job {} failed: {why}", job.id);
        let reason = format!("judge error: {why}");
        return Some(error_verdict(&as_error(job, reason), now_unix()));
    }
    let table = settings.table(job.mode);
    let overridden = settings.runner_override.is_some();
    let cached = CacheSlot::of(services, job, table, cwd, overridden);
    // The cache is read once this job leads its flight, and the leader keeps its answer
    // before it lets the flight go: a job never misses both (an identical job that
    // joins after the leader left finds the answer in the cache).
    let leader = match services
        .flights
        .as_ref()
        .map(|f| f.join(flight::key(job, table)))
    {
        Some(Flight::Follower(slot)) => {
            tracing::info!(id = %job.id, "an identical job is running: waiting for its answer");
            match until_cancelled(flight::follow(slot), cancel.as_ref()).await? {
                Some(shared) => {
                    return Some(verdict_for(job, shared.answer, shared.attempts, now_unix()));
                }
                None => None, // The leader stopped without a result: ask ourselves.
            }
        }
        Some(Flight::Leader(leader)) => Some(leader),
        None => None,
    };
    let verdict = match cached.as_ref().and_then(|slot| slot.verdict(job)) {
        Some(verdict) => verdict,
        None => {
            let verdict = judge_runners(settings, job, cwd, tag, claim, cancel, services).await?;
            if let Some(slot) = &cached {
                slot.remember(&verdict);
            }
            verdict
        }
    };
    if let Some(leader) = leader {
        leader.finish(FlightResult {
            answer: verdict.runner.clone().zip(verdict.answer.clone()),
            attempts: verdict.attempts.clone(),
        });
    }
    Some(verdict)
}

/// Runs `fut` unless `cancel` fires first (the same wait as a runner's stop).
async fn until_cancelled<T>(fut: impl Future<Output = T>, cancel: Option<&Cancel>) -> Option<T> {
    tokio::select! {
        biased;
        () = crate::process::spawn::stopped(cancel) => None,
        value = fut => Some(value),
    }
}

/// Judges with the runners; `None` when `cancel` fired (the running runner was then
/// stopped through its one kill path, SIGTERM, grace, SIGKILL).
async fn judge_runners(
    settings: &Settings,
    job: &Job,
    cwd: &CwdChoice,
    tag: &str,
    claim: &mut Started,
    cancel: Option<Cancel>,
    services: &Services,
) -> Option<Verdict> {
    let record_runner = |claim: &mut Started, runner: &str, pgid: u32| {
        // 0: the runner was not seen (it ended before its pid was known).
        let started = if pgid == 0 { None } else { start_time(pgid) };
        if let Err(e) = claim.runner_started(runner, pgid, started) {
            tracing::warn!(claim = %claim.path().display(), "cannot record runner: {e}", e = crate::support::error::Chain(&e));
        }
        crate::support::failpoint::crash("runner_started");
    };
    crate::engine::attempts::judge(
        settings,
        job,
        cwd,
        tag,
        services,
        cancel.as_ref(),
        |runner, pgid| record_runner(claim, runner, pgid),
    )
    .await
}

fn publish(
    state: &StateDir,
    claim: &mut Started,
    path: &Path,
    name: &OsStr,
    verdict: &Verdict,
    fsync: bool,
) -> Result<(), LifecycleError> {
    let dir = state.verdict_dir(&verdict.transcript);
    let file_name = state_dir::verdict_name(name);
    let target = dir.join(&file_name);
    let mut bytes = serde_json::to_vec(verdict).map_err(io::Error::other)?;
    bytes.push(b'\n');
    let temp = state_dir::write_temp(&dir, &file_name, &bytes, fsync)?;
    crate::support::failpoint::crash("verdict_temp_written");
    // Until the claim names it, dropping `temp` (an error here) removes it.
    claim.publishing(temp.path.clone(), target.clone())?;
    let temp = temp.keep();
    crate::support::failpoint::crash("publishing_recorded");
    if let Err(source) = fs::rename(&temp, &target) {
        let _ = fs::remove_file(&temp);
        return Err(LifecycleError::Rename { temp, source });
    }
    crate::support::failpoint::crash("verdict_renamed");
    // Published now, whatever happens next: a failed folder sync must not requeue it.
    if fsync && let Err(e) = state_dir::sync_dir(&dir) {
        tracing::error!("verdict published but not synced to disk: {e}");
    }
    tracing::debug!(file = %path.display(), verdict = %target.display(), "verdict published");
    Ok(())
}

/// Removes the job file we judged; a newer file of the same name (the producer
/// enqueued the same id again meanwhile) is another job and stays.
fn remove_judged_job(path: &Path, judged: Option<FileIdentity>) -> Result<(), LifecycleError> {
    let now = fs::symlink_metadata(path)
        .ok()
        .map(|m| FileIdentity::of(&m));
    if now.is_some() && judged.is_some() && now != judged {
        tracing::info!(file = %path.display(), "a newer job of the same name arrived meanwhile; it stays queued");
        return Ok(());
    }
    remove_job(path)
}

fn remove_job(path: &Path) -> Result<(), LifecycleError> {
    match fs::remove_file(path) {
        Err(source) if source.kind() != io::ErrorKind::NotFound => Err(LifecycleError::RemoveJob {
            path: path.to_path_buf(),
            source,
        }),
        _ => Ok(()),
    }
}

fn as_error(job: &Job, reason: String) -> JobError {
    JobError {
        reason,
        id: job.id.clone(),
        transcript: job.transcript.clone(),
        hook: job.hook.clone(),
        on_hit: job.on_hit.clone(),
        rule_id: job.rule_id.clone(),
    }
}
