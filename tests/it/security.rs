//! The attack review's findings (docs/reference.md: "State folder", "Job file",
//! "Runners", "judge.log"), each through the binary: program lookup, symlinks in the
//! state folder, forged log lines, a closed stdout, and a writable runner given a real
//! folder. The allowlist bypasses are unit tests in `src/core/safety/` (`tests.rs`, and
//! `claude_parser_props.rs`: a property test against a commander-style parse);
//! escapees are in `escapees.rs`; temp folders in `core.rs`.

use crate::support::*;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

/// A relative `PATH` entry (`bin`, `.`) is skipped: a program inside the job's cwd
/// never runs in place of the real runner.
#[test]
fn a_program_in_the_jobs_cwd_never_runs_through_a_relative_path_entry() {
    let w = World::new();
    // The planted fake sits in the job's cwd under bin/ and in the cwd itself.
    for dir in [w.work.join("bin"), w.work.clone()] {
        fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("codex");
        fs::write(
            &fake,
            format!(
                "#!/bin/sh\n[ -n \"${PROBE_VAR}\" ] && exit 0\ntouch {}/planted-ran\necho '{{\"x\": true}}'\n",
                s(&w.root)
            ),
        )
        .unwrap();
        fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
        settle(&fake);
    }
    let job = w.job(
        "lookup",
        &json!({"prompt": "p", "mode": "investigate", "cwd": s(&w.work)}),
    );
    let mut cmd = w.cli();
    // The judge's own folder is the job's cwd too, where a relative entry would resolve.
    cmd.current_dir(&w.work)
        .env("PATH", "bin:.:/usr/bin:/bin")
        .arg("run")
        .arg(&job);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        !w.root.join("planted-ran").exists(),
        "a planted program ran"
    );
    let v = w.verdict_of("", "lookup");
    assert_eq!(v["outcome"], "unchecked");
    assert_eq!(v["attempts"][0]["reason"], "not installed");
}

