//! The daemon's side of the codex model choice (docs/reference.md, "Runners"): the login's
//! catalog is read off the loop (a blocking, bounded `codex debug models`) at start, after
//! SIGHUP and hourly, never per job; the tables jobs use are the loaded ones with the
//! catalog applied, and each read's trimmed copy is kept for the codex runners that name it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::core::codex::model::{self as codex_model, Catalog, ModelInUse};
use crate::core::config::Settings;
use crate::engine::codex_catalog::{self, CatalogReadError};
use crate::engine::runner_folder::RunnerFolders;

use super::Daemon;

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
    pub ready: bool,
    /// The models in use, as `status` shows them.
    pub in_use: Vec<ModelInUse>,
    tx: mpsc::UnboundedSender<CatalogRead>,
    /// Where reads report back to the daemon loop.
    pub rx: mpsc::UnboundedReceiver<CatalogRead>,
    /// Where each read runs: a fresh folder, as a runner's.
    folders: Arc<RunnerFolders>,
}

impl CodexModels {
    /// No catalog yet; jobs wait for the first read.
    pub fn new(base: &Settings, folders: Arc<RunnerFolders>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        CodexModels {
            catalog: None,
            reading: false,
            ready: false,
            in_use: codex_model::models_in_use(base, base),
            tx,
            rx,
            folders,
        }
    }
}

impl Daemon {
    /// Starts a catalog read off the loop, unless one is under way.
    pub(super) fn read_codex_catalog(&mut self) {
        if self.codex.reading {
            return;
        }
        if codex_model::codex_program(&self.base).is_none() {
            self.codex.ready = true;
            return;
        }
        self.codex.reading = true;
        let base = self.base.clone();
        let tx = self.codex.tx.clone();
        let folders = self.codex.folders.clone();
        tokio::spawn(async move {
            let read = match crate::support::runtime::blocking(|| folders.fresh(&base)) {
                Ok(folder) => codex_catalog::lookup_and_keep(&base, folder.path()).await,
                Err(e) => Some(Err(CatalogReadError::Folder(e))),
            };
            let _ = tx.send(read);
        });
    }

    /// Takes a finished read: logs it and applies it to the tables.
    pub(super) fn codex_catalog_read(&mut self, read: CatalogRead) {
        self.codex.reading = false;
        let first = !self.codex.ready;
        self.codex.ready = true;
        self.codex.catalog = match read {
            Some(Ok(catalog)) => Some(catalog),
            Some(Err(e)) => {
                tracing::warn!(
                    "codex model catalog unreadable, keeping the tables' models: {e}",
                    e = crate::support::error::Chain(&e)
                );
                None
            }
            None => None,
        };
        self.apply_codex_catalog(first);
    }

    /// Rebuilds the tables jobs use from the loaded ones and the last catalog; logs the
    /// models when they change (and after the first read, `log`).
    pub(super) fn apply_codex_catalog(&mut self, log: bool) {
        let applied = match &self.codex.catalog {
            Some(catalog) => codex_model::apply_to_settings(&self.base, catalog).0,
            None => Settings::clone(&self.base),
        };
        let in_use = codex_model::models_in_use(&self.base, &applied);
        self.settings = Arc::new(applied);
        if in_use == self.codex.in_use && !log {
            return;
        }
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
        self.codex.in_use = in_use;
        // status shows the new model at once, not at the next periodic write.
        self.write_status();
    }
}
