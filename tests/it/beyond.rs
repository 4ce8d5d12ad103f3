//! Integration tests of docs/reference.md, "Beyond catstack": runner health, answer cache,
//! single-flight and per-runner limits, through `llm-judge run`, `status` and the daemon.

use crate::support::*;

use std::fs;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn attempts(v: &Value) -> Vec<(String, String)> {
    v["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["runner"].as_str().unwrap().to_string(),
                a["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn status(w: &World, extra: &[&str]) -> (Output, Value) {
    let out = w
        .command(&[])
        .arg("status")
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, v)
}

fn runner_health(w: &World, name: &str) -> Value {
    status(w, &[]).1["runners"][name]["health"].clone()
}

#[test]
fn backoff_doubles_up_to_the_cap_all_benched_runners_are_tried_and_reset_clears() {
    let w = World::new();
    w.config("[health]\nbackoff_start_seconds = 1\nbackoff_max_seconds = 3\n");
    let table = [
        w.runner("a", "echo a-broke >&2; exit 1"),
        w.runner("b", "exit 2"),
    ];
    for (i, expected) in [1.0, 2.0, 3.0, 3.0].into_iter().enumerate() {
        let v = w.run_job(
            &table,
            &format!("j{i}"),
            &json!({"prompt": format!("p{i}")}),
        );
        assert_eq!(v["outcome"], "unchecked");
        let names: Vec<String> = attempts(&v).into_iter().map(|a| a.0).collect();
        assert_eq!(names, ["a", "b"], "all benched: all tried, in table order");
        for r in ["a", "b"] {
            let h = runner_health(&w, r);
            assert_eq!(h["backoff_seconds"], expected, "{r} after job {i}: {h}");
        }
    }
    assert_eq!(runner_health(&w, "a")["last_reason"], "exit 1: a-broke");
    assert!(w.log().contains("runner benched"), "{}", w.log());
    let (out, after) = status(&w, &["--reset-health"]);
    assert!(out.status.success());
    assert!(
        after["runners"]["a"].is_null() || after["runners"]["a"]["health"].is_null(),
        "{after}"
    );
    assert!(!w.state().join("health.json").exists());
}

#[test]
fn a_benched_runner_is_tried_last_not_skipped_and_health_survives_a_restart() {
    let w = World::new();
    w.config("[health]\nbackoff_start_seconds = 600\n");
    let a = w.runner(
        "a",
        "if [ -e $W/a_ok ]; then echo '{\"ok\": true}'; else exit 1; fi",
    );
    let b = w.runner(
        "b",
        "if [ -e $W/b_fails ]; then exit 1; fi; echo '{\"ok\": true}'",
    );
    let table = [a, b];
    let v = w.run_job(&table, "first", &json!({"prompt": "1"}));
    assert_eq!(
        attempts(&v),
        [
            ("a".into(), "exit 1".into()),
            ("b".into(), "answered".into())
        ]
    );
    assert_eq!(runner_health(&w, "a")["benched"], true);
    // A new process (health is kept in the state folder): a goes last, b answers.
    let v = w.run_job(&table, "second", &json!({"prompt": "2"}));
    assert_eq!(attempts(&v), [("b".to_string(), "answered".to_string())]);
    // b now fails: benched a is still tried, last, and its answer clears it.
    fs::write(w.path("b_fails"), "").unwrap();
    fs::write(w.path("a_ok"), "").unwrap();
    let v = w.run_job(&table, "third", &json!({"prompt": "3"}));
    assert_eq!(
        attempts(&v),
        [
            ("b".into(), "exit 1".into()),
            ("a".into(), "answered".into())
        ]
    );
    assert!(
        runner_health(&w, "a").is_null(),
        "an answer clears a's health"
    );
    assert_eq!(runner_health(&w, "b")["benched"], true);
    // A daemon started now reads the kept health: b (benched) goes last.
    let _d = w.start(&table);
    w.job("fourth", &json!({"prompt": "4"}));
    wait_for("daemon verdict", NO_HANG, || {
        w.verdicts().iter().any(|(_, n, _)| n == "fourth.json")
    });
    assert_eq!(
        attempts(&w.verdict("fourth")),
        [("a".to_string(), "answered".to_string())]
    );
}

#[test]
fn a_runner_that_becomes_installed_is_checked_again() {
    let w = World::new();
    w.config("[health]\nbackoff_start_seconds = 600\n");
    let link = w.path("bin/late-runner");
    let script = w.path("bin/late.sh");
    fs::write(&script, "echo '{\"ok\": true}'\n").unwrap();
    let late = json!(["late", [link, script, "{prompt}"]]);
    let b = w.runner("b", &answer(r#"{"ok": true}"#));
    let table = [late, b];
    let v = w.run_job(&table, "before", &json!({"prompt": "1"}));
    assert_eq!(
        attempts(&v),
        [
            ("late".into(), "not installed".into()),
            ("b".into(), "answered".into())
        ]
    );
    // "Installing" it: a symlink to the shell (never opened for writing: no Text file busy).
    std::os::unix::fs::symlink("/bin/sh", &link).unwrap();
    let v = w.run_job(&table, "after", &json!({"prompt": "2"}));
    assert_eq!(attempts(&v), [("late".to_string(), "answered".to_string())]);
}

fn counting_runner(w: &World, name: &str) -> Value {
    w.runner(
        name,
        &format!(
            "echo x >> $W/count\n{}",
            answer(r#"{"ok": true, "other": false}"#)
        ),
    )
}

fn count(w: &World) -> usize {
    w.read("count").lines().count()
}

#[test]
fn the_cache_hits_misses_expires_and_survives_a_corrupt_entry() {
    let w = World::new();
    w.config("[cache]\nttl_seconds = 3600\n");
    let table = [counting_runner(&w, "r")];
    let v = w.run_job(
        &table,
        "miss",
        &json!({"prompt": "P", "hit_if_all_true": ["ok"]}),
    );
    assert_eq!((v["outcome"].as_str(), count(&w)), (Some("hit"), 1));
    // Same mode, table and prompt: the answer is reused, the verdict uses this job's keys.
    let v = w.run_job(
        &table,
        "hit",
        &json!({"prompt": "P", "hit_if_all_true": ["other"], "transcript": "T"}),
    );
    assert_eq!(count(&w), 1, "no runner started");
    assert_eq!(
        (v["outcome"].as_str(), v["reason"].as_str()),
        (Some("clean"), Some("not true: other"))
    );
    assert_eq!(v["runner"], "r");
    assert_eq!(
        v["attempts"],
        json!([{"runner": "cache", "ok": true, "reason": "answered"}])
    );
    assert!(w.log().contains("cache hit"));
    w.run_job(&table, "other-prompt", &json!({"prompt": "P2"}));
    assert_eq!(count(&w), 2, "a changed prompt misses");
    w.run_job(
        &[counting_runner(&w, "renamed")],
        "other-table",
        &json!({"prompt": "P"}),
    );
    assert_eq!(count(&w), 3, "a changed table misses");
    // Expiry: age every entry past the TTL.
    let cache = w.state().join("cache");
    for name in names(&cache) {
        let path = cache.join(name);
        let mut entry: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        entry["created_at"] = json!(1.0);
        fs::write(&path, entry.to_string()).unwrap();
    }
    w.run_job(&table, "expired", &json!({"prompt": "P"}));
    assert_eq!(count(&w), 4, "an expired entry misses");
    for name in names(&cache) {
        fs::write(cache.join(name), "{corrupt").unwrap();
    }
    let v = w.run_job(&table, "corrupt", &json!({"prompt": "P"}));
    assert_eq!(
        (v["outcome"].as_str(), count(&w)),
        (Some("hit"), 5),
        "a corrupt entry is ignored"
    );
    assert!(w.log().contains("corrupt cache entry"), "{}", w.log());
}

#[test]
fn the_cache_is_never_used_for_investigate_jobs_and_never_stores_unchecked() {
    let w = World::new();
    w.config("[cache]\nttl_seconds = 3600\n");
    let table = [counting_runner(&w, "r")];
    for i in 0..2 {
        w.run_job(
            &table,
            &format!("inv{i}"),
            &json!({"prompt": "P", "mode": "investigate"}),
        );
    }
    assert_eq!(count(&w), 2, "investigate jobs always ask the runners");
    assert!(names(&w.state().join("cache")).is_empty());
    let failing = [w.runner("f", "echo x >> $W/count; exit 1")];
    for i in 0..2 {
        let v = w.run_job(&failing, &format!("bad{i}"), &json!({"prompt": "Q"}));
        assert_eq!(v["outcome"], "unchecked");
    }
    assert_eq!(count(&w), 4, "unchecked results are not stored");
    assert!(names(&w.state().join("cache")).is_empty());
}

#[test]
fn ten_identical_jobs_start_one_runner() {
    let w = World::new();
    w.config("workers = 10");
    let runner = w.runner("slow", &held("echo x >> $W/count", r#"{"ok": true}"#));
    for i in 0..10 {
        w.job(
            &format!("same{i}"),
            &json!({"prompt": "the same question", "hook": i}),
        );
    }
    let _d = w.start(&[runner]);
    wait_for("nine jobs wait for the first", NO_HANG, || {
        w.log().matches("an identical job is running").count() == 9
    });
    w.collect_output();
    wait_for("ten verdicts", NO_HANG, || w.verdicts().len() == 10);
    assert_eq!(count(&w), 1, "one runner start for ten identical jobs");
    for i in 0..10 {
        let v = w.verdict(&format!("same{i}"));
        assert_eq!(
            (v["id"].as_str(), v["outcome"].as_str(), &v["hook"]),
            (Some(format!("same{i}").as_str()), Some("hit"), &json!(i))
        );
    }
}

/// Single flight and the cache together: fewer workers than identical jobs, so jobs
/// keep arriving while the first one finishes. A job that missed the leader's flight
/// (it had gone) must find its answer in the cache: one runner start per question.
#[test]
fn identical_jobs_arriving_as_the_first_finishes_never_start_a_second_runner() {
    let w = World::new();
    w.config("workers = 4\n[cache]\nttl_seconds = 600\n");
    let runner = w.runner(
        "slow",
        "echo \"$1\" >> $W/count; sleep 0.3; echo '{\"ok\": true}'",
    );
    let _d = w.start(&[runner]);
    for round in 0..3 {
        for i in 0..10 {
            w.job(
                &format!("r{round}-{i}"),
                &json!({"prompt": format!("question {round}"), "hit_if_all_true": ["ok"]}),
            );
        }
    }
    wait_for("thirty verdicts", NO_HANG, || w.verdicts().len() == 30);
    let starts = w.read("count");
    for round in 0..3 {
        let question = format!("question {round}");
        assert_eq!(
            starts.lines().filter(|l| *l == question).count(),
            1,
            "one runner start for {question}: {starts}\n{}",
            w.log()
        );
    }
}

/// The same question about two folders has two answers: a runner that works in the
/// job's folder is keyed by it in the cache.
#[test]
fn the_cache_never_answers_for_another_folder() {
    let w = World::new();
    w.config("[cache]\nttl_seconds = 600\n");
    let (flagged, plain) = (w.path("work/flagged"), w.path("work/plain"));
    fs::create_dir_all(&flagged).unwrap();
    fs::create_dir_all(&plain).unwrap();
    fs::write(flagged.join("flag"), "").unwrap();
    let runner = w.runner(
        "looks",
        "echo x >> $W/count; if [ -e flag ]; then echo '{\"bug\": true}'; else echo '{\"bug\": false}'; fi",
    );
    let ask = |name: &str, cwd: &std::path::Path| {
        let job = json!({"prompt": "Is there a bug here?", "cwd": cwd, "hit_if_all_true": ["bug"]});
        w.run_job(std::slice::from_ref(&runner), name, &job)["outcome"].clone()
    };
    assert_eq!(ask("a", &flagged), "hit");
    assert_eq!(ask("b", &plain), "clean", "not the flagged folder's answer");
    assert_eq!(ask("c", &flagged), "hit");
    assert_eq!(
        count(&w),
        2,
        "the second ask about a folder is answered from the cache"
    );
}

#[test]
fn a_runner_limit_of_one_never_overlaps_across_eight_workers() {
    let w = World::new();
    let script = w.path("bin/limited.sh");
    // Each run holds the one slot until judge.log shows a job waiting for it (bounded:
    // 30 s), so another job is seen waiting however slowly the machine starts them.
    fs::write(
        &script,
        format!(
            "W={}\necho \"start $(date +%s%N)\" >> $W/spans\n\
             n=0; while ! grep -q 'waiting for a free runner slot' $W/state/judge.log && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done\n\
             sleep 0.1\necho \"end $(date +%s%N)\" >> $W/spans\necho '{{\"ok\": true}}'\n",
            w.path("").display()
        ),
    )
    .unwrap();
    w.config(&format!(
        "workers = 8\n[[runners.default]]\nname = \"limited\"\nargv = [\"/bin/sh\", \"{}\"]\nmax_concurrent = 1\n",
        script.display()
    ));
    for i in 0..8 {
        w.job(&format!("l{i}"), &json!({"prompt": format!("p{i}")}));
    }
    let mut cmd: Command = w.command(&[]);
    cmd.env_remove("CATSTACK_LLM_JUDGE_RUNNERS");
    let _d = w.start_with(cmd);
    wait_for("eight verdicts", NO_HANG, || w.verdicts().len() == 8);
    let (lines, peak) = peak_overlap(&w.read("spans"));
    assert_eq!(lines, 16);
    assert_eq!(peak, 1, "max_concurrent = 1 across workers");
    assert!(
        w.log().contains("waiting for a free runner slot"),
        "{}",
        w.log()
    );
}

/// `llm-judge ask` with these runners; its printed JSON.
fn ask(w: &World, table: &[Value], extra: &[&str]) -> Value {
    let out = w
        .command(table)
        .arg("ask")
        .args(extra)
        .arg("question")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

fn runner_names(v: &Value) -> Vec<String> {
    attempts(v).into_iter().map(|a| a.0).collect()
}

/// `ask` uses and updates runner health as the daemon does (catstack V4's `ask()`
/// leaves such runners out of the next ask): a runner that exits non-zero and one that
/// is not installed are tried last by the next ask, and come back once the backoff is
/// over (`--now`, the drop-in's clock).
#[test]
fn ask_benches_failing_and_missing_runners_until_the_backoff_ends() {
    let w = World::new();
    w.config("[health]\nbackoff_start_seconds = 600\n");
    let table = [
        w.runner("crashes", "echo quota >&2; exit 3"),
        json!(["ghost", ["llm-judge-test-no-such-binary", "{prompt}"]]),
        w.runner("answers", &answer(r#"{"ok": true}"#)),
    ];
    let first = ask(&w, &table, &[]);
    assert_eq!(
        attempts(&first),
        [
            ("crashes".into(), "exit 3: quota".into()),
            ("ghost".into(), "not installed".into()),
            ("answers".into(), "answered".into())
        ]
    );
    assert_eq!(runner_health(&w, "crashes")["benched"], true);
    assert_eq!(runner_health(&w, "ghost")["benched"], true);
    let second = ask(&w, &table, &[]);
    assert_eq!(runner_names(&second), ["answers"], "{second}");
    assert_eq!(second["outcome"], "answered");
    let later = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 601)
        .to_string();
    let after = ask(&w, &table, &["--now", &later]);
    assert_eq!(
        runner_names(&after),
        ["crashes", "ghost", "answers"],
        "{after}"
    );
}

/// When every runner is benched the whole table is tried, and an answer clears it.
#[test]
fn ask_tries_a_table_of_benched_runners_and_an_answer_clears_the_bench() {
    let w = World::new();
    w.config("[health]\nbackoff_start_seconds = 600\n");
    let table = [w.runner(
        "flaky",
        "if [ -e $W/ok ]; then echo '{\"ok\": true}'; else exit 3; fi",
    )];
    assert_eq!(ask(&w, &table, &[])["outcome"], "unchecked");
    assert_eq!(runner_health(&w, "flaky")["benched"], true);
    fs::write(w.path("ok"), "").unwrap();
    let v = ask(&w, &table, &[]);
    assert_eq!(v["runner"], "flaky", "{v}");
    assert!(runner_health(&w, "flaky").is_null(), "an answer clears it");
    assert!(w.log().contains("runner answered: health cleared"));
}

/// `--now` (the drop-in's clock) must be a time.
#[test]
fn ask_refuses_a_now_that_is_not_a_time() {
    let w = World::new();
    let table = [w.runner("answers", &answer(r#"{"ok": true}"#))];
    for bad in ["-1", "0", "NaN", "inf"] {
        let out = w
            .command(&table)
            .args(["ask", &format!("--now={bad}"), "question"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--now {bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--now"));
    }
}

/// Holds `<state>/health.lock` exclusively until the file is dropped, as any process of
/// the user can (`flock -x health.lock sleep 300`; a runner runs as the user).
fn hold_health_lock(w: &World) -> fs::File {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(w.state().join("health.lock"))
        .unwrap();
    // SAFETY: flock on a descriptor this function owns.
    let held = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(held, 0, "cannot take health.lock");
    file
}

/// `ask` with `table`, bounded: past the deadline it is killed and the test fails.
fn ask_within_deadline(w: &World, table: &[Value]) -> Value {
    use std::io::Read;
    let mut child = w
        .command(table)
        .args(["ask", "question"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_child(&mut child, NO_HANG);
    assert!(status.is_some(), "ask did not end within {NO_HANG:?}");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// A held `<state>/health.lock` stops no verdict, no `ask` and no shutdown. Before,
/// recording a failed attempt waited for the lock on the worker: 0 verdicts. The
/// update is kept in memory meanwhile (this process still tries the failing runner
/// last), logged once, and written without the lock at exit.
#[test]
fn a_held_health_lock_stops_no_verdict_no_ask_and_no_shutdown() {
    let w = World::new();
    w.config("workers = 2\n[health]\nbackoff_start_seconds = 600\n");
    let table = [
        w.runner("fails", "exit 3"),
        w.runner("answers", &answer(r#"{"ok": true}"#)),
    ];
    let lock = hold_health_lock(&w);
    let mut d = w.start(&table);
    w.job("first", &json!({"prompt": "p0"}));
    wait_for("the first verdict with health.lock held", NO_HANG, || {
        w.verdicts().len() == 1
    });
    assert_eq!(runner_names(&w.verdict("first")), ["fails", "answers"]);
    for i in 1..6 {
        w.job(&format!("j{i}"), &json!({"prompt": format!("p{i}")}));
    }
    wait_for("6 verdicts with health.lock held", NO_HANG, || {
        w.verdicts().len() == 6
    });
    for i in 1..6 {
        let v = w.verdict(&format!("j{i}"));
        assert_eq!(runner_names(&v), ["answers"], "benched in memory: {v}");
    }
    assert!(
        !w.state().join("health.json").exists(),
        "nothing written under a held lock"
    );
    let log = w.log();
    let taken = log.matches("health.lock cannot be had at once").count();
    assert_eq!(taken, 1, "logged once, not per job: {log}");
    d.signal("TERM");
    assert!(d.wait_exit(NO_HANG).success(), "{}", d.stderr());
    assert_eq!(
        runner_health(&w, "fails")["benched"],
        true,
        "at exit the kept update is written without the lock"
    );
    fs::remove_file(w.state().join("health.json")).unwrap();
    let v = ask_within_deadline(&w, &table);
    assert_eq!(runner_names(&v), ["fails", "answers"], "{v}");
    assert_eq!(runner_health(&w, "fails")["benched"], true, "ask's too");
    drop(lock);
}
