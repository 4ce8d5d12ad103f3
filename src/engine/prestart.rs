//! Runners started ahead of their jobs (a default-table runner's `prestart = N`;
//! docs/tuning.md, "Pre-started runners"). Claude Code spends most of its start-up
//! before it reads its prompt, so the daemon keeps up to N copies of such a runner
//! waiting, each in a fresh private folder with its stdin held open, and a job takes one
//! instead of spawning. The rules that keep this as safe as a fresh spawn:
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
use crate::core::runner_table::Runner;
use crate::engine::codex_argv::prepared_argv;
use crate::engine::runner_folder::{RunnerFolder, fresh_runner_folder};
use crate::process::pool::SupervisorPool;
use crate::process::spawn::{PromptSpec, RunOutput, Running, StartSpec};

/// A waiting runner older than this is replaced by a fresh one: the CLI on disk may have
/// been updated, and its login may have expired, while it waited.
pub const MAX_WAIT: Duration = Duration::from_secs(15 * 60);

/// How long `shut_down` waits, beyond the kill grace, for starts and stops under way.
const SHUTDOWN_EXTRA: Duration = Duration::from_secs(25);

/// The daemon's waiting runners.
pub struct Prestart {
    inner: Mutex<Inner>,
    pool: Option<Arc<SupervisorPool>>,
    /// The daemon loop's runtime: starts and discards run there.
    runtime: tokio::runtime::Handle,
    /// Starts and stops under way, which `shut_down` waits for.
    tasks: Tasks,
}

/// A count of running tasks and a wake-up for when it reaches 0.
#[derive(Default)]
struct Tasks {
    active: AtomicUsize,
    idle: Notify,
}

#[derive(Default)]
struct Inner {
    /// What to keep waiting: each runner and how many copies.
    wanted: Vec<(Runner, usize)>,
    waiting: Vec<Waiting>,
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

/// A runner waiting for its job's prompt.
pub struct Waiting {
    runner: Runner,
    running: Running,
    folder: RunnerFolder,
    since: Instant,
}

impl Waiting {
    /// The folder it works in (fresh, private, made for it).
    pub fn folder(&self) -> &std::path::Path {
        self.folder.path()
    }

    /// Its pid (= process group id).
    pub fn pgid(&self) -> u32 {
        self.running.pgid()
    }

    /// Gives it the job: writes `spec.stdin`, then runs it to its end within
    /// `spec.timeout`, counted from now. Its folder goes with it. Checked right before
    /// the prompt is written: a copy whose stdout already holds more than its CLI's
    /// start-up events comes back (`Err`) for `Prestart::refuse`, and the job spawns.
    pub async fn finish(mut self, spec: &PromptSpec<'_>) -> Result<RunOutput, Waiting> {
        if early_output_problem(self.running.stdout_so_far()).is_some() {
            return Err(self);
        }
        let Waiting {
            running, folder, ..
        } = self;
        let out = running.finish(spec, Instant::now()).await;
        drop(folder);
        Ok(out)
    }

    /// Why what it printed before its prompt breaks the protocol, if it does.
    fn broke_protocol(&mut self) -> Option<String> {
        early_output_problem(self.running.stdout_so_far())
    }

