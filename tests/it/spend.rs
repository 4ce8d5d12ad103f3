//! What verdicts cost (issue 33): usage read from a runner's envelope reaches the
//! verdict, judge.log and `status`; the spend cap ends jobs unchecked, logs once a
//! minute, shows in `doctor` and `status`, and counts across restarts.

use crate::support::*;

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

const CLAUDE_ENVELOPE: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":20,"num_turns":1,"result":"{\"ok\": true}","session_id":"s","total_cost_usd":0.002,"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":5}}"#;

/// `runner` (an override entry of `World::runner`) with `flags` before its prompt: the
/// flags that ask a CLI for an envelope, which is what makes its output read as one.
fn with_flags(runner: Value, flags: &[&str]) -> Value {
    let mut runner = runner;
    if let Some(argv) = runner[1].as_array_mut() {
        let at = argv.len().saturating_sub(1);
        for (i, flag) in flags.iter().enumerate() {
            argv.insert(at + i, json!(flag));
        }
    }
    runner
}

const CLAUDE_JSON: &[&str] = &["--output-format", "json"];
const CLAUDE_STREAM: &[&str] = &["--output-format", "stream-json"];
const CODEX_JSON: &[&str] = &["exec", "--json"];

/// A fake claude: prints a `--output-format json` result object.
fn claude_like(w: &World) -> Value {
    let body = format!("cat <<'EOF'\n{CLAUDE_ENVELOPE}\nEOF");
    with_flags(w.runner("claude", &body), CLAUDE_JSON)
}

/// A fake codex: prints an `exec --json` event stream.
fn codex_like(w: &World) -> Value {
    let runner = w.runner(
        "codex",
        r#"cat <<'EOF'
{"type":"thread.started","thread_id":"t"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"{\"ok\": true}"}}
{"type":"turn.completed","usage":{"input_tokens":30,"cached_input_tokens":20,"output_tokens":7}}
EOF"#,
    );
    with_flags(runner, CODEX_JSON)
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
        wait_for("verdict", NO_HANG, || {
            w.verdicts()
                .iter()
                .any(|(_, n, _)| *n == format!("{name}.json"))
        });
    }
    for name in ["c", "d", "e"] {
        w.job(name, &json!({"prompt": name}));
    }
    wait_for("capped verdicts", NO_HANG, || w.verdicts().len() == 5);
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

/// Holds `<state>/spend.lock` exclusively, as any process of the user can
/// (`flock -x spend.lock sleep 300`); released when the file is dropped.
fn hold_spend_lock(w: &World) -> std::fs::File {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(w.state().join("spend.lock"))
        .unwrap();
    // SAFETY: flock on a descriptor this function owns.
    let held = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(held, 0, "cannot take spend.lock");
    file
}

