//! Unit tests of `verdict.rs` (a file of their own to keep that one short).

use super::*;
use serde_json::json;

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn output<'a>(stdout: &'a str, stderr: &'a str, stdout_cut: Option<usize>) -> Output<'a> {
    Output {
        stdout,
        stderr,
        stdout_cut,
        format: OutputFormat::Plain,
    }
}

fn judged(end: &RunEnd, stdout: &str, stderr: &str) -> (Attempt, Option<Map<String, Value>>) {
    let j = judge_attempt("r", end, output(stdout, stderr, None));
    (j.attempt, j.answer)
}

fn reason(end: RunEnd, stdout: &str, stderr: &str) -> String {
    judged(&end, stdout, stderr).0.reason
}

#[test]
fn every_attempt_reason_is_pinned() {
    assert_eq!(reason(RunEnd::NotInstalled, "", ""), "not installed");
    let spawn = RunEnd::SpawnFailed {
        kind: std::io::ErrorKind::PermissionDenied,
        message: "Permission denied (os error 13)".into(),
    };
    assert_eq!(
        reason(spawn, "", ""),
        "PermissionDenied: Permission denied (os error 13)"
    );
    assert_eq!(
        reason(RunEnd::TimedOut { seconds: 60.0 }, "out", ""),
        "timed out after 60s"
    );
    assert_eq!(
        reason(RunEnd::TimedOut { seconds: 1.5 }, "", " slow\n"),
        "timed out after 1.5s: slow"
    );
    assert_eq!(reason(RunEnd::Exited { code: 2 }, "", ""), "exit 2");
    assert_eq!(
        reason(RunEnd::Exited { code: 1 }, "Not logged in", ""),
        "exit 1: Not logged in"
    );
    assert_eq!(
        reason(RunEnd::Exited { code: 1 }, "out", "err\nmore\n"),
        "exit 1: err\nmore"
    );
    assert_eq!(reason(RunEnd::Exited { code: -9 }, "", ""), "exit -9");
    assert_eq!(
        reason(RunEnd::Exited { code: 0 }, "prose", ""),
        "no JSON object line in stdout: prose"
    );
    assert_eq!(
        reason(RunEnd::Exited { code: 0 }, "prose", "warn"),
        "no JSON object line in stdout: warn"
    );
    assert_eq!(
        reason(RunEnd::Exited { code: 0 }, "", ""),
        "no JSON object line in stdout"
    );
    let (a, answer) = judged(&RunEnd::Exited { code: 0 }, "{\"x\":true}", "noise");
    assert_eq!((a.ok, a.reason.as_str()), (true, "answered"));
    assert_eq!(answer, Some(obj(json!({"x": true}))));
}

#[test]
fn a_cut_stdout_answers_only_from_whole_lines_and_says_it_was_cut() {
    let exited = RunEnd::Exited { code: 0 };
    let cut = |stdout: &str, stderr: &str| {
        let j = judge_attempt("r", &exited, output(stdout, stderr, Some(1024)));
        (j.attempt, j.answer)
    };
    let (a, answer) = cut("{\"bug\": true}\n", "");
    assert_eq!(answer, None, "the first line lost its start");
    assert_eq!(
        a.reason,
        "no JSON object line in stdout (output cut to the last 1024 bytes): {\"bug\": true}"
    );
    let (a, answer) = cut("rue}\n{\"bug\": false}\nbye\n", "warn");
    assert_eq!((a.ok, a.reason.as_str()), (true, "answered"));
    assert_eq!(answer, Some(obj(json!({"bug": false}))));
    let (a, _) = cut("", "");
    assert_eq!(
        a.reason,
        "no JSON object line in stdout (output cut to the last 1024 bytes)"
    );
}

