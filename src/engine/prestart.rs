//! Runners started ahead of their jobs (a default-table runner's `prestart = N`;
//! docs/tuning.md, "Pre-started runners"). Claude Code and codex spend most of their
//! start-up before they read their prompt, so the daemon keeps up to N copies of the
//! runner jobs take first (the first with `prestart` that runner health does not bench,
//! `prestart_rules::waiting_for`) waiting, each in a fresh private folder with its stdin
//! held open (codex started with `-` for its prompt), and a job takes one instead of
//! spawning. A taken copy's replacement starts once that job's verdict is published
//! (`Spawner::job_ended`), so it never competes with the job for the CPU. The rules that
//! keep this as safe as a fresh spawn:
//! - a waiting runner has no job data: its argv is the table's (the prompt never goes
//!   there), its folder is fresh and empty, and its prompt is written only by the job
//!   that takes it, whose timeout starts then;
//! - a process serves one job: taking removes it from the pool, and the prompt's end
//!   closes its stdin;
//! - it is stopped like any runner (SIGTERM to its group, the kill grace, SIGKILL)
//!   when it is no longer wanted (reload, shutdown) or has waited `MAX_WAIT`;
//! - one that ended while waiting is discarded and the job spawns its own, so a crash
//!   before the prompt never counts as the runner failing;
//! - nothing it printed before its prompt can answer the job: stdout before the prompt
//!   may hold only the CLI's own `system` events (Claude Code 2.1.328 prints
//!   `ui_invalidate` and `init` at start); anything else (a `result`, a reply, a
//!   banner) breaks the protocol, and the copy is discarded like one that died, the
//!   job spawns its own, and the runner is not pre-started again until a reload.
//!
//! Waiting runners are started on the daemon loop's runtime and finished on whichever
//! slot's runtime takes them. Their report pipe stays registered with the loop's
//! reactor, so a runner's end is seen when the loop thread is free (it is busy only for
//! moments: a scan, a status write); their stdin, stdout and stderr are registered by
//! the slot that finishes them.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::core::runner::table::Runner;
use crate::engine::exiting::collect_output;
use crate::engine::prestart_rules::{early_output_problem, waiting_for, wanted};
use crate::engine::runner_folder::{RunnerFolder, RunnerFolders};
use crate::engine::spawner::{
    AttemptOutput, AttemptSpec, BoxFuture, OnProgress, Progress, Spawner, WaitSpec, WaitingRunner,
    Workdir,
};
use crate::store::health_store::HealthStore;
use crate::support::error::Chained;

/// A waiting runner older than this is replaced by a fresh one: the CLI on disk may have
/// been updated, and its login may have expired, while it waited.
pub const MAX_WAIT: Duration = Duration::from_secs(15 * 60);

/// How long `shut_down` waits, beyond the kill grace, for starts and stops under way.
const SHUTDOWN_EXTRA: Duration = Duration::from_secs(25);

/// A spawner that keeps copies of runners waiting (`prestart = N`) and runs an
/// attempt in a fresh folder with one when it can, else with the spawner it wraps.
/// A handle: clones share the waiting copies.
pub struct Prestarting<S> {
    shared: Arc<Shared<S>>,
}

