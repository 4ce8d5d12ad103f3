//! The worker slots (docs/reference.md, "Guarantees": at most `workers` jobs at once).
//! Slots run on runtime threads of their own (one per CPU at most; more slots share them)
//! and take the oldest waiting job themselves from the shared `Board`, so a job is claimed,
//! judged and published on one thread, slots on different threads run side by side, and a
//! busy backlog wakes the daemon loop at most once per status write (docs/architecture.md,
//! "Worker slots").

use std::collections::{BTreeMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, oneshot};

use crate::core::config::Settings;
use crate::daemon::inbox::Queue;
use crate::engine::attempts::Services;
use crate::engine::events::{JobEvent, JobEvents, StopSignal};
use crate::engine::job_run::{JobEnd, JobFailed, JobRun};
use crate::store::state_dir::StateDir;
use crate::store::status_file::{OutcomeCounts, RunnerHistory, RunnerStats, Tally};

/// What a slot needs to run a job; the daemon loop replaces it on reload.
#[derive(Clone)]
pub struct JobContext {
    /// The settings jobs use (the codex catalog applied).
    pub settings: Arc<Settings>,
    /// Health, cache, runner limits and single-flight, shared by every slot.
    pub services: Services,
    /// The state folder.
    pub state: StateDir,
    /// `Stop` when runners must stop (shutdown past its grace), `StopNow` after.
    pub stop: StopSignal,
    /// The daemon's outcome counts, bumped before each verdict is published.
    pub tally: Option<Arc<Tally>>,
}

/// The queue and the running jobs, shared by the daemon loop and the slots.
pub struct Board {
    inner: Mutex<Inner>,
    /// A job was offered or the gate opened: an idle slot looks again.
    work: Notify,
    /// Something the daemon loop should look at (status, or the last job of a drain).
    changed: Notify,
}

struct Inner {
    queue: Queue,
    /// Jobs being judged or published.
    running: HashSet<OsString>,
    /// Of those, the ones publishing: done with their slot, not shown as running. The
    /// rest hold a slot.
    publishing: HashSet<OsString>,
    /// Jobs that may hold a slot: `workers`, or 0 while draining or before the first
    /// codex catalog read. Counted, not tied to slot numbers, so lowering `workers`
    /// on reload holds new jobs back until enough running ones are done.
    open: usize,
    /// Shared by the jobs that took it (one clone of an `Arc` per job).
    context: Arc<JobContext>,
    /// The longest `kill_grace_seconds` any started job got (a reload may lower it
    /// while those jobs run): the stop deadline waits for it.
    kill_grace_seen: Duration,
    outcomes: OutcomeCounts,
    history: RunnerHistory,
    /// The loop has been woken for a change and has not written status since.
    told: bool,
    /// Every change wakes the loop (it waits for the last job to finish).
    draining: bool,
    /// Jobs found still being written in place and waiting for their next look
    /// (logged once each).
    unsettled: HashSet<OsString>,
}

/// What the daemon loop reads for a status write.
pub struct Snapshot {
    /// Jobs waiting.
    pub waiting: usize,
    /// Names of the jobs being judged (not those only publishing their verdict, so
    /// there are at most `workers`).
    pub running: Vec<OsString>,
    /// Outcomes so far (without a tally file).
    pub outcomes: OutcomeCounts,
    /// Answer rate and median time per runner, recent attempts.
    pub runners: BTreeMap<String, RunnerStats>,
}

impl Board {
    /// An empty board whose gate is closed.
    pub fn new(context: JobContext) -> Arc<Self> {
        Arc::new(Board {
            inner: Mutex::new(Inner {
                queue: Queue::default(),
                running: HashSet::new(),
                publishing: HashSet::new(),
                open: 0,
                context: Arc::new(context),
                kill_grace_seen: Duration::ZERO,
                outcomes: OutcomeCounts::default(),
                history: RunnerHistory::default(),
                told: false,
                draining: false,
                unsettled: HashSet::new(),
            }),
            work: Notify::new(),
            changed: Notify::new(),
        })
    }

