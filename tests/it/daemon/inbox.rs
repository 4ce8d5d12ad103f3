//! The inbox and the state folder: one daemon per folder, unsafe folders refused,
//! things that are not jobs, a replaced jobs/, jobs enqueued again or written in place,
//! and a hung cwd that stalls no other job.

use crate::support::*;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use serde_json::json;

#[test]
fn a_second_daemon_is_refused_naming_the_first() {
    let w = World::new();
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let d = w.start(std::slice::from_ref(&fake));
    w.wait_log("daemon start");
    let mut second = w.start(&[fake]);
    let status = second.wait_exit(NO_HANG);
    assert!(!status.success());
    assert!(
        second.stderr().contains(&format!("pid {}", d.child.id())),
        "{}",
        second.stderr()
    );
}

#[test]
fn a_world_writable_state_folder_is_refused() {
    let w = World::new();
    fs::set_permissions(w.state(), fs::Permissions::from_mode(0o777)).unwrap();
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let mut d = w.start(std::slice::from_ref(&fake));
    let status = d.wait_exit(NO_HANG);
    assert!(!status.success());
    assert!(d.stderr().contains("chmod o-w"), "{}", d.stderr());
    // Group-writable is only a warning.
    fs::set_permissions(w.state(), fs::Permissions::from_mode(0o770)).unwrap();
    let _d = w.start(&[fake]);
    w.wait_log("daemon start");
    assert!(w.log().contains("group-writable"), "{}", w.log());
}

