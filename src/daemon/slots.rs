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

use tokio::sync::{Notify, oneshot, watch};

use crate::core::config::Settings;
use crate::daemon::inbox::Queue;
use crate::engine::attempts::Extras;
use crate::engine::events::{Control, JobEvent, JobEvents};
use crate::engine::lifecycle::{self, Handled};
use crate::store::state_dir::StateDir;
use crate::store::status_file::{OutcomeCounts, RunnerHistory, RunnerStats, Tally};

/// What a slot needs to run a job; the daemon loop replaces it on reload.
#[derive(Clone)]
pub struct JobContext {
    /// The settings jobs use (the codex catalog applied).
    pub settings: Arc<Settings>,
    /// Health, cache, runner limits and single-flight, shared by every slot.
    pub extras: Extras,
    /// The state folder.
    pub state: StateDir,
    /// `Stop` when runners must stop (shutdown past its grace), `StopNow` after.
    pub cancel: watch::Receiver<Control>,
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
    kill_grace_seen: f64,
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
                kill_grace_seen: 0.0,
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

    /// Lets `open` jobs hold slots (with `context()` once `settings` changed).
    pub fn set_gate(
        &self,
        open: usize,
        draining: bool,
        settings: &Arc<Settings>,
        context: impl FnOnce() -> JobContext,
    ) {
        let mut inner = self.lock();
        let opened = open > inner.open;
        inner.open = open;
        inner.draining = draining;
        if !Arc::ptr_eq(&inner.context.settings, settings) {
            inner.context = Arc::new(context());
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
    pub fn kill_grace_seen(&self) -> f64 {
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
    fn finish(&self, name: OsString, handled: Handled) {
        let mut inner = self.lock();
        inner.running.remove(&name);
        // A job that ended without giving its slot back frees it now.
        let freed = !inner.publishing.remove(&name);
        let first_unsettled = if handled == Handled::Unsettled {
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
                 until it is whole, looking again every {settle}s"
            );
        }
        if let Handled::Judged {
            outcome, attempts, ..
        } = &handled
        {
            inner.outcomes.add(*outcome);
            inner.history.add(attempts);
        }
        let again = matches!(handled, Handled::Judged { .. } | Handled::AlreadyPublished) && {
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
    let settle_seconds = context.settings.config.job_settle_seconds;
    let settle = (settle_seconds > 0.0).then(|| Duration::from_secs_f64(settle_seconds));
    let link = lifecycle::WorkerLink {
        cancel: Some(context.cancel.clone()),
        events: Some(Box::new(events)),
        settle,
        outside_jobs: false,
    };
    let path = context.state.jobs().join(&name);
    let handled = lifecycle::handle(
        &context.settings,
        &context.state,
        &path,
        &context.extras,
        link,
    )
    .await;
    let unsettled = handled == Handled::Unsettled;
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
    fn send(mut self, handled: Handled) {
        if let Some(name) = self.name.take() {
            self.board.finish(name, handled);
        }
    }
}

impl Drop for Report {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            tracing::error!(file = %name.to_string_lossy(), "worker stopped unexpectedly; the job stays queued");
            let failed = Handled::Failed("worker stopped unexpectedly".into());
            self.board.finish(name, failed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Condvar;
    use std::time::Duration;

    use super::*;
    use crate::core::verdict::{Outcome, RunEnd};
    use crate::engine::spawner::{BoxFuture, Spawner};
    use crate::process::spawn::{RunOutput, RunSpec};

    /// Answers yes once `parties` runners run at once (or after 60 s), recording
    /// each one's thread and whether it met the others.
    struct Together {
        parties: usize,
        /// Runners arrived so far, and (thread, met) of each.
        seen: Mutex<(usize, Vec<(String, bool)>)>,
        arrived: Condvar,
    }

    impl Together {
        fn new(parties: usize) -> Self {
            Together {
                parties,
                seen: Mutex::new((0, Vec::new())),
                arrived: Condvar::new(),
            }
        }

        // Blocks the calling slot's thread: only another thread can complete the round.
        fn meet(&self) {
            let thread = std::thread::current().name().unwrap_or("").to_string();
            let Ok(mut seen) = self.seen.lock() else {
                return;
            };
            seen.0 += 1;
            let round_end = seen.0.div_ceil(self.parties) * self.parties;
            self.arrived.notify_all();
            let wait = self
                .arrived
                .wait_timeout_while(seen, Duration::from_secs(60), |s| s.0 < round_end);
            if let Ok((mut seen, timeout)) = wait {
                seen.1.push((thread, !timeout.timed_out()));
            }
        }
    }

    impl Spawner for Together {
        fn run<'a>(
            &'a self,
            _spec: &'a RunSpec<'a>,
            on_spawn: &'a mut (dyn FnMut(u32) + Send),
        ) -> BoxFuture<'a, RunOutput> {
            on_spawn(0);
            self.meet();
            Box::pin(std::future::ready(RunOutput {
                end: RunEnd::Exited { code: 0 },
                stdout: "{\"ok\": true}".into(),
                stderr: String::new(),
                stdout_cut: None,
                elapsed: Duration::ZERO,
            }))
        }
    }

    fn context(dir: &std::path::Path, spawner: Arc<dyn Spawner>) -> JobContext {
        let state = StateDir::new(dir.join("state"));
        state.create().expect("create state folder");
        JobContext {
            settings: Arc::new(Settings::for_tests(state.root.clone(), "fake")),
            extras: Extras {
                spawner,
                ..Extras::default()
            },
            state,
            cancel: watch::channel(Control::Run).1,
            tally: None,
        }
    }

    fn job(context: &JobContext, name: &str, age_seconds: u64) -> OsString {
        let path = context.state.jobs().join(name);
        std::fs::write(&path, format!("{{\"prompt\": \"{name}\"}}")).expect("write job");
        let mtime = std::time::SystemTime::now() - Duration::from_secs(age_seconds);
        let file = std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open job");
        file.set_modified(mtime).expect("set mtime");
        OsString::from(name)
    }

    fn board_with(context: &JobContext, open: usize) -> Arc<Board> {
        let board = Board::new(context.clone());
        board.set_gate(open, false, &context.settings, || context.clone());
        board
    }

    /// A temp state folder, its context (a runner that answers at once) and a board
    /// letting `open` jobs hold slots.
    fn fixture(open: usize) -> (tempfile::TempDir, JobContext, Arc<Board>) {
        let dir = tempfile::tempdir().expect("temp folder");
        let context = context(dir.path(), Arc::new(Together::new(1)));
        let board = board_with(&context, open);
        (dir, context, board)
    }

    fn judged() -> Handled {
        Handled::Judged {
            outcome: Outcome::Clean,
            attempts: Vec::new(),
        }
    }

    /// True if the loop has been told of a change (consumes the notice).
    async fn told(board: &Board) -> bool {
        tokio::select! {
            biased;
            () = board.changed() => true,
            () = std::future::ready(()) => false,
        }
    }

    #[test]
    fn slots_take_the_oldest_job_while_fewer_than_open_hold_one() {
        let (_dir, context, board) = fixture(0);
        let newer = job(&context, "b.json", 10);
        let older = job(&context, "a.json", 20);
        board.offer(newer.clone());
        board.offer(older.clone());
        assert!(board.try_take().is_none(), "closed gate");
        board.set_gate(1, false, &context.settings, || context.clone());
        assert_eq!(board.try_take().map(|t| t.0), Some(older.clone()));
        assert!(
            board.try_take().is_none(),
            "workers = 1 and one job holds a slot"
        );
        board.publishing(&older);
        assert_eq!(board.try_take().map(|t| t.0), Some(newer));
        assert_eq!((board.running(), board.waiting()), (2, 0));
    }

    #[test]
    fn a_publishing_job_is_not_shown_running_but_still_counts_for_a_drain() {
        let (_dir, context, board) = fixture(2);
        board.offer(job(&context, "a.json", 20));
        board.offer(job(&context, "b.json", 10));
        let (a, _) = board.try_take().expect("a job");
        let (b, _) = board.try_take().expect("a job");
        board.publishing(&a);
        board.publishing(OsStr::new("never-taken.json"));
        assert_eq!(
            board.snapshot().running,
            std::slice::from_ref(&b),
            "a only publishes"
        );
        assert_eq!(board.running(), 2, "a drain still waits for a");
        board.finish(a, judged());
        board.finish(b, judged());
        assert!(board.snapshot().running.is_empty());
        assert!(board.lock().publishing.is_empty(), "no name left behind");
    }

    #[test]
    fn lowering_workers_holds_new_jobs_back_until_enough_slots_are_given_back() {
        let (_dir, context, board) = fixture(3);
        for name in ["a.json", "b.json", "c.json", "d.json"] {
            board.offer(job(&context, name, 0));
        }
        let taken: Vec<OsString> = (0..3)
            .filter_map(|_| board.try_take())
            .map(|t| t.0)
            .collect();
        assert_eq!(taken.len(), 3);
        // SIGHUP: workers 3 -> 1 while three jobs hold slots.
        board.set_gate(1, false, &context.settings, || context.clone());
        board.publishing(&taken[0]);
        assert!(board.try_take().is_none(), "two still hold slots");
        board.publishing(&taken[1]);
        assert!(board.try_take().is_none(), "one still holds a slot");
        board.publishing(&taken[2]);
        assert!(board.try_take().is_some(), "any slot may take the next job");
    }

    #[test]
    fn a_newer_file_of_a_judged_name_is_queued_again() {
        let (_dir, context, board) = fixture(2);
        board.offer(job(&context, "a.json", 0));
        let (name, _) = board.try_take().expect("a job");
        board.finish(name.clone(), judged());
        assert_eq!((board.running(), board.waiting()), (0, 1));
        let (name, _) = board.try_take().expect("the newer job");
        board.finish(name, Handled::Failed("disk full".into()));
        assert_eq!(
            (board.running(), board.waiting()),
            (0, 0),
            "a failed job waits for a rescan"
        );
    }

    #[tokio::test]
    async fn a_busy_board_wakes_the_loop_once_per_status_write_and_every_time_when_draining() {
        let (_dir, context, board) = fixture(2);
        for name in ["a.json", "b.json", "c.json", "d.json"] {
            board.offer(job(&context, name, 0));
        }
        let (a, _) = board.try_take().expect("a job");
        let (b, _) = board.try_take().expect("a job");
        assert!(told(&board).await);
        std::fs::remove_file(context.state.jobs().join(&a)).expect("judged job removed");
        board.finish(a, judged());
        assert!(!told(&board).await, "told once until the status write");
        let snapshot = board.snapshot();
        assert_eq!((snapshot.waiting, snapshot.running.len()), (2, 1));
        let (c, _) = board.try_take().expect("a job");
        assert!(
            told(&board).await,
            "a change after the status write wakes the loop"
        );
        board.set_gate(0, true, &context.settings, || context.clone());
        for name in [b, c] {
            std::fs::remove_file(context.state.jobs().join(&name)).expect("judged job removed");
            board.finish(name, judged());
            assert!(told(&board).await, "draining: every change");
        }
        assert_eq!(board.running(), 0);
    }

    #[tokio::test]
    async fn an_idle_slot_takes_a_job_offered_after_it_began_to_wait() {
        let (_dir, context, board) = fixture(1);
        let waiting = tokio::spawn({
            let board = board.clone();
            async move { board.next().await.0 }
        });
        tokio::task::yield_now().await;
        board.offer(job(&context, "a.json", 0));
        let taken = tokio::time::timeout(Duration::from_secs(10), waiting).await;
        assert_eq!(
            taken.ok().and_then(Result::ok),
            Some(OsString::from("a.json"))
        );
    }

    #[tokio::test]
    async fn a_job_that_ends_without_giving_its_slot_back_frees_it_for_a_waiting_slot() {
        let (_dir, context, board) = fixture(1);
        board.offer(job(&context, "a.json", 20));
        let (a, _) = board.try_take().expect("a job");
        let waiting = tokio::spawn({
            let board = board.clone();
            async move { board.next().await.0 }
        });
        board.offer(job(&context, "b.json", 10));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a still holds the only slot");
        board.finish(a, Handled::Failed("worker stopped".into()));
        let taken = tokio::time::timeout(Duration::from_secs(10), waiting).await;
        assert_eq!(
            taken.ok().and_then(Result::ok),
            Some(OsString::from("b.json"))
        );
    }

    #[test]
    fn slots_beyond_the_thread_count_share_the_threads() {
        let (_dir, _context, board) = fixture(0);
        let mut slots = Slots::with_threads(2);
        slots.grow(5, &board);
        assert_eq!((slots.slots, slots.runtimes.len()), (5, 2));
        assert!(slots.runtimes.iter().all(Option::is_some));
        slots.grow(3, &board);
        assert_eq!(slots.slots, 5, "a lower count keeps the slots");
        slots.shut_down(Duration::from_secs(10));
    }

    #[test]
    fn two_slots_judge_side_by_side_on_threads_of_their_own() {
        let dir = tempfile::tempdir().expect("temp folder");
        let spawner = Arc::new(Together::new(2));
        let context = context(dir.path(), spawner.clone());
        let board = board_with(&context, 2);
        let rt = crate::support::runtime::runtime().expect("runtime");
        let mut slots = Slots::with_threads(2);
        rt.block_on(async {
            slots.grow(2, &board);
            for i in 0..4 {
                board.offer(job(&context, &format!("j{i}.json"), 0));
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while board.running() + board.waiting() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        // Joins the slot threads (a drop would leave them to wind down on their own).
        slots.shut_down(Duration::from_secs(10));
        assert_eq!(
            (board.running(), board.waiting()),
            (0, 0),
            "every job judged"
        );
        let verdicts = std::fs::read_dir(
            context
                .state
                .verdicts()
                .join(crate::store::state_dir::transcript_hash("")),
        )
        .map_or(0, |d| d.count());
        assert_eq!(verdicts, 4);
        let seen = spawner.seen.lock().expect("runs").1.clone();
        assert!(
            seen.iter().all(|(_, met)| *met),
            "each runner ran beside another: {seen:?}"
        );
        let mut threads: Vec<String> = seen.into_iter().map(|(t, _)| t).collect();
        threads.sort();
        threads.dedup();
        assert_eq!(threads, ["llm-judge-slot-0", "llm-judge-slot-1"]);
    }
}
