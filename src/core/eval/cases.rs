//! The cases of `llm-judge eval`'s CASES.jsonl: one JSON object per line, a job plus
//! the outcome it should get. Cases are written by hand and new, so they are held to
//! more than a job file: only job keys and `expect`, a known `mode`, a rule naming a
//! key of the answer. Pure: the file is read (bounded per line) by `commands::eval`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;

use crate::core::hooks::jobs::job_for;
use crate::core::hooks::rules::Rule;
use crate::core::job::keys::{JOB_KEYS, unknown_keys};
use crate::core::job::{HitRule, Job, TimeoutRules, job_from_object, json_type};
use crate::core::verdict::Outcome;

/// What a case should be judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    /// The rule should match.
    Hit,
    /// A runner should answer and the rule should not match.
    Clean,
}

impl Expect {
    /// True when `outcome` is what was expected (`unchecked` never is).
    pub fn met_by(self, outcome: Outcome) -> bool {
        matches!(
            (self, outcome),
            (Expect::Hit, Outcome::Hit) | (Expect::Clean, Outcome::Clean)
        )
    }
}

/// One line of a cases file.
#[derive(Debug, Clone)]
pub struct Case {
    /// The job, parsed as a job file is (`id` defaults to `line-<N>`).
    pub job: Job,
    /// The outcome it should get.
    pub expect: Expect,
}

/// A line of a cases file that cannot be a case, or a file with none; each says how
/// to fix it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CaseError {
    /// Not JSON (serde's message, with the column).
    #[error(
        "line {line}: not valid JSON ({message}); write each case as one JSON object on one line"
    )]
    NotJson { line: usize, message: String },
    /// JSON, but not an object.
    #[error(
        "line {line}: a JSON {found}, not an object; write each case as one JSON object on one line"
    )]
    NotObject { line: usize, found: &'static str },
    /// Keys that are neither job keys nor `expect` (each with the key it resembles).
    #[error("line {line}: {}", unknown_text(keys))]
    UnknownKeys {
        line: usize,
        keys: Vec<(String, Option<&'static str>)>,
    },
    /// A `mode` other than `"investigate"` (a job would fall back to the default table).
    #[error("line {line}: \"mode\" is {found}; give \"investigate\" or leave \"mode\" out")]
    BadMode { line: usize, found: String },
    /// No key of the answer decides the outcome: every answer would be a hit (or, with
    /// an empty `hit_if_any_true`, clean).
    #[error(
        "line {line}: no rule names a key of the answer, so the answer cannot change the \
         outcome; add \"hit_if_all_true\": [\"key\"] or \"hit_if_any_true\": \
         {{\"key\": \"notice\"}}"
    )]
    NoRule { line: usize },
    /// Longer than `max_job_bytes` (read no further than that).
    #[error(
        "line {line}: longer than max_job_bytes ({max} bytes), the most a job file may hold; \
         shorten the case or raise max_job_bytes"
    )]
    TooLong { line: usize, max: u64 },
    /// No `expect` key.
    #[error("line {line}: no \"expect\"; add \"expect\": \"hit\" or \"expect\": \"clean\"")]
    NoExpect { line: usize },
    /// An `expect` other than `"hit"` or `"clean"`.
    #[error("line {line}: \"expect\" is {found}; give \"hit\" or \"clean\"")]
    BadExpect { line: usize, found: String },
    /// A job the job parser refuses (its reason, without `judge error: `).
    #[error("line {line}: {problem}; fix it as in a job file (docs/reference.md, \"Job file\")")]
    BadJob { line: usize, problem: String },
    /// Two cases with one id: the wrongly judged ones are named by id.
    #[error("line {line}: id {id:?} is line {first}'s too; give each case its own \"id\"")]
    DuplicateId {
        line: usize,
        id: String,
        first: usize,
    },
    /// A rule case (`eval --rules`) naming no rule of the rules file.
    #[error("line {line}: no rule named {name:?} in the rules file; the rules: {known}")]
    UnknownRule {
        line: usize,
        name: String,
        known: String,
    },
    /// A rule case without its reply.
    #[error("line {line}: no \"reply\" string; give the agent's reply to judge")]
    NoReply { line: usize },
    /// Bad lines past the first `ERRORS_KEPT`, counted only.
    #[error("and {count} more bad lines")]
    More { count: usize },
    /// Only blank lines.
    #[error(
        "no cases (every line is blank); write one JSON object per line, each with an \"expect\""
    )]
    NoCases,
}

