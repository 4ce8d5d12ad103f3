//! Where each harness keeps the settings file `hooks install` changes: the user's
//! (`~/.claude/settings.json` or `$CLAUDE_CONFIG_DIR`, `~/.codex/hooks.json` or
//! `$CODEX_HOME`, `~/.cursor/hooks.json`) or a project's. The CLIs' config folders are
//! looked up as `core::runner::login` names them.

use std::path::{Path, PathBuf};

use crate::core::hooks::input::Harness;
use crate::core::runner::login::cli_home;
use crate::store::config_file::Sources;

/// The settings file of `harness`: the project's in `project`, else the user's.
pub fn settings_path(
    sources: &Sources,
    harness: Harness,
    project: Option<&Path>,
) -> Option<PathBuf> {
    if let Some(dir) = project {
        let dir = std::path::absolute(dir).ok()?;
        return Some(match harness {
            Harness::Claude => dir.join(".claude/settings.json"),
            Harness::Codex => dir.join(".codex/hooks.json"),
            Harness::Cursor => dir.join(".cursor/hooks.json"),
        });
    }
    let home = PathBuf::from(sources.var("HOME")?);
    let var = |name: &str| sources.var(name).map(String::from);
    Some(match harness {
        Harness::Claude => cli_home("claude", &home, var)?.join("settings.json"),
        Harness::Codex => codex_home(sources)?.join("hooks.json"),
        Harness::Cursor => home.join(".cursor/hooks.json"),
    })
}

/// `$CODEX_HOME`, else `~/.codex`, as codex names it (not resolved: its trust keys
/// hold the path as written); `None` with neither variable set.
pub fn codex_home(sources: &Sources) -> Option<PathBuf> {
    let var = |name: &str| sources.var(name).map(String::from);
    match sources.var("HOME") {
        Some(home) => cli_home("codex", Path::new(home), var),
        None => var("CODEX_HOME").map(PathBuf::from),
    }
}
