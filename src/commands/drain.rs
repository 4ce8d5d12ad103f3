//! `llm-judge drain`.

use crate::cli::EXIT_FAILURE;
use crate::config::Settings;

/// Drains; returns the exit code.
pub fn main(_settings: &Settings, _transcript: &str) -> i32 {
    EXIT_FAILURE
}
