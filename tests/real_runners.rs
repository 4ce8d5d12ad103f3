//! The real-runner lane: the pinned `claude` and `codex` CLIs (installed from npm into
//! `target/real-runners/`) run by the daemon against a stand-in model API on 127.0.0.1.
//! One test per claim of issue 12; the lane's tests run one at a time so the start-up
//! and request-size figures they record are not skewed by each other.

mod support;

#[path = "real_runners/install.rs"]
mod install;
#[path = "real_runners/lane.rs"]
mod lane;
#[path = "real_runners/standin.rs"]
mod standin;

use std::fs;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lane::{Cli, Lane, codex_via_standin, shipped_argv};
use standin::{Reply, Request, StandIn};

static SERIAL: Mutex<()> = Mutex::new(());

/// One lane test at a time (and the CLIs installed before the first).
fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    install::clis();
    guard
}

const YES: &str = "{\"ok\": true}";
const FENCED_YES: &str = "Checked.\n```json\n{\"ok\": true}\n```";

fn default_job(prompt: &str) -> Value {
    json!({"prompt": prompt, "hit_if_all_true": ["ok"], "timeout": 60})
}

fn investigate_job(lane: &Lane, prompt: &str) -> Value {
    json!({"prompt": prompt, "hit_if_all_true": ["ok"], "timeout": 60,
        "mode": "investigate", "cwd": lane.work})
}

/// Asserts a hit answered by `runner`, with the verdict in the failure message.
fn assert_hit(v: &Value, runner: &str) {
    assert_eq!(v["outcome"], "hit", "verdict: {v}");
    assert_eq!(v["runner"], runner, "verdict: {v}");
}

/// Saves the stand-in's requests under target/real-runners/requests/<test>/ for reading.
fn keep_requests(test: &str, reqs: &[Request]) {
    let dir = install::lane_dir().join("requests").join(test);
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::create_dir_all(&dir);
    for (i, r) in reqs.iter().enumerate() {
        let _ = fs::write(dir.join(format!("{i:02}.txt")), r.all_text());
    }
}

/// Appends a line to target/real-runners/measurements.txt and prints it.
fn record(line: &str) {
    use std::io::Write;
    eprintln!("measured: {line}");
    let path = install::lane_dir().join("measurements.txt");
    if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(f, "{line}");
    }
}

/// Names of the tools a claude request offers.
fn claude_tools(r: &Request) -> Vec<String> {
    r.body["tools"]
        .as_array()
        .map(|ts| ts.iter().filter_map(|t| t["name"].as_str().map(String::from)).collect())
        .unwrap_or_default()
}

fn claude_system(r: &Request) -> String {
    match &r.body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn first_model_request(lane: &Lane) -> Request {
    lane.standin
        .model_requests()
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no model request reached the stand-in\n{}", lane.log()))
}

// 1. Every shipped argv parses on the pinned CLIs and yields the right verdict.

#[test]
fn shipped_claude_argv_answers_default_and_investigate_jobs() {
    let _s = serial();
    for (stem, answer) in [("line", YES), ("fenced", FENCED_YES)] {
        let mut lane = Lane::new(&[Cli::Claude], StandIn::text(answer));
        lane.start_daemon();
        lane.job(stem, &default_job("Is the sky blue?"));
        let v = lane.wait_verdict(stem);
        assert_hit(&v, "claude");
        let req = first_model_request(&lane);
        keep_requests(&format!("claude-default-{stem}"), &lane.standin.requests());
        let tools = claude_tools(&req);
        assert!(
            tools.iter().all(|t| t == "DeferredToolPlaceholder"),
            "default claude job offered tools {tools:?}"
        );
        assert!(
            claude_system(&req).trim_end().ends_with("Reply with exactly one line of JSON and nothing else."),
            "shipped --system-prompt missing: {}",
            claude_system(&req)
        );
        lane.stop_daemon();
    }
    // investigate: codex (first in the table) is not installed, claude answers.
    let mut lane = Lane::new(&[Cli::Claude], StandIn::text(FENCED_YES));
    lane.start_daemon();
    let job = investigate_job(&lane, "Does work/ hold a README?");
    lane.job("inv", &job);
    let v = lane.wait_verdict("inv");
    assert_hit(&v, "claude");
    assert_eq!(v["attempts"][0]["runner"], "codex", "verdict: {v}");
    assert_eq!(v["attempts"][0]["reason"], "not installed", "verdict: {v}");
    lane.stop_daemon();
}
