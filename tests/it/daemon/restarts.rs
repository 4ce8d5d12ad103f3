//! Crashes and restarts: a killed daemon leaves one verdict and no runner, a job
//! interrupted three times ends, a published verdict is not published again.

use super::*;
use crate::support::*;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::json;

#[test]
fn kill_9_during_a_job_then_restart_gives_one_verdict_and_no_runner_left() {
    let w = World::new();
    let runner = blocking_runner(&w);
    w.job("k", &json!({"prompt": "p", "transcript": "T"}));
    let mut d = w.start(std::slice::from_ref(&runner));
    wait_for("runner and grandchild started", NO_HANG, || {
        pids_in(&w.read("grandchild.pids")).len() == 1
    });
    d.kill9();
    let leftovers: Vec<u32> = pids_in(&w.read("runner.pids"))
        .into_iter()
        .chain(pids_in(&w.read("grandchild.pids")))
        .collect();
    // Each runner's supervisor sees the judge die and stops its whole tree.
    wait_for("runners stopped with the daemon", NO_HANG, || {
        leftovers.iter().all(|&p| !is_running(p))
    });
    fs::write(w.path("answer"), "").unwrap();
    let _d2 = w.start(&[runner]);
    wait_for("verdict after restart", NO_HANG, || w.verdicts().len() == 1);
    assert_eq!(w.verdict("k")["outcome"], "hit");
    assert!(w.log().contains("interruptions=1"), "{}", w.log());
    wait_for("claim released", NO_HANG, || {
        names(&w.state().join("claims")).is_empty()
    });
    assert!(w.jobs_left().is_empty());
}

#[test]
fn a_job_interrupted_three_times_gets_an_unchecked_verdict() {
    let w = World::new();
    let runner = blocking_runner(&w);
    w.job(
        "doomed",
        &json!({"prompt": "p", "transcript": "T", "hook": "h"}),
    );
    for round in 1..=3 {
        let mut d = w.start(std::slice::from_ref(&runner));
        wait_for("runner started", NO_HANG, || {
            pids_in(&w.read("runner.pids")).len() == round
        });
        d.kill9();
    }
    let _d = w.start(&[runner]);
    wait_for("verdict", NO_HANG, || w.verdicts().len() == 1);
    let v = w.verdict("doomed");
    assert_eq!(v["outcome"], "unchecked");
    assert_eq!(v["hook"], "h");
    assert_eq!(v["attempts"], json!([]));
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("judge error") && reason.contains("interrupted 3 times"),
        "{reason}"
    );
    assert_eq!(
        pids_in(&w.read("runner.pids")).len(),
        3,
        "not run a fourth time"
    );
}

/// Writes a claim as a judge killed mid-publish would have left it.
fn publishing_claim(w: &World, job: &str, temp: &Path, target: &Path) {
    let meta = fs::metadata(w.state().join("jobs").join(format!("{job}.json"))).unwrap();
    let record = json!({
        "state": "publishing", "interruptions": 0, "owner_pid": 999_999, "tag": "gone-tag",
        "job": {"dev": meta.dev(), "ino": meta.ino(),
                "mtime_ns": i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec())},
        "runner": null, "verdict_temp": temp, "verdict_path": target,
    });
    fs::create_dir_all(w.state().join("claims")).unwrap();
    fs::write(
        w.state().join("claims").join(format!("{job}.json")),
        record.to_string(),
    )
    .unwrap();
}

#[test]
fn a_crash_after_the_verdict_was_published_and_drained_does_not_publish_again() {
    let w = World::new();
    let fake = w.runner(
        "fake",
        &format!("echo x >> $W/ran\n{}", answer(r#"{"ok": true}"#)),
    );
    w.job("drained", &json!({"prompt": "p", "transcript": "T"}));
    let folder = w.verdict_folder("T");
    // Renamed into place, then drained (removed) by a hook, then the crash.
    publishing_claim(
        &w,
        "drained",
        &folder.join(".drained.json.1.0.tmp"),
        &folder.join("drained.json"),
    );
    // And one whose rename had not happened yet: the temp file is still there.
    w.job("pending", &json!({"prompt": "p", "transcript": "T"}));
    fs::create_dir_all(&folder).unwrap();
    let temp = folder.join(".pending.json.1.1.tmp");
    fs::write(&temp, r#"{"id":"pending","outcome":"clean"}"#).unwrap();
    publishing_claim(&w, "pending", &temp, &folder.join("pending.json"));
    let _d = w.start(&[fake]);
    wait_for("both jobs removed", NO_HANG, || w.jobs_left().is_empty());
    wait_for("claims released", NO_HANG, || {
        names(&w.state().join("claims")).is_empty()
    });
    assert_eq!(
        names(&folder),
        ["pending.json"],
        "no verdict came back for the drained job"
    );
    assert_eq!(w.verdict("pending")["outcome"], "clean");
    assert_eq!(w.read("ran"), "", "no runner ran again");
}
