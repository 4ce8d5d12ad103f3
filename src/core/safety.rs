//! The investigate safety invariant (docs/reference.md, "Investigate allowlist"): an
//! allowlist check of every investigate runner argv. Pure.

use std::path::Path;

use thiserror::Error;

use crate::core::read_scope::{directory_above_home, settings_problem};
use crate::core::runner_table::{PROMPT_SLOT, Runner};
use crate::core::safety_keys::{CODEX_CONFIG, CODEX_DISABLE, EnvRefusal, check_env_var};

const READ_TOOLS: [&str; 3] = ["Read", "Grep", "Glob"];
const MUST_DENY: [&str; 4] = ["Write", "Edit", "NotebookEdit", "Bash"];

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
        "claude" => check_claude(args)?,
        "codex" => check_codex(args)?,
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

/// Splits off the required trailing `-- {prompt}` and refuses any other prompt slot.
fn args_before_prompt(args: &[String]) -> Result<&[String], Unsafe> {
    let n = args.len();
    if n < 2 || args[n - 2] != "--" || args[n - 1] != PROMPT_SLOT {
        return Err(Unsafe::NoFinalPrompt);
    }
    let head = &args[..n - 2];
    if head.iter().any(|a| a == PROMPT_SLOT || a == "--") {
        return Err(Unsafe::EarlyPrompt);
    }
    Ok(head)
}

/// One parsed flag: its name and its values.
struct Flag<'a> {
    name: &'a str,
    values: Vec<&'a str>,
}

impl Flag<'_> {
    fn owned_values(&self) -> Vec<String> {
        self.values.iter().map(|v| v.to_string()).collect()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Arity {
    None,
    One,
    List,
}

/// How a program's flags take values: the arity of each allowed flag, the flags where
/// an empty value means "none" (the only place an empty value is safe), and the flags
/// that may be given more than once (each value is then checked on its own).
struct Grammar {
    arity: fn(&str) -> Option<Arity>,
    empty_ok: &'static [&'static str],
    repeatable: &'static [&'static str],
}

/// Parses flags with `--flag=value` forms. Every flag that takes values gets at least
/// one, and none may begin with `-`: claude's parser takes the next item as a value
/// whatever it looks like, so `--tools --disallowedTools ...` would hand claude the
/// deny list as its tools. A list runs until the next item that begins with `-`.
fn parse_flags<'a>(args: &'a [String], grammar: &Grammar) -> Result<Vec<Flag<'a>>, Unsafe> {
    let mut flags: Vec<Flag<'a>> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let item = args[i].as_str();
        let (name, inline) = match item.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (item, None),
        };
        let kind = (grammar.arity)(name).ok_or_else(|| Unsafe::FlagNotAllowed {
            item: item.to_string(),
        })?;
        if !grammar.repeatable.contains(&name) && flags.iter().any(|f| f.name == name) {
            return Err(Unsafe::FlagTwice { flag: name.into() });
        }
        i += 1;
        let mut values: Vec<&str> = inline.into_iter().collect();
        match kind {
            Arity::None if inline.is_some() => {
                return Err(Unsafe::TakesNoValue { flag: name.into() });
            }
            Arity::None => {}
            Arity::One if inline.is_none() => {
                if let Some(v) = args.get(i) {
                    values.push(v);
                    i += 1;
                }
            }
            Arity::List if inline.is_none() => {
                if let Some(v) = args.get(i) {
                    values.push(v);
                    i += 1;
                }
                while let Some(v) = args.get(i).filter(|v| !v.starts_with('-')) {
                    values.push(v);
                    i += 1;
                }
            }
            Arity::One | Arity::List => {}
        }
        if kind != Arity::None {
            check_values(name, &values, grammar.empty_ok.contains(&name))?;
        }
        flags.push(Flag { name, values });
    }
    Ok(flags)
}

