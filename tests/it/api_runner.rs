//! API runners (issue 41) with the real binary against stand-in model APIs on
//! 127.0.0.1 (`api_runner/standin.rs`), both protocols: an answer, each failure
//! reason, a server slower than the timeout, a huge body, non-JSON, a dropped
//! connection, the failures that are tried again (issue 54: refused or reset, 429,
//! 5xx, `retry-after`) and their budget, refused and missing-key attempts feeding
//! runner health once per job, the key never
//! in the state folder, the investigate refusal, doctor's rows, a pooled connection
//! across the daemon's jobs, `eval`, the cache and the spend ledger.

mod standin;
mod tls;

use crate::support::*;

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use standin::{Behaviour, StandIn, anthropic_reply, ok, openai_reply, status};
use tls::{TlsStandIn, test_ca};

/// The key the tests send; it must never be written anywhere.
const KEY: &str = "sk-test-7f3a9c1e-never-in-a-file";
/// The key variable of the tests' API runners.
const KEY_VAR: &str = "LLM_JUDGE_TEST_API_KEY";

/// A config whose default table is one API runner `name` speaking `api` to `server`,
/// plus `extra` keys of the runner entry.
fn api_config(w: &World, api: &str, server: &StandIn, extra: &str) -> std::path::PathBuf {
    let text = format!(
        "output_cap_bytes = 4096\n[[runners.default]]\nname = \"api\"\napi = \"{api}\"\n\
         model = \"m-1\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n{extra}\n",
        server.base_url()
    );
    w.config_file(&format!("{api}.toml"), &text)
}

/// `llm-judge --config CONFIG ask --timeout T PROMPT` with the key set.
fn ask(w: &World, config: &Path, timeout: &str, prompt: &str) -> Finished {
    let mut cmd = w.cli();
    cmd.env(KEY_VAR, KEY)
        .arg("--config")
        .arg(config)
        .args(["ask", "--timeout", timeout, prompt]);
    w.run(cmd)
}

/// The reason of an `ask` against `behaviour`, for protocol `api`, and how many
/// tries gave it (every try of the one runner fails the same way).
fn reason_for(api: &str, behaviour: Behaviour, timeout: &str) -> (String, usize) {
    let w = World::new();
    let server = StandIn::start(behaviour);
    let config = api_config(&w, api, &server, "");
    let out = ask(&w, &config, timeout, "q");
    assert_eq!(out.code, Some(1), "{out:?}");
    let tried = attempts(&out.json());
    assert!(
        tried.iter().all(|t| t.0 == "api" && t.2 == tried[0].2),
        "{out:?}"
    );
    (tried[0].2.clone(), tried.len())
}

#[test]
fn anthropic_answers_with_the_key_the_prompt_and_usage_priced_by_the_table() {
    let w = World::new();
    let server = StandIn::start(ok(anthropic_reply("{\"bug\": true}")));
    let config = api_config(
        &w,
        "anthropic",
        &server,
        "usd_per_million_input_tokens = 1.0\nusd_per_million_output_tokens = 5.0",
    );
    let job = w.job(
        "j1",
        &json!({"prompt": "Is it a bug?", "hit_if_any_true": {"bug": "a bug"}}),
    );
    let mut cmd = w.cli();
    cmd.env(KEY_VAR, KEY)
        .arg("--config")
        .arg(&config)
        .arg("run")
        .arg(&job);
    let out = w.run(cmd);
    assert_eq!(out.code, Some(0), "{out:?}");
    let verdict = w.verdict_of("", "j1");
    assert_eq!(verdict["outcome"], "hit", "{verdict}");
    assert_eq!(verdict["runner"], "api");
    assert_eq!(verdict["answer"], json!({"bug": true}));
    let attempt = &verdict["attempts"][0];
    assert_eq!(attempt["reason"], "answered");
    assert_eq!(attempt["usage"]["input_tokens"], 60);
    assert_eq!(attempt["usage"]["output_tokens"], 8);
    let cost = attempt["usage"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 100e-6).abs() < 1e-12, "{cost}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.line, "POST /v1/messages HTTP/1.1");
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    let body = request.json();
    assert_eq!(body["model"], "m-1");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "Is it a bug?"}])
    );
    assert!(
        body["system"]
            .as_str()
            .unwrap()
            .contains("one line of JSON")
    );
    assert_eq!(body["max_tokens"], 256);
    let ledger = fs::read_to_string(w.state().join("spend.jsonl")).unwrap();
    assert!(
        ledger.contains("\"runner\":\"api\"") && ledger.contains("cost_usd"),
        "{ledger}"
    );
}

