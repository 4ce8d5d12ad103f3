//! Unit tests of `config.rs` (a file of their own to keep that one short).

use super::*;
use std::time::Duration;

#[test]
fn the_spend_cap_is_off_by_default_and_checked_when_set() {
    let c = parse_config(None).unwrap();
    assert!(c.budget().is_unlimited());
    let c = parse_config(Some(
        "max_cost_usd_per_day = 2.5\nmax_runs_per_hour = 100\n",
    ))
    .unwrap();
    assert_eq!(c.budget().max_cost_usd_per_day, Some(2.5));
    assert_eq!(c.budget().max_runs_per_hour, Some(100));
    let e = parse_config(Some("max_cost_usd_per_day = -1\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_cost_usd_per_day"), "{e}");
    let e = parse_config(Some("max_runs_per_hour = -1\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_runs_per_hour"), "{e}");
}

#[test]
fn embedded_default_loads_with_spec_values() {
    let c = parse_config(None).unwrap();
    assert_eq!(c.workers, 4);
    assert_eq!(
        (c.default_timeout_seconds, c.max_timeout_seconds),
        (60.0, 600.0)
    );
    assert_eq!(c.kill_grace_seconds, Duration::from_secs(5));
    assert_eq!(c.shutdown_grace_seconds, Duration::from_secs(15));
    assert_eq!(c.rescan_seconds, Duration::from_secs(30));
    assert_eq!(c.max_job_bytes, 8 * 1024 * 1024);
    assert!(c.fsync);
    assert_eq!(c.log_max_bytes, 50 * 1024 * 1024);
    assert_eq!(c.undeliverable_days, 7.0);
    assert!(c.single_flight && c.health.enabled);
    assert_eq!(
        (c.health.backoff_start_seconds, c.health.backoff_max_seconds),
        (60.0, 21600.0)
    );
    assert_eq!((c.cache.ttl_seconds, c.cache.max_entries), (86400.0, 10000));
    let names: Vec<&str> = c.runners.default.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["claude", "codex", "cursor"]);
    let names: Vec<&str> = c
        .runners
        .investigate
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, ["codex", "claude"]);
}

#[test]
fn shipped_default_argv_are_pinned() {
    let c = parse_config(None).unwrap();
    let argv: Vec<Vec<String>> = c.runners.default.iter().map(|r| r.argv.clone()).collect();
    let expected: Vec<Vec<String>> = serde_json::from_str(
        r#"[["claude", "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--model", "haiku", "--settings", "{\"disableAllHooks\": true}", "--setting-sources", "", "--system-prompt", "You answer one question about a coding session. Reply with exactly one line of JSON and nothing else.", "--no-session-persistence", "--tools", "", "--strict-mcp-config", "--disable-slash-commands"],
            ["codex", "exec", "--json", "--skip-git-repo-check", "-m", "gpt-5.3-codex-spark", "--sandbox", "read-only", "-c", "notify=[]", "--ignore-user-config", "--ephemeral", "-c", "model_instructions_file={instructions}", "-c", "model_catalog_json={codex_catalog}", "-c", "project_doc_max_bytes=0", "-c", "skills.include_instructions=false", "-c", "tools.experimental_request_user_input.enabled=false", "-c", "include_permissions_instructions=false", "-c", "include_environment_context=false", "-c", "include_collaboration_mode_instructions=false", "-c", "web_search=\"disabled\"", "--disable", "multi_agent", "--disable", "goals", "--disable", "view_image", "--disable", "shell_tool", "--disable", "hooks", "--", "{prompt}"],
            ["cursor-agent", "-p", "--output-format", "text", "--", "{prompt}"]]"#,
    )
    .unwrap();
    assert_eq!(argv, expected);
    let prestart: Vec<Option<u32>> = c.runners.default.iter().map(|r| r.prestart).collect();
    assert_eq!(
        prestart,
        [Some(1), Some(1), None],
        "claude and codex may wait (the first health does not bench does)"
    );
    let env: Vec<Vec<String>> = c
        .runners
        .default
        .iter()
        .map(|r| crate::core::runner::env::identity(&r.env))
        .collect();
    assert_eq!(
        env,
        [
            vec![
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1".to_string(),
                "CLAUDE_CODE_MAX_OUTPUT_TOKENS=1024".to_string()
            ],
            vec![],
            vec![]
        ],
        "only claude has its own env"
    );
    assert!(c.runners.investigate.iter().all(|r| r.env.is_empty()));
}

