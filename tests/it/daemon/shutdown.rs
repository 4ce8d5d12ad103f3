//! Stopping: SIGTERM drains within the grace, then stops runners as their timeout
//! does; a second signal stops at once; SIGHUP reloads; a stuck job is dropped at exit.

use super::*;
use crate::support::*;

use std::fs;
use std::time::Duration;

use serde_json::json;

#[test]
fn sigterm_lets_a_running_job_finish_within_the_grace() {
    let w = World::new();
    w.config("shutdown_grace_seconds = 30");
    let runner = w.runner("slowish", &held("touch $W/started", r#"{"ok": true}"#));
    w.job("j", &json!({"prompt": "p"}));
    let mut d = w.start(&[runner]);
    wait_for("runner started", NO_HANG, || w.path("started").exists());
    d.signal("TERM");
    w.wait_log("draining");
    w.collect_output();
    let status = d.wait_exit(NO_HANG);
    assert!(status.success(), "{status:?}");
    assert_eq!(w.verdict("j")["outcome"], "hit");
    assert!(w.log().contains("daemon stop"));
}

#[test]
fn sigterm_past_the_grace_leaves_the_job_queued_for_the_next_daemon() {
    let w = World::new();
    w.config("shutdown_grace_seconds = 0.2");
    let runner = blocking_runner(&w);
    w.job("j", &json!({"prompt": "p"}));
    let mut d = w.start(std::slice::from_ref(&runner));
    wait_for("runner started", NO_HANG, || {
        pids_in(&w.read("grandchild.pids")).len() == 1
    });
    d.signal("TERM");
    let status = d.wait_exit(NO_HANG);
    assert!(status.success(), "{status:?}");
    assert_eq!(w.jobs_left(), ["j.json"]);
    assert!(w.verdicts().is_empty());
    let pids: Vec<u32> = pids_in(&w.read("runner.pids"))
        .into_iter()
        .chain(pids_in(&w.read("grandchild.pids")))
        .collect();
    wait_for("runners stopped", NO_HANG, || {
        pids.iter().all(|&p| !is_running(p))
    });
    fs::write(w.path("answer"), "").unwrap();
    let _d = w.start(&[runner]);
    wait_for("judged by the next daemon", NO_HANG, || {
        w.verdicts().len() == 1
    });
    assert!(
        w.log().contains("interruptions=0"),
        "a drain is not an interruption: {}",
        w.log()
    );
    assert!(!w.log().contains("interruptions=1"));
}

/// Shutdown past the grace stops a runner the one way a timeout does: SIGTERM first
/// (its trap runs), SIGKILL only after `kill_grace_seconds`.
#[test]
fn shutdown_stops_a_runner_with_sigterm_first_like_its_timeout() {
    let w = World::new();
    w.config("shutdown_grace_seconds = 0.2\nkill_grace_seconds = 30");
    let runner = w.runner(
        "trapper",
        "trap 'echo term > $W/got-term; exit 3' TERM\n\
         hostpid >> $W/runner.pids\n\
         while :; do sleep 0.05; done",
    );
    let (mut d, _) = start_with_running_job(&w, runner);
    d.signal("TERM");
    let status = d.wait_exit(NO_HANG);
    assert!(status.success(), "{status:?}");
    assert_eq!(w.read("got-term").trim(), "term", "the runner saw SIGTERM");
    assert_eq!(w.jobs_left(), ["j.json"], "left queued");
    assert!(w.verdicts().is_empty());
}

#[test]
fn a_second_signal_stops_at_once() {
    let w = World::new();
    w.config("shutdown_grace_seconds = 3600");
    let runner = blocking_runner(&w);
    let (mut d, pid) = start_with_running_job(&w, runner);
    d.signal("TERM");
    w.wait_log("draining");
    d.signal("INT");
    let status = d.wait_exit(NO_HANG);
    assert!(status.success(), "{status:?}");
    assert_eq!(w.jobs_left(), ["j.json"], "left queued");
    wait_for("runner stopped", NO_HANG, || !is_running(pid));
}

/// A stop signal while runners are already being stopped (in their kill grace) kills
/// them at once: a runner that shrugs off SIGTERM, under an hour's kill grace, still
/// ends and the daemon exits (nextest does the same).
#[test]
fn a_stop_signal_during_the_kill_grace_kills_at_once() {
    let w = World::new();
    w.config("shutdown_grace_seconds = 0.1\nkill_grace_seconds = 3600");
    let runner = w.runner(
        "deaf",
        "trap 'echo term >> $W/got-term' TERM\n\
         hostpid >> $W/runner.pids\n\
         while :; do sleep 0.05; done",
    );
    let (mut d, pid) = start_with_running_job(&w, runner);
    d.signal("TERM");
    wait_for("the runner got SIGTERM", NO_HANG, || {
        w.read("got-term").contains("term")
    });
    d.signal("TERM");
    let status = d.wait_exit(NO_HANG);
    assert!(status.success(), "{status:?}");
    wait_for("runner killed", NO_HANG, || !is_running(pid));
    assert!(w.log().contains("killing runners now"), "{}", w.log());
    assert_eq!(w.jobs_left(), ["j.json"], "left queued");
    assert!(w.verdicts().is_empty());
}

#[test]
fn sighup_reloads_a_good_config_and_keeps_the_old_one_on_a_bad_one() {
    let w = World::new();
    let table = |name: &str| {
        let script = w.path(&format!("bin/{name}.sh"));
        fs::write(&script, answer(r#"{"ok": true}"#)).unwrap();
        format!(
            "[[runners.default]]\nname = \"{name}\"\nargv = [\"/bin/sh\", \"{}\"]\n",
            script.display()
        )
    };
    w.config(&table("first"));
    let mut cmd = w.command(&[]);
    cmd.env_remove("CATSTACK_LLM_JUDGE_RUNNERS");
    let d = w.start_with(cmd);
    w.job("a", &json!({"prompt": "p"}));
    wait_for("a judged", NO_HANG, || w.verdicts().len() == 1);
    assert_eq!(w.verdict("a")["runner"], "first");
    w.config(&table("second"));
    d.signal("HUP");
    w.wait_log("config reloaded");
    w.job("b", &json!({"prompt": "p"}));
    wait_for("b judged", NO_HANG, || w.verdicts().len() == 2);
    assert_eq!(w.verdict("b")["runner"], "second");
    w.config("wrokers = 2\n");
    d.signal("HUP");
    w.wait_log("config reload failed");
    assert!(
        w.log().contains("wrokers"),
        "the error names the key: {}",
        w.log()
    );
    w.job("c", &json!({"prompt": "p"}));
    wait_for("c judged", NO_HANG, || w.verdicts().len() == 3);
    assert_eq!(w.verdict("c")["runner"], "second");
}

/// A reload that lowers `kill_grace_seconds` while a job runs does not cut that job's
/// grace short at shutdown: the daemon waits for the grace the job got, so the runner
/// is stopped through its one kill path and the job is requeued, not interrupted.
#[test]
fn shutdown_waits_for_the_kill_grace_a_running_job_got_even_after_a_reload() {
    let w = World::new();
    // 12 s > the lowered grace (1 s) plus the daemon's 10 s stop wait.
    w.config("shutdown_grace_seconds = 0.1\nkill_grace_seconds = 12");
    let runner = w.runner(
        "stubborn",
        "trap '' TERM\nhostpid >> $W/runner.pids\nwhile :; do sleep 0.05; done",
    );
    let (mut d, _) = start_with_running_job(&w, runner);
    w.config("shutdown_grace_seconds = 0.1\nkill_grace_seconds = 1");
    d.signal("HUP");
    w.wait_log("config reloaded");
    d.signal("TERM");
    let status = d.wait_exit(NO_HANG);
    assert!(status.success(), "{status:?}");
    assert!(
        w.log().contains("job stopped by shutdown; left queued"),
        "the job was cut off instead of requeued:\n{}",
        w.log()
    );
    assert_eq!(w.jobs_left(), ["j.json"]);
}

/// SIGKILLs a stopped supervisor and its runner's group when dropped, even if the
/// test failed before they ended.
struct KillOnDrop {
    supervisor: u32,
    runner_group: u32,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        unsafe_kill(self.supervisor);
        if let Ok(group) = i32::try_from(self.runner_group) {
            // SAFETY: kill(2) with a plain process group and signal has no memory effects.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
    }
}

/// A job still running when the stop wait is over (its pooled supervisor stopped from
/// outside, so its attempt gets no report) does not keep the daemon: it exits once
/// `kill_grace_seconds` plus the 10 s stop wait are over (its slots shut down within
/// 5 s more), the runner is gone and the job stays queued. Its claim still says
/// running, so the next start counts an interruption, as after a crash.
#[test]
fn a_job_stuck_past_the_stop_wait_is_dropped_at_exit_and_stays_queued() {
    let w = World::new();
    w.config("workers = 1\nshutdown_grace_seconds = 0.1\nkill_grace_seconds = 0.2");
    let runner = w.runner(
        "slow",
        "parentpid >> $W/parents\nhostpid >> $W/runner.pids\nwhile :; do sleep 0.05; done",
    );
    let (mut d, runner) = start_with_running_job(&w, runner);
    let supervisor = pids_in(&w.read("parents"))[0];
    assert!(
        crate::support::is_daemon_helper(supervisor, d.child.id()),
        "{supervisor}"
    );
    let _cleanup = KillOnDrop {
        supervisor,
        runner_group: runner,
    };
    // Stopped only once the daemon knows the runner (the claim names its group), so
    // its stop signals reach the runner itself.
    wait_for("the claim names the runner", NO_HANG, || {
        w.read("state/claims/j.json")
            .contains(&format!("\"pgid\":{runner}"))
    });
    signal(supervisor, libc::SIGSTOP);
    let stopping = std::time::Instant::now();
    d.signal("TERM");
    let status = d.wait_exit(NO_HANG);
    let took = stopping.elapsed();
    assert!(status.success(), "{status:?}\n{}", w.log());
    assert!(
        w.log()
            .contains("runners did not stop in time; exiting anyway"),
        "{}",
        w.log()
    );
    // 0.1 + 0.2 + 10 s, then at most 5 s for the slots (15.3 s): not held up by the
    // stuck job (an upper bound with room for a loaded machine).
    assert!(took < Duration::from_secs(40), "exit took {took:?}");
    assert!(!is_running(runner), "runner {runner} outlived the daemon");
    assert_eq!(w.jobs_left(), ["j.json"], "{}", w.log());
    assert!(w.verdicts().is_empty());
}
