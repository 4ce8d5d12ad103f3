//! Integration tests of `llm-judge daemon` (docs/reference.md, "Guarantees"): the real binary on a
//! temp state folder with fake runners. Every wait has a deadline; nothing sleeps to
//! synchronise; every daemon is killed and reaped when its test ends.

mod inbox;
mod processes;
mod queue;
mod restarts;
mod shutdown;

use crate::support::*;

use serde_json::{Value, json};

/// Starts a daemon on job `j` and waits until `runner` (which appends its pid to
/// `$W/runner.pids`) runs it; returns the daemon and the runner's pid.
fn start_with_running_job(w: &World, runner: Value) -> (Daemon, u32) {
    w.job("j", &json!({"prompt": "p"}));
    let d = w.start(&[runner]);
    wait_for("runner started", NO_HANG, || {
        pids_in(&w.read("runner.pids")).len() == 1
    });
    (d, pids_in(&w.read("runner.pids"))[0])
}

/// A runner that answers once `$W/answer` exists; before that it records its pid and
/// a setsid'd grandchild's pid, then blocks.
fn blocking_runner(w: &World) -> Value {
    w.runner(
        "blocker",
        &format!(
            "if [ -e $W/answer ]; then {}; exit 0; fi\n\
             hostpid >> $W/runner.pids\n\
             setsid sh -c 'read -r p _ </proc/self/stat; echo $p@$(stat -Lc %i /proc/self/ns/pid) >> '$W'/grandchild.pids; exec sleep 300' &\n\
             exec sleep 300",
            answer(r#"{"ok": true}"#)
        ),
    )
}
