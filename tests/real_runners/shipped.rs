//! Claim 1: every shipped argv parses on the pinned CLIs and yields the right verdict.

use super::*;
use std::fs;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

// 1. Every shipped argv parses on the pinned CLIs and yields the right verdict.

#[test]
fn shipped_claude_argv_answers_default_and_investigate_jobs() {
    let _s = serial();
    for (stem, answer) in [("line", YES), ("fenced", FENCED_YES)] {
        let mut lane = Lane::new(&[Cli::Claude], StandIn::text(answer));
        let v = lane.judge_once(stem, &default_job("Is the sky blue?"));
        assert_hit(&v, "claude");
        assert_usage(&v, "claude", &lane.log());
        let req = first_model_request(&lane);
        keep_requests(&format!("claude-default-{stem}"), &lane.standin.requests());
        let tools = claude_tools(&req);
        assert!(
            tools.iter().all(|t| t == "DeferredToolPlaceholder"),
            "default claude job offered tools {tools:?}"
        );
        assert!(
            claude_system(&req)
                .trim_end()
                .ends_with("Reply with exactly one line of JSON and nothing else."),
            "shipped --system-prompt missing: {}",
            claude_system(&req)
        );
    }
    // investigate: codex (first in the table) is not installed, claude answers.
    let mut lane = Lane::new(&[Cli::Claude], StandIn::text(FENCED_YES));
    let job = investigate_job(&lane, "Does work/ hold a README?");
    let v = lane.judge_once("inv", &job);
    assert_hit(&v, "claude");
    assert_usage(&v, "claude", &lane.log());
    assert_eq!(v["attempts"][0]["runner"], "codex", "verdict: {v}");
    assert_eq!(v["attempts"][0]["reason"], "not installed", "verdict: {v}");
}

/// `eval` runs the shipped claude for real: both cases judged right, and the report sums
/// the tokens and the cost Claude Code computed from the stand-in's usage.
#[test]
fn eval_runs_the_shipped_claude_and_sums_its_usage() {
    let _s = serial();
    let lane = Lane::new(&[Cli::Claude], StandIn::text(YES));
    let cases = lane.root.join("cases.jsonl");
    let lines = [
        json!({"id": "sky", "prompt": "Is the sky blue?", "hit_if_all_true": ["ok"], "expect": "hit"}),
        json!({"id": "sea", "prompt": "Is the sea wet?", "hit_if_all_true": ["missing"], "expect": "clean"}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    fs::write(&cases, text.join("\n")).expect("cases");
    let path = cases.to_string_lossy().into_owned();
    let out = lane.run(&[
        "eval",
        &path,
        "--runner",
        "claude",
        "--json",
        "--min-accuracy",
        "1",
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    record(&format!("eval of the shipped claude: {report}"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = &report["runners"][0];
    assert_eq!(
        (row["runner"].as_str(), row["correct"].as_u64()),
        (Some("claude"), Some(2)),
        "{report}"
    );
    assert!(
        row["tokens"]["output"].as_u64().unwrap_or(0) >= 10,
        "{report}"
    );
    assert!(row["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{report}");
}

/// The shipped default claude is pre-started (`prestart = 1`): the daemon keeps the real
/// CLI waiting in a fresh folder, a job takes it and gets its answer and usage, a fresh
/// one replaces it, and shutdown leaves no process. Records how long the pre-started
/// attempt took next to one spawned with its job (`run`), for the measurements file.
#[test]
fn shipped_claude_is_prestarted_and_answers_on_its_stdin() {
    let _s = serial();
    let mut lane = Lane::new(&[Cli::Claude], StandIn::text(YES));
    lane.start_daemon();
    support::wait_until(Instant::now() + Duration::from_secs(60), || {
        lane.log().contains("runner pre-started")
    });
    assert!(lane.log().contains("runner pre-started"), "{}", lane.log());
    assert!(
        lane.standin.model_requests().is_empty(),
        "a waiting claude sent a model request before its job"
    );
    lane.job("pre", &default_job("Is the sky blue?"));
    let v = lane.wait_verdict("pre");
    assert_hit(&v, "claude");
    assert_usage(&v, "claude", &lane.log());
    let log = lane.log();
    let start = log
        .lines()
        .find(|l| l.contains("runner start") && l.contains("id=pre"))
        .unwrap_or_default();
    assert!(start.contains("prestarted=true"), "{start}\n{log}");
    let req = first_model_request(&lane);
    assert!(
        req.body_text.contains("Is the sky blue?"),
        "the prompt reached the model through stdin"
    );
    support::wait_until(Instant::now() + Duration::from_secs(60), || {
        lane.log().matches("runner pre-started").count() >= 2
    });
    assert_eq!(leftovers_besides_daemon(&lane), Vec::<String>::new());
    assert_eq!(lane.stop_daemon(), Some(0), "{}", lane.daemon_stderr());
    assert_eq!(
        lane.wait_no_marker_processes(Duration::from_secs(60)),
        Vec::<u32>::new(),
        "the waiting claude outlived the daemon"
    );
    lane.job("spawned", &default_job("Is the sea wet?"));
    let path = lane.state.join("jobs/spawned.json");
    let out = lane.run(&["run", &path.to_string_lossy()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spawned = lane.wait_verdict("spawned");
    record(&format!(
        "shipped claude attempt elapsed_ms: pre-started {}, spawned with its job {} (one run each; bench/startup.py measures this properly)",
        v["attempts"][0]["elapsed_ms"], spawned["attempts"][0]["elapsed_ms"]
    ));
}

#[test]
fn shipped_codex_argv_answers_default_and_investigate_jobs() {
    let _s = serial();
    for (table, stem, answer) in [
        (pinned::DEFAULT_CODEX, "line", YES),
        (pinned::DEFAULT_CODEX, "fenced", FENCED_YES),
        (pinned::INVESTIGATE_CODEX, "inv", FENCED_YES),
    ] {
        let mut lane = Lane::new(&[Cli::Codex], StandIn::text(answer));
        let argv = codex_via_standin(table, lane.standin.port);
        lane.override_runners(&[("codex", argv)]);
        let investigate = table == pinned::INVESTIGATE_CODEX;
        let job = if investigate {
            investigate_job(&lane, "Does work/ hold a README?")
        } else {
            default_job("Is the sky blue?")
        };
        lane.start_daemon();
        lane.job(stem, &job);
        let v = lane.wait_verdict(stem);
        keep_requests(&format!("codex-{stem}"), &lane.standin.requests());
        assert_hit(&v, "codex");
        assert_usage(&v, "codex", &lane.log());
        // The table with `-m` runs the model the running daemon's `status` names.
        if !investigate {
            let req = first_model_request(&lane);
            assert_eq!(Some(codex_model(&req)), status_codex_model(&lane));
        }
        lane.stop_daemon();
    }
}
