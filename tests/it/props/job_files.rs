//! Job file bytes: parsing survives anything and timeouts stay in range.

use super::*;

use llm_judge::api::{Mode, check_id, parse_job, timeout_of};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

/// Strings that matter to the judge, mixed into random ones.
const SPECIAL_STRINGS: &[&str] = &[
    "",
    "investigate",
    "Investigate",
    "default",
    "/",
    "/tmp",
    ".",
    "..",
    ".hidden",
    "a/b",
    "\u{0}",
    "{prompt}",
    "--version",
    "-p",
    "--dangerously-skip-permissions",
    "\u{fffd}",
    "日本語",
    "🦀",
];

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        (-1000.0f64..1000.0).prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
        prop::sample::select(SPECIAL_STRINGS).prop_map(|s| Value::String(s.to_string())),
    ]
}

pub(super) fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(&[
            "prompt", "id", "mode", "timeout_seconds", "cwd", "transcript", "hook", "on_hit",
            "rule_id", "hit_if_all_true", "hit_if_any_true", "argv", "runners",
        ][..])
        .prop_map(str::to_string),
        1 => any::<String>(),
    ]
}

/// A raw JSON value text: usually valid, sometimes a number or token serde must refuse.
fn raw_value() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => json_value().prop_map(|v| v.to_string()),
        1 => prop::sample::select(&[
            "NaN", "-NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "-0", "00",
            "1.", ".5", "+1", "0x10", "tru", "nul", "\"\\ud800\"", "\"\\u0000\"", "\"unterminated",
            "[", "{", "}", "]", "1e308", "-1e308", "5e-324", "600.0000000000001", "599.9999999999999",
        ][..])
        .prop_map(str::to_string),
    ]
}

/// Job file text: an object with possibly duplicate keys, sometimes damaged. Half of
/// them start with a valid prompt, so a fair share parse (see the test below).
fn job_text() -> impl Strategy<Value = (Vec<(String, String)>, String, u8)> {
    (
        any::<bool>(),
        prop::collection::vec((key(), raw_value()), 0..8),
        any::<String>(),
        0u8..12,
    )
        .prop_map(|(lead, mut pairs, junk, damage)| {
            if lead {
                pairs.insert(0, ("prompt".into(), "\"p\"".into()));
            }
            (pairs, junk, damage)
        })
}

fn render(pairs: &[(String, String)], junk: &str, damage: u8) -> Vec<u8> {
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}: {v}", Value::String(k.clone())))
        .collect();
    let text = format!("{{{}}}", body.join(", "));
    let mut bytes = text.into_bytes();
    match damage {
        0 => bytes.extend_from_slice(junk.as_bytes()),
        1 => bytes.truncate(bytes.len() / 2),
        2 => {
            let mut b = junk.as_bytes().to_vec();
            b.extend_from_slice(&bytes);
            bytes = b;
        }
        3 => bytes.insert(bytes.len() / 2, 0xff),
        _ => {}
    }
    bytes
}

// ------------------------------------------------------------------ job files

fn check_job_result(bytes: &[u8], stem: &str) -> Result<llm_judge::api::Job, String> {
    match parse_job(bytes, stem, RULES) {
        Ok(job) => {
            let t = job.timeout_seconds;
            assert!(t > 0.0 && t <= 600.0, "timeout {t}");
            check_id(&job.id).map_err(|e| format!("accepted a bad id {:?}: {e}", job.id))?;
            Ok(job)
        }
        Err(e) => {
            assert!(e.reason().starts_with("judge error"), "{:?}", e.reason());
            Err(e.reason())
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn parse_job_survives_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        stem in any::<String>(),
    ) {
        let _ = check_job_result(&bytes, &stem);
    }

    #[test]
    fn parse_job_survives_json_shaped_input(
        (pairs, junk, damage) in job_text(),
        stem in prop_oneof![Just("job".to_string()), any::<String>()],
    ) {
        let bytes = render(&pairs, &junk, damage);
        if let Ok(job) = check_job_result(&bytes, &stem) {
            // Duplicate keys: the last one counts, for the prompt and for the mode.
            let last = |k: &str| {
                pairs.iter().rev().find(|(key, _)| key == k).map(|(_, v)| {
                    serde_json::from_str::<Value>(v).unwrap()
                })
            };
            prop_assert_eq!(last("prompt"), Some(Value::String(job.prompt.clone())));
            let investigate = last("mode") == Some(json!("investigate"));
            prop_assert_eq!(job.mode == Mode::Investigate, investigate);
        }
    }

    #[test]
    fn timeouts_are_always_in_0_600(x in any::<f64>(), text in raw_value()) {
        let as_text = format!("{x:e}");
        for raw in [as_text.as_str(), text.as_str()] {
            let value = serde_json::from_str::<Value>(raw).ok();
            let t = timeout_of(value.as_ref(), RULES);
            prop_assert!(t > 0.0 && t <= 600.0, "{} -> {}", raw, t);
            if let Some(v) = value.as_ref().and_then(Value::as_f64) {
                let expected = if v > 0.0 && v <= 600.0 { v } else if v > 600.0 { 600.0 } else { 60.0 };
                prop_assert_eq!(t, expected, "{}", raw);
            }
        }
    }
}

/// The json-shaped property is not vacuous: many inputs parse, many are refused.
#[test]
fn json_shaped_jobs_both_parse_and_fail() {
    let mut runner_ = TestRunner::deterministic();
    let strategy = job_text();
    let (mut ok, mut err) = (0, 0);
    for _ in 0..2000 {
        let (pairs, junk, damage) = strategy.new_tree(&mut runner_).unwrap().current();
        match check_job_result(&render(&pairs, &junk, damage), "job") {
            Ok(_) => ok += 1,
            Err(_) => err += 1,
        }
    }
    eprintln!("json-shaped jobs: {ok} parsed, {err} judge errors");
    assert!(ok >= 150 && err >= 150, "{ok} parsed, {err} refused");
}
