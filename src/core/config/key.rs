//! Which key a config error is about: when the merged config does not deserialise,
//! the file's keys and the `--set` flags are laid over the embedded default one at a
//! time until one fails; the error then names that key, where it came from (the file's
//! line, or the flag), what it holds, what it takes and an example.

use std::fmt;

use toml::{Table, Value};

/// Where a key's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The config file, at this line (when it could be found).
    File { line: Option<usize> },
    /// The `--set` flag of this index (in command-line order).
    Set { index: usize },
}

/// What is wrong with the key.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// No such key (serde's message lists the keys there are).
    Unknown { message: String },
    /// A value of the wrong type.
    WrongType {
        found: Value,
        expected: String,
        /// The default's value, for the example.
        default: Option<Value>,
        message: String,
    },
    /// Anything else serde says.
    Other { message: String },
}

/// A config key that cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyProblem {
    /// The dotted key, e.g. `health.enabled`.
    pub key: String,
    pub origin: Origin,
    pub problem: Problem,
}

impl fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        match &self.problem {
            Problem::Unknown { message } => match unknown_field(message) {
                Some((field, known)) => {
                    let at = match key.rsplit_once('.') {
                        Some((table, last)) if last == field => format!(" in {table}"),
                        _ if key == field => String::new(),
                        _ => format!(" in {key}"),
                    };
                    write!(f, "key {field}{at} is not a config key")?;
                    let names: Vec<&str> = known.iter().map(String::as_str).collect();
                    match crate::core::job::keys::resembles(field, &names) {
                        Some(meant) => write!(f, "; did you mean {meant}?"),
                        None => write!(f, "; the keys there: {}", known.join(", ")),
                    }
                }
                None => write!(f, "key {key}: {message}; remove or rename that key"),
            },
            Problem::WrongType {
                found,
                expected,
                default,
                message,
            } => {
                // A list or table's own message says which item is wrong.
                if !is_scalar(found) {
                    return write!(f, "key {key}: {message}");
                }
                write!(f, "key {key} is {} {found}", type_name(found))?;
                write!(f, "; it takes {expected}")?;
                match default.as_ref().filter(|v| is_scalar(v)) {
                    Some(value) => write!(f, ", e.g. {}", self.example(value)),
                    None => Ok(()),
                }
            }
            Problem::Other { message } => write!(f, "key {key}: {message}"),
        }
    }
}

impl KeyProblem {
    /// How to write `value` for this key where it came from.
    fn example(&self, value: &Value) -> String {
        match self.origin {
            Origin::Set { .. } if value.is_str() => format!("--set '{}={value}'", self.key),
            Origin::Set { .. } => format!("--set {}={value}", self.key),
            Origin::File { .. } => format!(
                "{} = {value} (the default)",
                self.key.rsplit('.').next().unwrap_or(&self.key)
            ),
        }
    }
}

/// One key laid over the config: its dotted path, value and origin.
struct Entry {
    path: Vec<String>,
    value: Value,
    origin: Origin,
}

/// The key whose value makes `default` (with the file's keys, then the sets', laid
/// over it in order) fail to deserialise with `try_build`, and why; `None` when each
/// key alone is fine (the error is elsewhere).
pub fn locate(
    default: &Table,
    file: Option<(&Table, &str)>,
    sets: &[Table],
    try_build: impl Fn(Table) -> Result<(), toml::de::Error>,
) -> Option<KeyProblem> {
    let mut entries = Vec::new();
    if let Some((table, text)) = file {
        for (path, value) in leaves(default, table) {
            let line = key_line(text, &path);
            entries.push(Entry {
                path,
                value,
                origin: Origin::File { line },
            });
        }
    }
    for (index, set) in sets.iter().enumerate() {
        for (path, value) in leaves(default, set) {
            let origin = Origin::Set { index };
            entries.push(Entry {
                path,
                value,
                origin,
            });
        }
    }
    let mut merged = default.clone();
    for entry in entries {
        insert(&mut merged, &entry.path, entry.value.clone());
        if let Err(e) = try_build(merged.clone()) {
            let message = e.message().trim().to_string();
            let mut found = problem(default, entry, message);
            // An unknown key inside a table of the file (a `[[runners.default]]` entry)
            // is on its own line, not on the table's header.
            if let (Some((_, text)), Problem::Unknown { message }) = (file, &found.problem)
                && let Some((field, _)) = unknown_field(message)
                && let Some(line) = field_line(text, &found.key, field)
            {
                found.origin = Origin::File { line: Some(line) };
            }
            return Some(found);
        }
    }
    None
}

