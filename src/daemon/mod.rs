//! The daemon (docs/reference.md, "Guarantees"): one per state folder, watches jobs/,
//! judges on a bounded pool of worker slots (`slots`), oldest first, drains on
//! SIGTERM/SIGINT, reloads on SIGHUP.

pub mod codex_models;
pub mod events;
mod history_import;
pub mod inbox;
#[cfg(target_os = "linux")]
#[path = "inbox_inotify.rs"]
mod inbox_watch;
#[cfg(not(target_os = "linux"))]
#[path = "inbox_notify.rs"]
mod inbox_watch;
mod phase;
pub mod sd_notify;
pub mod slots;
mod uninstalled;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::daemon::codex_models::{CatalogRead, CodexModels};
use crate::daemon::events::{DaemonEvent, Due, EventSource, Signals, Timers, WatchTrouble};
use crate::daemon::inbox::InboxWatcher;
use crate::daemon::sd_notify::Notifier;
use crate::daemon::slots::{Board, JobContext, SharedSlots, lock_slots};
use crate::engine::attempts::Services;
use crate::engine::events::Control;
use crate::engine::prestart::Prestarting;
use crate::engine::spawner::RealSpawner;
use crate::process::pool::SupervisorPool;
use crate::store::config_file::{self, Sources};
use crate::store::open_state;
use crate::store::state_dir::{StateDir, now_unix};
use crate::store::status_file::{StatusRecord, Tally};
use crate::support::error::Chained;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use phase::Phase;

/// Status writes are at most this frequent.
const STATUS_EVERY: Duration = Duration::from_secs(1);
/// After runners are told to stop (SIGTERM, `kill_grace_seconds`, SIGKILL), workers get
/// the grace plus this long to report back.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// How long `main` waits in all for the slots' dropped jobs to kill their runners
/// (within the service's stop timeout margin, `service::spec`).
const SLOT_SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Runs the daemon until it is told to stop; returns the exit code.
pub fn main(settings: Settings, sources: Sources, workers_flag: Option<usize>) -> i32 {
    // A refusal a restart cannot fix exits 2, which the service's
    // RestartPreventExitStatus=2 takes as "do not restart" (a restart loop fixes nothing).
    let state = match open_state(&settings, true) {
        Ok(state) => state,
        Err(e) => {
            say_err!("llm-judge: refusing to start: {e}");
            return if transient(&e.cause) {
                EXIT_FAILURE
            } else {
                EXIT_USAGE
            };
        }
    };
    if let Err(e) = check_folders(&state) {
        tracing::error!("refusing to start: {e}", e = e.chain());
        return EXIT_USAGE;
    }
    let _lock = match crate::store::daemon_lock::acquire(&state.lock()) {
        Ok(lock) => lock,
        Err(e) => {
            tracing::error!("refusing to start: {e}", e = e.chain());
            return EXIT_FAILURE;
        }
    };
    // Before the runtime: the zygote must be forked while this is the only thread.
    let pool = match SupervisorPool::start() {
        Ok(pool) => {
            tracing::debug!("supervisor zygote started");
            Some(Arc::new(pool))
        }
        Err(e) => {
            tracing::info!(
                "no supervisor zygote ({e}): supervisors are forked from the daemon",
                e = e.chain()
            );
            None
        }
    };
    // One worker thread runs the event loop (inbox, signals, reload, status); the jobs
    // run on the worker slots' own runtimes (daemon::slots), so a busy backlog seldom
    // wakes this thread.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build();
    let slots = SharedSlots::default();
    match runtime {
        Ok(rt) => {
            let processes = RealSpawner::new(pool);
            // Built now (it reads the system's certificates), not by the first verdict;
            // only the default table may hold API runners.
            if settings.table(Mode::Default).iter().any(|r| !r.is_cli()) {
                processes.warm_api();
            }
            let folders = processes.folders();
            let (codex, catalog_reads) = CodexModels::new(&settings, folders.clone());
            let prestart = Prestarting::new(processes, rt.handle().clone(), folders);
            let given = Given {
                settings,
                sources,
                workers_flag,
            };
            let daemon = Daemon::new(given, state, slots.clone(), prestart, codex);
            let code = rt.block_on(async move {
                tokio::spawn(daemon.run(catalog_reads))
                    .await
                    .unwrap_or(EXIT_FAILURE)
            });
            // Jobs still running past the stop wait are dropped here, their runners
            // killed, before the process exits.
            lock_slots(&slots).shut_down(SLOT_SHUTDOWN_WAIT);
            code
        }
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            EXIT_FAILURE
        }
    }
}

