//! Integration tests of the judge core through the `llm-judge` binary: `run` and
//! `ask` with fake runners (docs/reference.md).

use crate::support::*;

use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use crate::support::pinned::*;
use serde_json::{Value, json};

/// The job timeout of a test where one runner must time out beside runners that must
/// answer: many times what a fake takes to answer (or to say something first) on a
/// loaded machine, so the timeout only ever ends the one that hangs.
const SLOW_TIMEOUT: u64 = 5;

/// The shipped investigate argv after `argv[0]`, with the prompt filled in.
fn investigate_args(program: &str, prompt: &str) -> Vec<String> {
    match program {
        "codex" => args_with_prompt(INVESTIGATE_CODEX, prompt),
        "claude" => args_with_prompt(INVESTIGATE_CLAUDE, prompt),
        other => panic!("no investigate runner {other}"),
    }
}

/// The shipped default argv after `argv[0]`, with the prompt filled in.
fn default_args(program: &str, prompt: &str) -> Vec<String> {
    match program {
        "codex" => args_with_prompt(DEFAULT_CODEX, prompt),
        "claude" => args_with_prompt(DEFAULT_CLAUDE, prompt),
        "cursor-agent" => args_with_prompt(DEFAULT_CURSOR, prompt),
        other => panic!("no default runner {other}"),
    }
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// What the shipped codex argv of `mode` is started with by `run` (no daemon has kept
/// a trimmed catalog: that item is dropped), the prompt filled in.
fn codex_as_started(w: &World, mode: &str, prompt: &str) -> Vec<String> {
    let argv = if mode == "investigate" {
        INVESTIGATE_CODEX
    } else {
        DEFAULT_CODEX
    };
    let instructions = w.state().join(format!("codex/instructions-{mode}.md"));
    args_as_started(argv, prompt, s(&instructions), None)
}

/// Asserts the judge's codex instructions file of `mode` is its own, private.
fn assert_instructions_file(w: &World, mode: &str) {
    let path = w.state().join(format!("codex/instructions-{mode}.md"));
    let text = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        text.contains("one line of JSON"),
        "{}: {text:?}",
        path.display()
    );
    let mode_of = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode_of(&path), 0o600, "{}", path.display());
    assert_eq!(mode_of(path.parent().unwrap()), 0o700);
}

/// Asserts a fake was started as `program` with exactly `args` after `argv[0]`.
fn assert_started_as(w: &World, program: &str, args: &[String]) {
    let arg0 = w.recorded(program, "arg0");
    assert_eq!(basename(&arg0), program, "argv[0] {arg0:?}");
    assert_eq!(w.recorded_argv(program), args, "argv of {program}");
}

/// Asserts a runner folder was a fresh, empty temp folder of the judge that is gone now.
fn assert_fresh_temp_folder(w: &World, pwd: &str) {
    let prefix = format!("{}/llm-judge-", s(&w.runner_tmp()));
    assert!(
        pwd.starts_with(&prefix),
        "{pwd:?} is not a fresh temp folder under {prefix:?}"
    );
    assert!(
        !Path::new(pwd).exists(),
        "runner folder {pwd} was not removed"
    );
}

// ---------------------------------------------------------------- investigate table

#[test]
fn investigate_job_runs_the_shipped_argv_in_the_jobs_cwd_with_its_timeout() {
    let w = World::new();
    let codex = w.fake_program(
        "codex",
        &format!("{}echo 'codex cannot' >&2\nexit 1\n", w.recorder()),
    );
    let claude = w.fake_program(
        "claude",
        &format!(
            "{}echo 'Looking...'\necho '{{\"found\": true}}'\n",
            w.recorder()
        ),
    );
    settle(&codex);
    settle(&claude);
    let prompt = "Is \"it\" safe? Reply with {\"found\": bool} --help";
    let job = w.job(
        "inv1",
        &json!({
            "prompt": prompt, "mode": "investigate", "timeout_seconds": 7,
            "cwd": s(&w.work), "transcript": "/t/inv.jsonl", "hit_if_all_true": ["found"],
        }),
    );
    let mut cmd = w.cli_with_fakes_on_path();
    cmd.env("NOTIFY_SOCKET", "/run/user/0/fake-notify")
        .env("WATCHDOG_PID", "1")
        .env("WATCHDOG_USEC", "30000000")
        .env("LISTEN_FDS", "1")
        .env("LISTEN_PID", "1")
        .env("KEEP_ME", "kept")
        .arg("run")
        .arg(&job);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(0), "{done:?}");

    assert_started_as(&w, "codex", &codex_as_started(&w, "investigate", prompt));
    assert_instructions_file(&w, "investigate");
    assert_started_as(&w, "claude", &investigate_args("claude", prompt));
    for program in ["codex", "claude"] {
        assert_eq!(
            w.recorded(program, "pwd").trim_end(),
            s(&w.work),
            "{program} cwd"
        );
        assert_eq!(
            w.recorded(program, "stdin").trim_end(),
            "/dev/null",
            "{program} stdin"
        );
        let env = w.recorded_env(program);
        assert!(
            env.contains(&"CATSTACK_LLM_JUDGE_CHILD=1".to_string()),
            "{program}: {env:?}"
        );
        assert!(
            env.contains(&"KEEP_ME=kept".to_string()),
            "{program}: {env:?}"
        );
        assert!(
            env.contains(&"GIT_DIR=/dev/null".to_string()),
            "{program}: git must find no repository in the job's folder: {env:?}"
        );
        assert!(
            env.iter()
                .any(|v| v.starts_with("LLM_JUDGE_TAG=") && v.len() > 14),
            "{env:?}"
        );
        for gone in [
            "NOTIFY_SOCKET=",
            "WATCHDOG_PID=",
            "WATCHDOG_USEC=",
            "LISTEN_FDS=",
            "LISTEN_PID=",
        ] {
            assert!(
                !env.iter().any(|v| v.starts_with(gone)),
                "{program} got {gone}: {env:?}"
            );
        }
    }
    let cwd = s(&w.work);
    w.log_line_ending(&format!(
        " INFO runner start id=inv1 runner=codex timeout=7 cwd={cwd}"
    ));
    w.log_line_ending(&format!(
        " INFO runner start id=inv1 runner=claude timeout=7 cwd={cwd}"
    ));
    assert!(w.log_lines("cwd refused").is_empty(), "{}", w.log());

    let v = w.verdict_of("/t/inv.jsonl", "inv1");
    assert_eq!(
        attempts(&v),
        expected(&[
            ("codex", false, "exit 1: codex cannot"),
            ("claude", true, "answered")
        ])
    );
    assert_eq!(v["outcome"], "hit");
    assert_eq!(v["runner"], "claude");
    assert_eq!(v["answer"], json!({"found": true}));
    assert!(!job.exists());
}

