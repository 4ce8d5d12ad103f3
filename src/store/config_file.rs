//! Loading the settings (docs/reference.md, "Configuration"): the config file named by
//! flag, environment or XDG path is read and parsed over the embedded default
//! (`core::config`), the override variable and the state folder come from flags and
//! environment.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::core::config::key::Origin;
use crate::core::config::{
    CONFIG_VAR, Config, ConfigError, STATE_DIR_VAR, Settings, key_hint, parse_config_with,
};
use crate::core::runner::table::{OverrideError, RUNNERS_VAR, parse_override};
use crate::core::safety::check_investigate_home;
use crate::support::error::Chain;

/// Why the settings could not be loaded; each names the file, flag or variable.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The config file named by flag, variable or XDG path cannot be read (its
    /// cause stays in the message: the fix follows it).
    #[error(
        "cannot read config file {}: {cause}; fix the path or drop --config/{}",
        path.display(),
        CONFIG_VAR
    )]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// A `--set` flag that is not `KEY=VALUE`.
    #[error(transparent)]
    Set(#[from] SetError),
    /// The config (file or embedded default, with the `--set` keys) is refused; a key's
    /// problem names the file's line or the flag it came from.
    #[error("{}", config_message(path.as_deref(), sets, problem))]
    Config {
        /// The file read; `None` for the embedded default.
        path: Option<PathBuf>,
        /// The `--set` flags applied over it.
        sets: Vec<String>,
        // Boxed: a refused runner's names make it the largest error by far.
        problem: Box<ConfigError>,
    },
    /// `CATSTACK_LLM_JUDGE_RUNNERS` is bad (`run` still judges the job; docs/reference.md,
    /// "Command line").
    #[error(transparent)]
    Override(#[from] OverrideError),
}

/// A `--set` flag that cannot be read; names the flag.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SetError {
    /// No `=` in it.
    #[error("--set {flag}: no `=`; {}", SET_USAGE)]
    NoEquals { flag: String },
    /// Nothing before the `=`.
    #[error("--set {flag}: no key before `=`; {}", SET_USAGE)]
    NoKey { flag: String },
    /// The value is not TOML (the parser's message), for a key whose type is unknown.
    #[error("--set {flag}: {message}; {}", SET_USAGE)]
    Toml { flag: String, message: String },
    /// The value is not TOML, for a known key: what it takes, an example.
    #[error("--set {flag}: {value} is not a TOML value; key {key} takes {takes}{example}")]
    NotAValue {
        flag: String,
        key: String,
        value: String,
        takes: String,
        /// `, e.g. --set KEY=VALUE` when the default gives one.
        example: String,
    },
}

const SET_USAGE: &str = "give KEY=VALUE with a TOML value (example: --set kill_grace_seconds=1)";

fn origin(path: Option<&Path>) -> String {
    match path {
        Some(path) => format!("config file {}", path.display()),
        None => "embedded default config".to_string(),
    }
}

/// A refused config: a key's problem where it came from (the file's line, the flag),
/// else the source and the flags applied.
fn config_message(path: Option<&Path>, sets: &[String], refused: &ConfigError) -> String {
    let ConfigError::Key(problem) = refused else {
        return format!("{}{}: {}", origin(path), with_sets(sets), Chain(refused));
    };
    match &problem.origin {
        Origin::File { line: Some(line) } => format!("{} line {line}: {problem}", origin(path)),
        Origin::File { line: None } => format!("{}: {problem}", origin(path)),
        Origin::Set { index } => match sets.get(*index) {
            Some(flag) => format!("--set {flag}: {problem}"),
            None => format!("--set: {problem}"),
        },
    }
}

fn with_sets(sets: &[String]) -> String {
    if sets.is_empty() {
        String::new()
    } else {
        format!(" with --set {}", sets.join(" --set "))
    }
}

