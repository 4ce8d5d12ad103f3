//! What a runner's answer cost, read from the envelope its CLI prints (Claude Code's
//! `--output-format json` and `stream-json`, codex's `exec --json`), and the reply
//! inside that envelope the answer rules read. Output in no known envelope is read as
//! plain text. Pure.

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
}

/// What a CLI's envelope holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The model's reply: the text the answer rules read.
    pub reply: String,
    /// What the attempt cost, when the envelope says.
    pub usage: Option<Usage>,
    /// An error the envelope reports (Claude Code's `is_error` result, codex's
    /// `error` and `turn.failed` events): the detail of a failed attempt's reason.
    pub error: Option<String>,
}

/// `stdout` as a Claude Code result object or event stream, or a codex event stream;
/// `None` for any other output, which is read as plain text.
pub fn read_envelope(stdout: &str) -> Option<Envelope> {
    claude_result(stdout)
        .or_else(|| claude_stream(stdout))
        .or_else(|| codex_events(stdout))
}

/// Claude Code's `--output-format json`: the whole stdout is one object with
/// `"type": "result"` and a string `result`.
fn claude_result(stdout: &str) -> Option<Envelope> {
    let Ok(Value::Object(envelope)) = serde_json::from_str::<Value>(stdout.trim()) else {
        return None;
    };
    result_event(&envelope)
}

/// Claude Code's `--output-format stream-json`: one event object per line, each with
/// its `type` and `session_id` (2.1.328 starts with a `system` `ui_invalidate`, then
/// `init`); the reply is the last `result` event's. The first whole line decides, so a
/// stream whose start the output cap dropped is still one. A stream that ends without a
/// `result` event (the CLI died mid-answer) has no reply: none of its other events is
/// ever read as the answer.
fn claude_stream(stdout: &str) -> Option<Envelope> {
    let mut lines = stdout.lines().filter(|l| !l.trim().is_empty());
    let first = object(lines.next()?)?;
    let has = |key: &str| first.get(key).is_some_and(Value::is_string);
    if !(has("type") && has("session_id")) {
        return None;
    }
    let last_result = stdout
        .lines()
        .rev()
        .filter_map(object)
        .find(|event| kind(event) == "result");
    Some(
        last_result
            .and_then(|e| result_event(&e))
            .unwrap_or(Envelope {
                reply: String::new(),
                usage: None,
                error: Some("the stream-json output ended without a result event".into()),
            }),
    )
}

