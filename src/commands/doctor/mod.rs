//! `llm-judge doctor`: every check an operator needs before trusting the judge.
//! Exit 1 when something would stop jobs from being judged.

mod api;
mod hooks;
mod install;

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::core::runner::table::{RUNNERS_VAR, Runner};
use crate::core::safety::check_investigate_table;
use crate::process::probe::ProbeSpec;
use crate::process::spawn::resolve_program;
use crate::store::config_file::{LoadError, Sources};
use crate::store::rules_files::investigate_use;
use crate::store::state_dir::StateDir;
use crate::support::error::Chained;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK};

/// How long `<runner> --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// `doctor` flags.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Machine-readable JSON: {"ok", "findings": [{"level", "message"}], "runners": [...]}.
    #[arg(long)]
    pub json: bool,
    /// Also ask each API runner's API once (a tiny request; it may cost a fraction of
    /// a cent).
    #[arg(long)]
    pub online: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Level {
    Ok,
    Warn,
    Fail,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "fail",
        }
    }
}

/// Whether a runner's login can be seen (the runner CLIs fail every job without one).
#[derive(Clone, Copy, PartialEq)]
enum Login {
    Found,
    Missing,
    /// A runner whose login cannot be seen from outside (cursor-agent, claude on macOS).
    Unknown,
}

/// Collected findings.
struct Report {
    lines: Vec<(Level, String)>,
    /// One record per runner of each table, for `--json`.
    runners: Vec<serde_json::Value>,
    colour: bool,
    json: bool,
}

impl Report {
    fn new(json: bool) -> Self {
        Report {
            lines: Vec::new(),
            runners: Vec::new(),
            colour: std::io::stdout().is_terminal(),
            json,
        }
    }

    fn add(&mut self, level: Level, text: impl Into<String>) {
        self.lines.push((level, text.into()));
    }

    fn finish(self) -> i32 {
        let failed = self.lines.iter().any(|(l, _)| *l == Level::Fail);
        let report = if self.json {
            self.as_json(failed)
        } else {
            self.as_text(failed)
        };
        if !crate::support::exit::print_stdout(&report) {
            return EXIT_FAILURE;
        }
        if failed { EXIT_FAILURE } else { EXIT_OK }
    }

    fn as_json(&self, failed: bool) -> String {
        let findings: Vec<serde_json::Value> = self
            .lines
            .iter()
            .map(|(level, text)| serde_json::json!({"level": level.name(), "message": text}))
            .collect();
        let report = serde_json::json!({
            "ok": !failed,
            "findings": findings,
            "runners": self.runners,
        });
        format!("{report:#}\n")
    }

    fn as_text(&self, failed: bool) -> String {
        let mut report = String::new();
        for (level, text) in &self.lines {
            let (tag, code) = match level {
                Level::Ok => ("ok  ", "32"),
                Level::Warn => ("warn", "33"),
                Level::Fail => ("FAIL", "31"),
            };
            let tag = if self.colour {
                format!("\x1b[{code}m{tag}\x1b[0m")
            } else {
                tag.to_string()
            };
            report.push_str(&format!("{tag}  {}\n", text.replace('\n', "\n      ")));
        }
        if failed {
            report.push_str("\njobs could not be judged: fix the FAIL lines above\n");
        }
        report
    }
}

/// Checks everything; returns the exit code.
pub fn main(settings: &Settings, sources: &Sources, args: &DoctorArgs) -> i32 {
    let mut report = Report::new(args.json);
    let source = settings
        .config_path
        .as_ref()
        .map_or("embedded default (no config file)".to_string(), |p| {
            p.display().to_string()
        });
    report.add(Level::Ok, format!("config: {source}"));
    check_tables(settings, sources, args.online, &mut report);
    check_isolation(&mut report);
    check_codex_models(settings, &mut report);
    check_state(&StateDir::new(&settings.state_dir), &mut report);
    hooks::check_state_dir(settings, &mut report);
    check_budget(settings, &mut report);
    hooks::check_hooks(settings, sources, &mut report);
    install::check(sources, |level, text| report.add(level, text));
    report.finish()
}

