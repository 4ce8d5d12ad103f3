//! codex runs a hook only once it is trusted: `hooks install codex --trust` records the
//! trust of exactly the handlers this install wrote, each hooks file in its own block of
//! codex's config.toml, printing every command it trusts; `uninstall` removes only the
//! block of the file it changed.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Refused, write_text};
use crate::core::hooks::codex_trust::{self, Trusted};
use crate::core::hooks::install::Entry;
use crate::store::config_file::Sources;

/// codex's config.toml.
fn config_path(sources: &Sources) -> Result<PathBuf, Refused> {
    crate::store::harness_files::codex_home(sources)
        .map(|home| home.join("config.toml"))
        .ok_or_else(|| {
            Refused::Usage(
                "neither HOME nor CODEX_HOME is set, so codex's config is unknown".into(),
            )
        })
}

/// The hooks file as this install left it, and the entries it wrote.
pub(super) struct Written<'a> {
    pub path: &'a Path,
    pub doc: &'a Value,
    pub entries: &'a [Entry],
}

/// Records the trust of what this install wrote (`--trust`), or says how.
pub(super) fn trust(
    sources: &Sources,
    written: &Written<'_>,
    project: Option<&Path>,
    trust: bool,
    dry_run: bool,
) -> Result<(), Refused> {
    if trust {
        record(&config_path(sources)?, written, dry_run)?;
    }
    // Named in what is said; unknown only without HOME and CODEX_HOME.
    let config = config_path(sources).map_or_else(
        |_| "codex's config.toml".into(),
        |c| c.display().to_string(),
    );
    if !trust {
        say!(
            "codex skips a hook until you trust it: open codex, type /hooks and trust llm-judge's, or \
             run `llm-judge hooks install codex --trust` to record their trust in {config} (add --dry-run \
             to see it first)"
        );
    }
    if let Some(dir) = project {
        say!(
            "codex loads a project's hooks only in a trusted project: codex asks when you open it in \
             {} (or set [projects.\"{}\"] trust_level = \"trusted\" in {config})",
            dir.display(),
            std::path::absolute(dir)
                .unwrap_or_else(|_| dir.to_path_buf())
                .display(),
        );
    }
    Ok(())
}

fn record(config: &Path, written: &Written<'_>, dry_run: bool) -> Result<(), Refused> {
    let hooks_file = written.path;
    let source = hooks_file.to_string_lossy();
    let trusted = codex_trust::codex_trust(&source, written.doc, written.entries);
    let old = crate::store::state_dir::read_small_text(config)
        .map_err(Refused::Failed)?
        .unwrap_or_default();
    let new = codex_trust::with_trust_block(&old, &source, &trusted);
    if let Err(e) = new.parse::<toml::Table>() {
        return Err(Refused::Usage(format!(
            "{} would not be valid TOML with llm-judge's trust entries ({}); it may already hold \
             an entry for these hooks: trust them in codex (/hooks) instead",
            config.display(),
            e.message().trim()
        )));
    }
    if new == old {
        say!("codex trust: already recorded in {}", config.display());
        return Ok(());
    }
    say!(
        "codex trust: {} to {} for {}, these commands and no others:",
        if dry_run { "would add" } else { "added" },
        config.display(),
        hooks_file.display()
    );
    print_trusted(&trusted);
    say!("{}", codex_trust::trust_block(&source, &trusted).trim_end());
    if dry_run {
        return crate::store::user_files::check(config, None, true)
            .map(|_| ())
            .map_err(super::refused);
    }
    write_text(config, &new, None, !old.is_empty(), 0o600)
}

fn print_trusted(trusted: &[Trusted]) {
    for t in trusted {
        say!("  {} {}: {}", t.event, t.key, t.command);
    }
}

/// Removes the trust block of `hooks_file` from codex's config.toml (other files'
/// blocks stay).
pub(super) fn untrust(sources: &Sources, hooks_file: &Path, dry_run: bool) -> Result<(), Refused> {
    // No codex config known: no trust of ours to remove.
    let Ok(config) = config_path(sources) else {
        return Ok(());
    };
    let Some(text) = crate::store::state_dir::read_small_text(&config).map_err(Refused::Failed)?
    else {
        return Ok(());
    };
    let without = codex_trust::without_trust_block(&text, &hooks_file.to_string_lossy());
    if without == text {
        return Ok(());
    }
    say!(
        "{} llm-judge's trust of {} from {}",
        if dry_run { "would remove" } else { "removed" },
        hooks_file.display(),
        config.display()
    );
    if dry_run {
        return Ok(());
    }
    write_text(&config, &without, None, true, 0o600)
}
