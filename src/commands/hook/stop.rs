//! The agent stopped: a job per matching rule is queued (once per reply, however often
//! the harness calls), and the stop waits for block rules' verdicts, within the wait,
//! up to the block cap. Cursor splits this in two: its `afterAgentResponse` queues,
//! its `stop` waits and delivers.

use std::time::{Duration, Instant};

use crate::core::hooks::jobs::{RuleJob, rule_jobs, session_key};
use crate::core::hooks::output::Answer;
use crate::core::hooks::prompt::{REPLY_HEAD, REPLY_MAX_CHARS, is_cut};
use crate::core::hooks::rules::{Action, MAX_WAIT_MS, Trigger};
use crate::store::protocol;

use super::Call;

impl Call<'_> {
    /// claude and codex `Stop` / `SubagentStop`: queue, then settle the block rules.
    pub(super) fn on_stop(&mut self, trigger: Trigger) -> Answer {
        let jobs = self.queue(trigger, &[Action::Block, Action::Notice]);
        let blocks: Vec<&RuleJob> = jobs.iter().filter(|j| j.action == Action::Block).collect();
        let default = self.settings.config.hooks.wait_ms;
        Answer {
            block: self.block(&ids(&blocks), deadline(&blocks, default)),
            ..Answer::default()
        }
    }

    /// Cursor's `afterAgentResponse`: queue, and keep the block rules' jobs for its
    /// `stop` (which carries no reply).
    pub(super) fn queue_for_later(&mut self, trigger: Trigger) {
        let jobs = self.queue(trigger, &[Action::Block, Action::Notice]);
        let blocks: Vec<String> = jobs
            .iter()
            .filter(|j| j.action == Action::Block)
            .map(|j| j.id.clone())
            .collect();
        if let (Some(session), false) = (&self.session, blocks.is_empty())
            && let Err(e) = session.save_pending(self.turn(), &blocks)
        {
            tracing::warn!("cannot keep the turn's block jobs for Cursor's stop: {e}");
        }
    }

    /// Cursor's `stop`: the turn's block rules settle (a hit continues the loop with
    /// its notice), and earlier verdicts' notices go along.
    pub(super) fn on_loop_end(&mut self) -> Answer {
        let pending = match &self.session {
            Some(session) => session.take_pending(self.turn()),
            None => Vec::new(),
        };
        let wait = Duration::from_millis(self.settings.config.hooks.wait_ms);
        let block = self.block(&pending, Instant::now() + wait);
        Answer {
            block,
            notices: self.deliver().notices,
            ..Answer::default()
        }
    }

    /// claude's `asyncRewake` hook: only rewake rules, waited for in the background; a
    /// hit exits 2, which wakes the model with the notice.
    pub(super) fn rewake(&mut self) -> (Answer, i32) {
        let mut answer = Answer::default();
        if !matches!(self.input.event, crate::core::hooks::input::Event::Stop) {
            return (answer, crate::support::exit::EXIT_OK);
        }
        let jobs = self.queue(Trigger::Stop, &[Action::Rewake]);
        let refs: Vec<&RuleJob> = jobs.iter().collect();
        // In the background: a rewake rule without a wait of its own waits the longest.
        answer.block = self.block(&ids(&refs), deadline(&refs, MAX_WAIT_MS));
        match answer.block {
            Some(_) => (answer, super::EXIT_REWAKE),
            None => (answer, crate::support::exit::EXIT_OK),
        }
    }

    /// Queues the jobs of the rules for `trigger` with one of `actions`; returns them
    /// all, also those queued by an earlier call for the same reply.
    fn queue(&mut self, trigger: Trigger, actions: &[Action]) -> Vec<RuleJob> {
        let rules = self.rules();
        let prompt = self.session.as_ref().and_then(|s| s.prompt());
        let jobs = rule_jobs(&self.input, &rules, trigger, actions, prompt.as_deref());
        if let Some(reply) = self
            .input
            .reply
            .as_deref()
            .filter(|r| !jobs.is_empty() && is_cut(r))
        {
            self.tell_once(
                "long reply",
                format!(
                    "a reply of {} characters was judged on its first {REPLY_HEAD} and last {} \
                     characters only; its middle was not judged",
                    reply.chars().count(),
                    REPLY_MAX_CHARS - REPLY_HEAD
                ),
            );
        }
        let mut queued_notice = false;
        for job in &jobs {
            let first = self
                .session
                .as_ref()
                .is_none_or(|s| s.first_time(&job.id).unwrap_or(true));
            if !first {
                continue;
            }
            match self.publish(job) {
                Ok(()) => queued_notice |= job.action == Action::Notice,
                Err(e) => self.tell_once(
                    "queue",
                    format!("cannot queue the judge's job ({e}); this reply is not judged"),
                ),
            }
        }
        if queued_notice && !protocol::daemon_runs(&self.state) {
            let state = self.state.root.display().to_string();
            self.tell_once(
                "no daemon",
                format!(
                    "no daemon judges {state}, so notice rules wait until one starts \
                     (llm-judge service install)"
                ),
            );
        }
        jobs
    }

    /// Publishes a rule's job file (a job still queued under its id stays).
    fn publish(&self, job: &RuleJob) -> std::io::Result<()> {
        let file = job
            .job
            .file(self.settings.config.timeouts())
            .map_err(|e| std::io::Error::other(e.reason()))?;
        protocol::publish_job(&self.state, &file, self.settings.config.fsync)?;
        tracing::info!(id = %job.id, rule = %job.rule, action = job.action.name(), session = %session_key(&self.input), "hook queued a job");
        Ok(())
    }

    fn turn(&self) -> &str {
        self.input.turn.as_deref().unwrap_or("no turn")
    }

    /// What blocks are counted by: the turn, and the helper agent that stopped (claude's
    /// `SubagentStop` carries the main turn's id, so a helper's blocks must not use up
    /// the main agent's).
    fn block_key(&self) -> String {
        match &self.input.agent {
            Some(agent) => format!("{} agent {agent}", self.turn()),
            None => self.turn().to_string(),
        }
    }

    /// True while this turn has blocked fewer times than `max_blocks` (codex has no cap
    /// of its own; claude's is 8); past it the stop goes through.
    fn under_block_cap(&mut self) -> bool {
        let max = self.settings.config.hooks.max_blocks;
        let key = self.block_key();
        let so_far = self.session.as_ref().map_or(0, |s| s.blocks(&key, max));
        let under = so_far < max;
        if !under {
            tracing::info!(session = %self.input.session, blocks = so_far, "block cap reached: the stop goes through");
        }
        under
    }

    /// Takes one of the turn's blocks; false when another stop took the last.
    fn take_block(&self) -> bool {
        let Some(session) = &self.session else {
            return true;
        };
        let max = self.settings.config.hooks.max_blocks;
        session
            .reserve_block(&self.block_key(), max)
            .unwrap_or_else(|e| {
                tracing::warn!("cannot count the block: {e}");
                true
            })
    }

    /// The notices a block of the jobs `ids` sends the agent back with (their hits by
    /// `deadline`), counted as one of the turn's blocks; `None` past the block cap or
    /// without a hit.
    fn block(&mut self, ids: &[String], deadline: Instant) -> Option<String> {
        if ids.is_empty() || !self.under_block_cap() {
            return None;
        }
        let notices = self.settle(ids, deadline);
        if notices.is_empty() || !self.take_block() {
            return None;
        }
        Some(notices.join("\n"))
    }
}

fn ids(jobs: &[&RuleJob]) -> Vec<String> {
    jobs.iter().map(|j| j.id.clone()).collect()
}

/// When `jobs` stop waiting: the longest of their waits (`default_ms` for a rule
/// without one).
fn deadline(jobs: &[&RuleJob], default_ms: u64) -> Instant {
    let wait = jobs
        .iter()
        .map(|j| j.wait_ms.unwrap_or(default_ms))
        .max()
        .unwrap_or(default_ms);
    Instant::now() + Duration::from_millis(wait)
}
