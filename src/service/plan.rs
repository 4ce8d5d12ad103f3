//! The plan of an install or uninstall: a value that lists, in order, the files to write
//! (full contents and mode) or remove, the service manager commands to run, and the
//! notes and warnings to tell. Built by pure functions from facts read beforehand;
//! `--dry-run` prints it (its `Display`), `execute::carry_out` does it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

use super::call::Call;
use super::host::{Host, InstallFacts, Linger};
use super::launchd::{LABEL, LAUNCHD_LOG, LAUNCHD_LOG_MAX_BYTES, render_plist};
use super::spec::{Manager, RenderError, text};
use super::systemd::{UNIT_NAME, render_unit};
use crate::core::runner::table::RUNNERS_VAR;
use crate::core::shell;

/// Mode of the unit file and plist: launchd refuses group/other-writable plists.
pub(crate) const SERVICE_FILE_MODE: u32 = 0o644;
/// How long uninstall/reinstall waits for launchd to let go of the old agent.
pub(crate) const LAUNCHD_UNLOAD_WAIT: Duration = Duration::from_secs(310);

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Create the state folder (0700) if missing, and check that it is private.
    CreateStateDir(PathBuf),
    /// Move `file` to `file.1` when it is larger than `max_bytes`.
    MoveAsideIfLarger { file: PathBuf, max_bytes: u64 },
    /// If launchd has `service` loaded, `launchctl bootout` it (it drains) and wait
    /// up to `wait` until launchd has let go of it.
    UnloadIfLoaded { service: String, wait: Duration },
    /// Write `contents` to `path` atomically with `mode`, creating its folders.
    Write {
        path: PathBuf,
        contents: String,
        mode: u32,
    },
    /// Remove `path`.
    Remove(PathBuf),
    /// Run `call`; its failure stops the plan, with `hint` added to the error.
    Run { call: Call, hint: Option<String> },
    /// Run `call` quietly; its failure is ignored.
    RunIgnoringFailure(Call),
}

/// What install or uninstall does, in order, and what it tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// What the plan is for, one line.
    pub(crate) title: String,
    /// The steps, in order.
    pub(crate) steps: Vec<Step>,
    /// Notes and warnings (the lingering warning among them), told after the steps.
    pub(crate) notes: Vec<String>,
    /// Told once every step is done.
    pub(crate) done: Vec<String>,
}

#[cfg(test)]
impl Plan {
    /// The commands the plan runs, in order (the conditional bootout included).
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::Run { call, .. } | Step::RunIgnoringFailure(call) => Some(call.clone()),
                Step::UnloadIfLoaded { service, .. } => {
                    Some(Call::new("launchctl", &["bootout", service]))
                }
                _ => None,
            })
            .collect()
    }
}

/// A plan as `--dry-run` prints it: commands as shell lines, everything else as `#`
/// comments, a file's contents between its `# would write PATH:` and `# end of` lines.
impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# plan: {}", self.title)?;
        for step in &self.steps {
            match step {
                Step::CreateStateDir(dir) => writeln!(
                    f,
                    "# would create the state folder {} (mode 0700) if missing",
                    dir.display()
                )?,
                Step::MoveAsideIfLarger { file, max_bytes } => writeln!(
                    f,
                    "# would move {} to {}.1 if it is over {max_bytes} bytes",
                    file.display(),
                    file.display()
                )?,
                Step::UnloadIfLoaded { service, wait } => writeln!(
                    f,
                    "{}  # only if `launchctl print {}` finds it loaded; then waits up to {} s until launchd lets go",
                    Call::new("launchctl", &["bootout", service]).shown(),
                    shell::quote(service),
                    wait.as_secs()
                )?,
                Step::Write {
                    path,
                    contents,
                    mode,
                } => {
                    writeln!(f, "# would write {}:", path.display())?;
                    f.write_str(contents)?;
                    if !contents.ends_with('\n') {
                        writeln!(f)?;
                    }
                    writeln!(f, "# end of {} (mode {mode:04o})", path.display())?;
                }
                Step::Remove(path) => writeln!(f, "# would remove {}", path.display())?,
                Step::Run { call, .. } => writeln!(f, "{}", call.shown())?,
                Step::RunIgnoringFailure(call) => {
                    writeln!(f, "{}  # a failure is ignored", call.shown())?
                }
            }
        }
        for note in &self.notes {
            writeln!(f, "# {note}")?;
        }
        for line in self.done.iter().flat_map(|d| d.lines()) {
            writeln!(f, "# then: {line}")?;
        }
        Ok(())
    }
}