#[test]
fn investigate_job_timeout_stops_a_slow_runner() {
    let w = World::new();
    let codex = w.fake_program("codex", "exec sleep 300\n");
    let claude = w.fake_program("claude", "echo '{\"found\": false}'\n");
    settle(&codex);
    settle(&claude);
    let config = w.config_file("fast-kill.toml", "kill_grace_seconds = 1\n");
    let job = w.job(
        "inv2",
        &json!({
            "prompt": "look around", "mode": "investigate", "timeout_seconds": SLOW_TIMEOUT,
            "cwd": s(&w.work), "hit_if_all_true": ["found"],
        }),
    );
    let mut cmd = w.cli_with_fakes_on_path();
    cmd.arg("--config").arg(&config).arg("run").arg(&job);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(0), "{done:?}");
    let cwd = s(&w.work);
    w.log_line_ending(&format!(
        " INFO runner start id=inv2 runner=codex timeout={SLOW_TIMEOUT} cwd={cwd}"
    ));
    let v = w.verdict_of("", "inv2");
    assert_eq!(
        attempts(&v),
        expected(&[
            ("codex", false, &format!("timed out after {SLOW_TIMEOUT}s")),
            ("claude", true, "answered")
        ])
    );
    assert_eq!(v["outcome"], "clean");
    assert_eq!(v["reason"], "not true: found");
    assert!(
        done.elapsed < Duration::from_secs(30),
        "took {:?}",
        done.elapsed
    );
}

// ---------------------------------------------------------------- default table

#[test]
fn default_table_tries_claude_codex_cursor_in_order_each_in_a_private_fresh_temp_folder() {
    let w = World::new();
    // claude reads its prompt on stdin (one stream-json message); it keeps what it read.
    let fakes: Vec<_> = ["codex", "claude", "cursor-agent"]
        .iter()
        .map(|name| {
            let read = match *name {
                "claude" => "cat > \"$rec/stdin-text\"\n",
                _ => "",
            };
            w.fake_program(name, &format!("{}{read}exit 1\n", w.recorder()))
        })
        .collect();
    for fake in &fakes {
        settle(fake);
    }
    let prompt = "Classify: 'rm -rf /' -- is it dangerous?";
    let job = w.job(
        "plain",
        &json!({"prompt": prompt, "transcript": "/t/plain.jsonl"}),
    );
    let mut cmd = w.cli_with_fakes_on_path();
    // The table's own env wins over the caller's for that runner only.
    cmd.env("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "7")
        .arg("run")
        .arg(&job);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(0), "{done:?}");

    let mut folders = Vec::new();
    for (program, name) in [
        ("codex", "codex"),
        ("claude", "claude"),
        ("cursor-agent", "cursor"),
    ] {
        let args = match program {
            "codex" => codex_as_started(&w, "default", prompt),
            _ => default_args(program, prompt),
        };
        assert_started_as(&w, program, &args);
        let pwd = w.recorded(program, "pwd").trim_end().to_string();
        assert_fresh_temp_folder(&w, &pwd);
        assert_eq!(
            w.recorded(program, "ls"),
            "",
            "{program}'s folder was not empty"
        );
        let env = w.recorded_env(program);
        let max_tokens: Vec<&String> = env
            .iter()
            .filter(|v| v.starts_with("CLAUDE_CODE_MAX_OUTPUT_TOKENS="))
            .collect();
        if program == "claude" {
            for (name, value) in DEFAULT_CLAUDE_ENV {
                let var = format!("{name}={value}");
                assert_eq!(
                    env.iter().filter(|v| **v == var).count(),
                    1,
                    "{var}: {env:?}"
                );
            }
            assert_eq!(max_tokens.len(), 1, "one value per name: {env:?}");
        } else {
            assert_eq!(max_tokens, ["CLAUDE_CODE_MAX_OUTPUT_TOKENS=7"], "{program}");
        }
        if program == "claude" {
            assert!(w.recorded(program, "stdin").starts_with("pipe:"));
            let message: Value = serde_json::from_str(&w.recorded(program, "stdin-text")).unwrap();
            assert_eq!(
                message,
                json!({"type": "user", "message": {"role": "user", "content": prompt}})
            );
        } else {
            assert_eq!(w.recorded(program, "stdin").trim_end(), "/dev/null");
        }
        assert_eq!(
            w.recorded(program, "mode").trim_end(),
            "700",
            "{program}'s folder"
        );
        w.log_line_ending(&format!(
            " INFO runner start id=plain runner={name} timeout=60 cwd={pwd}"
        ));
        folders.push(pwd);
    }
    folders.sort();
    folders.dedup();
    assert_eq!(folders.len(), 3, "runners shared a folder: {folders:?}");
    assert_eq!(
        w.tmp_entries(),
        Vec::<String>::new(),
        "temp folders left behind"
    );
    assert_instructions_file(&w, "default");

    let starts: Vec<String> = w.log_lines(" INFO runner start id=plain ");
    let order: Vec<&str> = starts
        .iter()
        .map(|l| {
            l.split(" runner=")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .unwrap_or("")
        })
        .collect();
    assert_eq!(order, ["claude", "codex", "cursor"]);

    let v = w.verdict_of("/t/plain.jsonl", "plain");
    assert_eq!(v["outcome"], "unchecked");
    assert_eq!(
        v["reason"],
        "no runner answered: claude: exit 1; codex: exit 1; cursor: exit 1"
    );
    assert_eq!(v["runner"], Value::Null);
    assert_eq!(v["answer"], Value::Null);
    assert_eq!(
        attempts(&v),
        expected(&[
            ("claude", false, "exit 1"),
            ("codex", false, "exit 1"),
            ("cursor", false, "exit 1")
        ])
    );
    for line in w.log_lines(" INFO runner end id=plain ") {
        assert!(
            line.contains(" ok=false reason=\"exit 1\" elapsed_ms="),
            "{line}"
        );
    }
    assert_eq!(w.log_lines(" INFO runner end id=plain ").len(), 3);
    let finished = " INFO job finished id=plain outcome=unchecked runner=- duration_ms=";
    assert_eq!(w.log_lines(finished).len(), 1, "{}", w.log());
}

// ---------------------------------------------------------------- timeouts and cwd

