//! Judging one parsed job: try the runners of its table in order, each in the job's
//! cwd or a fresh temp folder, and build the verdict.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::core::config::Settings;
use crate::core::health::sign_of;
use crate::core::job::{Job, Mode};
use crate::core::runner_table::{Runner, build_invocation};
use crate::core::spend::SpendEntry;
use crate::core::usage::output_format;
use crate::core::verdict::{
    Attempt, Judged, Output, RunEnd, Verdict, budget_verdict, judge_attempt, verdict_for,
};
use crate::engine::codex_argv::prepared_argv;
use crate::engine::flight::Flights;
use crate::engine::job_cwd::CwdChoice;
use crate::engine::limits::RunnerLimits;
use crate::engine::prestart::{Prestart, Waiting};
use crate::engine::runner_folder::fresh_runner_folder;
use crate::engine::spawner::{Processes, Spawner};
use crate::process::spawn::{RunOutput, RunSpec, StopSignal, stopped};
use crate::store::cache::Cache;
use crate::store::health_store::HealthStore;
use crate::store::spend_ledger::{Reservation, SpendLedger};
use crate::store::state_dir::{StateDir, now_unix};
use std::sync::Arc;

/// What a judge may use beyond its runners (docs/reference.md, "Beyond catstack"; `ask`
/// uses health only), and how it starts them.
#[derive(Clone)]
pub struct Extras {
    /// Benched runners go last; attempts update it.
    pub health: Option<HealthStore>,
    /// Answers reused within the TTL (default mode only).
    pub cache: Option<Cache>,
    /// Per-runner `max_concurrent` slots.
    pub limits: Arc<RunnerLimits>,
    /// Identical jobs running at once share one set of runner starts (daemon only).
    pub flights: Option<Arc<Flights>>,
    /// Starts the runner attempts: real processes, or a script in the lifecycle tests.
    pub spawner: Arc<dyn Spawner>,
    /// Records each runner run and holds jobs to the spend cap (daemon and `run`).
    pub spend: Option<Arc<SpendLedger>>,
    /// Runners started ahead of their jobs (daemon only).
    pub prestart: Option<Arc<Prestart>>,
}

impl Default for Extras {
    fn default() -> Self {
        Extras {
            health: None,
            cache: None,
            limits: Arc::default(),
            flights: None,
            spawner: Arc::new(Processes::default()),
            spend: None,
            prestart: None,
        }
    }
}

impl Extras {
    /// Health and cache of the state folder as configured, with fresh limits.
    pub fn for_state(settings: &Settings, state: &StateDir) -> Self {
        let c = &settings.config;
        Extras {
            health: HealthStore::open(state, &c.health),
            cache: Cache::open(state, &c.cache),
            spend: Some(Arc::new(SpendLedger::open(state))),
            ..Extras::default()
        }
    }
}

/// A job's entry in the answer cache (docs/reference.md, "Beyond catstack"): a default-mode
/// job's, when the cache is on. Investigate answers depend on files that change, so they
/// are never kept.
pub struct CacheSlot<'a> {
    cache: &'a Cache,
    key: String,
}

impl<'a> CacheSlot<'a> {
    /// The slot of `job` judged by `table`, or `None` when the cache does not apply.
    pub fn of(extras: &'a Extras, job: &Job, table: &[Runner]) -> Option<Self> {
        let cache = extras.cache.as_ref()?;
        (job.mode == Mode::Default).then(|| CacheSlot {
            cache,
            key: crate::store::cache::key(job.mode, table, &job.prompt),
        })
    }

