//! Recovery of what an interrupted judge left: per claim (`recover`, used by the job
//! lifecycle when it takes a claim over) and at start-up (`sweep`): stop runners a
//! killed judge left, finish or drop claims of jobs that are gone, remove orphan temp
//! files, prune undeliverable verdicts.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::core::job::life::{ClaimRecord, FileIdentity, Previous, Stage, TakeOver, take_over};
use crate::engine::runner_folder::{FOLDER_PREFIX, STAGING_PREFIX, is_abandoned};
use crate::process::os::{kill_recorded_group, kill_tagged, kill_tagged_prefix};
use crate::store::claim::{self, Acquired};
use crate::store::state_dir::{self, StateDir, transcript_hash};
use crate::support::error::Chained;

/// Acts on what the previous holder of a claim left (`core::job::life::take_over`):
/// stops its runners, finishes its publish, logs an interruption. Returns the take-over.
pub fn recover(
    previous: &Previous,
    identity: FileIdentity,
    path: &Path,
    fsync: bool,
) -> io::Result<TakeOver> {
    if let Previous::Record(record) = previous {
        stop_leftovers(record);
    }
    let take = take_over(previous, identity);
    match take {
        TakeOver::Torn => {
            tracing::warn!(file = %path.display(), "claim record was cut short by a crash; counting one interruption");
        }
        TakeOver::OtherJob => finish_previous_publish(previous, fsync)?,
        TakeOver::AlreadyPublished => {
            finish_previous_publish(previous, fsync)?;
            tracing::info!(file = %path.display(), "recovered: verdict was already published; removing the job");
        }
        TakeOver::Interrupted { interruptions } => {
            tracing::warn!(file = %path.display(), interruptions, "recovered: judge was interrupted while running this job");
        }
        TakeOver::Fresh | TakeOver::Requeued { .. } => {}
    }
    Ok(take)
}

/// Stops runner processes a crashed holder left behind.
pub fn stop_leftovers(record: &ClaimRecord) {
    let mut stopped = 0;
    if !record.tag.is_empty() {
        stopped += kill_tagged(&record.tag);
    }
    if let Some(r) = record.stage.runner()
        && kill_recorded_group(r.pgid, r.start_time)
    {
        stopped += 1;
    }
    if stopped > 0 {
        tracing::warn!(tag = %record.tag, stopped, "recovered: stopped runner processes left by an interrupted judge");
    }
}

/// Completes a publish an earlier holder started: a temp file still there was not
/// yet renamed; a missing one was (and may already have been drained).
pub fn finish_previous_publish(previous: &Previous, fsync: bool) -> io::Result<()> {
    let Previous::Record(ClaimRecord {
        stage:
            Stage::Publishing {
                verdict_temp,
                verdict_path,
                ..
            },
        ..
    }) = previous
    else {
        return Ok(());
    };
    if verdict_temp.exists() {
        state_dir::commit(verdict_temp, verdict_path, fsync)?;
        tracing::info!(verdict = %verdict_path.display(), "recovered: finished publishing a verdict");
    } else if fsync && let Some(dir) = verdict_path.parent().filter(|d| d.exists()) {
        // Renamed, and perhaps its folder not synced (it failed): before the job goes.
        state_dir::sync_dir(dir)?;
    }
    Ok(())
}

/// What a sweep did.
#[derive(Debug, Default, PartialEq)]
pub struct Swept {
    pub claims_dropped: usize,
    pub temps_removed: usize,
    pub pruned: usize,
    pub runner_folders_removed: usize,
    /// Processes of pre-started runners a crashed daemon left.
    pub prestarted_stopped: usize,
}

/// A staging folder (made, not yet locked and renamed) older than this is a crashed
/// judge's: making one takes microseconds.
const STALE_STAGING_FOLDER: Duration = Duration::from_secs(60);

/// Runs every start-up recovery step; errors are logged, never fatal.
pub fn sweep(
    state: &StateDir,
    runtime_dir: Option<&Path>,
    fsync: bool,
    undeliverable_days: f64,
) -> Swept {
    let (claims_dropped, referenced) = sweep_claims(state, fsync);
    let temps_removed = remove_orphan_temps(&state.verdicts(), &referenced);
    let pruned = prune_undeliverable(state, undeliverable_days);
    // Before the folders: a copy still running would keep its folder busy.
    let prestarted_stopped = stop_prestarted_leftovers(state);
    // Both places: the runtime folder may have come or gone since the last start.
    let runner_folders_removed = remove_abandoned_runner_folders(&state.runner_tmp(None))
        + runtime_dir.map_or(0, |r| {
            remove_abandoned_runner_folders(&state.runner_tmp(Some(r)))
        });
    let swept = Swept {
        claims_dropped,
        temps_removed,
        pruned,
        runner_folders_removed,
        prestarted_stopped,
    };
    if swept != Swept::default() {
        tracing::info!(
            claims_dropped = swept.claims_dropped,
            temps_removed = swept.temps_removed,
            pruned = swept.pruned,
            runner_folders_removed = swept.runner_folders_removed,
            prestarted_stopped = swept.prestarted_stopped,
            "recovery sweep"
        );
    }
    swept
}

/// Stops every process of ours tagged as one of this folder's pre-started copies (a
/// crashed daemon's, taken by a job or not, with what they started).
fn stop_prestarted_leftovers(state: &StateDir) -> usize {
    match crate::store::tag_key::load_or_create(state) {
        Ok(key) => {
            let prefix = crate::engine::prestart::tag_prefix(&key);
            crate::support::runtime::blocking(|| kill_tagged_prefix(&prefix))
        }
        Err(e) => {
            tracing::error!(
                "recovery: pre-started runners left by a crash are not searched: {e}",
                e = e.chain()
            );
            0
        }
    }
}

