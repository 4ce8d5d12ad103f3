//! Runners that write gigabytes (SPEC section 4: "stdout and stderr read concurrently
//! with a byte cap (keep the tail)"). The memory bound is each judge's own: the peak
//! RSS GNU time reports for it, which covers the judge and the descendants it waited
//! for (its supervisor and the runner's tree), and nothing of the test process
//! (`support/rss.rs` says why not this process's own `wait4`).

use crate::support::*;

use std::time::Duration;

/// The largest RSS any judge of this binary may reach, with the default 1 MiB output
/// cap (two streams, trimmed at twice the cap): generous, and far below a gigabyte.
const MAX_RSS_KIB: i64 = 64 * 1024;

/// Judges one job with `llm-judge run`: the verdict, the time, and the largest RSS
/// (KiB) of the judge's process tree, checked against the bound.
fn judge_one(name: &str, body: &str, timeout: f64) -> (World, serde_json::Value, Duration) {
    let w = World::new();
    let mark = new_mark(name);
    let _reaper = Reaper::new(&mark);
    let (elapsed, rss) = run_one_job_measured(&w, &mark, name, body, timeout);
    eprintln!("{name}: max RSS of the judge's tree {rss} KiB");
    assert!(rss < MAX_RSS_KIB, "{name}: max RSS {rss} KiB");
    let left = wait_no_marked(&mark, &[], Duration::from_secs(30));
    assert!(left.is_empty(), "{name}: processes left running: {left:?}");
    assert!(w.jobs_left().is_empty());
    let v = w.verdict(name);
    (w, v, elapsed)
}

#[test]
fn two_gigabytes_of_stdout_then_an_answer() {
    // 2 GiB of NUL bytes, then the answer line: only the tail is kept, and the answer
    // is in the tail.
    let (_w, v, elapsed) = judge_one(
        "two_gib",
        "head -c 2G /dev/zero\necho\necho '{\"ok\": true}'",
        120.0,
    );
    assert_eq!(v["attempts"][0]["reason"], "answered", "{v}");
    assert_eq!(v["outcome"], "hit");
    eprintln!("2 GiB of stdout judged in {elapsed:?}");
}

#[test]
fn endless_output_on_both_streams_until_the_timeout() {
    // `yes` on stdout and on stderr at once, forever: timed out, killed, bounded.
    let (_w, v, _) = judge_one(
        "endless",
        "yes 'stdout stdout stdout' &\nyes 'stderr stderr' >&2 &\nwait",
        2.0,
    );
    let reason = v["attempts"][0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("timed out after 2s: "), "{reason}");
    // The stderr tail, cut where the stop caught `yes`: maybe inside a line, since a
    // write larger than a pipe's atomic size can be stopped halfway.
    let tail = reason.trim_end();
    let last = tail.rsplit('\n').next().unwrap_or_default();
    assert!(
        tail.contains("stderr stderr\n") && !last.is_empty() && "stderr stderr".starts_with(last),
        "the stderr tail: {reason}"
    );
    assert!(reason.chars().count() <= 300);
}

#[test]
fn a_gigabyte_in_one_line_without_newline_then_exit() {
    // One 1 GiB "line" (no newline at all) and exit 0: no answer, no quadratic work,
    // bounded memory; the reason says the cap cut the output and carries the clipped
    // tail.
    let (_w, v, elapsed) = judge_one("one_line", "yes | tr -d '\\n' | head -c 1G", 120.0);
    let reason = v["attempts"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "no JSON object line in stdout (output cut to the last 1048576 bytes): yyyy"
        ),
        "{reason}"
    );
    assert!(reason.chars().count() <= 300);
    eprintln!("1 GiB single line judged in {elapsed:?}");
}
