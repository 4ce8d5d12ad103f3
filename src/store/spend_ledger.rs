//! The spend ledger, `<state>/spend.jsonl`: one JSON line per runner run, appended by
//! the daemon and `run` alike, read by the cap, `status` and `doctor`. Appends hold
//! `spend.lock` shared and compaction (dropping lines older than a day) holds it
//! exclusive, so no append lands in a file being replaced. Not fsynced: a power loss
//! may forget the last runs, which only loosens the cap by that much.

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::core::spend::{Budget, DAY, SpendEntry, over_budget};
use crate::store::file_lock::{lock_exclusive, lock_shared, open_lock_file};
use crate::store::state_dir::{NOFOLLOW, StateDir, now_unix, open_nofollow, publish};

/// Appends between two looks at whether the ledger needs compacting.
const COMPACT_EVERY: u64 = 512;
/// The budget line is logged at most this often (SPEC: not per job).
const BUDGET_LOG_SECONDS: f64 = 60.0;

/// The ledger of a state folder, with the entries of the last day read so far.
#[derive(Debug)]
pub struct SpendLedger {
    path: PathBuf,
    lock: PathBuf,
    logged: PathBuf,
    window: Mutex<Window>,
    appends: AtomicU64,
}

/// What this process has read of the ledger file.
#[derive(Debug, Default)]
struct Window {
    inode: u64,
    offset: u64,
    entries: VecDeque<SpendEntry>,
}

impl SpendLedger {
    /// The ledger of `state`; drops lines older than a day when its first line is.
    pub fn open(state: &StateDir) -> Self {
        let ledger = SpendLedger::unopened(state);
        ledger.compact_if_stale();
        ledger
    }

    fn unopened(state: &StateDir) -> Self {
        SpendLedger {
            path: state.spend(),
            lock: state.spend_lock(),
            logged: state.spend_logged(),
            window: Mutex::default(),
            appends: AtomicU64::new(0),
        }
    }

    /// Appends one run; a failure is logged, never fatal.
    pub fn record(&self, entry: &SpendEntry) {
        let Ok(mut line) = serde_json::to_vec(entry) else {
            return;
        };
        line.push(b'\n');
        if let Err(e) = self.append(&line) {
            tracing::warn!(path = %self.path.display(), "cannot append to the spend ledger: {e}");
        }
        if self.appends.fetch_add(1, Ordering::Relaxed) % COMPACT_EVERY == COMPACT_EVERY - 1 {
            self.compact_if_stale();
        }
    }

    fn append(&self, line: &[u8]) -> std::io::Result<()> {
        let lock = open_lock_file(&self.lock)?;
        lock_shared(&lock)?;
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(NOFOLLOW)
            .open(&self.path)?;
        // One write of a whole line: O_APPEND keeps lines of several writers whole.
        file.write_all(line)
    }

    /// The entries of the last day, this process's and every other writer's.
    pub fn recent(&self) -> Vec<SpendEntry> {
        self.window().entries.iter().cloned().collect()
    }

    /// The `budget: ...` reason when `budget` is spent; reads nothing when it is unlimited.
    pub fn over_budget(&self, budget: &Budget) -> Option<String> {
        if budget.is_unlimited() {
            return None;
        }
        over_budget(&self.window().entries, budget, now_unix())
    }

    /// The window, brought up to the file's end and cut to the last day.
    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = read_new_lines(&self.path, &mut window) {
            tracing::warn!(path = %self.path.display(), "cannot read the spend ledger: {e}");
        }
        let since = now_unix() - DAY;
        while window.entries.front().is_some_and(|e| e.at < since) {
            window.entries.pop_front();
        }
        window
    }

    /// True at most once a minute across every process of the state folder: the
    /// budget line's turn to be logged. Kept as `spend.logged`'s mtime.
    pub fn budget_log_due(&self) -> bool {
        // Held across the look and the touch, so two workers seeing the cap at the
        // same moment log it once.
        let lock = open_lock_file(&self.lock);
        if let Ok(lock) = &lock {
            let _ = lock_exclusive(lock);
        }
        let last = std::fs::symlink_metadata(&self.logged)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok());
        if last.is_some_and(|age| age.as_secs_f64() < BUDGET_LOG_SECONDS) {
            return false;
        }
        // A failed write only means the next job logs again.
        let _ = publish(&self.logged, b"", false);
        true
    }

    /// Rewrites the file without lines older than a day when its first (oldest) line
    /// is one: a look at one line, not a read of the file, for every `run` that opens it.
    fn compact_if_stale(&self) {
        if !first_line_is_stale(&self.path) {
            return;
        }
        if let Err(e) = self.compact_locked() {
            tracing::warn!(path = %self.path.display(), "cannot compact the spend ledger: {e}");
        }
    }

    fn compact_locked(&self) -> std::io::Result<()> {
        let lock = open_lock_file(&self.lock)?;
        lock_exclusive(&lock)?;
        let text = match crate::store::state_dir::read_nofollow(&self.path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let since = now_unix() - DAY;
        let keep =
            |line: &str| serde_json::from_str::<SpendEntry>(line).is_ok_and(|e| e.at >= since);
        let lines: Vec<&str> = text.lines().collect();
        let kept: Vec<&str> = lines.iter().copied().filter(|l| keep(l)).collect();
        if kept.len() == lines.len() {
            return Ok(());
        }
        let mut out = kept.join("\n");
        if !out.is_empty() {
            out.push('\n');
        }
        publish(&self.path, out.as_bytes(), false)
    }
}

