//! Runner health on disk: `<state>/health.json`, updated under `health.lock` by the
//! daemon, `run` and `ask` alike, with the rules of `core::health`.
//!
//! Nothing a job waits for ever waits on `health.lock` (any process of the user, a
//! runner too, can hold it). The lock is tried without waiting; an update that finds it
//! taken is kept in memory, used at once by this process's trying order, and written
//! when the lock is next had (the next attempt's record); past [`MAX_KEPT`] updates, and
//! when the store is dropped at exit, they are written without it. Kept rather than
//! skipped: a lost bench makes every later job (every `ask` and `run`, each a new
//! process) start the broken runner first and wait for its failure or timeout. Writing
//! without the lock risks only the lost update the lock guards against: health is
//! advice, and the file is replaced by rename, so no reader ever sees a torn file.
//! Reading takes no lock for the same reason.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::core::config::HealthConfig;
use crate::core::health::{HealthFile, RunnerHealth, Sighting, Sign, key, order, standing, update};
use crate::core::runner::table::Runner;
use crate::process::spawn::is_installed;
use crate::store::file_lock::{open_lock_file, try_lock_exclusive};
use crate::store::state_dir::{StateDir, now_unix};

/// Updates kept in memory while `health.lock` is taken; past it they are written
/// without the lock (a lock held through this many attempts is no update of a judge's).
pub const MAX_KEPT: usize = 256;
/// How long `status --reset-health` waits for `health.lock` before it gives up.
const RESET_WAIT: Duration = Duration::from_secs(2);

/// Health kept in the state folder.
#[derive(Debug, Clone)]
pub struct HealthStore {
    inner: Arc<Inner>,
    /// The time health is judged at, when the caller gives its own (`ask --now`).
    fixed_now: Option<f64>,
}

/// What every clone of a store shares: its files and the updates not written yet.
#[derive(Debug)]
struct Inner {
    path: PathBuf,
    lock: PathBuf,
    cfg: HealthConfig,
    book: Mutex<Book>,
    /// The file's content is fsynced before its rename (`fsync`).
    fsync: bool,
}

/// The updates this process has not written yet, oldest first.
#[derive(Debug, Default)]
struct Book {
    kept: Vec<Update>,
    /// `health.lock` was found taken and that was logged; cleared once it is had.
    lock_taken_logged: bool,
}

/// One attempt's sign, as recorded: replayed on the file when it is written.
#[derive(Debug, Clone)]
struct Update {
    key: String,
    runner: String,
    sign: Sign,
    reason: String,
    at: f64,
    /// Its bench or clearing was logged (when it was first kept).
    logged: bool,
}

impl HealthStore {
    /// The store of a state folder, or `None` when health is turned off.
    pub fn open(state: &StateDir, cfg: &HealthConfig, fsync: bool) -> Option<Self> {
        cfg.enabled.then(|| HealthStore {
            inner: Arc::new(Inner {
                path: state.health(),
                lock: state.health_lock(),
                cfg: cfg.clone(),
                book: Mutex::default(),
                fsync,
            }),
            fixed_now: None,
        })
    }

    /// The same store, judging benches at `now` (Unix seconds) instead of the clock:
    /// catstack's drop-in passes its caller's `time.time()`.
    pub fn at(self, now: f64) -> Self {
        HealthStore {
            fixed_now: Some(now),
            ..self
        }
    }

    fn now(&self) -> f64 {
        self.fixed_now.unwrap_or_else(now_unix)
    }

    /// The current health of every runner, with this process's updates not written
    /// yet (empty when unreadable; logged). Takes no lock.
    pub fn load(&self) -> HealthFile {
        let mut file = load(&self.inner.path, true);
        for u in &self.inner.book().kept {
            self.inner.apply(&mut file, u);
        }
        file
    }