#[test]
fn investigate_argv_are_pinned() {
    let c = parse_config(None).unwrap();
    let argv: Vec<Vec<String>> = c
        .runners
        .investigate
        .iter()
        .map(|r| r.argv.clone())
        .collect();
    let expected: Vec<Vec<String>> = serde_json::from_str(
        r#"[["codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only", "-c", "notify=[]", "--ignore-user-config", "--ephemeral", "-c", "model_instructions_file={instructions}", "-c", "model_catalog_json={codex_catalog}", "-c", "project_doc_max_bytes=0", "-c", "skills.include_instructions=false", "-c", "tools.experimental_request_user_input.enabled=false", "-c", "include_permissions_instructions=false", "-c", "include_environment_context=false", "-c", "include_collaboration_mode_instructions=false", "-c", "web_search=\"disabled\"", "--disable", "multi_agent", "--disable", "goals", "--disable", "view_image", "--disable", "hooks", "--", "{prompt}"],
            ["claude", "-p", "--output-format", "json", "--model", "haiku", "--settings", "{\"disableAllHooks\": true, \"permissions\": {\"blockReadsOutsideWorkingDirectories\": true, \"deny\": [\"Read(~/.ssh/**)\", \"Read(~/.aws/**)\", \"Read(~/.config/**)\", \"Read(~/.claude/**)\", \"Read(~/.claude.json)\", \"Read(~/.codex/**)\", \"Read(~/.netrc)\", \"Read(~/.git-credentials)\", \"Read(~/.gnupg/**)\", \"Read(~/.docker/**)\", \"Read(~/.kube/**)\", \"Read(~/.npmrc)\", \"Read(~/.pypirc)\", \"Read(~/.pgpass)\", \"Read(~/.cargo/credentials)\", \"Read(~/.cargo/credentials.toml)\", \"Read(~/.azure/**)\", \"Read(~/.password-store/**)\", \"Read(~/.local/share/keyrings/**)\", \"Read(~/.bash_history)\", \"Read(~/.zsh_history)\", \"Read(~/.zsh_sessions/**)\", \"Read(~/.histfile)\", \"Read(~/.sh_history)\", \"Read(~/.python_history)\", \"Read(~/.node_repl_history)\", \"Read(~/.psql_history)\", \"Read(~/.mysql_history)\", \"Read(~/.sqlite_history)\", \"Read(~/.rediscli_history)\", \"Read(~/.lesshst)\", \"Read(~/.local/share/fish/fish_history)\"]}}", "--setting-sources", "", "--no-session-persistence", "--tools", "Read", "Grep", "Glob", "--allowedTools", "Read", "Grep", "Glob", "--disallowedTools", "Write", "Edit", "NotebookEdit", "Bash", "--strict-mcp-config", "--disable-slash-commands", "--", "{prompt}"]]"#,
    )
    .unwrap();
    assert_eq!(argv, expected);
}

#[test]
fn a_file_overrides_only_its_keys_and_replaces_whole_tables() {
    let c = parse_config(Some(
        "workers = 2\n[[runners.default]]\nname = \"fake\"\nargv = [\"/bin/fake\", \"{prompt}\"]\nmax_concurrent = 1\n",
    ))
    .unwrap();
    assert_eq!(c.workers, 2);
    assert_eq!(c.kill_grace_seconds, Duration::from_secs(5));
    assert_eq!(c.runners.default.len(), 1);
    assert_eq!(c.runners.default[0].max_concurrent, Some(1));
    assert_eq!(c.runners.investigate.len(), 2);
}

#[test]
fn health_and_cache_tables_merge_key_by_key() {
    let c = parse_config(Some(
        "[health]\nbackoff_start_seconds = 1\n[cache]\nttl_seconds = 0\n",
    ))
    .unwrap();
    assert_eq!(c.health.backoff_start_seconds, 1.0);
    assert_eq!(c.health.backoff_max_seconds, 21600.0);
    assert_eq!((c.cache.ttl_seconds, c.cache.max_entries), (0.0, 10000));
    assert!(
        parse_config(Some("[cache]\nttl = 5\n"))
            .unwrap_err()
            .to_string()
            .contains("ttl")
    );
}

