//! Running one runner process (docs/reference.md, "Runners"): its own process group, stdin from
//! /dev/null or the prompt, capped concurrent reads of stdout and stderr, and the
//! timeout sequence SIGTERM, grace, SIGKILL to the group.
//!
//! Its parts: `control` (what the daemon tells a running job), `attempt` (the
//! supervisor's state and the one kill path, `terminate`), `capture` (the capped tails
//! of stdout and stderr) and `env` (the runner's environment and program).

mod attempt;
mod capture;
mod control;
mod env;

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;

use crate::core::runner::env::RunnerEnv;
use crate::core::runner::output_format::OutputFormat;
use crate::core::verdict::RunEnd;
use crate::core::verdict::usage::FinalWatch;
use crate::process::pool::SupervisorPool;
use crate::process::supervisor::{self, Launch, Report};
use attempt::{Attempt, outer_pid};
use capture::{Lines, Tail};
pub use control::{Control, StopSignal, stopped};
pub use env::{
    CHILD_TOKEN_VAR, CHILD_VAR, find_on_path, has_child_token, is_installed, missing_login,
    resolve_program, set_child_token,
};
use env::{inherited_env, runner_env};

/// How long to wait for pipes to close once the runner and its tree are gone.
const PIPE_DRAIN: Duration = Duration::from_secs(2);
/// How long the supervisor may take to start the runner, or to report once the
/// runner's group was SIGKILLed (its sweep included).
const REPORT_WAIT: Duration = Duration::from_secs(10);

/// What to run.
pub struct RunSpec<'a> {
    pub argv: &'a [String],
    /// The runner table's own variables, on top of the runner environment.
    pub env: &'a RunnerEnv,
    /// Inherited variables it must not see unless `env` sets them (the tables' API keys).
    pub withheld: &'a [&'a str],
    /// The prompt when it goes on stdin.
    pub stdin: Option<&'a str>,
    pub cwd: &'a Path,
    pub timeout: Duration,
    pub kill_grace: Duration,
    /// Put in the environment as `LLM_JUDGE_TAG` to find escaped descendants.
    pub tag: &'a str,
    /// Bytes of each stream kept (the tail).
    pub output_cap: usize,
    /// Shutdown: stop the runner now (SIGTERM, grace, SIGKILL, as at the timeout).
    pub stop: Option<&'a StopSignal>,
    /// How its stdout is read: a format with a final event ends the wait there.
    pub format: OutputFormat,
}

impl<'a> RunSpec<'a> {
    /// What starting the runner needs (a pre-started one had it before its job).
    pub fn to_start(&self) -> StartSpec<'a> {
        StartSpec {
            argv: self.argv,
            env: self.env,
            withheld: self.withheld,
            cwd: self.cwd,
            tag: self.tag,
            stdin_piped: self.stdin.is_some(),
            output_cap: self.output_cap,
        }
    }

    /// What a started runner gets: its prompt, its timeout and its stop signal.
    pub fn to_prompt(&self) -> PromptSpec<'a> {
        PromptSpec {
            stdin: self.stdin,
            timeout: self.timeout,
            kill_grace: self.kill_grace,
            stop: self.stop,
            format: self.format,
        }
    }
}

/// What a started runner gets from its job.
pub struct PromptSpec<'a> {
    /// The prompt when it goes on stdin.
    pub stdin: Option<&'a str>,
    /// Counted from when the prompt is given.
    pub timeout: Duration,
    pub kill_grace: Duration,
    /// Shutdown: stop the runner now (SIGTERM, grace, SIGKILL, as at the timeout).
    pub stop: Option<&'a StopSignal>,
    /// How its stdout is read: a format with a final event ends the wait there
    /// (`core::verdict::usage::FinalWatch`).
    pub format: OutputFormat,
}

/// How a runner ended and what it printed (tails, read lossily).
#[derive(Debug)]
pub struct RunOutput {
    pub end: RunEnd,
    pub stdout: String,
    pub stderr: String,
    /// The output cap when it dropped the start of stdout: the tail's first line is
    /// then partial and never an answer.
    pub stdout_cut: Option<usize>,
    pub elapsed: Duration,
}

/// How this process starts runners: under a supervisor from the daemon's pool, else
/// one forked per attempt (`run`, `ask`), with the environment every runner inherits.
/// The judge never changes its own environment, so it is read and filtered once, when
/// the launcher is made.
#[derive(Clone)]
pub struct Launcher {
    pool: Option<Arc<SupervisorPool>>,
    /// This process's environment minus the service manager's variables and our own
    /// markers, as `KEY=value` (`inherited_env`).
    inherited: Arc<[CString]>,
}

