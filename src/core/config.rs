//! Configuration: the embedded default, a TOML file over it, flags and environment on
//! top (SPEC section 8).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::core::job::{Mode, TimeoutRules};
use crate::core::runner_table::{RUNNERS_VAR, Runner, check_table, parse_override};
use crate::core::safety::check_investigate_table;

/// The documented default config, compiled in.
pub const DEFAULT_TOML: &str = include_str!("../../config/llm-judge.toml");
/// Names the config file when `--config` is not given.
pub const CONFIG_VAR: &str = "LLM_JUDGE_CONFIG";
/// Names the state folder when `--state-dir` is not given.
pub const STATE_DIR_VAR: &str = "CATSTACK_LLM_JUDGE_STATE_DIR";

/// The largest duration any key may give (about 31 years): larger ones are refused,
/// never turned into a `Duration` that overflows.
pub const MAX_SECONDS: f64 = 1e9;

/// Every config key (SPEC section 8).
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
    pub max_job_bytes: u64,
    pub fsync: bool,
    pub log_max_bytes: u64,
    pub undeliverable_days: f64,
    pub output_cap_bytes: usize,
    pub single_flight: bool,
    pub health: HealthConfig,
    pub cache: CacheConfig,
    pub runners: Tables,
}

/// `[health]` (SPEC section 10).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    pub enabled: bool,
    pub backoff_start_seconds: f64,
    pub backoff_max_seconds: f64,
}

/// `[cache]` (SPEC section 10).
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
    /// instead of running any runner (SPEC 9, as catstack's `judge.py run`).
    pub runner_error: Option<String>,
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

/// What the command line and environment give.
#[derive(Debug, Default, Clone)]
pub struct Sources {
    pub config_flag: Option<PathBuf>,
    pub state_dir_flag: Option<PathBuf>,
    /// The environment, captured once, so tests need not touch the process env.
    pub env: Vec<(String, String)>,
}

impl Sources {
    /// Sources with the real process environment.
    pub fn from_process(config_flag: Option<PathBuf>, state_dir_flag: Option<PathBuf>) -> Self {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        Sources {
            config_flag,
            state_dir_flag,
            env,
        }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

/// Loads and checks the settings. Errors name the file, key or variable.
pub fn load(sources: &Sources) -> Result<Settings, String> {
    let config_path = config_path(sources);
    let file_text = match &config_path {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
            format!(
                "cannot read config file {}: {e}; fix the path or drop --config/{CONFIG_VAR}",
                path.display()
            )
        })?),
        None => None,
    };
    let config = parse_config(file_text.as_deref()).map_err(|e| match &config_path {
        Some(path) => format!("config file {}: {e}", path.display()),
        None => format!("embedded default config: {e}"),
    })?;
    let runner_override = match sources.var(RUNNERS_VAR) {
        Some(text) => Some(parse_override(text)?),
        None => None,
    };
    // Absolute, so paths in logs, claims and watcher events all agree.
    let state_dir = state_dir(sources, &config);
    let state_dir = std::path::absolute(&state_dir).unwrap_or(state_dir);
    // Resolved once here; nothing inside it is ever followed (SPEC section 2).
    let state_dir = std::fs::canonicalize(&state_dir).unwrap_or(state_dir);
    Ok(Settings {
        config,
        config_path,
        state_dir,
        runner_override,
        runner_error: None,
    })
}

fn config_path(sources: &Sources) -> Option<PathBuf> {
    if let Some(path) = &sources.config_flag {
        return Some(path.clone());
    }
    if let Some(path) = sources.var(CONFIG_VAR) {
        return Some(PathBuf::from(path));
    }
    let base = match sources.var("XDG_CONFIG_HOME") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(sources.var("HOME")?).join(".config"),
    };
    let candidate = base.join("llm-judge").join("config.toml");
    candidate.is_file().then_some(candidate)
}

fn state_dir(sources: &Sources, config: &Config) -> PathBuf {
    if let Some(dir) = &sources.state_dir_flag {
        return dir.clone();
    }
    if let Some(dir) = sources.var(STATE_DIR_VAR) {
        return PathBuf::from(dir);
    }
    expand_home(&config.state_dir, sources.var("HOME"))
}

