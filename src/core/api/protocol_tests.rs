use super::*;
use crate::core::api::spec::{ApiEntry, ApiSpec, JUDGE_SYSTEM_PROMPT, Protocol};
use crate::core::health::{Sign, sign_of};
use crate::core::verdict::REASON_MAX_CHARS;

fn spec(protocol: Protocol) -> ApiSpec {
    let entry = ApiEntry {
        model: Some("m".into()),
        ..ApiEntry::default()
    };
    ApiSpec::from_entry(protocol, entry).unwrap()
}

fn priced(protocol: Protocol) -> ApiSpec {
    ApiSpec {
        usd_per_million_input_tokens: Some(1.0),
        usd_per_million_output_tokens: Some(5.0),
        ..spec(protocol)
    }
}

fn ok(body: &str) -> CallEnd {
    CallEnd::Response {
        status: 200,
        retry_after: None,
        body: body.as_bytes().to_vec(),
    }
}

fn status(status: u16, retry_after: Option<&str>, body: &str) -> CallEnd {
    CallEnd::Response {
        status,
        retry_after: retry_after.map(str::to_string),
        body: body.as_bytes().to_vec(),
    }
}

fn judge(protocol: Protocol, end: &CallEnd) -> (Judged, RunEnd) {
    judge_call("r", &priced(protocol), end)
}

fn reason(protocol: Protocol, end: &CallEnd) -> String {
    judge(protocol, end).0.attempt.reason
}

const ANTHROPIC_OK: &str = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"{\"bug\": true}"}],"stop_reason":"end_turn","usage":{"input_tokens":60,"cache_read_input_tokens":10,"output_tokens":8}}"#;
const OPENAI_OK: &str = r#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"{\n  \"bug\": true\n}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":66,"completion_tokens":9,"total_tokens":75}}"#;

#[test]
fn bodies_carry_the_system_prompt_the_prompt_and_a_small_max_tokens() {
    let body: Value =
        serde_json::from_slice(&request_body(&spec(Protocol::Anthropic), "q?")).unwrap();
    assert_eq!(
        body,
        json!({"model": "m", "max_tokens": 256, "temperature": 0.0,
               "system": JUDGE_SYSTEM_PROMPT,
               "messages": [{"role": "user", "content": "q?"}]})
    );
    let body: Value =
        serde_json::from_slice(&request_body(&spec(Protocol::OpenAiChat), "q?")).unwrap();
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": JUDGE_SYSTEM_PROMPT},
               {"role": "user", "content": "q?"}])
    );
    let small = request_body(&spec(Protocol::Anthropic), "Did the assistant claim done?");
    assert!(small.len() < 450, "{} bytes", small.len());
}

#[test]
fn the_key_goes_in_the_protocols_own_header_marked_sensitive() {
    let h = headers(Protocol::Anthropic, Some("sk-a"));
    assert!(h.contains(&("x-api-key", "sk-a".into(), true)));
    assert!(h.contains(&("anthropic-version", ANTHROPIC_VERSION.into(), false)));
    let h = headers(Protocol::OpenAiChat, Some("sk-o"));
    assert_eq!(h, vec![("authorization", "Bearer sk-o".into(), true)]);
    assert!(headers(Protocol::OpenAiChat, None).is_empty());
}

#[test]
fn answers_with_usage_and_cost_from_the_tables_prices() {
    let (judged, end) = judge(Protocol::Anthropic, &ok(ANTHROPIC_OK));
    assert_eq!(end, RunEnd::Replied);
    assert_eq!(judged.attempt.reason, "answered");
    assert_eq!(judged.answer.map(Value::Object), Some(json!({"bug": true})));
    let usage = judged.attempt.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.cached_input_tokens), (70, 10));
    assert_eq!(usage.output_tokens, 8);
    let cost = usage.cost_usd.unwrap();
    assert!((cost - (70.0 + 40.0) / 1e6).abs() < 1e-12, "{cost}");
    let (judged, _) = judge(Protocol::OpenAiChat, &ok(OPENAI_OK));
    assert_eq!(
        judged.answer.map(Value::Object),
        Some(json!({"bug": true})),
        "a reply spread over lines is read whole"
    );
    let usage = judged.attempt.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (66, 9));
}

#[test]
fn no_prices_no_cost() {
    let (judged, _) = judge_call("r", &spec(Protocol::OpenAiChat), &ok(OPENAI_OK));
    assert_eq!(judged.attempt.usage.unwrap().cost_usd, None);
}

