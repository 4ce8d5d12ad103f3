//! Configuration (docs/reference.md, "Configuration"): every key, the embedded default with
//! a file's text over it, and the checks. Pure: reading the file and the environment is
//! `store::config_file`.

use std::path::PathBuf;

use serde::Deserialize;
use thiserror::Error;

use crate::core::config_key::{self, KeyHint, KeyProblem};
use crate::core::job::{Mode, TimeoutRules};
use crate::core::runner_table::{Runner, TableError, check_table};
use crate::core::safety::{SafetyError, check_investigate_table};

/// The documented default config, compiled in.
pub const DEFAULT_TOML: &str = include_str!("../../config/llm-judge.toml");
/// Names the config file when `--config` is not given.
pub const CONFIG_VAR: &str = "LLM_JUDGE_CONFIG";
/// Names the state folder when `--state-dir` is not given.
pub const STATE_DIR_VAR: &str = "CATSTACK_LLM_JUDGE_STATE_DIR";

/// The largest duration any key may give (about 31 years): larger ones are refused,
/// never turned into a `Duration` that overflows.
pub const MAX_SECONDS: f64 = 1e9;

/// A config that cannot be used; each names the key and how to fix it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    /// Not TOML (the parser's message, with line and column).
    #[error("{message}")]
    Toml { message: String },
    /// An unknown key or a value of the wrong type: which key, from where, and how to fix it.
    #[error("{0}")]
    Key(Box<KeyProblem>),
    /// The merged config does not deserialise, but no single key was found to blame.
    #[error("{message}")]
    Merged { message: String },
    /// A duration that must be above 0.
    #[error(
        "key {key} is {value}; give a number of seconds above 0 and at most {}",
        MAX_SECONDS
    )]
    NotPositive { key: &'static str, value: f64 },
    /// A duration below 0 or too large.
    #[error(
        "key {key} is out of range; give a number of 0 or more (at most {} seconds)",
        MAX_SECONDS
    )]
    OutOfRange { key: &'static str },
    /// `max_cost_usd_per_day` negative or not a number.
    #[error(
        "key max_cost_usd_per_day is {value}; give 0 or more US dollars, or leave it out for no cap"
    )]
    BadCostCap { value: f64 },
    /// `max_runs_per_hour` negative.
    #[error("key max_runs_per_hour is {value}; give 0 or more runs, or leave it out for no cap")]
    BadRunCap { value: i64 },
    /// The backoff's cap below its start.
    #[error("key health.backoff_max_seconds is below health.backoff_start_seconds; raise it")]
    BackoffBelowStart,
    /// The default timeout above the largest.
    #[error("key default_timeout_seconds is above max_timeout_seconds; lower it")]
    DefaultAboveMax,
    /// `max_job_bytes = 0`.
    #[error("key max_job_bytes is 0; give the largest job file size in bytes")]
    NoJobBytes,
    /// `output_cap_bytes` above 1 GiB.
    #[error("key output_cap_bytes is above 1 GiB; give a smaller cap")]
    OutputCapTooLarge,
    /// `output_cap_bytes` below 1024.
    #[error("key output_cap_bytes is below 1024; give 1024 or more")]
    OutputCapTooSmall,
    /// `workers = 0`.
    #[error("key workers is 0; give 1 or more")]
    NoWorkers,
    /// A runner table entry that cannot run.
    #[error(transparent)]
    Table(#[from] TableError),
    /// An investigate runner that could write.
    #[error(transparent)]
    Unsafe(#[from] SafetyError),
}

impl ConfigError {
    fn toml(e: toml::de::Error) -> Self {
        ConfigError::Toml {
            message: e.to_string(),
        }
    }
}

/// Every config key (docs/reference.md, "Configuration").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub state_dir: String,
    pub workers: usize,
    pub default_timeout_seconds: f64,
    pub max_timeout_seconds: f64,
    pub kill_grace_seconds: f64,
    pub shutdown_grace_seconds: f64,
    pub rescan_seconds: f64,
    /// How long a job file written in place must rest before the daemon judges it
    /// while it is still cut short (0: judge every look).
    pub job_settle_seconds: f64,
    pub max_job_bytes: u64,
    pub fsync: bool,
    pub log_max_bytes: u64,
    pub undeliverable_days: f64,
    pub output_cap_bytes: usize,
    pub single_flight: bool,
    /// Reported cost allowed in any 24 hours; past it jobs end `unchecked` (`budget: ...`).
    #[serde(default)]
    pub max_cost_usd_per_day: Option<f64>,
    /// Runner runs allowed in any hour; past it jobs end `unchecked` (`budget: ...`).
    /// (Signed so a negative value gets an error naming the key, not serde's.)
    #[serde(default)]
    pub max_runs_per_hour: Option<i64>,
    pub health: HealthConfig,
    pub cache: CacheConfig,
    pub runners: Tables,
}

/// `[health]` (docs/reference.md, "Beyond catstack").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    pub enabled: bool,
    pub backoff_start_seconds: f64,
    pub backoff_max_seconds: f64,
}