/// A state folder error that may pass by itself (a full disk, a busy or slow mount):
/// exit 1, so the service manager tries again later.
fn transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        StorageFull | QuotaExceeded | ResourceBusy | TimedOut | Interrupted | OutOfMemory
    )
}

fn check_folders(state: &StateDir) -> Result<(), crate::store::permissions::PermissionError> {
    for dir in [&state.root, &state.jobs()] {
        if let Some(warning) = crate::store::permissions::check_private(dir)? {
            tracing::warn!("{warning}");
        }
    }
    Ok(())
}

struct Daemon {
    /// The settings as loaded (config file, environment, flags).
    base: Arc<Settings>,
    /// What jobs use: `base` with the codex catalog applied.
    settings: Arc<Settings>,
    codex: CodexModels,
    /// Health, cache, runner limits and single-flight, shared by every worker.
    services: Services,
    /// The runners waiting for their jobs; `services.spawner` runs attempts through it.
    prestart: Prestarting<RealSpawner>,
    sources: Sources,
    workers_flag: Option<usize>,
    state: StateDir,
    /// The queue and the running jobs, shared with the slots.
    board: Arc<Board>,
    slots: SharedSlots,
    /// Tells running jobs to stop (`Control::Stop`), then to stop now; every job's
    /// `StopSignal` subscribes to it.
    stop_jobs: watch::Sender<Control>,
    /// The outcome counts `status` reads; slots bump them as verdicts publish.
    tally: Option<Arc<Tally>>,
    started_at: f64,
    phase: Phase,
    status_dirty: bool,
    status_written: std::time::Instant,
    notifier: Option<Notifier>,
    /// The slots' gate is to be set again at the loop's next turn (the phase, the
    /// tables or the catalog changed).
    regate: bool,
    /// The settings jobs use were replaced since the slots and pre-started runners last
    /// took them.
    settings_changed: bool,
    /// Imports the verdict history's spool in the background; ends with the daemon.
    history: Option<history_import::HistoryImporter>,
}

/// What the command line gave the daemon: the settings loaded, where they came from
/// (read again on a reload), and `--workers`.
struct Given {
    settings: Settings,
    sources: Sources,
    workers_flag: Option<usize>,
}

impl Daemon {
    fn new(
        given: Given,
        state: StateDir,
        slots: SharedSlots,
        prestart: Prestarting<RealSpawner>,
        codex: CodexModels,
    ) -> Self {
        let Given {
            settings,
            sources,
            workers_flag,
        } = given;
        // Without a tally (cannot create it), status.json's once-a-second counts remain.
        let tally = match Tally::create(&crate::store::status_file::tally_path(&state)) {
            Ok(t) => Some(Arc::new(t)),
            Err(e) => {
                tracing::warn!("cannot create the outcome tally: {e}");
                None
            }
        };
        let services = Services {
            flights: settings.config.single_flight.then(Arc::default),
            spawner: Arc::new(prestart.clone()),
            investigate: Some(Arc::default()),
            ..Services::for_state(&settings, &state)
        };
        let stop_jobs = watch::channel(Control::Run).0;
        let settings = Arc::new(settings);
        let board = Board::new(job_context(
            &settings, &services, &state, &stop_jobs, &tally,
        ));
        let history = history_import::HistoryImporter::start(&state, &settings.config);
        Daemon {
            history,
            services,
            prestart,
            codex,
            base: settings.clone(),
            settings,
            sources,
            workers_flag,
            state,
            board,
            slots,
            stop_jobs,
            tally,
            started_at: now_unix(),
            phase: Phase::Running,
            status_dirty: true,
            status_written: std::time::Instant::now(),
            notifier: Notifier::from_env(),
            regate: true,
            settings_changed: true,
        }
    }