impl Launcher {
    /// A launcher using `pool` (the daemon's) when there is one.
    pub fn new(pool: Option<Arc<SupervisorPool>>) -> Self {
        Launcher {
            pool,
            inherited: inherited_env(std::env::vars_os()).into(),
        }
    }
}

/// Runs one runner to its end, or to its final event, under its own supervisor (see
/// supervisor/), so nothing it started outlives the attempt (one still running after
/// its final event comes back as `Finished::lingering`, to be stopped). `on_spawn`
/// gets the runner's pid (= process group id).
pub async fn run(spec: &RunSpec<'_>, launcher: &Launcher, on_spawn: impl FnOnce(u32)) -> Finished {
    let started = Instant::now();
    match Running::start(&spec.to_start(), launcher).await {
        Ok(running) => {
            on_spawn(running.pgid());
            running.finish(&spec.to_prompt(), started).await
        }
        Err(end) => RunOutput::not_started(end, started).into(),
    }
}

/// What to start: a runner's argv, folder and tag, before any job data but the argv.
pub struct StartSpec<'a> {
    pub argv: &'a [String],
    /// The runner table's own variables, on top of the runner environment.
    pub env: &'a RunnerEnv,
    /// Inherited variables it must not see unless `env` sets them (the tables' API keys).
    pub withheld: &'a [&'a str],
    pub cwd: &'a Path,
    /// Put in the environment as `LLM_JUDGE_TAG` to find escaped descendants.
    pub tag: &'a str,
    /// Whether stdin is a pipe we hold (the prompt goes there), else /dev/null.
    pub stdin_piped: bool,
    /// Bytes of each stream kept (the tail).
    pub output_cap: usize,
}

/// A runner process that has started: its supervisor reported the spawn. Its stdout
/// and stderr are read, and its stdin written, once `finish` runs; until then it may
/// wait (a pre-started runner waits for its prompt). Dropped unfinished, it is killed.
pub struct Running {
    attempt: Attempt,
    tag: String,
    output_cap: usize,
    /// What it printed on stdout before `finish` (a pre-started runner, before its
    /// prompt): read by `stdout_so_far`, it goes first into the output `finish` reads.
    early: Vec<u8>,
}

/// At most this much stdout is read before the prompt (`Running::stdout_so_far`).
pub const EARLY_OUTPUT_CAP: usize = 64 * 1024;

impl Running {
    /// Starts the runner under its supervisor; the end (`NotInstalled`, `SpawnFailed`)
    /// when it could not be started.
    pub async fn start(spec: &StartSpec<'_>, launcher: &Launcher) -> Result<Running, RunEnd> {
        let Some(program) = spec.argv.first().and_then(|p| resolve_program(p)) else {
            return Err(RunEnd::NotInstalled);
        };
        let pool = launcher.pool.as_ref();
        let launch =
            runner_env(spec.tag, spec.env, spec.withheld, &launcher.inherited).map(|env| Launch {
                program: &program,
                argv: spec.argv,
                env,
                cwd: spec.cwd,
                stdin_piped: spec.stdin_piped,
            });
        let forked = launch.and_then(supervisor::prepare).and_then(|prepared| {
            let started = start_supervisor(prepared, pool)?;
            Ok(Attempt::new(started, pool.cloned())?)
        });
        let mut attempt = match forked {
            Ok(attempt) => attempt,
            Err(e) => return Err(spawn_failed(e.kind(), &e)),
        };
        let pgid = match attempt.next_report(REPORT_WAIT).await {
            Some(Report::Spawned(pid)) => Some(pid),
            // Gone already (or no /proc): the runner's group is then stopped by stopping
            // its supervisor, which takes its whole namespace with it.
            Some(Report::SpawnedInNamespace(inner)) => outer_pid(attempt.supervisor, inner),
            Some(Report::SpawnFailed(errno)) => {
                let e = std::io::Error::from_raw_os_error(errno);
                attempt.finish(spec.tag).await;
                return Err(spawn_failed(e.kind(), &e));
            }
            other => {
                attempt.finish(spec.tag).await;
                let message = format!("the runner's supervisor did not start it ({other:?})");
                return Err(RunEnd::SpawnFailed {
                    kind: std::io::ErrorKind::Other,
                    message,
                });
            }
        };
        attempt.runner = pgid;
        Ok(Running {
            attempt,
            tag: spec.tag.to_string(),
            output_cap: spec.output_cap,
            early: Vec::new(),
        })
    }