#[test]
fn timeout_seconds_is_capped_at_600_and_bad_values_give_60() {
    let w = World::new();
    let runners = table(&[w.runner("r", "echo '{}'\n")]);
    let cases: [(&str, Option<Value>, &str); 10] = [
        ("t601", Some(json!(601)), "600"),
        ("tbig", Some(json!(1e9)), "600"),
        ("t600", Some(json!(600)), "600"),
        ("tfrac", Some(json!(1.5)), "1.5"),
        ("tzero", Some(json!(0)), "60"),
        ("tneg", Some(json!(-3)), "60"),
        ("tstr", Some(json!("30")), "60"),
        ("tbool", Some(json!(true)), "60"),
        ("tnull", Some(Value::Null), "60"),
        ("tnone", None, "60"),
    ];
    for (id, timeout, shown) in cases {
        let mut job = json!({"prompt": "p"});
        if let Some(t) = timeout {
            job["timeout_seconds"] = t;
        }
        let path = w.job(id, &job);
        let done = w.run_file(&path, Some(&runners));
        assert_eq!(done.code, Some(0), "{id}: {done:?}");
        let needle = format!(" INFO runner start id={id} runner=r timeout={shown} cwd=");
        assert_eq!(
            w.log_lines(&needle).len(),
            1,
            "{id}: no {needle:?} in\n{}",
            w.log()
        );
        assert_eq!(w.verdict_of("", id)["outcome"], "hit", "{id}");
    }
}

#[test]
fn missing_or_bad_cwd_falls_back_to_a_fresh_temp_folder_and_is_logged() {
    let w = World::new();
    let runners = table(&[json!([
        "rec",
        [
            "/bin/sh",
            s(&w.script("rec", &format!("{}echo '{{}}'\n", w.recorder()))),
            "{prompt}"
        ]
    ])]);
    let missing = w.root.join("no/such/folder");
    let a_file = w.root.join("a-file");
    fs::write(&a_file, "x").unwrap();
    let cases = [
        (
            "miss",
            json!(s(&missing)),
            format!("cwd {:?} does not exist", s(&missing)),
        ),
        (
            "rel",
            json!("work"),
            "cwd \"work\" is not an absolute path".to_string(),
        ),
        (
            "file",
            json!(s(&a_file)),
            format!("cwd {:?} is not a folder", s(&a_file)),
        ),
        (
            "num",
            json!(42),
            "cwd is a number, not a string".to_string(),
        ),
    ];
    for (id, cwd, why) in cases {
        let path = w.job(id, &json!({"prompt": "p", "cwd": cwd}));
        let done = w.run_file(&path, Some(&runners));
        assert_eq!(done.code, Some(0), "{id}: {done:?}");
        let pwd = w.recorded("rec", "pwd").trim_end().to_string();
        assert_ne!(pwd, s(&missing));
        assert_fresh_temp_folder(&w, &pwd);
        assert_eq!(w.recorded("rec", "ls"), "", "{id}: folder not empty");
        let line = format!(" WARN cwd refused, using a fresh temp folder: {why} id={id}");
        assert_eq!(
            w.log_lines(&line).len(),
            1,
            "{id}: no {line:?} in\n{}",
            w.log()
        );
        w.log_line_ending(&format!(
            " INFO runner start id={id} runner=rec timeout=60 cwd={pwd}"
        ));
        assert_eq!(w.verdict_of("", id)["outcome"], "hit");
    }
    assert!(!missing.exists());
    assert_eq!(w.tmp_entries(), Vec::<String>::new());
}

// ---------------------------------------------------------------- attempts

#[test]
fn a_failing_runner_falls_back_to_the_next_that_answers() {
    let w = World::new();
    let runners = table(&[
        w.runner("fail", "echo boom >&2\nexit 2\n"),
        w.runner(
            "ok",
            "echo 'thinking...'\necho '{\"bad\": true, \"other\": false}'\necho done\n",
        ),
    ]);
    let job = w.job(
        "fb",
        &json!({
            "prompt": "p", "transcript": "/t/fb.jsonl", "hook": "PreToolUse", "rule_id": "r7",
            "on_hit": "ignored", "extra": 1,
            "hit_if_any_true": {"other": "Other!", "bad": "Bad!"},
        }),
    );
    let done = w.run_file(&job, Some(&runners));
    assert_eq!(done.code, Some(0), "{done:?}");
    let v = w.verdict_of("/t/fb.jsonl", "fb");
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "id",
            "hook",
            "transcript",
            "outcome",
            "on_hit",
            "reason",
            "runner",
            "answer",
            "attempts",
            "finished_at",
            "rule_id"
        ]
    );
    assert_eq!(
        attempts(&v),
        expected(&[("fail", false, "exit 2: boom"), ("ok", true, "answered")])
    );
    for a in v["attempts"].as_array().unwrap() {
        assert!(a["elapsed_ms"].is_u64(), "{a}");
    }
    assert_eq!(v["id"], "fb");
    assert_eq!(v["hook"], "PreToolUse");
    assert_eq!(v["transcript"], "/t/fb.jsonl");
    assert_eq!(v["outcome"], "hit");
    assert_eq!(v["on_hit"], "Bad!");
    assert_eq!(v["reason"], "any true: bad");
    assert_eq!(v["runner"], "ok");
    assert_eq!(v["answer"], json!({"bad": true, "other": false}));
    assert_eq!(v["rule_id"], "r7");
    assert!(v["finished_at"].as_f64().is_some_and(|t| t > 1.7e9), "{v}");
    assert!(!job.exists());
    // Folders the judge creates are 0700; no temp file or claim is left behind.
    let folder = w.verdict_folder("/t/fb.jsonl");
    for dir in [
        w.state().join("verdicts"),
        folder.clone(),
        w.state().join("claims"),
    ] {
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    let names: Vec<_> = fs::read_dir(&folder)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["fb.json"]);
    assert_eq!(fs::read_dir(w.state().join("claims")).unwrap().count(), 0);
    // judge.log lines start with a UTC timestamp.
    for line in w.log().lines() {
        let stamp = line.split(' ').next().unwrap_or_default();
        assert!(
            stamp.len() > 20 && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
            "{line}"
        );
    }
    let end = " INFO runner end id=fb runner=fail ok=false reason=\"exit 2: boom\" elapsed_ms=";
    assert_eq!(w.log_lines(end).len(), 1, "{}", w.log());
    assert_eq!(
        w.log_lines(" INFO job finished id=fb outcome=hit runner=ok duration_ms=")
            .len(),
        1
    );
}