/// The spend cap: unset, under it (with the day's spend), or reached (jobs end unchecked).
fn check_budget(settings: &Settings, report: &mut Report) {
    let budget = settings.config.budget();
    if budget.is_unlimited() {
        report.add(
            Level::Ok,
            "spend cap: none (set max_cost_usd_per_day or max_runs_per_hour to cap it)",
        );
        return;
    }
    let recent = crate::store::spend_ledger::recent(&StateDir::new(&settings.state_dir));
    let now = crate::store::state_dir::now_unix();
    match crate::core::spend::over_budget(&recent, &budget, now, 0) {
        Some(reason) => report.add(
            Level::Fail,
            format!("spend cap reached, jobs end unchecked without a runner: {reason}"),
        ),
        None => {
            use crate::core::spend::{DAY, HOUR, totals_since};
            let day = totals_since(&recent, now - DAY);
            let cost: f64 = day.values().filter_map(|t| t.usage.cost_usd).sum();
            let hour: u64 = totals_since(&recent, now - HOUR)
                .values()
                .map(|t| t.runs)
                .sum();
            report.add(
                Level::Ok,
                format!(
                    "spend cap: under it ({hour} runs in the last hour, {} USD reported in the last 24 hours)",
                    crate::core::spend::dollars(cost)
                ),
            );
        }
    }
}

/// Doctor when the config itself failed to load: report it and what can still be checked.
pub fn config_failed(sources: &Sources, error: &LoadError, args: &DoctorArgs) -> i32 {
    let mut report = Report::new(args.json);
    report.add(
        Level::Fail,
        format!("config: {error}", error = error.chain()),
    );
    if let Some(dir) = &sources.state_dir_flag {
        check_state(&StateDir::new(dir), &mut report);
    }
    report.finish()
}

/// Whether runners' supervisors get their own PID namespace and `/proc` (docs/security.md).
fn check_isolation(report: &mut Report) {
    use crate::process::pid_ns::{HOST_PROC_HINT, Isolation, isolation};
    let found = isolation();
    let text = format!("runner isolation: {}", found.describe());
    if found == Isolation::Fork {
        report.add(
            Level::Warn,
            format!(
                "{text}; a runner that kills its supervisor can leave processes running. \
                 Allow user namespaces (e.g. sysctl kernel.unprivileged_userns_clone=1, or an \
                 AppArmor profile that permits them for llm-judge) to close it"
            ),
        );
    } else if found.host_proc_in_namespace() {
        report.add(Level::Warn, format!("{text}; {HOST_PROC_HINT}"));
    } else {
        report.add(Level::Ok, text);
    }
}

fn check_tables(settings: &Settings, sources: &Sources, online: bool, report: &mut Report) {
    let client = online.then(crate::process::api_call::ApiClient::default);
    if settings.runner_override.is_some() {
        report.add(
            Level::Warn,
            format!("{RUNNERS_VAR} is set: it replaces both tables and bypasses the safety check"),
        );
    }
    // The investigate table matters when something uses investigate mode (under the
    // override variable its one table is the default's); else its findings are notes.
    let used = match settings.runner_override {
        Some(_) => None,
        None => investigate_use(settings, sources),
    };
    for mode in [Mode::Default, Mode::Investigate] {
        let first_line = report.lines.len();
        let (mut found, mut usable) = (0, 0);
        for runner in settings.table(mode) {
            if let Some(api) = &runner.api {
                let rows = api::rows(mode.name(), &runner.name, api, client.as_ref());
                for (warn, text) in rows.lines {
                    report.add(if warn { Level::Warn } else { Level::Ok }, text);
                }
                report.runners.push(rows.record);
                found += 1;
                usable += usize::from(rows.usable);
                continue;
            }
            let (installed, login) = check_runner(settings, mode, runner, report);
            found += usize::from(installed);
            usable += usize::from(installed && login != Login::Missing);
        }
        // Only the default table fails doctor: an investigate table nothing can run (an
        // API-only config, whose API runners may not investigate) leaves investigate
        // jobs unchecked, which is a warning.
        let unused = mode == Mode::Investigate && used.is_none();
        let (level, why) = match (mode, &used) {
            (Mode::Default, _) => (Level::Fail, String::new()),
            (Mode::Investigate, Some(used)) => (Level::Warn, format!(" ({used})")),
            (Mode::Investigate, None) => (
                Level::Ok,
                "; no rule or config uses investigate mode, so nothing needs it".to_string(),
            ),
        };
        if found == 0 {
            report.add(
                level,
                format!(
                    "{} table: no runner is installed, so its jobs end unchecked{why}",
                    mode.name()
                ),
            );
        } else if usable == 0 {
            report.add(
                level,
                format!(
                    "{} table: no runner is usable (each one is missing, not logged in, or \
                     an API runner without its key), so its jobs end unchecked{why}",
                    mode.name()
                ),
            );
        }
        if unused {
            // Its runners' rows are notes: no job of the user's needs them.
            for line in &mut report.lines[first_line..] {
                if line.0 == Level::Warn {
                    line.0 = Level::Ok;
                }
            }
        }
    }
    if settings.runner_override.is_none() {
        match check_investigate_table(settings.table(Mode::Investigate)) {
            Ok(()) => report.add(
                Level::Ok,
                "investigate table passes the read-only safety check",
            ),
            Err(e) => report.add(Level::Fail, e.to_string()),
        }
    }
}

