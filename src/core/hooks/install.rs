//! The hook entries `llm-judge hooks install` merges into a harness's settings file
//! (claude `settings.json`, codex and Cursor `hooks.json`), and takes out again with
//! `hooks uninstall`: only the judge's own entries (a command running `llm-judge hook
//! <harness>`) are added, replaced or removed; every other key and hook stays as it
//! was. New entries go at the end of each event's list, so the positions codex keys
//! its trust by never move for the user's own hooks. Also codex's trust: the SHA-256
//! of a handler, as codex computes it, and the config.toml block that records it.

use serde_json::{Map, Value, json};
use thiserror::Error;

use super::input::Harness;
use crate::core::digest::sha256_hex;

/// One hook entry of the judge's.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The harness's event name (`Stop`, Cursor's `afterAgentResponse`).
    pub event: &'static str,
    pub command: String,
    /// Seconds the harness waits before it stops the hook (the hook bounds itself
    /// well within it).
    pub timeout: u64,
    /// claude's `asyncRewake`: run in the background, wake the model on exit 2.
    pub rewake: bool,
}

/// The judge's entries for `harness`, running `program` (an absolute path).
pub fn entries(harness: Harness, program: &str) -> Vec<Entry> {
    let command = |extra: &str| {
        format!(
            "{} hook {}{extra}",
            crate::core::shell::quote(program),
            harness.name()
        )
    };
    let entry = |event, timeout| Entry {
        event,
        command: command(""),
        timeout,
        rewake: false,
    };
    match harness {
        Harness::Claude => vec![
            entry("Stop", STOP_TIMEOUT),
            entry("SubagentStop", STOP_TIMEOUT),
            entry("UserPromptSubmit", PROMPT_TIMEOUT),
            entry("SessionStart", PROMPT_TIMEOUT),
            Entry {
                event: "Stop",
                command: command(" --rewake"),
                timeout: REWAKE_TIMEOUT,
                rewake: true,
            },
        ],
        Harness::Codex => vec![
            entry("Stop", STOP_TIMEOUT),
            entry("SubagentStop", STOP_TIMEOUT),
            entry("UserPromptSubmit", PROMPT_TIMEOUT),
            entry("SessionStart", PROMPT_TIMEOUT),
        ],
        Harness::Cursor => vec![
            entry("afterAgentResponse", PROMPT_TIMEOUT),
            entry("stop", STOP_TIMEOUT),
            entry("beforeSubmitPrompt", PROMPT_TIMEOUT),
            entry("sessionStart", PROMPT_TIMEOUT),
        ],
    }
}

/// Stop hooks: above the longest wait a rule may ask (120 s) and an in-process judge.
const STOP_TIMEOUT: u64 = 150;
/// Prompt and session hooks only read and drain files.
const PROMPT_TIMEOUT: u64 = 15;
/// A background rewake judge waits up to its rule's `wait_ms`.
const REWAKE_TIMEOUT: u64 = 300;

/// The harness and whether it is the rewake hook, when `command` runs `llm-judge hook`.
pub fn ours(command: &str) -> Option<(String, bool)> {
    let words = shell_words(command)?;
    let program = words.first()?;
    let is_judge = program.rsplit('/').next() == Some("llm-judge");
    match (is_judge, words.get(1).map(String::as_str), words.get(2)) {
        (true, Some("hook"), Some(harness)) => {
            Some((harness.clone(), words.iter().any(|w| w == "--rewake")))
        }
        _ => None,
    }
}

/// Plain and single-quoted words (what `core::shell::quote` writes); `None` for anything else.
fn shell_words(command: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = command.chars().peekable();
    let mut started = false;
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                started = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        other => word.push(other),
                    }
                }
            }
            '\\' => {
                started = true;
                word.push(chars.next()?);
            }
            c if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                started = true;
                word.push(c);
            }
        }
    }
    if started {
        words.push(word);
    }
    Some(words)
}

/// A settings file that cannot be merged into.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MergeError {
    /// Not a JSON object, or `hooks` (or an event's list) of another type.
    #[error("{what} is not {expected}; fix or move the file, then install again")]
    Shape {
        what: String,
        expected: &'static str,
    },
}

/// What merging changed, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added(String),
    Updated(String),
    Removed(String),
}

/// `settings` with the judge's `entries` in (an entry of the judge's already there is
/// updated in place); the changes made.
pub fn add(
    harness: Harness,
    settings: &mut Value,
    entries: &[Entry],
) -> Result<Vec<Change>, MergeError> {
    let hooks = hooks_object(harness, settings)?;
    let mut changes = Vec::new();
    for entry in entries {
        let handler = handler(harness, entry);
        let list = event_list(hooks, entry.event)?;
        let label = label(entry);
        match find(harness, list, entry) {
            Some(slot) if *slot == handler => {}
            Some(slot) => {
                *slot = handler;
                changes.push(Change::Updated(label));
            }
            None => {
                list.push(match harness {
                    Harness::Cursor => handler,
                    _ => json!({"hooks": [handler]}),
                });
                changes.push(Change::Added(label));
            }
        }
    }
    Ok(changes)
}

