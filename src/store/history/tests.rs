use super::*;
use crate::core::history::{DecisionRecord, JudgedBy, QueuedRecord, VerdictRecord};

fn verdict(uid: &str, at: f64, transcript: &str, job: &str, rule: &str, outcome: &str) -> Record {
    Record::Verdict(VerdictRecord {
        uid: uid.into(),
        at,
        by: JudgedBy::Daemon,
        job_id: job.into(),
        transcript: transcript.into(),
        rule: Some(rule.into()),
        mode: Some("default".into()),
        outcome: outcome.into(),
        reason: "ok".into(),
        runner: Some("fake".into()),
        judge_ms: 1_500,
        input_tokens: Some(10),
        output_tokens: Some(2),
        cost_usd: None,
        answer: Some(r#"{"unverified":true}"#.into()),
    })
}

fn queued(uid: &str, at: f64, transcript: &str, job: &str, rule: &str) -> Record {
    Record::Queued(QueuedRecord {
        uid: uid.into(),
        at,
        job_id: job.into(),
        transcript: transcript.into(),
        rule: rule.into(),
        action: "notice".into(),
        cwd: None,
        reply: "All tests pass.".into(),
        prompt: Some("fix the bug".into()),
        stop_ms: 12,
    })
}

fn decision(uid: &str, at: f64, transcript: &str, job: &str, d: Decision) -> Record {
    Record::Decision(DecisionRecord {
        uid: uid.into(),
        at,
        job_id: job.into(),
        transcript: transcript.into(),
        rule: Some("tests".into()),
        decision: d,
        told: Some("Run the tests.".into()),
    })
}

fn history(records: &[Record]) -> (tempfile::TempDir, History) {
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::new(tmp.path());
    spool::append(&state, records).unwrap();
    let mut history = History::open(&state, false).unwrap();
    history.import().unwrap();
    (tmp, history)
}

#[test]
fn a_hook_verdict_reads_back_with_its_decision_and_texts() {
    let now = now_unix();
    let (_tmp, history) = history(&[
        queued("q1", now - 5.0, "claude:s1", "hook-1", "tests"),
        verdict("v1", now - 4.0, "claude:s1", "hook-1", "tests", "hit"),
        decision(
            "d1",
            now - 3.0,
            "claude:s1",
            "hook-1",
            Decision::LetThroughAtWait,
        ),
        decision(
            "d2",
            now - 2.0,
            "claude:s1",
            "hook-1",
            Decision::NoticeDelivered,
        ),
        verdict(
            "v2",
            now - 1.0,
            "/t/catstack.jsonl",
            "job-2",
            "other",
            "clean",
        ),
    ]);
    let rows = history.rows(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 2);
    let hook = &rows[0];
    assert_eq!(
        (hook.harness.as_deref(), hook.session.as_str()),
        (Some("claude"), "s1")
    );
    assert_eq!(hook.decision, Some(Decision::NoticeDelivered));
    assert_eq!(
        (hook.rule_action.as_deref(), hook.stop_ms, hook.has_texts),
        (Some("notice"), Some(12), true)
    );
    assert_eq!(hook.told.as_deref(), Some("Run the tests."));
    assert!(hook.time.len() == 19, "{}", hook.time);
    assert_eq!((rows[1].harness.as_deref(), rows[1].action()), (None, "-"));
    let texts = history.texts(hook).unwrap().unwrap();
    assert_eq!(
        (texts.reply.as_str(), texts.prompt.as_deref()),
        ("All tests pass.", Some("fix the bug"))
    );
}

#[test]
fn filters_take_their_rows_only() {
    let now = now_unix();
    let (_tmp, history) = history(&[
        verdict(
            "a",
            now - 10.0 * 86_400.0,
            "claude:aaaa-1",
            "j1",
            "tests",
            "hit",
        ),
        verdict("b", now - 60.0, "claude:aaaa-1", "j2", "tests", "clean"),
        verdict("c", now - 30.0, "codex:bbbb-2", "j3", "blocker", "hit"),
    ]);
    let take = |filter: Filter| -> Vec<String> {
        history
            .rows(&filter)
            .unwrap()
            .into_iter()
            .map(|r| r.job_id)
            .collect()
    };
    assert_eq!(take(Filter::default()), ["j1", "j2", "j3"]);
    assert_eq!(
        take(Filter {
            since: Some(Since::Ago(86_400.0)),
            ..Filter::default()
        }),
        ["j2", "j3"]
    );
    assert_eq!(
        take(Filter {
            session: Some("aaaa".into()),
            ..Filter::default()
        }),
        ["j1", "j2"]
    );
    assert_eq!(
        take(Filter {
            rule: Some("blocker".into()),
            ..Filter::default()
        }),
        ["j3"]
    );
    assert_eq!(
        take(Filter {
            outcome: Some("hit".into()),
            ..Filter::default()
        }),
        ["j1", "j3"]
    );
    assert_eq!(
        take(Filter {
            harness: Some("codex".into()),
            ..Filter::default()
        }),
        ["j3"]
    );
    assert_eq!(
        take(Filter {
            limit: Some(2),
            ..Filter::default()
        }),
        ["j2", "j3"],
        "the newest, oldest first"
    );
    assert_eq!(
        take(Filter {
            since: Some(Since::Date("2000-01-01".into())),
            ..Filter::default()
        })
        .len(),
        3
    );
    assert!(
        history
            .rows(&Filter {
                since: Some(Since::Date("2026-02-31".into())),
                ..Filter::default()
            })
            .is_err()
    );
}

#[test]
fn importing_twice_adds_nothing_and_a_mark_sticks() {
    let now = now_unix();
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::new(tmp.path());
    let records = [verdict("v1", now, "codex:s", "j1", "tests", "hit")];
    spool::append(&state, &records).unwrap();
    let mut history = History::open(&state, true).unwrap();
    assert_eq!(history.import().unwrap().records, 1);
    assert_eq!(
        history.import().unwrap().records,
        0,
        "read from where it ended"
    );
    // A crash between an import and the removal of its file: the same lines again.
    history.conn.execute("DELETE FROM spool", []).unwrap();
    assert_eq!(history.import().unwrap().records, 1);
    let rows = history.rows(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    history.mark(rows[0].record, Label::Wrong).unwrap();
    history.mark(rows[0].record, Label::Right).unwrap();
    let row = history.row(rows[0].record).unwrap().unwrap();
    assert_eq!(row.mark.as_deref(), Some("right"));
    assert_eq!(
        history
            .rows(&Filter {
                marked: true,
                ..Filter::default()
            })
            .unwrap()
            .len(),
        1
    );
    assert_eq!(history.row(999).unwrap(), None);
}

#[test]
fn a_closed_spool_file_read_to_its_end_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::new(tmp.path());
    std::fs::create_dir(state.history()).unwrap();
    let old = state.history().join("spool-1.jsonl");
    let line =
        serde_json::to_string(&verdict("v1", 3_600.0, "claude:s", "j", "r", "clean")).unwrap();
    std::fs::write(&old, format!("{line}\n")).unwrap();
    let mut history = History::open(&state, false).unwrap();
    assert_eq!(history.import().unwrap().records, 1);
    assert!(!old.exists());
    let left: i64 = history
        .conn
        .query_row("SELECT COUNT(*) FROM spool", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0);
}

#[test]
fn pruning_drops_old_records_then_old_and_oversized_texts() {
    let now = now_unix();
    let day = 86_400.0;
    let (_tmp, mut history) = history(&[
        verdict(
            "v-old",
            now - 100.0 * day,
            "claude:s",
            "j-old",
            "tests",
            "hit",
        ),
        queued("q-old", now - 100.0 * day, "claude:s", "j-old", "tests"),
        verdict(
            "v-mid",
            now - 40.0 * day,
            "claude:s",
            "j-mid",
            "tests",
            "hit",
        ),
        queued("q-mid", now - 40.0 * day, "claude:s", "j-mid", "tests"),
        verdict(
            "v-marked",
            now - 40.0 * day,
            "claude:s",
            "j-marked",
            "tests",
            "hit",
        ),
        queued(
            "q-marked",
            now - 40.0 * day,
            "claude:s",
            "j-marked",
            "tests",
        ),
        verdict("v-new", now - 1.0, "claude:s", "j-new", "tests", "hit"),
        queued("q-new", now - 1.0, "claude:s", "j-new", "tests"),
    ]);
    let marked = history
        .rows(&Filter::default())
        .unwrap()
        .into_iter()
        .find(|r| r.job_id == "j-marked")
        .unwrap();
    history.mark(marked.record, Label::Wrong).unwrap();
    let config = HistoryConfig {
        enabled: true,
        keep_days: 90,
        keep_texts_days: 30,
        max_texts_mb: 1,
    };
    history.prune(&config, true).unwrap();
    let rows = history.rows(&Filter::default()).unwrap();
    let texts: Vec<(&str, bool)> = rows
        .iter()
        .map(|r| (r.job_id.as_str(), r.has_texts))
        .collect();
    assert_eq!(
        texts,
        [("j-mid", false), ("j-marked", true), ("j-new", true)]
    );
    // A cap of 0 MB drops every unmarked text, the newest too.
    let none = HistoryConfig {
        max_texts_mb: 0,
        ..config
    };
    history.prune(&none, true).unwrap();
    let rows = history.rows(&Filter::default()).unwrap();
    assert!(!rows.iter().find(|r| r.job_id == "j-new").unwrap().has_texts);
    assert!(
        rows.iter()
            .find(|r| r.job_id == "j-marked")
            .unwrap()
            .has_texts
    );
}

#[test]
fn stats_rows_group_by_day_and_session() {
    let now = now_unix();
    let (_tmp, history) = history(&[
        verdict("a", now - 2.0 * 86_400.0, "claude:s1", "j1", "tests", "hit"),
        verdict("b", now - 10.0, "codex:s2", "j2", "tests", "clean"),
    ]);
    let by_day = history
        .grouped_rows(&Filter::default(), Some(By::Day))
        .unwrap();
    assert_eq!(by_day.len(), 2);
    assert_ne!(by_day[0].0, by_day[1].0);
    assert_eq!(by_day[0].0.len(), 10, "{}", by_day[0].0);
    let by_session = history
        .grouped_rows(&Filter::default(), Some(By::Session))
        .unwrap();
    assert_eq!(
        (by_session[0].0.as_str(), by_session[1].0.as_str()),
        ("claude:s1", "codex:s2")
    );
    let by_week = history
        .grouped_rows(&Filter::default(), Some(By::Week))
        .unwrap();
    assert!(by_week[0].0.starts_with("week of "), "{}", by_week[0].0);
    assert_eq!(
        history.hits_since(now - 3.0 * 86_400.0).unwrap(),
        [("tests".to_string(), 1)]
    );
}

#[test]
fn a_file_that_is_not_a_database_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::new(tmp.path());
    std::fs::create_dir(state.history()).unwrap();
    std::fs::write(state.history().join(DB_NAME), vec![b'x'; 4096]).unwrap();
    let e = History::open(&state, false).err().unwrap().to_string();
    assert!(
        e.contains("history.sqlite3") && e.contains("move the file aside"),
        "{e}"
    );
}