/// What the command line and environment give.
#[derive(Debug, Default, Clone)]
pub struct Sources {
    pub config_flag: Option<PathBuf>,
    pub state_dir_flag: Option<PathBuf>,
    /// `hook --config-dir`: the config folder as `hooks install` resolved it (then
    /// `$XDG_CONFIG_HOME`, `$HOME` and `$LLM_JUDGE_CONFIG` do not move it).
    pub config_dir_flag: Option<PathBuf>,
    /// `--set KEY=VALUE` flags, in order: config keys over the file's.
    pub sets: Vec<String>,
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
            config_dir_flag: None,
            sets: Vec::new(),
            env,
        }
    }

    /// These sources as a hook uses them (docs/security.md, "Hook mode"): a hook runs
    /// with whatever environment the repository's harness settings give it, so no
    /// variable chooses its runners, and with `--config-dir` none moves its config.
    pub fn for_hook(mut self, config_dir: Option<PathBuf>) -> Self {
        let pinned = config_dir.is_some();
        self.config_dir_flag = config_dir;
        // A relative folder would be the session's own (a repository's files).
        let folders = ["HOME", "XDG_CONFIG_HOME", CONFIG_VAR, STATE_DIR_VAR];
        self.env.retain(|(key, value)| {
            let relative = folders.contains(&key.as_str()) && !Path::new(value).is_absolute();
            let moved = pinned && (key == CONFIG_VAR || key == "XDG_CONFIG_HOME");
            key != RUNNERS_VAR && !relative && !moved
        });
        self
    }

    /// The value of environment variable `name`, as captured.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

