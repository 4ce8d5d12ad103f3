//! The seam between judging and processes: a `Spawner` runs one runner attempt. The
//! daemon, `run` and `ask` use `Processes` (the process layer); the in-process
//! lifecycle tests use a scripted one, so the job logic runs without processes. An API
//! runner's attempt goes through it too (`call_api`): one HTTP request, no process.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::core::api_protocol::CallEnd;
use crate::process::api_call::{ApiClient, ApiRequest};
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

    /// Asks a model API once: an API runner's attempt (no process). A spawner that
    /// makes no API calls (a scripted one) ends every such attempt unable to connect.
    fn call_api<'a>(&'a self, request: &'a ApiRequest<'a>) -> BoxFuture<'a, CallEnd> {
        let _ = request;
        Box::pin(async {
            CallEnd::Transport {
                label: "cannot connect",
                detail: "this judge makes no API calls".into(),
            }
        })
    }
}

/// Real runner processes, each under its own supervisor (`process::spawn`): a pooled
/// one when there is a pool (the daemon), else one forked per attempt (`run`, `ask`);
/// and real API requests on one HTTP client, whose connections stay pooled for as
/// long as this value lives (the daemon's: its whole life).
#[derive(Default)]
pub struct Processes {
    /// The daemon's supervisor pool, made at its start.
    pub pool: Option<Arc<SupervisorPool>>,
    /// The HTTP client of API runners, built on their first call.
    pub api: ApiClient,
}

impl Spawner for Processes {
    fn run<'a>(
        &'a self,
        spec: &'a RunSpec<'a>,
        on_spawn: &'a mut (dyn FnMut(u32) + Send),
    ) -> BoxFuture<'a, RunOutput> {
        Box::pin(spawn::run(spec, self.pool.as_ref(), on_spawn))
    }

    fn call_api<'a>(&'a self, request: &'a ApiRequest<'a>) -> BoxFuture<'a, CallEnd> {
        Box::pin(self.api.call(request))
    }
}
