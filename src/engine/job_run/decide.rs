//! A run's decision: the verdict of a parsed job, from the answer cache, from an
//! identical job running now (single flight), or from the runners in fallback order;
//! or `Stopped` when shutdown stopped it.

use std::future::Future;

use super::{JobRun, as_error};
use crate::core::job::{Job, Mode};
use crate::core::verdict::{Verdict, error_verdict, verdict_for};
use crate::engine::attempts::{CacheSlot, JudgeProgress, Judging, Plan, RunMarks, judge};
use crate::engine::flight::{self, Flight, FlightResult};
use crate::engine::job_cwd::job_cwd;
use crate::process::os::start_time;
use crate::store::claim::Running;
use crate::store::state_dir::now_unix;
use crate::support::error::Chained;

pub use crate::engine::events::Stopped;

impl JobRun<'_> {
    /// The verdict of `job`, judged under `claim` (which records each runner started).
    pub(super) async fn decide(
        &mut self,
        job: &Job,
        claim: &mut Running,
    ) -> Result<Verdict, Stopped> {
        let settings = self.settings;
        if let Some(why) = &settings.runner_error {
            // catstack's wording (its tests and users grep judge.log for it), then the cause.
            tracing::error!("job {} failed: {why}", job.id);
            return Ok(error_verdict(&as_error(job, why.to_string()), now_unix()));
        }
        if job.mode == Mode::Investigate
            && let Some(notice) = &self.services.investigate
        {
            notice.job_arrived(settings);
        }
        let tag = claim.record().tag.clone();
        let plan = Plan::new(settings, job, job_cwd(settings, job).await);
        let marks = RunMarks {
            settings,
            tag: &tag,
            stop: self.stop.as_ref(),
        };
        let judging = Judging::new(self.services, job, plan, marks);
        let table = judging.plan.table;
        let cached = CacheSlot::of(self.services, job, &judging.plan);
        // The cache is read once this job leads its flight, and the leader keeps its
        // answer before it lets the flight go: a job never misses both (an identical job
        // that joins after the leader left finds the answer in the cache).
        let leader = match self
            .services
            .flights
            .as_ref()
            .map(|f| f.join(flight::key(job, table)))
        {
            Some(Flight::Follower(slot)) => {
                tracing::info!("an identical job is running: waiting for its answer");
                match self.unless_stopped(flight::follow(slot)).await? {
                    Some(shared) => {
                        return Ok(verdict_for(job, shared.answer, shared.attempts, now_unix()));
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
                let mut record_runner = |step: JudgeProgress<'_>| {
                    let JudgeProgress::RunnerSpawned { runner, pgid } = step;
                    // 0: the runner was not seen (it ended before its pid was known).
                    let started = if pgid == 0 { None } else { start_time(pgid) };
                    if let Err(e) = claim.runner_started(runner, pgid, started) {
                        tracing::warn!(claim = %claim.path().display(), "cannot record runner: {e}", e = e.chain());
                    }
                    crate::support::failpoint::crash("runner_started");
                };
                let verdict = judge(&judging, &mut record_runner).await?;
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
        Ok(verdict)
    }

    /// Runs `fut` unless the run's stop signal fires first (the same wait as a
    /// runner's stop).
    async fn unless_stopped<T>(&self, fut: impl Future<Output = T>) -> Result<T, Stopped> {
        tokio::select! {
            biased;
            () = crate::process::spawn::stopped(self.stop.as_ref()) => Err(Stopped),
            value = fut => Ok(value),
        }
    }
}
