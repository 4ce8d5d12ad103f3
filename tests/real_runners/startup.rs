//! Each CLI's start-up, spawn to first model request (what a user waits for).

use super::*;
use std::time::{Duration, Instant};

use serde_json::json;

// Also: each CLI's start-up, spawn to first model request (what a user waits for).

/// Runs `argv` (prompt filled in) directly in `lane`'s env; returns (to first model
/// request, to exit).
fn time_one_start(lane: &Lane, argv: &[String]) -> (Duration, Duration) {
    let argv: Vec<String> = argv
        .iter()
        .map(|a| a.replace("{prompt}", "Is the sky blue?"))
        .collect();
    let before = lane.standin.model_requests().len();
    let cwd = tempfile::tempdir_in(&lane.tmp).expect("start-up cwd");
    // An argv without the prompt (the shipped claude) reads it on stdin, written at once.
    let stdin_prompt = (!argv.iter().any(|a| a.contains("Is the sky blue?"))).then(
        || json!({"type": "user", "message": {"role": "user", "content": "Is the sky blue?"}}),
    );
    let started = Instant::now();
    let mut cmd = std::process::Command::new(lane.bin.join(&argv[0]));
    lane.apply_env(&mut cmd);
    let stdin = match stdin_prompt {
        Some(_) => std::process::Stdio::piped(),
        None => std::process::Stdio::null(),
    };
    let mut child = cmd
        .args(&argv[1..])
        .current_dir(cwd.path())
        .stdin(stdin)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start CLI");
    if let (Some(message), Some(mut pipe)) = (stdin_prompt, child.stdin.take()) {
        use std::io::Write;
        writeln!(pipe, "{message}").expect("write the prompt");
    }
    if support::wait_child(&mut child, Duration::from_secs(60)).is_none() {
        panic!("{} did not finish in 60 s", argv[0]);
    }
    let total = started.elapsed();
    let first = lane
        .standin
        .model_requests()
        .get(before)
        .map(|r| r.at - started);
    (
        first.unwrap_or_else(|| panic!("{} sent no model request", argv[0])),
        total,
    )
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
fn start_up_of_each_cli_spawn_to_first_request() {
    let _s = serial();
    let lane = Lane::new(&[Cli::Claude, Cli::Codex], StandIn::text(YES));
    let claude = owned(pinned::DEFAULT_CLAUDE);
    let codex = codex_via_standin(pinned::DEFAULT_CODEX, lane.standin.port);
    let codex = lane.as_judge_starts(&codex, ONE_LINE);
    for (name, argv) in [("claude", claude), ("codex", codex)] {
        let runs: Vec<(Duration, Duration)> =
            (0..5).map(|_| time_one_start(&lane, &argv)).collect();
        let first = median(runs.iter().map(|r| r.0).collect());
        let total = median(runs.iter().map(|r| r.1).collect());
        record(&format!(
            "start-up, {name} (shipped default argv, 5 runs): spawn to first model request median {} ms, spawn to exit median {} ms",
            first.as_millis(),
            total.as_millis()
        ));
    }
    assert_eq!(
        lane.wait_no_marker_processes(Duration::from_secs(60)),
        Vec::<u32>::new()
    );
}
