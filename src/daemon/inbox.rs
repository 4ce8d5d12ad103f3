//! The inbox: which job files wait, oldest first (mtime, then name), and the
//! watcher whose events are only hints to look again.

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{Notify, mpsc};

use crate::store::state_dir::is_job_name;

/// Job files known to wait, oldest first. Holds names only: jobs are read when run.
#[derive(Default)]
pub struct Queue {
    order: BTreeSet<(SystemTime, OsString)>,
    /// Names queued or running, so a name is never taken twice.
    known: HashSet<OsString>,
}

impl Queue {
    /// Adds `name` if it is a job name not already queued or running.
    pub fn offer(&mut self, jobs_dir: &Path, name: OsString) {
        if !is_job_name(&name) || self.known.contains(&name) {
            return;
        }
        // lstat only: never follow or open a job before it runs.
        let Ok(meta) = std::fs::symlink_metadata(jobs_dir.join(&name)) else {
            return;
        };
        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        self.known.insert(name.clone());
        self.order.insert((mtime, name));
    }

    /// Takes the oldest job; it stays known until `finished`.
    pub fn take(&mut self) -> Option<OsString> {
        self.order.pop_first().map(|(_, name)| name)
    }

    /// Forgets a job that was taken.
    pub fn finished(&mut self, name: &OsString) {
        self.known.remove(name);
    }

    /// Jobs waiting (not running).
    pub fn waiting(&self) -> usize {
        self.order.len()
    }

    /// The mtime of the oldest waiting job.
    pub fn oldest(&self) -> Option<SystemTime> {
        self.order.first().map(|(t, _)| *t)
    }

    /// Adds every job file in `jobs_dir`. Returns how many entries were seen.
    pub fn scan(&mut self, jobs_dir: &Path) -> io::Result<usize> {
        let mut seen = 0;
        for entry in std::fs::read_dir(jobs_dir)? {
            let Ok(entry) = entry else { continue };
            seen += 1;
            self.offer(jobs_dir, entry.file_name());
        }
        Ok(seen)
    }
}

/// What the watcher tells the daemon.
pub enum Hint {
    /// A file appeared in jobs/ (created or moved in).
    Arrived(OsString),
}

/// Watches jobs/ and forwards hints; when hints are lost it raises `rescan`.
pub struct InboxWatcher {
    watcher: Option<RecommendedWatcher>,
    jobs_dir: PathBuf,
    /// The inode of the watched folder, to notice it being replaced.
    watched_ino: Option<u64>,
    pub hints: mpsc::Receiver<Hint>,
    sender: mpsc::Sender<Hint>,
    /// Set when an event was dropped, the queue overflowed or the watch broke.
    pub rescan: Arc<AtomicBool>,
    /// Set when jobs/ itself went away: re-watch before the next scan.
    pub lost: Arc<AtomicBool>,
    /// Wakes the daemon loop when `rescan` or `lost` is set.
    pub wake: Arc<Notify>,
}

/// Hints buffered before the daemon falls back to a rescan.
const HINT_BUFFER: usize = 4096;

impl InboxWatcher {
    /// A watcher for `jobs_dir`; call `watch` to start it.
    pub fn new(jobs_dir: &Path) -> Self {
        let (sender, hints) = mpsc::channel(HINT_BUFFER);
        InboxWatcher {
            watcher: None,
            jobs_dir: jobs_dir.to_path_buf(),
            watched_ino: None,
            hints,
            sender,
            rescan: Arc::new(AtomicBool::new(false)),
            lost: Arc::new(AtomicBool::new(false)),
            wake: Arc::new(Notify::new()),
        }
    }

    /// (Re)starts watching jobs/, creating it if it is missing.
    pub fn watch(&mut self) -> Result<(), String> {
        use std::os::unix::fs::MetadataExt;
        self.watcher = None;
        crate::store::state_dir::create_dir(&self.jobs_dir).map_err(|e| e.to_string())?;
        let mut watcher = notify::recommended_watcher(self.handler())
            .map_err(|e| format!("cannot start the inbox watcher: {e}"))?;
        watcher
            .watch(&self.jobs_dir, RecursiveMode::NonRecursive)
            .map_err(|e| format!("cannot watch {}: {e}", self.jobs_dir.display()))?;
        self.watched_ino = std::fs::metadata(&self.jobs_dir).ok().map(|m| m.ino());
        self.watcher = Some(watcher);
        self.lost.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// True when jobs/ is no longer the folder being watched.
    pub fn replaced(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.watcher.is_none()
            || self.lost.load(Ordering::SeqCst)
            || std::fs::metadata(&self.jobs_dir).ok().map(|m| m.ino()) != self.watched_ino
    }

    fn handler(&self) -> impl FnMut(notify::Result<notify::Event>) + Send + 'static {
        let sender = self.sender.clone();
        let rescan = self.rescan.clone();
        let lost = self.lost.clone();
        let wake = self.wake.clone();
        let jobs_dir = self.jobs_dir.clone();
        move |result| {
            let raise = |flag: &AtomicBool| {
                flag.store(true, Ordering::SeqCst);
                wake.notify_one();
            };
            let event = match result {
                Ok(event) => event,
                Err(_) => return raise(&rescan),
            };
            if event.need_rescan() {
                return raise(&rescan);
            }
            if event.paths.iter().any(|p| p == &jobs_dir) {
                if matches!(event.kind, EventKind::Remove(_) | EventKind::Modify(_)) {
                    raise(&lost);
                }
                return;
            }
            if !matches!(
                event.kind,
                EventKind::Create(_) | EventKind::Modify(notify::event::ModifyKind::Name(_))
            ) {
                return;
            }
            for path in &event.paths {
                let Some(name) = path.file_name() else {
                    continue;
                };
                if path.parent() == Some(jobs_dir.as_path())
                    && is_job_name(name)
                    && sender.try_send(Hint::Arrived(name.to_os_string())).is_err()
                {
                    raise(&rescan);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_first_then_by_name_and_never_twice() {
        let dir = tempfile::tempdir().unwrap();
        let set = |name: &str, secs: u64| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"{}").unwrap();
            let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(t)
                .unwrap();
        };
        set("b.json", 100);
        set("a.json", 100);
        set("c.json", 50);
        set(".hidden.json", 1);
        set("temp.json.tmp", 1);
        let mut q = Queue::default();
        assert_eq!(q.scan(dir.path()).unwrap(), 5);
        q.offer(dir.path(), "a.json".into());
        assert_eq!(q.waiting(), 3);
        let order: Vec<OsString> = std::iter::from_fn(|| q.take()).collect();
        assert_eq!(order, ["c.json", "a.json", "b.json"].map(OsString::from));
        q.scan(dir.path()).unwrap();
        assert_eq!(q.waiting(), 0, "taken jobs stay known until finished");
        q.finished(&"a.json".into());
        q.scan(dir.path()).unwrap();
        assert_eq!(q.take(), Some("a.json".into()));
    }
}
