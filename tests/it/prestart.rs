//! Runners started ahead of their jobs (`prestart`, issue 33): the daemon keeps one
//! waiting in a fresh private folder with no job data, a job takes it (its prompt
//! arrives on stdin as one stream-json message, its timeout starts then), a fresh one
//! replaces it, no process serves two jobs, one that died while waiting is replaced
//! without counting as a failure, and shutdown stops the waiting ones.

use crate::support::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// A fake Claude Code in stream-json mode: records its pid (as `hostpid` writes it),
/// folder and folder listing as it starts (before any job), then reads one stdin line
/// and answers with that pid in a `result` event.
const FAKE_CLAUDE: &str = r#"read -r P _ < /proc/self/stat
P=$P@$(stat -Lc %i /proc/self/ns/pid)
echo "$P $(pwd) [$(ls -A)]" >> "$W/starts"
read -r line
printf '%s\n' "$line" > "$W/stdin.$P"
echo "$P" >> "$W/answered"
echo '{"type":"system","subtype":"init","cwd":"x","session_id":"s"}'
echo "{\"type\":\"result\",\"session_id\":\"s\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"{\\\"ok\\\": true, \\\"pid\\\": \\\"$P\\\"}\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}"
"#;

/// A world whose config's default table is the fake claude with `prestart = 1`.
fn world() -> World {
    world_with("claude", FAKE_CLAUDE)
}

/// A world whose default table is one runner, `name`, running the shell `body` (with
/// `$W` the world's folder) as a stream-json runner with `prestart = 1`.
fn world_with(name: &str, body: &str) -> World {
    let w = World::new();
    let script = w.path(&format!("bin/{name}.sh"));
    std::fs::write(&script, format!("W={}\n{body}", w.path("").display())).unwrap();
    w.config(&format!(
        "workers = 2\nrescan_seconds = 1\n[[runners.default]]\nname = \"{name}\"\n\
         argv = [\"/bin/sh\", {script:?}, \"--input-format\", \"stream-json\", \"--output-format\", \"stream-json\"]\nprestart = 1\n"
    ));
    w
}

/// The daemon on the config file's tables (no override variable).
fn start(w: &World) -> Daemon {
    let mut cmd = w.command(&[]);
    cmd.env_remove("CATSTACK_LLM_JUDGE_RUNNERS");
    w.start_with(cmd)
}

/// The started runners so far: (recorded pid, folder, folder listing at start). The
/// pid is the runner's own record (`<pid>@<namespace>`), which its answer repeats;
/// [`host`] gives the host pid.
fn starts(w: &World) -> Vec<(String, PathBuf, String)> {
    w.read("starts")
        .lines()
        .filter_map(|l| {
            let (pid, rest) = l.split_once(' ')?;
            let (dir, listing) = rest.rsplit_once(' ')?;
            Some((pid.to_string(), PathBuf::from(dir), listing.to_string()))
        })
        .collect()
}

/// The host pid of a recorded runner now ([`GONE`] once it has ended).
fn host(recorded: &str) -> u32 {
    pids_in(recorded).first().copied().unwrap_or(GONE)
}

/// The recorded pid a verdict's answer carries ("" when none).
fn answered_by(v: &Value) -> String {
    v["answer"]["pid"].as_str().unwrap_or_default().to_string()
}

fn wait_starts(w: &World, n: usize) -> Vec<(String, PathBuf, String)> {
    wait_for(&format!("{n} pre-started runners"), NO_HANG, || {
        starts(w).len() >= n
    });
    starts(w)
}

fn wait_verdict(w: &World, name: &str) -> Value {
    wait_for(&format!("verdict {name}"), NO_HANG, || {
        w.verdicts()
            .iter()
            .any(|(_, n, _)| n == &format!("{name}.json"))
    });
    w.verdict(name)
}

fn job(prompt: &str) -> Value {
    json!({"prompt": prompt, "hit_if_all_true": ["ok"], "timeout_seconds": 30})
}

/// A child of the test, killed and reaped when dropped (also when an assertion fails).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn under(dir: &Path, parent: &Path) -> bool {
    dir.starts_with(parent)
        && dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("llm-judge-"))
}