#[test]
fn a_table_with_a_relative_program_or_an_empty_stdin_argv_is_refused_at_load() {
    let w = World::new();
    for (argv, words) in [
        (r#"["bin/claude", "{prompt}"]"#, "relative path"),
        (r#"["{prompt}"]"#, "must be the program"),
    ] {
        let config = w.config_file(
            "bad.toml",
            &format!("[[runners.default]]\nname = \"r\"\nargv = {argv}\n"),
        );
        let mut cmd = w.cli();
        cmd.arg("--config").arg(&config).args(["ask", "question"]);
        let done = w.run(cmd);
        assert_eq!(done.code, Some(2), "{argv}: {done:?}");
        assert!(done.stderr.contains(words), "{argv}: {}", done.stderr);
        assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
    }
}

/// A 200 KiB prompt with a `["{prompt}"]`-only override: once refused at load, it
/// can no longer panic a worker.
#[test]
fn an_override_whose_argv_empties_on_stdin_is_refused_not_a_panic() {
    let w = World::new();
    let job = w.job("long", &json!({"prompt": "x".repeat(200 * 1024)}));
    let done = w.run_file(&job, Some(r#"[["r", ["{prompt}"]]]"#));
    assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
    let v = w.verdict_of("", "long");
    assert_eq!(v["outcome"], "unchecked");
    assert!(
        v["reason"].as_str().unwrap().starts_with("judge error"),
        "{v}"
    );
}

/// judge.log replaced by a symlink (to a victim's file) is never written through.
#[test]
fn a_symlinked_judge_log_is_not_followed() {
    let w = World::new();
    fs::create_dir_all(w.state()).unwrap();
    let victim = w.root.join("victim-bashrc");
    fs::write(&victim, "# victim\n").unwrap();
    std::os::unix::fs::symlink(&victim, w.log_path()).unwrap();
    let job = w.job("j", &json!({"prompt": "p"}));
    let done = w.run_file(&job, Some(&table(&[w.runner("r", "echo '{}'\n")])));
    assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "# victim\n");
}

/// `drain` refuses a symlinked `verdicts/<h>/` and leaves its target alone.
#[test]
fn drain_refuses_a_symlinked_verdict_folder() {
    let w = World::new();
    let target = w.root.join("elsewhere");
    fs::create_dir_all(&target).unwrap();
    fs::write(target.join("keep.json"), "{}").unwrap();
    fs::create_dir_all(w.state().join("verdicts")).unwrap();
    let link = w.verdict_folder("T");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let mut cmd = w.cli();
    cmd.args(["drain", "--transcript", "T"]);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(done.stderr.contains("symlink"), "{}", done.stderr);
    assert!(target.join("keep.json").exists(), "drain followed the link");
    assert!(
        w.log().contains("drain refused"),
        "no judge.log line: {}",
        w.log()
    );
}

/// The daemon refuses a symlinked `jobs/` (its permissions would be the target's).
#[test]
fn the_daemon_refuses_a_symlinked_jobs_folder() {
    let w = World::new();
    let real = w.root.join("real-jobs");
    fs::create_dir_all(&real).unwrap();
    fs::remove_dir(w.jobs()).unwrap();
    std::os::unix::fs::symlink(&real, w.jobs()).unwrap();
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, "[]").arg("daemon");
    let done = w.spawn(cmd).finish(Duration::from_secs(30));
    assert_ne!(done.code, Some(0), "{done:?}");
    assert!(done.stderr.contains("symlink"), "{}", done.stderr);
}

/// A job id and a file name holding newlines cannot forge a judge.log line.
#[test]
fn ids_and_names_with_newlines_cannot_forge_log_lines() {
    let w = World::new();
    let forged = "x\n2026-01-01T00:00:00.000000Z  INFO job finished id=forged outcome=hit";
    w.job_bytes(
        "evil\nname",
        serde_json::to_string(&json!({"prompt": "p", "id": forged}))
            .unwrap()
            .as_bytes(),
    );
    let job = w.jobs().join("evil\nname.json");
    let done = w.run_file(&job, Some(&table(&[w.runner("r", "echo '{}'\n")])));
    assert_eq!(done.code, Some(0), "{done:?}");
    let log = w.log();
    for line in log.lines() {
        assert!(
            line.starts_with("20") && line.contains("Z "),
            "a line not made by the logger: {line:?}\n{log}"
        );
    }
    assert!(log.contains("evil\\nname"), "{log}");
}

/// `status` and `doctor` with a closed stdout: an error message, never a panic.
#[test]
fn status_and_doctor_survive_a_closed_stdout() {
    let w = World::new();
    for args in [&["status"][..], &["status", "--json"], &["doctor"]] {
        let mut cmd = w.cli();
        cmd.env(RUNNERS_VAR, "[]").args(args);
        // A pipe whose reader is gone: the write fails with EPIPE.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        cmd.stdout(Stdio::from(writer)).stderr(Stdio::piped());
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot write to stdout"),
            "{args:?}: {stderr}"
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}");
    }
}

/// With stdout and stderr both closed, commands still end with their exit code: the
/// error message is lost, the process does not panic (exit 101, as `run` of a gone job
/// did with `eprintln!`).
#[test]
fn commands_survive_a_closed_stdout_and_stderr() {
    let w = World::new();
    // A job gone from jobs/ was judged meanwhile (exit 0); a missing path elsewhere is
    // a wrong path (exit 2).
    let gone = w.jobs().join("no-such-job.json");
    let missing = w.root.join("no-such-job.json");
    let cases: [(&[&str], i32); 4] = [
        (&["status"], 1),
        (&["doctor"], 1),
        (&["run", s(&gone)], 0),
        (&["run", s(&missing)], 2),
    ];
    for (args, code) in cases {
        let mut cmd = w.cli();
        cmd.env(RUNNERS_VAR, "[]").args(args);
        let (out_r, out_w) = std::io::pipe().unwrap();
        let (err_r, err_w) = std::io::pipe().unwrap();
        drop(out_r);
        drop(err_r);
        cmd.stdout(Stdio::from(out_w)).stderr(Stdio::from(err_w));
        let status = cmd.status().unwrap();
        assert_eq!(status.code(), Some(code), "{args:?}");
    }
}

/// Runner folders go inside a private `$XDG_RUNTIME_DIR` (a tmpfs for a systemd user
/// service), in a 0700 folder of the judge's; a runtime folder others can enter is
/// ignored and `<state>/tmp` is used.
#[test]
fn runner_folders_go_under_a_private_xdg_runtime_dir_only() {
    let w = World::new();
    let fake = w.fake_program(
        "claude",
        &format!("{}echo '{{\"ok\": true}}'\n", w.recorder()),
    );
    settle(&fake);
    let runtime = w.root.join("runtime");
    fs::create_dir(&runtime).unwrap();
    for (mode, private) in [(0o700, true), (0o755, false)] {
        fs::set_permissions(&runtime, fs::Permissions::from_mode(mode)).unwrap();
        let job = w.job(&format!("r{mode:o}"), &json!({"prompt": "p"}));
        let mut cmd = w.cli_with_fakes_on_path();
        cmd.env("XDG_RUNTIME_DIR", &runtime).arg("run").arg(&job);
        let done = w.run(cmd);
        assert_eq!(done.code, Some(0), "{done:?}");
        let pwd = w.recorded("claude", "pwd").trim_end().to_string();
        // <runtime>/llm-judge-<hash>/<run's home>/<runner folder>: the home went with
        // the run, the judge's folder in the runtime dir stays.
        let home = Path::new(&pwd).parent().unwrap().to_path_buf();
        assert!(!home.exists(), "{} was not removed", home.display());
        let parent = home.parent().unwrap().to_path_buf();
        if private {
            assert!(
                pwd.starts_with(&format!("{}/llm-judge-", s(&runtime))),
                "{pwd}"
            );
            let meta = fs::symlink_metadata(&parent).unwrap();
            assert_eq!(
                meta.permissions().mode() & 0o777,
                0o700,
                "{}",
                parent.display()
            );
        } else {
            assert!(pwd.starts_with(s(&w.runner_tmp())), "{pwd}");
        }
        assert!(
            !Path::new(&pwd).exists(),
            "runner folder {pwd} was not removed"
        );
    }
}

/// cursor-agent (and any runner outside the allowlist) never gets the job's cwd,
/// in default mode either; a read-only one does.
#[test]
fn only_read_only_runners_get_the_jobs_cwd() {
    let w = World::new();
    for name in ["claude", "codex", "cursor-agent"] {
        w.fake_program(name, &format!("{}exit 1\n", w.recorder()));
    }
    for name in ["claude", "codex", "cursor-agent"] {
        settle(&w.bin.join(name));
    }
    let cfg = w.config_file(
        "inv-default.toml",
        &with_test_defaults(
            "[[runners.default]]\nname = \"codex\"\nargv = [\"codex\", \"exec\", \"--skip-git-repo-check\", \"--sandbox\", \"read-only\", \"-c\", \"notify=[]\", \"--ignore-user-config\", \"--ephemeral\", \"--\", \"{prompt}\"]\n\
             [[runners.default]]\nname = \"claude\"\nargv = [\"claude\", \"-p\", \"--\", \"{prompt}\"]\n\
             [[runners.default]]\nname = \"cursor\"\nargv = [\"cursor-agent\", \"-p\", \"--output-format\", \"text\", \"--\", \"{prompt}\"]\n",
        ),
    );
    let job = w.job("edit", &json!({"prompt": "p", "cwd": s(&w.work)}));
    let mut cmd = w.cli_with_fakes_on_path();
    cmd.arg("--config").arg(&cfg).arg("run").arg(&job);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(0), "{done:?}");
    let pwd = |p: &str| w.recorded(p, "pwd").trim_end().to_string();
    assert_eq!(pwd("codex"), s(&w.work), "a read-only runner gets the cwd");
    for writable in ["claude", "cursor-agent"] {
        assert!(
            pwd(writable).starts_with(s(&w.runner_tmp())),
            "{writable} worked in {}",
            pwd(writable)
        );
    }
    assert_eq!(
        w.log_lines("is not read-only").len(),
        2,
        "one line per runner kept out: {}",
        w.log()
    );
}

