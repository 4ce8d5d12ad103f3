//! What a runner's answer cost, read from the envelope its CLI prints (Claude Code's
//! `--output-format json` and `stream-json`, codex's `exec --json`), and the reply
//! inside that envelope the answer rules read. Only a runner whose table argv asks for
//! an envelope has its output read as one: a plain-text runner prints the model's reply,
//! which a judged transcript can shape, so its output never counts as usage. Pure.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::core::runner::output_format::OutputFormat;

/// Tokens of one kind a single run may report and still be counted: about ten times
/// the largest context window, summed over an investigate run's turns. A CLI's figure
/// above it is a forgery or a bug, not spend.
pub const MAX_TOKENS_PER_RUN: u64 = 10_000_000;
/// Dollars a single run may report and still be counted (a run bounded by the
/// 600 s timeout spends cents).
pub const MAX_COST_USD_PER_RUN: f64 = 100.0;

/// Tokens and cost of one runner attempt, as its CLI reported them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Every input token, cached ones included.
    pub input_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Output tokens (reasoning included).
    pub output_tokens: u64,
    /// Cost in US dollars, when the CLI reports one (Claude Code does, codex does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Adds `other` to this sum: tokens add up, and so do costs where reported (a sum
    /// no run reported a cost for has none).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        if let Some(cost) = other.cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost);
        }
    }

    /// Why one run's usage cannot be real (and is not counted), or `None` when every
    /// figure is within the per-run bounds: tokens at most [`MAX_TOKENS_PER_RUN`] each,
    /// cost finite and from 0 to [`MAX_COST_USD_PER_RUN`].
    pub fn out_of_bounds(&self) -> Option<String> {
        let tokens = [
            ("input_tokens", self.input_tokens),
            ("cached_input_tokens", self.cached_input_tokens),
            ("output_tokens", self.output_tokens),
        ];
        if let Some((name, n)) = tokens.iter().find(|(_, n)| *n > MAX_TOKENS_PER_RUN) {
            return Some(format!("{name} {n} is over {MAX_TOKENS_PER_RUN} per run"));
        }
        match self.cost_usd {
            // `{:e}`: a forged 1.7e308 would print as 309 digits.
            Some(c) if !(0.0..=MAX_COST_USD_PER_RUN).contains(&c) => Some(format!(
                "cost_usd {c:e} is outside 0 to {MAX_COST_USD_PER_RUN} per run"
            )),
            _ => None,
        }
    }
}

/// What a CLI's envelope holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The model's reply: the text the answer rules read.
    pub reply: String,
    /// What the attempt cost, when the envelope says and the figures are in bounds.
    pub usage: Option<Usage>,
    /// An error the envelope reports (Claude Code's `is_error` result, codex's
    /// `error` and `turn.failed` events), or what it lacks: the detail of a failed
    /// attempt's reason.
    pub error: Option<String>,
    /// Why the usage it reported was not counted ([`Usage::out_of_bounds`]).
    pub refused_usage: Option<String>,
}

/// `stdout` read in the `format` the runner's argv asked for: `None` for a plain-text
/// runner, and for output with no event line of that CLI at all (read as plain text,
/// without usage). Lines of other text mixed in (a wrapper's banner, a warning) are
/// skipped: any whole line that is an event of that CLI makes the output an envelope.
pub fn read_envelope(stdout: &str, format: OutputFormat) -> Option<Envelope> {
    let mut envelope = match format {
        OutputFormat::Plain => return None,
        OutputFormat::ClaudeEvents => claude_events(stdout)?,
        OutputFormat::CodexEvents => codex_events(stdout)?,
    };
    if let Some(why) = envelope.usage.as_ref().and_then(Usage::out_of_bounds) {
        envelope.usage = None;
        envelope.refused_usage = Some(why);
    }
    Some(envelope)
}

/// True for an object that is an event of Claude Code's or codex's JSON output. Such
/// an object is never itself an answer, whatever format the runner asked for.
pub fn is_cli_event(object: &Map<String, Value>) -> bool {
    is_claude_event(object) || is_codex_event(object)
}

/// Claude Code's events carry a `type` and a `session_id`; its result object is a
/// `"type": "result"` object with a `result` or a `subtype`.
fn is_claude_event(object: &Map<String, Value>) -> bool {
    let Some(kind) = object.get("type").and_then(Value::as_str) else {
        return false;
    };
    object.get("session_id").is_some_and(Value::is_string)
        || (kind == "result" && (object.contains_key("result") || object.contains_key("subtype")))
}

/// The event types of codex 0.171's `exec --json`.
const CODEX_EVENTS: [&str; 8] = [
    "thread.started",
    "turn.started",
    "turn.completed",
    "turn.failed",
    "item.started",
    "item.updated",
    "item.completed",
    "error",
];

fn is_codex_event(object: &Map<String, Value>) -> bool {
    object
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|kind| CODEX_EVENTS.contains(&kind))
}

/// The whole lines of `stdout` that are JSON objects passing `is_event`.
fn events(stdout: &str, is_event: fn(&Map<String, Value>) -> bool) -> Vec<Map<String, Value>> {
    stdout.lines().filter_map(object).filter(is_event).collect()
}

