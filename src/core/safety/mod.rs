//! The investigate safety invariant (docs/reference.md, "Investigate allowlist"): an
//! allowlist check of every investigate runner argv. Pure. This file holds the errors
//! and the public checks; the rules live beside it in `safety/`: `flags` (the final
//! `-- {prompt}` and flags read by a program's grammar), `claude` and `codex` (each
//! program's grammar and rules).

use std::path::Path;

use thiserror::Error;

use crate::core::runner::PROMPT_SLOT;
use crate::core::runner::table::Runner;
use crate::core::safety::keys::{CODEX_CONFIG, CODEX_DISABLE, EnvRefusal, check_env_var};
use crate::core::safety::read_scope::directory_above_home;

mod claude;
mod codex;
mod flags;
pub mod keys;
pub mod read_scope;

use flags::args_before_prompt;

/// An investigate runner refused by the allowlist, named with what makes it unsafe.
#[derive(Debug, Clone, PartialEq, Error)]
#[error(
    "investigate runner {runner:?} is unsafe: {why}; investigate runners may only read \
     (see docs/reference.md, \"Investigate allowlist\")"
)]
pub struct SafetyError {
    /// The runner's name.
    pub runner: String,
    /// The flag or program that is not allowed.
    pub why: Unsafe,
}

/// What makes one investigate argv unsafe; each names the flag, tool or program.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Unsafe {
    /// No program at all.
    #[error("its argv is empty")]
    EmptyArgv,
    /// A program without read-only switches.
    #[error("program {program:?} is not allowed (only claude and codex have read-only switches)")]
    Program { program: String },
    /// The argv does not end with `-- {prompt}`.
    #[error("argv must end with \"--\" and \"{}\"", PROMPT_SLOT)]
    NoFinalPrompt,
    /// `{prompt}` or `--` before the final pair.
    #[error(
        "\"{}\" or \"--\" appears before the final \"-- {}\"",
        PROMPT_SLOT,
        PROMPT_SLOT
    )]
    EarlyPrompt,
    /// A flag outside the program's grammar (`item` as given, with any `=value`).
    #[error("flag {item:?} is not allowed")]
    FlagNotAllowed { item: String },
    /// The same flag twice.
    #[error("flag {flag:?} is given twice")]
    FlagTwice { flag: String },
    /// A flag given both in its short and its long form.
    #[error("flag {flag:?} is given twice (as {short} and {flag})")]
    FlagTwiceAs { flag: String, short: String },
    /// `--flag=value` on a flag that takes none.
    #[error("flag {flag:?} takes no value")]
    TakesNoValue { flag: String },
    /// A value-taking flag at the end.
    #[error("flag {flag:?} needs a value")]
    NeedsValue { flag: String },
    /// A value that claude would read as the value although it looks like a flag.
    #[error(
        "flag {flag:?} has the value {value:?}, which begins with '-' (claude would take it \
         as the value, not as a flag)"
    )]
    DashValue { flag: String, value: String },
    /// An empty value where empty does not mean "none".
    #[error("flag {flag:?} has an empty value")]
    EmptyValue { flag: String },
    /// A required tool list is absent.
    #[error("flag {flag:?} is missing (it must name only Read, Grep, Glob)")]
    ToolsMissing { flag: String },
    /// A tool list names a tool that is not read-only.
    #[error("flag {flag:?} names tool {tool:?} (only Read, Grep, Glob)")]
    WriteTool { flag: String, tool: String },
    /// The deny list lacks a write tool.
    #[error(
        "flag \"--disallowedTools\" must name Write, Edit, NotebookEdit and Bash; {tool:?} is missing"
    )]
    NotDenied { tool: String },
    /// No `--strict-mcp-config`.
    #[error("flag \"--strict-mcp-config\" is missing (user MCP servers could add write tools)")]
    StrictMcpMissing,
    /// `--setting-sources` absent or not `""`.
    #[error(
        "flag \"--setting-sources\" must be given as \"\" (no settings files: a \
         folder's .claude/settings.json can run commands)"
    )]
    SettingSources,
    /// `--settings` does more than turn hooks off and narrow reads.
    #[error(
        "flag \"--settings\" may only be {{\"disableAllHooks\": true}}, optionally with \
         \"permissions\" holding only \"blockReadsOutsideWorkingDirectories\": true, \
         \"additionalDirectories\" (absolute paths, not / or $HOME or above) and \"deny\" (rules, \
         the shipped ones kept), not {value:?}: {problem} \
         (settings can define hooks, apiKeyHelper, env and permissions)"
    )]
    Settings { value: String, problem: String },
    /// A claude with read tools and no `--settings` confining them.
    #[error(
        "flag \"--settings\" is missing: a claude with read tools keeps the shipped read \
         confinement (\"permissions\" with \"blockReadsOutsideWorkingDirectories\": true and \
         every shipped \"deny\" rule)"
    )]
    ReadsUnconfined,
    /// A codex argv that is not `codex exec`.
    #[error("argv must start with \"codex exec\"")]
    NotCodexExec,
    /// A sandbox other than read-only.
    #[error("flag {flag:?} must be \"read-only\", not {values:?}")]
    Sandbox { flag: String, values: Vec<String> },
    /// No sandbox flag.
    #[error("flag \"--sandbox read-only\" is missing")]
    SandboxMissing,
    /// A `-c` value that is not one of the narrowing keys.
    #[error(
        "flag \"-c\" may only be one of the narrowing keys ({}), not {values:?}",
        CODEX_CONFIG.join(", ")
    )]
    ConfigOverride { values: Vec<String> },
    /// A `--disable` of a feature not on the list.
    #[error(
        "flag \"--disable\" may only name {}, not {values:?}",
        CODEX_DISABLE.join(", ")
    )]
    Disable { values: Vec<String> },
    /// A repeatable flag given the same value twice.
    #[error("flag {flag:?} is given {value:?} twice")]
    ValueTwice { flag: String, value: String },
    /// A variable the runner's `env` may not set.
    #[error("environment variable {name:?} is not allowed (allowed: {allowed})")]
    EnvNotAllowed { name: String, allowed: String },
    /// An allowed variable with another value.
    #[error("environment variable {name:?} must be {expected}, not {value:?}")]
    EnvValue {
        name: String,
        value: String,
        expected: &'static str,
    },
    /// No `--ignore-user-config`.
    #[error("flag \"--ignore-user-config\" is missing (user MCP servers run outside the sandbox)")]
    IgnoreUserConfigMissing,
}

