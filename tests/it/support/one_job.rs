//! One job judged by `llm-judge run` with one fake runner, within a bound: the fault
//! tests' common step (a runner that misbehaves, and how long the judge takes to end it).

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::{
    NO_HANG, World, command, peak_rss_kib, pids_in_file, spawn, under_gnu_time, wait_until, within,
    write_config,
};

/// The kill grace the fault tests configure, and their generous no-hang margin.
pub const GRACE: f64 = 1.0;
pub const MARGIN: f64 = 12.0;

/// Writes the config, the fake runner `name` (`body`) and job `name` with `timeout`;
/// returns the `llm-judge run` command for it (marked with `mark`).
fn one_job(w: &World, mark: &str, name: &str, body: &str, timeout: Value) -> Command {
    write_config(w, &format!("fsync = false\nkill_grace_seconds = {GRACE}\n"));
    let runner = w.runner(name, body);
    let job = w.job(
        name,
        &json!({"prompt": "p", "timeout_seconds": timeout, "transcript": "T", "hit_if_all_true": ["ok"]}),
    );
    let mut cmd = command(w, Some(&[runner]), mark);
    cmd.arg("run").arg(job);
    cmd
}

/// Judges `jobs/<name>.json` with one fake runner (`body`) through `llm-judge run` and
/// checks it exits 0 within timeout + `GRACE` + `MARGIN`; returns how long it took.
pub fn run_one_job(w: &World, mark: &str, name: &str, body: &str, timeout: f64) -> Duration {
    let cmd = one_job(w, mark, name, body, json!(timeout));
    finish_in_bound(w, cmd, name, timeout)
}

/// Runs `cmd` and checks it exits 0 within timeout + `GRACE` + `MARGIN`.
fn finish_in_bound(w: &World, cmd: Command, name: &str, timeout: f64) -> Duration {
    let mut p = spawn(w, cmd, &[]);
    let bound = timeout + GRACE + MARGIN;
    let (status, elapsed) = p.finish(Duration::from_secs_f64(bound + 30.0));
    assert!(
        status.success(),
        "{name}: {status:?}; stderr: {}",
        p.stderr()
    );
    assert!(
        elapsed.as_secs_f64() <= bound,
        "{name}: took {elapsed:?}, over timeout {timeout} + grace {GRACE} + margin {MARGIN}"
    );
    elapsed
}

/// Judges `jobs/<name>.json` with one fake runner (`body`) through `llm-judge run`, with
/// a timeout long enough never to come: once the fake has written `$W/<ready>` (every
/// process it means to start is up), the test sends its process group the SIGTERM a
/// timeout would, so the stop never races the fake's start-up however loaded the
/// machine. Checks `run` exits 0 and returns how long it took.
pub fn run_one_job_stopped_when_ready(
    w: &World,
    mark: &str,
    name: &str,
    body: &str,
    ready: &str,
) -> Duration {
    let mut p = spawn(w, one_job(w, mark, name, body, json!(600)), &[]);
    let up = wait_until(within(NO_HANG), || w.path(ready).exists() || !p.alive());
    assert!(
        up && w.path(ready).exists(),
        "{name}: the fake never got ready; stderr: {}",
        p.stderr()
    );
    // The runner is the first pid the fake writes down, and leads its process group.
    let group = pids_in_file(&w.path("pids"))[0];
    // SAFETY: kill(2) with a process group and a signal has no memory effects.
    let rc = unsafe { libc::kill(-(group as i32), libc::SIGTERM) };
    assert_eq!(rc, 0, "{name}: kill(-{group}, SIGTERM)");
    let (status, elapsed) = p.finish(NO_HANG);
    assert!(
        status.success(),
        "{name}: {status:?}; stderr: {}",
        p.stderr()
    );
    elapsed
}

/// As `run_one_job`, and the peak RSS (KiB) of the judge's process tree, measured
/// under GNU time (`rss.rs` says why).
pub fn run_one_job_measured(
    w: &World,
    mark: &str,
    name: &str,
    body: &str,
    timeout: f64,
) -> (Duration, i64) {
    let report = w.path(&format!("{name}.rss"));
    let timed = under_gnu_time(&one_job(w, mark, name, body, json!(timeout)), &report);
    let elapsed = finish_in_bound(w, timed, name, timeout);
    (elapsed, peak_rss_kib(&report))
}