    /// The table in trying order; a runner benched as not installed is looked up on
    /// `PATH` again (a few `stat`s, no process).
    pub fn order<'a>(&self, table: &'a [Runner]) -> Vec<&'a Runner> {
        order(table, &self.load(), self.now(), is_installed)
    }

    /// The table in trying order (`order`), each runner with whether it is benched.
    pub fn standing<'a>(&self, table: &'a [Runner]) -> Vec<(&'a Runner, bool)> {
        standing(table, &self.load(), self.now(), is_installed)
    }

    /// Records an attempt; logs benching and clearing. Never waits on `health.lock`.
    pub fn record(&self, runner: &Runner, sign: Sign, reason: &str) {
        if sign == Sign::Neutral {
            return;
        }
        let u = Update {
            key: key(runner),
            runner: runner.name.clone(),
            sign,
            reason: reason.to_string(),
            at: self.now(),
            logged: false,
        };
        let mut book = self.inner.book();
        if book.kept.is_empty() {
            // Most attempts (an answer from a healthy runner) change nothing: the file
            // is replaced by rename, so an unlocked read is a state some writer
            // committed, and a no-op on it needs neither the lock nor a blocking-thread
            // hand-off. An answer racing a bench being written counts as the earlier
            // of the two, an order the lock allowed too. Quiet: a corrupt file is
            // reported once, by the locked read that replaces it.
            let prev = load(&self.inner.path, false).remove(&u.key);
            if self.inner.next(prev.as_ref(), &u) == prev {
                return;
            }
        }
        book.kept.push(u);
        crate::support::runtime::blocking(|| self.inner.flush(&mut book, false));
    }
}

impl Inner {
    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A runner's health after `u` on `prev`.
    fn next(&self, prev: Option<&RunnerHealth>, u: &Update) -> Option<RunnerHealth> {
        let seen = Sighting {
            runner: &u.runner,
            sign: u.sign,
            reason: &u.reason,
            at: u.at,
        };
        update(prev, seen, &self.cfg)
    }

    /// Applies `u` to `file`; returns the runner's health before and after.
    fn apply(
        &self,
        file: &mut HealthFile,
        u: &Update,
    ) -> (Option<RunnerHealth>, Option<RunnerHealth>) {
        let prev = file.get(&u.key).cloned();
        let next = self.next(prev.as_ref(), u);
        match &next {
            Some(h) => file.insert(u.key.clone(), h.clone()),
            None => file.remove(&u.key),
        };
        (prev, next)
    }

    /// Applies the kept updates to the file and writes it: under `health.lock` when it
    /// can be had at once; without it when `unlocked_ok`, or when [`MAX_KEPT`] wait.
    /// Each update's bench or clearing is logged once, against the state it met.
    fn flush(&self, book: &mut Book, unlocked_ok: bool) {
        if book.kept.is_empty() {
            return;
        }
        let lock = open_lock_file(&self.lock);
        let held = match &lock {
            Ok(file) if try_lock_exclusive(file) => None,
            Ok(_) => Some("another process holds it".to_string()),
            Err(e) => Some(e.to_string()),
        };
        let write = match held {
            None => {
                if book.lock_taken_logged {
                    book.lock_taken_logged = false;
                    tracing::info!(
                        path = %self.lock.display(), updates = book.kept.len(),
                        "health.lock can be had again: the runner health updates kept in memory are written"
                    );
                }
                true
            }
            Some(why) => {
                if !book.lock_taken_logged {
                    book.lock_taken_logged = true;
                    tracing::warn!(
                        path = %self.lock.display(),
                        "health.lock cannot be had at once ({why}): runner health updates are kept in memory, used by this process's trying order, and written once it is free (this line is not repeated per job)"
                    );
                }
                unlocked_ok || book.kept.len() >= MAX_KEPT
            }
        };
        let mut file = load(&self.path, write);
        for u in &mut book.kept {
            let (prev, next) = self.apply(&mut file, u);
            if !u.logged {
                u.logged = true;
                log_change(&u.runner, &u.reason, prev.as_ref(), next.as_ref());
            }
        }
        if write {
            book.kept.clear();
            save(&self.path, &file, self.fsync);
        }
        drop(lock);
    }
}

