//! Attempts, reason texts, outcomes and the verdict record (SPEC sections 4 and 5). Pure.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::core::job::{HitRule, Job, JobError};

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
    pub usage: Option<crate::core::usage::Usage>,
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
    /// Spawning failed; the error kind and message.
    SpawnFailed { kind: String, message: String },
    /// The job's per-runner timeout ran out.
    TimedOut { seconds: f64 },
    /// Exit code, or minus the signal number for a signal death.
    Exited { code: i32 },
    /// Shutdown stopped it (the job stays queued, so no verdict carries this).
    Stopped,
}

/// The attempt for a finished runner; also returns the answer when there is one.
/// `stdout_cut` is the output cap when it dropped the start of `stdout` (the tail).
pub fn judge_attempt(
    runner: &str,
    end: &RunEnd,
    stdout: &str,
    stderr: &str,
    stdout_cut: Option<usize>,
) -> (Attempt, Option<Map<String, Value>>) {
    // The cut line lost its start: what is left of it may parse as an object the
    // runner never printed on a line of its own.
    let whole = match stdout_cut {
        Some(_) => crate::core::answer::whole_lines_of_cut_tail(stdout),
        None => stdout,
    };
    let envelope = crate::core::usage::read_envelope(whole);
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
        RunEnd::SpawnFailed { kind, message } => (clip(kind, message), None),
        RunEnd::TimedOut { seconds } => (
            clip(
                &format!("timed out after {}s", human_number(*seconds)),
                stderr,
            ),
            None,
        ),
        RunEnd::Stopped => ("stopped by shutdown".to_string(), None),
        RunEnd::Exited { code } if *code != 0 => (clip(&format!("exit {code}"), &detail()), None),
        RunEnd::Exited { .. } => match crate::core::answer::last_json_object(reply) {
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
        },
    };
    let attempt = Attempt {
        runner: runner.to_string(),
        ok: answer.is_some(),
        reason,
        elapsed_ms: None,
        usage: envelope.and_then(|e| e.usage),
        cwd_refused: None,
    };
    (attempt, answer)
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

/// One verdict file (SPEC section 5). Field order is the file's key order.
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

