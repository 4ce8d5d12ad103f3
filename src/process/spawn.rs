//! Running one runner process (docs/reference.md, "Runners"): its own process group, stdin from
//! /dev/null or the prompt, capped concurrent reads of stdout and stderr, and the
//! timeout sequence SIGTERM, grace, SIGKILL to the group.

use std::ffi::{CString, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use crate::core::runner_env::RunnerEnv;
use crate::core::verdict::RunEnd;
use crate::process::error::ProcessError;
use crate::process::os::{TAG_VAR, kill_tagged, signal_group};
use crate::process::pool::SupervisorPool;
use crate::process::supervisor::{self, Env, Launch, Lease, RECORD_BYTES, Report};

/// Set in every runner's environment: hooks that see it must not enqueue jobs.
pub const CHILD_VAR: &str = "CATSTACK_LLM_JUDGE_CHILD";
/// Set to `/dev/null` in every runner's environment, so git finds no repository in the
/// job's folder: codex runs `git status` there outside its sandbox, and a repository's
/// own config and attributes (a `filter.<name>.clean` command, `.git/info/attributes`)
/// would run commands. No git variable can switch off a filter it cannot name; with no
/// repository there is nothing to run (docs/security.md, measured with codex 0.171).
const GIT_DIR_VAR: &str = "GIT_DIR";
/// How long to wait for pipes to close once the runner and its tree are gone.
const PIPE_DRAIN: Duration = Duration::from_secs(2);
/// How long the supervisor may take to start the runner, or to report once the
/// runner's group was SIGKILLed (its sweep included).
const REPORT_WAIT: Duration = Duration::from_secs(10);

/// What the daemon tells running jobs; it only ever moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Control {
    /// Go on.
    #[default]
    Run,
    /// Shutdown past its grace: stop the runner as at its timeout (SIGTERM, kill
    /// grace, SIGKILL).
    Stop,
    /// Another stop during the kill grace: SIGKILL now.
    StopNow,
}

/// A job's view of the daemon's `Control`.
pub type StopSignal = tokio::sync::watch::Receiver<Control>;

/// Resolves once `stop` reaches `at_least`; never without one (or once its sender is
/// gone without getting there).
async fn reached(stop: Option<&StopSignal>, at_least: Control) {
    let Some(stop) = stop else {
        return std::future::pending().await;
    };
    let mut stop = stop.clone();
    if stop.wait_for(|c| *c >= at_least).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Resolves once the job is told to stop.
pub async fn stopped(stop: Option<&StopSignal>) {
    reached(stop, Control::Stop).await;
}

/// What to run.
pub struct RunSpec<'a> {
    pub argv: &'a [String],
    /// The runner table's own variables, on top of the runner environment.
    pub env: &'a RunnerEnv,
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
}

