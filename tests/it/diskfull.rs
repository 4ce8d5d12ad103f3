//! A full disk while verdicts are written (issue 6): the state folder on a small
//! tmpfs (needs root and mount rights; skipped with a note otherwise). Never a half
//! published verdict; the jobs stay queued; the daemon keeps running and judges them
//! once space returns.

use crate::support::*;

use std::fs;
use std::io::Write;
use std::process::Command;

use serde_json::json;

/// A tmpfs mounted over a folder, unmounted on drop.
struct Mount(std::path::PathBuf);

impl Mount {
    fn tmpfs(at: &std::path::Path, size: &str) -> Option<Mount> {
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mount(at.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes until the disk is full; returns the filler's path.
fn fill(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("filler");
    let mut f = fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    path
}

#[test]
fn a_full_disk_keeps_jobs_queued_and_the_daemon_recovers_when_space_returns() {
    let w = World::new();
    let Some(_mount) = Mount::tmpfs(&w.state(), "1m") else {
        eprintln!("note: cannot mount a tmpfs here (not root?); the full-disk test did not run");
        return;
    };
    fs::create_dir(w.state().join("jobs")).unwrap();
    w.config("rescan_seconds = 0.3");
    let runner = w.runner("r", &held("echo x >> $W/count", r#"{"ok": true}"#));
    for i in 0..3 {
        w.job(
            &format!("j{i}"),
            &json!({"prompt": format!("p{i}"), "transcript": "T"}),
        );
    }
    let mut d = w.start(&[runner]);
    wait_for("three runners started", NO_HANG, || {
        w.read("count").lines().count() == 3
    });
    let filler = fill(&w.state());
    w.collect_output();
    wait_for("publish failures reported", NO_HANG, || {
        d.stderr().contains("job left queued after an error")
    });
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "the daemon keeps running"
    );
    assert_eq!(
        w.jobs_left(),
        ["j0.json", "j1.json", "j2.json"],
        "the jobs stay queued"
    );
    let verdicts = w.verdict_folder("T");
    let published: Vec<String> = names(&verdicts);
    assert!(
        published.is_empty(),
        "never a half-published verdict (nor a temp file): {published:?}"
    );
    fs::remove_file(filler).unwrap();
    wait_for("all judged once space returns", NO_HANG, || {
        names(&verdicts).len() == 3
    });
    wait_for("inbox empty", NO_HANG, || w.jobs_left().is_empty());
    for i in 0..3 {
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(verdicts.join(format!("j{i}.json"))).unwrap())
                .unwrap();
        assert_eq!(
            v["outcome"], "hit",
            "a whole verdict, not an interrupted one: {v}"
        );
    }
    assert!(
        !d.stderr().contains("interrupted"),
        "a full disk is not an interruption"
    );
}

/// A hook on a full disk (issue 48): the job cannot be queued, so the stop goes through
/// (exit 0, no block) and the user is told once; nothing half written stays.
#[test]
fn a_hook_on_a_full_disk_lets_the_stop_through() {
    let w = World::new();
    let Some(_mount) = Mount::tmpfs(&w.state(), "1m") else {
        eprintln!(
            "note: cannot mount a tmpfs here (not root?); the full-disk hook test did not run"
        );
        return;
    };
    fs::create_dir(w.state().join("jobs")).unwrap();
    fs::write(
        w.xdg.join("llm-judge/rules.toml"),
        "[[rule]]\nname = \"t\"\naction = \"block\"\nquestion = \"q {\\\"x\\\": bool}\"\n\
         hit_if_all_true = [\"x\"]\nnotice = \"n\"\n",
    )
    .unwrap();
    let runner = w.runner("r", r#"echo '{"x": true}'"#);
    let filler = fill(&w.state());
    let input = w.path("stop.json");
    fs::write(
        &input,
        json!({"session_id": "s1", "prompt_id": "p1", "hook_event_name": "Stop",
               "last_assistant_message": "Done.", "stop_hook_active": false})
        .to_string(),
    )
    .unwrap();
    let mut cmd = w.hook_command(&[runner], &["claude"]);
    cmd.stdin(fs::File::open(&input).unwrap());
    let out = w.run(cmd);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!out.stdout.contains("\"decision\""), "{}", out.stdout);
    assert!(
        out.stdout.is_empty() || out.stdout.contains("systemMessage"),
        "{}",
        out.stdout
    );
    assert!(w.jobs_left().is_empty(), "nothing half written in jobs/");
    fs::remove_file(filler).unwrap();
}
