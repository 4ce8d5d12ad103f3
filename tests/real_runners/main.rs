//! The real-runner lane: the pinned `claude` and `codex` CLIs (installed from npm into
//! `target/real-runners/`) run by the daemon against a stand-in model API on 127.0.0.1.
//! One test per claim of issue 12; the lane's tests run one at a time so the start-up
//! and request-size figures they record are not skewed by each other.

#[path = "../it/support/mod.rs"]
mod support;

mod cleanup;
mod codex_catalog;
mod cost;
mod hooks;
mod hostile;
mod install;
mod lane;
mod login;
mod safety;
mod shipped;
mod slim;
mod standin;
mod startup;
mod user_setup;

use std::fs;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lane::{Cli, Lane, codex_via_standin};
use standin::{Reply, Request, StandIn};
use support::pinned;

static SERIAL: Mutex<()> = Mutex::new(());

/// One lane test at a time (and the CLIs installed before the first).
fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    install::clis();
    guard
}

const YES: &str = "{\"ok\": true}";
/// Instructions for a codex started by hand (the judge writes its own).
const ONE_LINE: &str =
    "You answer one question. Reply with exactly one line of JSON and nothing else.\n";
const FENCED_YES: &str = "Checked.\n```json\n{\"ok\": true}\n```";

/// `argv` as owned strings.
fn owned(argv: &[&str]) -> Vec<String> {
    argv.iter().map(|a| a.to_string()).collect()
}

/// `argv` without each `(flag, n)`: the flag and the `n` values after it.
fn without<'a>(argv: &[&'a str], drop: &[(&str, usize)]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut skip = 0;
    for a in argv {
        if skip > 0 {
            skip -= 1;
        } else if let Some((_, n)) = drop.iter().find(|(flag, _)| flag == a) {
            skip = *n;
        } else {
            out.push(*a);
        }
    }
    out
}

fn default_job(prompt: &str) -> Value {
    json!({"prompt": prompt, "hit_if_all_true": ["ok"], "timeout_seconds": 60})
}

fn investigate_job(lane: &Lane, prompt: &str) -> Value {
    json!({"prompt": prompt, "hit_if_all_true": ["ok"], "timeout_seconds": 60,
        "mode": "investigate", "cwd": lane.work})
}

/// Asserts a hit answered by `runner`, with the verdict in the failure message.
fn assert_hit(v: &Value, runner: &str) {
    assert_eq!(v["outcome"], "hit", "verdict: {v}");
    assert_eq!(v["runner"], runner, "verdict: {v}");
}

/// Asserts the answering attempt carries the tokens the stand-in reported (10 in and 5
/// out per model request) and, for claude, the cost Claude Code computed from them.
fn assert_usage(v: &Value, runner: &str, log: &str) {
    let usage = v["attempts"]
        .as_array()
        .and_then(|a| a.last())
        .map(|a| a["usage"].clone())
        .unwrap_or_default();
    record(&format!("{runner} attempt usage: {usage}"));
    let output = usage["output_tokens"].as_u64().unwrap_or(0);
    assert!(
        output >= 5 && output.is_multiple_of(5),
        "{runner} usage: {usage} in {v}"
    );
    assert!(
        usage["input_tokens"].as_u64().unwrap_or(0) >= 10,
        "{runner} usage: {usage}"
    );
    match runner {
        "claude" => assert!(usage["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{usage}"),
        _ => assert!(
            usage.get("cost_usd").is_none(),
            "codex reports no cost: {usage}"
        ),
    }
    let end = format!("runner={runner} ok=true");
    let line = log
        .lines()
        .find(|l| l.contains(" runner end ") && l.contains(&end));
    let line = line.unwrap_or_else(|| panic!("no runner end line for {runner}: {log}"));
    assert!(line.contains(&format!("output_tokens={output}")), "{line}");
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
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["name"].as_str().map(String::from))
                .collect()
        })
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

