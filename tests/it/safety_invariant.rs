//! The investigate safety invariant (docs/reference.md, "Runners") through the real daemon: tables
//! that break it in every way are refused at daemon start (exit non-zero, stderr names
//! the runner and the flag) and on SIGHUP reload (the daemon keeps running with the
//! old table, judge.log says "config reload failed" and names the problem); and no
//! job can reach a runner argv other than by picking a table with `mode`.

use crate::support::*;

use std::collections::BTreeMap;
use std::fs;
use std::time::Duration;

use crate::support::pinned::*;
use serde_json::{Value, json};

/// The arguments after the program an investigate `argv` is started with for `prompt`:
/// the judge's instructions file filled in, no trimmed catalog (the fakes print none).
fn as_started(w: &World, argv: &[String], prompt: &str) -> Vec<String> {
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let instructions = w.state().join("codex/instructions-investigate.md");
    args_as_started(&argv, prompt, instructions.to_str().unwrap(), None)
}

/// True for the daemon's own `codex debug models` (its catalog read), not a job's run.
fn is_catalog_read(args: &[String]) -> bool {
    args.len() == 2 && args[0] == "debug" && args[1] == "models"
}

/// Replaces the first run of items equal to `from` by `to`; an empty `from` inserts
/// `to` right before the final `--`.
fn edit(argv: Vec<String>, from: &[&str], to: &[&str]) -> Vec<String> {
    let to = strings(to);
    let mut out = argv.clone();
    if from.is_empty() {
        let at = argv.iter().rposition(|a| a == "--").unwrap();
        out.splice(at..at, to);
        return out;
    }
    let at = argv
        .windows(from.len())
        .position(|w| w.iter().zip(from).all(|(a, b)| a == b))
        .unwrap_or_else(|| panic!("{from:?} not in {argv:?}"));
    out.splice(at..at + from.len(), to);
    out
}