/// A runner whose stdout outgrows the output cap cannot have the cut-off end of a
/// line read as its answer: with `{"bug": false}` then one long line ending in an
/// object exactly as long as the cap, the kept tail starts with that object. A
/// partial first line never counts, and the reason says the output was cut.
#[test]
fn a_line_cut_by_the_output_cap_is_never_an_answer() {
    let w = World::new();
    let cap = 1024;
    let config = w.config_file("cap.toml", &format!("output_cap_bytes = {cap}\n"));
    // `{"bug": true, "pad": "zz…"}` plus its newline: exactly `cap` bytes.
    let head = r#"{"bug": true, "pad": ""#;
    let tail = "\"}";
    let pad = "z".repeat(cap - head.len() - tail.len() - 1);
    let object = format!("{head}{pad}{tail}");
    let out = format!("{{\"bug\": false}}\n{}{object}\n", "x".repeat(3000));
    assert_eq!(out.len() - out.rfind(&object).unwrap(), cap);
    fs::write(w.root.join("out.txt"), &out).unwrap();
    let runner = w.runner("r", &format!("cat '{}'\n", s(&w.root.join("out.txt"))));
    let job = w.job("cut", &json!({"prompt": "p", "hit_if_all_true": ["bug"]}));
    let done = w.run_file_configured(&job, &table(&[runner]), &config);
    assert_eq!(done.code, Some(0), "{done:?}");
    let v = w.verdict_of("", "cut");
    assert_eq!(v["outcome"], "unchecked", "{v}");
    let reason = v["attempts"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "no JSON object line in stdout (output cut to the last {cap} bytes): "
        )),
        "{reason}"
    );
}