    /// Services for `settings`, keeping the live runner limits, flights, spawner and ledger.
    fn services_for(&self, settings: &Settings) -> Services {
        if let Some(spend) = &self.services.spend {
            spend.set_durable(crate::engine::attempts::spend_durable(settings));
        }
        let flights = settings
            .config
            .single_flight
            .then(|| self.services.flights.clone().unwrap_or_default());
        Services {
            limits: self.services.limits.clone(),
            flights,
            spawner: self.services.spawner.clone(),
            spend: self.services.spend.clone(),
            exiting: self.services.exiting.clone(),
            // New settings: the first investigate job looks at their table again.
            investigate: Some(Arc::default()),
            ..Services::for_state(settings, &self.state)
        }
    }

    fn workers(&self) -> usize {
        self.workers_flag.unwrap_or(self.settings.config.workers)
    }

    async fn run(mut self, catalog_reads: mpsc::UnboundedReceiver<CatalogRead>) -> i32 {
        let c = self.settings.config.clone();
        let watcher = InboxWatcher::new(&self.state.jobs());
        let timers = Timers {
            rescan_every: c.rescan_seconds,
            watchdog_every: self.notifier.as_ref().and_then(|n| n.watchdog_every),
        };
        let Some(signals) = Signals::unix() else {
            tracing::error!("cannot install signal handlers; refusing to start");
            return EXIT_FAILURE;
        };
        let mut events = EventSource::new(watcher, signals, catalog_reads, timers);
        self.start(&mut events);
        let board = self.board.clone();
        loop {
            if std::mem::take(&mut self.regate) {
                self.open_slots();
            }
            if self.phase.draining() && board.running() == 0 {
                break;
            }
            if let Phase::Stopping { deadline } = self.phase
                && deadline <= Instant::now()
            {
                tracing::error!(
                    running = board.running(),
                    "runners did not stop in time; exiting anyway"
                );
                break;
            }
            match events.next(&board, self.due()).await {
                DaemonEvent::JobArrived(name) => {
                    board.offer(name);
                    self.status_dirty = true;
                }
                DaemonEvent::WatchTrouble(trouble) => {
                    self.on_watch_trouble(trouble, &mut events.watcher);
                }
                DaemonEvent::Rescan => self.on_rescan(&mut events.watcher),
                DaemonEvent::CatalogRead(read) => {
                    let first = self.codex.finish_read(read);
                    self.apply_codex_catalog(first);
                }
                DaemonEvent::CatalogDue => self.codex.start_read(&self.base),
                DaemonEvent::BoardChanged => self.status_dirty = true,
                DaemonEvent::Stop(signal) => self.on_stop_signal(signal),
                DaemonEvent::Reload => self.reload(),
                DaemonEvent::GraceOver => {
                    tracing::warn!(
                        running = board.running(),
                        "shutdown grace is over: stopping runners, leaving their jobs queued"
                    );
                    self.stop_runners();
                }
                DaemonEvent::StatusDue => self.write_status(),
                // The loop's next turn gives up on workers that did not stop in time.
                DaemonEvent::StopDeadline => {}
                DaemonEvent::Watchdog => self.notify("WATCHDOG=1"),
            }
        }
        self.prestart.shut_down().await;
        // The last import, before "daemon stop" says it is over.
        drop(self.history.take());
        self.write_status();
        tracing::info!(pid = std::process::id(), "daemon stop");
        EXIT_OK
    }

