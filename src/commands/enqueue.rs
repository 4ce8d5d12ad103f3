//! `llm-judge enqueue`: write a job safely.

use clap::Args;

use crate::cli::EXIT_FAILURE;
use crate::config::Settings;

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "Example:\n  llm-judge enqueue --prompt 'Reply {\"ok\": true}' --transcript T";

/// `enqueue` flags.
#[derive(Args, Debug)]
pub struct EnqueueArgs {}

/// True when a runner's hook is calling: write nothing.
pub fn recursion_guard() -> bool {
    std::env::var_os(crate::runner_process::CHILD_VAR).is_some()
}

/// Writes the job; returns the exit code.
pub fn main(_settings: &Settings, _args: EnqueueArgs) -> i32 {
    EXIT_FAILURE
}