/// Every way of breaking the invariant: (runner name, argv, words the refusal must hold).
fn unsafe_cases() -> Vec<(&'static str, Vec<String>, Vec<&'static str>)> {
    let tools = ["--tools", "Read", "Grep", "Glob"];
    let denied = ["--disallowedTools", "Write", "Edit", "NotebookEdit", "Bash"];
    vec![
        (
            "claude-no-tools",
            edit(investigate_claude("claude"), &tools, &[]),
            vec!["--tools", "missing"],
        ),
        (
            "claude-tools-write",
            edit(
                investigate_claude("claude"),
                &tools,
                &["--tools", "Read", "Grep", "Glob", "Write"],
            ),
            vec!["--tools", "Write"],
        ),
        (
            "claude-tools-webfetch",
            edit(
                investigate_claude("claude"),
                &tools,
                &["--tools", "Read", "WebFetch"],
            ),
            vec!["--tools", "WebFetch"],
        ),
        (
            "claude-tools-comma-bash",
            edit(
                investigate_claude("claude"),
                &tools,
                &["--tools", "Read,Grep,Bash"],
            ),
            vec!["--tools", "Bash"],
        ),
        (
            "claude-tools-equals-write",
            edit(
                investigate_claude("claude"),
                &tools,
                &["--tools=Read,Write"],
            ),
            vec!["--tools", "Write"],
        ),
        (
            "claude-allowed-webfetch",
            edit(
                investigate_claude("claude"),
                &["--allowedTools", "Read", "Grep", "Glob"],
                &["--allowedTools", "Read", "WebFetch"],
            ),
            vec!["--allowedTools", "WebFetch"],
        ),
        (
            "claude-bash-not-denied",
            edit(
                investigate_claude("claude"),
                &denied,
                &["--disallowedTools", "Write", "Edit", "NotebookEdit"],
            ),
            vec!["--disallowedTools", "Bash"],
        ),
        (
            "claude-no-denied",
            edit(investigate_claude("claude"), &denied, &[]),
            vec!["--disallowedTools"],
        ),
        (
            "claude-no-strict-mcp",
            edit(investigate_claude("claude"), &["--strict-mcp-config"], &[]),
            vec!["--strict-mcp-config"],
        ),
        (
            "claude-skip-permissions",
            edit(
                investigate_claude("claude"),
                &[],
                &["--dangerously-skip-permissions"],
            ),
            vec!["--dangerously-skip-permissions"],
        ),
        (
            "claude-permission-mode-equals",
            edit(
                investigate_claude("claude"),
                &[],
                &["--permission-mode=bypassPermissions"],
            ),
            vec!["--permission-mode"],
        ),
        (
            "claude-mcp-config",
            edit(
                investigate_claude("claude"),
                &[],
                &["--mcp-config", "servers.json"],
            ),
            vec!["--mcp-config"],
        ),
        (
            "claude-add-dir",
            edit(investigate_claude("claude"), &[], &["--add-dir", "/"]),
            vec!["--add-dir"],
        ),
        (
            "claude-prompt-as-model",
            edit(
                investigate_claude("claude"),
                &["--model", "haiku"],
                &["--model", "{prompt}"],
            ),
            vec!["{prompt}"],
        ),
        (
            "claude-prompt-without-double-dash",
            edit(
                investigate_claude("claude"),
                &["--", "{prompt}"],
                &["{prompt}"],
            ),
            vec!["--", "{prompt}"],
        ),
        (
            "codex-no-sandbox",
            edit(investigate_codex("codex"), &["--sandbox", "read-only"], &[]),
            vec!["--sandbox", "missing"],
        ),
        (
            "codex-workspace-write",
            edit(
                investigate_codex("codex"),
                &["--sandbox", "read-only"],
                &["--sandbox", "workspace-write"],
            ),
            vec!["--sandbox", "workspace-write"],
        ),
        (
            "codex-sandbox-equals-full",
            edit(
                investigate_codex("codex"),
                &["--sandbox", "read-only"],
                &["--sandbox=danger-full-access"],
            ),
            vec!["--sandbox", "danger-full-access"],
        ),
        (
            "codex-s-workspace-write",
            edit(
                investigate_codex("codex"),
                &["--sandbox", "read-only"],
                &["-s", "workspace-write"],
            ),
            vec!["-s", "workspace-write"],
        ),
        (
            "codex-no-ignore-user-config",
            edit(investigate_codex("codex"), &["--ignore-user-config"], &[]),
            vec!["--ignore-user-config"],
        ),
        (
            "codex-bypass",
            edit(
                investigate_codex("codex"),
                &[],
                &["--dangerously-bypass-approvals-and-sandbox"],
            ),
            vec!["--dangerously-bypass-approvals-and-sandbox"],
        ),
        (
            "codex-full-auto",
            edit(investigate_codex("codex"), &[], &["--full-auto"]),
            vec!["--full-auto"],
        ),
        (
            "codex-c-mcp-server",
            edit(
                investigate_codex("codex"),
                &["-c", "notify=[]"],
                &["-c", "mcp_servers.x.command=\"sh\""],
            ),
            vec!["-c"],
        ),
        (
            "codex-config-equals",
            edit(
                investigate_codex("codex"),
                &[],
                &["--config=sandbox_mode=\"danger-full-access\""],
            ),
            vec!["--config"],
        ),
        (
            "codex-review",
            edit(investigate_codex("codex"), &["exec"], &["review"]),
            vec!["codex exec"],
        ),
        (
            "cursor",
            with_program(DEFAULT_CURSOR, "cursor-agent"),
            vec!["cursor-agent"],
        ),
        (
            "sh",
            strings(&["sh", "-c", "cat", "--", "{prompt}"]),
            vec!["\"sh\""],
        ),
        (
            "bash-path",
            strings(&["/bin/bash", "--", "{prompt}"]),
            vec!["\"bash\""],
        ),
    ]
}

/// A config whose default table is one `/bin/sh` fake and whose investigate table is `investigate`.
fn config_text(w: &World, investigate: &[(&str, Vec<String>)]) -> String {
    let plain = w.path("bin/plain.sh");
    let mut text = format!(
        "fsync = false\nkill_grace_seconds = 1\n\n{}",
        runner_toml("default", "plain", &["/bin/sh", s(&plain), "{prompt}"])
    );
    for (name, argv) in investigate {
        text.push_str(&format!("\n{}", runner_toml("investigate", name, argv)));
    }
    text
}

/// A fake program (exec'd by the judge, so a real executable named like the real
/// runner) that records its args NUL-separated, its stdin and its folder, then answers.
fn install_recording_fake(w: &World, name: &str) -> String {
    let path = w.path(&format!("bin/{name}"));
    install_exe(
        &path,
        &format!(
            "[ -n \"$FAKE_PROBE\" ] && exit 0\n\
             read -r p _ </proc/self/stat\n\
             R={rec}/{name}.$p-$(stat -Lc %i /proc/self/ns/pid)\n\
             printf '%s\\0' \"$@\" > $R.argv\n\
             cat > $R.stdin\n\
             pwd > $R.pwd\n\
             echo '{{\"ok\": true}}'",
            rec = w.path("rec").display()
        ),
    );
    path.to_str().unwrap().to_string()
}

