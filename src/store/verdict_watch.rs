//! Waiting for one verdict file (`enqueue --wait`): a watch on its folder that wakes
//! the waiter only for events that name that file, or for the watch's own trouble.
//! Everything else in the folder (other jobs' verdicts, the judge's temp files, a
//! taker's `.draining-*` claim folder, including the waiter's own) is dropped on the
//! watch's thread, so a wait costs no CPU until its verdict comes.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};

/// The safety net while the watch runs: a verdict whose event never came (the folder
/// was replaced under the watch, an event the kernel did not deliver) is still seen
/// within this long. One `lstat` a second costs nothing measurable; a shorter interval
/// would only matter for those rare lost events.
pub const RECHECK: Duration = Duration::from_secs(1);
/// Without a watch (no inotify instance left, an unsupported file system), the
/// re-check is all there is: often enough to see a verdict soon, still a few cheap
/// `lstat` calls a second.
pub const POLL_WITHOUT_WATCH: Duration = Duration::from_millis(200);

/// Why the waiter woke up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// An event named the verdict file, or events may have been dropped: look again.
    Look,
    /// The folder itself was removed or moved: the watch sees nothing any more.
    Lost,
    /// The waiter was told to stop waiting (Ctrl-C).
    Stop,
}

/// How a [`VerdictWatch::wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// Something may concern the verdict: look.
    Look,
    /// Nothing came within the wait.
    Quiet,
    /// [`Stopper::stop`] was called.
    Stopped,
}

/// Ends a waiter's wait from another thread (a signal handler's task).
#[derive(Debug, Clone)]
pub struct Stopper(Sender<Wake>);

impl Stopper {
    /// Wakes the waiter, whose wait then returns [`Woke::Stopped`].
    pub fn stop(&self) {
        let _ = self.0.send(Wake::Stop);
    }
}

/// A watch on the folder of one verdict file.
pub struct VerdictWatch {
    verdict: PathBuf,
    rx: Receiver<Wake>,
    tx: Sender<Wake>,
    watcher: Option<RecommendedWatcher>,
}

impl VerdictWatch {
    /// Watches the folder of `verdict`; without a watch (it could not be made) the
    /// waiter polls every `POLL_WITHOUT_WATCH`.
    pub fn new(verdict: &Path) -> Self {
        let (tx, rx) = channel();
        let mut watch = VerdictWatch {
            verdict: verdict.to_path_buf(),
            rx,
            tx,
            watcher: None,
        };
        watch.start();
        watch
    }

    /// True when a watch runs (false: polling only).
    pub fn is_watching(&self) -> bool {
        self.watcher.is_some()
    }

    /// How long a wait may last before the waiter looks anyway: `RECHECK` with a
    /// watch, `POLL_WITHOUT_WATCH` without one.
    pub fn recheck_interval(&self) -> Duration {
        if self.is_watching() {
            RECHECK
        } else {
            POLL_WITHOUT_WATCH
        }
    }

    /// What stops this watch's waits from another thread.
    pub fn stopper(&self) -> Stopper {
        Stopper(self.tx.clone())
    }

    /// Waits at most `max` for an event naming the verdict, for nothing, or for a
    /// stop. A lost watch (its folder replaced) is made again on the folder now at
    /// that path, and counts as an event: the verdict may be there already.
    pub fn wait(&mut self, max: Duration) -> Woke {
        // Never disconnected: the sender lives in `self.tx` too.
        let woke = self.rx.recv_timeout(max).ok();
        // Wake-ups that came meanwhile say nothing more than the look about to happen.
        let (mut lost, mut stop) = (woke == Some(Wake::Lost), woke == Some(Wake::Stop));
        while let Ok(wake) = self.rx.try_recv() {
            lost |= wake == Wake::Lost;
            stop |= wake == Wake::Stop;
        }
        if lost {
            self.start();
        }
        match (stop, woke) {
            (true, _) => Woke::Stopped,
            (false, Some(_)) => Woke::Look,
            (false, None) => Woke::Quiet,
        }
    }

