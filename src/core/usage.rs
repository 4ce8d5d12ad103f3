//! What a runner's answer cost, read from the envelope its CLI prints (Claude Code's
//! `--output-format json`, codex's `exec --json`), and the text inside that envelope
//! the answer rules read. Output in no known envelope is read as plain text. Pure.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// A short human form for judge.log and tables: `in 10 (cached 0) out 5 $0.000125`.
    pub fn human(&self) -> String {
        let mut text = format!(
            "in {} (cached {}) out {}",
            self.input_tokens, self.cached_input_tokens, self.output_tokens
        );
        if let Some(cost) = self.cost_usd {
            text.push_str(&format!(" ${cost:.6}"));
        }
        text
    }
}

/// A runner's stdout, out of its envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Unwrapped<'a> {
    /// The text the answer rules read: the model's reply, or the whole stdout.
    pub text: Cow<'a, str>,
    /// What the attempt cost, when the envelope says.
    pub usage: Option<Usage>,
    /// An error the envelope reports (Claude Code's `is_error` result, codex's
    /// `error` and `turn.failed` events): the detail of a failed attempt's reason.
    pub error: Option<String>,
}

/// Reads `stdout` as a Claude Code result object, a codex event stream, or plain text.
pub fn unwrap_output(stdout: &str) -> Unwrapped<'_> {
    claude_result(stdout)
        .or_else(|| codex_events(stdout))
        .unwrap_or(Unwrapped {
            text: Cow::Borrowed(stdout),
            usage: None,
            error: None,
        })
}

/// Claude Code's `--output-format json`: the whole stdout is one object with
/// `"type": "result"` and a string `result`.
fn claude_result(stdout: &str) -> Option<Unwrapped<'static>> {
    let Ok(Value::Object(envelope)) = serde_json::from_str::<Value>(stdout.trim()) else {
        return None;
    };
    if envelope.get("type").and_then(Value::as_str) != Some("result") {
        return None;
    }
    let result = envelope.get("result").and_then(Value::as_str)?;
    let is_error = envelope.get("is_error").and_then(Value::as_bool) == Some(true);
    Some(Unwrapped {
        text: Cow::Owned(if is_error {
            String::new()
        } else {
            result.to_string()
        }),
        usage: claude_usage(&envelope),
        error: is_error.then(|| result.to_string()),
    })
}

fn claude_usage(envelope: &Map<String, Value>) -> Option<Usage> {
    let usage = envelope.get("usage")?.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = count("cache_read_input_tokens");
    let input = count("input_tokens")
        .saturating_add(count("cache_creation_input_tokens"))
        .saturating_add(cached);
    Some(Usage {
        input_tokens: input,
        cached_input_tokens: cached,
        output_tokens: count("output_tokens"),
        cost_usd: envelope
            .get("total_cost_usd")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0),
    })
}

/// codex's `exec --json`: every non-empty line is an event object with a string `type`,
/// and one of them starts the thread or ends a turn. The reply is the last
/// `agent_message` item; usage is summed over `turn.completed` events.
fn codex_events(stdout: &str) -> Option<Unwrapped<'static>> {
    let mut events = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(Value::Object(event)) = serde_json::from_str::<Value>(line.trim()) else {
            return None;
        };
        event.get("type").and_then(Value::as_str)?;
        events.push(event);
    }
    let known = ["thread.started", "turn.completed", "turn.failed"];
    if !events.iter().any(|e| known.contains(&kind(e))) {
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
                    add_codex_usage(usage.get_or_insert_with(Usage::default), turn);
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
    Some(Unwrapped {
        text: Cow::Owned(reply.unwrap_or("").to_string()),
        usage,
        error: error.map(str::to_string),
    })
}

fn kind(event: &Map<String, Value>) -> &str {
    event.get("type").and_then(Value::as_str).unwrap_or("")
}