/// The 1-based line where `field` is written inside the value at the dotted `key` (a
/// table, or a list of tables), when it is written there once.
fn field_line(text: &str, key: &str, field: &str) -> Option<usize> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut value = None;
    let mut table = doc.get_ref();
    for part in key.split('.') {
        let (_, found) = table.iter().find(|(k, _)| k.get_ref() == part)?;
        value = Some(found);
        if let toml::de::DeValue::Table(inner) = found.get_ref() {
            table = inner;
        }
    }
    let mut spans = Vec::new();
    collect_field(value?.get_ref(), field, &mut spans);
    match spans.as_slice() {
        [at] => Some(line_at(text, *at)),
        _ => None,
    }
}

/// Where `field` is a key of `value` (a table) or of the tables in it (a list).
fn collect_field(value: &toml::de::DeValue<'_>, field: &str, spans: &mut Vec<usize>) {
    match value {
        toml::de::DeValue::Table(table) => {
            spans.extend(
                table
                    .iter()
                    .filter(|(k, _)| k.get_ref() == field)
                    .map(|(k, _)| k.span().start),
            );
        }
        toml::de::DeValue::Array(items) => {
            for item in items.iter() {
                collect_field(item.get_ref(), field, spans);
            }
        }
        _ => {}
    }
}

/// The keys `over` sets, as the config merge applies them: a table over a default
/// table key by key, anything else whole (so `[[runners.default]]` is one key).
fn leaves(default: &Table, over: &Table) -> Vec<(Vec<String>, Value)> {
    let mut out = Vec::new();
    for (key, value) in over {
        match (default.get(key), value) {
            (Some(Value::Table(_)), Value::Table(inner)) => {
                for (sub, v) in inner {
                    out.push((vec![key.clone(), sub.clone()], v.clone()));
                }
            }
            _ => out.push((vec![key.clone()], value.clone())),
        }
    }
    out
}

fn insert(table: &mut Table, path: &[String], value: Value) {
    match path {
        [key] => {
            table.insert(key.clone(), value);
        }
        [key, rest @ ..] => {
            let inner = table
                .entry(key.clone())
                .or_insert_with(|| Value::Table(Table::new()));
            if let Value::Table(inner) = inner {
                insert(inner, rest, value);
            }
        }
        [] => {}
    }
}

fn problem(default: &Table, entry: Entry, message: String) -> KeyProblem {
    let key = entry.path.join(".");
    let default_value = lookup(default, &entry.path).cloned();
    let problem = if message.starts_with("unknown field") {
        Problem::Unknown { message }
    } else if message.starts_with("invalid type") || message.starts_with("invalid value") {
        let expected = default_value
            .as_ref()
            .map(|v| takes(v).to_string())
            .or_else(|| expected_in(&message))
            .unwrap_or_else(|| "another value".to_string());
        Problem::WrongType {
            found: entry.value,
            expected,
            default: default_value,
            message,
        }
    } else {
        Problem::Other { message }
    };
    KeyProblem {
        key,
        origin: entry.origin,
        problem,
    }
}

/// The 1-based line of byte offset `at` in `text`.
pub(crate) fn line_at(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// The field and the fields there are, from serde's "unknown field `x`, expected one
/// of `a`, `b`" (or "expected `a`").
pub(crate) fn unknown_field(message: &str) -> Option<(&str, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest.split_once("expected").map_or("", |(_, e)| e);
    let known = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect();
    Some((field, known))
}

/// What a config key takes, in words, and its default when the default sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyHint {
    pub takes: String,
    pub default: Option<Value>,
}