fn expand_home(path: &str, home: Option<&str>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => Path::new(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Parses the embedded default with an optional file's text over it, then checks it.
pub fn parse_config(file_text: Option<&str>) -> Result<Config, String> {
    let mut merged: toml::Table = DEFAULT_TOML.parse().map_err(|e| format!("{e}"))?;
    if let Some(text) = file_text {
        let file: toml::Table = text.parse().map_err(|e| format!("{e}"))?;
        merge(&mut merged, file);
    }
    let config: Config = toml::Value::Table(merged)
        .try_into()
        .map_err(|e: toml::de::Error| {
            format!("{}; remove or rename that key", e.message().trim())
        })?;
    check(&config)?;
    Ok(config)
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

fn check(config: &Config) -> Result<(), String> {
    let positive = [
        ("default_timeout_seconds", config.default_timeout_seconds),
        ("max_timeout_seconds", config.max_timeout_seconds),
        ("rescan_seconds", config.rescan_seconds),
    ];
    for (key, value) in positive {
        if !(value > 0.0 && value <= MAX_SECONDS) {
            return Err(format!(
                "key {key} is {value}; give a number of seconds above 0 and at most {MAX_SECONDS}"
            ));
        }
    }
    let non_negative = [
        ("kill_grace_seconds", config.kill_grace_seconds),
        ("shutdown_grace_seconds", config.shutdown_grace_seconds),
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
            return Err(format!(
                "key {key} is out of range; give a number of 0 or more (at most {MAX_SECONDS} seconds)"
            ));
        }
    }
    if config.health.backoff_max_seconds < config.health.backoff_start_seconds {
        return Err(
            "key health.backoff_max_seconds is below health.backoff_start_seconds; raise it".into(),
        );
    }
    if config.default_timeout_seconds > config.max_timeout_seconds {
        return Err("key default_timeout_seconds is above max_timeout_seconds; lower it".into());
    }
    if config.max_job_bytes == 0 {
        return Err("key max_job_bytes is 0; give the largest job file size in bytes".into());
    }
    if config.output_cap_bytes > 1 << 30 {
        return Err("key output_cap_bytes is above 1 GiB; give a smaller cap".into());
    }
    if config.workers == 0 {
        return Err("key workers is 0; give 1 or more".into());
    }
    if config.output_cap_bytes < 1024 {
        return Err("key output_cap_bytes is below 1024; give 1024 or more".into());
    }
    check_table("default", &config.runners.default)?;
    check_table("investigate", &config.runners.investigate)?;
    check_investigate_table(&config.runners.investigate)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            r#"[["claude", "-p", "--model", "haiku", "--settings", "{\"disableAllHooks\": true}", "--setting-sources", "", "--system-prompt", "You answer one question about a coding session. Reply with exactly one line of JSON and nothing else.", "--no-session-persistence", "--tools", "", "--strict-mcp-config", "--disable-slash-commands", "--", "{prompt}"],
                ["codex", "exec", "--skip-git-repo-check", "-m", "gpt-5.3-codex-spark", "--sandbox", "read-only", "-c", "notify=[]", "--ignore-user-config", "--ephemeral", "--", "{prompt}"],
                ["cursor-agent", "-p", "--output-format", "text", "--", "{prompt}"]]"#,
        )
        .unwrap();
        assert_eq!(argv, expected);
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
            r#"[["codex", "exec", "--skip-git-repo-check", "--sandbox", "read-only", "-c", "notify=[]", "--ignore-user-config", "--ephemeral", "--", "{prompt}"],
                ["claude", "-p", "--model", "haiku", "--settings", "{\"disableAllHooks\": true}", "--setting-sources", "", "--no-session-persistence", "--tools", "Read", "Grep", "Glob", "--allowedTools", "Read", "Grep", "Glob", "--disallowedTools", "Write", "Edit", "NotebookEdit", "Bash", "--strict-mcp-config", "--disable-slash-commands", "--", "{prompt}"]]"#,
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
                .contains("ttl")
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = parse_config(Some("wrokers = 2\n")).unwrap_err();
        assert!(e.contains("wrokers"), "{e}");
        let e = parse_config(Some(
            "[[runners.default]]\nname = \"a\"\nargv = [\"a\"]\nshell = true\n",
        ))
        .unwrap_err();
        assert!(e.contains("shell"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        assert!(
            parse_config(Some("workers = 0"))
                .unwrap_err()
                .contains("workers")
        );
        assert!(parse_config(Some("workers = \"4\"")).is_err());
        assert!(
            parse_config(Some("rescan_seconds = -1"))
                .unwrap_err()
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
                parse_config(Some(huge)).unwrap_err().contains(key),
                "{huge}"
            );
        }
    }

    #[test]
    fn unsafe_investigate_table_in_a_file_is_refused() {
        let e = parse_config(Some(
            "[[runners.investigate]]\nname = \"cur\"\nargv = [\"cursor-agent\", \"-p\", \"--\", \"{prompt}\"]\n",
        ))
        .unwrap_err();
        assert!(e.contains("investigate runner \"cur\""), "{e}");
    }

    fn sources(env: &[(&str, &str)]) -> Sources {
        Sources {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Sources::default()
        }
    }

    #[test]
    fn state_dir_precedence() {
        let s = load(&sources(&[
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "/nonexistent"),
        ]))
        .unwrap();
        assert_eq!(s.state_dir, PathBuf::from("/h/.cache/catstack-llm-judge"));
        let s = load(&sources(&[("HOME", "/h"), (STATE_DIR_VAR, "/env")])).unwrap();
        assert_eq!(s.state_dir, PathBuf::from("/env"));
        let s = load(&sources(&[(STATE_DIR_VAR, "")])).unwrap();
        assert!(s.state_dir.ends_with("~/.cache/catstack-llm-judge"));
        assert!(s.state_dir.is_absolute());
        let mut src = sources(&[(STATE_DIR_VAR, "/env")]);
        src.state_dir_flag = Some("/flag".into());
        assert_eq!(load(&src).unwrap().state_dir, PathBuf::from("/flag"));
    }

    #[test]
    fn override_replaces_both_tables_and_bad_override_is_refused() {
        let s = load(&sources(&[(RUNNERS_VAR, r#"[["f", ["/bin/f"]]]"#)])).unwrap();
        assert_eq!(s.table(Mode::Default)[0].name, "f");
        assert_eq!(s.table(Mode::Investigate)[0].name, "f");
        let e = load(&sources(&[(RUNNERS_VAR, "{")])).unwrap_err();
        assert!(e.contains(RUNNERS_VAR), "{e}");
    }

    #[test]
    fn missing_config_file_is_named() {
        let mut src = sources(&[]);
        src.config_flag = Some("/no/such/file.toml".into());
        assert!(load(&src).unwrap_err().contains("/no/such/file.toml"));
    }
}
