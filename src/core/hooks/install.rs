//! The hook entries `llm-judge hooks install` merges into a harness's settings file
//! (claude `settings.json`, codex and Cursor `hooks.json`), and takes out again with
//! `hooks uninstall`: only the judge's own entries (a command running `llm-judge hook
//! <harness>`) are added, replaced or removed; every other key and hook stays as it
//! was. New entries go at the end of each event's list, so the positions codex keys
//! its trust by never move for the user's own hooks. "The judge's own" is exact: a
//! command install writes, rendered back byte for byte (`ours`).

use serde_json::{Map, Value, json};
use thiserror::Error;

use super::input::Harness;

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

/// What every hook command of one install runs: the absolute program, and the
/// folders install resolved from the user's own shell, written as flags so that a
/// project's environment (claude passes a project's `env` to every hook) cannot move
/// the config, the rules or the state (docs/security.md, "Hook mode").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HookCommand {
    pub program: String,
    /// `--config-dir`: the folder of `rules.toml`, `trusted-rules.json` and, unless
    /// `config` names another, `config.toml`.
    pub config_dir: Option<String>,
    /// `--config`: a config file named by the user's `--config` or `$LLM_JUDGE_CONFIG`.
    pub config: Option<String>,
    /// `--state-dir`.
    pub state_dir: Option<String>,
}

/// The flags a hook command may carry, in the order install writes them.
const FLAGS: [&str; 3] = ["--config-dir", "--config", "--state-dir"];

impl HookCommand {
    /// The command line of `harness`'s hook (with `--rewake` for claude's rewake hook).
    pub fn render(&self, harness: Harness, rewake: bool) -> String {
        use crate::core::shell::quote;
        let mut out = format!("{} hook {}", quote(&self.program), harness.name());
        for (flag, value) in FLAGS.iter().zip(self.values()) {
            if let Some(value) = value {
                out.push_str(&format!(" {flag} {}", quote(value)));
            }
        }
        if rewake {
            out.push_str(" --rewake");
        }
        out
    }

    fn values(&self) -> [Option<&String>; 3] {
        [
            self.config_dir.as_ref(),
            self.config.as_ref(),
            self.state_dir.as_ref(),
        ]
    }

    /// The flags as `--flag value` pairs, for the report.
    pub fn flags(&self) -> Vec<(&'static str, &str)> {
        FLAGS
            .iter()
            .zip(self.values())
            .filter_map(|(flag, value)| Some((*flag, value?.as_str())))
            .collect()
    }
}