#[test]
fn unsafe_investigate_tables_are_refused_at_daemon_start() {
    let w = World::new();
    let mark = new_mark("start-refusal");
    let _reaper = Reaper::new(&mark);
    fs::write(w.path("bin/plain.sh"), "echo '{\"ok\": true}'\n").unwrap();
    // The shipped table (and a codex-only one) passes: the check is not vacuous.
    for (i, (name, argv)) in [
        ("claude", investigate_claude("claude")),
        ("codex", investigate_codex("/opt/x/codex")),
    ]
    .into_iter()
    .enumerate()
    {
        write_config(&w, &config_text(&w, &[(name, argv)]));
        let mut d = spawn(&w, command(&w, None, &mark), &["daemon"]);
        wait_for("daemon start", NO_HANG, || {
            w.log().matches("daemon start").count() == i + 1
        });
        assert!(d.alive(), "{name}: {}", d.stderr());
        signal(d.child.id(), libc::SIGTERM);
        let (status, _) = d.finish(Duration::from_secs(30));
        assert!(status.success(), "{status:?}");
    }
    w.job("waiting", &json!({"prompt": "p"}));
    let mut cases = unsafe_cases();
    // One bad runner after a good one is refused too.
    cases.push((
        "after-a-good-one",
        edit(
            investigate_claude("claude"),
            &[],
            &["--dangerously-skip-permissions"],
        ),
        vec!["--dangerously-skip-permissions"],
    ));
    for (name, argv, words) in &cases {
        let table: Vec<(&str, Vec<String>)> = if *name == "after-a-good-one" {
            vec![
                ("good-codex", investigate_codex("codex")),
                (name, argv.clone()),
            ]
        } else {
            vec![(name, argv.clone())]
        };
        write_config(&w, &config_text(&w, &table));
        let starts = w.log().matches("daemon start").count();
        let mut d = spawn(&w, command(&w, None, &mark), &["daemon"]);
        let (status, elapsed) = d.finish(Duration::from_secs(30));
        assert!(!status.success(), "{name}: the daemon started: {status:?}");
        // Refused at start, not after a wait (room for a loaded machine).
        assert!(elapsed < Duration::from_secs(20), "{name}: {elapsed:?}");
        let err = d.stderr();
        let runner = format!("investigate runner \"{name}\"");
        assert!(
            err.contains(&runner),
            "{name}: stderr lacks {runner}: {err}"
        );
        for word in words {
            assert!(err.contains(word), "{name}: stderr lacks {word:?}: {err}");
        }
        assert_eq!(
            w.log().matches("daemon start").count(),
            starts,
            "{name}: the daemon got as far as starting"
        );
    }
    assert_eq!(w.jobs_left(), ["waiting.json"], "nothing was judged");
    assert!(w.verdicts().is_empty());
    assert!(wait_no_marked(&mark, &[], Duration::from_secs(30)).is_empty());
}

/// The `n`th (1-based) line holding `what` in judge.log.
fn nth_line(w: &World, what: &str, n: usize) -> Option<String> {
    w.log()
        .lines()
        .filter(|l| l.contains(what))
        .nth(n - 1)
        .map(str::to_string)
}

