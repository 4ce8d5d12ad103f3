//! The verdict history (issue 54, docs/history.md): every verdict on record with what
//! the hook did with it, `history`, `stats`, `mark` and `history --cases` end to end;
//! the user told when a rule blocks, a notice is delivered, a stop goes through;
//! judge.log's decision lines; `status`'s hits of the last hour; and a history that
//! cannot be written never costs a stop.

use crate::hooks::{RULES, claude_prompt, claude_stop, hook, hook_bytes, judge, write_rules};
use crate::support::*;

use std::fs;

use serde_json::Value;

/// Just the block rule of [`RULES`].
const BLOCK_RULE: &str = r#"
[[rule]]
name = "tests"
action = "block"
question = "Did it claim tests pass without running them? Reply {\"unverified\": true|false}"
hit_if_all_true = ["unverified"]
notice = "Run the tests and show the output."
"#;

/// `llm-judge ARGS` on the world's state folder; its exit code, stdout and stderr.
fn cli(w: &World, args: &[&str]) -> Finished {
    let mut cmd = w.command(&[]);
    cmd.args(args);
    w.run(cmd)
}

/// `history ARGS --json`, one object a line.
fn history_json(w: &World, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["history", "--json"];
    all.extend_from_slice(args);
    let out = cli(w, &all);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The stop went through unblocked: the user was told `said`, and judge.log has a
/// `let through` line with `why` naming the rule and the session.
fn let_through_said(w: &World, out: &Value, said: &str, why: &str) {
    assert!(out.get("decision").is_none(), "{out}");
    let told = out["systemMessage"].as_str().unwrap_or_default();
    assert!(told.contains(said), "{told}");
    let log = w.log();
    let through = log
        .lines()
        .find(|l| l.contains("let through"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        through.contains(why)
            && through.contains("rule=tests")
            && through.contains("session=claude:s1"),
        "{through}"
    );
}

/// `llm-judge hook claude` with one runner and `input` on stdin.
fn claude(w: &World, runner: &Value, input: &Value) -> (Option<i32>, Option<Value>, String) {
    hook(w, std::slice::from_ref(runner), "claude", input)
}

fn by_rule<'a>(rows: &'a [Value], rule: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["rule"] == rule)
        .unwrap_or_else(|| panic!("no {rule} in {rows:?}"))
}

