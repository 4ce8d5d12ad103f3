//! Where the binary lives (issue 56, docs/install.md): `hooks install` and `service
//! install` refuse a binary that uvx or npx runs from its cache, naming the install
//! that stays, and warn (going on) under a temporary folder; `doctor` fails when a
//! program the installed hooks or service run is gone, and says this one is this
//! version. The binary is put in such places by a symlink: the path it was started by
//! is the one install writes.

use crate::support::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// [`World::cli`], started through `program` (a link to the binary).
fn cli_at(w: &World, program: &Path) -> Command {
    let template = w.cli();
    let mut cmd = Command::new(program);
    cmd.env_clear();
    for (key, value) in template.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    cmd.args(template.get_args())
        .env("LLM_JUDGE_SERVICE_MANAGER", "systemd")
        .env_remove("CLAUDE_CONFIG_DIR")
        .stdin(Stdio::null());
    cmd
}

/// A link to the binary at `path`.
fn link_at(path: PathBuf) -> PathBuf {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(BIN, &path).unwrap();
    path
}

#[test]
fn install_refuses_a_binary_in_uvxs_or_npxs_cache_and_warns_under_a_temporary_folder() {
    let w = World::new();
    for (rel, install) in [
        (
            "cache/uv/archive-v0/Ab12/bin/llm-judge",
            "uv tool install llm-judge",
        ),
        (
            "npm-cache/_npx/1415fee7/node_modules/@llm-judge/llm-judge-linux-x64/bin/llm-judge",
            "npm i -g @llm-judge/llm-judge",
        ),
    ] {
        let link = link_at(w.path(rel));
        for args in [
            &["hooks", "install", "claude"][..],
            &["service", "install", "--dry-run"],
        ] {
            let mut cmd = cli_at(&w, &link);
            cmd.args(args);
            let out = w.run(cmd);
            assert_eq!(out.code, Some(2), "{args:?} from {rel}: {out:?}");
            assert!(
                out.stderr.contains(&format!("`{install}`"))
                    && out.stderr.contains(&link.display().to_string()),
                "{args:?} from {rel}: {}",
                out.stderr
            );
        }
    }
    assert!(!w.home.join(".claude/settings.json").exists());
    // Under a temporary folder (the judge's TMPDIR here): said, and installed.
    let link = link_at(w.tmp.join("venv/bin/llm-judge"));
    let mut cmd = cli_at(&w, &link);
    cmd.args(["hooks", "install", "claude"]);
    let out = w.run(cmd);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("is under the temporary folder"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout
            .contains(&format!("the hooks run {} with:", link.display())),
        "{}",
        out.stdout
    );
    let settings = fs::read_to_string(w.home.join(".claude/settings.json")).unwrap();
    assert!(settings.contains(&format!("{} hook claude", link.display())));
}

#[test]
fn doctor_fails_when_a_program_the_hooks_or_the_service_run_is_gone() {
    let w = World::new();
    let doctor = || {
        let mut cmd = cli_at(&w, Path::new(BIN));
        cmd.arg("doctor");
        w.run(cmd)
    };
    let settings = w.home.join(".claude/settings.json");
    fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let gone = w.path("gone/bin/llm-judge");
    let hook = format!("{} hook claude --state-dir /x", gone.display());
    let doc = serde_json::json!({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": hook, "timeout": 150},
        {"type": "command", "command": "/elsewhere/not-ours.sh"}
    ]}]}});
    fs::write(&settings, doc.to_string()).unwrap();
    let unit = w.xdg.join("systemd/user/llm-judge.service");
    fs::create_dir_all(unit.parent().unwrap()).unwrap();
    fs::write(
        &unit,
        format!("[Service]\nExecStart=\"{}\" \"daemon\"\n", gone.display()),
    )
    .unwrap();
    let out = doctor();
    assert_eq!(out.code, Some(1), "{out:?}");
    let gone = gone.display();
    for line in [
        format!(
            "FAIL  claude hooks run {gone}, which is gone; run `llm-judge hooks install claude`"
        ),
        format!("FAIL  the service runs {gone}, which is gone; run `llm-judge service install`"),
    ] {
        assert!(out.stdout.contains(&line), "{line}\n{}", out.stdout);
    }
    assert!(!out.stdout.contains("not-ours"), "{}", out.stdout);
    // Installed again by this binary: this version.
    let mut install = cli_at(&w, Path::new(BIN));
    install.args(["hooks", "install", "claude"]);
    assert_eq!(w.run(install).code, Some(0));
    let out = doctor();
    let this = format!(
        "ok    claude hooks run {BIN} (llm-judge {}, this version)",
        env!("CARGO_PKG_VERSION")
    );
    assert!(out.stdout.contains(&this), "{this}\n{}", out.stdout);
    assert!(
        !out.stdout.contains(&format!("run {gone}")),
        "{}",
        out.stdout
    );
}
