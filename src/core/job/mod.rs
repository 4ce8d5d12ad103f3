//! Job files: parsing and validation (docs/reference.md, "Job file"). Pure: no I/O.

// A bad job is rare: its error costs a copy of a few hundred bytes, not worth a Box.
#![allow(clippy::result_large_err)]

pub mod keys;
pub mod life;
pub mod prefix;
pub mod wire;

use serde_json::{Map, Value};
use thiserror::Error;

use crate::core::job::keys::{JOB_KEYS, KeyTypo, unknown_keys};

/// Which runner table a job asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The default table: classify text, no tools.
    Default,
    /// The investigate table: read-only runners that may read files.
    Investigate,
}

impl Mode {
    /// The name used in logs and config (`default` or `investigate`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Investigate => "investigate",
        }
    }
}

/// The outcome rule of a job (docs/reference.md, "Verdict file").
#[derive(Debug, Clone, PartialEq)]
pub enum HitRule {
    /// `hit` when every key is JSON `true`.
    AllTrue(Vec<String>),
    /// `hit` when any key is JSON `true`; each key carries its notice text.
    AnyTrue(Vec<(String, String)>),
}

/// Timeout rules from the config.
#[derive(Debug, Clone, Copy)]
pub struct TimeoutRules {
    /// Used when the job gives no usable timeout.
    pub default_seconds: f64,
    /// Upper cap.
    pub max_seconds: f64,
}

/// A valid job, ready to judge.
#[derive(Debug, Clone)]
pub struct Job {
    /// The job's id (the `id` key, else the file stem).
    pub id: String,
    /// The question.
    pub prompt: String,
    /// Runner table choice.
    pub mode: Mode,
    /// Set when `mode` held a value other than investigate/absent/null.
    pub mode_warning: Option<String>,
    /// Per-runner timeout in seconds, already defaulted and capped.
    pub timeout_seconds: f64,
    /// The raw `cwd` value; checked against the filesystem by the caller.
    pub cwd: Option<Value>,
    /// Decides the verdict folder.
    pub transcript: String,
    /// Copied to the verdict.
    pub hook: Value,
    /// Copied to the verdict (replaced by notices on an any-true hit).
    pub on_hit: Value,
    /// Copied to the verdict when a non-empty string.
    pub rule_id: Option<String>,
    /// How the answer becomes an outcome.
    pub rule: HitRule,
    /// Keys that are not job keys but look like a misspelt one (logged, ignored).
    pub typos: Vec<KeyTypo>,
}

impl JobError {
    /// The verdict's reason: `judge error: <problem>`.
    pub fn reason(&self) -> String {
        format!("judge error: {}", self.problem)
    }
}

impl Job {
    /// True when the job gives no key to check: every answer is a hit (catstack's rule).
    pub fn has_no_rule(&self) -> bool {
        matches!(&self.rule, HitRule::AllTrue(keys) if keys.is_empty())
    }
}

