//! `llm-judge service install / uninstall / status` (SPEC section 11).
//!
//! The service definitions are templates in the repository (`systemd/llm-judge.service`,
//! `launchd/com.catstack.llm-judge.plist`), compiled in and rendered by pure functions
//! with this binary's absolute path, the state folder, the config file, a `PATH` that
//! finds the runners and a stop timeout above the drain grace. Around that: the target
//! file for this user, the service manager calls (`systemctl --user`, `launchctl`), the
//! lingering check, and `--dry-run`, which prints the file and the calls instead.
//!
//! The manager is systemd on Linux and launchd on macOS; `LLM_JUDGE_SERVICE_MANAGER`
//! (`systemd` or `launchd`) overrides the guess. `systemctl`, `loginctl` and `launchctl`
//! are found on `PATH`, so tests put recording fakes first on it.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::cli::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE, ServiceAction};
use crate::config::{Config, Settings};
use crate::runners::RUNNERS_VAR;
use crate::spool::StateDir;

/// The systemd user unit template.
pub const UNIT_TEMPLATE: &str = include_str!("../../systemd/llm-judge.service");
/// The launchd agent template.
pub const PLIST_TEMPLATE: &str = include_str!("../../launchd/com.catstack.llm-judge.plist");
/// The systemd unit's name.
pub const UNIT_NAME: &str = "llm-judge.service";
/// The launchd agent's label (also its plist's file stem).
pub const LABEL: &str = "com.catstack.llm-judge";
/// Picks the service manager instead of the platform's own.
pub const MANAGER_VAR: &str = "LLM_JUDGE_SERVICE_MANAGER";
/// The file (in the state folder) that gets what the daemon prints under launchd.
pub const LAUNCHD_LOG: &str = "launchd.log";
/// launchd.log is moved to launchd.log.1 at install when it is larger than this.
pub const LAUNCHD_LOG_MAX_BYTES: u64 = 1 << 20;

/// After the drain grace the daemon stops its runners and waits this long for its
/// workers (`STOP_WAIT` in the daemon).
const DAEMON_STOP_WAIT_SECONDS: f64 = 10.0;
/// Extra time on top of the daemon's worst case before the manager kills it.
const STOP_MARGIN_SECONDS: f64 = 15.0;
/// How long uninstall/reinstall waits for launchd to let go of the old agent, on top
/// of its exit timeout.
const LAUNCHD_UNLOAD_SLACK: Duration = Duration::from_secs(10);

/// A service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Systemd,
    Launchd,
}

impl Manager {
    fn name(self) -> &'static str {
        match self {
            Manager::Systemd => "systemd",
            Manager::Launchd => "launchd",
        }
    }
}

/// What a service definition holds.
#[derive(Debug, Clone)]
pub struct ServiceSpec {
    /// This binary, absolute.
    pub bin: PathBuf,
    /// The state folder, absolute.
    pub state_dir: PathBuf,
    /// The config file in use, absolute, if any.
    pub config: Option<PathBuf>,
    /// The `PATH` the daemon and its runners get.
    pub path: String,
    /// How long the manager waits after SIGTERM before SIGKILL.
    pub stop_timeout_seconds: u64,
}