    // A panic while holding the lock cannot leave the board half-changed in a way
    // that matters: at worst a job stays marked running until the daemon restarts.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `name` if it is a new job file in jobs/; an idle slot takes it.
    pub fn offer(&self, name: OsString) {
        let mut inner = self.lock();
        let jobs_dir = inner.context.state.jobs();
        if inner.queue.offer(&jobs_dir, name) {
            drop(inner);
            self.work.notify_one();
        }
    }

    /// Queues every job file in jobs/; returns how many were new.
    pub fn scan(&self) -> std::io::Result<usize> {
        let jobs_dir = self.lock().context.state.jobs();
        let names = crate::daemon::inbox::list(&jobs_dir)?;
        let added = self.lock().queue.offer_all(&jobs_dir, names);
        // A rescan that finds nothing new wakes no idle slot.
        if added > 0 {
            self.work.notify_waiters();
        }
        Ok(added)
    }

    /// Lets `open` jobs hold slots; jobs taken from now on run with `context` when
    /// given (the settings changed).
    pub fn set_gate(&self, open: usize, draining: bool, context: Option<JobContext>) {
        let mut inner = self.lock();
        let opened = open > inner.open;
        inner.open = open;
        inner.draining = draining;
        if let Some(context) = context {
            inner.context = Arc::new(context);
        }
        drop(inner);
        if opened {
            self.work.notify_waiters();
        }
    }

    /// Waits until the loop has something to look at.
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    /// How many jobs are being judged or published.
    pub fn running(&self) -> usize {
        self.lock().running.len()
    }

    /// How many jobs wait.
    pub fn waiting(&self) -> usize {
        self.lock().queue.waiting()
    }

    /// The longest `kill_grace_seconds` any started job got.
    pub fn kill_grace_seen(&self) -> Duration {
        self.lock().kill_grace_seen
    }

    /// What a status write shows; the next change wakes the loop again.
    pub fn snapshot(&self) -> Snapshot {
        let mut inner = self.lock();
        inner.told = false;
        Snapshot {
            waiting: inner.queue.waiting(),
            running: inner
                .running
                .difference(&inner.publishing)
                .cloned()
                .collect(),
            outcomes: inner.outcomes.clone(),
            runners: inner.history.stats(),
        }
    }

    /// Waits for the oldest job a slot may take, and marks it running.
    async fn next(&self) -> (OsString, Arc<JobContext>) {
        loop {
            let notified = self.work.notified();
            tokio::pin!(notified);
            // Registered before the look, so an offer in between still wakes us.
            notified.as_mut().enable();
            if let Some(taken) = self.try_take() {
                return taken;
            }
            notified.await;
        }
    }

    fn try_take(&self) -> Option<(OsString, Arc<JobContext>)> {
        let mut inner = self.lock();
        if inner.holding_slots() >= inner.open {
            return None;
        }
        let name = inner.queue.take()?;
        inner.running.insert(name.clone());
        let grace = inner.context.settings.config.kill_grace_seconds;
        inner.kill_grace_seen = inner.kill_grace_seen.max(grace);
        let context = inner.context.clone();
        self.tell(&mut inner);
        Some((name, context))
    }

    /// A running job's runners are done: it gives its slot back and publishes its
    /// verdict. No wake-up: its own slot looks again next, and any slot may take.
    fn publishing(&self, name: &OsStr) {
        let mut inner = self.lock();
        if inner.running.contains(name) {
            inner.publishing.insert(name.to_os_string());
        }
    }

