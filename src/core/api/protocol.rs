//! The two model API protocols an API runner speaks (Anthropic Messages, OpenAI Chat
//! Completions): the request body and headers, the reply text and token counts in a
//! response, and what an ended request means for the attempt (its reason, its answer,
//! how it counts for runner health and spend). Pure: the request is
//! `process::api_call`.

use serde_json::{Map, Value, json};

use crate::core::api::spec::{ApiSpec, Protocol};
use crate::core::verdict::usage::Usage;
use crate::core::verdict::{Judged, RunEnd, clip, human_number, not_configured_reason};

/// The Messages API version the request names.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How a request ended, as the HTTP edge reports it (the key already masked out).
#[derive(Debug, Clone, PartialEq)]
pub enum CallEnd {
    /// The key variable is unset or empty: nothing was sent.
    NoKey { var: String },
    /// A whole response within the cap.
    Response {
        status: u16,
        /// The `retry-after` header, when there is one.
        retry_after: Option<String>,
        body: Vec<u8>,
    },
    /// The response body passed the cap (`output_cap_bytes`).
    TooLarge { status: u16, cap: usize },
    /// The job's per-runner timeout ran out.
    TimedOut { seconds: f64 },
    /// Nothing listens at the address.
    Refused { address: String },
    /// Any other transport failure: `kind` says when, `detail` the error's own words.
    Transport { kind: Transport, detail: String },
    /// Shutdown stopped it (the job stays queued).
    Stopped,
}

/// When a transport failure happened; its label starts the attempt's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// The HTTP client could not be built (nothing was sent).
    NoClient,
    /// The key cannot be sent (a character no header may carry).
    NotConfigured,
    /// Connecting failed: no route, a name that does not resolve, a TLS refusal.
    CannotConnect,
    /// The server reset or aborted the connection.
    Reset,
    /// The connection closed before the whole response came.
    Dropped,
}

impl Transport {
    pub fn label(self) -> &'static str {
        match self {
            Transport::NoClient => "cannot build the HTTP client",
            Transport::NotConfigured => "not configured",
            Transport::CannotConnect => "cannot connect",
            Transport::Reset => "connection reset",
            Transport::Dropped => "connection dropped",
        }
    }
}

/// The request body: the system prompt, the prompt, `max_tokens`, the temperature,
/// and JSON output where the protocol has it (OpenAI's `json_object` mode).
pub fn request_body(spec: &ApiSpec, prompt: &str) -> Vec<u8> {
    let body = match spec.protocol {
        Protocol::Anthropic => json!({
            "model": spec.model,
            "max_tokens": spec.max_tokens,
            "temperature": spec.temperature,
            "system": spec.system_prompt,
            "messages": [{"role": "user", "content": prompt}],
        }),
        Protocol::OpenAiChat => json!({
            "model": spec.model,
            "max_tokens": spec.max_tokens,
            "temperature": spec.temperature,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": spec.system_prompt},
                {"role": "user", "content": prompt},
            ],
        }),
    };
    body.to_string().into_bytes()
}

/// The protocol's headers besides the content type; `key` goes in the one header the
/// protocol names for it (`x-api-key`, `authorization: Bearer`). The bool marks it
/// sensitive (never printed by the HTTP client's debug output).
pub fn headers(protocol: Protocol, key: Option<&str>) -> Vec<(&'static str, String, bool)> {
    let mut headers = Vec::new();
    match protocol {
        Protocol::Anthropic => {
            headers.push(("anthropic-version", ANTHROPIC_VERSION.to_string(), false));
            if let Some(key) = key {
                headers.push(("x-api-key", key.to_string(), true));
            }
        }
        Protocol::OpenAiChat => {
            if let Some(key) = key {
                headers.push(("authorization", format!("Bearer {key}"), true));
            }
        }
    }
    headers
}

