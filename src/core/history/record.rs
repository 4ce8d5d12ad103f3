//! The records, as a writer hands them to the history (one JSON object a line in its
//! spool): a published verdict, a hook's queued job with the texts it judges, and a
//! hook's decision about a verdict. Each carries a random `uid`, so a spool file read
//! twice (a crash between its import and its removal) adds nothing twice.

use serde::{Deserialize, Serialize};

use crate::core::text::cut;
use crate::core::verdict::Verdict;
use crate::core::verdict::usage::Usage;

/// The answer object is kept up to this many characters.
pub const ANSWER_MAX_CHARS: usize = 2_000;

/// One line of the spool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    Verdict(VerdictRecord),
    Queued(QueuedRecord),
    Decision(DecisionRecord),
}

#[cfg(test)]
impl Record {
    /// The record's random id.
    pub fn uid(&self) -> &str {
        match self {
            Record::Verdict(r) => &r.uid,
            Record::Queued(r) => &r.uid,
            Record::Decision(r) => &r.uid,
        }
    }
}

/// Who wrote a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgedBy {
    Daemon,
    /// `llm-judge run`.
    Run,
    /// A hook judging in its own process (no daemon ran).
    Hook,
}

/// A published verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictRecord {
    pub uid: String,
    /// When the verdict was written (Unix seconds).
    pub at: f64,
    pub by: JudgedBy,
    pub job_id: String,
    pub transcript: String,
    pub rule: Option<String>,
    /// `default` or `investigate`; `None` for a job that could not be read.
    pub mode: Option<String>,
    /// `hit`, `clean` or `unchecked`.
    pub outcome: String,
    pub reason: String,
    pub runner: Option<String>,
    /// From the claim to the verdict written.
    pub judge_ms: u64,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    /// The answer object as JSON, cut to [`ANSWER_MAX_CHARS`].
    pub answer: Option<String>,
}

impl VerdictRecord {
    /// The record of `verdict`, judged in `judge_ms` by `by` (mode as the job asked).
    pub fn of(
        uid: String,
        verdict: &Verdict,
        by: JudgedBy,
        mode: Option<&str>,
        judge_ms: u64,
    ) -> Self {
        let usage = verdict
            .attempts
            .iter()
            .filter_map(|a| a.usage.as_ref())
            .fold(None, |sum: Option<Usage>, u| {
                let mut sum = sum.unwrap_or_default();
                sum.add(u);
                Some(sum)
            });
        VerdictRecord {
            uid,
            at: verdict.finished_at,
            by,
            job_id: verdict.id.clone(),
            transcript: verdict.transcript.clone(),
            rule: verdict.rule_id.clone(),
            mode: mode.map(String::from),
            outcome: verdict.outcome.name().to_string(),
            reason: verdict.reason.clone(),
            runner: verdict.runner.clone(),
            judge_ms,
            input_tokens: usage.as_ref().map(|u| u.input_tokens),
            output_tokens: usage.as_ref().map(|u| u.output_tokens),
            cost_usd: usage.and_then(|u| u.cost_usd),
            // A map of JSON values always serialises.
            answer: verdict.answer.as_ref().map(|a| {
                let json = serde_json::to_string(a).unwrap_or_default();
                cut(&json, ANSWER_MAX_CHARS, "[...]")
            }),
        }
    }
}

/// A hook's job, queued at a stop: the texts it judges (for `mark`), and how long that
/// stop took in all (its wait for block rules included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedRecord {
    pub uid: String,
    pub at: f64,
    pub job_id: String,
    pub transcript: String,
    pub rule: String,
    /// The rule's action: `block`, `notice` or `rewake`.
    pub action: String,
    /// The folder an investigate rule works in.
    pub cwd: Option<String>,
    /// The agent's reply as judged.
    pub reply: String,
    /// The user's prompt before it, when the hook knew it.
    pub prompt: Option<String>,
    /// The hook call's wall time, from its start to its answer.
    pub stop_ms: u64,
}

/// What a hook did with a rule's verdict (or without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The stop was blocked: the agent was sent back with the notice.
    Blocked,
    /// The hit's notice went to the agent at its next prompt or start.
    NoticeDelivered,
    /// The turn had used its blocks: the stop went through unjudged.
    LetThroughAtCap,
    /// No verdict within the wait: the stop went through (a hit comes as a notice).
    LetThroughAtWait,
    /// claude's background hook woke the model with the notice.
    Rewoke,
}

impl Decision {
    /// The name in listings and judge.log.
    pub fn name(self) -> &'static str {
        match self {
            Decision::Blocked => "blocked",
            Decision::NoticeDelivered => "notice delivered",
            Decision::LetThroughAtCap => "let through at cap",
            Decision::LetThroughAtWait => "let through at wait",
            Decision::Rewoke => "rewoke",
        }
    }

    /// All decisions, for reading a name back.
    pub const ALL: [Decision; 5] = [
        Decision::Blocked,
        Decision::NoticeDelivered,
        Decision::LetThroughAtCap,
        Decision::LetThroughAtWait,
        Decision::Rewoke,
    ];

    /// The decision named `name` (as [`Decision::name`] or its JSON spelling).
    pub fn named(name: &str) -> Option<Decision> {
        Decision::ALL.into_iter().find(|d| {
            d.name() == name
                || serde_json::to_value(d)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .as_deref()
                    == Some(name)
        })
    }
}

