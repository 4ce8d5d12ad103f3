//! `llm-judge status`.

use crate::cli::{EXIT_FAILURE, StatusArgs};
use crate::config::Settings;

/// Shows status; returns the exit code.
pub fn main(_settings: &Settings, _args: &StatusArgs) -> i32 {
    EXIT_FAILURE
}
