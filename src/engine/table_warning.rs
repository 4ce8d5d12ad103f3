//! The warning for a table none of whose runners can run: no CLI runner installed on
//! its PATH and logged in, no API runner with its key variable set. Its jobs would end
//! unchecked. The daemon gives it at start and on reload (for the investigate table
//! only when something uses investigate mode: an API-only config has no runner for it
//! and needs none), and once when the first investigate job comes (`InvestigateNotice`).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::core::runner::table::{RUNNERS_VAR, Runner};
use crate::process::spawn::is_installed;

/// Warns when no runner of `settings`' `mode` table is usable, saying what needs it
/// (`used`, e.g. `rule "x" in FILE uses investigate mode`) when given; true when it
/// warned.
pub fn warn_if_unusable(settings: &Settings, mode: Mode, used: Option<&str>) -> bool {
    let table = settings.table(mode);
    if table.iter().any(is_installed) {
        return false;
    }
    let names: Vec<&str> = table
        .iter()
        .map(|r| r.argv.first().unwrap_or(&r.name).as_str())
        .collect();
    let which = match settings.runner_override.is_some() {
        true => RUNNERS_VAR.to_string(),
        false => format!("{} table", mode.name()),
    };
    let (found, fix) = match table.iter().all(Runner::is_cli) {
        true => (
            "is installed on the daemon's PATH and logged in",
            "install or log in one of them, or fix PATH,",
        ),
        false => (
            "is installed on the daemon's PATH and logged in, or has its key variable set",
            "install or log in one of them, set a key, or fix PATH,",
        ),
    };
    let used = used.map(|u| format!(" ({u})")).unwrap_or_default();
    tracing::warn!(
        "{which}: none of its runners ({}) {found}, so its jobs end unchecked{used}; {fix} in \
         the service's environment",
        names.join(", ")
    );
    true
}

/// Whether the investigate table was looked at for the settings in use: at start when
/// something used investigate mode, else by the first investigate job, which warns
/// once if nothing can run it.
#[derive(Debug, Default)]
pub struct InvestigateNotice {
    looked: AtomicBool,
}

impl InvestigateNotice {
    /// The table was looked at (at start or reload): jobs need not look again.
    pub fn looked(&self) {
        self.looked.store(true, Ordering::SeqCst);
    }

    /// An investigate job came: the first one looks at the table, once.
    pub fn job_arrived(&self, settings: &Settings) {
        // Under the override variable one table serves both modes: it was looked at.
        if settings.runner_override.is_some() || self.looked.swap(true, Ordering::SeqCst) {
            return;
        }
        warn_if_unusable(
            settings,
            Mode::Investigate,
            Some("an investigate job came in"),
        );
    }
}