fn add_codex_usage(total: &mut Usage, turn: &Map<String, Value>) {
    let count = |key: &str| turn.get(key).and_then(Value::as_u64).unwrap_or(0);
    total.input_tokens = total.input_tokens.saturating_add(count("input_tokens"));
    total.cached_input_tokens = total
        .cached_input_tokens
        .saturating_add(count("cached_input_tokens"));
    total.output_tokens = total.output_tokens.saturating_add(count("output_tokens"));
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAUDE_OK: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":612,"duration_api_ms":410,"num_turns":1,"result":"{\"bug\": true}","session_id":"s","total_cost_usd":0.000135,"usage":{"input_tokens":10,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":5}}"#;

    #[test]
    fn a_claude_result_gives_its_text_and_usage() {
        let out = unwrap_output(CLAUDE_OK);
        assert_eq!(out.text, "{\"bug\": true}");
        assert_eq!(out.error, None);
        assert_eq!(
            out.usage,
            Some(Usage {
                input_tokens: 15,
                cached_input_tokens: 3,
                output_tokens: 5,
                cost_usd: Some(0.000135),
            })
        );
    }

    #[test]
    fn a_claude_error_result_gives_no_text_and_its_message() {
        let out = unwrap_output(
            r#"{"type":"result","is_error":true,"result":"Not logged in · Please run /login","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#,
        );
        assert_eq!(out.text, "");
        assert_eq!(
            out.error.as_deref(),
            Some("Not logged in · Please run /login")
        );
        assert_eq!(out.usage.and_then(|u| u.cost_usd), Some(0.0));
    }

    #[test]
    fn a_claude_result_without_usage_has_none() {
        let out = unwrap_output(r#"{"type":"result","result":"{\"a\": 1}"}"#);
        assert_eq!(out.text, "{\"a\": 1}");
        assert_eq!(out.usage, None);
    }

    #[test]
    fn codex_events_give_the_last_message_and_summed_usage() {
        let out = unwrap_output(concat!(
            "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n",
            "{\"type\":\"turn.started\"}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i0\",\"type\":\"reasoning\",\"text\":\"{\\\"bug\\\": false}\"}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i1\",\"type\":\"agent_message\",\"text\":\"looking\"}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i2\",\"type\":\"agent_message\",\"text\":\"{\\\"bug\\\": true}\"}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":100,\"cached_input_tokens\":40,\"output_tokens\":7}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"cached_input_tokens\":0,\"output_tokens\":1}}\n",
        ));
        assert_eq!(out.text, "{\"bug\": true}");
        assert_eq!(
            out.usage,
            Some(Usage {
                input_tokens: 101,
                cached_input_tokens: 40,
                output_tokens: 8,
                cost_usd: None,
            })
        );
    }

    #[test]
    fn a_failed_codex_turn_gives_its_message() {
        let out = unwrap_output(concat!(
            "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n",
            "{\"type\":\"error\",\"message\":\"reconnecting 1/5\"}\n",
            "{\"type\":\"turn.failed\",\"error\":{\"message\":\"unexpected status 401\"}}\n",
        ));
        assert_eq!(out.text, "");
        assert_eq!(out.error.as_deref(), Some("unexpected status 401"));
        assert_eq!(out.usage, None);
    }

    #[test]
    fn other_output_is_plain_text() {
        for stdout in [
            "{\"bug\": true}\n",
            "thinking\n{\"type\": \"result\"}\n",
            "{\"type\": \"result\", \"result\": 5}",
            "{\"type\":\"turn.completed\"}\nprose\n",
            "{\"type\":\"item.completed\"}\n",
            "",
        ] {
            let out = unwrap_output(stdout);
            assert_eq!(out.text, stdout, "{stdout:?}");
            assert_eq!((out.usage, out.error), (None, None), "{stdout:?}");
        }
    }

    #[test]
    fn usage_reads_and_writes_its_wire_form() {
        let u = Usage {
            input_tokens: 15,
            cached_input_tokens: 3,
            output_tokens: 5,
            cost_usd: None,
        };
        let text = serde_json::to_string(&u).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"input_tokens":15,"cached_input_tokens":3,"output_tokens":5}"#
        );
        assert_eq!(serde_json::from_str::<Usage>(&text).ok(), Some(u.clone()));
        assert_eq!(u.human(), "in 15 (cached 3) out 5");
        assert_eq!(u.total_tokens(), 20);
    }
}
