//! docs/reference.md, "Runners"'s shipped runner argv, written out once for the integration tests,
//! independently of the source they check.
#![allow(dead_code)]

pub const DEFAULT_CODEX: &[&str] = &[
    "codex",
    "exec",
    "--json",
    "--skip-git-repo-check",
    "-m",
    "gpt-5.3-codex-spark",
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
    "--disable",
    "shell_tool",
    "--disable",
    "hooks",
    "--",
    "{prompt}",
];
pub const DEFAULT_CLAUDE: &[&str] = &[
    "claude",
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--model",
    "haiku",
    "--settings",
    "{\"disableAllHooks\": true}",
    "--setting-sources",
    "",
    "--system-prompt",
    "You answer one question about a coding session. Reply with exactly one line of JSON and nothing else.",
    "--no-session-persistence",
    "--tools",
    "",
    "--strict-mcp-config",
    "--disable-slash-commands",
];
/// The shipped default claude's own environment.
pub const DEFAULT_CLAUDE_ENV: &[(&str, &str)] = &[
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "1024"),
];
pub const DEFAULT_CURSOR: &[&str] = &[
    "cursor-agent",
    "-p",
    "--output-format",
    "text",
    "--",
    "{prompt}",
];
pub const INVESTIGATE_CODEX: &[&str] = &[
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
    "--disable",
    "hooks",
    "--",
    "{prompt}",
];
pub const INVESTIGATE_CLAUDE: &[&str] = &[
    "claude",
    "-p",
    "--output-format",
    "json",
    "--model",
    "haiku",
    "--settings",
    "{\"disableAllHooks\": true, \"permissions\": {\"blockReadsOutsideWorkingDirectories\": true, \"deny\": [\"Read(~/.ssh/**)\", \"Read(~/.aws/**)\", \"Read(~/.config/**)\", \"Read(~/.claude/**)\", \"Read(~/.claude.json)\", \"Read(~/.codex/**)\", \"Read(~/.netrc)\", \"Read(~/.git-credentials)\", \"Read(~/.gnupg/**)\", \"Read(~/.docker/**)\", \"Read(~/.kube/**)\", \"Read(~/.npmrc)\", \"Read(~/.pypirc)\", \"Read(~/.pgpass)\", \"Read(~/.cargo/credentials)\", \"Read(~/.cargo/credentials.toml)\", \"Read(~/.azure/**)\", \"Read(~/.password-store/**)\", \"Read(~/.local/share/keyrings/**)\", \"Read(~/.bash_history)\", \"Read(~/.zsh_history)\", \"Read(~/.zsh_sessions/**)\", \"Read(~/.histfile)\", \"Read(~/.sh_history)\", \"Read(~/.python_history)\", \"Read(~/.node_repl_history)\", \"Read(~/.psql_history)\", \"Read(~/.mysql_history)\", \"Read(~/.sqlite_history)\", \"Read(~/.rediscli_history)\", \"Read(~/.lesshst)\", \"Read(~/.local/share/fish/fish_history)\"]}}",
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

/// `argv` with its program replaced by `program`.
pub fn with_program(argv: &[&str], program: &str) -> Vec<String> {
    std::iter::once(program)
        .chain(argv[1..].iter().copied())
        .map(str::to_string)
        .collect()
}

/// The arguments after the program, with the `{prompt}` slot filled.
pub fn args_with_prompt(argv: &[&str], prompt: &str) -> Vec<String> {
    argv[1..]
        .iter()
        .map(|a| if *a == "{prompt}" { prompt } else { a }.to_string())
        .collect()
}

/// The arguments after the program as the judge starts them: the `{prompt}` slot
/// filled, `model_instructions_file={instructions}` naming `instructions`, and
/// `model_catalog_json={codex_catalog}` naming `catalog` or, with none, dropped with
/// the `-c` before it.
pub fn args_as_started(
    argv: &[&str],
    prompt: &str,
    instructions: &str,
    catalog: Option<&str>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in &argv[1..] {
        match *a {
            "{prompt}" => out.push(prompt.to_string()),
            "model_instructions_file={instructions}" => {
                out.push(format!("model_instructions_file={instructions:?}"))
            }
            "model_catalog_json={codex_catalog}" => match catalog {
                Some(c) => out.push(format!("model_catalog_json={c:?}")),
                None => {
                    out.pop();
                }
            },
            other => out.push(other.to_string()),
        }
    }
    out
}
