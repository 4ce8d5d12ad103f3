//! Claim 6: not logged in.

use super::*;
use std::time::{Duration, Instant};

use serde_json::Value;

// 6. Not logged in.

#[test]
fn claude_without_a_login_is_not_started_is_benched_and_doctor_says_so() {
    let _s = serial();
    let mut lane = Lane::new(&[Cli::Claude], StandIn::text(YES));
    lane.remove_env("ANTHROPIC_API_KEY");
    lane.write_config("[health]\nenabled = true");
    lane.start_daemon();
    lane.job("nokey", &default_job("Is the sky blue?"));
    let v = lane.wait_verdict("nokey");
    assert_eq!(v["outcome"], "unchecked", "verdict: {v}");
    let attempt = &v["attempts"][0];
    assert_eq!(attempt["runner"], "claude", "verdict: {v}");
    // Its login is nowhere to be seen, so it is not even started.
    let reason = attempt["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("not logged in: no claude login ("),
        "the judge's own message missing: {reason}"
    );
    let elapsed = attempt["elapsed_ms"].as_u64().unwrap_or(u64::MAX);
    record(&format!(
        "claude with no login: failed after {elapsed} ms: {reason}"
    ));
    assert!(
        lane.standin.model_requests().is_empty(),
        "claude sent a model request without a key"
    );
    let status = lane.status_json();
    assert_eq!(
        status["runners"]["claude"]["health"]["benched"], true,
        "status: {status}"
    );
    let doctor = lane.doctor();
    let text = String::from_utf8_lossy(&doctor.stdout).into_owned()
        + &String::from_utf8_lossy(&doctor.stderr);
    assert!(
        text.contains("default runner claude: not logged in"),
        "doctor:\n{text}"
    );
    lane.stop_daemon();
}

/// A `[[runners.default]]` entry of the config file: `argv` (TOML takes JSON's strings
/// and arrays as they are), `prestart = 1`, and `env` when given.
fn prestarted_entry(name: &str, argv: &[String], env: &[(&str, &str)]) -> String {
    let mut entry = format!(
        "[[runners.default]]\nname = {name:?}\nargv = {}\nprestart = 1\n",
        Value::from(argv.to_vec())
    );
    if !env.is_empty() {
        let pairs: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
        entry.push_str(&format!("env = {{ {} }}\n", pairs.join(", ")));
    }
    entry
}

/// Issue 42: a user whose claude is not logged in does not wait for a cold codex. The
/// shipped default table (claude, then codex, both `prestart = 1`) without a claude
/// key: the first job finds claude failing and benched and is answered by codex; the
/// copy that waits from then on is codex's (started with `-` as its prompt), it sends
/// the model nothing while it waits, and the next job takes it and reaches the model
/// through its stdin. No process is left after shutdown.
#[test]
fn a_benched_claude_leaves_a_prestarted_codex_that_takes_its_prompt_on_stdin() {
    let _s = serial();
    let mut lane = Lane::new(&[Cli::Claude, Cli::Codex], StandIn::text(YES));
    lane.remove_env("ANTHROPIC_API_KEY");
    let claude = owned(pinned::DEFAULT_CLAUDE);
    let codex = codex_via_standin(pinned::DEFAULT_CODEX, lane.standin.port);
    lane.write_config(&format!(
        "[health]\nenabled = true\n\n{}\n{}",
        prestarted_entry("claude", &claude, pinned::DEFAULT_CLAUDE_ENV),
        prestarted_entry("codex", &codex, &[])
    ));
    lane.start_daemon();
    lane.job("first", &default_job("Is the sky blue?"));
    let first = lane.wait_verdict("first");
    assert_hit(&first, "codex");
    assert_eq!(first["attempts"][0]["runner"], "claude", "{first}");
    let codex_waits = |log: &str| {
        log.lines()
            .any(|l| l.contains("runner pre-started") && l.contains("runner=codex"))
    };
    support::wait_until(Instant::now() + Duration::from_secs(60), || {
        codex_waits(&lane.log())
    });
    assert!(codex_waits(&lane.log()), "{}", lane.log());
    let sent_before = lane.standin.model_requests().len();
    lane.job("second", &default_job("Is the sea wet?"));
    let second = lane.wait_verdict("second");
    assert_hit(&second, "codex");
    let log = lane.log();
    let start = log
        .lines()
        .find(|l| l.contains("runner start") && l.contains("id=second"))
        .unwrap_or_default();
    assert!(
        start.contains("runner=codex") && start.contains("prestarted=true"),
        "{start}\n{log}"
    );
    // The first request after the copy waited is the job's: it sent nothing before.
    let sent = lane.standin.model_requests();
    assert!(
        sent.get(sent_before)
            .is_some_and(|r| r.body_text.contains("Is the sea wet?")),
        "the prompt reached the model through stdin, first"
    );
    assert_eq!(lane.stop_daemon(), Some(0), "{}", lane.daemon_stderr());
    assert_eq!(
        lane.wait_no_marker_processes(Duration::from_secs(60)),
        Vec::<u32>::new(),
        "a waiting codex outlived the daemon"
    );
}
