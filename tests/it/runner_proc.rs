//! What a runner sees of processes (docs/security.md, "What a runner sees"): its
//! supervisor's PID namespace and a `/proc` of that namespace, so a runner that looks
//! itself up in `/proc` by its own pid finds itself, as codex's sandbox does before
//! each command. Through the daemon (a pooled supervisor, two attempts) and `ask` (a
//! supervisor forked per attempt); the test's own `/proc` stays the host's. Where the
//! judge may not mount a `/proc`, `doctor` and judge.log say so instead.

use crate::support::*;

use std::fs;
use std::time::Duration;

use serde_json::{Value, json};

/// Answers with what it sees: `$$`, the pid `/proc/self` names, and whether
/// `/proc/$$` is itself (same process, same PID namespace).
const LOOKS_ITSELF_UP: &str = "read -r seen _ < /proc/self/stat\n\
    if [ /proc/$$ -ef /proc/self ] && [ /proc/$$/ns/pid -ef /proc/self/ns/pid ]; then found=true; else found=false; fi\n\
    echo \"{\\\"ok\\\": true, \\\"dollar\\\": $$, \\\"proc_self\\\": $seen, \\\"found_itself\\\": $found}\"";

/// The `proc` mounts the test's own `/proc/self/mountinfo` lists.
fn proc_mounts() -> Vec<String> {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" - proc "))
        .map(str::to_string)
        .collect()
}

/// Whether this machine lets the judge give runners their own `/proc`, from `doctor`
/// (and, when it does not, that `doctor` warns about it).
fn own_proc_allowed(w: &World) -> bool {
    let out = w.command(&[]).arg("doctor").output().expect("doctor");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = text
        .lines()
        .find(|l| l.contains("runner isolation:"))
        .unwrap_or_else(|| panic!("doctor names the runner isolation:\n{text}"));
    if line.contains("own /proc") || line.contains("plain fork") {
        return line.contains("own /proc");
    }
    assert!(
        line.starts_with("warn") && line.contains("codex's sandbox"),
        "a PID namespace without its own /proc is a warning that says what it costs: {line}"
    );
    eprintln!("note: runners see the host's /proc here ({line}); checked the warning only");
    false
}

/// Asserts the answer shows a runner that found itself in its `/proc`.
fn assert_found_itself(answer: &Value) {
    assert_eq!(answer["found_itself"], true, "{answer}");
    assert_eq!(answer["dollar"], answer["proc_self"], "{answer}");
}

#[test]
fn a_runner_under_the_daemon_finds_itself_in_its_proc() {
    let w = World::new();
    let host_view = (proc_mounts(), fs::read_link("/proc/self").ok());
    let own_proc = own_proc_allowed(&w);
    w.config("workers = 1");
    let d = w.start(&[w.runner("looker", LOOKS_ITSELF_UP)]);
    // Two attempts: the second in the same pooled supervisor, its namespace reused.
    for i in 0..2 {
        w.job(&format!("j{i}"), &json!({"prompt": format!("p{i}")}));
        wait_for("the verdict", NO_HANG, || w.verdicts().len() == i + 1);
        let v = w.verdict(&format!("j{i}"));
        assert_eq!(v["outcome"], "hit", "{v}\n{}", w.log());
        if own_proc {
            assert_found_itself(&v["answer"]);
        }
    }
    let start = w.log_lines("daemon start").join("\n");
    if own_proc {
        assert!(start.contains("own /proc"), "{start}");
    } else {
        let warned = w.log_lines("runners see the host's /proc");
        assert!(warned.iter().any(|l| l.contains("WARN")), "{}", w.log());
    }
    drop(d);
    assert_eq!(
        (proc_mounts(), fs::read_link("/proc/self").ok()),
        host_view,
        "the test's own /proc changed"
    );
}

#[test]
fn a_runner_under_ask_finds_itself_in_its_proc() {
    let w = World::new();
    let mark = new_mark("runner-proc-ask");
    let _reaper = Reaper::new(&mark);
    let host_mounts = proc_mounts();
    let own_proc = own_proc_allowed(&w);
    let runner = w.runner("looker", LOOKS_ITSELF_UP);
    let mut p = spawn(&w, command(&w, Some(&[runner]), &mark), &["ask", "q"]);
    let (status, _) = p.finish(Duration::from_secs(60));
    assert!(status.success(), "{}", p.stderr());
    let out: Value = serde_json::from_str(&p.stdout()).expect("ask prints JSON");
    assert_eq!(out["outcome"], "answered", "{out}");
    if own_proc {
        assert_found_itself(&out["answer"]);
    }
    assert_eq!(proc_mounts(), host_mounts, "the test's own /proc changed");
}

