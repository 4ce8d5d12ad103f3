//! The CLI details catstack's judge.py callers rely on (issue 13; docs/reference.md,
//! "Command line" and "The catstack drop-in"): `ask`'s outcome and `--prompt-file`,
//! `enqueue`'s subagent rule and warnings, `run` with a bad runner variable, the temp-file
//! grace of the start-up sweep, and doctor's state-folder check; `runners` (the drop-in's
//! `runners()`) and `--set` (its module constants, issue 31).

use crate::support::*;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

const RUNNERS_VAR: &str = "CATSTACK_LLM_JUDGE_RUNNERS";
const STATE_VAR: &str = "CATSTACK_LLM_JUDGE_STATE_DIR";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `cmd` with `stdin` fed in; bounded by the child's own exit (fake runners answer at once).
fn run_with_stdin(mut cmd: Command, stdin: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start llm-judge");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("llm-judge output")
}

fn output(mut cmd: Command) -> Output {
    cmd.output().expect("run llm-judge")
}

#[test]
fn ask_prints_answered_and_reads_the_prompt_from_a_file_or_stdin() {
    let w = World::new();
    let fake = w.runner(
        "fake",
        &format!(
            "printf '%s' \"$1\" > $W/prompt\n{}",
            answer(r#"{"ok": true}"#)
        ),
    );
    let mut cmd = w.command(std::slice::from_ref(&fake));
    cmd.args(["ask", "--prompt-file", "-"]);
    let out = run_with_stdin(cmd, "the question\nover two lines");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["outcome"], "answered");
    assert_eq!(v["runner"], "fake");
    assert_eq!(v["answer"], json!({"ok": true}));
    assert_eq!(
        fs::read_to_string(w.path("prompt")).unwrap(),
        "the question\nover two lines"
    );

    fs::write(w.path("q.txt"), "from a file").unwrap();
    let mut cmd = w.command(std::slice::from_ref(&fake));
    cmd.args(["ask", "--prompt-file"]).arg(w.path("q.txt"));
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(fs::read_to_string(w.path("prompt")).unwrap(), "from a file");

    let mut cmd = w.command(std::slice::from_ref(&fake));
    cmd.args(["ask", "--prompt-file"])
        .arg(w.path("missing.txt"));
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--prompt-file"),
        "{}",
        text(&out.stderr)
    );

    let broken = w.runner("broken", "exit 3");
    let mut cmd = w.command(&[broken]);
    cmd.args(["ask", "q"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["outcome"], "unchecked");
}

