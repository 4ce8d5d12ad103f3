//! Configuration (docs/reference.md, "Configuration"): every key, the embedded default with
//! a file's text over it, and the checks. Pure: reading the file and the environment is
//! `store::config_file`.

pub mod key;

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;

use crate::core::job::{Mode, TimeoutRules};
use crate::core::runner::table::{Runner, TableError, check_table};
use crate::core::safety::{SafetyError, check_investigate_table};
use key::{KeyHint, KeyProblem};

/// The documented default config, compiled in.
pub const DEFAULT_TOML: &str = include_str!("../../../config/llm-judge.toml");
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
    /// `hooks.wait_ms` above the longest a stop may be held.
    #[error(
        "key hooks.wait_ms is {value}; give at most {} (milliseconds a block rule's stop waits)",
        crate::core::hooks::rules::MAX_WAIT_MS
    )]
    WaitTooLong { value: u64 },
    /// `workers = 0`.
    #[error("key workers is 0; give 1 or more")]
    NoWorkers,
    /// `history.keep_days = 0`.
    #[error(
        "key history.keep_days is 0; give 1 or more days (history.enabled = false records nothing)"
    )]
    NoHistoryDays,
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
    /// The durations the daemon waits on are `Duration`s from the load on
    /// (`seconds`); the ones compared with timestamps (timeouts, backoff, TTL) stay
    /// seconds, as job files and the health file count them.
    #[serde(deserialize_with = "seconds")]
    pub kill_grace_seconds: Duration,
    #[serde(deserialize_with = "seconds")]
    pub shutdown_grace_seconds: Duration,
    #[serde(deserialize_with = "seconds")]
    pub rescan_seconds: Duration,
    /// How long a job file written in place must rest before the daemon judges it
    /// while it is still cut short (0: judge every look).
    #[serde(deserialize_with = "seconds")]
    pub job_settle_seconds: Duration,
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
    pub hooks: HooksConfig,
    pub history: HistoryConfig,
    pub runners: Tables,
}

/// A number of seconds from 0 to `MAX_SECONDS`, as a `Duration`.
fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let value = f64::deserialize(d)?;
    if !(0.0..=MAX_SECONDS).contains(&value) {
        return Err(serde::de::Error::custom(format!(
            "{value} is out of range; give a number of seconds of 0 or more, at most {MAX_SECONDS}"
        )));
    }
    Ok(Duration::from_secs_f64(value))
}

/// `[hooks]` (docs/hooks.md): how long a block rule's stop waits, and the block cap.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    pub wait_ms: u64,
    pub max_blocks: u32,
    /// Show the user a line when a rule blocks, a notice is delivered, a stop goes through.
    pub tell_user: bool,
}

/// `[history]` (docs/history.md): what is kept of each verdict, and for how long.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryConfig {
    pub enabled: bool,
    pub keep_days: u32,
    pub keep_texts_days: u32,
    pub max_texts_mb: u64,
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

    /// True when this config gives its own investigate table (a config file's
    /// `[[runners.investigate]]` that differs from the shipped one): its user means to
    /// judge in investigate mode.
    pub fn own_investigate_table(&self) -> bool {
        static SHIPPED: std::sync::OnceLock<Option<Vec<Runner>>> = std::sync::OnceLock::new();
        let shipped =
            SHIPPED.get_or_init(|| parse_config(None).ok().map(|c| c.runners.investigate));
        shipped.as_ref() != Some(&self.runners.investigate)
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
    pub runner_error: Option<crate::core::runner::table::OverrideError>,
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

    /// The variables any table names as an API runner's `api_key_env`: a CLI runner
    /// never inherits them (the claude and codex CLIs take `ANTHROPIC_API_KEY` and
    /// `OPENAI_API_KEY` as their login), unless its own `env` sets them.
    pub fn api_key_vars(&self) -> Vec<&str> {
        let tables = &self.config.runners;
        let mut vars: Vec<&str> = tables
            .default
            .iter()
            .chain(&tables.investigate)
            .filter_map(|r| r.api.as_ref()?.api_key_env.as_deref())
            .collect();
        vars.sort_unstable();
        vars.dedup();
        vars
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
            let blamed = key::locate(&default, file, &sets, |t| build(t).map(|_| ()));
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
    key::key_hint(default, key, |t| build(t).map(|_| ()))
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
        ("rescan_seconds", config.rescan_seconds.as_secs_f64()),
    ];
    for (key, value) in positive {
        if !(value > 0.0 && value <= MAX_SECONDS) {
            return Err(ConfigError::NotPositive { key, value });
        }
    }
    let non_negative = [
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
    if config.hooks.wait_ms > crate::core::hooks::rules::MAX_WAIT_MS {
        return Err(ConfigError::WaitTooLong {
            value: config.hooks.wait_ms,
        });
    }
    if config.history.keep_days == 0 {
        return Err(ConfigError::NoHistoryDays);
    }
    check_table("default", &config.runners.default)?;
    check_table("investigate", &config.runners.investigate)?;
    check_investigate_table(&config.runners.investigate)?;
    Ok(())
}
#[cfg(test)]
mod tests;
