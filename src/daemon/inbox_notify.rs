//! The inbox watch beyond Linux (macOS: FSEvents), through the notify crate.

use std::path::{Path, PathBuf};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use crate::daemon::inbox::{Sink, WatchError};

/// A running watch; dropping it stops it.
pub struct Watch {
    _watcher: RecommendedWatcher,
}

/// Watches `jobs_dir` for `sink`.
pub fn start(jobs_dir: &Path, sink: Sink) -> Result<Watch, WatchError> {
    let mut watcher = notify::recommended_watcher(handler(jobs_dir.to_path_buf(), sink))
        .map_err(WatchError::Start)?;
    watcher
        .watch(jobs_dir, RecursiveMode::NonRecursive)
        .map_err(|source| WatchError::Notify {
            path: jobs_dir.to_path_buf(),
            source,
        })?;
    Ok(Watch { _watcher: watcher })
}

fn handler(jobs_dir: PathBuf, sink: Sink) -> impl FnMut(notify::Result<notify::Event>) + Send {
    move |result| {
        let event = match result {
            Ok(event) if !event.need_rescan() => event,
            _ => return sink.rescan(),
        };
        if event.paths.iter().any(|p| p == &jobs_dir) {
            if matches!(event.kind, EventKind::Remove(_) | EventKind::Modify(_)) {
                sink.lost();
            }
            return;
        }
        if !matches!(
            event.kind,
            EventKind::Create(_) | EventKind::Modify(notify::event::ModifyKind::Name(_))
        ) {
            return;
        }
        for path in &event.paths {
            if let Some(name) = path.file_name()
                && path.parent() == Some(jobs_dir.as_path())
            {
                sink.arrived(name);
            }
        }
    }
}