#[test]
fn a_waiting_runner_takes_one_job_and_a_fresh_one_replaces_it() {
    let w = world();
    let mut daemon = start(&w);
    let first = wait_starts(&w, 1);
    let (p1, dir1, listing1) = first[0].clone();
    assert!(
        under(&dir1, &w.state().join("tmp")),
        "{dir1:?} is not a private runner folder"
    );
    assert_eq!(
        listing1, "[]",
        "its folder was empty: no job data before its job"
    );
    assert!(
        is_running(host(&p1)) && dir1.exists(),
        "it waits, in its folder"
    );
    assert!(!w.path(&format!("stdin.{p1}")).exists(), "no prompt yet");
    w.wait_log("runner pre-started");
    wait_for("status to show the waiting runner", NO_HANG, || {
        let out = w.command(&[]).args(["status", "--json"]).output().unwrap();
        let status: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        status["daemon"]["prestarted"] == 1
    });

    w.job("a", &job("is \"a\" right?"));
    let v = wait_verdict(&w, "a");
    assert_eq!(v["outcome"], "hit", "{v}");
    assert_eq!(v["answer"]["pid"], p1, "the waiting runner answered: {v}");
    assert_eq!(v["attempts"].as_array().map(Vec::len), Some(1), "{v}");
    let message: Value = serde_json::from_str(&w.read(&format!("stdin.{p1}"))).unwrap();
    assert_eq!(
        message,
        json!({"type": "user", "message": {"role": "user", "content": "is \"a\" right?"}})
    );
    assert!(w.log().contains("prestarted=true"), "{}", w.log());

    // A fresh one replaces it, in a folder of its own; the first is gone with its folder.
    let second = wait_starts(&w, 2);
    let (p2, dir2, listing2) = second[1].clone();
    assert_ne!(p2, p1);
    assert_ne!(dir2, dir1);
    assert_eq!(listing2, "[]");
    wait_for("the first runner and its folder gone", NO_HANG, || {
        !is_running(host(&p1)) && !dir1.exists()
    });
    w.job("b", &job("b?"));
    let v = wait_verdict(&w, "b");
    assert_eq!(v["answer"]["pid"], p2, "each job its own process: {v}");
    assert_eq!(
        w.read("answered").lines().count(),
        2,
        "no process answered twice"
    );

    // Shutdown stops the waiting one and removes its folder.
    let third = wait_starts(&w, 3);
    let (p3, dir3, _) = third[2].clone();
    daemon.signal("TERM");
    assert!(daemon.wait_exit(NO_HANG).success(), "{}", daemon.stderr());
    assert!(!is_running(host(&p3)), "the waiting runner was stopped");
    assert!(!dir3.exists(), "its folder was removed");
    assert!(
        w.log().contains("pre-started runner stopped"),
        "{}",
        w.log()
    );
}

#[test]
fn the_timeout_starts_when_the_prompt_is_written() {
    let w = world();
    let _daemon = start(&w);
    let (p1, ..) = wait_starts(&w, 1)[0].clone();
    let started = std::time::Instant::now();
    // The runner must wait longer than the job's timeout before its job comes: time
    // passing is what this test is about, so this wait is on the clock. The timeout
    // (3 s) is many times what the waiting fake takes to answer on a loaded machine.
    wait_for("the runner to wait past 4 s", NO_HANG, || {
        started.elapsed().as_secs_f64() > 4.0
    });
    w.job(
        "slow",
        &json!({"prompt": "q", "hit_if_all_true": ["ok"], "timeout_seconds": 3}),
    );
    let v = wait_verdict(&w, "slow");
    assert_eq!(v["outcome"], "hit", "not timed out: {v}");
    assert_eq!(v["answer"]["pid"], p1, "{v}");
}

