//! Runner health on disk: `<state>/health.json`, updated under `health.lock` by the
//! daemon and `run` alike, with the rules of `core::health`.

use std::fs::File;
use std::path::PathBuf;

use crate::core::config::HealthConfig;
use crate::core::health::{HealthFile, Sign, key, order, update};
use crate::core::runner_table::Runner;
use crate::store::file_lock::{lock_exclusive, open_lock_file};
use crate::store::state_dir::{StateDir, now_unix};

/// Health kept in the state folder.
#[derive(Debug, Clone)]
pub struct HealthStore {
    path: PathBuf,
    lock: PathBuf,
    cfg: HealthConfig,
}

impl HealthStore {
    /// The store of a state folder, or `None` when health is turned off.
    pub fn open(state: &StateDir, cfg: &HealthConfig) -> Option<Self> {
        cfg.enabled.then(|| HealthStore {
            path: health_path(state),
            lock: state.root.join("health.lock"),
            cfg: cfg.clone(),
        })
    }

    /// The current health of every runner (empty when unreadable; logged).
    pub fn load(&self) -> HealthFile {
        load(&self.path)
    }

    /// The table in trying order.
    pub fn order<'a>(&self, table: &'a [Runner]) -> Vec<&'a Runner> {
        order(table, &self.load(), now_unix())
    }

    /// Records an attempt; logs benching and clearing.
    pub fn record(&self, runner: &Runner, sign: Sign, reason: &str) {
        if sign == Sign::Neutral {
            return;
        }
        let _guard = lock(&self.lock);
        let mut file = self.load();
        let k = key(runner);
        let prev = file.get(&k).cloned();
        let next = update(
            prev.as_ref(),
            &runner.name,
            sign,
            reason,
            now_unix(),
            &self.cfg,
        );
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
                tracing::warn!(
                    runner = %runner.name, backoff_seconds = h.backoff_seconds, reason = ?reason,
                    "runner benched: tried last until its backoff ends"
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
}

fn health_path(state: &StateDir) -> PathBuf {
    state.root.join("health.json")
}

/// Forgets all runner health (`status --reset-health`).
pub fn reset(state: &StateDir) -> std::io::Result<()> {
    let _guard = lock(&state.root.join("health.lock"));
    match std::fs::remove_file(health_path(state)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The health file of a state folder, for `status`.
pub fn read(state: &StateDir) -> HealthFile {
    load(&health_path(state))
}

fn load(path: &std::path::Path) -> HealthFile {
    match crate::store::state_dir::read_nofollow(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(file = %path.display(), "runner health file is corrupt, starting afresh: {e}");
            HealthFile::new()
        }),
        Err(_) => HealthFile::new(),
    }
}

fn save(path: &std::path::Path, file: &HealthFile) {
    let bytes = serde_json::to_vec_pretty(file).unwrap_or_default();
    // Health is advice: losing the last update on power loss is harmless, so no fsync.
    if let Err(e) = crate::store::state_dir::publish(path, &bytes, false) {
        tracing::error!("cannot save runner health: {e}");
    }
}

/// An exclusive lock held while the guard lives (updates are read-modify-write).
fn lock(path: &std::path::Path) -> Option<File> {
    let file = open_lock_file(path).ok()?;
    lock_exclusive(&file).ok()?;
    Some(file)
}