impl ServiceSpec {
    /// The daemon's command line, program first.
    pub fn argv(&self) -> Result<Vec<String>, String> {
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
fn text(path: &Path, what: &str) -> Result<String, String> {
    let Some(s) = path.to_str() else {
        return Err(format!(
            "{what} {} is not UTF-8, which a service definition cannot hold; use a UTF-8 path",
            path.display()
        ));
    };
    check_plain(s, what)?;
    Ok(s.to_string())
}

fn check_plain(s: &str, what: &str) -> Result<(), String> {
    if s.chars().any(char::is_control) {
        return Err(format!(
            "{what} {s:?} holds a control character (such as a newline), which a service definition cannot hold; use another path"
        ));
    }
    Ok(())
}

/// The manager's stop timeout: the daemon's worst-case drain (shutdown grace, then its
/// runners' kill grace inside its own wait for the workers) plus a margin.
pub fn stop_timeout_seconds(config: &Config) -> u64 {
    let finite = |v: f64, default: f64| {
        if v.is_finite() && v >= 0.0 {
            v
        } else {
            default
        }
    };
    let worst = finite(config.shutdown_grace_seconds, 15.0)
        + finite(config.kill_grace_seconds, 5.0)
        + DAEMON_STOP_WAIT_SECONDS
        + STOP_MARGIN_SECONDS;
    // Saturating float-to-int conversion: absurd graces give a huge but valid number.
    worst.ceil().min(u32::MAX as f64) as u64
}

/// The `PATH` for the service: the current one's absolute entries (relative and empty
/// ones would resolve against the service's working folder), then the usual install
/// folders of the runners that are missing from it. Returns it and the dropped entries.
pub fn service_path(
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

/// One argument of a systemd command line, double-quoted: `\` and `"` escaped, `%`
/// (specifiers) as `%%` and `$` (variable expansion) as `$$`.
fn systemd_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A systemd `Environment=` assignment, double-quoted (no `$` expansion there).
fn systemd_env(name: &str, value: &str) -> String {
    let mut out = String::from("\"");
    for c in format!("{name}={value}").chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Replaces every `@NAME@` of a template; fails if one is left.
fn fill(template: &str, fields: &[(&str, String)]) -> Result<String, String> {
    let mut out = template.to_string();
    for (name, value) in fields {
        out = out.replace(&format!("@{name}@"), value);
    }
    if let Some(left) = leftover_placeholder(&out) {
        return Err(format!(
            "internal error: template field @{left}@ was not filled"
        ));
    }
    Ok(out)
}

/// The first `@NAME@` (capitals and `_`) in `text`, if any.
pub fn leftover_placeholder(text: &str) -> Option<&str> {
    let mut rest = text;
    while let Some(start) = rest.find('@') {
        let after = &rest[start + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
            .unwrap_or(after.len());
        if name_len > 0 && after[name_len..].starts_with('@') {
            return Some(&after[..name_len]);
        }
        rest = after;
    }
    None
}

/// The systemd user unit for `spec`.
pub fn render_unit(spec: &ServiceSpec) -> Result<String, String> {
    let exec_start = spec
        .argv()?
        .iter()
        .map(|a| systemd_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    check_plain(&spec.path, "PATH")?;
    fill(
        UNIT_TEMPLATE,
        &[
            ("EXEC_START", exec_start),
            ("PATH_ENV", systemd_env("PATH", &spec.path)),
            ("STOP_TIMEOUT", spec.stop_timeout_seconds.to_string()),
        ],
    )
}

/// The launchd agent plist for `spec`.
pub fn render_plist(spec: &ServiceSpec) -> Result<String, String> {
    let program_arguments = spec
        .argv()?
        .iter()
        .map(|a| format!("\t\t<string>{}</string>", xml_escape(a)))
        .collect::<Vec<_>>()
        .join("\n");
    check_plain(&spec.path, "PATH")?;
    let log = text(&spec.state_dir.join(LAUNCHD_LOG), "the launchd log file")?;
    fill(
        PLIST_TEMPLATE,
        &[
            ("PROGRAM_ARGUMENTS", program_arguments),
            ("PATH", xml_escape(&spec.path)),
            ("STOP_TIMEOUT", spec.stop_timeout_seconds.to_string()),
            ("LAUNCHD_LOG", xml_escape(&log)),
        ],
    )
}

/// The user's side of the machine: where things go and who we are.
struct Host {
    manager: Manager,
    home: PathBuf,
    xdg_config_home: Option<PathBuf>,
    uid: u32,
    user: Option<String>,
}

impl Host {
    fn from_env() -> Result<Host, (i32, String)> {
        let manager = match std::env::var(MANAGER_VAR).ok().filter(|v| !v.is_empty()) {
            Some(v) if v == "systemd" => Manager::Systemd,
            Some(v) if v == "launchd" => Manager::Launchd,
            Some(v) => {
                return Err((
                    EXIT_USAGE,
                    format!(
                        "{MANAGER_VAR}={v:?} is not a service manager; set it to systemd or launchd, or unset it"
                    ),
                ));
            }
            None if cfg!(target_os = "macos") => Manager::Launchd,
            None if cfg!(target_os = "linux") => Manager::Systemd,
            None => {
                return Err((
                    EXIT_FAILURE,
                    format!(
                        "no supported service manager on this system (systemd on Linux, launchd on macOS); \
                         run `llm-judge daemon` under your own supervisor, or set {MANAGER_VAR}=systemd|launchd"
                    ),
                ));
            }
        };
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .ok_or((
                EXIT_FAILURE,
                "HOME is not set to an absolute path, so the service file has no place; set HOME"
                    .to_string(),
            ))?;
        let xdg_config_home = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute());
        let user = ["USER", "LOGNAME"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()));
        Ok(Host {
            manager,
            home,
            xdg_config_home,
            uid: rustix::process::getuid().as_raw(),
            user,
        })
    }

    /// Where the unit or plist goes.
    fn target(&self) -> PathBuf {
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

    fn launchd_domain(&self) -> String {
        format!("gui/{}", self.uid)
    }

    fn launchd_service(&self) -> String {
        format!("gui/{}/{LABEL}", self.uid)
    }
}

/// Runs a service action; returns the exit code.
pub fn main(settings: &Settings, action: ServiceAction) -> i32 {
    let host = match Host::from_env() {
        Ok(host) => host,
        Err((code, e)) => {
            eprintln!("llm-judge: {e}");
            return code;
        }
    };
    let result = match action {
        ServiceAction::Install { dry_run } => install(settings, &host, dry_run),
        ServiceAction::Uninstall { dry_run } => uninstall(&host, dry_run),
        ServiceAction::Status => status(&host),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("llm-judge: {e}");
            EXIT_FAILURE
        }
    }
}

/// This binary's absolute path, preferring the path it was started by (a stable
/// symlink such as Homebrew's) when that is the same file.
fn this_binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| {
        format!(
            "cannot find this binary's path ({e}); run llm-judge by its absolute path and try again"
        )
    })?;
    if exe.to_string_lossy().ends_with(" (deleted)") {
        return Err(format!(
            "this binary ({}) was replaced or removed while running; run the installed llm-judge again",
            exe.display()
        ));
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

/// `program` on a `PATH` value, if it is there and executable.
fn find_on_path(program: &OsStr, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|c| {
            std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn build_spec(settings: &Settings, host: &Host) -> Result<(ServiceSpec, Vec<String>), String> {
    let bin = this_binary()?;
    let config = match &settings.config_path {
        Some(p) => Some(std::path::absolute(p).map_err(|e| {
            format!("cannot make the config path {} absolute ({e}); pass --config with an absolute path", p.display())
        })?),
        None => None,
    };
    let (path, dropped) = service_path(
        std::env::var_os("PATH").as_deref(),
        &host.home,
        host.manager,
    );
    let spec = ServiceSpec {
        bin,
        state_dir: settings.state_dir.clone(),
        config,
        path,
        stop_timeout_seconds: stop_timeout_seconds(&settings.config),
    };
    Ok((spec, dropped))
}

/// Notes about the service's environment that the operator should know.
fn install_notes(settings: &Settings, spec: &ServiceSpec, dropped: &[String]) -> Vec<String> {
    let mut notes = Vec::new();
    if !dropped.is_empty() {
        notes.push(format!(
            "note: left out of the service's PATH (not absolute): {}",
            dropped
                .iter()
                .map(|d| format!("{d:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if settings.runner_override.is_some() {
        notes.push(format!(
            "warning: {RUNNERS_VAR} is set here but is not carried into the service, which uses the configured runner tables"
        ));
    }
    if rustix::process::getuid().is_root()
        && let Some(user) = std::env::var("SUDO_USER")
            .ok()
            .filter(|u| !u.is_empty() && u != "root")
    {
        notes.push(format!(
            "warning: running under sudo installs the service for root, not for {user}; run `llm-judge service install` as {user} without sudo"
        ));
    }
    let bin = spec.bin.to_string_lossy();
    if bin.contains("/target/debug/") || bin.contains("/target/release/") {
        notes.push(format!(
            "note: the service will run the build at {bin}; `cargo clean` or a rebuild changes it under the service. \
             Install the binary (e.g. `cargo install --path .`) and run `llm-judge service install` from there"
        ));
    }
    let mut programs: Vec<&str> = Vec::new();
    // The configured tables: the service does not get the override variable.
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
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for program in programs {
        let hit = if program.contains('/') {
            Path::new(program).is_file().then(|| PathBuf::from(program))
        } else {
            find_on_path(OsStr::new(program), Some(OsStr::new(&spec.path)))
        };
        match hit {
            Some(p) => found.push(format!("{program} ({})", p.display())),
            None => missing.push(program.to_string()),
        }
    }
    if found.is_empty() {
        notes.push(format!(
            "warning: none of the runners ({}) is on the service's PATH, so every job would be `unchecked`; \
             install one, or run `llm-judge service install` again from a shell whose PATH finds it",
            missing.join(", ")
        ));
    } else {
        let mut line = format!("runners on the service's PATH: {}", found.join(", "));
        if !missing.is_empty() {
            let _ = write!(line, "; not found: {}", missing.join(", "));
        }
        notes.push(line);
    }
    notes
}

/// One call to the service manager.
struct Call {
    program: &'static str,
    args: Vec<String>,
}

impl Call {
    fn new(program: &'static str, args: &[&str]) -> Call {
        Call {
            program,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn shown(&self) -> String {
        std::iter::once(self.program.to_string())
            .chain(self.args.iter().map(|a| shell_quote(a)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(self.program);
        cmd.args(&self.args).stdin(Stdio::null());
        cmd
    }

    /// Runs it with the terminal's output; an error unless it exits 0.
    fn run(&self) -> Result<(), String> {
        println!("running: {}", self.shown());
        let status = self.status(self.command())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("`{}` failed ({})", self.shown(), describe(status)))
        }
    }

    /// Runs it quietly; its exit status and output (stdout, then stderr).
    fn quiet(&self) -> Result<(ExitStatus, String), String> {
        let out = self.command().output().map_err(|e| self.spawn_error(&e))?;
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok((out.status, text))
    }

    fn status(&self, mut cmd: Command) -> Result<ExitStatus, String> {
        cmd.status().map_err(|e| self.spawn_error(&e))
    }

    fn spawn_error(&self, e: &std::io::Error) -> String {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "`{}` is not on PATH: this system does not seem to run {}; run `llm-judge daemon` under your own supervisor",
                self.program,
                if self.program == "launchctl" {
                    "launchd"
                } else {
                    "systemd"
                }
            )
        } else {
            format!("cannot run `{}`: {e}", self.shown())
        }
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown status".to_string(),
    }
}

/// Quotes a word for a POSIX shell when it needs it.
fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn systemctl(args: &[&str]) -> Call {
    let mut all = vec!["--user"];
    all.extend_from_slice(args);
    Call::new("systemctl", &all)
}

fn install(settings: &Settings, host: &Host, dry_run: bool) -> Result<i32, String> {
    let (spec, dropped) = build_spec(settings, host)?;
    let rendered = match host.manager {
        Manager::Systemd => render_unit(&spec)?,
        Manager::Launchd => render_plist(&spec)?,
    };
    let target = host.target();
    let state = StateDir::new(&spec.state_dir);
    if state.root.exists()
        && let Err(e) = crate::permissions::check_private(&state.root)
    {
        return Err(format!("the daemon would refuse to start: {e}"));
    }
    let calls = match host.manager {
        Manager::Systemd => vec![
            systemctl(&["daemon-reload"]),
            systemctl(&["enable", UNIT_NAME]),
            // restart, not start: a reinstall must replace a running daemon.
            systemctl(&["restart", UNIT_NAME]),
        ],
        Manager::Launchd => vec![
            Call::new("launchctl", &["enable", &host.launchd_service()]),
            Call::new(
                "launchctl",
                &[
                    "bootstrap",
                    &host.launchd_domain(),
                    &text(&target, "the plist path")?,
                ],
            ),
        ],
    };
    let notes = install_notes(settings, &spec, &dropped);
    if dry_run {
        println!(
            "# {} service, dry run: nothing is written or started.",
            host.manager.name()
        );
        println!("# would write {}:", target.display());
        print!("{rendered}");
        if !rendered.ends_with('\n') {
            println!();
        }
        println!(
            "# would create the state folder {} (0700) if missing",
            spec.state_dir.display()
        );
        if host.manager == Manager::Launchd {
            println!(
                "# would stop a loaded agent first: launchctl bootout {}",
                shell_quote(&host.launchd_service())
            );
        }
        println!("# would run:");
        for call in &calls {
            println!("{}", call.shown());
        }
        for note in &notes {
            println!("# {note}");
        }
        if host.manager == Manager::Systemd
            && let Some(warning) = linger_warning(host)
        {
            println!("# {warning}");
        }
        return Ok(EXIT_OK);
    }
    state
        .create()
        .map_err(|e| format!("{e}; fix its permissions or pass --state-dir"))?;
    if let Some(warning) = crate::permissions::check_private(&state.root)? {
        println!("warning: {warning}");
    }
    if host.manager == Manager::Launchd {
        rotate_launchd_log(&spec.state_dir.join(LAUNCHD_LOG));
        // A loaded agent keeps its old definition: unload it first (it drains).
        unload_launchd(host)?;
    }
    let replaced = target.exists();
    write_file(&target, rendered.as_bytes())?;
    println!(
        "{} {}",
        if replaced { "replaced" } else { "wrote" },
        target.display()
    );
    for call in &calls {
        if let Err(e) = call.run() {
            return Err(format!("{e}\n{}", failure_hint(host, &target)));
        }
    }
    for note in &notes {
        println!("{note}");
    }
    match host.manager {
        Manager::Systemd => {
            println!(
                "llm-judge runs as the systemd user service {UNIT_NAME} (state folder {}).\n\
                 Logs: journalctl --user -u llm-judge -f, and {}",
                spec.state_dir.display(),
                state.log().display()
            );
            if let Some(warning) = linger_warning(host) {
                println!("{warning}");
            }
        }
        Manager::Launchd => println!(
            "llm-judge runs as the launchd agent {LABEL} (state folder {}).\nLogs: {} (and {} for start-up errors)",
            spec.state_dir.display(),
            state.log().display(),
            spec.state_dir.join(LAUNCHD_LOG).display()
        ),
    }
    Ok(EXIT_OK)
}

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

/// Writes `bytes` to `target` atomically (hidden temp file, fsync, rename), mode 0644,
/// creating its folders.
fn write_file(target: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = target
        .parent()
        .ok_or_else(|| format!("{} has no parent folder", target.display()))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create folder {}: {e}", dir.display()))?;
    let mut temp_name = OsString::from(".");
    temp_name.push(target.file_name().unwrap_or(OsStr::new("service")));
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = dir.join(temp_name);
    let written = (|| -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&temp)?;
        // The mode survives a restrictive umask: launchd refuses group/other-writable
        // plists but needs to read them.
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, target)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!(
            "cannot write {}: {e}; check that folder's permissions",
            target.display()
        )
    })
}

fn rotate_launchd_log(log: &Path) {
    if std::fs::metadata(log).is_ok_and(|m| m.len() > LAUNCHD_LOG_MAX_BYTES) {
        let mut old = log.as_os_str().to_owned();
        old.push(".1");
        if let Err(e) = std::fs::rename(log, &old) {
            println!("warning: cannot move {} aside: {e}", log.display());
        }
    }
}

/// True when launchd has the agent loaded.
fn launchd_loaded(host: &Host) -> Result<bool, String> {
    let (status, _) = Call::new("launchctl", &["print", &host.launchd_service()]).quiet()?;
    Ok(status.success())
}

/// Unloads the agent if it is loaded (launchd sends SIGTERM; the daemon drains) and
/// waits until launchd has let go of it.
fn unload_launchd(host: &Host) -> Result<(), String> {
    if !launchd_loaded(host)? {
        return Ok(());
    }
    Call::new("launchctl", &["bootout", &host.launchd_service()]).run()?;
    let deadline = Instant::now() + Duration::from_secs(300) + LAUNCHD_UNLOAD_SLACK;
    while launchd_loaded(host)? {
        if Instant::now() >= deadline {
            return Err(format!(
                "launchd still lists {} after bootout; try again later or check `launchctl print {}`",
                LABEL,
                host.launchd_service()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

fn uninstall(host: &Host, dry_run: bool) -> Result<i32, String> {
    let target = host.target();
    let installed = target.exists();
    match host.manager {
        Manager::Systemd => {
            let mut calls = Vec::new();
            if installed {
                // --now stops it: systemd sends SIGTERM and the daemon drains.
                calls.push(systemctl(&["disable", "--now", UNIT_NAME]));
            }
            if dry_run {
                println!("# systemd service, dry run: nothing is stopped or removed.");
                if !installed {
                    println!(
                        "# {} does not exist: nothing to uninstall",
                        target.display()
                    );
                    return Ok(EXIT_OK);
                }
                println!("# would run:");
                for call in &calls {
                    println!("{}", call.shown());
                }
                println!("# would remove {}", target.display());
                println!("{}", systemctl(&["daemon-reload"]).shown());
                println!("{}", systemctl(&["reset-failed", UNIT_NAME]).shown());
                return Ok(EXIT_OK);
            }
            if !installed {
                println!(
                    "{} does not exist: the service is not installed",
                    target.display()
                );
                return Ok(EXIT_OK);
            }
            for call in &calls {
                call.run().map_err(|e| {
                    format!(
                        "{e}\nThe unit file {} is kept. If your user manager is gone for good, remove it by hand.",
                        target.display()
                    )
                })?;
            }
            remove(&target)?;
            systemctl(&["daemon-reload"]).run()?;
            // Forget a failed state so `systemctl --user list-units` is clean; may fail harmlessly.
            let _ = systemctl(&["reset-failed", UNIT_NAME]).quiet();
        }
        Manager::Launchd => {
            if dry_run {
                println!("# launchd agent, dry run: nothing is stopped or removed.");
                println!(
                    "# would run (if loaded): launchctl bootout {}",
                    shell_quote(&host.launchd_service())
                );
                if installed {
                    println!("# would remove {}", target.display());
                } else {
                    println!("# {} does not exist", target.display());
                }
                return Ok(EXIT_OK);
            }
            unload_launchd(host)?;
            if !installed {
                println!(
                    "{} does not exist: the agent is not installed",
                    target.display()
                );
                return Ok(EXIT_OK);
            }
            remove(&target)?;
        }
    }
    println!(
        "removed {}; the state folder and judge.log are kept",
        target.display()
    );
    Ok(EXIT_OK)
}

fn remove(target: &Path) -> Result<(), String> {
    std::fs::remove_file(target)
        .map_err(|e| format!("cannot remove {}: {e}; remove it by hand", target.display()))
}

fn status(host: &Host) -> Result<i32, String> {
    let target = host.target();
    if target.exists() {
        println!("service file: {}", target.display());
    } else {
        println!(
            "service file: {} (missing: not installed; run `llm-judge service install`)",
            target.display()
        );
    }
    let _ = std::io::stdout().flush();
    let call = match host.manager {
        Manager::Systemd => systemctl(&["status", UNIT_NAME, "--no-pager", "--lines=10"]),
        Manager::Launchd => Call::new("launchctl", &["print", &host.launchd_service()]),
    };
    let status = call.status(call.command())?;
    if host.manager == Manager::Systemd
        && let Some(warning) = linger_warning(host)
    {
        println!("{warning}");
    }
    if status.success() {
        return Ok(EXIT_OK);
    }
    match host.manager {
        // systemctl status: 3 = not running, 4 = no such unit.
        Manager::Systemd => println!("{UNIT_NAME} is not running ({})", describe(status)),
        Manager::Launchd => println!(
            "{LABEL} is not loaded in {} ({})",
            host.launchd_domain(),
            describe(status)
        ),
    }
    Ok(EXIT_FAILURE)
}

/// Whether the user's services outlive their sessions, per logind.
#[derive(Debug, PartialEq, Eq)]
pub enum Linger {
    On,
    Off,
    Unknown(String),
}

/// Reads `loginctl show-user ... --property=Linger --value` output.
pub fn parse_linger(output: &str) -> Linger {
    match output.trim() {
        "yes" => Linger::On,
        "no" => Linger::Off,
        other => Linger::Unknown(other.to_string()),
    }
}

fn linger(host: &Host) -> Linger {
    let call = Call::new(
        "loginctl",
        &[
            "show-user",
            &host.uid.to_string(),
            "--property=Linger",
            "--value",
        ],
    );
    let answer = match call.quiet() {
        Ok((status, out)) if status.success() => parse_linger(&out),
        Ok((_, out)) => Linger::Unknown(out.trim().to_string()),
        Err(e) => Linger::Unknown(e),
    };
    if let Linger::Unknown(_) = &answer
        && let Some(user) = &host.user
        && Path::new("/var/lib/systemd/linger").join(user).exists()
    {
        return Linger::On;
    }
    answer
}

/// A warning when the user's services stop at logout, else nothing.
fn linger_warning(host: &Host) -> Option<String> {
    // loginctl takes a user name or a uid.
    let (who, arg) = match &host.user {
        Some(user) => (user.clone(), user.clone()),
        None => (format!("uid {}", host.uid), host.uid.to_string()),
    };
    let fix = format!(
        "To keep it running after you log out: loginctl enable-linger {}",
        shell_quote(&arg)
    );
    match linger(host) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ServiceSpec {
        ServiceSpec {
            bin: PathBuf::from("/opt/llm judge/bin/llm-judge"),
            state_dir: PathBuf::from("/home/u/.cache/catstack-llm-judge"),
            config: Some(PathBuf::from(
                "/home/u/.config/llm-judge/100%$HOME\"x\\.toml",
            )),
            path: "/home/u/.local/bin:/usr/bin:/bin".to_string(),
            stop_timeout_seconds: 45,
        }
    }

    fn config() -> Config {
        crate::config::parse_config(None).unwrap()
    }

    fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
    }

    #[test]
    fn unit_fills_every_field_and_quotes_for_systemd() {
        let unit = render_unit(&spec()).unwrap();
        assert_eq!(leftover_placeholder(&unit), None);
        assert_eq!(
            line(&unit, "ExecStart="),
            r#"ExecStart="/opt/llm judge/bin/llm-judge" "daemon" "--state-dir" "/home/u/.cache/catstack-llm-judge" "--config" "/home/u/.config/llm-judge/100%%$$HOME\"x\\.toml""#
        );
        assert_eq!(
            line(&unit, "Environment="),
            r#"Environment="PATH=/home/u/.local/bin:/usr/bin:/bin""#
        );
        assert_eq!(line(&unit, "TimeoutStopSec="), "TimeoutStopSec=45s");
    }

    #[test]
    fn unit_has_the_service_contract() {
        let unit = render_unit(&ServiceSpec {
            config: None,
            ..spec()
        })
        .unwrap();
        for want in [
            "Type=notify",
            "NotifyAccess=main",
            "KillMode=mixed",
            "Restart=on-failure",
            "RestartSec=5s",
            "WatchdogSec=30s",
            "StandardError=journal",
            "WantedBy=default.target",
            "OOMPolicy=continue",
        ] {
            assert!(unit.lines().any(|l| l == want), "{want} missing");
        }
        assert!(!line(&unit, "ExecStart=").contains("--config"));
        // Hardening that would break the runners (SPEC section 11) stays out.
        for banned in [
            "ProtectHome=",
            "PrivateTmp=",
            "RestrictNamespaces=",
            "ProtectSystem=",
            "PrivateUsers=",
            "NoNewPrivileges=",
            "MemoryDenyWriteExecute=",
            "SystemCallFilter=",
        ] {
            assert!(
                !unit.lines().any(|l| l.starts_with(banned)),
                "{banned} must not be set"
            );
        }
    }

    #[test]
    fn stop_timeout_exceeds_the_drain_grace() {
        let mut c = config();
        assert_eq!(stop_timeout_seconds(&c), 15 + 5 + 10 + 15);
        c.shutdown_grace_seconds = 100.5;
        c.kill_grace_seconds = 2.0;
        assert_eq!(stop_timeout_seconds(&c), 128);
        assert!(stop_timeout_seconds(&c) as f64 > c.shutdown_grace_seconds + c.kill_grace_seconds);
    }

    #[test]
    fn plist_fills_every_field_and_escapes_xml() {
        let mut s = spec();
        s.state_dir = PathBuf::from("/home/u/state <&>");
        let plist = render_plist(&s).unwrap();
        assert_eq!(leftover_placeholder(&plist), None);
        assert!(plist.contains(
            "\t\t<string>/opt/llm judge/bin/llm-judge</string>\n\t\t<string>daemon</string>"
        ));
        assert!(plist.contains("<string>/home/u/state &lt;&amp;&gt;</string>"));
        assert!(plist.contains("<string>/home/u/state &lt;&amp;&gt;/launchd.log</string>"));
        assert!(plist.contains("<string>/home/u/.local/bin:/usr/bin:/bin</string>"));
        assert!(plist.contains("<key>ExitTimeOut</key>\n\t<integer>45</integer>"));
        // XML comments may not hold "--".
        for comment in plist.split("<!--").skip(1) {
            assert!(
                !comment.split("-->").next().unwrap().contains("--"),
                "{comment}"
            );
        }
    }

    #[test]
    fn control_characters_are_refused() {
        let s = ServiceSpec {
            state_dir: PathBuf::from("/tmp/a\nExecStartPre=/bin/evil"),
            ..spec()
        };
        let e = render_unit(&s).unwrap_err();
        assert!(
            e.contains("state folder") && e.contains("control character"),
            "{e}"
        );
        assert!(render_plist(&s).is_err());
        let s = ServiceSpec {
            path: "/bin\n".into(),
            ..spec()
        };
        assert!(render_unit(&s).unwrap_err().contains("PATH"));
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

    #[test]
    fn placeholders_are_found() {
        assert_eq!(leftover_placeholder("a @BIN@ b"), Some("BIN"));
        assert_eq!(leftover_placeholder("user@host and x@y.z"), None);
        assert_eq!(leftover_placeholder("@...@"), None);
        assert_eq!(leftover_placeholder("a@@B_C@"), Some("B_C"));
        assert!(fill("x @NOPE@", &[]).is_err());
    }

    #[test]
    fn linger_answers() {
        assert_eq!(parse_linger("yes\n"), Linger::On);
        assert_eq!(parse_linger("no\n"), Linger::Off);
        assert_eq!(parse_linger(""), Linger::Unknown(String::new()));
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(
            shell_quote("gui/501/com.catstack.llm-judge"),
            "gui/501/com.catstack.llm-judge"
        );
        assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
