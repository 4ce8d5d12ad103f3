//! What an operator sees and steers: log level and stderr format, exit codes, config
//! error messages, `status` and `doctor` answers, shell completions and the man page.

use crate::support::*;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::process::Output;

use serde_json::{Value, json};

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Starts a daemon with `extra` arguments before `daemon` and `env`, its stderr in a
/// file named `err` whose device and inode are known; stops it with SIGTERM once its
/// start is logged, and returns its stderr.
fn daemon_stderr(w: &World, extra: &[&str], env: &[(&str, &str)], journal: bool) -> String {
    let err = w.path("stderr.txt");
    fs::write(&err, "").unwrap();
    let meta = fs::metadata(&err).unwrap();
    let mut cmd = w.command(&[w.runner("r", &answer(r#"{"ok": true}"#))]);
    cmd.args(extra).envs(env.iter().copied());
    if journal {
        cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
    }
    let mut d = w.start_logging_to(cmd, &err);
    w.wait_log("daemon start");
    d.signal("TERM");
    assert!(d.wait_exit(NO_HANG).success(), "{}", d.stderr());
    d.stderr()
}

#[test]
fn rust_log_debug_shows_debug_lines_in_judge_log_and_on_stderr() {
    let w = World::new();
    let stderr = daemon_stderr(&w, &[], &[("RUST_LOG", "debug")], false);
    assert!(
        w.log().contains("DEBUG supervisor zygote started"),
        "{}",
        w.log()
    );
    assert!(
        stderr.contains("DEBUG supervisor zygote started"),
        "{stderr}"
    );
    // Not under journald: each line starts with its timestamp, as in judge.log.
    for line in stderr.lines() {
        assert!(line.starts_with("20") && line.contains("Z "), "{line}");
    }
}

#[test]
fn without_a_level_debug_lines_stay_out() {
    let w = World::new();
    let stderr = daemon_stderr(&w, &[], &[], false);
    assert!(stderr.contains("INFO daemon start"), "{stderr}");
    assert!(!w.log().contains("DEBUG") && !stderr.contains("DEBUG"));
}

#[test]
fn under_journald_each_line_carries_its_syslog_priority() {
    let w = World::new();
    let stderr = daemon_stderr(&w, &["-v"], &[], true);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines.iter().any(|l| l.starts_with("<6>INFO daemon start")),
        "{stderr}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("<4>WARN ")),
        "the override's warning: {stderr}"
    );
    assert!(lines.iter().any(|l| l.starts_with("<7>DEBUG ")), "{stderr}");
    for line in &lines {
        assert!(
            ["<3>", "<4>", "<6>", "<7>"]
                .iter()
                .any(|p| line.starts_with(p)),
            "{line}"
        );
    }
}

#[test]
fn quiet_keeps_info_lines_off_stderr_but_in_judge_log() {
    let w = World::new();
    let stderr = daemon_stderr(&w, &["-q"], &[("RUST_LOG", "debug")], false);
    assert!(!stderr.contains("INFO"), "{stderr}");
    assert!(stderr.contains("WARN"), "{stderr}");
    assert!(w.log().contains("INFO daemon start"));
    assert!(!w.log().contains("DEBUG"), "-q wins over RUST_LOG");
}

#[test]
fn a_bad_rust_log_is_named_and_info_is_used() {
    let w = World::new();
    let stderr = daemon_stderr(&w, &[], &[("RUST_LOG", "llm_judge=[")], false);
    assert!(stderr.contains("RUST_LOG=\"llm_judge=[\""), "{stderr}");
    assert!(stderr.contains("INFO daemon start"), "{stderr}");
}

#[test]
fn verbose_ask_shows_its_log_lines_on_stderr() {
    let w = World::new();
    let table = [w.runner("r", &answer(r#"{"ok": true}"#))];
    let quiet = w.command(&table).args(["ask", "q"]).output().unwrap();
    assert!(
        !text(&quiet).1.contains("runner start"),
        "{}",
        text(&quiet).1
    );
    let out = w.command(&table).args(["-v", "ask", "q"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(stderr.contains("INFO runner start"), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["outcome"], json!("answered"));
}

/// The daemon's exit code and stderr when it refuses to start.
fn refused(w: &World) -> (Option<i32>, String) {
    let mut d = w.start(&[w.runner("r", &answer(r#"{"ok": true}"#))]);
    let status = d.wait_exit(NO_HANG);
    (status.code(), d.stderr())
}

/// A start-up refusal a restart cannot fix exits 2, which the shipped unit's
/// `RestartPreventExitStatus=2` takes as "do not restart".
#[test]
fn start_up_refusals_a_restart_cannot_fix_exit_2() {
    let unit = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/systemd/llm-judge.service"
    ))
    .unwrap();
    assert!(unit.contains("\nRestartPreventExitStatus=2\n"), "{unit}");
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    fs::set_permissions(w.state(), fs::Permissions::from_mode(0o777)).unwrap();
    let (code, stderr) = refused(&w);
    assert_eq!(code, Some(2), "others can write: {stderr}");
    assert!(stderr.contains("chmod o-w"), "{stderr}");

    let w = World::new();
    fs::remove_dir_all(w.state()).unwrap();
    fs::write(w.state(), "not a folder").unwrap();
    let (code, stderr) = refused(&w);
    assert_eq!(code, Some(2), "state folder is a file: {stderr}");
    assert!(stderr.contains("refusing to start"), "{stderr}");

    let w = World::new();
    w.config("workers = \"four\"\n");
    let (code, stderr) = refused(&w);
    assert_eq!(code, Some(2), "bad config: {stderr}");
}

/// Another daemon holding the lock may go away: exit 1, so the service tries again.
#[test]
fn a_second_daemon_exits_1() {
    let w = World::new();
    let first = w.start(&[w.runner("r", &answer(r#"{"ok": true}"#))]);
    w.wait_log("daemon start");
    let (code, stderr) = refused(&w);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&first.child.id().to_string()), "{stderr}");
}

/// `workers = "four"` and `--set workers=abc` name the key, the file's line or the flag,
/// what it takes and how to write it.
#[test]
fn config_errors_name_the_key_the_line_or_flag_and_the_type() {
    let w = World::new();
    w.config("\nworkers = \"four\"\n");
    let out = w.command(&[]).arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out).1;
    let file = w.path("config.toml");
    let line = fs::read_to_string(&file)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("workers"))
        .unwrap()
        + 1;
    assert!(
        stderr.contains(&format!(
            "config file {} line {line}: key workers is the string \"four\"; it takes a whole number, e.g. workers = 4",
            file.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("remove or rename"), "{stderr}");

    let w = World::new();
    let out = w
        .command(&[])
        .args(["--set", "workers=abc", "status"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out).1;
    assert!(
        stderr.contains(
            "--set workers=abc: abc is not a TOML value; key workers takes a whole number, e.g. --set workers=4"
        ),
        "{stderr}"
    );
    let out = w
        .command(&[])
        .args(["--set", "state_dir=/tmp/x", "status"])
        .output()
        .unwrap();
    assert!(
        text(&out).1.contains("--set 'state_dir=\""),
        "a string key shows its quotes: {}",
        text(&out).1
    );
}

fn status_json(w: &World) -> (Option<i32>, Value, String) {
    let out = w.command(&[]).args(["status", "--json"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code(), v, stderr)
}

#[test]
fn status_of_a_state_folder_that_does_not_exist_says_so_and_exits_1() {
    let w = World::new();
    fs::remove_dir_all(w.state()).unwrap();
    for args in [&["status"][..], &["status", "--json"]] {
        let out = w.command(&[]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let (stdout, stderr) = text(&out);
        assert!(stdout.is_empty(), "{stdout}");
        assert!(
            stderr.contains(&format!(
                "state folder {} does not exist",
                w.state().display()
            )),
            "{stderr}"
        );
    }
    assert!(!w.state().exists(), "status creates nothing");
}

/// The moment a verdict can be read, `status` counts it and shows the runner that gave
/// it: outcomes and runner stats come from the same write, made before the rename.
#[test]
fn right_after_a_verdict_status_shows_its_runner_with_its_outcome() {
    let w = World::new();
    let table = [w.runner("r", &answer(r#"{"ok": true}"#))];
    let _d = w.start(&table);
    w.wait_log("daemon start");
    for i in 1..=3u64 {
        let name = format!("j{i}");
        w.job(
            &name,
            &json!({"prompt": format!("p{i}"), "transcript": "T"}),
        );
        wait_for("the verdict", NO_HANG, || {
            w.verdicts()
                .iter()
                .any(|(_, n, _)| *n == format!("{name}.json"))
        });
        let (code, v, stderr) = status_json(&w);
        assert_eq!(code, Some(0), "{stderr}");
        let o = &v["outcomes"];
        let counted: u64 = ["hit", "clean", "unchecked"]
            .iter()
            .map(|k| o[k].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(counted, i, "{v:#}");
        assert_eq!(v["runners"]["r"]["attempts"], json!(i), "{v:#}");
    }
}

#[test]
fn completions_for_bash_zsh_and_fish_name_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}: {}", text(&out).1);
        let script = text(&out).0;
        for word in ["daemon", "enqueue", "doctor", "state-dir", "json"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
    // The bash script parses (bash -n) when bash is there.
    let w = World::new();
    let out = std::process::Command::new(BIN)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    fs::write(w.path("llm-judge.bash"), &out.stdout).unwrap();
    match std::process::Command::new("bash")
        .arg("-n")
        .arg(w.path("llm-judge.bash"))
        .status()
    {
        Ok(status) => assert!(status.success(), "bash -n failed"),
        Err(_) => println!("note: bash is not installed: skipping bash -n"),
    }
    let bad = std::process::Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn man_prints_the_page_and_writes_one_per_command() {
    let out = std::process::Command::new(BIN).arg("man").output().unwrap();
    assert!(out.status.success());
    let page = text(&out).0;
    assert!(page.contains(".TH llm-judge 1"), "{page}");
    assert!(page.contains("daemon"), "{page}");
    let w = World::new();
    let dir = w.path("man1");
    let out = std::process::Command::new(BIN)
        .arg("man")
        .arg("--out-dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    for page in ["llm-judge.1", "llm-judge-daemon.1", "llm-judge-enqueue.1"] {
        assert!(dir.join(page).is_file(), "{page}");
    }
}

/// Neither needs a config: a broken one does not stop them.
#[test]
fn completions_and_man_read_no_config() {
    let w = World::new();
    w.config("workers = \"four\"\n");
    for args in [&["completions", "zsh"][..], &["man"]] {
        let out = w.command(&[]).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out).1);
    }
}
