//! What an API runner's attempt gave, once the seam (`engine::spawner`) has sent its
//! request: the attempt, its answer (the whole reply as one JSON object first) and the
//! `RunEnd` health and the spend ledger read (`core::api::protocol::judge_call`).

use std::io::ErrorKind;

use crate::core::api::key_mask::{mask_object, mask_text};
use crate::core::api::protocol::{CallEnd, judge_call};
use crate::core::runner::output_format::OutputFormat;
use crate::core::runner::table::RunnerKind;
use crate::core::verdict::{Judged, Output, RunEnd, judge_attempt};

/// Judges how runner `name`'s request ended. Only an API runner sends one; a spawner
/// that reports a request for a CLI runner (a mistake in a script) gets a failed
/// attempt that says so.
pub fn judge_api(name: &str, kind: RunnerKind<'_>, end: &CallEnd) -> (Judged, RunEnd) {
    match kind {
        RunnerKind::Api(api) => {
            let (mut judged, end) = judge_call(name, api, end);
            // The body was masked as decoded text; an answer read from the reply decodes
            // the reply's own escapes, so it is masked again here, as is the reason.
            let key = api
                .api_key_env
                .as_deref()
                .and_then(|var| std::env::var(var).ok());
            let key = key.as_deref().map(str::trim);
            if let Some(answer) = judged.answer.as_mut() {
                mask_object(answer, key);
            }
            judged.attempt.reason = mask_text(&judged.attempt.reason, key);
            (judged, end)
        }
        RunnerKind::Cli { .. } => {
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
            (judge_attempt(name, &end, output), end)
        }
    }
}
