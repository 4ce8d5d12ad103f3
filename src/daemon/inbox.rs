//! The inbox: which job files wait, oldest first (mtime, then name), and the
//! watcher whose events are only hints to look again (the watch itself is
//! `inbox_inotify` on Linux, `inbox_notify` elsewhere).

use std::collections::{BTreeSet, HashSet};
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use thiserror::Error;
use tokio::sync::{Notify, mpsc};

use crate::daemon::inbox_watch;
use crate::store::state_dir::is_job_name;

/// Why jobs/ is not watched (the daemon then relies on rescans); names the folder.
#[derive(Debug, Error)]
pub enum WatchError {
    /// jobs/ cannot be created (`state_dir::create_dir`'s error names the folder itself).
    #[error(transparent)]
    Folder(io::Error),
    /// The watch cannot be set up; `hint` says which limit to raise, if one was hit
    /// (after the cause, so the cause stays in the message).
    #[cfg(target_os = "linux")]
    #[error("cannot watch {}: {cause}{hint}", path.display())]
    Watch {
        path: PathBuf,
        cause: io::Error,
        hint: &'static str,
    },
    /// notify's watcher cannot start (beyond Linux).
    #[cfg(not(target_os = "linux"))]
    #[error("cannot start the inbox watcher")]
    Start(#[source] notify::Error),
    /// notify cannot watch the folder (beyond Linux).
    #[cfg(not(target_os = "linux"))]
    #[error("cannot watch {}", path.display())]
    Notify {
        path: PathBuf,
        source: notify::Error,
    },
}

/// Job files known to wait, oldest first. Holds names only: jobs are read when run.
#[derive(Default)]
pub struct Queue {
    order: BTreeSet<(SystemTime, OsString)>,
    /// Names queued or running, so a name is never taken twice.
    known: HashSet<OsString>,
}

impl Queue {
    /// Adds `name` if it is a job name not already queued or running; true if added.
    pub fn offer(&mut self, jobs_dir: &Path, name: OsString) -> bool {
        if !is_job_name(&name) || self.known.contains(&name) {
            return false;
        }
        // lstat only: never follow or open a job before it runs.
        let Ok(meta) = std::fs::symlink_metadata(jobs_dir.join(&name)) else {
            return false;
        };
        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        self.known.insert(name.clone());
        self.order.insert((mtime, name));
        true
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

    /// Offers each of `names` (a listing of `jobs_dir`); returns how many were new.
    pub fn offer_all(&mut self, jobs_dir: &Path, names: Vec<OsString>) -> usize {
        names
            .into_iter()
            .map(|name| usize::from(self.offer(jobs_dir, name)))
            .sum()
    }
}

/// The names in `jobs_dir` (listed before the queue is locked: a big inbox is slow).
pub fn list(jobs_dir: &Path) -> io::Result<Vec<OsString>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(jobs_dir)? {
        let Ok(entry) = entry else { continue };
        names.push(entry.file_name());
    }
    Ok(names)
}

/// What the watcher tells the daemon.
pub enum Hint {
    /// A file appeared in jobs/ (created or moved in).
    Arrived(OsString),
}

/// Where a watch reports: hints, and the flags that ask the daemon to look again.
pub struct Sink {
    sender: mpsc::Sender<Hint>,
    rescan: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
    wake: Arc<Notify>,
}

impl Sink {
    /// A file named `name` was created in or moved into jobs/.
    pub fn arrived(&self, name: &OsStr) {
        if is_job_name(name)
            && self
                .sender
                .try_send(Hint::Arrived(name.to_os_string()))
                .is_err()
        {
            self.rescan();
        }
    }

    /// Events were lost (a full queue, a read error): scan jobs/ again.
    pub fn rescan(&self) {
        self.raise(&self.rescan);
    }

    /// jobs/ itself went away or was moved: watch it again, then scan.
    pub fn lost(&self) {
        self.raise(&self.lost);
    }

