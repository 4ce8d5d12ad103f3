//! What planning needs to know about this machine, read once: the environment, this
//! binary's path, where the configured runners are, the state folder's permissions and
//! logind's lingering. Reads only; nothing here changes anything.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::call::{Call, quiet, systemctl};
use super::launchd::LABEL;
use super::spec::{Manager, ServiceSpec, service_path, stop_timeout_seconds};
use super::systemd::UNIT_NAME;
use crate::core::config::Settings;
use crate::process::spawn::find_on_path;
use crate::store::state_dir::StateDir;
use crate::support::exit::{EXIT_FAILURE, EXIT_USAGE};

/// Picks the service manager instead of the platform's own.
pub(crate) const MANAGER_VAR: &str = "LLM_JUDGE_SERVICE_MANAGER";

/// What `service` cannot learn about this machine; names the variable or path.
#[derive(Debug, Error)]
pub(crate) enum HostError {
    /// `LLM_JUDGE_SERVICE_MANAGER` names no manager.
    #[error(
        "{}={value:?} is not a service manager; set it to systemd or launchd, or unset it",
        MANAGER_VAR
    )]
    UnknownManager { value: String },
    /// Neither Linux nor macOS.
    #[error(
        "no supported service manager on this system (systemd on Linux, launchd on macOS); \
         run `llm-judge daemon` under your own supervisor, or set {}=systemd|launchd",
        MANAGER_VAR
    )]
    NoManager,
    /// `HOME` unset or relative.
    #[error("HOME is not set to an absolute path, so the service file has no place; set HOME")]
    NoHome,
    /// The config path cannot be made absolute.
    #[error(
        "cannot make the config path {} absolute ({cause}); pass --config with an absolute path",
        path.display()
    )]
    ConfigPath {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// This binary's path is unknown.
    #[error(
        "cannot find this binary's path ({0}); run llm-judge by its absolute path and try again"
    )]
    NoBinary(std::io::Error),
    /// This binary was replaced or removed while running.
    #[error(
        "this binary ({}) was replaced or removed while running; run the installed llm-judge again",
        exe.display()
    )]
    BinaryGone { exe: PathBuf },
}

impl HostError {
    /// The exit code: a bad variable is a usage error (2), anything else 1.
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            HostError::UnknownManager { .. } => EXIT_USAGE,
            _ => EXIT_FAILURE,
        }
    }
}

/// The user's side of the machine: where things go and who we are.
#[derive(Debug, Clone)]
pub(crate) struct Host {
    pub(crate) manager: Manager,
    pub(crate) home: PathBuf,
    pub(crate) xdg_config_home: Option<PathBuf>,
    pub(crate) uid: u32,
    pub(crate) user: Option<String>,
    /// Whether `systemctl --user` has a manager to reach (systemd only).
    pub(crate) session: Option<UserSession>,
}

/// Where `systemctl --user` would find this user's systemd manager: its private socket,
/// `systemd/private` in the user's runtime folder, looked for without asking systemd
/// (which, where none runs, only answers with its own error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UserSession {
    /// The socket is in `$XDG_RUNTIME_DIR`.
    Found,
    /// The socket is in `dir` (`/run/user/UID`), but `XDG_RUNTIME_DIR` is not set here
    /// (`su`, a cron job): systemctl is given it, or it would find no manager.
    FoundIn(PathBuf),
    /// No socket where systemctl looks (a container, WSL without systemd, a login that
    /// started no user manager): the path looked at.
    Missing(PathBuf),
}

/// Which `UserSession` this is: `xdg_runtime_dir` is `$XDG_RUNTIME_DIR` (absolute, or
/// `None`), `is_socket` says whether a path is a socket (the file system, or a test's).
pub(crate) fn user_session(
    xdg_runtime_dir: Option<&Path>,
    uid: u32,
    is_socket: impl Fn(&Path) -> bool,
) -> UserSession {
    const SOCKET: &str = "systemd/private";
    if let Some(dir) = xdg_runtime_dir {
        // systemctl looks only there when it is set.
        let socket = dir.join(SOCKET);
        return match is_socket(&socket) {
            true => UserSession::Found,
            false => UserSession::Missing(socket),
        };
    }
    let dir = PathBuf::from(format!("/run/user/{uid}"));
    let socket = dir.join(SOCKET);
    match is_socket(&socket) {
        true => UserSession::FoundIn(dir),
        false => UserSession::Missing(socket),
    }
}

/// True when `path` is a socket (links followed).
fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

