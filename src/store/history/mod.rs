//! The verdict history's database, `<state>/history/history.sqlite3` (docs/history.md):
//! an SQLite file a user may open with `sqlite3` themselves. Writers never touch it:
//! they append to the spool (`spool`), which is imported here whenever the database is
//! opened. Indexed by time, rule and session, so "per rule, last 7 days" and "this
//! session" read only their rows. Pruned at most once an hour: records past
//! `history.keep_days`, the judged texts past `keep_texts_days` or `max_texts_mb`.

pub mod spool;

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::core::config::HistoryConfig;
use crate::core::history::cases::{Label, Texts};
use crate::core::history::listing::Row;
use crate::core::history::record::harness_and_session;
use crate::core::history::since::Since;
use crate::core::history::{Decision, Record};
use crate::store::state_dir::{self, StateDir, now_unix};

/// The database's name in `history/`.
pub const DB_NAME: &str = "history.sqlite3";
/// How long an opener waits for another process's write to the database.
const BUSY_MS: u64 = 5_000;
/// Pruning runs at most this often (seconds).
const PRUNE_EVERY: f64 = 3_600.0;
const SCHEMA_VERSION: i64 = 1;

/// The history cannot be opened, imported or read; the message names the file.
#[derive(Debug, thiserror::Error)]
#[error("history {}: {cause}", path.display())]
pub struct HistoryError {
    pub path: PathBuf,
    pub cause: String,
}

/// Which rows a listing or the figures take.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub since: Option<Since>,
    /// A session id, or its first characters (as the table shows them).
    pub session: Option<String>,
    pub rule: Option<String>,
    pub outcome: Option<String>,
    pub harness: Option<String>,
    /// Only verdicts marked right or wrong.
    pub marked: bool,
    /// The newest this many (the rest are older).
    pub limit: Option<usize>,
}

/// How `stats` groups its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Day,
    Week,
    Session,
}

/// What an import did.
#[derive(Debug, Default, PartialEq)]
pub struct Imported {
    pub records: usize,
    pub bad_lines: usize,
}

/// The open database.
pub struct History {
    conn: Connection,
    path: PathBuf,
    dir: PathBuf,
}

impl History {
    /// Opens (creating) the state folder's history, with `fsync` as the config says
    /// (off: a power cut may lose the last imports, never the database).
    pub fn open(state: &StateDir, fsync: bool) -> Result<History, HistoryError> {
        let dir = state.history();
        let path = dir.join(DB_NAME);
        let fail = |cause: String| HistoryError {
            path: path.clone(),
            cause,
        };
        state_dir::private_dir(&dir).map_err(|e| fail(e.to_string()))?;
        create_private(&path).map_err(|e| fail(e.to_string()))?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(&path, flags).map_err(|e| fail(db_problem(&e)))?;
        let history = History {
            conn,
            path: path.clone(),
            dir,
        };
        history.setup(fsync).map_err(|e| fail(db_problem(&e)))?;
        Ok(history)
    }

    fn fail(&self, e: rusqlite::Error) -> HistoryError {
        fail_at(&self.path, e)
    }

    fn setup(&self, fsync: bool) -> rusqlite::Result<()> {
        self.conn
            .busy_timeout(std::time::Duration::from_millis(BUSY_MS))?;
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version == 0 {
            // Before any table: deleted rows can then be given back to the file system.
            self.conn
                .execute_batch("PRAGMA auto_vacuum = INCREMENTAL;")?;
        }
        self.conn
            .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        self.conn.execute_batch(if fsync {
            "PRAGMA synchronous = NORMAL;"
        } else {
            "PRAGMA synchronous = OFF;"
        })?;
        if version < SCHEMA_VERSION {
            self.conn.execute_batch(SCHEMA)?;
        }
        Ok(())
    }

