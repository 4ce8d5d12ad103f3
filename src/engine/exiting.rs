//! Runners let go after their final event: a stream-json claude's answer is complete at
//! its `result` event, but the CLI takes a moment more to exit. The verdict does not
//! wait for that; the job's end does. Each such runner is stopped in a task of its own
//! (`process::spawn::Lingering::stop`: a moment to exit, then SIGTERM, the kill grace,
//! SIGKILL), filed under its job's tag, and the job's run waits for its tag's
//! tasks once the verdict is published, before it lets the claim go: a crash meanwhile
//! leaves a claim whose recovery stops what is left, as for any running job.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::task::JoinHandle;

use crate::engine::runner_folder::RunnerFolder;
use crate::process::spawn::RunOutput;

/// The tasks stopping runners that answered before they exited, by job tag.
#[derive(Default)]
pub struct ExitingRunners {
    tasks: Mutex<HashMap<String, Vec<JoinHandle<()>>>>,
}

impl ExitingRunners {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Vec<JoinHandle<()>>>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `stop` now, in a task of its own, filed under `tag`.
    pub fn hand_off(&self, tag: &str, stop: impl Future<Output = ()> + Send + 'static) {
        let task = tokio::spawn(stop);
        let mut tasks = self.lock();
        // Tags whose job never came back for them (an error left it queued): forget
        // their finished tasks, so the map holds only what still runs.
        tasks.retain(|_, handles| {
            handles.retain(|h| !h.is_finished());
            !handles.is_empty()
        });
        tasks.entry(tag.to_string()).or_default().push(task);
    }

    /// Returns once every runner filed under `tag` is stopped (each stop is bounded:
    /// a moment to exit, the kill grace, and the supervisor's report).
    pub async fn settle(&self, tag: &str) {
        let handles = self.lock().remove(tag).unwrap_or_default();
        for handle in handles {
            // A stop task does not fail; one that panicked has dropped its runner,
            // which kills it (`process::spawn`'s drop net).
            let _ = handle.await;
        }
    }
}

/// The stop of a runner let go after its final event.
pub type Stop = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An attempt's output, and, when its runner gave its final event before it exited,
/// the stop of that runner (`process::spawn::Finished::lingering`).
pub struct Ended {
    pub output: RunOutput,
    pub rest: Option<Stop>,
}

impl From<crate::process::spawn::Finished> for Ended {
    fn from(finished: crate::process::spawn::Finished) -> Self {
        Ended {
            output: finished.output,
            rest: finished.lingering.map(|l| Box::pin(l.stop()) as Stop),
        }
    }
}

/// The output of an attempt whose runner worked in `folder`: a runner still exiting
/// is stopped, and the folder removed after it, in `exiting` under `tag` when there
/// are some (the daemon, `run`), else here before the output is returned.
pub async fn collect_output(
    ended: Ended,
    folder: Option<RunnerFolder>,
    exiting: Option<&ExitingRunners>,
    tag: &str,
) -> RunOutput {
    let Some(rest) = ended.rest else {
        drop(folder);
        return ended.output;
    };
    let stop = async move {
        rest.await;
        drop(folder);
    };
    match exiting {
        Some(exiting) => exiting.hand_off(tag, stop),
        None => stop.await,
    }
    ended.output
}