#[test]
fn a_runner_that_died_while_waiting_is_replaced_and_never_counts_as_failing() {
    let w = world();
    let _daemon = start(&w);
    let (p1, dir1, _) = wait_starts(&w, 1)[0].clone();
    let killed = Command::new("kill")
        .args(["-9", &host(&p1).to_string()])
        .status();
    assert!(killed.is_ok_and(|s| s.success()));
    // The next rescan finds it ended; none is started again until a job asks.
    w.wait_log("it ended while waiting");
    wait_for("the dead runner's folder removed", NO_HANG, || {
        !dir1.exists()
    });
    w.job("a", &job("a?"));
    let v = wait_verdict(&w, "a");
    assert_eq!(v["outcome"], "hit", "{v}");
    assert_eq!(
        v["attempts"].as_array().map(Vec::len),
        Some(1),
        "no failed attempt: {v}"
    );
    let p2 = answered_by(&v);
    assert!(p2 != p1 && !p2.is_empty(), "{v}");
    assert!(
        !w.log().contains("prestarted=true"),
        "the job spawned its own runner: {}",
        w.log()
    );
    // The job asked for the runner: a copy waits again and takes the next job.
    let again = wait_starts(&w, 3);
    let p3 = again
        .into_iter()
        .map(|s| s.0)
        .find(|p| *p != p1 && *p != p2);
    w.job("b", &job("b?"));
    let v = wait_verdict(&w, "b");
    assert_eq!(Some(answered_by(&v)), p3, "{v}");
}

#[test]
fn a_reload_that_drops_prestart_stops_the_waiting_runner() {
    let w = world();
    let daemon = start(&w);
    let (p1, dir1, _) = wait_starts(&w, 1)[0].clone();
    let config = std::fs::read_to_string(w.path("config.toml")).unwrap();
    std::fs::write(
        w.path("config.toml"),
        config.replace("prestart = 1", "prestart = 0"),
    )
    .unwrap();
    daemon.signal("HUP");
    wait_for("the waiting runner stopped on reload", NO_HANG, || {
        !is_running(host(&p1)) && !dir1.exists()
    });
    // Jobs now spawn their runner: it starts with the job, not before.
    w.job("a", &job("a?"));
    let v = wait_verdict(&w, "a");
    assert_eq!(v["outcome"], "hit", "{v}");
    assert_eq!(starts(&w).len(), 2, "one start for the job, none waiting");
    let log = w.log();
    let start = log
        .lines()
        .find(|l| l.contains("runner start id=a "))
        .unwrap_or_default();
    assert!(!start.is_empty() && !start.contains("prestarted"), "{log}");
}

#[test]
fn a_daemon_killed_with_sigkill_takes_its_waiting_runner_along() {
    let w = world();
    let mut daemon = start(&w);
    let (p1, ..) = wait_starts(&w, 1)[0].clone();
    w.wait_log("runner pre-started");
    let log = w.log();
    let shown = log
        .split_whitespace()
        .find_map(|f| f.strip_prefix("tag="))
        .unwrap_or_default()
        .to_string();
    // judge.log leaves the folder's random key out of the tag; it is in tag.key.
    assert!(shown.starts_with("prestart-…-"), "{log}");
    let key = w.read("state/tag.key");
    let tag = shown.replace('…', key.trim());
    daemon.kill9();
    // Its supervisor's report pipe broke: the supervisor stops the runner's group.
    wait_for("the waiting runner gone with its daemon", NO_HANG, || {
        !is_running(host(&p1))
    });
    // Something a copy started that escaped its supervisor carries the copy's tag: the
    // next start's sweep stops it.
    let mut escaped = Reaped(
        Command::new("sleep")
            .arg("300")
            .env("LLM_JUDGE_TAG", &tag)
            .spawn()
            .unwrap(),
    );
    let _daemon = start(&w);
    wait_for(
        "the escaped process stopped by the start-up sweep",
        NO_HANG,
        || escaped.0.try_wait().unwrap().is_some(),
    );
    w.wait_log("prestarted_stopped=1");
}

