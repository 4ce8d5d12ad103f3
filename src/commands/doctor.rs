//! `llm-judge doctor`.

use crate::cli::EXIT_FAILURE;
use crate::config::{Settings, Sources};

/// Checks everything; returns the exit code.
pub fn main(_settings: &Settings) -> i32 {
    EXIT_FAILURE
}

/// Doctor when the config itself failed to load.
pub fn config_failed(_sources: &Sources, _error: &str) -> i32 {
    EXIT_FAILURE
}