/// Each reason text of docs/reference.md, "Runners", in one job, in the order of the table.
#[test]
fn every_attempt_reason_of_the_spec_is_pinned() {
    let w = World::new();
    let no_interpreter = w.bin.join("no-interpreter");
    fs::write(&no_interpreter, "#!/no/such/interpreter\necho never\n").unwrap();
    fs::set_permissions(&no_interpreter, fs::Permissions::from_mode(0o755)).unwrap();
    settle(&no_interpreter);
    let runners = table(&[
        json!(["gone", ["/no/such/runner", "{prompt}"]]),
        json!(["spawn", [s(&no_interpreter), "{prompt}"]]),
        w.runner("slow", "echo 'still thinking' >&2\nexec sleep 300\n"),
        w.runner("out", "echo 'only stdout'\nexit 3\n"),
        w.runner("sig", "echo 'about to die' >&2\nkill -9 $$\n"),
        w.runner("prose", "echo 'I think it is fine.'\n"),
        w.runner("ok", "echo '{\"fine\": true}'\n"),
        w.runner("never", "echo '{\"fine\": false}'\n"),
    ]);
    let config = w.config_file("grace.toml", "kill_grace_seconds = 1\n");
    let job = w.job(
        "reasons",
        &json!({"prompt": "p", "timeout_seconds": SLOW_TIMEOUT, "hit_if_all_true": ["fine"]}),
    );
    let done = w.run_file_configured(&job, &runners, &config);
    assert_eq!(done.code, Some(0), "{done:?}");
    let v = w.verdict_of("", "reasons");
    assert_eq!(
        attempts(&v),
        expected(&[
            ("gone", false, "not installed"),
            (
                "spawn",
                false,
                "NotFound: No such file or directory (os error 2)"
            ),
            (
                "slow",
                false,
                &format!("timed out after {SLOW_TIMEOUT}s: still thinking"),
            ),
            ("out", false, "exit 3: only stdout"),
            ("sig", false, "exit -9: about to die"),
            (
                "prose",
                false,
                "no JSON object line in stdout: I think it is fine."
            ),
            ("ok", true, "answered"),
        ])
    );
    assert_eq!(v["outcome"], "hit");
    assert_eq!(v["reason"], "all true: fine");
    assert_eq!(v["runner"], "ok");
    assert!(
        w.log_lines("runner=never").is_empty(),
        "a runner after the answer ran"
    );
    // judge.log escapes inner newlines; these reasons have none.
    let end =
        " INFO runner end id=reasons runner=gone ok=false reason=\"not installed\" elapsed_ms=";
    assert_eq!(w.log_lines(end).len(), 1, "{}", w.log());
}

