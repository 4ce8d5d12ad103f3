//! Unit tests of `spend_ledger.rs` (a file of their own to keep that one short).

use super::*;

fn entry(at: f64, runner: &str) -> SpendEntry {
    SpendEntry {
        at,
        runner: runner.into(),
        answered: true,
        usage: None,
    }
}

fn record(ledger: &SpendLedger, entry: SpendEntry) {
    match ledger.reserve(&Budget::default()) {
        Ok(reservation) => reservation.record(entry),
        Err(why) => panic!("{why}"),
    }
}

fn runs_cap(max: u64) -> Budget {
    Budget {
        max_runs_per_hour: Some(max),
        ..Budget::default()
    }
}

fn lines(state: &StateDir) -> usize {
    std::fs::read_to_string(state.spend()).map_or(0, |t| t.lines().count())
}

/// Holds `spend.lock` exclusively, as any process of the user can.
fn hold_lock(state: &StateDir) -> File {
    let file = open_lock_file(&state.spend_lock()).unwrap();
    assert!(try_lock_exclusive(&file));
    file
}

/// Runs `f` on a thread and waits for it, bounded: a call that blocks on the
/// lock fails the test instead of hanging it.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("blocked on spend.lock")
}

#[test]
fn runs_recorded_by_two_writers_are_read_by_both_and_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let a = SpendLedger::open(&state, false);
    let b = SpendLedger::open(&state, false);
    let now = now_unix();
    record(&a, entry(now, "claude"));
    record(&b, entry(now, "codex"));
    assert_eq!(a.recent().len(), 2);
    record(&a, entry(now, "claude"));
    assert_eq!(b.recent().len(), 3);
    assert_eq!(SpendLedger::open(&state, false).recent().len(), 3);
}

#[test]
fn reservations_count_until_recorded_or_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let ledger = SpendLedger::open(&state, false);
    let cap = runs_cap(2);
    let first = ledger.reserve(&cap).unwrap();
    let second = ledger.reserve(&cap).unwrap();
    let why = ledger.reserve(&cap).err();
    assert_eq!(why, Some(CapReached::Runs { runs: 2, max: 2 }));
    drop(second);
    let again = ledger.reserve(&cap).unwrap();
    first.record(entry(now_unix(), "x"));
    assert!(ledger.reserve(&cap).is_err(), "one recorded, one in flight");
    drop(again);
    assert!(ledger.reserve(&cap).is_ok());
    assert_eq!(lines(&state), 1, "a dropped reservation records nothing");
}

/// Issue 39, item 1: a held `spend.lock` made every run's record wait forever.
#[test]
fn a_held_lock_never_blocks_a_run_and_its_record_is_appended_later() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let held = hold_lock(&state);
    let ledger = std::sync::Arc::new(SpendLedger::open(&state, false));
    let l = ledger.clone();
    bounded(move || record(&l, entry(now_unix(), "x")));
    assert_eq!(lines(&state), 0, "kept in memory while the lock is held");
    assert_eq!(ledger.recent().len(), 1);
    let l = ledger.clone();
    let capped = bounded(move || l.reserve(&runs_cap(1)).map(drop));
    assert!(capped.is_err(), "the run kept in memory counts for the cap");
    assert!(bounded({
        let l = ledger.clone();
        move || l.budget_log_due()
    }));
    drop(held);
    assert!(ledger.reserve(&runs_cap(2)).is_ok());
    assert_eq!(lines(&state), 1, "appended once the lock was free");
    assert_eq!(ledger.recent().len(), 1, "and counted once");
}

#[test]
fn runs_kept_in_memory_are_appended_without_the_lock_at_exit_or_past_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let _held = hold_lock(&state);
    let ledger = SpendLedger::open(&state, false);
    record(&ledger, entry(now_unix(), "x"));
    drop(ledger);
    assert_eq!(lines(&state), 1, "written at exit");
    let ledger = SpendLedger::open(&state, false);
    for _ in 0..MAX_PENDING {
        record(&ledger, entry(now_unix(), "y"));
    }
    assert_eq!(lines(&state), 1 + MAX_PENDING, "written past the bound");
    assert_eq!(ledger.recent().len(), 1 + MAX_PENDING);
}

