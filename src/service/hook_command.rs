//! What `hooks install` writes as each hook's command: this binary, with the config
//! folder, config file and state folder resolved now, from the user's own shell, so a
//! project's environment cannot move them (docs/security.md, "Hook mode").

use std::path::PathBuf;

use crate::core::config::{CONFIG_VAR, Settings};
use crate::core::hooks::install::HookCommand;
use crate::store::config_file::{Sources, config_folder};
use crate::support::error::Chained;

/// The hook command's program and flags, as `settings` and `sources` resolve them.
pub fn hook_command(settings: &Settings, sources: &Sources) -> Result<HookCommand, String> {
    let program = crate::service::host::this_binary().map_err(|e| e.chain().to_string())?;
    let absolute = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
    let text = |p: PathBuf| absolute(p).to_string_lossy().into_owned();
    let config = sources
        .config_flag
        .clone()
        .or_else(|| sources.var(CONFIG_VAR).map(PathBuf::from));
    Ok(HookCommand {
        program: program.to_string_lossy().into_owned(),
        config_dir: config_folder(sources).map(text),
        config: config.map(text),
        state_dir: Some(text(settings.state_dir.clone())),
    })
}