/// A warning when the user's services stop at logout, else nothing.
pub(crate) fn linger_warning(host: &Host, linger: &Linger) -> Option<String> {
    // loginctl takes a user name or a uid.
    let (who, arg) = match &host.user {
        Some(user) => (user.clone(), user.clone()),
        None => (format!("uid {}", host.uid), host.uid.to_string()),
    };
    let fix = format!(
        "To keep it running after you log out: loginctl enable-linger {}",
        shell::quote(&arg)
    );
    match linger {
        Linger::On => None,
        Linger::Off => Some(format!(
            "warning: lingering is off for {who}: the service stops when you log out and starts at your next login. {fix}"
        )),
        Linger::Unknown(why) => {
            let why = why.lines().next().unwrap_or("").trim().to_string();
            let why = if why.is_empty() {
                "loginctl said nothing".to_string()
            } else {
                format!("loginctl: {why}")
            };
            Some(format!(
                "warning: cannot tell whether lingering is on for {who} ({why}); without it the service stops when you log out. {fix}"
            ))
        }
    }
}

/// Notes about the service's environment that the operator should know.
fn install_notes(facts: &InstallFacts) -> Vec<String> {
    let mut notes = Vec::new();
    if !facts.dropped_path.is_empty() {
        notes.push(format!(
            "note: left out of the service's PATH (not absolute): {}",
            facts
                .dropped_path
                .iter()
                .map(|d| format!("{d:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if facts.runner_override {
        notes.push(format!(
            "warning: {RUNNERS_VAR} is set here but is not carried into the service, which uses the configured runner tables"
        ));
    }
    if let Some(user) = &facts.sudo_user {
        notes.push(format!(
            "warning: running under sudo installs the service for root, not for {user}; run `llm-judge service install` as {user} without sudo"
        ));
    }
    let bin = facts.spec.bin.to_string_lossy();
    if bin.contains("/target/debug/") || bin.contains("/target/release/") {
        notes.push(format!(
            "note: the service will run the build at {bin}; `cargo clean` or a rebuild changes it under the service. \
             Install the binary (e.g. `cargo install --locked --path .`) and run `llm-judge service install` from there"
        ));
    }
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for (program, hit) in &facts.runners {
        match hit {
            Some(p) => found.push(format!("{program} ({})", p.display())),
            None => missing.push(program.clone()),
        }
    }
    for (name, key) in &facts.api_runners {
        notes.push(match key {
            Some(var) => format!(
                "API runner {name}: the service must have {var} in its environment (systemctl \
                 --user edit llm-judge, or the launchd plist's EnvironmentVariables)"
            ),
            None => format!("API runner {name}: sends no key"),
        });
    }
    if found.is_empty() && facts.api_runners.is_empty() {
        notes.push(format!(
            "warning: none of the runners ({}) is on the service's PATH, so every job would be `unchecked`; \
             install one, or run `llm-judge service install` again from a shell whose PATH finds it",
            missing.join(", ")
        ));
    } else if !found.is_empty() {
        let mut line = format!("runners on the service's PATH: {}", found.join(", "));
        if !missing.is_empty() {
            line.push_str(&format!("; not found: {}", missing.join(", ")));
        }
        notes.push(line);
    }
    if let Some(linger) = &facts.linger
        && let Some(warning) = linger_warning(&facts.host, linger)
    {
        notes.push(warning);
    }
    notes
}

/// Where to look when a command of install fails.
fn failure_hint(host: &Host, target: &Path) -> String {
    match host.manager {
        Manager::Systemd => format!(
            "The unit was written to {}. If systemctl could not reach your user manager, log in directly \
             (not via su/sudo) or check XDG_RUNTIME_DIR; if it says the unit does not exist, your user manager \
             may use another XDG_CONFIG_HOME. If the service failed to start: journalctl --user -u llm-judge -n 50",
            target.display()
        ),
        Manager::Launchd => format!(
            "The plist was written to {}. See `launchctl print {}` and the state folder's launchd.log.",
            target.display(),
            host.launchd_service()
        ),
    }
}

/// Install's refusal where `systemctl --user` has no manager to reach (nothing is
/// written): why, and what runs the daemon instead. `socket` is where the manager was
/// looked for, `daemon` the command line that runs this daemon (shell-quoted words).
pub(crate) fn no_session_refusal(socket: &Path, daemon: &[String]) -> String {
    let line = daemon.join(" ");
    format!(
        "no systemd user session here: there is no {} for `systemctl --user` to reach (a \
         container, WSL without systemd, or a login that started no user manager), so \
         llm-judge cannot be a systemd user service; nothing was written.\n\
         Run the daemon under a supervisor of your own instead. One daemon runs per state \
         folder (another exits at once), so starting it again is safe:\n\
         \x20 nohup {line} >/dev/null 2>&1 &\n\
         \x20     now, from this shell; judge.log in the state folder has its lines\n\
         \x20 tmux new-session -d -s llm-judge {line}\n\
         \x20     in a tmux session that outlives this login\n\
         \x20 the nohup line in your login script (~/.profile) starts it at each login\n\
         \x20 or a service of your init system (runit, s6, OpenRC, supervisord) that runs\n\
         \x20     `{line}` as you\n\
         On WSL, systemd can be turned on instead: [boot] systemd=true in /etc/wsl.conf, then \
         `wsl --shutdown`. `llm-judge status` shows whether a daemon runs.",
        socket.display()
    )
}

/// Why install has no plan.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum PlanError {
    /// The existing state folder would stop the daemon (`permissions`' words).
    #[error("the daemon would refuse to start: {why}")]
    StateDir { why: String },
    /// The service definition cannot take this machine's values.
    #[error(transparent)]
    Render(#[from] RenderError),
}

/// The plan of `service install`.
pub(crate) fn plan_install(facts: &InstallFacts) -> Result<Plan, PlanError> {
    if let Some(why) = &facts.state_dir_error {
        return Err(PlanError::StateDir { why: why.clone() });
    }
    let host = &facts.host;
    let spec = &facts.spec;
    let target = host.target();
    let hint = Some(failure_hint(host, &target));
    let run = |call: Call| Step::Run {
        call,
        hint: hint.clone(),
    };
    let mut steps = vec![Step::CreateStateDir(spec.state_dir.clone())];
    let launchd_log = spec.state_dir.join(LAUNCHD_LOG);
    let (title, contents, done) = match host.manager {
        Manager::Systemd => (
            format!("install the systemd user service {UNIT_NAME}"),
            render_unit(spec)?,
            format!(
                "llm-judge runs as the systemd user service {UNIT_NAME} (state folder {}).\n\
                 Logs: journalctl --user -u llm-judge -f, and {}",
                spec.state_dir.display(),
                facts.judge_log.display()
            ),
        ),
        Manager::Launchd => {
            steps.push(Step::MoveAsideIfLarger {
                file: launchd_log.clone(),
                max_bytes: LAUNCHD_LOG_MAX_BYTES,
            });
            // A loaded agent keeps its old definition: unload it first (it drains).
            steps.push(Step::UnloadIfLoaded {
                service: host.launchd_service(),
                wait: LAUNCHD_UNLOAD_WAIT,
            });
            (
                format!("install the launchd agent {LABEL}"),
                render_plist(spec)?,
                format!(
                    "llm-judge runs as the launchd agent {LABEL} (state folder {}).\nLogs: {} (and {} for start-up errors)",
                    spec.state_dir.display(),
                    facts.judge_log.display(),
                    launchd_log.display()
                ),
            )
        }
    };
    steps.push(Step::Write {
        path: target.clone(),
        contents,
        mode: SERVICE_FILE_MODE,
    });
    match host.manager {
        Manager::Systemd => {
            steps.push(run(host.systemctl(&["daemon-reload"])));
            steps.push(run(host.systemctl(&["enable", UNIT_NAME])));
            // restart, not start: a reinstall must replace a running daemon.
            steps.push(run(host.systemctl(&["restart", UNIT_NAME])));
        }
        Manager::Launchd => {
            steps.push(run(Call::new(
                "launchctl",
                &["enable", &host.launchd_service()],
            )));
            steps.push(run(Call::new(
                "launchctl",
                &[
                    "bootstrap",
                    &host.launchd_domain(),
                    &text(&target, "the plist path").map_err(RenderError::from)?,
                ],
            )));
        }
    }
    Ok(Plan {
        title,
        steps,
        notes: install_notes(facts),
        done: vec![done],
    })
}

/// The plan of `service uninstall`, given whether the service file exists.
pub(crate) fn plan_uninstall(host: &Host, installed: bool) -> Plan {
    let target = host.target();
    let mut steps = Vec::new();
    let mut notes = Vec::new();
    let title = match host.manager {
        Manager::Systemd => {
            if installed {
                // --now stops it: systemd sends SIGTERM and the daemon drains.
                steps.push(Step::Run {
                    call: host.systemctl(&["disable", "--now", UNIT_NAME]),
                    hint: Some(format!(
                        "The unit file {} is kept. If your user manager is gone for good, remove it by hand.",
                        target.display()
                    )),
                });
                steps.push(Step::Remove(target.clone()));
                steps.push(Step::Run {
                    call: host.systemctl(&["daemon-reload"]),
                    hint: None,
                });
                // Forget a failed state so `systemctl --user list-units` is clean.
                steps.push(Step::RunIgnoringFailure(
                    host.systemctl(&["reset-failed", UNIT_NAME]),
                ));
            } else {
                notes.push(format!(
                    "{} does not exist: the service is not installed",
                    target.display()
                ));
            }
            format!("uninstall the systemd user service {UNIT_NAME}")
        }
        Manager::Launchd => {
            steps.push(Step::UnloadIfLoaded {
                service: host.launchd_service(),
                wait: LAUNCHD_UNLOAD_WAIT,
            });
            if installed {
                steps.push(Step::Remove(target.clone()));
            } else {
                notes.push(format!(
                    "{} does not exist: the agent is not installed",
                    target.display()
                ));
            }
            format!("uninstall the launchd agent {LABEL}")
        }
    };
    let done = if installed {
        vec![format!(
            "removed {}; the state folder and judge.log are kept",
            target.display()
        )]
    } else {
        Vec::new()
    };
    Plan {
        title,
        steps,
        notes,
        done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::host::UserSession;
    use crate::service::spec::ServiceSpec;

    fn host(manager: Manager) -> Host {
        Host {
            manager,
            home: PathBuf::from("/home/u"),
            xdg_config_home: None,
            uid: 501,
            user: Some("u".into()),
            session: (manager == Manager::Systemd).then_some(UserSession::Found),
        }
    }

    fn facts(manager: Manager) -> InstallFacts {
        InstallFacts {
            host: host(manager),
            spec: ServiceSpec {
                bin: PathBuf::from("/home/u/.cargo/bin/llm-judge"),
                state_dir: PathBuf::from("/home/u/.cache/catstack-llm-judge"),
                config: None,
                path: "/home/u/.local/bin:/usr/bin:/bin".into(),
                stop_timeout_seconds: 45,
            },
            dropped_path: vec![".".into()],
            runner_override: false,
            sudo_user: None,
            runners: vec![
                ("codex".into(), Some(PathBuf::from("/usr/bin/codex"))),
                ("claude".into(), None),
            ],
            api_runners: Vec::new(),
            state_dir_error: None,
            judge_log: PathBuf::from("/home/u/.cache/catstack-llm-judge/judge.log"),
            linger: Some(Linger::Off),
        }
    }

    #[test]
    fn systemd_install_writes_the_unit_then_reloads_enables_and_restarts() {
        let plan = plan_install(&facts(Manager::Systemd)).unwrap();
        let target = PathBuf::from("/home/u/.config/systemd/user/llm-judge.service");
        assert_eq!(
            plan.steps[0],
            Step::CreateStateDir("/home/u/.cache/catstack-llm-judge".into())
        );
        assert_eq!(
            plan.steps[1],
            Step::Write {
                path: target.clone(),
                contents: render_unit(&facts(Manager::Systemd).spec).unwrap(),
                mode: 0o644
            }
        );
        let shown: Vec<String> = plan.calls().iter().map(Call::shown).collect();
        assert_eq!(
            shown,
            [
                "systemctl --user daemon-reload",
                "systemctl --user enable llm-judge.service",
                "systemctl --user restart llm-judge.service"
            ]
        );
        let notes = plan.notes.join("\n");
        assert!(notes.contains("left out of the service's PATH (not absolute): \".\""));
        assert!(
            notes.contains(
                "runners on the service's PATH: codex (/usr/bin/codex); not found: claude"
            )
        );
        assert!(notes.contains("lingering is off for u"), "{notes}");
        // The dry run shows the file whole, the commands as shell lines, notes as comments.
        let printed = plan.to_string();
        assert!(printed.contains(&format!(
            "# would write {}:\n{}# end of {} (mode 0644)\n",
            target.display(),
            render_unit(&facts(Manager::Systemd).spec).unwrap(),
            target.display()
        )));
        assert!(
            printed
                .lines()
                .any(|l| l == "systemctl --user restart llm-judge.service")
        );
        assert!(printed.contains("# warning: lingering is off for u"));
    }

    #[test]
    fn launchd_install_unloads_a_loaded_agent_before_writing() {
        let plan = plan_install(&facts(Manager::Launchd)).unwrap();
        assert!(matches!(plan.steps[1], Step::MoveAsideIfLarger { .. }));
        assert!(matches!(plan.steps[2], Step::UnloadIfLoaded { .. }));
        assert!(matches!(plan.steps[3], Step::Write { .. }));
        let shown: Vec<String> = plan.calls().iter().map(Call::shown).collect();
        assert_eq!(
            shown,
            [
                "launchctl bootout gui/501/com.catstack.llm-judge",
                "launchctl enable gui/501/com.catstack.llm-judge",
                "launchctl bootstrap gui/501 /home/u/Library/LaunchAgents/com.catstack.llm-judge.plist"
            ]
        );
        let printed = plan.to_string();
        assert!(printed.contains(
            "launchctl bootout gui/501/com.catstack.llm-judge  # only if `launchctl print gui/501/com.catstack.llm-judge` finds it loaded"
        ));
    }

    #[test]
    fn a_state_folder_the_daemon_would_refuse_fails_the_plan() {
        let mut f = facts(Manager::Systemd);
        f.state_dir_error = Some("/x is a symlink".into());
        assert_eq!(
            plan_install(&f).unwrap_err().to_string(),
            "the daemon would refuse to start: /x is a symlink"
        );
    }

    /// An API-only config: no CLI on the service's PATH is no warning, and each API
    /// runner's key variable is named as the service's to hold.
    #[test]
    fn api_runners_count_as_runners_and_name_their_key() {
        let mut facts = facts(Manager::Systemd);
        facts.runners = vec![("codex".into(), None), ("claude".into(), None)];
        let none = install_notes(&facts).join("\n");
        assert!(none.contains("every job would be `unchecked`"), "{none}");
        facts.api_runners = vec![("haiku-api".into(), Some("ANTHROPIC_API_KEY".into()))];
        let api = install_notes(&facts).join("\n");
        assert!(!api.contains("unchecked"), "{api}");
        assert!(
            api.contains("API runner haiku-api: the service must have ANTHROPIC_API_KEY"),
            "{api}"
        );
    }

    #[test]
    fn uninstall_of_nothing_only_says_so() {
        let plan = plan_uninstall(&host(Manager::Systemd), false);
        assert!(plan.steps.is_empty());
        assert!(plan.notes[0].ends_with("does not exist: the service is not installed"));
        let plan = plan_uninstall(&host(Manager::Systemd), true);
        let shown: Vec<String> = plan.calls().iter().map(Call::shown).collect();
        assert_eq!(
            shown,
            [
                "systemctl --user disable --now llm-judge.service",
                "systemctl --user daemon-reload",
                "systemctl --user reset-failed llm-judge.service"
            ]
        );
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(
            shell::quote("gui/501/com.catstack.llm-judge"),
            "gui/501/com.catstack.llm-judge"
        );
        assert_eq!(shell::quote("/a b/it's"), r"'/a b/it'\''s'");
        assert_eq!(shell::quote(""), "''");
    }
}