/// One runner: found or not, its version and login; a line for each, and its record
/// for `--json`. Returns whether it is installed and what its login looks like.
fn check_runner(
    settings: &Settings,
    mode: Mode,
    runner: &Runner,
    report: &mut Report,
) -> (bool, Login) {
    let program = runner.argv.first().map_or("", String::as_str);
    let Some(path) = resolve_program(program) else {
        report.add(
            Level::Warn,
            format!(
                "{} runner {}: {program:?} not found on PATH",
                mode.name(),
                runner.name
            ),
        );
        report.runners.push(serde_json::json!({
            "table": mode.name(), "name": runner.name, "program": program,
            "path": null, "version": null, "login": null, "usable": false,
        }));
        return (false, Login::Unknown);
    };
    let version = version_of(settings, runner, &path);
    report.add(
        Level::Ok,
        format!(
            "{} runner {}: {} ({version})",
            mode.name(),
            runner.name,
            path.display()
        ),
    );
    let login = check_login(settings, mode, runner, report);
    report.runners.push(serde_json::json!({
        "table": mode.name(), "name": runner.name, "program": program,
        "path": path.display().to_string(), "version": version,
        "login": match login {
            Login::Found => "found",
            Login::Missing => "missing",
            Login::Unknown => "unknown",
        },
        "usable": login != Login::Missing,
    }));
    (true, login)
}

/// The first line `<program> --version` prints, bounded in time, run as `runner` runs.
fn version_of(settings: &Settings, runner: &Runner, path: &Path) -> String {
    let withheld = settings.api_key_vars();
    let run = in_fresh_folder(async |cwd| {
        let spec = ProbeSpec {
            program: path,
            args: &["--version"],
            env: &runner.env,
            withheld: &withheld,
            cwd,
            timeout: VERSION_TIMEOUT,
        };
        crate::process::probe::run(&spec).await
    });
    match run {
        Ok(Ok(run)) => run
            .stdout
            .lines()
            .next()
            .map_or("no --version output".into(), |l| l.trim().to_string()),
        Ok(Err(e)) => crate::support::error::chain(&e),
        Err(why) => why,
    }
}

/// Runs `work` (a probe) on a runtime of its own, in a fresh private folder removed
/// afterwards (doctor makes nothing in the state folder); `Err` says what could not
/// be made.
fn in_fresh_folder<T>(work: impl AsyncFnOnce(&Path) -> T) -> Result<T, String> {
    let folder = tempfile::Builder::new()
        .prefix("llm-judge-doctor-")
        .tempdir()
        .map_err(|e| format!("cannot make a temp folder to run the probe in: {e}"))?;
    let runtime =
        crate::support::runtime::runtime().map_err(|e| crate::support::error::chain(&e))?;
    Ok(runtime.block_on(work(folder.path())))
}

/// Warns about each installed runner whose login is nowhere to be seen, as the judge
/// sees it before it starts one (its table's `env`, the tables' API keys withheld): the
/// judge does not start such a runner, so its jobs go to the next one.
fn check_login(settings: &Settings, mode: Mode, runner: &Runner, report: &mut Report) -> Login {
    let withheld = settings.api_key_vars();
    if let Some(detail) = crate::process::spawn::missing_login(runner, &withheld) {
        report.add(
            Level::Warn,
            format!(
                "{} runner {}: not logged in: {detail}; the judge skips it. doctor sees this \
                 shell's environment; the service's may differ",
                mode.name(),
                runner.name
            ),
        );
        return Login::Missing;
    }
    let program = runner.argv.first().map(String::as_str).unwrap_or_default();
    let name = program.rsplit('/').next().unwrap_or(program);
    match crate::core::runner::login::places(name, Path::new("/"), None) {
        Some(_) => Login::Found,
        None => Login::Unknown,
    }
}

