//! Process faults (docs/reference.md, "Runners", "Running one runner"): runners that ignore
//! SIGTERM, fork many children, leave descendants in their own session, close their
//! output early, through `llm-judge run` and through the daemon. Each must end within
//! timeout + kill grace + a generous margin, and afterwards no process the runner
//! started may be running: every fake writes down its pids, and every process a
//! test's judge starts carries a per-test marker variable, so `/proc` is searched for
//! leftovers the fakes did not write down too. (Gigabytes of output, with the memory
//! bound, are in `faults_memory.rs`.)
//!
//! No stop races a fake's start-up: each fake writes `$W/<fault>.ready` once every
//! process it means to start is up. A test about the tree it leaves is stopped by the
//! test once the fake is ready; a test about the timeout itself gives the fake a
//! timeout many times what its start-up takes, and checks it was ready in time.

use crate::support::*;

use std::time::Duration;

use serde_json::{Value, json};

/// How long leftovers get to disappear after the judge is done.
/// Generous: proves nothing hangs (2 s of pipe drain, slow CI), asserts no speed.
const GONE: Duration = Duration::from_secs(30);
/// The timeout of a fault test about the timeout: many times the fake's start-up (a
/// few processes) on a loaded machine, so the timeout never comes before it is ready.
const TIMEOUT: f64 = 5.0;

/// How a fault job ends.
#[derive(Clone, Copy)]
enum Stop {
    /// Its timeout (seconds); the fake must have written its ready file by then.
    Timeout(f64),
    /// The test sends the runner's group SIGTERM once the fake is ready (its timeout
    /// never comes).
    WhenReady,
    /// The fake answers by itself.
    Answers(f64),
}

/// What one fault run left.
struct Ran {
    // First: fields drop in order, and the reaper reads pid files inside the world.
    _reaper: Reaper,
    w: World,
    mark: String,
    verdict: Value,
    elapsed: Duration,
}

/// Runs one job with one fake runner through `llm-judge run`, checks the common
/// invariants (exit 0, ended in time, one verdict, job and claim gone, nothing left
/// running) and returns the verdict.
fn run_fault(name: &str, body: &str, stop: Stop, escaped: Option<(&str, &str)>) -> Ran {
    let w = World::new();
    let mark = new_mark(name);
    let mut reaper = Reaper::new(&mark);
    if let Some((file, token)) = escaped {
        reaper.pid_files.push((w.path(file), token.to_string()));
    }
    let ready = format!("{name}.ready");
    let elapsed = match stop {
        Stop::Timeout(timeout) => {
            let elapsed = run_one_job(&w, &mark, name, body, timeout);
            assert!(
                w.path(&ready).exists(),
                "{name}: the fake was not ready within its {timeout} s timeout"
            );
            elapsed
        }
        Stop::WhenReady => run_one_job_stopped_when_ready(&w, &mark, name, body, &ready),
        Stop::Answers(timeout) => run_one_job(&w, &mark, name, body, timeout),
    };
    assert!(w.jobs_left().is_empty(), "{:?}", w.jobs_left());
    assert!(names(&w.state().join("claims")).is_empty());
    let verdict = w.verdict(name);
    let left = wait_no_marked(&mark, &[], GONE);
    assert!(left.is_empty(), "{name}: processes left running: {left:?}");
    let recorded = pids_in_file(&w.path("pids"));
    assert!(
        wait_gone(&recorded, GONE).is_empty(),
        "{name}: recorded pids still running"
    );
    Ran {
        _reaper: reaper,
        w,
        mark,
        verdict,
        elapsed,
    }
}

