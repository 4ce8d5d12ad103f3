//! The supervisor zygote and pooled supervisors: dead or stopped ones are replaced
//! without a lost verdict.

use crate::support::*;

use std::fs;
use std::process::Command;

use serde_json::json;

/// The daemon's supervisor zygote (a child running the same binary), once it runs.
fn zygote_of(d: &Daemon) -> u32 {
    let daemon = d.child.id();
    let mut found = None;
    wait_for("the supervisor zygote", NO_HANG, || {
        found = fs::read_dir("/proc").ok().and_then(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .find(|&p| crate::support::is_daemon_zygote(p, daemon))
        });
        found.is_some()
    });
    found.unwrap_or_default()
}

/// A zygote killed or stopped from outside costs no verdict: the daemon kills and
/// reaps what is left of it and forks supervisors itself, and no job hangs.
#[test]
fn a_dead_or_stopped_zygote_falls_back_to_forking_from_the_daemon() {
    for signal in ["KILL", "STOP"] {
        let w = World::new();
        w.config("");
        let runner = w.runner("ok", &answer(r#"{"ok": true}"#));
        let d = w.start(&[runner]);
        let zygote = zygote_of(&d);
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(zygote.to_string())
            .status()
            .unwrap();
        assert!(status.success());
        for i in 0..3 {
            w.job(&format!("j{i}"), &json!({"prompt": format!("p{i}")}));
        }
        wait_for("three verdicts", NO_HANG, || w.verdicts().len() == 3);
        w.wait_log("the supervisor zygote stopped answering");
        wait_for("the zygote reaped", NO_HANG, || !is_running(zygote));
        // A stopped zygote held the request it was sent: that attempt starts again
        // from the daemon, on fresh pipes.
        for i in 0..3 {
            let v = w.verdict(&format!("j{i}"));
            assert_eq!(v["outcome"], "hit", "{signal}: {v}\n{}", w.log());
        }
    }
}

/// A pooled supervisor killed while idle costs no verdict: the daemon drops it when it
/// refuses the next request, and a new one from the zygote runs the rest.
#[test]
fn a_killed_idle_pooled_supervisor_is_replaced_without_a_lost_verdict() {
    let w = World::new();
    w.config("workers = 1");
    let body = format!("parentpid >> $W/parents\n{}", answer(r#"{"ok": true}"#));
    let runner = w.runner("ok", &body);
    let d = w.start(&[runner]);
    w.job("j0", &json!({"prompt": "p0"}));
    wait_for("the first verdict", NO_HANG, || w.verdicts().len() == 1);
    let first = pids_in(&w.read("parents"))[0];
    assert!(
        crate::support::is_daemon_helper(first, d.child.id()),
        "{first}"
    );
    signal(first, libc::SIGKILL);
    wait_for("the idle supervisor gone", NO_HANG, || !is_running(first));
    for i in 1..3 {
        w.job(&format!("j{i}"), &json!({"prompt": format!("p{i}")}));
    }
    wait_for("three verdicts", NO_HANG, || w.verdicts().len() == 3);
    for i in 0..3 {
        let v = w.verdict(&format!("j{i}"));
        assert_eq!(v["outcome"], "hit", "{v}\n{}", w.log());
    }
    let parents = pids_in(&w.read("parents"));
    assert_eq!(parents.len(), 3, "{parents:?}");
    assert!(
        parents[1] != first && parents[2] == parents[1],
        "a new pooled supervisor ran the later attempts: {parents:?}"
    );
}