/// A successful response's content: the reply text, the token counts (with the cost
/// from the entry's prices), and whether the reply was cut at `max_tokens`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: String,
    pub usage: Option<Usage>,
    pub cut_at_max_tokens: bool,
}

/// Why a 2xx response body is not a reply of the runner's protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("the body is JSON but not an object")]
    NotAnObject,
    #[error("no \"content\" list in the Messages response")]
    NoContent,
    #[error("no \"choices\" in the Chat Completions response")]
    NoChoices,
    #[error("no choices[0].message.content text in the response")]
    NoChoiceText,
}

/// Reads a 2xx response body; `Err` says why it is not a reply of `protocol`.
pub fn parse_reply(spec: &ApiSpec, body: &[u8]) -> Result<Reply, ReplyError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| ReplyError::NotJson(String::from_utf8_lossy(body).trim().to_string()))?;
    let Value::Object(object) = value else {
        return Err(ReplyError::NotAnObject);
    };
    let (text, stop, usage) = match spec.protocol {
        Protocol::Anthropic => anthropic_reply(&object)?,
        Protocol::OpenAiChat => openai_reply(&object)?,
    };
    Ok(Reply {
        text,
        usage: usage.map(|u| priced(spec, u)),
        cut_at_max_tokens: matches!(stop.as_deref(), Some("max_tokens" | "length")),
    })
}

type Parts = (String, Option<String>, Option<Usage>);

/// Messages: the text blocks of `content`, `stop_reason`, `usage` (cache reads and
/// writes are input too).
fn anthropic_reply(object: &Map<String, Value>) -> Result<Parts, ReplyError> {
    let Some(content) = object.get("content").and_then(Value::as_array) else {
        return Err(ReplyError::NoContent);
    };
    let text: String = content
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    let usage = object.get("usage").and_then(Value::as_object).map(|u| {
        let count = |key: &str| u.get(key).and_then(Value::as_u64).unwrap_or(0);
        let cached = count("cache_read_input_tokens");
        Usage {
            input_tokens: count("input_tokens")
                .saturating_add(count("cache_creation_input_tokens"))
                .saturating_add(cached),
            cached_input_tokens: cached,
            output_tokens: count("output_tokens"),
            cost_usd: None,
        }
    });
    let stop = object.get("stop_reason").and_then(Value::as_str);
    Ok((text, stop.map(str::to_string), usage))
}

/// Chat Completions: `choices[0].message.content`, its `finish_reason`, `usage`.
fn openai_reply(object: &Map<String, Value>) -> Result<Parts, ReplyError> {
    let choice = object
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first());
    let Some(choice) = choice else {
        return Err(ReplyError::NoChoices);
    };
    let Some(text) = choice
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
    else {
        return Err(ReplyError::NoChoiceText);
    };
    let usage = object.get("usage").and_then(Value::as_object).map(|u| {
        let count = |key: &str| u.get(key).and_then(Value::as_u64).unwrap_or(0);
        let cached = u
            .get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Usage {
            input_tokens: count("prompt_tokens"),
            cached_input_tokens: cached,
            output_tokens: count("completion_tokens"),
            cost_usd: None,
        }
    });
    let stop = choice.get("finish_reason").and_then(Value::as_str);
    Ok((text.to_string(), stop.map(str::to_string), usage))
}

/// `usage` with its cost from the entry's prices (cached input at the input price: an
/// upper bound); no price, no cost.
fn priced(spec: &ApiSpec, mut usage: Usage) -> Usage {
    let (input, output) = (
        spec.usd_per_million_input_tokens,
        spec.usd_per_million_output_tokens,
    );
    if input.is_some() || output.is_some() {
        let cost = usage.input_tokens as f64 * input.unwrap_or(0.0)
            + usage.output_tokens as f64 * output.unwrap_or(0.0);
        usage.cost_usd = Some(cost / 1e6);
    }
    usage
}