#[test]
fn a_signal_death_without_output_is_exit_minus_the_signal() {
    let w = World::new();
    let runners = table(&[w.runner("sig", "kill -9 $$\n")]);
    let job = w.job("sig", &json!({"prompt": "p"}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    let v = w.verdict_of("", "sig");
    assert_eq!(attempts(&v), expected(&[("sig", false, "exit -9")]));
    assert_eq!(v["reason"], "no runner answered: sig: exit -9");
}

#[test]
fn reasons_are_clipped_to_300_code_points_keeping_the_end() {
    let w = World::new();
    let alphabet: Vec<char> = "abcdéжxyz日Q".chars().collect();
    let mut stderr: String = (0..997)
        .map(|i| alphabet[(i * 7) % alphabet.len()])
        .collect();
    stderr.push_str("END");
    assert_eq!(stderr.chars().count(), 1000);
    let runners = table(&[w.runner("long", &format!("printf '%s' '{stderr}' >&2\nexit 1\n"))]);
    let job = w.job("clip", &json!({"prompt": "p"}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    let v = w.verdict_of("", "clip");
    let reason = v["attempts"][0]["reason"].as_str().unwrap();
    let tail: String = stderr.chars().skip(1000 - 292).collect();
    assert_eq!(reason, format!("exit 1: {tail}"));
    assert_eq!(reason.chars().count(), 300);
    let overall = v["reason"].as_str().unwrap();
    assert_eq!(overall.chars().count(), 300, "{overall}");
    assert!(overall.starts_with("no runner answered: "), "{overall}");
    let last: String = stderr.chars().skip(1000 - 40).collect();
    assert!(overall.ends_with(&last), "{overall}");
}

// ---------------------------------------------------------------- process tree

#[test]
fn a_runner_that_ignores_sigterm_and_leaves_a_setsid_grandchild_does_not_hang_the_judge() {
    let w = World::new();
    let runner_pid = w.root.join("runner.pid");
    let grandchild_pid = w.root.join("grandchild.pid");
    let mut cleanup = KillPidsOnDrop::new(&[&runner_pid, &grandchild_pid]);
    let stubborn = format!(
        "trap '' TERM\n\
         hostpid > '{}'\n\
         setsid sh -c 'read -r p _ </proc/self/stat; echo $p@$(stat -Lc %i /proc/self/ns/pid) > \"{}\"; exec sleep 300' &\n\
         while :; do sleep 1; done\n",
        s(&runner_pid),
        s(&grandchild_pid)
    );
    let runners = table(&[
        w.runner("stubborn", &stubborn),
        w.runner("ok", "echo '{\"a\": true}'\n"),
    ]);
    let config = w.config_file("grace.toml", "kill_grace_seconds = 1\n");
    let job = w.job(
        "tree",
        &json!({"prompt": "p", "timeout_seconds": SLOW_TIMEOUT, "hit_if_all_true": ["a"]}),
    );
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, &runners)
        .arg("--config")
        .arg(&config)
        .arg("run")
        .arg(&job);
    let done = w.spawn(cmd).finish(NO_HANG);
    assert_eq!(done.code, Some(0), "{done:?}");
    let v = w.verdict_of("", "tree");
    assert_eq!(
        attempts(&v),
        expected(&[
            (
                "stubborn",
                false,
                &format!("timed out after {SLOW_TIMEOUT}s")
            ),
            ("ok", true, "answered")
        ])
    );
    assert_eq!(v["outcome"], "hit");
    let pids = [read_pid(&runner_pid), read_pid(&grandchild_pid)];
    let all_gone = wait_until(within(NO_HANG), || pids.iter().all(|&p| !is_running(p)));
    let alive: Vec<u32> = pids.into_iter().filter(|&p| is_running(p)).collect();
    assert!(all_gone, "runner processes still alive: {alive:?}");
    cleanup.armed = false;
}

// ---------------------------------------------------------------- prompt and output transport

#[test]
fn a_prompt_that_looks_like_a_flag_reaches_the_runner_literally_after_double_dash() {
    let w = World::new();
    let script = w.script("lit", &format!("{}echo '{{\"ok\": true}}'\n", w.recorder()));
    let runners = table(&[json!(["lit", ["/bin/sh", s(&script), "--", "{prompt}"]])]);
    let job = w.job("flag", &json!({"prompt": "--version"}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    assert_eq!(w.recorded_argv("lit"), ["--", "--version"]);
    assert_eq!(w.recorded("lit", "stdin").trim_end(), "/dev/null");
    assert_eq!(w.verdict_of("", "flag")["runner"], "lit");
}

#[test]
fn a_300_kib_prompt_goes_intact_on_stdin_without_the_slot_and_its_double_dash() {
    let w = World::new();
    let mut prompt = String::new();
    let mut i = 0;
    while prompt.len() < 300 * 1024 {
        prompt.push_str(&format!(
            "-{i} ascii, é ü, 日本語, 🦀, --flag 'q' \"dq\" $HOME \\n\n"
        ));
        i += 1;
    }
    assert!(prompt.len() > 131_071);
    let script = w.script(
        "big",
        &format!(
            "cat > '{rec}/stdin.bin'\nprintf '%s\\0' \"$@\" > '{rec}/argv.bin'\necho '{{\"ok\": true}}'\n",
            rec = s(&w.rec)
        ),
    );
    let runners = table(&[json!([
        "big",
        ["/bin/sh", s(&script), "-p", "--", "{prompt}"]
    ])]);
    let job = w.job("bigp", &json!({"prompt": prompt}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    let got = fs::read(w.rec.join("stdin.bin")).unwrap();
    assert_eq!(got.len(), prompt.len());
    assert!(got == prompt.as_bytes(), "stdin differs from the prompt");
    assert_eq!(
        nul_items(&fs::read(w.rec.join("argv.bin")).unwrap()),
        ["-p"]
    );
    assert_eq!(w.verdict_of("", "bigp")["outcome"], "hit");

    // A prompt holding NUL cannot be an argument either.
    let job = w.job("nul", &json!({"prompt": "a\u{0}b -- c"}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    assert_eq!(fs::read(w.rec.join("stdin.bin")).unwrap(), b"a\0b -- c");
    assert_eq!(
        nul_items(&fs::read(w.rec.join("argv.bin")).unwrap()),
        ["-p"]
    );

    // 131,071 bytes still fit in one argument: the slot is filled, stdin is /dev/null.
    let fits = format!("-{}", "x".repeat(131_070));
    let job = w.job("fits", &json!({"prompt": fits}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    assert_eq!(fs::read(w.rec.join("stdin.bin")).unwrap(), b"");
    let argv = nul_items(&fs::read(w.rec.join("argv.bin")).unwrap());
    assert!(
        argv == ["-p", "--", fits.as_str()],
        "argv of the 131,071-byte prompt"
    );
}

#[test]
fn a_runner_without_a_prompt_slot_gets_the_prompt_on_stdin() {
    let w = World::new();
    let script = w.script(
        "stdin",
        &format!("cat > '{}/stdin.txt'\necho '{{\"ok\": true}}'\n", s(&w.rec)),
    );
    let runners = table(&[json!(["stdin", ["/bin/sh", s(&script)]])]);
    let job = w.job("slotless", &json!({"prompt": "short prompt\nline 2"}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    assert_eq!(
        fs::read_to_string(w.rec.join("stdin.txt")).unwrap(),
        "short prompt\nline 2"
    );
}

#[test]
fn non_utf8_output_still_answers() {
    let w = World::new();
    let runners = table(&[w.runner(
        "bytes",
        "printf '\\377\\376 noise\\n{\"ok\": true}\\n'\nprintf '\\377' >&2\n",
    )]);
    let job = w.job("bytes", &json!({"prompt": "p", "hit_if_all_true": ["ok"]}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    let v = w.verdict_of("", "bytes");
    assert_eq!(attempts(&v), expected(&[("bytes", true, "answered")]));
    assert_eq!(v["answer"], json!({"ok": true}));
    assert_eq!(v["outcome"], "hit");
}

#[test]
fn fifty_megabytes_of_output_are_read_with_bounded_memory() {
    let w = World::new();
    let runners = table(&[w.runner(
        "chatty",
        "yes 'a line of model output that goes on and on' | head -c 52428800\n\
         printf '\\n{\"big\": true}\\n'\n",
    )]);
    let job = w.job("big", &json!({"prompt": "p", "hit_if_all_true": ["big"]}));
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, &runners).arg("run").arg(&job);
    // The peak RSS of this one judge and the descendants it waited for, through GNU
    // time (support/rss.rs: not this shared test process's own high-water mark).
    let report = w.path("big.rss");
    let done = w
        .spawn(under_gnu_time(&cmd, &report))
        .finish(Duration::from_secs(120));
    assert_eq!(done.code, Some(0), "{done:?}");
    let v = w.verdict_of("", "big");
    assert_eq!(attempts(&v), expected(&[("chatty", true, "answered")]));
    assert_eq!(v["outcome"], "hit");
    let max_rss_kib = peak_rss_kib(&report);
    assert!(max_rss_kib > 0);
    assert!(
        max_rss_kib < 25 * 1024,
        "llm-judge max RSS {max_rss_kib} KiB for 50 MB of output"
    );
}

// ---------------------------------------------------------------- bad jobs

#[test]
fn every_bad_job_gets_an_unchecked_judge_error_verdict_in_the_right_folder() {
    let w = World::new();
    let marker = w.root.join("runner-ran");
    let runners = table(&[w.runner("r", &format!("touch '{}'\necho '{{}}'\n", s(&marker)))]);
    let obj = |v: Value| serde_json::to_vec(&v).unwrap();
    // (stem, file bytes, transcript of the verdict folder, start of the reason)
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        ("empty", b"".to_vec(), "", "judge error: job file is empty"),
        (
            "blank",
            b" \n\t\n".to_vec(),
            "",
            "judge error: job file is empty",
        ),
        (
            "invalid",
            b"{\"prompt\": \"p\",".to_vec(),
            "",
            "judge error: job file is not valid JSON",
        ),
        (
            "nan",
            b"{\"prompt\": \"p\", \"transcript\": \"T\", \"timeout_seconds\": NaN}".to_vec(),
            "",
            "judge error: job file is not valid JSON",
        ),
        (
            "list",
            b"[\"prompt\"]".to_vec(),
            "",
            "judge error: job file holds a JSON list, not an object",
        ),
        (
            "string",
            b"\"prompt\"".to_vec(),
            "",
            "judge error: job file holds a JSON string, not an object",
        ),
        (
            "noprompt",
            obj(json!({"transcript": "T1", "hook": "h"})),
            "T1",
            "judge error: missing \"prompt\"",
        ),
        (
            "numprompt",
            obj(json!({"prompt": 42, "transcript": "T1"})),
            "T1",
            "judge error: \"prompt\" is a number, not a string",
        ),
        (
            "slashid",
            obj(json!({"prompt": "p", "id": "a/b", "transcript": "T2"})),
            "T2",
            "judge error: bad \"id\" \"a/b\": it contains '/'",
        ),
        (
            "dotid",
            obj(json!({"prompt": "p", "id": ".x", "transcript": "T2"})),
            "T2",
            "judge error: bad \"id\" \".x\": it starts with '.'",
        ),
        (
            "numid",
            obj(json!({"prompt": "p", "id": 5, "transcript": "T2"})),
            "T2",
            "judge error: bad \"id\": a number, not a string",
        ),
        (
            "allstr",
            obj(json!({"prompt": "p", "transcript": "T3", "hit_if_all_true": "a"})),
            "T3",
            "judge error: \"hit_if_all_true\" is a string, not a list of strings",
        ),
        (
            "allnum",
            obj(json!({"prompt": "p", "transcript": "T3", "hit_if_all_true": ["a", 1]})),
            "T3",
            "judge error: \"hit_if_all_true\" holds a number, not only strings",
        ),
        (
            "anylist",
            obj(json!({"prompt": "p", "transcript": "T3", "hit_if_any_true": ["a"]})),
            "T3",
            "judge error: \"hit_if_any_true\" is a list, not an object",
        ),
        (
            "anynum",
            obj(json!({"prompt": "p", "transcript": "T3", "hit_if_any_true": {"a": 1}})),
            "T3",
            "judge error: \"hit_if_any_true\" key \"a\" has a number, not a notice string",
        ),
        (
            "numtranscript",
            obj(json!({"prompt": "p", "transcript": 7})),
            "",
            "judge error: \"transcript\" is a number, not a string",
        ),
    ];
    for (stem, bytes, transcript, reason) in &cases {
        let path = w.job_bytes(stem, bytes);
        let done = w.run_file(&path, Some(&runners));
        assert_eq!(done.code, Some(0), "{stem}: {done:?}");
        assert!(!path.exists(), "{stem}: job file not removed");
        let v = w.verdict_of(transcript, stem);
        assert_bad_job_verdict(&v, stem, reason);
        let line = format!(
            " WARN bad job id={stem} file={} reason=\"judge error",
            s(&path)
        );
        assert_eq!(
            w.log_lines(&line).len(),
            1,
            "{stem}: no {line:?} in\n{}",
            w.log()
        );
    }
    assert_eq!(w.verdict_of("T1", "noprompt")["hook"], "h");
    assert_eq!(w.verdict_of("T1", "noprompt")["transcript"], "T1");
    assert_eq!(
        w.all_verdicts().len(),
        cases.len(),
        "{:?}",
        w.all_verdicts()
    );
    assert!(!marker.exists(), "a runner was started for a bad job");
    assert!(w.log_lines("runner start").is_empty());
}

fn assert_bad_job_verdict(v: &Value, stem: &str, reason: &str) {
    assert_eq!(v["id"], stem, "{v}");
    assert_eq!(v["outcome"], "unchecked", "{v}");
    let got = v["reason"].as_str().unwrap_or_default();
    assert!(
        got.starts_with(reason),
        "{stem}: reason {got:?} does not start with {reason:?}"
    );
    assert_eq!(v["attempts"], json!([]), "{v}");
    assert_eq!(v["runner"], Value::Null, "{v}");
    assert_eq!(v["answer"], Value::Null, "{v}");
}

/// A job over `max_job_bytes` is never read whole; its judge-error verdict goes to the
/// folder of the transcript its first 64 KiB name (where `drain` finds it), else to
/// the empty transcript's folder, saying so.
#[test]
fn a_job_larger_than_max_job_bytes_is_a_judge_error_in_its_transcripts_folder() {
    let w = World::new();
    let config = w.config_file("small.toml", "max_job_bytes = 64\n");
    let job = json!({"prompt": "x".repeat(100), "transcript": "T-big"});
    let path = w.job("large", &job);
    let far = json!({"prompt": "x".repeat(70 * 1024), "transcript": "T-big"});
    let far_path = w.job("far", &far);
    let fits = w.job("fits", &json!({"prompt": "p", "transcript": "T-big"}));
    let runners = table(&[w.runner("r", "echo '{}'\n")]);
    for p in [&path, &far_path, &fits] {
        assert_eq!(w.run_file_configured(p, &runners, &config).code, Some(0));
        assert!(!p.exists());
    }
    let v = w.verdict_of("T-big", "large");
    assert_bad_job_verdict(
        &v,
        "large",
        "judge error: job file is larger than max_job_bytes (64 bytes)",
    );
    assert_eq!(v["transcript"], "T-big");
    let line = format!(
        " WARN bad job id=large file={} reason=\"judge error",
        s(&path)
    );
    assert_eq!(w.log_lines(&line).len(), 1, "{}", w.log());
    // Past the first 64 KiB: the empty transcript's folder, and the reason says why.
    let v = w.verdict_in(NO_TRANSCRIPT, "far");
    assert_bad_job_verdict(
        &v,
        "far",
        "judge error: job file is larger than max_job_bytes (64 bytes); no \"transcript\" in \
         its first 64 KiB, so its verdict is in the folder of the empty transcript",
    );
    assert_eq!(w.verdict_of("T-big", "fits")["outcome"], "hit");
    // drain --transcript T-big returns the oversized job's verdict.
    let mut cmd = w.cli();
    cmd.args(["drain", "--transcript", "T-big"]);
    let out = w.run(cmd);
    let ids: Vec<String> = out
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert!(ids.contains(&"large".to_string()), "{ids:?}");
}

#[test]
fn symlinks_folders_and_fifos_are_rejected_without_a_verdict() {
    for kind in ["symlink", "folder", "FIFO"] {
        let w = World::new();
        let path = w.jobs().join("x.json");
        let outside = w.root.join("outside.json");
        fs::write(&outside, r#"{"prompt": "p"}"#).unwrap();
        match kind {
            "symlink" => std::os::unix::fs::symlink(&outside, &path).unwrap(),
            "folder" => {
                fs::create_dir(&path).unwrap();
                fs::write(path.join("inside"), "x").unwrap();
            }
            _ => {
                let c = std::ffi::CString::new(s(&path)).unwrap();
                // SAFETY: mkfifo with a valid C string.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }
        }
        let runners = table(&[w.runner("r", "echo '{}'\n")]);
        let mut cmd = w.cli();
        cmd.env(RUNNERS_VAR, &runners).arg("run").arg(&path);
        // A FIFO must not block the judge: a short bound.
        let done = w.spawn(cmd).finish(Duration::from_secs(30));
        // Not a job: exit 2, and moved to rejected/ since it lies in jobs/.
        assert_eq!(done.code, Some(2), "{kind}: {done:?}");
        assert!(
            fs::symlink_metadata(&path).is_err(),
            "{kind}: still in jobs/"
        );
        let moved = w.state().join("rejected/x.json");
        let meta = fs::symlink_metadata(&moved).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let t = meta.file_type();
        assert!(
            match kind {
                "symlink" => t.is_symlink(),
                "folder" => t.is_dir(),
                _ => t.is_fifo(),
            },
            "{kind}: moved file has type {t:?}"
        );
        assert_eq!(w.all_verdicts(), Vec::<std::path::PathBuf>::new(), "{kind}");
        assert_eq!(fs::read_to_string(&outside).unwrap(), r#"{"prompt": "p"}"#);
        if kind == "folder" {
            assert!(moved.join("inside").exists());
        }
        let line = format!(
            " WARN not a regular file: not a job, moved to rejected/ file={} kind=\"{kind}\" moved_to={}",
            s(&path),
            s(&moved)
        );
        assert_eq!(
            w.log_lines(&line).len(),
            1,
            "{kind}: no {line:?} in\n{}",
            w.log()
        );
        assert!(w.log_lines("runner start").is_empty());
    }
}

// ---------------------------------------------------------------- config and override refusals

/// `argv` with the run of items `remove` taken out and `add` put before the final `--`.
fn edited(mut argv: Vec<String>, remove: &[&str], add: &[&str]) -> Vec<String> {
    if !remove.is_empty() {
        let at = argv
            .windows(remove.len())
            .position(|w| w == remove)
            .unwrap_or_else(|| panic!("no {remove:?} in {argv:?}"));
        argv.drain(at..at + remove.len());
    }
    let dashes = argv.iter().position(|a| a == "--").unwrap();
    for (k, a) in add.iter().enumerate() {
        argv.insert(dashes + k, a.to_string());
    }
    argv
}

#[test]
fn unsafe_investigate_tables_in_a_config_file_are_refused_naming_runner_and_flag() {
    let w = World::new();
    let nothing = w.jobs().join("nothing.json");
    let check = |name: &str, argv: Vec<String>| {
        let config = w.config_file(
            &format!("{name}.toml"),
            &runner_toml("investigate", name, &argv),
        );
        let mut cmd = w.cli();
        cmd.arg("--config").arg(&config).arg("run").arg(&nothing);
        (w.run(cmd), config)
    };
    // The shipped table itself passes.
    let (done, _) = check("shipped-claude", investigate_claude("claude"));
    assert_eq!(done.code, Some(0), "{done:?}");
    let (done, _) = check("shipped-codex", investigate_codex("codex"));
    assert_eq!(done.code, Some(0), "{done:?}");

    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        (
            "no-tools",
            edited(
                investigate_claude("claude"),
                &["--tools", "Read", "Grep", "Glob"],
                &[],
            ),
            "flag \"--tools\" is missing",
        ),
        (
            "tools-twice",
            edited(investigate_claude("claude"), &[], &["--tools", "Read"]),
            "flag \"--tools\" is given twice",
        ),
        (
            "extra-tool",
            edited(
                investigate_claude("claude"),
                &["--tools", "Read", "Grep", "Glob"],
                &["--tools", "Read", "Write"],
            ),
            "flag \"--tools\" names tool \"Write\"",
        ),
        (
            "bash-allowed",
            edited(
                investigate_claude("claude"),
                &["--disallowedTools", "Write", "Edit", "NotebookEdit", "Bash"],
                &["--disallowedTools", "Write", "Edit", "NotebookEdit"],
            ),
            "flag \"--disallowedTools\" must name Write, Edit, NotebookEdit and Bash; \"Bash\" is missing",
        ),
        (
            "allowed-bash",
            edited(
                investigate_claude("claude"),
                &["--allowedTools", "Read", "Grep", "Glob"],
                &["--allowedTools", "Read,Bash"],
            ),
            "flag \"--allowedTools\" names tool \"Bash\"",
        ),
        (
            "no-strict-mcp",
            edited(investigate_claude("claude"), &["--strict-mcp-config"], &[]),
            "flag \"--strict-mcp-config\" is missing",
        ),
        (
            "skip-permissions",
            edited(
                investigate_claude("claude"),
                &[],
                &["--dangerously-skip-permissions"],
            ),
            "flag \"--dangerously-skip-permissions\" is not allowed",
        ),
        (
            "codex-no-sandbox",
            edited(investigate_codex("codex"), &["--sandbox", "read-only"], &[]),
            "flag \"--sandbox read-only\" is missing",
        ),
        (
            "codex-writable",
            edited(
                investigate_codex("codex"),
                &["--sandbox", "read-only"],
                &["--sandbox", "workspace-write"],
            ),
            "flag \"--sandbox\" must be \"read-only\"",
        ),
        (
            "codex-user-config",
            edited(investigate_codex("codex"), &["--ignore-user-config"], &[]),
            "flag \"--ignore-user-config\" is missing",
        ),
        (
            "cursor",
            with_program(DEFAULT_CURSOR, "cursor-agent"),
            "program \"cursor-agent\" is not allowed",
        ),
        (
            "python",
            strings(&["/usr/bin/python3", "-c", "print(1)", "--", "{prompt}"]),
            "program \"python3\" is not allowed",
        ),
    ];
    for (name, argv, flag) in cases {
        let (done, config) = check(name, argv);
        assert_eq!(done.code, Some(2), "{name}: {done:?}");
        let runner = format!("investigate runner \"{name}\" is unsafe: ");
        assert!(
            done.stderr.contains(&runner),
            "{name}: {:?} lacks {runner:?}",
            done.stderr
        );
        assert!(
            done.stderr.contains(flag),
            "{name}: {:?} lacks {flag:?}",
            done.stderr
        );
        assert!(
            done.stderr.contains(s(&config)),
            "{name}: {:?} lacks the file",
            done.stderr
        );
        assert_eq!(done.stdout, "");
    }
}

#[test]
fn a_bad_config_file_is_refused_naming_the_problem() {
    let w = World::new();
    let nothing = w.jobs().join("nothing.json");
    let cases = [
        ("unknown-key.toml", Some("wrokers = 2\n"), "wrokers"),
        ("bad-value.toml", Some("workers = 0\n"), "workers"),
        ("not-toml.toml", Some("workers = [\n"), "not-toml.toml"),
        ("missing.toml", None, "missing.toml"),
    ];
    for (name, text, named) in cases {
        let path = match text {
            Some(t) => w.config_file(name, t),
            None => w.root.join(name),
        };
        let mut cmd = w.cli();
        cmd.arg("--config").arg(&path).arg("run").arg(&nothing);
        let done = w.run(cmd);
        assert_eq!(done.code, Some(2), "{name}: {done:?}");
        assert!(done.stderr.contains(named), "{name}: {:?}", done.stderr);
    }
}

#[test]
fn a_bad_runner_override_is_refused_naming_the_variable() {
    let w = World::new();
    let nothing = w.jobs().join("nothing.json");
    for bad in [
        "nope",
        "{}",
        "[1]",
        "[[\"a\"]]",
        "[[\"a\", []]]",
        "[[\"a\", [\"x\", 1]]]",
        "[[1, [\"x\"]]]",
    ] {
        // `run` gives the job a judge-error verdict instead (migration.rs).
        let mut cmd = w.cli();
        cmd.env(RUNNERS_VAR, bad).arg("ask").arg(s(&nothing));
        let done = w.run(cmd);
        assert_eq!(done.code, Some(2), "{bad}: {done:?}");
        assert!(
            done.stderr.contains(RUNNERS_VAR),
            "{bad}: {:?}",
            done.stderr
        );
        assert_eq!(done.stdout, "");
    }
    // Empty means unset.
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, "").arg("run").arg(&nothing);
    assert_eq!(w.run(cmd).code, Some(0));
}

// ---------------------------------------------------------------- claims

#[test]
fn run_on_a_job_claimed_by_another_run_does_not_judge_it_twice() {
    let w = World::new();
    let starts = w.root.join("starts");
    let release = w.root.join("release");
    let hold = format!(
        "echo started >> '{starts}'\n\
         i=0\n\
         while [ ! -e '{release}' ]; do\n\
           i=$((i + 1)); [ $i -gt 1200 ] && exit 9\n\
           sleep 0.05\n\
         done\n\
         echo '{{\"held\": true}}'\n",
        starts = s(&starts),
        release = s(&release)
    );
    let runners = table(&[w.runner("hold", &hold)]);
    let job = w.job(
        "claimed",
        &json!({"prompt": "p", "transcript": "/t/c.jsonl"}),
    );
    let mut first_cmd = w.cli();
    first_cmd.env(RUNNERS_VAR, &runners).arg("run").arg(&job);
    let mut first = w.spawn(first_cmd);
    let started = wait_until(within(Duration::from_secs(30)), || {
        starts.exists() || first.exited()
    });
    assert!(
        started && starts.exists(),
        "the first run's runner never started\n{}",
        w.log()
    );

    let second = w.run_file(&job, Some(&runners));
    assert_eq!(second.code, Some(0), "{second:?}");
    let busy = format!("{} is being judged by process {}", s(&job), first.pid);
    assert!(
        second.stderr.contains(&busy),
        "{:?} lacks {busy:?}",
        second.stderr
    );
    assert!(job.exists(), "the job went away while claimed");
    assert!(w.all_verdicts().is_empty());

    fs::write(&release, "").unwrap();
    let first = first.finish(NO_HANG);
    assert_eq!(first.code, Some(0), "{first:?}");
    assert_eq!(
        fs::read_to_string(&starts).unwrap(),
        "started\n",
        "runner started more than once"
    );
    assert_eq!(
        w.all_verdicts(),
        [w.verdict_path(&transcript_hash("/t/c.jsonl"), "claimed")]
    );
    assert_eq!(w.verdict_of("/t/c.jsonl", "claimed")["runner"], "hold");
    assert!(!job.exists());

    // A late run finds nothing to do.
    let late = w.run_file(&job, Some(&runners));
    assert_eq!(late.code, Some(0));
    assert_eq!(w.all_verdicts().len(), 1);
}

// ---------------------------------------------------------------- ask

#[test]
fn ask_prints_outcome_runner_answer_attempts_and_exits_0_when_answered() {
    let w = World::new();
    let runners = table(&[
        w.runner("fail", "exit 4\n"),
        json!([
            "ok",
            [
                "/bin/sh",
                s(&w.script("ok", &format!("{}echo '{{\"yes\": 1}}'\n", w.recorder()))),
                "--",
                "{prompt}"
            ]
        ]),
    ]);
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, &runners)
        .args(["ask", "--timeout", "7", "--cwd"])
        .arg(&w.work)
        .args(["--", "--is-it-fine"]);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(0), "{done:?}");
    let out = done.json();
    let keys: Vec<&str> = out
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["outcome", "runner", "answer", "attempts"]);
    assert_eq!(out["outcome"], "answered");
    assert_eq!(out["runner"], "ok");
    assert_eq!(out["answer"], json!({"yes": 1}));
    assert_eq!(
        attempts(&out),
        expected(&[("fail", false, "exit 4"), ("ok", true, "answered")])
    );
    assert_eq!(w.recorded_argv("ok"), ["--", "--is-it-fine"]);
    assert_eq!(w.recorded("ok", "pwd").trim_end(), s(&w.work));
    w.log_line_ending(&format!(
        " INFO runner start id=ask runner=ok timeout=7 cwd={}",
        s(&w.work)
    ));
    assert!(w.all_verdicts().is_empty(), "ask wrote a verdict");
}

#[test]
fn ask_with_no_runners_exits_1_unchecked() {
    let w = World::new();
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, "[]").args(["ask", "anything"]);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(1), "{done:?}");
    assert_eq!(
        done.json(),
        json!({"outcome": "unchecked", "runner": null, "answer": null, "attempts": []})
    );

    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, table(&[w.runner("mute", "exit 0\n")]))
        .args(["ask", "--mode", "investigate", "anything"]);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(1), "{done:?}");
    let out = done.json();
    assert_eq!(out["outcome"], "unchecked");
    assert_eq!(
        attempts(&out),
        expected(&[("mute", false, "no JSON object line in stdout")])
    );
}