#[test]
fn forged_usage_is_not_counted() {
    let body = r#"{"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":99999999999,"completion_tokens":1}}"#;
    let (judged, _) = judge(Protocol::OpenAiChat, &ok(body));
    assert_eq!(judged.attempt.usage, None);
    assert!(judged.refused_usage.unwrap().contains("input_tokens"));
}

#[test]
fn failures_read_as_the_user_can_act_on_them() {
    let cases = [
        (
            CallEnd::NoKey {
                var: "ANTHROPIC_API_KEY".into(),
            },
            "not configured: ANTHROPIC_API_KEY is not set",
        ),
        (
            status(
                401,
                None,
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            ),
            "http 401: invalid x-api-key",
        ),
        (
            status(
                429,
                Some("17"),
                r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
            ),
            "http 429: Rate limit reached (retry after 17 s)",
        ),
        (
            status(503, None, "upstream overloaded"),
            "http 503: upstream overloaded",
        ),
        (status(500, None, ""), "http 500"),
        (
            status(404, None, r#"{"error":"model 'x' not found"}"#),
            "http 404: model 'x' not found",
        ),
        (
            status(422, None, r#"{"detail":"bad field"}"#),
            "http 422: bad field",
        ),
        (CallEnd::TimedOut { seconds: 1.5 }, "timed out after 1.5s"),
        (
            CallEnd::Refused {
                address: "127.0.0.1:9".into(),
            },
            "connection refused: 127.0.0.1:9",
        ),
        (
            CallEnd::Transport {
                kind: Transport::Dropped,
                detail: "connection closed before message completed".into(),
            },
            "connection dropped: connection closed before message completed",
        ),
        (
            CallEnd::TooLarge {
                status: 200,
                cap: 1024,
            },
            "http 200: the response is over 1024 bytes (output_cap_bytes)",
        ),
        (
            ok("<html>hi</html>"),
            "http 200: bad response: not JSON: <html>hi</html>",
        ),
        (
            ok("[1]"),
            "http 200: bad response: the body is JSON but not an object",
        ),
        (
            ok(r#"{"choices":[]}"#),
            "http 200: bad response: no \"choices\" in the Chat Completions response",
        ),
    ];
    for (end, want) in cases {
        assert_eq!(reason(Protocol::OpenAiChat, &end), want, "{end:?}");
    }
}

#[test]
fn failures_feed_health_as_a_clis_would() {
    let sign = |end: CallEnd| {
        let (judged, run_end) = judge(Protocol::Anthropic, &end);
        sign_of(&run_end, judged.answer.is_some())
    };
    assert_eq!(sign(CallEnd::NoKey { var: "K".into() }), Sign::NotInstalled);
    assert_eq!(sign(status(401, None, "")), Sign::Failed);
    assert_eq!(sign(status(529, None, "")), Sign::Failed);
    assert_eq!(sign(CallEnd::TimedOut { seconds: 1.0 }), Sign::TimedOut);
    assert_eq!(
        sign(CallEnd::Refused {
            address: "a".into()
        }),
        Sign::Failed
    );
    assert_eq!(sign(ok(ANTHROPIC_OK)), Sign::Answered);
    let prose = r#"{"content":[{"type":"text","text":"I think so."}]}"#;
    assert_eq!(
        sign(ok(prose)),
        Sign::Neutral,
        "a reply without JSON, like exit 0"
    );
    assert_eq!(
        reason(Protocol::Anthropic, &ok(prose)),
        "no JSON object in the reply: I think so."
    );
}

#[test]
fn a_reply_cut_at_max_tokens_says_so() {
    let body = r#"{"content":[{"type":"text","text":"{\"bug\": tr"}],"stop_reason":"max_tokens"}"#;
    assert!(reason(Protocol::Anthropic, &ok(body)).contains("cut at max_tokens"));
}

#[test]
fn long_reasons_are_clipped_and_keep_the_retry_hint() {
    let message = "x".repeat(2000);
    let body = format!(r#"{{"error":{{"message":"{message}"}}}}"#);
    let r = reason(Protocol::Anthropic, &status(429, Some("30"), &body));
    assert_eq!(r.chars().count(), REASON_MAX_CHARS);
    assert!(r.starts_with("http 429: x"), "{r}");
    assert!(r.ends_with("(retry after 30 s)"), "{r}");
}