#[test]
fn the_database_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, _history) = history(&[]);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = StateDir::new(tmp.path()).history();
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(DB_NAME)), 0o600);
}

#[test]
fn an_import_with_nothing_new_writes_nothing_and_forgets_offsets_of_files_gone() {
    let now = now_unix();
    let (tmp, mut history) = history(&[verdict("v1", now, "codex:s", "j1", "tests", "hit")]);
    history
        .conn
        .execute(
            "INSERT INTO spool(name, offset) VALUES ('spool-1.jsonl', 99)",
            [],
        )
        .unwrap();
    history.import().unwrap();
    let changes = |h: &History| -> i64 {
        h.conn
            .query_row("SELECT total_changes()", [], |r| r.get(0))
            .unwrap()
    };
    let before = changes(&history);
    assert_eq!(history.import().unwrap(), Imported::default());
    assert_eq!(changes(&history), before, "nothing written");
    let names: Vec<String> = history
        .conn
        .prepare("SELECT name FROM spool")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!names.contains(&"spool-1.jsonl".to_string()), "{names:?}");
    drop(tmp);
}

#[test]
fn pruning_gives_every_freed_page_back() {
    let now = now_unix();
    let old = now - 200.0 * 86_400.0;
    let records: Vec<Record> = (0..200)
        .map(|i| {
            let mut q = queued(&format!("q{i}"), old, "claude:s", &format!("j{i}"), "tests");
            if let Record::Queued(q) = &mut q {
                q.reply = "x".repeat(20_000);
            }
            q
        })
        .collect();
    let (_tmp, mut history) = history(&records);
    let config = HistoryConfig {
        enabled: true,
        keep_days: 90,
        keep_texts_days: 30,
        max_texts_mb: 256,
    };
    history.prune(&config, true).unwrap();
    let free: i64 = history
        .conn
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    assert_eq!(free, 0);
}

/// "Per rule, last 7 days" and "this session" read their rows through an index, never
/// the whole table (SQLite's own plan says so).
#[test]
fn a_rule_window_and_a_session_are_read_through_an_index() {
    let (_tmp, history) = history(&[]);
    let plan = |filter: Filter| -> String {
        let (sql, values) = history.query(&filter, Some(None)).unwrap();
        let mut stmt = history
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap();
        let steps: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(values.iter()), |r| r.get(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        steps.join("\n")
    };
    let rule_week = plan(Filter {
        rule: Some("tests".into()),
        since: Some(Since::Ago(7.0 * 86_400.0)),
        ..Filter::default()
    });
    assert!(
        rule_week.contains("SEARCH v USING INDEX verdicts_rule_at"),
        "{rule_week}"
    );
    let session = plan(Filter {
        session: Some("3f2a".into()),
        ..Filter::default()
    });
    assert!(
        session.contains("SEARCH v USING INDEX verdicts_session_at"),
        "{session}"
    );
    for p in [&rule_week, &session] {
        assert!(!p.contains("SCAN v"), "{p}");
    }
}