/// The line as a JSON object, if it is one.
fn object(line: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(line.trim()) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// A `"type": "result"` object with a string `result`: the reply unless it is an error
/// (`is_error`, or a `subtype` other than `success`).
fn result_event(envelope: &Map<String, Value>) -> Option<Envelope> {
    if kind(envelope) != "result" {
        return None;
    }
    let result = envelope.get("result").and_then(Value::as_str)?;
    let subtype = envelope.get("subtype").and_then(Value::as_str);
    let is_error = envelope.get("is_error").and_then(Value::as_bool) == Some(true)
        || subtype.is_some_and(|s| s != "success");
    Some(Envelope {
        reply: if is_error {
            String::new()
        } else {
            result.to_string()
        },
        usage: claude_usage(envelope),
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
fn codex_events(stdout: &str) -> Option<Envelope> {
    let mut events = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let event = object(line)?;
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
    Some(Envelope {
        reply: reply.unwrap_or("").to_string(),
        usage,
        error: error.map(str::to_string),
    })
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
mod tests {
    use super::*;

    const CLAUDE_OK: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":612,"duration_api_ms":410,"num_turns":1,"result":"{\"bug\": true}","session_id":"s","total_cost_usd":0.000135,"usage":{"input_tokens":10,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":5}}"#;

    #[test]
    fn a_claude_result_gives_its_text_and_usage() {
        let out = read_envelope(CLAUDE_OK).unwrap();
        assert_eq!(out.reply, "{\"bug\": true}");
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
        let out = read_envelope(
            r#"{"type":"result","is_error":true,"result":"Not logged in · Please run /login","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#,
        )
        .unwrap();
        assert_eq!(out.reply, "");
        assert_eq!(
            out.error.as_deref(),
            Some("Not logged in · Please run /login")
        );
        assert_eq!(out.usage.and_then(|u| u.cost_usd), Some(0.0));
    }

    #[test]
    fn a_claude_stream_gives_its_result_events_text_and_usage() {
        let init = r#"{"type":"system","subtype":"ui_invalidate","session_id":"s"}
{"type":"system","subtype":"init","cwd":"/tmp/x","tools":[],"session_id":"s"}"#;
        let assistant = r#"{"type":"assistant","session_id":"s","message":{"content":[{"type":"text","text":"{\"bug\": true}"}]}}"#;
        let stream = format!("{init}\n{assistant}\n{CLAUDE_OK}\n");
        assert_eq!(read_envelope(&stream), read_envelope(CLAUDE_OK));
        let cut = format!("{init}\n{assistant}\n");
        let out = read_envelope(&cut).unwrap();
        assert_eq!(out.reply, "", "no event of a cut stream is the answer");
        assert!(out.error.unwrap().contains("without a result event"));
        let failed = format!(
            "{init}\n{}\n",
            r#"{"type":"result","subtype":"error_during_execution","is_error":false,"result":"boom"}"#
        );
        let out = read_envelope(&failed).unwrap();
        assert_eq!(
            (out.reply.as_str(), out.error.as_deref()),
            ("", Some("boom"))
        );
        let cut = format!("{assistant}\n{CLAUDE_OK}\n");
        assert_eq!(
            read_envelope(&cut),
            read_envelope(CLAUDE_OK),
            "a stream whose start was cut is still read as one"
        );
        let cut_before_result = format!("{assistant}\n");
        assert_eq!(read_envelope(&cut_before_result).unwrap().reply, "");
        let not_claude = format!("{{\"type\": \"note\"}}\n{CLAUDE_OK}\n");
        assert_eq!(
            read_envelope(&not_claude),
            None,
            "no session_id: plain output"
        );
    }

    #[test]
    fn a_claude_result_without_usage_has_none() {
        let out = read_envelope(r#"{"type":"result","result":"{\"a\": 1}"}"#).unwrap();
        assert_eq!(out.reply, "{\"a\": 1}");
        assert_eq!(out.usage, None);
    }

    #[test]
    fn codex_events_give_the_last_message_and_summed_usage() {
        let out = read_envelope(concat!(
            "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n",
            "{\"type\":\"turn.started\"}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i0\",\"type\":\"reasoning\",\"text\":\"{\\\"bug\\\": false}\"}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i1\",\"type\":\"agent_message\",\"text\":\"looking\"}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i2\",\"type\":\"agent_message\",\"text\":\"{\\\"bug\\\": true}\"}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":100,\"cached_input_tokens\":40,\"output_tokens\":7}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"cached_input_tokens\":0,\"output_tokens\":1}}\n",
        ))
        .unwrap();
        assert_eq!(out.reply, "{\"bug\": true}");
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
        let out = read_envelope(concat!(
            "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n",
            "{\"type\":\"error\",\"message\":\"reconnecting 1/5\"}\n",
            "{\"type\":\"turn.failed\",\"error\":{\"message\":\"unexpected status 401\"}}\n",
        ))
        .unwrap();
        assert_eq!(out.reply, "");
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
            assert_eq!(read_envelope(stdout), None, "{stdout:?}");
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
    }

    #[test]
    fn usage_adds_tokens_and_reported_costs() {
        let codex = Usage {
            input_tokens: 10,
            cached_input_tokens: 4,
            output_tokens: 5,
            cost_usd: None,
        };
        let mut sum = Usage::default();
        sum.add(&codex);
        sum.add(&codex);
        assert_eq!(
            (sum.input_tokens, sum.cached_input_tokens, sum.output_tokens),
            (20, 8, 10)
        );
        assert_eq!(sum.cost_usd, None, "no run reported a cost");
        sum.add(&Usage {
            cost_usd: Some(0.5),
            ..codex
        });
        assert_eq!(sum.cost_usd, Some(0.5));
        assert_eq!(sum.output_tokens, 15);
    }
}
