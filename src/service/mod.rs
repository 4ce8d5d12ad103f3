//! `llm-judge service install / uninstall / status` (docs/reference.md, "Service"): the
//! systemd user unit or launchd agent, a subsystem of its own beside the commands (they
//! call its `main`; it uses nothing of theirs).
//!
//! Install and uninstall go in three steps, one module each:
//! - `host`: read what the plan needs from this machine (environment, this binary's
//!   path, where the runners are, lingering); reads only.
//! - `plan`: a pure function of those facts builds a `Plan`: the files to write with
//!   their contents and modes, the commands to run in order, the notes and warnings.
//!   The service files come from `systemd` and `launchd`, which hold the shipped files
//!   (`systemd/llm-judge.service`, `launchd/com.catstack.llm-judge.plist`, valid and
//!   usable as they are) and the pure transformation that sets this machine's values in
//!   them (`spec`: the binary, the state folder, the config, `PATH`, the stop timeout).
//! - `execute`: carries a `Plan` out. `--dry-run` prints the same `Plan` instead.
//!
//! The manager is systemd on Linux and launchd on macOS; `LLM_JUDGE_SERVICE_MANAGER`
//! (`systemd` or `launchd`) overrides the guess. `systemctl`, `loginctl` and `launchctl`
//! are found on `PATH`, so tests put recording fakes first on it. `hook_command` is
//! what `hooks install` writes as each hook's program and flags.

mod call;
mod execute;
pub mod hook_command;
pub(crate) mod host;
pub(crate) mod installed;
mod launchd;
pub(crate) mod place;
mod plan;
mod spec;
mod systemd;

use thiserror::Error;

use crate::core::config::Settings;
use crate::support::error::Chained;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use call::{Call, CallError};
use execute::ExecuteError;
use host::{Host, HostError, UserSession, linger};
use launchd::LABEL;
use plan::{Plan, PlanError, linger_warning};
use spec::Manager;
use systemd::UNIT_NAME;

/// `service` subcommands (docs/reference.md, "Service").
#[derive(clap::Subcommand, Debug, Clone, Copy)]
pub enum ServiceAction {
    /// Write the unit or plist for this user, then enable and start it.
    #[command(
        after_help = "Examples:\n  llm-judge service install --dry-run\n  llm-judge service install"
    )]
    Install {
        /// Print what would be written and run, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Stop and disable the service and remove its file.
    #[command(after_help = "Example:\n  llm-judge service uninstall")]
    Uninstall {
        /// Print what would be removed and run, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Ask the service manager about the service.
    #[command(after_help = "Example:\n  llm-judge service status")]
    Status,
}

/// Why a service action failed; each part names its file, command or variable.
#[derive(Debug, Error)]
enum ServiceError {
    /// The facts could not be read.
    #[error(transparent)]
    Host(#[from] HostError),
    /// Install has no plan.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A step of the plan failed.
    #[error(transparent)]
    Execute(#[from] ExecuteError),
    /// `service status` could not ask the manager.
    #[error(transparent)]
    Call(#[from] CallError),
    /// `--dry-run` could not print.
    #[error("cannot print the plan: stdout is closed")]
    ClosedStdout,
}

/// Runs a service action; returns the exit code.
pub fn main(settings: &Settings, action: ServiceAction) -> i32 {
    let host = match Host::from_env() {
        Ok(host) => host,
        Err(e) => {
            say_err!("llm-judge: {e}", e = e.chain());
            return e.exit_code();
        }
    };
    let result = match action {
        ServiceAction::Install { dry_run } => install(settings, &host, dry_run),
        ServiceAction::Uninstall { dry_run } => {
            let plan = plan::plan_uninstall(&host, host.target().exists());
            carry_out_or_print(&plan, dry_run)
        }
        ServiceAction::Status => status(&host),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            say_err!("llm-judge: {e}", e = e.chain());
            EXIT_FAILURE
        }
    }
}

/// Plans the install from this machine's facts, then prints or carries it out.
fn install(settings: &Settings, host: &Host, dry_run: bool) -> Result<i32, ServiceError> {
    let bin = host::this_binary()?;
    // Not a program uvx or npx clears (docs/install.md, "Where the binary lives").
    if let Err(why) = place::check(&bin, "the service") {
        say_err!("llm-judge: {why}");
        return Ok(EXIT_USAGE);
    }
    // Before anything is read, written or run (a dry run too): without a user manager
    // systemctl would fail after the unit was written, in systemd's own words.
    if let Some(UserSession::Missing(socket)) = &host.session {
        let line = daemon_line(host::daemon_spec(settings, bin, String::new())?);
        let refusal = plan::no_session_refusal(socket, &line);
        say_err!("llm-judge service install: {refusal}");
        return Ok(EXIT_FAILURE);
    }
    let facts = host::install_facts(settings, host, bin)?;
    let plan = plan::plan_install(&facts)?;
    carry_out_or_print(&plan, dry_run)
}

/// The command line that runs `spec`'s daemon as the service would, each word
/// shell-quoted (with a path that is not UTF-8, which no unit file can hold either,
/// the program and `daemon` alone).
fn daemon_line(spec: crate::service::spec::ServiceSpec) -> Vec<String> {
    let words = spec
        .argv()
        .unwrap_or_else(|_| vec![spec.bin.display().to_string(), "daemon".into()]);
    words.iter().map(|w| crate::core::shell::quote(w)).collect()
}

/// `--dry-run` prints the plan; otherwise it is carried out.
fn carry_out_or_print(plan: &Plan, dry_run: bool) -> Result<i32, ServiceError> {
    if dry_run {
        // A closed stdout ends the command with an error, never a panic.
        if !crate::support::exit::print_stdout(&plan.to_string()) {
            return Err(ServiceError::ClosedStdout);
        }
        say!("# dry run: nothing was written, started or stopped");
    } else {
        execute::carry_out(plan)?;
    }
    Ok(EXIT_OK)
}

fn status(host: &Host) -> Result<i32, ServiceError> {
    let target = host.target();
    if target.exists() {
        say!("service file: {}", target.display());
    } else {
        say!(
            "service file: {} (missing: not installed; run `llm-judge service install`)",
            target.display()
        );
    }
    let call = match host.manager {
        Manager::Systemd => host.systemctl(&["status", UNIT_NAME, "--no-pager", "--lines=10"]),
        Manager::Launchd => Call::new("launchctl", &["print", &host.launchd_service()]),
    };
    let status = call::status(&call)?;
    if host.manager == Manager::Systemd
        && let Some(warning) = linger_warning(host, &linger(host))
    {
        say!("{warning}");
    }
    if status.success() {
        return Ok(EXIT_OK);
    }
    match host.manager {
        // systemctl status: 3 = not running, 4 = no such unit.
        Manager::Systemd => say!("{UNIT_NAME} is not running ({})", execute::describe(status)),
        Manager::Launchd => say!(
            "{LABEL} is not loaded in {} ({})",
            host.launchd_domain(),
            execute::describe(status)
        ),
    }
    Ok(EXIT_FAILURE)
}
