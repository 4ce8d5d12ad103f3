//! Judging one parsed job: try the runners of its table in order, each in the job's
//! cwd or a fresh temp folder, and build the verdict.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::core::api::protocol::CallEnd;
use crate::core::api::retry;

use crate::core::config::Settings;
use crate::core::health::sign_of;
use crate::core::job::{Job, Mode};
use crate::core::runner::table::{Runner, RunnerKind};
use crate::core::spend::{CapReached, SpendEntry};
use crate::core::verdict::{
    Attempt, Judged, Output, RunEnd, Verdict, budget_verdict, judge_attempt, verdict_for,
};
use crate::engine::api_attempt::judge_api;
use crate::engine::events::Stopped;
use crate::engine::exiting::ExitingRunners;
use crate::engine::flight::Flights;
use crate::engine::job_cwd::CwdChoice;
use crate::engine::limits::RunnerLimits;
use crate::engine::spawner::{
    AttemptOutput, AttemptSpec, JobShared, Progress, RealSpawner, Spawner, Workdir,
};
use crate::engine::table_warning::InvestigateNotice;
use crate::process::spawn::{StopSignal, stopped};
use crate::store::cache::Cache;
use crate::store::health_store::HealthStore;
use crate::store::spend_ledger::{Reservation, SpendLedger};
use crate::store::state_dir::{StateDir, now_unix};
use std::sync::Arc;

/// What a judge may use beyond its runners (docs/reference.md, "Beyond catstack"; `ask`
/// uses health only), and how it starts them.
#[derive(Clone)]
pub struct Services {
    /// Benched runners go last; attempts update it.
    pub health: Option<HealthStore>,
    /// Answers reused within the TTL (default mode only).
    pub cache: Option<Cache>,
    /// Per-runner `max_concurrent` slots.
    pub limits: Arc<RunnerLimits>,
    /// Identical jobs running at once share one set of runner starts (daemon only).
    pub flights: Option<Arc<Flights>>,
    /// Starts the runner attempts: real processes (with runners started ahead of
    /// their jobs in the daemon), or a script in the job-run tests.
    pub spawner: Arc<dyn Spawner>,
    /// Records each runner run and holds jobs to the spend cap (daemon and `run`).
    pub spend: Option<Arc<SpendLedger>>,
    /// Runners let go after their final event, stopped while the job publishes its
    /// verdict and waited for before its claim goes (daemon and `run`); without it,
    /// each is stopped before its attempt ends (`ask`, `eval`).
    pub exiting: Option<Arc<ExitingRunners>>,
    /// The daemon's one look at the investigate table when the first investigate job
    /// comes (a warning when nothing can run it).
    pub investigate: Option<Arc<InvestigateNotice>>,
}

impl Default for Services {
    fn default() -> Self {
        Services {
            health: None,
            cache: None,
            limits: Arc::default(),
            flights: None,
            spawner: Arc::new(RealSpawner::default()),
            spend: None,
            exiting: None,
            investigate: None,
        }
    }
}

impl Services {
    /// Health and cache of the state folder as configured, with fresh limits.
    pub fn for_state(settings: &Settings, state: &StateDir) -> Self {
        crate::store::child_key::give_runners(state);
        let c = &settings.config;
        Services {
            health: HealthStore::open(state, &c.health, c.fsync),
            cache: Cache::open(state, &c.cache, c.fsync),
            spend: Some(Arc::new(SpendLedger::open(state, spend_durable(settings)))),
            exiting: Some(Arc::default()),
            ..Services::default()
        }
    }
}

/// The spend ledger is fsynced when verdicts are and a cap counts on it.
pub fn spend_durable(settings: &Settings) -> bool {
    settings.config.fsync && !settings.config.budget().is_unlimited()
}

/// A job's entry in the answer cache (docs/reference.md, "Beyond catstack"): a default-mode
/// job's, when the cache is on. Investigate answers depend on files that change, so they
/// are never kept.
pub struct CacheSlot<'a> {
    cache: &'a Cache,
    key: String,
}