impl Host {
    /// Reads the host from the environment; an exit code and message if it cannot.
    pub(crate) fn from_env() -> Result<Host, HostError> {
        let manager = match std::env::var(MANAGER_VAR).ok().filter(|v| !v.is_empty()) {
            Some(v) if v == "systemd" => Manager::Systemd,
            Some(v) if v == "launchd" => Manager::Launchd,
            Some(value) => return Err(HostError::UnknownManager { value }),
            None if cfg!(target_os = "macos") => Manager::Launchd,
            None if cfg!(target_os = "linux") => Manager::Systemd,
            None => return Err(HostError::NoManager),
        };
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .ok_or(HostError::NoHome)?;
        let xdg_config_home = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute());
        let user = ["USER", "LOGNAME"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()));
        let uid = rustix::process::getuid().as_raw();
        let session = (manager == Manager::Systemd).then(|| {
            let runtime = std::env::var_os("XDG_RUNTIME_DIR")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute());
            user_session(runtime.as_deref(), uid, is_socket)
        });
        Ok(Host {
            manager,
            home,
            xdg_config_home,
            uid,
            user,
            session,
        })
    }

    /// `systemctl --user` with `args`, given `XDG_RUNTIME_DIR` when the manager was
    /// found only in `/run/user/UID`.
    pub(crate) fn systemctl(&self, args: &[&str]) -> Call {
        let mut call = systemctl(args);
        if let Some(UserSession::FoundIn(dir)) = &self.session {
            call.env
                .push(("XDG_RUNTIME_DIR", dir.to_string_lossy().into_owned()));
        }
        call
    }

    /// Where the unit or plist goes.
    pub(crate) fn target(&self) -> PathBuf {
        match self.manager {
            Manager::Systemd => self
                .xdg_config_home
                .clone()
                .unwrap_or_else(|| self.home.join(".config"))
                .join("systemd/user")
                .join(UNIT_NAME),
            Manager::Launchd => self
                .home
                .join("Library/LaunchAgents")
                .join(format!("{LABEL}.plist")),
        }
    }

    /// The launchd domain of this user's agents.
    pub(crate) fn launchd_domain(&self) -> String {
        format!("gui/{}", self.uid)
    }

    /// The agent's launchd service target.
    pub(crate) fn launchd_service(&self) -> String {
        format!("gui/{}/{LABEL}", self.uid)
    }
}

/// Whether the user's services outlive their sessions, per logind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Linger {
    On,
    Off,
    Unknown(String),
}

/// Reads `loginctl show-user ... --property=Linger --value` output.
pub(crate) fn parse_linger(output: &str) -> Linger {
    match output.trim() {
        "yes" => Linger::On,
        "no" => Linger::Off,
        other => Linger::Unknown(other.to_string()),
    }
}

/// Asks logind (read-only) whether lingering is on for this user.
pub(crate) fn linger(host: &Host) -> Linger {
    let call = Call::new(
        "loginctl",
        &[
            "show-user",
            &host.uid.to_string(),
            "--property=Linger",
            "--value",
        ],
    );
    let answer = match quiet(&call) {
        Ok((status, out)) if status.success() => parse_linger(&out),
        Ok((_, out)) => Linger::Unknown(out.trim().to_string()),
        Err(e) => Linger::Unknown(crate::support::error::chain(&e)),
    };
    if let Linger::Unknown(_) = &answer
        && let Some(user) = &host.user
        && Path::new("/var/lib/systemd/linger").join(user).exists()
    {
        return Linger::On;
    }
    answer
}

/// Everything install's plan is made from.
#[derive(Debug, Clone)]
pub(crate) struct InstallFacts {
    pub(crate) host: Host,
    /// The values for the service definition.
    pub(crate) spec: ServiceSpec,
    /// Entries of the current `PATH` left out of the service's (not absolute).
    pub(crate) dropped_path: Vec<String>,
    /// Whether `CATSTACK_LLM_JUDGE_RUNNERS` is set here (the service does not get it).
    pub(crate) runner_override: bool,
    /// The user sudo was run by, when running as root under sudo.
    pub(crate) sudo_user: Option<String>,
    /// Each configured runner program and where the service's `PATH` finds it.
    pub(crate) runners: Vec<(String, Option<PathBuf>)>,
    /// Each configured API runner's name and the variable its key is read from.
    pub(crate) api_runners: Vec<(String, Option<String>)>,
    /// Why the existing state folder would stop the daemon, if it would.
    pub(crate) state_dir_error: Option<String>,
    /// The state folder's judge.log.
    pub(crate) judge_log: PathBuf,
    /// Lingering (systemd only).
    pub(crate) linger: Option<Linger>,
}

/// The service's daemon for `settings`: `bin` (this binary), the state folder, the
/// config file made absolute, with `path` as its `PATH`.
pub(crate) fn daemon_spec(
    settings: &Settings,
    bin: PathBuf,
    path: String,
) -> Result<ServiceSpec, HostError> {
    let config = match &settings.config_path {
        Some(p) => Some(
            std::path::absolute(p).map_err(|cause| HostError::ConfigPath {
                path: p.clone(),
                cause,
            })?,
        ),
        None => None,
    };
    Ok(ServiceSpec {
        bin,
        state_dir: settings.state_dir.clone(),
        config,
        path,
        stop_timeout_seconds: stop_timeout_seconds(&settings.config),
    })
}

