//! Attempts, reason texts, outcomes and the verdict record (docs/reference.md, "Runners"
//! and "Verdict file"). Pure.

pub mod answer;
pub mod usage;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::core::job::{HitRule, Job, JobError};
use crate::core::runner::output_format::OutputFormat;

/// Reasons are clipped to this many code points.
pub const REASON_MAX_CHARS: usize = 300;

/// One runner tried for a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The runner's name (`cache` for a cached answer).
    pub runner: String,
    /// True when this runner answered.
    pub ok: bool,
    /// Why it ended as it did.
    pub reason: String,
    /// Wall time of the attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
    /// Tokens and cost, when the runner's CLI reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::core::verdict::usage::Usage>,
    /// Why the job's `cwd` was refused, when it was: the runner worked in a fresh
    /// folder instead. A note beside `reason`, whose grammar it leaves alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd_refused: Option<String>,
}

/// How a runner process ended, before its output is looked at.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// The program is not on PATH or not executable.
    NotInstalled,
    /// Spawning failed (or what it needed first, such as its folder): the error's
    /// kind and message, shown as `<kind>: <message>`.
    SpawnFailed {
        kind: std::io::ErrorKind,
        message: String,
    },
    /// The job's per-runner timeout ran out.
    TimedOut { seconds: f64 },
    /// Exit code, or minus the signal number for a signal death.
    Exited { code: i32 },
    /// Shutdown stopped it (the job stays queued, so no verdict carries this).
    Stopped,
    /// An API runner whose key variable is not set: nothing was sent (health counts
    /// it as `not installed`).
    NotConfigured { var: String },
    /// A CLI runner whose login is nowhere to be seen (`core::runner::login`): nothing was
    /// started (health counts it as `not installed`). The text says where it looked.
    NotLoggedIn { detail: String },
    /// An API request that got no reply to read (an error status, a transport
    /// failure, a bad or oversized body): health counts it as a failed exit.
    RequestFailed,
    /// An API request that got a reply; its text went through the answer rules.
    Replied,
    /// It printed its final event (`core::verdict::usage::FinalWatch`): its answer is complete,
    /// and it is let go without waiting for its exit (read as an exit 0).
    FinalEvent,
}

/// What one finished runner gave: its attempt, and the answer when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// The attempt as the verdict lists it.
    pub attempt: Attempt,
    /// The answer object, when the runner answered.
    pub answer: Option<Map<String, Value>>,
    /// Why the usage the runner's CLI reported was not counted (out of bounds).
    pub refused_usage: Option<String>,
}

impl Judged {
    /// `runner`'s attempt, ok when it gave an answer; elapsed time and cwd note unset.
    pub fn new(
        runner: &str,
        reason: String,
        answer: Option<Map<String, Value>>,
        usage: Option<crate::core::verdict::usage::Usage>,
        refused_usage: Option<String>,
    ) -> Judged {
        let attempt = Attempt {
            runner: runner.to_string(),
            ok: answer.is_some(),
            reason,
            elapsed_ms: None,
            usage,
            cwd_refused: None,
        };
        Judged {
            attempt,
            answer,
            refused_usage,
        }
    }
}

/// The reason of an API runner whose key variable `var` is not set.
pub fn not_configured_reason(var: &str) -> String {
    format!("not configured: {var} is not set")
}

/// What a runner's output is, for judging its attempt.
#[derive(Debug, Clone, Copy)]
pub struct Output<'a> {
    /// stdout, or its tail when the output cap dropped its start.
    pub stdout: &'a str,
    /// stderr (its tail).
    pub stderr: &'a str,
    /// The output cap, when it dropped the start of `stdout`.
    pub stdout_cut: Option<usize>,
    /// The envelope the runner's argv asked its CLI for.
    pub format: OutputFormat,
}

/// Judges a finished runner's attempt from how it ended and its output.
pub fn judge_attempt(runner: &str, end: &RunEnd, output: Output<'_>) -> Judged {
    let Output {
        stdout,
        stderr,
        stdout_cut,
        format,
    } = output;
    // The cut line lost its start: what is left of it may parse as an object the
    // runner never printed on a line of its own.
    let whole = match stdout_cut {
        Some(_) => crate::core::verdict::answer::whole_lines_of_cut_tail(stdout),
        None => stdout,
    };
    let envelope = crate::core::verdict::usage::read_envelope(whole, format);
    let reply = envelope.as_ref().map_or(whole, |e| e.reply.as_str());
    // The detail of a failure: stderr, else the error the envelope reports, else the
    // reply in it, else stdout.
    let detail = || {
        let error = envelope.as_ref().and_then(|e| e.error.as_deref());
        let text = envelope.as_ref().map_or(stdout, |e| e.reply.as_str());
        [stderr, error.unwrap_or(""), text]
            .into_iter()
            .map(str::trim)
            .find(|t| !t.is_empty())
            .unwrap_or("")
            .to_string()
    };
    let (reason, answer) = match end {
        RunEnd::NotInstalled => ("not installed".to_string(), None),
        RunEnd::SpawnFailed { kind, message } => (clip(&format!("{kind:?}"), message), None),
        RunEnd::TimedOut { seconds } => (
            clip(
                &format!("timed out after {}s", human_number(*seconds)),
                stderr,
            ),
            None,
        ),
        RunEnd::Stopped => ("stopped by shutdown".to_string(), None),
        RunEnd::NotConfigured { var } => (not_configured_reason(var), None),
        RunEnd::NotLoggedIn { detail } => (clip("not logged in", detail), None),
        RunEnd::RequestFailed => (clip("request failed", &detail()), None),
        RunEnd::Exited { code } if *code != 0 => (clip(&format!("exit {code}"), &detail()), None),
        RunEnd::Exited { .. } | RunEnd::Replied | RunEnd::FinalEvent => {
            match crate::core::verdict::answer::last_json_object(reply) {
                Some(obj) => ("answered".to_string(), Some(obj)),
                None => {
                    let label = match stdout_cut {
                        Some(cap) => format!(
                            "no JSON object line in stdout (output cut to the last {cap} bytes)"
                        ),
                        None => "no JSON object line in stdout".to_string(),
                    };
                    (clip(&label, &detail()), None)
                }
            }
        }
    };
    let (usage, refused_usage) = match envelope {
        Some(e) => (e.usage, e.refused_usage),
        None => (None, None),
    };
    Judged::new(runner, reason, answer, usage, refused_usage)
}

