//! The codex model choice (docs/reference.md, "Runners"), the I/O part: read the login's
//! catalog with a bounded `codex debug models`; the choice itself is `core::codex_model`.

use std::path::Path;
use std::time::Duration;

use thiserror::Error;

use crate::core::codex_model::{self, Catalog, CatalogError};
use crate::core::config::Settings;
use crate::process::error::ProcessError;
use crate::process::probe;
use crate::process::spawn::resolve_program;

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

/// Runs `<program> debug models` with a deadline and parses its stdout.
pub fn read_catalog(program: &Path, timeout: Duration) -> Result<Catalog, CatalogReadError> {
    let run = probe::run(program, &["debug", "models"], timeout)?;
    if !run.status.success() {
        return Err(CatalogReadError::Exit {
            program: program.to_path_buf(),
            status: run.status,
        });
    }
    Ok(codex_model::parse_catalog(&run.stdout)?)
}

/// The login's catalog, when some table has a codex runner with `-m` and codex is
/// installed; `None` when there is nothing to look up.
pub fn lookup(settings: &Settings) -> Option<Result<Catalog, CatalogReadError>> {
    let program = resolve_program(&codex_model::codex_program(settings)?)?;
    Some(read_catalog(&program, CATALOG_TIMEOUT))
}
