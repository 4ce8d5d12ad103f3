//! The seam between judging and starting runners: a `Spawner` runs one runner
//! attempt (a runner of the table, a job's prompt, a folder, a timeout), not a
//! process. Everything the engine starts goes through it: `RealSpawner` starts runner
//! processes and sends an API runner's one request (the daemon, `run`, `ask`, `eval`),
//! `engine::prestart::Prestarting` wraps another spawner and gives a job a runner
//! started ahead of it, and the in-process job-run tests plug in a scripted one, so
//! the job logic runs without processes or servers.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::api::protocol::CallEnd;
use crate::core::api::spec::ApiSpec;
use crate::core::config::Settings;
use crate::core::job::{Job, Mode};
use crate::core::runner::output_format::OutputFormat;
use crate::core::runner::table::{
    Runner, RunnerKind, build_invocation, stdin_payload, waiting_argv,
};
use crate::core::verdict::RunEnd;
use crate::engine::codex_argv::prepared_argv;
use crate::engine::exiting::{Ended, ExitingRunners, collect_output};
use crate::engine::runner_folder::RunnerFolders;
use crate::process::api_call::{ApiClient, ApiRequest};
use crate::process::pool::SupervisorPool;
use crate::process::spawn::StopSignal;
use crate::process::spawn::{
    self, Launcher, PromptSpec, RunOutput, RunSpec, Running, StartSpec, missing_login,
    resolve_program,
};

/// A boxed future that may move between threads.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where an attempt works.
#[derive(Debug, Clone, Copy)]
pub enum Workdir<'a> {
    /// The job's own folder (a read-only runner given the job's cwd).
    Job(&'a Path),
    /// A fresh private folder made for the attempt (`engine::runner_folder`), removed
    /// with its content when the attempt ends; a pre-started runner brings its own.
    Fresh,
}

/// What every attempt of one job shares, built once for the job (in its
/// `engine::attempts::Judging`).
pub struct JobShared<'a> {
    /// Where runner folders go, the kill grace and the output cap.
    pub settings: &'a Settings,
    /// The job: its prompt and timeout.
    pub job: &'a Job,
    /// The claim's tag, put in the environment as `LLM_JUDGE_TAG`.
    pub tag: &'a str,
    /// Shutdown: stop the runner now (SIGTERM, grace, SIGKILL, as at the timeout).
    pub stop: Option<&'a StopSignal>,
    /// Where a runner that gave its final event before it exited is let go, under
    /// `tag`; without it, such a runner is stopped before the attempt ends.
    pub exiting: Option<&'a ExitingRunners>,
}

/// One runner attempt, as the seam gets it: the runner, borrowing the rest from what
/// its job's attempts share.
pub struct AttemptSpec<'a> {
    pub shared: &'a JobShared<'a>,
    /// The runner's table entry.
    pub runner: &'a Runner,
    /// `runner.kind()`, worked out once for the attempt.
    pub kind: RunnerKind<'a>,
    pub workdir: Workdir<'a>,
    /// This attempt's timeout: the job's per-runner timeout, or what is left of it
    /// for an API runner's retry (`core::api::retry`).
    pub timeout: Duration,
}

impl<'a> AttemptSpec<'a> {
    pub fn settings(&self) -> &'a Settings {
        self.shared.settings
    }

    pub fn job(&self) -> &'a Job {
        self.shared.job
    }

    pub fn tag(&self) -> &'a str {
        self.shared.tag
    }

    pub fn stop(&self) -> Option<&'a StopSignal> {
        self.shared.stop
    }

    pub fn exiting(&self) -> Option<&'a ExitingRunners> {
        self.shared.exiting
    }
}

impl AttemptSpec<'_> {
    /// The attempt's timeout, counted from when the runner gets its prompt.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How long a stopped runner gets between SIGTERM and SIGKILL.
    pub fn kill_grace(&self) -> Duration {
        self.settings().config.kill_grace_seconds
    }
}

/// How an attempt ended, as the seam reports it.
#[derive(Debug)]
pub enum AttemptOutput {
    /// A runner process's end and output (a CLI runner).
    Process(RunOutput),
    /// An API runner's one request.
    Api(ApiOutput),
}

