//! A block rule's verdict, before the stop's wait runs out: with a daemon, the verdict
//! it publishes (a watch on the session's verdict folder wakes the wait, no polling);
//! without one, the job judged here, in this process, through the same engine as
//! `llm-judge run` (its claim keeps a daemon started meanwhile from judging it twice).
//! Whatever is not there by the deadline stays: a later hit becomes a notice.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::core::hooks::jobs::session_key;
use crate::engine::attempts::Services;
use crate::engine::job_run::JobRun;
use crate::process::spawn::Control;
use crate::store::protocol;

use super::Call;
use super::stop::BlockJob;

impl Call<'_> {
    /// Each of `jobs`' verdicts by `deadline`: `None` when it did not come, else its
    /// hit's notice (`Some(None)`: no hit). The verdicts taken stay with the call until
    /// its answer is written (`Call::taken`).
    pub(super) fn settle(
        &mut self,
        jobs: &[BlockJob],
        deadline: Instant,
    ) -> Vec<Option<Option<String>>> {
        let key = session_key(&self.input);
        let ids: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
        // The agent repeated a reply that hit: the same notice, not a second judge.
        let remembered: Vec<Option<String>> = ids
            .iter()
            .map(|id| self.session.as_ref().and_then(|s| s.remembered_hit(id)))
            .collect();
        if !protocol::daemon_runs(&self.state) {
            let unjudged: Vec<&String> = ids
                .iter()
                .zip(&remembered)
                .filter(|(_, hit)| hit.is_none())
                .map(|(id, _)| id)
                .collect();
            self.judge_here(&unjudged, deadline);
        }
        let mut settled = Vec::new();
        for (id, hit) in ids.iter().zip(remembered) {
            if let Some(notice) = hit {
                settled.push(Some(Some(notice)));
                continue;
            }
            let path = protocol::verdict_path(&self.state, &key, id);
            let Some(taken) = protocol::take_by(&path, deadline) else {
                settled.push(None);
                continue;
            };
            let notice = taken.verdict.notice();
            if let (Some(notice), Some(session)) = (&notice, &self.session) {
                let _ = session.remember_hit(id, notice);
            }
            settled.push(Some(notice));
            self.taken.push(taken);
        }
        settled
    }

    /// Judges the queued jobs `ids` in this process, all at once (one runtime, one set
    /// of services), stopped at `deadline` (those not done stay queued, for a daemon).
    fn judge_here(&self, ids: &[&String], deadline: Instant) {
        let paths: Vec<PathBuf> = ids
            .iter()
            .map(|id| protocol::job_path(&self.state, id))
            .filter(|path| path.exists())
            .collect();
        if paths.is_empty() {
            return;
        }
        let runtime = match crate::support::runtime::runtime() {
            Ok(runtime) => runtime,
            Err(e) => {
                tracing::warn!("cannot judge in the hook: {e}");
                return;
            }
        };
        let settings = Arc::new(self.settings.clone());
        let services = Services::for_state(self.settings, &self.state);
        let (stop, cancel) = tokio::sync::watch::channel(Control::Run);
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async {
            let at = tokio::time::Instant::from_std(deadline);
            tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                let _ = stop.send(Control::StopNow);
            });
            let mut runs = tokio::task::JoinSet::new();
            for path in paths {
                let (settings, state) = (settings.clone(), self.state.clone());
                let (services, cancel) = (services.clone(), cancel.clone());
                runs.spawn_local(async move {
                    let run = JobRun {
                        stop: Some(cancel),
                        judged_by: crate::core::history::JudgedBy::Hook,
                        ..JobRun::new(&settings, &state, &services)
                    };
                    let handled = run.judge_file(&path).await;
                    tracing::debug!(file = %path.display(), "judged in the hook: {handled:?}");
                });
            }
            while runs.join_next().await.is_some() {}
        });
    }
}