    /// Before the first job: logs the start, reads the codex catalog, sweeps what a
    /// crash left, watches and scans the inbox, and says it is ready.
    fn start(&mut self, events: &mut EventSource) {
        self.log_start();
        uninstalled::warn_uninstalled(
            &self.base,
            &self.sources,
            self.services.investigate.as_deref(),
        );
        self.codex.start_read(&self.base);
        let c = self.settings.config.clone();
        let runtime = self.settings.runtime_dir.as_deref();
        crate::engine::recovery::sweep(&self.state, runtime, c.fsync, c.undeliverable_days);
        if let Err(e) = events.watcher.watch() {
            tracing::error!(
                "{e}; relying on rescans every {}s",
                c.rescan_seconds.as_secs_f64(),
                e = e.chain()
            );
        }
        self.scan();
        self.write_status();
        let line = status_line(self.board.waiting(), self.board.running());
        self.notify(&format!("READY=1\nSTATUS={line}"));
        // What a person who just started it needs next (it is silent until a job comes).
        tracing::info!(
            jobs = %self.state.jobs().display(),
            "ready: queue a job with `llm-judge --state-dir {} enqueue --prompt '…' --wait 60`; \
             `llm-judge --state-dir {0} status` shows the queue, judge.log in it every event",
            self.state.root.display()
        );
    }

    /// The timers the loop needs now: the phase's, and a status write when one is owed.
    fn due(&self) -> Due {
        let status = self
            .status_dirty
            .then(|| Instant::from_std(self.status_written + STATUS_EVERY));
        let (grace_over, stop_deadline) = match self.phase {
            Phase::Running => (None, None),
            Phase::Draining { grace_over } => (Some(grace_over), None),
            Phase::Stopping { deadline } => (None, Some(deadline)),
        };
        Due {
            grace_over,
            stop_deadline,
            status,
        }
    }

    fn log_start(&self) {
        let table = |mode| {
            self.settings
                .table(mode)
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"), pid = std::process::id(), workers = self.workers(),
            default = %table(Mode::Default), investigate = %table(Mode::Investigate),
            state = %self.state.root.display(),
            isolation = crate::process::pid_ns::isolation().describe(), "daemon start"
        );
        crate::process::pid_ns::warn_if_host_proc();
    }

    /// Opens the worker slots to jobs (once the first codex catalog read is over,
    /// until a drain) with the settings in use, starting slot threads as `workers` grows.
    fn open_slots(&mut self) {
        let draining = self.phase.draining();
        let open = if self.codex.ready() && !draining {
            self.workers()
        } else {
            0
        };
        let changed = std::mem::take(&mut self.settings_changed);
        let context = changed.then(|| {
            job_context(
                &self.settings,
                &self.services,
                &self.state,
                &self.stop_jobs,
                &self.tally,
            )
        });
        self.board.set_gate(open, draining, context);
        lock_slots(&self.slots).grow(open, &self.board);
        if changed && !draining {
            self.prestart.configure(
                &self.settings,
                self.workers(),
                self.services.health.as_ref(),
            );
        }
    }

    fn scan(&mut self) {
        match self.board.scan() {
            Ok(_) => self.status_dirty = true,
            Err(e) => {
                tracing::error!(folder = %self.state.jobs().display(), "cannot scan the inbox: {e}")
            }
        }
    }

    /// The periodic rescan (events get lost): watches jobs/ again if it was replaced,
    /// scans it, prunes old undeliverable jobs and lets idle prestarted runners go.
    fn on_rescan(&mut self, watcher: &mut InboxWatcher) {
        if watcher.replaced() {
            self.rewatch(watcher);
        }
        self.scan();
        crate::engine::recovery::prune_undeliverable(
            &self.state,
            self.settings.config.undeliverable_days,
        );
        self.prestart.tick();
        self.status_dirty = true;
    }

    fn on_watch_trouble(&mut self, trouble: WatchTrouble, watcher: &mut InboxWatcher) {
        if trouble.folder_lost {
            tracing::warn!("jobs/ was removed or replaced: watching it again");
            self.rewatch(watcher);
        }
        if trouble.events_lost {
            tracing::info!(
                "change events were lost (queue overflow or watch error): rescanning jobs/"
            );
        }
        self.scan();
    }