#[test]
fn compaction_leaves_a_held_lock_alone() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let old = serde_json::to_string(&entry(now_unix() - DAY - 10.0, "old")).unwrap();
    std::fs::write(state.spend(), format!("{old}\n")).unwrap();
    let held = hold_lock(&state);
    let s = StateDir::new(dir.path());
    drop(bounded(move || SpendLedger::open(&s, false)));
    assert_eq!(lines(&state), 1, "left for later");
    drop(held);
    let _ledger = SpendLedger::open(&state, false);
    assert_eq!(lines(&state), 0);
}

#[test]
fn opening_drops_runs_older_than_a_day_and_readers_start_over() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let reader = SpendLedger::open(&state, false);
    let now = now_unix();
    record(&reader, entry(now - DAY - 10.0, "old"));
    record(&reader, entry(now, "new"));
    assert_eq!(reader.recent().len(), 1, "the window drops the old run");
    let _compacting = SpendLedger::open(&state, false);
    assert_eq!(lines(&state), 1);
    record(&reader, entry(now, "newer"));
    let names: Vec<String> = reader.recent().into_iter().map(|e| e.runner).collect();
    assert_eq!(names, ["new", "newer"]);
}

#[test]
fn opening_a_ledger_with_a_fresh_first_line_rewrites_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    record(&SpendLedger::open(&state, false), entry(now_unix(), "x"));
    let inode = std::fs::metadata(state.spend()).unwrap().ino();
    let _again = SpendLedger::open(&state, false);
    assert_eq!(std::fs::metadata(state.spend()).unwrap().ino(), inode);
    assert!(!first_line_is_stale(&state.spend()));
    std::fs::write(state.spend(), "not a run\n").unwrap();
    assert!(first_line_is_stale(&state.spend()));
}

#[test]
fn bad_and_torn_lines_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let now = now_unix();
    let good = serde_json::to_string(&entry(now, "x")).unwrap();
    std::fs::write(state.spend(), format!("not json\n{good}\n{{\"at\":")).unwrap();
    let ledger = SpendLedger::unopened(&state);
    assert_eq!(ledger.recent().len(), 1);
    let mut f = OpenOptions::new().append(true).open(state.spend()).unwrap();
    f.write_all(format!("{now},\"runner\":\"y\",\"answered\":false}}\n").as_bytes())
        .unwrap();
    assert_eq!(ledger.recent().len(), 2, "the torn line once whole");
}

/// Issue 39, item 4: a line already written with forged usage locked judging out.
#[test]
fn a_forged_line_already_written_does_not_reach_the_cost_cap() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let line = format!(
        r#"{{"at":{},"runner":"cursor","answered":true,"usage":{{"input_tokens":18446744073709551615,"output_tokens":18446744073709551615,"cost_usd":1.7e308}}}}"#,
        now_unix()
    );
    std::fs::write(state.spend(), format!("{line}\n")).unwrap();
    let ledger = SpendLedger::open(&state, false);
    let budget = Budget {
        max_cost_usd_per_day: Some(5.0),
        max_runs_per_hour: Some(2),
    };
    let first = ledger.reserve(&budget);
    assert!(first.is_ok(), "its cost is not counted");
    assert!(ledger.reserve(&budget).is_err(), "it counts as a run");
}

#[test]
fn the_budget_line_is_due_once_a_minute() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let ledger = SpendLedger::open(&state, false);
    assert!(ledger.budget_log_due());
    assert!(!ledger.budget_log_due());
    assert!(
        !SpendLedger::open(&state, false).budget_log_due(),
        "across writers"
    );
}