/// Where mounting a `/proc` is refused (forced here by a test-build switch), the
/// daemon keeps the PID namespace, says so once in judge.log and in `doctor`, and
/// still judges: the runner then sees the host's `/proc`, as before.
#[cfg(feature = "failpoints")]
#[test]
fn a_refused_proc_mount_falls_back_to_the_hosts_proc_with_one_warning() {
    const REFUSE: &str = "LLM_JUDGE_REFUSE_PROC_MOUNT";
    let w = World::new();
    let doctor = w.command(&[]).env(REFUSE, "1").arg("doctor").output();
    let doctor = String::from_utf8_lossy(&doctor.expect("doctor").stdout).to_string();
    let line = doctor
        .lines()
        .find(|l| l.contains("runner isolation:"))
        .unwrap_or_else(|| panic!("{doctor}"));
    if line.contains("plain fork") {
        eprintln!("note: no PID namespace here ({line}); nothing to fall back from");
        return;
    }
    assert!(
        line.starts_with("warn") && line.contains("runners see the host's /proc"),
        "{line}"
    );
    let mut cmd = w.command(&[w.runner("looker", LOOKS_ITSELF_UP)]);
    cmd.env(REFUSE, "1");
    let _d = w.start_with(cmd);
    w.job("j", &json!({"prompt": "p"}));
    wait_for("the verdict", NO_HANG, || w.verdicts().len() == 1);
    let v = w.verdict("j");
    assert_eq!(v["outcome"], "hit", "{v}\n{}", w.log());
    assert_eq!(v["answer"]["found_itself"], false, "{v}");
    let warnings = || {
        w.log_lines("runners see the host's /proc")
            .iter()
            .filter(|l| l.contains("WARN"))
            .count()
    };
    assert_eq!(warnings(), 1, "{}", w.log());
    // `run` and `ask` say so in judge.log too, once each.
    w.job("r", &json!({"prompt": "p"}));
    let mut run = w.command(&[w.runner("looker", LOOKS_ITSELF_UP)]);
    run.env(REFUSE, "1").arg("run").arg(w.jobs().join("r.json"));
    assert!(run.output().expect("run").status.success());
    let mut ask = w.command(&[w.runner("looker", LOOKS_ITSELF_UP)]);
    ask.env(REFUSE, "1").args(["ask", "q"]);
    assert!(ask.output().expect("ask").status.success());
    assert_eq!(warnings(), 3, "{}", w.log());
}

/// The judge learns its runner's pid from the supervisor, which reads it in the host's
/// `/proc` (its `children` file, opened before the supervisor's own `/proc` was mounted
/// over it): with the judge's own lookup through `/proc` switched off (a test-build
/// switch), each running claim still names its runner's group, under the daemon (one
/// pooled supervisor, two attempts) and under `run` (a supervisor forked per attempt).
#[cfg(feature = "failpoints")]
#[test]
fn the_supervisor_reports_the_runner_pid_the_judge_signals() {
    const NO_LOOKUP: &str = "LLM_JUDGE_NO_PID_LOOKUP";
    let w = World::new();
    w.config("workers = 1");
    let runner = w.runner(
        "waiter",
        "hostpid >> $W/runner.pids\n\
         while [ ! -e $W/go ]; do sleep 0.02; done\n\
         echo '{\"ok\": true}'",
    );
    let claimed_pgid = |id: &str| {
        let record: Value =
            serde_json::from_str(&w.read(&format!("state/claims/{id}.json"))).unwrap_or_default();
        record["runner"]["pgid"].as_u64()
    };
    // Each job: the claim names the runner's group once it runs, then the runner answers.
    let check = |id: &str, nth: usize| {
        wait_for("the runner started", NO_HANG, || {
            pids_in(&w.read("runner.pids")).len() == nth + 1
        });
        let runner_pid = pids_in(&w.read("runner.pids"))[nth];
        wait_for("the claim names a runner", NO_HANG, || {
            claimed_pgid(id).is_some_and(|p| p != 0)
        });
        assert_eq!(claimed_pgid(id), Some(u64::from(runner_pid)), "{}", w.log());
        fs::write(w.path("go"), "").expect("go");
    };
    let mut cmd = w.command(std::slice::from_ref(&runner));
    cmd.env(NO_LOOKUP, "1");
    let _d = w.start_with(cmd);
    for (nth, id) in ["d0", "d1"].into_iter().enumerate() {
        w.job(id, &json!({"prompt": id}));
        check(id, nth);
        wait_for("the verdict", NO_HANG, || w.verdicts().len() == nth + 1);
        fs::remove_file(w.path("go")).expect("go");
    }
    drop(_d);
    let mark = new_mark("supervisor-pid-run");
    let _reaper = Reaper::new(&mark);
    let job = w.job("r0", &json!({"prompt": "r0"}));
    let mut cmd = command(&w, Some(&[runner]), &mark);
    cmd.env(NO_LOOKUP, "1");
    let mut p = spawn(&w, cmd, &["run", job.to_str().expect("utf-8 path")]);
    check("r0", 2);
    let (status, _) = p.finish(Duration::from_secs(60));
    assert!(status.success(), "{}", p.stderr());
}