/// The verdict of a job the spend cap stopped: `unchecked`, no attempts, `budget: ...`.
pub fn budget_verdict(job: &Job, reason: &str, finished_at: f64) -> Verdict {
    let mut verdict = verdict_for(job, None, Vec::new(), finished_at);
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
        reason: clip_whole(&error.reason),
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

fn no_answer_reason(attempts: &[Attempt]) -> String {
    let detail = attempts
        .iter()
        .map(|a| format!("{}: {}", a.runner, a.reason))
        .collect::<Vec<_>>()
        .join("; ");
    clip("no runner answered", &detail)
}

/// What an answer means under a job's rule.
#[derive(Debug, PartialEq)]
pub struct Decision {
    pub outcome: Outcome,
    pub reason: String,
    /// Replaces the job's `on_hit` (any-true hits only).
    pub on_hit: Option<String>,
}

/// Applies the rule of SPEC section 5 to an answer.
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
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn reason(end: RunEnd, stdout: &str, stderr: &str) -> String {
        judge_attempt("r", &end, stdout, stderr, None).0.reason
    }

    #[test]
    fn every_attempt_reason_is_pinned() {
        assert_eq!(reason(RunEnd::NotInstalled, "", ""), "not installed");
        let spawn = RunEnd::SpawnFailed {
            kind: "PermissionDenied".into(),
            message: "Permission denied (os error 13)".into(),
        };
        assert_eq!(
            reason(spawn, "", ""),
            "PermissionDenied: Permission denied (os error 13)"
        );
        assert_eq!(
            reason(RunEnd::TimedOut { seconds: 60.0 }, "out", ""),
            "timed out after 60s"
        );
        assert_eq!(
            reason(RunEnd::TimedOut { seconds: 1.5 }, "", " slow\n"),
            "timed out after 1.5s: slow"
        );
        assert_eq!(reason(RunEnd::Exited { code: 2 }, "", ""), "exit 2");
        assert_eq!(
            reason(RunEnd::Exited { code: 1 }, "Not logged in", ""),
            "exit 1: Not logged in"
        );
        assert_eq!(
            reason(RunEnd::Exited { code: 1 }, "out", "err\nmore\n"),
            "exit 1: err\nmore"
        );
        assert_eq!(reason(RunEnd::Exited { code: -9 }, "", ""), "exit -9");
        assert_eq!(
            reason(RunEnd::Exited { code: 0 }, "prose", ""),
            "no JSON object line in stdout: prose"
        );
        assert_eq!(
            reason(RunEnd::Exited { code: 0 }, "prose", "warn"),
            "no JSON object line in stdout: warn"
        );
        assert_eq!(
            reason(RunEnd::Exited { code: 0 }, "", ""),
            "no JSON object line in stdout"
        );
        let (a, answer) = judge_attempt(
            "r",
            &RunEnd::Exited { code: 0 },
            "{\"x\":true}",
            "noise",
            None,
        );
        assert_eq!((a.ok, a.reason.as_str()), (true, "answered"));
        assert_eq!(answer, Some(obj(json!({"x": true}))));
    }

    #[test]
    fn a_cut_stdout_answers_only_from_whole_lines_and_says_it_was_cut() {
        let exited = RunEnd::Exited { code: 0 };
        let cut =
            |stdout: &str, stderr: &str| judge_attempt("r", &exited, stdout, stderr, Some(1024));
        let (a, answer) = cut("{\"bug\": true}\n", "");
        assert_eq!(answer, None, "the first line lost its start");
        assert_eq!(
            a.reason,
            "no JSON object line in stdout (output cut to the last 1024 bytes): {\"bug\": true}"
        );
        let (a, answer) = cut("rue}\n{\"bug\": false}\nbye\n", "warn");
        assert_eq!((a.ok, a.reason.as_str()), (true, "answered"));
        assert_eq!(answer, Some(obj(json!({"bug": false}))));
        let (a, _) = cut("", "");
        assert_eq!(
            a.reason,
            "no JSON object line in stdout (output cut to the last 1024 bytes)"
        );
    }

    #[test]
    fn nonzero_exit_never_answers_even_with_json() {
        let (a, answer) =
            judge_attempt("r", &RunEnd::Exited { code: 143 }, "{\"x\":true}", "", None);
        assert!(!a.ok && answer.is_none());
        assert_eq!(a.reason, "exit 143: {\"x\":true}");
    }

    #[test]
    fn clipping_keeps_the_label_and_the_end_in_code_points() {
        let detail = format!("start{}END", "é".repeat(400));
        let r = clip("exit 1", &detail);
        assert_eq!(r.chars().count(), REASON_MAX_CHARS);
        assert!(r.starts_with("exit 1: éé"));
        assert!(r.ends_with("END"));
        let exact = "x".repeat(REASON_MAX_CHARS - 8);
        assert_eq!(clip("exit 1", &exact), format!("exit 1: {exact}"));
    }

    #[test]
    fn numbers_print_like_people_write_them() {
        assert_eq!(human_number(60.0), "60");
        assert_eq!(human_number(1.5), "1.5");
        assert_eq!(human_number(0.25), "0.25");
        assert_eq!(human_number(600.0), "600");
    }

    #[test]
    fn all_true_rules() {
        let rule = HitRule::AllTrue(vec!["a".into(), "b".into()]);
        let d = decide(&rule, &obj(json!({"a": true, "b": true})));
        assert_eq!(
            (d.outcome, d.reason.as_str()),
            (Outcome::Hit, "all true: a, b")
        );
        let d = decide(&rule, &obj(json!({"a": true, "b": "true"})));
        assert_eq!(
            (d.outcome, d.reason.as_str()),
            (Outcome::Clean, "not true: b")
        );
        let d = decide(&rule, &obj(json!({"a": 1})));
        assert_eq!(d.reason, "not true: a, b");
        let d = decide(&HitRule::AllTrue(vec![]), &obj(json!({})));
        assert_eq!((d.outcome, d.reason.as_str()), (Outcome::Hit, "all true"));
    }

    #[test]
    fn any_true_rules() {
        let rule = HitRule::AnyTrue(vec![
            ("z".into(), "Z!".into()),
            ("m".into(), "M!".into()),
            ("a".into(), "A!".into()),
        ]);
        let d = decide(&rule, &obj(json!({"a": true, "z": true, "m": false})));
        assert_eq!(
            d,
            Decision {
                outcome: Outcome::Hit,
                reason: "any true: z, a".into(),
                on_hit: Some("Z!\nA!".into())
            }
        );
        let d = decide(&rule, &obj(json!({"a": "true"})));
        assert_eq!(
            d,
            Decision {
                outcome: Outcome::Clean,
                reason: "none true: z, m, a".into(),
                on_hit: None
            }
        );
    }

    #[test]
    fn no_answer_lists_attempts_and_keeps_the_end() {
        let a = |r: &str, why: &str| Attempt {
            runner: r.into(),
            ok: false,
            reason: why.into(),
            elapsed_ms: None,
            usage: None,
            cwd_refused: None,
        };
        assert_eq!(no_answer_reason(&[]), "no runner answered");
        assert_eq!(
            no_answer_reason(&[a("codex", "not installed"), a("claude", "exit 1: x")]),
            "no runner answered: codex: not installed; claude: exit 1: x"
        );
        let long = no_answer_reason(&[a("codex", &"y".repeat(400)), a("claude", "exit 1: tail")]);
        assert_eq!(long.chars().count(), REASON_MAX_CHARS);
        assert!(long.starts_with("no runner answered: y"));
        assert!(long.ends_with("claude: exit 1: tail"));
    }

    #[test]
    fn verdict_keys_are_in_spec_order() {
        let v = Verdict {
            id: "i".into(),
            hook: Value::Null,
            transcript: "".into(),
            outcome: Outcome::Clean,
            on_hit: Value::Null,
            reason: "r".into(),
            runner: None,
            answer: None,
            attempts: vec![],
            finished_at: 1.5,
            rule_id: None,
        };
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(
            text,
            r#"{"id":"i","hook":null,"transcript":"","outcome":"clean","on_hit":null,"reason":"r","runner":null,"answer":null,"attempts":[],"finished_at":1.5}"#
        );
    }

    /// The cases integrations/catstack/tests/test_judge.py also runs through the
    /// drop-in's `verdict()`, so the Python copy of this file's rules cannot drift.
    const SHARED_CASES: &str =
        include_str!("../../integrations/catstack/tests/fixtures/verdict_cases.json");

    #[test]
    fn the_shared_verdict_cases_hold() {
        let doc: Value = serde_json::from_str(SHARED_CASES).unwrap();
        let cases = doc["cases"].as_array().unwrap();
        assert!(cases.len() >= 10, "the shared cases file lost cases");
        let rules = crate::core::job::TimeoutRules {
            default_seconds: 60.0,
            max_seconds: 600.0,
        };
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let job = crate::core::job::parse_job(case["job"].to_string().as_bytes(), "x", rules)
                .unwrap_or_else(|e| panic!("{name}: {}", e.reason));
            let result = &case["result"];
            let answered = result["outcome"] == "answered";
            let answer = match (&result["answer"], result["runner"].as_str()) {
                (Value::Object(obj), Some(runner)) if answered => {
                    Some((runner.to_string(), obj.clone()))
                }
                _ => None,
            };
            let attempts: Vec<Attempt> =
                serde_json::from_value(result.get("attempts").cloned().unwrap_or(json!([])))
                    .unwrap();
            let mut got = serde_json::to_value(verdict_for(&job, answer, attempts, 1.0)).unwrap();
            assert_eq!(got["finished_at"], 1.0, "{name}");
            got.as_object_mut().unwrap().remove("finished_at");
            assert_eq!(got, case["verdict"], "{name}");
        }
    }
}
