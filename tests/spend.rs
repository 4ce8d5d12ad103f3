//! What verdicts cost (issue 33): usage read from a runner's envelope reaches the
//! verdict, judge.log and `status`; the spend cap ends jobs unchecked, logs once a
//! minute, shows in `doctor` and `status`, and counts across restarts.

mod support;
use support::world;

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use world::*;

const CLAUDE_ENVELOPE: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":20,"num_turns":1,"result":"{\"ok\": true}","session_id":"s","total_cost_usd":0.002,"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":5}}"#;

/// A fake claude: prints a `--output-format json` result object.
fn claude_like(w: &World) -> Value {
    w.runner("claude", &format!("cat <<'EOF'\n{CLAUDE_ENVELOPE}\nEOF"))
}

/// A fake codex: prints an `exec --json` event stream.
fn codex_like(w: &World) -> Value {
    w.runner(
        "codex",
        r#"cat <<'EOF'
{"type":"thread.started","thread_id":"t"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"{\"ok\": true}"}}
{"type":"turn.completed","usage":{"input_tokens":30,"cached_input_tokens":20,"output_tokens":7}}
EOF"#,
    )
}

fn status_json(w: &World) -> Value {
    let out = w.command(&[]).args(["status", "--json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn run(w: &World, args: &[&str]) -> Output {
    w.command(&[]).args(args).output().unwrap()
}

#[test]
fn usage_reaches_the_verdict_judge_log_and_status_totals() {
    let w = World::new();
    let claude = claude_like(&w);
    let codex = codex_like(&w);
    let v = w.run_job(
        &[claude],
        "c",
        &json!({"prompt": "1", "hit_if_all_true": ["ok"]}),
    );
    assert_eq!(v["outcome"], "hit", "the answer is read from `result`: {v}");
    assert_eq!(
        v["attempts"][0]["usage"],
        json!({"input_tokens": 14, "cached_input_tokens": 4, "output_tokens": 5, "cost_usd": 0.002})
    );
    let v = w.run_job(
        &[codex],
        "x",
        &json!({"prompt": "2", "hit_if_all_true": ["ok"]}),
    );
    assert_eq!(v["outcome"], "hit", "the answer is the agent message: {v}");
    assert_eq!(
        v["attempts"][0]["usage"],
        json!({"input_tokens": 30, "cached_input_tokens": 20, "output_tokens": 7})
    );
    let log = w.log();
    let claude_end = log
        .lines()
        .find(|l| l.contains("runner end id=c "))
        .unwrap_or_default();
    assert!(
        claude_end.contains("input_tokens=14 cached_input_tokens=4 output_tokens=5 cost_usd=0.002"),
        "{log}"
    );
    let codex_end = log
        .lines()
        .find(|l| l.contains("runner end id=x "))
        .unwrap_or_default();
    assert!(
        codex_end.contains("output_tokens=7") && !codex_end.contains("cost_usd"),
        "{log}"
    );

    let s = status_json(&w);
    for window in ["last_hour", "last_day"] {
        let t = &s["spend"][window];
        assert_eq!(
            t["claude"],
            json!({"runs": 1, "verdicts": 1, "input_tokens": 14, "cached_input_tokens": 4,
                   "output_tokens": 5, "cost_usd": 0.002}),
            "{s}"
        );
        assert_eq!(t["codex"]["runs"], 1, "{s}");
        assert_eq!(
            t["codex"]["cost_usd"],
            Value::Null,
            "codex reports no cost: {s}"
        );
    }
    assert_eq!(s["spend"]["budget"]["reached"], Value::Null);
    let text = String::from_utf8_lossy(&run(&w, &["status"]).stdout).into_owned();
    assert!(
        text.contains("last hour") && text.contains("$0.0020"),
        "{text}"
    );
    assert!(text.contains("14/5") && text.contains("no cap"), "{text}");
}

#[test]
fn the_run_cap_ends_jobs_unchecked_logs_once_and_counts_across_restarts() {
    let w = World::new();
    w.config("max_runs_per_hour = 2\n");
    let table = [w.runner("r", &answer(r#"{"ok": true}"#))];
    let mut d = w.start(&table);
    for name in ["a", "b"] {
        w.job(name, &json!({"prompt": name, "hit_if_all_true": ["ok"]}));
        wait_for("verdict", DEADLINE, || {
            w.verdicts()
                .iter()
                .any(|(_, n, _)| *n == format!("{name}.json"))
        });
    }
    for name in ["c", "d", "e"] {
        w.job(name, &json!({"prompt": name}));
    }
    wait_for("capped verdicts", DEADLINE, || w.verdicts().len() == 5);
    assert_eq!(w.verdict("a")["outcome"], "hit");
    for name in ["c", "d", "e"] {
        let v = w.verdict(name);
        assert_eq!(v["outcome"], "unchecked", "{v}");
        assert_eq!(v["attempts"], json!([]), "no runner started: {v}");
        let reason = v["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with(
                "budget: 2 runner runs in the last hour reached max_runs_per_hour = 2"
            ),
            "{reason}"
        );
    }
    let budget_lines = w.log().lines().filter(|l| l.contains("budget: ")).count();
    assert_eq!(
        budget_lines,
        1,
        "logged once a minute, not per job: {}",
        w.log()
    );
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(30)).success());

    // A new process reads the ledger: still capped, and doctor and status say so.
    let v = w.run_job(&table, "f", &json!({"prompt": "f"}));
    assert!(
        v["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("budget: "),
        "{v}"
    );
    let doctor = run(&w, &["doctor"]);
    let report = String::from_utf8_lossy(&doctor.stdout).into_owned();
    assert!(report.contains("spend cap reached"), "{report}");
    assert_eq!(doctor.status.code(), Some(1), "{report}");
    let s = status_json(&w);
    assert_eq!(s["spend"]["last_hour"]["r"]["runs"], 2, "{s}");
    assert_eq!(s["spend"]["budget"]["max_runs_per_hour"], 2, "{s}");
    assert!(s["spend"]["budget"]["reached"].is_string(), "{s}");
    let text = String::from_utf8_lossy(&run(&w, &["status"]).stdout).into_owned();
    assert!(text.contains("REACHED"), "{text}");
}

#[test]
fn the_cost_cap_counts_reported_dollars_across_run_processes() {
    let w = World::new();
    w.config("max_cost_usd_per_day = 0.003\n");
    let table = [claude_like(&w)];
    let first = w.run_job(
        &table,
        "one",
        &json!({"prompt": "1", "hit_if_all_true": ["ok"]}),
    );
    let second = w.run_job(
        &table,
        "two",
        &json!({"prompt": "2", "hit_if_all_true": ["ok"]}),
    );
    assert_eq!(
        (&first["outcome"], &second["outcome"]),
        (&json!("hit"), &json!("hit"))
    );
    let third = w.run_job(&table, "three", &json!({"prompt": "3"}));
    assert_eq!(third["outcome"], "unchecked");
    assert_eq!(
        third["reason"],
        "budget: 0.0040 USD reported in the last 24 hours reached max_cost_usd_per_day = 0.003; raise it in the config or wait"
    );
    let doctor = String::from_utf8_lossy(&run(&w, &["doctor"]).stdout).into_owned();
    assert!(doctor.contains("spend cap reached"), "{doctor}");
    w.config("max_cost_usd_per_day = 1\n");
    let doctor = String::from_utf8_lossy(&run(&w, &["doctor"]).stdout).into_owned();
    assert!(
        doctor.contains("spend cap: under it (2 runs in the last hour, 0.0040 USD"),
        "{doctor}"
    );
    let fourth = w.run_job(
        &table,
        "four",
        &json!({"prompt": "4", "hit_if_all_true": ["ok"]}),
    );
    assert_eq!(fourth["outcome"], "hit", "a raised cap lets jobs run again");
}
