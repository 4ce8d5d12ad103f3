//! The spend ledger, `<state>/spend.jsonl`: one JSON line per runner run, appended by
//! the daemon and `run` alike, read by the cap, `status` and `doctor`. Appends hold
//! `spend.lock` shared and compaction (dropping lines older than a day) holds it
//! exclusive, so no append lands in a file being replaced. With `fsync` on and a cap
//! set, each append is made durable before the run's verdict can be (the cap never
//! forgets a run after a power cut); without a cap the ledger is only a record, and a
//! power cut may forget its last runs. A tail a crash cut short is ended with a
//! newline before the next append, so it never swallows the next run.
//!
//! Nothing a job waits for ever waits on `spend.lock` (any process of the user can
//! hold it): every lock is tried without waiting. A run that finds it taken is kept in
//! memory, counted by this process's cap at once, and appended when the lock is next
//! had (the next run's start or end); past [`MAX_PENDING`] runs, and when the ledger is
//! dropped at exit, they are appended without it: one `O_APPEND` write of whole lines,
//! which the kernel keeps whole among other appends to a regular file. The one risk of
//! that write is a compaction replacing the file at that moment, which would lose those
//! lines (a looser cap, never a torn file: compaction publishes by rename). Reading the
//! file takes no lock; an unreadable file leaves the cap to the runs read before and
//! this process's own (it fails open: a stuck ledger must not stop judging, and the cap
//! bounds spend, it guards nothing).
//!
//! A ledger keeps `spend.lock` and `spend.jsonl` open between appends (an append is
//! once per runner run): before each use it checks that the path still names the file
//! it holds (a compaction replaces `spend.jsonl`; a removed `spend.lock` is made
//! again) and opens the path again if not. So an append is a stat, the lock, a stat,
//! the write and the unlock, without two creating opens that lock the state folder.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::core::spend::{Budget, CapReached, DAY, SpendEntry, over_budget};
use crate::store::file_lock::{open_lock_file, try_lock_exclusive, try_lock_shared, unlock};
use crate::store::state_dir::{NOFOLLOW, StateDir, now_unix, open_nofollow, publish};

/// Appends between two looks at whether the ledger needs compacting.
const COMPACT_EVERY: u64 = 512;
/// The budget line is logged at most this often (docs/reference.md, "judge.log": not per job).
const BUDGET_LOG_EVERY: Duration = Duration::from_secs(60);
/// Runs kept in memory while `spend.lock` is taken; past it they are appended without
/// the lock (a lock held through this many runs is no compaction of ours).
pub const MAX_PENDING: usize = 256;

/// The ledger of a state folder, with the entries of the last day read so far.
#[derive(Debug)]
pub struct SpendLedger {
    path: PathBuf,
    lock: PathBuf,
    logged: PathBuf,
    book: Mutex<Book>,
    appends: AtomicU64,
    /// Appends and compactions are fsynced (`fsync` on and a cap set).
    durable: AtomicBool,
}

/// This process's view: what it read of the file, the runs it has not appended yet,
/// and the runs started and not ended.
#[derive(Debug, Default)]
struct Book {
    window: Window,
    pending: Vec<SpendEntry>,
    in_flight: u64,
    /// `spend.lock` was found taken and that was logged; cleared once it is had.
    lock_taken_logged: bool,
    /// Reading or appending failed and that was logged; cleared once it works.
    read_failed_logged: bool,
    append_failed_logged: bool,
    budget_logged_at: Option<Instant>,
    /// `spend.lock` and `spend.jsonl` as last opened, with their identity.
    lock_file: Option<Kept>,
    ledger_file: Option<Kept>,
}

/// A file kept open, and the (device, inode) it had when opened.
#[derive(Debug)]
struct Kept {
    file: File,
    id: (u64, u64),
    /// Opened and not yet written through.
    fresh: bool,
}