#[test]
fn a_runner_that_exits_at_once_is_not_restarted_on_every_rescan() {
    let w = world_with("dies", "echo start >> \"$W/starts\"\nexit 3\n");
    let _daemon = start(&w);
    w.wait_log("it ended while waiting");
    let updated = || {
        let status: Value = serde_json::from_str(&w.read("state/status.json")).unwrap_or_default();
        status["updated_at"].as_f64().unwrap_or(0.0)
    };
    let seen = updated();
    wait_for("three more rescans", NO_HANG, || updated() > seen + 2.5);
    assert_eq!(w.read("starts").lines().count(), 1, "restarted on a rescan");
}

/// Issue 39 item 5: a copy that prints a `result` event before its prompt (the first
/// copy started, here) must not answer the job with it. Its output is discarded with
/// the copy, the job spawns its own runner (not a failed attempt), and the runner is
/// not pre-started again until a reload.
#[test]
fn output_a_waiting_runner_printed_before_its_prompt_never_answers_a_job() {
    let early = format!(
        "if mkdir \"$W/printed-early\" 2>/dev/null; then\n\
         echo '{{\"type\":\"system\",\"subtype\":\"init\",\"cwd\":\"x\",\"session_id\":\"s\"}}'\n\
         echo '{{\"type\":\"result\",\"session_id\":\"s\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"{{\\\"ok\\\": true, \\\"stale\\\": true}}\"}}'\n\
         fi\n{FAKE_CLAUDE}"
    );
    let w = world_with("claude", &early);
    let daemon = start(&w);
    let (p1, dir1, _) = wait_starts(&w, 1)[0].clone();
    w.wait_log("runner pre-started");
    w.job("a", &job("a?"));
    let v = wait_verdict(&w, "a");
    assert_eq!(v["outcome"], "hit", "{v}");
    assert!(
        v["answer"].get("stale").is_none(),
        "the early answer won: {v}"
    );
    let p2 = answered_by(&v);
    assert!(
        p2 != p1 && !p2.is_empty(),
        "the job's own runner answered: {v}"
    );
    assert_eq!(
        v["attempts"].as_array().map(Vec::len),
        Some(1),
        "no failed attempt: {v}"
    );
    assert!(
        !w.path(&format!("stdin.{p1}")).exists(),
        "the early copy never got the prompt"
    );
    wait_for("the early copy and its folder gone", NO_HANG, || {
        !is_running(host(&p1)) && !dir1.exists()
    });
    let log = w.log();
    assert!(
        log.contains("before its prompt") && log.contains("not pre-started again"),
        "{log}"
    );
    // Not pre-started again: three rescans later, still the two starts.
    let updated = || {
        let status: Value = serde_json::from_str(&w.read("state/status.json")).unwrap_or_default();
        status["updated_at"].as_f64().unwrap_or(0.0)
    };
    let seen = updated();
    wait_for("three more rescans", NO_HANG, || updated() > seen + 2.5);
    assert_eq!(starts(&w).len(), 2, "pre-started again: {}", w.log());
    // A reload starts copies again (this one prints nothing early: it is not the first).
    daemon.signal("HUP");
    let (p3, ..) = wait_starts(&w, 3)[2].clone();
    w.job("b", &job("b?"));
    let v = wait_verdict(&w, "b");
    assert_eq!(v["answer"]["pid"], p3, "the new copy answered: {v}");
}

/// A fake codex (`bin/codex`, an executable named as the real one): records its argv
/// and host pid as it starts, then reads stdin to its end (the prompt, when it was
/// started with `-`; nothing from /dev/null), records it, and answers with its pid as
/// `exec --json` events.
const FAKE_CODEX: &str = r#"read -r P _ < /proc/self/stat
printf '%s\0' "$@" > "$W/codex-argv.$P"
echo "$P" >> "$W/codex-starts"
prompt=$(cat)
printf '%s' "$prompt" > "$W/codex-stdin.$P"
echo '{"type":"thread.started","thread_id":"t"}'
echo "{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"agent_message\",\"text\":\"{\\\"ok\\\": true, \\\"pid\\\": $P}\"}}"
echo '{"type":"turn.completed","usage":{"input_tokens":3,"cached_input_tokens":0,"output_tokens":1}}'
"#;

/// A fake Claude Code whose login is gone: a copy waits for its prompt like the real
/// one, then says so on stdout and exits 1, as Claude Code 2.1.328 does.
const LOGGED_OUT_CLAUDE: &str = r#"read -r P _ < /proc/self/stat
echo "$P" >> "$W/claude-starts"
read -r line
echo 'Not logged in · Please run /login'
exit 1
"#;

/// Issue 42 item 2: the copy waits for the runner jobs take first. With claude benched
/// (its login gone), a job's first runner is codex, so codex is what waits: started
/// with `-` where its prompt goes, the prompt written on its stdin by the job that
/// takes it. No claude copy is started again while claude is benched.
#[test]
fn with_claude_benched_the_waiting_copy_is_codex_with_its_prompt_on_stdin() {
    let w = World::new();
    let root = w.path("");
    let claude = w.path("bin/claude.sh");
    std::fs::write(
        &claude,
        format!("W={}\n{LOGGED_OUT_CLAUDE}", root.display()),
    )
    .unwrap();
    let codex = w.fake_program("codex", &format!("W={}\n{FAKE_CODEX}", root.display()));
    w.config(&format!(
        "workers = 2\nrescan_seconds = 1\n[health]\nbackoff_start_seconds = 3600\n\
         [[runners.default]]\nname = \"claude\"\n\
         argv = [\"/bin/sh\", {claude:?}, \"--input-format\", \"stream-json\", \"--output-format\", \"stream-json\"]\n\
         prestart = 1\n\
         [[runners.default]]\nname = \"codex\"\n\
         argv = [{codex:?}, \"exec\", \"--json\", \"--\", \"{{prompt}}\"]\nprestart = 1\n"
    ));
    let _daemon = start(&w);
    let lines = |file: &str| w.read(file).lines().map(str::to_string).collect::<Vec<_>>();
    let argv = |pid: &str| -> Vec<String> {
        w.read(&format!("codex-argv.{pid}"))
            .split('\0')
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect()
    };
    // Nothing is benched yet: the table's first runner waits, and only it.
    wait_for("a claude copy waiting", NO_HANG, || {
        lines("claude-starts").len() == 1
    });
    w.wait_log("runner pre-started");
    assert!(lines("codex-starts").is_empty(), "{}", w.log());

    // The job takes it; claude fails and is benched; codex, started with the job, answers.
    w.job("a", &job("a?"));
    let v = wait_verdict(&w, "a");
    assert_eq!(
        (&v["outcome"], &v["runner"]),
        (&json!("hit"), &json!("codex")),
        "{v}"
    );
    assert_eq!(v["attempts"][0]["runner"], "claude", "{v}");
    assert_eq!(v["attempts"][0]["ok"], false, "{v}");
    let cold = v["answer"]["pid"].to_string();
    assert_eq!(
        argv(&cold),
        ["exec", "--json", "--", "a?"],
        "spawned with its job"
    );

    // Now codex is what jobs take first: a copy of it waits, started with `-`.
    wait_for("a codex copy waiting", NO_HANG, || {
        lines("codex-starts").len() == 2
    });
    let copy = lines("codex-starts")[1].clone();
    assert_eq!(
        argv(&copy),
        ["exec", "--json", "--", "-"],
        "no job data in its argv"
    );
    wait_for("the codex copy logged", NO_HANG, || {
        w.log()
            .lines()
            .any(|l| l.contains("runner pre-started") && l.contains("runner=codex"))
    });
    assert!(
        !w.path(&format!("codex-stdin.{copy}")).exists(),
        "no prompt yet"
    );

    w.job("b", &job("is \"b\" right?"));
    let v = wait_verdict(&w, "b");
    assert_eq!(v["outcome"], "hit", "{v}");
    assert_eq!(
        v["answer"]["pid"].to_string(),
        copy,
        "the waiting codex answered: {v}"
    );
    assert_eq!(
        v["attempts"].as_array().map(Vec::len),
        Some(1),
        "benched claude goes last: {v}"
    );
    assert_eq!(
        w.read(&format!("codex-stdin.{copy}")),
        "is \"b\" right?",
        "the prompt came on stdin"
    );
    let log = w.log();
    assert!(
        log.lines().any(|l| l.contains("runner start id=b ")
            && l.contains("runner=codex")
            && l.contains("prestarted=true")),
        "{log}"
    );
    // A fresh codex copy replaces it; claude, benched, never waits again.
    wait_for("the next codex copy", NO_HANG, || {
        lines("codex-starts").len() == 3
    });
    assert_eq!(lines("claude-starts").len(), 1, "{}", w.log());
}

/// A fake stream-json claude that prints its final `result` event and then does not
/// exit (a CLI still cleaning up, or hung).
const LINGERING_CLAUDE: &str = r#"read -r P _ < /proc/self/stat
P=$P@$(stat -Lc %i /proc/self/ns/pid)
echo "$P $(pwd) [$(ls -A)]" >> "$W/starts"
read -r line
echo "{\"type\":\"result\",\"session_id\":\"s\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"{\\\"ok\\\": true, \\\"pid\\\": \\\"$P\\\"}\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}"
exec sleep 600
"#;

/// Issue 42 item 5: a stream's answer is taken at its final `result` event, not at the
/// runner's exit: the verdict comes though the runner never exits on its own (its
/// job's timeout is 10 minutes away), and the runner is then stopped and reaped like
/// any finished one, its folder removed.
#[test]
fn a_stream_is_answered_at_its_final_event_and_the_runner_is_then_stopped() {
    let w = world_with("claude", LINGERING_CLAUDE);
    let _daemon = start(&w);
    let (p1, dir1, _) = wait_starts(&w, 1)[0].clone();
    let h1 = host(&p1);
    let slow = json!({"prompt": "a?", "hit_if_all_true": ["ok"], "timeout_seconds": 600});
    w.job("a", &slow);
    let v = wait_verdict(&w, "a");
    assert_eq!(v["outcome"], "hit", "{v}");
    assert_eq!(answered_by(&v), p1, "{v}");
    assert_eq!(v["attempts"][0]["reason"], "answered", "{v}");
    assert_eq!(
        wait_gone(&[h1], NO_HANG),
        Vec::<u32>::new(),
        "the runner was stopped"
    );
    wait_for("its folder removed", NO_HANG, || !dir1.exists());
    w.wait_log("job finished id=a");
}

/// The same for a runner started with its job, through `llm-judge run`.
#[test]
fn run_takes_the_answer_at_the_final_event_of_a_runner_that_lingers() {
    let w = World::new();
    let body = r#"printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"result":"{\"ok\": true}","session_id":"s"}'
hostpid > "$W/lingering"
exec sleep 600"#;
    let script = w.script("lingers", body);
    let runners = json!([[
        "claude",
        [
            "/bin/sh",
            s(&script),
            "--output-format",
            "stream-json",
            "--",
            "{prompt}"
        ]
    ]]);
    let slow = json!({"prompt": "a?", "hit_if_all_true": ["ok"], "timeout_seconds": 600});
    let job = w.job("a", &slow);
    // Bounded well below the job's timeout: without the final event it waits for that.
    let out = w.run_file(&job, Some(&runners.to_string()));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let v = w.verdict("a");
    assert_eq!(v["outcome"], "hit", "{v}");
    assert_eq!(v["attempts"][0]["reason"], "answered", "{v}");
    let pid = read_pid(&w.path("lingering"));
    assert_eq!(
        wait_gone(&[pid], NO_HANG),
        Vec::<u32>::new(),
        "stopped before run exits"
    );
}