/// `settings` without any of the judge's hooks (groups and event lists left empty by
/// that go too); the changes made.
pub fn remove(harness: Harness, settings: &mut Value) -> Vec<Change> {
    let mut changes = Vec::new();
    let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) else {
        return changes;
    };
    let events: Vec<String> = hooks.keys().cloned().collect();
    for event in events {
        let Some(list) = hooks.get_mut(&event).and_then(Value::as_array_mut) else {
            continue;
        };
        let before = count_ours(harness, list);
        match harness {
            Harness::Cursor => list.retain(|h| !is_ours_handler(h)),
            _ => {
                for group in list.iter_mut() {
                    if let Some(inner) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                        inner.retain(|h| !is_ours_handler(h));
                    }
                }
                list.retain(|g| {
                    g.get("hooks")
                        .and_then(Value::as_array)
                        .is_none_or(|inner| !inner.is_empty())
                });
            }
        }
        for _ in 0..before {
            changes.push(Change::Removed(event.clone()));
        }
        if list.is_empty() {
            hooks.remove(&event);
        }
    }
    if hooks.is_empty()
        && let Some(object) = settings.as_object_mut()
    {
        object.remove("hooks");
    }
    changes
}

/// True when `settings` holds every entry of `entries` as the judge wrote it.
pub fn installed(harness: Harness, settings: &Value, entries: &[Entry]) -> bool {
    let mut copy = settings.clone();
    add(harness, &mut copy, entries).is_ok_and(|changes| changes.is_empty())
}

fn label(entry: &Entry) -> String {
    match entry.rewake {
        true => format!("{} (asyncRewake)", entry.event),
        false => entry.event.to_string(),
    }
}

fn handler(harness: Harness, entry: &Entry) -> Value {
    match harness {
        Harness::Cursor => json!({"command": entry.command, "timeout": entry.timeout}),
        _ if entry.rewake => json!({
            "type": "command", "command": entry.command, "timeout": entry.timeout, "asyncRewake": true
        }),
        _ => json!({"type": "command", "command": entry.command, "timeout": entry.timeout}),
    }
}

fn is_ours_handler(handler: &Value) -> bool {
    handler
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(|c| ours(c).is_some())
}

fn count_ours(harness: Harness, list: &[Value]) -> usize {
    match harness {
        Harness::Cursor => list.iter().filter(|h| is_ours_handler(h)).count(),
        _ => list
            .iter()
            .filter_map(|g| g.get("hooks").and_then(Value::as_array))
            .flatten()
            .filter(|h| is_ours_handler(h))
            .count(),
    }
}

/// The judge's handler in `list` that `entry` would be (same rewake kind).
fn find<'a>(harness: Harness, list: &'a mut [Value], entry: &Entry) -> Option<&'a mut Value> {
    let matches = |h: &Value| {
        h.get("command")
            .and_then(Value::as_str)
            .and_then(ours)
            .is_some_and(|(name, rewake)| name == harness.name() && rewake == entry.rewake)
    };
    match harness {
        Harness::Cursor => list.iter_mut().find(|h| matches(h)),
        _ => list
            .iter_mut()
            .filter_map(|g| g.get_mut("hooks").and_then(Value::as_array_mut))
            .flatten()
            .find(|h| matches(h)),
    }
}

/// The `hooks` object, made when missing (Cursor's file also gets `"version": 1`).
fn hooks_object(
    harness: Harness,
    settings: &mut Value,
) -> Result<&mut Map<String, Value>, MergeError> {
    let Some(object) = settings.as_object_mut() else {
        return Err(MergeError::Shape {
            what: "the file".into(),
            expected: "a JSON object",
        });
    };
    if harness == Harness::Cursor {
        object.entry("version").or_insert(json!(1));
    }
    object
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or(MergeError::Shape {
            what: "its \"hooks\"".into(),
            expected: "a JSON object",
        })
}

fn event_list<'a>(
    hooks: &'a mut Map<String, Value>,
    event: &str,
) -> Result<&'a mut Vec<Value>, MergeError> {
    hooks
        .entry(event)
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or(MergeError::Shape {
            what: format!("\"hooks\".{event}"),
            expected: "a list",
        })
}

/// codex's name of an event in its trust keys.
fn codex_label(event: &str) -> &'static str {
    match event {
        "Stop" => "stop",
        "SubagentStop" => "subagent_stop",
        "UserPromptSubmit" => "user_prompt_submit",
        "SessionStart" => "session_start",
        _ => "other",
    }
}

