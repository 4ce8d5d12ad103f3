//! A hook's stdin: the harness's JSON object for one event, read into what the judge
//! needs (the session, the turn, the reply under judgement, the user's prompt). The
//! shapes are the harnesses' own (claude 2.1.328 and codex 0.171.0 as measured,
//! Cursor from its documentation); a key the judge does not need is ignored.

use serde_json::{Map, Value};
use thiserror::Error;

/// The harness a hook is installed in (`llm-judge hook <harness>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Harness {
    Claude,
    Codex,
    Cursor,
}

impl Harness {
    /// Its name on the command line and in session keys.
    pub fn name(self) -> &'static str {
        match self {
            Harness::Claude => "claude",
            Harness::Codex => "codex",
            Harness::Cursor => "cursor",
        }
    }

    /// True when its Stop output can carry a `systemMessage` the user sees.
    pub fn shows_system_message(self) -> bool {
        !matches!(self, Harness::Cursor)
    }
}

/// The event a hook was called for, as the judge acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The agent finished its reply: claude and codex `Stop`.
    Stop,
    /// A helper agent finished: `SubagentStop`.
    SubagentStop,
    /// Cursor's `afterAgentResponse`: the reply is known; nothing is read back.
    AgentResponse,
    /// Cursor's `stop`: the loop ends; a `followup_message` may continue it.
    LoopEnd,
    /// The user sent a prompt: `UserPromptSubmit`, Cursor's `beforeSubmitPrompt`.
    PromptSubmit,
    /// A session started (or resumed): `SessionStart`, Cursor's `sessionStart`.
    SessionStart,
    /// Any other event: the hook does nothing.
    Other(String),
}

/// What the judge reads from one hook call.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInput {
    pub harness: Harness,
    pub event: Event,
    /// The session (`session_id`; Cursor's `conversation_id`).
    pub session: String,
    /// The turn: codex `turn_id`, claude `prompt_id`, Cursor `generation_id` (the same
    /// on the re-call after a block); `None` when the harness gives none.
    pub turn: Option<String>,
    /// The session's working folder (`cwd`; Cursor: its first workspace root).
    pub cwd: Option<String>,
    /// The reply under judgement (`last_assistant_message`; Cursor: `text`).
    pub reply: Option<String>,
    /// The user's prompt (UserPromptSubmit `prompt`).
    pub prompt: Option<String>,
    /// The helper agent that stopped (claude's `SubagentStop` `agent_id`): its blocks
    /// count apart from the main agent's, which shares its turn id.
    pub agent: Option<String>,
}