/// `status` (text) shows a running job's id and hook, and the runner's name, with
/// their control characters escaped as judge.log does: a newline or an ESC sequence
/// in a job never reaches the terminal.
#[test]
fn status_escapes_control_characters_in_what_jobs_and_tables_name() {
    let w = World::new();
    let (started, go) = (w.root.join("started"), w.root.join("go"));
    let script = w.script(
        "blocker.sh",
        &format!(
            "touch '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\necho '{{}}'\n",
            s(&started),
            s(&go)
        ),
    );
    let runner = json!(["r\u{1b}[31mred", ["/bin/sh", s(&script), "{prompt}"]]);
    let job = w.job(
        "esc",
        &json!({"prompt": "p", "id": "a\nb\u{1b}[31mc", "hook": "stop\r\u{1b}]0;title\u{7}"}),
    );
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, table(&[runner])).arg("run").arg(&job);
    let judging = w.spawn(cmd);
    assert!(
        wait_until(within(NO_HANG), || started.exists()),
        "the runner did not start"
    );
    let mut status = w.cli();
    status.env(RUNNERS_VAR, "[]").arg("status");
    let shown = w.run(status);
    fs::write(&go, "").unwrap();
    assert_eq!(shown.code, Some(0), "{shown:?}");
    let out = &shown.stdout;
    assert!(
        !out.contains('\u{1b}') && !out.contains('\r') && !out.contains('\u{7}'),
        "{out:?}"
    );
    let row = out
        .lines()
        .find(|l| l.contains("a\\nb\\u001b[31mc"))
        .unwrap_or_else(|| panic!("no escaped id in {out:?}"));
    assert!(
        row.contains("stop\\r\\u001b]0;title\\u0007") && row.contains("r\\u001b[31mred"),
        "{row:?}"
    );
    assert_eq!(judging.finish(NO_HANG).code, Some(0));
}

/// `system.posix_acl_access` bytes as `setfacl -m u:<uid>:<perm>` leaves them:
/// the owner rwx, user `uid` with `perm`, the group r-x, the mask rwx, others r-x.
fn acl_with_user(uid: u32, perm: u16) -> Vec<u8> {
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 7u16, u32::MAX),
        (0x02, perm, uid),
        (0x04, 5, u32::MAX),
        (0x10, 7, u32::MAX),
        (0x20, 5, u32::MAX),
    ] {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&perm.to_le_bytes());
        acl.extend_from_slice(&id.to_le_bytes());
    }
    acl
}

