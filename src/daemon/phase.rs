//! Where the daemon is in its life, and the signals that move it on: the first
//! SIGTERM/SIGINT drains (no new jobs, running ones get the shutdown grace), the second
//! stops the runners, a third during their kill grace kills them now.

use tokio::time::Instant;

use super::{Daemon, STOP_WAIT};
use crate::engine::events::Control;

/// Where the daemon is in its life: judging, draining on a stop signal, or stopping
/// the runners the drain's grace did not see finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Taking and judging jobs.
    Running,
    /// No new jobs; running jobs get until `grace_over` to finish.
    Draining { grace_over: Instant },
    /// Runners told to stop; past `deadline` the daemon exits anyway.
    Stopping { deadline: Instant },
}

impl Phase {
    pub(super) fn draining(self) -> bool {
        self != Phase::Running
    }
}

impl Daemon {
    /// SIGTERM/SIGINT: the first drains, the second stops the runners, a third (during
    /// their kill grace) kills them now.
    pub(super) fn on_stop_signal(&mut self, signal: &str) {
        match self.phase {
            Phase::Stopping { .. } => {
                tracing::warn!(
                    signal,
                    "stop signal during the kill grace: killing runners now"
                );
                let _ = self.stop_jobs.send(Control::StopNow);
            }
            Phase::Draining { .. } => {
                tracing::warn!(signal, "second stop signal: stopping runners now");
                self.stop_runners();
            }
            Phase::Running => self.drain(signal),
        }
    }

    fn drain(&mut self, signal: &str) {
        let grace = self.settings.config.shutdown_grace_seconds;
        self.phase = Phase::Draining {
            grace_over: Instant::now() + grace,
        };
        self.prestart.close();
        // Closed now, not at the loop's next turn: slots take jobs on their own.
        self.open_slots();
        self.status_dirty = true;
        self.notify("STOPPING=1");
        tracing::info!(
            signal,
            running = self.board.running(),
            grace_seconds = grace.as_secs_f64(),
            "draining: no new jobs; running jobs get the shutdown grace"
        );
    }

    /// Tells running jobs to stop their runners (SIGTERM, kill grace, SIGKILL) and
    /// gives them until the longest kill grace plus `STOP_WAIT` to report back.
    pub(super) fn stop_runners(&mut self) {
        let _ = self.stop_jobs.send(Control::Stop);
        let longest = self
            .board
            .kill_grace_seen()
            .max(self.settings.config.kill_grace_seconds);
        let deadline = Instant::now() + longest + STOP_WAIT;
        self.phase = Phase::Stopping { deadline };
        self.regate = true;
    }
}