fn first_reason(v: &Value) -> String {
    v["attempts"][0]["reason"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

// The bodies, shared by the `run` tests and the daemon tests. `$W` is the world
// folder; each body appends to `$W/pids` (one file per test in the `run` tests, the
// runner's own pid first) and touches `$W/<fault>.ready` once everything it starts is up.

const IGNORES_TERM: &str = "trap '' TERM\n\
    hostpid >> $W/pids\n\
    touch $W/ignores_term.ready\n\
    while :; do sleep 0.2 & outerpid $! >> $W/pids; wait $!; done";

/// 50 background sleeps (half of them ignoring SIGTERM), 5 sub-shells each with 2
/// more (each of those 15 also writes a line to `$W/forks_fifty.up`), then it hangs:
/// 66 pids in all. Bounded: a loop cap, not `ulimit -u` (root ignores it).
const FORKS_FIFTY: &str = "hostpid >> $W/pids\n\
    i=0\n\
    while [ $i -lt 25 ]; do sleep 300 & outerpid $! >> $W/pids; (trap '' TERM; exec sleep 300) & outerpid $! >> $W/pids; i=$((i+1)); done\n\
    j=0\n\
    while [ $j -lt 5 ]; do sh -c 'read -r p _ </proc/self/stat; for k in 1 2; do sh -c \"read -r q _ </proc/self/stat; echo \\$q@\\$(stat -Lc %i /proc/self/ns/pid) >> '$W'/pids; echo up >> '$W'/forks_fifty.up; exec sleep 300\" & done; echo $p@$(stat -Lc %i /proc/self/ns/pid) >> '$W'/pids; echo up >> '$W'/forks_fifty.up; wait' & j=$((j+1)); done\n\
    n=0; while [ \"$(cat $W/forks_fifty.up 2>/dev/null | wc -l)\" -lt 15 ] && [ $n -lt 6000 ]; do sleep 0.01; n=$((n+1)); done\n\
    touch $W/forks_fifty.ready\n\
    wait";

/// A grandchild in its own session (setsid), holding the runner's stdout; the runner hangs.
const SETSID_GRANDCHILD_HANGS: &str = "hostpid >> $W/pids\n\
    setsid sh -c \"read -r p _ </proc/self/stat; echo \\$p@\\$(stat -Lc %i /proc/self/ns/pid) >> $W/pids; touch $W/setsid_hangs.up; exec sleep 300\" &\n\
    sleep 300 & outerpid $! >> $W/pids\n\
    n=0; while [ ! -e $W/setsid_hangs.up ] && [ $n -lt 6000 ]; do sleep 0.01; n=$((n+1)); done\n\
    touch $W/setsid_hangs.ready\n\
    wait";

/// The runner answers and exits at once; its setsid'd grandchild keeps stdout open.
const SETSID_GRANDCHILD_HOLDS_PIPE: &str = "setsid sh -c \"read -r p _ </proc/self/stat; echo \\$p@\\$(stat -Lc %i /proc/self/ns/pid) >> $W/pids; touch $W/ready.$$; exec sleep 300\" &\n\
    i=0; while [ ! -e $W/ready.$$ ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done\n\
    echo '{\"ok\": true}'";

/// The runner answers and exits; a double-forked daemon (own session, re-parented to
/// init, stdio closed) stays behind.
const DAEMONIZED_GRANDCHILD: &str = "setsid sh -c \"sh -c 'read -r p _ </proc/self/stat; echo \\$p@\\$(stat -Lc %i /proc/self/ns/pid) >> $W/pids; touch $W/ready.$$; exec sleep 300' </dev/null >/dev/null 2>&1 &\" </dev/null >/dev/null 2>&1\n\
    i=0; while [ ! -e $W/ready.$$ ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done\n\
    echo '{\"ok\": true}'";

/// Closes stdout and stderr at once, then keeps running past the timeout.
const CLOSES_OUTPUT: &str = "exec >&- 2>&-\n\
    hostpid >> $W/pids\n\
    sleep 300 & outerpid $! >> $W/pids\n\
    touch $W/closes_output.ready\n\
    wait";

#[test]
fn a_runner_ignoring_sigterm_is_killed_after_the_grace() {
    let r = run_fault("ignores_term", IGNORES_TERM, Stop::Timeout(TIMEOUT), None);
    assert_eq!(first_reason(&r.verdict), "timed out after 5s");
    assert_eq!(r.verdict["outcome"], "unchecked");
    // The grace is what this test is about: a lower bound, which load only lengthens.
    assert!(
        r.elapsed.as_secs_f64() >= TIMEOUT + GRACE * 0.9,
        "SIGKILL came before the grace: {:?}",
        r.elapsed
    );
    assert!(r.w.log().contains("timed out after 5s"), "{}", r.w.log());
}

/// The runner's group gets SIGTERM (as at a timeout) only once all 66 processes run:
/// the 25 that ignore it, and whatever the runner's death leaves, must still go.
#[test]
fn a_runner_that_forks_fifty_children_then_hangs_leaves_none() {
    let r = run_fault("forks_fifty", FORKS_FIFTY, Stop::WhenReady, None);
    assert_eq!(first_reason(&r.verdict), "exit -15");
    let recorded = pids_in_file(&r.w.path("pids"));
    assert_eq!(
        recorded.len(),
        1 + 50 + 5 * 3,
        "the fake started its children"
    );
}

#[test]
fn a_setsid_grandchild_of_a_hanging_runner_is_stopped() {
    let r = run_fault(
        "setsid_hangs",
        SETSID_GRANDCHILD_HANGS,
        Stop::WhenReady,
        None,
    );
    assert_eq!(first_reason(&r.verdict), "exit -15");
    assert_eq!(pids_in_file(&r.w.path("pids")).len(), 3);
}

/// Far below the timeout (120 s), however loaded the machine: the judge did not wait
/// for the grandchild's pipe (held for 300 s).
const WELL_BELOW_THE_TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn a_setsid_grandchild_holding_stdout_neither_hangs_the_judge_nor_survives() {
    let r = run_fault(
        "setsid_pipe",
        SETSID_GRANDCHILD_HOLDS_PIPE,
        Stop::Answers(120.0),
        None,
    );
    assert_eq!(first_reason(&r.verdict), "answered");
    assert_eq!(r.verdict["outcome"], "hit");
    assert!(r.elapsed < WELL_BELOW_THE_TIMEOUT, "{:?}", r.elapsed);
    assert_eq!(pids_in_file(&r.w.path("pids")).len(), 1);
}

#[test]
fn a_double_forked_daemon_left_by_an_answering_runner_is_stopped() {
    let r = run_fault(
        "daemonized",
        DAEMONIZED_GRANDCHILD,
        Stop::Answers(120.0),
        None,
    );
    assert_eq!(first_reason(&r.verdict), "answered");
    assert!(r.elapsed < WELL_BELOW_THE_TIMEOUT, "{:?}", r.elapsed);
    assert_eq!(pids_in_file(&r.w.path("pids")).len(), 1);
    let _ = r.mark;
}

/// Closed output is not an end: the timeout itself stops the runner.
#[test]
fn a_runner_that_closes_its_output_and_runs_past_the_timeout_is_stopped() {
    let r = run_fault("closes_output", CLOSES_OUTPUT, Stop::Timeout(TIMEOUT), None);
    assert_eq!(first_reason(&r.verdict), "timed out after 5s");
    assert_eq!(pids_in_file(&r.w.path("pids")).len(), 2);
}

/// docs/reference.md, "Runners": "after the job ends no process its runners started is left
/// running, including those that moved to their own session". A descendant that also drops
/// its environment (so `LLM_JUDGE_TAG` is gone) escapes: the judge finds escaped
/// descendants only by that tag (no child subreaper, no parent-chain walk).
#[test]
fn a_setsid_descendant_that_clears_its_environment_is_stopped_too() {
    let body = "setsid env -i /bin/sh -c \"read -r p _ </proc/self/stat; echo \\$p@\\$(stat -Lc %i /proc/self/ns/pid) >> $W/escaped.pids; exec sleep 3017\" </dev/null >/dev/null 2>&1 &\n\
        i=0; while [ ! -s $W/escaped.pids ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done\n\
        echo '{\"ok\": true}'";
    let r = run_fault(
        "env_cleared",
        body,
        Stop::Answers(120.0),
        Some(("escaped.pids", "sleep 3017")),
    );
    assert_eq!(first_reason(&r.verdict), "answered");
    assert_escapee_gone(&r.w.path("escaped.pids"), GONE);
}

/// The daemon is SIGKILLed while faulty runners run (one ignoring SIGTERM, one with 65
/// children, one with a setsid'd grandchild): their supervisors stop every one of them at
/// once, and the next start judges those jobs again (docs/reference.md, "Runners": "also
/// after a daemon crash"). The start-up tag search stays for a supervisor killed with it.
#[test]
fn faulty_runners_of_a_killed_daemon_are_stopped_when_it_dies_and_judged_again() {
    let w = World::new();
    let mark = new_mark("crash-faults");
    let _reaper = Reaper::new(&mark);
    write_config(
        &w,
        &format!("fsync = false\nkill_grace_seconds = {GRACE}\nworkers = 4\n"),
    );
    let cases = [
        ("ignores_term", IGNORES_TERM),
        ("forks_fifty", FORKS_FIFTY),
        ("setsid_hangs", SETSID_GRANDCHILD_HANGS),
    ];
    // After the crash, `$W/second` makes every job answer at once.
    let mut body = String::from(
        "if [ -e $W/second ]; then echo '{\"ok\": true}'; exit 0; fi\ncase \"$1\" in\n",
    );
    for (name, fault) in &cases {
        body.push_str(&format!("{name})\n{fault}\n;;\n"));
    }
    body.push_str("esac\n");
    let dispatch = w.runner("dispatch", &body);
    let mut d = w.start_with(command(&w, Some(std::slice::from_ref(&dispatch)), &mark));
    w.wait_log("daemon start");
    for (name, _) in &cases {
        w.job(
            name,
            &json!({"prompt": name, "timeout_seconds": 300, "transcript": "T", "hit_if_all_true": ["ok"]}),
        );
    }
    // Every fault fully started (its ready file), then the daemon, 2 + 66 + 3 runner
    // processes.
    wait_for("faults running", NO_HANG, || {
        cases
            .iter()
            .all(|(name, _)| w.path(&format!("{name}.ready")).exists())
            && marked(&mark).len() >= 1 + 2 + 66 + 3
    });
    let first_daemon = d.child.id();
    d.kill9();
    // Each attempt's supervisor sees its judge die (its report pipe breaks) and
    // stops the runner's whole tree at once: nothing waits for the next start.
    let left = wait_no_marked(&mark, &[first_daemon], GONE);
    assert!(
        left.is_empty(),
        "runners outlived the killed daemon: {left:?}"
    );
    std::fs::write(w.path("second"), "").unwrap();
    let mut d = w.start_with(command(&w, Some(&[dispatch]), &mark));
    wait_for("jobs judged again", Duration::from_secs(60), || {
        w.verdicts().len() == cases.len()
    });
    let left = wait_no_marked(&mark, &[d.child.id()], GONE);
    assert!(left.is_empty(), "left running after restart: {left:?}");
    for (name, _) in &cases {
        let v = w.verdict(name);
        assert_eq!(v["outcome"], "hit", "{name}: {v}");
    }
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(30)).success());
}

