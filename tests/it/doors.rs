//! Bad input at every door gets a clear answer (issue 38, items 3, 4 and 6), with the
//! real binary and fake runners: a misspelt job key, a `run` path that is not a job,
//! an id enqueued twice, a job over `max_job_bytes`, and `eval` on a file that never
//! ends, a line too long, and Ctrl-C.

use crate::support::*;

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

/// Answers `{"retracts": false}` whatever it is asked.
const NO: &str = "echo '{\"retracts\": false}'\n";

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(s(path)).unwrap();
    // SAFETY: mkfifo with a valid C string only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// `llm-judge enqueue ARGS` with `stdin` on its standard input.
fn enqueue(w: &World, args: &[&str], stdin: Option<&str>) -> Finished {
    let mut cmd = w.cli();
    cmd.arg("enqueue").args(args);
    match stdin {
        Some(text) => {
            let input = w.root.join(format!("stdin-{}", args.len()));
            fs::write(&input, text).unwrap();
            cmd.stdin(fs::File::open(input).unwrap());
        }
        None => {
            cmd.stdin(std::process::Stdio::null());
        }
    }
    w.run(cmd)
}

fn queued(w: &World) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(w.jobs())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ---------------------------------------------------------------- item 3: typos

#[test]
fn enqueue_refuses_a_misspelt_job_key_and_warns_on_other_keys() {
    let w = World::new();
    let typo = r#"{"prompt": "p", "transcript": "t", "hit_if_all_ture": ["retracts"]}"#;
    let out = enqueue(&w, &["--json", "-"], Some(typo));
    out.assert_exit(2, "\"hit_if_all_ture\" is not a job key but looks like a misspelt \"hit_if_all_true\": rename it to \"hit_if_all_true\"");
    assert!(queued(&w).is_empty(), "nothing written");
    // With flags over the file too: the file's key is still checked.
    let file = w.root.join("job.json");
    fs::write(&file, r#"{"promtp": "p"}"#).unwrap();
    let out = enqueue(&w, &["--json", s(&file), "--prompt", "q"], None);
    out.assert_exit(2, "\"promtp\"");
    assert!(queued(&w).is_empty());
    // catstack's own keys are kept, with a warning naming them.
    let extra = r#"{"prompt": "p", "transcript": "t", "hit_if_all_true": ["x"], "harness": "claude", "session_id": "s"}"#;
    let out = enqueue(&w, &["--json", "-", "--id", "kept"], Some(extra));
    out.assert_exit(0, "warning: job kept: \"harness\", \"session_id\" are not job keys: kept in the job file and ignored by the judge");
    let written: Value = w.queued_job("kept");
    assert_eq!(written["harness"], "claude");
}

#[test]
fn a_misspelt_rule_key_and_a_job_without_a_rule_are_named_in_judge_log() {
    let w = World::new();
    let runners = table(&[w.runner("no", NO)]);
    let typo = w.job(
        "typo",
        &json!({"prompt": "p", "transcript": "t", "hit_if_all_ture": ["retracts"],
                "session_id": "s", "harness": "claude", "created_at": 1.5, "agent_id": ""}),
    );
    let out = w.run_file(&typo, Some(&runners));
    assert_eq!(out.code, Some(0), "{out:?}");
    // catstack's rule stays: no rule is a hit when answered.
    assert_eq!(w.verdict_of("t", "typo")["outcome"], "hit");
    let warned = w.log_lines(
        " WARN unknown job key ignored: \"hit_if_all_ture\" looks like a misspelt \"hit_if_all_true\"",
    );
    assert_eq!(warned.len(), 1, "{}", w.log());
    assert!(warned[0].contains("id=typo"), "{}", warned[0]);
    // Said on the job's claimed line, not on a line of its own.
    let no_rule = w.log_lines("every answer is a hit");
    assert_eq!(no_rule.len(), 1, "{}", w.log());
    assert!(
        no_rule[0].contains(" INFO job claimed ") && no_rule[0].contains(" rule=\"none ("),
        "{}",
        no_rule[0]
    );
    for key in ["session_id", "harness", "created_at", "agent_id"] {
        assert!(!w.log().contains(key), "{key} is catstack's: {}", w.log());
    }
    // A key that looks like a rule key, though far from any by spelling, too.
    let rulelike = w.job(
        "rulelike",
        &json!({"prompt": "p", "transcript": "t", "hit_when_all_true": ["retracts"]}),
    );
    assert_eq!(w.run_file(&rulelike, Some(&runners)).code, Some(0));
    let warned = w.log_lines(" WARN unknown job key ignored: \"hit_when_all_true\" looks like");
    assert_eq!(warned.len(), 1, "{}", w.log());
    // A job with a rule and catstack's keys gets neither line.
    let fine = w.job(
        "fine",
        &json!({"prompt": "p", "transcript": "t", "hit_if_all_true": ["retracts"], "harness": "codex"}),
    );
    assert_eq!(w.run_file(&fine, Some(&runners)).code, Some(0));
    assert_eq!(w.verdict_of("t", "fine")["outcome"], "clean");
    assert_eq!(w.log_lines("unknown job key").len(), 2, "{}", w.log());
    assert_eq!(w.log_lines("every answer is a hit").len(), 2, "{}", w.log());
}

#[test]
fn a_mode_typo_is_logged_when_the_job_is_read_even_on_a_cache_hit() {
    let w = World::new();
    let config = w.config_file("cache.toml", "[cache]\nttl_seconds = 3600\n");
    let runners = table(&[w.runner("no", NO)]);
    for stem in ["first", "cached"] {
        let job = w.job(
            stem,
            &json!({"prompt": "same", "transcript": "t", "mode": "investgate",
                    "hit_if_all_true": ["retracts"]}),
        );
        assert_eq!(w.run_file_configured(&job, &runners, &config).code, Some(0));
    }
    let cached = w.verdict_of("t", "cached");
    assert_eq!(cached["attempts"][0]["runner"], "cache", "{cached}");
    for stem in ["first", "cached"] {
        let lines = w.log_lines("unknown \"mode\" \"investgate\"");
        assert!(
            lines.iter().any(|l| l.contains(&format!("id={stem}"))),
            "no mode warning for {stem}:\n{}",
            w.log()
        );
    }
}

#[test]
fn eval_refuses_unknown_keys_a_bad_mode_and_a_case_without_a_rule() {
    let w = World::new();
    let cases = w.root.join("cases.jsonl");
    fs::write(
        &cases,
        [
            r#"{"prompt": "a", "expect": "hit", "hit_if_all_true": ["retracts"]}"#,
            r#"{"prompt": "b", "expect": "hit", "hit_if_all_ture": ["retracts"]}"#,
            r#"{"prompt": "c", "expect": "hit", "hit_if_all_true": ["retracts"], "harness": "x"}"#,
            r#"{"prompt": "d", "expect": "hit", "hit_if_all_true": ["retracts"], "mode": "investgate"}"#,
            r#"{"prompt": "e", "expect": "hit"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let mut cmd = w.cli();
    cmd.env(
        RUNNERS_VAR,
        table(&[w.runner("no", &format!("echo ran >> {}/runs\n{NO}", s(&w.root)))]),
    )
    .arg("eval")
    .arg(&cases);
    let out = w.run(cmd);
    assert_eq!(out.code, Some(2), "{out:?}");
    let file = s(&cases);
    for (line, words) in [
        (
            2,
            "\"hit_if_all_ture\" is not a case key (did you mean \"hit_if_all_true\"?)",
        ),
        (
            3,
            "\"harness\" is not a case key; a case holds only the keys of a job file and \"expect\"",
        ),
        (4, "\"mode\" is \"investgate\"; give \"investigate\""),
        (5, "no rule names a key of the answer"),
    ] {
        assert!(
            out.stderr
                .contains(&format!("{file}: line {line}: {words}")),
            "line {line}: {}",
            out.stderr
        );
    }
    assert!(!out.stderr.contains("line 1:"), "{}", out.stderr);
    assert!(!w.root.join("runs").exists(), "nothing ran");
}

// ---------------------------------------------------------------- item 4: run PATH

/// `llm-judge run PATH` with a runner that records each run.
fn run_path(w: &World, path: &Path) -> Finished {
    let runner = w.runner(
        "r",
        &format!("echo ran >> {}/runs\necho '{{}}'\n", s(&w.root)),
    );
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, table(&[runner])).arg("run").arg(path);
    // A FIFO must not block: a bound well under NO_HANG.
    w.spawn(cmd).finish(Duration::from_secs(30))
}

#[test]
fn run_leaves_anything_outside_jobs_that_is_not_a_job_where_it_is() {
    let w = World::new();
    let x = w.root.join("x");
    fs::create_dir(&x).unwrap();
    let valid = r#"{"prompt": "p", "transcript": "t"}"#;
    let folder = x.join("dir.json");
    fs::create_dir(&folder).unwrap();
    fs::write(folder.join("inside"), "mine").unwrap();
    let fifo = x.join("fifo.json");
    mkfifo(&fifo);
    let target = x.join("target.json");
    fs::write(&target, valid).unwrap();
    let link = x.join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let garbage = x.join("notes.json");
    fs::write(&garbage, "my notes, not JSON").unwrap();
    let no_prompt = x.join("no-prompt.json");
    fs::write(&no_prompt, r#"{"transcript": "t"}"#).unwrap();
    let dev_null = PathBuf::from("/dev/null");
    for (path, words) in [
        (&folder, "(a folder, not a regular file); nothing was moved"),
        (&fifo, "(a FIFO, not a regular file); nothing was moved"),
        (&link, "(a symlink, not a regular file); nothing was moved"),
        (
            &dev_null,
            "(a character device, not a regular file); nothing was moved",
        ),
        (&garbage, "is not a valid job (job file is not valid JSON"),
        (&no_prompt, "is not a valid job (missing \"prompt\")"),
    ] {
        let out = run_path(&w, path);
        assert_eq!(out.code, Some(2), "{}: {out:?}", path.display());
        assert!(
            out.stderr.contains(&format!("{} {}", s(path), "is not a"))
                && out.stderr.contains(words),
            "{}: {}",
            path.display(),
            out.stderr
        );
    }
    assert_eq!(fs::read_to_string(folder.join("inside")).unwrap(), "mine");
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), valid);
    assert_eq!(fs::read_to_string(&garbage).unwrap(), "my notes, not JSON");
    assert!(no_prompt.exists());
    assert!(Path::new("/dev/null").exists());
    assert!(
        !w.state().join("rejected").exists(),
        "nothing moved to rejected/"
    );
    assert_eq!(w.all_verdicts(), Vec::<PathBuf>::new());
    assert!(!w.root.join("runs").exists(), "no runner started");
    let missing = x.join("missing.json");
    let out = run_path(&w, &missing);
    out.assert_exit(2, "does not exist");
    // A regular job file outside jobs/ is judged, and left where it is: it is the
    // user's own file.
    let out = run_path(&w, &target);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("so it was left where it is"), "{out:?}");
    assert_eq!(fs::read_to_string(&target).unwrap(), valid);
    assert_eq!(w.verdict_of("t", "target")["outcome"], "hit");
}

