//! Integration tests of `llm-judge daemon` (docs/reference.md, "Guarantees"): the real binary on a
//! temp state folder with fake runners. Every wait has a deadline; nothing sleeps to
//! synchronise; every daemon is killed and reaped when its test ends.

use crate::support::*;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

#[test]
fn jobs_present_before_start_and_arriving_after_are_judged() {
    let w = World::new();
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    for i in 0..3 {
        w.job(
            &format!("pre{i}"),
            &json!({"prompt": format!("p{i}"), "transcript": "T", "hit_if_all_true": ["ok"]}),
        );
    }
    let _d = w.start(&[fake]);
    wait_for("pre jobs judged", NO_HANG, || w.verdicts().len() == 3);
    for i in 0..3 {
        w.job(
            &format!("post{i}"),
            &json!({"prompt": format!("q{i}"), "transcript": "T"}),
        );
    }
    wait_for("post jobs judged", NO_HANG, || w.verdicts().len() == 6);
    assert!(w.jobs_left().is_empty());
    assert_eq!(w.verdict("pre0")["outcome"], "hit");
    assert_eq!(w.verdict("post2")["runner"], "fake");
    assert!(w.log().contains("daemon start"), "{}", w.log());
}

#[test]
fn twenty_thousand_jobs_dropped_at_once_are_each_judged_once() {
    let w = World::new();
    w.config("workers = 8\nrescan_seconds = 3600");
    // No prompt slot: the prompt goes to stdin, which echo ignores. The fastest runner.
    let echo = json!(["echo", ["/bin/echo", r#"{"ok": true}"#]]);
    let _d = w.start(&[echo]);
    w.wait_log("daemon start");
    let jobs = w.state().join("jobs");
    const N: usize = 20_000;
    for i in 0..N {
        // Published as producers must (hidden temp, then rename: a plain write can be
        // read half-written), still several events per file, more than the kernel's
        // event queue holds.
        let temp = jobs.join(format!(".j{i:05}.tmp"));
        fs::write(&temp, format!(r#"{{"prompt":"p{i}","transcript":"T"}}"#)).unwrap();
        fs::rename(&temp, jobs.join(format!("j{i:05}.json"))).unwrap();
    }
    wait_for("inbox empty", Duration::from_secs(600), || {
        fs::read_dir(&jobs).map(|d| d.count() == 0).unwrap_or(false)
    });
    let folder = w.verdict_folder("T");
    assert_eq!(names(&folder).len(), N, "one verdict per job");
    let finished = w.log().matches("job finished").count();
    assert_eq!(finished, N, "each job judged exactly once");
}

#[test]
fn never_more_than_workers_runners_at_once() {
    let w = World::new();
    w.config("workers = 3");
    // Each runner waits (bounded) until a second one has started before its 0.3 s: a
    // pool that runs jobs side by side shows it however slowly the machine starts them.
    let body = format!(
        "echo \"start $(date +%s%N)\" >> $W/spans\n{}sleep 0.3\necho \"end $(date +%s%N)\" >> $W/spans\n{}",
        until_started(2, "$W/spans"),
        answer(r#"{"ok": true}"#)
    );
    let slow = w.runner("slow", &body);
    for i in 0..10 {
        w.job(&format!("j{i}"), &json!({"prompt": format!("p{i}")}));
    }
    let _d = w.start(&[slow]);
    wait_for("all judged", NO_HANG, || w.verdicts().len() == 10);
    let (lines, peak) = peak_overlap(&w.read("spans"));
    assert_eq!(lines, 20);
    assert!(peak <= 3, "{peak} runners at once with workers = 3");
    assert!(peak >= 2, "the pool ran jobs in parallel (peak {peak})");
}

/// Shell that waits (at most 30 s) until `spans` holds `n` start lines.
fn until_started(n: usize, spans: &str) -> String {
    format!(
        "n=0; while [ \"$(grep -c start {spans})\" -lt {n} ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done\n"
    )
}

/// A reload that lowers `workers` while jobs run holds new jobs back until fewer than
/// the new count hold a slot, and a reload that raises it lets more run at once.
#[test]
fn a_reload_lowers_and_raises_how_many_jobs_run_at_once() {
    let w = World::new();
    w.config("workers = 3");
    // The prompt is "<phase> <seconds> <n>" (distinct, so no answer is reused): spans
    // go to $W/spans.<phase>.
    // Phase "more" waits for a second start (as in never_more_than_workers_runners_at_once).
    let body = format!(
        "set -- $1\necho \"start $(date +%s%N)\" >> $W/spans.$1\n\
         if [ \"$1\" = more ]; then {}fi\nsleep $2\n\
         echo \"end $(date +%s%N)\" >> $W/spans.$1\n{}",
        until_started(2, "$W/spans.more"),
        answer(r#"{"ok": true}"#)
    );
    let sleeper = w.runner("sleeper", &body);
    let d = w.start(&[sleeper]);
    for (i, seconds) in ["0.2", "0.8", "1.4"].iter().enumerate() {
        w.job(
            &format!("old{i}"),
            &json!({"prompt": format!("old {seconds}")}),
        );
    }
    wait_for("three old jobs running", NO_HANG, || {
        w.read("spans.old").matches("start").count() == 3
    });
    let reload = |workers: usize, reloads: usize| {
        w.config(&format!("workers = {workers}"));
        d.signal("HUP");
        wait_for("config reloaded", NO_HANG, || {
            w.log().matches("config reloaded").count() == reloads
        });
        // The line says the new value (it said the one before).
        let said = w.log_lines("config reloaded").pop().unwrap_or_default();
        assert!(said.contains(&format!("workers={workers}")), "{said}");
    };
    let enqueue_three = |phase: &str, seconds: &str| {
        for i in 0..3 {
            let prompt = format!("{phase} {seconds} {i}");
            w.job(&format!("{phase}{i}"), &json!({ "prompt": prompt }));
        }
    };
    reload(1, 1);
    enqueue_three("new", "0.1");
    wait_for("six verdicts", NO_HANG, || w.verdicts().len() == 6);
    let last_old_end = stamps(&w.read("spans.old"), "end").into_iter().max();
    let first_new_start = stamps(&w.read("spans.new"), "start").into_iter().min();
    assert!(
        first_new_start > last_old_end,
        "a new job started while old ones held more than workers = 1 slots:\n{}\n{}",
        w.read("spans.old"),
        w.read("spans.new")
    );
    assert_eq!(peak_overlap(&w.read("spans.new")), (6, 1));
    reload(3, 2);
    enqueue_three("more", "0.6");
    wait_for("nine verdicts", NO_HANG, || w.verdicts().len() == 9);
    let (lines, peak) = peak_overlap(&w.read("spans.more"));
    assert_eq!(lines, 6);
    assert!(
        peak >= 2,
        "a raised workers ran jobs side by side (peak {peak})"
    );
}

/// The nanosecond stamps of the `kind` lines (start or end) of a spans file.
fn stamps(spans: &str, kind: &str) -> Vec<u128> {
    spans
        .lines()
        .filter_map(|l| l.strip_prefix(kind)?.trim().parse().ok())
        .collect()
}

/// Starts a daemon on job `j` and waits until `runner` (which appends its pid to
/// `$W/runner.pids`) runs it; returns the daemon and the runner's pid.
fn start_with_running_job(w: &World, runner: Value) -> (Daemon, u32) {
    w.job("j", &json!({"prompt": "p"}));
    let d = w.start(&[runner]);
    wait_for("runner started", NO_HANG, || {
        pids_in(&w.read("runner.pids")).len() == 1
    });
    (d, pids_in(&w.read("runner.pids"))[0])
}

/// A runner that answers once `$W/answer` exists; before that it records its pid and
/// a setsid'd grandchild's pid, then blocks.
fn blocking_runner(w: &World) -> Value {
    w.runner(
        "blocker",
        &format!(
            "if [ -e $W/answer ]; then {}; exit 0; fi\n\
             hostpid >> $W/runner.pids\n\
             setsid sh -c 'read -r p _ </proc/self/stat; echo $p@$(stat -Lc %i /proc/self/ns/pid) >> '$W'/grandchild.pids; exec sleep 300' &\n\
             exec sleep 300",
            answer(r#"{"ok": true}"#)
        ),
    )
}

#[test]
fn kill_9_during_a_job_then_restart_gives_one_verdict_and_no_runner_left() {
    let w = World::new();
    let runner = blocking_runner(&w);
    w.job("k", &json!({"prompt": "p", "transcript": "T"}));
    let mut d = w.start(std::slice::from_ref(&runner));
    wait_for("runner and grandchild started", NO_HANG, || {
        pids_in(&w.read("grandchild.pids")).len() == 1
    });
    d.kill9();
    let leftovers: Vec<u32> = pids_in(&w.read("runner.pids"))
        .into_iter()
        .chain(pids_in(&w.read("grandchild.pids")))
        .collect();
    // Each runner's supervisor sees the judge die and stops its whole tree.
    wait_for("runners stopped with the daemon", NO_HANG, || {
        leftovers.iter().all(|&p| !is_running(p))
    });
    fs::write(w.path("answer"), "").unwrap();
    let _d2 = w.start(&[runner]);
    wait_for("verdict after restart", NO_HANG, || w.verdicts().len() == 1);
    assert_eq!(w.verdict("k")["outcome"], "hit");
    assert!(w.log().contains("interruptions=1"), "{}", w.log());
    wait_for("claim released", NO_HANG, || {
        names(&w.state().join("claims")).is_empty()
    });
    assert!(w.jobs_left().is_empty());
}

#[test]
fn a_job_interrupted_three_times_gets_an_unchecked_verdict() {
    let w = World::new();
    let runner = blocking_runner(&w);
    w.job(
        "doomed",
        &json!({"prompt": "p", "transcript": "T", "hook": "h"}),
    );
    for round in 1..=3 {
        let mut d = w.start(std::slice::from_ref(&runner));
        wait_for("runner started", NO_HANG, || {
            pids_in(&w.read("runner.pids")).len() == round
        });
        d.kill9();
    }
    let _d = w.start(&[runner]);
    wait_for("verdict", NO_HANG, || w.verdicts().len() == 1);
    let v = w.verdict("doomed");
    assert_eq!(v["outcome"], "unchecked");
    assert_eq!(v["hook"], "h");
    assert_eq!(v["attempts"], json!([]));
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("judge error") && reason.contains("interrupted 3 times"),
        "{reason}"
    );
    assert_eq!(
        pids_in(&w.read("runner.pids")).len(),
        3,
        "not run a fourth time"
    );
}

/// Writes a claim as a judge killed mid-publish would have left it.
fn publishing_claim(w: &World, job: &str, temp: &Path, target: &Path) {
    let meta = fs::metadata(w.state().join("jobs").join(format!("{job}.json"))).unwrap();
    let record = json!({
        "state": "publishing", "interruptions": 0, "owner_pid": 999_999, "tag": "gone-tag",
        "job": {"dev": meta.dev(), "ino": meta.ino(),
                "mtime_ns": i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec())},
        "runner": null, "verdict_temp": temp, "verdict_path": target,
    });
    fs::create_dir_all(w.state().join("claims")).unwrap();
    fs::write(
        w.state().join("claims").join(format!("{job}.json")),
        record.to_string(),
    )
    .unwrap();
}

#[test]
fn a_crash_after_the_verdict_was_published_and_drained_does_not_publish_again() {
    let w = World::new();
    let fake = w.runner(
        "fake",
        &format!("echo x >> $W/ran\n{}", answer(r#"{"ok": true}"#)),
    );
    w.job("drained", &json!({"prompt": "p", "transcript": "T"}));
    let folder = w.verdict_folder("T");
    // Renamed into place, then drained (removed) by a hook, then the crash.
    publishing_claim(
        &w,
        "drained",
        &folder.join(".drained.json.1.0.tmp"),
        &folder.join("drained.json"),
    );
    // And one whose rename had not happened yet: the temp file is still there.
    w.job("pending", &json!({"prompt": "p", "transcript": "T"}));
    fs::create_dir_all(&folder).unwrap();
    let temp = folder.join(".pending.json.1.1.tmp");
    fs::write(&temp, r#"{"id":"pending","outcome":"clean"}"#).unwrap();
    publishing_claim(&w, "pending", &temp, &folder.join("pending.json"));
    let _d = w.start(&[fake]);
    wait_for("both jobs removed", NO_HANG, || w.jobs_left().is_empty());
    wait_for("claims released", NO_HANG, || {
        names(&w.state().join("claims")).is_empty()
    });
    assert_eq!(
        names(&folder),
        ["pending.json"],
        "no verdict came back for the drained job"
    );
    assert_eq!(w.verdict("pending")["outcome"], "clean");
    assert_eq!(w.read("ran"), "", "no runner ran again");
}

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

#[test]
fn a_second_daemon_is_refused_naming_the_first() {
    let w = World::new();
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let d = w.start(std::slice::from_ref(&fake));
    w.wait_log("daemon start");
    let mut second = w.start(&[fake]);
    let status = second.wait_exit(NO_HANG);
    assert!(!status.success());
    assert!(
        second.stderr().contains(&format!("pid {}", d.child.id())),
        "{}",
        second.stderr()
    );
}

#[test]
fn a_world_writable_state_folder_is_refused() {
    let w = World::new();
    fs::set_permissions(w.state(), fs::Permissions::from_mode(0o777)).unwrap();
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let mut d = w.start(std::slice::from_ref(&fake));
    let status = d.wait_exit(NO_HANG);
    assert!(!status.success());
    assert!(d.stderr().contains("chmod o-w"), "{}", d.stderr());
    // Group-writable is only a warning.
    fs::set_permissions(w.state(), fs::Permissions::from_mode(0o770)).unwrap();
    let _d = w.start(&[fake]);
    w.wait_log("daemon start");
    assert!(w.log().contains("group-writable"), "{}", w.log());
}

#[test]
fn symlinks_folders_fifos_and_bad_files_in_jobs() {
    let w = World::new();
    w.config("max_job_bytes = 1000");
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let jobs = w.state().join("jobs");
    fs::write(w.path("target.json"), r#"{"prompt":"secret"}"#).unwrap();
    std::os::unix::fs::symlink(w.path("target.json"), jobs.join("link.json")).unwrap();
    fs::create_dir(jobs.join("folder.json")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(jobs.join("fifo.json"))
        .status()
        .unwrap();
    assert!(fifo.success());
    fs::write(jobs.join("empty.json"), "").unwrap();
    fs::write(jobs.join("invalid.json"), "{nope").unwrap();
    fs::write(
        jobs.join("huge.json"),
        format!(r#"{{"prompt":"{}"}}"#, "x".repeat(2000)),
    )
    .unwrap();
    let _d = w.start(&[fake]);
    wait_for("inbox emptied", NO_HANG, || w.jobs_left().is_empty());
    assert_eq!(
        names(&w.state().join("rejected")),
        ["fifo.json", "folder.json", "link.json"]
    );
    assert!(
        w.path("target.json").exists(),
        "the symlink's target was not touched"
    );
    let verdicts = w.verdicts();
    let got: Vec<(&str, &str)> = verdicts
        .iter()
        .map(|(f, n, _)| (f.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("da39a3ee5e6b4b0d", "empty.json"),
            ("da39a3ee5e6b4b0d", "huge.json"),
            ("da39a3ee5e6b4b0d", "invalid.json")
        ]
    );
    for (_, name, v) in &verdicts {
        assert_eq!(v["outcome"], "unchecked", "{name}");
        assert!(
            v["reason"].as_str().unwrap().starts_with("judge error"),
            "{v}"
        );
    }
    assert!(w.log().contains("moved to rejected/"));
}

#[test]
fn the_jobs_folder_deleted_and_recreated_while_running() {
    let w = World::new();
    w.config("rescan_seconds = 3600");
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let _d = w.start(&[fake]);
    w.wait_log("daemon start");
    w.job("before", &json!({"prompt": "p"}));
    wait_for("first judged", NO_HANG, || w.verdicts().len() == 1);
    let jobs = w.state().join("jobs");
    fs::remove_dir(&jobs).unwrap();
    w.wait_log("watching the inbox again");
    fs::create_dir_all(&jobs).unwrap();
    w.job("after", &json!({"prompt": "p"}));
    wait_for("second judged", NO_HANG, || w.verdicts().len() == 2);
}

#[test]
fn a_job_enqueued_again_while_it_runs_is_judged_again_not_deleted() {
    let w = World::new();
    let runner = w.runner(
        "gated",
        &held("echo \"$1\" >> $W/prompts", r#"{"ok": true}"#),
    );
    w.job("same", &json!({"prompt": "first", "transcript": "T"}));
    let _d = w.start(&[runner]);
    wait_for("first run started", NO_HANG, || {
        w.read("prompts").lines().count() == 1
    });
    // The producer publishes the same id again (a new file replaces the old name).
    w.job("same", &json!({"prompt": "second", "transcript": "T"}));
    w.collect_output();
    wait_for("the newer job judged too", NO_HANG, || {
        w.read("prompts").lines().collect::<Vec<_>>() == ["first", "second"]
            && w.jobs_left().is_empty()
    });
    wait_for("claims released", NO_HANG, || {
        names(&w.state().join("claims")).is_empty()
    });
    assert_eq!(
        w.verdicts().len(),
        1,
        "one verdict file: the newer replaced the older (same id)"
    );
    assert!(
        w.log()
            .contains("a newer job of the same name arrived meanwhile"),
        "{}",
        w.log()
    );
}

/// The daemon's supervisor zygote (a child running the same binary), once it runs.
fn zygote_of(d: &Daemon) -> u32 {
    let daemon = d.child.id();
    let mut found = None;
    wait_for("the supervisor zygote", NO_HANG, || {
        found = fs::read_dir("/proc").ok().and_then(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .find(|&p| crate::support::is_daemon_zygote(p, daemon))
        });
        found.is_some()
    });
    found.unwrap_or_default()
}

/// A zygote killed or stopped from outside costs no verdict: the daemon kills and
/// reaps what is left of it and forks supervisors itself, and no job hangs.
#[test]
fn a_dead_or_stopped_zygote_falls_back_to_forking_from_the_daemon() {
    for signal in ["KILL", "STOP"] {
        let w = World::new();
        w.config("");
        let runner = w.runner("ok", &answer(r#"{"ok": true}"#));
        let d = w.start(&[runner]);
        let zygote = zygote_of(&d);
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(zygote.to_string())
            .status()
            .unwrap();
        assert!(status.success());
        for i in 0..3 {
            w.job(&format!("j{i}"), &json!({"prompt": format!("p{i}")}));
        }
        wait_for("three verdicts", NO_HANG, || w.verdicts().len() == 3);
        w.wait_log("the supervisor zygote stopped answering");
        wait_for("the zygote reaped", NO_HANG, || !is_running(zygote));
        // A stopped zygote held the request it was sent: that attempt starts again
        // from the daemon, on fresh pipes.
        for i in 0..3 {
            let v = w.verdict(&format!("j{i}"));
            assert_eq!(v["outcome"], "hit", "{signal}: {v}\n{}", w.log());
        }
    }
}

/// A pooled supervisor killed while idle costs no verdict: the daemon drops it when it
/// refuses the next request, and a new one from the zygote runs the rest.
#[test]
fn a_killed_idle_pooled_supervisor_is_replaced_without_a_lost_verdict() {
    let w = World::new();
    w.config("workers = 1");
    let body = format!("parentpid >> $W/parents\n{}", answer(r#"{"ok": true}"#));
    let runner = w.runner("ok", &body);
    let d = w.start(&[runner]);
    w.job("j0", &json!({"prompt": "p0"}));
    wait_for("the first verdict", NO_HANG, || w.verdicts().len() == 1);
    let first = pids_in(&w.read("parents"))[0];
    assert!(
        crate::support::is_daemon_helper(first, d.child.id()),
        "{first}"
    );
    signal(first, libc::SIGKILL);
    wait_for("the idle supervisor gone", NO_HANG, || !is_running(first));
    for i in 1..3 {
        w.job(&format!("j{i}"), &json!({"prompt": format!("p{i}")}));
    }
    wait_for("three verdicts", NO_HANG, || w.verdicts().len() == 3);
    for i in 0..3 {
        let v = w.verdict(&format!("j{i}"));
        assert_eq!(v["outcome"], "hit", "{v}\n{}", w.log());
    }
    let parents = pids_in(&w.read("parents"));
    assert_eq!(parents.len(), 3, "{parents:?}");
    assert!(
        parents[1] != first && parents[2] == parents[1],
        "a new pooled supervisor ran the later attempts: {parents:?}"
    );
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

/// Issue 30, item 3: a job's `cwd` on a hung file system (simulated: its `stat` blocks
/// for an hour) must not stall the slot thread other jobs depend on. With one worker,
/// the next job is still judged, and the hung one is judged in a fresh folder with
/// its cwd refused, well before its `stat` would return.
#[test]
fn a_cwd_on_a_hung_file_system_stalls_no_other_job() {
    let w = World::new();
    w.config("workers = 1");
    let hung = w.path("hung-mount");
    fs::create_dir_all(&hung).unwrap();
    let runner = w.runner("ok", &answer(r#"{"ok": true}"#));
    let mut cmd = w.command(&[runner]);
    cmd.env("LLM_JUDGE_HANG_PATH", &hung);
    let mut d = w.start_with(cmd);
    w.job(
        "hung",
        &json!({"prompt": "p", "cwd": hung, "mode": "investigate", "timeout_seconds": 30}),
    );
    w.job("next", &json!({"prompt": "p", "timeout_seconds": 30}));
    wait_for("both jobs judged", NO_HANG, || w.verdicts().len() == 2);
    assert_eq!(w.verdict("hung")["outcome"], "hit");
    assert_eq!(w.verdict("next")["outcome"], "hit");
    assert!(w.log().contains("did not answer within"), "{}", w.log());
    d.signal("TERM");
    assert!(d.wait_exit(NO_HANG).success());
}

/// A producer that writes its job file in place (no temp file and rename), slowly, in
/// chunks: the daemon sees the file appear empty and then half-written. It must not
/// judge each half-written state (the storm of verdicts this once caused, and the job
/// removed while still being written): the job is judged once, from its whole content,
/// and judge.log says once that the file was still being written.
#[test]
fn a_job_file_written_in_place_is_judged_once_from_its_whole_content() {
    use std::io::Write;
    let w = World::new();
    // Five times the default: a producer paused by a loaded machine between two chunks
    // must not pass for one that gave up.
    w.config("job_settle_seconds = 5");
    let seen = w.path("prompts");
    let runner = w.runner(
        "r",
        &format!(
            "printf '%s\\n' \"$1\" >> '{}'\n{}",
            seen.display(),
            answer(r#"{"ok": true}"#)
        ),
    );
    let _d = w.start(&[runner]);
    w.wait_log("daemon start");
    let prompt = format!("the whole prompt {}", "x".repeat(200));
    let text = json!({"prompt": prompt, "id": "slow", "hit_if_all_true": ["ok"]}).to_string();
    let mut file = fs::File::create(w.state().join("jobs/slow.json")).unwrap();
    let mut chunks = text.as_bytes().chunks(text.len().div_ceil(8));
    file.write_all(chunks.next().unwrap()).unwrap();
    // The daemon has seen the file half-written (however slowly it looked) ...
    w.wait_log("job file still being written");
    // ... and the producer goes on at its own pace (not a wait for the daemon): 7
    // more chunks over about 1 s.
    for chunk in chunks {
        std::thread::sleep(Duration::from_millis(150));
        file.write_all(chunk).unwrap();
    }
    drop(file);
    wait_for("the job judged and removed", NO_HANG, || {
        w.jobs_left().is_empty() && w.verdicts().len() == 1
    });
    let v = w.verdict("slow");
    assert_eq!(v["outcome"], "hit", "judged from the whole content: {v}");
    assert_eq!(fs::read_to_string(&seen).unwrap(), format!("{prompt}\n"));
    let log = w.log();
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("job finished id=slow"))
            .count(),
        1,
        "{log}"
    );
    assert_eq!(
        log.matches("job file still being written (not published by rename?)")
            .count(),
        1,
        "{log}"
    );
}