/// `<label>: <detail>` clipped to 300 code points, keeping the end of the detail.
pub fn clip(label: &str, detail: &str) -> String {
    let detail = detail.trim();
    if detail.is_empty() || label.chars().count() + 2 >= REASON_MAX_CHARS {
        return label.chars().take(REASON_MAX_CHARS).collect();
    }
    let room = REASON_MAX_CHARS.saturating_sub(label.chars().count() + 2);
    let count = detail.chars().count();
    if count <= room {
        return format!("{label}: {detail}");
    }
    let kept: String = detail.chars().skip(count - room).collect();
    format!("{label}: {kept}")
}

/// A number as a person writes it: `60`, `1.5`.
pub fn human_number(n: f64) -> String {
    format!("{n}")
}

/// The outcome of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The rule matched.
    Hit,
    /// A runner answered and the rule did not match.
    Clean,
    /// No answer: runners failed or the job was bad.
    Unchecked,
}

impl Outcome {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Clean => "clean",
            Outcome::Unchecked => "unchecked",
        }
    }
}

/// One verdict file (docs/reference.md, "Verdict file"). Field order is the file's key order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub id: String,
    pub hook: Value,
    pub transcript: String,
    pub outcome: Outcome,
    pub on_hit: Value,
    pub reason: String,
    pub runner: Option<String>,
    pub answer: Option<Map<String, Value>>,
    pub attempts: Vec<Attempt>,
    pub finished_at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
}

impl Verdict {
    /// What the agent is told of a hit: its `on_hit` (the rule's notice, or the
    /// notices of the keys that were true), else a line naming the rule; `None` when
    /// the verdict is no hit.
    pub fn notice(&self) -> Option<String> {
        if self.outcome != Outcome::Hit {
            return None;
        }
        match self.on_hit.as_str().filter(|n| !n.trim().is_empty()) {
            Some(notice) => Some(notice.to_string()),
            None => Some(format!(
                "rule {} found a problem in your reply",
                self.rule_id.as_deref().unwrap_or("(unnamed)")
            )),
        }
    }

    /// The `unchecked` stand-in for a verdict file that could not be taken as one:
    /// `reason` says why.
    pub fn unreadable(id: &str, reason: String, finished_at: f64) -> Verdict {
        Verdict {
            id: id.to_string(),
            hook: Value::Null,
            transcript: String::new(),
            outcome: Outcome::Unchecked,
            on_hit: Value::Null,
            reason,
            runner: None,
            answer: None,
            attempts: Vec::new(),
            finished_at,
            rule_id: None,
        }
    }
}

/// The verdict of a judged job: `answer` is the winning runner and its object.
pub fn verdict_for(
    job: &Job,
    answer: Option<(String, Map<String, Value>)>,
    attempts: Vec<Attempt>,
    finished_at: f64,
) -> Verdict {
    let mut verdict = Verdict {
        id: job.id.clone(),
        hook: job.hook.clone(),
        transcript: job.transcript.clone(),
        outcome: Outcome::Unchecked,
        on_hit: job.on_hit.clone(),
        reason: String::new(),
        runner: None,
        answer: None,
        attempts,
        finished_at,
        rule_id: job.rule_id.clone(),
    };
    match answer {
        None => verdict.reason = no_answer_reason(&verdict.attempts),
        Some((runner, obj)) => {
            let decision = decide(&job.rule, &obj);
            verdict.outcome = decision.outcome;
            verdict.reason = decision.reason;
            if let Some(notices) = decision.on_hit {
                verdict.on_hit = Value::String(notices);
            }
            verdict.runner = Some(runner);
            verdict.answer = Some(obj);
        }
    }
    verdict
}

