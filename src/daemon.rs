//! The daemon (SPEC section 6).

use crate::config::Settings;

/// Runs the daemon until it is told to stop; returns the exit code.
pub fn main(_settings: Settings, _workers: Option<usize>) -> i32 {
    eprintln!("llm-judge: the daemon is not built yet");
    crate::cli::EXIT_FAILURE
}