fn ledger_lines(w: &World) -> Vec<Value> {
    std::fs::read_to_string(w.state().join("spend.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
        .collect()
}

fn reason_of(v: &Value) -> &str {
    v["reason"].as_str().unwrap_or_default()
}

/// Issue 39, item 1: with `spend.lock` held by another process, every runner ended
/// in milliseconds but no verdict came (the record waited on the lock on the worker),
/// and SIGTERM took 35 s.
#[test]
fn a_held_spend_lock_stops_no_verdict_and_no_shutdown() {
    let w = World::new();
    w.config("workers = 2\nmax_runs_per_hour = 4\n");
    let table = [w.runner("r", &answer(r#"{"ok": true}"#))];
    let lock = hold_spend_lock(&w);
    let mut d = w.start(&table);
    for i in 0..6 {
        let job = json!({"prompt": format!("p{i}"), "hit_if_all_true": ["ok"]});
        w.job(&format!("j{i}"), &job);
    }
    wait_for("6 verdicts with spend.lock held", NO_HANG, || {
        w.verdicts().len() == 6
    });
    let verdicts: Vec<Value> = w.verdicts().into_iter().map(|(_, _, v)| v).collect();
    let hits = verdicts.iter().filter(|v| v["outcome"] == "hit").count();
    let capped = verdicts
        .iter()
        .filter(|v| reason_of(v).starts_with("budget: 4 runner runs"))
        .count();
    assert_eq!(
        (hits, capped),
        (4, 2),
        "the runs kept in memory count for the cap: {verdicts:?}"
    );
    assert!(
        ledger_lines(&w).is_empty(),
        "nothing appended under a held lock"
    );
    let log = w.log();
    let taken = log.matches("spend.lock cannot be had at once").count();
    assert_eq!(taken, 1, "logged once, not per job: {log}");
    d.signal("TERM");
    assert!(d.wait_exit(NO_HANG).success(), "{}", d.stderr());
    assert_eq!(
        ledger_lines(&w).len(),
        4,
        "at exit the runs kept in memory are appended without the lock"
    );
    drop(lock);
}

/// Issue 39, item 2: a stray line before a CLI's events turned a hit into a false
/// clean (the whole `result` object taken as the answer) and dropped the usage.
#[test]
fn a_stray_line_before_the_events_leaves_the_reply_the_answer_and_counts_usage() {
    let w = World::new();
    let claude = with_flags(
        w.runner(
            "claude",
            r#"cat <<'EOF'
Warning: a wrapper's banner
{"type":"system","subtype":"init","session_id":"s","tools":[]}
{"type":"assistant","session_id":"s","message":{"content":[{"type":"text","text":"{\"ok\": true}"}]}}
{"type":"result","subtype":"success","is_error":false,"result":"{\"ok\": true}","session_id":"s","total_cost_usd":0.002,"usage":{"input_tokens":10,"output_tokens":5}}
EOF"#,
        ),
        CLAUDE_STREAM,
    );
    let mut d = w.start(&[claude]);
    w.job("s", &json!({"prompt": "p", "hit_if_all_true": ["ok"]}));
    wait_for("verdict", NO_HANG, || w.verdicts().len() == 1);
    d.signal("TERM");
    assert!(d.wait_exit(NO_HANG).success(), "{}", d.stderr());
    let v = w.verdict("s");
    assert_eq!(v["outcome"], "hit", "{v}");
    assert_eq!(v["answer"], json!({"ok": true}));
    assert_eq!(
        v["attempts"][0]["usage"],
        json!({"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 5, "cost_usd": 0.002})
    );

    let codex = with_flags(
        w.runner(
            "codex",
            r#"echo 'Reading prompt from stdin...'
cat <<'EOF'
{"type":"thread.started","thread_id":"t"}
{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"{\"ok\": true}"}}
{"type":"turn.completed","usage":{"input_tokens":30,"cached_input_tokens":20,"output_tokens":7}}
EOF"#,
        ),
        CODEX_JSON,
    );
    let v = w.run_job(
        &[codex],
        "x",
        &json!({"prompt": "q", "hit_if_all_true": ["ok"]}),
    );
    assert_eq!(v["outcome"], "hit", "{v}");
    assert_eq!(v["attempts"][0]["usage"]["input_tokens"], 30, "{v}");

    let broken = with_flags(
        w.runner(
            "cut",
            r#"cat <<'EOF'
{"ok": true}
{"type":"system","subtype":"init","session_id":"s"}
EOF"#,
        ),
        CLAUDE_STREAM,
    );
    let v = w.run_job(
        &[broken],
        "b",
        &json!({"prompt": "r", "hit_if_all_true": ["ok"]}),
    );
    assert_eq!(v["outcome"], "unchecked", "events but no result: {v}");
    assert_eq!(
        v["attempts"][0]["reason"],
        "no JSON object line in stdout: the claude output has no result event"
    );
    assert_eq!(ledger_lines(&w).len(), 3, "each run is one line");
}

/// Issue 39, item 4: forged usage (a cost of 1.7e308, token counts of 2^64-1) was
/// recorded and ended every later job `unchecked` for a day; a plain-text runner
/// prints the model's reply, so a judged transcript can print such a line.
#[test]
fn forged_usage_is_never_counted_and_a_poisoned_ledger_locks_nothing_out() {
    let w = World::new();
    w.config("max_cost_usd_per_day = 5\n");
    let forged = r#"{"type":"result","subtype":"success","is_error":false,"result":"{\"ok\": true}","session_id":"s","total_cost_usd":1.7e308,"usage":{"input_tokens":18446744073709551615,"output_tokens":18446744073709551615}}"#;
    // A line written before the bounds existed.
    let poisoned = format!(
        r#"{{"at":{},"runner":"old","answered":true,"usage":{{"input_tokens":18446744073709551615,"cached_input_tokens":0,"output_tokens":18446744073709551615,"cost_usd":1.7e308}}}}"#,
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    );
    std::fs::write(w.state().join("spend.jsonl"), format!("{poisoned}\n")).unwrap();
    let plain = w.runner(
        "cursor",
        &format!("echo '{forged}'\necho '{{\"ok\": true}}'"),
    );
    let envelope = with_flags(w.runner("claude", &answer(forged)), CLAUDE_JSON);
    for (name, runner) in [("p1", &plain), ("e1", &envelope), ("p2", &plain)] {
        let job = json!({"prompt": name, "hit_if_all_true": ["ok"]});
        let v = w.run_job(std::slice::from_ref(runner), name, &job);
        assert_eq!(v["outcome"], "hit", "never capped: {v}");
        assert_eq!(v["attempts"][0]["usage"], Value::Null, "{v}");
    }
    let log = w.log();
    assert!(
        log.contains("usage the runner reported is not counted: input_tokens 18446744073709551615 is over 10000000 per run"),
        "{log}"
    );
    let recorded = ledger_lines(&w);
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    assert!(
        recorded[1..].iter().all(|l| l["usage"].is_null()),
        "{recorded:?}"
    );
    let s = status_json(&w);
    assert_eq!(s["spend"]["last_day"]["old"]["runs"], 1, "{s}");
    assert_eq!(
        s["spend"]["last_day"]["old"]["cost_usd"],
        Value::Null,
        "{s}"
    );
    assert_eq!(s["spend"]["last_day"]["old"]["input_tokens"], 0, "{s}");
    assert_eq!(s["spend"]["budget"]["reached"], Value::Null, "{s}");
    let text = String::from_utf8_lossy(&run(&w, &["status"]).stdout).into_owned();
    assert!(!text.contains("0000000000"), "{text}");
}

/// Issue 39, item 7: `max_runs_per_hour = 1`, 4 workers and 3 failing runners gave 12
/// runs (the cap was checked once per job). Each runner start is reserved under the
/// check, so the daemon alone never passes the cap: exactly 1 run.
#[test]
fn the_run_cap_is_checked_before_each_runner_start() {
    let w = World::new();
    w.config("workers = 4\nmax_runs_per_hour = 1\n");
    let table: Vec<Value> = ["a", "b", "c"]
        .iter()
        .map(|name| w.runner(name, "echo 'overloaded' >&2\nexit 1"))
        .collect();
    let mut d = w.start(&table);
    for i in 0..8 {
        w.job(&format!("j{i}"), &json!({"prompt": format!("p{i}")}));
    }
    wait_for("8 verdicts", NO_HANG, || w.verdicts().len() == 8);
    d.signal("TERM");
    assert!(d.wait_exit(NO_HANG).success(), "{}", d.stderr());
    let runs = ledger_lines(&w);
    assert_eq!(runs.len(), 1, "the cap is 1: {runs:?}");
    let verdicts: Vec<Value> = w.verdicts().into_iter().map(|(_, _, v)| v).collect();
    let attempts: usize = verdicts
        .iter()
        .map(|v| v["attempts"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(attempts, 1, "{verdicts:?}");
    for v in &verdicts {
        assert_eq!(v["outcome"], "unchecked", "{v}");
        assert!(
            reason_of(v).starts_with("budget: 1 runner runs in the last hour"),
            "{v}"
        );
    }
}
