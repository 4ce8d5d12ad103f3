//! `doctor`'s rows for API runners: protocol, base URL, model, whether the key
//! variable is set (never its value), and with `--online` one tiny request.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::core::api::protocol::judge_call;
use crate::core::api::spec::ApiSpec;
use crate::core::verdict::RunEnd;
use crate::process::api_call::{ApiClient, ApiRequest};

/// How long `doctor --online`'s request may take.
const ONLINE_TIMEOUT: Duration = Duration::from_secs(20);
/// The answer cap of the online request: a tiny object.
const ONLINE_MAX_TOKENS: u32 = 16;
/// The online request's prompt.
const ONLINE_PROMPT: &str = "Reply with the JSON object {\"ok\": true}.";

/// What doctor says about one API runner.
pub struct ApiRows {
    /// Lines, each `(is_warning, text)`.
    pub lines: Vec<(bool, String)>,
    /// The runner's record for `--json`.
    pub record: Value,
    /// False when its key variable is missing: every job's attempt fails.
    pub usable: bool,
}

/// The rows of `runner` (an API runner of the table `table`); `online` also asks the
/// API once, on `client`.
pub fn rows(table: &str, runner: &str, api: &ApiSpec, online: Option<&ApiClient>) -> ApiRows {
    let key_set = api.key_is_set(|var| std::env::var_os(var));
    let key = match &api.api_key_env {
        None => "no key (none needed)".to_string(),
        Some(var) if key_set => format!("key variable {var} is set"),
        Some(var) => format!("key variable {var} is NOT set"),
    };
    let head = format!(
        "{table} runner {runner}: API {} at {}, model {}, {key}",
        api.protocol.name(),
        api.base_url,
        api.model
    );
    let mut lines = vec![(!key_set, head)];
    if !key_set && let Some(var) = &api.api_key_env {
        lines.push((
            true,
            format!(
                "{table} runner {runner}: its attempts end \"not configured: {var} is not set\"; \
                 set {var} in the daemon's environment (for the service: systemctl --user edit \
                 llm-judge, Environment={var}=...). doctor sees this shell's environment; the \
                 service's may differ"
            ),
        ));
    }
    let mut record = json!({
        "table": table, "name": runner, "api": api.protocol.name(),
        "base_url": api.base_url, "model": api.model,
        "key_env": api.api_key_env, "key_set": key_set, "usable": key_set,
    });
    if let Some(client) = online.filter(|_| key_set) {
        let (ok, text) = ask_once(client, api);
        record["online"] = json!({"ok": ok, "result": text});
        lines.push((!ok, format!("{table} runner {runner}: online: {text}")));
    }
    ApiRows {
        lines,
        record,
        usable: key_set,
    }
}

/// One tiny request; whether it answered, and what happened (the attempt's reason, and
/// the time it took).
fn ask_once(client: &ApiClient, api: &ApiSpec) -> (bool, String) {
    let spec = ApiSpec {
        max_tokens: api.max_tokens.min(ONLINE_MAX_TOKENS),
        ..api.clone()
    };
    let request = ApiRequest {
        spec: &spec,
        prompt: ONLINE_PROMPT,
        timeout: ONLINE_TIMEOUT,
        cap: 1 << 20,
        stop: None,
    };
    let runtime = match crate::support::runtime::runtime() {
        Ok(runtime) => runtime,
        Err(e) => return (false, e.to_string()),
    };
    let started = Instant::now();
    let end = runtime.block_on(client.call(&request));
    let ms = started.elapsed().as_millis();
    let (judged, run_end) = judge_call("doctor", &spec, &end);
    let reason = judged.attempt.reason;
    match (judged.answer.is_some(), run_end) {
        (true, _) => (true, format!("answered in {ms} ms")),
        (false, RunEnd::Replied) => (false, format!("replied in {ms} ms, but {reason}")),
        (false, _) => (false, reason),
    }
}
