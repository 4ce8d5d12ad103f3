//! The folder protocol as its clients use it (docs/reference.md, "Job file", "Verdict
//! file"), one door for `enqueue`, `drain`, `run` and the hooks: where a job and a
//! verdict live, publishing a job durably, taking a verdict for delivery exactly once,
//! waiting for one without polling, and whether a daemon runs. No other module names a
//! job's or a verdict's file.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::core::job::wire::JobFile;
use crate::store::outbox::{self, Taken};
use crate::store::state_dir::{self, StateDir};
use crate::store::verdict_watch::{Stopper, VerdictWatch, Woke};

/// `<state>/jobs/<id>.json`.
pub fn job_path(state: &StateDir, id: &str) -> PathBuf {
    state.jobs().join(file_name(id))
}

/// `<state>/verdicts/<transcript hash>/<id>.json`.
pub fn verdict_path(state: &StateDir, transcript: &str, id: &str) -> PathBuf {
    state.verdict_dir(transcript).join(file_name(id))
}

fn file_name(id: &str) -> String {
    format!("{id}.json")
}

/// What publishing a job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// The job is in `jobs/` now.
    New,
    /// A job of that id is still queued (it stays; nothing was written).
    StillQueued,
}

/// Publishes `job` in `jobs/` by hard link of a synced temp file (with `fsync`, the
/// folder too): a job of the same id still queued is never replaced.
pub fn publish_job(state: &StateDir, job: &JobFile, fsync: bool) -> io::Result<Published> {
    let target = job_path(state, job.id());
    match state_dir::publish_new(&target, job.bytes(), fsync) {
        Ok(()) => Ok(Published::New),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(Published::StillQueued),
        Err(e) => Err(e),
    }
}

/// True when a daemon holds the state folder's lock.
pub fn daemon_runs(state: &StateDir) -> bool {
    crate::store::daemon_lock::holder(&state.lock()).is_some()
}

/// The verdict files of `transcript`, oldest first, after putting back claims whose
/// takers died; a symlink in place of its folder is refused (`store::outbox`).
pub fn pending_verdicts(state: &StateDir, transcript: &str) -> io::Result<Vec<PathBuf>> {
    outbox::pending(&state.verdict_dir(transcript))
}

/// Takes the verdict at `path` for delivery, if it is there (exactly once: another
/// taker gets `None`).
pub fn take(path: &Path) -> Option<Taken> {
    outbox::take(path)
}

/// How a wait for a verdict ended.
pub enum Waited {
    Taken(Box<Taken>),
    TimedOut,
    /// The wait's stopper was called (Ctrl-C).
    Stopped,
}

/// A wait for one verdict: a watch on its folder wakes it only for that verdict's own
/// file (`store::verdict_watch`), with a slow re-check in case an event is lost. Looking
/// writes nothing, so the wait never wakes itself.
pub struct VerdictWait {
    path: PathBuf,
    watch: VerdictWatch,
}

impl VerdictWait {
    /// A wait for the verdict at `path` (its folder must exist for the watch to see it).
    pub fn new(path: &Path) -> Self {
        VerdictWait {
            path: path.to_path_buf(),
            watch: VerdictWatch::new(path),
        }
    }

    /// Stops the wait from another thread.
    pub fn stopper(&self) -> Stopper {
        self.watch.stopper()
    }

    /// Takes the verdict once it is there, by `deadline`; while waiting, `tick` is
    /// called every `every` (a spinner), when given.
    pub fn until(
        &mut self,
        deadline: Instant,
        mut tick: Option<(Duration, &mut dyn FnMut())>,
    ) -> Waited {
        loop {
            if let Some(taken) = outbox::take(&self.path) {
                return Waited::Taken(Box::new(taken));
            }
            let now = Instant::now();
            if now >= deadline {
                return Waited::TimedOut;
            }
            let every = tick
                .as_ref()
                .map_or(self.watch.recheck_interval(), |(e, _)| *e);
            if self.watch.wait((deadline - now).min(every)) == Woke::Stopped {
                return Waited::Stopped;
            }
            if let Some((_, tick)) = tick.as_mut() {
                tick();
            }
        }
    }
}

/// The verdict at `path` by `deadline`: taken at once when it is there (no watch set
/// up), else waited for.
pub fn take_by(path: &Path, deadline: Instant) -> Option<Taken> {
    if let Some(taken) = outbox::take(path) {
        return Some(taken);
    }
    match VerdictWait::new(path).until(deadline, None) {
        Waited::Taken(taken) => Some(*taken),
        Waited::TimedOut | Waited::Stopped => None,
    }
}
