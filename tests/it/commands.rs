//! Integration tests of the client commands (docs/reference.md, "Command line"): enqueue, drain,
//! status, doctor, with the real binary and fake runners.

use crate::support::*;

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

fn run(mut cmd: Command, args: &[&str]) -> Output {
    cmd.args(args).output().expect("run llm-judge")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn lines(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Publishes a verdict file as the judge would.
fn verdict_file(w: &World, transcript: &str, stem: &str, mtime_secs: u64) {
    let dir = w.verdict_folder(transcript);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{stem}.json"));
    fs::write(
        &path,
        json!({"id": stem, "transcript": transcript, "outcome": "clean"}).to_string(),
    )
    .unwrap();
    let t = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(mtime_secs);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[test]
fn round_trip_enqueue_daemon_drain() {
    let w = World::new();
    let fake = w.runner("fake", &answer(r#"{"retracts": true, "other": false}"#));
    let _d = w.start(std::slice::from_ref(&fake));
    let out = run(
        w.command(std::slice::from_ref(&fake)),
        &[
            "enqueue",
            "--prompt",
            "did it retract?",
            "--transcript",
            "/t/1.jsonl",
            "--hook",
            "stop",
            "--hit-if-any-true",
            "retracts=It retracted.",
            "--hit-if-any-true",
            "other=Other.",
            "--rule-id",
            "r1",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let id = stdout(&out).trim().to_string();
    assert_eq!(id.len(), 32, "a random 32-hex id: {id}");
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    let dir = w.verdict_folder("/t/1.jsonl");
    wait_for("verdict", NO_HANG, || {
        dir.join(format!("{id}.json")).exists()
    });
    let out = run(w.command(&[]), &["drain", "--transcript", "/t/1.jsonl"]);
    assert!(out.status.success());
    let got = lines(&out);
    assert_eq!(got.len(), 1);
    let v = &got[0];
    assert_eq!(
        (v["id"].as_str(), v["outcome"].as_str(), v["hook"].as_str()),
        (Some(id.as_str()), Some("hit"), Some("stop"))
    );
    assert_eq!(v["on_hit"], "It retracted.");
    assert_eq!(v["rule_id"], "r1");
    assert!(names(&dir).is_empty(), "drained verdicts are removed");
    assert!(
        lines(&run(
            w.command(&[]),
            &["drain", "--transcript", "/t/1.jsonl"]
        ))
        .is_empty()
    );
}

#[test]
fn enqueue_json_job_with_flags_over_it() {
    let w = World::new();
    let job = w.path("job.json");
    fs::write(
        &job,
        r#"{"prompt": "from file", "id": "j1", "extra": [1, 2], "hit_if_all_true": ["x"]}"#,
    )
    .unwrap();
    let out = run(
        w.command(&[]),
        &[
            "enqueue",
            "--json",
            job.to_str().unwrap(),
            "--transcript",
            "T",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "j1");
    let written: Value = w.queued_job("j1");
    assert_eq!(written["prompt"], "from file");
    assert_eq!(written["transcript"], "T");
    assert_eq!(written["extra"], json!([1, 2]), "other keys are kept");
    let hidden: Vec<String> = names(&w.state().join("jobs"))
        .into_iter()
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "no temp file left: {hidden:?}");
}

#[test]
fn enqueue_prompt_from_stdin() {
    let w = World::new();
    let mut cmd = w.command(&[]);
    let mut child = cmd
        .args(["enqueue", "--prompt-file", "-", "--id", "s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all("line one\n--version\n".as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let written: Value = w.queued_job("s");
    assert_eq!(written["prompt"], "line one\n--version\n");
}

#[test]
fn enqueue_wait_prints_the_verdict_and_removes_it() {
    let w = World::new();
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let _d = w.start(std::slice::from_ref(&fake));
    let out = run(
        w.command(&[]),
        &[
            "enqueue",
            "--prompt",
            "p",
            "--id",
            "w1",
            "--transcript",
            "T",
            "--wait",
            "60",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let mut it = text.lines();
    assert_eq!(it.next(), Some("w1"));
    let v: Value = serde_json::from_str(it.next().expect("the verdict line")).unwrap();
    assert_eq!(
        (v["id"].as_str(), v["outcome"].as_str()),
        (Some("w1"), Some("hit"))
    );
    assert!(
        w.verdicts().is_empty(),
        "the waited-for verdict was removed"
    );
}

#[test]
fn status_counts_a_verdict_as_soon_as_enqueue_wait_returned_it() {
    // status.json is rewritten at most once a second; the count must not wait for it.
    let w = World::new();
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let _d = w.start(std::slice::from_ref(&fake));
    for n in 1..=3u64 {
        let id = format!("c{n}");
        let out = run(
            w.command(&[]),
            &[
                "enqueue",
                "--prompt",
                &id,
                "--id",
                &id,
                "--hit-if-all-true",
                "ok",
                "--wait",
                "60",
            ],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("\"outcome\":\"hit\""),
            "{}",
            stdout(&out)
        );
        let s: Value =
            serde_json::from_str(&stdout(&run(w.command(&[]), &["status", "--json"]))).unwrap();
        assert_eq!(s["outcomes"]["hit"], n, "{s}");
        assert_eq!(s["daemon"]["running"], true);
    }
}

#[test]
fn enqueue_wait_times_out_with_124_and_leaves_the_job_queued() {
    let w = World::new();
    let out = run(
        w.command(&[]),
        &["enqueue", "--prompt", "p", "--id", "w2", "--wait", "0.3"],
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "w2");
    assert!(
        stderr(&out).contains("no verdict for w2"),
        "{}",
        stderr(&out)
    );
    assert_eq!(w.jobs_left(), ["w2.json"]);
}

#[test]
fn enqueue_recursion_guard_writes_nothing() {
    let w = World::new();
    fs::remove_dir_all(w.state()).unwrap();
    let mut cmd = w.command(&[]);
    cmd.env("CATSTACK_LLM_JUDGE_CHILD", "1");
    let out = run(cmd, &["enqueue", "--prompt", "p"]);
    assert!(out.status.success());
    assert_eq!(stdout(&out), "");
    assert!(
        !w.state().exists(),
        "nothing written, not even the state folder"
    );
}

/// A job with no rule is queued with a warning that every answer is a hit; `-qq`
/// keeps enqueue's warnings off stderr (`-q` still shows them).
#[test]
fn enqueue_warns_of_a_job_without_a_rule_unless_told_to_be_quiet() {
    let w = World::new();
    let enqueue = |quiet: &[&str], id: &str| {
        let mut args = quiet.to_vec();
        args.extend(["enqueue", "--prompt", "p", "--id", id]);
        run(w.command(&[]), &args)
    };
    let out = enqueue(&[], "a");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("job a has no rule")
            && stderr(&out).contains("every answer is a hit"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&enqueue(&["-q"], "b")).contains("has no rule"));
    for quiet in ["-qq", "-qqq"] {
        let out = enqueue(&[quiet], &format!("c{quiet}"));
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stderr(&out), "", "{quiet}");
    }
    let with_rule = run(
        w.command(&[]),
        &[
            "enqueue",
            "--prompt",
            "p",
            "--id",
            "d",
            "--hit-if-all-true",
            "x",
            "--transcript",
            "T",
        ],
    );
    assert!(
        !stderr(&with_rule).contains("no rule"),
        "{}",
        stderr(&with_rule)
    );
}

#[test]
fn every_enqueue_validation_error_exits_2_and_writes_nothing() {
    let w = World::new();
    fs::write(w.path("list.json"), "[1]").unwrap();
    fs::write(w.path("broken.json"), "{").unwrap();
    fs::write(
        w.path("badshape.json"),
        r#"{"prompt": "p", "hit_if_all_true": "x"}"#,
    )
    .unwrap();
    fs::write(
        w.path("badmode.json"),
        r#"{"prompt": "p", "mode": "investigat"}"#,
    )
    .unwrap();
    fs::write(
        w.path("rulelike.json"),
        r#"{"prompt": "p", "hit_if_all": ["x"]}"#,
    )
    .unwrap();
    let list = w.path("list.json").display().to_string();
    let broken = w.path("broken.json").display().to_string();
    let badshape = w.path("badshape.json").display().to_string();
    let badmode = w.path("badmode.json").display().to_string();
    let rulelike = w.path("rulelike.json").display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--transcript", "T"], "missing \"prompt\""),
        (vec!["--prompt", "p", "--id", "a/b"], "contains '/'"),
        (vec!["--prompt", "p", "--id", ".hidden"], "starts with '.'"),
        (vec!["--prompt", "p", "--id", ""], "empty"),
        (
            vec!["--prompt", "p", "--hit-if-any-true", "novalue"],
            "KEY=NOTICE",
        ),
        (vec!["--prompt", "p", "--timeout", "0"], "--timeout"),
        (vec!["--prompt", "p", "--timeout", "-5"], "--timeout"),
        (vec!["--prompt", "p", "--timeout", "NaN"], "--timeout"),
        (vec!["--prompt", "p", "--mode", "write"], "invalid value"),
        (vec!["--prompt", "p", "--wait", "inf"], "--wait"),
        (vec!["--json", &list], "one JSON object"),
        (vec!["--json", &broken], "not valid JSON"),
        (vec!["--json", &badshape], "hit_if_all_true"),
        (vec!["--json", &badmode], "unknown \"mode\" \"investigat\""),
        (
            vec!["--json", &rulelike],
            "\"hit_if_all\" is not a job key but looks like a misspelt \"hit_if_all_true\"",
        ),
        (vec!["--prompt-file", "/no/such/file"], "/no/such/file"),
        (
            vec!["--prompt", "p", "--prompt-file", "-"],
            "cannot be used with",
        ),
        (vec!["--json", "-", "--prompt-file", "-"], "both read stdin"),
    ];
    for (args, words) in cases {
        let mut all = vec!["enqueue"];
        all.extend(&args);
        let mut cmd = w.command(&[]);
        cmd.stdin(Stdio::null());
        let out = run(cmd, &all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(words), "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "{args:?}");
        assert!(w.jobs_left().is_empty(), "{args:?} wrote a job");
    }
}

#[test]
fn drain_is_oldest_first_and_many_drains_at_once_return_each_verdict_once() {
    let w = World::new();
    const N: u64 = 300;
    for i in 0..N {
        // Names in the opposite order of mtimes: order must follow mtime.
        verdict_file(&w, "T", &format!("v{:03}", N - i), 1_000 + i);
    }
    let drains: Vec<_> = (0..8)
        .map(|_| {
            let mut cmd = w.command(&[]);
            cmd.args(["drain", "--transcript", "T"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let mut all: Vec<String> = Vec::new();
    for child in drains {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let ids: Vec<String> = lines(&out)
            .iter()
            .map(|v| v["id"].as_str().unwrap().to_string())
            .collect();
        // Each drain's own output is oldest first.
        let mut sorted = ids.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(ids, sorted, "oldest (highest name here) first");
        all.extend(ids);
    }
    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), total, "no verdict returned twice");
    assert_eq!(total as u64, N, "no verdict lost");
}

#[test]
fn a_crashed_drains_claim_is_recovered_and_a_closed_pipe_gives_back() {
    let w = World::new();
    verdict_file(&w, "T", "a", 1_000);
    let dir = w.verdict_folder("T");
    // A drain that died holding "b": pid 999999999 does not exist.
    fs::create_dir(dir.join(".draining-999999999-12345")).unwrap();
    fs::write(
        dir.join(".draining-999999999-12345/b.json"),
        json!({"id": "b"}).to_string(),
    )
    .unwrap();
    // First a drain whose stdout is closed before it starts: nothing is lost.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = w.command(&[]);
    cmd.args(["drain", "--transcript", "T"])
        .stdout(Stdio::from(writer));
    let status = cmd.status().unwrap();
    assert!(!status.success(), "a drain that cannot print fails");
    assert_eq!(
        names(&dir),
        ["a.json", "b.json"],
        "the claim was recovered and the unprinted verdict given back"
    );
    let out = run(w.command(&[]), &["drain", "--transcript", "T"]);
    let ids: Vec<Value> = lines(&out).iter().map(|v| v["id"].clone()).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&json!("a")) && ids.contains(&json!("b")));
    assert!(names(&dir).is_empty());
}

#[test]
fn an_unreadable_verdict_file_comes_back_as_unchecked() {
    let w = World::new();
    let dir = w.verdict_folder("T");
    fs::create_dir_all(dir.join("bad.json")).unwrap();
    fs::write(dir.join("torn.json"), "{\"id\": ").unwrap();
    let out = run(w.command(&[]), &["drain", "--transcript", "T"]);
    assert!(out.status.success());
    let got = lines(&out);
    assert_eq!(got.len(), 2);
    for v in &got {
        assert_eq!(v["outcome"], "unchecked");
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .starts_with("unreadable verdict file"),
            "{v}"
        );
    }
    assert!(names(&dir).is_empty());
}

#[test]
fn status_with_the_daemon_down_and_up() {
    let w = World::new();
    w.job("old", &json!({"prompt": "p"}));
    let out = run(w.command(&[]), &["status", "--json"]);
    assert!(out.status.success());
    let s: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(s["daemon"]["running"], false);
    assert_eq!(s["daemon"]["pid"], Value::Null);
    assert_eq!(s["queue"]["waiting"], 1);
    assert!(s["queue"]["oldest_age_seconds"].as_f64().is_some());
    assert_eq!(s["running"], json!([]));
    let human = stdout(&run(w.command(&[]), &["status"]));
    assert!(
        human.contains("not running") && human.contains("1 waiting"),
        "{human}"
    );

    let blocker = w.runner("blocker", &held("touch $W/started", r#"{"ok": true}"#));
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    w.config("workers = 1");
    let d = w.start(&[blocker]);
    wait_for("runner started", NO_HANG, || w.path("started").exists());
    w.job("young", &json!({"prompt": "p", "hook": "stop"}));
    let status = || -> Value {
        serde_json::from_str(&stdout(&run(w.command(&[]), &["status", "--json"]))).unwrap()
    };
    wait_for("status shows the running job", NO_HANG, || {
        let s = status();
        s["running"]
            .as_array()
            .is_some_and(|r| r.len() == 1 && r[0]["runner"] == "blocker")
    });
    let s = status();
    assert_eq!(s["daemon"]["running"], true);
    assert_eq!(s["daemon"]["pid"], d.child.id());
    assert_eq!(s["daemon"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(s["daemon"]["uptime_seconds"].as_f64().is_some());
    assert_eq!(s["queue"]["waiting"], 1);
    let r = &s["running"][0];
    assert_eq!(r["id"], "old");
    assert!(r["age_seconds"].as_f64().is_some() && r.get("hook").is_some());
    w.collect_output();
    wait_for("both judged", NO_HANG, || w.verdicts().len() == 2);
    wait_for("status shows outcomes and runner stats", NO_HANG, || {
        let s = status();
        s["outcomes"]["hit"] == 2 && s["runners"]["blocker"]["answer_rate"] == 1.0
    });
    let s = status();
    assert_eq!(
        (
            s["outcomes"]["clean"].as_u64(),
            s["outcomes"]["unchecked"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert!(s["runners"]["blocker"]["median_seconds"].as_f64().is_some());
    assert!(s["runners"]["blocker"].get("health").is_some());
    drop(fake);
}

fn doctor(w: &World, extra_path: bool) -> Output {
    let mut cmd = w.command(&[]);
    cmd.env_remove("CATSTACK_LLM_JUDGE_RUNNERS");
    if extra_path {
        let path = format!(
            "{}:{}",
            w.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env("PATH", path);
    }
    run(cmd, &["doctor"])
}

#[test]
fn doctor_finds_a_fake_runner_and_reports_a_missing_one() {
    let w = World::new();
    w.fake_program("codex", "echo 'codex-cli 9.9.9'");
    w.fake_program("claude", "echo '9.9.9 (Claude Code)'");
    // Logged in (a World is; doctor fails a table whose runners are all logged out).
    let out = doctor(&w, true);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    let codex = w.path("bin/codex").display().to_string();
    assert!(
        text.contains(&format!("default runner codex: {codex} (codex-cli 9.9.9)")),
        "{text}"
    );
    assert!(
        text.contains("investigate runner claude:") && text.contains("(9.9.9 (Claude Code))"),
        "{text}"
    );
    assert!(
        text.contains("default runner cursor: \"cursor-agent\" not found on PATH"),
        "{text}"
    );
    assert!(text.contains("passes the read-only safety check"), "{text}");
    assert!(text.contains("no daemon is running"), "{text}");
}

#[test]
fn doctor_fails_when_no_runner_is_installed() {
    let w = World::new();
    let out = doctor(&w, false);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("FAIL  default table: no runner is installed"),
        "{}",
        stdout(&out)
    );
}

/// Installed but logged out everywhere: no runner of a table is usable, so its jobs
/// end unchecked; `--json` says the same per runner.
#[test]
fn doctor_fails_when_every_installed_runner_is_logged_out() {
    let w = World::new();
    w.log_out();
    w.fake_program("codex", "echo 'codex-cli 9.9.9'");
    w.fake_program("claude", "echo '9.9.9 (Claude Code)'");
    let out = doctor(&w, true);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("FAIL  default table: no runner is usable"),
        "{}",
        stdout(&out)
    );
    let mut cmd = w.command(&[]);
    cmd.env_remove("CATSTACK_LLM_JUDGE_RUNNERS").env(
        "PATH",
        format!(
            "{}:{}",
            w.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    );
    let out = run(cmd, &["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["ok"], false);
    let codex = v["runners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["table"] == "default" && r["name"] == "codex")
        .unwrap();
    assert_eq!(codex["login"], "missing");
    assert_eq!(codex["usable"], false);
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["level"] == "fail"
                && f["message"]
                    .as_str()
                    .unwrap()
                    .contains("no runner is usable")),
        "{v:#}"
    );
    // Logged in: usable, exit 0.
    w.log_in();
    let out = doctor(&w, true);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn doctor_fails_on_an_unsafe_investigate_table() {
    let w = World::new();
    w.fake_program("codex", "echo 'codex-cli 9.9.9'");
    w.config("[[runners.investigate]]\nname = \"cur\"\nargv = [\"cursor-agent\", \"-p\", \"--\", \"{prompt}\"]\n");
    let out = doctor(&w, true);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("FAIL  config:") && text.contains("investigate runner \"cur\""),
        "{text}"
    );
}

#[test]
fn doctor_fails_on_a_world_writable_state_folder() {
    let w = World::new();
    w.fake_program("codex", "echo 'codex-cli 9.9.9'");
    w.fake_program("claude", "echo '9.9.9 (Claude Code)'");
    fs::set_permissions(w.state(), fs::Permissions::from_mode(0o777)).unwrap();
    let out = doctor(&w, true);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("FAIL  the daemon would refuse to start") && text.contains("chmod o-w"),
        "{text}"
    );
}

#[test]
fn every_command_help_has_an_example() {
    for cmd in [
        "daemon",
        "run",
        "ask",
        "enqueue",
        "drain",
        "runners",
        "status",
        "doctor",
        "completions",
        "man",
    ] {
        let out = Command::new(BIN).args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success());
        assert!(
            stdout(&out).contains("Example"),
            "{cmd} --help has no example"
        );
    }
}

/// `enqueue` refuses a state folder the daemon would refuse (others could plant jobs),
/// with the same words and fix, and writes nothing.
#[test]
fn enqueue_refuses_a_state_folder_writable_by_others() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    fs::set_permissions(w.state(), fs::Permissions::from_mode(0o777)).unwrap();
    let out = run(w.command(&[]), &["enqueue", "--prompt", "p", "--id", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is writable by others") && stderr(&out).contains("chmod o-w"),
        "{}",
        stderr(&out)
    );
    assert!(w.jobs_left().is_empty());
}

/// `status` and `drain` run by another user on a private state folder name the folder,
/// its owner and what to do ("daemon not running" and a bare "Permission denied"
/// before). Root only: the test drops to `nobody` with setpriv.
#[test]
fn status_and_drain_of_another_users_state_folder_say_whose_it_is() {
    use std::os::unix::fs::PermissionsExt;
    if !rustix::process::geteuid().is_root() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!("note: needs root and setpriv to run as another user; not run here");
        return;
    }
    let w = World::new();
    // The world's own folder open to others; the state folder stays private (0700).
    fs::set_permissions(&w.root, fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |args: &[&str]| {
        let mut cmd = Command::new("/usr/bin/setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
            .arg("--state-dir")
            .arg(w.state())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", "/nonexistent");
        cmd.output().expect("setpriv")
    };
    let probe = as_nobody(&["--version"]);
    if !probe.status.success() {
        eprintln!(
            "note: `nobody` cannot run {BIN} here ({}); not run",
            stderr(&probe).trim()
        );
        return;
    }
    for args in [&["status"][..], &["drain", "--transcript", "T"][..]] {
        let out = as_nobody(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains(&format!(
                "{} is not open to this user (uid 65534): it belongs to uid 0",
                w.state().display()
            )) && said.contains("--state-dir"),
            "{args:?}: {said}"
        );
    }
}
