//! The state folder on disk (docs/reference.md: "State folder", "Guarantees", "judge.log",
//! "Beyond catstack"): its layout and publish by rename, claims, the verdict outbox, the
//! answer cache, runner health, the daemon lock, judge.log, the status record, the spend
//! ledger, the permission checks and the judge's own files for codex.

pub mod cache;
pub mod child_key;
pub mod claim;
pub mod codex_files;
pub mod config_file;
pub mod daemon_lock;
pub mod file_lock;
pub mod harness_files;
pub mod health_store;
pub mod history;
pub mod hook_session;
pub mod judge_log;
pub mod log_line;
pub mod outbox;
pub mod permissions;
pub mod protocol;
pub mod rules_files;
pub mod spend_ledger;
pub mod state_dir;
pub mod status_file;
pub mod tag_key;
pub mod user_files;
pub mod verdict_watch;

use std::path::PathBuf;

use thiserror::Error;

use crate::core::config::Settings;
use state_dir::StateDir;

/// The state folder cannot be created or used.
#[derive(Debug, Error)]
#[error(
    "state folder {}: {cause}; fix its permissions or pass --state-dir",
    path.display()
)]
pub struct StateError {
    /// The state folder.
    pub path: PathBuf,
    /// Why (`state_dir::StateDir::create`'s error); in the message, before its fix.
    pub cause: std::io::Error,
}

/// Why a command that reports on the state folder (`status`, `history`, `stats`,
/// `mark`) cannot: another user's private folder (which would read as an idle judge),
/// or none there (a wrong folder should be obvious); `None` when it can be read.
pub fn unreadable_state(state: &StateDir) -> Option<String> {
    let root = &state.root;
    if let Some(why) = permissions::entry_denied(root) {
        return Some(format!("state folder {}: {why}", root.display()));
    }
    let e = std::fs::symlink_metadata(root).err()?;
    let what = match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist (no job was ever queued there)".to_string(),
        _ => format!("cannot be read: {e}"),
    };
    Some(format!(
        "state folder {} {what}; give the folder the daemon and hooks use (--state-dir, {} or \
         the config's state_dir)",
        root.display(),
        crate::core::config::STATE_DIR_VAR
    ))
}

/// Creates the state folder and starts judge.log; says why on failure.
pub fn open_state(settings: &Settings, also_stderr: bool) -> Result<StateDir, StateError> {
    let state = StateDir::new(&settings.state_dir);
    state.create().map_err(|cause| StateError {
        path: state.root.clone(),
        cause,
    })?;
    judge_log::init(&state.log(), settings.config.log_max_bytes, also_stderr);
    if settings.runner_override.is_some() {
        tracing::warn!(
            "{} is set: it replaces every runner table (no safety check)",
            crate::core::runner::table::RUNNERS_VAR
        );
    }
    Ok(state)
}
