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
    WatchTrouble,
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

/// When the loop next needs to act on its own (set from its phase and status).
#[derive(Debug, Clone, Copy)]
pub struct Due {
    pub grace_over: Option<Instant>,
    pub stop_deadline: Option<Instant>,
    pub status: Option<Instant>,
}

/// Where the daemon's events come from.
pub struct EventSource {
    pub watcher: InboxWatcher,
    term: Signal,
    int: Signal,
    hup: Signal,
    catalog_reads: mpsc::UnboundedReceiver<CatalogRead>,
    rescan: Interval,
    catalog_refresh: Interval,
    watchdog: Option<Interval>,
}

impl EventSource {
    /// Installs the signal handlers; `None` when they cannot be installed.
    pub fn new(
        watcher: InboxWatcher,
        catalog_reads: mpsc::UnboundedReceiver<CatalogRead>,
        rescan_every: Duration,
        watchdog_every: Option<Duration>,
    ) -> Option<Self> {
        let (Ok(term), Ok(int), Ok(hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            return None;
        };
        Some(EventSource {
            watcher,
            term,
            int,
            hup,
            catalog_reads,
            rescan: interval(Instant::now() + rescan_every, rescan_every),
            catalog_refresh: interval(Instant::now() + REFRESH_EVERY, REFRESH_EVERY),
            watchdog: watchdog_every.map(|every| interval(Instant::now(), every)),
        })
    }

    /// The next event: the first of the sources, and of the timers `due` asks for.
    pub async fn next(&mut self, board: &super::slots::Board, due: Due) -> DaemonEvent {
        tokio::select! {
            Some(Hint::Arrived(name)) = self.watcher.hints.recv() => DaemonEvent::JobArrived(name),
            () = self.watcher.wake.notified() => DaemonEvent::WatchTrouble,
            _ = self.rescan.tick() => DaemonEvent::Rescan,
            Some(read) = self.catalog_reads.recv() => DaemonEvent::CatalogRead(read),
            _ = self.catalog_refresh.tick() => DaemonEvent::CatalogDue,
            () = board.changed() => DaemonEvent::BoardChanged,
            _ = self.term.recv() => DaemonEvent::Stop("SIGTERM"),
            _ = self.int.recv() => DaemonEvent::Stop("SIGINT"),
            _ = self.hup.recv() => DaemonEvent::Reload,
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