/// `[cache]` (docs/reference.md, "Beyond catstack").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    pub ttl_seconds: f64,
    pub max_entries: usize,
}

/// The two runner tables.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tables {
    pub default: Vec<Runner>,
    pub investigate: Vec<Runner>,
}

impl Config {
    /// The spend cap of `max_cost_usd_per_day` and `max_runs_per_hour`.
    pub fn budget(&self) -> crate::core::spend::Budget {
        crate::core::spend::Budget {
            max_cost_usd_per_day: self.max_cost_usd_per_day,
            max_runs_per_hour: self.max_runs_per_hour.and_then(|n| u64::try_from(n).ok()),
        }
    }

    /// The timeout rules for job parsing.
    pub fn timeouts(&self) -> TimeoutRules {
        TimeoutRules {
            default_seconds: self.default_timeout_seconds,
            max_seconds: self.max_timeout_seconds,
        }
    }
}

/// Everything resolved from flags, environment and files.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    /// The config file read, if any.
    pub config_path: Option<PathBuf>,
    pub state_dir: PathBuf,
    /// The `CATSTACK_LLM_JUDGE_RUNNERS` table, which replaces both tables.
    pub runner_override: Option<Vec<Runner>>,
    /// Set by `run` when that variable is bad: every job gets this judge error
    /// instead of running any runner (docs/reference.md, "Command line", as catstack's
    /// `judge.py run`).
    pub runner_error: Option<crate::core::runner_table::OverrideError>,
    /// `$XDG_RUNTIME_DIR` when it is a private folder of ours: runner folders go there.
    pub runtime_dir: Option<PathBuf>,
}

#[cfg(test)]
impl Settings {
    /// In-process test settings: the embedded config, fsync, health and cache off, one runner.
    pub(crate) fn for_tests(state_dir: PathBuf, runner: &str) -> Settings {
        let mut config = parse_config(None).expect("embedded config");
        config.fsync = false;
        config.health.enabled = false;
        config.cache.ttl_seconds = 0.0;
        Settings {
            config,
            config_path: None,
            state_dir,
            runner_override: Some(vec![Runner::for_tests(runner, &[runner, "{prompt}"])]),
            runner_error: None,
            runtime_dir: None,
        }
    }
}

impl Settings {
    /// The runners a job of this mode tries, in order.
    pub fn table(&self, mode: Mode) -> &[Runner] {
        if let Some(runners) = &self.runner_override {
            return runners;
        }
        match mode {
            Mode::Default => &self.config.runners.default,
            Mode::Investigate => &self.config.runners.investigate,
        }
    }
}

/// Parses the embedded default with an optional file's text over it, then checks it.
pub fn parse_config(file_text: Option<&str>) -> Result<Config, ConfigError> {
    parse_config_with(file_text, Vec::new())
}

/// As `parse_config`, with the `--set` keys (each a parsed table) over the file's.
pub fn parse_config_with(
    file_text: Option<&str>,
    sets: Vec<toml::Table>,
) -> Result<Config, ConfigError> {
    let default: toml::Table = DEFAULT_TOML.parse().map_err(ConfigError::toml)?;
    let file = match file_text {
        Some(text) => Some(text.parse::<toml::Table>().map_err(ConfigError::toml)?),
        None => None,
    };
    let mut merged = default.clone();
    if let Some(file) = &file {
        merge(&mut merged, file.clone());
    }
    for set in &sets {
        merge(&mut merged, set.clone());
    }
    let config = match build(merged) {
        Ok(config) => config,
        Err(e) => {
            let file = file.as_ref().zip(file_text);
            let blamed = config_key::locate(&default, file, &sets, |t| {
                build(t)
                    .map(|_| ())
                    .map_err(|e| e.message().trim().to_string())
            });
            return Err(match blamed {
                Some(problem) => ConfigError::Key(Box::new(problem)),
                None => ConfigError::Merged {
                    message: e.message().trim().to_string(),
                },
            });
        }
    };
    check(&config)?;
    Ok(config)
}

/// The config of a merged table, unchecked.
fn build(table: toml::Table) -> Result<Config, toml::de::Error> {
    toml::Value::Table(table).try_into()
}

/// What `key` takes (for `--set` with a value that is not TOML); `None` for no such key.
pub fn key_hint(key: &str) -> Option<KeyHint> {
    let default: toml::Table = DEFAULT_TOML.parse().ok()?;
    config_key::key_hint(default, key, |t| {
        build(t).map(|_| ()).map_err(|e| e.message().to_string())
    })
}