/// `base_url` as the Anthropic SDKs and Claude Code take it (no `/v1`) reaches the same
/// endpoint as one with it: a copied base URL got `http 404` before.
#[test]
fn an_anthropic_base_url_without_v1_reaches_the_messages_endpoint() {
    let w = World::new();
    let server = StandIn::start(ok(anthropic_reply("{\"ok\": true}")));
    let bare = server.base_url().trim_end_matches("/v1").to_string();
    let config = w.config_file(
        "bare.toml",
        &format!(
            "[[runners.default]]\nname = \"api\"\napi = \"anthropic\"\nmodel = \"m\"\n\
             base_url = \"{bare}\"\napi_key_env = \"{KEY_VAR}\"\n"
        ),
    );
    let out = ask(&w, &config, "30", "q");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(server.requests()[0].line, "POST /v1/messages HTTP/1.1");
}

/// A short key (a local server's `k`) is not masked: masking it rewrote every `k` of
/// the body, so usage read 0 and the spend cap under-counted.
#[test]
fn a_short_key_leaves_the_reply_and_its_usage_whole() {
    let w = World::new();
    let server = StandIn::start(ok(anthropic_reply("{\"ok\": true, \"kind\": \"k\"}")));
    let config = api_config(&w, "anthropic", &server, "");
    let mut cmd = w.cli();
    cmd.env(KEY_VAR, "k")
        .arg("--config")
        .arg(&config)
        .args(["ask", "--timeout", "30", "q"]);
    let out = w.run(cmd);
    assert_eq!(out.code, Some(0), "{out:?}");
    let answer = out.json();
    assert_eq!(answer["answer"], json!({"ok": true, "kind": "k"}));
    assert_eq!(
        answer["attempts"][0]["usage"]["input_tokens"], 60,
        "{answer}"
    );
}

#[test]
fn openai_chat_answers_a_reply_spread_over_lines_in_json_mode() {
    let w = World::new();
    let server = StandIn::start(ok(openai_reply("{\n  \"retracts\": false\n}")));
    let config = api_config(&w, "openai-chat", &server, "max_tokens = 20");
    let out = ask(&w, &config, "30", "Did it retract?");
    assert_eq!(out.code, Some(0), "{out:?}");
    let answer = out.json();
    assert_eq!(answer["answer"], json!({"retracts": false}));
    assert_eq!(answer["attempts"][0]["usage"]["input_tokens"], 66);
    let request = &server.requests()[0];
    assert_eq!(request.line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = request.json();
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert_eq!(body["max_tokens"], 20);
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "Did it retract?"})
    );
}

#[test]
fn each_failure_has_a_reason_a_user_can_act_on_in_both_protocols() {
    let error = |message: &str| {
        json!({"error": {"message": message}})
            .to_string()
            .into_bytes()
    };
    for api in ["anthropic", "openai-chat"] {
        // The reason, and the tries: 429 and 5xx (not 501), and a dropped connection
        // may pass and are tried three times; a wait past the retry budget is not made.
        let cases = [
            (
                status(401, &[], error("invalid x-api-key")),
                "http 401: invalid x-api-key",
                1,
            ),
            (
                status(400, &[], error("max_tokens: too large")),
                "http 400: max_tokens: too large",
                1,
            ),
            (
                status(429, &[("retry-after", "30")], error("rate limited")),
                "http 429: rate limited (retry after 30 s)",
                1,
            ),
            (
                status(503, &[], error("overloaded")),
                "http 503: overloaded",
                3,
            ),
            (
                status(501, &[], error("no such thing")),
                "http 501: no such thing",
                1,
            ),
            (
                status(302, &[("location", "http://127.0.0.1:1/evil")], Vec::new()),
                "http 302",
                1,
            ),
            (
                Behaviour::Huge { len: 1 << 20 },
                "http 200: the response is over 4096 bytes (output_cap_bytes)",
                1,
            ),
            (
                ok(b"<html>busy</html>".to_vec()),
                "http 200: bad response: not JSON: <html>busy</html>",
                1,
            ),
        ];
        for (behaviour, want, tries) in cases {
            assert_eq!(
                reason_for(api, behaviour, "30"),
                (want.to_string(), tries),
                "{api}"
            );
        }
        let (dropped, tries) = reason_for(api, Behaviour::Drop, "30");
        assert!(
            dropped.starts_with("connection dropped: "),
            "{api}: {dropped}"
        );
        assert_eq!(tries, 3, "{api}: a dropped connection is tried again");
        assert_eq!(
            reason_for(api, Behaviour::Silent, "1"),
            ("timed out after 1s".to_string(), 1),
            "{api}: a server slower than the timeout"
        );
    }
}