/// The error message in a failed response: `error.message` (both protocols), an
/// `error` or `detail` string (Ollama, FastAPI servers), else the body's text.
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(&text) else {
        return text.trim().to_string();
    };
    let error = object.get("error");
    let found = error
        .and_then(|e| e.get("message"))
        .or(error)
        .or_else(|| object.get("detail"))
        .or_else(|| object.get("message"))
        .and_then(Value::as_str);
    found.map_or_else(|| text.trim().to_string(), str::to_string)
}

/// What an ended request means: the attempt (reason clipped as every reason is), the
/// answer when the reply holds one, and the `RunEnd` runner health and the spend
/// ledger read (a missing key counts as `not installed`, an error response as a
/// failed exit).
pub fn judge_call(runner: &str, spec: &ApiSpec, end: &CallEnd) -> (Judged, RunEnd) {
    let mut refused_usage = None;
    let mut usage = None;
    let mut answer = None;
    let (reason, run_end) = match end {
        CallEnd::NoKey { var } => (not_configured_reason(var), not_configured(var)),
        CallEnd::Stopped => ("stopped by shutdown".to_string(), RunEnd::Stopped),
        CallEnd::TimedOut { seconds } => (
            format!("timed out after {}s", human_number(*seconds)),
            RunEnd::TimedOut { seconds: *seconds },
        ),
        CallEnd::Refused { address } => {
            (clip("connection refused", address), RunEnd::RequestFailed)
        }
        CallEnd::Transport { kind, detail } => (clip(kind.label(), detail), RunEnd::RequestFailed),
        CallEnd::TooLarge { status, cap } => (
            format!("http {status}: the response is over {cap} bytes (output_cap_bytes)"),
            RunEnd::RequestFailed,
        ),
        CallEnd::Response {
            status,
            retry_after,
            body,
        } if !(200..300).contains(status) => (
            http_error(*status, retry_after.as_deref(), body),
            RunEnd::RequestFailed,
        ),
        CallEnd::Response { status, body, .. } => match parse_reply(spec, body) {
            Err(why) => (
                clip(&format!("http {status}: bad response"), &why.to_string()),
                RunEnd::RequestFailed,
            ),
            Ok(reply) => {
                let (counted, refused) = bounded(reply.usage);
                (usage, refused_usage) = (counted, refused);
                answer = crate::core::verdict::answer::reply_object(&reply.text);
                let reason = match (&answer, reply.cut_at_max_tokens) {
                    (Some(_), _) => "answered".to_string(),
                    (None, false) => clip("no JSON object in the reply", &reply.text),
                    (None, true) => clip(
                        "no JSON object in the reply (cut at max_tokens; raise it)",
                        &reply.text,
                    ),
                };
                (reason, RunEnd::Replied)
            }
        },
    };
    let judged = Judged::new(runner, reason, answer, usage, refused_usage);
    (judged, run_end)
}

fn not_configured(var: &str) -> RunEnd {
    RunEnd::NotConfigured {
        var: var.to_string(),
    }
}

/// Usage within the per-run bounds, or why it is not counted.
fn bounded(usage: Option<Usage>) -> (Option<Usage>, Option<String>) {
    match usage.as_ref().and_then(Usage::out_of_bounds) {
        Some(why) => (None, Some(why)),
        None => (usage, None),
    }
}

/// `http <status>: <message>`, with ` (retry after N s)` when the server says when;
/// the clip keeps the end, so the retry hint survives a long message.
fn http_error(status: u16, retry_after: Option<&str>, body: &[u8]) -> String {
    let mut detail = error_message(body);
    if let Some(after) = retry_after.map(str::trim).filter(|a| !a.is_empty()) {
        let when = match after.parse::<u64>() {
            Ok(seconds) => format!("{seconds} s"),
            Err(_) => after.to_string(),
        };
        detail = format!("{} (retry after {when})", detail.trim());
    }
    clip(&format!("http {status}"), &detail)
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