    /// The verdict from a fresh cached answer: its runner, the job's own hit keys, and
    /// the one attempt `cache`.
    pub fn verdict(&self, job: &Job) -> Option<Verdict> {
        let hit = self.cache.get(&self.key)?;
        tracing::info!(id = %job.id, runner = %hit.runner, "cache hit: answer reused");
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

/// Tries the runners for `job` in `cwd` (`engine::job_cwd::job_cwd`, checked when the
/// job was read) and returns its verdict; `None` when `stop` fired (the running runner
/// was stopped: the job stays queued). `on_spawn` gets each runner's name and process
/// group id as it starts.
pub async fn judge(
    settings: &Settings,
    job: &Job,
    cwd: &CwdChoice,
    tag: &str,
    extras: &Extras,
    stop: Option<&StopSignal>,
    mut on_spawn: impl FnMut(&str, u32) + Send,
) -> Option<Verdict> {
    let mut attempts = Vec::new();
    let mut answer = None;
    let table = settings.table(job.mode);
    let ordered = match &extras.health {
        Some(health) => health.order(table),
        None => table.iter().collect(),
    };
    let context = AttemptContext {
        settings,
        job,
        tag,
        stop,
        spawner: extras.spawner.as_ref(),
        prestart: extras.prestart.as_ref(),
    };
    for runner in ordered {
        // Reserved before each runner start (and before waiting for its slot, so a
        // capped job ends at once): this process never passes the run cap.
        let reservation = match reserve(settings, extras) {
            Ok(reservation) => reservation,
            Err(reason) => return Some(budget_verdict(job, &reason, attempts, now_unix())),
        };
        // Biased: a stop that already fired wins over a free slot.
        let _slot = tokio::select! {
            biased;
            () = stopped(stop) => return None,
            slot = extras.limits.acquire(runner, &job.id) => slot,
        };
        let runner_cwd = cwd_for_runner(cwd, runner, settings.runner_override.is_some());
        if let (CwdChoice::Given(dir), CwdChoice::Temp { .. }) = (cwd, &runner_cwd) {
            tracing::warn!(
                id = %job.id, runner = %runner.name, cwd = %dir.display(),
                "runner is not read-only (it fails the investigate allowlist): it gets a fresh temp folder, not the job's cwd"
            );
        }
        let (attempt, found, end) =
            attempt_runner(&context, runner, &runner_cwd, &mut on_spawn).await;
        if end == RunEnd::Stopped {
            return None;
        }
        if let Some(health) = &extras.health {
            let sign = sign_of(&end, found.is_some());
            health.record(runner, sign, &attempt.reason);
        }
        if let Some(reservation) = reservation
            && started_a_process(&end)
        {
            reservation.record(SpendEntry {
                at: now_unix(),
                runner: runner.name.clone(),
                answered: found.is_some(),
                usage: attempt.usage.clone(),
            });
        }
        attempts.push(attempt);
        if let Some(obj) = found {
            answer = Some((runner.name.clone(), obj));
            break;
        }
    }
    Some(verdict_for(job, answer, attempts, now_unix()))
}

/// A run reserved under the spend cap (none without a ledger: `ask`, `eval`), or the
/// `budget: ...` reason the cap stops it with, logged at most once a minute.
fn reserve<'a>(settings: &Settings, extras: &'a Extras) -> Result<Option<Reservation<'a>>, String> {
    let Some(spend) = extras.spend.as_ref() else {
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

/// A run that started a process: it may have cost something and counts toward the cap.
fn started_a_process(end: &RunEnd) -> bool {
    !matches!(end, RunEnd::NotInstalled | RunEnd::SpawnFailed { .. })
}

/// What every attempt of one job shares.
struct AttemptContext<'a> {
    settings: &'a Settings,
    job: &'a Job,
    tag: &'a str,
    stop: Option<&'a StopSignal>,
    spawner: &'a dyn Spawner,
    prestart: Option<&'a Arc<Prestart>>,
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

async fn attempt_runner(
    context: &AttemptContext<'_>,
    runner: &Runner,
    cwd: &CwdChoice,
    on_spawn: &mut (impl FnMut(&str, u32) + Send),
) -> (Attempt, Option<Map<String, Value>>, RunEnd) {
    let AttemptContext {
        settings,
        job,
        tag,
        stop,
        spawner,
        prestart,
    } = *context;
    // A runner that would work in a fresh folder may have one waiting in its own.
    let waiting = match cwd {
        CwdChoice::Temp { .. } => prestart.and_then(|p| p.take(runner)),
        CwdChoice::Given(_) => None,
    };
    // The temp folder lives until the attempt ends, then is removed with its content
    // (a waiting runner's goes with it).
    let waiting_dir = waiting.as_ref().map(|w| w.folder().to_path_buf());
    let temp;
    let dir: &Path = match (cwd, &waiting_dir) {
        (_, Some(folder)) => folder,
        (CwdChoice::Given(path), None) => path,
        (CwdChoice::Temp { .. }, None) => match fresh_runner_folder(settings) {
            Ok(made) => {
                temp = made;
                temp.path()
            }
            Err(e) => {
                let mut attempt = failed(
                    runner,
                    format!("{:?}: cannot create a temp folder: {e}", e.kind()),
                );
                attempt.cwd_refused = cwd_note(cwd);
                let end = RunEnd::SpawnFailed {
                    kind: "TempDir".into(),
                    message: String::new(),
                };
                return (attempt, None, end);
            }
        },
    };
    let argv = match prepared_argv(settings, job.mode, &runner.argv) {
        Ok(argv) => argv,
        Err(e) => {
            let attempt = failed(runner, format!("{:?}: {e}", e.kind()));
            let end = RunEnd::SpawnFailed {
                kind: "CodexFiles".into(),
                message: String::new(),
            };
            return (attempt, None, end);
        }
    };
    let invocation = build_invocation(&argv, &job.prompt);
    let c = &settings.config;
    let spec = RunSpec {
        argv: &invocation.argv,
        env: &runner.env,
        stdin: invocation.stdin.as_deref(),
        cwd: dir,
        timeout: Duration::from_secs_f64(job.timeout_seconds),
        kill_grace: Duration::from_secs_f64(c.kill_grace_seconds),
        tag,
        output_cap: c.output_cap_bytes,
        stop,
    };
    tracing::info!(
        id = %job.id, runner = %runner.name, timeout = %crate::core::verdict::human_number(job.timeout_seconds),
        cwd = %dir.display(), prestarted = waiting.is_some().then_some(true),
        "runner start"
    );
    let out = run_attempt(settings, spawner, prestart, &spec, waiting, &mut |pgid| {
        on_spawn(&runner.name, pgid)
    })
    .await;
    let output = Output {
        stdout: &out.stdout,
        stderr: &out.stderr,
        stdout_cut: out.stdout_cut,
        format: output_format(&runner.argv),
    };
    let Judged {
        mut attempt,
        answer: found,
        refused_usage,
    } = judge_attempt(&runner.name, &out.end, output);
    if let Some(why) = refused_usage {
        tracing::warn!(id = %job.id, runner = %runner.name, "usage the runner reported is not counted: {why}");
    }
    attempt.elapsed_ms = Some(u64::try_from(out.elapsed.as_millis()).unwrap_or(u64::MAX));
    attempt.cwd_refused = cwd_note(cwd);
    // Fields of a runner that reported no usage are left out of the line.
    let usage = attempt.usage.as_ref();
    tracing::info!(
        id = %job.id, runner = %runner.name, ok = attempt.ok, reason = ?attempt.reason,
        elapsed_ms = attempt.elapsed_ms.unwrap_or(0),
        input_tokens = usage.map(|u| u.input_tokens),
        cached_input_tokens = usage.map(|u| u.cached_input_tokens),
        output_tokens = usage.map(|u| u.output_tokens),
        cost_usd = usage.and_then(|u| u.cost_usd), "runner end"
    );
    (attempt, found, out.end)
}

/// Runs the attempt: gives a waiting runner its prompt, else spawns one. A waiting one
/// that printed before its prompt is refused (discarded, `Prestart::refuse`) and the
/// job spawns its own, in a fresh folder (the copy's goes with the copy).
async fn run_attempt(
    settings: &Settings,
    spawner: &dyn Spawner,
    prestart: Option<&Arc<Prestart>>,
    spec: &RunSpec<'_>,
    waiting: Option<Waiting>,
    on_spawn: &mut (dyn FnMut(u32) + Send),
) -> RunOutput {
    let Some(waiting) = waiting else {
        return spawner.run(spec, on_spawn).await;
    };
    on_spawn(waiting.pgid());
    let broken = match waiting.finish(&spec.to_prompt()).await {
        Ok(out) => return out,
        Err(broken) => broken,
    };
    if let Some(prestart) = prestart {
        prestart.refuse(broken, "printed on stdout before its prompt");
    }
    match fresh_runner_folder(settings) {
        Ok(folder) => {
            let spec = RunSpec {
                cwd: folder.path(),
                ..*spec
            };
            spawner.run(&spec, on_spawn).await
        }
        Err(e) => RunOutput {
            end: RunEnd::SpawnFailed {
                kind: format!("{:?}", e.kind()),
                message: format!("cannot create a temp folder: {e}"),
            },
            stdout: String::new(),
            stderr: String::new(),
            stdout_cut: None,
            elapsed: Duration::ZERO,
        },
    }
}

fn failed(runner: &Runner, reason: String) -> Attempt {
    Attempt {
        runner: runner.name.clone(),
        ok: false,
        reason: crate::core::verdict::clip(&reason, ""),
        elapsed_ms: Some(0),
        usage: None,
        cwd_refused: None,
    }
}

/// The note an attempt carries when the job's cwd was refused: why, clipped as reasons
/// are (the reason itself keeps its grammar).
fn cwd_note(cwd: &CwdChoice) -> Option<String> {
    cwd.refusal().map(|why| crate::core::verdict::clip(why, ""))
}
