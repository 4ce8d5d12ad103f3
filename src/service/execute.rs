//! Carries out a `Plan`, step by step, saying what it did; and runs the service
//! manager's commands (for plans, for `service status` and for the facts).

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use thiserror::Error;

use super::call::{Call, CallError, quiet, status};
use super::plan::{Plan, Step};
use crate::store::permissions::PermissionError;
use crate::store::state_dir::StateDir;
use crate::support::error::Chain;

/// A step of a plan that failed; names the file or command and how to go on.
#[derive(Debug, Error)]
pub(crate) enum ExecuteError {
    /// The state folder cannot be created.
    #[error("{cause}; fix its permissions or pass --state-dir")]
    StateDir { path: PathBuf, cause: io::Error },
    /// The state folder is one the daemon would refuse.
    #[error(transparent)]
    Permission(#[from] PermissionError),
    /// A service file cannot be removed.
    #[error("cannot remove {}: {cause}; remove it by hand", path.display())]
    Remove { path: PathBuf, cause: io::Error },
    /// A failed step followed by the plan's hint on where to look.
    #[error("{}\n{hint}", Chain(&**step))]
    Hinted {
        step: Box<ExecuteError>,
        hint: String,
    },
    /// A manager command that exited non-zero.
    #[error("`{shown}` failed ({})", describe(*status))]
    Failed { shown: String, status: ExitStatus },
    /// A manager command that could not start.
    #[error(transparent)]
    Call(#[from] CallError),
    /// launchd kept the agent after bootout.
    #[error(
        "launchd still lists {service} after bootout; try again later or check `launchctl print {service}`"
    )]
    StillLoaded { service: String },
    /// A target path without a parent folder.
    #[error("{} has no parent folder", path.display())]
    NoParent { path: PathBuf },
    /// A target's folder cannot be created.
    #[error("cannot create folder {}", dir.display())]
    CreateFolder { dir: PathBuf, source: io::Error },
    /// A service file cannot be written.
    #[error("cannot write {}: {cause}; check that folder's permissions", path.display())]
    Write { path: PathBuf, cause: io::Error },
}

/// How often an unload is checked while waiting for launchd to let go.
const UNLOAD_POLL: Duration = Duration::from_millis(200);

/// Does every step of `plan` in order, stopping at the first failure; then tells its
/// notes and what is done.
pub(crate) fn carry_out(plan: &Plan) -> Result<(), ExecuteError> {
    for step in &plan.steps {
        match step {
            Step::CreateStateDir(dir) => {
                let state = StateDir::new(dir);
                state.create().map_err(|cause| ExecuteError::StateDir {
                    path: dir.clone(),
                    cause,
                })?;
                if let Some(warning) = crate::store::permissions::check_private(&state.root)? {
                    say!("warning: {warning}");
                }
            }
            Step::MoveAsideIfLarger { file, max_bytes } => move_aside_if_larger(file, *max_bytes),
            Step::UnloadIfLoaded { service, wait } => unload_if_loaded(service, *wait)?,
            Step::Write {
                path,
                contents,
                mode,
            } => {
                let replaced = path.exists();
                write_file(path, contents.as_bytes(), *mode)?;
                say!(
                    "{} {}",
                    if replaced { "replaced" } else { "wrote" },
                    path.display()
                );
            }
            Step::Remove(path) => {
                std::fs::remove_file(path).map_err(|cause| ExecuteError::Remove {
                    path: path.clone(),
                    cause,
                })?
            }
            Step::Run { call, hint } => {
                if let Err(e) = run(call) {
                    return Err(match hint {
                        Some(hint) => ExecuteError::Hinted {
                            step: Box::new(e),
                            hint: hint.clone(),
                        },
                        None => e,
                    });
                }
            }
            Step::RunIgnoringFailure(call) => {
                let _ = quiet(call);
            }
        }
    }
    for note in &plan.notes {
        say!("{note}");
    }
    for done in &plan.done {
        say!("{done}");
    }
    Ok(())
}

/// Runs `call` with the terminal's output; an error unless it exits 0.
fn run(call: &Call) -> Result<(), ExecuteError> {
    say!("running: {}", call.shown());
    let status = status(call)?;
    if status.success() {
        Ok(())
    } else {
        Err(ExecuteError::Failed {
            shown: call.shown(),
            status,
        })
    }
}

/// An exit status in words.
pub(crate) fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown status".to_string(),
    }
}

/// True when launchd has `service` loaded.
fn launchd_loaded(service: &str) -> Result<bool, CallError> {
    let (status, _) = quiet(&Call::new("launchctl", &["print", service]))?;
    Ok(status.success())
}

/// Unloads the agent if it is loaded (launchd sends SIGTERM; the daemon drains) and
/// waits until launchd has let go of it.
fn unload_if_loaded(service: &str, wait: Duration) -> Result<(), ExecuteError> {
    if !launchd_loaded(service)? {
        return Ok(());
    }
    run(&Call::new("launchctl", &["bootout", service]))?;
    let deadline = Instant::now() + wait;
    while launchd_loaded(service)? {
        if Instant::now() >= deadline {
            return Err(ExecuteError::StillLoaded {
                service: service.to_string(),
            });
        }
        // launchd has no "tell me when it is gone": poll, bounded by the deadline.
        std::thread::sleep(UNLOAD_POLL);
    }
    Ok(())
}

fn move_aside_if_larger(file: &Path, max_bytes: u64) {
    if std::fs::metadata(file).is_ok_and(|m| m.len() > max_bytes) {
        let mut old = file.as_os_str().to_owned();
        old.push(".1");
        if let Err(e) = std::fs::rename(file, &old) {
            say!("warning: cannot move {} aside: {e}", file.display());
        }
    }
}

/// Writes `bytes` to `target` atomically (hidden temp file, fsync, rename) with `mode`,
/// creating its folders.
fn write_file(target: &Path, bytes: &[u8], mode: u32) -> Result<(), ExecuteError> {
    let dir = target.parent().ok_or_else(|| ExecuteError::NoParent {
        path: target.to_path_buf(),
    })?;
    std::fs::create_dir_all(dir).map_err(|source| ExecuteError::CreateFolder {
        dir: dir.to_path_buf(),
        source,
    })?;
    // The mode survives a restrictive umask: launchd refuses group/other-writable
    // plists but needs to read them.
    let written = crate::store::state_dir::publish_with_mode(target, bytes, mode);
    written.map_err(|cause| ExecuteError::Write {
        path: target.to_path_buf(),
        cause,
    })
}