impl<'a> RunSpec<'a> {
    /// What starting the runner needs (a pre-started one had it before its job).
    pub fn to_start(&self) -> StartSpec<'a> {
        StartSpec {
            argv: self.argv,
            env: self.env,
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

/// Runs one runner to the end under its own supervisor (see supervisor/), so nothing
/// it started outlives the attempt: a pooled one from `pool` (the daemon), else one
/// forked here. `on_spawn` gets the runner's pid (= process group id).
pub async fn run(
    spec: &RunSpec<'_>,
    pool: Option<&Arc<SupervisorPool>>,
    on_spawn: impl FnOnce(u32),
) -> RunOutput {
    let started = Instant::now();
    match Running::start(&spec.to_start(), pool).await {
        Ok(running) => {
            on_spawn(running.pgid());
            running.finish(&spec.to_prompt(), started).await
        }
        Err(end) => RunOutput::before_start(end, started),
    }
}

/// What to start: a runner's argv, folder and tag, before any job data but the argv.
pub struct StartSpec<'a> {
    pub argv: &'a [String],
    /// The runner table's own variables, on top of the runner environment.
    pub env: &'a RunnerEnv,
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
    pub async fn start(
        spec: &StartSpec<'_>,
        pool: Option<&Arc<SupervisorPool>>,
    ) -> Result<Running, RunEnd> {
        let Some(program) = resolve_program(&spec.argv[0]) else {
            return Err(RunEnd::NotInstalled);
        };
        let launch = runner_env(spec.tag, spec.env).map(|env| Launch {
            program: &program,
            argv: spec.argv,
            env,
            cwd: spec.cwd,
            stdin_piped: spec.stdin_piped,
        });
        let forked = launch
            .and_then(supervisor::prepare)
            .and_then(|prepared| start_supervisor(prepared, pool));
        let mut attempt = match forked.and_then(|started| Attempt::new(started, pool.cloned())) {
            Ok(attempt) => attempt,
            Err(e) => return Err(spawn_failed(&e)),
        };
        let pgid = match attempt.next_report(REPORT_WAIT).await {
            Some(Report::Spawned(pid)) => Some(pid),
            // Gone already (or no /proc): the runner's group is then stopped by stopping
            // its supervisor, which takes its whole namespace with it.
            Some(Report::SpawnedInNamespace(inner)) => outer_pid(attempt.supervisor, inner),
            Some(Report::SpawnFailed(errno)) => {
                let e = std::io::Error::from_raw_os_error(errno);
                attempt.finish(spec.tag).await;
                return Err(spawn_failed(&e));
            }
            other => {
                attempt.finish(spec.tag).await;
                let message = format!("the runner's supervisor did not start it ({other:?})");
                return Err(RunEnd::SpawnFailed {
                    kind: "Other".into(),
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

    /// The `LLM_JUDGE_TAG` it was started with.
    pub fn tag(&self) -> &str {
        &self.tag
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
    /// and waits for the end within `spec.timeout`, from now. `started` is when the
    /// attempt began: the output's `elapsed` counts from there.
    pub async fn finish(mut self, spec: &PromptSpec<'_>, started: Instant) -> RunOutput {
        let stdout = Tail::new(self.output_cap);
        stdout.push(&std::mem::take(&mut self.early));
        let stderr = Tail::new(self.output_cap);
        let attempt = &mut self.attempt;
        let readers = [
            attempt.take_reader(true, stdout.clone()),
            attempt.take_reader(false, stderr.clone()),
        ];
        let writer = attempt.take_stdin().and_then(|pipe| {
            let bytes = spec.stdin?.as_bytes().to_vec();
            // A runner that exits without reading gives EPIPE: not an error of ours.
            Some(tokio::spawn(async move {
                let mut pipe = pipe;
                let _ = pipe.write_all(&bytes).await;
            }))
        });
        let end = attempt.wait_or_stop(spec).await;
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
        let (stdout_text, cut) = stdout.text();
        RunOutput {
            end,
            stdout: stdout_text,
            stderr: stderr.text().0,
            stdout_cut: cut.then_some(self.output_cap),
            elapsed: started.elapsed(),
        }
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

impl RunOutput {
    /// A runner that never started: no output.
    fn before_start(end: RunEnd, started: Instant) -> RunOutput {
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

fn spawn_failed(e: &std::io::Error) -> RunEnd {
    RunEnd::SpawnFailed {
        kind: format!("{:?}", e.kind()),
        message: e.to_string(),
    }
}

/// The caller's environment, minus the service manager's variables, with the runner
/// table's own variables on top, plus the child marker, the attempt's tag and
/// `GIT_DIR=/dev/null`, as `KEY=value` strings. The daemon never changes its own
/// environment, so it is read and filtered once per process.
fn runner_env(tag: &str, table: &RunnerEnv) -> std::io::Result<Env> {
    static INHERITED: OnceLock<Arc<[CString]>> = OnceLock::new();
    let shared = INHERITED.get_or_init(|| inherited_env(std::env::vars_os()).into());
    let mut own = Vec::with_capacity(table.len() + 3);
    // The table's check refused NUL bytes and our own names; a NUL here is skipped.
    own.extend(
        table
            .iter()
            .filter_map(|(key, value)| CString::new(format!("{key}={value}")).ok()),
    );
    let replacing = own.len();
    for (key, value) in [(CHILD_VAR, "1"), (TAG_VAR, tag), (GIT_DIR_VAR, "/dev/null")] {
        let pair = CString::new(format!("{key}={value}"));
        own.push(pair.map_err(|_| ProcessError::NulInOwnVariable(key))?);
    }
    Ok(Env {
        shared: shared.clone(),
        own,
        replacing,
    })
}

/// `vars` without the service manager's variables and our own markers, as `KEY=value`.
fn inherited_env(vars: impl Iterator<Item = (OsString, OsString)>) -> Vec<CString> {
    vars.filter(|(key, _)| {
        !key.to_str().is_some_and(|k| {
            matches!(
                k,
                "NOTIFY_SOCKET"
                    | "WATCHDOG_PID"
                    | "WATCHDOG_USEC"
                    | CHILD_VAR
                    | TAG_VAR
                    | GIT_DIR_VAR
            ) || k.starts_with("LISTEN_")
        })
    })
    .filter_map(|(key, value)| {
        let mut pair = key.into_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        // The environment cannot hold a NUL byte; skip rather than fail if it did.
        CString::new(pair).ok()
    })
    .collect()
}

/// Who ends an attempt's supervisor.
#[derive(Debug)]
enum Owner {
    /// Forked by this process: ours to reap.
    Forked,
    /// Lent by the daemon's pool: the zygote's child, reaped by the kernel and never
    /// waited for (its pid may be reused); given back once its attempt is over.
    Pooled(Lease),
}

/// An attempt's supervisor as the judge sees it: running the attempt, settled (it
/// reported the end, `Exited` or `SpawnFailed`: the runner's tree is gone), then
/// finished (reaped, given back, or left to exit on its own).
#[derive(Debug)]
enum SupervisorState {
    Running(Owner),
    Settled(Owner),
    Finished,
}

impl SupervisorState {
    /// A supervisor just started: pooled with a lease, else forked here.
    fn new(lease: Option<Lease>) -> Self {
        SupervisorState::Running(lease.map_or(Owner::Forked, Owner::Pooled))
    }

    /// The supervisor reported the attempt's end.
    fn settle(&mut self) {
        *self = match std::mem::replace(self, SupervisorState::Finished) {
            SupervisorState::Running(owner) => SupervisorState::Settled(owner),
            other => other,
        };
    }

    /// Still running its attempt (it may be killed to stop the runner).
    fn is_running(&self) -> bool {
        matches!(self, SupervisorState::Running(_))
    }

    fn is_settled(&self) -> bool {
        matches!(self, SupervisorState::Settled(_))
    }

    fn is_finished(&self) -> bool {
        matches!(self, SupervisorState::Finished)
    }

    /// Forked by us and not yet finished: a reap is still owed.
    fn owes_reap(&self) -> bool {
        matches!(
            self,
            SupervisorState::Running(Owner::Forked) | SupervisorState::Settled(Owner::Forked)
        )
    }

    /// Finished from now on: the owner (for the reap or the give-back) and whether it
    /// had settled; `None` when it already was finished.
    fn finish(&mut self) -> Option<(Owner, bool)> {
        match std::mem::replace(self, SupervisorState::Finished) {
            SupervisorState::Running(owner) => Some((owner, false)),
            SupervisorState::Settled(owner) => Some((owner, true)),
            SupervisorState::Finished => None,
        }
    }
}

/// One supervised runner seen from the judge: the report pipe and the runner's pipes.
struct Attempt {
    supervisor: i32,
    state: SupervisorState,
    /// Where a pooled supervisor goes back to.
    pool: Option<Arc<SupervisorPool>>,
    runner: Option<i32>,
    report: pipe::Receiver,
    stdin: Option<OwnedFd>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
}

impl Attempt {
    fn new(
        started: supervisor::Started,
        pool: Option<Arc<SupervisorPool>>,
    ) -> std::io::Result<Self> {
        let (supervisor, lease) = (started.supervisor, started.lease);
        let report = match receiver(started.report) {
            Ok(report) => report,
            Err(e) => {
                // No way to hear from it. Its report pipe's read end is closed now, so
                // it kills the runner's group, sweeps and ends the attempt (a pooled
                // one then exits: its lease drops here, closing its socket).
                if lease.is_none() {
                    reap_in_background(supervisor);
                }
                return Err(e);
            }
        };
        Ok(Attempt {
            supervisor,
            state: SupervisorState::new(lease),
            pool,
            runner: None,
            report,
            stdin: started.stdin,
            stdout: Some(started.stdout),
            stderr: Some(started.stderr),
        })
    }

    /// The next report, or `None` when the pipe closed or `wait` passed.
    async fn next_report(&mut self, wait: Duration) -> Option<Report> {
        let mut record = [0u8; RECORD_BYTES];
        let report = match tokio::time::timeout(wait, self.report.read_exact(&mut record)).await {
            Ok(Ok(_)) => Report::decode(record),
            _ => None,
        };
        if matches!(report, Some(Report::SpawnFailed(_) | Report::Exited(_))) {
            self.state.settle();
        }
        report
    }

    fn take_reader(&mut self, stdout: bool, tail: Tail) -> Option<tokio::task::JoinHandle<()>> {
        let fd = if stdout {
            self.stdout.take()
        } else {
            self.stderr.take()
        }?;
        let pipe = receiver(fd).ok()?;
        Some(tokio::spawn(read_into(pipe, tail)))
    }

    fn take_stdin(&mut self) -> Option<pipe::Sender> {
        sender(self.stdin.take()?).ok()
    }

    /// Waits for the runner's end within the timeout. At the timeout, and when the
    /// stop signal fires first, the runner goes the one way out: `terminate`.
    async fn wait_or_stop(&mut self, spec: &PromptSpec<'_>) -> RunEnd {
        let timed_out = tokio::select! {
            end = self.exit_within(spec.timeout) => match end {
                Some(end) => return end,
                None => true,
            },
            () = stopped(spec.stop) => false,
        };
        self.terminate(spec.kill_grace, spec.stop).await;
        if timed_out {
            RunEnd::TimedOut {
                seconds: spec.timeout.as_secs_f64(),
            }
        } else {
            RunEnd::Stopped
        }
    }

    /// The one kill path: SIGTERM to the runner's group, the grace (cut short by
    /// `Control::StopNow`), SIGKILL. The supervisor then stops whatever else is left of
    /// its tree.
    async fn terminate(&mut self, grace: Duration, stop: Option<&StopSignal>) {
        self.signal_runner(Signal::TERM);
        let ended = tokio::select! {
            end = self.exit_within(grace) => end.is_some(),
            () = reached(stop, Control::StopNow) => false,
        };
        if !ended {
            self.signal_runner(Signal::KILL);
            let _ = self.exit_within(REPORT_WAIT).await;
        }
    }

    /// The runner's end if the supervisor reports it within `wait`. A closed pipe
    /// (the supervisor was killed) counts as a SIGKILL death.
    async fn exit_within(&mut self, wait: Duration) -> Option<RunEnd> {
        let mut record = [0u8; RECORD_BYTES];
        match tokio::time::timeout(wait, self.report.read_exact(&mut record)).await {
            Err(_) => None,
            Ok(Ok(_)) => match Report::decode(record) {
                Some(Report::Exited(status)) => {
                    // Reaped by the supervisor: its group id may be reused from now on.
                    self.state.settle();
                    self.runner = None;
                    Some(exit_end(status))
                }
                _ => Some(RunEnd::Exited { code: -9 }),
            },
            Ok(Err(_)) => Some(RunEnd::Exited { code: -9 }),
        }
    }

    /// Signals the runner's group; a runner whose pid we could not see (a namespaced
    /// one that was gone at once) is killed with its whole namespace, by killing the
    /// supervisor, its init.
    fn signal_runner(&self, signal: Signal) {
        if let Some(pgid) = self.runner.and_then(|p| u32::try_from(p).ok()) {
            signal_group(pgid, signal);
        } else if signal == Signal::KILL && self.state.is_running() {
            signal_pid(self.supervisor, Signal::KILL);
        }
    }

    /// Reaps the supervisor, or gives a pooled one back once its attempt is settled.
    /// One that does not finish in time is killed; its runner's tree is then searched
    /// by tag, the only trace left.
    async fn finish(&mut self, tag: &str) {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(REPORT_WAIT, self.report.read_to_end(&mut rest)).await;
        let closed = matches!(read, Ok(Ok(_)));
        match (closed, self.state.is_settled()) {
            (true, true) => {}
            (true, false) => {
                // The supervisor died before it reported the end (killed from outside):
                // its sweep did not run, so the runner's tree is found by its tag.
                let killed = crate::support::runtime::blocking(|| kill_tagged(tag));
                tracing::warn!(
                    supervisor = self.supervisor,
                    killed,
                    "a runner's supervisor ended without reporting; stopped its runner's processes by tag"
                );
            }
            (false, _) => {
                self.signal_runner(Signal::KILL);
                signal_pid(self.supervisor, Signal::KILL);
                crate::support::runtime::blocking(|| kill_tagged(tag));
                tracing::warn!(
                    supervisor = self.supervisor,
                    "a runner's supervisor did not finish in time; killed it"
                );
            }
        }
        match self.state.finish() {
            Some((Owner::Pooled(lease), true)) if closed => {
                if let Some(pool) = &self.pool {
                    pool.give_back(lease);
                }
            }
            Some((Owner::Forked, _)) => {
                let supervisor = self.supervisor;
                crate::support::runtime::blocking(|| supervisor::reap(supervisor));
            }
            // A lease not given back closes its socket here: that supervisor exits.
            Some((Owner::Pooled(_), _)) | None => {}
        }
    }
}

impl Drop for Attempt {
    /// Only a net: an attempt dropped mid-flight (the daemon exiting past its stop
    /// wait, a panic) kills its runner at once; the supervisor sweeps the rest and is
    /// reaped off the async threads. Shutdown normally goes through `terminate`.
    fn drop(&mut self) {
        if self.state.is_finished() {
            return;
        }
        self.signal_runner(Signal::KILL);
        if self.state.owes_reap() {
            reap_in_background(self.supervisor);
        }
    }
}

/// Reaps a supervisor we forked on a thread of its own (it exits once its sweep is
/// done); if no thread can be had, kills it so the reap cannot wait on its sweep.
fn reap_in_background(supervisor: i32) {
    let reaper = std::thread::Builder::new()
        .name("llm-judge-reap".into())
        .spawn(move || supervisor::reap(supervisor));
    if reaper.is_err() {
        signal_pid(supervisor, Signal::KILL);
    }
}

/// The pid we see of a namespaced supervisor's runner (`inner` inside).
fn outer_pid(supervisor: i32, inner: i32) -> Option<i32> {
    let (supervisor, inner) = (u32::try_from(supervisor).ok()?, u32::try_from(inner).ok()?);
    let outer = crate::process::os::outer_pid_of_child(supervisor, inner)?;
    i32::try_from(outer).ok()
}

fn signal_pid(pid: i32, signal: Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(p, signal);
    }
}

/// The end of a raw wait status: an exit code, or `-<signal>` for a signal death.
fn exit_end(status: i32) -> RunEnd {
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        -libc::WTERMSIG(status)
    } else {
        -1
    };
    RunEnd::Exited { code }
}

/// The program to start, or `None` when it is not installed.
pub fn resolve_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        if !path.is_absolute() {
            return None;
        }
        return is_executable(&path).then_some(path);
    }
    find_on_path(program.as_ref(), std::env::var_os("PATH").as_deref())
}

/// `program` on a `PATH` value, if it is there and executable. Only absolute entries:
/// a relative one (`.`, `bin`) would be looked up in the judge's folder but could name
/// a program inside the job's cwd.
pub fn find_on_path(program: &std::ffi::OsStr, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The last `cap` bytes of a stream, shared so a cut-off reader still leaves its data.
#[derive(Clone)]
struct Tail {
    inner: Arc<Mutex<Kept>>,
    cap: usize,
}

/// The bytes kept so far, and whether earlier ones were dropped.
#[derive(Default)]
struct Kept {
    buf: Vec<u8>,
    dropped: bool,
}

impl Tail {
    fn new(cap: usize) -> Self {
        Tail {
            inner: Arc::new(Mutex::new(Kept::default())),
            cap,
        }
    }

    fn push(&self, chunk: &[u8]) {
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        kept.buf.extend_from_slice(chunk);
        // Trim only at twice the cap so the cost stays linear in the bytes read.
        if kept.buf.len() > self.cap.saturating_mul(2) {
            let excess = kept.buf.len() - self.cap;
            kept.buf.drain(..excess);
            kept.dropped = true;
        }
    }

    /// The kept text, and true when the cap dropped its start.
    fn text(&self) -> (String, bool) {
        let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let start = kept.buf.len().saturating_sub(self.cap);
        let text = String::from_utf8_lossy(&kept.buf[start..]).into_owned();
        (text, kept.dropped || start > 0)
    }
}

async fn read_into(mut pipe: impl AsyncRead + Unpin, tail: Tail) {
    // Small: two of these are zeroed per attempt, and answers are a line or two.
    let mut chunk = vec![0u8; 16 * 1024];
    while let Ok(n) = pipe.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        tail.push(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        let (sock, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        Lease { pid: 4242, sock }
    }

    #[test]
    fn a_forked_supervisor_is_reaped_settled_or_not_and_only_once() {
        let mut state = SupervisorState::new(None);
        assert!(state.is_running() && state.owes_reap() && !state.is_settled());
        state.settle();
        assert!(state.is_settled() && !state.is_running() && state.owes_reap());
        state.settle();
        assert!(state.is_settled(), "settling twice changes nothing");
        assert!(matches!(state.finish(), Some((Owner::Forked, true))));
        assert!(state.is_finished() && !state.owes_reap() && !state.is_running());
        assert!(state.finish().is_none(), "finished once");
        state.settle();
        assert!(state.is_finished(), "no way back from finished");

        let mut unsettled = SupervisorState::new(None);
        assert!(matches!(unsettled.finish(), Some((Owner::Forked, false))));
    }

    #[test]
    fn a_pooled_supervisor_hands_its_lease_back_and_is_never_reaped() {
        let mut state = SupervisorState::new(Some(lease()));
        assert!(state.is_running() && !state.owes_reap());
        state.settle();
        assert!(state.is_settled() && !state.owes_reap());
        match state.finish() {
            Some((Owner::Pooled(lease), true)) => assert_eq!(lease.pid, 4242),
            other => panic!("{other:?}"),
        }
        assert!(state.is_finished());
    }

    #[test]
    fn tail_keeps_the_last_bytes() {
        let t = Tail::new(4);
        for chunk in [b"abc".as_slice(), b"defgh", b"ij"] {
            t.push(chunk);
        }
        assert_eq!(t.text(), ("ghij".to_string(), true));
        let whole = Tail::new(4);
        whole.push(b"abcd");
        assert_eq!(whole.text(), ("abcd".to_string(), false), "nothing dropped");
    }

    #[test]
    fn tail_reads_invalid_utf8_lossily() {
        let t = Tail::new(16);
        t.push(b"ok \xff\xfe end");
        assert_eq!(t.text().0, "ok \u{fffd}\u{fffd} end");
    }

    #[test]
    fn the_runner_env_drops_service_and_marker_variables_and_adds_ours() {
        let var = |k: &str, v: &[u8]| (OsString::from(k), OsString::from_vec(v.to_vec()));
        let inherited = inherited_env(
            [
                var("PATH", b"/bin"),
                var("NOTIFY_SOCKET", b"/run/x"),
                var("LISTEN_FDS", b"2"),
                var(CHILD_VAR, b"1"),
                var(TAG_VAR, b"old"),
                var("GIT_DIR", b"/home/u/repo/.git"),
                var("RAW", b"\xff"),
            ]
            .into_iter(),
        );
        let names: Vec<&[u8]> = inherited.iter().map(|c| c.as_bytes()).collect();
        assert_eq!(names, [b"PATH=/bin".as_slice(), b"RAW=\xff"]);
        let env = runner_env("t1", &RunnerEnv::new()).unwrap();
        let tail: Vec<String> = env
            .own
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            tail,
            [
                format!("{CHILD_VAR}=1"),
                format!("{TAG_VAR}=t1"),
                "GIT_DIR=/dev/null".to_string()
            ]
        );
    }

    #[test]
    fn programs_resolve_by_path_or_not_at_all() {
        assert!(resolve_program("sh").is_some());
        assert!(resolve_program("/bin/sh").is_some());
        assert!(resolve_program("no-such-program-77").is_none());
        assert!(resolve_program("/no/such/program").is_none());
        let plain = tempfile::NamedTempFile::new().unwrap();
        assert!(
            resolve_program(plain.path().to_str().unwrap()).is_none(),
            "not executable"
        );
    }
}