/// Reads the facts install plans from, for the service of `bin` (this binary).
pub(crate) fn install_facts(
    settings: &Settings,
    host: &Host,
    bin: PathBuf,
) -> Result<InstallFacts, HostError> {
    let (path, dropped_path) = service_path(
        std::env::var_os("PATH").as_deref(),
        &host.home,
        host.manager,
    );
    let spec = daemon_spec(settings, bin, path)?;
    let state = StateDir::new(&spec.state_dir);
    let state_dir_error = if state.root.exists() {
        crate::store::permissions::check_private(&state.root)
            .err()
            .map(|e| crate::support::error::chain(&e))
    } else {
        None
    };
    let sudo_user = if rustix::process::getuid().is_root() {
        std::env::var("SUDO_USER")
            .ok()
            .filter(|u| !u.is_empty() && u != "root")
    } else {
        None
    };
    // The configured tables: the service does not get the override variable.
    let mut programs: Vec<&str> = Vec::new();
    let tables = &settings.config.runners;
    for table in [&tables.default, &tables.investigate] {
        for runner in table {
            if let Some(p) = runner.argv.first()
                && !programs.contains(&p.as_str())
            {
                programs.push(p.as_str());
            }
        }
    }
    let runners = programs
        .into_iter()
        .map(|program| {
            let hit = if program.contains('/') {
                Path::new(program).is_file().then(|| PathBuf::from(program))
            } else {
                find_on_path(OsStr::new(program), Some(OsStr::new(&spec.path)))
            };
            (program.to_string(), hit)
        })
        .collect();
    let api_runners = tables
        .default
        .iter()
        .chain(&tables.investigate)
        .filter_map(|r| Some((r.name.clone(), r.api.as_ref()?.api_key_env.clone())))
        .collect();
    let linger = (host.manager == Manager::Systemd).then(|| linger(host));
    Ok(InstallFacts {
        host: host.clone(),
        judge_log: state.log(),
        spec,
        dropped_path,
        runner_override: settings.runner_override.is_some(),
        sudo_user,
        runners,
        api_runners,
        state_dir_error,
        linger,
    })
}

/// This binary's absolute path, preferring the path it was started by (a stable
/// symlink such as Homebrew's) when that is the same file.
pub(crate) fn this_binary() -> Result<PathBuf, HostError> {
    let exe = std::env::current_exe().map_err(HostError::NoBinary)?;
    if exe.to_string_lossy().ends_with(" (deleted)") {
        return Err(HostError::BinaryGone { exe });
    }
    let real = std::fs::canonicalize(&exe).unwrap_or_else(|_| exe.clone());
    let invoked = std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|arg0| {
            if arg0.is_absolute() {
                Some(arg0)
            } else if arg0.components().count() > 1 {
                std::path::absolute(&arg0).ok()
            } else {
                find_on_path(arg0.as_os_str(), std::env::var_os("PATH").as_deref())
            }
        });
    Ok(match invoked {
        Some(p) if std::fs::canonicalize(&p).is_ok_and(|c| c == real) => p,
        _ => exe,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_session_is_looked_for_where_systemctl_looks() {
        let only = |there: &'static str| move |p: &Path| p == Path::new(there);
        let runtime = Path::new("/run/user/1000");
        assert_eq!(
            user_session(Some(runtime), 1000, only("/run/user/1000/systemd/private")),
            UserSession::Found
        );
        // Set elsewhere: systemctl looks only there, whatever /run/user holds.
        assert_eq!(
            user_session(
                Some(Path::new("/tmp/rt")),
                1000,
                only("/run/user/1000/systemd/private")
            ),
            UserSession::Missing(PathBuf::from("/tmp/rt/systemd/private"))
        );
        assert_eq!(
            user_session(None, 1000, only("/run/user/1000/systemd/private")),
            UserSession::FoundIn(PathBuf::from("/run/user/1000"))
        );
        assert_eq!(
            user_session(None, 0, |_| false),
            UserSession::Missing(PathBuf::from("/run/user/0/systemd/private"))
        );
    }

    #[test]
    fn systemctl_gets_the_runtime_folder_only_when_this_shell_lacks_it() {
        let host = |session| Host {
            manager: Manager::Systemd,
            home: PathBuf::from("/home/u"),
            xdg_config_home: None,
            uid: 1000,
            user: None,
            session: Some(session),
        };
        assert_eq!(
            host(UserSession::Found)
                .systemctl(&["daemon-reload"])
                .shown(),
            "systemctl --user daemon-reload"
        );
        let found_in = UserSession::FoundIn(PathBuf::from("/run/user/1000"));
        assert_eq!(
            host(found_in).systemctl(&["daemon-reload"]).shown(),
            "XDG_RUNTIME_DIR=/run/user/1000 systemctl --user daemon-reload"
        );
    }

    #[test]
    fn linger_answers() {
        assert_eq!(parse_linger("yes\n"), Linger::On);
        assert_eq!(parse_linger("no\n"), Linger::Off);
        assert_eq!(parse_linger(""), Linger::Unknown(String::new()));
    }
}
