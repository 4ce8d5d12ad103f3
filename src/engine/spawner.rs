//! The seam between judging and processes: a `Spawner` runs one runner attempt. The
//! daemon, `run` and `ask` use `Processes` (the process layer); the in-process
//! lifecycle tests use a scripted one, so the job logic runs without processes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::process::pool::SupervisorPool;
use crate::process::spawn::{self, RunOutput, RunSpec};

/// A boxed future that may move between threads.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs one attempt to its end; `on_spawn` gets the runner's process group id as it
/// starts. It honours `spec.timeout` and `spec.stop` (ending `TimedOut` / `Stopped`).
pub trait Spawner: Send + Sync {
    /// Runs `spec` to its end.
    fn run<'a>(
        &'a self,
        spec: &'a RunSpec<'a>,
        on_spawn: &'a mut (dyn FnMut(u32) + Send),
    ) -> BoxFuture<'a, RunOutput>;
}

/// Real runner processes, each under its own supervisor (`process::spawn`): a pooled
/// one when there is a pool (the daemon), else one forked per attempt (`run`, `ask`).
#[derive(Default)]
pub struct Processes {
    /// The daemon's supervisor pool, made at its start.
    pub pool: Option<Arc<SupervisorPool>>,
}

impl Spawner for Processes {
    fn run<'a>(
        &'a self,
        spec: &'a RunSpec<'a>,
        on_spawn: &'a mut (dyn FnMut(u32) + Send),
    ) -> BoxFuture<'a, RunOutput> {
        Box::pin(spawn::run(spec, self.pool.as_ref(), on_spawn))
    }
}