impl<S> Clone for Prestarting<S> {
    fn clone(&self) -> Self {
        Prestarting {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<S> {
    inner: Mutex<Inner>,
    /// Starts the copies, and every attempt no copy takes.
    spawner: S,
    /// The daemon loop's runtime: starts and discards run there.
    runtime: tokio::runtime::Handle,
    /// Starts and stops under way, which `shut_down` waits for.
    tasks: Tasks,
    /// Makes the copies' folders.
    folders: Arc<RunnerFolders>,
}

/// A count of running tasks and a wake-up for when it reaches 0.
#[derive(Default)]
struct Tasks {
    active: AtomicUsize,
    idle: Notify,
}

#[derive(Default)]
struct Inner {
    /// The runners that may have copies waiting, and how many (`prestart_rules::wanted`).
    candidates: Vec<(Runner, usize)>,
    /// The one of them whose copies wait now (`prestart_rules::waiting_for`), chosen
    /// again before each start.
    target: Option<(Runner, usize)>,
    /// The daemon's runner health: the trying order the target follows.
    health: Option<HealthStore>,
    waiting: Vec<Waiting>,
    /// Copies taken by jobs whose verdict is not published yet, with the job's tag:
    /// they count as waiting until `job_ended`, so the replacement starts after it.
    lent: Vec<(Runner, String)>,
    /// Copies being started, per runner.
    starting: Vec<Runner>,
    /// Runners whose copy could not start or ended on its own while waiting (a CLI
    /// that is missing or exits at start, say): no copy is started again until a job
    /// asks for the runner, so a broken one costs a start per job, never one per rescan.
    dormant: Vec<Runner>,
    /// Runners whose copy printed more than start-up events before its prompt: not
    /// pre-started again until the config is loaded again (a wrapper's banner would
    /// otherwise cost a discarded copy per job).
    refused: Vec<Runner>,
    /// The settings new copies start with (folder, output cap, kill grace), and the
    /// `workers` they were configured with.
    settings: Option<(Arc<Settings>, usize)>,
    /// No more starts: the daemon is stopping.
    closed: bool,
}

/// A runner waiting for its job's prompt, in its own folder.
struct Waiting {
    runner: Runner,
    process: Box<dyn WaitingRunner>,
    folder: RunnerFolder,
    since: Instant,
}

impl Waiting {
    /// Why what it printed before its prompt breaks the protocol, if it does.
    fn broke_protocol(&mut self) -> Option<String> {
        early_output_problem(self.process.stdout_so_far())
    }

    /// Stops it (no job came), then removes its folder.
    async fn discard(self, kill_grace: Duration) {
        let Waiting {
            process, folder, ..
        } = self;
        process.discard(kill_grace).await;
        drop(folder);
    }
}

/// The start of every waiting copy's `LLM_JUDGE_TAG` for a state folder, whose random
/// `key` is `store::tag_key`'s: a daemon's start-up sweep stops whatever copies (and
/// their descendants) a crashed daemon of the same folder left, taken by a job or not,
/// and nobody else can compute it.
pub fn tag_prefix(key: &str) -> String {
    format!("prestart-{key}-")
}

/// A copy's tag as logged: the folder's key left out (judge.log reaches the journal).
fn shown_tag(tag: &str) -> String {
    match tag
        .strip_prefix("prestart-")
        .and_then(|t| t.split_once('-'))
    {
        Some((_key, copy)) => format!("prestart-…-{copy}"),
        None => tag.to_string(),
    }
}

impl<S: Spawner + 'static> Spawner for Prestarting<S> {
    fn run<'a>(
        &'a self,
        spec: &'a AttemptSpec<'a>,
        progress: &'a mut OnProgress<'_>,
    ) -> BoxFuture<'a, AttemptOutput> {
        Box::pin(self.run_attempt(spec, progress))
    }

    fn start_waiting<'a>(
        &'a self,
        spec: &'a WaitSpec<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn WaitingRunner>, crate::core::verdict::RunEnd>> {
        self.shared.spawner.start_waiting(spec)
    }

    fn job_ended(&self, tag: &str) {
        Prestarting::job_ended(self, tag);
        self.shared.spawner.job_ended(tag);
    }
}