/// `run <S>/jobs/<name>` judges into S, the state folder that holds the job (a
/// `drain --state-dir S` finds its verdict), not into the default one; with
/// `--state-dir` naming another folder it refuses, naming both.
#[test]
fn run_judges_a_job_into_the_state_folder_that_holds_it() {
    let w = World::new();
    let other = w.root.join("other-state");
    // The world's state folder is the default one (the variable); no --state-dir.
    let plain = || {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &w.home)
            .env("XDG_CONFIG_HOME", &w.xdg)
            .env("TMPDIR", &w.tmp)
            .env("CATSTACK_LLM_JUDGE_STATE_DIR", w.state())
            .stdin(std::process::Stdio::null());
        cmd
    };
    let mut enqueue = plain();
    enqueue.args(["--state-dir"]).arg(&other).args([
        "enqueue",
        "--id",
        "ex",
        "--transcript",
        "t",
        "--prompt",
        "p",
    ]);
    let out = w.run(enqueue);
    assert_eq!(out.code, Some(0), "{out:?}");
    let job = other.join("jobs/ex.json");
    let runner = w.runner("ok", "echo '{}'");
    let mut refused = w.cli();
    refused
        .env(RUNNERS_VAR, table(std::slice::from_ref(&runner)))
        .arg("run")
        .arg(&job);
    let refused = w.run(refused);
    refused.assert_exit(2, "but --state-dir names");
    assert!(refused.stderr.contains(s(&other)), "{}", refused.stderr);
    assert!(job.exists(), "left queued");
    let mut cmd = plain();
    cmd.env(RUNNERS_VAR, table(&[runner])).arg("run").arg(&job);
    let out = w.run(cmd);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!job.exists(), "judged and removed from its own jobs/");
    let mut drain = plain();
    drain
        .arg("--state-dir")
        .arg(&other)
        .args(["drain", "--transcript", "t"]);
    let drained = w.run(drain);
    assert!(drained.stdout.contains("\"id\":\"ex\""), "{drained:?}");
    assert!(
        w.all_verdicts().is_empty(),
        "nothing in the default state folder"
    );
}

