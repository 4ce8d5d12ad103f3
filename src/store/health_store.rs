//! Runner health on disk: `<state>/health.json`, updated under `health.lock` by the
//! daemon, `run` and `ask` alike, with the rules of `core::health`.

use std::fs::File;
use std::path::PathBuf;

use crate::core::config::HealthConfig;
use crate::core::health::{HealthFile, RunnerHealth, Sign, key, order, update};
use crate::core::runner_table::Runner;
use crate::process::spawn::resolve_program;
use crate::store::file_lock::{lock_exclusive, open_lock_file};
use crate::store::state_dir::{StateDir, now_unix};

/// Health kept in the state folder.
#[derive(Debug, Clone)]
pub struct HealthStore {
    path: PathBuf,
    lock: PathBuf,
    cfg: HealthConfig,
    /// The time health is judged at, when the caller gives its own (`ask --now`).
    fixed_now: Option<f64>,
}

impl HealthStore {
    /// The store of a state folder, or `None` when health is turned off.
    pub fn open(state: &StateDir, cfg: &HealthConfig) -> Option<Self> {
        cfg.enabled.then(|| HealthStore {
            path: health_path(state),
            lock: state.health_lock(),
            cfg: cfg.clone(),
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

    /// The current health of every runner (empty when unreadable; logged).
    pub fn load(&self) -> HealthFile {
        load(&self.path, true)
    }

    /// The table in trying order; a runner benched as not installed is looked up on
    /// `PATH` again (a few `stat`s, no process).
    pub fn order<'a>(&self, table: &'a [Runner]) -> Vec<&'a Runner> {
        let installed = |r: &Runner| {
            r.argv
                .first()
                .is_some_and(|program| resolve_program(program).is_some())
        };
        order(table, &self.load(), self.now(), installed)
    }

    /// Records an attempt; logs benching and clearing. May block on `health.lock`.
    pub fn record(&self, runner: &Runner, sign: Sign, reason: &str) {
        if sign == Sign::Neutral {
            return;
        }
        let k = key(runner);
        // Most attempts (an answer from a healthy runner) change nothing: the file is
        // replaced by rename, so an unlocked read is a state some writer committed,
        // and a no-op on it needs neither the lock nor a blocking-thread hand-off. An
        // answer racing a bench being written counts as the earlier of the two, an
        // order the lock allowed too. Quiet: a corrupt file is reported once, by the
        // locked read that replaces it.
        let prev = load(&self.path, false).remove(&k);
        if self.next(prev.as_ref(), runner, sign, reason) == prev {
            return;
        }
        crate::support::runtime::blocking(|| self.update_locked(k, runner, sign, reason));
    }

    fn update_locked(&self, k: String, runner: &Runner, sign: Sign, reason: &str) {
        let _guard = lock(&self.lock);
        let mut file = self.load();
        let prev = file.get(&k).cloned();
        let next = self.next(prev.as_ref(), runner, sign, reason);
        if next == prev {
            return;
        }
        match &next {
            Some(h)
                if prev
                    .as_ref()
                    .is_none_or(|p| p.benched_until != h.benched_until)
                    && h.benched_until > 0.0 =>
            {
                let until = if h.not_installed {
                    "until its program is found or its backoff ends"
                } else {
                    "until its backoff ends"
                };
                tracing::warn!(
                    runner = %runner.name, backoff_seconds = h.backoff_seconds, reason = ?reason,
                    "runner benched: tried last {until}"
                );
            }
            None => tracing::info!(runner = %runner.name, "runner answered: health cleared"),
            _ => {}
        }
        match next {
            Some(h) => file.insert(k, h),
            None => file.remove(&k),
        };
        save(&self.path, &file);
    }

    /// A runner's health after recording `sign` on `prev`.
    fn next(
        &self,
        prev: Option<&RunnerHealth>,
        runner: &Runner,
        sign: Sign,
        reason: &str,
    ) -> Option<RunnerHealth> {
        update(prev, &runner.name, sign, reason, self.now(), &self.cfg)
    }
}

fn health_path(state: &StateDir) -> PathBuf {
    state.health()
}

/// Forgets all runner health (`status --reset-health`).
pub fn reset(state: &StateDir) -> std::io::Result<()> {
    let _guard = lock(&state.health_lock());
    match std::fs::remove_file(health_path(state)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The health file of a state folder, for `status`.
pub fn read(state: &StateDir) -> HealthFile {
    load(&health_path(state), true)
}

/// The health file; an unreadable one is empty, a corrupt one too (logged if `warn`).
fn load(path: &std::path::Path, warn: bool) -> HealthFile {
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

fn save(path: &std::path::Path, file: &HealthFile) {
    // Health is advice: losing the last update on power loss is harmless, so no fsync.
    let saved = serde_json::to_vec_pretty(file)
        .map_err(std::io::Error::other)
        .and_then(|bytes| crate::store::state_dir::publish(path, &bytes, false));
    if let Err(e) = saved {
        tracing::error!("cannot save runner health: {e}");
    }
}

/// An exclusive lock held while the guard lives (updates are read-modify-write).
fn lock(path: &std::path::Path) -> Option<File> {
    let file = open_lock_file(path).ok()?;
    lock_exclusive(&file).ok()?;
    Some(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn store(dir: &std::path::Path) -> HealthStore {
        let cfg = HealthConfig {
            enabled: true,
            backoff_start_seconds: 60.0,
            backoff_max_seconds: 600.0,
        };
        HealthStore::open(&StateDir::new(dir), &cfg).unwrap()
    }

    fn runner() -> Runner {
        Runner::for_tests("r", &["r"])
    }

    /// An answer from a healthy runner changes nothing, so it never waits for
    /// `health.lock` (held here by someone else); a failure still records under it.
    #[test]
    fn a_no_op_record_skips_the_lock_and_a_change_takes_it() {
        let dir = tempfile::tempdir().unwrap();
        let health = store(dir.path());
        let held = lock(&dir.path().join("health.lock")).unwrap();
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
