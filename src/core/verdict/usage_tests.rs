//! Unit tests of `usage.rs` (a file of their own to keep that one short).

use super::*;
use crate::core::runner::output_format::output_format;
use OutputFormat::{ClaudeEvents, CodexEvents, Plain};

const CLAUDE_OK: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":612,"duration_api_ms":410,"num_turns":1,"result":"{\"bug\": true}","session_id":"s","total_cost_usd":0.000135,"usage":{"input_tokens":10,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":5}}"#;
const CLAUDE_INIT: &str = r#"{"type":"system","subtype":"ui_invalidate","session_id":"s"}
{"type":"system","subtype":"init","cwd":"/tmp/x","tools":[],"session_id":"s"}"#;
const CLAUDE_ASSISTANT: &str = r#"{"type":"assistant","session_id":"s","message":{"content":[{"type":"text","text":"{\"bug\": true}"}]}}"#;
const CODEX_STREAM: &str = concat!(
    "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n",
    "{\"type\":\"turn.started\"}\n",
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"i0\",\"type\":\"reasoning\",\"text\":\"{\\\"bug\\\": false}\"}}\n",
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"i1\",\"type\":\"agent_message\",\"text\":\"looking\"}}\n",
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"i2\",\"type\":\"agent_message\",\"text\":\"{\\\"bug\\\": true}\"}}\n",
    "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":100,\"cached_input_tokens\":40,\"output_tokens\":7}}\n",
    "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"cached_input_tokens\":0,\"output_tokens\":1}}\n",
);

fn argv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_format_comes_from_the_table_flags_never_from_the_prompt() {
    let cases: [(&[&str], OutputFormat); 10] = [
        (
            &[
                "claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
            ],
            ClaudeEvents,
        ),
        (
            &["claude", "-p", "--output-format", "json", "--", "{prompt}"],
            ClaudeEvents,
        ),
        (
            &["claude", "--output-format=json", "{prompt}"],
            ClaudeEvents,
        ),
        (
            &["/bin/sh", "x.sh", "--output-format", "stream-json"],
            ClaudeEvents,
        ),
        (&["codex", "exec", "--json", "--", "{prompt}"], CodexEvents),
        (
            &[
                "cursor-agent",
                "-p",
                "--output-format",
                "text",
                "--",
                "{prompt}",
            ],
            Plain,
        ),
        (&["codex", "exec", "--", "{prompt}"], Plain),
        (&["claude", "-p", "--", "--output-format", "json"], Plain),
        (&["x", "{prompt}", "--output-format", "text"], Plain),
        (&["--output-format"], Plain),
    ];
    for (items, format) in cases {
        assert_eq!(output_format(&argv(items)), format, "{items:?}");
    }
}

#[test]
fn a_claude_result_gives_its_text_and_usage() {
    let out = read_envelope(CLAUDE_OK, ClaudeEvents).unwrap();
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
fn a_plain_text_runner_never_has_an_envelope_or_usage() {
    assert_eq!(read_envelope(CLAUDE_OK, Plain), None);
    assert_eq!(read_envelope(CODEX_STREAM, Plain), None);
}

#[test]
fn a_claude_error_result_gives_no_text_and_its_message() {
    let out = read_envelope(
        r#"{"type":"result","is_error":true,"result":"Not logged in · Please run /login","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#,
        ClaudeEvents,
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
    let read = |s: &str| read_envelope(s, ClaudeEvents);
    let stream = format!("{CLAUDE_INIT}\n{CLAUDE_ASSISTANT}\n{CLAUDE_OK}\n");
    assert_eq!(read(&stream), read(CLAUDE_OK));
    let cut = format!("{CLAUDE_INIT}\n{CLAUDE_ASSISTANT}\n");
    let out = read(&cut).unwrap();
    assert_eq!(out.reply, "", "no event of a cut stream is the answer");
    assert!(out.error.unwrap().contains("no result event"));
    let failed = format!(
        "{CLAUDE_INIT}\n{}\n",
        r#"{"type":"result","subtype":"error_during_execution","is_error":false,"result":"boom"}"#
    );
    let out = read(&failed).unwrap();
    assert_eq!(
        (out.reply.as_str(), out.error.as_deref()),
        ("", Some("boom"))
    );
    let no_text = read(r#"{"type":"result","subtype":"error_max_turns","session_id":"s"}"#);
    assert_eq!(
        no_text.unwrap().error.as_deref(),
        Some("the result event has no result text (subtype error_max_turns)")
    );
    let cut = format!("{CLAUDE_ASSISTANT}\n{CLAUDE_OK}\n");
    assert_eq!(read(&cut), read(CLAUDE_OK), "a stream whose start was cut");
    assert_eq!(read(&format!("{CLAUDE_ASSISTANT}\n")).unwrap().reply, "");
}

#[test]
fn stray_lines_mixed_into_a_stream_are_skipped() {
    let claude = format!(
        "Warning: a wrapper's banner\n{CLAUDE_INIT}\nnote: {{\"bug\": false}}\n{CLAUDE_ASSISTANT}\n{CLAUDE_OK}\ntrailing text\n"
    );
    assert_eq!(
        read_envelope(&claude, ClaudeEvents),
        read_envelope(CLAUDE_OK, ClaudeEvents)
    );
    let codex = format!("Reading prompt from stdin...\n{CODEX_STREAM}");
    let out = read_envelope(&codex, CodexEvents).unwrap();
    assert_eq!(out.reply, "{\"bug\": true}");
    assert_eq!(out.usage.map(|u| u.input_tokens), Some(101));
}

#[test]
fn output_with_no_event_of_its_cli_is_plain_text() {
    for stdout in ["{\"bug\": true}\n", "thinking\n{\"type\": \"note\"}\n", ""] {
        assert_eq!(read_envelope(stdout, ClaudeEvents), None, "{stdout:?}");
        assert_eq!(read_envelope(stdout, CodexEvents), None, "{stdout:?}");
    }
    assert_eq!(read_envelope(CODEX_STREAM, ClaudeEvents), None);
    assert_eq!(read_envelope(CLAUDE_OK, CodexEvents), None);
}

#[test]
fn a_claude_result_without_usage_has_none() {
    let out = read_envelope(r#"{"type":"result","result":"{\"a\": 1}"}"#, ClaudeEvents);
    let out = out.unwrap();
    assert_eq!(out.reply, "{\"a\": 1}");
    assert_eq!(out.usage, None);
}

#[test]
fn codex_events_give_the_last_message_and_summed_usage() {
    let out = read_envelope(CODEX_STREAM, CodexEvents).unwrap();
    assert_eq!((out.reply.as_str(), out.error), ("{\"bug\": true}", None));
    assert_eq!(
        out.usage,
        Some(Usage {
            input_tokens: 101,
            cached_input_tokens: 40,
            output_tokens: 8,
            cost_usd: None,
        })
    );
    let silent =
        "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n{\"type\":\"turn.completed\"}\n";
    let out = read_envelope(silent, CodexEvents).unwrap();
    assert_eq!(out.reply, "");
    assert_eq!(
        out.error.as_deref(),
        Some("the codex output has no agent_message")
    );
}

#[test]
fn a_failed_codex_turn_gives_its_message() {
    let out = read_envelope(
        concat!(
            "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n",
            "{\"type\":\"error\",\"message\":\"reconnecting 1/5\"}\n",
            "{\"type\":\"turn.failed\",\"error\":{\"message\":\"unexpected status 401\"}}\n",
        ),
        CodexEvents,
    )
    .unwrap();
    assert_eq!(out.reply, "");
    assert_eq!(out.error.as_deref(), Some("unexpected status 401"));
    assert_eq!(out.usage, None);
}

#[test]
fn cli_events_are_told_from_answers() {
    let obj = |text: &str| object(text).unwrap();
    for event in [CLAUDE_OK, CLAUDE_ASSISTANT, "{\"type\":\"turn.completed\"}"] {
        assert!(is_cli_event(&obj(event)), "{event}");
    }
    for answer in [
        "{\"bug\": true}",
        "{\"type\": \"bug\", \"found\": true}",
        "{\"type\": \"result\"}",
        "{\"session_id\": \"s\"}",
    ] {
        assert!(!is_cli_event(&obj(answer)), "{answer}");
    }
}

#[test]
fn forged_usage_is_refused_and_says_why() {
    let forged = r#"{"type":"result","result":"{\"bug\": true}","session_id":"s","total_cost_usd":1.7e308,"usage":{"input_tokens":18446744073709551615,"output_tokens":18446744073709551615}}"#;
    let out = read_envelope(forged, ClaudeEvents).unwrap();
    assert_eq!(out.reply, "{\"bug\": true}", "the answer still counts");
    assert_eq!(out.usage, None);
    assert_eq!(
        out.refused_usage.as_deref(),
        Some("input_tokens 18446744073709551615 is over 10000000 per run")
    );
    let dear = forged.replace("18446744073709551615", "1");
    let why = read_envelope(&dear, ClaudeEvents).unwrap().refused_usage;
    assert_eq!(
        why.as_deref(),
        Some("cost_usd 1.7e308 is outside 0 to 100 per run")
    );
    let fine = dear.replace("1.7e308", "0.5");
    let out = read_envelope(&fine, ClaudeEvents).unwrap();
    assert_eq!(
        (out.refused_usage, out.usage.and_then(|u| u.cost_usd)),
        (None, Some(0.5))
    );
}

#[test]
fn the_per_run_bounds_are_inclusive() {
    let at = |tokens: u64, cost: Option<f64>| Usage {
        input_tokens: tokens,
        cached_input_tokens: 0,
        output_tokens: 0,
        cost_usd: cost,
    };
    assert_eq!(
        at(MAX_TOKENS_PER_RUN, Some(MAX_COST_USD_PER_RUN)).out_of_bounds(),
        None
    );
    assert!(at(MAX_TOKENS_PER_RUN + 1, None).out_of_bounds().is_some());
    for cost in [-0.01, 100.01, f64::NAN, f64::INFINITY] {
        assert!(at(1, Some(cost)).out_of_bounds().is_some(), "{cost}");
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

#[test]
fn the_final_event_is_a_claude_result_without_an_error() {
    assert!(FinalWatch::new(Plain).is_none());
    assert!(
        FinalWatch::new(CodexEvents).is_none(),
        "codex is read to its exit"
    );
    let mut watch = FinalWatch::new(ClaudeEvents).unwrap();
    let err = r#"{"type":"result","subtype":"success","is_error":true,"result":"Not logged in","session_id":"s"}"#;
    let max = r#"{"type":"result","subtype":"error_max_turns","session_id":"s"}"#;
    let bare = r#"{"type":"result","ok":true}"#;
    for line in
        CLAUDE_INIT
            .lines()
            .chain([CLAUDE_ASSISTANT, "{\"ok\": true}", err, max, bare, "", "x"])
    {
        assert!(!watch.is_final(line), "{line}");
    }
    assert!(watch.is_final(CLAUDE_OK));
}