/// How an API runner's request ended, and how long it took.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiOutput {
    pub end: CallEnd,
    pub elapsed: Duration,
}

impl From<RunOutput> for AttemptOutput {
    fn from(out: RunOutput) -> Self {
        AttemptOutput::Process(out)
    }
}

/// What an attempt tells its caller as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'p> {
    /// It starts now, in `cwd` (`None`: it works in no folder), with a runner that was
    /// started ahead of its job when `prestarted`.
    Starting {
        cwd: Option<&'p Path>,
        prestarted: bool,
    },
    /// Its runner's process group (= pid), the moment it is known: the claim records
    /// it before the attempt goes on, so a crash right after can still stop it.
    Spawned { pgid: u32 },
}

/// Hears an attempt's `Progress`.
pub type OnProgress<'a> = dyn FnMut(Progress<'_>) + Send + 'a;

/// What starting a runner ahead of its job needs: no job data at all.
pub struct WaitSpec<'a> {
    /// The output cap and the kill grace.
    pub settings: &'a Settings,
    pub runner: &'a Runner,
    /// The fresh private folder it waits in.
    pub cwd: &'a Path,
    /// Put in the environment as `LLM_JUDGE_TAG`.
    pub tag: &'a str,
}

/// Runs runner attempts: the one way the engine starts a runner.
pub trait Spawner: Send + Sync {
    /// Runs `spec` to its end, honouring its timeout and stop signal (ending
    /// `TimedOut` / `Stopped`), and telling `progress` as it starts: a CLI runner's
    /// process, or an API runner's request.
    fn run<'a>(
        &'a self,
        spec: &'a AttemptSpec<'a>,
        progress: &'a mut OnProgress<'_>,
    ) -> BoxFuture<'a, AttemptOutput>;

    /// Starts `spec.runner` ahead of its job, waiting for its prompt (`prestart = N`);
    /// how its start ended when it could not. A kind that cannot wait says so.
    fn start_waiting<'a>(
        &'a self,
        spec: &'a WaitSpec<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn WaitingRunner>, RunEnd>> {
        let _ = spec;
        Box::pin(async {
            Err(RunEnd::SpawnFailed {
                kind: std::io::ErrorKind::Unsupported,
                message: "this runner kind cannot be started ahead of its job".into(),
            })
        })
    }

    /// The job tagged `tag` is over: its verdict is published (or it ended without
    /// one). A runner started ahead of its jobs that the job took is replaced now, so
    /// the replacement's start never slows the verdict.
    fn job_ended(&self, tag: &str) {
        let _ = tag;
    }
}

impl<T: Spawner + ?Sized> Spawner for Arc<T> {
    fn run<'a>(
        &'a self,
        spec: &'a AttemptSpec<'a>,
        progress: &'a mut OnProgress<'_>,
    ) -> BoxFuture<'a, AttemptOutput> {
        (**self).run(spec, progress)
    }

    fn start_waiting<'a>(
        &'a self,
        spec: &'a WaitSpec<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn WaitingRunner>, RunEnd>> {
        (**self).start_waiting(spec)
    }

    fn job_ended(&self, tag: &str) {
        (**self).job_ended(tag)
    }
}

/// A runner started ahead of its job, waiting for its prompt. It serves one job
/// (`finish`) or none (`discard`); dropped unfinished, it is killed.
pub trait WaitingRunner: Send {
    /// Its process group (= pid; 0 when it could not be seen).
    fn pgid(&self) -> u32;

    /// True once it ended on its own; never waits. A runner waiting for its prompt
    /// should not have.
    fn has_ended(&self) -> bool;

    /// Everything it printed on stdout so far, read now without waiting (bounded). It
    /// has no job yet: whatever is here came before its prompt.
    fn stdout_so_far(&mut self) -> &[u8];

    /// Gives it the job of `spec`: its prompt, then runs it to its end (or its final
    /// event: then `Ended::rest` stops it) within the job's timeout, counted from now.
    fn finish<'a>(self: Box<Self>, spec: &'a AttemptSpec<'a>) -> BoxFuture<'a, Ended>;

    /// Stops it unused, the way a timeout stops a runner (SIGTERM to its group,
    /// `kill_grace`, SIGKILL; at once if it already ended).
    fn discard(self: Box<Self>, kill_grace: Duration) -> BoxFuture<'static, ()>;
}