    /// Records a job's end; a newer file of the same name is queued again. A job still
    /// being written stays known (no hint or rescan queues it) until `retry`.
    fn finish(&self, name: OsString, handled: JobEnd) {
        let mut inner = self.lock();
        inner.running.remove(&name);
        // A job that ended without giving its slot back frees it now.
        let freed = !inner.publishing.remove(&name);
        let first_unsettled = if handled == JobEnd::Unsettled {
            inner.unsettled.insert(name.clone())
        } else {
            inner.unsettled.remove(&name);
            inner.queue.finished(&name);
            false
        };
        if first_unsettled {
            let settle = inner.context.settings.config.job_settle_seconds;
            let path = inner.context.state.jobs().join(&name);
            // Once per file, however many looks it takes.
            tracing::warn!(
                file = %path.display(),
                "job file still being written (not published by rename?): not judged \
                 until it is whole, looking again every {}s", settle.as_secs_f64()
            );
        }
        if let JobEnd::Judged {
            outcome, attempts, ..
        } = &handled
        {
            inner.outcomes.add(*outcome);
            inner.history.add(attempts);
        }
        let again = matches!(handled, JobEnd::Judged { .. } | JobEnd::AlreadyPublished) && {
            let jobs_dir = inner.context.state.jobs();
            inner.queue.offer(&jobs_dir, name)
        };
        self.tell(&mut inner);
        drop(inner);
        if again || freed {
            self.work.notify_one();
        }
    }

    /// A job that was still being written is offered again (a look after the settle
    /// time); forgotten if its file is gone.
    fn retry(&self, name: OsString) {
        let mut inner = self.lock();
        inner.queue.finished(&name);
        let jobs_dir = inner.context.state.jobs();
        let offered = inner.queue.offer(&jobs_dir, name.clone());
        if !offered {
            inner.unsettled.remove(&name);
        }
        drop(inner);
        if offered {
            self.work.notify_one();
        }
    }

    // Once per status write, so a busy backlog does not wake the loop per job.
    fn tell(&self, inner: &mut Inner) {
        if !inner.told || inner.draining {
            inner.told = true;
            self.changed.notify_one();
        }
    }
}

impl Inner {
    /// Jobs holding a slot: running, not yet publishing.
    fn holding_slots(&self) -> usize {
        self.running.len().saturating_sub(self.publishing.len())
    }
}

/// The slots and their runtime threads; `main` owns them and shuts them down.
pub struct Slots {
    /// One per thread, started as slots need them (`None`: it could not start).
    runtimes: Vec<Option<tokio::runtime::Runtime>>,
    /// Slots serving so far.
    slots: usize,
    /// At most this many threads: slots beyond share them, round robin.
    threads: usize,
}

impl Default for Slots {
    // A thread per CPU the daemon may use: more would only take turns on them.
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Slots::with_threads(cpus)
    }
}

/// The slots, shared by `main` (which shuts them down) and the loop (which grows them).
pub type SharedSlots = Arc<Mutex<Slots>>;

/// Locks the slots; a panic while growing them left them usable.
pub fn lock_slots(slots: &SharedSlots) -> MutexGuard<'_, Slots> {
    slots.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Slots {
    /// Slots on at most `threads` runtime threads.
    pub fn with_threads(threads: usize) -> Self {
        Slots {
            runtimes: Vec::new(),
            slots: 0,
            threads: threads.max(1),
        }
    }

    /// Starts slots until there are `count` (a reload that lowers `workers` keeps them).
    pub fn grow(&mut self, count: usize, board: &Arc<Board>) {
        while self.slots < count {
            let thread = self.slots % self.threads;
            if thread == self.runtimes.len() {
                let runtime = slot_runtime(thread);
                if let Err(e) = &runtime {
                    tracing::error!(
                        thread,
                        "cannot start a worker slots' thread ({e}); its slots share the daemon loop's"
                    );
                }
                self.runtimes.push(runtime.ok());
            }
            let serving = serve(board.clone());
            match self.runtimes.get(thread) {
                Some(Some(rt)) => drop(rt.spawn(serving)),
                // Slower (the loop's thread), still correct.
                _ => match tokio::runtime::Handle::try_current() {
                    Ok(loop_runtime) => drop(loop_runtime.spawn(serving)),
                    Err(_) => tracing::error!("no runtime for a worker slot; it does not serve"),
                },
            }
            self.slots += 1;
        }
    }

    /// Drops every slot's jobs before exit, waiting about `budget` in all.
    pub fn shut_down(&mut self, budget: Duration) {
        // Outside any runtime: an attempt still running kills its runner in its Drop.
        let deadline = Instant::now() + budget;
        for rt in self.runtimes.drain(..).flatten() {
            // At least a moment each, for its worker to drop its tasks.
            let left = deadline.saturating_duration_since(Instant::now());
            rt.shutdown_timeout(left.max(Duration::from_millis(100)));
        }
    }
}

