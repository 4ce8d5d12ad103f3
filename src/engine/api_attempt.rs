//! One attempt of an API runner: the job's prompt in one request through the seam
//! (`Spawner::call_api`), its reply through the answer rules (the whole reply as one
//! JSON object first), logged as a CLI runner's start and end are. No process, no
//! folder: the runner sees only the prompt.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::core::api_protocol::judge_call;
use crate::core::api_runner::ApiSpec;
use crate::core::config::Settings;
use crate::core::job::Job;
use crate::core::runner_table::Runner;
use crate::core::verdict::{Attempt, Judged, RunEnd, human_number};
use crate::engine::spawner::Spawner;
use crate::process::api_call::ApiRequest;
use crate::process::spawn::StopSignal;

/// Asks `runner`'s API about `job`; the attempt, its answer, and how it ended (for
/// health, spend and shutdown, as a CLI runner's `RunEnd`).
pub async fn attempt_api(
    settings: &Settings,
    job: &Job,
    runner: &Runner,
    api: &ApiSpec,
    spawner: &dyn Spawner,
    stop: Option<&StopSignal>,
) -> (Attempt, Option<Map<String, Value>>, RunEnd) {
    let request = ApiRequest {
        spec: api,
        prompt: &job.prompt,
        timeout: Duration::from_secs_f64(job.timeout_seconds),
        cap: settings.config.output_cap_bytes,
        stop,
    };
    tracing::info!(
        id = %job.id, runner = %runner.name, timeout = %human_number(job.timeout_seconds),
        api = api.protocol.name(), model = %api.model, base_url = %api.base_url,
        "runner start"
    );
    let started = Instant::now();
    let end = spawner.call_api(&request).await;
    let elapsed = started.elapsed();
    let (judged, run_end) = judge_call(&runner.name, api, &end);
    let Judged {
        mut attempt,
        answer,
        refused_usage,
    } = judged;
    if let Some(why) = refused_usage {
        tracing::warn!(id = %job.id, runner = %runner.name, "usage the API reported is not counted: {why}");
    }
    attempt.elapsed_ms = Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
    let usage = attempt.usage.as_ref();
    tracing::info!(
        id = %job.id, runner = %runner.name, ok = attempt.ok, reason = ?attempt.reason,
        elapsed_ms = attempt.elapsed_ms.unwrap_or(0),
        input_tokens = usage.map(|u| u.input_tokens),
        cached_input_tokens = usage.map(|u| u.cached_input_tokens),
        output_tokens = usage.map(|u| u.output_tokens),
        cost_usd = usage.and_then(|u| u.cost_usd), "runner end"
    );
    (attempt, answer, run_end)
}