impl Kept {
    /// `kept` when `path` still names its file (a regular one), else `open(path)`
    /// (then `fresh`).
    fn reuse_or_open<'a>(
        kept: &'a mut Option<Kept>,
        path: &Path,
        open: impl FnOnce(&Path) -> std::io::Result<File>,
    ) -> std::io::Result<&'a mut Kept> {
        let on_disk = std::fs::symlink_metadata(path)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map(|m| (m.dev(), m.ino()));
        if kept.as_ref().is_none_or(|k| Some(k.id) != on_disk) {
            *kept = None;
            let file = open(path)?;
            let meta = file.metadata()?;
            if !meta.is_file() {
                return Err(std::io::Error::other("not a regular file"));
            }
            *kept = Some(Kept {
                id: (meta.dev(), meta.ino()),
                file,
                fresh: true,
            });
        }
        match kept {
            Some(k) => Ok(k),
            None => Err(std::io::Error::other("no file")),
        }
    }
}

/// What this process has read of the ledger file.
#[derive(Debug, Default)]
struct Window {
    inode: u64,
    offset: u64,
    entries: VecDeque<SpendEntry>,
}

/// A run counted toward `max_runs_per_hour` from before its runner starts until it is
/// recorded, or dropped unrecorded (a runner that started no process).
#[must_use]
pub struct Reservation<'a> {
    ledger: &'a SpendLedger,
    recorded: bool,
}

impl Reservation<'_> {
    /// Records the run this reservation was for; a failure is logged, never fatal.
    pub fn record(mut self, entry: SpendEntry) {
        self.recorded = true;
        {
            let mut book = self.ledger.book();
            book.in_flight = book.in_flight.saturating_sub(1);
            book.pending.push(entry);
            // A durable append fsyncs: off the async worker thread.
            if self.ledger.durable() {
                crate::support::runtime::blocking(|| self.ledger.flush(&mut book, false));
            } else {
                self.ledger.flush(&mut book, false);
            }
        }
        if self.ledger.appends.fetch_add(1, Ordering::Relaxed) % COMPACT_EVERY == COMPACT_EVERY - 1
        {
            self.ledger.compact_if_stale();
        }
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.recorded {
            let mut book = self.ledger.book();
            book.in_flight = book.in_flight.saturating_sub(1);
        }
    }
}

impl SpendLedger {
    /// The ledger of `state`; drops lines older than a day when its first line is.
    /// `durable`: fsync what it writes (`fsync` on and a cap set).
    pub fn open(state: &StateDir, durable: bool) -> Self {
        let ledger = SpendLedger::unopened(state);
        ledger.set_durable(durable);
        ledger.compact_if_stale();
        ledger
    }

    /// Whether what it writes from now on is fsynced (a reload may set a cap).
    pub fn set_durable(&self, durable: bool) {
        self.durable.store(durable, Ordering::Relaxed);
    }

    fn durable(&self) -> bool {
        self.durable.load(Ordering::Relaxed)
    }

    fn unopened(state: &StateDir) -> Self {
        SpendLedger {
            path: state.spend(),
            lock: state.spend_lock(),
            logged: state.spend_logged(),
            book: Mutex::default(),
            appends: AtomicU64::new(0),
            durable: AtomicBool::new(false),
        }
    }

