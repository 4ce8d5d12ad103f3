//! `run` on a job another run holds, and `ask`.

use crate::support::*;

use std::fs;
use std::time::Duration;

use serde_json::json;

#[test]
fn run_on_a_job_claimed_by_another_run_does_not_judge_it_twice() {
    let w = World::new();
    let starts = w.root.join("starts");
    let release = w.root.join("release");
    let hold = format!(
        "echo started >> '{starts}'\n\
         i=0\n\
         while [ ! -e '{release}' ]; do\n\
           i=$((i + 1)); [ $i -gt 1200 ] && exit 9\n\
           sleep 0.05\n\
         done\n\
         echo '{{\"held\": true}}'\n",
        starts = s(&starts),
        release = s(&release)
    );
    let runners = table(&[w.runner("hold", &hold)]);
    let job = w.job(
        "claimed",
        &json!({"prompt": "p", "transcript": "/t/c.jsonl"}),
    );
    let mut first_cmd = w.cli();
    first_cmd.env(RUNNERS_VAR, &runners).arg("run").arg(&job);
    let mut first = w.spawn(first_cmd);
    let started = wait_until(within(Duration::from_secs(30)), || {
        starts.exists() || first.exited()
    });
    assert!(
        started && starts.exists(),
        "the first run's runner never started\n{}",
        w.log()
    );

    let second = w.run_file(&job, Some(&runners));
    assert_eq!(second.code, Some(0), "{second:?}");
    let busy = format!("{} is being judged by process {}", s(&job), first.pid);
    assert!(
        second.stderr.contains(&busy),
        "{:?} lacks {busy:?}",
        second.stderr
    );
    assert!(job.exists(), "the job went away while claimed");
    assert!(w.all_verdicts().is_empty());

    fs::write(&release, "").unwrap();
    let first = first.finish(NO_HANG);
    assert_eq!(first.code, Some(0), "{first:?}");
    assert_eq!(
        fs::read_to_string(&starts).unwrap(),
        "started\n",
        "runner started more than once"
    );
    assert_eq!(
        w.all_verdicts(),
        [w.verdict_path(&transcript_hash("/t/c.jsonl"), "claimed")]
    );
    assert_eq!(w.verdict_of("/t/c.jsonl", "claimed")["runner"], "hold");
    assert!(!job.exists());

    // A late run finds nothing to do.
    let late = w.run_file(&job, Some(&runners));
    assert_eq!(late.code, Some(0));
    assert_eq!(w.all_verdicts().len(), 1);
}

// ---------------------------------------------------------------- ask

#[test]
fn ask_prints_outcome_runner_answer_attempts_and_exits_0_when_answered() {
    let w = World::new();
    let runners = table(&[
        w.runner("fail", "exit 4\n"),
        json!([
            "ok",
            [
                "/bin/sh",
                s(&w.script("ok", &format!("{}echo '{{\"yes\": 1}}'\n", w.recorder()))),
                "--",
                "{prompt}"
            ]
        ]),
    ]);
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, &runners)
        .args(["ask", "--timeout", "7", "--cwd"])
        .arg(&w.work)
        .args(["--", "--is-it-fine"]);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(0), "{done:?}");
    let out = done.json();
    let keys: Vec<&str> = out
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["outcome", "runner", "answer", "attempts"]);
    assert_eq!(out["outcome"], "answered");
    assert_eq!(out["runner"], "ok");
    assert_eq!(out["answer"], json!({"yes": 1}));
    assert_eq!(
        attempts(&out),
        expected(&[("fail", false, "exit 4"), ("ok", true, "answered")])
    );
    assert_eq!(w.recorded_argv("ok"), ["--", "--is-it-fine"]);
    assert_eq!(w.recorded("ok", "pwd").trim_end(), s(&w.work));
    w.log_line_ending(&format!(
        " INFO runner start id=ask runner=ok timeout=7 cwd={}",
        s(&w.work)
    ));
    assert!(w.all_verdicts().is_empty(), "ask wrote a verdict");
}

#[test]
fn ask_with_no_runners_exits_1_unchecked() {
    let w = World::new();
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, "[]").args(["ask", "anything"]);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(1), "{done:?}");
    assert_eq!(
        done.json(),
        json!({"outcome": "unchecked", "runner": null, "answer": null, "attempts": []})
    );

    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, table(&[w.runner("mute", "exit 0\n")]))
        .args(["ask", "--mode", "investigate", "anything"]);
    let done = w.run(cmd);
    assert_eq!(done.code, Some(1), "{done:?}");
    let out = done.json();
    assert_eq!(out["outcome"], "unchecked");
    assert_eq!(
        attempts(&out),
        expected(&[("mute", false, "no JSON object line in stdout")])
    );
}
