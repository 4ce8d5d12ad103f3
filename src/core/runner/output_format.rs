//! How a CLI runner's stdout is read, decided by the flags of its table argv. Pure.

use crate::core::runner::PROMPT_SLOT;

/// How a runner's stdout is read, from the flags its table argv gives the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// No envelope asked for: the plain-text answer rules, and never usage.
    Plain,
    /// `--output-format json` or `stream-json`: Claude Code's result object or event
    /// stream (cursor-agent prints the same shape).
    ClaudeEvents,
    /// `exec --json`: codex's event stream.
    CodexEvents,
}

/// The format `argv` (a table's, before the prompt is put in) asks its CLI for. Only
/// flags count: items after `--` and the prompt slot are the prompt, so a prompt can
/// never choose how the output is read.
pub fn output_format(argv: &[String]) -> OutputFormat {
    let flags: Vec<&str> = argv
        .iter()
        .skip(1)
        .map(String::as_str)
        .take_while(|a| *a != "--")
        .filter(|a| *a != PROMPT_SLOT)
        .collect();
    let asks_for_events = flags.iter().enumerate().any(|(i, flag)| {
        let value = match flag.strip_prefix("--output-format") {
            Some("") => flags.get(i + 1).copied(),
            Some(rest) => rest.strip_prefix('='),
            None => None,
        };
        matches!(value, Some("json" | "stream-json"))
    });
    if asks_for_events {
        OutputFormat::ClaudeEvents
    } else if flags.contains(&"exec") && flags.contains(&"--json") {
        OutputFormat::CodexEvents
    } else {
        OutputFormat::Plain
    }
}
