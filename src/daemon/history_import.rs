//! The daemon's history importer: a thread of its own (the database never runs on the
//! event loop or a worker) that imports the spool every few seconds and prunes it once
//! an hour, and once more when the daemon stops. A history it cannot open or import is
//! logged, and the records wait in the spool; judging goes on.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::core::config::Config;
use crate::store::history::History;
use crate::store::state_dir::StateDir;

/// How often the spool is imported.
const IMPORT_EVERY: Duration = Duration::from_secs(5);

enum Message {
    /// The config was reloaded.
    Config(Box<Config>),
}

/// The running importer; dropping it imports once more and ends the thread.
pub struct HistoryImporter {
    send: Option<mpsc::Sender<Message>>,
    thread: Option<JoinHandle<()>>,
}

impl HistoryImporter {
    /// Starts importing `state`'s spool (`None` when the thread cannot start: logged).
    pub fn start(state: &StateDir, config: &Config) -> Option<HistoryImporter> {
        let (send, receive) = mpsc::channel();
        let (state, config) = (state.clone(), config.clone());
        let thread = std::thread::Builder::new()
            .name("history".into())
            .spawn(move || run(&state, config, &receive))
            .inspect_err(|e| tracing::warn!("cannot start the history importer: {e}"))
            .ok()?;
        Some(HistoryImporter {
            send: Some(send),
            thread: Some(thread),
        })
    }

    /// The reloaded config's history keys (and `fsync`) from now on.
    pub fn reconfigure(&self, config: &Config) {
        if let Some(send) = &self.send {
            let _ = send.send(Message::Config(Box::new(config.clone())));
        }
    }
}

impl Drop for HistoryImporter {
    fn drop(&mut self) {
        // A closed channel ends the loop after its last import.
        drop(self.send.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(state: &StateDir, mut config: Config, receive: &mpsc::Receiver<Message>) {
    let mut history: Option<History> = None;
    let mut failing = false;
    loop {
        let last = match receive.recv_timeout(IMPORT_EVERY) {
            Ok(Message::Config(new)) => {
                config = *new;
                // Opened again at the next import, with the new config's `fsync`.
                history = None;
                continue;
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        };
        let imported = import(state, &config, &mut history);
        // Said once until it works again: a full disk must not fill judge.log too.
        match (imported, failing) {
            (Err(e), false) => {
                tracing::warn!(
                    "{e}; the records wait in the spool and are imported when it works again"
                );
                failing = true;
                history = None;
            }
            (Err(_), true) => history = None,
            (Ok(()), true) => {
                tracing::info!("history imports work again");
                failing = false;
            }
            (Ok(()), false) => {}
        }
        if last {
            return;
        }
    }
}

fn import(
    state: &StateDir,
    config: &Config,
    history: &mut Option<History>,
) -> Result<(), crate::store::history::HistoryError> {
    if !config.history.enabled && !state.history().exists() {
        return Ok(());
    }
    let open = match history {
        Some(open) => open,
        None => history.insert(History::open(state, config.fsync)?),
    };
    open.import()?;
    open.prune(&config.history, false)
}
