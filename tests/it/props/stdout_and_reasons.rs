//! Runner stdout and attempt reasons: the last JSON object comes from the text, and
//! reasons stay within 300 code points.

use super::job_files::json_value;
use super::*;
use std::io::ErrorKind;

use llm_judge::api::last_json_object;
use llm_judge::api::{Output, OutputFormat, REASON_MAX_CHARS, RunEnd, clip, judge_attempt};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn json_object() -> impl Strategy<Value = Value> {
    json_value().prop_map(|v| match v {
        Value::Object(_) => v,
        other => json!({ "v": other }),
    })
}

fn stdout_line() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => json_object().prop_map(|v| v.to_string()),
        2 => json_object().prop_map(|v| serde_json::to_string_pretty(&v).unwrap()),
        2 => prop::sample::select(&[
            "```", "```json", "``` json", "  ```", "```python", "```\t", "````", "{", "}",
            "{\"a\": ", "[1, 2]", "42", "\"s\"", "true", "null", "[{\"a\": 1}]",
            "the answer is {\"a\": 1}", "{\"a\": 1} trailing", "{\"a\": 1}{\"b\": 2}", "",
            "   ", "\u{2003}{\"em\": true}\u{2003}", "{\"x\": NaN}", "{\"dup\": 1, \"dup\": 2}",
        ][..])
        .prop_map(str::to_string),
        2 => any::<String>(),
    ]
}

/// True when some run of whole lines of `text`, joined and trimmed, is exactly `obj`.
fn appears_in(text: &str, obj: &Map<String, Value>) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    (0..lines.len()).any(|i| {
        (i..lines.len()).any(|j| {
            matches!(
                serde_json::from_str::<Value>(lines[i..=j].join("\n").trim()),
                Ok(Value::Object(o)) if &o == obj
            )
        })
    })
}

proptest! {
    #![proptest_config(config(384))]

    #[test]
    fn last_json_object_survives_any_text(text in any::<String>()) {
        if let Some(obj) = last_json_object(&text) {
            prop_assert!(appears_in(&text, &obj), "{:?} not in {:?}", obj, text);
        }
    }

    #[test]
    fn last_json_object_only_returns_objects_from_the_text(
        lines in prop::collection::vec(stdout_line(), 0..24),
        crlf in any::<bool>(),
        trailing in any::<bool>(),
    ) {
        let mut text = lines.join(if crlf { "\r\n" } else { "\n" });
        if trailing {
            text.push('\n');
        }
        let found = last_json_object(&text);
        if let Some(obj) = &found {
            prop_assert!(appears_in(&text, obj), "{:?} not in {:?}", obj, text);
        }
        // Without fences, the answer is exactly the last line that is a JSON object.
        if !text.lines().any(|l| l.trim().starts_with("```")) {
            let expected = text.lines().rev().find_map(|l| match serde_json::from_str::<Value>(l.trim()) {
                Ok(Value::Object(o)) => Some(o),
                _ => None,
            });
            prop_assert_eq!(found, expected);
        }
    }
}

// ------------------------------------------------------------------ attempt reasons

fn run_end() -> impl Strategy<Value = RunEnd> {
    prop_oneof![
        Just(RunEnd::NotInstalled),
        (
            prop::sample::select(
                &[
                    ErrorKind::NotFound,
                    ErrorKind::PermissionDenied,
                    ErrorKind::Other
                ][..]
            ),
            any::<String>()
        )
            .prop_map(|(kind, message)| RunEnd::SpawnFailed { kind, message }),
        (0.001f64..=600.0).prop_map(|seconds| RunEnd::TimedOut { seconds }),
        prop::sample::select(&[0.1, 0.5, 1.0, 1.5, 60.0, 600.0, 0.30000000000000004][..])
            .prop_map(|seconds| RunEnd::TimedOut { seconds }),
        any::<i32>().prop_map(|code| RunEnd::Exited { code }),
        Just(RunEnd::Exited { code: 0 }),
    ]
}

/// Text with long runs and multi-byte characters, so clipping cuts inside them.
fn output_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        (
            any::<String>(),
            0usize..2000,
            prop::sample::select(&["a", "é", "日", "🦀", "\n", " ", "{\"ok\": true}\n"][..])
        )
            .prop_map(|(s, n, c)| format!("{s}{}", c.repeat(n))),
        prop::collection::vec(stdout_line(), 0..10).prop_map(|l| l.join("\n")),
    ]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn attempt_reasons_are_at_most_300_code_points(
        runner in any::<String>(),
        end in run_end(),
        stdout in output_text(),
        stderr in output_text(),
        format in prop::sample::select(&[OutputFormat::Plain, OutputFormat::ClaudeEvents, OutputFormat::CodexEvents][..]),
    ) {
        let output = Output { stdout: &stdout, stderr: &stderr, stdout_cut: None, format };
        let judged = judge_attempt(&runner, &end, output);
        let (attempt, answer) = (judged.attempt, judged.answer);
        prop_assert!(attempt.reason.chars().count() <= REASON_MAX_CHARS, "{:?}", attempt.reason);
        prop_assert_eq!(attempt.ok, answer.is_some());
        prop_assert_eq!(attempt.ok, attempt.reason == "answered");
        prop_assert_eq!(&attempt.runner, &runner);
        if attempt.ok {
            prop_assert_eq!(end, RunEnd::Exited { code: 0 });
        }
    }

    #[test]
    fn clip_keeps_the_label_and_the_end_of_the_detail(
        label in "[a-z :0-9.-]{0,120}",
        detail in output_text(),
    ) {
        let reason = clip(&label, &detail);
        prop_assert!(reason.chars().count() <= REASON_MAX_CHARS, "{:?}", reason);
        let trimmed = detail.trim();
        if trimmed.is_empty() {
            prop_assert_eq!(&reason, &label);
        } else {
            let head = format!("{label}: ");
            prop_assert!(reason.starts_with(&head));
            let kept = &reason[head.len()..];
            prop_assert!(trimmed.ends_with(kept), "{:?} is not the end of the detail", kept);
            let room = REASON_MAX_CHARS - head.chars().count();
            prop_assert_eq!(kept.chars().count(), trimmed.chars().count().min(room));
        }
    }
}

/// `clip` promises at most 300 code points, but a label of 299 or more code points
/// with any non-empty detail gives `label + ": "` (301+). Latent: the judge's own
/// labels are short ("timed out after 60s", "exit 1", an io::ErrorKind name), so no
/// verdict shows it today; a long label would (say, a timeout printed from a huge
/// config value).
#[test]
fn clip_never_exceeds_300_code_points_even_with_a_long_label() {
    for n in [298, 299, 300, 301, 400] {
        let reason = clip(&"x".repeat(n), "detail");
        assert!(
            reason.chars().count() <= REASON_MAX_CHARS,
            "label of {n}: {} code points",
            reason.chars().count()
        );
    }
}
