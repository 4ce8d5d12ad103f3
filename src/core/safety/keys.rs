//! What the investigate allowlist (`core::safety`) accepts besides flags: codex's
//! narrowing `-c` and `--disable` values, each spelled out with its one value, and the
//! variables a runner's own `env` may set. Every entry only takes something away from
//! what the runner sends, offers or reaches; anything not listed is refused. Pure.

use crate::core::codex::slim::{CATALOG_ITEM, INSTRUCTIONS_ITEM};

/// The `-c` values an investigate codex may carry (measured with codex 0.171.0 against
/// a stand-in API: docs/performance.md, "What a verdict sends").
pub const CODEX_CONFIG: [&str; 10] = [
    // No notification command.
    "notify=[]",
    // The judge's own instructions replace codex's agent prompt (a placeholder the
    // judge fills with its own file, never a path a table gives).
    INSTRUCTIONS_ITEM,
    // The judge's trimmed catalog: no code-mode, multi-agent or patch tools (filled
    // by the judge, or dropped).
    CATALOG_ITEM,
    // The cwd's AGENTS.md is not sent.
    "project_doc_max_bytes=0",
    // No skill list, user-input tool, permission, environment or collaboration-mode
    // text in the request.
    "skills.include_instructions=false",
    "tools.experimental_request_user_input.enabled=false",
    "include_permissions_instructions=false",
    "include_environment_context=false",
    "include_collaboration_mode_instructions=false",
    // No web search tool.
    "web_search=\"disabled\"",
];

/// The features an investigate codex may switch off with `--disable` (`hooks`: a judge
/// never runs the user's codex hooks, which would judge the judge).
pub const CODEX_DISABLE: [&str; 5] = ["multi_agent", "goals", "shell_tool", "view_image", "hooks"];

/// The largest `CLAUDE_CODE_MAX_OUTPUT_TOKENS` accepted: Claude Code 2.1.328's own
/// `max_tokens` when the variable is unset.
pub const MAX_OUTPUT_TOKENS: u64 = 128_000;

/// What an allowed variable's value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    /// Exactly `1` (a switch that turns something off).
    One,
    /// A whole number from 1 to `MAX_OUTPUT_TOKENS`.
    TokenCount,
}

/// The variables an investigate claude's `env` may set. Each exists in Claude Code
/// 2.1.328 (its binary names it); the first two were measured against the stand-in.
const CLAUDE_ENV: [(&str, Value); 5] = [
    // No `HEAD /api/hello`, update check or telemetry connection.
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", Value::One),
    // `max_tokens` of the model request.
    ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", Value::TokenCount),
    // Parts of the above, each on its own.
    ("DISABLE_TELEMETRY", Value::One),
    ("DISABLE_ERROR_REPORTING", Value::One),
    ("DISABLE_AUTOUPDATER", Value::One),
];

/// Why a variable is refused in an investigate runner's `env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvRefusal {
    /// Not on the program's list (the list, as text).
    NotAllowed { allowed: String },
    /// On the list, with a value other than its one (what it must be, as text).
    Value { expected: &'static str },
}

/// Checks one variable of an investigate runner of `program` (claude or codex).
pub fn check_env_var(program: &str, name: &str, value: &str) -> Result<(), EnvRefusal> {
    let rules: &[(&str, Value)] = match program {
        "claude" => &CLAUDE_ENV,
        _ => &[],
    };
    let Some((_, rule)) = rules.iter().find(|(n, _)| *n == name) else {
        let allowed = match rules.is_empty() {
            true => "none for this program".to_string(),
            false => rules.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        };
        return Err(EnvRefusal::NotAllowed { allowed });
    };
    let fine = match rule {
        Value::One => value == "1",
        Value::TokenCount => is_token_count(value),
    };
    match (fine, rule) {
        (true, _) => Ok(()),
        (false, Value::One) => Err(EnvRefusal::Value { expected: "\"1\"" }),
        (false, Value::TokenCount) => Err(EnvRefusal::Value {
            expected: "a whole number from 1 to 128000",
        }),
    }
}

