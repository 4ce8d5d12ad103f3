//! The agent stopped: a job per matching rule is queued (once per reply, however often
//! the harness calls), and the stop waits for block rules' verdicts, within the wait,
//! up to the block cap. Cursor splits this in two: its `afterAgentResponse` queues,
//! its `stop` waits and delivers.

use std::time::{Duration, Instant};

use crate::core::history::{Decision, QueuedRecord};
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
        let deadline = deadline(&blocks, default);
        self.waited_for_blocks = !blocks.is_empty();
        Answer {
            block: self.block(&block_jobs(&blocks), deadline, Decision::Blocked),
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
            .map(|j| format!("{}\t{}", j.id, j.rule))
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
        let pending: Vec<BlockJob> = match &self.session {
            Some(session) => session.take_pending(self.turn()),
            None => Vec::new(),
        }
        .iter()
        .map(|line| match line.split_once('\t') {
            Some((id, rule)) => BlockJob::new(id, rule),
            None => BlockJob::new(line, line),
        })
        .collect();
        let wait = Duration::from_millis(self.settings.config.hooks.wait_ms);
        let block = self.block(&pending, Instant::now() + wait, Decision::Blocked);
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
        let deadline = deadline(&refs, MAX_WAIT_MS);
        answer.block = self.block(&block_jobs(&refs), deadline, Decision::Rewoke);
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
                Ok(()) => {
                    queued_notice |= job.action == Action::Notice;
                    self.queued.push(self.queued_record(job, prompt.as_deref()));
                }
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
                     (llm-judge service install; where it says there is no user session, keep \
                     `llm-judge daemon` running yourself)"
                ),
            );
        }
        jobs
    }

    /// The history's record of `job`, queued now (its stop's time is set at the end).
    fn queued_record(&self, job: &RuleJob, prompt: Option<&str>) -> QueuedRecord {
        let reply = self.input.reply.as_deref().unwrap_or_default();
        QueuedRecord {
            uid: crate::support::random::unique_id(),
            at: crate::store::state_dir::now_unix(),
            job_id: job.id.clone(),
            transcript: session_key(&self.input),
            rule: job.rule.clone(),
            action: job.action.name().to_string(),
            cwd: job.job.cwd.clone(),
            // Whole (the hook's input is bounded): a case made of it is judged as this was.
            reply: reply.to_string(),
            prompt: prompt.map(String::from),
            // The stop's time so far; a block rule's becomes the whole stop's (its
            // wait included) at the end of a call that waited for it.
            stop_ms: self.started.elapsed().as_millis() as u64,
        }
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

    /// The notices a block of `jobs` sends the agent back with (their hits by
    /// `deadline`), counted as one of the turn's blocks (`hit`: a block, or claude's
    /// rewake); `None` past the block cap or without a hit. Each job's fate is noted:
    /// blocked, or let through at the cap or the wait.
    fn block(&mut self, jobs: &[BlockJob], deadline: Instant, hit: Decision) -> Option<String> {
        if jobs.is_empty() {
            return None;
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        if !self.under_block_cap() {
            self.let_through(jobs.iter().collect(), Decision::LetThroughAtCap, wait);
            return None;
        }
        let settled = self.settle(jobs, deadline);
        let late: Vec<&BlockJob> = jobs
            .iter()
            .zip(&settled)
            .filter(|(_, verdict)| verdict.is_none())
            .map(|(job, _)| job)
            .collect();
        if !late.is_empty() {
            self.let_through(late, Decision::LetThroughAtWait, wait);
        }
        let hits: Vec<(&BlockJob, String)> = jobs
            .iter()
            .zip(settled)
            .filter_map(|(job, verdict)| verdict.flatten().map(|notice| (job, notice)))
            .collect();
        if hits.is_empty() {
            return None;
        }
        if !self.take_block() {
            // Another stop took the turn's last block: these hits go back to their
            // folder, to reach the agent as notices at its next prompt.
            let hit_jobs: Vec<&BlockJob> = hits.iter().map(|(job, _)| *job).collect();
            self.give_back(&hit_jobs);
            self.let_through(hit_jobs, Decision::LetThroughAtCap, wait);
            return None;
        }
        for (job, notice) in &hits {
            self.decide(&job.id, Some(&job.rule), hit, Some(notice));
            if hit == Decision::Blocked {
                self.tell_user(format!(
                    "rule {} blocked the stop and sent the agent back: {}",
                    job.rule,
                    one_line(notice)
                ));
            }
        }
        let notices: Vec<&str> = hits.iter().map(|(_, notice)| notice.as_str()).collect();
        Some(notices.join("\n"))
    }

    /// Notes that the stop went through without `jobs`' verdicts, and tells the user.
    fn let_through(&mut self, jobs: Vec<&BlockJob>, decision: Decision, wait: Duration) {
        for job in &jobs {
            self.decide(&job.id, Some(&job.rule), decision, None);
        }
        let rules: Vec<&str> = jobs.iter().map(|j| j.rule.as_str()).collect();
        let rules = rules.join(", ");
        let later = "a hit reaches the agent as a notice once it is judged";
        let text = match decision {
            Decision::LetThroughAtCap => format!(
                "this turn used its {}, so the stop went through without the verdict \
                 of rule {rules}; {later}",
                match self.settings.config.hooks.max_blocks {
                    1 => "one block".to_string(),
                    n => format!("{n} blocks"),
                }
            ),
            _ => format!(
                "rule {rules} gave no verdict within the wait ({:.1} s), so the stop went \
                 through unjudged; {later}",
                wait.as_secs_f64()
            ),
        };
        self.tell_user(text);
    }
}

/// A block rule's job a stop waits for.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct BlockJob {
    pub id: String,
    pub rule: String,
}

impl BlockJob {
    fn new(id: &str, rule: &str) -> Self {
        BlockJob {
            id: id.to_string(),
            rule: rule.to_string(),
        }
    }
}

fn block_jobs(jobs: &[&RuleJob]) -> Vec<BlockJob> {
    jobs.iter().map(|j| BlockJob::new(&j.id, &j.rule)).collect()
}

/// A notice as one line for the user, at most 300 characters.
pub(super) fn one_line(text: &str) -> String {
    crate::core::text::cut(&crate::core::text::one_line(text), 300, "[...]")
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

impl Call<'_> {
    /// Puts the verdicts of `jobs` taken for this answer back in their folder.
    fn give_back(&mut self, jobs: &[&BlockJob]) {
        let (back, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.taken)
            .into_iter()
            .partition(|t| jobs.iter().any(|j| j.id == t.verdict.id));
        self.taken = keep;
        for taken in back {
            if let Err(e) = taken.give_back() {
                tracing::warn!("verdict taken for a block past the cap: {e}");
            }
        }
    }
}
