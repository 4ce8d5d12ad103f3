//! What a hook checks before it reads or writes anything of the state folder, since it
//! runs in whatever repository the user opens, with whatever environment that
//! repository's harness settings give it (docs/security.md, "Hook mode"): stdin read
//! within a size and a time; a state folder (and each folder of it the hook reads) the
//! user's own and private, as the daemon requires; and the child marker honoured only
//! with the state folder's key, which a project cannot know.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::core::config::{STATE_DIR_VAR, Settings};
use crate::process::spawn::{CHILD_TOKEN_VAR, CHILD_VAR};
use crate::store::config_file::Sources;
use crate::store::permissions::{PermissionError, check_private};
use crate::store::state_dir::{StateDir, transcript_hash};

/// A hook's stdin larger than this is not judged (a reply is judged up to 100,000
/// characters).
pub const MAX_INPUT_BYTES: u64 = 8 << 20;
/// A harness writes a hook's stdin at once; one that never closes it gets this long.
const STDIN_WAIT: Duration = Duration::from_secs(5);

/// A hook's stdin, or why there is none to judge.
pub enum Stdin {
    Read(Vec<u8>),
    TooLarge,
    NotClosed,
}

/// Reads stdin, at most `MAX_INPUT_BYTES` (plus one, to know it was more) and at most
/// for `STDIN_WAIT`.
pub fn read_stdin() -> Stdin {
    let (tx, rx) = std::sync::mpsc::channel();
    // Left blocked on a stdin that never closes: the process exits without it.
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = std::io::stdin()
            .lock()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes);
        let _ = tx.send(bytes);
    });
    match rx.recv_timeout(STDIN_WAIT) {
        Ok(bytes) if bytes.len() as u64 > MAX_INPUT_BYTES => Stdin::TooLarge,
        Ok(bytes) => Stdin::Read(bytes),
        Err(_) => Stdin::NotClosed,
    }
}

/// Why a state folder cannot be known: `HOME` unset, no `--state-dir` and no variable,
/// so the config's `~/...` would be taken relative to the session's folder.
pub fn unknown_state_folder(sources: &Sources, settings: &Settings) -> Option<String> {
    let named = sources.state_dir_flag.is_some() || sources.var(STATE_DIR_VAR).is_some();
    let from_home = settings.config.state_dir.starts_with('~');
    (!named && from_home && sources.var("HOME").is_none()).then(|| {
        "HOME is not set, so the state folder is unknown; nothing is judged (run `llm-judge \
         hooks install` again: it writes --state-dir into the hook)"
            .to_string()
    })
}

/// Refuses the state folder, or one of its folders a hook reads, when another user
/// owns it or can write it; a missing one is fine (made private).
pub fn check_state(state: &StateDir) -> Result<(), String> {
    [
        state.root.clone(),
        state.jobs(),
        state.verdicts(),
        state.hooks(),
    ]
    .iter()
    .map(PathBuf::as_path)
    .try_for_each(check_one)
}

/// The same for the two folders of session `key`: its verdicts and what the hook
/// keeps for it.
pub fn check_session(state: &StateDir, key: &str) -> Result<(), String> {
    [
        state.verdict_dir(key),
        state.hooks().join(transcript_hash(key)),
    ]
    .iter()
    .map(PathBuf::as_path)
    .try_for_each(check_one)
}

fn check_one(dir: &Path) -> Result<(), String> {
    match check_private(dir) {
        Ok(Some(warning)) => {
            tracing::warn!("{warning}");
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(PermissionError::Stat { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Whether this hook runs inside one of the judge's own runners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    /// No marker: an ordinary hook call.
    No,
    /// The marker with the state folder's key: a runner of this judge; skip.
    Judges,
    /// The marker without the key (a project's `env` can set it): judge anyway.
    Forged,
}

/// What the caller's child marker and token say.
pub fn child(sources: &Sources, state: &StateDir) -> Child {
    if sources.var(CHILD_VAR).is_none() {
        return Child::No;
    }
    match crate::store::child_key::is_childs(state, sources.var(CHILD_TOKEN_VAR)) {
        Ok(true) => Child::Judges,
        _ => Child::Forged,
    }
}