/// Sets `dir`'s access ACL directly (no `setfacl` needed); false when the
/// filesystem has no ACLs (the test then has nothing to check).
fn set_acl(dir: &Path, acl: &[u8]) -> bool {
    match rustix::fs::setxattr(
        dir,
        "system.posix_acl_access",
        acl,
        rustix::fs::XattrFlags::empty(),
    ) {
        Ok(()) => true,
        Err(e) if e == rustix::io::Errno::OPNOTSUPP => {
            eprintln!(
                "note: {} has no ACLs ({e}); nothing to check",
                dir.display()
            );
            false
        }
        Err(e) => panic!("cannot set the ACL of {}: {e}", dir.display()),
    }
}

/// `setfacl -m u:other:rwx jobs` lets another user plant jobs while the mode shows
/// only "group-writable" (the mask): the daemon refuses to start, naming the folder
/// and `setfacl -b`, for `jobs/` and for the state folder alike. An ACL entry that
/// grants only reading is fine.
#[test]
fn the_daemon_refuses_a_folder_another_user_may_write_through_an_acl() {
    let w = World::new();
    fs::create_dir_all(w.jobs()).unwrap();
    for dir in [w.jobs(), w.state().clone()] {
        if !set_acl(&dir, &acl_with_user(65534, 7)) {
            return;
        }
        let mut cmd = w.cli();
        cmd.env(RUNNERS_VAR, "[]").arg("daemon");
        let done = w.spawn(cmd).finish(NO_HANG);
        // 2: a refusal a restart cannot fix (the unit's RestartPreventExitStatus=2).
        assert_eq!(done.code, Some(2), "{}: {done:?}", dir.display());
        assert!(
            done.stderr
                .contains(&format!("setfacl -b {}", dir.display()))
                && done.stderr.contains("uid 65534"),
            "{}: {}",
            dir.display(),
            done.stderr
        );
        rustix::fs::removexattr(&dir, "system.posix_acl_access").unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    }
    // Read access for another user does not let it plant jobs.
    assert!(set_acl(&w.jobs(), &acl_with_user(65534, 5)));
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, "[]").arg("daemon");
    let _daemon = w.spawn(cmd);
    assert!(
        wait_until(within(NO_HANG), || w.log().contains("daemon start")),
        "the daemon did not start: {}",
        w.log()
    );
}

/// A job file owned by another user (planted through a write grant given after the
/// daemon started, say) is not a job: it is moved to `rejected/` with a judge.log
/// line and gets no verdict; a job of the daemon's own user beside it is judged.
#[test]
fn a_job_file_owned_by_another_user_is_rejected_not_judged() {
    let w = World::new();
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, table(&[w.runner("r", "echo '{}'\n")]))
        .arg("daemon");
    let _daemon = w.spawn(cmd);
    assert!(
        wait_until(within(NO_HANG), || w.log().contains("daemon start")),
        "the daemon did not start: {}",
        w.log()
    );
    let temp = w.jobs().join(".planted.tmp");
    fs::write(
        &temp,
        json!({"prompt": "p", "hit_if_all_true": []}).to_string(),
    )
    .unwrap();
    if let Err(e) = std::os::unix::fs::chown(&temp, Some(65534), Some(65534)) {
        // Only root can give a file away (CI runs as root).
        eprintln!("note: cannot give a file to uid 65534 ({e}); nothing to check");
        return;
    }
    fs::rename(&temp, w.jobs().join("planted.json")).unwrap();
    w.job("mine", &json!({"prompt": "p"}));
    assert!(
        wait_until(within(NO_HANG), || {
            w.verdict_path(NO_TRANSCRIPT, "mine").exists()
                && w.state().join("rejected/planted.json").exists()
        }),
        "verdicts {:?}, log:\n{}",
        w.all_verdicts(),
        w.log()
    );
    assert!(!w.jobs().join("planted.json").exists());
    assert!(!w.verdict_path(NO_TRANSCRIPT, "planted").exists());
    let lines = w.log_lines("owned by uid 65534");
    assert_eq!(lines.len(), 1, "{}", w.log());
    assert!(lines[0].contains("moved to rejected/"), "{}", lines[0]);
}