/// Bad lines kept with their message; the rest are counted (`CaseError::More`), so a
/// file of the wrong format costs no memory per line.
pub const ERRORS_KEPT: usize = 20;

/// The cases of a file read one line at a time: every bad line is reported (so one
/// edit fixes them all); any bad line means no case runs.
pub struct CaseReader {
    timeouts: TimeoutRules,
    /// `eval --rules`: each line is a rule case, judged as its rule's job; a relative
    /// `cwd` is taken from the folder given with the rules (the cases file's).
    rules: Option<(Vec<Rule>, PathBuf)>,
    cases: Vec<Case>,
    errors: Vec<CaseError>,
    more: usize,
    ids: HashMap<String, usize>,
}

impl CaseReader {
    /// A reader whose jobs take `timeouts`.
    pub fn new(timeouts: TimeoutRules) -> Self {
        CaseReader {
            timeouts,
            rules: None,
            cases: Vec::new(),
            errors: Vec::new(),
            more: 0,
            ids: HashMap::new(),
        }
    }

    /// A reader of rule cases (`eval --rules`): each line `{"rule", "reply", "user"?,
    /// "cwd"?, "id"?, "expect"}` becomes the job `rule` asks about that reply; a relative
    /// `cwd` is inside `base` (the cases file's folder).
    pub fn with_rules(mut self, rules: Vec<Rule>, base: PathBuf) -> Self {
        self.rules = Some((rules, base));
        self
    }

    /// Line `line` (1-based; its newline may be left on); blank lines are skipped.
    pub fn line(&mut self, line: usize, bytes: &[u8]) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let parsed = match &self.rules {
            Some((rules, base)) => rule_case(bytes, line, rules, base).and_then(|obj| {
                parse_case(
                    Value::Object(obj).to_string().as_bytes(),
                    line,
                    self.timeouts,
                )
            }),
            None => parse_case(bytes, line, self.timeouts),
        };
        match parsed {
            Ok(case) => match self.ids.get(&case.job.id) {
                Some(&first) => self.error(CaseError::DuplicateId {
                    line,
                    id: case.job.id,
                    first,
                }),
                None => {
                    self.ids.insert(case.job.id.clone(), line);
                    self.cases.push(case);
                }
            },
            Err(e) => self.error(e),
        }
    }

    /// Line `line` was longer than `max` bytes (and was not read whole).
    pub fn too_long(&mut self, line: usize, max: u64) {
        self.error(CaseError::TooLong { line, max });
    }

    fn error(&mut self, e: CaseError) {
        if self.errors.len() < ERRORS_KEPT {
            self.errors.push(e);
        } else {
            self.more += 1;
        }
    }

    /// The cases, or every bad line (at most `ERRORS_KEPT`, then `More`).
    pub fn finish(mut self) -> Result<Vec<Case>, Vec<CaseError>> {
        if self.errors.is_empty() && self.cases.is_empty() {
            self.errors.push(CaseError::NoCases);
        }
        if self.more > 0 {
            self.errors.push(CaseError::More { count: self.more });
        }
        if self.errors.is_empty() {
            Ok(self.cases)
        } else {
            Err(self.errors)
        }
    }
}

/// Parses a whole cases file held in memory (see `CaseReader`).
#[cfg(test)]
pub(crate) fn parse_cases(
    text: &[u8],
    timeouts: TimeoutRules,
) -> Result<Vec<Case>, Vec<CaseError>> {
    let mut reader = CaseReader::new(timeouts);
    for (index, bytes) in text.split(|&b| b == b'\n').enumerate() {
        reader.line(index + 1, bytes);
    }
    reader.finish()
}

