//! The codex model choice (docs/reference.md, "Runners"), the I/O part: read the login's
//! catalog with a bounded `codex debug models`, run as a runner is (under its own
//! supervisor, in a fresh folder, with the runner's environment), and keep its trimmed
//! copy for slim codex runners; the choice itself is `core::codex::model`, the trimming
//! `core::codex::slim`.

use std::path::Path;
use std::time::Duration;

use thiserror::Error;

use crate::core::codex::model::{self as codex_model, Catalog, CatalogError};
use crate::core::codex::slim::CATALOG_ITEM;
use crate::core::codex::slim::trimmed_catalog;
use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::core::runner::table::Runner;
use crate::engine::runner_folder::RunnerFolders;
use crate::process::error::ProcessError;
use crate::process::probe::{self, ProbeSpec};
use crate::process::spawn::{missing_login, resolve_program};
use crate::store::codex_files::{catalog_for, keep_catalog};
use crate::store::state_dir::StateDir;
use crate::support::error::Chained;

/// How long `codex debug models` may take (docs/reference.md, "Runners").
pub const CATALOG_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the login's catalog could not be read.
#[derive(Debug, Error)]
pub enum CatalogReadError {
    /// The probe could not start or ran past its deadline.
    #[error(transparent)]
    Probe(#[from] ProcessError),
    /// `codex debug models` failed.
    #[error("`{} debug models` exited with {code}", program.display())]
    Exit {
        program: std::path::PathBuf,
        code: i32,
    },
    /// Its output names no model.
    #[error(transparent)]
    Parse(#[from] CatalogError),
    /// The fresh folder it runs in could not be made.
    #[error("cannot make a folder to run `codex debug models` in")]
    Folder(#[source] std::io::Error),
}

/// Runs `<program> debug models` of `runner` in `cwd` with a deadline; its stdout and
/// the catalog in it.
pub async fn read_catalog(
    settings: &Settings,
    runner: &Runner,
    program: &Path,
    cwd: &Path,
) -> Result<(Catalog, String), CatalogReadError> {
    let withheld = settings.api_key_vars();
    let spec = ProbeSpec {
        program,
        args: &["debug", "models"],
        env: &runner.env,
        withheld: &withheld,
        cwd,
        timeout: CATALOG_TIMEOUT,
    };
    let run = probe::run(&spec).await?;
    if !run.success() {
        return Err(CatalogReadError::Exit {
            program: program.to_path_buf(),
            code: run.code,
        });
    }
    let catalog = codex_model::parse_catalog(&run.stdout)?;
    Ok((catalog, run.stdout))
}

/// The codex runner that needs the catalog and its program, when codex is installed
/// and logged in (a logged-out codex would only wait out the deadline).
fn codex(settings: &Settings) -> Option<(&Runner, std::path::PathBuf)> {
    let runner = codex_model::codex_runner(settings)?;
    let program = resolve_program(runner.argv.first()?)?;
    missing_login(runner, &settings.api_key_vars())
        .is_none()
        .then_some((runner, program))
}

/// The login's catalog, read in `cwd`, when some table has a codex runner that needs
/// it and codex is installed; `None` when there is nothing to look up.
pub async fn lookup(settings: &Settings, cwd: &Path) -> Option<Result<Catalog, CatalogReadError>> {
    let (runner, program) = codex(settings)?;
    Some(
        read_catalog(settings, runner, &program, cwd)
            .await
            .map(|(catalog, _)| catalog),
    )
}

/// `lookup`, and the read's trimmed copy kept in the state folder for the codex
/// runners that name it (`core::codex::slim`; a failure to keep it is logged, and
/// those runners then start without it).
pub async fn lookup_and_keep(
    settings: &Settings,
    cwd: &Path,
) -> Option<Result<Catalog, CatalogReadError>> {
    let (runner, program) = codex(settings)?;
    let (catalog, text) = match read_catalog(settings, runner, &program, cwd).await {
        Ok(read) => read,
        Err(e) => return Some(Err(e)),
    };
    let state = StateDir::new(&settings.state_dir);
    match trimmed_catalog(&text) {
        None => tracing::warn!(
            program = %program.display(),
            "`codex debug models` printed no JSON catalog; codex runners start without a trimmed one"
        ),
        Some(trimmed) => {
            let kept = crate::support::runtime::blocking(|| {
                keep_catalog(&state, &program, &trimmed, settings.config.fsync)
            });
            match kept {
                Ok(path) => {
                    tracing::debug!(path = %path.display(), "codex catalog trimmed and kept")
                }
                Err(e) => tracing::warn!("cannot keep the trimmed codex catalog: {e}"),
            }
        }
    }
    Some(Ok(catalog))
}

/// True when a runner of the `modes`' tables names the trimmed catalog but none was
/// kept yet for its codex program (no daemon has read it): `ask` and `run` then read
/// it once (`keep_if_missing`), and every later judge shares that copy.
pub fn catalog_missing(settings: &Settings, modes: &[Mode]) -> bool {
    let state = StateDir::new(&settings.state_dir);
    let mut runners = modes.iter().flat_map(|&mode| settings.table(mode));
    runners.any(|runner| {
        runner.argv.iter().any(|a| a == CATALOG_ITEM)
            && runner
                .argv
                .first()
                .and_then(|p| resolve_program(p))
                .is_some_and(|program| catalog_for(&state, &program).is_none())
    })
}

/// Reads the login's catalog and keeps its trimmed copy when `catalog_missing`, in a
/// fresh runner folder; a failure is logged and the runners start without it.
pub async fn keep_if_missing(settings: &Settings, modes: &[Mode]) {
    if !catalog_missing(settings, modes) {
        return;
    }
    let folders = RunnerFolders::default();
    let read = match crate::support::runtime::blocking(|| folders.fresh(settings)) {
        Ok(folder) => lookup_and_keep(settings, folder.path()).await,
        Err(e) => Some(Err(CatalogReadError::Folder(e))),
    };
    if let Some(Err(e)) = read {
        tracing::warn!(
            "codex model catalog unreadable; codex starts without its trimmed copy: {e}",
            e = e.chain()
        );
    }
}