    /// Imports the spool's new records; a closed spool file read to its end is removed.
    /// Nothing is written when nothing is new.
    pub fn import(&mut self) -> Result<Imported, HistoryError> {
        let files = spool::files(&self.dir).map_err(|e| HistoryError {
            path: self.dir.clone(),
            cause: e.to_string(),
        })?;
        let mut imported = Imported::default();
        let fail = |e| fail_at(&self.path, e);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail)?;
        // Offsets of files gone (removed by another importer) must not outlive them.
        let known: Vec<String> = tx
            .prepare("SELECT name FROM spool")
            .and_then(|mut stmt| stmt.query_map([], |r| r.get(0))?.collect())
            .map_err(fail)?;
        for name in known
            .iter()
            .filter(|n| !files.iter().any(|f| &f.name == *n))
        {
            tx.execute("DELETE FROM spool WHERE name = ?1", [name])
                .map_err(fail)?;
        }
        let mut done = Vec::new();
        for file in &files {
            let from: u64 = tx
                .query_row(
                    "SELECT offset FROM spool WHERE name = ?1",
                    [&file.name],
                    |r| r.get(0),
                )
                .optional()
                .map_err(fail)?
                .unwrap_or(0);
            let read = match spool::read_from(&file.path, from) {
                Ok(read) => read,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    tracing::warn!(file = %file.path.display(), "history spool file not imported: {e}");
                    continue;
                }
            };
            for record in &read.records {
                insert(&tx, record).map_err(fail)?;
            }
            imported.records += read.records.len();
            imported.bad_lines += read.bad_lines;
            if read.to != from {
                tx.execute(
                    "INSERT INTO spool(name, offset) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET offset = ?2",
                    params![file.name, read.to],
                )
                .map_err(fail)?;
            }
            // Its hour over and read to its end: nothing more comes (a line left
            // unended there was cut short by a crash).
            if file.closed && read.at_end {
                done.push(file.clone());
            }
        }
        tx.commit().map_err(fail)?;
        for file in done {
            if std::fs::remove_file(&file.path).is_ok() {
                // Also dropped by the next import if this fails.
                let _ = self
                    .conn
                    .execute("DELETE FROM spool WHERE name = ?1", [&file.name]);
            }
        }
        if imported.bad_lines > 0 {
            tracing::warn!(
                folder = %self.dir.display(),
                "{} history spool lines were not records (cut short by a crash or a full disk); skipped",
                imported.bad_lines
            );
        }
        Ok(imported)
    }

    /// Drops what `config` no longer keeps, at most once an hour (`force`: now).
    pub fn prune(&mut self, config: &HistoryConfig, force: bool) -> Result<(), HistoryError> {
        let now = now_unix();
        let last: f64 = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'pruned_at'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.fail(e))?
            .unwrap_or(0.0);
        if !force && now - last < PRUNE_EVERY && last <= now {
            return Ok(());
        }
        let records_cut = now - f64::from(config.keep_days) * 86_400.0;
        let texts_cut = now - f64::from(config.keep_texts_days) * 86_400.0;
        let max_text_bytes = config.max_texts_mb.saturating_mul(1 << 20);
        prune(&self.conn, records_cut, texts_cut, max_text_bytes, now).map_err(|e| self.fail(e))
    }

    /// The verdicts `filter` takes, oldest first.
    pub fn rows(&self, filter: &Filter) -> Result<Vec<Row>, HistoryError> {
        let mut rows = self.select(filter, None)?;
        rows.reverse();
        Ok(rows.into_iter().map(|(_, row)| row).collect())
    }

    /// The verdicts `filter` takes, each with its group for `by`, oldest first.
    pub fn grouped_rows(
        &self,
        filter: &Filter,
        by: Option<By>,
    ) -> Result<Vec<(String, Row)>, HistoryError> {
        let mut rows = self.select(filter, Some(by))?;
        rows.reverse();
        Ok(rows)
    }

    /// The verdict of record `record`.
    pub fn row(&self, record: i64) -> Result<Option<Row>, HistoryError> {
        let sql = format!("{SELECT_ROWS} WHERE v.record = ?1");
        self.conn
            .query_row(&sql, [record], |r| read_row_at(r, 0))
            .optional()
            .map_err(|e| self.fail(e))
    }

    /// The texts the hook's job of `row` judged, while they are kept.
    pub fn texts(&self, row: &Row) -> Result<Option<Texts>, HistoryError> {
        self.conn
            .query_row(
                "SELECT reply, prompt, cwd FROM queued WHERE transcript = ?1 AND job_id = ?2 \
                 AND reply IS NOT NULL ORDER BY at DESC LIMIT 1",
                [&row.transcript, &row.job_id],
                |r| {
                    Ok(Texts {
                        reply: r.get(0)?,
                        prompt: r.get(1)?,
                        cwd: r.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.fail(e))
    }

    /// Labels record `record`.
    pub fn mark(&self, record: i64, label: Label) -> Result<(), HistoryError> {
        self.conn
            .execute(
                "INSERT INTO marks(record, label, at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT(record) DO UPDATE SET label = ?2, at = ?3",
                params![record, label.name(), now_unix()],
            )
            .map(|_| ())
            .map_err(|e| self.fail(e))
    }

    /// Hits per rule since `since` (Unix seconds), most first.
    pub fn hits_since(&self, since: f64) -> Result<Vec<(String, u64)>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT rule, COUNT(*) FROM verdicts \
                 WHERE at >= ?1 AND outcome = 'hit' GROUP BY rule ORDER BY COUNT(*) DESC, rule",
            )
            .map_err(|e| self.fail(e))?;
        let rows = stmt
            .query_map([since], |r| {
                Ok((r.get::<_, Option<String>>(0)?, r.get::<_, i64>(1)?))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.fail(e))?;
        Ok(rows
            .into_iter()
            .map(|(rule, n)| {
                let rule = rule.unwrap_or_else(|| crate::core::history::stats::NO_RULE.into());
                (rule, n.max(0) as u64)
            })
            .collect())
    }

    /// Unix seconds of `since`; a date is local midnight (`None`: not a real date).
    fn since_unix(&self, since: &Since) -> rusqlite::Result<Option<f64>> {
        match since {
            Since::Ago(seconds) => Ok(Some(now_unix() - seconds)),
            Since::Date(date) => self
                .conn
                .query_row(
                    "SELECT CAST(strftime('%s', ?1, 'utc') AS REAL) WHERE date(?1) = ?1",
                    [date],
                    |r| r.get(0),
                )
                .optional()
                .map(Option::flatten),
        }
    }

    /// The rows `filter` takes, newest first, each with its group for `by`.
    fn select(
        &self,
        filter: &Filter,
        by: Option<Option<By>>,
    ) -> Result<Vec<(String, Row)>, HistoryError> {
        let (sql, values) = self.query(filter, by)?;
        let read = || -> rusqlite::Result<Vec<(String, Row)>> {
            let mut stmt = self.conn.prepare(&sql)?;
            let rows = stmt.query_map(rusqlite::params_from_iter(values.iter()), |r| {
                let group: String = r.get(0)?;
                read_row_at(r, 1).map(|row| (group, row))
            })?;
            rows.collect()
        };
        read().map_err(|e| self.fail(e))
    }

    /// The query of [`History::select`] and its values. The conditions are only those
    /// the filter sets, so SQLite can use the indexes (time, rule, session) for them.
    fn query(
        &self,
        filter: &Filter,
        by: Option<Option<By>>,
    ) -> Result<(String, Vec<rusqlite::types::Value>), HistoryError> {
        use rusqlite::types::Value as Sql;
        let mut conditions: Vec<&str> = Vec::new();
        let mut values: Vec<Sql> = Vec::new();
        if let Some(since) = &filter.since {
            let at = self.since_unix(since).map_err(|e| self.fail(e))?;
            let Some(at) = at else {
                return Err(HistoryError {
                    path: self.path.clone(),
                    cause: format!(
                        "--since {since:?} is not a date of the calendar; give one that is"
                    ),
                });
            };
            conditions.push("v.at >= ?");
            values.push(Sql::Real(at));
        }
        let text = |t: &str| Sql::Text(t.to_string());
        if let Some(session) = &filter.session {
            conditions.push("v.session GLOB ?");
            values.push(Sql::Text(session_pattern(session)));
        }
        for (set, condition) in [
            (&filter.rule, "v.rule = ?"),
            (&filter.outcome, "v.outcome = ?"),
            (&filter.harness, "v.harness = ?"),
        ] {
            if let Some(value) = set {
                conditions.push(condition);
                values.push(text(value));
            }
        }
        if filter.marked {
            conditions.push("m.label IS NOT NULL");
        }
        let group = match by {
            Some(Some(By::Day)) => "date(v.at, 'unixepoch', 'localtime')",
            Some(Some(By::Week)) => {
                "'week of ' || date(v.at, 'unixepoch', 'localtime', '-6 days', 'weekday 1')"
            }
            Some(Some(By::Session)) => "v.transcript",
            _ => "''",
        };
        let mut sql = SELECT_ROWS.replacen("SELECT ", &format!("SELECT {group}, "), 1);
        if !conditions.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conditions.join(" AND "));
        }
        sql.push_str(" ORDER BY v.at DESC, v.record DESC LIMIT ?");
        values.push(Sql::Integer(filter.limit.map_or(-1, |n| n as i64)));
        Ok((sql, values))
    }
}