/// The runs of the last day, read without compacting (for `status` and `doctor`).
pub fn recent(state: &StateDir) -> Vec<SpendEntry> {
    SpendLedger::unopened(state).recent()
}

/// True when the ledger's first line is a run older than a day, or not a run at all.
fn first_line_is_stale(path: &Path) -> bool {
    let Ok(file) = open_nofollow(path) else {
        return false;
    };
    let mut first = Vec::new();
    // A line is a few hundred bytes; a longer first line is not a run either.
    if file.take(4096).read_to_end(&mut first).is_err() {
        return false;
    }
    let line = first.split(|b| *b == b'\n').next().unwrap_or_default();
    !line.is_empty()
        && serde_json::from_slice::<SpendEntry>(line)
            .ok()
            .is_none_or(|e| e.at < now_unix() - DAY)
}

/// Reads what was appended since the last look; starts over when compaction replaced
/// the file. A torn last line waits for its end; a bad line is skipped and logged.
fn read_new_lines(path: &Path, window: &mut Window) -> std::io::Result<()> {
    let mut file = match open_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            *window = Window::default();
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.ino() != window.inode || meta.len() < window.offset {
        *window = Window {
            inode: meta.ino(),
            ..Window::default()
        };
    }
    file.seek(SeekFrom::Start(window.offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut bad = 0usize;
    for line in bytes[..whole]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
    {
        match serde_json::from_slice::<SpendEntry>(line) {
            Ok(entry) => window.entries.push_back(entry),
            Err(_) => bad += 1,
        }
    }
    if bad > 0 {
        tracing::warn!(path = %path.display(), lines = bad, "spend ledger lines that are not runs were skipped");
    }
    window.offset += whole as u64;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(at: f64, runner: &str) -> SpendEntry {
        SpendEntry {
            at,
            runner: runner.into(),
            answered: true,
            usage: None,
        }
    }

    #[test]
    fn runs_recorded_by_two_writers_are_read_by_both_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let a = SpendLedger::open(&state);
        let b = SpendLedger::open(&state);
        let now = now_unix();
        a.record(&entry(now, "claude"));
        b.record(&entry(now, "codex"));
        assert_eq!(a.recent().len(), 2);
        a.record(&entry(now, "claude"));
        assert_eq!(b.recent().len(), 3);
        assert_eq!(SpendLedger::open(&state).recent().len(), 3);
    }

    #[test]
    fn opening_drops_runs_older_than_a_day_and_readers_start_over() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let reader = SpendLedger::open(&state);
        let now = now_unix();
        reader.record(&entry(now - DAY - 10.0, "old"));
        reader.record(&entry(now, "new"));
        assert_eq!(reader.recent().len(), 1, "the window drops the old run");
        let _compacting = SpendLedger::open(&state);
        let text = std::fs::read_to_string(state.spend()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        reader.record(&entry(now, "newer"));
        let names: Vec<String> = reader.recent().into_iter().map(|e| e.runner).collect();
        assert_eq!(names, ["new", "newer"]);
    }

    #[test]
    fn opening_a_ledger_with_a_fresh_first_line_rewrites_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        SpendLedger::open(&state).record(&entry(now_unix(), "x"));
        let inode = std::fs::metadata(state.spend()).unwrap().ino();
        let _again = SpendLedger::open(&state);
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

    #[test]
    fn the_budget_line_is_due_once_a_minute() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let ledger = SpendLedger::open(&state);
        assert!(ledger.budget_log_due());
        assert!(!ledger.budget_log_due());
        assert!(
            !SpendLedger::open(&state).budget_log_due(),
            "across writers"
        );
    }

    #[test]
    fn an_unlimited_budget_reads_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        std::fs::create_dir(state.spend()).unwrap();
        let ledger = SpendLedger::open(&state);
        assert_eq!(ledger.over_budget(&Budget::default()), None);
        let tight = Budget {
            max_runs_per_hour: Some(0),
            ..Budget::default()
        };
        assert!(ledger.over_budget(&tight).is_some());
    }
}
