//! `llm-judge hooks install|uninstall claude|codex|cursor` and `hooks trust` (docs/hooks.md):
//! the judge's hook entries merged into (or taken out of) a harness's settings file,
//! keeping every other key and hook, with a backup of the file as it was; codex's trust
//! of those hooks written on request; a project's rules trusted as they are now.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::Value;

mod codex;
mod trust;

use crate::commands::HarnessArg;
use crate::core::config::Settings;
use crate::core::hooks::input::Harness;
use crate::core::hooks::install::{self, Change};
use crate::core::hooks::rules::parse_rules;
use crate::store::config_file::Sources;
use crate::store::harness_files::settings_path;
use crate::store::rules_files;
use crate::store::state_dir::StateDir;
use crate::store::user_files;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE};

/// The example rules, all off, written as the user's rules file when there is none.
pub const EXAMPLE_RULES: &str = include_str!("../../../rules/examples.toml");

/// What `llm-judge hooks` does.
#[derive(Subcommand, Debug)]
pub enum HooksAction {
    /// Add llm-judge's hooks to a harness's settings (keeps everything else; a backup is kept).
    #[command(
        after_help = "Examples:\n  llm-judge hooks install claude\n  llm-judge hooks install codex --trust --dry-run\n  llm-judge hooks install cursor --project .\n\nFiles: claude ~/.claude/settings.json ($CLAUDE_CONFIG_DIR), codex ~/.codex/hooks.json\n($CODEX_HOME), Cursor ~/.cursor/hooks.json; with --project DIR, DIR/.claude/settings.json,\nDIR/.codex/hooks.json, DIR/.cursor/hooks.json. Writes the example rules (all off) to\n$XDG_CONFIG_HOME/llm-judge/rules.toml when there is none."
    )]
    Install {
        #[command(flatten)]
        target: Target,
        /// codex only: record the hooks' trust in codex's config.toml, as codex's /hooks does.
        #[arg(long)]
        trust: bool,
    },
    /// Remove llm-judge's hooks (and only those) from a harness's settings.
    #[command(after_help = "Example:\n  llm-judge hooks uninstall claude")]
    Uninstall {
        #[command(flatten)]
        target: Target,
    },
    /// Trust a project's .llm-judge/rules.toml as it is now (any later change turns it off).
    #[command(after_help = "Example:\n  llm-judge hooks trust ~/src/my-project")]
    Trust {
        /// The project folder.
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
}

/// Which settings file `install` and `uninstall` change, and whether only to say how.
#[derive(Args, Debug)]
pub struct Target {
    /// The harness.
    #[arg(value_enum)]
    harness: HarnessArg,
    /// The project's own settings in DIR instead of the user's.
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Print what would change; write nothing.
    #[arg(long)]
    dry_run: bool,
}

impl Target {
    fn parts(&self) -> (Harness, Option<&Path>, bool) {
        (self.harness.into(), self.project.as_deref(), self.dry_run)
    }
}

/// Runs a `hooks` action; the exit code.
pub fn main(settings: &Settings, sources: &Sources, action: HooksAction) -> i32 {
    let result = match action {
        HooksAction::Install { target, trust } => install(settings, sources, &target, trust),
        HooksAction::Uninstall { target } => uninstall(sources, &target),
        HooksAction::Trust { dir } => trust::project(sources, &dir),
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(Refused::Usage(why)) => {
            say_err!("llm-judge hooks: {why}");
            EXIT_USAGE
        }
        Err(Refused::Failed(why)) => {
            say_err!("llm-judge hooks: {why}");
            EXIT_FAILURE
        }
    }
}

/// Why a `hooks` action did nothing.
pub(super) enum Refused {
    /// The user can fix it by giving something else (exit 2).
    Usage(String),
    /// A file could not be read or written (exit 1).
    Failed(String),
}

fn install(
    settings: &Settings,
    sources: &Sources,
    target: &Target,
    trust: bool,
) -> Result<(), Refused> {
    let (harness, project, dry_run) = target.parts();
    if trust && harness != Harness::Codex {
        return Err(Refused::Usage(
            "--trust is for codex only (claude and Cursor run hooks without it)".into(),
        ));
    }
    let command =
        crate::service::hook_command::hook_command(settings, sources).map_err(Refused::Failed)?;
    // Not a program uvx or npx clears (docs/install.md, "Where the binary lives").
    crate::service::place::check(Path::new(&command.program), "the hooks")
        .map_err(Refused::Usage)?;
    let program = command.program.clone();
    let path = settings_path(sources, harness, project)
        .ok_or_else(|| Refused::Usage("HOME is not set; set it or give --project DIR".into()))?;
    let within = project.and_then(|p| std::path::absolute(p).ok());
    let (mut doc, existed) = read_json(&path)?;
    let entries = install::entries(harness, &command);
    let changes = install::add(harness, &mut doc, &entries)
        .map_err(|e| Refused::Usage(format!("{}: {e}", path.display())))?;
    let verb = if dry_run { "would add" } else { "added" };
    report(harness, &path, &changes, verb);
    say!("the hooks run {program} with:");
    for (flag, value) in command.flags() {
        say!("  {flag} {value}");
    }
    if !changes.is_empty() {
        write_json(&path, &doc, existed, within.as_deref(), dry_run)?;
    }
    if program.contains("/target/debug/") || program.contains("/target/release/") {
        say!(
            "note: the hooks run the build at {program}; a rebuild or `cargo clean` changes it under \
             them. Install the binary (cargo install --locked --path .) and install the hooks from there"
        );
    }
    if harness == Harness::Codex {
        let written = codex::Written {
            path: &path,
            doc: &doc,
            entries: &entries,
        };
        codex::trust(sources, &written, project, trust, dry_run)?;
    }
    if harness == Harness::Cursor {
        say!(
            "Cursor reads {} when it is saved; a project's hooks run in trusted workspaces only",
            path.display()
        );
    }
    starter_rules(sources, dry_run)?;
    let state = StateDir::new(&settings.state_dir);
    if !crate::store::protocol::daemon_runs(&state) {
        say!(
            "next: start the daemon (`llm-judge service install`, or `llm-judge daemon`): without it \
             block rules are judged inside the hook, and notices wait until it runs"
        );
    }
    Ok(())
}