fn fail_at(path: &Path, e: rusqlite::Error) -> HistoryError {
    HistoryError {
        path: path.to_path_buf(),
        cause: db_problem(&e),
    }
}

/// SQLite's words, and what to do about a file that is not (or no longer) a database.
fn db_problem(e: &rusqlite::Error) -> String {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt) => format!(
            "{e}; move the file aside (the judge starts a new history) or repair it with sqlite3's .recover"
        ),
        Some(rusqlite::ErrorCode::DiskFull) => {
            format!("{e}; free some disk space (the spool keeps the records meanwhile)")
        }
        _ => e.to_string(),
    }
}

/// A session filter as a GLOB: the id or its first characters.
fn session_pattern(session: &str) -> String {
    if session.contains(['*', '?', '[']) {
        session.to_string()
    } else {
        format!("{session}*")
    }
}

/// Creates the database file 0600 (SQLite would make it by the umask) without
/// following a link; an existing file is left as it is.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(state_dir::NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map(drop)
}

const SCHEMA: &str = "
BEGIN;
CREATE TABLE IF NOT EXISTS verdicts (
    record INTEGER PRIMARY KEY AUTOINCREMENT,
    uid TEXT NOT NULL UNIQUE,
    at REAL NOT NULL,
    by TEXT NOT NULL,
    job_id TEXT NOT NULL,
    transcript TEXT NOT NULL,
    harness TEXT,
    session TEXT NOT NULL,
    rule TEXT,
    mode TEXT,
    outcome TEXT NOT NULL,
    reason TEXT NOT NULL,
    runner TEXT,
    judge_ms INTEGER NOT NULL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cost_usd REAL,
    answer TEXT
);
CREATE INDEX IF NOT EXISTS verdicts_at ON verdicts(at);
CREATE INDEX IF NOT EXISTS verdicts_rule_at ON verdicts(rule, at);
CREATE INDEX IF NOT EXISTS verdicts_session_at ON verdicts(session, at);
CREATE INDEX IF NOT EXISTS verdicts_job ON verdicts(transcript, job_id);
CREATE TABLE IF NOT EXISTS queued (
    uid TEXT PRIMARY KEY,
    at REAL NOT NULL,
    job_id TEXT NOT NULL,
    transcript TEXT NOT NULL,
    rule TEXT NOT NULL,
    action TEXT NOT NULL,
    cwd TEXT,
    stop_ms INTEGER NOT NULL,
    reply TEXT,
    prompt TEXT
);
CREATE INDEX IF NOT EXISTS queued_job ON queued(transcript, job_id);
CREATE INDEX IF NOT EXISTS queued_at ON queued(at);
CREATE TABLE IF NOT EXISTS decisions (
    uid TEXT PRIMARY KEY,
    at REAL NOT NULL,
    job_id TEXT NOT NULL,
    transcript TEXT NOT NULL,
    rule TEXT,
    decision TEXT NOT NULL,
    told TEXT
);
CREATE INDEX IF NOT EXISTS decisions_job ON decisions(transcript, job_id);
CREATE INDEX IF NOT EXISTS decisions_at ON decisions(at);
CREATE TABLE IF NOT EXISTS marks (
    record INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS spool (name TEXT PRIMARY KEY, offset INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value);
PRAGMA user_version = 1;
COMMIT;
";

/// A verdict with what the hooks did with it: the last queued row (its texts and
/// stop), the last decision, the mark.
const SELECT_ROWS: &str = "SELECT v.record, v.at, strftime('%Y-%m-%d %H:%M:%S', v.at, 'unixepoch', 'localtime'), \
    v.by, v.job_id, v.transcript, v.harness, v.session, v.rule, v.mode, v.outcome, v.reason, v.runner, \
    v.judge_ms, v.input_tokens, v.output_tokens, v.cost_usd, v.answer, \
    q.action, q.stop_ms, q.reply IS NOT NULL, d.decision, d.told, m.label \
    FROM verdicts v \
    LEFT JOIN queued q ON q.rowid = (SELECT rowid FROM queued WHERE transcript = v.transcript AND job_id = v.job_id ORDER BY at DESC LIMIT 1) \
    LEFT JOIN decisions d ON d.rowid = (SELECT rowid FROM decisions WHERE transcript = v.transcript AND job_id = v.job_id ORDER BY at DESC, rowid DESC LIMIT 1) \
    LEFT JOIN marks m ON m.record = v.record";

fn read_row_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Row> {
    let count = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(at + i)?.map(|n| n.max(0) as u64))
    };
    let decision: Option<String> = r.get(at + 21)?;
    Ok(Row {
        record: r.get(at)?,
        at: r.get(at + 1)?,
        time: r.get::<_, Option<String>>(at + 2)?.unwrap_or_default(),
        by: r.get(at + 3)?,
        job_id: r.get(at + 4)?,
        transcript: r.get(at + 5)?,
        harness: r.get(at + 6)?,
        session: r.get(at + 7)?,
        rule: r.get(at + 8)?,
        mode: r.get(at + 9)?,
        outcome: r.get(at + 10)?,
        reason: r.get(at + 11)?,
        runner: r.get(at + 12)?,
        judge_ms: count(13)?.unwrap_or(0),
        input_tokens: count(14)?,
        output_tokens: count(15)?,
        cost_usd: r.get(at + 16)?,
        answer: r.get(at + 17)?,
        rule_action: r.get(at + 18)?,
        stop_ms: count(19)?,
        has_texts: r.get::<_, Option<bool>>(at + 20)?.unwrap_or(false),
        decision: decision.as_deref().and_then(Decision::named),
        told: r.get(at + 22)?,
        mark: r.get(at + 23)?,
    })
}

