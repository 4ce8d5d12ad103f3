//! Everything the daemon loop acts on, as one typed stream (nextest's `signal.rs` and
//! `internal_events.rs` are the model): OS signals as stop and reload events, inbox
//! hints and watch trouble, catalog reads coming back, the board changing, and the
//! loop's timers (rescan, status, the shutdown's grace and deadline, the catalog's
//! refresh, the service manager's watchdog). `next` waits for the first of them.

use std::ffi::OsString;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior, sleep_until};

use super::codex_models::{CatalogRead, REFRESH_EVERY};
use super::inbox::{Hint, InboxWatcher};

/// What happened, for the daemon loop.
#[derive(Debug)]
pub enum DaemonEvent {
    /// SIGTERM or SIGINT (its name).
    Stop(&'static str),
    /// SIGHUP: reload the config.
    Reload,
    /// A file appeared in jobs/.
    JobArrived(OsString),
    /// The inbox watch lost events or its folder: look again.
    WatchTrouble(WatchTrouble),
    /// The periodic rescan is due.
    Rescan,
    /// A codex catalog read came back.
    CatalogRead(CatalogRead),
    /// The hourly catalog refresh is due.
    CatalogDue,
    /// A job was queued, taken or finished.
    BoardChanged,
    /// The shutdown grace is over.
    GraceOver,
    /// A status write is due.
    StatusDue,
    /// Runners told to stop did not report in time.
    StopDeadline,
    /// The service manager's watchdog wants a ping.
    Watchdog,
}

/// What went wrong with the inbox watch (either or both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchTrouble {
    /// jobs/ itself was removed or replaced: watch it again.
    pub folder_lost: bool,
    /// Change events were lost (queue overflow, a watch error): scan it.
    pub events_lost: bool,
}

/// Where stop and reload come from: the process's signals, or nothing (a test driving
/// the loop in-process must not take over its test runner's signals; nextest's
/// `SignalHandlerKind::Noop`).
pub enum Signals {
    Unix {
        term: Signal,
        int: Signal,
        hup: Signal,
    },
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "only tests drive the loop in-process")
    )]
    Noop,
}

impl Signals {
    /// The process's SIGTERM, SIGINT and SIGHUP; `None` when they cannot be installed.
    pub fn unix() -> Option<Self> {
        let (Ok(term), Ok(int), Ok(hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            return None;
        };
        Some(Signals::Unix { term, int, hup })
    }

    /// The next stop or reload; never, for `Noop`.
    async fn next(&mut self) -> DaemonEvent {
        match self {
            Signals::Unix { term, int, hup } => tokio::select! {
                _ = term.recv() => DaemonEvent::Stop("SIGTERM"),
                _ = int.recv() => DaemonEvent::Stop("SIGINT"),
                _ = hup.recv() => DaemonEvent::Reload,
            },
            Signals::Noop => std::future::pending().await,
        }
    }
}

/// When the loop next needs to act on its own (set from its phase and status).
#[derive(Debug, Clone, Copy)]
pub struct Due {
    pub grace_over: Option<Instant>,
    pub stop_deadline: Option<Instant>,
    pub status: Option<Instant>,
}

/// The loop's own periodic timers.
#[derive(Debug, Clone, Copy)]
pub struct Timers {
    /// The rescan of jobs/ (events get lost).
    pub rescan_every: Duration,
    /// The service manager's watchdog ping, when it asks for one.
    pub watchdog_every: Option<Duration>,
}

/// Where the daemon's events come from.
pub struct EventSource {
    pub watcher: InboxWatcher,
    signals: Signals,
    catalog_reads: mpsc::UnboundedReceiver<CatalogRead>,
    rescan: Interval,
    catalog_refresh: Interval,
    watchdog: Option<Interval>,
}

impl EventSource {
    /// The events of `watcher`, `signals` and `catalog_reads`, with the loop's timers.
    pub fn new(
        watcher: InboxWatcher,
        signals: Signals,
        catalog_reads: mpsc::UnboundedReceiver<CatalogRead>,
        timers: Timers,
    ) -> Self {
        let Timers {
            rescan_every,
            watchdog_every,
        } = timers;
        EventSource {
            watcher,
            signals,
            catalog_reads,
            rescan: interval(Instant::now() + rescan_every, rescan_every),
            catalog_refresh: interval(Instant::now() + REFRESH_EVERY, REFRESH_EVERY),
            watchdog: watchdog_every.map(|every| interval(Instant::now(), every)),
        }
    }

    /// What the watcher says went wrong (and clears its marks).
    fn trouble(&self) -> WatchTrouble {
        use std::sync::atomic::Ordering;
        WatchTrouble {
            folder_lost: self.watcher.lost.load(Ordering::SeqCst),
            events_lost: self.watcher.rescan.swap(false, Ordering::SeqCst),
        }
    }

    /// The next event: the first of the sources, and of the timers `due` asks for.
    pub async fn next(&mut self, board: &super::slots::Board, due: Due) -> DaemonEvent {
        tokio::select! {
            Some(Hint::Arrived(name)) = self.watcher.hints.recv() => DaemonEvent::JobArrived(name),
            () = self.watcher.wake.notified() => DaemonEvent::WatchTrouble(self.trouble()),
            _ = self.rescan.tick() => DaemonEvent::Rescan,
            Some(read) = self.catalog_reads.recv() => DaemonEvent::CatalogRead(read),
            _ = self.catalog_refresh.tick() => DaemonEvent::CatalogDue,
            () = board.changed() => DaemonEvent::BoardChanged,
            event = self.signals.next() => event,
            () = at(due.grace_over) => DaemonEvent::GraceOver,
            () = at(due.status) => DaemonEvent::StatusDue,
            () = at(due.stop_deadline) => DaemonEvent::StopDeadline,
            // Pinged from the loop itself, so a stuck loop is noticed.
            _ = tick(&mut self.watchdog) => DaemonEvent::Watchdog,
        }
    }
}

/// An interval first due at `start`, then every `every`, delayed (not bunched) when
/// the loop was busy.
fn interval(start: Instant, every: Duration) -> Interval {
    let mut timer = tokio::time::interval_at(start, every);
    timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
    timer
}

/// Resolves at `when`; never without one.
async fn at(when: Option<Instant>) {
    match when {
        Some(when) => sleep_until(when).await,
        None => std::future::pending().await,
    }
}

/// Ticks `timer`, or never when there is none.
async fn tick(timer: &mut Option<Interval>) {
    match timer {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}
