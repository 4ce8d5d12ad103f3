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
    // One pass, no allocation: `Runner::kind` works it out for every attempt.
    let mut flags = argv
        .iter()
        .skip(1)
        .map(String::as_str)
        .take_while(|a| *a != "--")
        .filter(|a| *a != PROMPT_SLOT)
        .peekable();
    let (mut events, mut exec, mut json) = (false, false, false);
    while let Some(flag) = flags.next() {
        let value = match flag.strip_prefix("--output-format") {
            Some("") => flags.peek().copied(),
            Some(rest) => rest.strip_prefix('='),
            None => None,
        };
        events |= matches!(value, Some("json" | "stream-json"));
        exec |= flag == "exec";
        json |= flag == "--json";
    }
    if events {
        OutputFormat::ClaudeEvents
    } else if exec && json {
        OutputFormat::CodexEvents
    } else {
        OutputFormat::Plain
    }
}
