//! The daemon's start-up and reload warning for a table none of whose runners can run:
//! no CLI runner installed on its PATH and logged in, no API runner with its key variable set. Its
//! jobs would end unchecked.

use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::core::runner::table::{RUNNERS_VAR, Runner};
use crate::process::spawn::is_installed;

/// Warns about each table none of whose runners is usable.
pub(super) fn warn_uninstalled(settings: &Settings) {
    let overridden = settings.runner_override.is_some();
    let modes: &[Mode] = match overridden {
        true => &[Mode::Default],
        false => &[Mode::Default, Mode::Investigate],
    };
    for &mode in modes {
        let table = settings.table(mode);
        if table.iter().any(is_installed) {
            continue;
        }
        let names: Vec<&str> = table
            .iter()
            .map(|r| r.argv.first().unwrap_or(&r.name).as_str())
            .collect();
        let which = match overridden {
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
        tracing::warn!(
            "{which}: none of its runners ({}) {found}, so its jobs end unchecked; {fix} in \
             the service's environment",
            names.join(", ")
        );
    }
}
