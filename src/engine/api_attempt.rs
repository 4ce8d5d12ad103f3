//! What an API runner's attempt gave, once the seam (`engine::spawner`) has sent its
//! request: the attempt, its answer (the whole reply as one JSON object first) and the
//! `RunEnd` health and the spend ledger read (`core::api_protocol::judge_call`).

use std::io::ErrorKind;

use crate::core::api_protocol::{CallEnd, judge_call};
use crate::core::runner_table::Runner;
use crate::core::usage::OutputFormat;
use crate::core::verdict::{Judged, Output, RunEnd, judge_attempt};

/// Judges how `runner`'s request ended. Only an API runner sends one; a spawner that
/// reports a request for a CLI runner (a mistake in a script) gets a failed attempt
/// that says so.
pub fn judge_api(runner: &Runner, end: &CallEnd) -> (Judged, RunEnd) {
    match &runner.api {
        Some(api) => judge_call(&runner.name, api, end),
        None => {
            let end = RunEnd::SpawnFailed {
                kind: ErrorKind::InvalidInput,
                message: "a CLI runner (argv) got an API reply".into(),
            };
            let output = Output {
                stdout: "",
                stderr: "",
                stdout_cut: None,
                format: OutputFormat::Plain,
            };
            (judge_attempt(&runner.name, &end, output), end)
        }
    }
}