#[test]
fn run_on_a_non_job_inside_jobs_moves_it_to_rejected_and_exits_2() {
    let w = World::new();
    let folder = w.jobs().join("dir.json");
    fs::create_dir(&folder).unwrap();
    let out = run_path(&w, &folder);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("is not a regular job file: moved to rejected/"),
        "{}",
        out.stderr
    );
    assert!(w.state().join("rejected/dir.json").is_dir());
}

// ---------------------------------------------------------------- item 6: smaller doors

#[test]
fn enqueue_refuses_an_id_that_is_still_queued() {
    let w = World::new();
    let first = enqueue(&w, &["--prompt", "first", "--id", "same"], None);
    assert_eq!(first.code, Some(0), "{first:?}");
    let again = enqueue(&w, &["--prompt", "second", "--id", "same"], None);
    assert_eq!(again.code, Some(2), "{again:?}");
    assert!(
        again.stderr.contains("job same is still queued")
            && again.stderr.contains("pick another id"),
        "{}",
        again.stderr
    );
    assert_eq!(again.stdout, "");
    let job: Value = w.queued_job("same");
    assert_eq!(job["prompt"], "first", "the first job is untouched");
    assert_eq!(queued(&w), ["same.json"], "no temp file left");
    // Once judged (its file gone), the id is free again.
    fs::remove_file(w.jobs().join("same.json")).unwrap();
    assert_eq!(
        enqueue(&w, &["--prompt", "third", "--id", "same"], None).code,
        Some(0)
    );
}

