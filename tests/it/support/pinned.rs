//! SPEC section 4's shipped runner argv, written out once for the integration tests,
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