    /// Everything it has printed on stdout so far, read now without waiting (up to
    /// `EARLY_OUTPUT_CAP` bytes, and a little more when there is more). A runner waiting
    /// for its prompt has no job to answer yet: whatever is here came before it.
    pub fn stdout_so_far(&mut self) -> &[u8] {
        if let Some(fd) = &self.attempt.stdout {
            // Nonblocking, as the reader `finish` starts wants it anyway.
            let _ = rustix::io::ioctl_fionbio(fd, true);
            let mut chunk = [0u8; 4096];
            while self.early.len() <= EARLY_OUTPUT_CAP {
                match rustix::io::read(fd, &mut chunk) {
                    Ok(0) => break,
                    Ok(n) => self.early.extend_from_slice(&chunk[..n]),
                    Err(rustix::io::Errno::INTR) => continue,
                    // Nothing more now (EAGAIN), or a broken pipe: stop reading.
                    Err(_) => break,
                }
            }
        }
        &self.early
    }

    /// The runner's pid (= process group id); 0 when it could not be seen.
    pub fn pgid(&self) -> u32 {
        self.attempt
            .runner
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0)
    }

    /// True once the runner has ended (or its supervisor is gone) on its own, or has
    /// closed its stdin (it died and its supervisor has not yet reported); never waits.
    /// A runner waiting for its prompt should not have.
    pub fn has_ended(&self) -> bool {
        let stdin_gone = self.attempt.stdin.as_ref().is_some_and(|fd| {
            // POLLERR or POLLHUP on a pipe's write end: nobody can read it any more.
            let gone = PollFlags::ERR | PollFlags::HUP;
            poll_now(fd, PollFlags::empty()).intersects(gone)
        });
        stdin_gone || self.reported_end()
    }

    /// True when the supervisor has reported the end, or died (its pipe closed).
    fn reported_end(&self) -> bool {
        !poll_now(&self.attempt.report, PollFlags::IN).is_empty()
    }

    /// Writes the prompt (`spec.stdin`, then closes stdin), reads stdout and stderr
    /// and waits for the end within `spec.timeout`, from now, or for the final event
    /// of `spec.format`: then the output so far is the output, and the runner, still
    /// running, comes back to be stopped (`Lingering`). `started` is when the attempt
    /// began: the output's `elapsed` counts from there.
    pub async fn finish(mut self, spec: &PromptSpec<'_>, started: Instant) -> Finished {
        let stdout = Tail::new(self.output_cap);
        stdout.push(&std::mem::take(&mut self.early));
        let stderr = Tail::new(self.output_cap);
        let (seen, final_event) = tokio::sync::oneshot::channel();
        let lines = FinalWatch::new(spec.format).map(|w| Lines::new(w, self.output_cap, seen));
        let attempt = &mut self.attempt;
        let readers = [
            attempt.take_reader(true, stdout.clone(), lines),
            attempt.take_reader(false, stderr.clone(), None),
        ];
        let writer = attempt.take_stdin().and_then(|pipe| {
            let bytes = spec.stdin?.as_bytes().to_vec();
            // A runner that exits without reading gives EPIPE: not an error of ours.
            Some(tokio::spawn(async move {
                let mut pipe = pipe;
                let _ = pipe.write_all(&bytes).await;
            }))
        });
        // A stream that ends without its final event never ends the wait.
        let final_event = async {
            if final_event.await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let end = attempt.wait_or_stop(spec, final_event).await;
        if end == RunEnd::FinalEvent {
            let output = output_of(end, &stdout, &stderr, self.output_cap, started);
            let lingering = Lingering {
                running: self,
                tasks: readers.into_iter().chain([writer]).flatten().collect(),
                kill_grace: spec.kill_grace,
                stop: spec.stop.cloned(),
            };
            return Finished {
                output,
                lingering: Some(lingering),
            };
        }
        attempt.finish(&self.tag).await;
        if let Some(w) = writer {
            w.abort();
        }
        let pgid = attempt.runner;
        for mut reader in readers.into_iter().flatten() {
            if tokio::time::timeout(PIPE_DRAIN, &mut reader).await.is_err() {
                // Only a process outside the supervisor's reach can hold it: stop reading.
                reader.abort();
                tracing::warn!(
                    pgid = ?pgid,
                    "runner pipes still open after its processes were stopped; output cut"
                );
            }
        }
        output_of(end, &stdout, &stderr, self.output_cap, started).into()
    }

    /// Stops a runner that will get no prompt the way a timeout does (SIGTERM to its
    /// group, `kill_grace`, SIGKILL; at once if it already ended), then ends its
    /// supervisor's attempt.
    pub async fn discard(mut self, kill_grace: Duration) {
        if self.reported_end() {
            // Reads the end's record, so the supervisor counts as settled.
            let _ = self.attempt.exit_within(REPORT_WAIT).await;
        } else {
            self.attempt.terminate(kill_grace, None).await;
        }
        self.attempt.finish(&self.tag).await;
    }
}