/// Removes the runner folders in `dir` no live judge owns, with their content: each
/// judge process (the daemon, a `run` or `ask` beside it) holds a lock on its home
/// there while it lives (`runner_folder`; an older judge, on each runner folder), so one
/// that can be locked was left by a judge that was killed. A staging folder is removed
/// once it is a minute old.
fn remove_abandoned_runner_folders(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let now = SystemTime::now();
    let old = |e: &std::fs::DirEntry| {
        e.metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > STALE_STAGING_FOLDER)
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(FOLDER_PREFIX) || (name.starts_with(STAGING_PREFIX) && old(e))
        })
        .filter(|e| {
            // Removed while its lock is held here, so no judge can take it meanwhile.
            is_abandoned(&e.path()).is_some_and(|_lock| std::fs::remove_dir_all(e.path()).is_ok())
        })
        .count()
}

/// Stops leftovers of every free claim; drops claims whose job is gone. Returns the
/// temp files that claims of still-queued jobs will publish.
fn sweep_claims(state: &StateDir, fsync: bool) -> (usize, HashSet<PathBuf>) {
    let mut dropped = 0;
    let mut referenced = HashSet::new();
    let Ok(entries) = std::fs::read_dir(state.claims()) else {
        return (0, referenced);
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let (claim, previous) = match claim::acquire(&state.claims(), &name, fsync) {
            Ok(Acquired::Claimed { claim, previous }) => (claim, previous),
            Ok(Acquired::Busy { .. }) => continue,
            Err(e) => {
                tracing::error!("recovery: {e}", e = e.chain());
                continue;
            }
        };
        if let Previous::Record(record) = &previous {
            if record.stage != Stage::Queued {
                stop_leftovers(record);
            }
            if let Stage::Publishing { verdict_temp, .. } = &record.stage {
                referenced.insert(verdict_temp.clone());
            }
        }
        if state.jobs().join(&name).symlink_metadata().is_err() {
            if let Err(e) = finish_previous_publish(&previous, fsync) {
                tracing::error!("recovery: {e}", e = e.chain());
            } else if let Err(e) = claim.release() {
                tracing::error!("recovery: {e}", e = e.chain());
            }
            dropped += 1;
        }
    }
    (dropped, referenced)
}

/// Removes hidden `.tmp` files in verdict folders that no claim will publish.
fn remove_orphan_temps(verdicts: &Path, referenced: &HashSet<PathBuf>) -> usize {
    let mut removed = 0;
    let Ok(folders) = std::fs::read_dir(verdicts) else {
        return 0;
    };
    for folder in folders.flatten() {
        let Ok(files) = std::fs::read_dir(folder.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name();
            let name = name.to_string_lossy();
            let path = file.path();
            if name.starts_with('.')
                && name.ends_with(".tmp")
                && !referenced.contains(&path)
                && !may_still_be_written(&name, &path)
                && std::fs::remove_file(&path).is_ok()
            {
                removed += 1;
            }
        }
    }
    removed
}

/// Our temp names end `.<pid>.<n>.tmp`: kept while that writer (a concurrent `run`)
/// lives. A name with no pid (catstack's Python `.XXXXXXXX.tmp`) is kept while young.
fn may_still_be_written(temp_name: &str, path: &Path) -> bool {
    let mut parts = temp_name.rsplit('.');
    let (_tmp, _n, pid) = (parts.next(), parts.next(), parts.next());
    match pid.and_then(|p| p.parse::<u32>().ok()) {
        Some(p) => p != std::process::id() && crate::process::os::is_alive(p),
        None => recently_written(path),
    }
}

/// Temp files with no pid in their name younger than this are left alone: their writer
/// (catstack's Python `.XXXXXXXX.tmp`) may still be writing.
pub const TEMP_GRACE: Duration = Duration::from_secs(300);

/// Modified within `TEMP_GRACE` (or its age is unknown, which is kept too).
fn recently_written(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .map_or(true, |t| t.elapsed().map_or(true, |age| age < TEMP_GRACE))
}

/// Removes verdicts nobody can drain (no transcript) once older than `days`.
pub fn prune_undeliverable(state: &StateDir, days: f64) -> usize {
    let Some(cutoff) = SystemTime::now().checked_sub(Duration::from_secs_f64(days * 86_400.0))
    else {
        return 0;
    };
    let Ok(files) = std::fs::read_dir(state.verdicts().join(transcript_hash(""))) else {
        return 0;
    };
    files
        .flatten()
        .filter(|f| {
            f.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < cutoff)
        })
        .filter(|f| std::fs::remove_file(f.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abandoned_runner_folders_go_and_owned_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let left = dir.path().join("llm-judge-left");
        let owned = dir.path().join("llm-judge-owned");
        let young = dir.path().join(".llm-judge-new-young");
        let staged = dir.path().join(".llm-judge-new-old");
        for d in [&left, &owned, &young, &staged] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("file"), b"x").unwrap();
        }
        let long_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::open(&staged)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        let lock = crate::store::file_lock::open_folder_lock(&owned).unwrap();
        assert!(crate::store::file_lock::try_lock_exclusive(&lock));
        assert_eq!(remove_abandoned_runner_folders(dir.path()), 2);
        assert!(!left.exists() && !staged.exists());
        assert!(owned.exists() && young.exists());
    }
}