    fn raise(&self, flag: &AtomicBool) {
        flag.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }
}

/// Watches jobs/ and forwards hints; when hints are lost it raises `rescan`.
pub struct InboxWatcher {
    watch: Option<inbox_watch::Watch>,
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
            watch: None,
            jobs_dir: jobs_dir.to_path_buf(),
            watched_ino: None,
            hints,
            sender,
            rescan: Arc::new(AtomicBool::new(false)),
            lost: Arc::new(AtomicBool::new(false)),
            wake: Arc::new(Notify::new()),
        }
    }

    /// (Re)starts watching jobs/, creating it if it is missing. Runs in the runtime.
    pub fn watch(&mut self) -> Result<(), WatchError> {
        use std::os::unix::fs::MetadataExt;
        self.watch = None;
        crate::store::state_dir::create_dir(&self.jobs_dir).map_err(WatchError::Folder)?;
        // Cleared first: a loss the new watch reports must stay raised.
        self.lost.store(false, Ordering::SeqCst);
        let watch = inbox_watch::start(&self.jobs_dir, self.sink())?;
        self.watched_ino = std::fs::metadata(&self.jobs_dir).ok().map(|m| m.ino());
        self.watch = Some(watch);
        Ok(())
    }

    /// Where a watch reports: this watcher's channel and flags.
    fn sink(&self) -> Sink {
        Sink {
            sender: self.sender.clone(),
            rescan: self.rescan.clone(),
            lost: self.lost.clone(),
            wake: self.wake.clone(),
        }
    }

    /// True when jobs/ is no longer the folder being watched.
    pub fn replaced(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.watch.is_none()
            || self.lost.load(Ordering::SeqCst)
            || std::fs::metadata(&self.jobs_dir).ok().map(|m| m.ino()) != self.watched_ino
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
        let scan = |q: &mut Queue| q.offer_all(dir.path(), list(dir.path()).unwrap());
        assert_eq!(scan(&mut q), 3, "job files only");
        q.offer(dir.path(), "a.json".into());
        assert_eq!(q.waiting(), 3);
        let order: Vec<OsString> = std::iter::from_fn(|| q.take()).collect();
        assert_eq!(order, ["c.json", "a.json", "b.json"].map(OsString::from));
        assert_eq!(scan(&mut q), 0);
        assert_eq!(q.waiting(), 0, "taken jobs stay known until finished");
        q.finished(&"a.json".into());
        assert_eq!(scan(&mut q), 1);
        assert_eq!(q.take(), Some("a.json".into()));
    }

    /// Waits (bounded) for the next hint's name.
    async fn next_hint(w: &mut InboxWatcher) -> String {
        match tokio::time::timeout(Duration::from_secs(10), w.hints.recv()).await {
            Ok(Some(Hint::Arrived(name))) => name.to_string_lossy().into_owned(),
            other => panic!("no hint: {:?}", other.is_ok()),
        }
    }

    #[tokio::test]
    async fn hints_for_jobs_created_or_moved_in_and_nothing_for_the_daemons_own_work() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().join("jobs");
        let mut w = InboxWatcher::new(&jobs);
        w.watch().unwrap();
        std::fs::write(jobs.join("direct.json"), "{}").unwrap();
        assert_eq!(next_hint(&mut w).await, "direct.json");
        // Published by rename: the hidden temp name is no job.
        std::fs::write(jobs.join(".t.tmp"), "{}").unwrap();
        std::fs::rename(jobs.join(".t.tmp"), jobs.join("renamed.json")).unwrap();
        assert_eq!(next_hint(&mut w).await, "renamed.json");
        // What the daemon itself does to a job (open, read, remove) is no event.
        drop(std::fs::read(jobs.join("direct.json")).unwrap());
        std::fs::remove_file(jobs.join("direct.json")).unwrap();
        std::fs::write(jobs.join("last.json"), "{}").unwrap();
        assert_eq!(next_hint(&mut w).await, "last.json");
        assert!(!w.rescan.load(Ordering::SeqCst) && !w.lost.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn the_folder_removed_or_moved_away_asks_for_a_new_watch() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().join("jobs");
        for gone in ["removed", "moved"] {
            let mut w = InboxWatcher::new(&jobs);
            w.watch().unwrap();
            match gone {
                "removed" => std::fs::remove_dir(&jobs).unwrap(),
                _ => std::fs::rename(&jobs, dir.path().join("elsewhere")).unwrap(),
            }
            tokio::time::timeout(Duration::from_secs(10), w.wake.notified())
                .await
                .unwrap_or_else(|_| panic!("{gone}: no wake"));
            assert!(w.lost.load(Ordering::SeqCst), "{gone}");
            assert!(w.replaced(), "{gone}");
            // Watching again makes the folder anew and clears the flag.
            w.watch().unwrap();
            assert!(!w.replaced() && jobs.is_dir(), "{gone}");
        }
    }
}