fn uninstall(sources: &Sources, target: &Target) -> Result<(), Refused> {
    let (harness, project, dry_run) = target.parts();
    let path = settings_path(sources, harness, project)
        .ok_or_else(|| Refused::Usage("HOME is not set; set it or give --project DIR".into()))?;
    let within = project.and_then(|p| std::path::absolute(p).ok());
    let (mut doc, existed) = read_json(&path)?;
    let changes = install::remove(harness, &mut doc);
    report(
        harness,
        &path,
        &changes,
        if dry_run { "would remove" } else { "removed" },
    );
    if !changes.is_empty() {
        write_json(&path, &doc, existed, within.as_deref(), dry_run)?;
    }
    if harness == Harness::Codex {
        codex::untrust(sources, &path, dry_run)?;
    }
    Ok(())
}

/// Says what changed in `path`.
fn report(harness: Harness, path: &Path, changes: &[Change], verb: &str) {
    if changes.is_empty() {
        match verb {
            "added" | "would add" => say!(
                "{} hooks: already installed in {}",
                harness.name(),
                path.display()
            ),
            _ => say!(
                "{} hooks: none of llm-judge's in {}",
                harness.name(),
                path.display()
            ),
        }
        return;
    }
    let names: Vec<String> = changes
        .iter()
        .map(|c| match c {
            Change::Added(e) | Change::Removed(e) => e.clone(),
            Change::Updated(e) => format!("{e} (updated)"),
        })
        .collect();
    say!(
        "{} hooks: {verb} {} in {}",
        harness.name(),
        names.join(", "),
        path.display()
    );
}

/// The file's JSON (an empty object when there is no file) and whether it existed; a
/// file that is not JSON is never overwritten.
fn read_json(path: &Path) -> Result<(Value, bool), Refused> {
    match crate::store::state_dir::read_small_text(path).map_err(Refused::Failed)? {
        None => Ok((serde_json::json!({}), false)),
        Some(text) if text.trim().is_empty() => Ok((serde_json::json!({}), true)),
        Some(text) => serde_json::from_str(&text).map(|v| (v, true)).map_err(|e| {
            Refused::Usage(format!(
                "{} is not JSON ({e}); fix it, then run this again (nothing was changed)",
                path.display()
            ))
        }),
    }
}

/// Writes `doc` to `path` (pretty, by rename), after a backup of the file as it was;
/// a dry run prints it, and says what would be refused.
fn write_json(
    path: &Path,
    doc: &Value,
    existed: bool,
    within: Option<&Path>,
    dry_run: bool,
) -> Result<(), Refused> {
    let mut text = serde_json::to_string_pretty(doc).map_err(|e| Refused::Failed(e.to_string()))?;
    text.push('\n');
    if dry_run {
        user_files::check(path, within, existed).map_err(refused)?;
        say!("{} would be:\n{text}", path.display());
        return Ok(());
    }
    write_text(path, &text, within, existed, 0o644)
}

/// Writes `text` to `path` (`store::user_files`: never through a link, keeping its
/// mode), backing up the file as it was when `backup`.
pub(super) fn write_text(
    path: &Path,
    text: &str,
    within: Option<&Path>,
    backup: bool,
    new_mode: u32,
) -> Result<(), Refused> {
    match user_files::write(path, text, within, backup, new_mode).map_err(refused)? {
        Some(user_files::Backup::Made(copy)) => say!("backup: {}", copy.display()),
        Some(user_files::Backup::Kept(copy)) => say!(
            "backup: {} (kept: the file as it was before llm-judge first changed it)",
            copy.display()
        ),
        None => {}
    }
    Ok(())
}

pub(super) fn refused(e: user_files::WriteError) -> Refused {
    match e {
        user_files::WriteError::Io { .. } => Refused::Failed(e.to_string()),
        _ => Refused::Usage(e.to_string()),
    }
}

/// Writes the example rules (all off) as the user's rules file when there is none.
fn starter_rules(sources: &Sources, dry_run: bool) -> Result<(), Refused> {
    let Some(path) = rules_files::user_rules_path(sources) else {
        return Ok(());
    };
    if path.exists() {
        let count = crate::store::state_dir::read_small_text(&path)
            .ok()
            .flatten()
            .and_then(|t| parse_rules(&t).ok())
            .map(|r| (r.len(), r.iter().filter(|r| r.enabled).count()));
        match count {
            Some((all, on)) => say!("rules: {} ({all} rules, {on} enabled)", path.display()),
            None => say!(
                "rules: {} does not load; `llm-judge doctor` says why",
                path.display()
            ),
        }
        return Ok(());
    }
    if dry_run {
        say!(
            "would write the example rules (all off) to {}",
            path.display()
        );
        return Ok(());
    }
    write_text(&path, EXAMPLE_RULES, None, false, 0o600)?;
    say!(
        "wrote the example rules, all off, to {}: set enabled = true on those you want",
        path.display()
    );
    Ok(())
}