/// codex's trust hash of one command handler of `event` (codex 0.171.0: SHA-256 of the
/// handler's normalized identity, keys sorted, compact JSON). Matchers are not kept for
/// the judge's events, and its handlers set no `async` or `statusMessage`.
pub fn codex_hash(event: &str, command: &str, timeout: u64) -> String {
    // Keys in sorted order: the crate's JSON keeps insertion order.
    let identity = json!({
        "event_name": codex_label(event),
        "hooks": [{"async": false, "command": command, "timeout": timeout.max(1), "type": "command"}],
    });
    format!("sha256:{}", sha256_hex(identity.to_string().as_bytes()))
}

/// The trust keys and hashes codex gives the judge's handlers in `hooks_json` (the
/// file at `source`, as codex names it: `$CODEX_HOME/hooks.json`).
pub fn codex_trust(source: &str, hooks_json: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(hooks) = hooks_json.get("hooks").and_then(Value::as_object) else {
        return out;
    };
    for (event, groups) in hooks {
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            for (h, handler) in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let Some(command) = handler.get("command").and_then(Value::as_str) else {
                    continue;
                };
                if ours(command).is_none() {
                    continue;
                }
                let timeout = handler
                    .get("timeout")
                    .and_then(Value::as_u64)
                    .unwrap_or(600);
                let key = format!("{source}:{}:{g}:{h}", codex_label(event));
                out.push((key, codex_hash(event, command, timeout)));
            }
        }
    }
    out
}

/// The first line of the block `--trust` writes into codex's config.toml.
pub const TRUST_BEGIN: &str = "# llm-judge hooks: trusted by `llm-judge hooks install codex --trust`; `llm-judge hooks uninstall codex` removes this block";
/// Its last line.
pub const TRUST_END: &str = "# end of llm-judge hooks";