/// A server that resets the first connection answers the second try: one runner, two
/// attempts, an answer.
#[test]
fn a_reset_connection_is_tried_again() {
    let w = World::new();
    let server = StandIn::script(vec![
        Behaviour::Reset,
        ok(anthropic_reply("{\"ok\": true}")),
    ]);
    let config = api_config(&w, "anthropic", &server, "");
    let out = ask(&w, &config, "30", "q");
    assert_eq!(out.code, Some(0), "{out:?}");
    let tried = attempts(&out.json());
    assert_eq!(tried.len(), 2, "{out:?}");
    assert!(
        tried[0].0 == "api" && !tried[0].1 && tried[0].2.starts_with("connection reset: "),
        "{tried:?}"
    );
    assert_eq!(tried[1], ("api".to_string(), true, "answered".to_string()));
    assert_eq!(server.requests().len(), 2);
}

/// A 503 then an answer, through `run` (the daemon's and a hook's path): both tries in
/// the verdict, each request a run of the spend ledger, and health not touched by the
/// 503 (the job's one health event is the answer).
#[test]
fn a_503_then_an_answer_gives_two_attempts_and_two_spend_runs() {
    let w = World::new();
    let server = StandIn::script(vec![
        status(503, &[], b"busy".to_vec()),
        ok(anthropic_reply("{\"bug\": true}")),
    ]);
    let config = api_config(&w, "anthropic", &server, "[health]\nenabled = true");
    let job = w.job(
        "j1",
        &json!({"prompt": "q", "hit_if_any_true": {"bug": "a bug"}}),
    );
    let mut cmd = w.cli();
    cmd.env(KEY_VAR, KEY)
        .arg("--config")
        .arg(&config)
        .arg("run")
        .arg(&job);
    let out = w.run(cmd);
    assert_eq!(out.code, Some(0), "{out:?}");
    let verdict = w.verdict_of("", "j1");
    assert_eq!(verdict["outcome"], "hit", "{verdict}");
    assert_eq!(
        attempts(&verdict),
        expected(&[("api", false, "http 503: busy"), ("api", true, "answered")])
    );
    let ledger = fs::read_to_string(w.state().join("spend.jsonl")).unwrap();
    let answered: Vec<bool> = ledger
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["answered"] == true)
        .collect();
    assert_eq!(answered, [false, true], "{ledger}");
    let health = fs::read_to_string(w.state().join("health.json")).unwrap_or_default();
    assert!(!health.contains("503"), "{health}");
}

/// A 429 whose `retry-after: 1` is within the budget: the second request comes at
/// least that second after the first.
#[test]
fn a_429s_retry_after_is_waited_before_the_next_try() {
    let w = World::new();
    let server = StandIn::script(vec![
        status(429, &[("retry-after", "1")], b"slow down".to_vec()),
        ok(openai_reply("{\"ok\": true}")),
    ]);
    let config = api_config(&w, "openai-chat", &server, "");
    let out = ask(&w, &config, "30", "q");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        attempts(&out.json()),
        expected(&[
            ("api", false, "http 429: slow down (retry after 1 s)"),
            ("api", true, "answered"),
        ])
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let between = requests[1].at.duration_since(requests[0].at);
    assert!(between >= std::time::Duration::from_secs(1), "{between:?}");
}