fn check_values(name: &str, values: &[&str], empty_ok: bool) -> Result<(), Unsafe> {
    let flag = name.to_string();
    if values.is_empty() {
        return Err(Unsafe::NeedsValue { flag });
    }
    if let Some(v) = values.iter().find(|v| v.starts_with('-')) {
        let value = v.to_string();
        return Err(Unsafe::DashValue { flag, value });
    }
    if !empty_ok && values.iter().any(|v| v.is_empty()) {
        return Err(Unsafe::EmptyValue { flag });
    }
    Ok(())
}

/// Tool names of a list flag, space- or comma-separated.
fn tools<'a>(flag: &Flag<'a>) -> Vec<&'a str> {
    flag.values
        .iter()
        .flat_map(|v| v.split([',', ' ']))
        .filter(|t| !t.is_empty())
        .collect()
}

fn find<'f, 'a>(flags: &'f [Flag<'a>], names: &[&str]) -> Option<&'f Flag<'a>> {
    flags.iter().find(|f| names.contains(&f.name))
}

/// Refuses a short and a long form of the same flag together (`pair`: short, long).
fn refuse_both_forms(flags: &[Flag<'_>], pair: [&str; 2]) -> Result<(), Unsafe> {
    if find(flags, &[pair[0]]).is_some() && find(flags, &[pair[1]]).is_some() {
        return Err(Unsafe::FlagTwiceAs {
            flag: pair[1].into(),
            short: pair[0].into(),
        });
    }
    Ok(())
}

const CLAUDE_GRAMMAR: Grammar = Grammar {
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

fn check_claude(args: &[String]) -> Result<(), Unsafe> {
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

/// Refuses an investigate table whose claude opens `home`, or a folder above it, to
/// reads through `additionalDirectories` (the config loader passes `$HOME`). Runs after
/// `check_investigate_table`, which refuses `/` without needing `home`.
pub fn check_investigate_home(runners: &[Runner], home: &Path) -> Result<(), SafetyError> {
    for runner in runners {
        let Some(value) = claude_settings(runner) else {
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

/// The `--settings` value of a claude runner, if it has one.
fn claude_settings(runner: &Runner) -> Option<&str> {
    let (program, args) = runner.argv.split_first()?;
    if program.rsplit('/').next() != Some("claude") {
        return None;
    }
    let flags = parse_flags(args_before_prompt(args).ok()?, &CLAUDE_GRAMMAR).ok()?;
    find(&flags, &["--settings"]).and_then(|f| f.values.first().copied())
}

const CODEX_GRAMMAR: Grammar = Grammar {
    arity: |name| match name {
        "--skip-git-repo-check" | "--ignore-user-config" | "--ephemeral" | "--json" => {
            Some(Arity::None)
        }
        "-m" | "--model" | "--sandbox" | "-s" | "-c" | "--disable" => Some(Arity::One),
        _ => None,
    },
    empty_ok: &[],
    repeatable: &["-c", "--disable"],
};

fn check_codex(args: &[String]) -> Result<(), Unsafe> {
    let Some(("exec", rest)) = args.split_first().map(|(a, r)| (a.as_str(), r)) else {
        return Err(Unsafe::NotCodexExec);
    };
    let flags = parse_flags(rest, &CODEX_GRAMMAR)?;
    refuse_both_forms(&flags, ["-m", "--model"])?;
    refuse_both_forms(&flags, ["-s", "--sandbox"])?;
    match find(&flags, &["-s", "--sandbox"]) {
        Some(f) if f.values == ["read-only"] => {}
        Some(f) => {
            return Err(Unsafe::Sandbox {
                flag: f.name.into(),
                values: f.owned_values(),
            });
        }
        None => return Err(Unsafe::SandboxMissing),
    }
    only_listed(&flags, "-c", &CODEX_CONFIG, |values| {
        Unsafe::ConfigOverride { values }
    })?;
    only_listed(&flags, "--disable", &CODEX_DISABLE, |values| {
        Unsafe::Disable { values }
    })?;
    if find(&flags, &["--ignore-user-config"]).is_none() {
        return Err(Unsafe::IgnoreUserConfigMissing);
    }
    Ok(())
}

/// Every value of the repeatable `flag` is one of `listed`, each at most once.
fn only_listed(
    flags: &[Flag<'_>],
    flag: &str,
    listed: &[&str],
    refused: fn(Vec<String>) -> Unsafe,
) -> Result<(), Unsafe> {
    let mut seen: Vec<&str> = Vec::new();
    for f in flags.iter().filter(|f| f.name == flag) {
        if f.values.iter().any(|v| !listed.contains(v)) {
            return Err(refused(f.owned_values()));
        }
        if let Some(v) = f.values.iter().find(|v| seen.contains(v)) {
            return Err(Unsafe::ValueTwice {
                flag: flag.into(),
                value: v.to_string(),
            });
        }
        seen.extend(&f.values);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(argv: &[&str]) -> Runner {
        Runner::for_tests("r", argv)
    }

    fn check(argv: &[&str]) -> Result<(), String> {
        check_investigate_table(&[runner(argv)]).map_err(|e| e.to_string())
    }

    /// The shipped investigate claude's settings: hooks off, reads confined.
    static CONFINED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        serde_json::json!({"disableAllHooks": true, "permissions": {
            "blockReadsOutsideWorkingDirectories": true,
            "deny": crate::core::read_scope::SHIPPED_DENY,
        }})
        .to_string()
    });

    /// `CLAUDE` with its settings placeholder filled with `CONFINED`.
    fn claude() -> Vec<&'static str> {
        CLAUDE
            .iter()
            .map(|a| if *a == SETTINGS { CONFINED.as_str() } else { a })
            .collect()
    }

    const SETTINGS: &str = "SETTINGS";
    const CLAUDE: &[&str] = &[
        "claude",
        "-p",
        "--model",
        "haiku",
        "--settings",
        SETTINGS,
        "--setting-sources",
        "",
        "--no-session-persistence",
        "--tools",
        "Read",
        "Grep",
        "Glob",
        "--allowedTools",
        "Read",
        "Grep",
        "Glob",
        "--disallowedTools",
        "Write",
        "Edit",
        "NotebookEdit",
        "Bash",
        "--strict-mcp-config",
        "--disable-slash-commands",
        "--",
        "{prompt}",
    ];
    const CODEX: &[&str] = &[
        "codex",
        "exec",
        "--skip-git-repo-check",
        "--sandbox",
        "read-only",
        "-c",
        "notify=[]",
        "--ignore-user-config",
        "--ephemeral",
        "--",
        "{prompt}",
    ];

    fn replaced(base: &[&str], from: &str, to: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        let mut done = false;
        for item in base {
            if *item == from && !done {
                out.extend(to.iter().map(|s| s.to_string()));
                done = true;
            } else {
                out.push(item.to_string());
            }
        }
        assert!(done, "{from} not in argv");
        out
    }

    fn check_owned(argv: Vec<String>) -> Result<(), String> {
        check(&argv.iter().map(String::as_str).collect::<Vec<_>>())
    }

    #[test]
    fn shipped_investigate_argv_pass() {
        check(&claude()).unwrap();
        check(CODEX).unwrap();
    }

    #[test]
    fn equals_forms_and_commas_count_the_same() {
        let settings = format!("--settings={}", *CONFINED);
        check(&[
            "/usr/bin/claude",
            "--print",
            "--tools=Read,Grep",
            "--disallowedTools=Write,Edit,NotebookEdit,Bash",
            "--strict-mcp-config",
            "--setting-sources=",
            &settings,
            "--",
            "{prompt}",
        ])
        .unwrap();
        check(&[
            "codex",
            "exec",
            "-s",
            "read-only",
            "--ignore-user-config",
            "-m",
            "o4",
            "--",
            "{prompt}",
        ])
        .unwrap();
        check(&[
            "codex",
            "exec",
            "--sandbox=read-only",
            "--ignore-user-config",
            "--",
            "{prompt}",
        ])
        .unwrap();
    }

    #[test]
    fn unsafe_claude_tables_are_refused_naming_the_flag() {
        let cases: Vec<(Vec<String>, &str)> = vec![
            (replaced(&claude(), "Glob", &["Glob", "Write"]), "\"Write\""),
            (replaced(&claude(), "Glob", &["Glob,Bash"]), "\"Bash\""),
            (replaced(&claude(), "Bash", &[]), "\"Bash\" is missing"),
            (
                replaced(&claude(), "--strict-mcp-config", &[]),
                "--strict-mcp-config",
            ),
            (
                replaced(&claude(), "-p", &["-p", "--dangerously-skip-permissions"]),
                "--dangerously-skip-permissions",
            ),
            (
                replaced(&claude(), "-p", &["-p", "--permission-mode", "acceptEdits"]),
                "--permission-mode",
            ),
            (replaced(&claude(), "-p", &["-p", "--print"]), "twice"),
            (
                replaced(&claude(), "--model", &["--model", "x", "--model"]),
                "twice",
            ),
            (replaced(&claude(), "--", &[]), "must end with"),
            (
                replaced(&claude(), "haiku", &["{prompt}"]),
                "before the final",
            ),
            (
                replaced(&claude(), "{prompt}", &["{prompt}", "extra"]),
                "must end with",
            ),
        ];
        for (argv, words) in cases {
            let e = check_owned(argv.clone()).unwrap_err();
            assert!(e.contains(words), "{argv:?}: {e}");
            assert!(e.contains("investigate runner \"r\""), "{e}");
        }
        // With --tools gone, the list words that followed are stray words: still refused.
        let no_tools: Vec<String> = claude()
            .iter()
            .enumerate()
            .filter(|(i, _)| !(9..=12).contains(i))
            .map(|(_, s)| s.to_string())
            .collect();
        assert!(
            check_owned(no_tools)
                .unwrap_err()
                .contains("\"--tools\" is missing")
        );
    }

    #[test]
    fn unsafe_codex_tables_are_refused_naming_the_flag() {
        let cases: Vec<(Vec<String>, &str)> = vec![
            (
                replaced(CODEX, "read-only", &["workspace-write"]),
                "read-only",
            ),
            (
                CODEX
                    .iter()
                    .filter(|a| !["--sandbox", "read-only"].contains(a))
                    .map(|s| s.to_string())
                    .collect(),
                "--sandbox read-only\" is missing",
            ),
            (
                replaced(CODEX, "--ignore-user-config", &[]),
                "--ignore-user-config",
            ),
            (replaced(CODEX, "notify=[]", &["mcp_servers={}"]), "-c"),
            (
                replaced(
                    CODEX,
                    "--ephemeral",
                    &["--ephemeral", "--dangerously-bypass-approvals-and-sandbox"],
                ),
                "--dangerously",
            ),
            (
                replaced(CODEX, "--ephemeral", &["--ephemeral", "--full-auto"]),
                "--full-auto",
            ),
            (replaced(CODEX, "exec", &["review"]), "codex exec"),
            (
                replaced(CODEX, "--ephemeral", &["--ephemeral", "-s", "read-only"]),
                "twice",
            ),
        ];
        for (argv, words) in cases {
            let e = check_owned(argv.clone()).unwrap_err();
            assert!(e.contains(words), "{argv:?}: {e}");
        }
    }

    #[test]
    fn other_programs_are_refused() {
        for program in [
            "cursor-agent",
            "sh",
            "/bin/bash",
            "python3",
            "claude-wrapper",
        ] {
            let e = check(&[program, "--", "{prompt}"]).unwrap_err();
            assert!(e.contains("is not allowed"), "{program}: {e}");
        }
    }

    #[test]
    fn a_flag_value_that_begins_with_a_dash_is_refused() {
        let bypass = &[
            "claude",
            "-p",
            "--setting-sources",
            "",
            "--tools",
            "--disallowedTools",
            "Write",
            "Edit",
            "NotebookEdit",
            "Bash",
            "--strict-mcp-config",
            "--",
            "{prompt}",
        ];
        let e = check(bypass).unwrap_err();
        assert!(
            e.contains("\"--tools\"") && e.contains("begins with '-'"),
            "{e}"
        );
        let drops_tools = replaced(&claude(), "--allowedTools", &["--allowedTools", "--tools"]);
        assert!(check_owned(drops_tools).is_err());
        let prompt_as_option: Vec<String> = claude()
            .iter()
            .take_while(|a| **a != "--allowedTools")
            .chain(["--allowedTools", "--", "{prompt}"].iter())
            .map(|s| s.to_string())
            .collect();
        assert!(check_owned(prompt_as_option).is_err());
        for flag in ["--model", "--system-prompt", "--output-format"] {
            let e = check_owned(replaced(&claude(), "-p", &["-p", flag, "--print"])).unwrap_err();
            assert!(e.contains(flag), "{flag}: {e}");
        }
        let e = check_owned(replaced(&claude(), "haiku", &[""])).unwrap_err();
        assert!(e.contains("empty value"), "{e}");
        let e = check_owned(replaced(CODEX, "read-only", &["-x"])).unwrap_err();
        assert!(e.contains("begins with '-'"), "{e}");
    }

    #[test]
    fn settings_sources_must_be_empty_and_settings_may_only_disable_hooks() {
        let without: Vec<String> = claude()
            .iter()
            .enumerate()
            .filter(|(i, _)| !(6..=7).contains(i))
            .map(|(_, s)| s.to_string())
            .collect();
        let e = check_owned(without).unwrap_err();
        assert!(e.contains("--setting-sources"), "{e}");
        let mut project = replaced(&claude(), "--setting-sources", &["--setting-sources"]);
        project[7] = "project".into();
        assert!(
            check_owned(project)
                .unwrap_err()
                .contains("--setting-sources")
        );
        for settings in [
            "/home/u/settings.json",
            "{\"disableAllHooks\": true, \"apiKeyHelper\": \"touch /tmp/x\"}",
            "{\"disableAllHooks\": false}",
            "{\"env\": {\"A\": \"1\"}}",
            "{\"hooks\": {}}",
            "{\"disableAllHooks\": true, \"permissions\": {\"allow\": [\"Bash\"]}}",
            "{\"disableAllHooks\": true, \"permissions\": {\"defaultMode\": \"bypassPermissions\"}}",
            "{\"disableAllHooks\": true, \"permissions\": {\"blockReadsOutsideWorkingDirectories\": false}}",
            "{\"disableAllHooks\": true, \"permissions\": {\"additionalDirectories\": [\"logs\"]}}",
            "{\"disableAllHooks\": true, \"permissions\": {\"deny\": \"Read(~/.ssh/**)\"}}",
            "{\"disableAllHooks\": true, \"permissions\": []}",
            // Issue 39: confines nothing.
            "{\"disableAllHooks\": true}",
            "{\"disableAllHooks\": true, \"permissions\": {\"blockReadsOutsideWorkingDirectories\": true, \"deny\": []}}",
            "{\"disableAllHooks\": true, \"permissions\": {\"blockReadsOutsideWorkingDirectories\": true, \"deny\": [\"Read(~/.ssh/**)\"]}}",
        ] {
            let argv = replaced(&claude(), &CONFINED, &[settings]);
            let e = check_owned(argv).unwrap_err();
            assert!(e.contains("--settings"), "{settings}: {e}");
        }
        let with = |extra: serde_json::Value| {
            let mut settings: serde_json::Value = serde_json::from_str(&CONFINED).unwrap();
            settings["permissions"]
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            replaced(&claude(), &CONFINED, &[&settings.to_string()])
        };
        check_owned(with(
            serde_json::json!({"additionalDirectories": ["/var/log/app"]}),
        ))
        .unwrap();
        let mut more = crate::core::read_scope::SHIPPED_DENY.to_vec();
        more.push("Read(/srv/secrets/**)");
        check_owned(with(serde_json::json!({"deny": more}))).unwrap();
        let e = check_owned(with(serde_json::json!({"additionalDirectories": ["/"]}))).unwrap_err();
        assert!(e.contains("the root folder"), "{e}");
        // Read tools with no settings at all: nothing confines them.
        let e = check_owned(
            replaced(&claude(), "--settings", &[])
                .into_iter()
                .filter(|a| *a != *CONFINED)
                .collect(),
        )
        .unwrap_err();
        assert!(e.contains("\"--settings\" is missing"), "{e}");
        // No read tools: no settings needed, and hooks off is enough.
        let no_reads = |settings: Option<&str>| {
            let mut argv = vec!["claude", "-p", "--setting-sources", "", "--tools", ""];
            argv.extend(["--disallowedTools", "Write", "Edit", "NotebookEdit", "Bash"]);
            argv.extend(["--strict-mcp-config"]);
            argv.extend(settings.map(|s| ["--settings", s]).into_iter().flatten());
            argv.extend(["--", "{prompt}"]);
            check(&argv)
        };
        no_reads(None).unwrap();
        no_reads(Some("{\"disableAllHooks\": true}")).unwrap();
    }

    #[test]
    fn home_and_folders_above_it_are_refused_as_additional_directories() {
        let table = |dir: &str| {
            let mut settings: serde_json::Value = serde_json::from_str(&CONFINED).unwrap();
            settings["permissions"]["additionalDirectories"] = serde_json::json!([dir]);
            let argv = replaced(&claude(), &CONFINED, &[&settings.to_string()]);
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            vec![runner(&argv)]
        };
        let home = Path::new("/home/u");
        for dir in ["/home/u", "/home", "/home/u/../u/"] {
            let t = table(dir);
            check_investigate_table(&t).unwrap();
            let e = check_investigate_home(&t, home).unwrap_err().to_string();
            assert!(
                e.contains("the home folder (/home/u)") && e.contains("\"r\""),
                "{e}"
            );
        }
        check_investigate_home(&table("/home/u/project"), home).unwrap();
        check_investigate_home(&[runner(CODEX)], home).unwrap();
    }

    /// How claude's option parser (commander) reads an argv: a value-taking option
    /// takes the next item whatever it is; a variadic one then takes items until one
    /// begins with `-`; `--name=value` takes no more; `--` ends the options.
    #[derive(Default, Debug)]
    struct Commander {
        options: std::collections::HashMap<String, Vec<String>>,
        operands: Vec<String>,
        unknown: bool,
    }

    fn commander(args: &[String]) -> Commander {
        let mut parsed = Commander::default();
        let mut variadic: Option<String> = None;
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            if arg == "--" {
                parsed.operands.extend(args[i..].iter().cloned());
                break;
            }
            let option_like = arg.len() > 1 && arg.starts_with('-');
            if let Some(name) = &variadic
                && !option_like
            {
                parsed
                    .options
                    .entry(name.clone())
                    .or_default()
                    .push(arg.clone());
                continue;
            }
            variadic = None;
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
                _ => (arg.clone(), None),
            };
            if !option_like {
                parsed.operands.push(arg.clone());
                continue;
            }
            let Some(kind) = (CLAUDE_GRAMMAR.arity)(&name) else {
                parsed.unknown = true;
                continue;
            };
            let entry = parsed.options.entry(name.clone()).or_default();
            match (kind, inline) {
                (Arity::None, _) => {}
                (_, Some(v)) => entry.push(v),
                (_, None) => {
                    if let Some(v) = args.get(i) {
                        entry.push(v.clone());
                        i += 1;
                    }
                    if kind == Arity::List {
                        variadic = Some(name);
                    }
                }
            }
        }
        parsed
    }

    fn tool_names(values: Option<&Vec<String>>) -> Option<Vec<String>> {
        values.map(|vs| {
            vs.iter()
                .flat_map(|v| v.split([',', ' ']))
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect()
        })
    }

    use proptest::prelude::*;

    fn vocabulary() -> impl Strategy<Value = String> {
        let mut words: Vec<String> = [
            "-p",
            "--print",
            "--model",
            "haiku",
            "--settings",
            "{\"disableAllHooks\": true}",
            "--setting-sources",
            "",
            "--system-prompt",
            "Be brief.",
            "--no-session-persistence",
            "--tools",
            "--allowedTools",
            "--disallowedTools",
            "Read",
            "Grep",
            "Glob",
            "Write",
            "Edit",
            "NotebookEdit",
            "Bash",
            "Read,Grep",
            "Write,Edit,NotebookEdit,Bash",
            "--strict-mcp-config",
            "--disable-slash-commands",
            "--output-format",
            "text",
            "--",
            "-",
            "--tools=Read",
            "--tools=",
            "--disallowedTools=Write,Edit,NotebookEdit,Bash",
            "--setting-sources=",
            "{prompt}",
            "--dangerously-skip-permissions",
            "-x",
            "project",
        ]
        .map(str::to_string)
        .to_vec();
        // The shipped confinement, and the same with the root folder opened to reads.
        words.push(CONFINED.clone());
        words.push(CONFINED.replace("\"deny\"", "\"additionalDirectories\": [\"/\"], \"deny\""));
        prop::sample::select(words)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn whatever_the_check_accepts_claude_parses_as_read_only(
            middle in prop::collection::vec(vocabulary(), 0..24),
            seed_safe in any::<bool>(),
        ) {
            // Half the cases start from the safe argv with hostile items spliced in,
            // so accepted cases are common enough to test.
            let mut args: Vec<String> = if seed_safe {
                let mut base: Vec<String> = claude()[1..CLAUDE.len() - 2].iter().map(|s| s.to_string()).collect();
                let at = middle.len() % (base.len() + 1);
                base.splice(at..at, middle.iter().take(3).cloned());
                base
            } else {
                middle.clone()
            };
            args.push("--".into());
            args.push("{prompt}".into());
            let mut argv = vec!["claude".to_string()];
            argv.extend(args.iter().cloned());
            if check_owned(argv).is_ok() {
                let parsed = commander(&args);
                prop_assert!(!parsed.unknown, "{args:?}");
                prop_assert_eq!(&parsed.operands, &vec!["{prompt}".to_string()], "{:?}", args);
                let tools = tool_names(parsed.options.get("--tools"));
                prop_assert!(tools.as_ref().is_some_and(|t| t.iter().all(|t| READ_TOOLS.contains(&t.as_str()))), "{:?}", args);
                let allowed = tool_names(parsed.options.get("--allowedTools")).unwrap_or_default();
                prop_assert!(allowed.iter().all(|t| READ_TOOLS.contains(&t.as_str())), "{:?}", args);
                let denied = tool_names(parsed.options.get("--disallowedTools")).unwrap_or_default();
                prop_assert!(MUST_DENY.iter().all(|t| denied.iter().any(|d| d == t)), "{:?}", args);
                prop_assert_eq!(parsed.options.get("--setting-sources"), Some(&vec![String::new()]), "{:?}", args);
                prop_assert!(parsed.options.contains_key("--strict-mcp-config"), "{:?}", args);
                if tools.is_some_and(|t| !t.is_empty()) {
                    let settings = parsed.options.get("--settings").and_then(|v| v.first());
                    let settings: serde_json::Value = settings
                        .and_then(|s| serde_json::from_str(s).ok())
                        .unwrap_or_default();
                    let permissions = &settings["permissions"];
                    prop_assert_eq!(&permissions["blockReadsOutsideWorkingDirectories"], true, "{:?}", args);
                    let denied = permissions["deny"].as_array().cloned().unwrap_or_default();
                    let shipped = crate::core::read_scope::SHIPPED_DENY;
                    prop_assert!(shipped.iter().all(|r| denied.contains(&(*r).into())), "{:?}", args);
                    let extra = permissions["additionalDirectories"].as_array().cloned().unwrap_or_default();
                    prop_assert!(!extra.contains(&"/".into()), "{:?}", args);
                }
            }
        }
    }
}
