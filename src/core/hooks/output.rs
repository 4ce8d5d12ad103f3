//! What a hook writes back, in each harness's own shape: a block of the stop
//! (claude and codex `{"decision": "block", "reason"}`, Cursor `followup_message`),
//! notices for the next prompt or start (`hookSpecificOutput.additionalContext`;
//! Cursor: `additional_context` at session start, else the next stop's follow-up),
//! and a one-line `systemMessage` the user sees (claude and codex only).

use serde_json::{Map, Value, json};

use super::input::{Event, Harness};

/// claude caps `additionalContext` at 10,000 characters; the judge stays under it.
pub const CONTEXT_MAX_CHARS: usize = 9_000;

/// What the judge says back to one hook call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// Block the stop with this instruction.
    pub block: Option<String>,
    /// Notices of earlier verdicts, for the agent.
    pub notices: Vec<String>,
    /// One line for the user (never the model).
    pub system_message: Option<String>,
}

/// The notices as one text for the agent.
pub fn notices_text(notices: &[String]) -> String {
    let mut text = String::from("llm-judge checked your earlier reply and says:\n");
    for notice in notices {
        text.push_str("- ");
        text.push_str(notice.trim());
        text.push('\n');
    }
    crate::core::text::cut(&text, CONTEXT_MAX_CHARS, "\n[... cut]")
}

/// The JSON the harness reads for `event`, or `None`: print nothing.
pub fn render(harness: Harness, event: &Event, answer: &Answer) -> Option<Value> {
    let mut out = Map::new();
    match (harness, event) {
        (Harness::Cursor, Event::LoopEnd) => {
            let mut parts: Vec<String> = answer.block.iter().cloned().collect();
            if !answer.notices.is_empty() {
                parts.push(notices_text(&answer.notices));
            }
            if !parts.is_empty() {
                out.insert("followup_message".into(), json!(parts.join("\n\n")));
            }
        }
        (Harness::Cursor, Event::SessionStart) if !answer.notices.is_empty() => {
            out.insert(
                "additional_context".into(),
                json!(notices_text(&answer.notices)),
            );
        }
        (Harness::Cursor, Event::PromptSubmit) => {
            out.insert("continue".into(), json!(true));
        }
        (Harness::Cursor, _) => {}
        (_, Event::Stop | Event::SubagentStop) => {
            if let Some(reason) = &answer.block {
                out.insert("decision".into(), json!("block"));
                out.insert("reason".into(), json!(reason));
            }
        }
        (_, Event::PromptSubmit | Event::SessionStart) if !answer.notices.is_empty() => {
            let name = match event {
                Event::SessionStart => "SessionStart",
                _ => "UserPromptSubmit",
            };
            out.insert(
                "hookSpecificOutput".into(),
                json!({"hookEventName": name, "additionalContext": notices_text(&answer.notices)}),
            );
        }
        _ => {}
    }
    if let (true, Some(message)) = (harness.shows_system_message(), &answer.system_message) {
        out.insert("systemMessage".into(), json!(message));
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(reason: &str) -> Answer {
        Answer {
            block: Some(reason.into()),
            ..Answer::default()
        }
    }

    #[test]
    fn a_block_in_each_harness_shape() {
        for harness in [Harness::Claude, Harness::Codex] {
            assert_eq!(
                render(harness, &Event::Stop, &block("Run the tests.")),
                Some(json!({"decision": "block", "reason": "Run the tests."}))
            );
        }
        assert_eq!(
            render(Harness::Cursor, &Event::LoopEnd, &block("Run the tests.")),
            Some(json!({"followup_message": "Run the tests."}))
        );
        assert_eq!(
            render(Harness::Claude, &Event::Stop, &Answer::default()),
            None
        );
        assert_eq!(
            render(Harness::Cursor, &Event::AgentResponse, &block("x")),
            None
        );
    }

    #[test]
    fn notices_and_messages_in_each_harness_shape() {
        let notices = Answer {
            notices: vec!["You said the tests pass but ran none.".into()],
            system_message: Some("llm-judge: no daemon runs".into()),
            ..Answer::default()
        };
        let text = "llm-judge checked your earlier reply and says:\n- You said the tests pass but ran none.\n";
        assert_eq!(
            render(Harness::Codex, &Event::PromptSubmit, &notices),
            Some(json!({
                "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": text},
                "systemMessage": "llm-judge: no daemon runs"
            }))
        );
        assert_eq!(
            render(Harness::Claude, &Event::SessionStart, &notices).unwrap()["hookSpecificOutput"]
                ["hookEventName"],
            "SessionStart"
        );
        assert_eq!(
            render(Harness::Cursor, &Event::LoopEnd, &notices),
            Some(json!({"followup_message": text}))
        );
        assert_eq!(
            render(Harness::Cursor, &Event::SessionStart, &notices),
            Some(json!({"additional_context": text}))
        );
        assert_eq!(
            render(Harness::Cursor, &Event::PromptSubmit, &notices),
            Some(json!({"continue": true}))
        );
        let long = vec!["x".repeat(20_000)];
        assert!(notices_text(&long).chars().count() < 10_000);
    }
}