/// The waits of one runner stay within its retry budget (half its timeout here: 5 s):
/// a server that always says `retry-after: 3` is asked twice, not three times.
#[test]
fn retries_stop_at_the_budget() {
    let w = World::new();
    let server = StandIn::start(status(503, &[("retry-after", "3")], b"down".to_vec()));
    let config = api_config(&w, "anthropic", &server, "");
    let out = ask(&w, &config, "10", "q");
    assert_eq!(out.code, Some(1), "{out:?}");
    let reason = "http 503: down (retry after 3 s)";
    assert_eq!(
        attempts(&out.json()),
        expected(&[("api", false, reason), ("api", false, reason)])
    );
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn tls_is_verified_and_a_ca_the_machine_trusts_is_accepted() {
    let w = World::new();
    let server = TlsStandIn::start(anthropic_reply("{\"ok\": true}"));
    let config = w.config_file(
        "tls.toml",
        &format!(
            "[[runners.default]]\nname = \"api\"\napi = \"anthropic\"\nmodel = \"m\"\n\
             base_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n",
            server.base_url()
        ),
    );
    let ask_trusting = |ca: Option<&Path>| {
        let mut cmd = w.cli();
        match ca {
            Some(ca) => cmd.env("SSL_CERT_FILE", ca),
            None => cmd.env_remove("SSL_CERT_FILE"),
        };
        cmd.env_remove("SSL_CERT_DIR")
            .env(KEY_VAR, KEY)
            .arg("--config")
            .arg(&config)
            .args(["ask", "--timeout", "30", "q"]);
        w.run(cmd)
    };
    let out = ask_trusting(None);
    assert_eq!(out.code, Some(1), "{out:?}");
    let reason = attempts(&out.json())[0].2.clone();
    assert!(
        reason.starts_with("cannot connect: ") && reason.contains("invalid peer certificate"),
        "a certificate no trusted CA signed: {reason}"
    );
    assert_eq!(server.requests(), 0, "no request, so no key, went out");
    let ca = test_ca();
    let out = ask_trusting(Some(&ca));
    assert_eq!(
        out.code,
        Some(0),
        "a CA the machine trusts (a company gateway's): {out:?}"
    );
    assert_eq!(server.requests(), 1);
}

#[test]
fn refused_and_unconfigured_attempts_say_so() {
    let w = World::new();
    let closed = StandIn::start(Behaviour::Silent);
    let (port, base) = (closed.port, closed.base_url());
    drop(closed);
    let config = w.config_file(
        "c.toml",
        &format!(
            "[[runners.default]]\nname = \"local\"\napi = \"openai-chat\"\nmodel = \"m\"\n\
             base_url = \"{base}\"\n\
             [[runners.default]]\nname = \"haiku-api\"\napi = \"anthropic\"\nmodel = \"m\"\n"
        ),
    );
    let mut cmd = w.cli();
    cmd.env_remove("ANTHROPIC_API_KEY")
        .arg("--config")
        .arg(&config)
        .args(["ask", "q"]);
    let out = w.run(cmd);
    assert_eq!(out.code, Some(1), "{out:?}");
    // A refused connection is tried three times (nothing ever listens here).
    let refused = format!("connection refused: http://127.0.0.1:{port}/v1");
    assert_eq!(
        attempts(&out.json()),
        expected(&[
            ("local", false, &refused),
            ("local", false, &refused),
            ("local", false, &refused),
            (
                "haiku-api",
                false,
                "not configured: ANTHROPIC_API_KEY is not set"
            ),
        ])
    );
}

#[test]
fn failures_feed_runner_health_and_a_missing_key_is_like_not_installed() {
    let w = World::new();
    let bad = StandIn::start(status(500, &[], b"boom".to_vec()));
    let good = StandIn::start(ok(anthropic_reply("{\"ok\": true}")));
    let config = w.config_file(
        "c.toml",
        &format!(
            "[health]\nenabled = true\n\
             [[runners.default]]\nname = \"bad\"\napi = \"anthropic\"\nmodel = \"m\"\n\
             base_url = \"{}\"\napi_key_env = \"\"\n\
             [[runners.default]]\nname = \"nokey\"\napi = \"anthropic\"\nmodel = \"m\"\n\
             base_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\
             [[runners.default]]\nname = \"good\"\napi = \"anthropic\"\nmodel = \"m\"\n\
             base_url = \"{}\"\napi_key_env = \"\"\n",
            bad.base_url(),
            good.base_url(),
            good.base_url()
        ),
    );
    let ask_with = |key: Option<&str>| {
        let mut cmd = w.cli();
        match key {
            Some(key) => cmd.env(KEY_VAR, key),
            None => cmd.env_remove(KEY_VAR),
        };
        cmd.arg("--config").arg(&config).args(["ask", "q"]);
        w.run(cmd).json()
    };
    let first = ask_with(None);
    assert_eq!(
        attempts(&first),
        expected(&[
            ("bad", false, "http 500: boom"),
            ("bad", false, "http 500: boom"),
            ("bad", false, "http 500: boom"),
            (
                "nokey",
                false,
                &format!("not configured: {KEY_VAR} is not set")
            ),
            ("good", true, "answered"),
        ])
    );
    // Both failing runners are benched; a key set now brings "nokey" back at once, as
    // a program found on PATH brings back a runner benched as not installed.
    let second = ask_with(Some(KEY));
    let order: Vec<String> = attempts(&second).into_iter().map(|a| a.0).collect();
    assert_eq!(order, ["nokey"], "{second}");
    let health: Value =
        serde_json::from_str(&fs::read_to_string(w.state().join("health.json")).unwrap()).unwrap();
    let bad = health
        .as_object()
        .and_then(|h| h.values().find(|r| r["name"] == "bad"))
        .unwrap_or_else(|| panic!("{health}"));
    assert_eq!(bad["last_reason"], "http 500: boom");
    // Three tries are one health event: benched once (60 s), not doubled twice (240 s).
    assert_eq!(bad["backoff_seconds"], 60.0, "{health}");
}

#[test]
fn the_key_never_reaches_a_file_of_the_state_folder() {
    let w = World::new();
    // A server that repeats the key in its error, and one that puts it in its reply,
    // each JSON-escaped (`\u0073` is `s`): masking reads the decoded text.
    let escaped = KEY.replacen('s', "\\u0073", 1);
    let echo = StandIn::start(status(
        401,
        &[],
        format!(r#"{{"error": {{"message": "bad key {escaped}"}}}}"#).into_bytes(),
    ));
    let reply = StandIn::start(ok(anthropic_reply(&format!(
        "{{\"bug\": true, \"note\": \"{escaped}\"}}"
    ))));
    let config = w.config_file(
        "c.toml",
        &format!(
            "[health]\nenabled = true\n[cache]\nttl_seconds = 60\n\
             [[runners.default]]\nname = \"echo\"\napi = \"openai-chat\"\nmodel = \"m\"\n\
             base_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\
             [[runners.default]]\nname = \"reply\"\napi = \"anthropic\"\nmodel = \"m\"\n\
             base_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n",
            echo.base_url(),
            reply.base_url()
        ),
    );
    let mut cmd = w.cli();
    cmd.env(KEY_VAR, KEY)
        .env("RUST_LOG", "trace")
        .arg("--config")
        .arg(&config);
    let daemon = w.start_with(cmd);
    w.job(
        "k1",
        &json!({"prompt": "q", "hit_if_any_true": {"bug": "b"}}),
    );
    let verdict_path = w.verdict_path(&transcript_hash(""), "k1");
    assert!(wait_until(within(NO_HANG), || verdict_path.exists()));
    let verdict = w.verdict_of("", "k1");
    assert_eq!(
        verdict["attempts"][0]["reason"], "http 401: bad key [api key]",
        "{verdict}"
    );
    assert_eq!(verdict["answer"]["note"], "[api key]");
    #[cfg(target_os = "linux")]
    {
        // A crash of the daemon, which has held the key, writes no core file.
        let limits = fs::read_to_string(format!("/proc/{}/limits", daemon.child.id())).unwrap();
        let core = limits.lines().find(|l| l.starts_with("Max core file size"));
        let fields: Vec<&str> = core.unwrap_or("").split_whitespace().collect();
        assert_eq!(fields[4..6], ["0", "0"], "{limits}");
    }
    drop(daemon);
    let mut holders = Vec::new();
    visit(&w.state(), &mut |path| {
        if fs::read(path).is_ok_and(|bytes| bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes())) {
            holders.push(path.display().to_string());
        }
    });
    assert!(holders.is_empty(), "the key is in {holders:?}");
}

#[test]
fn a_cli_runner_never_inherits_a_tables_api_key_unless_its_own_env_sets_it() {
    let w = World::new();
    let down = StandIn::start(status(500, &[], b"boom".to_vec()));
    let record = w.recorder();
    let quiet = w.script("quiet.sh", &format!("{record}exit 1"));
    let loud = w.script("loud.sh", &format!("{record}echo '{{\"ok\": true}}'"));
    let config = w.config_file(
        "c.toml",
        &format!(
            "[[runners.default]]\nname = \"api\"\napi = \"openai-chat\"\nmodel = \"m\"\n\
             base_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\
             [[runners.default]]\nname = \"quiet\"\nargv = [\"/bin/sh\", \"{}\", \"{{prompt}}\"]\n\
             [[runners.default]]\nname = \"loud\"\nargv = [\"/bin/sh\", \"{}\", \"{{prompt}}\"]\n\
             env = {{ {KEY_VAR} = \"its-own\" }}\n",
            down.base_url(),
            s(&quiet),
            s(&loud)
        ),
    );
    let out = ask(&w, &config, "30", "q");
    assert_eq!(out.code, Some(0), "{out:?}");
    let quiet_env = w.recorded_env("quiet.sh");
    assert!(
        !quiet_env
            .iter()
            .any(|v| v.starts_with(&format!("{KEY_VAR}="))),
        "{quiet_env:?}"
    );
    assert!(
        quiet_env.iter().any(|v| v.starts_with("PATH=")),
        "{quiet_env:?}"
    );
    let loud_env = w.recorded_env("loud.sh");
    let keys: Vec<&String> = loud_env
        .iter()
        .filter(|v| v.starts_with(&format!("{KEY_VAR}=")))
        .collect();
    assert_eq!(keys, [&format!("{KEY_VAR}=its-own")], "{loud_env:?}");
}

/// Calls `f` on every regular file under `dir`.
fn visit(dir: &Path, f: &mut dyn FnMut(&Path)) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => visit(&path, f),
            Ok(t) if t.is_file() => f(&path),
            _ => {}
        }
    }
}