/// Real runner processes, each under its own supervisor (`process::spawn`): a pooled
/// one when there is a pool (the daemon), else one forked per attempt (`run`, `ask`);
/// and real API requests on one HTTP client, shared by every clone, whose connections
/// stay open for as long as it lives (the daemon's: its whole life, across reloads).
#[derive(Clone)]
pub struct RealSpawner {
    launcher: Launcher,
    api: Arc<ApiClient>,
    folders: Arc<RunnerFolders>,
}

impl Default for RealSpawner {
    fn default() -> Self {
        RealSpawner::new(None)
    }
}

impl RealSpawner {
    /// Runner processes under supervisors from `pool` (the daemon's), else forked per
    /// attempt; this process's environment is read now, once.
    pub fn new(pool: Option<Arc<SupervisorPool>>) -> Self {
        RealSpawner {
            launcher: Launcher::new(pool),
            api: Arc::default(),
            folders: Arc::default(),
        }
    }

    /// What makes its runners' folders, to share with pre-start (one home per process).
    pub fn folders(&self) -> Arc<RunnerFolders> {
        self.folders.clone()
    }

    /// Builds the HTTP client of API runners now (it reads the system's certificates),
    /// so the first verdict does not pay for it.
    pub fn warm_api(&self) {
        self.api.warm();
    }

    /// An API runner's attempt: one request with the job's prompt, in no folder.
    async fn call_api(
        &self,
        spec: &AttemptSpec<'_>,
        api: &ApiSpec,
        progress: &mut OnProgress<'_>,
    ) -> AttemptOutput {
        progress(Progress::Starting {
            cwd: None,
            prestarted: false,
        });
        let request = ApiRequest {
            spec: api,
            prompt: &spec.job().prompt,
            timeout: spec.timeout(),
            cap: spec.settings().config.output_cap_bytes,
            stop: spec.stop(),
        };
        let started = Instant::now();
        let end = self.api.call(&request).await;
        AttemptOutput::Api(ApiOutput {
            end,
            elapsed: started.elapsed(),
        })
    }

    async fn run_process(
        &self,
        spec: &AttemptSpec<'_>,
        (table_argv, format): (&[String], OutputFormat),
        progress: &mut OnProgress<'_>,
    ) -> RunOutput {
        let withheld = spec.settings().api_key_vars();
        if let Some(end) = not_logged_in(spec.runner, &withheld) {
            return RunOutput::not_started(end, Instant::now());
        }
        // A fresh folder lives until the runner is gone, then goes with its content.
        let mut fresh = None;
        let cwd = match spec.workdir {
            Workdir::Job(dir) => dir,
            Workdir::Fresh => match self.folders.fresh(spec.settings()) {
                Ok(made) => fresh.insert(made).path(),
                Err(e) => {
                    return RunOutput::not_started(
                        RunEnd::SpawnFailed {
                            kind: e.kind(),
                            message: e.to_string(),
                        },
                        Instant::now(),
                    );
                }
            },
        };
        let argv = match prepared_argv(spec.settings(), spec.job().mode, table_argv) {
            Ok(argv) => argv,
            Err(e) => {
                let end = RunEnd::SpawnFailed {
                    kind: e.kind(),
                    message: e.to_string(),
                };
                return RunOutput::not_started(end, Instant::now());
            }
        };
        progress(Progress::Starting {
            cwd: Some(cwd),
            prestarted: false,
        });
        let invocation = build_invocation(&argv, &spec.job().prompt);
        let run = RunSpec {
            argv: &invocation.argv,
            env: &spec.runner.env,
            withheld: &withheld,
            stdin: invocation.stdin.as_deref(),
            cwd,
            timeout: spec.timeout(),
            kill_grace: spec.kill_grace(),
            tag: spec.tag(),
            output_cap: spec.settings().config.output_cap_bytes,
            stop: spec.stop(),
            format,
        };
        let finished = spawn::run(&run, &self.launcher, |pgid| {
            progress(Progress::Spawned { pgid })
        })
        .await;
        collect_output(finished.into(), fresh, spec.exiting(), spec.tag()).await
    }
}