impl<S: Spawner + 'static> Prestarting<S> {
    /// No runner waiting yet; `runtime` is the daemon loop's, where copies start and stop;
    /// the copies' folders are made by `folders` (the spawner's: one home per process).
    pub fn new(spawner: S, runtime: tokio::runtime::Handle, folders: Arc<RunnerFolders>) -> Self {
        Prestarting {
            shared: Arc::new(Shared {
                inner: Mutex::default(),
                spawner,
                runtime,
                tasks: Tasks::default(),
                folders,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.shared
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs an attempt: one in a fresh folder gets a waiting copy of its runner when
    /// there is a usable one, the timeout counted from its prompt; any other, and one
    /// whose copy printed before its prompt (refused), goes to the wrapped spawner.
    async fn run_attempt(
        &self,
        spec: &AttemptSpec<'_>,
        progress: &mut OnProgress<'_>,
    ) -> AttemptOutput {
        let copy = match spec.workdir {
            Workdir::Fresh => self.take(spec.runner, spec.tag()),
            Workdir::Job(_) => None,
        };
        let Some(mut copy) = copy else {
            return self.shared.spawner.run(spec, progress).await;
        };
        progress(Progress::Starting {
            cwd: Some(copy.folder.path()),
            prestarted: true,
        });
        progress(Progress::Spawned {
            pgid: copy.process.pgid(),
        });
        // Checked again right before the prompt is written.
        if let Some(why) = copy.broke_protocol() {
            self.refuse(copy, &why);
            return self.shared.spawner.run(spec, progress).await;
        }
        let Waiting {
            process, folder, ..
        } = copy;
        let ended = process.finish(spec).await;
        collect_output(ended, Some(folder), spec.exiting(), spec.tag())
            .await
            .into()
    }

    /// Keeps what `settings` asks for (at start, and whenever the daemon's settings are
    /// replaced: a reload or a catalog read), following `health`'s trying order: stops
    /// waiting runners it no longer wants, starts the missing ones.
    pub fn configure(
        &self,
        settings: &Arc<Settings>,
        workers: usize,
        health: Option<&HealthStore>,
    ) {
        {
            let mut inner = self.lock();
            if inner.closed {
                return;
            }
            inner.candidates = wanted(settings, workers);
            inner.settings = Some((settings.clone(), workers));
            inner.health = health.cloned();
            inner.refused.clear();
        }
        self.fill();
    }

    /// A waiting copy of `runner` for the job tagged `tag`, if one is ready; its
    /// replacement waits for `job_ended`. One that ended while waiting is discarded,
    /// one that printed before its prompt refused, and `None` says: spawn one for
    /// this job.
    fn take(&self, runner: &Runner, tag: &str) -> Option<Waiting> {
        let taken = {
            let mut inner = self.lock();
            inner.dormant.retain(|r| r != runner);
            let index = inner.waiting.iter().position(|w| w.runner == *runner);
            index.map(|i| inner.waiting.swap_remove(i))
        };
        let usable = taken.and_then(|copy| self.usable(copy))?;
        self.lock().lent.push((runner.clone(), tag.to_string()));
        Some(usable)
    }

    /// The job tagged `tag` is over (its verdict published): the copies it took are
    /// replaced now, and the runner whose copies wait is chosen again (the job's
    /// attempts may have benched one).
    pub fn job_ended(&self, tag: &str) {
        self.lock().lent.retain(|(_, t)| t != tag);
        self.fill();
    }

    /// `copy`, unless it ended while waiting or printed before its prompt (then it is
    /// discarded).
    fn usable(&self, mut copy: Waiting) -> Option<Waiting> {
        if copy.process.has_ended() {
            tracing::warn!(
                runner = %copy.runner.name, pgid = copy.process.pgid(),
                "a pre-started runner ended before its job; the job starts its own"
            );
            self.discard_all(vec![copy], "ended while waiting");
            return None;
        }
        if let Some(why) = copy.broke_protocol() {
            self.refuse(copy, &why);
            return None;
        }
        Some(copy)
    }

    /// Discards a copy that printed more than start-up events before its prompt
    /// (`why`), and pre-starts its runner no more until the config is loaded again.
    /// Never counted as the runner failing: the job that met it spawns its own.
    fn refuse(&self, copy: Waiting, why: &str) {
        tracing::warn!(
            runner = %copy.runner.name, pgid = copy.process.pgid(),
            "a pre-started runner {why}: its output is not the job's; discarded, the job starts \
             its own, and this runner is not pre-started again until the config is reloaded"
        );
        {
            let mut inner = self.lock();
            if !inner.refused.contains(&copy.runner) {
                inner.refused.push(copy.runner.clone());
            }
        }
        self.discard_all(vec![copy], "it printed before its prompt");
    }

    /// Replaces waiting runners that ended or waited `MAX_WAIT` (the daemon calls it
    /// on every rescan), and starts missing ones.
    pub fn tick(&self) {
        let (ended, old, broke) = {
            let mut inner = self.lock();
            let (ended, rest): (Vec<Waiting>, Vec<Waiting>) = std::mem::take(&mut inner.waiting)
                .into_iter()
                .partition(|w| w.process.has_ended());
            let (broke, rest): (Vec<_>, Vec<_>) = rest
                .into_iter()
                .map(|mut w| (w.broke_protocol(), w))
                .partition(|(why, _)| why.is_some());
            let rest: Vec<Waiting> = rest.into_iter().map(|(_, w)| w).collect();
            let (old, fresh) = rest
                .into_iter()
                .partition(|w| w.since.elapsed() >= MAX_WAIT);
            inner.waiting = fresh;
            for w in &ended {
                inner.dormant.push(w.runner.clone());
            }
            (ended, old, broke)
        };
        for (why, copy) in broke {
            self.refuse(copy, why.as_deref().unwrap_or_default());
        }
        self.discard_all(
            ended,
            "it ended while waiting; the next job for it starts one again",
        );
        self.discard_all(old, "it waited too long; a fresh one replaces it");
        self.fill();
    }

    /// Starts no more runners (the daemon is draining); those waiting stay for the jobs
    /// still running until `shut_down`.
    pub fn close(&self) {
        self.lock().closed = true;
    }

    /// Stops every waiting runner and starts no more (the daemon is stopping); returns
    /// once they, and copies that were still starting, are gone (bounded).
    pub async fn shut_down(&self) {
        let (waiting, grace) = {
            let mut inner = self.lock();
            inner.closed = true;
            (std::mem::take(&mut inner.waiting), inner.kill_grace())
        };
        self.discard_all(waiting, "the daemon is stopping");
        if tokio::time::timeout(grace + SHUTDOWN_EXTRA, self.idle())
            .await
            .is_err()
        {
            tracing::warn!(
                "pre-started runners still stopping at exit; their supervisors end them"
            );
        }
    }

    /// Returns once no copy is being started or stopped.
    pub async fn idle(&self) {
        let tasks = &self.shared.tasks;
        loop {
            let idle = tasks.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if tasks.active.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Runs `task` on the daemon loop's runtime, counted until it ends.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.shared.tasks.active.fetch_add(1, Ordering::SeqCst);
        let shared = self.shared.clone();
        self.shared.runtime.spawn(async move {
            task.await;
            if shared.tasks.active.fetch_sub(1, Ordering::SeqCst) == 1 {
                shared.tasks.idle.notify_waiters();
            }
        });
    }

    /// How many runners are waiting now.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Chooses the runner whose copies wait (health may have moved one), stops the
    /// copies of any other and those past its count, and starts copies until it has
    /// its count waiting, starting or lent to a job still running.
    fn fill(&self) {
        let (other, surplus, why) = {
            let mut inner = self.lock();
            if inner.closed {
                return;
            }
            let Some((settings, _)) = inner.settings.clone() else {
                return;
            };
            inner.target = inner.choose_target(&settings);
            let (mut kept, mut other, mut surplus) = (Vec::new(), Vec::new(), Vec::new());
            for w in std::mem::take(&mut inner.waiting) {
                let have = kept
                    .iter()
                    .filter(|k: &&Waiting| k.runner == w.runner)
                    .count();
                let wanted = inner.copies_wanted(&w.runner);
                if have < wanted {
                    kept.push(w);
                } else if wanted > 0 {
                    surplus.push(w);
                } else {
                    other.push(w);
                }
            }
            inner.waiting = kept;
            let why = match inner.target.clone() {
                Some((runner, n)) => {
                    self.start_missing(&mut inner, &settings, &runner, n);
                    format!("no longer wanted: jobs take {} first now", runner.name)
                }
                None if inner.candidates.is_empty() => "no longer wanted".into(),
                None => "no longer wanted: runner health benches every runner with prestart".into(),
            };
            (other, surplus, why)
        };
        self.discard_all(other, &why);
        self.discard_all(surplus, "no longer wanted");
    }

    /// Starts copies of `runner` until `n` wait, start or are lent; none for a runner
    /// whose copy died while waiting (until a job asks for it) or broke the protocol.
    fn start_missing(
        &self,
        inner: &mut Inner,
        settings: &Arc<Settings>,
        runner: &Runner,
        n: usize,
    ) {
        if inner.dormant.contains(runner) || inner.refused.contains(runner) {
            return;
        }
        let have = inner.waiting.iter().filter(|w| w.runner == *runner).count()
            + inner.starting.iter().filter(|r| *r == runner).count()
            + inner.lent.iter().filter(|(r, _)| r == runner).count();
        for _ in have..n {
            inner.starting.push(runner.clone());
            let (this, runner, settings) = (self.clone(), runner.clone(), settings.clone());
            self.spawn(async move { this.start_one(runner, settings).await });
        }
    }

    /// Starts one copy of `runner` and adds it to the waiting ones, unless it is no
    /// longer wanted by then.
    async fn start_one(self, runner: Runner, settings: Arc<Settings>) {
        let started = self.start_waiting_copy(&runner, &settings).await;
        let mut inner = self.lock();
        if let Some(i) = inner.starting.iter().position(|r| *r == runner) {
            inner.starting.swap_remove(i);
        }
        let Some((waiting, tag)) = started else {
            // Not again until a job asks for it: a missing CLI costs nothing per rescan.
            inner.dormant.push(runner);
            return;
        };
        let have = inner.waiting.iter().filter(|w| w.runner == runner).count();
        if inner.closed || have >= inner.copies_wanted(&runner) {
            drop(inner);
            self.discard_all(vec![waiting], "no longer wanted");
            return;
        }
        tracing::info!(
            runner = %runner.name, pgid = waiting.process.pgid(), cwd = %waiting.folder.path().display(),
            tag = %shown_tag(&tag), "runner pre-started: waiting for a job"
        );
        inner.waiting.push(waiting);
    }

    /// A fresh folder and a started copy of `runner` in it, waiting for its prompt, and
    /// the copy's tag; `None` (logged) when either fails.
    async fn start_waiting_copy(
        &self,
        runner: &Runner,
        settings: &Settings,
    ) -> Option<(Waiting, String)> {
        let folder = match self.shared.folders.fresh(settings) {
            Ok(folder) => folder,
            Err(e) => {
                tracing::warn!(runner = %runner.name, "cannot pre-start: {e}");
                return None;
            }
        };
        let state = crate::store::state_dir::StateDir::new(&settings.state_dir);
        let key = match crate::store::tag_key::load_or_create(&state) {
            Ok(key) => key,
            Err(e) => {
                tracing::warn!(runner = %runner.name, "cannot pre-start: {e}", e = e.chain());
                return None;
            }
        };
        let tag = format!("{}{}", tag_prefix(&key), crate::process::tag::new_tag());
        let spec = WaitSpec {
            settings,
            runner,
            cwd: folder.path(),
            tag: &tag,
        };
        match self.shared.spawner.start_waiting(&spec).await {
            Ok(process) => Some((
                Waiting {
                    runner: runner.clone(),
                    process,
                    folder,
                    since: Instant::now(),
                },
                tag,
            )),
            Err(end) => {
                tracing::debug!(runner = %runner.name, ?end, "cannot pre-start");
                None
            }
        }
    }

    /// Stops `runners` in the background, the way a timeout stops a runner.
    fn discard_all(&self, runners: Vec<Waiting>, why: &str) {
        if runners.is_empty() {
            return;
        }
        let grace = self.lock().kill_grace();
        for w in runners {
            tracing::info!(runner = %w.runner.name, pgid = w.process.pgid(), "pre-started runner stopped: {why}");
            self.spawn(w.discard(grace));
        }
    }
}

impl Inner {
    /// How many copies of `runner` to keep: the target's count, else none.
    fn copies_wanted(&self, runner: &Runner) -> usize {
        match &self.target {
            Some((target, n)) if target == runner => *n,
            _ => 0,
        }
    }

    /// The runner whose copies should wait under `settings` and the current health.
    fn choose_target(&self, settings: &Settings) -> Option<(Runner, usize)> {
        // No runner may wait: health.json need not be read (this runs after every job).
        if self.candidates.is_empty() {
            return None;
        }
        let table = settings.table(Mode::Default);
        let standing = match &self.health {
            Some(health) => health.standing(table),
            None => table.iter().map(|r| (r, false)).collect(),
        };
        waiting_for(&standing, &self.candidates)
    }

    fn kill_grace(&self) -> Duration {
        self.settings
            .as_ref()
            .map_or(Duration::from_secs(5), |(s, _)| s.config.kill_grace_seconds)
    }
}