fn parse_case(bytes: &[u8], line: usize, timeouts: TimeoutRules) -> Result<Case, CaseError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| CaseError::NotJson {
        line,
        message: json_message(&e),
    })?;
    let Value::Object(mut obj) = value else {
        return Err(CaseError::NotObject {
            line,
            found: json_type(&value),
        });
    };
    let unknown = unknown_keys(obj.keys().map(String::as_str), &CASE_KEYS);
    if !unknown.typos.is_empty() || !unknown.others.is_empty() {
        let mut keys: Vec<(String, Option<&'static str>)> = unknown
            .typos
            .into_iter()
            .map(|t| (t.key, Some(t.resembles)))
            .collect();
        keys.extend(unknown.others.into_iter().map(|k| (k, None)));
        return Err(CaseError::UnknownKeys { line, keys });
    }
    let expect = match obj.remove("expect") {
        None => return Err(CaseError::NoExpect { line }),
        Some(Value::String(s)) if s == "hit" => Expect::Hit,
        Some(Value::String(s)) if s == "clean" => Expect::Clean,
        Some(other) => {
            return Err(CaseError::BadExpect {
                line,
                found: other.to_string(),
            });
        }
    };
    match obj.get("mode") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "investigate" => {}
        Some(other) => {
            return Err(CaseError::BadMode {
                line,
                found: other.to_string(),
            });
        }
    }
    let job =
        job_from_object(obj, &format!("line-{line}"), timeouts).map_err(|e| CaseError::BadJob {
            line,
            problem: e.problem.to_string(),
        })?;
    let no_key = match &job.rule {
        HitRule::AllTrue(keys) => keys.is_empty(),
        HitRule::AnyTrue(pairs) => pairs.is_empty(),
    };
    if no_key {
        return Err(CaseError::NoRule { line });
    }
    Ok(Case { job, expect })
}

/// The keys of a rule case.
const RULE_CASE_KEYS: [&str; 6] = ["rule", "reply", "user", "cwd", "id", "expect"];

/// A rule case as the case its rule's job makes (the job keys and `expect`).
fn rule_case(
    bytes: &[u8],
    line: usize,
    rules: &[Rule],
    base: &Path,
) -> Result<Map<String, Value>, CaseError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| CaseError::NotJson {
        line,
        message: json_message(&e),
    })?;
    let Value::Object(obj) = value else {
        return Err(CaseError::NotObject {
            line,
            found: json_type(&value),
        });
    };
    let unknown = unknown_keys(obj.keys().map(String::as_str), &RULE_CASE_KEYS);
    if !unknown.typos.is_empty() || !unknown.others.is_empty() {
        let mut keys: Vec<(String, Option<&'static str>)> = unknown
            .typos
            .into_iter()
            .map(|t| (t.key, Some(t.resembles)))
            .collect();
        keys.extend(unknown.others.into_iter().map(|k| (k, None)));
        return Err(CaseError::UnknownKeys { line, keys });
    }
    let name = obj.get("rule").and_then(Value::as_str).unwrap_or_default();
    let Some(rule) = rules.iter().find(|r| r.name == name) else {
        let known: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        return Err(CaseError::UnknownRule {
            line,
            name: name.to_string(),
            known: known.join(", "),
        });
    };
    let Some(reply) = obj.get("reply").and_then(Value::as_str) else {
        return Err(CaseError::NoReply { line });
    };
    let user = obj.get("user").and_then(Value::as_str);
    let cwd = obj
        .get("cwd")
        .and_then(Value::as_str)
        .map(|dir| base.join(dir).to_string_lossy().into_owned());
    let mut case = job_for(rule, reply, user, cwd.as_deref()).object();
    for key in ["id", "expect"] {
        if let Some(value) = obj.get(key) {
            case.insert(key.into(), value.clone());
        }
    }
    Ok(case)
}

/// The keys a case may hold: a job's and `expect`.
const CASE_KEYS: [&str; 12] = {
    let mut keys = [""; 12];
    let mut i = 0;
    while i < JOB_KEYS.len() {
        keys[i] = JOB_KEYS[i];
        i += 1;
    }
    keys[JOB_KEYS.len()] = "expect";
    keys
};

/// `"hit_if_all_ture" is not a case key (did you mean "hit_if_all_true"?)`, for each.
fn unknown_text(keys: &[(String, Option<&'static str>)]) -> String {
    let each: Vec<String> = keys
        .iter()
        .map(|(key, resembles)| match resembles {
            Some(known) => format!("{key:?} is not a case key (did you mean {known:?}?)"),
            None => format!("{key:?} is not a case key"),
        })
        .collect();
    format!(
        "{}; a case holds only the keys of a job file and \"expect\" ({}, expect)",
        each.join(", "),
        JOB_KEYS.join(", ")
    )
}

/// serde's message with its own position given as a column: the file's line is
/// already named, and serde counts lines within the one line it was given.
fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let bare = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(m, _)| m);
    format!("{bare} at column {}", e.column())
}

#[cfg(test)]
#[path = "cases_tests.rs"]
mod tests;
