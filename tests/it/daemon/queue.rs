//! Jobs in and verdicts out: every job judged once, never more than `workers` at
//! once, and a reload that changes how many.

use crate::support::*;

use std::fs;
use std::time::Duration;

use serde_json::json;

#[test]
fn jobs_present_before_start_and_arriving_after_are_judged() {
    let w = World::new();
    let fake = w.runner("fake", &answer(r#"{"ok": true}"#));
    for i in 0..3 {
        w.job(
            &format!("pre{i}"),
            &json!({"prompt": format!("p{i}"), "transcript": "T", "hit_if_all_true": ["ok"]}),
        );
    }
    let _d = w.start(&[fake]);
    wait_for("pre jobs judged", NO_HANG, || w.verdicts().len() == 3);
    for i in 0..3 {
        w.job(
            &format!("post{i}"),
            &json!({"prompt": format!("q{i}"), "transcript": "T"}),
        );
    }
    wait_for("post jobs judged", NO_HANG, || w.verdicts().len() == 6);
    assert!(w.jobs_left().is_empty());
    assert_eq!(w.verdict("pre0")["outcome"], "hit");
    assert_eq!(w.verdict("post2")["runner"], "fake");
    assert!(w.log().contains("daemon start"), "{}", w.log());
}

#[test]
fn twenty_thousand_jobs_dropped_at_once_are_each_judged_once() {
    let w = World::new();
    w.config("workers = 8\nrescan_seconds = 3600");
    // No prompt slot: the prompt goes to stdin, which echo ignores. The fastest runner.
    let echo = json!(["echo", ["/bin/echo", r#"{"ok": true}"#]]);
    let _d = w.start(&[echo]);
    w.wait_log("daemon start");
    let jobs = w.state().join("jobs");
    const N: usize = 20_000;
    for i in 0..N {
        // Published as producers must (hidden temp, then rename: a plain write can be
        // read half-written), still several events per file, more than the kernel's
        // event queue holds.
        let temp = jobs.join(format!(".j{i:05}.tmp"));
        fs::write(&temp, format!(r#"{{"prompt":"p{i}","transcript":"T"}}"#)).unwrap();
        fs::rename(&temp, jobs.join(format!("j{i:05}.json"))).unwrap();
    }
    wait_for("inbox empty", Duration::from_secs(600), || {
        fs::read_dir(&jobs).map(|d| d.count() == 0).unwrap_or(false)
    });
    let folder = w.verdict_folder("T");
    assert_eq!(names(&folder).len(), N, "one verdict per job");
    let finished = w.log().matches("job finished").count();
    assert_eq!(finished, N, "each job judged exactly once");
}

#[test]
fn never_more_than_workers_runners_at_once() {
    let w = World::new();
    w.config("workers = 3");
    // Each runner waits (bounded) until a second one has started before its 0.3 s: a
    // pool that runs jobs side by side shows it however slowly the machine starts them.
    let body = format!(
        "echo \"start $(date +%s%N)\" >> $W/spans\n{}sleep 0.3\necho \"end $(date +%s%N)\" >> $W/spans\n{}",
        until_started(2, "$W/spans"),
        answer(r#"{"ok": true}"#)
    );
    let slow = w.runner("slow", &body);
    for i in 0..10 {
        w.job(&format!("j{i}"), &json!({"prompt": format!("p{i}")}));
    }
    let _d = w.start(&[slow]);
    wait_for("all judged", NO_HANG, || w.verdicts().len() == 10);
    let (lines, peak) = peak_overlap(&w.read("spans"));
    assert_eq!(lines, 20);
    assert!(peak <= 3, "{peak} runners at once with workers = 3");
    assert!(peak >= 2, "the pool ran jobs in parallel (peak {peak})");
}

/// Shell that waits (at most 30 s) until `spans` holds `n` start lines.
fn until_started(n: usize, spans: &str) -> String {
    format!(
        "n=0; while [ \"$(grep -c start {spans})\" -lt {n} ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done\n"
    )
}

/// A reload that lowers `workers` while jobs run holds new jobs back until fewer than
/// the new count hold a slot, and a reload that raises it lets more run at once.
#[test]
fn a_reload_lowers_and_raises_how_many_jobs_run_at_once() {
    let w = World::new();
    w.config("workers = 3");
    // The prompt is "<phase> <seconds> <n>" (distinct, so no answer is reused): spans
    // go to $W/spans.<phase>.
    // Phase "more" waits for a second start (as in never_more_than_workers_runners_at_once).
    let body = format!(
        "set -- $1\necho \"start $(date +%s%N)\" >> $W/spans.$1\n\
         if [ \"$1\" = more ]; then {}fi\nsleep $2\n\
         echo \"end $(date +%s%N)\" >> $W/spans.$1\n{}",
        until_started(2, "$W/spans.more"),
        answer(r#"{"ok": true}"#)
    );
    let sleeper = w.runner("sleeper", &body);
    let d = w.start(&[sleeper]);
    for (i, seconds) in ["0.2", "0.8", "1.4"].iter().enumerate() {
        w.job(
            &format!("old{i}"),
            &json!({"prompt": format!("old {seconds}")}),
        );
    }
    wait_for("three old jobs running", NO_HANG, || {
        w.read("spans.old").matches("start").count() == 3
    });
    let reload = |workers: usize, reloads: usize| {
        w.config(&format!("workers = {workers}"));
        d.signal("HUP");
        wait_for("config reloaded", NO_HANG, || {
            w.log().matches("config reloaded").count() == reloads
        });
        // The line says the new value (it said the one before).
        let said = w.log_lines("config reloaded").pop().unwrap_or_default();
        assert!(said.contains(&format!("workers={workers}")), "{said}");
    };
    let enqueue_three = |phase: &str, seconds: &str| {
        for i in 0..3 {
            let prompt = format!("{phase} {seconds} {i}");
            w.job(&format!("{phase}{i}"), &json!({ "prompt": prompt }));
        }
    };
    reload(1, 1);
    enqueue_three("new", "0.1");
    wait_for("six verdicts", NO_HANG, || w.verdicts().len() == 6);
    let last_old_end = stamps(&w.read("spans.old"), "end").into_iter().max();
    let first_new_start = stamps(&w.read("spans.new"), "start").into_iter().min();
    assert!(
        first_new_start > last_old_end,
        "a new job started while old ones held more than workers = 1 slots:\n{}\n{}",
        w.read("spans.old"),
        w.read("spans.new")
    );
    assert_eq!(peak_overlap(&w.read("spans.new")), (6, 1));
    reload(3, 2);
    enqueue_three("more", "0.6");
    wait_for("nine verdicts", NO_HANG, || w.verdicts().len() == 9);
    let (lines, peak) = peak_overlap(&w.read("spans.more"));
    assert_eq!(lines, 6);
    assert!(
        peak >= 2,
        "a raised workers ran jobs side by side (peak {peak})"
    );
}

/// The nanosecond stamps of the `kind` lines (start or end) of a spans file.
fn stamps(spans: &str, kind: &str) -> Vec<u128> {
    spans
        .lines()
        .filter_map(|l| l.strip_prefix(kind)?.trim().parse().ok())
        .collect()
}
