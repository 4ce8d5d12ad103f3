//! The daemon's codex model choice (docs/reference.md, "Runners"), a component of its
//! own: the login's catalog is read off the loop (a bounded `codex debug models` run as
//! a runner is) at start, after SIGHUP and hourly, never per job; the tables jobs use
//! are the loaded ones with the last catalog applied, and each read's trimmed copy is
//! kept for the codex runners that name it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::core::codex::model::{self as codex_model, Catalog, ModelInUse};
use crate::core::config::Settings;
use crate::engine::codex_catalog::{self, CatalogReadError};
use crate::engine::runner_folder::RunnerFolders;
use crate::support::error::Chained;

/// How often the catalog is read again while the daemon runs (docs/reference.md, "Runners":
/// at most hourly).
pub const REFRESH_EVERY: Duration = Duration::from_secs(3600);

/// What one catalog read found: `None` when no table has a codex runner that needs the
/// catalog or codex is not installed.
pub type CatalogRead = Option<Result<Catalog, CatalogReadError>>;

/// The catalog lookups of one daemon.
pub struct CodexModels {
    /// The last catalog read, applied to every table until the next read.
    catalog: Option<Catalog>,
    /// A read is under way.
    reading: bool,
    /// The first read at start is over: jobs start only then, so none runs with a
    /// model the login lacks.
    ready: bool,
    /// The models in use, as `status` shows them.
    in_use: Vec<ModelInUse>,
    /// Where reads report back (the daemon loop's event source holds the receiver).
    tx: mpsc::UnboundedSender<CatalogRead>,
    /// Where each read runs: a fresh folder, as a runner's.
    folders: Arc<RunnerFolders>,
}

impl CodexModels {
    /// No catalog yet (jobs wait for the first read), and the receiver of its reads.
    pub fn new(
        base: &Settings,
        folders: Arc<RunnerFolders>,
    ) -> (Self, mpsc::UnboundedReceiver<CatalogRead>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let models = CodexModels {
            catalog: None,
            reading: false,
            ready: false,
            in_use: codex_model::models_in_use(base, base),
            tx,
            folders,
        };
        (models, rx)
    }

    /// True once the first read is over (or there was nothing to read).
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// The codex models in use, for `status`.
    pub fn in_use(&self) -> &[ModelInUse] {
        &self.in_use
    }

    /// Starts a catalog read off the loop for `base`'s tables, unless one is under way.
    pub fn start_read(&mut self, base: &Arc<Settings>) {
        if self.reading {
            return;
        }
        if codex_model::codex_program(base).is_none() {
            self.ready = true;
            return;
        }
        self.reading = true;
        let base = base.clone();
        let tx = self.tx.clone();
        let folders = self.folders.clone();
        tokio::spawn(async move {
            let read = match crate::support::runtime::blocking(|| folders.fresh(&base)) {
                Ok(folder) => codex_catalog::lookup_and_keep(&base, folder.path()).await,
                Err(e) => Some(Err(CatalogReadError::Folder(e))),
            };
            let _ = tx.send(read);
        });
    }

    /// Takes a finished read (a failure is logged and the tables keep their models);
    /// true when it was the first.
    pub fn finish_read(&mut self, read: CatalogRead) -> bool {
        self.reading = false;
        let first = !self.ready;
        self.ready = true;
        self.catalog = match read {
            Some(Ok(catalog)) => Some(catalog),
            Some(Err(e)) => {
                tracing::warn!(
                    "codex model catalog unreadable, keeping the tables' models: {e}",
                    e = e.chain()
                );
                None
            }
            None => None,
        };
        first
    }

    /// The tables jobs use: `base`'s with the last catalog applied; the models logged
    /// when they change (or when `log`), and whether they changed.
    pub fn apply(&mut self, base: &Settings, log: bool) -> (Settings, bool) {
        let applied = match &self.catalog {
            Some(catalog) => codex_model::apply_to_settings(base, catalog).0,
            None => Settings::clone(base),
        };
        let in_use = codex_model::models_in_use(base, &applied);
        let changed = in_use != self.in_use;
        if changed || log {
            for m in &in_use {
                match &m.replaced {
                    Some(from) => tracing::warn!(
                        table = %m.table, runner = %m.runner, model = %m.model, replaced = %from,
                        "codex model not in this login's catalog; using the catalog's first model"
                    ),
                    None => {
                        tracing::info!(table = %m.table, runner = %m.runner, model = %m.model, "codex model")
                    }
                }
            }
        }
        self.in_use = in_use;
        (applied, changed || log)
    }
}
