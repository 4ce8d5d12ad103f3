//! Escapees (docs/reference.md, "Runners": "after the job ends no process its runners
//! started is left running, including those that moved to their own session"). Each fake
//! leaves a descendant that calls `setsid` and clears its environment (so no tag and no
//! marker can find it), and writes its pid down; the test checks it is gone once its
//! attempt ended: with another job running at the same time, through a daemon shutdown,
//! after `llm-judge ask`, and in a chain of 40; and a runner that kills or stops its own
//! supervisor.

use crate::support::*;

use std::time::Duration;

use serde_json::json;

/// How long a leftover gets to disappear (generous: proves nothing survives).
const GONE: Duration = Duration::from_secs(30);
/// The token in every escapee's command line (guards the reaper against pid reuse).
const TOKEN: &str = "sleep 3019";

/// Shell that starts an escapee writing its pid to `$W/<file>` and waits until it has.
fn escape(file: &str) -> String {
    format!(
        "setsid env -i /bin/sh -c \"read -r p _ </proc/self/stat; echo \\$p@\\$(stat -Lc %i /proc/self/ns/pid) >> $W/{file}; exec {TOKEN}\" </dev/null >/dev/null 2>&1 &\n\
         i=0; while [ ! -s $W/{file} ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done\n"
    )
}

fn reaper(w: &World, mark: &str, files: &[&str]) -> Reaper {
    let mut r = Reaper::new(mark);
    r.pid_files = files
        .iter()
        .map(|f| (w.path(f), TOKEN.to_string()))
        .collect();
    r
}

#[test]
fn an_escapee_is_stopped_while_another_job_still_runs() {
    let w = World::new();
    let mark = new_mark("escape-concurrent");
    let _reaper = reaper(&w, &mark, &["a.pids"]);
    write_config(&w, "fsync = false\nkill_grace_seconds = 1\nworkers = 2\n");
    // Job "slow" runs until the test lets it go; job "leaver" answers at once.
    let body = format!(
        "case \"$1\" in\n\
         slow) touch $W/slow.started; i=0; while [ ! -e $W/release ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done; echo '{{\"ok\": true}}';;\n\
         leaver) {}echo '{{\"ok\": true}}';;\n\
         esac\n",
        escape("a.pids")
    );
    let runner = w.runner("dispatch", &body);
    let mut d = w.start_with(command(&w, Some(&[runner]), &mark));
    w.wait_log("daemon start");
    let job = |name: &str| json!({"prompt": name, "transcript": "T", "hit_if_all_true": ["ok"]});
    w.job("slow", &job("slow"));
    wait_for("slow job running", NO_HANG, || {
        w.path("slow.started").exists()
    });
    w.job("leaver", &job("leaver"));
    // Its job file goes after its verdict is published: wait for both.
    wait_for("leaver judged and removed", Duration::from_secs(60), || {
        w.verdicts().len() == 1 && w.jobs_left() == ["slow.json"]
    });
    assert!(!w.path("release").exists());
    assert_escapee_gone(&w.path("a.pids"), GONE);
    std::fs::write(w.path("release"), "").unwrap();
    wait_for("slow judged", Duration::from_secs(60), || {
        w.verdicts().len() == 2
    });
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(30)).success());
}

#[test]
fn an_escapee_is_stopped_through_a_daemon_shutdown() {
    let w = World::new();
    let mark = new_mark("escape-shutdown");
    let _reaper = reaper(&w, &mark, &["s.pids"]);
    write_config(
        &w,
        "fsync = false\nkill_grace_seconds = 1\nshutdown_grace_seconds = 0.2\n",
    );
    let body = format!("{}touch $W/hanging; exec sleep 300\n", escape("s.pids"));
    let runner = w.runner("hangs", &body);
    let mut d = w.start_with(command(&w, Some(&[runner]), &mark));
    w.wait_log("daemon start");
    w.job("hang", &json!({"prompt": "p", "timeout_seconds": 300}));
    wait_for("runner hanging", NO_HANG, || w.path("hanging").exists());
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(30)).success());
    assert_eq!(
        w.jobs_left(),
        ["hang.json"],
        "left queued for the next start"
    );
    assert_escapee_gone(&w.path("s.pids"), GONE);
    let left = wait_no_marked(&mark, &[], GONE);
    assert!(left.is_empty(), "left running after shutdown: {left:?}");
}