#[test]
fn unknown_keys_are_named() {
    let e = parse_config(Some("wrokers = 2\n")).unwrap_err().to_string();
    assert_eq!(e, "key wrokers is not a config key; did you mean workers?");
    let e = parse_config(Some("zzz = 2\n")).unwrap_err().to_string();
    assert!(
        e.starts_with("key zzz is not a config key; the keys there: state_dir, workers"),
        "{e}"
    );
    let e = parse_config(Some(
        "[[runners.default]]\nname = \"a\"\nargv = [\"a\"]\nshell = true\n",
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("key shell in runners.default is not a config key"),
        "{e}"
    );
    // A misspelt key inside a runner entry is reported at its own line.
    let text =
        "# mine\n\n[[runners.default]]\nname = \"a\"\nargv = [\"/bin/a\"]\nmax_concurent = 2\n";
    match parse_config(Some(text)) {
        Err(ConfigError::Key(problem)) => {
            assert_eq!(
                problem.origin,
                crate::core::config::key::Origin::File { line: Some(6) }
            );
            assert!(
                problem
                    .to_string()
                    .ends_with("did you mean max_concurrent?"),
                "{problem}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_values_are_named() {
    assert!(
        parse_config(Some("workers = 0"))
            .unwrap_err()
            .to_string()
            .contains("workers")
    );
    assert!(parse_config(Some("workers = \"4\"")).is_err());
    assert!(
        parse_config(Some("rescan_seconds = -1"))
            .unwrap_err()
            .to_string()
            .contains("rescan_seconds")
    );
    assert!(parse_config(Some("not toml [")).is_err());
    for huge in [
        "max_timeout_seconds = 1e20",
        "kill_grace_seconds = 1e20",
        "undeliverable_days = 1e300",
        "rescan_seconds = inf",
        "default_timeout_seconds = 700",
        "max_job_bytes = 0",
        "output_cap_bytes = 2000000000",
    ] {
        let key = huge.split(' ').next().unwrap_or_default();
        assert!(
            parse_config(Some(huge))
                .unwrap_err()
                .to_string()
                .contains(key),
            "{huge}"
        );
    }
}

/// A key of the wrong type names the key, the file's line (or the flag), what it
/// holds, what it takes and an example; never "remove or rename" for a known key.
#[test]
fn a_key_of_the_wrong_type_is_named_with_its_line_and_type() {
    let e = parse_config(Some("fsync = false\n\nworkers = \"four\"\n")).unwrap_err();
    let ConfigError::Key(problem) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(problem.origin, key::Origin::File { line: Some(3) });
    assert_eq!(
        e.to_string(),
        "key workers is the string \"four\"; it takes a whole number, e.g. workers = 4 (the default)"
    );
    let set = |text: &str| text.parse::<toml::Table>().unwrap();
    let e = parse_config_with(Some("workers = 2\n"), vec![set("health.enabled = 1")]).unwrap_err();
    let ConfigError::Key(problem) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(problem.origin, key::Origin::Set { index: 0 });
    assert!(e.to_string().contains("--set health.enabled=true"), "{e}");
    let e = parse_config(Some("[cache]\nttl_seconds = true\n")).unwrap_err();
    assert!(
        e.to_string()
            .contains("cache.ttl_seconds is the boolean true; it takes a whole number"),
        "{e}"
    );
    let e = parse_config(Some("max_runs_per_hour = \"x\"\n")).unwrap_err();
    assert!(e.to_string().ends_with("it takes a whole number"), "{e}");
}

#[test]
fn key_hints_for_set_values() {
    let hint = key_hint("workers").unwrap();
    assert_eq!(hint.takes, "a whole number");
    assert_eq!(hint.default, Some(toml::Value::Integer(4)));
    assert_eq!(key_hint("max_cost_usd_per_day").unwrap().takes, "a number");
    assert_eq!(key_hint("no_such_key"), None);
}

#[test]
fn set_tables_go_over_the_file() {
    let set = |text: &str| text.parse::<toml::Table>().unwrap();
    let c = parse_config_with(
        Some("kill_grace_seconds = 3\nworkers = 2\n"),
        vec![set("kill_grace_seconds = 1"), set("health.enabled = false")],
    )
    .unwrap();
    assert_eq!(
        (c.kill_grace_seconds, c.workers),
        (Duration::from_secs(1), 2)
    );
    assert!(!c.health.enabled);
    assert_eq!(c.health.backoff_start_seconds, 60.0);
    let e = parse_config_with(None, vec![set("default_timeout_seconds = 0")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("default_timeout_seconds"), "{e}");
}

#[test]
fn unsafe_investigate_table_in_a_file_is_refused() {
    let e = parse_config(Some(
        "[[runners.investigate]]\nname = \"cur\"\nargv = [\"cursor-agent\", \"-p\", \"--\", \"{prompt}\"]\n",
    ))
    .unwrap_err().to_string();
    assert!(e.contains("investigate runner \"cur\""), "{e}");
}

#[test]
fn only_a_config_with_its_own_investigate_table_uses_investigate() {
    let shipped = parse_config(None).unwrap();
    assert!(!shipped.own_investigate_table());
    let api_only = parse_config(Some(
        "[[runners.default]]\nname = \"haiku-api\"\napi = \"anthropic\"\nmodel = \"m\"\n",
    ))
    .unwrap();
    assert!(!api_only.own_investigate_table(), "the default table only");
    let own = parse_config(Some(
        "[[runners.investigate]]\nname = \"codex\"\nargv = [\"codex\", \"exec\", \"--json\", \
         \"--sandbox\", \"read-only\", \"--ignore-user-config\", \"--\", \"{prompt}\"]\n",
    ))
    .unwrap();
    assert!(own.own_investigate_table());
}