/// codex's own catalog (`codex debug models` with an empty HOME), as JSON.
fn bundled_catalog(lane: &Lane) -> Value {
    let out = lane.root.join("bundled-catalog.json");
    let mut cmd = std::process::Command::new(&install::clis().codex);
    lane.apply_env(&mut cmd);
    let mut child = cmd
        .args(["debug", "models"])
        .env("HOME", lane.root.join("empty-home"))
        .stdout(fs::File::create(&out).expect("catalog file"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run codex debug models");
    if support::wait_child(&mut child, Duration::from_secs(60)).is_none() {
        panic!("codex debug models did not finish in 60 s");
    }
    serde_json::from_str(&fs::read_to_string(&out).unwrap_or_default())
        .expect("codex catalog is JSON")
}

/// A catalog holding `slugs` (in this order) taken from codex's own catalog.
fn catalog_of(bundled: &Value, slugs: &[&str]) -> Value {
    let models = bundled["models"].as_array().expect("catalog models");
    let pick = |slug: &str| {
        models
            .iter()
            .find(|m| m["slug"] == slug)
            .cloned()
            .unwrap_or_else(|| panic!("{slug} not in codex's catalog"))
    };
    json!({"models": slugs.iter().map(|s| pick(s)).collect::<Vec<_>>()})
}

/// The control: the same codex argv started by hand in the planted folder, with the
/// lane's environment and no `GIT_DIR`, answers through the stand-in and sets off the
/// plant (so a clean run through the daemon proves the defence, not a dead plant).
fn codex_by_hand(lane: &Lane, argv: &[String]) {
    let args: Vec<String> = argv[1..]
        .iter()
        .map(|a| {
            if a == "{prompt}" {
                "Is there a README?".to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    let mut cmd = std::process::Command::new(lane.bin.join("codex"));
    lane.apply_env(&mut cmd);
    let mut child = cmd
        .args(&args)
        .current_dir(&lane.work)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start codex");
    if support::wait_child(&mut child, lane::VERDICT_DEADLINE).is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The model a codex request asked for.
fn codex_model(r: &Request) -> String {
    r.body["model"].as_str().unwrap_or_default().to_string()
}

fn describe(label: &str, reqs: &[Request]) -> usize {
    let bytes: usize = reqs.iter().map(|r| r.body_bytes).sum();
    let tokens: usize = reqs.iter().map(Request::token_estimate).sum();
    let model = reqs
        .first()
        .map(|r| r.body["model"].to_string())
        .unwrap_or_default();
    record(&format!(
        "request size, {label}: {bytes} bytes (~{tokens} tokens), {} request(s), model {model}",
        reqs.len()
    ));
    bytes
}

/// Waits (bounded) until only the daemon (and its supervisor zygote, a child running
/// the same binary) carries the lane's marker; returns the others, described.
fn leftovers_besides_daemon(lane: &Lane) -> Vec<String> {
    let daemon = lane.daemon_pid();
    let mut left = Vec::new();
    support::wait_until(Instant::now() + Duration::from_secs(60), || {
        let waiting = waiting_copy(lane);
        let ours = |pid: u32| {
            pid == daemon
                || support::is_daemon_helper(pid, daemon)
                || waiting.is_some_and(|group| process_group(pid) == Some(group))
        };
        left = lane
            .marker_processes()
            .into_iter()
            .filter(|p| !ours(*p))
            .collect();
        left.is_empty()
    });
    left.iter().map(|p| describe_process(*p)).collect()
}

/// Marker files that appeared in `probe`.
fn markers(probe: &std::path::Path) -> Vec<String> {
    fs::read_dir(probe)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The model requests one default job sends, with `argv` as the override of `cli`'s
/// runner (or the shipped tables when `None`).
fn one_default_job(cli: Cli, argv: Option<&[&str]>, catalog: Option<&Value>) -> Vec<Request> {
    let mut lane = Lane::new(&[cli], StandIn::text(YES));
    if let Some(c) = catalog {
        lane.codex_catalog(c);
    }
    match (cli, argv) {
        (Cli::Codex, Some(argv)) => {
            let argv = codex_via_standin(argv, lane.standin.port);
            lane.override_runners(&[("codex", argv)]);
        }
        (Cli::Claude, Some(argv)) => lane.override_runners(&[("claude", owned(argv))]),
        (_, None) => {}
    }
    let job = default_job("Does the reply retract an earlier claim? Reply {\"ok\": true|false}");
    let v = lane.judge_once("cost", &job);
    assert_eq!(v["outcome"], "hit", "verdict: {v}");
    lane.standin.model_requests()
}

fn status_codex_model(lane: &Lane) -> Option<String> {
    lane.status_json()["codex_models"]
        .as_array()
        .and_then(|ms| ms.first())
        .and_then(|m| m["model"].as_str())
        .map(String::from)
}

/// Text of every tool result the CLI sent back (claude `tool_result`, codex `*_output`).
fn tool_results_text(reqs: &[Request]) -> String {
    let mut out = String::new();
    for r in reqs.iter().filter(|r| r.has_tool_results()) {
        for m in r.body["messages"].as_array().into_iter().flatten() {
            for b in m["content"].as_array().into_iter().flatten() {
                if b["type"] == "tool_result" {
                    out.push_str(&b["content"].to_string());
                    out.push('\n');
                }
            }
        }
        for i in r.body["input"].as_array().into_iter().flatten() {
            if i["type"].as_str().is_some_and(|t| t.ends_with("_output")) {
                out.push_str(&i["output"].to_string());
                out.push('\n');
            }
        }
    }
    out
}

/// A shell command that creates `probe/<name>` (a marker that it ran).
fn touch(probe: &std::path::Path, name: &str) -> String {
    format!("touch {}", probe.join(name).display())
}

/// The process group of the claude the daemon keeps waiting for the next job (the last
/// `runner pre-started` line of judge.log): no leftover; shutdown stops it. A copy a job
/// took is not exempt.
fn waiting_copy(lane: &Lane) -> Option<u32> {
    let log = lane.log();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("runner pre-started"))?;
    let pgid = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pgid="))?;
    pgid.parse().ok()
}

fn process_group(pid: u32) -> Option<u32> {
    support::stat_field(pid, 2)?.parse().ok()
}

/// `pid (ppid N, exe E): cmdline`, for a failure message.
fn describe_process(pid: u32) -> String {
    let ppid = support::stat_field(pid, 1).unwrap_or_else(|| "?".into());
    let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let exe = fs::read_link(format!("/proc/{pid}/exe"))
        .map(|e| e.display().to_string())
        .unwrap_or_default();
    let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
    format!("{pid} (ppid {ppid}, exe {exe}): {cmd}")
}