fn insert(conn: &Connection, record: &Record) -> rusqlite::Result<()> {
    let n = |v: Option<u64>| v.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    match record {
        Record::Verdict(v) => {
            let (harness, session) = harness_and_session(&v.transcript);
            let by = serde_json::to_value(v.by)
                .ok()
                .and_then(|b| b.as_str().map(String::from));
            conn.execute(
                "INSERT OR IGNORE INTO verdicts(uid, at, by, job_id, transcript, harness, session, rule, mode, \
                 outcome, reason, runner, judge_ms, input_tokens, output_tokens, cost_usd, answer) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                params![
                    v.uid, v.at, by.unwrap_or_default(), v.job_id, v.transcript, harness, session, v.rule, v.mode,
                    v.outcome, v.reason, v.runner, n(Some(v.judge_ms)), n(v.input_tokens), n(v.output_tokens),
                    v.cost_usd, v.answer
                ],
            )?;
        }
        Record::Queued(q) => {
            conn.execute(
                "INSERT OR IGNORE INTO queued(uid, at, job_id, transcript, rule, action, cwd, stop_ms, reply, prompt) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![q.uid, q.at, q.job_id, q.transcript, q.rule, q.action, q.cwd, n(Some(q.stop_ms)), q.reply, q.prompt],
            )?;
        }
        Record::Decision(d) => {
            conn.execute(
                "INSERT OR IGNORE INTO decisions(uid, at, job_id, transcript, rule, decision, told) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![d.uid, d.at, d.job_id, d.transcript, d.rule, d.decision.name(), d.told],
            )?;
        }
    }
    Ok(())
}