#[test]
fn an_api_runner_in_the_investigate_table_is_refused_when_it_loads() {
    let w = World::new();
    let config = w.config_file(
        "c.toml",
        "[[runners.investigate]]\nname = \"haiku-api\"\napi = \"anthropic\"\nmodel = \"m\"\n",
    );
    let mut cmd = w.cli();
    cmd.arg("--config").arg(&config).args(["ask", "q"]);
    let out = w.run(cmd);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("runners.investigate[0] (\"haiku-api\")")
            && out.stderr.contains("cannot read, search or open files"),
        "{}",
        out.stderr
    );
}

#[test]
fn doctor_shows_each_api_runner_and_its_key_variable_never_its_value() {
    let w = World::new();
    let server = StandIn::start(ok(openai_reply("{\"ok\": true}")));
    let config = api_config(&w, "openai-chat", &server, "");
    let doctor = |key: Option<&str>, online: bool| {
        let mut cmd = w.cli();
        match key {
            Some(key) => cmd.env(KEY_VAR, key),
            None => cmd.env_remove(KEY_VAR),
        };
        cmd.arg("--config").arg(&config).arg("doctor");
        if online {
            cmd.arg("--online");
        }
        w.run(cmd)
    };
    let out = doctor(None, false);
    let head = format!(
        "default runner api: API openai-chat at {}, model m-1, key variable {KEY_VAR} is NOT set",
        server.base_url()
    );
    assert!(out.stdout.contains(&head), "{}", out.stdout);
    assert!(out.stdout.contains("no runner is usable"), "{}", out.stdout);
    let out = doctor(Some(KEY), true);
    assert!(
        out.stdout
            .contains(&format!("key variable {KEY_VAR} is set")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("default runner api: online: answered in "),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(KEY) && !out.stderr.contains(KEY));
    assert_eq!(server.requests().len(), 1, "only --online asks");
    let mut cmd = w.cli();
    cmd.env(KEY_VAR, KEY)
        .arg("--config")
        .arg(&config)
        .args(["doctor", "--json"]);
    let report: Value = w.run(cmd).json();
    let record = &report["runners"][0];
    assert_eq!(
        (&record["api"], &record["key_env"], &record["key_set"]),
        (&json!("openai-chat"), &json!(KEY_VAR), &json!(true))
    );
}

#[test]
fn the_daemon_keeps_one_connection_across_jobs_and_the_cache_spares_a_request() {
    let w = World::new();
    let server = StandIn::start(ok(anthropic_reply("{\"bug\": false}")));
    let config = w.config_file(
        "c.toml",
        &format!(
            "workers = 1\n[cache]\nttl_seconds = 60\n\
             [[runners.default]]\nname = \"api\"\napi = \"anthropic\"\nmodel = \"m\"\n\
             base_url = \"{}\"\napi_key_env = \"\"\n",
            server.base_url()
        ),
    );
    let mut cmd = w.cli();
    cmd.arg("--config").arg(&config);
    let _daemon = w.start_with(cmd);
    let folder = transcript_hash("");
    for (name, prompt) in [("a", "one"), ("b", "two"), ("c", "one")] {
        w.job(
            name,
            &json!({"prompt": prompt, "hit_if_any_true": {"bug": "b"}}),
        );
        let path = w.verdict_path(&folder, name);
        assert!(wait_until(within(NO_HANG), || path.exists()), "{name}");
    }
    assert_eq!(server.requests().len(), 2, "the third job is a cache hit");
    assert_eq!(w.verdict_of("", "c")["attempts"][0]["runner"], "cache");
    assert_eq!(
        server.connections(),
        1,
        "one kept-alive connection for both requests"
    );
}

#[test]
fn eval_runs_cases_on_an_api_runner() {
    let w = World::new();
    let server = StandIn::start(ok(openai_reply("{\"bug\": true}")));
    let config = api_config(&w, "openai-chat", &server, "");
    let cases = w.root.join("cases.jsonl");
    let case = |id: &str, expect: &str| {
        json!({"id": id, "prompt": id, "hit_if_all_true": ["bug"], "expect": expect}).to_string()
    };
    fs::write(
        &cases,
        [case("c1", "hit"), case("c2", "hit"), case("c3", "clean")].join("\n"),
    )
    .unwrap();
    let mut cmd: Command = w.cli();
    cmd.env(KEY_VAR, KEY)
        .arg("--config")
        .arg(&config)
        .args(["eval", "--json"])
        .arg(&cases);
    let out = w.run(cmd);
    assert_eq!(out.code, Some(0), "{out:?}");
    let report = out.json();
    let runner = &report["runners"][0];
    assert_eq!(runner["runner"], "api", "{report}");
    assert_eq!(runner["correct"], 2, "{report}");
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn the_daemon_warns_at_start_when_no_api_runner_has_its_key() {
    let w = World::new();
    let config = w.config_file(
        "c.toml",
        &format!(
            "[[runners.default]]\nname = \"haiku-api\"\napi = \"anthropic\"\nmodel = \"m\"\n\
             api_key_env = \"{KEY_VAR}\"\n"
        ),
    );
    let mut cmd = w.cli();
    cmd.env_remove(KEY_VAR).arg("--config").arg(&config);
    let _daemon = w.start_with(cmd);
    w.wait_log("default table: none of its runners (haiku-api) is installed on the daemon's PATH and logged in, or has its key variable set, so its jobs end unchecked; install or log in one of them, set a key, or fix PATH, in the service's environment");
}
