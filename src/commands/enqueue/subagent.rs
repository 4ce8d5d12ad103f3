//! catstack's rule for helper agents' jobs (docs/reference.md, "The catstack drop-in"):
//! a job whose keys or transcript say it comes from a subagent is not queued.

use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value};

/// Why the job is a subagent job (catstack's rule, docs/reference.md, "The catstack
/// drop-in"), or `None`.
pub(super) fn subagent_reason(job: &Map<String, Value>) -> Option<String> {
    for key in ["agent_id", "isSidechain", "is_sidechain"] {
        if job.get(key).is_some_and(truthy) {
            return Some(format!("its {key} key is set"));
        }
    }
    let Some(Value::String(transcript)) = job.get("transcript") else {
        return None;
    };
    if transcript
        .replace('\\', "/")
        .split('/')
        .any(|part| part == "subagents")
    {
        return Some(format!(
            "transcript {transcript} is under a subagents folder"
        ));
    }
    subagent_first_line(Path::new(transcript))
        .then(|| format!("transcript {transcript} starts with a sidechain record"))
}

/// Python's truthiness, as catstack's `bool(...)` test reads a key.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The transcript's first line is a JSON object with `isSidechain: true` or a non-empty
/// `agent_id`; a read error counts as "not a subagent".
fn subagent_first_line(path: &Path) -> bool {
    use std::io::BufRead;
    // Only a regular file is read (a FIFO named as transcript must not block the hook).
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut line = Vec::new();
    // Bounded: a transcript with a huge first line is read only so far.
    if std::io::BufReader::new(file.take(1 << 20))
        .read_until(b'\n', &mut line)
        .is_err()
    {
        return false;
    }
    match serde_json::from_slice::<Value>(String::from_utf8_lossy(&line).trim().as_bytes()) {
        Ok(Value::Object(row)) => {
            row.get("isSidechain") == Some(&Value::Bool(true))
                || row.get("agent_id").is_some_and(truthy)
        }
        _ => false,
    }
}
