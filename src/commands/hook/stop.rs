//! The agent stopped: a job per matching rule is queued (once per reply, however often
//! the harness calls), and the stop waits for block rules' verdicts, within the wait,
//! up to the block cap. Cursor splits this in two: its `afterAgentResponse` queues,
//! its `stop` waits and delivers.

use std::time::{Duration, Instant};

use crate::core::hooks::jobs::{RuleJob, rule_jobs, session_key};
use crate::core::hooks::output::Answer;
use crate::core::hooks::rules::{Action, MAX_WAIT_MS, Trigger};
use crate::store::state_dir;

use super::Call;

impl Call<'_> {
    /// claude and codex `Stop` / `SubagentStop`: queue, then settle the block rules.
    pub(super) fn on_stop(&mut self, trigger: Trigger) -> Answer {
        let jobs = self.queue(trigger, &[Action::Block, Action::Notice]);
        let blocks: Vec<&RuleJob> = jobs.iter().filter(|j| j.action == Action::Block).collect();
        let mut answer = Answer::default();
        if !blocks.is_empty() && self.under_block_cap() {
            let notices = self.settle(&blocks, self.deadline(&blocks));
            if !notices.is_empty() {
                self.count_block();
                answer.block = Some(notices.join("\n"));
            }
        }
        answer
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
        let mut answer = Answer::default();
        if !pending.is_empty() && self.under_block_cap() {
            let wait = Duration::from_millis(self.settings.config.hooks.wait_ms);
            let ids: Vec<RuleJob> = pending
                .into_iter()
                .map(|id| RuleJob {
                    id,
                    rule: String::new(),
                    action: Action::Block,
                    wait_ms: None,
                    job: Default::default(),
                })
                .collect();
            let refs: Vec<&RuleJob> = ids.iter().collect();
            let notices = self.settle(&refs, Instant::now() + wait);
            if !notices.is_empty() {
                self.count_block();
                answer.block = Some(notices.join("\n"));
            }
        }
        answer.notices = self.deliver().notices;
        answer
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
        if refs.is_empty() || !self.under_block_cap() {
            return (answer, crate::support::exit::EXIT_OK);
        }
        let wait = refs
            .iter()
            .map(|j| j.wait_ms.unwrap_or(MAX_WAIT_MS))
            .max()
            .unwrap_or(MAX_WAIT_MS);
        let notices = self.settle(&refs, Instant::now() + Duration::from_millis(wait));
        if notices.is_empty() {
            return (answer, crate::support::exit::EXIT_OK);
        }
        self.count_block();
        answer.block = Some(notices.join("\n"));
        (answer, super::EXIT_REWAKE)
    }

    /// Queues the jobs of the rules for `trigger` with one of `actions`; returns them
    /// all, also those queued by an earlier call for the same reply.
    fn queue(&mut self, trigger: Trigger, actions: &[Action]) -> Vec<RuleJob> {
        let rules = self.rules();
        let prompt = self.session.as_ref().and_then(|s| s.prompt());
        let jobs = rule_jobs(&self.input, &rules, trigger, actions, prompt.as_deref());
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
        if queued_notice && !self.daemon_runs() {
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

    /// Publishes a rule's job file by rename (a job still queued under its id stays).
    fn publish(&self, job: &RuleJob) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(&job.job).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        let target = self.state.jobs().join(format!("{}.json", job.id));
        match state_dir::publish_new(&target, &bytes, self.settings.config.fsync) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
            _ => {
                tracing::info!(id = %job.id, rule = %job.rule, action = job.action.name(), session = %session_key(&self.input), "hook queued a job");
                Ok(())
            }
        }
    }

    fn turn(&self) -> &str {
        self.input.turn.as_deref().unwrap_or("no turn")
    }

    /// True while this turn has blocked fewer times than `max_blocks` (codex has no cap
    /// of its own; claude's is 8); past it the stop goes through.
    fn under_block_cap(&mut self) -> bool {
        let max = self.settings.config.hooks.max_blocks;
        let so_far = self.session.as_ref().map_or(0, |s| s.blocks(self.turn()));
        let under = so_far < max;
        if !under {
            tracing::info!(session = %self.input.session, blocks = so_far, "block cap reached: the stop goes through");
        }
        under
    }

    fn count_block(&self) {
        if let Some(session) = &self.session
            && let Err(e) = session.add_block(self.turn())
        {
            tracing::warn!("cannot count the block: {e}");
        }
    }

    /// When the block rules stop waiting: the longest of their waits.
    fn deadline(&self, blocks: &[&RuleJob]) -> Instant {
        let config = self.settings.config.hooks.wait_ms;
        let wait = blocks
            .iter()
            .map(|j| j.wait_ms.unwrap_or(config))
            .max()
            .unwrap_or(config);
        Instant::now() + Duration::from_millis(wait)
    }

    /// True when a daemon holds the state folder's lock.
    pub(super) fn daemon_runs(&self) -> bool {
        crate::store::daemon_lock::holder(&self.state.lock()).is_some()
    }
}
