//! Runner tables as tests write them: the override variable's JSON, a config file's
//! `[[runners.<mode>]]` block, and the shipped argv (`pinned.rs`) with another program.

use serde_json::Value;

use super::pinned::{INVESTIGATE_CLAUDE, INVESTIGATE_CODEX, with_program};

/// An override table (`CATSTACK_LLM_JUDGE_RUNNERS` value) from its entries.
pub fn table(entries: &[Value]) -> String {
    serde_json::to_string(entries).expect("runner table JSON")
}

/// A config file's `[[runners.<mode>]]` entry running `argv` (a TOML array written
/// as JSON, which TOML reads alike for these strings).
pub fn runner_toml(mode: &str, name: &str, argv: &[impl AsRef<str>]) -> String {
    let argv: Vec<&str> = argv.iter().map(AsRef::as_ref).collect();
    format!(
        "[[runners.{mode}]]\nname = \"{name}\"\nargv = {}\n",
        serde_json::to_string(&argv).expect("argv JSON")
    )
}

/// The shipped investigate argv of claude, started as `program`.
pub fn investigate_claude(program: &str) -> Vec<String> {
    with_program(INVESTIGATE_CLAUDE, program)
}

/// The shipped investigate argv of codex, started as `program`.
pub fn investigate_codex(program: &str) -> Vec<String> {
    with_program(INVESTIGATE_CODEX, program)
}

/// Owned strings.
pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
