//! A block rule's verdict, before the stop's wait runs out: with a daemon, the verdict
//! it publishes (a watch on the session's verdict folder wakes the wait, no polling);
//! without one, the job judged here, in this process, through the same engine as
//! `llm-judge run` (its claim keeps a daemon started meanwhile from judging it twice).
//! Whatever is not there by the deadline stays: a later hit becomes a notice.

use std::time::Instant;

use serde_json::Value;

use crate::core::hooks::jobs::{RuleJob, session_key};
use crate::engine::job_run::JobRun;
use crate::process::spawn::Control;
use crate::store::outbox::{self, Taken};
use crate::store::verdict_watch::VerdictWatch;

use super::Call;

impl Call<'_> {
    /// The notices of `jobs` whose verdicts are hits by `deadline`. The verdicts taken
    /// stay with the call until its answer is written (`Call::taken`).
    pub(super) fn settle(&mut self, jobs: &[&RuleJob], deadline: Instant) -> Vec<String> {
        let dir = self.state.verdict_dir(&session_key(&self.input));
        let daemon = self.daemon_runs();
        let mut notices = Vec::new();
        for job in jobs {
            // The agent repeated a reply that hit: the same notice, not a second judge.
            if let Some(notice) = self
                .session
                .as_ref()
                .and_then(|s| s.remembered_hit(&job.id))
            {
                notices.push(notice);
                continue;
            }
            let path = dir.join(format!("{}.json", job.id));
            if !daemon {
                self.judge_here(&job.id, deadline);
            }
            let Some(taken) = wait_for(&path, deadline) else {
                tracing::info!(id = %job.id, "no verdict within the wait: the stop goes on, a hit becomes a notice");
                continue;
            };
            if let Some(notice) = hit_notice(&taken.verdict) {
                if let Some(session) = &self.session {
                    let _ = session.remember_hit(&job.id, &notice);
                }
                notices.push(notice);
            }
            self.taken.push(taken);
        }
        notices
    }

    /// Judges queued job `id` in this process, stopped at `deadline` (it stays queued
    /// then, for a daemon).
    fn judge_here(&self, id: &str, deadline: Instant) {
        let path = self.state.jobs().join(format!("{id}.json"));
        if !path.exists() {
            return;
        }
        let runtime = match crate::support::runtime::runtime() {
            Ok(runtime) => runtime,
            Err(e) => {
                tracing::warn!("cannot judge in the hook: {e}");
                return;
            }
        };
        let services = crate::engine::attempts::Services::for_state(self.settings, &self.state);
        let (stop, cancel) = tokio::sync::watch::channel(Control::Run);
        let handled = runtime.block_on(async {
            let at = tokio::time::Instant::from_std(deadline);
            tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                let _ = stop.send(Control::StopNow);
            });
            let run = JobRun {
                stop: Some(cancel),
                ..JobRun::new(self.settings, &self.state, &services)
            };
            run.judge_file(&path).await
        });
        tracing::debug!(id, "judged in the hook: {handled:?}");
    }
}

/// Takes the verdict at `path` once it is there, waiting at most until `deadline`.
fn wait_for(path: &std::path::Path, deadline: Instant) -> Option<Taken> {
    let mut watch = VerdictWatch::new(path);
    loop {
        if let Some(taken) = outbox::take(path) {
            return Some(taken);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        watch.wait((deadline - now).min(watch.recheck_interval()));
    }
}

/// The notice of a verdict that is a hit: its `on_hit` (the rule's notice, or the
/// notices of the keys that were true), else one naming the rule.
pub(super) fn hit_notice(verdict: &Value) -> Option<String> {
    if verdict["outcome"] != "hit" {
        return None;
    }
    match verdict["on_hit"].as_str().filter(|n| !n.trim().is_empty()) {
        Some(notice) => Some(notice.to_string()),
        None => Some(format!(
            "rule {} found a problem in your reply",
            verdict["rule_id"].as_str().unwrap_or("(unnamed)")
        )),
    }
}