    /// (Re)starts the watch on the verdict's folder, made again if it was removed (as
    /// the judge would when it publishes); without it, the waiter polls.
    fn start(&mut self) {
        self.watcher = None;
        let Some(folder) = self.verdict.parent() else {
            return;
        };
        if crate::store::state_dir::create_dir(folder).is_err() {
            return;
        }
        let handler = filter(self.verdict.clone(), folder.to_path_buf(), self.tx.clone());
        self.watcher = notify::recommended_watcher(handler)
            .and_then(|mut w| w.watch(folder, RecursiveMode::NonRecursive).map(|()| w))
            .ok();
    }
}

/// The watch's event handler: forwards only what concerns `verdict`.
fn filter(
    verdict: PathBuf,
    folder: PathBuf,
    tx: Sender<Wake>,
) -> impl FnMut(notify::Result<notify::Event>) + Send {
    move |result| {
        let wake = match result {
            Ok(event) => classify(&event, &verdict, &folder),
            // The watch's own error (an overflow among them): look again.
            Err(_) => Some(Wake::Look),
        };
        if let Some(wake) = wake {
            let _ = tx.send(wake);
        }
    }
}

/// What an event means for the waiter of `verdict` in `folder`; `None`: nothing.
fn classify(event: &notify::Event, verdict: &Path, folder: &Path) -> Option<Wake> {
    use notify::EventKind;
    if event.need_rescan() {
        return Some(Wake::Look);
    }
    if event.paths.iter().any(|p| p == verdict) {
        return Some(Wake::Look);
    }
    let folder_gone = matches!(event.kind, EventKind::Remove(_) | EventKind::Modify(_));
    (folder_gone && event.paths.iter().any(|p| p == folder)).then_some(Wake::Lost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, EventKind, Flag, ModifyKind, RemoveKind, RenameMode};

    fn event(kind: EventKind, paths: &[&str]) -> notify::Event {
        let mut e = notify::Event::new(kind);
        for p in paths {
            e = e.add_path(PathBuf::from(p));
        }
        e
    }

    #[test]
    fn only_events_naming_the_verdict_or_the_folder_wake_the_waiter() {
        let (verdict, folder) = (Path::new("/v/t/id.json"), Path::new("/v/t"));
        let look = |kind, paths: &[&str]| classify(&event(kind, paths), verdict, folder);
        let moved_in = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        assert_eq!(look(moved_in, &["/v/t/id.json"]), Some(Wake::Look));
        let both = EventKind::Modify(ModifyKind::Name(RenameMode::Both));
        assert_eq!(
            look(both, &["/v/t/.id.tmp", "/v/t/id.json"]),
            Some(Wake::Look)
        );
        // The waiter's own claim folder, another job's verdict, a temp file: nothing.
        let made = EventKind::Create(CreateKind::Folder);
        assert_eq!(look(made, &["/v/t/.draining-1-2"]), None);
        assert_eq!(look(moved_in, &["/v/t/other.json"]), None);
        assert_eq!(
            look(
                EventKind::Remove(RemoveKind::Folder),
                &["/v/t/.draining-1-2"]
            ),
            None
        );
        assert_eq!(
            look(EventKind::Remove(RemoveKind::Folder), &["/v/t"]),
            Some(Wake::Lost)
        );
        let overflow = event(EventKind::Other, &[]).set_flag(Flag::Rescan);
        assert_eq!(classify(&overflow, verdict, folder), Some(Wake::Look));
    }

    #[test]
    fn a_verdict_renamed_into_the_folder_wakes_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let verdict = dir.path().join("id.json");
        let mut watch = VerdictWatch::new(&verdict);
        assert!(watch.is_watching());
        let temp = dir.path().join(".id.tmp");
        std::fs::write(&temp, b"{}").unwrap();
        std::fs::rename(&temp, &verdict).unwrap();
        // Bounded: a minute would mean the event never came.
        assert_eq!(
            watch.wait(Duration::from_secs(60)),
            Woke::Look,
            "no event for the verdict"
        );
    }

    #[test]
    fn a_stop_from_another_thread_ends_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = VerdictWatch::new(&dir.path().join("id.json"));
        let stopper = watch.stopper();
        std::thread::spawn(move || stopper.stop());
        // Bounded: a minute would mean the stop never came.
        assert_eq!(watch.wait(Duration::from_secs(60)), Woke::Stopped);
        assert_eq!(watch.wait(Duration::from_millis(1)), Woke::Quiet);
    }
}
