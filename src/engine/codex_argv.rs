//! A codex argv's placeholders filled with the judge's own files right before a start
//! (`core::codex::slim`): the instructions file of the job's table, written first when
//! missing or changed (codex exits before any request without it), and the trimmed
//! catalog the daemon last kept for this codex program, or nothing when there is none.

use std::borrow::Cow;
use std::io;
use std::path::Path;

use crate::core::codex::slim::{CATALOG_ITEM, Files, INSTRUCTIONS_ITEM, fill, has_placeholders};
use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::process::spawn::resolve_program;
use crate::store::codex_files::{catalog_for, ensure_instructions};
use crate::store::state_dir::StateDir;

/// `argv` ready to start for a job of `mode`: unchanged when it names none of the
/// judge's files. An error says which file could not be made.
pub fn prepared_argv<'a>(
    settings: &Settings,
    mode: Mode,
    argv: &'a [String],
) -> io::Result<Cow<'a, [String]>> {
    if !has_placeholders(argv) {
        return Ok(Cow::Borrowed(argv));
    }
    let state = StateDir::new(&settings.state_dir);
    let instructions = match argv.iter().any(|a| a == INSTRUCTIONS_ITEM) {
        true => Some(
            ensure_instructions(&state, mode, settings.config.fsync).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot write the judge's codex instructions: {e}"),
                )
            })?,
        ),
        false => None,
    };
    let catalog = match argv.iter().any(|a| a == CATALOG_ITEM) {
        true => argv
            .first()
            .and_then(|p| resolve_program(p))
            .and_then(|program| catalog_for(&state, &program)),
        false => None,
    };
    let files = Files {
        instructions: instructions.as_deref().map(utf8).transpose()?,
        catalog: catalog.as_deref().and_then(|p| p.to_str()),
    };
    Ok(Cow::Owned(fill(argv, &files).into_owned()))
}

/// A path codex can be given in a `-c` value (TOML text: UTF-8 only).
fn utf8(path: &Path) -> io::Result<&str> {
    path.to_str().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is not UTF-8, so codex cannot be told its instructions file; use a state folder whose path is UTF-8",
                path.display()
            ),
        )
    })
}