#[test]
fn unsafe_investigate_tables_are_refused_on_sighup_and_the_old_table_stays() {
    let w = World::new();
    let mark = new_mark("reload-refusal");
    let _reaper = Reaper::new(&mark);
    fs::write(w.path("bin/plain.sh"), "echo '{\"ok\": true}'\n").unwrap();
    fs::create_dir_all(w.path("rec")).unwrap();
    let fake = install_recording_fake(&w, "codex");
    let old = investigate_codex(&fake);
    write_config(&w, &config_text(&w, &[("old-codex", old.clone())]));
    let mut d = w.start_with(command(&w, None, &mark));
    w.wait_log("daemon start");

    let judge = |id: &str, n: usize| {
        w.job(
            id,
            &json!({"prompt": id, "mode": "investigate", "transcript": "T"}),
        );
        wait_for(&format!("{id} judged"), NO_HANG, || w.verdicts().len() == n);
        w.verdict(id)
    };
    assert_eq!(judge("before", 1)["runner"], "old-codex");

    let cases = unsafe_cases();
    for (i, (name, argv, words)) in cases.iter().enumerate() {
        write_config(&w, &config_text(&w, &[(name, argv.clone())]));
        d.signal("HUP");
        wait_for(&format!("reload {i} refused"), NO_HANG, || {
            nth_line(&w, "config reload failed", i + 1).is_some()
        });
        let line = nth_line(&w, "config reload failed", i + 1).unwrap();
        assert!(line.contains(name), "{name}: {line}");
        for word in words {
            assert!(line.contains(word), "{name}: {line} lacks {word:?}");
        }
        assert!(d.child.try_wait().unwrap().is_none(), "{name}: daemon died");
        if i % 7 == 3 {
            // Now and then a job in between: still the old table.
            let id = format!("between{i}");
            let v = judge(&id, w.verdicts().len() + 1);
            assert_eq!(v["runner"], "old-codex", "{name}: {v}");
        }
    }
    assert!(!w.log().contains("config reloaded"), "{}", w.log());
    let v = judge("after", w.verdicts().len() + 1);
    assert_eq!(v["runner"], "old-codex");
    assert_eq!(v["outcome"], "hit");
    // The old table's argv, prompt substituted, is what ran for every job.
    for file in names(&w.path("rec")) {
        if let Some(stem) = file.strip_suffix(".argv") {
            let args = nul_items(&fs::read(w.path(&format!("rec/{file}"))).unwrap());
            if is_catalog_read(&args) {
                continue;
            }
            let prompt = args.last().cloned().unwrap_or_default();
            assert_eq!(args, as_started(&w, &old, &prompt), "{stem}");
        }
    }

    // A good table does load on the next SIGHUP: the refusals above were not because
    // reloads never work.
    fs::remove_dir_all(w.path("rec")).unwrap();
    fs::create_dir_all(w.path("rec")).unwrap();
    write_config(
        &w,
        &config_text(&w, &[("new-codex", investigate_codex(&fake))]),
    );
    d.signal("HUP");
    w.wait_log("config reloaded");
    assert_eq!(
        judge("reloaded", w.verdicts().len() + 1)["runner"],
        "new-codex"
    );
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(30)).success());
}

/// What each fake run recorded, keyed by the prompt it got (argv or stdin).
fn recorded_runs(w: &World) -> BTreeMap<String, Vec<(String, Vec<String>, String)>> {
    let mut runs: BTreeMap<String, Vec<(String, Vec<String>, String)>> = BTreeMap::new();
    for file in names(&w.path("rec")) {
        let Some(stem) = file.strip_suffix(".argv") else {
            continue;
        };
        let program = stem.split('.').next().unwrap().to_string();
        let args = nul_items(&fs::read(w.path(&format!("rec/{file}"))).unwrap());
        if is_catalog_read(&args) {
            continue;
        }
        let stdin = fs::read_to_string(w.path(&format!("rec/{stem}.stdin"))).unwrap_or_default();
        let pwd = fs::read_to_string(w.path(&format!("rec/{stem}.pwd"))).unwrap_or_default();
        let prompt = if args.len() >= 2 && args[args.len() - 2] == "--" {
            args.last().unwrap().clone()
        } else {
            stdin
        };
        runs.entry(prompt)
            .or_default()
            .push((program, args, pwd.trim_end().to_string()));
    }
    runs
}

