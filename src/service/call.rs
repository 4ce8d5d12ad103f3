//! One command of the service manager (`systemctl`, `launchctl`), how it is shown,
//! and running it: with the terminal's output or quietly. Plans list calls, the host
//! runs them for facts, `execute` carries them out.

use std::io::Write as _;
use std::process::{Command, ExitStatus, Stdio};

use thiserror::Error;

use crate::core::shell;

/// A service manager command that could not be started; names the command.
#[derive(Debug, Error)]
pub(crate) enum CallError {
    /// The program is not on `PATH`: this system does not run that manager.
    #[error(
        "`{program}` is not on PATH: this system does not seem to run {}; run `llm-judge daemon` under your own supervisor",
        manager_of(program)
    )]
    NotOnPath { program: &'static str },
    /// Any other spawn failure.
    #[error("cannot run `{shown}`")]
    Spawn {
        shown: String,
        source: std::io::Error,
    },
}

fn manager_of(program: &str) -> &'static str {
    if program == "launchctl" {
        "launchd"
    } else {
        "systemd"
    }
}

/// One command of the service manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) program: &'static str,
    pub(crate) args: Vec<String>,
    /// Variables set for it beyond this process's environment.
    pub(crate) env: Vec<(&'static str, String)>,
}

impl Call {
    /// A call of `program` with `args`.
    pub(crate) fn new(program: &'static str, args: &[&str]) -> Call {
        Call {
            program,
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
        }
    }

    /// As a shell command line (its variables first, `VAR=value`).
    pub(crate) fn shown(&self) -> String {
        self.env
            .iter()
            .map(|(var, value)| format!("{var}={}", shell::quote(value)))
            .chain(std::iter::once(self.program.to_string()))
            .chain(self.args.iter().map(|a| shell::quote(a)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `systemctl --user` with `args`.
pub(crate) fn systemctl(args: &[&str]) -> Call {
    let mut all = vec!["--user"];
    all.extend_from_slice(args);
    Call::new("systemctl", &all)
}

fn command(call: &Call) -> Command {
    let mut cmd = Command::new(call.program);
    cmd.args(&call.args)
        .envs(call.env.iter().map(|(var, value)| (var, value)))
        .stdin(Stdio::null());
    cmd
}

/// Runs `call` with the terminal's output; its exit status.
pub(crate) fn status(call: &Call) -> Result<ExitStatus, CallError> {
    let _ = std::io::stdout().flush();
    command(call).status().map_err(|e| spawn_error(call, e))
}

/// Runs `call` quietly; its exit status and output (stdout, then stderr).
pub(crate) fn quiet(call: &Call) -> Result<(ExitStatus, String), CallError> {
    let out = command(call).output().map_err(|e| spawn_error(call, e))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status, text))
}

fn spawn_error(call: &Call, source: std::io::Error) -> CallError {
    if source.kind() == std::io::ErrorKind::NotFound {
        CallError::NotOnPath {
            program: call.program,
        }
    } else {
        CallError::Spawn {
            shown: call.shown(),
            source,
        }
    }
}