/// Why a job cannot be judged. Its verdict's reason is `judge error: <problem>`, the
/// prefix added once, by [`JobError::reason`].
#[derive(Debug, Clone, PartialEq, Error)]
pub enum JobProblem {
    #[error("job file is empty")]
    Empty,
    #[error("job file is not valid JSON: {0}")]
    NotJson(String),
    #[error("job file holds a JSON {0}, not an object")]
    NotObject(&'static str),
    #[error("bad \"id\" {id:?}: {why}")]
    BadId { id: String, why: String },
    #[error("bad \"id\": a {0}, not a string")]
    IdNotString(&'static str),
    #[error("missing \"prompt\"")]
    NoPrompt,
    #[error("\"prompt\" is a {0}, not a string")]
    PromptNotString(&'static str),
    #[error("\"transcript\" is a {0}, not a string")]
    TranscriptNotString(&'static str),
    #[error(transparent)]
    HitRule(#[from] HitRuleError),
    /// Found outside the file's content: it could not be read, it is too large, the
    /// runner table is bad, the job kept crashing the judge.
    #[error("{0}")]
    Judge(String),
}

/// A job that cannot be judged; it still gets an `unchecked` verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct JobError {
    /// What is wrong.
    pub problem: JobProblem,
    /// The verdict's id.
    pub id: String,
    /// The transcript when it was known and a string (else the `""` folder).
    pub transcript: String,
    /// Copied from the job when it was an object.
    pub hook: Value,
    /// Copied from the job when it was an object.
    pub on_hit: Value,
    /// Copied from the job when it was an object and a non-empty string.
    pub rule_id: Option<String>,
}

/// Parses job file bytes. `stem` is the file name without `.json`.
pub fn parse_job(bytes: &[u8], stem: &str, timeouts: TimeoutRules) -> Result<Job, JobError> {
    let bare = |problem: JobProblem| JobError {
        problem,
        id: stem.to_string(),
        transcript: String::new(),
        hook: Value::Null,
        on_hit: Value::Null,
        rule_id: None,
    };
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(bare(JobProblem::Empty));
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| bare(JobProblem::NotJson(e.to_string())))?;
    let Value::Object(obj) = value else {
        return Err(bare(JobProblem::NotObject(json_type(&value))));
    };
    job_from_object(obj, stem, timeouts)
}

/// True when `bytes` end before a JSON value does (empty, or a prefix such as
/// `{"prompt": "ab`): what a job file written in place looks like while its producer
/// is still writing it. Malformed JSON that is complete (`{nope}`, `NaN`) is not.
pub fn cut_short(bytes: &[u8]) -> bool {
    let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) else {
        return false;
    };
    if e.is_eof() {
        return true;
    }
    // A number cut short (`-`, `1.`, `1e+`) reads as invalid at the very last byte
    // (serde_json counts columns in bytes).
    let line_start = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let lines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
    let in_a_number = bytes
        .last()
        .is_some_and(|b| b.is_ascii_digit() || b"-+.eE".contains(b));
    in_a_number && e.line() == lines && e.column() == bytes.len() - line_start
}

/// The `unchecked` error for a job file that could not be read at all.
pub fn unreadable_job(stem: &str, problem: &str) -> JobError {
    JobError {
        problem: JobProblem::Judge(problem.to_string()),
        id: stem.to_string(),
        transcript: String::new(),
        hook: Value::Null,
        on_hit: Value::Null,
        rule_id: None,
    }
}

/// A job from an already parsed JSON object (a job file's, or a line of an eval
/// cases file); `stem` is the id when the object has none.
pub fn job_from_object(
    mut obj: Map<String, Value>,
    stem: &str,
    timeouts: TimeoutRules,
) -> Result<Job, JobError> {
    let typos = unknown_keys(obj.keys().map(String::as_str), &JOB_KEYS).typos;
    let hook = obj.remove("hook").unwrap_or(Value::Null);
    let on_hit = obj.remove("on_hit").unwrap_or(Value::Null);
    let rule_id = match obj.get("rule_id") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let transcript_value = obj.get("transcript").cloned().unwrap_or(Value::Null);
    let transcript = match &transcript_value {
        Value::String(s) => Some(s.clone()),
        _ => None,
    };
    let fail = |problem: JobProblem, id: &str| JobError {
        problem,
        id: id.to_string(),
        transcript: transcript.clone().unwrap_or_default(),
        hook: hook.clone(),
        on_hit: on_hit.clone(),
        rule_id: rule_id.clone(),
    };
    let id = match obj.get("id") {
        None | Some(Value::Null) => stem.to_string(),
        Some(Value::String(s)) => match check_id(s) {
            Ok(()) => s.clone(),
            Err(why) => {
                let bad = JobProblem::BadId {
                    id: s.clone(),
                    why: why.to_string(),
                };
                return Err(fail(bad, stem));
            }
        },
        Some(other) => return Err(fail(JobProblem::IdNotString(json_type(other)), stem)),
    };
    let prompt = match obj.get("prompt") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => return Err(fail(JobProblem::NoPrompt, &id)),
        Some(other) => return Err(fail(JobProblem::PromptNotString(json_type(other)), &id)),
    };
    if transcript.is_none() && !transcript_value.is_null() {
        let found = json_type(&transcript_value);
        return Err(fail(JobProblem::TranscriptNotString(found), &id));
    }
    let rule = hit_rule(&obj).map_err(|why| fail(why.into(), &id))?;
    let (mode, mode_warning) = mode_of(obj.get("mode"));
    Ok(Job {
        id,
        prompt,
        mode,
        mode_warning,
        timeout_seconds: timeout_of(obj.get("timeout_seconds"), timeouts),
        cwd: obj.get("cwd").cloned(),
        transcript: transcript.unwrap_or_default(),
        hook,
        on_hit,
        rule_id,
        rule,
        typos,
    })
}

/// Checks that an id is a plain file name.
pub fn check_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() {
        Err("it is empty")
    } else if id.contains('/') {
        Err("it contains '/'")
    } else if id.contains('\0') {
        Err("it contains a NUL byte")
    } else if id.starts_with('.') {
        Err("it starts with '.'")
    } else {
        Ok(())
    }
}