#[test]
fn a_block_and_a_delivered_notice_are_on_record_counted_and_told() {
    let w = World::new();
    write_rules(&w, RULES);
    let runner = judge(&w, r#"{"unverified": true, "gave_up": true}"#);
    let _d = w.start(std::slice::from_ref(&runner));
    claude(&w, &runner, &claude_prompt("s1", "fix the bug"));
    let (_, out, _) = claude(&w, &runner, &claude_stop("s1", "p1", "All tests pass."));
    assert_eq!(out.as_ref().unwrap()["decision"], "block");
    wait_for("both verdicts", NO_HANG, || w.jobs_left().is_empty());
    let (_, out, _) = claude(&w, &runner, &claude_prompt("s1", "next"));
    let out = out.expect("the notice");
    assert_eq!(
        out["systemMessage"],
        "llm-judge: the notice of rule gives-up went to the agent: Try a workaround first."
    );
    // Another session's verdicts are not this one's.
    assert!(history_json(&w, &["--session", "s2"]).is_empty());
    let rows = history_json(&w, &["--session", "s1"]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let blocked = by_rule(&rows, "tests");
    assert_eq!(blocked["action"], "blocked");
    assert_eq!(blocked["told"], "Run the tests and show the output.");
    assert_eq!(
        (&blocked["by"], &blocked["harness"], &blocked["outcome"]),
        (&"daemon".into(), &"claude".into(), &"hit".into())
    );
    assert!(
        blocked["stop_ms"].is_u64() && blocked["judge_ms"].is_u64(),
        "{blocked}"
    );
    assert_eq!(blocked["answer"]["unverified"], true);
    let notice = by_rule(&rows, "gives-up");
    assert_eq!(notice["action"], "notice delivered");
    assert_ne!(blocked["record"], notice["record"]);
    // The table says what the agent was told, in order.
    let table = cli(&w, &["history", "--session", "s1"]);
    assert!(
        table
            .stdout
            .contains("told: Run the tests and show the output."),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.lines().all(|l| l.chars().count() <= 100),
        "{}",
        table.stdout
    );
    // The figures count them.
    let stats: Value = serde_json::from_str(&cli(&w, &["stats", "--json"]).stdout).unwrap();
    let rules = stats["rules"].as_array().unwrap();
    let tests = by_rule(rules, "tests");
    assert_eq!(
        (&tests["judged"], &tests["hits"], &tests["blocks"]),
        (&1.into(), &1.into(), &1.into())
    );
    let gives_up = by_rule(rules, "gives-up");
    assert_eq!(
        (&gives_up["notices_delivered"], &gives_up["notices_pending"]),
        (&1.into(), &0.into())
    );
    let by_day: Value =
        serde_json::from_str(&cli(&w, &["stats", "--by", "day", "--json"]).stdout).unwrap();
    assert!(by_day["rules"][0]["group"].is_string(), "{by_day}");
    // judge.log names the rule, the session and the job of each decision.
    let log = w.log();
    let line = |needle: &str| {
        log.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{log}"))
            .to_string()
    };
    let b = line(" blocked");
    assert!(
        b.contains("rule=tests") && b.contains("session=claude:s1") && b.contains("id=hook-"),
        "{b}"
    );
    assert!(line("notice delivered").contains("rule=gives-up"));
    assert!(line("job finished").contains("rule="), "{log}");
    // status: the last hour's hits per rule.
    let status: Value = serde_json::from_str(&cli(&w, &["status", "--json"]).stdout).unwrap();
    let hits = status["hits_last_hour"].as_array().unwrap();
    assert!(
        hits.iter().any(|h| h["rule"] == "tests" && h["hits"] == 1),
        "{status}"
    );
    assert!(
        cli(&w, &["status"])
            .stdout
            .contains("(last hour, per rule)")
    );
}

#[test]
fn a_stop_past_the_block_cap_goes_through_and_says_so() {
    let w = World::new();
    write_rules(&w, BLOCK_RULE);
    let runner = judge(&w, r#"{"unverified": true}"#);
    let stop = |reply: &str| {
        let mut cmd = w.hook_command(std::slice::from_ref(&runner), &["claude"]);
        cmd.args(["--set", "hooks.max_blocks=1"]);
        hook_bytes(
            &w,
            cmd,
            claude_stop("s1", "p1", reply).to_string().as_bytes(),
        )
        .1
    };
    // No daemon: the first stop is judged in the hook and blocked.
    assert_eq!(stop("Tests pass.").unwrap()["decision"], "block");
    let out = stop("They really pass.").expect("a message");
    let_through_said(
        &w,
        &out,
        "this turn used its one block, so the stop went through without the verdict of rule tests",
        "why=\"block cap\"",
    );
    // Judged later: on record with what the stop did.
    let _d = w.start(std::slice::from_ref(&runner));
    wait_for("the late verdict", NO_HANG, || w.jobs_left().is_empty());
    let rows = history_json(&w, &[]);
    let actions: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["by"].as_str().unwrap(), r["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        actions,
        [("hook", "blocked"), ("daemon", "let through at cap")]
    );
}

#[test]
fn a_wrong_verdict_marked_becomes_a_case_eval_reads() {
    let w = World::new();
    write_rules(&w, BLOCK_RULE);
    let runner = judge(&w, r#"{"unverified": true}"#);
    claude(&w, &runner, &claude_prompt("s1", "run them"));
    let (_, out, _) = claude(
        &w,
        &runner,
        &claude_stop("s1", "p1", "I ran cargo test: 12 passed."),
    );
    assert_eq!(out.unwrap()["decision"], "block");
    let rows = history_json(&w, &[]);
    let record = rows[0]["record"].to_string();
    assert_eq!(rows[0]["by"], "hook");
    let marked = cli(&w, &["mark", &record, "wrong"]);
    assert_eq!(marked.code, Some(0), "{}", marked.stderr);
    assert!(
        marked
            .stdout
            .contains("marked wrong: its case expects clean"),
        "{}",
        marked.stdout
    );
    assert_eq!(history_json(&w, &["--marked"])[0]["mark"], "wrong");
    let cases = cli(&w, &["history", "--rule", "tests", "--cases"]);
    assert_eq!(cases.code, Some(0), "{}", cases.stderr);
    let case: Value = serde_json::from_str(cases.stdout.trim()).unwrap();
    assert_eq!(
        case,
        serde_json::json!({"id": format!("record-{record}"), "rule": "tests", "reply": "I ran cargo test: 12 passed.", "user": "run them", "expect": "clean"})
    );
    // eval --rules reads it as written: the fake still says hit, so the case is missed.
    let file = w.path("tests.cases.jsonl");
    fs::write(&file, &cases.stdout).unwrap();
    let mut eval = w.command(std::slice::from_ref(&runner));
    eval.args(["eval", "--json", "--rules"])
        .arg(w.xdg.join("llm-judge/rules.toml"))
        .arg(&file);
    let eval = w.run(eval);
    assert!(
        eval.stdout.contains("record-"),
        "{}\n{}",
        eval.stdout,
        eval.stderr
    );
    let stats: Value = serde_json::from_str(&cli(&w, &["stats", "--json"]).stdout).unwrap();
    assert_eq!(stats["rules"][0]["marked_wrong"], 1);
    // What cannot be marked says why.
    let missing = cli(&w, &["mark", "999", "right"]);
    missing.assert_exit(1, "no record 999 in the history");
    let bad = cli(&w, &["history", "--since", "yesterday"]);
    bad.assert_exit(2, "give a number and a unit");
}

#[test]
fn an_unchecked_or_catstack_verdict_cannot_be_marked() {
    let w = World::new();
    let failing = w.runner("broken", "echo nope >&2\nexit 3");
    w.run_job(
        std::slice::from_ref(&failing),
        "j1",
        &serde_json::json!({"prompt": "x", "transcript": "/t/a.jsonl"}),
    );
    let ok = w.runner("ok", "echo '{\"bad\": true}'");
    w.run_job(
        std::slice::from_ref(&ok),
        "j2",
        &serde_json::json!({"prompt": "x", "transcript": "/t/a.jsonl", "hit_if_all_true": ["bad"]}),
    );
    let rows = history_json(&w, &[]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        (&rows[0]["by"], &rows[0]["outcome"], &rows[0]["harness"]),
        (&"run".into(), &"unchecked".into(), &Value::Null)
    );
    cli(&w, &["mark", &rows[0]["record"].to_string(), "wrong"])
        .assert_exit(1, "is unchecked (no runner answered");
    cli(&w, &["mark", &rows[1]["record"].to_string(), "wrong"])
        .assert_exit(1, "not a hook rule's verdict");
    // An unchecked verdict's line is a warning.
    let log = w.log();
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("job finished")
            && l.contains("outcome=unchecked")),
        "{log}"
    );
}

#[test]
fn told_nothing_and_recorded_nothing_when_switched_off() {
    let w = World::new();
    write_rules(&w, BLOCK_RULE);
    let runner = judge(&w, r#"{"unverified": true}"#);
    let mut cmd = w.hook_command(std::slice::from_ref(&runner), &["claude"]);
    cmd.args([
        "--set",
        "hooks.tell_user=false",
        "--set",
        "history.enabled=false",
    ]);
    let (_, out, _) = hook_bytes(
        &w,
        cmd,
        claude_stop("s1", "p1", "Tests pass.")
            .to_string()
            .as_bytes(),
    );
    assert_eq!(
        out,
        Some(
            serde_json::json!({"decision": "block", "reason": "Run the tests and show the output."})
        )
    );
    assert!(!w.state().join("history").exists());
}

#[test]
fn a_history_that_cannot_be_written_costs_no_stop() {
    let w = World::new();
    write_rules(&w, BLOCK_RULE);
    let runner = judge(&w, r#"{"unverified": true}"#);
    fs::create_dir_all(w.state()).unwrap();
    fs::write(w.state().join("history"), "not a folder").unwrap();
    let (code, out, _) = claude(&w, &runner, &claude_stop("s1", "p1", "Tests pass."));
    assert_eq!(code, Some(0));
    assert_eq!(out.unwrap()["decision"], "block");
    assert!(w.log().contains("history record not kept"), "{}", w.log());
    let listed = cli(&w, &["history"]);
    assert_eq!(listed.code, Some(1));
    assert!(listed.stderr.contains("history"), "{}", listed.stderr);
}

#[test]
fn a_block_rule_with_no_verdict_within_its_wait_lets_the_stop_through_and_says_so() {
    let w = World::new();
    write_rules(
        &w,
        &BLOCK_RULE.replace("action = \"block\"", "action = \"block\"\nwait_ms = 300"),
    );
    // A runner that cannot answer within the wait: the hook stops it at its deadline.
    let never = w.runner("never", "sleep 60");
    let (code, out, _) = claude(&w, &never, &claude_stop("s1", "p1", "Tests pass."));
    assert_eq!(code, Some(0));
    let out = out.expect("a message");
    let_through_said(
        &w,
        &out,
        "rule tests gave no verdict within the wait (0.3 s), so the stop went through unjudged",
        "why=\"wait\"",
    );
    assert_eq!(w.jobs_left().len(), 1, "the job waits for a daemon");
}

/// A link in place of the history folder: the stop is judged as ever, and nothing is
/// written through the link.
#[test]
fn a_linked_history_folder_is_never_written_through() {
    let w = World::new();
    write_rules(&w, BLOCK_RULE);
    let runner = judge(&w, r#"{"unverified": true}"#);
    let elsewhere = w.path("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::create_dir_all(w.state()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, w.state().join("history")).unwrap();
    let (code, out, _) = claude(&w, &runner, &claude_stop("s1", "p1", "Tests pass."));
    assert_eq!(code, Some(0));
    assert_eq!(out.unwrap()["decision"], "block");
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(w.log().contains("history record not kept"), "{}", w.log());
}

/// A reply past 100,000 characters is judged on its head and tail; its case keeps it
/// whole, so `eval --rules` judges the very prompt the stop did.
#[test]
fn a_long_reply_is_kept_whole_for_its_case() {
    let w = World::new();
    write_rules(&w, BLOCK_RULE);
    let runner = judge(&w, r#"{"unverified": true}"#);
    let reply = format!("{}All tests pass.", "word ".repeat(30_000));
    let (_, out, _) = claude(&w, &runner, &claude_stop("s1", "p1", &reply));
    assert_eq!(out.unwrap()["decision"], "block");
    let record = history_json(&w, &[])[0]["record"].to_string();
    cli(&w, &["mark", &record, "right"]).assert_exit(0, "");
    let cases = cli(&w, &["history", "--cases"]);
    let case: Value = serde_json::from_str(cases.stdout.trim()).unwrap();
    assert_eq!(case["reply"].as_str().map(str::len), Some(reply.len()));
}
