//! Claim 5: no prompt kept in HOME, no process left, a stream that never ends is killed.

use super::*;
use std::time::Duration;

use serde_json::json;

// 5. No prompt kept in HOME, no process left, a stream that never ends is killed.

#[test]
fn no_prompt_in_home_and_no_process_left_after_real_jobs() {
    let _s = serial();
    for cli in [Cli::Claude, Cli::Codex] {
        let mut lane = Lane::new(&[cli], StandIn::text(YES));
        let canary = format!("PROMPT-CANARY-{}", std::process::id());
        if cli == Cli::Codex {
            let default = codex_via_standin(pinned::DEFAULT_CODEX, lane.standin.port);
            lane.override_runners(&[("codex", default)]);
        }
        lane.start_daemon();
        lane.job("def", &default_job(&format!("Is {canary} a colour?")));
        let name = if cli == Cli::Claude {
            "claude"
        } else {
            "codex"
        };
        assert_hit(&lane.wait_verdict("def"), name);
        assert_eq!(
            leftovers_besides_daemon(&lane),
            Vec::<String>::new(),
            "{name}: processes left after a default job"
        );
        if cli == Cli::Claude {
            let inv = investigate_job(&lane, &format!("Does {canary} appear in work/?"));
            lane.job("inv", &inv);
            assert_hit(&lane.wait_verdict("inv"), name);
            assert_eq!(
                leftovers_besides_daemon(&lane),
                Vec::<String>::new(),
                "{name}: processes left after an investigate job"
            );
        }
        assert_eq!(
            lane.stop_daemon(),
            Some(0),
            "daemon exit: {}",
            lane.daemon_stderr()
        );
        assert_eq!(
            lane.wait_no_marker_processes(Duration::from_secs(60)),
            Vec::<u32>::new()
        );
        let kept = Lane::files_containing(&lane.home, &canary);
        assert_eq!(
            kept,
            Vec::<std::path::PathBuf>::new(),
            "{name} stored the prompt in HOME"
        );
        assert!(
            lane.standin
                .model_requests()
                .iter()
                .any(|r| r.body_text.contains(&canary)),
            "{name}: the prompt reached the stand-in"
        );
    }
}

#[test]
fn a_stream_that_never_ends_is_killed_within_timeout_plus_grace() {
    let _s = serial();
    for cli in [Cli::Claude, Cli::Codex] {
        let mut lane = Lane::new(&[cli], StandIn::start(Reply::Hang, YES));
        lane.write_config("kill_grace_seconds = 2");
        let name = if cli == Cli::Claude {
            "claude"
        } else {
            "codex"
        };
        if cli == Cli::Codex {
            let default = codex_via_standin(pinned::DEFAULT_CODEX, lane.standin.port);
            lane.override_runners(&[("codex", default)]);
        }
        lane.start_daemon();
        let job =
            json!({"prompt": "Is the sky blue?", "hit_if_all_true": ["ok"], "timeout_seconds": 3});
        lane.job("hang", &job);
        let v = lane.wait_verdict("hang");
        assert_eq!(v["outcome"], "unchecked", "verdict: {v}");
        let attempt = &v["attempts"][0];
        assert_eq!(attempt["runner"], name, "verdict: {v}");
        let reason = attempt["reason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("timed out after 3s"), "reason: {reason}");
        let elapsed = attempt["elapsed_ms"].as_u64().unwrap_or(u64::MAX);
        // Bound, not speed: the timeout, the grace, and wide slack for a loaded 2-core
        // machine (the stream itself would never end).
        assert!(
            elapsed < (3 + 2 + 15) * 1000,
            "{name} attempt took {elapsed} ms"
        );
        record(&format!(
            "stalled stream, {name}: attempt ended after {elapsed} ms (timeout 3 s, grace 2 s)"
        ));
        assert!(
            !lane.standin.model_requests().is_empty(),
            "{name} never reached the stand-in"
        );
        assert_eq!(
            leftovers_besides_daemon(&lane),
            Vec::<String>::new(),
            "{name}: processes left after the kill"
        );
        lane.stop_daemon();
    }
}