#[test]
fn an_escapee_of_ask_is_stopped_before_ask_returns() {
    let w = World::new();
    let mark = new_mark("escape-ask");
    let _reaper = reaper(&w, &mark, &["k.pids"]);
    let body = format!("{}echo '{{\"ok\": true}}'\n", escape("k.pids"));
    let runner = w.runner("leaver", &body);
    let mut p = spawn(
        &w,
        command(&w, Some(&[runner]), &mark),
        &["ask", "question"],
    );
    let (status, _) = p.finish(Duration::from_secs(60));
    assert!(status.success(), "{}", p.stderr());
    assert!(p.stdout().contains("\"answered\""), "{}", p.stdout());
    // Already gone when ask returned: no wait needed, but allow the reaping instant.
    assert_escapee_gone(&w.path("k.pids"), GONE);
}

#[test]
fn a_chain_of_forty_escapees_is_stopped() {
    let w = World::new();
    let mark = new_mark("escape-chain");
    let _reaper = reaper(&w, &mark, &["chain.pids"]);
    // Each link moves to its own session, clears its environment, starts the next
    // link and sleeps; the 40th writes "done".
    let link = w.path("link.sh");
    std::fs::write(
        &link,
        format!(
            "n=$1; read -r p _ </proc/self/stat; echo $p@$(stat -Lc %i /proc/self/ns/pid) >> {w}/chain.pids\n\
             if [ \"$n\" -lt 40 ]; then setsid env -i /bin/sh {l} $((n+1)) </dev/null >/dev/null 2>&1 & else touch {w}/chain.done; fi\n\
             exec {TOKEN}\n",
            w = w.path("").display(),
            l = link.display()
        ),
    )
    .unwrap();
    let body = format!(
        "setsid env -i /bin/sh {} 1 </dev/null >/dev/null 2>&1 &\n\
         i=0; while [ ! -e $W/chain.done ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done\n\
         echo '{{\"ok\": true}}'\n",
        link.display()
    );
    run_one_job(&w, &mark, "chain", &body, 60.0);
    let pids = pids_in_file(&w.path("chain.pids"));
    assert_eq!(pids.len(), 40, "every link recorded itself");
    let left = wait_gone(&pids, GONE);
    assert!(left.is_empty(), "links still running: {left:?}");
}

/// The daemon's supervisors are pooled (src/process/zygote.rs): one serves attempt
/// after attempt. Its sweep must still leave nothing of one attempt behind before the
/// next starts: each attempt's escapee is gone once that attempt's verdict is out,
/// and every attempt ran under the same supervisor, which is still waiting for more
/// and goes when the daemon is killed.
#[test]
fn a_pooled_supervisor_stops_each_attempts_escapee_before_its_next_attempt() {
    let w = World::new();
    let mark = new_mark("escape-pooled");
    let files: Vec<String> = (0..4).map(|i| format!("p{i}.pids")).collect();
    let _reaper = reaper(
        &w,
        &mark,
        &files.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    write_config(&w, "fsync = false\nkill_grace_seconds = 1\nworkers = 1\n");
    // The prompt names the file the escapee writes; the runner's parent is its supervisor.
    let body = format!(
        "parentpid >> $W/parents\n{}echo '{{\"ok\": true}}'\n",
        escape("$1.pids")
    );
    let runner = w.runner("leaver", &body);
    let mut d = w.start_with(command(&w, Some(&[runner]), &mark));
    w.wait_log("daemon start");
    for (i, file) in files.iter().enumerate() {
        w.job(&format!("j{i}"), &json!({"prompt": format!("p{i}")}));
        wait_for("the job judged", Duration::from_secs(60), || {
            w.verdicts().len() == i + 1
        });
        assert_escapee_gone(&w.path(file), GONE);
    }
    let parents = pids_in_file(&w.path("parents"));
    assert_eq!(parents.len(), files.len(), "{parents:?}");
    assert!(
        parents.iter().all(|&p| p == parents[0]),
        "one pooled supervisor ran every attempt: {parents:?}"
    );
    assert!(
        crate::support::is_daemon_helper(parents[0], d.child.id()),
        "the supervisor is the daemon's pooled helper, still idle: {}",
        cmdline(parents[0])
    );
    // Killed, not stopped: the idle supervisor and the zygote still go with it.
    d.kill9();
    let left = wait_no_marked(&mark, &[], GONE);
    assert!(left.is_empty(), "left running after kill -9: {left:?}");
}

/// Issue 30's attack: a runner that clears its environment, kills (or stops) its own
/// supervisor, then leaves a `setsid -f` sleeper and answers. The supervisor is the
/// init of its PID namespace, so the signal never arrives: the answer counts (not a
/// death, not a timeout) and the sleeper is gone with the attempt.
fn turns_on_its_supervisor(signal: &str, token: &str) -> String {
    format!(
        "exec env -i /bin/sh -c 'kill -{signal} $PPID; sleep .2; setsid -f /bin/sleep {token}; echo \"{{\\\"ok\\\": true}}\"'\n"
    )
}

/// Live processes whose command line holds `token`.
fn with_token(token: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| is_running(pid) && cmdline(pid).contains(token))
        .collect()
}