/// Which model each codex runner with `-m` runs with, per this login's catalog.
fn check_codex_models(settings: &Settings, report: &mut Report) {
    let read =
        in_fresh_folder(async |cwd| crate::engine::codex_catalog::lookup(settings, cwd).await);
    let read = match read {
        Ok(Some(read)) => read,
        Ok(None) => return,
        Err(why) => {
            report.add(Level::Warn, format!("codex model catalog not read: {why}"));
            return;
        }
    };
    let catalog = match read {
        Ok(catalog) => catalog,
        Err(e) => {
            report.add(
                Level::Warn,
                format!(
                    "codex model catalog unreadable, the tables' models stay: {e}",
                    e = e.chain()
                ),
            );
            return;
        }
    };
    let (applied, _) = crate::core::codex::model::apply_to_settings(settings, &catalog);
    for m in crate::core::codex::model::models_in_use(settings, &applied) {
        match &m.replaced {
            Some(from) => report.add(
                Level::Warn,
                format!(
                    "{} runner {}: model {from} is not in this login's codex catalog; the daemon \
                     uses {} (the catalog's first model)",
                    m.table, m.runner, m.model
                ),
            ),
            None => report.add(
                Level::Ok,
                format!(
                    "{} runner {}: model {} is in this login's codex catalog",
                    m.table, m.runner, m.model
                ),
            ),
        }
    }
}

fn check_state(state: &StateDir, report: &mut Report) {
    let root = &state.root;
    if !root.exists() {
        report.add(
            Level::Ok,
            format!(
                "state folder {} does not exist yet (created on first use)",
                root.display()
            ),
        );
    } else {
        for dir in [root.clone(), state.jobs()] {
            if !dir.exists() {
                continue;
            }
            match crate::store::permissions::check_private(&dir) {
                Ok(None) => report.add(Level::Ok, format!("{} is private", dir.display())),
                Ok(Some(warning)) => report.add(Level::Warn, warning),
                Err(e) => report.add(
                    Level::Fail,
                    format!("the daemon would refuse to start: {e}", e = e.chain()),
                ),
            }
        }
    }
    match crate::store::daemon_lock::holder(&state.lock()) {
        Some(pid) => report.add(Level::Ok, format!("daemon running (pid {pid})")),
        None => report.add(
            Level::Warn,
            "no daemon is running: queued jobs wait (start: llm-judge daemon)",
        ),
    }
    if cfg!(target_os = "macos") {
        for warning in protected_cwds(state) {
            report.add(Level::Warn, warning);
        }
    }
}

/// Queued jobs whose cwd is where launchd agents are silently denied (macOS privacy).
fn protected_cwds(state: &StateDir) -> Vec<String> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let Ok(entries) = std::fs::read_dir(state.jobs()) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let job: serde_json::Value =
                serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
            let cwd = job.get("cwd")?.as_str()?.to_string();
            is_protected(Path::new(&cwd), home.as_deref()).then(|| {
                format!(
                    "job {}: cwd {cwd} is under a folder macOS hides from launchd agents; \
                     its runners may fail silently (grant Full Disk Access or use another cwd)",
                    e.file_name().to_string_lossy()
                )
            })
        })
        .collect()
}

/// True for paths under ~/Documents, ~/Desktop or ~/Downloads.
pub fn is_protected(path: &Path, home: Option<&Path>) -> bool {
    home.is_some_and(|home| {
        ["Documents", "Desktop", "Downloads"]
            .iter()
            .any(|d| path.starts_with(home.join(d)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_folders() {
        let home = Some(Path::new("/Users/a"));
        assert!(is_protected(Path::new("/Users/a/Documents/x"), home));
        assert!(is_protected(Path::new("/Users/a/Desktop"), home));
        assert!(!is_protected(Path::new("/Users/a/src/x"), home));
        assert!(!is_protected(Path::new("/Users/a/Documents"), None));
    }
}
