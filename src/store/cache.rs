//! The answer cache (docs/reference.md, "Beyond catstack"): `<state>/cache/<key>.json`,
//! keyed by mode, runner table and prompt (and the judge's instructions text where the
//! table sends it); default-mode answers only, reused within the TTL.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::core::codex::slim::{INSTRUCTIONS_ITEM, instructions_for};
use crate::core::config::CacheConfig;
use crate::core::digest::sha1_hex_full;
use crate::core::job::Mode;
use crate::core::runner::table::{Runner, table_identity};
use crate::store::state_dir::{StateDir, now_unix};

/// Stores between two checks of the entry count.
const PRUNE_EVERY: u64 = 64;

/// A cached answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub created_at: f64,
    pub runner: String,
    pub answer: Map<String, Value>,
}

/// The cache key of a question: mode, the whole table (names and argv) and the prompt,
/// the judge's instructions text when a runner's argv takes it (`{instructions}`), and
/// the job's folder when a runner of the table works in it.
pub fn key(mode: Mode, table: &[Runner], prompt: &str, folder: Option<&Path>) -> String {
    key_with(mode, table, prompt, instructions_for(mode), folder)
}

/// `key` with the instructions text given: it comes with the binary, so an answer a
/// build with other instructions cached is not reused.
fn key_with(
    mode: Mode,
    table: &[Runner],
    prompt: &str,
    instructions: &str,
    folder: Option<&Path>,
) -> String {
    let takes_instructions = table
        .iter()
        .any(|r| r.argv.iter().any(|a| a == INSTRUCTIONS_ITEM));
    let table = table_identity(table);
    let mut parts = vec![json!(mode.name()), table, json!(prompt)];
    if takes_instructions {
        parts.push(json!(instructions));
    }
    if let Some(folder) = folder {
        // Keyed as `{"cwd": …}` so it can never read as an instructions text.
        parts.push(json!({"cwd": folder.to_string_lossy()}));
    }
    sha1_hex_full(Value::Array(parts).to_string().as_bytes())
}

/// The cache of a state folder. Clones share the count of stores.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
    cfg: CacheConfig,
    /// Entries stored so far: every `PRUNE_EVERY`th store prunes.
    stores: Arc<AtomicU64>,
    /// An entry's content is fsynced before its rename (`fsync`).
    fsync: bool,
}