#[test]
fn an_unlimited_budget_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    std::fs::create_dir(state.spend()).unwrap();
    let ledger = SpendLedger::open(&state, false);
    assert!(ledger.reserve(&Budget::default()).is_ok());
    assert!(ledger.reserve(&runs_cap(0)).is_err());
}

/// The kept `spend.lock` is let go after each append: a compaction (or any process
/// of the user) can take it exclusively between two runs.
#[test]
fn a_kept_lock_is_let_go_after_each_append() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let ledger = SpendLedger::open(&state, false);
    record(&ledger, entry(now_unix(), "x"));
    assert!(ledger.book().lock_file.is_some(), "kept for the next run");
    let other = open_lock_file(&state.spend_lock()).unwrap();
    assert!(try_lock_exclusive(&other), "not held between runs");
}

/// A `spend.lock` removed and made again is the one that counts: a run appends only
/// under the lock file the path names, never under a kept, unlinked one.
#[test]
fn a_replaced_lock_file_is_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let ledger = std::sync::Arc::new(SpendLedger::open(&state, false));
    record(&ledger, entry(now_unix(), "x"));
    std::fs::remove_file(state.spend_lock()).unwrap();
    let held = hold_lock(&state);
    let l = ledger.clone();
    bounded(move || record(&l, entry(now_unix(), "y")));
    assert_eq!(
        lines(&state),
        1,
        "kept in memory: the new lock file is held"
    );
    drop(held);
    record(&ledger, entry(now_unix(), "z"));
    assert_eq!(lines(&state), 3);
}

/// A ledger replaced under a kept file (compaction, or a user's `rm`) is opened
/// again: no run is written into the unlinked file.
#[test]
fn a_replaced_ledger_file_is_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let ledger = SpendLedger::open(&state, false);
    record(&ledger, entry(now_unix() - DAY - 10.0, "old"));
    let _compacting = SpendLedger::open(&state, false);
    assert_eq!(lines(&state), 0, "compacted");
    record(&ledger, entry(now_unix(), "after compaction"));
    assert_eq!(lines(&state), 1);
    std::fs::remove_file(state.spend()).unwrap();
    record(&ledger, entry(now_unix(), "after rm"));
    assert_eq!(lines(&state), 1, "made again");
    let names: Vec<String> = SpendLedger::unopened(&state)
        .recent()
        .into_iter()
        .map(|e| e.runner)
        .collect();
    assert_eq!(names, ["after rm"]);
}

/// A symlink put in place of a kept ledger is not followed: the run stays in memory
/// (counted by the cap) and the symlink's target is untouched.
#[test]
fn a_symlink_in_place_of_a_kept_ledger_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let ledger = SpendLedger::open(&state, false);
    record(&ledger, entry(now_unix(), "x"));
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "").unwrap();
    std::fs::remove_file(state.spend()).unwrap();
    std::os::unix::fs::symlink(&target, state.spend()).unwrap();
    record(&ledger, entry(now_unix(), "y"));
    assert_eq!(std::fs::read(&target).unwrap(), b"");
    assert!(ledger.reserve(&runs_cap(1)).is_err(), "kept and counted");
}

/// A last line a power cut left short is ended before the next run is appended: the
/// next run stays a line of its own, counted, and the torn one is skipped.
#[test]
fn a_torn_last_line_does_not_swallow_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    std::fs::write(state.spend(), b"{\"at\":1,\"runner\":\"a\",\"answe").unwrap();
    for durable in [false, true] {
        record(&SpendLedger::open(&state, durable), entry(now_unix(), "b"));
    }
    let text = std::fs::read_to_string(state.spend()).unwrap();
    let runs: Vec<&str> = text.lines().filter(|l| l.contains("\"b\"")).collect();
    assert_eq!(runs.len(), 2, "{text:?}");
    assert!(runs.iter().all(|l| l.starts_with('{') && l.ends_with('}')));
    assert_eq!(SpendLedger::open(&state, false).recent().len(), 2);
}