    fn rewatch(&mut self, watcher: &mut InboxWatcher) {
        match watcher.watch() {
            Ok(()) => {
                tracing::info!(folder = %self.state.jobs().display(), "watching the inbox again")
            }
            Err(e) => tracing::error!("{e}; retrying at the next rescan", e = e.chain()),
        }
    }

    fn reload(&mut self) {
        match config_file::load(&self.sources) {
            Ok(new) => {
                if new.state_dir != self.state.root {
                    tracing::warn!(
                        "config reload: state_dir changes need a restart; keeping {}",
                        self.state.root.display()
                    );
                }
                self.base = Arc::new(Settings {
                    state_dir: self.state.root.clone(),
                    ..new
                });
                self.services = self.services_for(&self.base);
                if let Some(history) = &self.history {
                    history.reconfigure(&self.base.config);
                }
                self.status_dirty = true;
                // After the tables jobs use are rebuilt: the line shows the new values.
                self.apply_codex_catalog(false);
                tracing::info!(workers = self.workers(), "config reloaded");
                uninstalled::warn_uninstalled(
                    &self.base,
                    &self.sources,
                    self.services.investigate.as_deref(),
                );
                self.codex.start_read(&self.base);
            }
            Err(e) => tracing::error!(
                "config reload failed, keeping the old config: {e}",
                e = e.chain()
            ),
        }
    }

    /// Rebuilds the tables jobs use from the loaded ones and the last catalog; a change
    /// shows in `status` at once, not at the next periodic write.
    fn apply_codex_catalog(&mut self, log: bool) {
        let (applied, changed) = self.codex.apply(&self.base, log);
        self.settings = Arc::new(applied);
        // The slots and the pre-started runners follow the new tables at the next turn.
        self.settings_changed = true;
        self.regate = true;
        if changed {
            self.write_status();
        }
    }

    fn write_status(&mut self) {
        let board = self.board.snapshot();
        let line = status_line(board.waiting, board.running.len());
        let record = StatusRecord {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").into(),
            started_at: self.started_at,
            updated_at: now_unix(),
            workers: self.workers(),
            draining: self.phase.draining(),
            outcomes: match &self.tally {
                Some(t) => t.counts(),
                None => board.outcomes,
            },
            // The tally's, as current as its counts (the board's lag to the job's end).
            runners: match &self.tally {
                Some(t) => t.runner_stats(),
                None => board.runners,
            },
            state_dir: self.state.root.display().to_string(),
            state_dir_env: std::env::var(crate::core::config::STATE_DIR_VAR)
                .ok()
                .filter(|v| !v.is_empty()),
            codex_models: self.codex.in_use().to_vec(),
            prestarted: self.prestart.waiting(),
        };
        let written = serde_json::to_vec_pretty(&record)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                crate::store::state_dir::publish(&self.state.status(), &bytes, false)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            tracing::error!("cannot write the status record: {e}");
        }
        self.status_dirty = false;
        self.status_written = std::time::Instant::now();
        self.notify(&format!("STATUS={line}"));
    }

    fn notify(&self, message: &str) {
        if let Some(n) = &self.notifier {
            n.send(message);
        }
    }
}

/// The service manager's one-line status.
fn status_line(waiting: usize, running: usize) -> String {
    format!("{waiting} waiting, {running} running")
}

/// What slots run jobs with: the settings in use, the services, the state, the stop.
fn job_context(
    settings: &Arc<Settings>,
    services: &Services,
    state: &StateDir,
    stop_jobs: &watch::Sender<Control>,
    tally: &Option<Arc<Tally>>,
) -> JobContext {
    JobContext {
        settings: settings.clone(),
        services: services.clone(),
        state: state.clone(),
        stop: stop_jobs.subscribe(),
        tally: tally.clone(),
    }
}
