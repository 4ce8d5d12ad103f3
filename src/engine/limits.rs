//! Per-runner `max_concurrent` (docs/reference.md, "Beyond catstack"): a semaphore per
//! runner, across workers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::core::runner::table::Runner;

/// Slots of limited runners in this process.
#[derive(Default)]
pub struct RunnerLimits {
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl RunnerLimits {
    /// Waits for a slot of `runner`; `None` when it has no limit.
    pub async fn acquire(&self, runner: &Runner) -> Option<OwnedSemaphorePermit> {
        let max = runner.max_concurrent? as usize;
        // Keyed by the limit too, so a reload with a new limit gets a fresh semaphore.
        // The runner's identity is its health key (name, argv and env).
        let key = format!("{}\0{max}", crate::core::health::key(runner));
        let sem = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots
                .entry(key)
                .or_insert_with(|| Arc::new(Semaphore::new(max)))
                .clone()
        };
        if let Ok(permit) = sem.clone().try_acquire_owned() {
            return Some(permit);
        }
        tracing::info!(runner = %runner.name, max_concurrent = max, "waiting for a free runner slot");
        sem.acquire_owned().await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_limit_of_one_admits_one_at_a_time() {
        let limits = RunnerLimits::default();
        let r = Runner {
            max_concurrent: Some(1),
            ..Runner::for_tests("r", &["r"])
        };
        let first = limits.acquire(&r).await;
        assert!(first.is_some());
        let second =
            tokio::time::timeout(std::time::Duration::from_millis(50), limits.acquire(&r)).await;
        assert!(second.is_err(), "the second waits");
        drop(first);
        assert!(limits.acquire(&r).await.is_some());
        let free = Runner {
            max_concurrent: None,
            ..r
        };
        assert!(limits.acquire(&free).await.is_none());
    }
}