    /// Stops it (no job came), then removes its folder.
    async fn discard(self, kill_grace: Duration) {
        let Waiting {
            running, folder, ..
        } = self;
        running.discard(kill_grace).await;
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

/// How many copies of each runner of `settings`' default table to keep waiting:
/// `prestart`, at most `workers`; none under the override variable.
pub fn wanted(settings: &Settings, workers: usize) -> Vec<(Runner, usize)> {
    if settings.runner_override.is_some() {
        return Vec::new();
    }
    settings
        .table(Mode::Default)
        .iter()
        .filter_map(|r| {
            let n = usize::try_from(r.prestart?).ok()?.min(workers);
            (n > 0).then(|| (r.clone(), n))
        })
        .collect()
}

impl Prestart {
    /// An empty pool of waiting runners; `runtime` is the daemon loop's.
    pub fn new(pool: Option<Arc<SupervisorPool>>, runtime: tokio::runtime::Handle) -> Arc<Self> {
        Arc::new(Prestart {
            inner: Mutex::default(),
            pool,
            runtime,
            tasks: Tasks::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps what `settings` asks for (at start and on reload; cheap when nothing
    /// changed): stops waiting runners it no longer wants, starts the missing ones.
    pub fn configure(self: &Arc<Self>, settings: &Arc<Settings>, workers: usize) {
        let unwanted = {
            let mut inner = self.lock();
            let same = |(s, w): &(Arc<Settings>, usize)| Arc::ptr_eq(s, settings) && *w == workers;
            if inner.closed || inner.settings.as_ref().is_some_and(same) {
                return;
            }
            inner.wanted = wanted(settings, workers);
            inner.settings = Some((settings.clone(), workers));
            inner.refused.clear();
            let mut kept = Vec::new();
            let mut unwanted = Vec::new();
            for w in std::mem::take(&mut inner.waiting) {
                let allowed = inner.copies_wanted(&w.runner);
                let have = kept
                    .iter()
                    .filter(|k: &&Waiting| k.runner == w.runner)
                    .count();
                if have < allowed {
                    kept.push(w);
                } else {
                    unwanted.push(w);
                }
            }
            inner.waiting = kept;
            unwanted
        };
        self.discard_all(unwanted, "no longer wanted");
        self.fill();
    }

    /// A waiting copy of `runner`, if one is ready; then starts its replacement. One that
    /// ended while waiting is discarded, one that printed before its prompt refused,
    /// and `None` says: spawn one for this job.
    pub fn take(self: &Arc<Self>, runner: &Runner) -> Option<Waiting> {
        let taken = {
            let mut inner = self.lock();
            inner.dormant.retain(|r| r != runner);
            let index = inner.waiting.iter().position(|w| w.runner == *runner);
            index.map(|i| inner.waiting.swap_remove(i))
        };
        let usable = taken.and_then(|copy| self.usable(copy));
        // After the checks: a refused runner gets no replacement.
        self.fill();
        usable
    }

    /// `copy`, unless it ended while waiting or printed before its prompt (then it is
    /// discarded).
    fn usable(self: &Arc<Self>, mut copy: Waiting) -> Option<Waiting> {
        if copy.running.has_ended() {
            tracing::warn!(
                runner = %copy.runner.name, pgid = copy.pgid(),
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
    pub fn refuse(self: &Arc<Self>, copy: Waiting, why: &str) {
        tracing::warn!(
            runner = %copy.runner.name, pgid = copy.pgid(),
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
    pub fn tick(self: &Arc<Self>) {
        let (ended, old, broke) = {
            let mut inner = self.lock();
            let (ended, rest): (Vec<Waiting>, Vec<Waiting>) = std::mem::take(&mut inner.waiting)
                .into_iter()
                .partition(|w| w.running.has_ended());
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
    pub async fn shut_down(self: &Arc<Self>) {
        let (waiting, grace) = {
            let mut inner = self.lock();
            inner.closed = true;
            (std::mem::take(&mut inner.waiting), inner.kill_grace())
        };
        self.discard_all(waiting, "the daemon is stopping");
        let all_done = async {
            loop {
                let idle = self.tasks.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if self.tasks.active.load(Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        };
        if tokio::time::timeout(grace + SHUTDOWN_EXTRA, all_done)
            .await
            .is_err()
        {
            tracing::warn!(
                "pre-started runners still stopping at exit; their supervisors end them"
            );
        }
    }

    /// Runs `task` on the daemon loop's runtime, counted until it ends.
    fn spawn(self: &Arc<Self>, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.active.fetch_add(1, Ordering::SeqCst);
        let this = self.clone();
        self.runtime.spawn(async move {
            task.await;
            if this.tasks.active.fetch_sub(1, Ordering::SeqCst) == 1 {
                this.tasks.idle.notify_waiters();
            }
        });
    }

    /// How many runners are waiting now.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Starts copies until each wanted runner has its count waiting or starting.
    fn fill(self: &Arc<Self>) {
        let mut inner = self.lock();
        if inner.closed {
            return;
        }
        let Some((settings, _)) = inner.settings.clone() else {
            return;
        };
        for (runner, n) in inner.wanted.clone() {
            if inner.dormant.contains(&runner) || inner.refused.contains(&runner) {
                continue;
            }
            let have = inner.waiting.iter().filter(|w| w.runner == runner).count()
                + inner.starting.iter().filter(|r| **r == runner).count();
            for _ in have..n {
                inner.starting.push(runner.clone());
                let (this, runner, settings) = (self.clone(), runner.clone(), settings.clone());
                self.spawn(async move { this.start_one(runner, settings).await });
            }
        }
    }

    /// Starts one copy of `runner` and adds it to the waiting ones, unless it is no
    /// longer wanted by then.
    async fn start_one(self: Arc<Self>, runner: Runner, settings: Arc<Settings>) {
        let started = start_waiting(&runner, &settings, self.pool.as_ref()).await;
        let mut inner = self.lock();
        if let Some(i) = inner.starting.iter().position(|r| *r == runner) {
            inner.starting.swap_remove(i);
        }
        let Some(waiting) = started else {
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
            runner = %runner.name, pgid = waiting.pgid(), cwd = %waiting.folder().display(),
            tag = %shown_tag(waiting.running.tag()), "runner pre-started: waiting for a job"
        );
        inner.waiting.push(waiting);
    }

    /// Stops `runners` in the background, the way a timeout stops a runner.
    fn discard_all(self: &Arc<Self>, runners: Vec<Waiting>, why: &str) {
        if runners.is_empty() {
            return;
        }
        let grace = self.lock().kill_grace();
        for w in runners {
            tracing::info!(runner = %w.runner.name, pgid = w.pgid(), "pre-started runner stopped: {why}");
            self.spawn(w.discard(grace));
        }
    }
}

impl Inner {
    fn copies_wanted(&self, runner: &Runner) -> usize {
        self.wanted
            .iter()
            .find(|(r, _)| r == runner)
            .map_or(0, |(_, n)| *n)
    }

    fn kill_grace(&self) -> Duration {
        let seconds = self
            .settings
            .as_ref()
            .map_or(5.0, |(s, _)| s.config.kill_grace_seconds);
        Duration::from_secs_f64(seconds)
    }
}

/// A fresh folder and a started copy of `runner` in it, stdin held open; `None` (logged)
/// when either fails.
async fn start_waiting(
    runner: &Runner,
    settings: &Settings,
    pool: Option<&Arc<SupervisorPool>>,
) -> Option<Waiting> {
    let folder = match fresh_runner_folder(settings) {
        Ok(folder) => folder,
        Err(e) => {
            tracing::warn!(runner = %runner.name, "cannot pre-start: cannot create a temp folder: {e}");
            return None;
        }
    };
    let state = crate::store::state_dir::StateDir::new(&settings.state_dir);
    let key = match crate::store::tag_key::load_or_create(&state) {
        Ok(key) => key,
        Err(e) => {
            tracing::warn!(runner = %runner.name, "cannot pre-start: {e}");
            return None;
        }
    };
    let tag = format!("{}{}", tag_prefix(&key), crate::store::claim::new_tag());
    let argv = match prepared_argv(settings, Mode::Default, &runner.argv) {
        Ok(argv) => argv,
        Err(e) => {
            tracing::warn!(runner = %runner.name, "cannot pre-start: {e}");
            return None;
        }
    };
    let spec = StartSpec {
        argv: &argv,
        env: &runner.env,
        cwd: folder.path(),
        tag: &tag,
        stdin_piped: true,
        output_cap: settings.config.output_cap_bytes,
    };
    match Running::start(&spec, pool).await {
        Ok(running) => Some(Waiting {
            runner: runner.clone(),
            running,
            folder,
            since: Instant::now(),
        }),
        Err(end) => {
            tracing::debug!(runner = %runner.name, ?end, "cannot pre-start");
            None
        }
    }
}

/// Why a waiting copy's stdout before its prompt breaks the protocol, if it does: only
/// whole lines that are the CLI's own `system` events (JSON objects with `"type":
/// "system"`) or blank may come before the prompt; a line still being written counts
/// against it too (it could become anything), and so does more than the cap.
fn early_output_problem(early: &[u8]) -> Option<String> {
    if early.is_empty() {
        return None;
    }
    if early.len() > crate::process::spawn::EARLY_OUTPUT_CAP {
        return Some(format!(
            "printed more than {} bytes before its prompt",
            crate::process::spawn::EARLY_OUTPUT_CAP
        ));
    }
    let text = String::from_utf8_lossy(early);
    let mut lines = text.split_inclusive('\n');
    let offending = lines.find(|line| {
        let whole = line.ends_with('\n');
        let line = line.trim();
        !whole || (!line.is_empty() && !is_system_event(line))
    })?;
    let shown: String = offending.trim().chars().take(80).collect();
    Some(format!("printed {shown:?} before its prompt"))
}

/// A CLI start-up event line: a JSON object whose `type` is `system`.
fn is_system_event(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line)
        .is_ok_and(|v| v.get("type").and_then(|t| t.as_str()) == Some("system"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_system_events_may_come_before_the_prompt() {
        let fine = [
            "",
            "{\"type\":\"system\",\"subtype\":\"ui_invalidate\"}\n",
            "{\"type\":\"system\",\"subtype\":\"init\",\"cwd\":\"/x\"}\n\n{\"type\": \"system\"}\n",
        ];
        for early in fine {
            assert_eq!(early_output_problem(early.as_bytes()), None, "{early:?}");
        }
        let broken = [
            "{\"type\":\"result\",\"result\":\"{\\\"ok\\\": true}\"}\n",
            "{\"type\":\"system\"}\n{\"bug\": true}\n",
            "Warning: banner\n",
            "{\"type\":\"system\"",
            "{\"type\":\"assistant\"}\n",
            "[1]\n",
        ];
        for early in broken {
            let why = early_output_problem(early.as_bytes());
            assert!(
                why.as_deref()
                    .is_some_and(|w| w.contains("before its prompt")),
                "{early:?}"
            );
        }
        let flood = "{\"type\":\"system\"}\n".repeat(5000);
        assert!(
            early_output_problem(flood.as_bytes())
                .unwrap()
                .contains("more than")
        );
    }

    fn settings_with(table: Vec<Runner>) -> Settings {
        let mut s = Settings::for_tests("/nonexistent".into(), "x");
        s.config.runners.default = table;
        s.runner_override = None;
        s
    }

    #[test]
    fn only_prestart_runners_are_wanted_and_at_most_workers_of_each() {
        let plain = Runner::for_tests("plain", &["/bin/a"]);
        let two = Runner {
            prestart: Some(2),
            ..Runner::for_tests("two", &["/bin/b"])
        };
        let off = Runner {
            prestart: Some(0),
            ..Runner::for_tests("off", &["/bin/c"])
        };
        let s = settings_with(vec![plain, two.clone(), off]);
        assert_eq!(wanted(&s, 4), vec![(two.clone(), 2)]);
        assert_eq!(wanted(&s, 1), vec![(two, 1)]);
    }

    #[test]
    fn the_override_variable_wants_none() {
        let mut s = settings_with(vec![Runner {
            prestart: Some(1),
            ..Runner::for_tests("p", &["/bin/p"])
        }]);
        s.runner_override = Some(Vec::new());
        assert!(wanted(&s, 4).is_empty());
    }
}