/// What `key` takes: from `default`'s value, else from what `try_build` refuses in
/// its place (a key the default leaves out, such as `max_cost_usd_per_day`); `None`
/// for a key there is no such key.
pub fn key_hint(
    default: Table,
    key: &str,
    try_build: impl Fn(Table) -> Result<(), toml::de::Error>,
) -> Option<KeyHint> {
    let path: Vec<String> = key.split('.').map(|p| p.trim().to_string()).collect();
    if let Some(value) = lookup(&default, &path) {
        return Some(KeyHint {
            takes: takes(value).to_string(),
            default: Some(value.clone()),
        });
    }
    // An empty table in the key's place is refused with what the key expects.
    let mut probe = default;
    insert(&mut probe, &path, Value::Table(Table::new()));
    let message = try_build(probe).err()?.message().to_string();
    if message.starts_with("unknown field") {
        return None;
    }
    Some(KeyHint {
        takes: expected_in(&message)?,
        default: None,
    })
}

/// The value at a dotted path.
pub fn lookup<'a>(table: &'a Table, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let value = table.get(first)?;
    match (rest.is_empty(), value) {
        (true, v) => Some(v),
        (false, Value::Table(inner)) => lookup(inner, rest),
        _ => None,
    }
}

/// What a key whose default is `value` takes, in words.
pub fn takes(value: &Value) -> &'static str {
    match value {
        Value::Integer(_) => "a whole number",
        Value::Float(_) => "a number",
        Value::Boolean(_) => "true or false",
        Value::String(_) => "a quoted string",
        Value::Array(_) => "a list",
        Value::Table(_) => "a table",
        Value::Datetime(_) => "a date",
    }
}

/// serde's `expected X` in words, for keys the default leaves out.
fn expected_in(message: &str) -> Option<String> {
    let expected = message.rsplit("expected ").next()?.trim();
    let words = match expected {
        "usize" | "u64" | "u32" | "u16" | "i64" | "i32" => "a whole number",
        "f64" | "f32" => "a number",
        "a boolean" => "true or false",
        "a string" => "a quoted string",
        "a sequence" => "a list",
        other => return Some(other.to_string()),
    };
    Some(words.to_string())
}

fn is_scalar(value: &Value) -> bool {
    !matches!(value, Value::Array(_) | Value::Table(_))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "the string",
        Value::Integer(_) => "the whole number",
        Value::Float(_) => "the number",
        Value::Boolean(_) => "the boolean",
        Value::Datetime(_) => "the date",
        Value::Array(_) => "the list",
        Value::Table(_) => "the table",
    }
}

/// The 1-based line of a dotted key in a file's text (where its key, or its table's
/// header, is written).
pub fn key_line(text: &str, path: &[String]) -> Option<usize> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    let mut start = None;
    for (i, part) in path.iter().enumerate() {
        let (key, value) = table.iter().find(|(k, _)| k.get_ref() == part)?;
        start = Some(key.span().start);
        match value.get_ref() {
            toml::de::DeValue::Table(inner) if i + 1 < path.len() => table = inner,
            _ => break,
        }
    }
    start.map(|at| line_at(text, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lines() {
        let text = "workers = 2\n\n[health]\nenabled = \"yes\"\n";
        let path = |p: &str| p.split('.').map(String::from).collect::<Vec<_>>();
        assert_eq!(key_line(text, &path("workers")), Some(1));
        assert_eq!(key_line(text, &path("health.enabled")), Some(4));
        assert_eq!(key_line(text, &path("health")), Some(3));
        assert_eq!(key_line(text, &path("nope")), None);
        assert_eq!(
            key_line("health.enabled = 1\n", &path("health.enabled")),
            Some(1)
        );
    }

    #[test]
    fn serde_expectations_in_words() {
        let e = |m: &str| expected_in(m).unwrap();
        assert_eq!(
            e("invalid type: string \"x\", expected usize"),
            "a whole number"
        );
        assert_eq!(e("invalid type: integer `1`, expected f64"), "a number");
        assert_eq!(
            e("invalid type: string \"x\", expected a boolean"),
            "true or false"
        );
    }
}