/// Claude Code's result object (`json`) or event stream (`stream-json`): the reply is
/// the last `result` event's. Output with events but no `result` (the CLI died
/// mid-answer, or the output cap dropped it) has no reply: none of its other events
/// is ever read as the answer.
fn claude_events(stdout: &str) -> Option<Envelope> {
    let events = events(stdout, is_claude_event);
    if events.is_empty() {
        return None;
    }
    let last_result = events.iter().rev().find(|e| kind(e) == "result");
    Some(last_result.map_or_else(
        || no_reply("the claude output has no result event"),
        result_event,
    ))
}

/// An envelope with no reply, for the reason `why`.
fn no_reply(why: &str) -> Envelope {
    Envelope {
        reply: String::new(),
        usage: None,
        error: Some(why.into()),
        refused_usage: None,
    }
}

/// The line as a JSON object, if it is one.
fn object(line: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(line.trim()) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// A `"type": "result"` event: its `result` text is the reply unless it is an error
/// (`is_error`, a `subtype` other than `success`, or no `result` text).
fn result_event(event: &Map<String, Value>) -> Envelope {
    let result = event.get("result").and_then(Value::as_str);
    let subtype = event.get("subtype").and_then(Value::as_str);
    let is_error = event.get("is_error").and_then(Value::as_bool) == Some(true)
        || subtype.is_some_and(|s| s != "success");
    let (reply, error) = match result {
        Some(text) if !is_error => (text.to_string(), None),
        Some(text) => (String::new(), Some(text.to_string())),
        None => (
            String::new(),
            Some(format!(
                "the result event has no result text (subtype {})",
                subtype.unwrap_or("none")
            )),
        ),
    };
    Envelope {
        reply,
        usage: claude_usage(event),
        error,
        refused_usage: None,
    }
}

fn claude_usage(event: &Map<String, Value>) -> Option<Usage> {
    let usage = event.get("usage")?.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = count("cache_read_input_tokens");
    let input = count("input_tokens")
        .saturating_add(count("cache_creation_input_tokens"))
        .saturating_add(cached);
    Some(Usage {
        input_tokens: input,
        cached_input_tokens: cached,
        output_tokens: count("output_tokens"),
        cost_usd: event.get("total_cost_usd").and_then(Value::as_f64),
    })
}

/// codex's `exec --json` events: the reply is the last `agent_message` item; usage
/// is summed over `turn.completed` events.
fn codex_events(stdout: &str) -> Option<Envelope> {
    let events = events(stdout, is_codex_event);
    if events.is_empty() {
        return None;
    }
    let mut reply = None;
    let mut usage: Option<Usage> = None;
    let mut error = None;
    for event in &events {
        match kind(event) {
            "item.completed" => {
                let item = event.get("item").and_then(Value::as_object);
                if item.and_then(|i| i.get("type")).and_then(Value::as_str) == Some("agent_message")
                {
                    reply = item.and_then(|i| i.get("text")).and_then(Value::as_str);
                }
            }
            "turn.completed" => {
                if let Some(turn) = event.get("usage").and_then(Value::as_object) {
                    usage
                        .get_or_insert_with(Usage::default)
                        .add(&codex_usage(turn));
                }
            }
            "turn.failed" => {
                error = event
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str);
            }
            "error" => error = event.get("message").and_then(Value::as_str),
            _ => {}
        }
    }
    let error = match (reply, error) {
        (_, Some(message)) => Some(message.to_string()),
        (None, None) => Some("the codex output has no agent_message".to_string()),
        (Some(_), None) => None,
    };
    Some(Envelope {
        reply: reply.unwrap_or("").to_string(),
        usage,
        error,
        refused_usage: None,
    })
}

/// Watches a runner's stdout, one whole line at a time, for the event after which its
/// answer can no longer change: Claude Code's `result` event with no error. The CLI
/// only cleans up after it (measured: its exit came 40-100 ms later with Claude Code
/// 2.1.328), so the answer is taken there. A failed result (`is_error`, a `subtype`
/// other than `success`) is never final: the exit status tells it apart. codex's
/// stream has no such event: usage is summed over its turns, and a turn's end is not
/// known to be the last, so codex is read until it exits.
#[derive(Debug, Clone)]
pub struct FinalWatch;

impl FinalWatch {
    /// A watch for output in `format`; none for a format without a final event.
    pub fn new(format: OutputFormat) -> Option<FinalWatch> {
        (format == OutputFormat::ClaudeEvents).then_some(FinalWatch)
    }

    /// Reads one whole line (without its newline); true when it is the final event.
    pub fn is_final(&mut self, line: &str) -> bool {
        object(line).is_some_and(|event| {
            is_claude_event(&event)
                && kind(&event) == "result"
                && result_event(&event).error.is_none()
        })
    }
}

fn kind(event: &Map<String, Value>) -> &str {
    event.get("type").and_then(Value::as_str).unwrap_or("")
}

fn codex_usage(turn: &Map<String, Value>) -> Usage {
    let count = |key: &str| turn.get(key).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: count("input_tokens"),
        cached_input_tokens: count("cached_input_tokens"),
        output_tokens: count("output_tokens"),
        cost_usd: None,
    }
}

#[cfg(test)]
#[path = "usage_tests.rs"]
mod tests;