/// Loads and checks the settings. Errors name the file, key or variable.
pub fn load(sources: &Sources) -> Result<Settings, LoadError> {
    let config_path = config_path(sources);
    let file_text = match &config_path {
        Some(path) => Some(
            std::fs::read_to_string(path).map_err(|cause| LoadError::Read {
                path: path.clone(),
                cause,
            })?,
        ),
        None => None,
    };
    let sets = sources
        .sets
        .iter()
        .map(|flag| parse_set(flag))
        .collect::<Result<Vec<_>, _>>()?;
    let config = parse_config_with(file_text.as_deref(), sets)
        .and_then(|config| check_home(&config, sources.var("HOME")).map(|()| config))
        .map_err(|refused| LoadError::Config {
            path: config_path.clone(),
            sets: sources.sets.clone(),
            problem: Box::new(refused),
        })?;
    let runner_override = match sources.var(RUNNERS_VAR) {
        Some(text) => Some(parse_override(text)?),
        None => None,
    };
    // Absolute, so paths in logs, claims and watcher events all agree.
    let state_dir = state_dir(sources, &config);
    let state_dir = std::path::absolute(&state_dir).unwrap_or(state_dir);
    // Resolved once here; nothing inside it is ever followed (docs/reference.md, "State
    // folder").
    let state_dir = std::fs::canonicalize(&state_dir).unwrap_or(state_dir);
    Ok(Settings {
        config,
        config_path,
        state_dir,
        runner_override,
        runner_error: None,
        runtime_dir: sources
            .var("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|d| crate::store::state_dir::is_private_folder(d)),
    })
}

/// Refuses an investigate table that opens `$HOME` (as given, and with its symlinks
/// resolved) or a folder above it to reads (`core::safety::check_investigate_home`).
fn check_home(config: &Config, home: Option<&str>) -> Result<(), ConfigError> {
    let Some(home) = home.map(PathBuf::from) else {
        return Ok(());
    };
    let resolved = std::fs::canonicalize(&home).ok().filter(|r| *r != home);
    for home in std::iter::once(home).chain(resolved) {
        check_investigate_home(&config.runners.investigate, &home)?;
    }
    Ok(())
}

/// One `--set KEY=VALUE` as a table (`KEY = VALUE` in TOML; dotted keys nest).
fn parse_set(flag: &str) -> Result<toml::Table, SetError> {
    let Some((key, value)) = flag.split_once('=') else {
        return Err(SetError::NoEquals { flag: flag.into() });
    };
    if key.trim().is_empty() {
        return Err(SetError::NoKey { flag: flag.into() });
    }
    let (key, value) = (key.trim(), value.trim());
    format!("{key} = {value}")
        .parse()
        .map_err(|e: toml::de::Error| match key_hint(key) {
            Some(hint) => SetError::NotAValue {
                flag: flag.into(),
                key: key.into(),
                value: value.into(),
                example: match hint.default {
                    // A string needs TOML's quotes, so the shell's around them.
                    Some(d @ toml::Value::String(_)) => format!(", e.g. --set '{key}={d}'"),
                    Some(d) if !d.is_table() && !d.is_array() => format!(", e.g. --set {key}={d}"),
                    _ => String::new(),
                },
                takes: hint.takes,
            },
            None => SetError::Toml {
                flag: flag.into(),
                message: e.message().trim().to_string(),
            },
        })
}

/// The embedded default config with `sources`' state folder (flag, variable, default):
/// what a hook logs and keeps its messages with when the config cannot be loaded.
pub fn load_embedded(sources: &Sources) -> Option<Settings> {
    let config = crate::core::config::parse_config(None).ok()?;
    let state_dir = state_dir(sources, &config);
    Some(Settings {
        state_dir: std::path::absolute(&state_dir).unwrap_or(state_dir),
        config,
        config_path: None,
        runner_override: None,
        runner_error: None,
        runtime_dir: None,
    })
}

/// The user's llm-judge config folder: `$XDG_CONFIG_HOME/llm-judge`, by default
/// `~/.config/llm-judge` (config.toml, rules.toml and the trusted project rules live here).
pub fn config_folder(sources: &Sources) -> Option<PathBuf> {
    if let Some(dir) = &sources.config_dir_flag {
        return Some(dir.clone());
    }
    let base = match sources.var("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(sources.var("HOME")?).join(".config"),
    };
    Some(base.join("llm-judge"))
}

fn config_path(sources: &Sources) -> Option<PathBuf> {
    if let Some(path) = &sources.config_flag {
        return Some(path.clone());
    }
    if let Some(path) = sources.var(CONFIG_VAR) {
        return Some(PathBuf::from(path));
    }
    let candidate = config_folder(sources)?.join("config.toml");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::job::Mode;

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
        assert!(matches!(e, LoadError::Override(_)), "{e:?}");
        assert!(e.to_string().contains(RUNNERS_VAR), "{e}");
    }

    #[test]
    fn set_flags_go_over_the_config_and_bad_ones_are_named() {
        let mut src = sources(&[("XDG_CONFIG_HOME", "/nonexistent")]);
        src.sets = vec![
            "kill_grace_seconds=0.5".into(),
            "cache.ttl_seconds = 0".into(),
        ];
        let s = load(&src).unwrap();
        assert_eq!(s.config.kill_grace_seconds.as_secs_f64(), 0.5);
        assert_eq!(s.config.cache.ttl_seconds, 0.0);
        for (flag, says) in [
            ("kill_grace_seconds", "no `=`"),
            ("=1", "no key"),
            ("kill_grace_seconds=soon", "kill_grace_seconds=soon"),
            ("no_such_key=1", "no_such_key"),
            ("kill_grace_seconds=-1", "--set kill_grace_seconds=-1"),
        ] {
            src.sets = vec![flag.into()];
            let e = load(&src).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("--set"), "{flag}: {e}");
        }
    }

    #[test]
    fn an_investigate_table_that_opens_home_to_reads_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let mut settings: serde_json::Value = serde_json::json!({"disableAllHooks": true,
            "permissions": {"blockReadsOutsideWorkingDirectories": true,
                "deny": crate::core::safety::read_scope::SHIPPED_DENY}});
        let table = |settings: &serde_json::Value| {
            let argv = serde_json::json!([
                "claude",
                "-p",
                "--settings",
                settings.to_string(),
                "--setting-sources",
                "",
                "--tools",
                "Read",
                "--disallowedTools",
                "Write",
                "Edit",
                "NotebookEdit",
                "Bash",
                "--strict-mcp-config",
                "--",
                "{prompt}"
            ]);
            format!("[[runners.investigate]]\nname = \"c\"\nargv = {argv}\n")
        };
        let file = home.join("config.toml");
        let home_var = home.to_str().unwrap();
        let mut src = sources(&[("HOME", home_var)]);
        src.config_flag = Some(file.clone());
        for (dir, refused) in [
            (home.join("project"), false),
            (home.clone(), true),
            (home.parent().unwrap().to_path_buf(), true),
        ] {
            settings["permissions"]["additionalDirectories"] = serde_json::json!([dir]);
            std::fs::write(&file, table(&settings)).unwrap();
            match load(&src) {
                Ok(_) => assert!(!refused, "{dir:?} accepted"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(refused, "{dir:?}: {e}");
                    assert!(
                        e.contains("the home folder") && e.contains("config file"),
                        "{e}"
                    );
                }
            }
        }
        // A symlink to HOME given as HOME: the resolved folder counts too.
        let link = tempfile::tempdir().unwrap();
        let via = link.path().join("home");
        std::os::unix::fs::symlink(&home, &via).unwrap();
        settings["permissions"]["additionalDirectories"] = serde_json::json!([home]);
        std::fs::write(&file, table(&settings)).unwrap();
        let mut src = sources(&[("HOME", via.to_str().unwrap())]);
        src.config_flag = Some(file);
        assert!(load(&src).is_err(), "a HOME through a symlink");
    }

    #[test]
    fn missing_config_file_is_named() {
        let mut src = sources(&[]);
        src.config_flag = Some("/no/such/file.toml".into());
        assert!(
            load(&src)
                .unwrap_err()
                .to_string()
                .contains("/no/such/file.toml")
        );
    }
}