/// The events `fd` has now, for `wanted` (errors and hang-ups are always reported);
/// none when it cannot be polled. Never waits.
fn poll_now(fd: &impl std::os::fd::AsFd, wanted: PollFlags) -> PollFlags {
    let mut fds = [PollFd::new(fd, wanted)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        match poll(&mut fds, Some(&now)) {
            Ok(_) => return fds[0].revents(),
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return PollFlags::empty(),
        }
    }
}

/// The output and `elapsed` of a runner as its tails hold them now.
fn output_of(end: RunEnd, stdout: &Tail, stderr: &Tail, cap: usize, started: Instant) -> RunOutput {
    let (stdout_text, cut) = stdout.text();
    RunOutput {
        end,
        stdout: stdout_text,
        stderr: stderr.text().0,
        stdout_cut: cut.then_some(cap),
        elapsed: started.elapsed(),
    }
}

/// How a runner's attempt ended: its output, and the runner itself when it gave its
/// final event and has not exited yet (`RunEnd::FinalEvent`).
#[derive(Debug)]
pub struct Finished {
    pub output: RunOutput,
    pub lingering: Option<Lingering>,
}

impl From<RunOutput> for Finished {
    fn from(output: RunOutput) -> Self {
        Finished {
            output,
            lingering: None,
        }
    }
}

/// A runner that printed its final event and had not exited then. Its answer is
/// complete; what it prints from now on is not read. `stop` lets it go like any
/// finished runner; dropped instead, it is killed (`Attempt`'s drop).
pub struct Lingering {
    running: Running,
    /// Its readers and its prompt's writer: the pipes stay drained while it exits.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    kill_grace: Duration,
    stop: Option<StopSignal>,
}

impl std::fmt::Debug for Lingering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lingering")
            .field("pgid", &self.running.pgid())
            .finish_non_exhaustive()
    }
}

/// How long a runner past its final event may take to exit on its own before it is
/// stopped the way a timeout stops one (Claude Code exits 40-100 ms after its
/// `result` event).
pub const EXIT_AFTER_FINAL: Duration = Duration::from_secs(1);

impl Lingering {
    /// Waits up to `EXIT_AFTER_FINAL` for the runner to exit (less when the daemon
    /// stops), then stops it: SIGTERM to its group, the kill grace, SIGKILL, and its
    /// supervisor's sweep of whatever it left.
    pub async fn stop(mut self) {
        let attempt = &mut self.running.attempt;
        let exited = tokio::select! {
            end = attempt.exit_within(EXIT_AFTER_FINAL) => end.is_some(),
            () = stopped(self.stop.as_ref()) => false,
        };
        if !exited {
            attempt.terminate(self.kill_grace, self.stop.as_ref()).await;
        }
        attempt.finish(&self.running.tag).await;
        for task in self.tasks {
            task.abort();
        }
    }
}

impl RunOutput {
    /// An attempt whose runner never started (since `started`): no output.
    pub fn not_started(end: RunEnd, started: Instant) -> RunOutput {
        RunOutput {
            end,
            stdout: String::new(),
            stderr: String::new(),
            stdout_cut: None,
            elapsed: started.elapsed(),
        }
    }
}

/// An idle pooled supervisor takes the attempt at once; else, off the async workers,
/// a new one from the zygote (bounded by its socket timeout) or a fork here.
fn start_supervisor(
    prepared: supervisor::Prepared,
    pool: Option<&Arc<SupervisorPool>>,
) -> std::io::Result<supervisor::Started> {
    use crate::support::runtime::blocking;
    let Some(pool) = pool else {
        return blocking(|| prepared.fork_here());
    };
    match pool.offer_idle(prepared) {
        Ok(started) => started,
        Err(prepared) => blocking(|| pool.supervise(prepared)),
    }
}

/// Our read end of an attempt's pipe, made nonblocking for the reactor with one call
/// (tokio's checked constructor adds an fstat and a flags read, per pipe and attempt).
fn receiver(fd: OwnedFd) -> std::io::Result<pipe::Receiver> {
    rustix::io::ioctl_fionbio(&fd, true)?;
    pipe::Receiver::from_owned_fd_unchecked(fd)
}

/// Our write end of the runner's stdin, made nonblocking the same way.
fn sender(fd: OwnedFd) -> std::io::Result<pipe::Sender> {
    rustix::io::ioctl_fionbio(&fd, true)?;
    pipe::Sender::from_owned_fd_unchecked(fd)
}

fn spawn_failed(kind: std::io::ErrorKind, e: &dyn std::error::Error) -> RunEnd {
    RunEnd::SpawnFailed {
        kind,
        message: crate::support::error::chain(e),
    }
}