/// A hook's decision about rule `rule`'s job `job_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub uid: String,
    pub at: f64,
    pub job_id: String,
    pub transcript: String,
    pub rule: Option<String>,
    pub decision: Decision,
    /// What the agent was told, when it was told something.
    pub told: Option<String>,
}

/// The harness and session of a verdict's transcript: a hook's transcript is
/// `<harness>:<session>`; any other (a catstack transcript path) is its own session.
pub fn harness_and_session(transcript: &str) -> (Option<&'static str>, &str) {
    for harness in ["claude", "codex", "cursor"] {
        if let Some(session) = transcript
            .strip_prefix(harness)
            .and_then(|rest| rest.strip_prefix(':'))
        {
            return (Some(harness), session);
        }
    }
    (None, transcript)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::verdict::{Attempt, Outcome};
    use serde_json::{Value, json};

    fn verdict() -> Verdict {
        let usage = |i, o, c| {
            Some(Usage {
                input_tokens: i,
                cached_input_tokens: 0,
                output_tokens: o,
                cost_usd: c,
            })
        };
        let attempt = |runner: &str, u| Attempt {
            runner: runner.into(),
            ok: true,
            reason: "ok".into(),
            elapsed_ms: Some(5),
            usage: u,
            cwd_refused: None,
        };
        Verdict {
            id: "hook-1".into(),
            hook: Value::Null,
            transcript: "claude:s1".into(),
            outcome: Outcome::Hit,
            on_hit: json!("Run the tests."),
            reason: "ok".into(),
            runner: Some("claude".into()),
            answer: json!({"unverified": true, "why": "x".repeat(3000)})
                .as_object()
                .cloned(),
            attempts: vec![
                attempt("codex", usage(10, 2, None)),
                attempt("claude", usage(5, 1, Some(0.25))),
            ],
            finished_at: 100.5,
            rule_id: Some("tests".into()),
        }
    }

    #[test]
    fn a_verdict_record_sums_usage_and_cuts_the_answer() {
        let record = VerdictRecord::of(
            "u1".into(),
            &verdict(),
            JudgedBy::Daemon,
            Some("default"),
            42,
        );
        assert_eq!(
            (record.input_tokens, record.output_tokens, record.cost_usd),
            (Some(15), Some(3), Some(0.25))
        );
        assert_eq!(
            record.answer.as_ref().map(|a| a.chars().count()),
            Some(ANSWER_MAX_CHARS + 5)
        );
        assert_eq!(
            (
                record.outcome.as_str(),
                record.rule.as_deref(),
                record.judge_ms
            ),
            ("hit", Some("tests"), 42)
        );
    }

    #[test]
    fn a_verdict_without_usage_has_no_tokens() {
        let mut v = verdict();
        v.attempts.clear();
        let record = VerdictRecord::of("u".into(), &v, JudgedBy::Run, None, 0);
        assert_eq!((record.input_tokens, record.cost_usd), (None, None));
    }

    #[test]
    fn records_round_trip_as_one_json_line_each() {
        let records = [
            Record::Verdict(VerdictRecord::of(
                "u1".into(),
                &verdict(),
                JudgedBy::Hook,
                None,
                1,
            )),
            Record::Decision(DecisionRecord {
                uid: "u2".into(),
                at: 1.0,
                job_id: "hook-1".into(),
                transcript: "codex:s".into(),
                rule: Some("tests".into()),
                decision: Decision::LetThroughAtWait,
                told: None,
            }),
        ];
        for record in records {
            let line = serde_json::to_string(&record).unwrap();
            assert!(!line.contains('\n'));
            assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), record);
        }
    }

    #[test]
    fn decisions_are_named_both_ways() {
        for d in Decision::ALL {
            assert_eq!(Decision::named(d.name()), Some(d));
        }
        assert_eq!(
            Decision::named("notice_delivered"),
            Some(Decision::NoticeDelivered)
        );
        assert_eq!(Decision::named("sent"), None);
    }

    #[test]
    fn hook_transcripts_name_their_harness() {
        assert_eq!(harness_and_session("claude:abc"), (Some("claude"), "abc"));
        assert_eq!(harness_and_session("cursor:a:b"), (Some("cursor"), "a:b"));
        assert_eq!(
            harness_and_session("/home/u/t.jsonl"),
            (None, "/home/u/t.jsonl")
        );
        assert_eq!(harness_and_session("claudex:1"), (None, "claudex:1"));
    }
}