impl<'a> CacheSlot<'a> {
    /// The slot of `job` judged by `table` in `cwd`, or `None` when the cache does not
    /// apply. The job's folder is part of the key when a runner of the table would be
    /// given it: the same question about two folders has two answers.
    pub fn of(services: &'a Services, job: &Job, plan: &Plan<'_>) -> Option<Self> {
        let cache = services.cache.as_ref()?;
        (job.mode == Mode::Default).then(|| CacheSlot {
            cache,
            key: crate::store::cache::key(job.mode, plan.table, &job.prompt, plan.job_folder()),
        })
    }

    /// The verdict from a fresh cached answer: its runner, the job's own hit keys, and
    /// the one attempt `cache`.
    pub fn verdict(&self, job: &Job) -> Option<Verdict> {
        let hit = self.cache.get(&self.key)?;
        tracing::info!(runner = %hit.runner, "cache hit: answer reused");
        let attempt = Attempt {
            runner: "cache".into(),
            ok: true,
            reason: "answered".into(),
            elapsed_ms: None,
            usage: None,
            cwd_refused: None,
        };
        Some(verdict_for(
            job,
            Some((hit.runner, hit.answer)),
            vec![attempt],
            now_unix(),
        ))
    }

    /// Keeps the answer of `verdict`; an unchecked one has none and is never kept.
    pub fn remember(&self, verdict: &Verdict) {
        if let (Some(runner), Some(answer)) = (&verdict.runner, &verdict.answer) {
            self.cache.put(&self.key, runner, answer);
        }
    }
}

/// How the runners of one job are tried: its table (the config's or the override's),
/// the job's folder, and which folder each runner gets (`cwd_for_runner`), so the
/// cache key and the attempts read one plan.
pub struct Plan<'a> {
    pub table: &'a [Runner],
    /// The job's folder (`engine::job_cwd::job_cwd`, checked when the job was read).
    pub cwd: CwdChoice,
    /// The override variable replaced the tables: its runners get the job's folder.
    overridden: bool,
}

impl<'a> Plan<'a> {
    /// The plan of `job` in `cwd`.
    pub fn new(settings: &'a Settings, job: &Job, cwd: CwdChoice) -> Self {
        Plan {
            table: settings.table(job.mode),
            cwd,
            overridden: settings.runner_override.is_some(),
        }
    }

    /// The folder `runner` gets.
    fn folder_of(&self, runner: &Runner) -> CwdChoice {
        cwd_for_runner(&self.cwd, runner, self.overridden)
    }

    /// The job's own folder when a CLI runner of the table gets it: the same question
    /// about two folders has two answers.
    fn job_folder(&self) -> Option<&std::path::Path> {
        let given = self
            .table
            .iter()
            .any(|r| r.is_cli() && matches!(self.folder_of(r), CwdChoice::Given(_)));
        match &self.cwd {
            CwdChoice::Given(dir) if given => Some(dir.as_path()),
            _ => None,
        }
    }
}

/// One job's judging, built once from its run: what every attempt shares (each
/// attempt's `AttemptSpec` borrows it), the services, and the plan.
pub struct Judging<'a> {
    pub shared: JobShared<'a>,
    pub services: &'a Services,
    pub plan: Plan<'a>,
}

impl<'a> Judging<'a> {
    /// The judging of `job` under `plan`, tagged `tag`, stopped by `stop`.
    pub fn new(services: &'a Services, job: &'a Job, plan: Plan<'a>, run: RunMarks<'a>) -> Self {
        Judging {
            shared: JobShared {
                settings: run.settings,
                job,
                tag: run.tag,
                stop: run.stop,
                exiting: services.exiting.as_deref(),
            },
            services,
            plan,
        }
    }
}

