//! The shipped tables as `run` starts them: each runner's argv, folder and timeout,
//! and how a job's timeout and cwd are read.

use super::*;
use crate::support::*;

use std::fs;
use std::time::Duration;

use crate::support::pinned::*;
use serde_json::{Value, json};

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
    // An unchecked verdict is a warning (someone should look), its fields in order.
    let finished = " WARN job finished id=plain outcome=unchecked runner=- duration_ms=";
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