#[test]
fn symlinks_folders_fifos_and_bad_files_in_jobs() {
    let w = World::new();
    w.config("max_job_bytes = 1000");
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let jobs = w.state().join("jobs");
    fs::write(w.path("target.json"), r#"{"prompt":"secret"}"#).unwrap();
    std::os::unix::fs::symlink(w.path("target.json"), jobs.join("link.json")).unwrap();
    fs::create_dir(jobs.join("folder.json")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(jobs.join("fifo.json"))
        .status()
        .unwrap();
    assert!(fifo.success());
    fs::write(jobs.join("empty.json"), "").unwrap();
    fs::write(jobs.join("invalid.json"), "{nope").unwrap();
    fs::write(
        jobs.join("huge.json"),
        format!(r#"{{"prompt":"{}"}}"#, "x".repeat(2000)),
    )
    .unwrap();
    let _d = w.start(&[fake]);
    wait_for("inbox emptied", NO_HANG, || w.jobs_left().is_empty());
    assert_eq!(
        names(&w.state().join("rejected")),
        ["fifo.json", "folder.json", "link.json"]
    );
    assert!(
        w.path("target.json").exists(),
        "the symlink's target was not touched"
    );
    let verdicts = w.verdicts();
    let got: Vec<(&str, &str)> = verdicts
        .iter()
        .map(|(f, n, _)| (f.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("da39a3ee5e6b4b0d", "empty.json"),
            ("da39a3ee5e6b4b0d", "huge.json"),
            ("da39a3ee5e6b4b0d", "invalid.json")
        ]
    );
    for (_, name, v) in &verdicts {
        assert_eq!(v["outcome"], "unchecked", "{name}");
        assert!(
            v["reason"].as_str().unwrap().starts_with("judge error"),
            "{v}"
        );
    }
    assert!(w.log().contains("moved to rejected/"));
}

#[test]
fn the_jobs_folder_deleted_and_recreated_while_running() {
    let w = World::new();
    w.config("rescan_seconds = 3600");
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    let _d = w.start(&[fake]);
    w.wait_log("daemon start");
    w.job("before", &json!({"prompt": "p"}));
    wait_for("first judged", NO_HANG, || w.verdicts().len() == 1);
    let jobs = w.state().join("jobs");
    fs::remove_dir(&jobs).unwrap();
    w.wait_log("watching the inbox again");
    fs::create_dir_all(&jobs).unwrap();
    w.job("after", &json!({"prompt": "p"}));
    wait_for("second judged", NO_HANG, || w.verdicts().len() == 2);
}

#[test]
fn a_job_enqueued_again_while_it_runs_is_judged_again_not_deleted() {
    let w = World::new();
    let runner = w.runner(
        "gated",
        &held("echo \"$1\" >> $W/prompts", r#"{"ok": true}"#),
    );
    w.job("same", &json!({"prompt": "first", "transcript": "T"}));
    let _d = w.start(&[runner]);
    wait_for("first run started", NO_HANG, || {
        w.read("prompts").lines().count() == 1
    });
    // The producer publishes the same id again (a new file replaces the old name).
    w.job("same", &json!({"prompt": "second", "transcript": "T"}));
    w.collect_output();
    wait_for("the newer job judged too", NO_HANG, || {
        w.read("prompts").lines().collect::<Vec<_>>() == ["first", "second"]
            && w.jobs_left().is_empty()
    });
    wait_for("claims released", NO_HANG, || {
        names(&w.state().join("claims")).is_empty()
    });
    assert_eq!(
        w.verdicts().len(),
        1,
        "one verdict file: the newer replaced the older (same id)"
    );
    assert!(
        w.log()
            .contains("a newer job of the same name arrived meanwhile"),
        "{}",
        w.log()
    );
}

/// Issue 30, item 3: a job's `cwd` on a hung file system (simulated: its `stat` blocks
/// for an hour) must not stall the slot thread other jobs depend on. With one worker,
/// the next job is still judged, and the hung one is judged in a fresh folder with
/// its cwd refused, well before its `stat` would return.
#[test]
fn a_cwd_on_a_hung_file_system_stalls_no_other_job() {
    let w = World::new();
    w.config("workers = 1");
    let hung = w.path("hung-mount");
    fs::create_dir_all(&hung).unwrap();
    let runner = w.runner("ok", &answer(r#"{"ok": true}"#));
    let mut cmd = w.command(&[runner]);
    cmd.env("LLM_JUDGE_HANG_PATH", &hung);
    let mut d = w.start_with(cmd);
    w.job(
        "hung",
        &json!({"prompt": "p", "cwd": hung, "mode": "investigate", "timeout_seconds": 30}),
    );
    w.job("next", &json!({"prompt": "p", "timeout_seconds": 30}));
    wait_for("both jobs judged", NO_HANG, || w.verdicts().len() == 2);
    assert_eq!(w.verdict("hung")["outcome"], "hit");
    assert_eq!(w.verdict("next")["outcome"], "hit");
    assert!(w.log().contains("did not answer within"), "{}", w.log());
    d.signal("TERM");
    assert!(d.wait_exit(NO_HANG).success());
}

/// A producer that writes its job file in place (no temp file and rename), slowly, in
/// chunks: the daemon sees the file appear empty and then half-written. It must not
/// judge each half-written state (the storm of verdicts this once caused, and the job
/// removed while still being written): the job is judged once, from its whole content,
/// and judge.log says once that the file was still being written.
#[test]
fn a_job_file_written_in_place_is_judged_once_from_its_whole_content() {
    use std::io::Write;
    let w = World::new();
    // Five times the default: a producer paused by a loaded machine between two chunks
    // must not pass for one that gave up.
    w.config("job_settle_seconds = 5");
    let seen = w.path("prompts");
    let runner = w.runner(
        "r",
        &format!(
            "printf '%s\\n' \"$1\" >> '{}'\n{}",
            seen.display(),
            answer(r#"{"ok": true}"#)
        ),
    );
    let _d = w.start(&[runner]);
    w.wait_log("daemon start");
    let prompt = format!("the whole prompt {}", "x".repeat(200));
    let text = json!({"prompt": prompt, "id": "slow", "hit_if_all_true": ["ok"]}).to_string();
    let mut file = fs::File::create(w.state().join("jobs/slow.json")).unwrap();
    let mut chunks = text.as_bytes().chunks(text.len().div_ceil(8));
    file.write_all(chunks.next().unwrap()).unwrap();
    // The daemon has seen the file half-written (however slowly it looked) ...
    w.wait_log("job file still being written");
    // ... and the producer goes on at its own pace (not a wait for the daemon): 7
    // more chunks over about 1 s.
    for chunk in chunks {
        std::thread::sleep(Duration::from_millis(150));
        file.write_all(chunk).unwrap();
    }
    drop(file);
    wait_for("the job judged and removed", NO_HANG, || {
        w.jobs_left().is_empty() && w.verdicts().len() == 1
    });
    let v = w.verdict("slow");
    assert_eq!(v["outcome"], "hit", "judged from the whole content: {v}");
    assert_eq!(fs::read_to_string(&seen).unwrap(), format!("{prompt}\n"));
    let log = w.log();
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("job finished id=slow"))
            .count(),
        1,
        "{log}"
    );
    assert_eq!(
        log.matches("job file still being written (not published by rename?)")
            .count(),
        1,
        "{log}"
    );
}
