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
            problem: e
                .reason
                .strip_prefix("judge error: ")
                .unwrap_or(&e.reason)
                .to_string(),
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
    let mut case = job_for(rule, reply, user, cwd.as_deref());
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
mod tests {
    use super::*;

    /// The shipped example rules and their labelled case files read as eval cases:
    /// every rule has cases of both outcomes, and each case is its rule's job.
    #[test]
    fn the_shipped_example_rules_have_cases_eval_reads() {
        let rules =
            crate::core::hooks::rules::parse_rules(include_str!("../../../rules/examples.toml"))
                .expect("rules/examples.toml");
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/cases");
        let timeouts = TimeoutRules {
            default_seconds: 60.0,
            max_seconds: 600.0,
        };
        for rule in &rules {
            assert!(!rule.enabled, "{}: shipped examples start off", rule.name);
            let path = base.join(format!("{}.jsonl", rule.name));
            let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut reader = CaseReader::new(timeouts).with_rules(rules.clone(), base.clone());
            for (i, line) in text.split(|&b| b == b'\n').enumerate() {
                reader.line(i + 1, line);
            }
            let cases = reader
                .finish()
                .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
            let expects: Vec<Expect> = cases.iter().map(|c| c.expect).collect();
            assert!(
                expects.contains(&Expect::Hit) && expects.contains(&Expect::Clean),
                "{}",
                rule.name
            );
            for case in &cases {
                assert_eq!(case.job.rule_id.as_deref(), Some(rule.name.as_str()));
                assert_eq!(case.job.mode, rule.mode);
                if let Some(Value::String(cwd)) = &case.job.cwd {
                    assert!(Path::new(cwd).is_dir(), "{}: {cwd}", case.job.id);
                }
            }
        }
        // A rule case names a rule of the file and carries its reply.
        let mut reader = CaseReader::new(timeouts).with_rules(rules, base);
        reader.line(1, br#"{"rule": "nope", "reply": "r", "expect": "hit"}"#);
        reader.line(2, br#"{"rule": "gives-up-early", "expect": "hit"}"#);
        reader.line(
            3,
            br#"{"rule": "gives-up-early", "reply": "r", "expect": "hit", "repyl": 1}"#,
        );
        let errors: Vec<String> = reader
            .finish()
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert!(errors[0].contains("no rule named \"nope\""), "{errors:?}");
        assert!(errors[1].contains("no \"reply\""), "{errors:?}");
        assert!(errors[2].contains("repyl"), "{errors:?}");
    }
    use crate::core::job::Mode;

    const RULES: TimeoutRules = TimeoutRules {
        default_seconds: 60.0,
        max_seconds: 600.0,
    };

    fn parse(text: &str) -> Result<Vec<Case>, Vec<CaseError>> {
        parse_cases(text.as_bytes(), RULES)
    }

    fn errors(text: &str) -> Vec<String> {
        match parse(text) {
            Ok(cases) => panic!("expected errors, got {} cases", cases.len()),
            Err(e) => e.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn cases_parse_as_jobs_with_expect_and_line_ids() {
        let text = "\n{\"prompt\": \"a?\", \"expect\": \"hit\", \"hit_if_all_true\": [\"a\"]}\n  \r\n{\"prompt\": \"b?\", \"id\": \"bee\", \"expect\": \"clean\", \"mode\": \"investigate\", \"timeout_seconds\": 9000, \"hit_if_any_true\": {\"b\": \"B\"}}\n";
        let cases = parse(text).unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(
            (cases[0].job.id.as_str(), cases[0].expect),
            ("line-2", Expect::Hit)
        );
        assert_eq!(
            cases[0].job.rule,
            crate::core::job::HitRule::AllTrue(vec!["a".into()])
        );
        assert_eq!(
            (cases[1].job.id.as_str(), cases[1].expect),
            ("bee", Expect::Clean)
        );
        assert_eq!(cases[1].job.mode, Mode::Investigate);
        assert_eq!(
            cases[1].job.timeout_seconds, 600.0,
            "the job's timeout rules"
        );
    }

    #[test]
    fn every_bad_line_is_named_with_its_fix() {
        let text = [
            r#"{"prompt": "ok", "expect": "hit", "hit_if_all_true": ["k"]}"#,
            r#"{"prompt": "x", "expect": "hit""#,
            r#"["prompt"]"#,
            r#"{"prompt": "no expect"}"#,
            r#"{"prompt": "p", "expect": "yes"}"#,
            r#"{"prompt": "p", "expect": true}"#,
            r#"{"expect": "clean"}"#,
            r#"{"prompt": "p", "expect": "clean", "hit_if_all_true": "k"}"#,
            r#"{"prompt": "p", "expect": "clean", "id": "line-1", "hit_if_all_true": ["k"]}"#,
            r#"{"prompt": "p", "expect": "clean", "id": "a/b"}"#,
        ]
        .join("\n");
        let e = errors(&text);
        assert_eq!(e.len(), 9, "{e:#?}");
        assert!(e[0].starts_with("line 2: not valid JSON ("), "{}", e[0]);
        assert!(e[0].contains("at column"), "{}", e[0]);
        assert!(!e[0].contains("at line"), "{}", e[0]);
        assert!(e[0].contains("one JSON object on one line"), "{}", e[0]);
        assert!(
            e[1].starts_with("line 3: a JSON list, not an object"),
            "{}",
            e[1]
        );
        assert!(
            e[2].starts_with("line 4: no \"expect\"; add \"expect\": \"hit\""),
            "{}",
            e[2]
        );
        assert!(
            e[3].starts_with("line 5: \"expect\" is \"yes\"; give \"hit\" or \"clean\""),
            "{}",
            e[3]
        );
        assert!(e[4].starts_with("line 6: \"expect\" is true;"), "{}", e[4]);
        assert!(
            e[5].starts_with("line 7: missing \"prompt\"; fix it as in a job file"),
            "{}",
            e[5]
        );
        assert!(
            e[6].starts_with("line 8: \"hit_if_all_true\" is a string"),
            "{}",
            e[6]
        );
        assert!(
            e[7].starts_with("line 9: id \"line-1\" is line 1's too; give each case its own"),
            "{}",
            e[7]
        );
        assert!(e[8].starts_with("line 10: bad \"id\" \"a/b\""), "{}", e[8]);
    }

    #[test]
    fn a_file_of_blank_lines_has_no_cases() {
        assert_eq!(errors("\n  \n"), [CaseError::NoCases.to_string()]);
        assert!(errors("").len() == 1);
    }

    #[test]
    fn a_case_holds_only_job_keys_and_expect_with_a_known_mode_and_a_rule() {
        let text = [
            r#"{"prompt": "p", "expect": "hit", "hit_if_all_ture": ["k"]}"#,
            r#"{"prompt": "p", "expect": "hit", "hit_if_all_true": ["k"], "harness": "x", "expcet": "hit"}"#,
            r#"{"prompt": "p", "expect": "hit", "hit_if_all_true": ["k"], "mode": "investgate"}"#,
            r#"{"prompt": "p", "expect": "hit"}"#,
            r#"{"prompt": "p", "expect": "hit", "hit_if_all_true": []}"#,
            r#"{"prompt": "p", "expect": "clean", "hit_if_any_true": {}}"#,
            r#"{"prompt": "p", "expect": "hit", "hit_if_all_true": ["k"], "mode": null}"#,
        ]
        .join("\n");
        let e = errors(&text);
        assert_eq!(e.len(), 6, "{e:#?}");
        assert!(
            e[0].starts_with(
                "line 1: \"hit_if_all_ture\" is not a case key (did you mean \"hit_if_all_true\"?); a case holds only the keys of a job file and \"expect\" (prompt, id,"
            ),
            "{}",
            e[0]
        );
        assert!(
            e[1].starts_with(
                "line 2: \"expcet\" is not a case key (did you mean \"expect\"?), \"harness\" is not a case key;"
            ),
            "{}",
            e[1]
        );
        assert_eq!(
            e[2],
            "line 3: \"mode\" is \"investgate\"; give \"investigate\" or leave \"mode\" out"
        );
        for (i, line) in [(3, 4), (4, 5), (5, 6)] {
            assert!(
                e[i].starts_with(&format!(
                    "line {line}: no rule names a key of the answer, so the answer cannot change the outcome; add \"hit_if_all_true\""
                )),
                "{}",
                e[i]
            );
        }
    }

    #[test]
    fn a_long_line_and_many_bad_lines_are_reported_in_bounded_space() {
        let mut reader = CaseReader::new(RULES);
        reader.too_long(1, 10);
        for line in 2..100 {
            reader.line(line, b"not json");
        }
        let Err(e) = reader.finish() else {
            panic!("expected errors")
        };
        assert_eq!(e.len(), ERRORS_KEPT + 1);
        assert_eq!(
            e[0].to_string(),
            "line 1: longer than max_job_bytes (10 bytes), the most a job file may hold; shorten the case or raise max_job_bytes"
        );
        assert_eq!(e[ERRORS_KEPT].to_string(), "and 79 more bad lines");
    }
}
