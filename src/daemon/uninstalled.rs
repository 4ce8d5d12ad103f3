//! The daemon's start-up and reload warning for a table none of whose runners can run
//! (`engine::table_warning`): the default table always, the investigate table only when
//! a rule (the user's rules file, a trusted project's) or the config uses investigate
//! mode; else the first investigate job looks (`InvestigateNotice`).

use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::engine::table_warning::{InvestigateNotice, warn_if_unusable};
use crate::store::config_file::Sources;
use crate::store::rules_files::investigate_use;

/// Warns about each table none of whose runners is usable and that something uses.
pub(super) fn warn_uninstalled(
    settings: &Settings,
    sources: &Sources,
    notice: Option<&InvestigateNotice>,
) {
    warn_if_unusable(settings, Mode::Default, None);
    if settings.runner_override.is_some() {
        return;
    }
    if let Some(used) = investigate_use(settings, sources) {
        warn_if_unusable(settings, Mode::Investigate, Some(&used));
        if let Some(notice) = notice {
            notice.looked();
        }
    }
}