/// Refuses an investigate table with any runner outside the allowlist.
pub fn check_investigate_table(runners: &[Runner]) -> Result<(), SafetyError> {
    for runner in runners {
        check_runner(runner).map_err(|why| SafetyError {
            runner: runner.name.clone(),
            why,
        })?;
    }
    Ok(())
}

/// True when `runner` passes the investigate allowlist: only such a runner is ever
/// given a job's own `cwd` (docs/reference.md, "Job file"), in either mode.
pub fn is_read_only(runner: &Runner) -> bool {
    check_runner(runner).is_ok()
}

fn check_runner(runner: &Runner) -> Result<(), Unsafe> {
    let Some((program, args)) = runner.argv.split_first() else {
        return Err(Unsafe::EmptyArgv);
    };
    let args = args_before_prompt(args)?;
    let program = program.rsplit('/').next().unwrap_or(program);
    match program {
        "claude" => claude::check_claude(args)?,
        "codex" => codex::check_codex(args)?,
        other => {
            return Err(Unsafe::Program {
                program: other.to_string(),
            });
        }
    }
    check_env(program, runner)
}

/// Every variable of the runner's own `env` is on its program's list, with its value.
fn check_env(program: &str, runner: &Runner) -> Result<(), Unsafe> {
    for (name, value) in &runner.env {
        match check_env_var(program, name, value) {
            Ok(()) => {}
            Err(EnvRefusal::NotAllowed { allowed }) => {
                return Err(Unsafe::EnvNotAllowed {
                    name: name.clone(),
                    allowed,
                });
            }
            Err(EnvRefusal::Value { expected }) => {
                return Err(Unsafe::EnvValue {
                    name: name.clone(),
                    value: value.clone(),
                    expected,
                });
            }
        }
    }
    Ok(())
}

/// Refuses an investigate table whose claude opens `home`, or a folder above it, to
/// reads through `additionalDirectories` (the config loader passes `$HOME`). Runs after
/// `check_investigate_table`, which refuses `/` without needing `home`.
pub fn check_investigate_home(runners: &[Runner], home: &Path) -> Result<(), SafetyError> {
    for runner in runners {
        let Some(value) = claude::claude_settings(runner) else {
            continue;
        };
        let Ok(parsed) = serde_json::from_str::<serde_json::Value>(value) else {
            continue;
        };
        if let Some(dir) = directory_above_home(&parsed, home) {
            let problem = format!(
                "\"additionalDirectories\" names {dir:?}, the home folder ({}) or a folder \
                 above it: it would open every file in it to reads",
                home.display()
            );
            return Err(SafetyError {
                runner: runner.name.clone(),
                why: Unsafe::Settings {
                    value: value.to_string(),
                    problem,
                },
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod claude_parser_props;
