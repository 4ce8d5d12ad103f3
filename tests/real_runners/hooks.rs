//! Hook mode (issue 48) with its real clients: the pinned claude and codex, each in a
//! session against the stand-in, with `llm-judge hooks install` run into the lane's
//! HOME (codex's trust recorded by `--trust`, so its hooks run without any bypass
//! flag). A reply that breaks a block rule is blocked (the rule's notice reaches the
//! session's next model request), and a notice rule's notice reaches the next prompt's
//! request once. The judge itself is a fake runner: the harness is what is under test.

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::lane::{Cli, Lane};
use super::standin::{Request, StandIn};
use super::support::{NO_HANG, wait_child, wait_for};
use super::{record, serial};

/// A block rule and a notice rule (those of `tests/it/hooks.rs`).
const RULES: &str = include_str!("../fixtures/hooks/block-and-notice.toml");

/// What the agent says first; the judge finds both rules broken in it.
const FIRST: &str = "All tests pass.";
/// What it says after the block.
const AFTER: &str = "OK, I ran them: 3 passed.";
const BLOCK_NOTICE: &str = "Run the tests and show the output.";
const NOTICE: &str = "Try a workaround first.";

/// A lane whose daemon judges with a fake runner (a hit for `FIRST`, clean otherwise),
/// the rules in the lane's config folder, and the state folder and config named in the
/// environment the CLIs pass on to their hooks.
fn hook_lane(cli: Cli, standin: StandIn) -> Lane {
    let mut lane = Lane::new(&[cli], standin);
    let rules = lane.home.join(".config/llm-judge/rules.toml");
    fs::create_dir_all(rules.parent().unwrap()).unwrap();
    fs::write(&rules, RULES).unwrap();
    let judge = lane.root.join("judge.sh");
    fs::write(
        &judge,
        format!(
            "case \"$1\" in *\"{FIRST}\"*) echo '{{\"unverified\": true, \"gave_up\": true}}';; \
             *) echo '{{\"unverified\": false, \"gave_up\": false}}';; esac\n"
        ),
    )
    .unwrap();
    let (state, config) = (
        lane.state.display().to_string(),
        lane.config.display().to_string(),
    );
    lane.set_env("CATSTACK_LLM_JUDGE_STATE_DIR", &state);
    lane.set_env("LLM_JUDGE_CONFIG", &config);
    lane.override_runners(&[(
        "fake",
        vec![
            "/bin/sh".into(),
            judge.display().to_string(),
            "{prompt}".into(),
        ],
    )]);
    lane
}

