//! Carries out a `Plan`, step by step, saying what it did; and runs the service
//! manager's commands (for plans, for `service status` and for the facts).

use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::call::{Call, quiet, status};
use super::plan::{Plan, Step};
use crate::store::state_dir::StateDir;

/// How often an unload is checked while waiting for launchd to let go.
const UNLOAD_POLL: Duration = Duration::from_millis(200);

/// Does every step of `plan` in order, stopping at the first failure; then tells its
/// notes and what is done.
pub(crate) fn carry_out(plan: &Plan) -> Result<(), String> {
    for step in &plan.steps {
        match step {
            Step::CreateStateDir(dir) => {
                let state = StateDir::new(dir);
                state
                    .create()
                    .map_err(|e| format!("{e}; fix its permissions or pass --state-dir"))?;
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
            Step::Remove(path) => std::fs::remove_file(path)
                .map_err(|e| format!("cannot remove {}: {e}; remove it by hand", path.display()))?,
            Step::Run { call, hint } => {
                if let Err(e) = run(call) {
                    return Err(match hint {
                        Some(hint) => format!("{e}\n{hint}"),
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
fn run(call: &Call) -> Result<(), String> {
    say!("running: {}", call.shown());
    let status = status(call)?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({})", call.shown(), describe(status)))
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
fn launchd_loaded(service: &str) -> Result<bool, String> {
    let (status, _) = quiet(&Call::new("launchctl", &["print", service]))?;
    Ok(status.success())
}

/// Unloads the agent if it is loaded (launchd sends SIGTERM; the daemon drains) and
/// waits until launchd has let go of it.
fn unload_if_loaded(service: &str, wait: Duration) -> Result<(), String> {
    if !launchd_loaded(service)? {
        return Ok(());
    }
    run(&Call::new("launchctl", &["bootout", service]))?;
    let deadline = Instant::now() + wait;
    while launchd_loaded(service)? {
        if Instant::now() >= deadline {
            return Err(format!(
                "launchd still lists {service} after bootout; try again later or check `launchctl print {service}`"
            ));
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
fn write_file(target: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let dir = target
        .parent()
        .ok_or_else(|| format!("{} has no parent folder", target.display()))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create folder {}: {e}", dir.display()))?;
    // The mode survives a restrictive umask: launchd refuses group/other-writable
    // plists but needs to read them.
    let written = crate::store::state_dir::publish_with_mode(target, bytes, mode);
    written.map_err(|e| {
        format!(
            "cannot write {}: {e}; check that folder's permissions",
            target.display()
        )
    })
}