#[test]
fn enqueue_refuses_subagent_jobs_unless_allowed() {
    let w = World::new();
    let side = w.path("side.jsonl");
    fs::write(&side, "{\"isSidechain\": true}\n{}\n").unwrap();
    let agent = w.path("agent.jsonl");
    fs::write(&agent, "{\"agent_id\": \"a1\"}\n").unwrap();
    let main = w.path("main.jsonl");
    fs::write(&main, "{\"isSidechain\": false, \"agent_id\": \"\"}\n").unwrap();
    let subagent_jobs = [
        json!({"prompt": "p", "transcript": "T", "agent_id": "a1"}),
        json!({"prompt": "p", "transcript": "T", "isSidechain": true}),
        json!({"prompt": "p", "transcript": "T", "is_sidechain": 1}),
        json!({"prompt": "p", "transcript": "/s/subagents/agent-1.jsonl"}),
        json!({"prompt": "p", "transcript": "C:\\s\\subagents\\a.jsonl"}),
        json!({"prompt": "p", "transcript": side.to_string_lossy()}),
        json!({"prompt": "p", "transcript": agent.to_string_lossy()}),
    ];
    for job in &subagent_jobs {
        let mut cmd = w.command(&[]);
        cmd.args(["enqueue", "--json", "-"]);
        let out = run_with_stdin(cmd, &job.to_string());
        assert_eq!(out.status.code(), Some(0), "{job}");
        assert_eq!(text(&out.stdout), "", "{job}: no id printed");
        assert!(
            text(&out.stderr).contains("subagent"),
            "{job}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(w.jobs_left(), Vec::<String>::new(), "nothing was queued");
    // Not subagent jobs: empty markers, a main transcript, a part only containing the word.
    for (id, job) in [
        (
            "m1",
            json!({"prompt": "p", "transcript": main.to_string_lossy(), "agent_id": ""}),
        ),
        (
            "m2",
            json!({"prompt": "p", "transcript": "/s/subagents-old/a.jsonl"}),
        ),
        (
            "m3",
            json!({"prompt": "p", "transcript": w.path("missing.jsonl").to_string_lossy()}),
        ),
    ] {
        let mut cmd = w.command(&[]);
        cmd.args(["enqueue", "--id", id, "--json", "-"]);
        let out = run_with_stdin(cmd, &job.to_string());
        assert_eq!(
            text(&out.stdout),
            format!("{id}\n"),
            "{job}: {}",
            text(&out.stderr)
        );
    }
    let mut cmd = w.command(&[]);
    cmd.args([
        "enqueue",
        "--allow-subagent",
        "--id",
        "allowed",
        "--json",
        "-",
    ]);
    let out = run_with_stdin(cmd, &subagent_jobs[0].to_string());
    assert_eq!(text(&out.stdout), "allowed\n");
    let mut left = w.jobs_left();
    left.sort();
    assert_eq!(left, ["allowed.json", "m1.json", "m2.json", "m3.json"]);
}

#[test]
fn enqueue_warns_when_no_daemon_holds_the_lock_and_when_there_is_no_transcript() {
    let w = World::new();
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let mut cmd = w.command(std::slice::from_ref(&fake));
    cmd.args(["enqueue", "--prompt", "p"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    assert!(err.contains("no daemon holds the lock"), "{err}");
    assert!(err.contains("no transcript"), "{err}");

    let _d = w.start(std::slice::from_ref(&fake));
    wait_for("the daemon's lock", NO_HANG, || {
        fs::read_to_string(w.state().join("daemon.lock")).is_ok_and(|t| !t.trim().is_empty())
            && fs::metadata(w.state().join("status.json")).is_ok()
    });
    let mut cmd = w.command(std::slice::from_ref(&fake));
    cmd.args(["enqueue", "--prompt", "p", "--transcript", "T"])
        .args(["--hit-if-all-true", "ok"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stderr),
        "",
        "no warning with a daemon, a transcript and a rule"
    );
}

#[test]
fn run_with_a_bad_runner_variable_writes_a_judge_error_verdict_and_removes_the_job() {
    let w = World::new();
    w.job(
        "bad-var",
        &json!({"prompt": "p", "transcript": "T", "hook": "h"}),
    );
    let mut cmd = w.command(&[]);
    cmd.env(RUNNERS_VAR, "not json")
        .arg("run")
        .arg(w.state().join("jobs/bad-var.json"));
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(RUNNERS_VAR));
    assert_eq!(w.jobs_left(), Vec::<String>::new(), "the job was removed");
    let v = w.verdict("bad-var");
    assert_eq!(v["outcome"], "unchecked");
    assert_eq!(v["hook"], "h");
    assert_eq!(v["attempts"], json!([]));
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("judge error"), "{reason}");
    assert!(reason.contains(RUNNERS_VAR), "{reason}");
    // catstack's tests read judge.log for `job <id> failed`; the line names the variable too.
    let log = w.log();
    let line = log
        .lines()
        .find(|l| l.contains("job bad-var failed"))
        .unwrap_or_else(|| panic!("no `job bad-var failed` line in judge.log:\n{log}"));
    assert!(line.contains(RUNNERS_VAR), "{line}");
    // Any other config error still refuses (exit 2) and leaves the job queued.
    w.job("bad-config", &json!({"prompt": "p"}));
    fs::write(w.path("config.toml"), "no_such_key = 1\n").unwrap();
    let mut cmd = w.command(&[]);
    cmd.arg("run").arg(w.state().join("jobs/bad-config.json"));
    assert_eq!(output(cmd).status.code(), Some(2));
    assert_eq!(w.jobs_left(), ["bad-config.json"]);
}

#[test]
fn the_start_up_sweep_keeps_young_temp_files_without_a_pid() {
    let w = World::new();
    let folder = w.verdict_folder("T");
    fs::create_dir_all(&folder).unwrap();
    // catstack's Python writer names its temp files `.XXXXXXXX.tmp` (no pid).
    let young = folder.join(".k2j4h5g6.tmp");
    let old = folder.join(".a1b2c3d4.tmp");
    fs::write(&young, "{\"id\": \"being written").unwrap();
    fs::write(&old, "{}").unwrap();
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    let _d = w.start(&[]);
    w.wait_log("recovery sweep");
    assert!(young.exists(), "a young temp file is left to its writer");
    assert!(!old.exists(), "an old orphan temp file is swept");
}

/// `llm-judge doctor`'s stdout, with the state folder variable set to `state_var`.
fn doctor_says(w: &World, state_var: Option<&Path>) -> String {
    let mut cmd = w.command(&[]);
    if let Some(state) = state_var {
        cmd.env(STATE_VAR, state);
    }
    text(
        &output({
            cmd.arg("doctor");
            cmd
        })
        .stdout,
    )
}

#[test]
fn doctor_warns_when_hooks_and_the_daemon_resolve_different_state_folders() {
    let w = World::new();
    // Hooks resolve ~/.cache/catstack-llm-judge (the variable is unset), doctor --state-dir another.
    let said = doctor_says(&w, None);
    assert!(
        said.contains(&format!(
            "hooks using judge.py resolve the state folder {}",
            w.path("home/.cache/catstack-llm-judge").display()
        )),
        "{said}"
    );
    // Same folder on both sides: no such warning.
    let said = doctor_says(&w, Some(&w.state()));
    assert!(!said.contains("hooks using judge.py"), "{said}");
    // The daemon got the variable (as a service would), the hooks' shell does not.
    let mut daemon = w.command(&[]);
    daemon.env(STATE_VAR, w.state());
    let _d = w.start_with(daemon);
    wait_for("status.json", NO_HANG, || {
        fs::read(w.state().join("status.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .is_some_and(|v| v["state_dir_env"].is_string())
    });
    let said = doctor_says(&w, None);
    assert!(
        said.contains(&format!(
            "{STATE_VAR} is ={} for the daemon",
            w.state().display()
        )),
        "{said}"
    );
    assert!(said.contains("but unset here"), "{said}");
}

/// `llm-judge runners ...` as (exit code, the JSON table or Null, stderr).
fn runners_table(mut cmd: Command, args: &[&str]) -> (Option<i32>, Value, String) {
    let out = output({
        cmd.arg("runners").args(args);
        cmd
    });
    let table = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), table, text(&out.stderr))
}

fn names(table: &Value) -> Vec<&str> {
    let rows = table.as_array().map(Vec::as_slice).unwrap_or_default();
    rows.iter().filter_map(|row| row[0].as_str()).collect()
}

#[test]
fn runners_prints_the_table_a_mode_uses_and_the_shipped_one() {
    let w = World::new();
    let fake = w.runner("fake", "exit 0");
    for mode in ["default", "investigate"] {
        let cmd = w.command(std::slice::from_ref(&fake));
        let (code, table, err) = runners_table(cmd, &["--mode", mode]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            table,
            json!([fake]),
            "the variable replaces the {mode} table"
        );
    }
    let unset = || {
        let mut cmd = w.command(&[]);
        cmd.env_remove(RUNNERS_VAR);
        cmd
    };
    let (_, shipped_default, _) = runners_table(unset(), &["--shipped"]);
    let (_, shipped_investigate, _) =
        runners_table(unset(), &["--shipped", "--mode", "investigate"]);
    assert_eq!(names(&shipped_default), ["claude", "codex", "cursor"]);
    assert_eq!(names(&shipped_investigate), ["codex", "claude"]);
    assert_eq!(runners_table(unset(), &[]).1, shipped_default);

    // A config file's table, named by --config or by LLM_JUDGE_CONFIG.
    w.config("[[runners.default]]\nname = \"mine\"\nargv = [\"/bin/mine\", \"{prompt}\"]\n");
    let mine = json!([["mine", ["/bin/mine", "{prompt}"]]]);
    assert_eq!(runners_table(unset(), &[]).1, mine);
    let mut by_var = Command::new(BIN);
    by_var
        .env_clear()
        .env("HOME", w.path("home"))
        .env("LLM_JUDGE_CONFIG", w.path("config.toml"));
    assert_eq!(runners_table(by_var, &[]).1, mine);
    let (_, investigate, _) = runners_table(unset(), &["--mode", "investigate"]);
    assert_eq!(
        investigate, shipped_investigate,
        "the file replaced only default"
    );
    assert_eq!(runners_table(unset(), &["--shipped"]).1, shipped_default);

    // A bad variable or config is exit 2 and named; --shipped needs neither.
    let mut bad_var = w.command(&[]);
    bad_var.env(RUNNERS_VAR, "not json");
    let (code, _, err) = runners_table(bad_var, &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains(RUNNERS_VAR), "{err}");
    fs::write(w.path("config.toml"), "no_such_key = 1\n").unwrap();
    let (code, _, err) = runners_table(unset(), &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no_such_key"), "{err}");
    let (code, table, _) = runners_table(unset(), &["--shipped"]);
    assert_eq!((code, table), (Some(0), shipped_default));
}

/// An API-only config (the README's "Judge without a CLI"): `runners` lists its API
/// runner in a form that says what it is, `doctor` passes and notes, without a
/// warning, that investigate jobs would be unchecked (API runners may not
/// investigate): no rule and not the config uses investigate mode.
#[test]
fn an_api_only_config_is_listed_and_passes_doctor_noting_the_unused_investigate_table() {
    let w = World::new();
    w.config(
        "[[runners.default]]\nname = \"haiku-api\"\napi = \"anthropic\"\n\
         model = \"claude-haiku-4-5\"\napi_key_env = \"LLM_JUDGE_TEST_KEY\"\n",
    );
    let plain = || {
        let mut cmd = w.command(&[]);
        cmd.env_remove(RUNNERS_VAR).env("PATH", "/usr/bin:/bin");
        cmd.env("LLM_JUDGE_TEST_KEY", "sk-test-0123456789abcdef");
        cmd
    };
    let (code, table, err) = runners_table(plain(), &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        table,
        json!([[
            "haiku-api",
            [
                "api:anthropic",
                "claude-haiku-4-5",
                "https://api.anthropic.com/v1"
            ]
        ]])
    );
    assert!(err.contains("\"haiku-api\" is an API runner"), "{err}");
    let out = output({
        let mut cmd = plain();
        cmd.arg("doctor");
        cmd
    });
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains(
            "ok    investigate table: no runner is installed, so its jobs end unchecked; no rule \
             or config uses investigate mode, so nothing needs it"
        ),
        "{said}"
    );
    assert!(!said.contains("warn  investigate"), "{said}");
    assert!(!said.contains("FAIL"), "{said}");
}

/// The key variable of the API-only configs below.
const API_KEY_VAR: &str = "LLM_JUDGE_TEST_KEY";

/// An API-only config (its one API runner has its key) run with a PATH that has no
/// codex or claude: the investigate table has nothing that can run.
fn api_only(w: &World, extra: &str) -> impl Fn() -> Command {
    w.config(&format!(
        "[[runners.default]]\nname = \"haiku-api\"\napi = \"anthropic\"\n\
         model = \"claude-haiku-4-5\"\napi_key_env = \"{API_KEY_VAR}\"\n{extra}"
    ));
    || {
        let mut cmd = w.command(&[]);
        cmd.env_remove(RUNNERS_VAR)
            .env("PATH", "/usr/bin:/bin")
            .env(API_KEY_VAR, "sk-test-0123456789abcdef");
        cmd
    }
}

/// A user's rules file with one rule on in investigate mode.
fn investigate_rule(w: &World) -> std::path::PathBuf {
    let dir = w.xdg.join("llm-judge");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rules.toml");
    fs::write(
        &path,
        "[[rule]]\nname = \"deep\"\non = [\"stop\"]\nmode = \"investigate\"\n\
         question = \"Is a stated blocker false? Reply {\\\"false\\\": bool}\"\n\
         hit_if_all_true = [\"false\"]\nnotice = \"It is not.\"\n",
    )
    .unwrap();
    path
}

const INVESTIGATE_WARNING: &str = "investigate table: none of its runners (codex, claude) is \
    installed on the daemon's PATH and logged in, so its jobs end unchecked";

/// The daemon of an API-only config says nothing of the investigate table at start;
/// the first investigate job that comes makes it warn, once.
#[test]
fn the_daemon_warns_of_the_investigate_table_once_an_investigate_job_comes() {
    let w = World::new();
    let cmd = api_only(&w, "")();
    let _daemon = w.start_with(cmd);
    w.wait_log("ready: queue a job");
    assert!(!w.log().contains("investigate table"), "{}", w.log());
    for id in ["i1", "i2"] {
        w.job(
            id,
            &json!({"prompt": "p", "transcript": "T", "mode": "investigate"}),
        );
        let path = w.verdict_path(&transcript_hash("T"), id);
        assert!(wait_until(within(NO_HANG), || path.exists()), "{id}");
    }
    let said = w.log_lines(INVESTIGATE_WARNING);
    assert_eq!(said.len(), 1, "{}", w.log());
    assert!(said[0].contains("(an investigate job came in)"), "{said:?}");
}

/// A rule in investigate mode in the user's rules file makes the daemon warn at start,
/// naming the rule; doctor warns too. Off, the rule makes neither warn.
#[test]
fn a_rule_in_investigate_mode_makes_the_daemon_and_doctor_warn_at_start() {
    let w = World::new();
    let plain = api_only(&w, "");
    let rules = investigate_rule(&w);
    let daemon = w.start_with(plain());
    w.wait_log(&format!(
        "{INVESTIGATE_WARNING} (rule \"deep\" in {} uses mode = \"investigate\")",
        rules.display()
    ));
    drop(daemon);
    let out = output({
        let mut cmd = plain();
        cmd.arg("doctor");
        cmd
    });
    let said = text(&out.stdout);
    assert!(
        said.contains("warn  investigate table: no runner is installed, so its jobs end unchecked (rule \"deep\""),
        "{said}"
    );
    assert_eq!(out.status.code(), Some(0), "a warning: {said}");

    let text_on = fs::read_to_string(&rules).unwrap();
    fs::write(&rules, format!("{text_on}enabled = false\n")).unwrap();
    let out = output({
        let mut cmd = plain();
        cmd.arg("doctor");
        cmd
    });
    let said = text(&out.stdout);
    assert!(!said.contains("warn  investigate"), "an off rule: {said}");
}

/// A config that gives its own investigate table uses investigate mode: warned at start.
#[test]
fn a_configs_own_investigate_table_makes_the_daemon_warn_at_start() {
    let w = World::new();
    let plain = api_only(
        &w,
        "[[runners.investigate]]\nname = \"codex\"\nargv = [\"codex\", \"exec\", \"--json\", \
         \"--sandbox\", \"read-only\", \"--ignore-user-config\", \"--\", \"{prompt}\"]\n",
    );
    let _daemon = w.start_with(plain());
    w.wait_log(&format!(
        "investigate table: none of its runners (codex) is installed on the daemon's PATH and \
         logged in, so its jobs end unchecked ({} sets [[runners.investigate]])",
        w.path("config.toml").display()
    ));
}

#[test]
fn set_flags_override_config_keys_for_ask_and_run() {
    let w = World::new();
    let slow = w.runner("slow", "sleep 30");
    let mut cmd = w.command(std::slice::from_ref(&slow));
    cmd.args(["--set", "default_timeout_seconds=1", "ask", "q"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let reason = v["attempts"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("timed out after 1s"), "{reason}");

    w.job("slow-job", &json!({"prompt": "p", "transcript": "T"}));
    let mut cmd = w.command(std::slice::from_ref(&slow));
    cmd.arg("run")
        .arg(w.state().join("jobs/slow-job.json"))
        .args(["--set", "default_timeout_seconds=1"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v = w.verdict("slow-job");
    assert_eq!(v["reason"], "no runner answered: slow: timed out after 1s");

    let mut cmd = w.command(std::slice::from_ref(&slow));
    cmd.args(["--set", "kill_grace_seconds", "ask", "q"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--set kill_grace_seconds"));
}