/// Issue 39, item 2: a stray line before a CLI's events once made the whole
/// `result` object the answer (a hit read as clean) and dropped the usage.
#[test]
fn a_stray_line_before_an_envelope_leaves_its_reply_the_answer() {
    let exited = RunEnd::Exited { code: 0 };
    let with = |stdout: &str, format, cut| {
        let out = Output {
            format,
            ..output(stdout, "", cut)
        };
        judge_attempt("r", &exited, out)
    };
    let init = r#"{"type":"system","subtype":"init","session_id":"s"}"#;
    let assistant = r#"{"type":"assistant","session_id":"s","message":{}}"#;
    let result = r#"{"type":"result","subtype":"success","is_error":false,"result":"{\"bug\": true}","session_id":"s","total_cost_usd":0.001,"usage":{"input_tokens":3,"output_tokens":2}}"#;
    let claude = format!("Warning: banner\n{init}\n{assistant}\n{result}\n");
    let j = with(&claude, OutputFormat::ClaudeEvents, None);
    assert_eq!(j.answer, Some(obj(json!({"bug": true}))));
    assert_eq!(j.attempt.usage.map(|u| u.output_tokens), Some(2));
    let cut = format!("cut start of a line\n{assistant}\n{result}\n");
    let j = with(&cut, OutputFormat::ClaudeEvents, Some(4096));
    assert_eq!(j.answer, Some(obj(json!({"bug": true}))), "cut stream");
    let codex = concat!(
        "Reading prompt from stdin...\n",
        "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n",
        "{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"{\\\"bug\\\": true}\"}}\n",
        "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}\n",
    );
    let j = with(codex, OutputFormat::CodexEvents, None);
    assert_eq!(j.answer, Some(obj(json!({"bug": true}))));
    assert_eq!(j.attempt.usage.map(|u| u.input_tokens), Some(9));
    // A plain-text runner: no usage, and the event is not the answer either.
    let j = with(&claude, OutputFormat::Plain, None);
    assert_eq!((j.answer, j.attempt.usage), (None, None));
    // A broken envelope (events, no result) has no answer, not a stray line's.
    let broken = format!("{{\"bug\": false}}\n{init}\n{assistant}\n");
    let j = with(&broken, OutputFormat::ClaudeEvents, None);
    assert_eq!(j.answer, None);
    assert_eq!(
        j.attempt.reason,
        "no JSON object line in stdout: the claude output has no result event"
    );
}

#[test]
fn forged_usage_is_not_counted_and_says_why() {
    let forged = r#"{"type":"result","result":"{}","session_id":"s","total_cost_usd":1.7e308,"usage":{"input_tokens":1}}"#;
    let out = Output {
        format: OutputFormat::ClaudeEvents,
        ..output(forged, "", None)
    };
    let j = judge_attempt("r", &RunEnd::Exited { code: 0 }, out);
    assert!(j.attempt.ok);
    assert_eq!(j.attempt.usage, None);
    assert_eq!(
        j.refused_usage.as_deref(),
        Some("cost_usd 1.7e308 is outside 0 to 100 per run")
    );
}

#[test]
fn nonzero_exit_never_answers_even_with_json() {
    let (a, answer) = judged(&RunEnd::Exited { code: 143 }, "{\"x\":true}", "");
    assert!(!a.ok && answer.is_none());
    assert_eq!(a.reason, "exit 143: {\"x\":true}");
}

#[test]
fn clipping_keeps_the_label_and_the_end_in_code_points() {
    let detail = format!("start{}END", "é".repeat(400));
    let r = clip("exit 1", &detail);
    assert_eq!(r.chars().count(), REASON_MAX_CHARS);
    assert!(r.starts_with("exit 1: éé"));
    assert!(r.ends_with("END"));
    let exact = "x".repeat(REASON_MAX_CHARS - 8);
    assert_eq!(clip("exit 1", &exact), format!("exit 1: {exact}"));
}

#[test]
fn numbers_print_like_people_write_them() {
    assert_eq!(human_number(60.0), "60");
    assert_eq!(human_number(1.5), "1.5");
    assert_eq!(human_number(0.25), "0.25");
    assert_eq!(human_number(600.0), "600");
}

#[test]
fn all_true_rules() {
    let rule = HitRule::AllTrue(vec!["a".into(), "b".into()]);
    let d = decide(&rule, &obj(json!({"a": true, "b": true})));
    assert_eq!(
        (d.outcome, d.reason.as_str()),
        (Outcome::Hit, "all true: a, b")
    );
    let d = decide(&rule, &obj(json!({"a": true, "b": "true"})));
    assert_eq!(
        (d.outcome, d.reason.as_str()),
        (Outcome::Clean, "not true: b")
    );
    let d = decide(&rule, &obj(json!({"a": 1})));
    assert_eq!(d.reason, "not true: a, b");
    let d = decide(&HitRule::AllTrue(vec![]), &obj(json!({})));
    assert_eq!((d.outcome, d.reason.as_str()), (Outcome::Hit, "all true"));
}

#[test]
fn any_true_rules() {
    let rule = HitRule::AnyTrue(vec![
        ("z".into(), "Z!".into()),
        ("m".into(), "M!".into()),
        ("a".into(), "A!".into()),
    ]);
    let d = decide(&rule, &obj(json!({"a": true, "z": true, "m": false})));
    assert_eq!(
        d,
        Decision {
            outcome: Outcome::Hit,
            reason: "any true: z, a".into(),
            on_hit: Some("Z!\nA!".into())
        }
    );
    let d = decide(&rule, &obj(json!({"a": "true"})));
    assert_eq!(
        d,
        Decision {
            outcome: Outcome::Clean,
            reason: "none true: z, m, a".into(),
            on_hit: None
        }
    );
}

#[test]
fn no_answer_lists_attempts_and_keeps_the_end() {
    let a = |r: &str, why: &str| Attempt {
        runner: r.into(),
        ok: false,
        reason: why.into(),
        elapsed_ms: None,
        usage: None,
        cwd_refused: None,
    };
    assert_eq!(no_answer_reason(&[]), "no runner answered");
    assert_eq!(
        no_answer_reason(&[a("codex", "not installed"), a("claude", "exit 1: x")]),
        "no runner answered: codex: not installed; claude: exit 1: x"
    );
    let long = no_answer_reason(&[a("codex", &"y".repeat(400)), a("claude", "exit 1: tail")]);
    assert_eq!(long.chars().count(), REASON_MAX_CHARS);
    assert!(long.starts_with("no runner answered: codex: y"), "{long}");
    assert!(long.ends_with("; claude: exit 1: tail"), "{long}");
    // claude first, then a codex whose stderr is a page of timestamped log lines: each
    // keeps its own last line.
    let logs: String = (0..40)
        .map(|i| format!("2026-12-06T10:00:{i:02}Z ERROR codex_core: retrying connection\n"))
        .collect();
    let both = no_answer_reason(&[
        a("claude", "exit 1: Not logged in · Please run /login"),
        a(
            "codex",
            &format!("exit 1: {logs}stream error: unauthorized"),
        ),
    ]);
    assert_eq!(
        both,
        "no runner answered: claude: exit 1: Not logged in · Please run /login; codex: exit 1: \
         stream error: unauthorized"
    );
    // Two long reasons share the room.
    let two = no_answer_reason(&[a("a", &"x".repeat(400)), a("b", &"z".repeat(400))]);
    assert!(two.chars().count() <= REASON_MAX_CHARS, "{two}");
    assert!(two.contains("a: xxx") && two.contains("; b: zzz"), "{two}");
}

#[test]
fn verdict_keys_are_in_spec_order() {
    let v = Verdict {
        id: "i".into(),
        hook: Value::Null,
        transcript: "".into(),
        outcome: Outcome::Clean,
        on_hit: Value::Null,
        reason: "r".into(),
        runner: None,
        answer: None,
        attempts: vec![],
        finished_at: 1.5,
        rule_id: None,
    };
    let text = serde_json::to_string(&v).unwrap();
    assert_eq!(
        text,
        r#"{"id":"i","hook":null,"transcript":"","outcome":"clean","on_hit":null,"reason":"r","runner":null,"answer":null,"attempts":[],"finished_at":1.5}"#
    );
}

/// The cases integrations/catstack/tests/test_judge.py also runs through the
/// drop-in's `verdict()`, so the Python copy of this file's rules cannot drift.
const SHARED_CASES: &str =
    include_str!("../../../integrations/catstack/tests/fixtures/verdict_cases.json");

#[test]
fn the_shared_verdict_cases_hold() {
    let doc: Value = serde_json::from_str(SHARED_CASES).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 10, "the shared cases file lost cases");
    let rules = crate::core::job::TimeoutRules {
        default_seconds: 60.0,
        max_seconds: 600.0,
    };
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let job = crate::core::job::parse_job(case["job"].to_string().as_bytes(), "x", rules)
            .unwrap_or_else(|e| panic!("{name}: {}", e.reason()));
        let result = &case["result"];
        let answered = result["outcome"] == "answered";
        let answer = match (&result["answer"], result["runner"].as_str()) {
            (Value::Object(obj), Some(runner)) if answered => {
                Some((runner.to_string(), obj.clone()))
            }
            _ => None,
        };
        let attempts: Vec<Attempt> =
            serde_json::from_value(result.get("attempts").cloned().unwrap_or(json!([]))).unwrap();
        let mut got = serde_json::to_value(verdict_for(&job, answer, attempts, 1.0)).unwrap();
        assert_eq!(got["finished_at"], 1.0, "{name}");
        got.as_object_mut().unwrap().remove("finished_at");
        assert_eq!(got, case["verdict"], "{name}");
    }
}

#[test]
fn a_runner_let_go_at_its_final_event_is_read_as_an_exit_0() {
    let (a, answer) = judged(&RunEnd::FinalEvent, "{\"x\":true}", "");
    assert!(a.ok && answer.is_some());
    assert_eq!(a.reason, "answered");
    let (a, _) = judged(&RunEnd::FinalEvent, "prose", "");
    assert_eq!(a.reason, "no JSON object line in stdout: prose");
}