impl Spawner for RealSpawner {
    fn run<'a>(
        &'a self,
        spec: &'a AttemptSpec<'a>,
        progress: &'a mut OnProgress<'_>,
    ) -> BoxFuture<'a, AttemptOutput> {
        Box::pin(async move {
            match spec.kind {
                RunnerKind::Api(api) => self.call_api(spec, api, progress).await,
                RunnerKind::Cli { argv, format } => self
                    .run_process(spec, (argv, format), progress)
                    .await
                    .into(),
            }
        })
    }

    fn start_waiting<'a>(
        &'a self,
        spec: &'a WaitSpec<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn WaitingRunner>, RunEnd>> {
        Box::pin(async move {
            // The table refuses `prestart` on an API runner; this keeps the seam honest.
            let RunnerKind::Cli {
                argv: table_argv, ..
            } = spec.runner.kind()
            else {
                return Err(RunEnd::SpawnFailed {
                    kind: std::io::ErrorKind::Unsupported,
                    message: "an API runner starts no process, so none can wait".into(),
                });
            };
            let withheld = spec.settings.api_key_vars();
            if let Some(end) = not_logged_in(spec.runner, &withheld) {
                return Err(end);
            }
            // Pre-started copies are of default-table runners only.
            let argv = match prepared_argv(spec.settings, Mode::Default, table_argv) {
                Ok(argv) => argv,
                Err(e) => {
                    tracing::warn!(runner = %spec.runner.name, "cannot pre-start: {e}");
                    return Err(RunEnd::SpawnFailed {
                        kind: e.kind(),
                        message: e.to_string(),
                    });
                }
            };
            // The table's check let only runners that can wait have `prestart`.
            let Some(argv) = waiting_argv(&argv) else {
                return Err(RunEnd::SpawnFailed {
                    kind: std::io::ErrorKind::Unsupported,
                    message: "its argv needs the prompt before it starts".into(),
                });
            };
            let start = StartSpec {
                argv: &argv,
                env: &spec.runner.env,
                withheld: &withheld,
                cwd: spec.cwd,
                tag: spec.tag,
                stdin_piped: true,
                output_cap: spec.settings.config.output_cap_bytes,
            };
            let running = Running::start(&start, &self.launcher).await?;
            Ok(Box::new(WaitingProcess { running, argv }) as Box<dyn WaitingRunner>)
        })
    }
}

/// `NotLoggedIn` for an installed CLI runner whose login is nowhere to be seen: it is
/// not started (a logged-out codex waits for its network until the job's timeout).
fn not_logged_in(runner: &Runner, withheld: &[&str]) -> Option<RunEnd> {
    let detail = missing_login(runner, withheld)?;
    // A program that is not there is "not installed", as before.
    let installed = runner
        .argv
        .first()
        .is_some_and(|p| resolve_program(p).is_some());
    installed.then_some(RunEnd::NotLoggedIn { detail })
}

/// A runner process started ahead of its job (`process::spawn::Running`).
struct WaitingProcess {
    running: Running,
    /// The argv it runs (`waiting_argv`): its prompt goes on stdin as this argv reads it.
    argv: Vec<String>,
}

impl WaitingRunner for WaitingProcess {
    fn pgid(&self) -> u32 {
        self.running.pgid()
    }

    fn has_ended(&self) -> bool {
        self.running.has_ended()
    }

    fn stdout_so_far(&mut self) -> &[u8] {
        self.running.stdout_so_far()
    }

    fn finish<'a>(self: Box<Self>, spec: &'a AttemptSpec<'a>) -> BoxFuture<'a, Ended> {
        Box::pin(async move {
            let stdin = stdin_payload(&self.argv, &spec.job().prompt);
            let prompt = PromptSpec {
                stdin: Some(&stdin),
                timeout: spec.timeout(),
                kill_grace: spec.kill_grace(),
                stop: spec.stop(),
                format: spec.kind.output_format(),
            };
            self.running.finish(&prompt, Instant::now()).await.into()
        })
    }

    fn discard(self: Box<Self>, kill_grace: Duration) -> BoxFuture<'static, ()> {
        Box::pin(self.running.discard(kill_grace))
    }
}