impl Drop for Inner {
    /// At exit the updates still kept are written, with the lock if it can be had at
    /// once and without it otherwise (a lost bench costs the next `ask` a failing start).
    fn drop(&mut self) {
        let mut book = std::mem::take(self.book.get_mut().unwrap_or_else(PoisonError::into_inner));
        self.flush(&mut book, true);
    }
}

/// Logs a runner benched (or benched longer) and a runner cleared by an answer.
fn log_change(
    runner: &str,
    reason: &str,
    prev: Option<&RunnerHealth>,
    next: Option<&RunnerHealth>,
) {
    match next {
        Some(h)
            if prev.is_none_or(|p| p.benched_until != h.benched_until) && h.benched_until > 0.0 =>
        {
            let until = if h.not_installed {
                "until its program is found or its backoff ends"
            } else {
                "until its backoff ends"
            };
            tracing::warn!(
                runner = %runner, backoff_seconds = h.backoff_seconds, reason = ?reason,
                "runner benched: tried last {until}"
            );
        }
        None if prev.is_some() => {
            tracing::info!(runner = %runner, "runner answered: health cleared")
        }
        _ => {}
    }
}

/// Forgets all runner health (`status --reset-health`). Waits a short while for
/// `health.lock`, then says who to look for instead of hanging.
pub fn reset(state: &StateDir) -> std::io::Result<()> {
    let lock_path = state.health_lock();
    let lock = open_lock_file(&lock_path)?;
    let deadline = Instant::now() + RESET_WAIT;
    while !try_lock_exclusive(&lock) {
        if Instant::now() >= deadline {
            return Err(std::io::Error::other(format!(
                "{} is held by another process (see `fuser {}`); try again once it is free",
                lock_path.display(),
                lock_path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    match std::fs::remove_file(state.health()) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The health file of a state folder, for `status`.
pub fn read(state: &StateDir) -> HealthFile {
    load(&state.health(), true)
}

/// The health file; an unreadable one is empty, a corrupt one too (logged if `warn`).
fn load(path: &Path, warn: bool) -> HealthFile {
    match crate::store::state_dir::read_nofollow(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            if warn {
                tracing::warn!(file = %path.display(), "runner health file is corrupt, starting afresh: {e}");
            }
            HealthFile::new()
        }),
        Err(_) => HealthFile::new(),
    }
}

fn save(path: &Path, file: &HealthFile, fsync: bool) {
    // Health is advice: losing the last update on power loss is harmless, so its name
    // is not synced; its content is, so it never comes back empty or cut short.
    let saved = serde_json::to_vec_pretty(file)
        .map_err(std::io::Error::other)
        .and_then(|bytes| crate::store::state_dir::publish_content(path, &bytes, fsync));
    if let Err(e) = saved {
        tracing::error!("cannot save runner health: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::sync::mpsc;
    use std::time::Duration;

    fn store(dir: &std::path::Path) -> HealthStore {
        let cfg = HealthConfig {
            enabled: true,
            backoff_start_seconds: 60.0,
            backoff_max_seconds: 600.0,
        };
        HealthStore::open(&StateDir::new(dir), &cfg, false).unwrap()
    }

    fn runner() -> Runner {
        Runner::for_tests("r", &["r"])
    }

    /// Takes `path` exclusively, as another process of the user may.
    fn hold(path: &Path) -> File {
        let file = open_lock_file(path).unwrap();
        assert!(try_lock_exclusive(&file));
        file
    }

    fn other() -> Runner {
        Runner {
            name: "other".into(),
            argv: vec!["other".into()],
            ..runner()
        }
    }

    /// Records on another thread and fails the test if that waits (bounded).
    fn record_within_bound(health: &HealthStore, runner: Runner, sign: Sign) {
        let (tx, rx) = mpsc::channel();
        let h = health.clone();
        let recorder = std::thread::spawn(move || {
            h.record(&runner, sign, "exit 1");
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("a record waited for health.lock");
        recorder.join().unwrap();
    }

    /// A held `health.lock` never holds up a record: the bench is kept in memory,
    /// orders this process's table at once (every clone of the store), and is written
    /// by the next record once the lock is free.
    #[test]
    fn a_held_lock_never_blocks_a_record_and_the_update_is_written_later() {
        let dir = tempfile::tempdir().unwrap();
        let health = store(dir.path());
        let held = hold(&dir.path().join("health.lock"));
        record_within_bound(&health, runner(), Sign::Failed);
        assert!(!dir.path().join("health.json").exists(), "nothing written");
        let table = [runner(), other()];
        let names = |h: &HealthStore| -> Vec<String> {
            h.order(&table).iter().map(|r| r.name.clone()).collect()
        };
        assert_eq!(names(&health.clone()), ["other", "r"], "benched in memory");
        drop(held);
        health.record(&other(), Sign::Answered, "answered");
        assert!(read(&StateDir::new(dir.path()))[&key(&runner())].benched_until > 0.0);
        assert!(health.inner.book().kept.is_empty());
    }

    /// Updates kept in memory are written without the lock when the store is dropped
    /// (at exit) and once [`MAX_KEPT`] wait.
    #[test]
    fn kept_updates_are_written_without_the_lock_at_exit_or_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let _held = hold(&dir.path().join("health.lock"));
        let health = store(dir.path());
        record_within_bound(&health, runner(), Sign::Failed);
        drop(health);
        assert!(read(&state)[&key(&runner())].benched_until > 0.0, "at exit");
        std::fs::remove_file(state.health()).unwrap();
        let health = store(dir.path());
        for _ in 1..MAX_KEPT {
            health.record(&other(), Sign::TimedOut, "timed out");
        }
        assert!(!state.health().exists(), "kept below the bound");
        health.record(&other(), Sign::TimedOut, "timed out");
        assert_eq!(
            read(&state)[&key(&other())].timeouts_in_a_row as usize,
            MAX_KEPT,
            "written at the bound, every update replayed"
        );
        assert!(health.inner.book().kept.is_empty());
    }

    /// `status --reset-health` gives up on a held lock within its bound, naming it.
    #[test]
    fn reset_names_a_held_lock_instead_of_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let _held = hold(&dir.path().join("health.lock"));
        let e = reset(&StateDir::new(dir.path())).unwrap_err();
        assert!(e.to_string().contains("health.lock is held"), "{e}");
    }

    /// An answer from a healthy runner changes nothing, so it never waits for
    /// `health.lock` (held here by someone else); a failure still records under it.
    #[test]
    fn a_no_op_record_skips_the_lock_and_a_change_takes_it() {
        let dir = tempfile::tempdir().unwrap();
        let health = store(dir.path());
        let held = hold(&dir.path().join("health.lock"));
        let (tx, rx) = mpsc::channel();
        let h = health.clone();
        let recorder = std::thread::spawn(move || {
            h.record(&runner(), Sign::Answered, "answered");
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("a no-op record waited for the lock");
        drop(held);
        recorder.join().unwrap();
        health.record(&runner(), Sign::Failed, "exit 1");
        let benched = health.load();
        assert!(benched[&key(&runner())].benched_until > 0.0);
        health.record(&runner(), Sign::Answered, "answered");
        assert!(health.load().is_empty());
    }

    /// Counts the WARN events logged while it is the default subscriber.
    struct Warnings(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if *event.metadata().level() == tracing::Level::WARN {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }

    /// A corrupt health file is reported once when a failure replaces it, not once per
    /// read (the unlocked check reads it too).
    #[test]
    fn a_corrupt_file_is_reported_once_when_a_failure_replaces_it() {
        use tracing_subscriber::layer::SubscriberExt;
        let dir = tempfile::tempdir().unwrap();
        let health = store(dir.path());
        std::fs::write(dir.path().join("health.json"), b"{not json").unwrap();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let subscriber = tracing_subscriber::registry().with(Warnings(count.clone()));
        tracing::subscriber::with_default(subscriber, || {
            health.record(&runner(), Sign::TimedOut, "timed out after 1s");
        });
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(health.load()[&key(&runner())].timeouts_in_a_row, 1);
    }
}