#[test]
fn of_many_enqueues_of_one_id_at_once_exactly_one_is_queued() {
    let w = World::new();
    let runs: Vec<_> = (0..8)
        .map(|n| {
            let mut cmd = w.cli();
            cmd.args(["enqueue", "--id", "race", "--prompt", &format!("p{n}")]);
            w.spawn(cmd)
        })
        .collect();
    let codes: Vec<Option<i32>> = runs.into_iter().map(|r| r.finish(NO_HANG).code).collect();
    assert_eq!(
        codes.iter().filter(|c| **c == Some(0)).count(),
        1,
        "{codes:?}"
    );
    assert_eq!(
        codes.iter().filter(|c| **c == Some(2)).count(),
        7,
        "{codes:?}"
    );
    assert_eq!(queued(&w), ["race.json"]);
}

// ---------------------------------------------------------------- item 6: eval's file

/// `llm-judge eval ARGS` with one runner answering `{"retracts": true}`.
fn eval(w: &World, args: &[&std::ffi::OsStr]) -> Finished {
    let mut cmd = w.cli();
    cmd.env(
        RUNNERS_VAR,
        table(&[w.runner("yes", "echo '{\"retracts\": true}'\n")]),
    )
    .arg("eval")
    .args(args);
    w.spawn(cmd).finish(Duration::from_secs(30))
}

