//! SPEC 4 "Codex model", the I/O part: read the login's catalog with a bounded
//! `codex debug models`; the choice itself is `core::codex_model`.

use std::path::Path;
use std::time::Duration;

use crate::core::codex_model::{self, Catalog};
use crate::core::config::Settings;
use crate::process::probe;
use crate::process::spawn::resolve_program;

/// How long `codex debug models` may take (SPEC 4).
pub const CATALOG_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs `<program> debug models` with a deadline and parses its stdout.
pub fn read_catalog(program: &Path, timeout: Duration) -> Result<Catalog, String> {
    let run = probe::run(program, &["debug", "models"], timeout).map_err(|e| e.to_string())?;
    if !run.status.success() {
        return Err(format!(
            "`{} debug models` exited with {}",
            program.display(),
            run.status
        ));
    }
    codex_model::parse_catalog(&run.stdout)
}

/// The login's catalog, when some table has a codex runner with `-m` and codex is
/// installed; `None` when there is nothing to look up.
pub fn lookup(settings: &Settings) -> Option<Result<Catalog, String>> {
    let program = resolve_program(&codex_model::codex_program(settings)?)?;
    Some(read_catalog(&program, CATALOG_TIMEOUT))
}
