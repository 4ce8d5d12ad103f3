//! Finding the answer in a runner's stdout (docs/reference.md, "Runners"). Pure.

use serde_json::{Map, Value};

/// The last JSON object in `stdout`: a whole line, or a multi-line block in a ``` fence.
/// An event object of a CLI's JSON output is never an answer (`usage::is_cli_event`):
/// a stray line must not turn a CLI's envelope into the answer itself.
pub fn last_json_object(stdout: &str) -> Option<Map<String, Value>> {
    let mut found: Option<Map<String, Value>> = None;
    let mut fence: Option<Vec<&str>> = None;
    for line in stdout.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            match fence.take() {
                Some(body) if trimmed == "```" => {
                    if let Some(obj) = parse_object(&body.join("\n")) {
                        found = Some(obj);
                    }
                }
                // An opening fence (with or without a language tag); a second opener
                // inside an open fence starts over, as the old one never closed.
                _ => fence = Some(Vec::new()),
            }
            continue;
        }
        if let Some(body) = fence.as_mut() {
            body.push(line);
        }
        if let Some(obj) = parse_object(trimmed) {
            found = Some(obj);
        }
    }
    found
}

/// The answer in an API runner's reply: the whole text as one JSON object first (a
/// model's JSON mode may spread it over several lines), else the rules for stdout.
pub fn reply_object(reply: &str) -> Option<Map<String, Value>> {
    parse_object(reply).or_else(|| last_json_object(reply))
}

/// What of a tail whose start the output cap dropped is whole lines: everything after
/// its first newline (nothing without one). The first line lost its start, so it is
/// never an answer, nor may a fence marker cut out of it open or close a fence.
pub fn whole_lines_of_cut_tail(tail: &str) -> &str {
    tail.split_once('\n').map_or("", |(_, rest)| rest)
}

fn parse_object(text: &str) -> Option<Map<String, Value>> {
    let text = text.trim();
    if !text.starts_with('{') {
        return None;
    }
    match serde_json::from_str(text) {
        Ok(Value::Object(obj)) if !crate::core::verdict::usage::is_cli_event(&obj) => Some(obj),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(text: &str) -> Option<Value> {
        last_json_object(text).map(Value::Object)
    }

    #[test]
    fn a_json_line_counts() {
        assert_eq!(answer("{\"a\": true}\n"), Some(json!({"a": true})));
        assert_eq!(answer("  {\"a\": 1}  "), Some(json!({"a": 1})));
    }

    #[test]
    fn the_last_object_wins() {
        let out = "thinking...\n{\"a\": 1}\nmore text\n{\"a\": 2}\nbye\n";
        assert_eq!(answer(out), Some(json!({"a": 2})));
    }

    #[test]
    fn arrays_scalars_and_prose_never_count() {
        assert_eq!(answer("[1]\n42\n\"s\"\ntrue\nnull\n"), None);
        assert_eq!(answer("the answer is {\"a\": 1}\n"), None);
        assert_eq!(answer("{\"a\": 1} trailing\n"), None);
        assert_eq!(answer(""), None);
    }

    #[test]
    fn fenced_multi_line_objects_count() {
        let out = "Here:\n```json\n{\n  \"a\": true,\n  \"b\": false\n}\n```\n";
        assert_eq!(answer(out), Some(json!({"a": true, "b": false})));
        let out = "```\n{\"x\":\n 1}\n```";
        assert_eq!(answer(out), Some(json!({"x": 1})));
    }

    #[test]
    fn a_fence_after_a_line_wins_and_a_line_after_a_fence_wins() {
        let out = "{\"a\": 1}\n```json\n{\"a\":\n 2}\n```\n";
        assert_eq!(answer(out), Some(json!({"a": 2})));
        let out = "```json\n{\"a\":\n 2}\n```\n{\"a\": 3}\n";
        assert_eq!(answer(out), Some(json!({"a": 3})));
    }

    #[test]
    fn an_unclosed_fence_does_not_count() {
        let out = "{\"a\": 1}\n```json\n{\"a\":\n 2}\n";
        assert_eq!(answer(out), Some(json!({"a": 1})));
    }

    #[test]
    fn fenced_arrays_do_not_count() {
        assert_eq!(answer("```\n[\n1\n]\n```\n"), None);
    }

    #[test]
    fn the_cut_first_line_of_a_tail_never_counts() {
        let cut = whole_lines_of_cut_tail;
        assert_eq!(cut("{\"a\": 1}"), "", "no newline: nothing whole");
        assert_eq!(cut("{\"a\": 1}\n{\"a\": 2}\n"), "{\"a\": 2}\n");
        assert_eq!(answer(cut("{\"bug\": true}\nprose\n")), None);
        // The kept tail starts with the end of "say ```" (prose, no fence): read as a
        // fence opener, it would make the lines after it a fenced answer.
        let out = "```\n{\"a\":\n 1}\n```\n";
        assert_eq!(answer(out), Some(json!({"a": 1})));
        assert_eq!(answer(cut(out)), None, "an unclosed fence does not count");
    }

    #[test]
    fn a_cli_event_is_never_the_answer() {
        let result =
            r#"{"type":"result","subtype":"success","result":"{\"bug\": true}","session_id":"s"}"#;
        assert_eq!(
            answer(&format!("{{\"bug\": false}}\n{result}\n")),
            Some(json!({"bug": false}))
        );
        assert_eq!(answer("{\"type\":\"turn.completed\",\"usage\":{}}\n"), None);
        assert_eq!(
            answer(&format!("```json\n{result}\n```\n")),
            None,
            "fenced neither"
        );
    }

    #[test]
    fn a_reply_is_tried_whole_first() {
        let spread = "{\n  \"retracts\": false\n}";
        assert_eq!(answer(spread), None, "the stdout rules do not read it");
        assert_eq!(
            reply_object(spread).map(Value::Object),
            Some(json!({"retracts": false}))
        );
        assert_eq!(
            reply_object("prose\n{\"a\": 1}\n").map(Value::Object),
            Some(json!({"a": 1})),
            "else the line rules"
        );
        assert_eq!(reply_object("[1, 2]"), None);
        assert_eq!(reply_object(r#"{"type":"result","result":"x"}"#), None);
    }

    #[test]
    fn crlf_lines_count() {
        assert_eq!(answer("x\r\n{\"a\": true}\r\n"), Some(json!({"a": true})));
    }
}