/// A file's keys replace the default's; `[runners]` tables replace whole tables.
fn merge(base: &mut toml::Table, file: toml::Table) {
    for (key, value) in file {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(over)) => {
                for (k, v) in over {
                    inner.insert(k, v);
                }
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn check(config: &Config) -> Result<(), ConfigError> {
    let positive = [
        ("default_timeout_seconds", config.default_timeout_seconds),
        ("max_timeout_seconds", config.max_timeout_seconds),
        ("rescan_seconds", config.rescan_seconds),
    ];
    for (key, value) in positive {
        if !(value > 0.0 && value <= MAX_SECONDS) {
            return Err(ConfigError::NotPositive { key, value });
        }
    }
    let non_negative = [
        ("kill_grace_seconds", config.kill_grace_seconds),
        ("shutdown_grace_seconds", config.shutdown_grace_seconds),
        ("job_settle_seconds", config.job_settle_seconds),
        ("cache.ttl_seconds", config.cache.ttl_seconds),
        (
            "health.backoff_start_seconds",
            config.health.backoff_start_seconds,
        ),
        (
            "health.backoff_max_seconds",
            config.health.backoff_max_seconds,
        ),
        // As seconds, so "days" shares the bound.
        ("undeliverable_days", config.undeliverable_days * 86_400.0),
    ];
    for (key, value) in non_negative {
        if !(0.0..=MAX_SECONDS).contains(&value) {
            return Err(ConfigError::OutOfRange { key });
        }
    }
    if config.health.backoff_max_seconds < config.health.backoff_start_seconds {
        return Err(ConfigError::BackoffBelowStart);
    }
    if config.default_timeout_seconds > config.max_timeout_seconds {
        return Err(ConfigError::DefaultAboveMax);
    }
    if config.max_job_bytes == 0 {
        return Err(ConfigError::NoJobBytes);
    }
    if config.output_cap_bytes > 1 << 30 {
        return Err(ConfigError::OutputCapTooLarge);
    }
    if config.workers == 0 {
        return Err(ConfigError::NoWorkers);
    }
    if let Some(value) = config
        .max_cost_usd_per_day
        .filter(|v| !(v.is_finite() && *v >= 0.0))
    {
        return Err(ConfigError::BadCostCap { value });
    }
    if let Some(value) = config.max_runs_per_hour.filter(|n| *n < 0) {
        return Err(ConfigError::BadRunCap { value });
    }
    if config.output_cap_bytes < 1024 {
        return Err(ConfigError::OutputCapTooSmall);
    }
    check_table("default", &config.runners.default)?;
    check_table("investigate", &config.runners.investigate)?;
    check_investigate_table(&config.runners.investigate)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(c.kill_grace_seconds, 5.0);
        assert_eq!(c.shutdown_grace_seconds, 15.0);
        assert_eq!(c.rescan_seconds, 30.0);
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
                ["codex", "exec", "--json", "--skip-git-repo-check", "-m", "gpt-5.3-codex-spark", "--sandbox", "read-only", "-c", "notify=[]", "--ignore-user-config", "--ephemeral", "-c", "model_instructions_file={instructions}", "-c", "model_catalog_json={codex_catalog}", "-c", "project_doc_max_bytes=0", "-c", "skills.include_instructions=false", "-c", "tools.experimental_request_user_input.enabled=false", "-c", "include_permissions_instructions=false", "-c", "include_environment_context=false", "-c", "include_collaboration_mode_instructions=false", "-c", "web_search=\"disabled\"", "--disable", "multi_agent", "--disable", "goals", "--disable", "view_image", "--disable", "shell_tool", "--", "{prompt}"],
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
            .map(|r| crate::core::runner_env::identity(&r.env))
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
            r#"[["codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only", "-c", "notify=[]", "--ignore-user-config", "--ephemeral", "-c", "model_instructions_file={instructions}", "-c", "model_catalog_json={codex_catalog}", "-c", "project_doc_max_bytes=0", "-c", "skills.include_instructions=false", "-c", "tools.experimental_request_user_input.enabled=false", "-c", "include_permissions_instructions=false", "-c", "include_environment_context=false", "-c", "include_collaboration_mode_instructions=false", "-c", "web_search=\"disabled\"", "--disable", "multi_agent", "--disable", "goals", "--disable", "view_image", "--", "{prompt}"],
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
        assert_eq!(c.kill_grace_seconds, 5.0);
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
        assert!(e.contains("wrokers"), "{e}");
        let e = parse_config(Some(
            "[[runners.default]]\nname = \"a\"\nargv = [\"a\"]\nshell = true\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("shell"), "{e}");
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
        assert_eq!(problem.origin, config_key::Origin::File { line: Some(3) });
        assert_eq!(
            e.to_string(),
            "key workers is the string \"four\"; it takes a whole number, e.g. workers = 4 (the default)"
        );
        let set = |text: &str| text.parse::<toml::Table>().unwrap();
        let e =
            parse_config_with(Some("workers = 2\n"), vec![set("health.enabled = 1")]).unwrap_err();
        let ConfigError::Key(problem) = &e else {
            panic!("{e:?}")
        };
        assert_eq!(problem.origin, config_key::Origin::Set { index: 0 });
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
        assert_eq!((c.kill_grace_seconds, c.workers), (1.0, 2));
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
}
