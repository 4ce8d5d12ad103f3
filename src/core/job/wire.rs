//! A job file as clients write it. [`JobFile`] is made only from bytes the judge's own
//! parser accepts (`parse_job`, on the very bytes written), so what `enqueue` or a hook
//! writes is what the daemon reads; [`JobRequest`] is a job asked with typed keys (a hook's rule),
//! written as that object. Pure: `store::protocol` publishes the bytes.

use serde_json::{Map, Value, json};

use super::{Job, JobError, Mode, TimeoutRules};

/// A job file's content, valid by construction.
#[derive(Debug, Clone)]
pub struct JobFile {
    /// The object as compact JSON, serialized once.
    bytes: Vec<u8>,
    job: Job,
}

impl JobFile {
    /// `object` as a job file, when the judge reads it as a job (its `id`, when a
    /// string, is the file's name; else `stem` is).
    pub fn new(
        object: Map<String, Value>,
        stem: &str,
        timeouts: TimeoutRules,
    ) -> Result<JobFile, JobError> {
        let bytes = Value::Object(object).to_string().into_bytes();
        let job = super::parse_job(&bytes, stem, timeouts)?;
        Ok(JobFile { bytes, job })
    }

    /// The job's id (and its file's name).
    pub fn id(&self) -> &str {
        &self.job.id
    }

    /// The job as the daemon will read it.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The file's bytes: the object as compact JSON.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// A job asked with typed keys, each optional: written over a base object (`enqueue
/// --json`), or as the whole object (a hook's rule).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobRequest {
    pub id: Option<String>,
    pub prompt: Option<String>,
    pub transcript: Option<String>,
    pub hook: Option<String>,
    pub rule_id: Option<String>,
    pub hit_if_all_true: Option<Vec<String>>,
    /// Keys and their notices (wins over `hit_if_all_true` when both are given).
    pub hit_if_any_true: Option<Vec<(String, String)>>,
    pub on_hit: Option<String>,
    /// `Investigate` writes `"mode": "investigate"`; `Default` writes nothing.
    pub mode: Option<Mode>,
    pub cwd: Option<String>,
    pub timeout_seconds: Option<f64>,
}

impl JobRequest {
    /// `base` with each key this request gives set.
    pub fn over(&self, mut base: Map<String, Value>) -> Map<String, Value> {
        let mut set = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                base.insert(key.into(), value);
            }
        };
        let text = |value: &Option<String>| value.as_ref().map(|v| json!(v));
        set("id", text(&self.id));
        set("prompt", text(&self.prompt));
        set("transcript", text(&self.transcript));
        set("hook", text(&self.hook));
        set("rule_id", text(&self.rule_id));
        set(
            "hit_if_all_true",
            self.hit_if_all_true.as_ref().map(|k| json!(k)),
        );
        set(
            "hit_if_any_true",
            self.hit_if_any_true.as_ref().map(|pairs| {
                Value::Object(pairs.iter().map(|(k, n)| (k.clone(), json!(n))).collect())
            }),
        );
        set("on_hit", text(&self.on_hit));
        set(
            "mode",
            (self.mode == Some(Mode::Investigate)).then(|| json!("investigate")),
        );
        set("cwd", text(&self.cwd));
        set("timeout_seconds", self.timeout_seconds.map(|t| json!(t)));
        base
    }

    /// The job object of this request alone.
    pub fn object(&self) -> Map<String, Value> {
        self.over(Map::new())
    }

    /// The job file of this request alone.
    pub fn file(&self, timeouts: TimeoutRules) -> Result<JobFile, JobError> {
        JobFile::new(self.object(), self.id.as_deref().unwrap_or(""), timeouts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::job::HitRule;

    const TIMEOUTS: TimeoutRules = TimeoutRules {
        default_seconds: 60.0,
        max_seconds: 600.0,
    };

    /// What a request says is what the daemon reads from its file.
    #[test]
    fn a_request_is_read_back_as_it_was_asked() {
        for (rule, mode) in [
            (HitRule::AllTrue(vec!["bad".into()]), Mode::Default),
            (
                HitRule::AnyTrue(vec![("fake".into(), "Not real.".into())]),
                Mode::Investigate,
            ),
        ] {
            let (all, any) = match &rule {
                HitRule::AllTrue(keys) => (Some(keys.clone()), None),
                HitRule::AnyTrue(pairs) => (None, Some(pairs.clone())),
            };
            let request = JobRequest {
                id: Some("hook-1".into()),
                prompt: Some("q".into()),
                transcript: Some("codex:s1".into()),
                hook: Some("llm-judge hook codex".into()),
                rule_id: Some("tests".into()),
                on_hit: all.is_some().then(|| "Run them.".into()),
                hit_if_all_true: all,
                hit_if_any_true: any,
                mode: Some(mode),
                cwd: (mode == Mode::Investigate).then(|| "/w".into()),
                timeout_seconds: Some(30.0),
            };
            let file = request.file(TIMEOUTS).unwrap();
            let again = super::super::parse_job(file.bytes(), "other", TIMEOUTS).unwrap();
            assert_eq!(again.id, "hook-1");
            assert_eq!(again.prompt, "q");
            assert_eq!(again.transcript, "codex:s1");
            assert_eq!(again.rule, rule);
            assert_eq!(again.mode, mode);
            assert_eq!(again.rule_id.as_deref(), Some("tests"));
            assert_eq!(again.timeout_seconds, 30.0);
            assert_eq!(again.cwd, (mode == Mode::Investigate).then(|| json!("/w")));
            assert!(again.typos.is_empty() && !again.has_no_rule());
        }
    }

    #[test]
    fn an_object_the_judge_refuses_is_no_job_file() {
        let mut object = Map::new();
        object.insert("prompt".into(), json!(5));
        let e = JobFile::new(object, "x", TIMEOUTS).unwrap_err();
        assert_eq!(
            e.problem.to_string(),
            "\"prompt\" is a number, not a string"
        );
    }
}