/// Plain decimal digits (no sign, space or leading zero) from 1 to `MAX_OUTPUT_TOKENS`.
fn is_token_count(value: &str) -> bool {
    !value.starts_with('0')
        && !value.is_empty()
        && value.len() <= 6
        && value.bytes().all(|b| b.is_ascii_digit())
        && value.parse::<u64>().is_ok_and(|n| n <= MAX_OUTPUT_TOKENS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_may_set_only_its_listed_switches_with_their_values() {
        for (name, value) in [
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "1024"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "1"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "128000"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
        ] {
            assert_eq!(
                check_env_var("claude", name, value),
                Ok(()),
                "{name}={value}"
            );
        }
        for (name, value) in [
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "0"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "true"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "0"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "01024"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "-1"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "+5"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", " 512"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "128001"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", ""),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "1e3"),
        ] {
            assert!(
                matches!(
                    check_env_var("claude", name, value),
                    Err(EnvRefusal::Value { .. })
                ),
                "{name}={value}"
            );
        }
    }

    #[test]
    fn anything_that_loads_code_or_moves_the_api_is_refused() {
        for name in [
            "NODE_OPTIONS",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_USE_BEDROCK",
            "HTTPS_PROXY",
            "LD_PRELOAD",
            "PATH",
            "HOME",
            "BASH_ENV",
            "CLAUDE_CONFIG_DIR",
            "disable_telemetry",
        ] {
            assert!(
                matches!(
                    check_env_var("claude", name, "1"),
                    Err(EnvRefusal::NotAllowed { .. })
                ),
                "{name}"
            );
        }
        // codex takes no variable at all in an investigate table.
        let e = check_env_var("codex", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        assert_eq!(
            e,
            Err(EnvRefusal::NotAllowed {
                allowed: "none for this program".into()
            })
        );
    }

    use crate::core::runner::table::Runner;
    use crate::core::safety::check_investigate_table;

    /// The shipped investigate codex (config/llm-judge.toml), before `-- {prompt}`.
    const SLIM_CODEX: &[&str] = &[
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
        "read-only",
        "-c",
        "notify=[]",
        "--ignore-user-config",
        "--ephemeral",
        "-c",
        "model_instructions_file={instructions}",
        "-c",
        "model_catalog_json={codex_catalog}",
        "-c",
        "project_doc_max_bytes=0",
        "-c",
        "skills.include_instructions=false",
        "-c",
        "tools.experimental_request_user_input.enabled=false",
        "-c",
        "include_permissions_instructions=false",
        "-c",
        "include_environment_context=false",
        "-c",
        "include_collaboration_mode_instructions=false",
        "-c",
        "web_search=\"disabled\"",
        "--disable",
        "multi_agent",
        "--disable",
        "goals",
        "--disable",
        "view_image",
    ];

    fn codex_with(extra: &[&str]) -> Runner {
        let argv: Vec<&str> = SLIM_CODEX
            .iter()
            .chain(extra)
            .chain(&["--", "{prompt}"])
            .copied()
            .collect();
        Runner::for_tests("codex", &argv)
    }

    fn check(runner: Runner) -> Result<(), String> {
        check_investigate_table(&[runner]).map_err(|e| e.to_string())
    }

    #[test]
    fn every_narrowing_codex_key_passes_alone_and_together() {
        check(codex_with(&[])).unwrap();
        check(codex_with(&["--disable", "shell_tool"])).unwrap();
        check(codex_with(&["--disable=shell_tool"])).unwrap();
        for key in CODEX_CONFIG {
            let argv = [
                "codex",
                "exec",
                "-s",
                "read-only",
                "--ignore-user-config",
                "-c",
                key,
                "--",
                "{prompt}",
            ];
            check(Runner::for_tests("codex", &argv)).unwrap();
        }
    }

    #[test]
    fn a_codex_key_that_widens_or_names_a_file_of_its_own_is_refused() {
        for (extra, words) in [
            (
                &["-c", "model_instructions_file=\"/tmp/evil.md\""][..],
                "narrowing keys",
            ),
            (
                &["-c", "model_catalog_json=\"/tmp/catalog.json\""],
                "narrowing keys",
            ),
            (
                &["-c", "model_instructions_file={instructions}x"],
                "narrowing keys",
            ),
            (&["-c", "project_doc_max_bytes=32768"], "narrowing keys"),
            (&["-c", "web_search=\"live\""], "narrowing keys"),
            (
                &["-c", "sandbox_mode=\"danger-full-access\""],
                "narrowing keys",
            ),
            (&["-c", "mcp_servers.x.command=\"sh\""], "narrowing keys"),
            (
                &["-c", "shell_environment_policy.inherit=\"all\""],
                "narrowing keys",
            ),
            (&["-c", "approval_policy=\"on-request\""], "narrowing keys"),
            (&["--config", "notify=[]"], "\"--config\""),
            (&["-cproject_doc_max_bytes=0"], "is not allowed"),
            (&["--disable", "use_legacy_landlock"], "--disable"),
            (&["--disable", "sandbox"], "--disable"),
            (&["--enable", "shell_tool"], "--enable"),
            (&["--disable", "goals"], "twice"),
            (&["-c", "project_doc_max_bytes=0"], "twice"),
            (&["-c", "-c"], "begins with '-'"),
            (&["--disable"], "needs a value"),
        ] {
            let e = check(codex_with(extra)).unwrap_err();
            assert!(e.contains(words), "{extra:?}: {e}");
            assert!(e.contains("investigate runner \"codex\""), "{e}");
        }
    }

    #[test]
    fn investigate_env_is_refused_naming_the_runner_and_the_variable() {
        let claude = |name: &str, value: &str| Runner {
            env: [(name.to_string(), value.to_string())].into(),
            ..Runner::for_tests(
                "deep",
                &[
                    "claude",
                    "-p",
                    "--setting-sources",
                    "",
                    "--tools",
                    "",
                    "--disallowedTools",
                    "Write",
                    "Edit",
                    "NotebookEdit",
                    "Bash",
                    "--strict-mcp-config",
                    "--",
                    "{prompt}",
                ],
            )
        };
        check(claude("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")).unwrap();
        check(claude("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "1024")).unwrap();
        for (name, value, words) in [
            ("NODE_OPTIONS", "--require /tmp/x.js", "is not allowed"),
            ("ANTHROPIC_BASE_URL", "http://evil", "is not allowed"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "lots", "whole number"),
            ("DISABLE_TELEMETRY", "0", "must be \"1\""),
        ] {
            let e = check(claude(name, value)).unwrap_err();
            assert!(
                e.contains("investigate runner \"deep\"") && e.contains(name) && e.contains(words),
                "{name}: {e}"
            );
        }
        let codex = Runner {
            env: [("DISABLE_TELEMETRY".to_string(), "1".to_string())].into(),
            ..codex_with(&[])
        };
        let e = check(codex).unwrap_err();
        assert!(
            e.contains("DISABLE_TELEMETRY") && e.contains("none for this program"),
            "{e}"
        );
    }

    #[test]
    fn the_codex_keys_are_each_spelled_out_once() {
        let mut all: Vec<&str> = CODEX_CONFIG.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), CODEX_CONFIG.len());
        assert!(CODEX_CONFIG.contains(&INSTRUCTIONS_ITEM) && CODEX_CONFIG.contains(&CATALOG_ITEM));
        assert!(!CODEX_DISABLE.contains(&"sandbox"));
    }
}