/// A hit rule of the wrong shape; names the key and the JSON type found.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HitRuleError {
    /// `hit_if_any_true` is not an object.
    #[error("\"hit_if_any_true\" is a {found}, not an object of key to notice text")]
    AnyNotObject { found: &'static str },
    /// A notice that is not a string.
    #[error("\"hit_if_any_true\" key {key:?} has a {found}, not a notice string")]
    NoticeNotString { key: String, found: &'static str },
    /// A key list item that is not a string.
    #[error("\"hit_if_all_true\" holds a {found}, not only strings")]
    KeyNotString { found: &'static str },
    /// `hit_if_all_true` is not a list.
    #[error("\"hit_if_all_true\" is a {found}, not a list of strings")]
    AllNotList { found: &'static str },
}

fn hit_rule(obj: &Map<String, Value>) -> Result<HitRule, HitRuleError> {
    if let Some(any) = obj.get("hit_if_any_true").filter(|v| !v.is_null()) {
        let Value::Object(map) = any else {
            return Err(HitRuleError::AnyNotObject {
                found: json_type(any),
            });
        };
        let mut pairs = Vec::with_capacity(map.len());
        for (key, notice) in map {
            let Value::String(text) = notice else {
                return Err(HitRuleError::NoticeNotString {
                    key: key.clone(),
                    found: json_type(notice),
                });
            };
            pairs.push((key.clone(), text.clone()));
        }
        return Ok(HitRule::AnyTrue(pairs));
    }
    match obj.get("hit_if_all_true") {
        None | Some(Value::Null) => Ok(HitRule::AllTrue(Vec::new())),
        Some(Value::Array(items)) => {
            let mut keys = Vec::with_capacity(items.len());
            for item in items {
                let Value::String(key) = item else {
                    return Err(HitRuleError::KeyNotString {
                        found: json_type(item),
                    });
                };
                keys.push(key.clone());
            }
            Ok(HitRule::AllTrue(keys))
        }
        Some(other) => Err(HitRuleError::AllNotList {
            found: json_type(other),
        }),
    }
}

fn mode_of(value: Option<&Value>) -> (Mode, Option<String>) {
    match value {
        None | Some(Value::Null) => (Mode::Default, None),
        Some(Value::String(s)) if s == "investigate" => (Mode::Investigate, None),
        Some(other) => (
            Mode::Default,
            Some(format!(
                "unknown \"mode\" {other}; using the default table (the only other mode is \"investigate\")"
            )),
        ),
    }
}

/// Applies the timeout rules (docs/reference.md, "Job file") to a raw `timeout_seconds` value.
pub fn timeout_of(value: Option<&Value>, rules: TimeoutRules) -> f64 {
    let Some(seconds) = value.and_then(Value::as_f64) else {
        return rules.default_seconds;
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        rules.default_seconds
    } else {
        seconds.min(rules.max_seconds)
    }
}

/// A JSON type name for error messages.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_prefix_is_cut_short_and_complete_bad_json_is_not() {
        let whole = "{\"prompt\": \"p \\u00e9 日\",\n \"hit_if_all_true\": [\"a\"], \"n\": -1.5e+3, \"t\": true, \"u\": null}";
        let whole = whole.as_bytes();
        assert!(!cut_short(whole));
        // Every proper prefix of a job (what a reader sees mid-write) is cut short.
        for end in 0..whole.len() {
            assert!(
                cut_short(&whole[..end]),
                "{:?}",
                String::from_utf8_lossy(&whole[..end])
            );
        }
        assert!(cut_short(b"  \n"));
        for complete in [
            &b"{nope}"[..],
            b"{\"a\": NaN}",
            b"[1]",
            b"{} {",
            b"{\"a\": 1}}",
            b"{\"a\": 1.}",
            b"{\"a\":\n 1.}",
        ] {
            assert!(
                !cut_short(complete),
                "{:?}",
                String::from_utf8_lossy(complete)
            );
        }
    }

    const RULES: TimeoutRules = TimeoutRules {
        default_seconds: 60.0,
        max_seconds: 600.0,
    };

    fn parse(text: &str) -> Result<Job, JobError> {
        parse_job(text.as_bytes(), "stem", RULES)
    }

    fn error(text: &str) -> JobError {
        match parse(text) {
            Ok(job) => panic!("expected an error, got {job:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn minimal_job_takes_defaults() {
        let job = parse(r#"{"prompt": "is it?"}"#).unwrap();
        assert_eq!(job.id, "stem");
        assert_eq!(job.mode, Mode::Default);
        assert_eq!(job.timeout_seconds, 60.0);
        assert_eq!(job.transcript, "");
        assert_eq!(job.rule, HitRule::AllTrue(vec![]));
        assert!(job.mode_warning.is_none());
    }

    #[test]
    fn full_job_keeps_every_key() {
        let job = parse(
            r#"{"prompt":"p","id":"abc","mode":"investigate","timeout_seconds":1.5,
            "cwd":"/tmp","transcript":"/t.jsonl","hook":{"h":1},"on_hit":"say",
            "rule_id":"r1","hit_if_all_true":["a","b"]}"#,
        )
        .unwrap();
        assert_eq!(job.id, "abc");
        assert_eq!(job.mode, Mode::Investigate);
        assert_eq!(job.timeout_seconds, 1.5);
        assert_eq!(job.cwd, Some(Value::String("/tmp".into())));
        assert_eq!(job.transcript, "/t.jsonl");
        assert_eq!(job.hook, serde_json::json!({"h": 1}));
        assert_eq!(job.on_hit, Value::String("say".into()));
        assert_eq!(job.rule_id.as_deref(), Some("r1"));
        assert_eq!(job.rule, HitRule::AllTrue(vec!["a".into(), "b".into()]));
    }

    #[test]
    fn any_true_wins_and_keeps_key_order() {
        let job = parse(
            r#"{"prompt":"p","hit_if_all_true":["x"],"hit_if_any_true":{"z":"Z!","a":"A!"}}"#,
        )
        .unwrap();
        assert_eq!(
            job.rule,
            HitRule::AnyTrue(vec![("z".into(), "Z!".into()), ("a".into(), "A!".into())])
        );
    }

    #[test]
    fn timeouts_follow_the_rules() {
        let t = |v: &str| {
            parse(&format!(r#"{{"prompt":"p","timeout_seconds":{v}}}"#))
                .unwrap()
                .timeout_seconds
        };
        assert_eq!(t("10"), 10.0);
        assert_eq!(t("0.25"), 0.25);
        assert_eq!(t("601"), 600.0);
        assert_eq!(t("1e300"), 600.0);
        for bad in ["0", "-3", "null", "true", "\"30\"", "[1]", "{}"] {
            assert_eq!(t(bad), 60.0, "timeout_seconds {bad}");
        }
    }

    #[test]
    fn unknown_mode_warns_and_uses_default() {
        let job = parse(r#"{"prompt":"p","mode":"write"}"#).unwrap();
        assert_eq!(job.mode, Mode::Default);
        assert!(job.mode_warning.unwrap().contains("\"write\""));
        let job = parse(r#"{"prompt":"p","mode":null}"#).unwrap();
        assert!(job.mode_warning.is_none());
    }

    #[test]
    fn empty_rule_id_is_dropped() {
        assert_eq!(
            parse(r#"{"prompt":"p","rule_id":""}"#).unwrap().rule_id,
            None
        );
        assert_eq!(
            parse(r#"{"prompt":"p","rule_id":7}"#).unwrap().rule_id,
            None
        );
    }

    #[test]
    fn file_level_errors_have_no_transcript() {
        for (text, words) in [
            ("", "empty"),
            ("  \n", "empty"),
            ("{", "not valid JSON"),
            ("{\"prompt\": NaN}", "not valid JSON"),
            ("[1]", "a JSON list, not an object"),
            ("\"x\"", "a JSON string, not an object"),
        ] {
            let e = error(text);
            assert!(e.reason().starts_with("judge error"), "{}", e.reason());
            assert!(e.reason().contains(words), "{text:?}: {}", e.reason());
            assert_eq!(e.transcript, "");
            assert_eq!(e.id, "stem");
        }
    }

    #[test]
    fn object_errors_keep_the_transcript() {
        for (text, words) in [
            (r#"{"transcript":"T"}"#, "missing \"prompt\""),
            (r#"{"transcript":"T","prompt":5}"#, "\"prompt\" is a number"),
            (
                r#"{"transcript":"T","prompt":"p","id":"a/b"}"#,
                "contains '/'",
            ),
            (
                r#"{"transcript":"T","prompt":"p","id":".x"}"#,
                "starts with '.'",
            ),
            (r#"{"transcript":"T","prompt":"p","id":"a\u0000b"}"#, "NUL"),
            (r#"{"transcript":"T","prompt":"p","id":""}"#, "empty"),
            (
                r#"{"transcript":"T","prompt":"p","id":3}"#,
                "bad \"id\": a number",
            ),
            (
                r#"{"transcript":"T","prompt":"p","hit_if_all_true":"a"}"#,
                "hit_if_all_true",
            ),
            (
                r#"{"transcript":"T","prompt":"p","hit_if_all_true":[1]}"#,
                "hit_if_all_true",
            ),
            (
                r#"{"transcript":"T","prompt":"p","hit_if_any_true":["a"]}"#,
                "hit_if_any_true",
            ),
            (
                r#"{"transcript":"T","prompt":"p","hit_if_any_true":{"a":1}}"#,
                "hit_if_any_true",
            ),
        ] {
            let e = error(text);
            assert!(e.reason().starts_with("judge error: "), "{}", e.reason());
            assert!(e.reason().contains(words), "{text}: {}", e.reason());
            assert_eq!(e.transcript, "T", "{text}");
        }
    }

    #[test]
    fn non_string_transcript_goes_to_the_empty_folder() {
        let e = error(r#"{"prompt":"p","transcript":42,"hook":"h"}"#);
        assert!(
            e.reason().contains("\"transcript\" is a number"),
            "{}",
            e.reason()
        );
        assert_eq!(e.transcript, "");
        assert_eq!(e.hook, Value::String("h".into()));
    }

    #[test]
    fn duplicate_keys_and_deep_nesting_never_panic() {
        let job = parse(r#"{"prompt":"a","prompt":"b"}"#).unwrap();
        assert_eq!(job.prompt, "b");
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(error(&deep).reason().contains("not valid JSON"));
    }
}