/// What a job's run brings to its judging: the settings, the claim's tag (each
/// runner's `LLM_JUDGE_TAG`) and the stop signal (which stops the running runner; the
/// job stays queued).
#[derive(Clone, Copy)]
pub struct RunMarks<'a> {
    pub settings: &'a Settings,
    pub tag: &'a str,
    pub stop: Option<&'a StopSignal>,
}

/// What happens while a job is judged, for its claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgeProgress<'a> {
    /// A runner's process started: its process group id (0: it ended before its pid
    /// was known).
    RunnerSpawned { runner: &'a str, pgid: u32 },
}

/// Tries the runners of `judging`'s plan in order (benched ones last) and returns the
/// verdict; `Err(Stopped)` when its stop fired (the running runner was stopped: the job
/// stays queued). `progress` hears of each runner started.
pub async fn judge(
    judging: &Judging<'_>,
    progress: &mut (dyn FnMut(JudgeProgress<'_>) + Send),
) -> Result<Verdict, Stopped> {
    let Judging {
        shared,
        services,
        plan,
    } = judging;
    let JobShared {
        settings,
        job,
        stop,
        ..
    } = shared;
    let mut attempts = Vec::new();
    let mut answer = None;
    let ordered = match &services.health {
        Some(health) => health.order(plan.table),
        None => plan.table.iter().collect(),
    };
    for runner in ordered {
        // Reserved before each runner start (and before waiting for its slot, so a
        // capped job ends at once): this process never passes the run cap.
        let reservation = match reserve(settings, services) {
            Ok(reservation) => reservation,
            Err(cap) => {
                let reason = cap.to_string();
                return Ok(budget_verdict(job, &reason, attempts, now_unix()));
            }
        };
        // Biased: a stop that already fired wins over a free slot.
        let _slot = tokio::select! {
            biased;
            () = stopped(*stop) => return Err(Stopped),
            slot = services.limits.acquire(runner) => slot,
        };
        let runner_cwd = plan.folder_of(runner);
        if let (CwdChoice::Given(dir), CwdChoice::Temp { .. }, true) =
            (&plan.cwd, &runner_cwd, runner.is_cli())
        {
            tracing::warn!(
                runner = %runner.name, cwd = %dir.display(),
                "runner is not read-only (it fails the investigate allowlist): it gets a fresh temp folder, not the job's cwd"
            );
        }
        let Tried {
            attempts: tries,
            found,
            end,
        } = try_runner(judging, runner, &runner_cwd, reservation, progress).await;
        if end == RunEnd::Stopped {
            return Err(Stopped);
        }
        // One health sign per runner and job, whatever its tries: the last one's.
        if let (Some(health), Some(last)) = (&services.health, tries.last()) {
            let sign = sign_of(&end, found.is_some());
            health.record(runner, sign, &last.reason);
        }
        attempts.extend(tries);
        if let Some(obj) = found {
            answer = Some((runner.name.clone(), obj));
            break;
        }
    }
    Ok(verdict_for(job, answer, attempts, now_unix()))
}

/// A run reserved under the spend cap (none without a ledger: `ask`, `eval`), or why
/// the cap stops it, logged at most once a minute.
fn reserve<'a>(
    settings: &Settings,
    services: &'a Services,
) -> Result<Option<Reservation<'a>>, CapReached> {
    let Some(spend) = services.spend.as_ref() else {
        return Ok(None);
    };
    let reason = match spend.reserve(&settings.config.budget()) {
        Ok(reservation) => return Ok(Some(reservation)),
        Err(reason) => reason,
    };
    if spend.budget_log_due() {
        tracing::warn!(
            "{reason}: jobs end unchecked without starting a runner (this line repeats at most once a minute)"
        );
    }
    Err(reason)
}

/// A run that started a process or sent a request: it may have cost something and
/// counts toward the cap.
fn started_a_process(end: &RunEnd) -> bool {
    !matches!(
        end,
        RunEnd::NotInstalled
            | RunEnd::SpawnFailed { .. }
            | RunEnd::NotConfigured { .. }
            | RunEnd::NotLoggedIn { .. }
    )
}