/// Why a hook's stdin is not one the judge can act on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InputError {
    /// Not JSON (or cut short): whatever reply it held cannot be judged.
    #[error("hook input is not JSON: {why}")]
    NotJson { why: String },
    /// JSON, but not an object.
    #[error("hook input is not a JSON object: {why}")]
    NotAnObject { why: String },
    /// No event name.
    #[error("hook input has no {key} string")]
    NoEvent { key: &'static str },
    /// No session id.
    #[error("hook input for {event} has no {key} string")]
    NoSession { event: String, key: &'static str },
}

/// Reads one hook's stdin for `harness`.
pub fn parse_input(harness: Harness, bytes: &[u8]) -> Result<HookInput, InputError> {
    if bytes.trim_ascii().is_empty() {
        let why = "it is empty".to_string();
        return Err(InputError::NotAnObject { why });
    }
    let lossy = String::from_utf8_lossy(bytes);
    let object = match serde_json::from_str::<Value>(&without_lone_surrogates(&lossy)) {
        Ok(Value::Object(object)) => object,
        Ok(other) => {
            let why = format!("it is {}", kind(&other));
            return Err(InputError::NotAnObject { why });
        }
        Err(e) => return Err(InputError::NotJson { why: e.to_string() }),
    };
    let name = text(&object, "hook_event_name").ok_or(InputError::NoEvent {
        key: "hook_event_name",
    })?;
    let event = event_of(harness, &name);
    let agent = text(&object, "agent_id").filter(|_| event == Event::SubagentStop);
    let session_key = match harness {
        Harness::Cursor => "conversation_id",
        _ => "session_id",
    };
    let session = text(&object, session_key)
        .or_else(|| text(&object, "session_id"))
        .filter(|s| !s.is_empty())
        .ok_or(InputError::NoSession {
            event: name.clone(),
            key: session_key,
        })?;
    let turn = match harness {
        Harness::Claude => text(&object, "prompt_id"),
        Harness::Codex => text(&object, "turn_id"),
        Harness::Cursor => text(&object, "generation_id"),
    };
    let cwd = text(&object, "cwd").or_else(|| {
        object
            .get("workspace_roots")
            .and_then(Value::as_array)
            .and_then(|roots| roots.first())
            .and_then(Value::as_str)
            .map(String::from)
    });
    let reply = match harness {
        Harness::Cursor => text(&object, "text"),
        _ => text(&object, "last_assistant_message"),
    };
    Ok(HookInput {
        harness,
        event,
        session,
        turn,
        cwd,
        reply,
        prompt: text(&object, "prompt"),
        agent,
    })
}

/// `text` with each `\\uXXXX` escape of a lone UTF-16 surrogate (which JSON parsers
/// refuse, and claude forwards from a model's reply) replaced by `\\ufffd`, the
/// replacement character; a whole pair stays as it is. Other text is untouched.
pub fn without_lone_surrogates(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("\\u") {
        return std::borrow::Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let unit = |at: usize| -> Option<u16> {
        let hex = bytes.get(at..at + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let is_high = |u: u16| (0xD800..0xDC00).contains(&u);
    let is_low = |u: u16| (0xDC00..0xE000).contains(&u);
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        match unit(i) {
            Some(high) if is_high(high) && unit(i + 6).is_some_and(is_low) => i += 12,
            Some(u) if is_high(u) || is_low(u) => {
                out.push_str(&text[copied..i]);
                out.push_str("\\ufffd");
                i += 6;
                copied = i;
            }
            // Any other escape: skip its two characters (`\\\\` included).
            _ => i += 2,
        }
    }
    out.push_str(&text[copied.min(text.len())..]);
    std::borrow::Cow::Owned(out)
}

/// The event a harness's event name means.
fn event_of(harness: Harness, name: &str) -> Event {
    match (harness, name) {
        (Harness::Cursor, "afterAgentResponse") => Event::AgentResponse,
        (Harness::Cursor, "stop") => Event::LoopEnd,
        (Harness::Cursor, "beforeSubmitPrompt") => Event::PromptSubmit,
        (Harness::Cursor, "sessionStart") => Event::SessionStart,
        (Harness::Cursor, _) => Event::Other(name.to_string()),
        (_, "Stop") => Event::Stop,
        (_, "SubagentStop") => Event::SubagentStop,
        (_, "UserPromptSubmit") => Event::PromptSubmit,
        (_, "SessionStart") => Event::SessionStart,
        _ => Event::Other(name.to_string()),
    }
}

fn text(object: &Map<String, Value>, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).map(String::from)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real CLIs' stdin (claude 2.1.328 and codex 0.171.0 against a stand-in).
    const CLAUDE_STOP: &str =
        include_str!("../../../tests/fixtures/hooks/claude-2.1.328.Stop.json");
    const CLAUDE_AGAIN: &str =
        include_str!("../../../tests/fixtures/hooks/claude-2.1.328.Stop.stop_hook_active.json");
    const CLAUDE_PROMPT: &str =
        include_str!("../../../tests/fixtures/hooks/claude-2.1.328.UserPromptSubmit.json");
    const CLAUDE_START: &str =
        include_str!("../../../tests/fixtures/hooks/claude-2.1.328.SessionStart.json");
    const CLAUDE_SUBAGENT: &str =
        include_str!("../../../tests/fixtures/hooks/claude-2.1.328.SubagentStop.json");
    const CODEX_STOP: &str = include_str!("../../../tests/fixtures/hooks/codex-0.171.0.Stop.json");
    const CODEX_EPHEMERAL: &str = include_str!(
        "../../../tests/fixtures/hooks/codex-0.171.0.Stop.ephemeral_null_transcript.json"
    );
    const CODEX_PROMPT: &str =
        include_str!("../../../tests/fixtures/hooks/codex-0.171.0.UserPromptSubmit.json");
    const CODEX_START: &str =
        include_str!("../../../tests/fixtures/hooks/codex-0.171.0.SessionStart.json");

    fn parse(harness: Harness, text: &str) -> HookInput {
        parse_input(harness, text.as_bytes()).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    #[test]
    fn what_a_harness_can_send_is_read_lone_surrogates_and_bad_utf8_included() {
        // claude forwarded a model's lone surrogate as this escape.
        let lone = br#"{"hook_event_name":"Stop","session_id":"s","last_assistant_message":"All tests pass. \ud83d end"}"#;
        let input = parse_input(Harness::Claude, lone).unwrap();
        assert_eq!(input.reply.as_deref(), Some("All tests pass. \u{fffd} end"));
        let pair = br#"{"hook_event_name":"Stop","session_id":"s","last_assistant_message":"\ud83d\ude00 \\ud83d \udc00"}"#;
        let input = parse_input(Harness::Claude, pair).unwrap();
        assert_eq!(
            input.reply.as_deref(),
            Some("\u{1f600} \\ud83d \u{fffd}"),
            "a pair stays, an escaped backslash is not an escape"
        );
        let mut raw =
            br#"{"hook_event_name":"Stop","session_id":"s","last_assistant_message":"ok "#.to_vec();
        raw.extend_from_slice(b"\xff\xfe done\"}");
        let input = parse_input(Harness::Claude, &raw).unwrap();
        assert_eq!(input.reply.as_deref(), Some("ok \u{fffd}\u{fffd} done"));
        assert!(matches!(
            parse_input(Harness::Claude, b"{\"hook_event_name\": \"St"),
            Err(InputError::NotJson { .. })
        ));
        assert_eq!(without_lone_surrogates("plain"), "plain");
        assert_eq!(without_lone_surrogates("\\ud800"), "\\ufffd");
        assert_eq!(
            without_lone_surrogates("x\\"),
            "x\\",
            "a trailing backslash"
        );
    }

    #[test]
    fn claude_events_as_the_real_cli_sends_them() {
        let stop = parse(Harness::Claude, CLAUDE_STOP);
        assert_eq!(stop.event, Event::Stop);
        assert_eq!(stop.session, "a85de8a7-8b19-47ce-89e1-0b4ad244b60d");
        assert_eq!(
            stop.turn.as_deref(),
            Some("984f7f50-e382-4a65-a839-e64eb1d524d8")
        );
        assert_eq!(stop.reply.as_deref(), Some("MAIN_DONE"));
        assert_eq!(stop.cwd.as_deref(), Some("/tmp/hookresearch/runs/c2/work"));
        let again = parse(Harness::Claude, CLAUDE_AGAIN);
        assert_eq!(
            again.event,
            Event::Stop,
            "the re-call after a block is a Stop too"
        );
        let prompt = parse(Harness::Claude, CLAUDE_PROMPT);
        assert_eq!(prompt.event, Event::PromptSubmit);
        assert!(prompt.prompt.is_some());
        assert_eq!(
            parse(Harness::Claude, CLAUDE_START).event,
            Event::SessionStart
        );
        let sub = parse(Harness::Claude, CLAUDE_SUBAGENT);
        assert_eq!(sub.event, Event::SubagentStop);
        assert!(sub.reply.is_some());
        assert_eq!(sub.agent.as_deref(), Some("af6f8ae171ceb35bc"));
        assert_eq!(
            sub.turn, stop.turn,
            "a helper shares the main turn's prompt_id"
        );
        assert_eq!(stop.agent, None);
    }

    #[test]
    fn codex_events_as_the_real_cli_sends_them() {
        let stop = parse(Harness::Codex, CODEX_STOP);
        assert_eq!(stop.event, Event::Stop);
        assert_eq!(
            stop.turn.as_deref(),
            Some("01a24c4b-7579-7192-8e28-f4f6fd0e7079")
        );
        assert_eq!(stop.reply.as_deref(), Some("MAIN_DONE"));
        // --ephemeral: transcript_path is null, the rest is there.
        assert_eq!(parse(Harness::Codex, CODEX_EPHEMERAL).event, Event::Stop);
        assert_eq!(
            parse(Harness::Codex, CODEX_PROMPT).event,
            Event::PromptSubmit
        );
        let start = parse(Harness::Codex, CODEX_START);
        assert_eq!((start.event, start.turn), (Event::SessionStart, None));
    }

    #[test]
    fn cursor_events_as_its_documentation_gives_them() {
        let reply = r#"{"conversation_id": "c1", "generation_id": "g1", "model": "m",
            "hook_event_name": "afterAgentResponse", "cursor_version": "1.7",
            "workspace_roots": ["/w/p"], "user_email": null, "text": "Done."}"#;
        let got = parse(Harness::Cursor, reply);
        assert_eq!(got.event, Event::AgentResponse);
        assert_eq!(
            (got.session.as_str(), got.turn.as_deref()),
            ("c1", Some("g1"))
        );
        assert_eq!(
            (got.cwd.as_deref(), got.reply.as_deref()),
            (Some("/w/p"), Some("Done."))
        );
        let stop = r#"{"conversation_id": "c1", "generation_id": "g1", "hook_event_name": "stop",
            "status": "completed", "loop_count": 1, "workspace_roots": []}"#;
        let got = parse(Harness::Cursor, stop);
        assert_eq!(got.event, Event::LoopEnd);
        let prompt =
            r#"{"conversation_id": "c1", "hook_event_name": "beforeSubmitPrompt", "prompt": "hi"}"#;
        assert_eq!(parse(Harness::Cursor, prompt).event, Event::PromptSubmit);
    }

    #[test]
    fn bad_input_says_what_is_missing() {
        for (text, words) in [
            ("", "not a JSON object"),
            ("[1]", "it is a list"),
            ("{}", "no hook_event_name"),
            (
                r#"{"hook_event_name": "Stop"}"#,
                "for Stop has no session_id",
            ),
            (
                r#"{"hook_event_name": "Stop", "session_id": ""}"#,
                "no session_id",
            ),
        ] {
            let e = parse_input(Harness::Claude, text.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(e.contains(words), "{text:?}: {e}");
        }
        let other = parse(
            Harness::Codex,
            r#"{"hook_event_name": "PreToolUse", "session_id": "s"}"#,
        );
        assert_eq!(other.event, Event::Other("PreToolUse".into()));
    }
}