impl Cache {
    /// The cache, or `None` when `cache.ttl_seconds` is 0; `fsync`: an entry is whole
    /// or absent after a power cut.
    pub fn open(state: &StateDir, cfg: &CacheConfig, fsync: bool) -> Option<Self> {
        (cfg.ttl_seconds > 0.0).then(|| Cache {
            dir: state.cache(),
            cfg: cfg.clone(),
            stores: Arc::default(),
            fsync,
        })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// A fresh answer for `key`; expired and corrupt entries are removed (corrupt: logged).
    pub fn get(&self, key: &str) -> Option<Entry> {
        let path = self.path(key);
        let bytes = crate::store::state_dir::read_nofollow(&path).ok()?;
        let entry: Entry = match serde_json::from_slice(&bytes) {
            Ok(entry) => entry,
            Err(e) => {
                tracing::warn!(file = %path.display(), "corrupt cache entry ignored and removed: {e}");
                let _ = std::fs::remove_file(&path);
                return None;
            }
        };
        if now_unix() - entry.created_at > self.cfg.ttl_seconds {
            let _ = std::fs::remove_file(&path);
            return None;
        }
        Some(entry)
    }

    /// Stores an answer; failures are logged, never fatal. Its name is not synced: an
    /// entry lost on power loss costs one runner call, not worth a folder fsync per job;
    /// its content is (with `fsync`), so no entry comes back empty or cut short.
    pub fn put(&self, key: &str, runner: &str, answer: &Map<String, Value>) {
        let entry = Entry {
            created_at: now_unix(),
            runner: runner.to_string(),
            answer: answer.clone(),
        };
        let stored = serde_json::to_vec(&entry)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                let path = self.path(key);
                crate::support::runtime::blocking(|| {
                    crate::store::state_dir::publish_content(&path, &bytes, self.fsync)
                })
            });
        if let Err(e) = stored {
            tracing::error!("cannot store a cache entry: {e}");
            return;
        }
        if self
            .stores
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(PRUNE_EVERY)
        {
            self.prune();
        }
    }

    /// Keeps at most `max_entries`, dropping the oldest.
    pub fn prune(&self) {
        let not_hidden = |name: &std::ffi::OsStr| !name.to_string_lossy().starts_with('.');
        let Ok(files) = crate::store::state_dir::oldest_first(&self.dir, not_hidden) else {
            return;
        };
        if files.len() <= self.cfg.max_entries {
            return;
        }
        let excess = files.len() - self.cfg.max_entries;
        for name in files.into_iter().take(excess) {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
        tracing::info!(removed = excess, "cache pruned to max_entries");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, argv: &[&str]) -> Runner {
        Runner::for_tests(name, argv)
    }

    #[test]
    fn the_key_covers_mode_table_and_prompt() {
        let t = [r("a", &["x", "{prompt}"])];
        let k = key(Mode::Default, &t, "p", None);
        assert_eq!(k, key(Mode::Default, &t, "p", None));
        assert_ne!(k, key(Mode::Investigate, &t, "p", None));
        assert_ne!(k, key(Mode::Default, &t, "q", None));
        assert_ne!(
            k,
            key(
                Mode::Default,
                &[r("a", &["x", "-v", "{prompt}"])],
                "p",
                None
            )
        );
        assert_ne!(
            k,
            key(Mode::Default, &[r("b", &["x", "{prompt}"])], "p", None)
        );
    }

    /// The job's folder, when a runner works in it, is part of the key; a key without
    /// one is the key older builds wrote (their entries stay usable).
    #[test]
    fn the_key_covers_the_folder_a_runner_works_in() {
        let t = [r("a", &["x", "{prompt}"])];
        let (m, p) = (Mode::Default, "p");
        let one = key(m, &t, p, Some(Path::new("/w/one")));
        assert_ne!(one, key(m, &t, p, Some(Path::new("/w/two"))));
        assert_ne!(one, key(m, &t, p, None));
        let old = json!([m.name(), table_identity(&t), p]).to_string();
        assert_eq!(key(m, &t, p, None), sha1_hex_full(old.as_bytes()));
    }

    /// A table that sends the judge's instructions file is keyed by its text too (a
    /// build with other instructions gets other answers); one that does not is not.
    #[test]
    fn the_key_covers_the_instructions_a_table_sends() {
        let slim = [r("codex", &["codex", "-c", INSTRUCTIONS_ITEM, "{prompt}"])];
        let plain = [r("a", &["x", "{prompt}"])];
        let (m, p) = (Mode::Default, "p");
        assert_ne!(
            key_with(m, &slim, p, "one", None),
            key_with(m, &slim, p, "two", None)
        );
        assert_eq!(
            key_with(m, &plain, p, "one", None),
            key_with(m, &plain, p, "two", None)
        );
        assert_eq!(
            key(m, &slim, p, None),
            key_with(m, &slim, p, instructions_for(m), None)
        );
    }

    #[test]
    fn store_get_expire_corrupt_and_prune() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let cache = Cache::open(
            &state,
            &CacheConfig {
                ttl_seconds: 100.0,
                max_entries: 2,
            },
            false,
        )
        .unwrap();
        let answer: Map<String, Value> = serde_json::from_str(r#"{"ok": true}"#).unwrap();
        cache.put("k1", "codex", &answer);
        assert_eq!(cache.get("k1").unwrap().runner, "codex");
        let old = Entry {
            created_at: now_unix() - 1000.0,
            runner: "c".into(),
            answer: answer.clone(),
        };
        std::fs::write(cache.path("k2"), serde_json::to_vec(&old).unwrap()).unwrap();
        assert_eq!(cache.get("k2"), None, "expired");
        std::fs::write(cache.path("k3"), b"{torn").unwrap();
        assert_eq!(cache.get("k3"), None, "corrupt");
        assert!(!cache.path("k3").exists());
        for k in ["a", "b", "c", "d"] {
            cache.put(k, "codex", &answer);
        }
        cache.prune();
        assert_eq!(std::fs::read_dir(&cache.dir).unwrap().count(), 2);
        assert!(
            Cache::open(
                &state,
                &CacheConfig {
                    ttl_seconds: 0.0,
                    max_entries: 2
                },
                false,
            )
            .is_none()
        );
    }

    /// The count of stores is the cache's own: a cache opened after another one
    /// stored prunes on its first store (a reload opens a new one).
    #[test]
    fn each_cache_counts_its_own_stores() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let cfg = CacheConfig {
            ttl_seconds: 100.0,
            max_entries: 1,
        };
        let answer: Map<String, Value> = serde_json::from_str(r#"{"ok": true}"#).unwrap();
        let first = Cache::open(&state, &cfg, false).unwrap();
        first.put("a", "codex", &answer);
        first.put("b", "codex", &answer);
        assert_eq!(
            std::fs::read_dir(&first.dir).unwrap().count(),
            2,
            "no prune yet"
        );
        let second = Cache::open(&state, &cfg, false).unwrap();
        second.put("c", "codex", &answer);
        assert_eq!(std::fs::read_dir(&second.dir).unwrap().count(), 1, "pruned");
    }
}