/// `llm-judge hooks install ARGS` in the lane; its stdout.
fn install(lane: &Lane, args: &[&str]) -> String {
    let mut all = vec!["hooks", "install"];
    all.extend(args);
    let out = lane.run(&all);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs a CLI of the lane with `args` in the lane's work folder, in a process group of
/// its own (a session that overruns is killed with its hooks); its stdout.
fn session(lane: &Lane, program: &str, args: &[String]) -> String {
    let out = lane
        .root
        .join(format!("session-{}.out", lane.standin.requests().len()));
    let mut cmd = Command::new(lane.bin.join(program));
    lane.apply_env(&mut cmd);
    let mut child = cmd
        .args(args)
        .current_dir(&lane.work)
        .stdin(std::process::Stdio::null())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start the CLI");
    let status = wait_child(&mut child, Duration::from_secs(120));
    if status.is_none() {
        // SAFETY: kill(2) of a process group has no memory effects.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    }
    let status = status.expect("the session ended within 120 s");
    assert!(status.success(), "{program} {args:?}: {status:?}");
    fs::read_to_string(&out).unwrap_or_default()
}

/// The model requests, each as (its body text, how often `needle` is in it).
fn counts(requests: &[Request], needle: &str) -> Vec<usize> {
    requests
        .iter()
        .map(|r| r.body_text.matches(needle).count())
        .collect()
}

/// Waits (bounded; failing past it) until no job is queued: the notice rule's
/// verdicts are written.
fn judged(lane: &Lane) {
    let jobs = lane.state.join("jobs");
    wait_for("the notice rule's verdicts", NO_HANG, || {
        fs::read_dir(&jobs).map(|d| d.count()).unwrap_or(0) == 0
    });
}

/// The notice rule's hit reaches the session's next prompt (`resume` runs one and
/// returns its model requests) once, and the one after that only as history.
fn assert_notice_once(resume: impl Fn(&str) -> Vec<Request>) {
    let next = resume("Next task");
    assert!(
        counts(&next, NOTICE).contains(&1),
        "{:?}",
        counts(&next, NOTICE)
    );
    let third = resume("Third task");
    assert!(
        counts(&third, NOTICE).iter().all(|&n| n <= 1),
        "{:?}",
        counts(&third, NOTICE)
    );
}

#[test]
fn a_claude_session_is_blocked_by_a_block_rule_and_told_a_notice_once() {
    let _s = serial();
    let standin = StandIn::by_content(
        &[
            ("Stop hook feedback", AFTER),
            ("Next task", "Noted."),
            ("Third task", "Done."),
        ],
        FIRST,
    );
    let mut lane = hook_lane(Cli::Claude, standin);
    let said = install(&lane, &["claude"]);
    assert!(said.contains("claude hooks: added Stop"), "{said}");
    lane.start_daemon();
    let started = Instant::now();
    let out = session(
        &lane,
        "claude",
        &[
            "-p".into(),
            "--output-format".into(),
            "json".into(),
            "Fix the bug".into(),
        ],
    );
    let result: Value = serde_json::from_str(out.trim()).expect("claude's JSON result");
    record(&format!(
        "claude session with a block: {} ms",
        started.elapsed().as_millis()
    ));
    assert_eq!(
        result["result"], AFTER,
        "the session went on after the block: {result}"
    );
    let requests = lane.standin.model_requests();
    let feedback = counts(&requests, &format!("Stop hook feedback:\\n{BLOCK_NOTICE}"));
    assert_eq!(
        feedback.iter().filter(|&&n| n > 0).count(),
        1,
        "{feedback:?}"
    );
    // The notice rule's hit reaches the next prompt of the session, once.
    judged(&lane);
    let sid = result["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    let resume = |prompt: &str| {
        let before = lane.standin.model_requests().len();
        session(
            &lane,
            "claude",
            &["-p".into(), "--resume".into(), sid.clone(), prompt.into()],
        );
        lane.standin.model_requests()[before..].to_vec()
    };
    assert_notice_once(resume);
    assert_eq!(lane.stop_daemon(), Some(0), "{}", lane.daemon_stderr());
}

#[test]
fn a_codex_session_is_blocked_by_a_block_rule_and_told_a_notice_once() {
    let _s = serial();
    let standin = StandIn::by_content(
        &[
            ("<hook_prompt", AFTER),
            ("Next task", "Noted."),
            ("Third task", "Done."),
        ],
        FIRST,
    );
    let mut lane = hook_lane(Cli::Codex, standin);
    let said = install(&lane, &["codex", "--trust"]);
    assert!(
        said.contains("codex hooks: added Stop") && said.contains("trusted_hash"),
        "{said}"
    );
    lane.start_daemon();
    let base = format!(
        "openai_base_url=\"http://127.0.0.1:{}/v1\"",
        lane.standin.port
    );
    let codex = |rest: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["exec", "--json", "--skip-git-repo-check", "-c", &base]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(rest.iter().map(|s| s.to_string()));
        args
    };
    let started = Instant::now();
    let events = session(&lane, "codex", &codex(&["Fix the bug"]));
    record(&format!(
        "codex session with a block: {} ms",
        started.elapsed().as_millis()
    ));
    let requests = lane.standin.model_requests();
    let blocked = counts(&requests, BLOCK_NOTICE);
    assert!(
        requests
            .iter()
            .any(|r| r.body_text.contains("<hook_prompt") && r.body_text.contains(BLOCK_NOTICE)),
        "no request after a block: {blocked:?}"
    );
    assert!(
        events.contains(AFTER),
        "the session went on after the block: {events}"
    );
    let thread = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|e| e["thread_id"].as_str().map(String::from))
        .expect("codex's thread id");
    judged(&lane);
    let resume = |prompt: &str| {
        let before = lane.standin.model_requests().len();
        session(&lane, "codex", &codex(&["resume", &thread, prompt]));
        lane.standin.model_requests()[before..].to_vec()
    };
    assert_notice_once(resume);
    assert_eq!(lane.stop_daemon(), Some(0), "{}", lane.daemon_stderr());
}