    /// Reserves the next runner run under `budget`, or says why the cap stops it. The check and the reservation are one step, so this process
    /// never starts more runs than `max_runs_per_hour`; other processes' runs count
    /// once they end (they are in the file then).
    pub fn reserve(&self, budget: &Budget) -> Result<Reservation<'_>, CapReached> {
        let mut book = self.book();
        self.flush(&mut book, false);
        if !budget.is_unlimited() {
            self.catch_up(&mut book);
            let book = &*book;
            let entries = book.window.entries.iter().chain(&book.pending);
            if let Some(reason) = over_budget(entries, budget, now_unix(), book.in_flight) {
                return Err(reason);
            }
        }
        book.in_flight += 1;
        Ok(Reservation {
            ledger: self,
            recorded: false,
        })
    }

    /// The entries of the last day, this process's and every other writer's.
    pub fn recent(&self) -> Vec<SpendEntry> {
        let mut book = self.book();
        self.catch_up(&mut book);
        let book = &*book;
        book.window
            .entries
            .iter()
            .chain(&book.pending)
            .cloned()
            .collect()
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Brings the window up to the file's end and cuts it to the last day. A failure
    /// is logged once until a read works again; the window keeps what it had.
    fn catch_up(&self, book: &mut Book) {
        match read_new_lines(&self.path, &mut book.window) {
            Ok(()) => book.read_failed_logged = false,
            Err(e) if !book.read_failed_logged => {
                book.read_failed_logged = true;
                tracing::warn!(
                    path = %self.path.display(),
                    "cannot read the spend ledger ({e}): the cap counts the runs read before and this process's own until it can"
                );
            }
            Err(_) => {}
        }
        let since = now_unix() - DAY;
        while book.window.entries.front().is_some_and(|e| e.at < since) {
            book.window.entries.pop_front();
        }
    }

    /// Appends the runs kept in memory: under `spend.lock` shared when it can be had at
    /// once; without it when `unlocked_ok`, or when [`MAX_PENDING`] runs wait.
    fn flush(&self, book: &mut Book, unlocked_ok: bool) {
        if book.pending.is_empty() {
            return;
        }
        let mut lock_file = book.lock_file.take();
        let lock = Kept::reuse_or_open(&mut lock_file, &self.lock, open_lock_file).map(|k| &k.file);
        let held = match &lock {
            Ok(file) if try_lock_shared(file) => None,
            Ok(_) => Some("another process holds it".to_string()),
            Err(e) => Some(e.to_string()),
        };
        // Taken: released once this flush is done, whichever way it ends.
        let unlock_after = match &lock {
            Ok(file) if held.is_none() => Some(Unlock(file)),
            _ => None,
        };
        self.flush_held(book, held, unlocked_ok);
        drop(unlock_after);
        book.lock_file = lock_file;
    }

    /// `flush` once the lock was tried: `held` says why it could not be had.
    fn flush_held(&self, book: &mut Book, held: Option<String>, unlocked_ok: bool) {
        match held {
            None if book.lock_taken_logged => {
                book.lock_taken_logged = false;
                tracing::info!(
                    path = %self.lock.display(), runs = book.pending.len(),
                    "spend.lock can be had again: the runs kept in memory are appended"
                );
            }
            None => {}
            Some(why) => {
                if !book.lock_taken_logged {
                    book.lock_taken_logged = true;
                    tracing::warn!(
                        path = %self.lock.display(),
                        "spend.lock cannot be had at once ({why}): runs are kept in memory and counted by this process's cap, and appended once it is free (this line is not repeated per job)"
                    );
                }
                if !unlocked_ok && book.pending.len() < MAX_PENDING {
                    return;
                }
            }
        }
        match append(
            &mut book.ledger_file,
            &self.path,
            &book.pending,
            self.durable(),
        ) {
            Ok(()) => {
                book.pending.clear();
                book.append_failed_logged = false;
            }
            Err(e) => {
                if !book.append_failed_logged {
                    book.append_failed_logged = true;
                    tracing::warn!(path = %self.path.display(), "cannot append to the spend ledger: {e}");
                }
                // Bounded: the oldest runs kept in memory go first.
                let over = book.pending.len().saturating_sub(MAX_PENDING);
                book.pending.drain(..over);
            }
        }
    }

    /// True at most once a minute across every process of the state folder: the
    /// budget line's turn to be logged. Kept as `spend.logged`'s mtime; `spend.lock`
    /// (when it can be had at once) keeps two processes from both logging.
    pub fn budget_log_due(&self) -> bool {
        let mut book = self.book();
        if book
            .budget_logged_at
            .is_some_and(|at| at.elapsed() < BUDGET_LOG_EVERY)
        {
            return false;
        }
        let lock = open_lock_file(&self.lock);
        if let Ok(file) = &lock {
            let _ = try_lock_exclusive(file);
        }
        let last = std::fs::symlink_metadata(&self.logged)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok());
        if last.is_some_and(|age| age < BUDGET_LOG_EVERY) {
            return false;
        }
        // A failed write only means another process may log again.
        let _ = publish(&self.logged, b"", false);
        book.budget_logged_at = Some(Instant::now());
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

    /// Compacts under `spend.lock` exclusive, or not at all when it cannot be had at
    /// once (a later look does it).
    fn compact_locked(&self) -> std::io::Result<()> {
        let lock = open_lock_file(&self.lock)?;
        if !try_lock_exclusive(&lock) {
            tracing::debug!(path = %self.lock.display(), "spend.lock is taken: compaction left for later");
            return Ok(());
        }
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
        publish(&self.path, out.as_bytes(), self.durable())
    }
}

