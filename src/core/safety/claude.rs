//! claude's investigate rules: its flag grammar, read tools only, the write tools
//! denied, no MCP servers or settings files of its own, and `--settings` that only turns
//! hooks off and keeps reads confined.

use super::Unsafe;
use super::flags::{
    Arity, Flag, Grammar, args_before_prompt, find, parse_flags, refuse_both_forms, tools,
};
use crate::core::runner::table::Runner;
use crate::core::safety::read_scope::settings_problem;

pub(super) const READ_TOOLS: [&str; 3] = ["Read", "Grep", "Glob"];
pub(super) const MUST_DENY: [&str; 4] = ["Write", "Edit", "NotebookEdit", "Bash"];

pub(super) const CLAUDE_GRAMMAR: Grammar = Grammar {
    arity: |name| match name {
        "-p"
        | "--print"
        | "--no-session-persistence"
        | "--strict-mcp-config"
        | "--disable-slash-commands" => Some(Arity::None),
        "--model" | "--settings" | "--setting-sources" | "--system-prompt" | "--output-format" => {
            Some(Arity::One)
        }
        "--tools" | "--allowedTools" | "--disallowedTools" => Some(Arity::List),
        _ => None,
    },
    empty_ok: &["--tools", "--setting-sources"],
    repeatable: &[],
};

pub(super) fn check_claude(args: &[String]) -> Result<(), Unsafe> {
    let flags = parse_flags(args, &CLAUDE_GRAMMAR)?;
    refuse_both_forms(&flags, ["-p", "--print"])?;
    only_read_tools(&flags, "--tools", true)?;
    only_read_tools(&flags, "--allowedTools", false)?;
    let denied = find(&flags, &["--disallowedTools"])
        .map(tools)
        .unwrap_or_default();
    if let Some(t) = MUST_DENY.iter().find(|t| !denied.contains(t)) {
        return Err(Unsafe::NotDenied {
            tool: t.to_string(),
        });
    }
    if find(&flags, &["--strict-mcp-config"]).is_none() {
        return Err(Unsafe::StrictMcpMissing);
    }
    match find(&flags, &["--setting-sources"]) {
        Some(f) if f.values == [""] => {}
        _ => return Err(Unsafe::SettingSources),
    }
    // With read tools, reads stay confined; with `--tools ""` there is nothing to read.
    let reads = find(&flags, &["--tools"]).is_some_and(|f| !tools(f).is_empty());
    match find(&flags, &["--settings"]) {
        Some(f) => check_settings(f.values[0], reads)?,
        None if reads => return Err(Unsafe::ReadsUnconfined),
        None => {}
    }
    Ok(())
}

/// A tool list flag names only read tools; `required`: it must be given.
fn only_read_tools(flags: &[Flag<'_>], flag: &str, required: bool) -> Result<(), Unsafe> {
    let Some(f) = find(flags, &[flag]) else {
        return if required {
            Err(Unsafe::ToolsMissing { flag: flag.into() })
        } else {
            Ok(())
        };
    };
    match tools(f).into_iter().find(|t| !READ_TOOLS.contains(t)) {
        Some(t) => Err(Unsafe::WriteTool {
            flag: flag.into(),
            tool: t.into(),
        }),
        None => Ok(()),
    }
}

/// `--settings` may only turn hooks off and narrow reads: settings can define hooks,
/// `apiKeyHelper` (a shell command), `env` and permissions that allow tools. `reads`:
/// the runner has read tools, so the shipped read confinement must stay.
fn check_settings(value: &str, reads: bool) -> Result<(), Unsafe> {
    let parsed: Option<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(value).ok();
    match parsed.as_ref().map(|map| settings_problem(map, reads)) {
        Some(None) => Ok(()),
        problem => Err(Unsafe::Settings {
            value: value.to_string(),
            problem: problem
                .flatten()
                .unwrap_or_else(|| "not a JSON object".to_string()),
        }),
    }
}

/// The `--settings` value of a claude runner, if it has one.
pub(super) fn claude_settings(runner: &Runner) -> Option<&str> {
    let (program, args) = runner.argv.split_first()?;
    if program.rsplit('/').next() != Some("claude") {
        return None;
    }
    let flags = parse_flags(args_before_prompt(args).ok()?, &CLAUDE_GRAMMAR).ok()?;
    find(&flags, &["--settings"]).and_then(|f| f.values.first().copied())
}
