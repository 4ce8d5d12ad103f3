//! What a job tells the worker running it, and how the worker steers it: typed events
//! out, one `Control` value in, instead of callbacks handed down.

use crate::core::verdict::{Attempt, Outcome};

pub use crate::process::spawn::{Control, StopSignal};

/// A job's judging ended because its `StopSignal` fired (shutdown): the job stays
/// queued, unjudged. The way every step that can be stopped says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

/// What a job tells its worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JobEvent<'a> {
    /// The runners are done and a verdict with `outcome` and `attempts` is about to be
    /// published: the worker may take its next job, and counts it (its outcome and its
    /// runners' attempts) before anyone can read it.
    Publishing {
        outcome: Outcome,
        attempts: &'a [Attempt],
    },
    /// That publish failed; the job stays queued and is not counted.
    PublishFailed { outcome: Outcome },
}

/// Where a job's events go. Delivered at once and in order, on the job's own thread:
/// the outcome must be counted before the verdict's rename, which a queue read later
/// by another task could not promise.
pub trait JobEvents: Send + Sync {
    /// Takes one event.
    fn send(&self, event: JobEvent<'_>);
}
