//! The codex model choice (docs/reference.md, "Runners"), the I/O part: read the login's
//! catalog with a bounded `codex debug models` (and keep its trimmed copy for slim codex
//! runners); the choice itself is `core::codex_model`, the trimming `core::codex_slim`.

use std::path::Path;
use std::time::Duration;

use thiserror::Error;

use crate::core::codex_model::{self, Catalog, CatalogError};
use crate::core::codex_slim::trimmed_catalog;
use crate::core::config::Settings;
use crate::process::error::ProcessError;
use crate::process::probe;
use crate::process::spawn::resolve_program;
use crate::store::codex_files::keep_catalog;
use crate::store::state_dir::StateDir;

/// How long `codex debug models` may take (docs/reference.md, "Runners").
pub const CATALOG_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the login's catalog could not be read.
#[derive(Debug, Error)]
pub enum CatalogReadError {
    /// The probe could not start or ran past its deadline.
    #[error(transparent)]
    Probe(#[from] ProcessError),
    /// `codex debug models` failed.
    #[error("`{} debug models` exited with {status}", program.display())]
    Exit {
        program: std::path::PathBuf,
        status: std::process::ExitStatus,
    },
    /// Its output names no model.
    #[error(transparent)]
    Parse(#[from] CatalogError),
}

/// Runs `<program> debug models` with a deadline; its stdout and the catalog in it.
pub fn read_catalog(
    program: &Path,
    timeout: Duration,
) -> Result<(Catalog, String), CatalogReadError> {
    let run = probe::run(program, &["debug", "models"], timeout)?;
    if !run.status.success() {
        return Err(CatalogReadError::Exit {
            program: program.to_path_buf(),
            status: run.status,
        });
    }
    let catalog = codex_model::parse_catalog(&run.stdout)?;
    Ok((catalog, run.stdout))
}

/// The login's catalog, when some table has a codex runner that needs it and codex is
/// installed; `None` when there is nothing to look up.
pub fn lookup(settings: &Settings) -> Option<Result<Catalog, CatalogReadError>> {
    let program = resolve_program(&codex_model::codex_program(settings)?)?;
    Some(read_catalog(&program, CATALOG_TIMEOUT).map(|(catalog, _)| catalog))
}

/// `lookup`, and the read's trimmed copy kept in the state folder for the codex
/// runners that name it (`core::codex_slim`; a failure to keep it is logged, and
/// those runners then start without it).
pub fn lookup_and_keep(settings: &Settings) -> Option<Result<Catalog, CatalogReadError>> {
    let program = resolve_program(&codex_model::codex_program(settings)?)?;
    let (catalog, text) = match read_catalog(&program, CATALOG_TIMEOUT) {
        Ok(read) => read,
        Err(e) => return Some(Err(e)),
    };
    let state = StateDir::new(&settings.state_dir);
    match trimmed_catalog(&text) {
        None => tracing::warn!(
            program = %program.display(),
            "`codex debug models` printed no JSON catalog; codex runners start without a trimmed one"
        ),
        Some(trimmed) => match keep_catalog(&state, &program, &trimmed, settings.config.fsync) {
            Ok(path) => tracing::debug!(path = %path.display(), "codex catalog trimmed and kept"),
            Err(e) => tracing::warn!("cannot keep the trimmed codex catalog: {e}"),
        },
    }
    Some(Ok(catalog))
}