/// The judge's entries for `harness`, running `command`'s program with its flags.
pub fn entries(harness: Harness, command: &HookCommand) -> Vec<Entry> {
    let entry = |event, timeout| Entry {
        event,
        command: command.render(harness, false),
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
                command: command.render(harness, true),
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

/// Whether `command` is the rewake hook, when it is exactly a command install writes
/// for `harness`: the quoted absolute program named `llm-judge`, `hook`, the harness,
/// install's own flags in install's order, an optional `--rewake`, and nothing else
/// (rendered back, byte for byte). Anything else in a settings file is the user's:
/// never trusted, updated or removed by the judge.
pub fn ours(harness: Harness, command: &str) -> Option<bool> {
    parse(harness, command).map(|(_, rewake)| rewake)
}

/// `command` read back as the hook command install wrote, and whether it is the rewake
/// hook; `None` when it is not exactly one (`ours`).
fn parse(harness: Harness, command: &str) -> Option<(HookCommand, bool)> {
    let words = shell_words(command)?;
    let (program, rest) = words.split_first()?;
    let named_judge = program.starts_with('/') && program.rsplit('/').next() == Some("llm-judge");
    let [hook, name, flags @ ..] = rest else {
        return None;
    };
    if !named_judge || hook != "hook" || name != harness.name() {
        return None;
    }
    let (flags, rewake) = match flags.split_last() {
        Some((last, before)) if last == "--rewake" => (before, true),
        _ => (flags, false),
    };
    let mut parsed = HookCommand {
        program: program.clone(),
        ..HookCommand::default()
    };
    let mut order = FLAGS.iter();
    for pair in flags.chunks(2) {
        let [flag, value] = pair else {
            return None;
        };
        // Each flag at most once, in install's order.
        let slot = match *order.find(|f| **f == flag.as_str())? {
            "--config-dir" => &mut parsed.config_dir,
            "--config" => &mut parsed.config,
            _ => &mut parsed.state_dir,
        };
        *slot = Some(value.clone());
    }
    (parsed.render(harness, rewake) == command).then_some((parsed, rewake))
}

/// The program of `command` when it is a command install writes for `harness` (`ours`).
pub fn program_of(harness: Harness, command: &str) -> Option<String> {
    parse(harness, command).map(|(parsed, _)| parsed.program)
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
            Harness::Cursor => list.retain(|h| !is_ours_handler(harness, h)),
            _ => {
                for group in list.iter_mut() {
                    if let Some(inner) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                        inner.retain(|h| !is_ours_handler(harness, h));
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

fn is_ours_handler(harness: Harness, handler: &Value) -> bool {
    handler
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(|c| ours(harness, c).is_some())
}

fn count_ours(harness: Harness, list: &[Value]) -> usize {
    match harness {
        Harness::Cursor => list.iter().filter(|h| is_ours_handler(harness, h)).count(),
        _ => list
            .iter()
            .filter_map(|g| g.get("hooks").and_then(Value::as_array))
            .flatten()
            .filter(|h| is_ours_handler(harness, h))
            .count(),
    }
}

/// The judge's handler in `list` that `entry` would be (same rewake kind).
fn find<'a>(harness: Harness, list: &'a mut [Value], entry: &Entry) -> Option<&'a mut Value> {
    let matches = |h: &Value| {
        h.get("command")
            .and_then(Value::as_str)
            .and_then(|c| ours(harness, c))
            .is_some_and(|rewake| rewake == entry.rewake)
    };
    // Only a group with nothing but its hooks: a planted look-alike in a group with a
    // matcher of its own (one that never matches) is not the judge's to keep using.
    let plain = |g: &Value| g.as_object().is_some_and(|o| o.len() == 1);
    match harness {
        Harness::Cursor => list.iter_mut().find(|h| matches(h)),
        _ => list
            .iter_mut()
            .filter(|g| plain(g))
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

#[cfg(test)]
mod tests {
    use super::*;

    const PROGRAM: &str = "/home/u/.cargo/bin/llm-judge";

    fn at(program: &str) -> HookCommand {
        HookCommand {
            program: program.into(),
            config_dir: Some("/home/u/.config/llm-judge".into()),
            config: None,
            state_dir: Some("/home/u/state dir".into()),
        }
    }

    #[test]
    fn only_a_command_install_writes_is_the_judges() {
        let claude = Harness::Claude;
        let written = at(PROGRAM).render(claude, false);
        assert_eq!(
            written,
            "/home/u/.cargo/bin/llm-judge hook claude --config-dir /home/u/.config/llm-judge \
             --state-dir '/home/u/state dir'"
        );
        assert_eq!(ours(claude, &written), Some(false));
        assert_eq!(ours(claude, &at(PROGRAM).render(claude, true)), Some(true));
        // What earlier versions wrote: no flags.
        assert_eq!(ours(claude, "/usr/bin/llm-judge hook claude"), Some(false));
        assert_eq!(
            ours(claude, "'/a b/llm-judge' hook claude --rewake"),
            Some(true)
        );
        let quoted = crate::core::shell::quote("/a b/it's/llm-judge");
        assert_eq!(
            ours(Harness::Cursor, &format!("{quoted} hook cursor")),
            Some(false)
        );
        for foreign in [
            "llm-judge hook claude".to_string(),
            "./bin/llm-judge hook claude".to_string(),
            "/opt/x/llm-judge hook codex".to_string(),
            "/x/llm-judge daemon".to_string(),
            "python3 judge.py hook claude".to_string(),
            "'unclosed".to_string(),
            format!("{written}; touch X"),
            format!("{written} ; my-notifier.sh"),
            format!("{written} --extra"),
            "/x/llm-judge hook claude --state-dir /elsewhere --config-dir /c".to_string(),
            "/x/llm-judge hook claude --state-dir /a --state-dir /b".to_string(),
            "/x/llm-judge hook claude --rewake --state-dir /a".to_string(),
            "/x/llm-judge  hook claude".to_string(),
            "'/x/llm-judge' hook claude".to_string(),
            "/x/llm-judge hook claude --state-dir".to_string(),
        ] {
            assert_eq!(ours(claude, &foreign), None, "{foreign}");
        }
        assert_eq!(crate::core::shell::quote("/a b/it's"), "'/a b/it'\\''s'");
    }

    #[test]
    fn a_look_alike_in_a_group_with_a_matcher_is_not_reused() {
        let mine = entries(Harness::Claude, &at(PROGRAM));
        let planted = json!({"matcher": "never", "hooks": [{"type": "command",
            "command": mine[3].command, "timeout": 15}]});
        let mut settings = json!({"hooks": {"SessionStart": [planted.clone()]}});
        add(Harness::Claude, &mut settings, &mine).unwrap();
        let start = settings["hooks"]["SessionStart"].as_array().unwrap();
        assert_eq!(start.len(), 2, "a fresh group of the judge's own");
        assert_eq!(start[0], planted);
        assert_eq!(
            start[1],
            json!({"hooks": [{"type": "command", "command": mine[3].command, "timeout": 15}]})
        );
    }

    #[test]
    fn install_keeps_the_users_hooks_and_keys_and_is_idempotent() {
        let mut settings = json!({
            "model": "opus",
            "hooks": {"Stop": [
                {"hooks": [{"type": "command", "command": "my-own-hook"}]},
                {"hooks": [{"type": "command", "command": "/opt/x/llm-judge hook codex"}]},
                {"hooks": [{"type": "command", "command": format!("{PROGRAM} hook claude; my-notifier.sh")}]}
            ]}
        });
        let users = settings.clone();
        let mine = entries(Harness::Claude, &at(PROGRAM));
        let changes = add(Harness::Claude, &mut settings, &mine).unwrap();
        assert_eq!(changes.len(), 5, "{changes:?}");
        assert_eq!(settings["model"], "opus");
        let stop = settings["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(
            stop[0]["hooks"][0]["command"], "my-own-hook",
            "the user's first, unmoved"
        );
        assert_eq!(
            stop[3]["hooks"][0]["command"],
            at(PROGRAM).render(Harness::Claude, false)
        );
        assert_eq!(stop[3]["hooks"][0]["timeout"], STOP_TIMEOUT);
        assert_eq!(stop[4]["hooks"][0]["asyncRewake"], true);
        assert!(installed(Harness::Claude, &settings, &mine));
        let again = settings.clone();
        assert!(
            add(Harness::Claude, &mut settings, &mine)
                .unwrap()
                .is_empty()
        );
        assert_eq!(settings, again, "a second install changes nothing");
        // Another binary path updates the judge's entries in place.
        let moved = entries(Harness::Claude, &at("/opt/llm-judge"));
        let changes = add(Harness::Claude, &mut settings, &moved).unwrap();
        assert!(
            changes.iter().all(|c| matches!(c, Change::Updated(_))),
            "{changes:?}"
        );
        assert_eq!(settings["hooks"]["Stop"].as_array().unwrap().len(), 5);
        // Uninstall leaves exactly the user's, look-alikes included.
        let removed = remove(Harness::Claude, &mut settings);
        assert_eq!(removed.len(), 5);
        assert_eq!(settings, users);
        let mut empty = json!({});
        add(
            Harness::Codex,
            &mut empty,
            &entries(Harness::Codex, &at(PROGRAM)),
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
            &entries(Harness::Cursor, &at(PROGRAM)),
        )
        .unwrap();
        assert_eq!(settings["version"], 1);
        let stop = settings["hooks"]["stop"].as_array().unwrap();
        assert_eq!(stop[0]["command"], "./mine.sh");
        assert_eq!(
            stop[1],
            json!({"command": at(PROGRAM).render(Harness::Cursor, false), "timeout": STOP_TIMEOUT})
        );
        assert_eq!(
            settings["hooks"]["afterAgentResponse"][0]["command"],
            at(PROGRAM).render(Harness::Cursor, false)
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
                    &entries(Harness::Claude, &at(PROGRAM))
                )
                .is_err(),
                "{bad}"
            );
        }
    }
}
