//! Runners that write gigabytes (SPEC section 4: "stdout and stderr read concurrently
//! with a byte cap (keep the tail)"). Its own test binary because the memory bound is
//! read with getrusage(RUSAGE_CHILDREN), which covers every waited-for descendant of
//! the test process: here only the judges of these tests and their runners.

mod support;
use support::{reliability, world};

use std::time::Duration;

use reliability::*;
use world::World;

/// The largest RSS any judge of this binary may reach, with the default 1 MiB output
/// cap (two streams, trimmed at twice the cap): generous, and far below a gigabyte.
const MAX_RSS_KIB: i64 = 64 * 1024;

fn judge_one(name: &str, body: &str, timeout: f64) -> (World, serde_json::Value, Duration) {
    let w = World::new();
    let mark = new_mark(name);
    let _reaper = Reaper::new(&mark);
    let elapsed = run_one_job(&w, &mark, name, body, timeout);
    let left = wait_no_marked(&mark, &[], Duration::from_secs(10));
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
    let rss = children_max_rss_kib();
    eprintln!("max RSS of the judges so far: {rss} KiB");
    assert!(rss < MAX_RSS_KIB, "max RSS {rss} KiB");
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
    assert!(
        reason.ends_with("stderr stderr"),
        "the stderr tail: {reason}"
    );
    assert!(reason.chars().count() <= 300);
    let rss = children_max_rss_kib();
    eprintln!("max RSS of the judges so far: {rss} KiB");
    assert!(rss < MAX_RSS_KIB, "max RSS {rss} KiB");
}

#[test]
fn a_gigabyte_in_one_line_without_newline_then_exit() {
    // One 1 GiB "line" (no newline at all) and exit 0: no answer, no quadratic work,
    // bounded memory; the reason carries the clipped tail.
    let (_w, v, elapsed) = judge_one("one_line", "yes | tr -d '\\n' | head -c 1G", 120.0);
    let reason = v["attempts"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("no JSON object line in stdout: yyyy"),
        "{reason}"
    );
    assert!(reason.chars().count() <= 300);
    eprintln!("1 GiB single line judged in {elapsed:?}");
    let rss = children_max_rss_kib();
    eprintln!("max RSS of the judges so far: {rss} KiB");
    assert!(rss < MAX_RSS_KIB, "max RSS {rss} KiB");
}