#[test]
fn no_job_key_reaches_the_runner_argv_only_mode_picks_a_table() {
    let w = World::new();
    let mark = new_mark("job-keys");
    let _reaper = Reaper::new(&mark);
    fs::create_dir_all(w.path("rec")).unwrap();
    fs::create_dir_all(w.path("work")).unwrap();
    let plain = install_recording_fake(&w, "plainfake");
    let codex_fake = install_recording_fake(&w, "codex");
    let default_argv = strings(&[&plain, "--fixed", "a b", "", "-p", "--", "{prompt}"]);
    let investigate_argv = investigate_codex(&codex_fake);
    write_config(
        &w,
        &format!(
            "fsync = false\nkill_grace_seconds = 1\nworkers = 4\n\n{}\n{}",
            runner_toml("default", "plain", &default_argv),
            runner_toml("investigate", "inv", &investigate_argv)
        ),
    );
    let pwned = w.path("pwned");
    let evil = json!([[
        "evil",
        ["/bin/sh", "-c", format!("touch {}", pwned.display())]
    ]]);
    let work = w.path("work");
    let work = work.to_str().unwrap();
    // (job, table it must reach: true = investigate)
    let jobs: Vec<(Value, bool)> = vec![
        (
            json!({"prompt": "P1", "argv": ["/bin/sh", "-c", format!("touch {}", pwned.display())]}),
            false,
        ),
        (json!({"prompt": "P2", "runners": evil.clone()}), false),
        (
            json!({"prompt": "P3", "command": "touch pwned", "program": "/bin/sh", "args": ["-c", "touch pwned"], "runner": "evil", "table": "evil"}),
            false,
        ),
        (
            json!({"prompt": "P4", "mode": "investigate; rm -rf /tmp/x"}),
            false,
        ),
        (
            json!({"prompt": "P5", "mode": "investigate", "cwd": work}),
            true,
        ),
        (json!({"prompt": "P6", "mode": ["investigate"]}), false),
        (
            json!({"prompt": "P7", "CATSTACK_LLM_JUDGE_RUNNERS": evil.to_string(), "env": {"PATH": "/evil"}, "LLM_JUDGE_TAG": "x", "mode": "investigate"}),
            true,
        ),
        (
            json!({"prompt": "--dangerously-skip-permissions", "mode": "investigate"}),
            true,
        ),
        (
            json!({"prompt": "{prompt}", "extra_args": ["--yolo"], "flags": "--yolo"}),
            false,
        ),
        (
            json!({"prompt": "P10 $(touch pwned) `touch pwned`; rm -rf ~", "mode": "Investigate"}),
            false,
        ),
        (
            json!({"prompt": "P11\u{0}nul", "mode": "investigate"}),
            true,
        ),
        (
            json!({"prompt": "P12", "timeout_seconds": "--yolo", "hook": "--x", "cwd": "relative/../x", "mode": "investigate"}),
            true,
        ),
        (
            json!({"prompt": "P13", "id": "P13-id", "mode": null, "cwd": 5}),
            false,
        ),
        (
            json!({"prompt": "-p", "mode": "default", "cwd": "/"}),
            false,
        ),
    ];
    let mut d = w.start_with(command(&w, None, &mark));
    w.wait_log("daemon start");
    for (i, (job, _)) in jobs.iter().enumerate() {
        w.job(&format!("k{i:02}"), job);
    }
    wait_for("every job judged", NO_HANG, || {
        w.verdicts().len() == jobs.len()
    });
    let runs = recorded_runs(&w);
    for (i, (job, investigate)) in jobs.iter().enumerate() {
        let prompt = job["prompt"].as_str().unwrap();
        let v = w.verdict(&format!("k{i:02}"));
        assert_eq!(v["outcome"], "hit", "{job}: {v}");
        let (name, argv, program) = if *investigate {
            ("inv", &investigate_argv, "codex")
        } else {
            ("plain", &default_argv, "plainfake")
        };
        assert_eq!(v["runner"], name, "{job}");
        let got = runs
            .get(prompt)
            .unwrap_or_else(|| panic!("{job}: no run recorded"));
        assert_eq!(got.len(), 1, "{job}: {got:?}");
        let (ran, args, pwd) = &got[0];
        assert_eq!(ran, program, "{job}");
        let expected: Vec<String> = if *investigate {
            let full = as_started(&w, argv, prompt);
            match prompt.contains('\0') {
                // Cannot be an argument: the slot and its `--` are dropped, stdin has it.
                true => full[..full.len() - 2].to_vec(),
                false => full,
            }
        } else if prompt.contains('\0') {
            // Cannot be an argument: the slot and its `--` are dropped, stdin has it.
            argv[1..argv.len() - 2].to_vec()
        } else {
            argv[1..]
                .iter()
                .map(|a| {
                    if a == "{prompt}" {
                        prompt.to_string()
                    } else {
                        a.clone()
                    }
                })
                .collect()
        };
        assert_eq!(args, &expected, "{job}");
        // Only a runner that passes the allowlist (here codex) gets the job's cwd.
        match job.get("cwd").and_then(Value::as_str) {
            Some(dir) if dir.starts_with('/') && *investigate => assert_eq!(pwd, dir, "{job}"),
            _ => assert!(
                pwd.starts_with(w.state().join("tmp").to_str().unwrap()),
                "{job}: ran in {pwd}"
            ),
        }
    }
    assert_eq!(
        runs.values().map(Vec::len).sum::<usize>(),
        jobs.len(),
        "{runs:?}"
    );
    assert!(
        !pwned.exists() && !w.path("work/pwned").exists(),
        "a job ran its own command"
    );
    let log = w.log();
    assert!(
        log.contains("unknown \"mode\" \"investigate; rm -rf /tmp/x\"; using the default table"),
        "the unknown mode is logged: {log}"
    );
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(30)).success());
    assert!(wait_no_marked(&mark, &[], Duration::from_secs(30)).is_empty());
}