impl Drop for SpendLedger {
    /// At exit the runs still kept in memory are appended, with the lock if it can be
    /// had at once and without it otherwise: losing them would loosen the cap.
    fn drop(&mut self) {
        let mut book = std::mem::take(self.book.get_mut().unwrap_or_else(PoisonError::into_inner));
        self.flush(&mut book, true);
    }
}

/// Lets go of `spend.lock` when dropped.
struct Unlock<'a>(&'a File);

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        unlock(self.0);
    }
}

/// Appends `entries` as whole lines in one write to the ledger (kept open in `kept`
/// while `path` names it), a regular file: never a FIFO (opened without blocking) or
/// a symlink. `durable`: the write and, on a fresh open, the file's name are fsynced.
fn append(
    kept: &mut Option<Kept>,
    path: &Path,
    entries: &[SpendEntry],
    durable: bool,
) -> std::io::Result<()> {
    let mut lines = Vec::new();
    for entry in entries {
        serde_json::to_writer(&mut lines, entry).map_err(std::io::Error::other)?;
        lines.push(b'\n');
    }
    let open = |path: &Path| {
        // Readable too: the last byte says whether a crash cut the last line short.
        OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
    };
    let k = Kept::reuse_or_open(kept, path, open)?;
    if k.fresh && crate::store::state_dir::ends_cut_short(&k.file).unwrap_or(false) {
        lines.insert(0, b'\n');
        tracing::warn!(
            path = %path.display(),
            "spend ledger lines that are not runs: its last line was cut short by a crash; ended before this append, it is skipped when read"
        );
    }
    // One write of whole lines: O_APPEND keeps lines of several writers whole.
    (&k.file).write_all(&lines)?;
    // Written: a failed sync from here on must not append these runs again.
    if durable {
        let synced = k.file.sync_data().and_then(|()| match k.fresh {
            true => crate::store::state_dir::sync_dir(path.parent().unwrap_or(Path::new("."))),
            false => Ok(()),
        });
        if let Err(e) = synced {
            tracing::warn!(path = %path.display(), "spend ledger appended but not synced to disk: {e}");
            return Ok(());
        }
    }
    k.fresh = false;
    Ok(())
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
/// the file. A torn last line waits for its end; a bad line is skipped and logged, and
/// so is a run whose usage is out of bounds (it counts as a run, not its usage).
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
    let (mut bad, mut forged) = (0usize, 0usize);
    for line in bytes[..whole]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
    {
        match serde_json::from_slice::<SpendEntry>(line) {
            Ok(entry) => {
                forged += usize::from(entry.usage.is_some() && entry.counted_usage().is_none());
                window.entries.push_back(entry);
            }
            Err(_) => bad += 1,
        }
    }
    if bad > 0 {
        tracing::warn!(path = %path.display(), lines = bad, "spend ledger lines that are not runs were skipped");
    }
    if forged > 0 {
        tracing::warn!(path = %path.display(), lines = forged, "spend ledger runs with usage out of the per-run bounds count as runs, not their tokens or cost");
    }
    window.offset += whole as u64;
    Ok(())
}

#[cfg(test)]
#[path = "spend_ledger_tests.rs"]
mod tests;