#[test]
fn eval_refuses_a_file_that_is_not_a_regular_file() {
    let w = World::new();
    let fifo = w.root.join("cases.fifo");
    mkfifo(&fifo);
    for (path, kind) in [
        (fifo.as_path(), "a FIFO"),
        (Path::new("/dev/zero"), "a character device"),
        (w.root.as_path(), "a folder"),
    ] {
        let out = eval(&w, &[path.as_os_str()]);
        assert_eq!(out.code, Some(2), "{}: {out:?}", path.display());
        assert!(
            out.stderr
                .contains(&format!("{} is {kind}, not a regular file", s(path))),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn eval_reads_no_case_longer_than_max_job_bytes() {
    let w = World::new();
    let config = w.config_file("small.toml", "max_job_bytes = 1024\n");
    let cases = w.root.join("cases.jsonl");
    let good = r#"{"prompt": "p", "hit_if_all_true": ["retracts"], "expect": "hit"}"#;
    let long = format!(
        r#"{{"prompt": "{}", "hit_if_all_true": ["retracts"], "expect": "hit"}}"#,
        "x".repeat(4 << 20)
    );
    fs::write(
        &cases,
        format!("{good}\n{long}\n{}\n{good}", "y".repeat(2000)),
    )
    .unwrap();
    let out = eval(
        &w,
        &["--config".as_ref(), config.as_os_str(), cases.as_os_str()],
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    let file = s(&cases);
    for line in [2, 3] {
        assert!(
            out.stderr.contains(&format!(
                "{file}: line {line}: longer than max_job_bytes (1024 bytes)"
            )),
            "{}",
            out.stderr
        );
    }
    // The rest of a long line is skipped: the next line is read whole, as line 4.
    assert!(!out.stderr.contains("line 1:"), "{}", out.stderr);
    assert!(!out.stderr.contains("line 4:"), "{}", out.stderr);
}

#[test]
fn ctrl_c_during_eval_prints_the_report_of_the_finished_runs_and_exits_130() {
    let w = World::new();
    let started = w.root.join("slow-started");
    let pid_file = w.root.join("slow.pid");
    // Fast for every case but the slow one, which waits until it is stopped.
    let body = format!(
        "case \"$1\" in *slow*) hostpid > {pid}; touch {started}; while :; do sleep 0.05; done;; esac\necho '{{\"retracts\": true}}'\n",
        pid = s(&pid_file),
        started = s(&started)
    );
    let cases = w.root.join("cases.jsonl");
    let case = |id: &str| {
        json!({"id": id, "prompt": id, "hit_if_all_true": ["retracts"], "expect": "hit"})
            .to_string()
    };
    fs::write(
        &cases,
        [case("fast"), case("slow"), case("never")].join("\n"),
    )
    .unwrap();
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, table(&[w.runner("r", &body)]))
        .args(["eval", "--workers", "1"])
        .arg(&cases);
    let running = w.spawn(cmd);
    // One worker: the slow run starts only once the fast one is done.
    assert!(
        wait_until(within(NO_HANG), || started.exists()),
        "the slow run never started"
    );
    let status = Command::new("kill")
        .args(["-INT", &running.pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = running.finish(NO_HANG);
    assert_eq!(out.code, Some(130), "{out:?}");
    let row: Vec<&str> = out
        .stdout
        .lines()
        .find(|l| l.starts_with("r "))
        .unwrap_or_else(|| panic!("no row: {}", out.stdout))
        .split_whitespace()
        .collect();
    assert_eq!(row[1..4], ["1", "1", "100.0%"], "{}", out.stdout);
    assert!(
        out.stderr
            .contains("interrupted: the report covers the 1 of 3 runs that finished"),
        "{}",
        out.stderr
    );
    let pid = read_pid(&pid_file);
    assert!(
        wait_until(within(NO_HANG), || !is_running(pid)),
        "the slow runner {pid} outlived eval"
    );
}

/// The shipped default table with neither CLI logged in: neither is started (a
/// logged-out codex waited for its network until the job's timeout), each attempt says
/// where the login was looked for, and the verdict comes at once.
#[test]
fn runners_with_no_login_are_not_started_and_say_so() {
    let w = World::new();
    w.log_out();
    for program in ["claude", "codex"] {
        w.fake_program(
            program,
            &format!("echo started >> {}/started\nexec sleep 300", s(&w.root)),
        );
    }
    let job = w.job(
        "j",
        &json!({"prompt": "p", "transcript": "t", "hit_if_all_true": ["ok"]}),
    );
    let mut cmd = w.cli_with_fakes_on_path();
    for var in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CONFIG_DIR",
        "CODEX_API_KEY",
        "OPENAI_API_KEY",
        "CODEX_HOME",
    ] {
        cmd.env_remove(var);
    }
    cmd.env_remove(RUNNERS_VAR).arg("run").arg(&job);
    let out = w.spawn(cmd).finish(NO_HANG);
    assert_eq!(out.code, Some(0), "{out:?}");
    let v = w.verdict_of("t", "j");
    assert_eq!(v["outcome"], "unchecked", "{v}");
    let tried = attempts(&v);
    let names: Vec<&str> = tried.iter().map(|a| a.0.as_str()).collect();
    assert!(names.starts_with(&["claude", "codex"]), "{v}");
    for (runner, ok, reason) in &tried[..2] {
        assert!(!ok);
        assert!(
            reason.starts_with(&format!("not logged in: no {runner} login ({}", s(&w.home)))
                && reason.contains(s(&w.home)),
            "{reason}"
        );
    }
    assert!(!w.root.join("started").exists(), "a runner was started");
}