/// `config` (codex's config.toml text) with the judge's trust block replaced by one
/// for `trust` (or only removed, when empty).
pub fn with_trust_block(config: &str, trust: &[(String, String)]) -> String {
    let mut out = without_trust_block(config);
    if trust.is_empty() {
        return out;
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(TRUST_BEGIN);
    out.push('\n');
    for (key, hash) in trust {
        let quoted = toml::Value::String(key.clone()).to_string();
        out.push_str(&format!(
            "[hooks.state.{quoted}]\ntrusted_hash = \"{hash}\"\n"
        ));
    }
    out.push_str(TRUST_END);
    out.push('\n');
    out
}

/// `config` without the judge's trust block.
pub fn without_trust_block(config: &str) -> String {
    let mut out = String::with_capacity(config.len());
    let mut inside = false;
    for line in config.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == TRUST_BEGIN {
            inside = true;
        } else if inside && bare == TRUST_END {
            inside = false;
        } else if !inside {
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROGRAM: &str = "/home/u/.cargo/bin/llm-judge";

    #[test]
    fn the_judges_commands_are_told_from_others() {
        assert_eq!(
            ours("/usr/bin/llm-judge hook claude"),
            Some(("claude".into(), false))
        );
        assert_eq!(
            ours("'/a b/llm-judge' hook claude --rewake"),
            Some(("claude".into(), true))
        );
        assert_eq!(ours("llm-judge hook codex"), Some(("codex".into(), false)));
        assert_eq!(ours("python3 judge.py hook claude"), None);
        assert_eq!(ours("/x/llm-judge daemon"), None);
        assert_eq!(ours("'unclosed"), None);
        assert_eq!(crate::core::shell::quote("/a b/it's"), "'/a b/it'\\''s'");
        assert_eq!(
            ours(&format!(
                "{} hook cursor",
                crate::core::shell::quote("/a b/it's/llm-judge")
            )),
            Some(("cursor".into(), false))
        );
    }

    #[test]
    fn install_keeps_the_users_hooks_and_keys_and_is_idempotent() {
        let mut settings = json!({
            "model": "opus",
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "my-own-hook"}]}]}
        });
        let mine = entries(Harness::Claude, PROGRAM);
        let changes = add(Harness::Claude, &mut settings, &mine).unwrap();
        assert_eq!(changes.len(), 5, "{changes:?}");
        assert_eq!(settings["model"], "opus");
        let stop = settings["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(
            stop[0]["hooks"][0]["command"], "my-own-hook",
            "the user's first, unmoved"
        );
        assert_eq!(
            stop[1]["hooks"][0]["command"],
            format!("{PROGRAM} hook claude")
        );
        assert_eq!(stop[1]["hooks"][0]["timeout"], STOP_TIMEOUT);
        assert_eq!(stop[2]["hooks"][0]["asyncRewake"], true);
        assert!(installed(Harness::Claude, &settings, &mine));
        let again = settings.clone();
        assert!(
            add(Harness::Claude, &mut settings, &mine)
                .unwrap()
                .is_empty()
        );
        assert_eq!(settings, again, "a second install changes nothing");
        // Another binary path updates the judge's entries in place.
        let moved = entries(Harness::Claude, "/opt/llm-judge");
        let changes = add(Harness::Claude, &mut settings, &moved).unwrap();
        assert!(
            changes.iter().all(|c| matches!(c, Change::Updated(_))),
            "{changes:?}"
        );
        assert_eq!(settings["hooks"]["Stop"].as_array().unwrap().len(), 3);
        // Uninstall leaves exactly the user's.
        let removed = remove(Harness::Claude, &mut settings);
        assert_eq!(removed.len(), 5);
        assert_eq!(
            settings,
            json!({"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "my-own-hook"}]}]}})
        );
        let mut empty = json!({});
        add(
            Harness::Codex,
            &mut empty,
            &entries(Harness::Codex, PROGRAM),
        )
        .unwrap();
        remove(Harness::Codex, &mut empty);
        assert_eq!(empty, json!({}));
    }

    #[test]
    fn cursor_entries_are_flat_and_versioned() {
        let mut settings = json!({"hooks": {"stop": [{"command": "./mine.sh", "loop_limit": 2}]}});
        add(
            Harness::Cursor,
            &mut settings,
            &entries(Harness::Cursor, PROGRAM),
        )
        .unwrap();
        assert_eq!(settings["version"], 1);
        let stop = settings["hooks"]["stop"].as_array().unwrap();
        assert_eq!(stop[0]["command"], "./mine.sh");
        assert_eq!(
            stop[1],
            json!({"command": format!("{PROGRAM} hook cursor"), "timeout": STOP_TIMEOUT})
        );
        assert_eq!(
            settings["hooks"]["afterAgentResponse"][0]["command"],
            format!("{PROGRAM} hook cursor")
        );
        remove(Harness::Cursor, &mut settings);
        assert_eq!(
            settings,
            json!({"version": 1, "hooks": {"stop": [{"command": "./mine.sh", "loop_limit": 2}]}})
        );
    }

    #[test]
    fn a_file_of_another_shape_is_refused() {
        for bad in [
            json!([1]),
            json!({"hooks": []}),
            json!({"hooks": {"Stop": {}}}),
        ] {
            let mut copy = bad.clone();
            assert!(
                add(
                    Harness::Claude,
                    &mut copy,
                    &entries(Harness::Claude, PROGRAM)
                )
                .is_err(),
                "{bad}"
            );
        }
    }

    /// The hash codex 0.171.0's `hooks/list` reported as `currentHash` for a Stop
    /// handler (measured against the real app-server).
    #[test]
    fn the_codex_trust_hash_is_codexs() {
        assert_eq!(
            codex_hash(
                "Stop",
                "python3 /tmp/hookresearch/hook.py /tmp/hookresearch/runs/x1/dump Stop",
                15
            ),
            "sha256:fe84bef78b0d1d327e8063c4dd5a6016fe281cde2a3504b77c56f1676bdaca97"
        );
        let mut hooks =
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine"}]}]}});
        add(
            Harness::Codex,
            &mut hooks,
            &entries(Harness::Codex, PROGRAM),
        )
        .unwrap();
        let trust = codex_trust("/h/.codex/hooks.json", &hooks);
        let keys: Vec<&str> = trust.iter().map(|(k, _)| k.as_str()).collect();
        assert!(keys.contains(&"/h/.codex/hooks.json:stop:1:0"), "{keys:?}");
        assert!(
            keys.contains(&"/h/.codex/hooks.json:user_prompt_submit:0:0"),
            "{keys:?}"
        );
        assert_eq!(trust.len(), 4, "the user's own hook is not ours to trust");
    }

    #[test]
    fn the_trust_block_is_written_once_and_removed_whole() {
        let config = "model = \"o3\"\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
        let trust = vec![(
            "/h/.codex/hooks.json:stop:0:0".to_string(),
            "sha256:ab".to_string(),
        )];
        let once = with_trust_block(config, &trust);
        assert_eq!(with_trust_block(&once, &trust), once, "idempotent");
        let parsed: toml::Table = once.parse().expect("valid TOML");
        assert_eq!(
            parsed["hooks"]["state"]["/h/.codex/hooks.json:stop:0:0"]["trusted_hash"].as_str(),
            Some("sha256:ab")
        );
        assert_eq!(without_trust_block(&once), config);
        assert_eq!(with_trust_block(&once, &[]), config);
    }
}