/// Only a runner that passes the investigate allowlist gets the job's own folder: any
/// other (cursor-agent applies edits to its workspace) works in a fresh one. The
/// override variable bypasses this, as it bypasses every safety check.
pub fn cwd_for_runner(cwd: &CwdChoice, runner: &Runner, overridden: bool) -> CwdChoice {
    match cwd {
        CwdChoice::Given(_) if !overridden && !crate::core::safety::is_read_only(runner) => {
            CwdChoice::Temp { refused: None }
        }
        other => other.clone(),
    }
}

/// One runner's tries for a job: every try is an attempt of the verdict; the answer,
/// if one came, and the last try's end.
struct Tried {
    attempts: Vec<Attempt>,
    found: Option<Map<String, Value>>,
    end: RunEnd,
}

/// Tries `runner`: once, and an API runner again after a failure that may pass
/// (`core::api::retry`: a refused or reset connection, 429, 5xx), up to three tries
/// within its retry budget and its timeout. Each try that sent a request is a run of
/// the spend ledger (the first under `reservation`, each retry reserved after its
/// wait: a reached cap keeps the failure). A stop during a wait ends it `Stopped`.
async fn try_runner<'s>(
    judging: &Judging<'s>,
    runner: &Runner,
    cwd: &CwdChoice,
    mut reservation: Option<Reservation<'s>>,
    progress: &mut (dyn FnMut(JudgeProgress<'_>) + Send),
) -> Tried {
    let full = Duration::from_secs_f64(judging.shared.job.timeout_seconds);
    let started = Instant::now();
    let mut tries = retry::Tries {
        made: 0,
        waited: Duration::ZERO,
        elapsed: Duration::ZERO,
    };
    let mut timeout = full;
    let mut attempts = Vec::new();
    loop {
        let one = attempt_runner(judging, runner, cwd, timeout, progress).await;
        if let Some(reservation) = reservation.take()
            && started_a_process(&one.end)
        {
            reservation.record(SpendEntry {
                at: now_unix(),
                runner: runner.name.clone(),
                answered: one.found.is_some(),
                usage: one.attempt.usage.clone(),
            });
        }
        tries.made += 1;
        tries.elapsed = started.elapsed();
        let reason = one.attempt.reason.clone();
        attempts.push(one.attempt);
        let next = match &one.call {
            Some(call) if one.found.is_none() && one.end != RunEnd::Stopped => {
                retry::next(call, tries, full, now_unix())
            }
            _ => retry::Next::Stop(retry::GiveUp::NotTransient),
        };
        match next {
            retry::Next::Stop(why) => {
                if let Some(why) = why.describe() {
                    tracing::warn!(
                        runner = %runner.name, tries = tries.made, reason = ?reason,
                        "model API failed and is not tried again: {why}"
                    );
                }
                return Tried {
                    attempts,
                    found: one.found,
                    end: one.end,
                };
            }
            retry::Next::Retry {
                wait,
                timeout: left,
            } => {
                tracing::warn!(
                    runner = %runner.name, reason = ?reason,
                    wait = %crate::core::verdict::human_number(wait.as_secs_f64()),
                    "model API failed (it may pass): try {} of {} after the wait",
                    tries.made + 1, retry::MAX_TRIES
                );
                tokio::select! {
                    biased;
                    () = stopped(judging.shared.stop) => {
                        return Tried { attempts, found: None, end: RunEnd::Stopped };
                    }
                    () = tokio::time::sleep(wait) => {}
                }
                tries.waited += wait;
                timeout = left;
                reservation = match reserve(judging.shared.settings, judging.services) {
                    Ok(reservation) => reservation,
                    Err(cap) => {
                        tracing::warn!(runner = %runner.name, "model API not tried again: {cap}");
                        return Tried {
                            attempts,
                            found: None,
                            end: one.end,
                        };
                    }
                };
            }
        }
    }
}

/// One try of a runner: its attempt, the answer it gave, how it ended, and, for an
/// API runner, how its request ended (what a retry is decided on).
struct OneTry {
    attempt: Attempt,
    found: Option<Map<String, Value>>,
    end: RunEnd,
    call: Option<CallEnd>,
}

/// Runs one runner through the spawner with `timeout` and judges how it ended;
/// `progress` hears of its process group as it starts.
async fn attempt_runner(
    judging: &Judging<'_>,
    runner: &Runner,
    cwd: &CwdChoice,
    timeout: Duration,
    progress: &mut (dyn FnMut(JudgeProgress<'_>) + Send),
) -> OneTry {
    let workdir = match cwd {
        CwdChoice::Given(path) => Workdir::Job(path),
        CwdChoice::Temp { .. } => Workdir::Fresh,
    };
    let kind = runner.kind();
    let spec = AttemptSpec {
        shared: &judging.shared,
        runner,
        kind,
        workdir,
        timeout,
    };
    // An API runner's start line names its protocol, model and base URL.
    let api = match kind {
        RunnerKind::Api(api) => Some(api),
        RunnerKind::Cli { .. } => None,
    };
    let mut on_step = |step: Progress<'_>| match step {
        Progress::Starting { cwd, prestarted } => tracing::info!(
            runner = %runner.name, timeout = %crate::core::verdict::human_number(timeout.as_secs_f64()),
            cwd = cwd.map(|dir| tracing::field::display(dir.display())),
            prestarted = prestarted.then_some(true),
            api = api.map(|a| a.protocol.name()),
            model = api.map(|a| tracing::field::display(&a.model)),
            base_url = api.map(|a| tracing::field::display(&a.base_url)), "runner start"
        ),
        Progress::Spawned { pgid } => progress(JudgeProgress::RunnerSpawned {
            runner: &runner.name,
            pgid,
        }),
    };
    let spawner = judging.services.spawner.as_ref();
    let (judged, end, elapsed, call) = match spawner.run(&spec, &mut on_step).await {
        AttemptOutput::Process(out) => {
            let output = Output {
                stdout: &out.stdout,
                stderr: &out.stderr,
                stdout_cut: out.stdout_cut,
                format: kind.output_format(),
            };
            let judged = judge_attempt(&runner.name, &out.end, output);
            (judged, out.end, out.elapsed, None)
        }
        AttemptOutput::Api(out) => {
            let (judged, end) = judge_api(&runner.name, kind, &out.end);
            (judged, end, out.elapsed, Some(out.end))
        }
    };
    let Judged {
        mut attempt,
        answer: found,
        refused_usage,
    } = judged;
    if let Some(why) = refused_usage {
        tracing::warn!(runner = %runner.name, "usage the runner reported is not counted: {why}");
    }
    attempt.elapsed_ms = Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
    // An API runner works in no folder: the job's cwd means nothing to it.
    attempt.cwd_refused = api.is_none().then(|| cwd_note(cwd)).flatten();
    // Fields of a runner that reported no usage are left out of the line.
    let usage = attempt.usage.as_ref();
    tracing::info!(
        runner = %runner.name, ok = attempt.ok, reason = ?attempt.reason,
        elapsed_ms = attempt.elapsed_ms.unwrap_or(0),
        input_tokens = usage.map(|u| u.input_tokens),
        cached_input_tokens = usage.map(|u| u.cached_input_tokens),
        output_tokens = usage.map(|u| u.output_tokens),
        cost_usd = usage.and_then(|u| u.cost_usd), "runner end"
    );
    OneTry {
        attempt,
        found,
        end,
        call,
    }
}

/// The note an attempt carries when the job's cwd was refused: why, clipped as reasons
/// are (the reason itself keeps its grammar).
fn cwd_note(cwd: &CwdChoice) -> Option<String> {
    cwd.refusal().map(|why| crate::core::verdict::clip(why, ""))
}
