//! Claim 7: the codex model comes from the login's catalog, at start and on SIGHUP only; and
//! a table none of whose runners is installed is named at start.

use super::*;
use std::fs;
use std::time::{Duration, Instant};

// 7. The codex model comes from the login's catalog, at start and on SIGHUP only.

/// Replaces the lane's codex with a wrapper that logs each call's arguments.
fn counting_codex(lane: &Lane) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let real = install::clis().codex.canonicalize().expect("resolve codex");
    let calls = lane.root.join("codex-calls.log");
    let wrapper = lane.bin.join("codex");
    let _ = fs::remove_file(&wrapper);
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
        calls.display(),
        real.display()
    );
    fs::write(&wrapper, script).expect("write codex wrapper");
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).expect("chmod codex wrapper");
    calls
}

fn catalog_calls(calls: &std::path::Path) -> usize {
    fs::read_to_string(calls)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("debug models"))
        .count()
}

#[test]
fn codex_model_comes_from_the_catalog_at_start_and_on_sighup() {
    let _s = serial();
    let mut lane = Lane::new(&[Cli::Codex], StandIn::text(YES));
    let bundled = bundled_catalog(&lane);
    let calls = counting_codex(&lane);
    lane.codex_catalog(&catalog_of(&bundled, &["gpt-5.5", "gpt-5.6-luna"]));
    let argv = codex_via_standin(pinned::DEFAULT_CODEX, lane.standin.port);
    lane.override_runners(&[("codex", argv)]);
    lane.start_daemon();
    for stem in ["a", "b"] {
        lane.job(stem, &default_job("Is the sky blue?"));
        assert_hit(&lane.wait_verdict(stem), "codex");
    }
    let models: Vec<String> = lane
        .standin
        .model_requests()
        .iter()
        .map(codex_model)
        .collect();
    assert_eq!(
        models,
        ["gpt-5.5", "gpt-5.5"],
        "the catalog's first model, for every job"
    );
    assert_eq!(
        catalog_calls(&calls),
        1,
        "the catalog is read once at start, not per job"
    );
    let status = lane.status_json();
    let entry = &status["codex_models"][0];
    assert_eq!(entry["model"], "gpt-5.5", "status: {status}");
    assert_eq!(entry["replaced"], "gpt-5.3-codex-spark", "status: {status}");
    let text = String::from_utf8_lossy(&lane.run(&["status"]).stdout).into_owned();
    assert!(
        text.contains("model gpt-5.5 (not gpt-5.3-codex-spark"),
        "status:\n{text}"
    );
    assert!(
        lane.log().contains("gpt-5.5"),
        "judge.log does not name the model used"
    );

    lane.codex_catalog(&catalog_of(&bundled, &["gpt-5.6-luna", "gpt-5.5"]));
    lane.sighup();
    let mut now = None;
    support::wait_until(Instant::now() + Duration::from_secs(60), || {
        now = status_codex_model(&lane);
        now.as_deref() == Some("gpt-5.6-luna")
    });
    assert_eq!(
        now.as_deref(),
        Some("gpt-5.6-luna"),
        "SIGHUP did not re-read the catalog"
    );
    assert_eq!(
        catalog_calls(&calls),
        2,
        "one more catalog read for the SIGHUP"
    );
    lane.job("c", &default_job("Is the grass green?"));
    assert_hit(&lane.wait_verdict("c"), "codex");
    let last = lane.standin.model_requests().last().map(codex_model);
    assert_eq!(last.as_deref(), Some("gpt-5.6-luna"));

    let doctor = lane.doctor();
    let text = String::from_utf8_lossy(&doctor.stdout).into_owned()
        + &String::from_utf8_lossy(&doctor.stderr);
    assert!(
        text.contains(
            "gpt-5.3-codex-spark is not in this login's codex catalog; the daemon uses gpt-5.6-luna"
        ),
        "doctor:\n{text}"
    );
    lane.stop_daemon();
}

// Also: a table none of whose runners is installed is named at start (the default
// table), or when its first job comes (the investigate table, which no rule uses here).

#[test]
fn daemon_warns_at_start_when_no_runner_of_a_table_is_installed() {
    let _s = serial();
    let mut lane = Lane::new(&[], StandIn::text(YES));
    lane.start_daemon();
    let mut log = String::new();
    support::wait_until(Instant::now() + Duration::from_secs(60), || {
        log = lane.log();
        log.contains("ready: queue a job")
    });
    assert!(
        log.contains("default table: none of its runners ("),
        "judge.log:\n{log}"
    );
    assert!(
        !log.contains("investigate table: none of its runners"),
        "no rule uses investigate mode: judge.log:\n{log}"
    );
    lane.job(
        "inv",
        &serde_json::json!({"prompt": "p", "mode": "investigate"}),
    );
    support::wait_until(Instant::now() + Duration::from_secs(60), || {
        log = lane.log();
        log.contains("investigate table: none of its runners (")
    });
    assert!(
        log.contains("(an investigate job came in)"),
        "judge.log:\n{log}"
    );
    assert!(
        log.contains("is installed on the daemon's PATH and logged in, so its jobs end unchecked"),
        "judge.log:\n{log}"
    );
    lane.stop_daemon();
}