/// Kills whatever still carries `token` when a test ends (a failed one included).
struct KillToken(&'static str);

impl Drop for KillToken {
    fn drop(&mut self) {
        for pid in with_token(self.0) {
            unsafe_kill(pid);
        }
    }
}

fn assert_no_token_left(token: &str) {
    let mut left = Vec::new();
    let gone = crate::support::wait_until(std::time::Instant::now() + GONE, || {
        left = with_token(token);
        left.is_empty()
    });
    assert!(gone, "left running: {left:?}");
}

fn assert_answered(verdict: &serde_json::Value, runner: &str) {
    assert_eq!(verdict["outcome"], "hit", "{verdict}");
    assert_eq!(verdict["attempts"][0]["runner"], runner, "{verdict}");
    assert_eq!(verdict["attempts"][0]["reason"], "answered", "{verdict}");
}

#[test]
fn a_runner_that_kills_or_stops_its_supervisor_under_the_daemon_leaves_nothing() {
    let w = World::new();
    let mark = new_mark("escape-supervisor-daemon");
    let (_k9, _stop) = (KillToken("3013.11"), KillToken("3013.12"));
    write_config(&w, "fsync = false\nkill_grace_seconds = 1\n");
    let body = format!(
        "case \"$1\" in\nkill) {};;\nstop) {};;\nesac\n",
        turns_on_its_supervisor("9", "3013.11"),
        turns_on_its_supervisor("STOP", "3013.12")
    );
    let runner = w.runner("turncoat", &body);
    let mut d = w.start_with(command(&w, Some(&[runner]), &mark));
    w.wait_log("daemon start");
    for (i, prompt) in ["kill", "stop"].into_iter().enumerate() {
        let job = json!({"prompt": prompt, "timeout_seconds": 30, "hit_if_all_true": ["ok"]});
        w.job(prompt, &job);
        wait_for("the job judged", Duration::from_secs(60), || {
            w.verdicts().len() == i + 1
        });
        assert_answered(&w.verdict(prompt), "turncoat");
    }
    assert_no_token_left("3013.11");
    assert_no_token_left("3013.12");
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(30)).success());
}

#[test]
fn a_runner_that_kills_or_stops_its_supervisor_under_run_leaves_nothing() {
    for (signal, token) in [("9", "3013.21"), ("STOP", "3013.22")] {
        let w = World::new();
        let mark = new_mark("escape-supervisor-run");
        let _kill = KillToken(token);
        // Timeout 30 s: a stopped supervisor would show as "timed out after 30s".
        run_one_job(
            &w,
            &mark,
            "r",
            &turns_on_its_supervisor(signal, token),
            30.0,
        );
        assert_no_token_left(token);
        assert_answered(&w.verdict("r"), "r");
    }
}

#[test]
fn a_runner_that_kills_or_stops_its_supervisor_under_ask_leaves_nothing() {
    for (signal, token) in [("9", "3013.31"), ("STOP", "3013.32")] {
        let w = World::new();
        let mark = new_mark("escape-supervisor-ask");
        let _kill = KillToken(token);
        let runner = w.runner("a", &turns_on_its_supervisor(signal, token));
        let mut p = spawn(
            &w,
            command(&w, Some(&[runner]), &mark),
            &["ask", "--timeout", "30", "question"],
        );
        let (status, _) = p.finish(Duration::from_secs(60));
        assert!(status.success(), "{}", p.stderr());
        let out: serde_json::Value = serde_json::from_str(&p.stdout()).unwrap();
        assert_eq!(out["outcome"], "answered", "{out}");
        assert_eq!(out["attempts"][0]["reason"], "answered", "{out}");
        assert_no_token_left(token);
    }
}