/// The verdict of a job the spend cap stopped before its next runner: `unchecked`,
/// the attempts it made before (none when the cap stopped its first), `budget: ...`.
pub fn budget_verdict(
    job: &Job,
    reason: &str,
    attempts: Vec<Attempt>,
    finished_at: f64,
) -> Verdict {
    let mut verdict = verdict_for(job, None, attempts, finished_at);
    verdict.reason = clip(reason, "");
    verdict
}

/// The `unchecked` verdict of a job that could not be judged.
pub fn error_verdict(error: &JobError, finished_at: f64) -> Verdict {
    Verdict {
        id: error.id.clone(),
        hook: error.hook.clone(),
        transcript: error.transcript.clone(),
        outcome: Outcome::Unchecked,
        on_hit: error.on_hit.clone(),
        reason: clip_whole(&error.reason()),
        runner: None,
        answer: None,
        attempts: Vec::new(),
        finished_at,
        rule_id: error.rule_id.clone(),
    }
}

/// A judge error reason clipped to 300 code points (keeping its start, which names it).
fn clip_whole(reason: &str) -> String {
    reason.chars().take(REASON_MAX_CHARS).collect()
}

/// `no runner answered: <runner>: <reason>; …`: each runner keeps its own part (its
/// reason's label and the last line of its detail), and when they do not all fit in
/// 300 characters each gets a fair share, so one runner's long log never pushes
/// another's out.
fn no_answer_reason(attempts: &[Attempt]) -> String {
    const LABEL: &str = "no runner answered";
    if attempts.is_empty() {
        return LABEL.to_string();
    }
    let parts: Vec<(String, String)> = attempts
        .iter()
        .map(|a| (format!("{}: ", a.runner), last_meaningful_line(&a.reason)))
        .collect();
    let separators = 2 * (parts.len() - 1);
    let room = REASON_MAX_CHARS.saturating_sub(LABEL.len() + 2 + separators);
    let lengths: Vec<usize> = parts
        .iter()
        .map(|(runner, text)| runner.chars().count() + text.chars().count())
        .collect();
    let cap = fair_cap(&lengths, room);
    let detail = parts
        .iter()
        .map(|(runner, text)| {
            let keep = cap.saturating_sub(runner.chars().count());
            let count = text.chars().count();
            let kept: String = text.chars().skip(count.saturating_sub(keep)).collect();
            format!("{runner}{kept}")
        })
        .collect::<Vec<_>>()
        .join("; ");
    clip(LABEL, &detail)
}

/// A reason of several lines as its label (up to the first `: `) and its last
/// non-blank line: a runner's log lines before it say less than its last word.
fn last_meaningful_line(reason: &str) -> String {
    let reason = reason.trim();
    if !reason.contains('\n') {
        return reason.to_string();
    }
    let label = reason.split(": ").next().unwrap_or(reason);
    let last = reason
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("");
    match last.starts_with(label) {
        true => last.to_string(),
        false => format!("{label}: {last}"),
    }
}

/// The largest length each part may keep so the parts fit in `room` together (parts
/// shorter than it keep all of theirs).
fn fair_cap(lengths: &[usize], room: usize) -> usize {
    if lengths.iter().sum::<usize>() <= room {
        return usize::MAX;
    }
    let mut sorted = lengths.to_vec();
    sorted.sort_unstable();
    let mut left = room;
    for (i, &len) in sorted.iter().enumerate() {
        let share = left / (sorted.len() - i);
        if len > share {
            return share;
        }
        left -= len;
    }
    usize::MAX
}

/// What an answer means under a job's rule.
#[derive(Debug, PartialEq)]
pub struct Decision {
    pub outcome: Outcome,
    pub reason: String,
    /// Replaces the job's `on_hit` (any-true hits only).
    pub on_hit: Option<String>,
}

/// Applies the outcome rule (docs/reference.md, "Verdict file") to an answer.
pub fn decide(rule: &HitRule, answer: &Map<String, Value>) -> Decision {
    let is_true = |key: &str| answer.get(key) == Some(&Value::Bool(true));
    match rule {
        HitRule::AnyTrue(pairs) => {
            let hits: Vec<&(String, String)> = pairs.iter().filter(|(k, _)| is_true(k)).collect();
            if hits.is_empty() {
                let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
                return Decision {
                    outcome: Outcome::Clean,
                    reason: clip("none true", &keys.join(", ")),
                    on_hit: None,
                };
            }
            let keys: Vec<&str> = hits.iter().map(|(k, _)| k.as_str()).collect();
            let notices: Vec<&str> = hits.iter().map(|(_, n)| n.as_str()).collect();
            Decision {
                outcome: Outcome::Hit,
                reason: clip("any true", &keys.join(", ")),
                on_hit: Some(notices.join("\n")),
            }
        }
        HitRule::AllTrue(keys) => {
            let not_true: Vec<&str> = keys
                .iter()
                .map(String::as_str)
                .filter(|k| !is_true(k))
                .collect();
            if not_true.is_empty() {
                Decision {
                    outcome: Outcome::Hit,
                    reason: clip("all true", &keys.join(", ")),
                    on_hit: None,
                }
            } else {
                Decision {
                    outcome: Outcome::Clean,
                    reason: clip("not true", &not_true.join(", ")),
                    on_hit: None,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
