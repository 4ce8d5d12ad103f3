//! `llm-judge service install / uninstall / status` (SPEC section 11).

use crate::cli::{EXIT_FAILURE, ServiceAction};
use crate::config::Settings;

/// Runs a service action; returns the exit code.
pub fn main(_settings: &Settings, _action: ServiceAction) -> i32 {
    eprintln!("llm-judge: service is not built yet");
    EXIT_FAILURE
}
