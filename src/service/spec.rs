//! This machine's values for a service definition, and the pure rules that derive them:
//! the daemon's command line, the service's `PATH` and the stop timeout.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::core::config::Config;

/// A value a service definition cannot hold; `what` names the flag or value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum SpecError {
    /// A path that is not UTF-8.
    #[error(
        "{what} {} is not UTF-8, which a service definition cannot hold; use a UTF-8 path",
        path.display()
    )]
    NotUtf8 { what: &'static str, path: PathBuf },
    /// A value with a control character (a newline would start a line of its own).
    #[error(
        "{what} {value:?} holds a control character (such as a newline), which a service definition cannot hold; use another path"
    )]
    ControlCharacter { what: &'static str, value: String },
}

/// The shipped unit or plist cannot take this machine's values.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum RenderError {
    /// A value it cannot hold.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The unit template lacks a line install sets, or has it twice.
    #[error(
        "internal error: the unit template systemd/llm-judge.service has {count} lines starting with {prefix}; it needs exactly one"
    )]
    UnitLines { count: usize, prefix: &'static str },
    /// The plist template lacks a key install sets, or has it twice.
    #[error(
        "internal error: the plist template launchd/{label}.plist has {count} <key>{key}</key>; it needs exactly one"
    )]
    PlistKeys {
        label: &'static str,
        key: &'static str,
        count: usize,
    },
    /// A key's value in the plist template is not the one element expected.
    #[error(
        "internal error: in the plist template launchd/{label}.plist the value of {key} is not one <{element}>"
    )]
    PlistValue {
        label: &'static str,
        key: &'static str,
        element: &'static str,
    },
}

/// After the drain grace the daemon stops its runners and waits this long for its
/// workers (`STOP_WAIT` in the daemon).
const DAEMON_STOP_WAIT_SECONDS: f64 = 10.0;
/// Extra time on top of the daemon's worst case before the manager kills it; it
/// also covers the daemon's last 5 s (`SLOT_SHUTDOWN_WAIT`) for its slots' jobs.
const STOP_MARGIN_SECONDS: f64 = 15.0;

/// A service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Manager {
    Systemd,
    Launchd,
}

/// The values install substitutes into the shipped service definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServiceSpec {
    /// This binary, absolute.
    pub(crate) bin: PathBuf,
    /// The state folder, absolute.
    pub(crate) state_dir: PathBuf,
    /// The config file in use, absolute, if any.
    pub(crate) config: Option<PathBuf>,
    /// The `PATH` the daemon and its runners get.
    pub(crate) path: String,
    /// How long the manager waits after SIGTERM before SIGKILL.
    pub(crate) stop_timeout_seconds: u64,
}

impl ServiceSpec {
    /// The daemon's command line, program first.
    pub(crate) fn argv(&self) -> Result<Vec<String>, SpecError> {
        let mut argv = vec![
            text(&self.bin, "this binary's path")?,
            "daemon".to_string(),
            "--state-dir".to_string(),
            text(&self.state_dir, "the state folder (--state-dir)")?,
        ];
        if let Some(config) = &self.config {
            argv.push("--config".to_string());
            argv.push(text(config, "the config file (--config)")?);
        }
        Ok(argv)
    }
}

/// A path as text that a unit file or plist can hold, or why not.
pub(crate) fn text(path: &Path, what: &'static str) -> Result<String, SpecError> {
    let Some(s) = path.to_str() else {
        return Err(SpecError::NotUtf8 {
            what,
            path: path.to_path_buf(),
        });
    };
    check_plain(s, what)?;
    Ok(s.to_string())
}

/// Refuses control characters: a newline would start a line of its own in a unit file.
pub(crate) fn check_plain(s: &str, what: &'static str) -> Result<(), SpecError> {
    if s.chars().any(char::is_control) {
        return Err(SpecError::ControlCharacter {
            what,
            value: s.to_string(),
        });
    }
    Ok(())
}

/// The manager's stop timeout: the daemon's worst-case drain (shutdown grace, then its
/// runners' kill grace inside its own wait for the workers) plus a margin.
pub(crate) fn stop_timeout_seconds(config: &Config) -> u64 {
    let worst = config.shutdown_grace_seconds.as_secs_f64()
        + config.kill_grace_seconds.as_secs_f64()
        + DAEMON_STOP_WAIT_SECONDS
        + STOP_MARGIN_SECONDS;
    // Saturating float-to-int conversion: absurd graces give a huge but valid number.
    worst.ceil().min(u32::MAX as f64) as u64
}

/// The `PATH` for the service: the current one's absolute entries (relative and empty
/// ones would resolve against the service's working folder), then the usual install
/// folders of the runners that are missing from it. Returns it and the dropped entries.
pub(crate) fn service_path(
    current: Option<&OsStr>,
    home: &Path,
    manager: Manager,
) -> (String, Vec<String>) {
    let mut entries: Vec<String> = Vec::new();
    let mut dropped = Vec::new();
    if let Some(current) = current {
        for dir in std::env::split_paths(current) {
            match dir.to_str() {
                Some(s) if dir.is_absolute() && !s.chars().any(char::is_control) => {
                    let s = s.to_string();
                    if !entries.contains(&s) {
                        entries.push(s);
                    }
                }
                _ => dropped.push(dir.to_string_lossy().into_owned()),
            }
        }
    }
    let mut usual = Vec::new();
    if let Some(home) = home
        .to_str()
        .filter(|h| home.is_absolute() && !h.chars().any(char::is_control))
    {
        // Claude Code's native installer, pipx, uv and friends.
        usual.push(format!("{}/.local/bin", home.trim_end_matches('/')));
    }
    if manager == Manager::Launchd {
        usual.push("/opt/homebrew/bin".to_string());
    }
    usual.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(String::from));
    for dir in usual {
        if !entries.contains(&dir) {
            entries.push(dir);
        }
    }
    (entries.join(":"), dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_timeout_exceeds_the_drain_grace() {
        let mut c = crate::core::config::parse_config(None).unwrap();
        assert_eq!(stop_timeout_seconds(&c), 15 + 5 + 10 + 15);
        c.shutdown_grace_seconds = std::time::Duration::from_secs_f64(100.5);
        c.kill_grace_seconds = std::time::Duration::from_secs(2);
        assert_eq!(stop_timeout_seconds(&c), 128);
    }

    #[test]
    fn service_path_keeps_absolute_entries_and_adds_the_usual_folders() {
        let (path, dropped) = service_path(
            Some(OsStr::new("/a/bin::relative:/usr/bin:/a/bin:.")),
            Path::new("/home/u"),
            Manager::Systemd,
        );
        assert_eq!(
            path,
            "/a/bin:/usr/bin:/home/u/.local/bin:/usr/local/bin:/bin"
        );
        assert_eq!(dropped, vec!["", "relative", "."]);
        let (path, _) = service_path(None, Path::new("/Users/u"), Manager::Launchd);
        assert_eq!(
            path,
            "/Users/u/.local/bin:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin"
        );
    }
}