/// Drops records before `records_cut` and texts before `texts_cut` (a marked
/// verdict's texts stay while it does), then the oldest texts past `max_text_bytes`.
fn prune(
    conn: &Connection,
    records_cut: f64,
    texts_cut: f64,
    max_text_bytes: u64,
    now: f64,
) -> rusqlite::Result<()> {
    const UNMARKED: &str = "NOT EXISTS (SELECT 1 FROM verdicts v JOIN marks m ON m.record = v.record \
        WHERE v.transcript = queued.transcript AND v.job_id = queued.job_id)";
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let pruned = (|| {
        conn.execute("DELETE FROM verdicts WHERE at < ?1", [records_cut])?;
        conn.execute("DELETE FROM queued WHERE at < ?1", [records_cut])?;
        conn.execute("DELETE FROM decisions WHERE at < ?1", [records_cut])?;
        conn.execute(
            "DELETE FROM marks WHERE record NOT IN (SELECT record FROM verdicts)",
            [],
        )?;
        conn.execute(
            &format!("UPDATE queued SET reply = NULL, prompt = NULL WHERE at < ?1 AND reply IS NOT NULL AND {UNMARKED}"),
            [texts_cut],
        )?;
        let total: i64 = conn.query_row(
            "SELECT COALESCE(SUM(length(CAST(reply AS BLOB)) + COALESCE(length(CAST(prompt AS BLOB)), 0)), 0) \
             FROM queued WHERE reply IS NOT NULL",
            [],
            |r| r.get(0),
        )?;
        let mut over = total.max(0) as u64;
        if over > max_text_bytes {
            // The oldest texts go first until what is left fits.
            let mut stmt = conn.prepare(&format!(
                "SELECT rowid, length(CAST(reply AS BLOB)) + COALESCE(length(CAST(prompt AS BLOB)), 0) \
                 FROM queued WHERE reply IS NOT NULL AND {UNMARKED} ORDER BY at"
            ))?;
            let sizes: Vec<(i64, i64)> = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            for (rowid, size) in sizes {
                if over <= max_text_bytes {
                    break;
                }
                conn.execute(
                    "UPDATE queued SET reply = NULL, prompt = NULL WHERE rowid = ?1",
                    [rowid],
                )?;
                over = over.saturating_sub(size.max(0) as u64);
            }
        }
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('pruned_at', ?1) ON CONFLICT(key) DO UPDATE SET value = ?1",
            [now],
        )?;
        Ok(())
    })();
    match pruned {
        Ok(()) => {
            conn.execute_batch("COMMIT")?;
            // Gives freed pages back to the file system (auto_vacuum = INCREMENTAL): the
            // pragma frees one page a step, so it is stepped to its end.
            let mut vacuum = conn.prepare("PRAGMA incremental_vacuum")?;
            let mut rows = vacuum.query([])?;
            while rows.next()?.is_some() {}
            Ok(())
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Appends `records` to the spool, when the history is on; a failure (a full disk) is
/// logged and never fails the caller.
pub fn record(state: &StateDir, enabled: bool, records: &[Record]) {
    if !enabled {
        return;
    }
    if let Err(e) = spool::append(state, records) {
        tracing::warn!("history record not kept: {e}");
    }
}

/// Opens the history and imports the spool (and prunes, when due): what the commands
/// that read it do first.
pub fn open_current(
    state: &StateDir,
    config: &crate::core::config::Config,
) -> Result<History, HistoryError> {
    let mut history = History::open(state, config.fsync)?;
    // What is there is shown even when the newest records cannot be taken in now.
    if let Err(e) = history.import() {
        tracing::warn!("{e}; showing what was imported before");
    }
    if let Err(e) = history.prune(&config.history, false) {
        tracing::warn!("{e}");
    }
    Ok(history)
}

#[cfg(test)]
mod tests;