/// All the faults at once through one daemon (workers enough for all), selected by
/// the prompt. Each attempt ends within its bound, the daemon survives and drains
/// cleanly, and nothing they started is left.
#[test]
fn all_faults_at_once_through_the_daemon() {
    let w = World::new();
    let mark = new_mark("daemon-faults");
    let _reaper = Reaper::new(&mark);
    write_config(
        &w,
        &format!("fsync = false\nkill_grace_seconds = {GRACE}\nworkers = 8\n"),
    );
    let cases: [(&str, &str, f64, &str); 6] = [
        ("ignores_term", IGNORES_TERM, 1.0, "timed out after 1s"),
        ("forks_fifty", FORKS_FIFTY, 1.0, "timed out after 1s"),
        (
            "setsid_hangs",
            SETSID_GRANDCHILD_HANGS,
            1.5,
            "timed out after 1.5s",
        ),
        (
            "setsid_pipe",
            SETSID_GRANDCHILD_HOLDS_PIPE,
            60.0,
            "answered",
        ),
        ("daemonized", DAEMONIZED_GRANDCHILD, 60.0, "answered"),
        ("closes_output", CLOSES_OUTPUT, 2.0, "timed out after 2s"),
    ];
    let mut body = String::from("case \"$1\" in\n");
    for (name, fault, _, _) in &cases {
        body.push_str(&format!("{name})\n{fault}\n;;\n"));
    }
    body.push_str("esac\n");
    let dispatch = w.runner("dispatch", &body);
    let mut d = w.start_with(command(&w, Some(&[dispatch]), &mark));
    w.wait_log("daemon start");
    for (name, _, timeout, _) in &cases {
        w.job(
            name,
            &json!({"prompt": name, "timeout_seconds": timeout, "transcript": "T", "hit_if_all_true": ["ok"]}),
        );
    }
    wait_for("all fault jobs judged", Duration::from_secs(90), || {
        w.verdicts().len() == cases.len()
    });
    for (name, _, timeout, reason) in &cases {
        let v = w.verdict(name);
        assert_eq!(first_reason(&v), *reason, "{name}: {v}");
        let ms = v["attempts"][0]["elapsed_ms"].as_u64().unwrap_or(0) as f64;
        assert!(
            ms / 1000.0 <= timeout + GRACE + MARGIN,
            "{name}: attempt took {ms} ms"
        );
    }
    assert!(w.jobs_left().is_empty());
    let daemon_pid = d.child.id();
    let left = wait_no_marked(&mark, &[daemon_pid], GONE);
    assert!(left.is_empty(), "processes left running: {left:?}");
    assert!(
        wait_gone(&pids_in_file(&w.path("pids")), GONE).is_empty(),
        "recorded pids still running"
    );
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "the daemon died: {}",
        d.stderr()
    );
    d.signal("TERM");
    let status = d.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}: {}", d.stderr());
    assert!(names(&w.state().join("claims")).is_empty());
}