impl Drop for Slots {
    // Only a net for a drop inside a runtime, where no blocking shutdown is allowed.
    fn drop(&mut self) {
        for rt in self.runtimes.drain(..).flatten() {
            rt.shutdown_background();
        }
    }
}

// One worker thread, as the daemon loop's: a job's blocking work (fsyncs) moves the
// slot's next job to a fresh thread meanwhile (block_in_place) instead of delaying it.
fn slot_runtime(index: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(format!("llm-judge-slot-{index}"))
        .enable_all()
        .build()
}

/// One slot: takes a job, runs it, takes the next once its runners are done (while
/// the verdict is published).
async fn serve(board: Arc<Board>) {
    loop {
        let (name, context) = board.next().await;
        // Made before the task, so even a task dropped unpolled reports its job.
        let report = Report {
            board: board.clone(),
            name: Some(name),
        };
        let (free_tx, free_rx) = oneshot::channel();
        tokio::spawn(run_job(report, context, free_tx));
        // Given back by the job, or dropped when it ends (or dies) without.
        let _ = free_rx.await;
    }
}

async fn run_job(report: Report, context: Arc<JobContext>, free: oneshot::Sender<()>) {
    let Some(name) = report.name.clone() else {
        return;
    };
    // Marked in this task, before its own `finish`: no other job of the same name can
    // be running in between.
    let events = SlotEvents {
        board: report.board.clone(),
        name: name.clone(),
        free: Mutex::new(Some(free)),
        tally: context.tally.clone(),
    };
    let settle = Some(context.settings.config.job_settle_seconds).filter(|d| !d.is_zero());
    let run = JobRun {
        stop: Some(context.stop.clone()),
        events: Some(Box::new(events)),
        settle,
        judged_by: crate::core::history::JudgedBy::Daemon,
        ..JobRun::new(&context.settings, &context.state, &context.services)
    };
    let path = context.state.jobs().join(&name);
    let handled = run.judge_file(&path).await;
    let unsettled = handled == JobEnd::Unsettled;
    let board = report.board.clone();
    report.send(handled);
    // Still being written in place: the file changes without an event the watch asks
    // for, so a timer looks again (its slot already serves other jobs meanwhile).
    if let (true, Some(wait)) = (unsettled, settle) {
        tokio::time::sleep(wait).await;
        board.retry(name);
    }
}

/// A running job's events: publishing gives its slot back and counts the outcome.
struct SlotEvents {
    board: Arc<Board>,
    name: OsString,
    free: Mutex<Option<oneshot::Sender<()>>>,
    tally: Option<Arc<Tally>>,
}

impl JobEvents for SlotEvents {
    fn send(&self, event: JobEvent<'_>) {
        match event {
            JobEvent::Publishing { outcome, attempts } => {
                if let Some(t) = &self.tally {
                    t.add(outcome, attempts);
                }
                self.board.publishing(&self.name);
                let free = self
                    .free
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some(free) = free {
                    let _ = free.send(());
                }
            }
            JobEvent::PublishFailed { outcome } => {
                if let Some(t) = &self.tally {
                    t.undo(outcome);
                }
            }
        }
    }
}

/// Reports a job's end once, even if its task panics or is dropped.
struct Report {
    board: Arc<Board>,
    name: Option<OsString>,
}

impl Report {
    fn send(mut self, handled: JobEnd) {
        if let Some(name) = self.name.take() {
            self.board.finish(name, handled);
        }
    }
}

impl Drop for Report {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            tracing::error!(file = %name.to_string_lossy(), "worker stopped unexpectedly; the job stays queued");
            let failed = JobEnd::Failed(JobFailed::WorkerStopped);
            self.board.finish(name, failed);
        }
    }
}

#[cfg(test)]
#[path = "slots_tests.rs"]
mod tests;
